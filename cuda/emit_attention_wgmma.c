/* emit_attention_wgmma.c: the flash-attention kernel for Hopper (sm_90a):
 * TMA loads into a ring of shared-memory stages, wgmma on the tensor
 * cores, a producer warpgroup and consumer warpgroups (the machinery of
 * emit_wgmma.c: its helpers, descriptors and 128-byte swizzled layouts),
 * scheduled as FlashAttention-3 does.
 *
 * Tile "wga<BM>x<BN>s<S>[p][o][w]": BM 64, 128 or 192 query rows (1 to 3
 * consumer warpgroups of 64), BN keys a tile (a multiple of 16 up to
 * 256), S stages; "p" ping-pong, "o" intra-warpgroup overlap (below), "w"
 * the blocks walk the tiles (a block an SM; producer() and consumer()).
 * Warpgroup 0 is the producer: it gives up registers (setmaxnreg) and one
 * thread loads q's tile once (bar_q), then per key tile k (K-major: BN rows
 * of 64 head dims a box) and v (N-major: boxes of BN keys x 64 head dims)
 * into stage i % S, each completing on its own `full` mbarrier after its
 * `empty` one (k and v apart, so that S = Q K^T starts before v lands; k
 * of tile i before v of tile i - 1, the order the consumers need them in
 * with "o").  Each consumer warpgroup takes registers and owns 64 query
 * rows: S = Q K^T with wgmma m64nBNk16 (q and k by descriptor, scale-d 0
 * on the first k-step), the score chain and the online softmax on the
 * accumulators (the per-thread layout of mma.sync's: emit_attention_tile.c
 * writes the steps for both kernels), the probabilities packed in
 * registers as the A operand of wgmma m64nDVk16 (v by descriptor, trans-b)
 * for O += P V.
 *
 * The key tiles go from the last to the first: the tiles a causal mask or
 * the end of the keys cuts come first (their scores masked), then the rest
 * without a mask (a loop of its own); blocks take the heaviest query tiles
 * first.  A score chain that is one positive scale goes into the exp2 of
 * the softmax (kx_att_fold_scale); row maxima and sums reduce over 4
 * partial values.
 *
 * "o" (intra-warpgroup overlap): tile i's S = Q K^T is issued, then O is
 * rescaled and tile i - 1's O += P V issued, and the softmax of tile i runs
 * while that product is on the tensor cores; the accumulators of both
 * products and P live in registers at once.  "p" (ping-pong): the consumer
 * warpgroups take turns issuing their products, warpgroup c waiting on
 * named barrier 1 + c and, once its products are issued, letting the next
 * one go (bar.arrive 1 + (c + 1) % n): one's softmax runs while the
 * other's products run.  Warpgroup 0 lets itself go first; the last one
 * does not let anyone go after its last products (every barrier ends with
 * as many arrivals as waits).  setmaxnreg: producer 56, 24 or 32 and
 * consumers 240, 240 or 160 registers for 1, 2 or 3 consumers.
 *
 * q, k and v must each be read as stored with contiguous head dims, in a
 * layout a 3-D tensor map takes: [runs][rows][pitch] with the operand's
 * rows a whole run (so TMA zero-fills rows past the sequence) and its head
 * dims at a column offset within the pitch (q, k and v split from one
 * projection, heads side by side; grouped-query heads).  Head dims 64 or
 * 128.  Otherwise, or without wgmma on the device, the mma.sync kernel
 * runs.  The default on a device with wgmma (kf_emit_target.wgmma 1):
 * default_cfg's rule.  The kernel before this schedule (one loop, k and v
 * on one barrier) ran right on an H200 at T 1024 to 8192
 * (bench/results/2026-12-01-gpu-s2c-attn.txt); the schedule and the rule
 * ran right there too (57 case/tile checks, -s3-attn2-tiles.txt; timings
 * in -s3-attn2-attention.txt and docs/attention.md).
 *
 * In a sized plan (kf_emit_dyn) the query and key counts, the batch and
 * the tensor maps' offsets that come from symbols are size arguments, the
 * tile is chosen for the bucket's sizes, and the maps are encoded per plan
 * for the sizes run (test_dyn_emu runs the sizes of a bucket on one text).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "emit_att_int.h"
#include "emit_mm_int.h"

static const char wga_helpers[] =
	"#ifndef KF_WGA_HELPERS\n"
	"#define KF_WGA_HELPERS\n"
	"__device__ __forceinline__ void kf_tma3d(unsigned dst, const KfTmap *m, int c0, int c1, int c2, unsigned bar) {\n"
	"  asm volatile(\"cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\"\n"
	"               :: \"r\"(dst), \"l\"(m), \"r\"(c0), \"r\"(c1), \"r\"(c2), \"r\"(bar) : \"memory\"); }\n"
	"__device__ __forceinline__ void kf_bar_sync(unsigned id, unsigned n) {\n"
	"  asm volatile(\"bar.sync %0, %1;\" :: \"r\"(id), \"r\"(n) : \"memory\"); }\n"
	"__device__ __forceinline__ void kf_bar_arrive(unsigned id, unsigned n) {\n"
	"  asm volatile(\"bar.arrive %0, %1;\" :: \"r\"(id), \"r\"(n) : \"memory\"); }\n"
	"__device__ __forceinline__ int kf_opaque(int x) { asm volatile(\"\" : \"+r\"(x)); return x; }\n"
	"#endif\n";

/* kf_wgmma_rs_<ty>_n<N>_t1(d, a, db): one wgmma.m64nNk16, A from registers
 * (the m16k16 fragment layout of mma.sync, per warp), B by descriptor,
 * trans-b (N-major).  Guarded like kx_wg_mma_fn's. */
static void rs_fn(kf_buf *o, const char *ty, int n)
{
	int nr = n / 2;
	kf_buf_printf(o, "#ifndef KF_WGMMA_RS_%s_N%d_T1\n#define KF_WGMMA_RS_%s_N%d_T1\n", ty, n, ty, n);
	kf_buf_printf(o, "__device__ __forceinline__ void kf_wgmma_rs_%s_n%d_t1(float *d, const unsigned *a, "
		      "unsigned long long db) {\n  asm volatile(\"wgmma.mma_async.sync.aligned.m64n%dk16.f32.%s.%s {",
		      ty, n, n, ty, ty);
	for (int i = 0; i < nr; i++)
		kf_buf_printf(o, "%s%%%d", i ? "," : "", i);
	kf_buf_printf(o, "}, {%%%d,%%%d,%%%d,%%%d}, %%%d, 1, 1, 1, 1;\"\n    : ", nr, nr + 1, nr + 2, nr + 3, nr + 4);
	for (int i = 0; i < nr; i++)
		kf_buf_printf(o, "%s\"+f\"(d[%d])", i ? ", " : "", i);
	kf_buf_puts(o, "\n    : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"l\"(db) : \"memory\"); }\n#endif\n");
}

/* How a tensor map reads an operand: its parameter as [runs][rows][pitch]
 * elements; batch z's tile starts at run run(z), column col(z). */
typedef struct tmv {
	int64_t pitch, rows, runs;
	kf_buf run, col;
} tmv;

/* The symbolic form (a sized plan) of a / b, quantities whose values at
 * the probe's sizes are pa and pb; the number without a probe. */
static int64_t squot(const kx *k, int64_t a, int64_t pa, int64_t pb)
{
	if (!k->dyn || !k->dyn->probe)
		return a;
	return pb > 0 && pa % pb == 0 ? kx_pmono(k, pa / pb) : KF_DIM_BAD;
}

/* The map of operand op whose rows (the sequence: dim `rd` of its view;
 * prows of them at the probe's sizes) have stride P and whose head dims
 * (dim `hd`, `cols` of them) are contiguous: every batch factor either moves whole runs of rows * P or
 * stays within a row's pitch; false when the layout does not fit.  In a
 * sized plan the offsets' numbers that come from symbols are expressions
 * (read off the probe's view, at->p, when it has the same structure). */
static bool tmap_view(kx *k, const kx_att *at, const kx_attop *op, int rd, int hd, int64_t rows, int64_t prows, int64_t cols,
		      tmv *t)
{
	const kf_view *v = &op->view;
	int64_t P = kf_view_stride(v, rd), run = rows * P, e = (int64_t)kf_dtype_size(op->st);
	if (P <= 0 || kf_view_stride(v, hd) != 1 || (P * e) % 16 || !op->raw || op->st != at->mdt)
		return false;
	int64_t numel = kx_numel(k, k->param[op->param]);
	if (numel % run || v->off % run >= P)
		return false;
	/* the probe's view and batch, where they have the same structure */
	const kf_view *pv = kx_att_twin(at, v);
	const kf_type *pB = at->p ? &at->p->a.B : NULL;
	bool tw = pv && pB && pv->rank == v->rank && pB->rank == at->a.B.rank;
	for (int d = 0; tw && d < at->nb; d++)
		tw = pv->d[d].nf == v->d[d].nf;
	if (!tw) {
		pv = v;
		pB = &at->a.B;
	}
	int64_t prun = (tw ? prows : rows) * kf_view_stride(pv, rd);
	memset(t, 0, sizeof *t);
	t->pitch = P;
	t->rows = rows;
	t->runs = numel / run;
	int64_t colmax = v->off % run;
	kf_buf_puts(&t->run, "(");
	kx_dim(k, &t->run, v->off / run, tw ? squot(k, v->off / run, pv->off, prun) : v->off / run);
	kf_buf_puts(&t->col, "(");
	kx_dim(k, &t->col, v->off % run, tw && prun > 0 ? kx_pmono(k, pv->off % prun) : v->off % run);
	for (int d = 0; d < at->nb; d++) {
		const kf_view_dim *x = &v->d[d], *px = &pv->d[d];
		int64_t after = 1, inner = x->size, pafter = 1, pinner = px->size;
		for (int f = d + 1; f < at->nb; f++) {
			after *= at->a.B.dim[f];
			pafter *= pB->dim[f];
		}
		for (int f = 0; f < x->nf; f++) {
			inner /= x->ext[f];
			pinner /= px->ext[f];
			int64_t s = x->stride[f];
			if (!s)
				continue;
			if (s < 0) {
				kf_buf_free(&t->run);
				kf_buf_free(&t->col);
				return false;
			}
			bool whole = s % run == 0;
			if (!whole)
				colmax += (x->ext[f] - 1) * s;
			kf_buf *o = whole ? &t->run : &t->col;
			kf_buf_puts(o, " + (int)((z / ");
			kx_dim(k, o, after * inner, tw ? kx_pmono(k, pafter * pinner) : after * inner);
			kf_buf_puts(o, ") % ");
			kx_dim(k, o, x->ext[f], tw ? kx_pmono(k, px->ext[f]) : x->ext[f]);
			kf_buf_puts(o, ") * ");
			if (whole)
				kx_dim(k, o, s / run, tw ? squot(k, s / run, px->stride[f], prun) : s / run);
			else
				kx_dim(k, o, s, tw ? kx_pmono(k, px->stride[f]) : s);
		}
	}
	kf_buf_putc(&t->run, ')');
	kf_buf_putc(&t->col, ')');
	if (colmax + cols > P) {
		kf_buf_free(&t->run);
		kf_buf_free(&t->col);
		return false;
	}
	return true;
}

static void tmv_free(tmv *t)
{
	kf_buf_free(&t->run);
	kf_buf_free(&t->col);
}


typedef struct wga_cfg {
	int bm, bn, s;
	bool pp, ov, pw;
	bool so; /* the output staged in shared memory, stored 16 bytes at a time */
	/* the stage counter of iteration it and it - 1 (text): it, or with
	 * "w" the block's iterations of its earlier tiles added (kf_gi); the
	 * condition of a block's last products (for ping-pong's last turn) */
	const char *it, *it1, *last;
	const kx_att_pre *pre; /* the score chain's slots loaded a tile ahead; NULL: none */
} wga_cfg;

/* "wga128x176s2po", "w": the block walks its tiles */
static bool cfg_parse(const char *t, wga_cfg *c)
{
	int n = 0;
	memset(c, 0, sizeof *c);
	if (!t || sscanf(t, "wga%dx%ds%d%n", &c->bm, &c->bn, &c->s, &n) != 3 || n == 0)
		return false;
	for (const char *p = t + n; *p; p++) {
		if (*p == 'p' && !c->pp)
			c->pp = true;
		else if (*p == 'o' && !c->ov)
			c->ov = true;
		else if (*p == 'w' && !c->pw)
			c->pw = true;
		else
			return false;
	}
	return (c->bm == 64 || c->bm == 128 || c->bm == 192) && c->bn >= 16 && c->bn <= 256 && c->bn % 16 == 0 &&
	       c->s >= 2 && c->s <= 4 && (!c->pp || c->bm > 64);
}

/* Shared memory of a tile: q, S stages of k and v, the alignment's slack,
 * the barriers (q full and empty; full and empty of k and of v, a stage
 * each). */
static int smem_of(const kx_att *at, const wga_cfg *c, int *qsz, int *ksz, int *vsz)
{
	*qsz = c->bm / 64 * ((int)at->D / 64) * 8192;
	*ksz = ((int)at->D / 64) * c->bn * 128;
	*vsz = ((int)at->DV / 64) * c->bn * 128;
	/* "so": a 64 x DV staging tile a consumer after the barriers (16-aligned) */
	int so = c->so ? 16 + c->bm / 64 * 64 * (int)at->DV * 2 : 0;
	return *qsz + c->s * (*ksz + *vsz) + 1024 + 8 * (2 + 4 * c->s) + so;
}

/* The default tile (the rule and its measurements: docs/attention.md):
 * 2 consumers of 64 rows with ping-pong and overlap, unless that leaves
 * the 132 SMs of an H200 with less than a wave of blocks (short
 * sequences, few heads): then one consumer of 64 rows; BN 128, 176 for
 * head dim 128 without a causal mask, never past the keys (rounded up to
 * 16); as many stages as fit, up to 3; with two consumers the blocks walk
 * the tiles over up to 2048 x 64 query rows x head dims (2048 rows
 * without a mask). */
static void default_cfg(const kx *k, const kx_att *at, wga_cfg *c)
{
	/* (a sized plan: for its buckets' sizes, so that a bucket shares a kernel) */
	int64_t Tq = kx_rep(k, at->Tq, KX_ATT_S(k, at, Tq)), Tk = kx_rep(k, at->Tk, KX_ATT_S(k, at, Tk));
	int64_t blocks128 = (Tq + 127) / 128 * kx_rep(k, at->NB, KX_ATT_S(k, at, NB));
	c->bm = blocks128 < 132 ? 64 : 128;
	c->bn = at->D == 128 && !at->causal ? 176 : 128;
	int64_t tk16 = (Tk + 15) / 16 * 16;
	if (c->bn > tk16)
		c->bn = (int)tk16;
	c->pp = c->bm > 64;
	c->ov = true;
	/* blocks walk the tiles (a block an SM) over short rows: measured on
	 * the H200 (bench/results/2026-12-02-gpu-s8b-*), the walk is faster
	 * at 128 queries (1.05-1.50x), at 2048 for head dim 64 (1.05-1.09x)
	 * and for 128 without a mask (1.01x); the hardware's block scheduler
	 * does better under a causal mask at 2048 x 128 (its tiles' uneven
	 * lengths) and at 8192 but for head dim 64 without a mask (0.97x) */
	c->pw = c->bm > 64 && (Tq * at->D <= 2048 * 64 || (!at->causal && Tq <= 2048));
	int qs, ks, vs;
	for (c->s = 3; c->s > 2; c->s--)
		if (smem_of(at, c, &qs, &ks, &vs) <= 227 * 1024)
			break;
}

static void tile_indices(kx *k, const kx_att *at, const wga_cfg *c, const char *idx);

/* q's tile of query rows q0 into its buffer, completing on bar_q. */
static void load_q(kx *k, const kx_att *at, const wga_cfg *c, const tmv *m, const char *ind)
{
	kf_buf *b = &k->b;
	int D = (int)at->D, nc = c->bm / 64;
	kf_buf_printf(b, "%skf_mbar_expect(bar_q, %d);\n", ind, nc * (D / 64) * 8192);
	for (int cw = 0; cw < nc; cw++)
		for (int kc = 0; kc < D / 64; kc++)
			kf_buf_printf(b, "%skf_tma3d(sq + %d, &tm0, %.*s + %d, q0 + %d, %.*s, bar_q);\n", ind,
				      (cw * (D / 64) + kc) * 8192, (int)m[0].col.n, m[0].col.p, kc * 64, cw * 64, (int)m[0].run.n,
				      m[0].run.p);
}

/* The producer warpgroup: one thread loads q, then k of tile i and v of
 * tile i - 1 (tiles in the order the consumers take them: jt = nt - 1 -
 * i), each into stage i % S once its `empty` barrier says the stage was
 * read.  With "w" it walks the block's tiles (kf_gi: the iterations of the
 * earlier ones, so that the stages' phases go on), loading a tile's q once
 * the consumers have released the last one's (bar_qe). */
static void producer(kx *k, const kx_att *at, const wga_cfg *c, const tmv *m, int ksz, int vsz)
{
	kf_buf *b = &k->b;
	int D = (int)at->D, DV = (int)at->DV, BN = c->bn, S = c->s, nc = c->bm / 64;
	kf_buf_printf(b, "  if (wg == 0) {\n    asm volatile(\"setmaxnreg.dec.sync.aligned.u32 %d;\");\n"
		      "    if (threadIdx.x != 0) return;\n", nc == 1 ? 56 : nc == 2 ? 24 : 32);
	const char *g = c->pw ? "kf_gi + " : "";
	if (c->pw) {
		kf_buf_puts(b, "    int kf_gi = 0;\n    for (int kf_t = blockIdx.x, kf_tc = 0; kf_t < kf_ntiles; kf_t += gridDim.x, kf_tc++) {\n");
		tile_indices(k, at, c, "kf_t");
		kf_buf_puts(b, "    (void)nm;\n");
	} else {
		load_q(k, at, c, m, "    ");
	}
	kf_buf_puts(b, "    for (int i = 0; i <= nt; i++) {\n      if (i < nt) {\n");
	kf_buf_printf(b, "        const int s = (%si) %% %d, jt = nt - 1 - i;\n", g, S);
	kf_buf_printf(b, "        if (%si >= %d) kf_mbar_wait(bar_ek + s * 8, (((%si) / %d) - 1) & 1);\n", g, S, g, S);
	kf_buf_printf(b, "        kf_mbar_expect(bar_fk + s * 8, %d);\n", ksz);
	for (int kc = 0; kc < D / 64; kc++)
		kf_buf_printf(b, "        kf_tma3d(sk + s * %d + %d, &tm1, %.*s + %d, jt * %d, %.*s, bar_fk + s * 8);\n", ksz,
			      kc * BN * 128, (int)m[1].col.n, m[1].col.p, kc * 64, BN, (int)m[1].run.n, m[1].run.p);
	kf_buf_puts(b, "      }\n");
	if (c->pw) { /* a tile's q after its first k; a later tile's once the
		      * consumers are done with the last one's */
		kf_buf_puts(b, "      if (i == 0) {\n        if (kf_tc > 0) kf_mbar_wait(bar_qe, (kf_tc - 1) & 1);\n");
		load_q(k, at, c, m, "        ");
		kf_buf_puts(b, "      }\n");
	}
	kf_buf_puts(b, "      if (i > 0) {\n");
	kf_buf_printf(b, "        const int s = (%si - 1) %% %d, jt = nt - i;\n", g, S);
	kf_buf_printf(b, "        if (%si - 1 >= %d) kf_mbar_wait(bar_ev + s * 8, (((%si - 1) / %d) - 1) & 1);\n", g, S, g, S);
	kf_buf_printf(b, "        kf_mbar_expect(bar_fv + s * 8, %d);\n", vsz);
	for (int nb = 0; nb < DV / 64; nb++)
		kf_buf_printf(b, "        kf_tma3d(sv + s * %d + %d, &tm2, %.*s + %d, jt * %d, %.*s, bar_fv + s * 8);\n", vsz,
			      nb * BN * 128, (int)m[2].col.n, m[2].col.p, nb * 64, BN, (int)m[2].run.n, m[2].run.p);
	kf_buf_puts(b, "      }\n    }\n");
	if (c->pw)
		kf_buf_puts(b, "    kf_gi += nt;\n    }\n");
	kf_buf_puts(b, "    return;\n  }\n");
}

/* The consumers' text helpers.  `s` (text): the stage; the accumulators
 * fenced after each wait, so that the compiler moves no use of them before
 * it (the tensor cores write them until then). */
static void wait_full(kf_buf *b, const wga_cfg *c, const char *bar, const char *i)
{
	kf_buf_printf(b, "    kf_mbar_wait(%s + ((%s) %% %d) * 8, ((%s) / %d) & 1);\n", bar, i, c->s, i, c->s);
}

static void release(kf_buf *b, const wga_cfg *c, const char *bar, const char *i)
{
	kf_buf_printf(b, "    if (lane == 0) kf_mbar_arrive(%s + ((%s) %% %d) * 8);\n", bar, i, c->s);
}

/* With "w": this warp is done with q's buffer after the products of the
 * iteration `cond` (text) says is the tile's last: the producer may load
 * the next tile's q while the last P V and the output run. */
static void q_done(kf_buf *b, const wga_cfg *c, const char *cond)
{
	if (c->pw)
		kf_buf_printf(b, "    if ((%s) && lane == 0) kf_mbar_arrive(bar_qe);\n", cond);
}

static void fence_regs(kf_buf *b, const char *a, int n)
{
	kf_buf_printf(b, "#pragma unroll\n    for (int i = 0; i < %d; i++) asm volatile(\"\" : \"+f\"(%s[i]) :: \"memory\");\n", n, a);
}

/* S = Q K^T of the key tile of iteration i (text), into sc, committed. */
static void issue_qk(kf_buf *b, const kx_att *at, const wga_cfg *c, const char *ty, int ksz, const char *i)
{
	int D = (int)at->D;
	kf_buf_printf(b, "    kf_wg_fence();\n    {\n      const unsigned ks = sk + ((%s) %% %d) * %d;\n", i, c->s, ksz);
	/* k-step kk of 16 head dims: box kk / 4, + 32 bytes */
	for (int kk = 0; kk < D / 16; kk++)
		kf_buf_printf(b, "      kf_wgmma_%s_n%d_t0%s(sc, kf_wg_desc(sq + %d + cw * %d, 16, 1024), kf_wg_desc(ks + %d, 16, 1024));\n",
			      ty, c->bn, kk ? "" : "z", (kk / 4) * 8192 + (kk % 4) * 32, (D / 64) * 8192,
			      (kk / 4) * c->bn * 128 + (kk % 4) * 32);
	kf_buf_puts(b, "    }\n    kf_wg_commit();\n");
}

/* O += P V of the key tile of iteration i (text): k-step kk of 16 keys at
 * + 2048 bytes; the boxes of 64 head dims BN * 128 bytes apart (LBO). */
static void issue_pv(kf_buf *b, const kx_att *at, const wga_cfg *c, const char *ty, int vsz, const char *i)
{
	kf_buf_printf(b, "    kf_wg_fence();\n    {\n      const unsigned vs = sv + ((%s) %% %d) * %d;\n", i, c->s, vsz);
	kf_buf_printf(b, "#pragma unroll\n      for (int kk = 0; kk < %d; kk++)\n"
		      "        kf_wgmma_rs_%s_n%d_t1(oacc, pf[kk], kf_wg_desc(vs + kk * 2048, %d, 1024));\n",
		      c->bn / 16, ty, (int)at->DV, c->bn * 128);
	kf_buf_puts(b, "    }\n    kf_wg_commit();\n");
}

/* Ping-pong: wait for this warpgroup's turn; let the next one go (not
 * after the last products of the last warpgroup: `last`, text, says when
 * these are those). */
static void turn_wait(kf_buf *b, const wga_cfg *c)
{
	if (c->pp)
		kf_buf_puts(b, "    kf_bar_sync(1 + cw, 256);\n");
}

static void turn_pass(kf_buf *b, const wga_cfg *c, const char *last)
{
	int nc = c->bm / 64;
	if (!c->pp)
		return;
	if (last)
		kf_buf_printf(b, "    if (cw != %d || !(%s)) kf_bar_arrive(1 + (cw + 1) %% %d, 256);\n", nc - 1, last, nc);
	else
		kf_buf_printf(b, "    kf_bar_arrive(1 + (cw + 1) %% %d, 256);\n", nc);
}

/* The key tile after jt, whose slots (st->pre) a tile's scores load once
 * theirs are read: a tile's products and softmax long, to arrive (the
 * last tile loads tile 0 again: a few loads, no branch). */
#define NEXT_TILE "max(jt - 1, 0)"

/* The loops of a consumer with "o": tile 0's S and softmax; then for each
 * tile i, S of i, O rescaled, O += P V of i - 1, the softmax of i while
 * that runs (the masked tiles' loop, then the others'); the last P V. */
static void loops_overlap(kx *k, const kx_att *at, const wga_cfg *c, kx_att_step *st, const char *ty, int ksz, int vsz)
{
	kf_buf *b = &k->b;
	int BN = c->bn, DV = (int)at->DV;
	kf_buf_puts(b, "  {\n    const int it = 0, jt = nt - 1;\n    (void)jt;\n");
	kx_att_tile_preload(k, at, st, "jt");
	wait_full(b, c, "bar_fk", c->it);
	turn_wait(b, c);
	issue_qk(b, at, c, ty, ksz, c->it);
	turn_pass(b, c, NULL);
	kf_buf_puts(b, "    kf_wg_wait<0>();\n");
	fence_regs(b, "sc", BN / 2);
	release(b, c, "bar_ek", c->it);
	q_done(b, c, "nt == 1");
	st->mask = KX_MASK_EDGE;
	kx_att_tile_scores(k, at, st);
	kx_att_tile_preload(k, at, st, NEXT_TILE);
	kx_att_tile_max(k, at, st);
	kx_att_tile_exp(k, at, st, false);
	kx_att_tile_pack(k, at, BN);
	kf_buf_puts(b, "  }\n");
	for (int pass = 0; pass < 2; pass++) {
		/* not unrolled: two tiles' registers at once would not fit */
		kf_buf_puts(b, pass ? "#pragma unroll 1\n  for (int it = max(nm, 1); it < nt; it++) {\n"
				    : "#pragma unroll 1\n  for (int it = 1; it < nm; it++) {\n");
		kf_buf_puts(b, "    const int jt = nt - 1 - it;\n    (void)jt;\n");
		wait_full(b, c, "bar_fk", c->it);
		turn_wait(b, c);
		issue_qk(b, at, c, ty, ksz, c->it);
		kx_att_tile_rescale(k, DV);
		wait_full(b, c, "bar_fv", c->it1);
		issue_pv(b, at, c, ty, vsz, c->it1);
		turn_pass(b, c, NULL);
		kf_buf_puts(b, "    kf_wg_wait<1>();\n");
		fence_regs(b, "sc", BN / 2);
		release(b, c, "bar_ek", c->it);
		q_done(b, c, "it == nt - 1");
		st->mask = pass ? KX_MASK_NONE : KX_MASK_ALL;
		kx_att_tile_scores(k, at, st);
		kx_att_tile_preload(k, at, st, NEXT_TILE);
		kx_att_tile_max(k, at, st);
		kx_att_tile_exp(k, at, st, false);
		kf_buf_puts(b, "    kf_wg_wait<0>();\n");
		fence_regs(b, "oacc", DV / 2);
		release(b, c, "bar_ev", c->it1);
		kx_att_tile_pack(k, at, BN);
		kf_buf_puts(b, "  }\n");
	}
	kf_buf_puts(b, "  {\n    const int it = nt;\n");
	kx_att_tile_rescale(k, DV);
	wait_full(b, c, "bar_fv", c->it1);
	turn_wait(b, c);
	issue_pv(b, at, c, ty, vsz, c->it1);
	turn_pass(b, c, c->last);
	kf_buf_puts(b, "    kf_wg_wait<0>();\n");
	fence_regs(b, "oacc", DV / 2);
	release(b, c, "bar_ev", c->it1);
	kf_buf_puts(b, "  }\n");
}

/* The loops of a consumer without "o": per tile, S, its softmax, O += P V
 * (the masked tiles' loop, then the others'). */
static void loops_plain(kx *k, const kx_att *at, const wga_cfg *c, kx_att_step *st, const char *ty, int ksz, int vsz)
{
	kf_buf *b = &k->b;
	int BN = c->bn, DV = (int)at->DV;
	kx_att_tile_preload(k, at, st, "nt - 1");
	for (int pass = 0; pass < 2; pass++) {
		kf_buf_puts(b, pass ? "#pragma unroll 1\n  for (int it = nm; it < nt; it++) {\n"
				    : "#pragma unroll 1\n  for (int it = 0; it < nm; it++) {\n");
		kf_buf_puts(b, "    const int jt = nt - 1 - it;\n    (void)jt;\n");
		wait_full(b, c, "bar_fk", c->it);
		turn_wait(b, c);
		issue_qk(b, at, c, ty, ksz, c->it);
		turn_pass(b, c, NULL);
		kf_buf_puts(b, "    kf_wg_wait<0>();\n");
		fence_regs(b, "sc", BN / 2);
		release(b, c, "bar_ek", c->it);
		q_done(b, c, "it == nt - 1");
		st->mask = pass ? KX_MASK_NONE : KX_MASK_ALL;
		kx_att_tile_scores(k, at, st);
		kx_att_tile_preload(k, at, st, NEXT_TILE);
		kx_att_tile_max(k, at, st);
		kx_att_tile_rescale(k, DV);
		kx_att_tile_exp(k, at, st, false);
		kx_att_tile_pack(k, at, BN);
		wait_full(b, c, "bar_fv", c->it);
		turn_wait(b, c);
		issue_pv(b, at, c, ty, vsz, c->it);
		char last[48];
		snprintf(last, sizeof last, "it == nt - 1 && %s", c->last);
		turn_pass(b, c, last);
		kf_buf_puts(b, "    kf_wg_wait<0>();\n");
		fence_regs(b, "oacc", DV / 2);
		release(b, c, "bar_ev", c->it);
		kf_buf_puts(b, "  }\n");
	}
}

/* The output of a consumer's 64 rows: "so" through its staging tile at
 * sout (the 2-byte results packed by KF_KERNEL_outv in the layout of the
 * matmul's staged epilogue, KF_WG_STG_OFF), then, after the warpgroup's
 * named barrier 8 + cw (1 to 3 are ping-pong's), 16-byte chunks of rows
 * stored by KF_KERNEL_out8, consecutive threads along a row; the second
 * barrier: read out before the next tile writes it.  At 128 keys the
 * 4-byte pairs of kx_att_finish filled half of each 32-byte sector per
 * store (Nsight Compute, s12c) in a kernel bound by L2 (85%). */
static int finish(kx *k, const kx_att *at, const wga_cfg *c)
{
	int DV = (int)at->DV;
	if (!c->so)
		return kx_att_finish(k, at, DV);
	kf_buf *b = &k->b;
	if (kx_att_out16_helper(k, at) != 0)
		return -1;
	kx_wg_staging_fn(&k->decl);
	kx_att_finish_sums(k);
	kf_buf_printf(b, "  {\n  const unsigned stg = sout + cw * %d;\n  const int rl0 = (warp & 3) * 16 + g;\n", 64 * DV * 2);
	kf_buf_printf(b, "#pragma unroll\n  for (int i = 0; i < %d; i += 4) {\n    const int col = (i >> 2) * 8 + 2 * q4;\n", DV / 2);
	for (int h = 0; h < 2; h++) {
		kf_buf_printf(b, "    kf_sts32(stg + kf_wg_stg_off(rl0 + %d, col, %d), ", 8 * h, DV);
		kx_att_outv_call(k, b);
		kf_buf_printf(b, "z, r%d, col, oacc[i + %d] * i%d, oacc[i + %d] * i%d));\n", h, 2 * h, h, 2 * h + 1, h);
	}
	kf_buf_puts(b, "  }\n  kf_bar_sync(8 + cw, 128);\n");
	kf_buf_printf(b, "#pragma unroll\n  for (int j = 0; j < %d; j++) {\n    int rl, cc;\n"
		      "    kf_wg_stg_chunk(threadIdx.x & 127, j, %d, &rl, &cc);\n    unsigned w0, w1, w2, w3;\n"
		      "    kf_lds128(stg + kf_wg_stg_off(rl, cc, %d), w0, w1, w2, w3);\n"
		      "    const int row = q0 + cw * 64 + rl;\n    if (row < ",
		      64 * DV / 8 / 128, DV, DV);
	kx_dim(k, b, at->Tq, KX_ATT_S(k, at, Tq));
	kf_buf_puts(b, ") ");
	kx_att_out8_call(k, b);
	kf_buf_puts(b, "z, row, cc, w0, w1, w2, w3);\n  }\n  kf_bar_sync(8 + cw, 128);\n  }\n");
	return 0;
}

/* A consumer warpgroup: 64 query rows, every key tile; with "w" for each
 * tile of the block's walk, releasing q's buffer (bar_qe) once its
 * products are done and writing the tile's output. */
static int consumer(kx *k, const kx_att *at, const wga_cfg *c, int ksz, int vsz)
{
	kf_buf *b = &k->b;
	int BN = c->bn, DV = (int)at->DV, nc = c->bm / 64;
	const char *ty = at->mdt == KF_BF16 ? "bf16" : "f16";
	kf_buf_printf(b, "  asm volatile(\"setmaxnreg.inc.sync.aligned.u32 %d;\");\n", nc == 3 ? 160 : 240);
	kf_buf_puts(b, "  const int cw = wg - 1, g = lane >> 2, q4 = lane & 3;\n");
	kx_att_fold_scale(k, at, b);
	kf_buf_printf(b, "  float oacc[%d];\n", DV / 2);
	kf_buf_printf(b, "  float sc[%d];\n  unsigned pf[%d][4];\n", BN / 2, BN / 16);
	kf_buf_puts(b, "  float m0, m1, l0, l1, a0 = 0.0f, a1 = 0.0f;\n");
	if (c->pp) /* warpgroup 0 goes first */
		kf_buf_puts(b, "  if (cw == 0) kf_bar_arrive(1, 256);\n");
	if (c->pw) {
		kf_buf_puts(b, "  int kf_gi = 0;\n  for (int kf_t = blockIdx.x, kf_tc = 0; kf_t < kf_ntiles; kf_t += gridDim.x, kf_tc++) {\n");
		tile_indices(k, at, c, "kf_t");
		kf_buf_puts(b, "  const bool kf_last = kf_t + (int)gridDim.x >= kf_ntiles;\n  (void)kf_last;\n");
	}
	kf_buf_puts(b, "  const int r0 = q0 + cw * 64 + (warp & 3) * 16 + g, r1 = r0 + 8;\n");
	kf_buf_printf(b, "#pragma unroll\n  for (int i = 0; i < %d; i++) oacc[i] = 0.0f;\n", DV / 2);
	kf_buf_puts(b, "  m0 = -KF_INF, m1 = -KF_INF, l0 = 0.0f, l1 = 0.0f;\n");
	kf_buf_puts(b, c->pw ? "  kf_mbar_wait(bar_q, kf_tc & 1);\n" : "  kf_mbar_wait(bar_q, 0);\n");
	kx_att_step st = {.bn = BN, .dv = DV, .qpart = !kx_multiple(k, at->Tq, KX_ATT_S(k, at, Tq), c->bm), .rowmin = "q0", .fold = at->fold, .tree = true, .past = true,
			  .persist = true, .pre = c->pre};
	kx_att_tile_slots(k, &st);
	if (c->ov)
		loops_overlap(k, at, c, &st, ty, ksz, vsz);
	else
		loops_plain(k, at, c, &st, ty, ksz, vsz);
	if (!c->pw)
		return 0;
	if (finish(k, at, c) != 0)
		return -1;
	kf_buf_puts(b, "  kf_gi += nt;\n  }\n");
	return 0;
}

/* A tile's head z, first query row q0, key tiles nt, the last nt - nm of
 * them (the first walked) masked: those past the block's first row's
 * diagonal or the end of the keys.  idx: the tile's index (text). */
static void tile_indices(kx *k, const kx_att *at, const wga_cfg *c, const char *idx)
{
	kf_buf *b = &k->b;
	int BN = c->bn;
	int64_t sTk = KX_ATT_S(k, at, Tk);
	kx_att_block_z_q0(k, at, c->bm, true, idx);
	if (at->causal) {
		kf_buf_puts(b, "  const int nt = min(");
		kx_dimlini(k, b, at->Tk, sTk, BN - 1, BN, 0);
		kf_buf_printf(b, ", (q0 + %lld) / %d + 1), nm = nt - min((q0 + %lld) / %d, ", (long long)(c->bm - 1 + at->off), BN,
			      (long long)(at->off + 1), BN);
		kx_dimlini(k, b, at->Tk, sTk, 0, BN, 0);
		kf_buf_puts(b, ");\n");
	} else { /* a count the compiler cannot see: it does not unroll a short
		  * sequence's loops into straight-line code (which spilled: BN 176,
		  * 2 tiles) */
		kf_buf_puts(b, "  const int nt = kf_opaque(");
		kx_dimlini(k, b, at->Tk, sTk, BN - 1, BN, 0);
		kf_buf_puts(b, "), nm = nt - ");
		kx_dimlin(k, b, at->Tk, sTk, 0, BN, 0);
		kf_buf_puts(b, ";\n");
	}
}

/* The block's shared memory and its barriers set up; its tile's indices
 * (with "w": the count of tiles the blocks walk). */
static void block_head(kx *k, const kx_att *at, const wga_cfg *c, int qsz, int ksz, int vsz)
{
	kf_buf *b = &k->b;
	int S = c->s, nc = c->bm / 64;
	/* the tiles 1024-byte aligned (the swizzle's period), the barriers after them */
	kf_buf_printf(b, "  extern __shared__ __align__(1024) unsigned char kf_smem[];\n"
		      "  const unsigned sq = (kf_wg_saddr(kf_smem) + 1023u) & ~1023u, sk = sq + %d, sv = sk + %d;\n"
		      "  const unsigned bar_q = sv + %d, bar_qe = bar_q + 8, bar_fk = bar_qe + 8, bar_fv = bar_fk + %d, bar_ek = bar_fv + %d, "
		      "bar_ev = bar_ek + %d;\n  (void)bar_qe;\n",
		      qsz, S * ksz, S * vsz, 8 * S, 8 * S, 8 * S);
	if (c->so)
		kf_buf_printf(b, "  const unsigned sout = (bar_ev + %d + 15u) & ~15u;\n", 8 * S);
	kf_buf_puts(b, "  const int wg = threadIdx.x >> 7, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;\n");
	if (c->pw) {
		int64_t sTq = KX_ATT_S(k, at, Tq), sNB = KX_ATT_S(k, at, NB);
		kf_buf_puts(b, "  const int kf_ntiles = ");
		kx_dimlini(k, b, at->Tq, sTq, c->bm - 1, c->bm, 0);
		kf_buf_puts(b, " * (int)(");
		kx_dim(k, b, at->NB, sNB);
		kf_buf_puts(b, ");\n");
	} else {
		tile_indices(k, at, c, "(int)blockIdx.x");
	}
	/* full: the producer's expect_tx arrival and the bytes; empty: one
	 * arrival per consumer warp */
	kf_buf_printf(b, "  if (threadIdx.x == 0) {\n    kf_mbar_init(bar_q, 1);\n    kf_mbar_init(bar_qe, %d);\n"
		      "    for (int s = 0; s < %d; s++) {\n"
		      "      kf_mbar_init(bar_fk + s * 8, 1);\n      kf_mbar_init(bar_fv + s * 8, 1);\n"
		      "      kf_mbar_init(bar_ek + s * 8, %d);\n      kf_mbar_init(bar_ev + s * 8, %d);\n    }\n"
		      "    asm volatile(\"fence.mbarrier_init.release.cluster;\" ::: \"memory\");\n"
		      "    asm volatile(\"fence.proxy.async.shared::cta;\" ::: \"memory\");\n  }\n  __syncthreads();\n",
		      4 * nc, S, 4 * nc, 4 * nc);
}

/* Whether the slots of pre fit a consumer's registers beside the scores,
 * the output, P's fragments and some 40 more (an estimate; every tile
 * test_attention compiles with slots has no spill, none was tried at the
 * edge); none: no.  A slot of 8-byte values takes two registers each. */
static bool slots_fit(const kx_att *at, const wga_cfg *c, const kx_att_pre *pre)
{
	int regs = c->bn / 2 + (int)at->DV / 2 + c->bn / 4 + 40;
	for (int i = 0; i < pre->n; i++)
		regs += (pre->rowinv[i] ? c->bn / 4 : c->bn / 2) * (strcmp(kx_ct(pre->dt[i]), "float") && pre->dt[i] != KF_I1 ? 2 : 1);
	return pre->n > 0 && regs <= (c->bm == 192 ? 160 : 240) && !getenv("KFUSE_ATTN_NO_PRELOAD");
}

/* "so", the staged output, where the output's rows are 16-byte runs and
 * its tiles fit beside the stages chosen without them (a third stage is
 * worth more to a long row than 16-byte stores), but for a row of at most
 * two key tiles (head dim 128 at 128 keys), which has no use for a third
 * stage; $KFUSE_ATTN_OUT=pairs: kx_att_finish's pairs, for A/B runs. */
static void pick_so(const kx *k, const kx_att *at, wga_cfg *c, bool asked)
{
	const char *ao = getenv("KFUSE_ATTN_OUT");
	int x;
	c->so = kx_att_out16_fits(at) && !(ao && !strcmp(ao, "pairs"));
	if (c->so && !asked && c->s > 2 && kx_rep(k, at->Tk, KX_ATT_S(k, at, Tk)) <= 2 * c->bn &&
	    smem_of(at, c, &x, &x, &x) > 227 * 1024)
		c->s--;
	if (c->so && smem_of(at, c, &x, &x, &x) > 227 * 1024)
		c->so = false;
}

int kx_emit_attention_wgmma(kx *k, kx_att *at)
{
	const char *tile = kf_attr_str(k->g, k->at, "tile", NULL);
	if (!tile || !*tile)
		tile = getenv("KFUSE_ATTN_TILE");
	bool asked = tile && !strncmp(tile, "wga", 3);
	/* a device without wgmma, one not known to have it (kfuse-opt --emit)
	 * unless a wga tile asks, or an fa tile asked: the mma.sync kernel */
	if (k->wg < 0 || (k->wg == 0 && !asked) || (tile && *tile && !asked))
		return 1;
	if ((at->mdt != KF_F16 && at->mdt != KF_BF16) || (at->D != 64 && at->D != 128) || (at->DV != 64 && at->DV != 128) ||
	    kx_rep(k, at->Tq, KX_ATT_S(k, at, Tq)) < 16)
		return 1;
	wga_cfg c = {0};
	if (asked && !cfg_parse(tile, &c))
		return kx_fail(k, "attention tile '%s' is not wga<64|128|192>x<BN>s<2..4>[p][o][w] (BN a multiple of 16 up to 256; p with 2 or 3 consumers)",
			       tile);
	if (!asked)
		default_cfg(k, at, &c);
	pick_so(k, at, &c, asked);
	c.it = c.pw ? "kf_gi + it" : "it";
	c.it1 = c.pw ? "kf_gi + it - 1" : "it - 1";
	c.last = c.pw ? "kf_last" : "true";
	int r = at->q.view.rank;
	int64_t pTq = at->p ? at->p->Tq : at->Tq, pTk = at->p ? at->p->Tk : at->Tk;
	tmv m[3];
	if (!tmap_view(k, at, &at->q, r - 2, r - 1, at->Tq, pTq, at->D, &m[0]))
		return 1;
	if (!tmap_view(k, at, &at->k, r - 1, r - 2, at->Tk, pTk, at->D, &m[1])) {
		tmv_free(&m[0]);
		return 1;
	}
	if (!tmap_view(k, at, &at->v, r - 2, r - 1, at->Tk, pTk, at->DV, &m[2])) {
		tmv_free(&m[0]);
		tmv_free(&m[1]);
		return 1;
	}
	int qsz, ksz, vsz, smem = smem_of(at, &c, &qsz, &ksz, &vsz);
	if (smem > 227 * 1024) {
		for (int i = 0; i < 3; i++)
			tmv_free(&m[i]);
		return asked ? kx_fail(k, "attention tile %s needs %d bytes of shared memory", tile, smem) : 1;
	}
	kx_att_pre pre = {0};
	kf_buf split = {0};
	int hrc = at->fold ? 0 : kx_att_score_split(k, at, &pre, &split);
	c.pre = hrc == 0 && !at->fold && slots_fit(at, &c, &pre) ? &pre : NULL;
	if (c.pre)
		kf_buf_put(&k->decl, split.p, split.n);
	else if (hrc == 0 && !at->fold)
		hrc = kx_att_score_helper(k, at);
	kf_buf_free(&split);
	if (hrc != 0) {
		for (int i = 0; i < 3; i++)
			tmv_free(&m[i]);
		return -1;
	}
	const char *ty = at->mdt == KF_BF16 ? "bf16" : "f16";
	kf_buf_puts(&k->decl, kx_wg_helpers());
	kf_buf_puts(&k->decl, wga_helpers);
	kf_buf_puts(&k->decl, kx_att_helpers());
	kx_wg_mma_fn(&k->decl, ty, c.bn, 0, false);
	kx_wg_mma_fn(&k->decl, ty, c.bn, 0, true);
	rs_fn(&k->decl, ty, (int)at->DV);
	int nc = c.bm / 64;
	kf_kernel *kk = k->k;
	kk->sm90a = true;
	kk->block = 128 * (1 + nc);
	kk->units = (at->Tq + c.bm - 1) / c.bm * at->NB;
	kk->per_sm = -1;
	kk->walk = c.pw; /* the runtime launches a block per SM (kf_cuda_fit_walk) */
	kk->smem = smem;
	kk->ntmap = 3;
	const kx_attop *ops[3] = {&at->q, &at->k, &at->v};
	int box[3] = {64, c.bn, c.bn};
	for (int i = 0; i < 3; i++)
		kk->tmap[i] = (kf_tmap_spec){.param = ops[i]->param, .elem = 2, .inner = m[i].pitch, .mid = m[i].rows,
					     .outer = m[i].runs, .box_inner = 64, .box_outer = box[i]};
	kf_buf_printf(&k->b, "  /* wga%dx%ds%d%s%s%s: q, k, v by TMA%s%s */\n", c.bm, c.bn, c.s, c.pp ? "p" : "", c.ov ? "o" : "",
		      c.pw ? "w" : "", at->causal ? ", causal" : "", at->fold ? ", the scale in exp2" : "");
	block_head(k, at, &c, qsz, ksz, vsz);
	producer(k, at, &c, m, ksz, vsz);
	int rc = consumer(k, at, &c, ksz, vsz);
	for (int i = 0; i < 3; i++)
		tmv_free(&m[i]);
	if (rc != 0 || c.pw) /* a walk wrote each tile's output in its loop */
		return rc;
	return finish(k, at, &c);
}
