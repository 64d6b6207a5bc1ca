// cuda_post.h: the host emulation of CUDA, after the kfuse prelude: the
// fibers' synchronisation, the warp and warpgroup collectives (shuffles,
// ldmatrix, mma.sync, wgmma), cp.async, mbarriers and TMA copies.
extern "C" {
alignas(1024) unsigned char kf_smem[232448];
}

static void kf_yield(int st)
{
	kf_me->st = st;
	swapcontext(&kf_me->uc, &kf_sched);
}

static void kf_block_on(const unsigned *gen, unsigned g)
{
	kf_me->wgen = gen;
	kf_me->wait = g;
	kf_yield(KF_WAIT);
}

static void kf_die(const char *what)
{
	fprintf(stderr, "emu: block %u thread %u: %s\n", blockIdx.x, kf_me ? kf_me->tid.x : 0u, what);
	exit(4);
}

static unsigned kf_bn, kf_bgen;
static void __syncthreads(void)
{
	unsigned g = kf_bgen;
	if (++kf_bn == blockDim.x) {
		kf_bn = 0;
		kf_bgen++;
		return;
	}
	kf_block_on(&kf_bgen, g);
}

// A collective of the group of `size` threads (32: a warp; 128: a
// warpgroup) that holds the caller: every thread leaves n bytes in its
// slot; the last to come runs op(first thread of the group); each takes m
// bytes back.  No thread can be two collectives ahead of another of its
// group, so one slot a thread suffices.
enum { KF_SLOT = 1024 };
static unsigned char kf_cin[1024][KF_SLOT], kf_cout[1024][KF_SLOT];
static unsigned kf_cn[2][32], kf_cgen[2][32];
template <typename F> static void kf_coll(unsigned size, const void *in, size_t n, void *out, size_t m, F op)
{
	unsigned t = kf_me->tid.x, k = size == 32 ? 0 : 1, grp = t / size, g = kf_cgen[k][grp];
	memcpy(kf_cin[t], in, n);
	if (++kf_cn[k][grp] == size) {
		op(grp * size);
		kf_cn[k][grp] = 0;
		kf_cgen[k][grp]++;
	} else {
		kf_block_on(&kf_cgen[k][grp], g);
	}
	memcpy(out, kf_cout[t], m);
}

template <typename T> static T __shfl_xor_sync(unsigned mask, T v, int o)
{
	T r;
	(void)mask;
	kf_coll(32, &v, sizeof v, &r, sizeof r, [&](unsigned b) {
		for (unsigned l = 0; l < 32; l++)
			memcpy(kf_cout[b + l], kf_cin[b + (l ^ (unsigned)o)], sizeof(T));
	});
	return r;
}

// cp.async: copies wait in groups until a wait_group covers them
static void kf_cp16(void *d, const void *s, bool ok)
{
	kf_me->cur.push_back({(unsigned char *)d, (const unsigned char *)s, ok});
}
static void kf_cp_commit()
{
	kf_me->groups.push_back(kf_me->cur);
	kf_me->cur.clear();
}
template <int N> static void kf_cp_wait()
{
	while (kf_me->groups.size() > (size_t)N) {
		for (const kf_cp &c : kf_me->groups.front()) {
			if (c.ok)
				memcpy(c.d, c.s, 16);
			else
				memset(c.d, 0, 16);
		}
		kf_me->groups.erase(kf_me->groups.begin());
	}
}

// ldmatrix x4: lanes 8i..8i+7 address the rows of matrix i; lane l gets
// row l / 4, columns 2 (l % 4) and + 1 of each (.trans: the transpose)
static void kf_ldsm(unsigned *r, const void *p, bool tr)
{
	kf_coll(32, p, 16, r, 16, [&](unsigned b) {
		for (unsigned l = 0; l < 32; l++)
			for (unsigned i = 0; i < 4; i++) {
				unsigned short e[2];
				for (unsigned h = 0; h < 2; h++) {
					unsigned row = tr ? 2 * (l & 3) + h : l >> 2, col = tr ? l >> 2 : 2 * (l & 3) + h;
					memcpy(&e[h], kf_cin[b + 8 * i + row] + 2 * col, 2);
				}
				unsigned v = e[0] | (unsigned)e[1] << 16;
				memcpy(kf_cout[b + l] + 4 * i, &v, 4);
			}
	});
}
static void kf_ldsm4(unsigned *r, const void *p) { kf_ldsm(r, p, false); }
static void kf_ldsm4t(unsigned *r, const void *p) { kf_ldsm(r, p, true); }

static float kf_half(unsigned v, int h, bool bf)
{
	unsigned short x = (unsigned short)(h ? v >> 16 : v & 0xffff);
	return bf ? kf_b2f(x) : kf_h2f(x);
}

// The A fragment of a m16k16 tile a warp holds (mma.sync; wgmma's A from
// registers, per warp): lane l = 4 g + q: a[0] row g, columns 2q and
// 2q + 1; a[1] row g + 8; a[2] and a[3] columns + 8.
static void kf_afrag(const unsigned *a, unsigned l, bool bf, float A[16][16])
{
	unsigned g = l >> 2, q = l & 3;
	for (int h = 0; h < 2; h++) {
		A[g][2 * q + h] = kf_half(a[0], h, bf);
		A[g + 8][2 * q + h] = kf_half(a[1], h, bf);
		A[g][2 * q + 8 + h] = kf_half(a[2], h, bf);
		A[g + 8][2 * q + 8 + h] = kf_half(a[3], h, bf);
	}
}

// mma.sync m16n8k16 row.col, f32 accumulators: c[0..1] row g, columns 2q
// and 2q + 1; c[2..3] row g + 8
static void kf_mma(float *c, const unsigned *a, const unsigned *bb, bool bf)
{
	unsigned in[10];
	memcpy(in, c, 16);
	memcpy(in + 4, a, 16);
	memcpy(in + 8, bb, 8);
	kf_coll(32, in, 40, c, 16, [&](unsigned b) {
		float A[16][16], B[16][8], C[16][8];
		for (unsigned l = 0; l < 32; l++) {
			unsigned x[10];
			memcpy(x, kf_cin[b + l], 40);
			unsigned g = l >> 2, q = l & 3;
			float cf[4];
			memcpy(cf, x, 16);
			C[g][2 * q] = cf[0];
			C[g][2 * q + 1] = cf[1];
			C[g + 8][2 * q] = cf[2];
			C[g + 8][2 * q + 1] = cf[3];
			kf_afrag(x + 4, l, bf, A);
			for (int h = 0; h < 2; h++) {
				B[2 * q + h][g] = kf_half(x[8], h, bf);
				B[2 * q + 8 + h][g] = kf_half(x[9], h, bf);
			}
		}
		for (unsigned l = 0; l < 32; l++) {
			unsigned g = l >> 2, q = l & 3;
			float d[4];
			for (int r = 0; r < 4; r++) {
				unsigned i = g + (r >> 1) * 8, j = 2 * q + (r & 1);
				float s = C[i][j];
				for (int kk = 0; kk < 16; kk++)
					s += A[i][kk] * B[kk][j];
				d[r] = s;
			}
			memcpy(kf_cout[b + l], d, 16);
		}
	});
}
static void kf_mma_f16(float *c, const unsigned *a, const unsigned *b) { kf_mma(c, a, b, false); }
static void kf_mma_bf16(float *c, const unsigned *a, const unsigned *b) { kf_mma(c, a, b, true); }

// ---- Hopper: shared-memory addresses, mbarriers, TMA, wgmma ----

// Shared addresses: kf_smem (the dynamic window) from 0; the kernel's
// static __shared__ arrays (static C++ arrays here) each get a window of
// 4 KiB from KF_STATIC on, on their first use (they hold mbarriers)
enum { KF_STATIC = 0x40000, KF_NSTATIC = 8 };
static const unsigned char *kf_sbase[KF_NSTATIC];
static unsigned kf_wg_saddr(const void *p)
{
	const unsigned char *c = (const unsigned char *)p;
	if (c >= kf_smem && c < kf_smem + sizeof kf_smem)
		return (unsigned)(c - kf_smem);
	for (int i = 0; i < KF_NSTATIC; i++) {
		if (!kf_sbase[i])
			kf_sbase[i] = c;
		if (c >= kf_sbase[i] && c < kf_sbase[i] + 4096)
			return KF_STATIC + 4096u * (unsigned)i + (unsigned)(c - kf_sbase[i]);
	}
	fprintf(stderr, "emu: too many static shared arrays\n");
	exit(4);
}

// The 128-byte swizzle of the shared-memory address a: its 16-byte chunk
// (bits 4-6) XOR its row of 128 bytes within the 1024 (bits 7-9), the
// same for TMA's writes and wgmma's reads
static unsigned kf_swz(unsigned a) { return a ^ (((a >> 7) & 7u) << 4); }

struct kf_mbar {
	unsigned init, pending, phase;
	long long tx;
	bool live;
};
static kf_mbar kf_mb[(sizeof kf_smem + 4096 * KF_NSTATIC) / 8];
// the state of the mbarrier at shared address b (either window)
static kf_mbar *kf_mbar_slot(unsigned b)
{
	if (b % 8)
		return nullptr;
	if (b < sizeof kf_smem)
		return &kf_mb[b / 8];
	if (b >= KF_STATIC && b < KF_STATIC + 4096u * KF_NSTATIC)
		return &kf_mb[(sizeof kf_smem + (b - KF_STATIC)) / 8];
	return nullptr;
}
static kf_mbar &kf_mbar_at(unsigned b)
{
	kf_mbar *m = kf_mbar_slot(b);
	if (!m || !m->live)
		kf_die("an mbarrier that was not initialised");
	return *m;
}
static void kf_mbar_init(unsigned b, unsigned n)
{
	kf_mbar *m = kf_mbar_slot(b);
	if (!m)
		kf_die("an mbarrier at a bad address");
	*m = {n, n, 0, 0, true};
}
// a phase completes when every expected arrival came and every expected
// byte landed
static void kf_mbar_step(kf_mbar &m)
{
	if (m.pending == 0 && m.tx == 0) {
		m.phase++;
		m.pending = m.init;
	}
}
static void kf_mbar_arrive(unsigned b)
{
	kf_mbar &m = kf_mbar_at(b);
	if (m.pending == 0)
		kf_die("more arrivals on an mbarrier than it expects");
	m.pending--;
	kf_mbar_step(m);
}
static void kf_mbar_expect(unsigned b, unsigned bytes)
{
	kf_mbar &m = kf_mbar_at(b);
	m.tx += bytes;
	kf_mbar_arrive(b);
}
// try_wait.parity P passes once the phase of parity P completed: while the
// phase in progress has parity P, the thread spins
static void kf_mbar_wait(unsigned b, unsigned parity)
{
	while ((kf_mbar_at(b).phase & 1) == parity)
		kf_yield(KF_SPIN);
}

// A tensor map: the view the runtime encodes (kf_tmap_spec): outer rows
// of inner elements, or (mid > 0) outer x mid rows
struct KfTmap {
	const unsigned char *base;
	int elem;
	long long inner, outer, mid;
	int bi, bo;
};
// cp.async.bulk.tensor with the 128-byte swizzle: the box at (inner c0,
// row c1, and c2 of a 3-D map) into rows of bi elements at dst,
// out-of-range elements 0; its bytes complete on bar (at once: the data is
// in place when the phase completes, as a reader that waits sees it)
static void kf_tma(unsigned dst, const KfTmap *m, int c0, int c1, int c2, unsigned bar)
{
	unsigned rowb = (unsigned)(m->bi * m->elem);
	long long rows = m->mid ? m->mid : m->outer, deep = m->mid ? m->outer : 1;
	for (int r = 0; r < m->bo; r++)
		for (int c = 0; c < m->bi; c++) {
			long long gi = (long long)c0 + c, go = (long long)c1 + r;
			unsigned a = kf_swz(dst + (unsigned)r * rowb + (unsigned)(c * m->elem));
			if (a + (unsigned)m->elem > sizeof kf_smem)
				kf_die("a TMA box past shared memory");
			if (gi >= 0 && gi < m->inner && go >= 0 && go < rows && c2 >= 0 && c2 < deep)
				memcpy(kf_smem + a, m->base + (((long long)c2 * rows + go) * m->inner + gi) * m->elem,
				       (size_t)m->elem);
			else
				memset(kf_smem + a, 0, (size_t)m->elem);
		}
	kf_mbar &mb = kf_mbar_at(bar);
	mb.tx -= (long long)m->bo * rowb;
	kf_mbar_step(mb);
}
static void kf_tma2d(unsigned dst, const KfTmap *m, int c0, int c1, unsigned bar) { kf_tma(dst, m, c0, c1, 0, bar); }
static void kf_tma3d(unsigned dst, const KfTmap *m, int c0, int c1, int c2, unsigned bar) { kf_tma(dst, m, c0, c1, c2, bar); }
static void kf_tma2d_mc(unsigned, const KfTmap *, int, int, unsigned, unsigned short) { kf_die("TMA multicast is not emulated"); }
static void kf_mbar_arrive_cl(unsigned, unsigned) { kf_die("clusters are not emulated"); }
static unsigned kf_cl_rank() { return 0; }
static void kf_cl_sync() { kf_die("clusters are not emulated"); }

// the staging tile's 4- and 16-byte accesses at shared addresses, and the
// named barrier of a warpgroup (bar.sync id, 128: the 128 threads of the
// caller's warpgroup, whatever the id)
static unsigned char *kf_shared_at(unsigned a, unsigned n)
{
	if (a % n || a + n > sizeof kf_smem)
		kf_die("a shared-memory access past the dynamic window or misaligned");
	return kf_smem + a;
}
static void kf_sts32(unsigned a, unsigned v) { memcpy(kf_shared_at(a, 4), &v, 4); }
static void kf_lds128(unsigned a, unsigned &w0, unsigned &w1, unsigned &w2, unsigned &w3)
{
	unsigned w[4];
	memcpy(w, kf_shared_at(a, 16), 16);
	w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3];
}
static void kf_bar_wg(unsigned id)
{
	(void)id;
	char none = 0;
	kf_coll(128, &none, 1, &none, 1, [](unsigned) {});
}

static unsigned long long kf_wg_desc(unsigned a, unsigned lbo, unsigned sbo)
{
	return (unsigned long long)((a & 0x3ffff) >> 4) | ((unsigned long long)(lbo >> 4) << 16) |
	       ((unsigned long long)(sbo >> 4) << 32) | (1ull << 62);
}
static void kf_wg_fence() {}
static void kf_wg_commit() {}
template <int N> static void kf_wg_wait() {}

// An element of a wgmma operand in shared memory by its descriptor (the
// 128-byte swizzle): K-major (rows of the M or N dim, 16 k each: row i at
// (i / 8) SBO + (i % 8) 128 bytes) or N-major (trans-b: k-row k at (k / 8)
// SBO + (k % 8) 128, n-atoms of 64 LBO apart)
static float kf_wg_elem(unsigned long long d, bool nmajor, unsigned row, unsigned k, bool bf)
{
	unsigned start = (unsigned)(d & 0x3fff) << 4, lbo = (unsigned)((d >> 16) & 0x3fff) << 4,
		 sbo = (unsigned)((d >> 32) & 0x3fff) << 4;
	if ((d >> 62) != 1)
		kf_die("a wgmma descriptor without the 128-byte swizzle");
	unsigned a = nmajor ? start + (row / 64) * lbo + (k / 8) * sbo + (k % 8) * 128 + (row % 64) * 2
			    : start + (row / 8) * sbo + (row % 8) * 128 + k * 2;
	a = kf_swz(a);
	if (a + 2 > sizeof kf_smem)
		kf_die("a wgmma operand past shared memory");
	unsigned short v;
	memcpy(&v, kf_smem + a, 2);
	return bf ? kf_b2f(v) : kf_h2f(v);
}

// wgmma.mma_async m64nNk16, f32 accumulators d[N / 2] (row 16 warp +
// lane / 4 + 8 ((i >> 1) & 1), column 8 (i >> 2) + 2 (lane % 4) + (i & 1));
// A by descriptor (K-major) or from registers (a: kf_afrag's layout per
// warp), B by descriptor, trans-b tb.  Synchronous: the warpgroup's
// commit and wait have nothing left to do.
struct kf_wgin {
	unsigned long long da, db;
	unsigned a[4];
	float d[128];
};
static void kf_wgmma(float *d, const unsigned *ra, unsigned long long da, unsigned long long db, int N, bool tb, bool bf)
{
	kf_wgin in;
	in.da = da;
	in.db = db;
	if (ra)
		memcpy(in.a, ra, 16);
	memcpy(in.d, d, (size_t)N / 2 * 4);
	kf_coll(128, &in, sizeof in, d, (size_t)N / 2 * 4, [&](unsigned b) {
		static float A[64][16], B[16][256], C[64][256];
		for (unsigned t = 0; t < 128; t++) {
			kf_wgin x;
			memcpy(&x, kf_cin[b + t], sizeof x);
			unsigned w = t / 32, l = t % 32;
			if (x.da != in.da || x.db != in.db)
				kf_die("the threads of a warpgroup gave different wgmma descriptors");
			for (int i = 0; i < N / 2; i++)
				C[16 * w + l / 4 + 8 * ((i >> 1) & 1)][8 * (i >> 2) + 2 * (l % 4) + (i & 1)] = x.d[i];
			if (ra) /* each lane's own elements of its warp's 16 rows */
				kf_afrag(x.a, l, bf, &A[16 * w]);
		}
		for (unsigned r = 0; r < 64 && !ra; r++)
			for (unsigned k = 0; k < 16; k++)
				A[r][k] = kf_wg_elem(da, false, r, k, bf);
		for (unsigned k = 0; k < 16; k++)
			for (int n = 0; n < N; n++)
				B[k][n] = tb ? kf_wg_elem(db, true, (unsigned)n, k, bf) : kf_wg_elem(db, false, (unsigned)n, k, bf);
		for (int r = 0; r < 64; r++)
			for (int n = 0; n < N; n++) {
				float s = C[r][n];
				for (int k = 0; k < 16; k++)
					s += A[r][k] * B[k][n];
				C[r][n] = s;
			}
		for (unsigned t = 0; t < 128; t++) {
			unsigned w = t / 32, l = t % 32;
			float o[128];
			for (int i = 0; i < N / 2; i++)
				o[i] = C[16 * w + l / 4 + 8 * ((i >> 1) & 1)][8 * (i >> 2) + 2 * (l % 4) + (i & 1)];
			memcpy(kf_cout[b + t], o, (size_t)N / 2 * 4);
		}
	});
}
#define KF_EMU_WGMMA(ty, bf, n, tb)                                                                      \
	static void kf_wgmma_##ty##_n##n##_t##tb(float *d, unsigned long long da, unsigned long long db) \
	{                                                                                                \
		kf_wgmma(d, nullptr, da, db, n, tb, bf);                                                 \
	}                                                                                                \
	static void kf_wgmma_rs_##ty##_n##n##_t##tb(float *d, const unsigned *a, unsigned long long db)  \
	{                                                                                                \
		kf_wgmma(d, a, 0, db, n, tb, bf);                                                        \
	}
KF_EMU_WGMMA(f16, false, 64, 0)
KF_EMU_WGMMA(f16, false, 64, 1)
KF_EMU_WGMMA(f16, false, 128, 0)
KF_EMU_WGMMA(f16, false, 128, 1)
KF_EMU_WGMMA(f16, false, 256, 0)
KF_EMU_WGMMA(f16, false, 256, 1)
KF_EMU_WGMMA(bf16, true, 64, 0)
KF_EMU_WGMMA(bf16, true, 64, 1)
KF_EMU_WGMMA(bf16, true, 128, 0)
KF_EMU_WGMMA(bf16, true, 128, 1)
KF_EMU_WGMMA(bf16, true, 256, 0)
KF_EMU_WGMMA(bf16, true, 256, 1)
