/* cublas.h: cuBLAS and cuBLASLt, loaded with dlopen: the floor under every
 * contraction (docs/matmul.md, "cuBLAS as a candidate").  A contraction
 * runs through cuBLAS when its tile config says `cublas` (the tuner found
 * it fastest, or the cost model chose it: cuda/mm_cost.c), as
 *   [a prologue kernel per operand that has one] -> one (batched) GEMM ->
 *   [the fused epilogue kernel of the rest of the body]
 * (cuda/emit_mm_blas.c emits the kernels around the GEMM and says which
 * buffers the GEMM reads and writes: kf_mm_blas_plan), and through one
 * cuBLASLt call with its epilogue when the tile says `cublaslt` and the
 * body is bias [+ relu | gelu-tanh].  KFUSE_CUBLAS=1 sends every
 * contraction (fused or not) through cuBLAS.
 *
 * Libraries tried: $KFUSE_CUBLAS_LIB (if set, only that), libcublas.so,
 * libcublas.so.13, libcublas.so.12, then in $CUDA_HOME/lib64 and
 * /usr/local/cuda/lib64.  The handle uses the driver's current context
 * (kf_cuda_open makes the primary context current) and a workspace of its
 * own, so that calls can be captured into a CUDA graph.
 */
#ifndef KF_CUBLAS_H
#define KF_CUBLAS_H

#include "kf.h"
#include "cuda.h"

typedef struct kf_cublas kf_cublas;

/* False unless $KFUSE_CUBLAS_MATH=fast: cuBLAS and cuBLASLt then may reduce
 * split-K partials in a 16-bit output type (their defaults; faster at
 * times, and less accurate: see cublas.c); kfuse's default reduces in f32. */
bool kf_cublas_fast_math(void);

/* NULL with the reason in why (no error: a caller falls back to a kernel,
 * or makes it one); later errors go to c. */
kf_cublas *kf_cublas_open(kf_ctx *c, kf_cuda *cu, char *why, size_t nwhy);
void kf_cublas_close(kf_cublas *b);

/* One GEMM, or a batch of them, in kfuse's row-major terms:
 *   out[z] = alpha op(A[z]) op(B[z]),  z in [0, batch), out[z] [M, N],
 * the batches of out dense one after the other, each A[z] an M x K (K x M
 * when ta) and each B[z] a K x N (N x K when tb) dense matrix at the
 * element offset that numpy broadcasting of A's and B's batch dims (abt,
 * bbt) to out's (ob) gives (kf_blas_off).  Accumulation in f32 (f64 for
 * f64); f32 inputs rounded to tf32 for the tensor cores only with tf32. */
typedef struct kf_blas_gemm {
	int dt;               /* kf_dtype of A, B and out: f16, bf16, f32 or f64 */
	bool tf32;            /* f32: CUBLAS_COMPUTE_32F_FAST_TF32; else plain SGEMM accuracy */
	int64_t M, N, K;
	bool ta, tb;          /* A stored [K, M]; B stored [N, K] */
	kf_type ob, abt, bbt; /* batch dims of out, A, B (rank 0: none) */
	double alpha;
} kf_blas_gemm;

/* The matrices of out: numel(ob), at least 1. */
int64_t kf_blas_batch(const kf_blas_gemm *g);
/* The element offset of batch z's matrix in A (which 0) or B (which 1). */
int64_t kf_blas_off(const kf_blas_gemm *g, int which, int64_t z);
/* The element stride between the batches of A or B when their offsets are
 * z * stride (0: every batch reads one matrix); -1 when they are not (a
 * batch dim broadcast in part: the GEMM then takes arrays of pointers). */
int64_t kf_blas_stride(const kf_blas_gemm *g, int which);
/* True when cuBLAS takes g: a dtype above, extents in 32 bits. */
bool kf_blas_fits(const kf_blas_gemm *g);

/* A GEMM bound to its buffers (device addresses): its batches strided, or
 * arrays of pointers uploaded once here, so that a run is one call that a
 * CUDA graph can capture.  NULL with an error. */
typedef struct kf_blas_op kf_blas_op;
kf_blas_op *kf_cublas_prepare(kf_cublas *b, const kf_blas_gemm *g, kf_cuptr a, kf_cuptr bm, kf_cuptr out);
int kf_cublas_run(kf_cublas *b, const kf_blas_op *o, kf_custream s);
void kf_cublas_op_free(kf_cublas *b, kf_blas_op *o);

/* ---- cuBLASLt: a contraction fusion with its epilogue in one call ----------------------
 *
 * A contraction whose body is one matmul (or gemm without C, or with a
 * bias C, beta 1) of operands read as stored (transposes folded), one
 * batch (a batch of A folded into M where B has none), then a bias [N]
 * (add, or gemm's C), then nothing, relu, or gelu {approximate = "tanh"},
 * all of one dtype (f16, bf16, f32), runs as one cublasLtMatmul with the
 * epilogue CUBLASLT_EPILOGUE_BIAS / _RELU_BIAS / _GELU_BIAS (cuBLASLt's
 * GELU is the tanh form; exact gelu is not offered to it): kf_cublaslt_plan
 * (cuda/emit_matmul.h) says whether it does.  f32 accumulation; f32 inputs
 * rounded to tf32 only when the contraction allows it.  The library:
 * $KFUSE_CUBLASLT_LIB (only that), else libcublasLt.so.13, .so.12, .so,
 * then in $CUDA_HOME/lib64 and /usr/local/cuda/lib64.  The tile config
 * `cublaslt` selects it (the tuner times it against the kernels; the cost
 * model, cuda/mm_cost.c, chooses it where no own kernel is known to be as
 * fast). */
typedef struct kf_cublaslt kf_cublaslt;
typedef struct kf_lt_op kf_lt_op;

enum { KF_LT_BIAS = 1, KF_LT_RELU_BIAS, KF_LT_GELU_BIAS };

typedef struct kf_lt_plan {
	kf_vid a, b, bias, out; /* the fusion's inputs and result (top-level values) */
	kf_vid res;             /* a residual added before the activation (C, beta 1); KF_NONE: none */
	int64_t M, N, K;
	bool ta, tb;            /* A stored [K, M], B stored [N, K] */
	int dt;                 /* kf_dtype of operands, bias and result */
	int epi;                /* KF_LT_* */
	bool tf32;              /* f32 on tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32) */
	double alpha;           /* gemm's alpha (1 for matmul) */
} kf_lt_plan;

/* What kf_cublaslt_prepare hands the library, as data (so that a host-only
 * test can check every attribute id, value and size against cublasLt.h):
 * the matmul descriptor (compute and scale type, then its attributes), the
 * layouts of cuBLAS's A (our B), B (our A) and D (= C), and the preference
 * attributes.  Values are passed by address with `size` bytes, as
 * cublasLt*SetAttribute reads them: 4 for the enums, 8 for pointers and
 * the workspace size. */
typedef struct kf_lt_attr {
	int attr;
	size_t size;
	union {
		int32_t i32;
		uint32_t u32;
		uint64_t u64;
		const void *ptr;
	} v;
} kf_lt_attr;
typedef struct kf_lt_layout {
	int type;
	uint64_t rows, cols;
	int64_t ld;
} kf_lt_layout;
typedef struct kf_lt_desc {
	int compute, scale;
	kf_lt_attr desc[8];
	int ndesc;
	kf_lt_layout a, b, d;
	kf_lt_attr pref[4];
	int npref;
} kf_lt_desc;
/* Every buffer cuBLASLt gets is aligned this much (the session's arena,
 * cuMemAlloc); the heuristic assumes it of A..D by default and reads the
 * bias pointer's value for its alignment, so the placeholder bias pointer
 * at plan time is this number, and a run checks its pointers against it. */
#define KF_LT_ALIGN 256
/* Fills *d for plan p (pure: no library needed). */
void kf_cublaslt_describe(const kf_lt_plan *p, kf_lt_desc *d);

/* NULL with the reason in why (no error: callers fall back to a kernel);
 * later errors go to c. */
kf_cublaslt *kf_cublaslt_open(kf_ctx *c, kf_cuda *cu, char *why, size_t nwhy);
void kf_cublaslt_close(kf_cublaslt *b);
/* Descriptors and the heuristic's algorithm, made once (so that a run is
 * only the launch); NULL with the reason in why. */
kf_lt_op *kf_cublaslt_prepare(kf_cublaslt *b, const kf_lt_plan *p, char *why, size_t nwhy);
void kf_cublaslt_op_free(kf_cublaslt *b, kf_lt_op *o);
/* D = epilogue(alpha A B + C + bias) on stream s (device addresses; C:
 * res, laid out as D, where the plan has a residual, else none). */
int kf_cublaslt_run(kf_cublaslt *b, const kf_lt_op *o, kf_cuptr a, kf_cuptr bm, kf_cuptr bias, kf_cuptr res,
		    kf_cuptr out, kf_custream s);

#endif
