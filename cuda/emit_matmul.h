/* emit_matmul.h: the contraction kernels (cuda/emit_matmul.c: analysis,
 * configs, epilogue, SIMT FMA kernel; cuda/emit_mma.c: tensor-core
 * kernel; cuda/emit_gemv.c: GEMV) and what the autotuner (cuda/tune_time.c) needs of them.
 *
 * A contraction kernel runs a matmul or gemm node alone, or a
 * `fusion {kind = "contraction"}` whose body is one matmul/gemm with an
 * element-wise prologue on each operand (casts, scaling, transposes of the
 * last two axes, folded into the loads) and an element-wise epilogue on its
 * result (bias, activation, residual, scaling, cast), computed on the
 * accumulator before the only store.  docs/matmul.md has the details.
 *
 * The tile config of a kernel is text (see kf_mm_config_parse), chosen by,
 * in order: the fusion's `tile` attribute (the tuner sets it from its cache),
 * $KFUSE_MATMUL_TILE when it fits the node, a heuristic.
 */
#ifndef KF_EMIT_MATMUL_H
#define KF_EMIT_MATMUL_H

#include "kf.h"
#include "cublas.h"
#include "cudnn.h"

/* KF_MM_LT ("cublaslt"): the runtime calls cuBLASLt with the epilogue
 * (cuda/cublas.h); the emitter passes it over (its kernel, the
 * fallback, takes the heuristic's config). */
/* KF_MM_WG: the Hopper kernel (cuda/emit_wgmma.c), sm_90a only. */
/* KF_MM_WGC ("wgcBMxBNx64sS[kK][v|s]"): the Hopper implicit-GEMM conv
 * (cuda/emit_conv_wg.c), sm_90a only: A gathered by cp.async into the
 * 128-byte swizzle, wgmma from shared memory; convs only. */
/* KF_MM_BLAS ("cublas"): the runtime runs the contraction as a cuBLAS
 * GEMM between the kernels of its prologue and epilogue (the parts below);
 * the emitter's whole kernel (the fallback) takes the heuristic's config. */
typedef enum { KF_MM_FMA, KF_MM_MMA, KF_MM_GEMV, KF_MM_LT, KF_MM_WG, KF_MM_BLAS, KF_MM_WGC, KF_MM_DNN } kf_mm_algo;

typedef struct kf_mm_config {
	int algo;          /* kf_mm_algo */
	int bm, bn, bk;    /* block tile (FMA, MMA) */
	int wm, wn;        /* MMA: warps along M and N; FMA: outputs per thread along M, N */
	int stages;        /* MMA: cp.async pipeline depth (2..4); WG: TMA ring stages (2..8);
			    * WGC: cp.async ring stages (3..8) */
	int ks;            /* GEMV: B [K, N]: K split across blocks; B [N, K]: warps per
			    * output (1, 2, 4, 8); 0: chosen from the shape */
	int un;            /* GEMV: 16-byte weight loads issued together per thread (0: 8) */
	int cl;            /* WG: CTAs of a cluster along M sharing B by TMA multicast
			    * (suffix "c2", "c4"); 0: no cluster */
	int ps;            /* WG: persistent (suffix "p", after c, not with it): a grid
			    * of at most KF_MM_SMS CTAs walking the tiles in a grouped
			    * raster (kf_wg_raster), the TMA ring continuing across tiles */
	int pp;            /* WG: ping-pong (suffix "pp"): two consumer warpgroups take
			    * alternate tiles of the persistent walk, each the whole
			    * BM x BN, so one's epilogue runs under the other's MMAs */
	int vs;            /* WG: epilogue stores of 2 columns at once (suffix "v", after p) */
	int ss;            /* WG: epilogue through a shared-memory staging tile, stored
			    * with 16-byte coalesced stores (suffix "s", after v) */
	int ew;            /* WG: epilogue warps (suffix "e", after s; with p, the whole
			    * tile staged): the consumers stage the rounded result and
			    * go on to the next tile, warps 1-3 of the producer
			    * warpgroup run the epilogue from shared memory */
	int colb;          /* GEMV "gemvc[uU]": B [K, N] in column blocks of 128 bytes, all
			    * K in one block of 1024 threads: no K split, no second pass */
	int bulk;          /* GEMV "gemvb[S]": B [N, K] streamed by bulk copies into
			    * shared memory, S chunks per CTA (in stages; 0: 4) */
	int sk;            /* FMA, MMA, WGC: K split over sk blocks per output tile (suffix
			    * "kS", last: "fma32x32x16t2x2k8"), the partial tiles summed
			    * in split order by the tile's last block, which runs the
			    * epilogue (cuda/emit_mm_splitk.c); WG ("wg128x128x64s4k4[s]",
			    * sk 2..8): the splits are a cluster along y, which sums the
			    * partial tiles through distributed shared memory, each CTA a
			    * share of the tile (cuda/emit_wg_splitk.c); 0 or 1: no split */
} kf_mm_config;

/* The SMs of an H100 / H200 SXM: the grid of the kernels that put one CTA
 * on each SM (persistent wgmma, bulk-copy GEMV); the emitter does not see
 * the device, so a part with fewer SMs runs a second, short wave. */
#define KF_MM_SMS 132

/* The partition of a bulk-copy GEMV ("gemvb", cuda/emit_gemv.c) of B
 * stored [N, K] with rows of row_bytes: CTA c owns rows [c rows, c rows +
 * rows) (the last fewer), streamed in chunks of crows rows into a ring of
 * slots (slots == nchunk: the whole slice at once). */
typedef struct kf_gemvb_plan {
	int64_t rows, grid, crows, row_bytes;
	int nchunk, slots;
	int smem;          /* dynamic shared memory: the ring, then x (K floats) */
} kf_gemvb_plan;

#define KF_GEMVB_SMEM (220 * 1024) /* dynamic shared memory budget per CTA */
#define KF_GEMVB_MAXSLOT 32        /* mbarriers per kind */

/* Fills *p for N rows of K elements of elem bytes in `chunks` chunks;
 * -1 when the rows are not whole 16-byte words or one chunk of a row and
 * x do not fit the budget. */
int kf_gemvb_plan_of(int64_t N, int64_t K, int elem, int chunks, kf_gemvb_plan *p);
/* The bulk copy of chunk j of CTA c: byte offset in the weight and size
 * (0: no such chunk), as the kernel computes them. */
void kf_gemvb_copy(const kf_gemvb_plan *p, int64_t N, int64_t c, int64_t j, int64_t *off, int64_t *bytes);

/* The persistent wgmma kernel's grid: at most one CTA per SM (KF_MM_SMS;
 * on a part with fewer SMs the rest wait for a second wave, still
 * correct: the kernel reads gridDim.x).  Tile t of the
 * static round-robin schedule (CTA b takes t = b, b + gridDim.x, ...) is
 * (*mt, *nt) of the ntm x ntn tiles: groups of KF_WG_GROUP M-tiles sweep
 * N, M fastest inside a group, so the CTAs running together share B's
 * columns and A's rows in L2.  The device code is this very text
 * (KF_WG_RASTER_BODY, stringified by the emitter). */
#define KF_WG_GROUP 8
#define KF_WG_RASTER_BODY                                                                                   \
	const int per = KF_WG_GROUP * ntn, g0 = t / per * KF_WG_GROUP, r = t % per;                          \
	const int gs = ntm - g0 < KF_WG_GROUP ? ntm - g0 : KF_WG_GROUP;                                      \
	*mt = g0 + r % gs;                                                                                   \
	*nt = r / gs;
void kf_wg_raster(int t, int ntm, int ntn, int *mt, int *nt);

/* The "s" epilogue's staging tile (cuda/emit_wgmma.c): each consumer
 * warpgroup stages its 64 rows x SC columns (SC = kf_wg_stage_cols, BN or
 * a divisor of it, at least 64) of 2-byte results in shared memory, then
 * stores them in 16-byte chunks.  Byte offset of element (row, col) in the
 * staging tile: 16-byte chunks XOR-swizzled by row & 7, so the
 * accumulator-layout writes (8 rows x 4 lanes per warp and instruction)
 * hit 32 distinct banks and the chunk reads (8 consecutive chunks of a
 * row per quarter warp) stay within one 128-byte line.  Device code is
 * this text. */
#define KF_WG_STG_OFF(row, col, sc) ((row) * (sc) * 2 + (((((col) >> 3) ^ ((row) & 7))) << 4) + ((col) & 7) * 2)
/* Chunk j of a consumer thread (tid in [0, 128)): local row and column. */
#define KF_WG_STG_CHUNK(tid, j, sc, row, col)                                                             \
	do {                                                                                                \
		const int kf_ix_ = (tid) + (j) * 128;                                                       \
		(row) = kf_ix_ / ((sc) / 8);                                                                \
		(col) = kf_ix_ % ((sc) / 8) * 8;                                                            \
	} while (0)
/* The staging columns of config c (0 without "s"): BN when the ring and
 * a full 64 x BN tile per consumer fit 227 KiB, else BN / 2, BN / 4 (at
 * least 64); -1 when none fits. */
int kf_wg_stage_cols(const kf_mm_config *c);
/* The consumer warpgroups of config c: BM / 64 (each 64 rows of the
 * tile), or 2 with "pp" (each a whole tile). */
int kf_wg_consumers(const kf_mm_config *c);
/* Shared memory of config c's kernel: the ring, the staging tiles, and
 * 1024 to align the ring (the dynamic size; the barriers are static). */
int kf_wg_smem(const kf_mm_config *c);

/* The wgmma kernel's share of B's tile per stage in a cluster of cl CTAs
 * (cuda/emit_wgmma.c): each CTA loads pieces of it and multicasts them
 * to all.  A piece is one TMA box at (n0, k0) of the BN x 64 tile, written
 * at byte offset `off` of the stage's B tile in every CTA. */
typedef struct kf_wg_piece {
	int n0, k0, off;
} kf_wg_piece;

/* The box of B's tensor map (box_inner x box_outer elements) and the
 * pieces of CTA `rank` (into out, at most 8); returns how many, -1 when
 * the tile does not split in cl.  kmajor: B stored [N, K]. */
int kf_wg_bpieces(int bn, bool kmajor, int cl, int rank, int *box_inner, int *box_outer, kf_wg_piece *out);

/* "mma128x128x32w2x4s3", "wg128x256x64s4", "wg128x128x64s4c2", "wg128x128x64s4c2v", "wg128x256x64s4pv", "fma64x64x16t4x4", "gemv", "gemvk16", "gemvk32u8", "gemvb", "gemvb8",
 * "cublaslt", "cudnn" (a conv through cuDNN: cudnn.h); 0, or -1
 * when the text is not a config. */
int kf_mm_config_parse(const char *s, kf_mm_config *out);
void kf_mm_config_text(const kf_mm_config *c, char *out, size_t n);

/* The shape of a contraction node, as the tuner keys it. */
typedef struct kf_mm_shape {
	kf_dtype in, out;  /* operand dtype (after the prologue), result dtype */
	int64_t batch, M, N, K;
	bool ta, tb;       /* operands stored transposed (after folding) */
	bool tf32;         /* f32 operands may use tf32 tensor cores */
	bool raw;          /* both operands read as stored (prologues only transpose) */
	int wgmma;         /* kf_emit_target.wgmma: wg tiles are candidates when 1 */
	bool sized;        /* a sized plan's bucket (kf_mm_node_shape_sized), not fixed sizes */
	char tag[56];      /* the body's other ops, which a config's speed depends on
			    * (kf_mm_node_shape): the prologue's and the epilogue's op
			    * names, "cast+mul.add+gelu_tanh" (empty: a bare contraction) */
	bool conv;         /* an implicit-GEMM conv (channels last, one group:
			    * kf_conv_node_shape); raw then says A's rows are copied
			    * 16 bytes at a time (x read as stored, whole 16-byte runs
			    * of channels) */
	bool pw;           /* a pointwise conv (1x1, stride 1, no pads): A is x as
			    * stored, the dense [M, C] matrix the wgmma kernel's TMA reads */
	char geo[64];      /* a conv's geometry in the key: kernel, strides, pads,
			    * dilations, input extents ("3x3s2p1d1i56x56") */
} kf_mm_shape;

/* True when top-level node n is a contraction kernel (matmul, gemm, or a
 * fusion of kind "contraction"); fills *sh (may be NULL). */
bool kf_mm_node_shape(kf_graph *g, kf_nid n, kf_mm_shape *sh);
/* True when top-level node n is a conv that runs as an implicit GEMM (a
 * conv, or a fusion of kind "conv", channels last, one group, static
 * shapes; cuda/emit_conv.c); fills *sh (may be NULL). */
bool kf_conv_node_shape(kf_graph *g, kf_nid n, kf_mm_shape *sh);
/* kf_mm_node_shape for a plan of target t: a sized plan's
 * (kf_emit_target.dyn) extents that come from symbols are their bucket's
 * sizes, which its choices (tile, route, tuned config) are made for. */
struct kf_emit_target;
bool kf_mm_node_shape_sized(kf_graph *g, kf_nid n, const struct kf_emit_target *t, kf_mm_shape *sh);
/* The tuner's key of a shape on arch: one token, no spaces; a conv's
 * geometry ("conv" and kf_mm_shape.geo), then the tag, if any, last
 * ("sm_90:f16>f16:b1:m64:n512:k512:nn:.add+gelu_tanh"). */
void kf_mm_shape_key(const kf_mm_shape *sh, const char *arch, char *out, size_t n);
/* The candidate configs for a shape (texts into out[i], each 32 bytes);
 * returns how many (at most max). */
int kf_mm_candidates(const kf_mm_shape *sh, char (*out)[32], int max);

/* ---- split-K (cuda/emit_mm_splitk.c) --------------------------------------------------- */

/* The K range of split ks of sk over K in tiles of bk: [*k0, *k1), empty
 * (k0 >= k1) for a split past the end; every split but the last spans
 * the same whole number of tiles, so a tile never straddles two splits.
 * The device code is the same arithmetic. */
void kf_mm_splitk_range(int64_t K, int bk, int sk, int ks, int64_t *k0, int64_t *k1);
/* Elements of the split-K workspace of config c over M x N x nb: one
 * accumulator tile per split and tile (the partials are written and read
 * by thread, in the thread's accumulator order). */
int64_t kf_mm_splitk_ws(const kf_mm_config *c, int64_t M, int64_t N, int64_t nb);
#define KF_MM_SPLITK_WS (1 << 23) /* at most 8M accumulators (32 MiB of f32) */

/* ---- around cuBLAS (cuda/emit_mm_blas.c) ----------------------------------------------- */

/* The kernels of a contraction that runs as a cuBLAS GEMM
 * (kf_emit_node_part): operand A's or B's prologue, written as stored (the
 * transposes of the chain stay in the GEMM's trans flags), and the
 * epilogue, which reads the GEMM's result where the whole kernel read its
 * accumulator (the same KF_KERNEL_epi helper, so the same numerics up to
 * the rounding of that result to the matmul's dtype, as the graph says). */
enum { KF_MM_PART_A = 1, KF_MM_PART_B, KF_MM_PART_EPI };

/* What runs of contraction node n (a matmul or gemm node, or a contraction
 * fusion) around one cuBLAS GEMM. */
typedef struct kf_mm_blas {
	kf_blas_gemm gemm;
	kf_vid a, b;    /* what the GEMM reads: the operand as stored (a top-level value),
			 * or the body's operand value that part A / B writes first */
	bool pro[2];    /* part A / B runs first */
	kf_vid acc;     /* what the GEMM writes: the result itself, or the body's matmul
			 * value that the epilogue part then reads */
	bool epi;       /* part EPI runs after */
	bool dnn;       /* a conv through cuDNN (kf_conv_dnn_plan): conv, not gemm, says it */
	kf_dnn_conv conv;
} kf_mm_blas;

/* True when n runs as above: f16, bf16, f32 or f64 operands and result of
 * one dtype, extents cuBLAS takes; a batch of A folded into M where B has
 * none (one GEMM of M x batch rows).  An unfused gemm with C does not. */
bool kf_mm_blas_plan(kf_graph *g, kf_nid n, kf_mm_blas *p);

/* True when conv n (a conv, or a fusion of kind "conv", that runs as an
 * implicit GEMM: kf_conv_node_shape) runs through cuDNN (cudnn.h): x and w
 * read as stored, f16, bf16 or f32 throughout, symmetric pads; a conv
 * alone with a bias does not (its bias would need the epilogue kernel). */
bool kf_conv_dnn_plan(kf_graph *g, kf_nid n, kf_mm_blas *p);

/* True when fusion n maps to one cublasLtMatmul with its epilogue
 * (cublas.h: bias [+ relu | gelu-tanh], operands read as stored, one batch
 * after folding); fills *p. */
bool kf_cublaslt_plan(kf_graph *g, kf_nid n, kf_lt_plan *p);

/* ---- the default (cuda/mm_cost.c) ------------------------------------------------------- */

/* The emitter's own default config for a shape (GEMV, wgmma, mma.sync or
 * SIMT tiles by the heuristics of emit_matmul.c). */
void kf_mm_own_default(const kf_mm_shape *sh, kf_mm_config *c);

/* A conv's default config (emit_matmul.c's conv_config, untuned): on a
 * device with wgmma, f16/bf16 with channels in 16-byte runs, the rule
 * fitted to ResNet-50's layers tuned on an H200 (emit_mm_config.c: the
 * matmul's TMA kernel for a wide pointwise conv, else the largest wgmma
 * conv tile that makes 90 tiles, else 64 x 64 tiles, split 4 ways along a
 * long K); otherwise mma.sync tiles likewise, the SIMT kernel for the
 * rest. */
void kf_conv_own_default(const kf_mm_shape *sh, kf_mm_config *c);

/* Which library routes a contraction can take. */
typedef struct kf_mm_libs {
	bool blas, lt;
} kf_mm_libs;

/* The cost model: the config of a contraction that has no tuned one: an
 * own kernel only in a shape class where it was measured at least as fast
 * as cuBLAS with the same epilogue, else cuBLASLt (one call with the
 * epilogue) where the node maps to it, else cuBLAS plus the epilogue
 * kernel; the own default where neither library route exists.  Writes the
 * config text to out (32 bytes) and returns the class's name, for reports
 * and tests; docs/matmul.md has the table and the measurements. */
const char *kf_mm_choose(const kf_mm_shape *sh, kf_mm_libs libs, char *out, size_t n);

#endif
