/* emit_wgmma.c: the Hopper matmul kernel (sm_90a): TMA loads into a ring of
 * shared-memory stages, wgmma.mma_async on the tensor cores, the fused
 * epilogue on the accumulator registers (emit_matmul.c's KF_KERNEL_epi).
 *
 * Config "wgBMxBNx64sS": a block of 1 + BM/64 warpgroups.  Warpgroup 0 is
 * the producer: it gives up registers (setmaxnreg.dec) and one thread
 * issues, for each K tile of 64, one TMA copy of A's BM x 64 tile and one
 * (B stored [N, K]) or BN/64 (B stored [K, N]) of B's, into stage kt % S,
 * completing on the stage's `full` mbarrier.  Each consumer warpgroup takes
 * registers (setmaxnreg.inc), owns 64 rows of the tile and issues 4 wgmma
 * m64nBNk16 per K tile with both operands read from shared memory through
 * matrix descriptors; it keeps one wgmma group in flight (wait_group 1) and
 * then releases the previous stage (`empty` mbarrier, one arrival per
 * warp), so the tensor cores do not wait for the barrier round trip.
 *
 * Suffix "c2"/"c4": a cluster of 2/4 CTAs along M; each loads its share of
 * the B tile (kf_wg_bpieces) and multicasts it to all, so every `full`
 * barrier expects the whole stage and every `empty` one counts the
 * consumer warps of the whole cluster (remote arrivals through mapa).
 * Suffix "p": persistent; a grid of min(tiles, KF_MM_SMS) CTAs, each
 * taking tiles blockIdx.x, + gridDim.x, ... in kf_wg_raster's grouped
 * order; the ring's use counter `it` runs on across tiles (stage it % S,
 * parity (it / S) & 1), the consumers release a tile's last stage before
 * its epilogue, so the producer loads the next tile meanwhile.
 * Suffix "v": paired epilogue stores (KF_KERNEL_epi2, emit_mm_epi.c).
 * Suffix "s": the epilogue's results staged in shared memory and stored
 * in 16-byte coalesced chunks (epilogue_staged; one 2-byte output, else
 * "v"'s or the scalar path).
 *
 * Shared-memory layouts (both made by TMA with CU_TENSOR_MAP_SWIZZLE_128B,
 * every tile 1024-byte aligned, so the swizzle phase starts at 0):
 *  - K-major (A, B stored [N, K]): rows of 64 elements = 128 bytes; the
 *    canonical SW128 K-major layout: 8-row groups 1024 bytes apart (SBO),
 *    LBO unused; k-step 16 = +32 bytes of start address.
 *  - N-major (B stored [K, N], wgmma's imm-trans-b = 1): BN/64 boxes of
 *    64 k-rows x 64 n (8 KiB each): n-atoms of 64 are 8 KiB apart (LBO),
 *    8-k-row groups 1024 bytes apart (SBO); k-step 16 = +2048 bytes.
 * The descriptor: start >> 4 in bits 0-13, LBO >> 4 in 16-29, SBO >> 4 in
 * 32-45, swizzle mode 1 (128B) in 62-63.
 *
 * Out-of-range rows and K columns are zero-filled by TMA (the transaction
 * byte count stays the full box), so partial tiles need no special path;
 * the epilogue checks row < M and col < N.  Needs: f16/bf16 operands read
 * as stored, one batch, row lengths multiples of 16 bytes, A not
 * transposed (emit_matmul.c checks; otherwise the mma.sync kernel runs).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "emit_mm_int.h"

/* kf_mbar_arrive_cl: the release of a stage in another CTA of the cluster
 * (mapa + arrive) with the default .release.cta semantics, as CUTLASS's
 * ClusterBarrier::arrive(cta_id) does: the stage's readers are wgmma
 * groups already retired by wgmma.wait_group, so there is nothing for a
 * cluster-scope release to order.  ".release.cluster" made ptxas put a
 * memory fence (8 more instructions) into every consumer warp's k-loop;
 * the suspected cause of the c2/c4 kernels' fixed ~1.1 us per k-step
 * (docs/matmul.md). */
static const char helpers[] =
	"#ifndef KF_WG_HELPERS\n"
	"#define KF_WG_HELPERS\n"
	"struct __align__(64) KfTmap { unsigned long long v[16]; };\n"
	"__device__ __forceinline__ unsigned kf_wg_saddr(const void *p) {\n"
	"  return (unsigned)__cvta_generic_to_shared(p); }\n"
	"__device__ __forceinline__ void kf_mbar_init(unsigned b, unsigned n) {\n"
	"  asm volatile(\"mbarrier.init.shared::cta.b64 [%0], %1;\" :: \"r\"(b), \"r\"(n) : \"memory\"); }\n"
	"__device__ __forceinline__ void kf_mbar_expect(unsigned b, unsigned bytes) {\n"
	"  asm volatile(\"mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\" :: \"r\"(b), \"r\"(bytes) : \"memory\"); }\n"
	"__device__ __forceinline__ void kf_mbar_arrive(unsigned b) {\n"
	"  asm volatile(\"mbarrier.arrive.shared::cta.b64 _, [%0];\" :: \"r\"(b) : \"memory\"); }\n"
	"__device__ __forceinline__ void kf_mbar_wait(unsigned b, unsigned parity) {\n"
	"  unsigned ok = 0;\n"
	"  do asm volatile(\"{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }\"\n"
	"                 : \"=r\"(ok) : \"r\"(b), \"r\"(parity) : \"memory\");\n"
	"  while (!ok); }\n"
	"__device__ __forceinline__ void kf_tma2d(unsigned dst, const KfTmap *m, int c0, int c1, unsigned bar) {\n"
	"  asm volatile(\"cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\"\n"
	"               :: \"r\"(dst), \"l\"(m), \"r\"(c0), \"r\"(c1), \"r\"(bar) : \"memory\"); }\n"
	"__device__ __forceinline__ void kf_tma2d_mc(unsigned dst, const KfTmap *m, int c0, int c1, unsigned bar,\n"
	"                                            unsigned short mask) {\n"
	"  asm volatile(\"cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster\"\n"
	"               \" [%0], [%1, {%2, %3}], [%4], %5;\"\n"
	"               :: \"r\"(dst), \"l\"(m), \"r\"(c0), \"r\"(c1), \"r\"(bar), \"h\"(mask) : \"memory\"); }\n"
	"__device__ __forceinline__ void kf_mbar_arrive_cl(unsigned b, unsigned cta) {\n"
	"  asm volatile(\"{ .reg .b32 ra; mapa.shared::cluster.u32 ra, %0, %1;\"\n"
	"               \" mbarrier.arrive.shared::cluster.b64 _, [ra]; }\" :: \"r\"(b), \"r\"(cta) : \"memory\"); }\n"
	"__device__ __forceinline__ unsigned kf_cl_rank() {\n"
	"  unsigned r; asm volatile(\"mov.u32 %0, %%cluster_ctarank;\" : \"=r\"(r)); return r; }\n"
	"__device__ __forceinline__ void kf_cl_sync() {\n"
	"  asm volatile(\"barrier.cluster.arrive.release;\\n\\tbarrier.cluster.wait.acquire;\" ::: \"memory\"); }\n"
	"__device__ __forceinline__ unsigned long long kf_wg_desc(unsigned a, unsigned lbo, unsigned sbo) {\n"
	"  return (unsigned long long)((a & 0x3ffff) >> 4) | ((unsigned long long)(lbo >> 4) << 16) |\n"
	"         ((unsigned long long)(sbo >> 4) << 32) | (1ull << 62); }\n"
	"__device__ __forceinline__ void kf_wg_fence() { asm volatile(\"wgmma.fence.sync.aligned;\" ::: \"memory\"); }\n"
	"__device__ __forceinline__ void kf_wg_commit() { asm volatile(\"wgmma.commit_group.sync.aligned;\" ::: \"memory\"); }\n"
	"template <int N> __device__ __forceinline__ void kf_wg_wait() {\n"
	"  asm volatile(\"wgmma.wait_group.sync.aligned %0;\" :: \"n\"(N) : \"memory\"); }\n"
	/* the staging tile's accesses; the store without a "memory" clobber,
	 * which would make the compiler reload every operand (the bias) after
	 * each store: the shared-memory accesses are all volatile asm, which
	 * keep their order */
	"__device__ __forceinline__ void kf_sts32(unsigned a, unsigned v) {\n"
	"  asm volatile(\"st.shared.u32 [%0], %1;\" :: \"r\"(a), \"r\"(v)); }\n"
	"__device__ __forceinline__ void kf_lds128(unsigned a, unsigned &w0, unsigned &w1, unsigned &w2, unsigned &w3) {\n"
	"  asm volatile(\"ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\" : \"=r\"(w0), \"=r\"(w1), \"=r\"(w2), \"=r\"(w3)\n"
	"               : \"r\"(a) : \"memory\"); }\n"
	"__device__ __forceinline__ void kf_bar_wg(unsigned id) {\n"
	"  asm volatile(\"bar.sync %0, 128;\" :: \"r\"(id) : \"memory\"); }\n"
	"#endif\n";

const char *kx_wg_helpers(void) { return helpers; }

/* kf_wgmma_<ty>_n<BN>_t<tb>(d, da, db): one wgmma.m64nBNk16 with f32
 * accumulators d[BN/2], both operands by descriptor, D += A * B (zero:
 * kf_wgmma_..._t<tb>z, D = A * B, scale-d 0).  Guarded: two kernels of one
 * program (two matmuls of a graph) may both need it. */
void kx_wg_mma_fn(kf_buf *o, const char *ty, int bn, int tb, bool zero)
{
	int nr = bn / 2;
	const char *z = zero ? "z" : "", *Z = zero ? "Z" : "";
	kf_buf_printf(o, "#ifndef KF_WGMMA_%s_N%d_T%d%s\n#define KF_WGMMA_%s_N%d_T%d%s\n", ty, bn, tb, Z, ty, bn, tb, Z);
	kf_buf_printf(o, "__device__ __forceinline__ void kf_wgmma_%s_n%d_t%d%s(float *d, unsigned long long da, "
		      "unsigned long long db) {\n  asm volatile(\"wgmma.mma_async.sync.aligned.m64n%dk16.f32.%s.%s {",
		      ty, bn, tb, z, bn, ty, ty);
	for (int i = 0; i < nr; i++)
		kf_buf_printf(o, "%s%%%d", i ? "," : "", i);
	kf_buf_printf(o, "}, %%%d, %%%d, %d, 1, 1, 0, %d;\"\n    : ", nr, nr + 1, !zero, tb);
	for (int i = 0; i < nr; i++)
		kf_buf_printf(o, "%s\"%sf\"(d[%d])", i ? ", " : "", zero ? "=" : "+", i);
	kf_buf_puts(o, "\n    : \"l\"(da), \"l\"(db) : \"memory\"); }\n#endif\n");
}

/* The kernel's tensor maps: A [M, K] (box 64 x BM) and B, [N, K] (box
 * 64 x BN) or [K, N] (box 64 x 64, BN/64 copies per stage). */
static void tmaps(kx *k, const kx_mm *mm)
{
	const kf_mm_config *c = &mm->cfg;
	kf_kernel *kk = k->k;
	kk->ntmap = 2;
	kk->tmap[0] = (kf_tmap_spec){.param = mm->a.param, .elem = 2, .inner = mm->K, .outer = mm->M,
				     .box_inner = 64, .box_outer = c->bm};
	int bi, bo;
	kf_wg_bpieces(c->bn, mm->b.trans, c->cl ? c->cl : 1, 0, &bi, &bo, NULL);
	if (mm->b.trans)
		kk->tmap[1] = (kf_tmap_spec){.param = mm->b.param, .elem = 2, .inner = mm->K, .outer = mm->N,
					     .box_inner = bi, .box_outer = bo};
	else
		kk->tmap[1] = (kf_tmap_spec){.param = mm->b.param, .elem = 2, .inner = mm->N, .outer = mm->K,
					     .box_inner = bi, .box_outer = bo};
}

int kf_wg_bpieces(int bn, bool kmajor, int cl, int rank, int *box_inner, int *box_outer, kf_wg_piece *out)
{
	int nb = bn / 64, n = 0;
	*box_inner = 64;
	if (cl < 1 || rank < 0 || rank >= cl || bn % 64)
		return -1;
	if (kmajor) { /* rows of 64 k: CTA r loads rows [r, r + 1) * BN / cl */
		int rows = bn / cl;
		if (bn % cl || rows % 8)
			return -1; /* whole 8-row swizzle atoms (1 KiB) */
		*box_outer = rows;
		if (out)
			out[0] = (kf_wg_piece){.n0 = rank * rows, .k0 = 0, .off = rank * rows * 128};
		return 1;
	}
	if (nb % cl == 0) { /* whole 64 x 64 boxes, nb / cl each */
		*box_outer = 64;
		for (int j = rank * (nb / cl); j < (rank + 1) * (nb / cl); j++, n++)
			if (out)
				out[n] = (kf_wg_piece){.n0 = j * 64, .k0 = 0, .off = j * 8192};
		return n;
	}
	if (cl % nb) /* boxes split along k: cl / nb parts of 64 / (cl / nb) k-rows */
		return -1;
	int split = cl / nb, kr = 64 / split, j = rank / split, h = rank % split;
	*box_outer = kr;
	if (out)
		out[0] = (kf_wg_piece){.n0 = j * 64, .k0 = h * kr, .off = j * 8192 + h * kr * 128};
	return 1;
}

/* B's loads of one stage: every piece of this CTA's share (all of the
 * tile without a cluster), multicast to the cluster's CTAs with one. */
static void producer_b(kf_buf *b, const kx_mm *mm, int cl)
{
	int bi, bo;
	kf_wg_piece pc[8];
	for (int r = 0; r < cl; r++) {
		int n = kf_wg_bpieces(mm->cfg.bn, mm->b.trans, cl, r, &bi, &bo, pc);
		if (cl > 1)
			kf_buf_printf(b, "      %sif (rank == %d) {\n", r ? "else " : "", r);
		for (int i = 0; i < n; i++) {
			kf_buf_printf(b, "        kf_tma2d%s(sb + %d, &tm1, ", cl > 1 ? "_mc" : "", pc[i].off);
			if (mm->b.trans)
				kf_buf_printf(b, "kt * 64 + %d, bn + %d", pc[i].k0, pc[i].n0);
			else
				kf_buf_printf(b, "bn + %d, kt * 64 + %d", pc[i].n0, pc[i].k0);
			kf_buf_printf(b, ", bar_full + s * 8%s);\n", cl > 1 ? ", mask" : "");
		}
		if (cl > 1)
			kf_buf_puts(b, "      }\n");
	}
}

void kf_wg_raster(int t, int ntm, int ntn, int *mt, int *nt)
{
	KF_WG_RASTER_BODY
}

#define KX_WG_STR(...) #__VA_ARGS__
#define KX_WG_XSTR(...) KX_WG_STR(__VA_ARGS__)

/* "p": the device copy of kf_wg_raster, from the same text (guarded like
 * kx_wg_mma_fn). */
static void raster_fn(kf_buf *o)
{
	kf_buf_puts(o, "#ifndef KF_WG_RASTER\n#define KF_WG_RASTER\n");
	kf_buf_puts(o, "__device__ __forceinline__ void kf_wg_raster(int t, int ntm, int ntn, int *mt, int *nt) {\n  ");
	kf_buf_puts(o, KX_WG_XSTR(KF_WG_RASTER_BODY));
	kf_buf_puts(o, " }\n#endif\n");
}

/* "s": the device copies of the staging tile's index math, from the
 * same text as the host's (emit_matmul.h; guarded like kx_wg_mma_fn). */
int kx_wg_stage_pick(kx *k, const kx_mm *mm, const kf_mm_config *c)
{
	int stg = c->ss ? kx_mm_epilogue_s(k, mm, kx_wg_whole_tiles(k, mm)) : 1;
	if (stg < 0)
		return -1;
	int sc = stg == 0 ? kf_wg_stage_cols(c) : 0;
	if (sc > 0)
		kx_wg_staging_fn(&k->decl);
	return sc;
}

void kx_wg_staging_fn(kf_buf *o)
{
	kf_buf_puts(o, "#ifndef KF_WG_STG\n#define KF_WG_STG\n");
	kf_buf_puts(o, "__device__ __forceinline__ unsigned kf_wg_stg_off(int row, int col, int sc) {\n  return ");
	kf_buf_puts(o, KX_WG_XSTR(KF_WG_STG_OFF(row, col, sc)));
	kf_buf_puts(o, "; }\n__device__ __forceinline__ void kf_wg_stg_chunk(int tid, int j, int sc, int *row, int *col) {\n  ");
	kf_buf_puts(o, KX_WG_XSTR(KF_WG_STG_CHUNK(tid, j, sc, *row, *col)));
	kf_buf_puts(o, "; }\n#endif\n");
}

/* The loops around a tile's K loop: "p" walks this CTA's tiles (t =
 * blockIdx.x + i * gridDim.x, placed by kf_wg_raster) and counts the ring's
 * uses in `it` across them, so stage and parity carry over from one tile
 * to the next; otherwise the tile is the block's and it = kt. */
/* Inside a walk over tiles t: the tile's origin (bm, bn), placed by
 * kf_wg_raster on ntm x ntn tiles; cl > 1: cluster tiles, this CTA's M
 * tile the cluster rank's of them. */
static void tile_at(kf_buf *b, const kx_mm *mm, const char *ind, const char *ntm, int ntn, int cl)
{
	const kf_mm_config *c = &mm->cfg;
	kf_buf_printf(b, "%sint mt, nt;\n%skf_wg_raster(t, %s, %d, &mt, &nt);\n", ind, ind, ntm, ntn);
	if (cl > 1)
		kf_buf_printf(b, "%sconst int bm = (mt * %d + (int)(blockIdx.y %% %d)) * %d, bn = nt * %d;\n", ind, cl, cl,
			      c->bm, c->bn);
	else
		kf_buf_printf(b, "%sconst int bm = mt * %d, bn = nt * %d;\n", ind, c->bm, c->bn);
}

/* The number of M tiles of per x BM rows as text into ntm, and the number
 * of tiles (times ntn N tiles) into all: numbers, or (a sized plan whose
 * M varies) expressions of the size arguments. */
static void m_tiles(kx *k, const kx_mm *mm, int per, int ntn, char ntm[160], char all[192])
{
	kf_buf o = {0};
	kx_dimceil(k, &o, mm->M, mm->sM, (int64_t)mm->cfg.bm * per);
	bool num = o.n > 0;
	for (size_t i = 0; i < o.n; i++)
		num &= o.p[i] >= '0' && o.p[i] <= '9';
	snprintf(ntm, 160, num ? "%.*s" : "(int)(%.*s)", (int)o.n, o.p);
	if (num)
		snprintf(all, 192, "%lld", atoll(ntm) * ntn);
	else
		snprintf(all, 192, "%s * %d", ntm, ntn);
	kf_buf_free(&o);
}

static void tile_open(kx *k, const kx_mm *mm)
{
	const kf_mm_config *c = &mm->cfg;
	kf_buf *b = &k->b;
	if (!c->ps)
		return;
	int ntn = (int)((mm->N + c->bn - 1) / c->bn);
	char ntm[160], all[192];
	m_tiles(k, mm, c->cl > 1 ? c->cl : 1, ntn, ntm, all);
	if (c->cl > 1) {
		/* "cNp": the CTAs of a cluster (consecutive along y) walk the
		 * same cluster tiles in step (the multicast needs both in every
		 * K step): cluster tile T is cl M tiles x 1 N tile, CTA rank r
		 * takes M tile T's * cl + r (past M: zeros loaded, nothing stored) */
		kf_buf_printf(b, "  int it = 0;\n  for (int t = blockIdx.y / %d; t < %s; t += gridDim.y / %d) {\n", c->cl,
			      all, c->cl);
		tile_at(b, mm, "    ", ntm, ntn, c->cl);
		return;
	}
	kf_buf_printf(b, "  int it = 0;\n  for (int t = blockIdx.x; t < %s; t += gridDim.x) {\n", all);
	tile_at(b, mm, "    ", ntm, ntn, 1);
}

static void kloop_open(kf_buf *b, const kx_mm *mm, int64_t kt)
{
	if (mm->cfg.sk > 1) /* this split's K tiles [kt0, kt1) (emit_wg_splitk.c) */
		kf_buf_puts(b, "    for (int kt = kt0; kt < kt1; kt++) {\n      const int it = kt - kt0;\n");
	else if (mm->cfg.ps)
		kf_buf_printf(b, "    for (int kt = 0; kt < %lld; kt++, it++) {\n", (long long)kt);
	else
		kf_buf_printf(b, "    for (int kt = 0; kt < %lld; kt++) {\n      const int it = kt;\n", (long long)kt);
}

/* The producer warpgroup: one thread streams the K tiles into the ring.
 * In a cluster it stays until the end (kf_cl_sync): the others' TMA
 * writes and barrier arrivals land in this CTA's shared memory.  "p": it
 * runs ahead into the next tile's stages while the consumers are in the
 * epilogue of the current one. */
static void epilogue_warps(kx *k, const kx_mm *mm);

static void producer(kx *k, const kx_mm *mm, int64_t kt, int asz, int bsz, bool ew)
{
	const kf_mm_config *c = &mm->cfg;
	kf_buf *b = &k->b;
	int S = c->stages, cl = c->cl > 1 ? c->cl : 1;
	/* "e": 56 + 2 * 224 = 512 registers a lane of the 4 warpgroups */
	kf_buf_printf(b, "  if (wg == 0) {\n    asm volatile(\"setmaxnreg.dec.sync.aligned.u32 %d;\");\n", ew ? 56 : 40);
	if (ew)
		epilogue_warps(k, mm);
	if (cl > 1)
		kf_buf_printf(b, "    const unsigned rank = kf_cl_rank();\n    const unsigned short mask = %d;\n"
			      "    if (threadIdx.x == 0) {\n", (1 << cl) - 1);
	else if (c->sk > 1) /* every thread meets the cluster's barriers */
		kf_buf_puts(b, "    if (threadIdx.x == 0) {\n");
	else
		kf_buf_puts(b, "    if (threadIdx.x != 0) return;\n");
	tile_open(k, mm);
	kloop_open(b, mm, kt);
	kf_buf_printf(b, "      const int s = it %% %d;\n", S);
	/* the slot was last used in round it / S - 1: wait for its release */
	kf_buf_printf(b, "      if (it >= %d) kf_mbar_wait(bar_empty + s * 8, ((it / %d) - 1) & 1);\n", S, S);
	/* the whole B tile lands here: this CTA's pieces and the others' */
	kf_buf_printf(b, "      kf_mbar_expect(bar_full + s * 8, %d);\n", asz + bsz);
	kf_buf_printf(b, "      const unsigned sa = sbase + s * %d, sb = sbase + %d + s * %d;\n", asz, S * asz, bsz);
	kf_buf_printf(b, "      kf_tma2d(sa, &tm0, kt * 64, bm, bar_full + s * 8);\n");
	producer_b(b, mm, cl);
	kf_buf_puts(b, c->ps ? "    }\n  }\n" : "    }\n");
	if (c->sk > 1) /* the partials are in the consumers' shared memory: the split's first barrier */
		kf_buf_puts(b, "    }\n    kf_cl_sync();\n  } else {\n");
	else
		kf_buf_puts(b, cl > 1 ? "    }\n  } else {\n" : "    return;\n  }\n");
}

/* The epilogue of 64 x BN accumulators, acc[a0...], at rows bm + rb
 * (rb: "cw * 64", a consumer's share of the tile, or a "pp" row block's
 * offset), columns bn; in a block of its own, as it may be emitted twice. */
void kx_wg_epilogue(kx *k, const kx_mm *mm, bool pair, const char *rb, const char *a0)
{
	const kf_mm_config *c = &mm->cfg;
	kf_buf *b = &k->b;
	int nr = c->bn / 2;
	const char *it = kx_it(k);
	/* m64nNk16 accumulator: d[i] at row 16 * warp + lane / 4 + 8 * ((i >> 1) & 1),
	 * column 8 * (i >> 2) + 2 * (lane % 4) + (i & 1) */
	kf_buf_printf(b, "  {\n  const %s r0 = bm + %s + (warp & 3) * 16 + (lane >> 2);\n", it, rb);
	if (pair) { /* (i, i + 1): columns col, col + 1 of one row, col even */
		kf_buf_printf(b, "#pragma unroll\n  for (int i = 0; i < %d; i += 2) {\n", nr);
		kf_buf_printf(b, "    const %s row = r0 + ((i >> 1) & 1) * 8, col = bn + (i >> 2) * 8 + (lane & 3) * 2;\n", it);
		kf_buf_puts(b, "    if (row < ");
		kx_mm_dim(k, b, mm, 'M');
		kf_buf_printf(b, " && col < %lld) ", (long long)mm->N);
		kx_mm_epi2_call(k, b);
		kf_buf_printf(b, "0, row, col, acc[%si], acc[%si + 1]);\n  }\n  }\n", a0, a0);
		return;
	}
	kf_buf_printf(b, "#pragma unroll\n  for (int i = 0; i < %d; i++) {\n", nr);
	kf_buf_printf(b, "    const %s row = r0 + ((i >> 1) & 1) * 8, col = bn + (i >> 2) * 8 + (lane & 3) * 2 + (i & 1);\n", it);
	kf_buf_puts(b, "    if (row < ");
	kx_mm_dim(k, b, mm, 'M');
	kf_buf_printf(b, " && col < %lld) ", (long long)mm->N);
	kx_mm_epi_call(k, b);
	kf_buf_printf(b, "0, row, col, acc[%si]);\n  }\n  }\n", a0);
}

/* Whether the tiles cover the output exactly: the "s" epilogue then checks
 * no bounds, which also lets the compiler load a bias column once for the
 * two rows of a thread that share it. */
bool kx_wg_whole_tiles(kx *k, const kx_mm *mm)
{
	const kf_mm_config *c = &mm->cfg;
	int cl = c->cl > 1 ? c->cl : 1; /* and no cluster's extra M tiles */
	return kx_multiple(k, mm->M, mm->sM, (int64_t)c->bm * cl) && mm->N % c->bn == 0;
}

/* "s": the epilogue through this warpgroup's staging tile (at `stg`), SC
 * columns at a time: each thread computes its accumulator pairs
 * (KF_KERNEL_epis) into the tile (KF_WG_STG_OFF), then, after the
 * warpgroup's named barrier (1 + cw; 0 is __syncthreads), the 128 threads
 * store the tile's 16-byte chunks, consecutive threads along a row, so a
 * warp writes two 256-byte row pieces at SC = 128.  A chunk that is not
 * whole in range or not 16-byte aligned in global memory is stored as
 * eight 2-byte values where col < N.  The second barrier: the tile is
 * read out before the next part (or tile) overwrites it.  The staging
 * tiles are outside the ring, so the producer's loads of the next tile
 * ("p") go on meanwhile. */
/* The store of 8 staged 2-byte results w0..w3 at (row, col) of o0: one
 * 16-byte store where the chunk is whole in range and aligned, else
 * element by element where col < N; with check (rows past M possible),
 * nothing for row >= M. */
void kx_wg_chunk_store(kx *k, const kx_mm *mm, const char *it, bool check)
{
	kf_buf *b = &k->b;
	long long N = (long long)mm->N;
	kf_buf_puts(b, "      do {\n");
	if (check && !kx_wg_whole_tiles(k, mm)) {
		kf_buf_puts(b, "      if (row >= ");
		kx_mm_dim(k, b, mm, 'M');
		kf_buf_puts(b, ") break;\n");
	}
	kf_buf_printf(b, "      const %s off = row * %lld + col;\n", it, N);
	kf_buf_printf(b, "      if (col + 8 <= %lld && !((unsigned long long)(o0 + off) & 15)) {\n"
		      "        *(uint4 *)(o0 + off) = make_uint4(w0, w1, w2, w3);\n      } else {\n"
		      "        const unsigned w[4] = {w0, w1, w2, w3};\n"
		      "#pragma unroll\n        for (int e = 0; e < 8; e++)\n"
		      "          if (col + e < %lld) ((unsigned short *)(o0 + off))[e] = "
		      "(unsigned short)(w[e >> 1] >> ((e & 1) * 16));\n      }\n      } while (0);\n",
		      N, N);
}

/* The accumulator acc[a0 j] as the epilogue takes it: as is, or (rnd)
 * rounded to the contraction's type first, as "e" stages it. */
static void acc_arg(kf_buf *b, const kx_mm *mm, const char *a0, const char *j, bool rnd)
{
	char v[48], r[96];
	snprintf(v, sizeof v, "acc[%s%s]", a0, j);
	if (!rnd) {
		kf_buf_puts(b, v);
		return;
	}
	kf_buf st = {0};
	kx_store(&st, mm->rt, "%s", v);
	kf_buf_putc(&st, '\0');
	snprintf(r, sizeof r, "%s", st.p);
	kf_buf_free(&st);
	kx_load(b, mm->rt, "%s", r);
}

/* A consumer's 16-byte chunks of its staged 64 x sc tile to o0, rows
 * checked (check) or not. */
static void staged_stores(kx *k, const kx_mm *mm, int sc, const char *rb, bool check)
{
	kf_buf *b = &k->b;
	const char *it = kx_it(k);
	kf_buf_printf(b, "#pragma unroll\n    for (int j = 0; j < %d; j++) {\n      int rl, cc;\n", 64 * sc / 8 / 128);
	kf_buf_printf(b, "      kf_wg_stg_chunk(threadIdx.x & 127, j, %d, &rl, &cc);\n", sc);
	kf_buf_puts(b, "      unsigned w0, w1, w2, w3;\n");
	kf_buf_printf(b, "      kf_lds128(stg + kf_wg_stg_off(rl, cc, %d), w0, w1, w2, w3);\n", sc);
	kf_buf_printf(b, "      const %s row = bm + %s + rl, col = bn + h * %d + cc;\n", it, rb, sc);
	kx_wg_chunk_store(k, mm, it, check);
	kf_buf_puts(b, "    }\n");
}

void kx_wg_epilogue_staged(kx *k, const kx_mm *mm, int sc, const char *rb, const char *a0, bool rnd)
{
	const kf_mm_config *c = &mm->cfg;
	kf_buf *b = &k->b;
	const char *it = kx_it(k);
	kf_buf_printf(b, "  {\n  const int rl0 = (warp & 3) * 16 + (lane >> 2);\n"
		      "  const unsigned stg = sbase + %d + cw * %d;\n",
		      c->stages * (c->bm + c->bn) * 128, 64 * sc * 2);
	kf_buf_printf(b, "#pragma unroll\n  for (int h = 0; h < %d; h++) {\n", c->bn / sc);
	kf_buf_printf(b, "#pragma unroll\n    for (int j = 0; j < %d; j += 2) {\n      const int i = h * %d + j;\n", sc / 2,
		      sc / 2);
	kf_buf_puts(b, "      const int rl = rl0 + ((i >> 1) & 1) * 8, cc = (j >> 2) * 8 + (lane & 3) * 2;\n");
	kf_buf_puts(b, "      const unsigned v = ");
	kx_mm_epis_call(k, b);
	kf_buf_printf(b, "0, (%s)(bm + %s + rl), (%s)(bn + h * %d + cc), ", it, rb, it, sc);
	acc_arg(b, mm, a0, "i", rnd);
	kf_buf_puts(b, ", ");
	acc_arg(b, mm, a0, "i + 1", rnd);
	kf_buf_puts(b, ");\n");
	kf_buf_printf(b, "      kf_sts32(stg + kf_wg_stg_off(rl, cc, %d), v);\n    }\n", sc);
	kf_buf_puts(b, "    kf_bar_wg(1 + cw);\n");
	/* the stores check their rows only where the consumer's 64 are not
	 * all in range (one test a tile): a check at each store costs the
	 * sized kernel 11% at 8192 x 3072 x 768 (0.0984 against 0.0884 ms
	 * without, s11c) */
	bool whole = kx_wg_whole_tiles(k, mm);
	if (!whole) {
		kf_buf_printf(b, "    if (bm + %s + 64 <= ", rb);
		kx_mm_dim(k, b, mm, 'M');
		kf_buf_puts(b, ") {\n");
	}
	staged_stores(k, mm, sc, rb, false);
	if (!whole) {
		kf_buf_puts(b, "    } else {\n");
		staged_stores(k, mm, sc, rb, true);
		kf_buf_puts(b, "    }\n");
	}
	kf_buf_puts(b, "    kf_bar_wg(1 + cw);\n  }\n  }\n");
}

/* "e", the consumers' side: after the previous tile's results left the
 * staging tile (its `empty` barrier), the accumulators rounded to the
 * contraction's type go into it (the layout of epilogue_staged, the whole
 * BM x BN tile), then every thread arrives on `full` (release: its
 * shared-memory stores are seen by the epilogue warps' acquire).  The
 * CTA's last tile has no K loop to hide an epilogue under: the consumers
 * run it themselves (epilogue_staged, 8 warps, not 3). */
static void stage_out(kx *k, const kx_mm *mm, int64_t kt, int sc)
{
	const kf_mm_config *c = &mm->cfg;
	kf_buf *b = &k->b;
	int ntn = (int)((mm->N + c->bn - 1) / c->bn);
	char ntm[160], all[192];
	m_tiles(k, mm, 1, ntn, ntm, all);
	kf_buf_printf(b, "  {\n  const int tn = it / %lld - 1;\n", (long long)kt);
	kf_buf_puts(b, "  if (tn > 0) kf_mbar_wait(bar_sempty, (tn - 1) & 1);\n");
	kf_buf_printf(b, "  if (t + gridDim.x >= %s) {\n", all);
	kx_wg_epilogue_staged(k, mm, sc, "cw * 64", "", true);
	kf_buf_puts(b, "  } else {\n");
	kf_buf_printf(b, "  const int rl0 = cw * 64 + (warp & 3) * 16 + (lane >> 2);\n  const unsigned stg = sbase + %d;\n",
		      c->stages * (c->bm + c->bn) * 128);
	kf_buf_printf(b, "#pragma unroll\n  for (int j = 0; j < %d; j += 2) {\n", c->bn / 2);
	kf_buf_puts(b, "    const int rl = rl0 + ((j >> 1) & 1) * 8, cc = (j >> 2) * 8 + (lane & 3) * 2;\n");
	kf_buf_puts(b, "    const unsigned v = (unsigned)");
	kx_store(b, mm->rt, "acc[j]");
	kf_buf_puts(b, " | ((unsigned)");
	kx_store(b, mm->rt, "acc[j + 1]");
	kf_buf_printf(b, " << 16);\n    kf_sts32(stg + kf_wg_stg_off(rl, cc, %d), v);\n  }\n  kf_mbar_arrive(bar_sfull);\n  }\n  }\n",
		      c->bn);
}

/* "e", the epilogue warps (warps 1-3 of the producer warpgroup, 96
 * threads, idle otherwise): for each tile of the CTA's walk, in the
 * consumers' order, wait for the staged tile, run the epilogue on 8
 * values at a time (KF_KERNEL_epis on the rounded results), store them
 * as epilogue_staged does, then free the staging tile.  Meanwhile the
 * consumers run the next tile's K loop: the epilogue is off the tensor
 * cores' path. */
static void epilogue_warps(kx *k, const kx_mm *mm)
{
	const kf_mm_config *c = &mm->cfg;
	kf_buf *b = &k->b;
	const char *it = kx_it(k);
	int ntn = (int)((mm->N + c->bn - 1) / c->bn);
	char ntm[160], all[192];
	m_tiles(k, mm, 1, ntn, ntm, all);
	kf_buf_printf(b, "    if (threadIdx.x >= 32) {\n    const unsigned stg = sbase + %d;\n    int tn = 0;\n",
		      c->stages * (c->bm + c->bn) * 128);
	/* not the CTA's last tile: the consumers store that one themselves */
	kf_buf_printf(b, "    for (int t = blockIdx.x; t + gridDim.x < %s; t += gridDim.x, tn++) {\n", all);
	tile_at(b, mm, "      ", ntm, ntn, 1);
	kf_buf_puts(b, "      kf_mbar_wait(bar_sfull, tn & 1);\n");
	kf_buf_printf(b, "      for (int q = threadIdx.x - 32; q < %d; q += 96) {\n", c->bm * c->bn / 8);
	kf_buf_printf(b, "      const int rl = q / %d, cc = q %% %d * 8;\n      unsigned u[4];\n", c->bn / 8, c->bn / 8);
	kf_buf_printf(b, "      kf_lds128(stg + kf_wg_stg_off(rl, cc, %d), u[0], u[1], u[2], u[3]);\n", c->bn);
	kf_buf_puts(b, "      unsigned r[4];\n#pragma unroll\n      for (int e = 0; e < 4; e++)\n        r[e] = ");
	kx_mm_epis_call(k, b);
	kf_buf_printf(b, "0, (%s)(bm + rl), (%s)(bn + cc + 2 * e), ", it, it);
	kx_load(b, mm->rt, "(unsigned short)(u[e] & 0xffff)");
	kf_buf_puts(b, ", ");
	kx_load(b, mm->rt, "(unsigned short)(u[e] >> 16)");
	kf_buf_printf(b, ");\n      const unsigned w0 = r[0], w1 = r[1], w2 = r[2], w3 = r[3];\n"
		      "      const %s row = bm + rl, col = bn + cc;\n", it);
	kx_wg_chunk_store(k, mm, it, true);
	kf_buf_puts(b, "      }\n      kf_mbar_arrive(bar_sempty);\n    }\n    return;\n    }\n");
}

/* "pp": consumer cw takes the CTA's tiles i = cw, cw + 2, ... of the
 * persistent walk (ti: the CTA's tile count); the producer fills the
 * ring with all of them in order, so tile ti's K steps are the ring's
 * uses ti * KT ... ti * KT + KT - 1. */
static void tile_open_pp(kx *k, const kx_mm *mm, int64_t kt)
{
	const kf_mm_config *c = &mm->cfg;
	kf_buf *b = &k->b;
	int ntn = (int)((mm->N + c->bn - 1) / c->bn);
	char ntm[160], all[192];
	m_tiles(k, mm, 1, ntn, ntm, all);
	kf_buf_printf(b, "  for (int ti = cw, t = blockIdx.x + cw * gridDim.x; t < %s; ti += 2, t += 2 * gridDim.x) {\n",
		      all);
	kf_buf_printf(b, "    int it = ti * %lld;\n", (long long)kt);
	tile_at(b, mm, "    ", ntm, ntn, 1);
}

/* A consumer warpgroup: 64 rows x BN (or, "pp", all BM rows of its own
 * tiles, BM / 64 row blocks of wgmma), the K loop, then the epilogue
 * (sc > 0: staged, sc columns at a time). */
static void consumer(kx *k, const kx_mm *mm, int64_t kt, int asz, int bsz, bool pair, int sc, bool ew)
{
	const kf_mm_config *c = &mm->cfg;
	kf_buf *b = &k->b;
	int S = c->stages, nr = c->bn / 2, tb = !mm->b.trans, rbs = c->pp ? c->bm / 64 : 1;
	const char *ty = mm->dt == KF_BF16 ? "bf16" : "f16";
	/* 2 consumers: (65536 - 128 * 40) / 256 = 236 -> 232; 1 consumer: 240 */
	kf_buf_printf(b, "  asm volatile(\"setmaxnreg.inc.sync.aligned.u32 %d;\");\n",
		      ew ? (kf_wg_consumers(c) == 2 ? 224 : 240) : kf_wg_consumers(c) == 2 ? 232 : 240);
	kf_buf_printf(b, "  const int cw = wg - 1;\n  float acc[%d];\n", rbs * nr);
	if (c->pp)
		tile_open_pp(k, mm, kt);
	else
		tile_open(k, mm);
	kf_buf_printf(b, "#pragma unroll\n  for (int i = 0; i < %d; i++) acc[i] = 0.0f;\n", rbs * nr);
	/* "pp": tile ti's K loop after the other's of tile ti - 1 (its tile
	 * (ti - 1) / 2): the K loops alternate, and a full barrier is never
	 * waited on two rounds ahead, where its parity would lie */
	if (c->pp)
		kf_buf_puts(b, "    if (ti > 0) kf_mbar_wait(bar_turn + cw * 8, ((ti - 1) >> 1) & 1);\n");
	kloop_open(b, mm, kt);
	kf_buf_printf(b, "    const int s = it %% %d;\n", S);
	kf_buf_printf(b, "    kf_mbar_wait(bar_full + s * 8, (it / %d) & 1);\n", S);
	kf_buf_printf(b, "    const unsigned sa = sbase + s * %d%s, sb = sbase + %d + s * %d;\n", asz,
		      c->pp ? "" : " + cw * 8192", S * asz, bsz);
	kf_buf_puts(b, "    kf_wg_fence();\n#pragma unroll\n    for (int kk = 0; kk < 4; kk++) {\n");
	if (mm->b.trans)
		kf_buf_puts(b, "      const unsigned long long db = kf_wg_desc(sb + kk * 32, 16, 1024);\n");
	else
		kf_buf_puts(b, "      const unsigned long long db = kf_wg_desc(sb + kk * 2048, 8192, 1024);\n");
	if (!c->pp)
		kf_buf_printf(b, "      const unsigned long long da = kf_wg_desc(sa + kk * 32, 16, 1024);\n"
			      "      kf_wgmma_%s_n%d_t%d(acc, da, db);\n", ty, c->bn, tb);
	for (int r = 0; c->pp && r < rbs; r++) /* row block r: A's rows 64 r.., 8 KiB on */
		kf_buf_printf(b, "      kf_wgmma_%s_n%d_t%d(acc + %d, kf_wg_desc(sa + %d + kk * 32, 16, 1024), db);\n", ty,
			      c->bn, tb, r * nr, r * 8192);
	kf_buf_puts(b, "    }\n    kf_wg_commit();\n");
	/* the group of kt - 1 is done: its stage may be refilled */
	/* in a cluster, lane r releases the stage in CTA r (whose producer
	 * multicasts into this CTA's copy of it too) */
	if (c->cl > 1)
		kf_buf_printf(b, "    kf_wg_wait<1>();\n    if (kt > 0 && lane < %d) kf_mbar_arrive_cl(bar_empty + ((it + %d) %% %d) * 8, lane);\n  }\n",
			      c->cl, S - 1, S);
	else
		kf_buf_printf(b, "    kf_wg_wait<1>();\n    if (kt > %s && lane == 0) kf_mbar_arrive(bar_empty + ((it + %d) %% %d) * 8);\n  }\n",
			      c->sk > 1 ? "kt0" : "0", S - 1, S);
	if (c->pp) /* the last stage's wait passed: the other consumer's turn */
		kf_buf_puts(b, "  if (lane == 0) kf_mbar_arrive(bar_turn + (cw ^ 1) * 8);\n");
	kf_buf_printf(b, "  kf_wg_wait<0>();\n#pragma unroll\n  for (int i = 0; i < %d; i++) asm volatile(\"\" : \"+f\"(acc[i]) :: \"memory\");\n",
		      rbs * nr);
	if (c->sk > 1) { /* the cluster sums the splits and stores */
		kx_wg_splitk_reduce(k, mm, sc > 0);
		return;
	}
	/* "p": the tile's last stage is released before the epilogue, so the
	 * producer refills it with the next tile's data meanwhile */
	if (c->ps && c->cl > 1)
		kf_buf_printf(b, "  if (lane < %d) kf_mbar_arrive_cl(bar_empty + ((it + %d) %% %d) * 8, lane);\n", c->cl, S - 1, S);
	else if (c->ps)
		kf_buf_printf(b, "  if (lane == 0) kf_mbar_arrive(bar_empty + ((it + %d) %% %d) * 8);\n", S - 1, S);
	if (ew)
		stage_out(k, mm, kt, sc);
	for (int r = 0; r < rbs && !ew; r++) { /* rows rb.., acc[a0 + i] */
		char rb[16], a0[16] = "";
		snprintf(rb, sizeof rb, c->pp ? "%d" : "cw * 64", r * 64);
		if (r)
			snprintf(a0, sizeof a0, "%d + ", r * nr);
		if (sc > 0)
			kx_wg_epilogue_staged(k, mm, sc, rb, a0, false);
		else
			kx_wg_epilogue(k, mm, pair, rb, a0);
	}
	if (c->ps)
		kf_buf_puts(b, "  }\n");
}

/* The launch shape: a block of 1 + consumers warpgroups; one CTA per tile
 * (N tiles along x, M tiles along y), or "p" at most KF_MM_SMS CTAs
 * walking the tiles. */
static void wg_grid(kx *k, const kx_mm *mm)
{
	const kf_mm_config *c = &mm->cfg;
	k->k->sm90a = true;
	k->k->block = 128 * (1 + kf_wg_consumers(c));
	k->k->units = (mm->N + c->bn - 1) / c->bn;
	if (c->sk > 1) { /* the sk splits of an M tile: a cluster along y */
		k->k->grid_y = (unsigned)((mm->M + c->bm - 1) / c->bm * c->sk);
		k->k->grid_z = 1;
		k->k->cluster = c->sk;
		return;
	}
	/* a cluster's CTAs are consecutive along y: the M tiles rounded up to
	 * whole clusters (the extra CTAs load zeros and store nothing, but
	 * load and multicast their share of B) */
	int cl = c->cl > 1 ? c->cl : 1;
	k->k->grid_y = (unsigned)(((mm->M + c->bm - 1) / c->bm + cl - 1) / cl * cl);
	if (c->ps && cl > 1) { /* at most KF_MM_SMS / cl clusters along y walking the cluster tiles */
		int64_t ctiles = k->k->units * (k->k->grid_y / cl);
		k->k->grid_y = (unsigned)((ctiles < KF_MM_SMS / cl ? ctiles : KF_MM_SMS / cl) * cl);
		k->k->units = 1;
	} else if (c->ps) { /* one row of at most KF_MM_SMS CTAs walking all tiles */
		int64_t tiles = k->k->units * k->k->grid_y;
		k->k->units = tiles < KF_MM_SMS ? tiles : KF_MM_SMS;
		k->k->grid_y = 1;
	}
	k->k->grid_z = 1;
	k->k->cluster = cl > 1 ? cl : 0;
	/* KF_MM_SMS is the H200's: on a part with fewer SMs the runtime cuts
	 * the grid to what is resident, rather than run a second wave */
	k->k->walk = c->ps;
}

int kx_mm_emit_wgmma(kx *k, kx_mm *mm)
{
	const kf_mm_config *c = &mm->cfg;
	int S = c->stages, asz = c->bm * 128, bsz = c->bn * 128, cl = c->cl > 1 ? c->cl : 1;
	int64_t kt = (mm->K + 63) / 64;
	const char *ty = mm->dt == KF_BF16 ? "bf16" : "f16";
	kf_buf *b = &k->b;
	kf_buf_puts(&k->decl, helpers);
	kx_wg_mma_fn(&k->decl, ty, c->bn, !mm->b.trans, false);
	if (c->ps)
		raster_fn(&k->decl);
	wg_grid(k, mm);
	/* "s": the staged epilogue where there is one 2-byte output, else
	 * the "v" / scalar one */
	int sc = c->sk > 1 ? kx_wg_splitk_vec(k, mm) : kx_wg_stage_pick(k, mm, c);
	if (sc < 0)
		return -1;
	/* "e": where the whole tile is staged and the staged value is the
	 * graph's (a matmul's result in its 2-byte type; gemm's alpha and
	 * beta would round twice) */
	bool ew = c->ew && sc == c->bn && !mm->gemm && kf_dtype_size(mm->rt) == 2;
	char ew_init[96];
	snprintf(ew_init, sizeof ew_init, "    kf_mbar_init(bar_sfull, %d);\n    kf_mbar_init(bar_sempty, 96);\n",
		 128 * kf_wg_consumers(c));
	/* + 1024: the dynamic window is aligned up to the 1024 bytes SW128
	 * needs; the staging tiles after the ring */
	k->k->smem = c->sk > 1 ? kf_wg_smem(c) : S * (asz + bsz) + 1024 + (sc > 0 ? kf_wg_consumers(c) * 64 * sc * 2 : 0);
	tmaps(k, mm);
	kf_buf_printf(b, "  extern __shared__ __align__(1024) unsigned char kf_smem[];\n"
		      "  __shared__ __align__(8) unsigned long long kf_bar[%d];\n", 2 * S + 2 * (c->pp || ew));
	kf_buf_printf(b, "  const unsigned sbase = (kf_wg_saddr(kf_smem) + 1023u) & ~1023u;\n"
		      "  const unsigned bar_full = kf_wg_saddr(kf_bar), bar_empty = bar_full + %d;\n", 8 * S);
	if (c->pp)
		kf_buf_printf(b, "  const unsigned bar_turn = bar_empty + %d;\n", 8 * S);
	if (ew) /* the staging tile's full (consumer threads) and empty (epilogue threads) */
		kf_buf_printf(b, "  const unsigned bar_sfull = bar_empty + %d, bar_sempty = bar_sfull + 8;\n", 8 * S);
	kf_buf_puts(b, "  const int wg = threadIdx.x >> 7, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;\n");
	if (c->sk > 1)
		kx_wg_splitk_head(k, mm);
	else if (!c->ps)
		kf_buf_printf(b, "  const int bm = blockIdx.y * %d, bn = blockIdx.x * %d;\n", c->bm, c->bn);
	/* full: the producer's expect_tx arrival plus the bytes; empty: one
	 * arrival per warp of the stage's consumers ("pp": one warpgroup) in
	 * every CTA of the cluster.  A cluster
	 * syncs before any CTA may multicast into another's initialised ring */
	kf_buf_printf(b, "  if (threadIdx.x == 0) {\n    for (int s = 0; s < %d; s++) {\n"
		      "      kf_mbar_init(bar_full + s * 8, 1);\n      kf_mbar_init(bar_empty + s * 8, %d);\n    }\n%s"
		      "    asm volatile(\"fence.mbarrier_init.release.cluster;\" ::: \"memory\");\n"
		      "    asm volatile(\"fence.proxy.async.shared::cta;\" ::: \"memory\");\n  }\n  %s\n",
		      S, 4 * (c->pp ? 1 : c->bm / 64) * cl,
		      c->pp ? "    kf_mbar_init(bar_turn, 4);\n    kf_mbar_init(bar_turn + 8, 4);\n"
		      : ew  ? ew_init
			    : "",
		      cl > 1 ? "kf_cl_sync();" : "__syncthreads();");
	/* "v": the paired epilogue, where every output is 2 bytes wide (not
	 * emitted where "s" took over: an unused helper is a warning) */
	int pair = c->vs && sc == 0 ? kx_mm_epilogue2(k, mm) : 1;
	if (pair < 0)
		return -1;
	producer(k, mm, kt, asz, bsz, ew);
	consumer(k, mm, kt, asz, bsz, pair == 0, sc, ew);
	/* no CTA leaves while others may still write to its ring or arrive
	 * on its barriers */
	if (cl > 1 || c->sk > 1)
		kf_buf_puts(b, "  }\n  kf_cl_sync();\n");
	return 0;
}
