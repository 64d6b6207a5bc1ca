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

// cvt.rna.tf32.f32: 10 mantissa bits, ties away from zero
static unsigned kf_tf32(float f)
{
	unsigned u;
	memcpy(&u, &f, 4);
	return (u & 0x7f800000) == 0x7f800000 ? u : (u + 0x1000) & 0xffffe000;
}

// mma.sync row.col, f32 accumulators: c[0..1] row g, columns 2q and 2q + 1;
// c[2..3] row g + 8.  m16n8k16 on f16 or bf16 (ty 0, 1): A as kf_afrag;
// b[0] rows 2q and 2q + 1 of column g, b[1] those + 8.  m16n8k8 on tf32
// (ty 2): a[0] row g, column q; a[1] row g + 8; a[2], a[3] column q + 4;
// b[0] row q, b[1] row q + 4.  The tensor cores read 19 bits of a tf32
// operand: the low 13 are dropped (one not rounded by kf_tf32 is
// truncated, as there).
static void kf_mma(float *c, const unsigned *a, const unsigned *bb, int ty)
{
	unsigned in[10];
	memcpy(in, c, 16);
	memcpy(in + 4, a, 16);
	memcpy(in + 8, bb, 8);
	const int K = ty == 2 ? 8 : 16;
	kf_coll(32, in, 40, c, 16, [&](unsigned b) {
		float A[16][16], B[16][8], C[16][8];
		auto t32 = [](unsigned v) { return __uint_as_float(v & 0xffffe000u); };
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
			if (ty == 2) {
				A[g][q] = t32(x[4]);
				A[g + 8][q] = t32(x[5]);
				A[g][q + 4] = t32(x[6]);
				A[g + 8][q + 4] = t32(x[7]);
				B[q][g] = t32(x[8]);
				B[q + 4][g] = t32(x[9]);
				continue;
			}
			kf_afrag(x + 4, l, ty == 1, A);
			for (int h = 0; h < 2; h++) {
				B[2 * q + h][g] = kf_half(x[8], h, ty == 1);
				B[2 * q + 8 + h][g] = kf_half(x[9], h, ty == 1);
			}
		}
		for (unsigned l = 0; l < 32; l++) {
			unsigned g = l >> 2, q = l & 3;
			float d[4];
			for (int r = 0; r < 4; r++) {
				unsigned i = g + (r >> 1) * 8, j = 2 * q + (r & 1);
				float s = C[i][j];
				for (int kk = 0; kk < K; kk++)
					s += A[i][kk] * B[kk][j];
				d[r] = s;
			}
			memcpy(kf_cout[b + l], d, 16);
		}
	});
}
static void kf_mma_f16(float *c, const unsigned *a, const unsigned *b) { kf_mma(c, a, b, 0); }
static void kf_mma_bf16(float *c, const unsigned *a, const unsigned *b) { kf_mma(c, a, b, 1); }
static void kf_mma_tf32(float *c, const unsigned *a, const unsigned *b) { kf_mma(c, a, b, 2); }

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

// the staging tile's 4- and 16-byte accesses at shared addresses (its
// named barrier of a warpgroup, kf_bar_wg, is kf_bar_sync's, below)
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

static unsigned long long kf_wg_desc(unsigned a, unsigned lbo, unsigned sbo)
{
	return (unsigned long long)((a & 0x3ffff) >> 4) | ((unsigned long long)(lbo >> 4) << 16) |
	       ((unsigned long long)(sbo >> 4) << 32) | (1ull << 62);
}
static void kf_wg_fence() {}

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
// warp), B by descriptor, trans-b tb; zero: D = A B (scale-d 0).
// Asynchronous, as on the GPU: the warpgroup's issue records the operation
// and fills every thread's accumulators with NaN; the wgmma.wait_group
// that covers its commit group computes it (reading shared memory then, so
// a stage released before the wait and refilled shows) and writes the
// accumulators back, in issue order.  So a kernel that reads accumulators
// before the wait sees NaN, one that writes them meanwhile loses the write,
// and one that refills a stage still being read computes with the new data.
// An operation on accumulators a pending one writes accumulates onto its
// result.
struct kf_wgin {
	float *dp;
	unsigned long long da, db;
	unsigned a[4];
	float d[128];
};
struct kf_wgop {
	float *dp[128];
	float C[64][256], A[64][16];
	bool ra, chained, zero, tb, bf;
	unsigned long long da, db;
	int N;
	unsigned grp;
};
static std::vector<kf_wgop *> kf_wgq[8]; // pending, per warpgroup, in issue order
static unsigned kf_wgcommits[1024];      // wgmma.commit_group calls, per thread
// each warpgroup's last result on each set of accumulators (a chain's input)
struct kf_wglast {
	float *dp;
	float C[64][256];
};
static std::vector<kf_wglast *> kf_wgres[8];
static void kf_wgmma(float *d, const unsigned *ra, unsigned long long da, unsigned long long db, int N, bool tb, bool bf,
		     bool zero = false)
{
	kf_wgin in;
	in.dp = d;
	in.da = da;
	in.db = db;
	if (ra)
		memcpy(in.a, ra, 16);
	memcpy(in.d, d, (size_t)N / 2 * 4);
	// the poison goes in while the others wait in the collective: a thread
	// that reaches a wait first may complete the operation for all
	float none;
	kf_coll(128, &in, sizeof in, &none, 0, [&](unsigned b) {
		unsigned wg = b / 128;
		kf_wgop *op = new kf_wgop;
		op->ra = ra != nullptr;
		op->zero = zero;
		op->tb = tb;
		op->bf = bf;
		op->da = da;
		op->db = db;
		op->N = N;
		op->grp = kf_wgcommits[b];
		op->chained = false;
		kf_wgin x0; /* the first thread's: accumulators are told apart by its pointer */
		memcpy(&x0, kf_cin[b], sizeof x0);
		for (kf_wgop *p : kf_wgq[wg])
			if (p->dp[0] == x0.dp)
				op->chained = true;
		for (unsigned t = 0; t < 128; t++) {
			kf_wgin x;
			memcpy(&x, kf_cin[b + t], sizeof x);
			unsigned w = t / 32, l = t % 32;
			if (x.da != in.da || x.db != in.db)
				kf_die("the threads of a warpgroup gave different wgmma descriptors");
			if (kf_wgcommits[b + t] != op->grp)
				kf_die("the threads of a warpgroup committed different numbers of wgmma groups");
			op->dp[t] = x.dp;
			for (int i = 0; i < N / 2; i++)
				op->C[16 * w + l / 4 + 8 * ((i >> 1) & 1)][8 * (i >> 2) + 2 * (l % 4) + (i & 1)] = x.d[i];
			if (ra) /* each lane's own elements of its warp's 16 rows */
				kf_afrag(x.a, l, bf, &op->A[16 * w]);
		}
		kf_wgq[wg].push_back(op);
		for (unsigned t = 0; t < 128; t++)
			for (int i = 0; i < N / 2; i++)
				op->dp[t][i] = NAN;
	});
}
static void kf_wgmma_done(unsigned wg, kf_wgop *op)
{
	static float B[16][256];
	kf_wglast *res = nullptr;
	for (kf_wglast *x : kf_wgres[wg])
		if (x->dp == op->dp[0])
			res = x;
	if (op->chained && !res)
		kf_die("a chained wgmma without the result it accumulates onto");
	if (!res) {
		res = new kf_wglast;
		res->dp = op->dp[0];
		kf_wgres[wg].push_back(res);
	}
	float (*C)[256] = op->chained ? res->C : op->C;
	for (unsigned r = 0; r < 64 && !op->ra; r++)
		for (unsigned k = 0; k < 16; k++)
			op->A[r][k] = kf_wg_elem(op->da, false, r, k, op->bf);
	for (unsigned k = 0; k < 16; k++)
		for (int n = 0; n < op->N; n++)
			B[k][n] = kf_wg_elem(op->db, op->tb, (unsigned)n, k, op->bf);
	for (int r = 0; r < 64; r++)
		for (int n = 0; n < op->N; n++) {
			float s = op->zero ? 0.0f : C[r][n];
			for (int k = 0; k < 16; k++)
				s += op->A[r][k] * B[k][n];
			res->C[r][n] = s;
		}
	for (unsigned t = 0; t < 128; t++) {
		unsigned w = t / 32, l = t % 32;
		for (int i = 0; i < op->N / 2; i++)
			op->dp[t][i] = res->C[16 * w + l / 4 + 8 * ((i >> 1) & 1)][8 * (i >> 2) + 2 * (l % 4) + (i & 1)];
	}
	delete op;
}
static void kf_wg_commit() { kf_wgcommits[kf_me->tid.x]++; }
// wait_group N: every operation of a commit group older than the N newest
// this thread committed is done
template <int N> static void kf_wg_wait()
{
	unsigned t = kf_me->tid.x, wg = t / 128, c = kf_wgcommits[t];
	std::vector<kf_wgop *> &q = kf_wgq[wg];
	while (!q.empty() && q.front()->grp + N < c) {
		kf_wgop *op = q.front();
		q.erase(q.begin());
		kf_wgmma_done(wg, op);
	}
}
// the block's end: nothing may be left pending
static void kf_wg_reset(void)
{
	for (int w = 0; w < 8; w++) {
		if (!kf_wgq[w].empty())
			kf_die("a wgmma never waited for");
		for (kf_wglast *x : kf_wgres[w])
			delete x;
		kf_wgres[w].clear();
	}
	memset(kf_wgcommits, 0, sizeof kf_wgcommits);
}
#define KF_EMU_WGMMA(ty, bf, n)                                                                          \
	static void kf_wgmma_##ty##_n##n##_t0(float *d, unsigned long long da, unsigned long long db)    \
	{                                                                                                \
		kf_wgmma(d, nullptr, da, db, n, false, bf);                                              \
	}                                                                                                \
	static void kf_wgmma_##ty##_n##n##_t1(float *d, unsigned long long da, unsigned long long db)    \
	{                                                                                                \
		kf_wgmma(d, nullptr, da, db, n, true, bf);                                               \
	}                                                                                                \
	static void kf_wgmma_##ty##_n##n##_t0z(float *d, unsigned long long da, unsigned long long db)   \
	{                                                                                                \
		kf_wgmma(d, nullptr, da, db, n, false, bf, true);                                        \
	}                                                                                                \
	static void kf_wgmma_rs_##ty##_n##n##_t1(float *d, const unsigned *a, unsigned long long db)     \
	{                                                                                                \
		kf_wgmma(d, a, 0, db, n, true, bf);                                                      \
	}
// every N a kernel may use (multiples of 16; the emitters' guards,
// KF_WGMMA_..., are dropped from the kernel's text: kf_emu.h)
#define KF_EMU_WGMMA_N(ty, bf)                                                                                   \
	KF_EMU_WGMMA(ty, bf, 16) KF_EMU_WGMMA(ty, bf, 32) KF_EMU_WGMMA(ty, bf, 48) KF_EMU_WGMMA(ty, bf, 64)     \
	KF_EMU_WGMMA(ty, bf, 80) KF_EMU_WGMMA(ty, bf, 96) KF_EMU_WGMMA(ty, bf, 112) KF_EMU_WGMMA(ty, bf, 128)  \
	KF_EMU_WGMMA(ty, bf, 144) KF_EMU_WGMMA(ty, bf, 160) KF_EMU_WGMMA(ty, bf, 176) KF_EMU_WGMMA(ty, bf, 192) \
	KF_EMU_WGMMA(ty, bf, 208) KF_EMU_WGMMA(ty, bf, 224) KF_EMU_WGMMA(ty, bf, 240) KF_EMU_WGMMA(ty, bf, 256)
KF_EMU_WGMMA_N(f16, false)
KF_EMU_WGMMA_N(bf16, true)

// Named barriers (bar.sync / bar.arrive id, n; id 0 is __syncthreads'):
// a phase completes when n threads arrived, those that sync wait for it
static unsigned kf_nb_n[16], kf_nb_gen[16];
static bool kf_nb_arrive(unsigned id, unsigned n)
{
	if (id == 0 || id >= 16 || n % 32 || n > blockDim.x)
		kf_die("a named barrier with a bad id or count");
	if (++kf_nb_n[id] < n)
		return false;
	kf_nb_n[id] = 0;
	kf_nb_gen[id]++;
	return true;
}
static void kf_bar_arrive(unsigned id, unsigned n) { kf_nb_arrive(id, n); }
static int kf_opaque(int x) { return x; }
static void kf_bar_sync(unsigned id, unsigned n)
{
	unsigned g = kf_nb_gen[id];
	if (!kf_nb_arrive(id, n))
		kf_block_on(&kf_nb_gen[id], g);
}
// the wgmma kernels' staging tile: bar.sync id, 128 (its warpgroup)
static void kf_bar_wg(unsigned id) { kf_bar_sync(id, 128); }
// the block's end: a barrier left with arrivals is a schedule out of step
static void kf_nb_reset(void)
{
	for (int i = 0; i < 16; i++)
		if (kf_nb_n[i])
			kf_die("a named barrier left with arrivals at the block's end");
	memset(kf_nb_gen, 0, sizeof kf_nb_gen);
}
