/* emit_att_int.h: the attention emitter's working state, shared by
 * cuda/emit_attention.c (analysis, helpers, the choice of kernel),
 * emit_attention_mma.c (the tensor-core flash kernel),
 * emit_attention_wgmma.c (the Hopper one), emit_attention_tile.c (their
 * steps on a key tile) and emit_attention_simt.c (the split-key kernel for
 * decoding and the rest); not for other modules. */
#ifndef KF_EMIT_ATT_INT_H
#define KF_EMIT_ATT_INT_H

#include "attention.h"
#include "emit_int.h"

/* One operand, q, k or v: a view of a parameter, [B..., rows, cols]. */
typedef struct kx_attop {
	int param;             /* parameter index of the base */
	kf_dtype st;           /* its stored dtype */
	kf_dtype dt;           /* dtype at the matmul, after the prologue */
	kf_view view;          /* [B..., rows, cols] over the parameter */
	int64_t rs, cs;        /* strides of rows and columns (one of them 1) */
	kf_nid pro[KF_ATT_CHAIN]; /* q: its scales and casts, from the parameter on */
	int npro;
	bool raw;              /* read as stored in 16-byte pieces (no prologue op,
				  st == dt, contiguous dim and every offset 16-byte aligned) */
} kx_attop;

typedef struct kx_att {
	kf_att a;
	int nb;                /* batch rank */
	int64_t NB, Tq, Tk, D, DV;
	kx_attop q, k, v;      /* q [B.., Tq, D], k [B.., D, Tk], v [B.., Tk, DV] */
	kf_view o;             /* the output as [B..., Tq, DV] over out0 */
	int64_t ors;           /* its row stride (columns are contiguous) */
	kf_dtype odt;          /* the output's stored dtype */
	kf_dtype mdt;          /* dtype of the matmuls' operands: the tensor cores' type */
	/* a causal mask (the pass's form: comparisons of iotas) applied by
	 * score-chain node cnode: column j of row i is kept when j <= i + off */
	bool causal;
	int64_t off;
	kf_nid cnode;
	bool tf32;             /* f32 may use tf32 tensor cores (the fusion's tf32) */
	/* the score chain, the causal mask aside, is one scale by a positive
	 * constant: node fnode, s * c or s / c (its operand fconst the
	 * constant); the wgmma kernel folds it into exp2 */
	bool fold;
	kf_nid fnode;
	int fconst;
	/* the score chain may give finite scores of huge magnitude (a mask
	 * adding or selecting finfo.min in f32 or bf16): then the chain clamps
	 * them to -1e38 and the exponents are (s - m) log2(e), not the fused s
	 * log2(e) - m log2(e) flash attention writes: NVRTC contracts that into
	 * one fma, whose unrounded product differs from m log2(e)'s rounding by
	 * up to 2^103 at -1e38, so a slice of keys all masked had 2^(2^103) =
	 * inf for its weights and inf * 0 = NaN in the sum (HF decoders with a
	 * padding mask, session 18).  (s - m) is exact where s is near m. */
	bool huge;
	/* a sized plan (kf_emit_dyn.probe): the same analysis of the graph at
	 * generic sizes, whose numbers say which symbols ours are made of (kx_pmono);
	 * NULL: none */
	const struct kx_att *p;
} kx_att;

/* The symbolic form of at's quantity x, read through the probe's analysis
 * at->p: field f of at (KX_ATT_S), or a field of a struct inside at at the
 * same place in at->p (kx_att_twin: NULL when there is no twin). */
#define KX_ATT_S(k, at, f) ((at)->p ? kx_pmono((k), (at)->p->f) : (at)->f)
static inline const void *kx_att_twin(const kx_att *at, const void *field)
{
	return at->p ? (const char *)at->p + ((const char *)field - (const char *)at) : NULL;
}

/* Whether the score chain of a kernel of key tiles of bn may read its
 * columns past Tk unclamped: every value it reads at a column is a kernel
 * input, read at most bn - 1 elements past its end (KF_EMIT_READ_PAST);
 * the tile's masks then drop those columns. */
bool kx_att_cols_past(const kx *k, const kx_att *at, int bn);

/* emit_attention.c; kx_emit_attention (emit_int.h) returns 2 with
 * k->k->why for a body the kernels do not take (the body then runs op by
 * op). */
/* The offset text of batch z (a linear index over B, a name) in view v,
 * base offset included. */
void kx_att_boff(kx *k, const kx_att *at, const kf_view *v, const char *z, kf_buf *o);
/* Declares KF_KERNEL_score(params..., int z, int row, int col, float s):
 * the score chain at (z, row, col) of the scores s (f32), the causal mask
 * node passed through (the kernel applies it). */
int kx_att_score_helper(kx *k, const kx_att *at);
/* "KF_KERNEL_score(p0, ..., " */
void kx_att_score_call(const kx *k, kf_buf *b);
/* The values of the score chain that read memory but not the scores (a
 * mask, a bias) in slots a kernel fills ahead of the scores: a load's
 * latency hidden behind a tile's products, where inline it stalls the
 * softmax after them.  Slot i has dtype dt[i] (in its compute type,
 * kx_ct) and is the same for both rows of a column where rowinv[i]. */
#define KX_ATT_MAXPRE 4
typedef struct kx_att_pre {
	int n;
	kf_dtype dt[KX_ATT_MAXPRE];
	bool rowinv[KX_ATT_MAXPRE];
} kx_att_pre;
/* Writes to out KF_KERNEL_scoreld(params..., int z, int row, int col, T0
 * &l0, ...): the slots at (z, row, col), and KF_KERNEL_scorep(params...,
 * int z, int row, int col, float s, T0 l0, ...): the score chain with the
 * slots' values (the kernel declares them, or KF_KERNEL_score, where they
 * fit); pre->n == 0 (and nothing written) when no value is worth a slot
 * (more than KX_ATT_MAXPRE are computed in scorep). */
int kx_att_score_split(kx *k, const kx_att *at, kx_att_pre *pre, kf_buf *out);
void kx_att_scoreld_call(const kx *k, kf_buf *b);
void kx_att_scorep_call(const kx *k, kf_buf *b);
/* Declares KF_KERNEL_qpro(params..., float x): q's prologue ops on one
 * element (only when q has some). */
int kx_att_qpro_helper(kx *k, const kx_att *at);
void kx_att_qpro_call(const kx *k, kf_buf *b);
/* Declares KF_KERNEL_out(params..., outs..., int z, int row, int col,
 * float x): one element of o = matmul(p, v) through the output chain's
 * casts (each rounding as the graph does) and view; pair: KF_KERNEL_out2
 * (..., float x, float y): columns col and col + 1 (col even), one 4-byte
 * store for 2-byte elements at even offsets. */
int kx_att_out_helper(kx *k, const kx_att *at, bool pair);
void kx_att_out_call(const kx *k, kf_buf *b, bool pair);
/* The staged output's helpers, where the output's rows are whole 16-byte
 * runs of 2-byte elements: KF_KERNEL_outv(params..., outs..., int z, int
 * row, int col, float x, float y), out2's two values packed (nothing
 * stored); KF_KERNEL_out8(..., int z, int row, int col, unsigned w0..w3),
 * 8 packed values stored at (row, col), col a multiple of 8, in one
 * 16-byte store where aligned.  1 when the output does not allow them. */
int kx_att_out16_helper(kx *k, const kx_att *at);
bool kx_att_out16_fits(const kx_att *at);
void kx_att_outv_call(const kx *k, kf_buf *b);
void kx_att_out8_call(const kx *k, kf_buf *b);

/* emit_attention_mma.c: the flash kernel on mma.sync; 1 when the shape
 * does not suit it (then the SIMT kernel runs).  kx_att_helpers: exp2,
 * packing two floats to f16x2 / bf16x2 (guarded, for the declarations). */
const char *kx_att_helpers(void);
int kx_emit_attention_mma(kx *k, kx_att *at);
/* emit_attention_tile.c: the flash kernels' steps on a key tile, emitted
 * alike for both (see the file's head for the names in scope). */
enum { KX_MASK_EDGE, KX_MASK_NONE, KX_MASK_ALL };
typedef struct kx_att_step {
	int bn, dv;            /* keys a tile, head dims of v */
	bool qpart;            /* rows past Tq exist (they read the masks in range) */
	int mask;              /* the causal and key-range masks: where `edge` (a test
				  at run time on rowmin, the tile's first row, text)
				  says, never, or always */
	const char *rowmin;
	bool fold;             /* the score chain is at->fold's scale, kf_sl2 in scope
				  (kx_att_fold_scale): the scores stay as the matmul
				  made them, the scale goes into exp2 */
	bool tree;             /* row maxima and sums over 4 partial ones */
	bool persist;          /* a0, a1 are declared by the caller (they outlive the step) */
	const kx_att_pre *pre; /* the score chain reads slots ml<i>[] (kx_att_tile_preload); NULL: none */
	bool past;             /* columns past Tk read unclamped where kx_att_cols_past
				  allows (the wgmma kernel: the mma kernel's clamp costs
				  it less than the registers of a second index) */
} kx_att_step;
/* Writes `const float kf_sl2 = ...;` (the folded scale times log2(e)) to o
 * when at->fold; false otherwise. */
bool kx_att_fold_scale(const kx *k, const kx_att *at, kf_buf *o);
/* The scores through the score chain (or the folded scale) and the masks. */
/* A flash kernel's block indices: z, its batch index, and q0, its first
 * query row, for blocks of bm query rows: heads in groups sharing L2,
 * within a group the heaviest query tiles (the last, under a causal mask)
 * first. */
void kx_att_block_z_q0(kx *k, const kx_att *at, int bm, bool grouped, const char *idx);
void kx_att_tile_scores(kx *k, const kx_att *at, const kx_att_step *st);
/* Declares the slots' arrays ml<i>[] of st->pre; fills them for key tile
 * jt (text) through KF_KERNEL_scoreld. */
void kx_att_tile_slots(kx *k, const kx_att_step *st);
void kx_att_tile_preload(kx *k, const kx_att *at, const kx_att_step *st, const char *jt);
/* Starts the declaration of device helper KF_KERNEL_<name> returning ret:
 * the kernel's parameters (and its outputs when outs), the sizes it reads,
 * then the helper's own parameters follow (emit_attention.c). */
void kx_att_helper_head(kx *k, kf_buf *h, const char *ret, const char *name, bool outs);
/* A body the kernels do not take: why, for the caller, which then runs
 * the body op by op (kf_emit_node_for's 2); not an error.  -1. */
int kx_att_decline(kx *k, const char *why);
/* kf_ex2 of exp(x - m)'s exponent of 2, as text into b: x L - off (one
 * fma), or (x - off) L under at->huge; x, off (the row's offset as
 * kx_att_exp_off wrote it) and L (log2(e), or kf_sl2 for a folded scale)
 * are texts. */
void kx_att_ex2(const kx_att *at, kf_buf *b, const char *x, const char *off, const char *L);
/* The row's offset for maximum m, as text: 0 for -inf (no -inf - -inf),
 * else m L, or m itself under at->huge. */
void kx_att_exp_off(const kx_att *at, kf_buf *b, const char *m, const char *L);
/* The rows' new maxima (m0, m1), the factors a0, a1 and the sums rescaled. */
void kx_att_tile_max(kx *k, const kx_att *at, const kx_att_step *st);
/* oacc[dv / 2] *= a0, a1 by row. */
void kx_att_tile_rescale(kx *k, int dv);
/* The exponentials, added to l0, l1: packed into a new pf[bn / 16][4]
 * (pack), or left in sc in place (then kx_att_tile_pack packs them into
 * pf, declared by the caller). */
void kx_att_tile_exp(kx *k, const kx_att *at, const kx_att_step *st, bool pack);
void kx_att_tile_pack(kx *k, const kx_att *at, int bn);
/* max, rescale and exp (packed): the mma.sync kernel's softmax. */
void kx_att_tile_softmax(kx *k, const kx_att *at, int bn, int dv);
/* After the last tile: the rows' sums over the quad, and oacc[dv / 2]
 * divided by them, written in pairs of columns through the output view. */
int kx_att_finish(kx *k, const kx_att *at, int dv);
/* Its first part: the rows' sums over the quad, and i0, i1 their inverses. */
void kx_att_finish_sums(kx *k);

/* emit_attention_wgmma.c: the flash kernel on wgmma with TMA and a
 * producer warpgroup (sm_90a), where the device has wgmma (or a wga tile
 * asks for it) and q, k, v fit its tensor maps; 1 otherwise. */
int kx_emit_attention_wgmma(kx *k, kx_att *at);
/* emit_attention_simt.c: one warp per slice of keys, split across blocks
 * with a combining step when rows are few (decoding). */
int kx_emit_attention_simt(kx *k, kx_att *at);

#endif
