/* emit_mm_int.h: the contraction emitter's working state, shared by
 * cuda/emit_matmul.c, emit_mma.c and emit_gemv.c; not for other modules. */
#ifndef KF_EMIT_MM_INT_H
#define KF_EMIT_MM_INT_H

#include "emit_int.h"
#include "emit_matmul.h"

#define KX_MM_CHAIN 16

/* One operand of the contraction: the parameter it is read from and the
 * prologue applied to each element on the way in. */
typedef struct kx_mmop {
	int param;            /* parameter index of the stored operand */
	kf_dtype st;          /* its storage dtype */
	kf_nid chain[KX_MM_CHAIN]; /* prologue ops, from the parameter to the operand */
	int nchain;
	bool trans;           /* stored [K, M] (A) or [N, K] (B) */
	bool vec;             /* a 1-D operand */
	kf_type batch;        /* batch dims of the operand */
	kf_type sbatch;       /* their symbolic form (kx_stype) */
} kx_mmop;

/* A conv's geometry (emit_conv.c), spatial dims padded to 3 at the front
 * (size 1, kernel 1): the implicit GEMM's, or the direct kernel's. */
typedef struct kx_conv {
	int64_t N, C, O, G, Cg, Og, KK;   /* KK: taps per output */
	int64_t in[3], out[3], k[3], s[3], d[3], pb[3], pe[3];
	bool cl;              /* channels last: the implicit GEMM; else the direct kernel */
	int bias;             /* parameter index of the bias, -1 without one */
} kx_conv;

typedef struct kx_mm {
	kf_nid c;             /* the matmul or gemm (or conv) */
	bool gemm;
	bool conv;            /* a conv (emit_conv.c): cv holds it */
	kx_conv cv;
	kf_dtype dt;          /* operand dtype (after the prologue) */
	kf_dtype rt;          /* the contraction's result dtype */
	int64_t M, N, K, nb;
	int64_t sM, sN, sK, snb; /* their symbolic forms (kx_dim; a number in a static plan) */
	kf_type O;            /* the contraction's result type */
	kf_type OB;           /* its batch dims */
	kf_type sO, sOB;      /* their symbolic forms */
	kx_mmop a, b;
	bool tf32;
	bool fold;            /* A's batch folded into M (emit_matmul.c fold_batch):
			       * M, sM count batch x rows, nb is 1, OB and the operands'
			       * batches are empty; O, sO stay the result's type */
	kf_mm_config cfg;
} kx_mm;

/* emit_mm_config.c: whether config c can run shape sh (the kernels'
 * structural limits). */
bool kx_mm_config_fits(const kf_mm_config *c, const kf_mm_shape *sh);
/* Whether sh's input type runs on the tensor cores (f16, bf16, f32 as tf32). */
bool kx_mm_mma_dtype(const kf_mm_shape *sh);

/* emit_matmul.c: whether A's batches lie one after the other as rows of
 * one tall A (A [batch.., M, K] not transposed, its batches the result's,
 * B without batches): the rows of one GEMM (emit_mm_blas.c), and of the
 * own kernels where the epilogue allows (fold_batch). */
bool kx_mm_rows_fold(const kx_mm *mm);

/* emit_matmul.c */
/* Writes M (N, K) of mm: kx_dim of the number and its symbolic form. */
void kx_mm_dim(kx *k, kf_buf *o, const kx_mm *mm, char which);
/* Fills mm (config aside) for node n: a matmul or gemm alone, or a
 * contraction fusion (its body); NULL, or why n is no contraction kernel. */
const char *kx_mm_analyse_node(kf_graph *g, kf_nid n, kx_mm *mm);
/* The same for a conv alone or a fusion of kind "conv". */
const char *kx_mm_analyse_conv(kf_graph *g, kf_nid n, kx_mm *mm);
/* Text of operand `which` (0: A, 1: B) at stored linear index `ix` (an
 * expression), prologue applied, in the accumulation type. */
void kx_mm_operand(kx *k, const kx_mm *mm, int which, const char *ix, kf_buf *out);
/* The element offset of batch z in operand which's storage, as text. */
void kx_mm_batch_off(kx *k, const kx_mm *mm, int which, kf_buf *out);
/* The accumulation type of the kernel: float, double or long long. */
const char *kx_mm_acc_type(const kx_mm *mm);
/* True when body node n is in an operand's prologue chain. */
bool kx_mm_in_chain(const kx_mm *mm, kf_nid n);
/* True when operand op is read as stored: its prologue, if any, only
 * transposes (which the kernels fold into their indexing). */
bool kx_mm_raw(const kx *k, const kx_mmop *op);
bool kx_mm_chain_raw(kf_graph *g, const kx_mmop *op);

/* emit_mm_epi.c */
/* Declares KF_KERNEL_epi(params..., int z, int row, int col, ACC acc):
 * the gemm scaling, the epilogue ops and the stores of every output at
 * (z, row, col).  The kernel calls it once per output element in range. */
int kx_mm_epilogue(kx *k, const kx_mm *mm);
/* The call text, up to the accumulator: "KF_KERNEL_epi(p0, ..., o0, " */
void kx_mm_epi_call(kx *k, kf_buf *b);
/* Declares KF_KERNEL_epi2(params..., int z, int row, int col, ACC acc0,
 * ACC acc1): the epilogue of (row, col) and (row, col + 1), col even and
 * in range, each output written with one 4-byte store where it can be.
 * Returns 1 (nothing declared) unless every output is 2 bytes wide. */
int kx_mm_epilogue2(kx *k, const kx_mm *mm);
/* "KF_KERNEL_epi2(p0, ..., o0, " */
void kx_mm_epi2_call(kx *k, kf_buf *b);
/* KF_KERNEL_epis (the "s" epilogue of emit_wgmma.c): the pair of
 * columns (colp, colp + 1) of the single 2-byte output, returned packed
 * (0 where out of range) for the staging tile; whole: every call is in
 * range (the tiles cover the output exactly), no checks emitted; 1
 * (nothing emitted) when the kernel has several outputs or one that is not
 * 2 bytes wide. */
int kx_mm_epilogue_s(kx *k, const kx_mm *mm, bool whole);
/* Whether the kernel's outputs suit KF_KERNEL_epis (then the "s" kernel
 * calls no other epilogue helper, and none is emitted: an unused helper
 * is a compiler warning). */
bool kx_mm_epis_fits(kx *k);
void kx_mm_epis_call(kx *k, kf_buf *b);

/* emit_conv.c */
/* Fills mm's geometry, M, N, K and result from conv node c (operands
 * already traced); NULL, or why the kernels cannot run it. */
const char *kx_conv_setup(kf_graph *g, kf_nid c, kx_mm *mm);
/* The index into a value of type P (broadcast to the conv's result) of the
 * element at (row, col): row the output position (n, od, oh, ow), col the
 * channel, in either layout. */
void kx_conv_bidx(const kx_mm *mm, const kf_type *P, kf_buf *o);
/* Declares the device kf_conv_gather (once per program). */
void kx_conv_helpers(kx *k);
/* "kf_conv_gather(m, kk, <geometry>, &cix)": whether A's element (m, kk)
 * lies inside the input; its index into x then in cix. */
void kx_conv_gather_call(const kx_mm *mm, const char *m, const char *kk, kf_buf *o);
/* Whether A's tile rows can be copied 16 bytes (e-byte elements) at a time:
 * x read as stored, whole 16-byte runs of channels. */
bool kx_conv_a_raw(const kx *k, const kx_mm *mm, int e);
/* The output's offset of (row, col) of a channels-first conv, as text. */
void kx_conv_off(const kx_mm *mm, kf_buf *o);
/* The tensor-core kernels' A rows (emit_mma.c, emit_conv_wg.c): whether
 * each thread keeps its rows and column through the K loop; the
 * per-thread setup before it (kf_cf: the thread's column; row i of the
 * thread: threadIdx.x / per + i * threads / per); a stage's 16-byte copies
 * inside the load lambda (dst: the shared address of row i, local row r,
 * as text; param: x's parameter). */
bool kx_conv_rows_fixed(int rows, int per, int threads);
void kx_conv_rows_setup(kx *k, const kx_mm *mm, int rows, int per, int v, int threads);
void kx_conv_rows_load(kx *k, const kx_mm *mm, int rows, int per, int threads, const char *dst, int param);
/* The direct kernel of a grouped, depthwise or channels-first conv. */
int kx_conv_emit_direct(kx *k, kx_mm *mm);
/* The direct kernels' shared text: statements splitting output position
 * `row` into n, od, oh, ow; the loops over the taps (kd, kh, kw) that land
 * inside the input, id, ih, iw in scope (three closing braces end them). */
void kx_conv_split_row(kf_buf *b, const kx_conv *cv, const char *it, const char *row);
void kx_conv_open_taps(kf_buf *b, const kx_conv *cv);
/* A thread a unit of `total`: the launch (blocks of 256) and `idx`, the
 * thread's unit, in scope; an error naming `what` past 2^31 blocks. */
int kx_conv_thread_grid(kx *k, int64_t total, const char *what);
/* emit_depthwise.c: a channels-last depthwise conv whose channels come in
 * 16-byte vectors of V; 1 when it takes another kernel (weights too large
 * for its shared memory), else 0 or an emit error. */
int kx_conv_emit_depthwise(kx *k, kx_mm *mm, int V);
/* The depthwise kernels' stores of a thread's V outputs at one position:
 * the widest store the outputs allow (2 V bytes staged, 4 in pairs, 0
 * element by element; declares the epilogue helpers it needs), and the
 * statement storing a[0..V) at output row `row`, channels col.. (in
 * scope), as kind sb says. */
int kx_dw_store_kind(kx *k, const kx_mm *mm, int V);
/* c0, the first channel of the block's slice of depthwise channels
 * (slice blockIdx.x % ns of csv channels); then that slice's weights into
 * shared kf_w[tap][channel] (type ty, `threads` threads), a barrier after. */
void kx_dw_slice_c0(kx *k, int csv, int64_t ns);
void kx_dw_stage_weights(kx *k, const kx_mm *mm, const char *ty, int csv, int threads);
void kx_dw_store_vec(kx *k, const kx_mm *mm, kf_buf *b, int sb, int V, const char *row, const char *a);
/* $KFUSE_DEPTHWISE's knobs "<letter><number>...": each letter of `letters`
 * sets kv[its index] to its number, 1 to 1024 (0 too for those in
 * `zero_ok`); false on anything else (the caller checks its own limits). */
bool kx_dw_knobs(const char *knobs, const char *letters, const char *zero_ok, int *kv);
/* emit_depthwise_rows.c: the rows kernel (a thread walks a strip of output
 * rows, weights in registers); 1 when it does not take the conv, unless
 * forced: knobs non-NULL ($KFUSE_DEPTHWISE `env`'s "rows:" text), then an
 * error instead. */
int kx_dw_emit_rows(kx *k, kx_mm *mm, int V, const char *env, const char *knobs);
/* The band kernel (emit_depthwise_rows.c: the rows kernel's walk over a
 * band of input a block copies into shared memory); the same contract. */
int kx_dw_emit_band(kx *k, kx_mm *mm, int V, const char *env, const char *knobs);
/* emit_depthwise_toep.c: f16/bf16 on tensor cores, each kernel row a
 * Toeplitz matrix over a channel-major band in shared memory; the same
 * contract. */
int kx_dw_emit_toep(kx *k, kx_mm *mm, int V, const char *env, const char *knobs);
/* The conv part of sh (set from mm by the contraction's shape_of): conv,
 * pw, geo, and raw (A's rows copied 16 bytes at a time). */
void kx_conv_shape(const kx_mm *mm, kf_mm_shape *sh);

/* emit_conv_wg.c: the wgmma implicit-GEMM conv (KF_MM_WGC). */
int kx_conv_emit_wgc(kx *k, kx_mm *mm);

/* emit_mma.c */
int kx_mm_emit_mma(kx *k, kx_mm *mm);
/* emit_gemv.c */
int kx_mm_emit_gemv(kx *k, kx_mm *mm);

/* emit_mm_splitk.c: split-K of the FMA and MMA kernels (mm->cfg.sk > 1).
 * head: "const int z = ..., ks = ...; const IT kbeg = ..., kend = ...;"
 * (z the batch, ks the split, [kbeg, kend) its K range).  reduce: after
 * the K loop, the accumulators acc[..] (nd dims of extents ext, `threads`
 * threads) go to the workspace; every block but the tile's last returns;
 * the last sums the splits in order into acc, for the epilogue. */
void kx_mm_splitk_head(kx *k, const kx_mm *mm);
void kx_mm_splitk_reduce(kx *k, const kx_mm *mm, int threads, int nd, const int *ext);

/* emit_mm_blas.c: part k->part of the contraction (KF_MM_PART_*); 1 when
 * it has no such part. */
int kx_mm_emit_part(kx *k, kx_mm *mm);

/* emit_wgmma.c */
int kx_mm_emit_wgmma(kx *k, kx_mm *mm);
/* Its helpers (TMA, mbarriers, descriptors, wgmma fences; guarded), and
 * the definition of kf_wgmma_<ty>_n<bn>_t<tb>(d, da, db): one
 * wgmma.m64n<bn>k16, both operands by descriptor, d += a b (guarded);
 * zero: kf_wgmma_<ty>_n<bn>_t<tb>z, d = a b. */
const char *kx_wg_helpers(void);
void kx_wg_mma_fn(kf_buf *o, const char *ty, int bn, int tb, bool zero);
/* The epilogues of a consumer warpgroup's 64 x BN accumulators acc[a0 i]
 * at rows bm + rb (rb: text, "cw * 64"), columns bn, as the wgmma
 * kernel's (emit_conv_wg.c shares them): per element or column pair
 * (pair: KF_KERNEL_epi2 declared), or "s", through the staging tile of
 * consumer cw after a ring of cfg.stages x (BM + BN) x 128 bytes at
 * sbase, sc columns at a time (rnd: the accumulators rounded to the
 * result type first).  In scope: bm, bn, cw, warp, lane, sbase, acc. */
void kx_wg_epilogue(kx *k, const kx_mm *mm, bool pair, const char *rb, const char *a0);
void kx_wg_epilogue_staged(kx *k, const kx_mm *mm, int sc, const char *rb, const char *a0, bool rnd);
/* Whether the tiles cover the output exactly (the "s" epilogue then
 * checks no bounds). */
bool kx_wg_whole_tiles(kx *k, const kx_mm *mm);
/* The store of 8 staged 2-byte results w0..w3 at (row, col) of o0: one
 * 16-byte store where whole in range and aligned, else element by element
 * where col < N; check: nothing for row >= M. */
void kx_wg_chunk_store(kx *k, const kx_mm *mm, const char *it, bool check);

/* emit_wg_splitk.c: the wgmma kernel's split-K over a cluster (cfg.sk > 1).
 * vec: declares the helpers; 8 when the sums are stored through
 * KF_KERNEL_epis 16 bytes at a time ("s", one 2-byte output: it is
 * declared here), 0 element by element (KF_KERNEL_epi), -1 on an error.
 * head: "const int ks, bm, bn, kt0, kt1" (the split, the tile, its K
 * tiles).  reduce: after a consumer's K loop, the cluster's sum of the
 * partial tiles and the epilogue (vec: as kx_wg_splitk_vec said). */
int kx_wg_splitk_vec(kx *k, const kx_mm *mm);
void kx_wg_splitk_head(kx *k, const kx_mm *mm);
void kx_wg_splitk_reduce(kx *k, const kx_mm *mm, bool vec);

/* The device copy of the staging tile's index math (guarded). */
void kx_wg_staging_fn(kf_buf *o);
/* The columns a consumer stages its epilogue through (0: none): where
 * config c asks for it ("s") and the staged epilogue takes the kernel (one
 * 2-byte output), kf_wg_stage_cols(c), with the staging helpers declared;
 * -1 on an error. */
int kx_wg_stage_pick(kx *k, const kx_mm *mm, const kf_mm_config *c);

#endif
