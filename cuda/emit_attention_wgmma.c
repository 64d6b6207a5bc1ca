/* emit_attention_wgmma.c: the flash-attention kernel for Hopper (sm_90a):
 * TMA loads into a ring of shared-memory stages, wgmma on the tensor
 * cores, a producer warpgroup and consumer warpgroups (the machinery of
 * emit_wgmma.c: its helpers, descriptors and 128-byte swizzled layouts).
 *
 * Tile "wga<BM>x<BN>s<S>" (BM 64 or 128: 1 or 2 consumer warpgroups of 64
 * query rows; BN 64 or 128 keys; S stages).  Warpgroup 0 is the producer:
 * it gives up registers and one thread loads q's tile once (bar_q) and then
 * each key tile's k (K-major: BN rows of 64 head dims, D / 64 boxes) and v
 * (N-major: boxes of 64 keys x 64 head dims) into stage jt % S, completing
 * on the stage's `full` mbarrier after waiting for its `empty` one.  Each
 * consumer warpgroup takes registers and, per key tile: S = Q K^T with
 * wgmma m64nBNk16 (q and k by descriptor), the score chain and the online
 * softmax on the accumulators (the same per-thread layout as mma.sync's:
 * rows 16 warp + lane / 4 and + 8, so the code is emit_attention_mma.c's),
 * the probabilities packed into A fragments in registers, O += P V with
 * wgmma m64nDVk16 (A from registers, v by descriptor, trans-b), and the
 * stage released (one arrival per warp).  The output is divided by the
 * rows' sums and written through its view (KF_KERNEL_out2).
 *
 * q, k and v must each be read as stored with contiguous head dims, in a
 * layout a 3-D tensor map takes: [runs][rows][pitch] with the operand's
 * rows a whole run (so TMA zero-fills rows past the sequence) and its head
 * dims at a column offset within the pitch (q, k and v split from one
 * projection, heads side by side).  Head dims 64 or 128.  Otherwise, or
 * without wgmma on the device, the mma.sync kernel runs.  For now a tile
 * must ask for it (the fusion's `tile`, or $KFUSE_ATTN_TILE): it has run
 * on the host emulation (tests/unit/kf_emu.h, which runs the H200-proven
 * wgmma matmul right too), not on a GPU yet.
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

/* The map of operand op whose rows (the sequence: dim `rd` of its view)
 * have stride P and whose head dims (dim `hd`, `cols` of them) are
 * contiguous: every batch factor either moves whole runs of rows * P or
 * stays within a row's pitch; false when the layout does not fit. */
static bool tmap_view(kx *k, const kx_att *at, const kx_attop *op, int rd, int hd, int64_t rows, int64_t cols, tmv *t)
{
	const kf_view *v = &op->view;
	int64_t P = kf_view_stride(v, rd), run = rows * P, e = (int64_t)kf_dtype_size(op->st);
	if (P <= 0 || kf_view_stride(v, hd) != 1 || (P * e) % 16 || !op->raw || op->st != at->mdt)
		return false;
	int64_t numel = kx_numel(k, k->param[op->param]);
	if (numel % run || v->off % run >= P)
		return false;
	memset(t, 0, sizeof *t);
	t->pitch = P;
	t->rows = rows;
	t->runs = numel / run;
	int64_t colmax = v->off % run;
	kf_buf_printf(&t->run, "(%lld", (long long)(v->off / run));
	kf_buf_printf(&t->col, "(%lld", (long long)(v->off % run));
	for (int d = 0; d < at->nb; d++) {
		const kf_view_dim *x = &v->d[d];
		int64_t after = 1, inner = x->size;
		for (int f = d + 1; f < at->nb; f++)
			after *= at->a.B.dim[f];
		for (int f = 0; f < x->nf; f++) {
			inner /= x->ext[f];
			int64_t s = x->stride[f];
			if (!s)
				continue;
			if (s < 0)
				return false;
			bool whole = s % run == 0;
			if (!whole)
				colmax += (x->ext[f] - 1) * s;
			kf_buf_printf(whole ? &t->run : &t->col, " + (int)((z / %lld) %% %lld) * %lld", (long long)(after * inner),
				      (long long)x->ext[f], (long long)(whole ? s / run : s));
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
} wga_cfg;

static bool cfg_parse(const char *t, wga_cfg *c)
{
	char end;
	return t && sscanf(t, "wga%dx%ds%d%c", &c->bm, &c->bn, &c->s, &end) == 3 && (c->bm == 64 || c->bm == 128) &&
	       (c->bn == 64 || c->bn == 128) && c->s >= 2 && c->s <= 4;
}

/* The producer warpgroup: one thread loads q once, then the key tiles. */
static void producer(kx *k, const kx_att *at, const wga_cfg *c, const tmv *m, int nc, int ksz, int vsz)
{
	kf_buf *b = &k->b;
	int D = (int)at->D, DV = (int)at->DV, BN = c->bn, S = c->s;
	kf_buf_puts(b, "  if (wg == 0) {\n    asm volatile(\"setmaxnreg.dec.sync.aligned.u32 40;\");\n"
		       "    if (threadIdx.x != 0) return;\n");
	kf_buf_printf(b, "    kf_mbar_expect(bar_q, %d);\n", nc * (D / 64) * 8192);
	for (int cw = 0; cw < nc; cw++)
		for (int kc = 0; kc < D / 64; kc++)
			kf_buf_printf(b, "    kf_tma3d(sq + %d, &tm0, %.*s + %d, q0 + %d, %.*s, bar_q);\n", (cw * (D / 64) + kc) * 8192,
				      (int)m[0].col.n, m[0].col.p, kc * 64, cw * 64, (int)m[0].run.n, m[0].run.p);
	kf_buf_printf(b, "    for (int jt = 0; jt < nt; jt++) {\n      const int s = jt %% %d;\n", S);
	kf_buf_printf(b, "      if (jt >= %d) kf_mbar_wait(bar_empty + s * 8, ((jt / %d) - 1) & 1);\n", S, S);
	kf_buf_printf(b, "      kf_mbar_expect(bar_full + s * 8, %d);\n", ksz + vsz);
	kf_buf_printf(b, "      const unsigned ks = sk + s * %d, vs = sv + s * %d;\n", ksz, vsz);
	for (int kc = 0; kc < D / 64; kc++)
		kf_buf_printf(b, "      kf_tma3d(ks + %d, &tm1, %.*s + %d, jt * %d, %.*s, bar_full + s * 8);\n", kc * BN * 128,
			      (int)m[1].col.n, m[1].col.p, kc * 64, BN, (int)m[1].run.n, m[1].run.p);
	for (int kb = 0; kb < BN / 64; kb++)
		for (int nb = 0; nb < DV / 64; nb++)
			kf_buf_printf(b, "      kf_tma3d(vs + %d, &tm2, %.*s + %d, jt * %d + %d, %.*s, bar_full + s * 8);\n",
				      (kb * (DV / 64) + nb) * 8192, (int)m[2].col.n, m[2].col.p, nb * 64, BN, kb * 64,
				      (int)m[2].run.n, m[2].run.p);
	kf_buf_puts(b, "    }\n    return;\n  }\n");
}

/* A consumer warpgroup: 64 query rows, every key tile. */
static void consumer(kx *k, const kx_att *at, const wga_cfg *c, int nc, int ksz, int vsz)
{
	kf_buf *b = &k->b;
	int D = (int)at->D, DV = (int)at->DV, BN = c->bn, S = c->s;
	const char *ty = at->mdt == KF_BF16 ? "bf16" : "f16";
	kf_buf_printf(b, "  asm volatile(\"setmaxnreg.inc.sync.aligned.u32 %d;\");\n", nc == 2 ? 232 : 240);
	kf_buf_printf(b, "  const int cw = wg - 1, g = lane >> 2, q4 = lane & 3;\n"
		      "  const int r0 = q0 + cw * 64 + (warp & 3) * 16 + g, r1 = r0 + 8;\n");
	kf_buf_printf(b, "  float oacc[%d];\n#pragma unroll\n  for (int i = 0; i < %d; i++) oacc[i] = 0.0f;\n", DV / 2, DV / 2);
	kf_buf_puts(b, "  float m0 = -KF_INF, m1 = -KF_INF, l0 = 0.0f, l1 = 0.0f;\n  kf_mbar_wait(bar_q, 0);\n");
	kf_buf_printf(b, "  for (int jt = 0; jt < nt; jt++) {\n    const int s = jt %% %d;\n", S);
	kf_buf_printf(b, "    kf_mbar_wait(bar_full + s * 8, (jt / %d) & 1);\n", S);
	kf_buf_printf(b, "    const unsigned ks = sk + s * %d, vs = sv + s * %d;\n", ksz, vsz);
	/* S = Q K^T: k-step kk of 16 head dims, in box kk / 4 at + 32 bytes */
	kf_buf_printf(b, "    float sc[%d];\n#pragma unroll\n    for (int i = 0; i < %d; i++) sc[i] = 0.0f;\n", BN / 2, BN / 2);
	kf_buf_printf(b, "    kf_wg_fence();\n#pragma unroll\n    for (int kk = 0; kk < %d; kk++)\n", D / 16);
	kf_buf_printf(b, "      kf_wgmma_%s_n%d_t0(sc, kf_wg_desc(sq + (cw * %d + kk / 4) * 8192 + (kk %% 4) * 32, 16, 1024),\n"
		      "                        kf_wg_desc(ks + (kk / 4) * %d + (kk %% 4) * 32, 16, 1024));\n",
		      ty, BN, D / 64, BN * 128);
	kf_buf_puts(b, "    kf_wg_commit();\n    kf_wg_wait<0>();\n");
	/* the scores: sc[i] at row r0 + 8 ((i >> 1) & 1), column 8 (i >> 2) + 2 q4 + (i & 1) */
	kx_att_tile_scores(k, at, BN, at->Tq % c->bm != 0, "(q0 + cw * 64)");
	kx_att_tile_softmax(k, at, BN, DV);
	/* O += P V: k-step kk of 16 keys, in key box kk / 4 at + 2048 bytes;
	 * head-dim boxes of 64 are 8 KiB apart (LBO) */
	kf_buf_printf(b, "    kf_wg_fence();\n#pragma unroll\n    for (int kk = 0; kk < %d; kk++)\n", BN / 16);
	kf_buf_printf(b, "      kf_wgmma_rs_%s_n%d_t1(oacc, pf[kk], kf_wg_desc(vs + (kk / 4) * %d + (kk %% 4) * 2048, 8192, 1024));\n",
		      ty, DV, (DV / 64) * 8192);
	kf_buf_puts(b, "    kf_wg_commit();\n    kf_wg_wait<0>();\n    if (lane == 0) kf_mbar_arrive(bar_empty + s * 8);\n  }\n");
}

int kx_emit_attention_wgmma(kx *k, kx_att *at)
{
	const char *tile = kf_attr_str(k->g, k->at, "tile", NULL);
	if (!tile || !*tile)
		tile = getenv("KFUSE_ATTN_TILE");
	bool asked = tile && !strncmp(tile, "wga", 3);
	/* only when a wga tile asks for it (and the device is not known to
	 * lack wgmma): it has run on the host emulation only (test_attention),
	 * not yet on a GPU; the mma.sync kernel stays the default until it has */
	if (k->wg < 0 || !asked)
		return 1;
	if ((at->mdt != KF_F16 && at->mdt != KF_BF16) || (at->D != 64 && at->D != 128) || (at->DV != 64 && at->DV != 128) ||
	    at->Tq < 16)
		return 1;
	wga_cfg c = {at->Tq > 64 ? 128 : 64, 128, 2};
	if (asked && !cfg_parse(tile, &c))
		return kx_fail(k, "attention tile '%s' is not wga<64|128>x<64|128>s<2..4>", tile);
	int r = at->q.view.rank;
	tmv m[3];
	if (!tmap_view(k, at, &at->q, r - 2, r - 1, at->Tq, at->D, &m[0]))
		return 1;
	if (!tmap_view(k, at, &at->k, r - 1, r - 2, at->Tk, at->D, &m[1])) {
		tmv_free(&m[0]);
		return 1;
	}
	if (!tmap_view(k, at, &at->v, r - 2, r - 1, at->Tk, at->DV, &m[2])) {
		tmv_free(&m[0]);
		tmv_free(&m[1]);
		return 1;
	}
	int nc = c.bm / 64, D = (int)at->D, DV = (int)at->DV, BN = c.bn, S = c.s;
	int qsz = nc * (D / 64) * 8192, ksz = (D / 64) * BN * 128, vsz = (BN / 64) * (DV / 64) * 8192;
	int smem = qsz + S * (ksz + vsz) + 1024 + 8 * (2 * S + 1);
	if (smem > 227 * 1024) {
		for (int i = 0; i < 3; i++)
			tmv_free(&m[i]);
		return asked ? kx_fail(k, "attention tile %s needs %d bytes of shared memory", tile, smem) : 1;
	}
	const char *ty = at->mdt == KF_BF16 ? "bf16" : "f16";
	kf_buf_puts(&k->decl, kx_wg_helpers());
	kf_buf_puts(&k->decl, wga_helpers);
	kf_buf_puts(&k->decl, kx_att_helpers());
	kx_wg_mma_fn(&k->decl, ty, BN, 0);
	rs_fn(&k->decl, ty, DV);
	int64_t nqt = (at->Tq + c.bm - 1) / c.bm, NT = (at->Tk + BN - 1) / BN;
	kf_kernel *kk = k->k;
	kk->sm90a = true;
	kk->block = 128 * (1 + nc);
	kk->units = nqt * at->NB;
	kk->per_sm = -1;
	kk->smem = smem;
	kk->ntmap = 3;
	const kx_attop *ops[3] = {&at->q, &at->k, &at->v};
	int box[3] = {64, BN, 64};
	for (int i = 0; i < 3; i++)
		kk->tmap[i] = (kf_tmap_spec){.param = ops[i]->param, .elem = 2, .inner = m[i].pitch, .mid = m[i].rows,
					     .outer = m[i].runs, .box_inner = 64, .box_outer = box[i]};
	kf_buf *b = &k->b;
	kf_buf_printf(b, "  /* wga%dx%ds%d: q, k, v by TMA%s */\n", c.bm, BN, S, at->causal ? ", causal" : "");
	/* the tiles 1024-byte aligned (the swizzle's period), the barriers after them */
	kf_buf_printf(b, "  extern __shared__ __align__(1024) unsigned char kf_smem[];\n"
		      "  const unsigned sq = (kf_wg_saddr(kf_smem) + 1023u) & ~1023u, sk = sq + %d, sv = sk + %d;\n"
		      "  const unsigned bar_q = sv + %d, bar_full = bar_q + 8, bar_empty = bar_full + %d;\n",
		      qsz, S * ksz, S * vsz, 8 * S);
	kf_buf_puts(b, "  const int wg = threadIdx.x >> 7, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;\n");
	kf_buf_printf(b, "  const int z = blockIdx.x %% %lld, q0 = (%lld - (int)(blockIdx.x / %lld)) * %d;\n", (long long)at->NB,
		      (long long)(nqt - 1), (long long)at->NB, c.bm);
	if (at->causal)
		kf_buf_printf(b, "  const int nt = min(%lld, (q0 + %lld) / %d + 1);\n", (long long)NT,
			      (long long)(c.bm - 1 + at->off), BN);
	else
		kf_buf_printf(b, "  const int nt = %lld;\n", (long long)NT);
	/* full: the producer's expect_tx arrival and the bytes; empty: one
	 * arrival per consumer warp */
	kf_buf_printf(b, "  if (threadIdx.x == 0) {\n    kf_mbar_init(bar_q, 1);\n    for (int s = 0; s < %d; s++) {\n"
		      "      kf_mbar_init(bar_full + s * 8, 1);\n      kf_mbar_init(bar_empty + s * 8, %d);\n    }\n"
		      "    asm volatile(\"fence.mbarrier_init.release.cluster;\" ::: \"memory\");\n"
		      "    asm volatile(\"fence.proxy.async.shared::cta;\" ::: \"memory\");\n  }\n  __syncthreads();\n",
		      S, 4 * nc);
	producer(k, at, &c, m, nc, ksz, vsz);
	consumer(k, at, &c, nc, ksz, vsz);
	for (int i = 0; i < 3; i++)
		tmv_free(&m[i]);
	return kx_att_finish(k, at, DV);
}
