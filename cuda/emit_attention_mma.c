/* emit_attention_mma.c: the flash-attention kernel on tensor cores
 * (mma.sync m16n8k16, f16 or bf16; m16n8k8 tf32 for f32 where the fusion
 * says tf32 = true; the helpers of emit_mma.c).
 *
 * A block owns BM query rows of one batch index (BM / 16 warps, 16 rows
 * each) and walks the key tiles of BN keys: q's tile is loaded once into
 * shared memory and kept as fragments in registers; k and v tiles go
 * through a ring of S stages filled with 16-byte cp.async (element by
 * element through registers where an operand's layout or alignment does
 * not allow it).  Per tile, each warp computes its 16 x BN scores on the
 * tensor cores (S = Q K^T: k's rows, or its columns when k is stored
 * transposed, through ldmatrix), runs the score chain on them (the scale,
 * the masks: KF_KERNEL_score), updates its rows' running maximum and sum
 * (the online softmax; a row's values sit in the 4 lanes of a quad, so
 * two shuffles reduce them) and rescales its output accumulators, packs
 * the probabilities into the A fragments of the second product (the
 * accumulator layout of two n8 tiles is the A layout of one k16 step) and
 * adds P V.  The scores never leave registers.  At the end each row is
 * divided by its sum and written through the output's view.
 *
 * tf32 (f32 operands rounded to tf32 as the tensor cores read them):
 * tiles hold f32, and fragments are read with scalar shared loads
 * (ldmatrix moves 16-bit elements).  Both products permute their
 * contraction index in the same way on both sides, which leaves the sum
 * unchanged: k-index q4 of a step of 8 is element 2 q4 and q4 + 4 is 2 q4
 * + 1.  Then P's A fragment is the lane's own accumulators (a quad lane
 * holds columns 2 q4 and 2 q4 + 1, no shuffles), and where the
 * contraction runs along a tile's rows (k's head dims, v's keys, as
 * stored) the two elements sit side by side: one 8-byte load.  Paddings
 * keep each pattern free of bank conflicts: rows of cols + 8 floats where
 * a lane reads pairs along the row, cols + 4 where it reads down columns.
 *
 * Causal masks (emit_attention.c) limit the key tiles a block walks to
 * those at or left of its last row's diagonal and mask only the tiles
 * that cross it; blocks run the heaviest query tiles first.  The tile is
 * the fusion's `tile` attribute, else $KFUSE_ATTN_TILE, else the default:
 * "fa<BM>x<BN>s<S>".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "emit_att_int.h"

static const char att_helpers[] =
	"#ifndef KF_ATT_HELPERS\n"
	"#define KF_ATT_HELPERS\n"
	"__device__ __forceinline__ float kf_ex2(float x) { float y; asm(\"ex2.approx.ftz.f32 %0, %1;\" : \"=f\"(y) : \"f\"(x)); return y; }\n"
	"__device__ __forceinline__ unsigned kf_pack_h2(float lo, float hi) {\n"
	"  unsigned r; asm(\"cvt.rn.f16x2.f32 %0, %1, %2;\" : \"=r\"(r) : \"f\"(hi), \"f\"(lo)); return r; }\n"
	"__device__ __forceinline__ unsigned kf_pack_b2(float lo, float hi) {\n"
	"  unsigned r; asm(\"cvt.rn.bf16x2.f32 %0, %1, %2;\" : \"=r\"(r) : \"f\"(hi), \"f\"(lo)); return r; }\n"
	"#endif\n";

const char *kx_att_helpers(void) { return att_helpers; }

typedef struct fa_cfg {
	int bm, bn, s;
} fa_cfg;

/* "fa128x64s2" */
static bool cfg_parse(const char *t, fa_cfg *c)
{
	char end;
	return t && sscanf(t, "fa%dx%ds%d%c", &c->bm, &c->bn, &c->s, &end) == 3 && (c->bm == 64 || c->bm == 128) &&
	       (c->bn == 32 || c->bn == 64 || c->bn == 128) && c->s >= 2 && c->s <= 4;
}

/* The layout of a k or v tile in shared memory: keys as rows (the stored
 * rows are keys, or the operand goes through registers), or keys as
 * columns (stored transposed, copied as stored). */
typedef struct tl {
	bool keycols;      /* [dim][BN + pad] */
	bool raw;          /* copied with cp.async */
	bool pairs;        /* tf32: the product's contraction runs along the rows
			      (a lane reads 2 adjacent elements at once) */
	int rows, cols, ld;
	int epv;           /* elements in 16 bytes: 8 (f16, bf16) or 4 (f32) */
} tl;

/* Elements of the tiles' type in 16 bytes (a cp.async): f16 and bf16 8,
 * f32 (tf32) 4. */
static int epv_of(const kx_att *at) { return 16 / (int)kf_dtype_size(at->mdt); }

static tl tile_of(const kx *k, const kx_att *at, const kx_attop *op, int dim, const fa_cfg *c, bool isk)
{
	/* k is [D, Tk]: its keys are the columns; v is [Tk, DV]: the rows */
	int64_t kstride = isk ? op->cs : op->rs, dstride = isk ? op->rs : op->cs;
	tl t = {.epv = epv_of(at)};
	if (op->raw && dstride == 1 && dim % t.epv == 0)
		t.raw = true;
	else if (op->raw && kstride == 1 && kx_multiple(k, at->Tk, KX_ATT_S(k, at, Tk), t.epv))
		t.raw = t.keycols = true;
	t.rows = t.keycols ? dim : c->bn;
	t.cols = t.keycols ? c->bn : dim;
	/* k's contraction (head dims) is along rows of keys, v's (keys) along
	 * rows of head dims */
	t.pairs = at->mdt == KF_F32 && isk != t.keycols;
	t.ld = t.cols + (at->mdt == KF_F32 && !t.pairs ? 4 : 8);
	return t;
}

/* The loads of one k or v tile (inside the load lambda: `s` the stage's
 * tile, j0 its first key). */
static void load_kv(kx *k, const kx_att *at, const kx_attop *op, const tl *t, bool isk, const char *s,
		    const char *off, int nt)
{
	kf_buf *b = &k->b;
	const kx_attop *pop = kx_att_twin(at, op);
	int64_t kstride = isk ? op->cs : op->rs, dstride = isk ? op->rs : op->cs;
	int64_t skstride = pop ? kx_pmono(k, isk ? pop->cs : pop->rs) : kstride;
	int64_t sdstride = pop ? kx_pmono(k, isk ? pop->rs : pop->cs) : dstride, sTk = KX_ATT_S(k, at, Tk);
	if (t->raw) {
		int per = t->cols / t->epv;
		kf_buf_printf(b, "#pragma unroll\n    for (int c = threadIdx.x; c < %d; c += %d) {\n", t->rows * per, nt);
		kf_buf_printf(b, "      const int r = c / %d, f = (c %% %d) * %d;\n", per, per, t->epv);
		kf_buf_printf(b, "      const int j = j0 + %s;\n      const bool ok = j < ", t->keycols ? "f" : "r");
		kx_dim(k, b, at->Tk, sTk);
		kf_buf_printf(b, ";\n      kf_cp16(%s + r * %d + f, p%d + (ok ? %s + (long long)%s * ", s, t->ld, op->param, off,
			      t->keycols ? "r" : "j");
		if (!t->keycols)
			kx_dimll(k, b, kstride, skstride);
		else
			kx_dimll(k, b, dstride, sdstride);
		kf_buf_printf(b, " + %s : 0), ok);\n    }\n", t->keycols ? "j" : "f");
		return;
	}
	/* element by element, keys as rows: any strides */
	kf_buf_printf(b, "    for (int c = threadIdx.x; c < %d; c += %d) {\n", t->rows * t->cols, nt);
	kf_buf_printf(b, "      const int r = c / %d, f = c %% %d, j = j0 + r;\n", t->cols, t->cols);
	kf_buf_printf(b, "      %s[r * %d + f] = j < ", s, t->ld);
	kx_dim(k, b, at->Tk, sTk);
	kf_buf_printf(b, " ? p%d[%s + (long long)j * ", op->param, off);
	kx_dimll(k, b, kstride, skstride);
	kf_buf_puts(b, " + (long long)f * ");
	kx_dimll(k, b, dstride, sdstride);
	kf_buf_puts(b, "] : 0;\n    }\n");
}

/* The B fragments t[0..1] (n-tile n) and t[2..3] (n-tile n + 1) of k-step
 * kk from tile s of leading dimension ld: the n index walks the columns of
 * the product (keys of S = Q K^T; head dims of P V). */
static void frag_b(kf_buf *b, const tl *t, bool ncols, const char *s, const char *n8, const char *k16)
{
	/* the product's n dim is the tile's rows when ncols is false */
	if (!ncols)
		kf_buf_printf(b, "kf_ldsm4(t, %s + (%s + (lane & 7) + (lane >> 4) * 8) * %d + %s + ((lane >> 3) & 1) * 8);", s,
			      n8, t->ld, k16);
	else
		kf_buf_printf(b, "kf_ldsm4t(t, %s + (%s + (lane & 7) + ((lane >> 3) & 1) * 8) * %d + %s + (lane >> 4) * 8);", s,
			      k16, t->ld, n8);
}

/* tf32: the B fragment t[0..1] of the k-step from k8 and the n-tile from
 * n8: elements (k8 + 2 q4, n8 + g) and (k8 + 2 q4 + 1, n8 + g) of the
 * product's B, rounded to tf32. */
static void frag_b32(kf_buf *b, const tl *t, const char *s, const char *n8, const char *k8)
{
	if (t->pairs)
		kf_buf_printf(b, "{\n          const float2 w = *(const float2 *)(%s + (%s + g) * %d + %s + 2 * q4);\n"
			      "          t[0] = kf_tf32(w.x);\n          t[1] = kf_tf32(w.y);\n        }", s, n8, t->ld, k8);
	else
		kf_buf_printf(b, "t[0] = kf_tf32(%s[(%s + 2 * q4) * %d + %s + g]);\n        t[1] = kf_tf32(%s[(%s + 2 * q4 + 1) * %d + %s + g]);",
			      s, k8, t->ld, n8, s, k8, t->ld, n8);
}

static void default_cfg(const kx *k, const kx_att *at, fa_cfg *c)
{
	/* a sized plan: for its bucket's rows */
	c->bm = kx_rep(k, at->Tq, KX_ATT_S(k, at, Tq)) > 64 ? 128 : 64;
	c->bn = 64;
	c->s = 2;
}

/* q's tile, once: 16-byte cp.async where it is read as stored, else
 * element by element through registers (its prologue applied, rounded to
 * the tensor cores' type). */
static void load_q(kx *k, const kx_att *at, const fa_cfg *c, bool qraw, int lq, int nt)
{
	kf_buf *b = &k->b;
	int D = (int)at->D;
	int64_t sTq = KX_ATT_S(k, at, Tq), srs = KX_ATT_S(k, at, q.rs), scs = KX_ATT_S(k, at, q.cs);
	int epv = epv_of(at);
	if (qraw) {
		kf_buf_printf(b, "#pragma unroll\n  for (int c = threadIdx.x; c < %d; c += %d) {\n", c->bm * (D / epv), nt);
		kf_buf_printf(b, "    const int r = c / %d, f = (c %% %d) * %d, i = q0 + r;\n    const bool ok = i < ", D / epv,
			      D / epv, epv);
		kx_dim(k, b, at->Tq, sTq);
		kf_buf_printf(b, ";\n    kf_cp16(sq + r * %d + f, p%d + (ok ? qo + (long long)i * ", lq, at->q.param);
		kx_dimll(k, b, at->q.rs, srs);
		kf_buf_puts(b, " + f : 0), ok);\n  }\n");
		return;
	}
	kf_buf_printf(b, "  for (int c = threadIdx.x; c < %d; c += %d) {\n", c->bm * D, nt);
	kf_buf_printf(b, "    const int r = c / %d, f = c %% %d, i = q0 + r;\n    float x = 0.0f;\n", D, D);
	kf_buf_puts(b, "    if (i < ");
	kx_dim(k, b, at->Tq, sTq);
	kf_buf_puts(b, ") {\n      const long long e = qo + (long long)i * ");
	kx_dimll(k, b, at->q.rs, srs);
	kf_buf_puts(b, " + (long long)f * ");
	kx_dimll(k, b, at->q.cs, scs);
	kf_buf_puts(b, ";\n");
	kf_buf_puts(b, "      x = ");
	kf_buf lv = {0};
	kx_load(&lv, at->q.st, "p%d[e]", at->q.param);
	if (at->q.npro) {
		kf_buf call = {0};
		kx_att_qpro_call(k, &call);
		kf_buf_printf(b, "%.*s%.*s);\n", (int)call.n, call.p, (int)lv.n, lv.p);
		kf_buf_free(&call);
	} else {
		kf_buf_printf(b, "%.*s;\n", (int)lv.n, lv.p);
	}
	kf_buf_free(&lv);
	/* (tf32: rounded where the fragments are read) */
	kf_buf_printf(b, "    }\n    sq[r * %d + f] = %s(x);\n  }\n", lq,
		      at->mdt == KF_F16 ? "kf_f2h" : at->mdt == KF_BF16 ? "kf_f2b" : "");
}

/* The block's indices: its batch index z and first query row q0 (the
 * heaviest query tiles, the last under a causal mask, first), the
 * operands' offsets, and nt, the key tiles it walks. */
static void block_head(kx *k, const kx_att *at, const fa_cfg *c)
{
	kf_buf *b = &k->b;
	int64_t sTk = KX_ATT_S(k, at, Tk);
	kx_att_block_z_q0(k, at, c->bm, false, "blockIdx.x");
	kf_buf q = {0}, kk = {0}, vv = {0};
	kx_att_boff(k, at, &at->q.view, "z", &q);
	kx_att_boff(k, at, &at->k.view, "z", &kk);
	kx_att_boff(k, at, &at->v.view, "z", &vv);
	kf_buf_printf(b, "  const long long qo = %.*s, ko = %.*s, vo = %.*s;\n", (int)q.n, q.p, (int)kk.n, kk.p, (int)vv.n,
		      vv.p);
	kf_buf_free(&q);
	kf_buf_free(&kk);
	kf_buf_free(&vv);
	kf_buf_puts(b, "  const int nt = ");
	if (at->causal)
		kf_buf_puts(b, "min(");
	kx_dimlini(k, b, at->Tk, sTk, c->bn - 1, c->bn, 0); /* the key tiles */
	if (at->causal)
		kf_buf_printf(b, ", (q0 + %lld) / %d + 1)", (long long)(c->bm - 1 + at->off), c->bn);
	kf_buf_puts(b, ";\n");
}

/* The head of the key-tile loop: the ring's wait and refill, this tile's
 * k and v stages (ks, vs, of element type et) and the scores' zeroed
 * accumulators sc. */
static void loop_head(kx *k, const fa_cfg *c, const char *et, int ksz, int vsz)
{
	kf_buf *b = &k->b;
	int S = c->s;
	kf_buf_puts(b, "  for (int jt = 0; jt < nt; jt++) {\n");
	kf_buf_printf(b, "    kf_cp_wait<%d>();\n    __syncthreads();\n", S - 2);
	/* the stage refilled now was read in the previous iteration, which every
	 * warp has finished: they all passed the barrier above */
	kf_buf_printf(b, "    if (jt + %d < nt) load((jt + %d) %% %d, jt + %d);\n    kf_cp_commit();\n", S - 1, S - 1, S, S - 1);
	kf_buf_printf(b, "    const %s *const ks = sk + (jt %% %d) * %d, *const vs = sv + (jt %% %d) * %d;\n", et, S, ksz, S,
		      vsz);
	kf_buf_printf(b, "    float sc[%d];\n#pragma unroll\n    for (int i = 0; i < %d; i++) sc[i] = 0.0f;\n", c->bn / 2,
		      c->bn / 2);
}

/* The key-tile loop: S = Q K^T on the tensor cores, the scores and the
 * softmax (emit_attention.c), O += P V. */
static void tile_loop(kx *k, const kx_att *at, const fa_cfg *c, const tl *tk, const tl *tv, int ksz, int vsz)
{
	kf_buf *b = &k->b;
	int D = (int)at->D, DV = (int)at->DV, BN = c->bn;
	const char *mma = at->mdt == KF_F16 ? "kf_mma_f16" : "kf_mma_bf16";
	loop_head(k, c, "unsigned short", ksz, vsz);
	kf_buf_printf(b, "#pragma unroll\n    for (int kk = 0; kk < %d; kk++)\n#pragma unroll\n      for (int j = 0; j < %d; j += 2) {\n"
		      "        unsigned t[4];\n        ", D / 16, BN / 8);
	frag_b(b, tk, tk->keycols, "ks", "j * 8", "kk * 16");
	kf_buf_printf(b, "\n        %s(sc + 4 * j, qf[kk], t);\n        %s(sc + 4 * (j + 1), qf[kk], t + 2);\n      }\n", mma, mma);
	kx_att_step st = {.bn = BN, .dv = DV, .qpart = !kx_multiple(k, at->Tq, KX_ATT_S(k, at, Tq), c->bm), .mask = KX_MASK_EDGE, .rowmin = "q0"};
	kx_att_tile_scores(k, at, &st);
	kx_att_tile_softmax(k, at, BN, DV);
	kf_buf_printf(b, "#pragma unroll\n    for (int kk = 0; kk < %d; kk++)\n#pragma unroll\n      for (int n = 0; n < %d; n += 2) {\n"
		      "        unsigned t[4];\n        ", BN / 16, DV / 8);
	frag_b(b, tv, !tv->keycols, "vs", "n * 8", "kk * 16");
	kf_buf_printf(b, "\n        %s(oacc + 4 * n, pf[kk], t);\n        %s(oacc + 4 * (n + 1), pf[kk], t + 2);\n      }\n  }\n",
		      mma, mma);
}

/* tf32's key-tile loop: the steps of tile_loop with m16n8k8 products, the
 * contraction permuted (the file's head); P's A fragments are the
 * exponentials in sc, read in place. */
static void tile_loop32(kx *k, const kx_att *at, const fa_cfg *c, const tl *tk, const tl *tv, int ksz, int vsz)
{
	kf_buf *b = &k->b;
	int D = (int)at->D, DV = (int)at->DV, BN = c->bn;
	loop_head(k, c, "float", ksz, vsz);
	kf_buf_printf(b, "#pragma unroll\n    for (int kk = 0; kk < %d; kk++)\n#pragma unroll\n      for (int j = 0; j < %d; j++) {\n"
		      "        unsigned t[2];\n        ", D / 8, BN / 8);
	frag_b32(b, tk, "ks", "j * 8", "kk * 8");
	kf_buf_puts(b, "\n        kf_mma_tf32(sc + 4 * j, qf[kk], t);\n      }\n");
	kx_att_step st = {.bn = BN, .dv = DV, .qpart = !kx_multiple(k, at->Tq, KX_ATT_S(k, at, Tq), c->bm), .mask = KX_MASK_EDGE, .rowmin = "q0"};
	kx_att_tile_scores(k, at, &st);
	kx_att_tile_max(k, at, &st);
	kx_att_tile_rescale(k, DV);
	kx_att_tile_exp(k, at, &st, false);
	kf_buf_printf(b, "#pragma unroll\n    for (int kk = 0; kk < %d; kk++) {\n"
		      "      const unsigned pa[4] = {kf_tf32(sc[4 * kk]), kf_tf32(sc[4 * kk + 2]), kf_tf32(sc[4 * kk + 1]), kf_tf32(sc[4 * kk + 3])};\n"
		      "#pragma unroll\n      for (int n = 0; n < %d; n++) {\n        unsigned t[2];\n        ", BN / 8, DV / 8);
	frag_b32(b, tv, "vs", "n * 8", "kk * 8");
	kf_buf_puts(b, "\n        kf_mma_tf32(oacc + 4 * n, pa, t);\n      }\n    }\n  }\n");
}

int kx_emit_attention_mma(kx *k, kx_att *at)
{
	/* (a sized plan: at its bucket's rows, so that the bucket shares a kernel;
	 * fewer rows are a partial tile) */
	/* tf32: k-steps and n-tiles of 8 */
	bool t32 = at->mdt == KF_F32;
	int step = t32 ? 8 : 16;
	if ((at->mdt != KF_F16 && at->mdt != KF_BF16 && !(t32 && at->tf32)) || at->D % step || at->DV % step ||
	    at->D > 128 || at->DV > 128 || kx_rep(k, at->Tq, KX_ATT_S(k, at, Tq)) < 16)
		return 1;
	fa_cfg c;
	const char *tile = kf_attr_str(k->g, k->at, "tile", NULL);
	if (!tile || !*tile)
		tile = getenv("KFUSE_ATTN_TILE");
	if (tile && !strncmp(tile, "wga", 3)) /* the wgmma kernel's, which did not fit: the default here */
		tile = NULL;
	if (tile && *tile && !cfg_parse(tile, &c))
		return kx_fail(k, "attention tile '%s' is not fa<64|128>x<32|64|128>s<2..4>", tile);
	if (!tile || !*tile)
		default_cfg(k, at, &c);
	int nt = 32 * (c.bm / 16), D = (int)at->D, DV = (int)at->DV, S = c.s;
	tl tk = tile_of(k, at, &at->k, D, &c, true), tv = tile_of(k, at, &at->v, DV, &c, false);
	/* (tf32: q's fragments are read once, its conflicts do not matter) */
	int lq = D + (t32 ? 4 : 8), qsz = c.bm * lq, ksz = tk.rows * tk.ld, vsz = tv.rows * tv.ld;
	int smem = (qsz + S * (ksz + vsz)) * (t32 ? 4 : 2);
	if (smem > 227 * 1024)
		return kx_fail(k, "attention tile %s needs %d bytes of shared memory", tile ? tile : "(default)", smem);
	bool qraw = at->q.raw && at->q.cs == 1 && D % epv_of(at) == 0;
	const char *et = t32 ? "float" : "unsigned short";
	kf_buf *b = &k->b;
	kf_buf_puts(&k->decl, kx_mm_helpers());
	kf_buf_puts(&k->decl, att_helpers);
	k->k->block = nt;
	k->k->units = (at->Tq + c.bm - 1) / c.bm * at->NB;
	k->k->per_sm = -1;
	k->k->smem = smem;
	kf_buf_printf(b, "  /* fa%dx%ds%d%s: q %s%s, k %s, v %s%s */\n", c.bm, c.bn, S, t32 ? " tf32" : "", qraw ? "cp.async" : "registers",
		      at->q.npro ? " + prologue" : "", tk.raw ? (tk.keycols ? "cp.async, keys as columns" : "cp.async")
							       : "registers",
		      tv.raw ? (tv.keycols ? "cp.async, keys as columns" : "cp.async") : "registers",
		      at->causal ? ", causal" : "");
	kf_buf_printf(b, "  extern __shared__ __align__(16) unsigned char kf_smem[];\n");
	kf_buf_printf(b, "  %s *const sq = (%s *)kf_smem, *const sk = sq + %d, *const sv = sk + %d;\n", et, et, qsz, S * ksz);
	kf_buf_puts(b, "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, q4 = lane & 3;\n");
	block_head(k, at, &c);
	load_q(k, at, &c, qraw, lq, nt);
	kf_buf_puts(b, "  kf_cp_commit();\n");
	/* k and v tiles: the ring */
	kf_buf_printf(b, "  auto load = [&](int stage, int jt) {\n    %s *const ks = sk + stage * %d, *const vs = sv + stage * %d;\n"
		      "    const int j0 = jt * %d;\n", et, ksz, vsz, c.bn);
	load_kv(k, at, &at->k, &tk, true, "ks", "ko", nt);
	load_kv(k, at, &at->v, &tv, false, "vs", "vo", nt);
	kf_buf_puts(b, "  };\n");
	kf_buf_printf(b, "#pragma unroll\n  for (int s = 0; s < %d; s++) {\n    if (s < nt) load(s, s);\n    kf_cp_commit();\n  }\n",
		      S - 1);
	kf_buf_printf(b, "  kf_cp_wait<%d>();\n  __syncthreads();\n", S - 1);
	if (t32) /* A: (g, 2 q4), (g + 8, 2 q4), (g, 2 q4 + 1), (g + 8, 2 q4 + 1) of each step */
		kf_buf_printf(b, "  unsigned qf[%d][4];\n#pragma unroll\n  for (int kk = 0; kk < %d; kk++) {\n"
			      "    const float *const a = sq + (warp * 16 + g) * %d + kk * 8 + 2 * q4;\n"
			      "    qf[kk][0] = kf_tf32(a[0]);\n    qf[kk][1] = kf_tf32(a[%d]);\n"
			      "    qf[kk][2] = kf_tf32(a[1]);\n    qf[kk][3] = kf_tf32(a[%d]);\n  }\n",
			      D / 8, D / 8, lq, 8 * lq, 8 * lq + 1);
	else
		kf_buf_printf(b, "  unsigned qf[%d][4];\n#pragma unroll\n  for (int kk = 0; kk < %d; kk++)\n"
			      "    kf_ldsm4(qf[kk], sq + (warp * 16 + (lane & 15)) * %d + kk * 16 + (lane >> 4) * 8);\n",
			      D / 16, D / 16, lq);
	kf_buf_printf(b, "  float oacc[%d];\n#pragma unroll\n  for (int i = 0; i < %d; i++) oacc[i] = 0.0f;\n", DV / 2, DV / 2);
	kf_buf_puts(b, "  float m0 = -KF_INF, m1 = -KF_INF, l0 = 0.0f, l1 = 0.0f;\n"
		       "  const int r0 = q0 + warp * 16 + g, r1 = r0 + 8;\n");
	if (t32)
		tile_loop32(k, at, &c, &tk, &tv, ksz, vsz);
	else
		tile_loop(k, at, &c, &tk, &tv, ksz, vsz);
	return kx_att_finish(k, at, DV);
}
