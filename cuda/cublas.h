/* cublas.h: cuBLAS, loaded with dlopen, as the fallback for a matmul or
 * gemm that no contraction kernel fused (kfuse-run --backend=cuda with
 * KFUSE_CUBLAS=1) and as the baseline of bench/gpu/matmul.sh.
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

/* NULL with an error naming what is missing. */
kf_cublas *kf_cublas_open(kf_ctx *c, kf_cuda *cu);
void kf_cublas_close(kf_cublas *b);

/* True when node n (matmul or gemm) maps to one strided-batched GEMM:
 * f16, bf16, f32 or f64; batch dims equal on both sides or absent on one;
 * gemm without C.  A 1-D operand is a matrix of one row / column. */
bool kf_cublas_supports(kf_graph *g, kf_nid n);
/* Runs node n on stream s: a and b its operands, out its result (device
 * addresses).  f32 computes in f32 (no tf32). */
int kf_cublas_matmul(kf_cublas *b, kf_graph *g, kf_nid n, kf_cuptr a, kf_cuptr bm, kf_cuptr out, kf_custream s);

/* ---- cuBLASLt: a contraction fusion with its epilogue in one call ----------------------
 *
 * A `fusion {kind = "contraction"}` whose body is exactly matmul (operands
 * 2-D fusion inputs, either maybe transposed), add of a bias [N] or [1, N],
 * then nothing, relu, or gelu {approximate = "tanh"}, all of one dtype
 * (f16, bf16, f32), runs as one cublasLtMatmul with the epilogue
 * CUBLASLT_EPILOGUE_BIAS / _RELU_BIAS / _GELU_BIAS (cuBLASLt's GELU is the
 * tanh form; exact gelu is not offered to it).  f32 accumulation, f32
 * inputs without tf32.  The library: $KFUSE_CUBLASLT_LIB (only that), else
 * libcublasLt.so.13, .so.12, .so, then in $CUDA_HOME/lib64 and
 * /usr/local/cuda/lib64.  The tile config `cublaslt` selects it (the tuner
 * times it against the kernels); kf_cublaslt_default says when it is the
 * choice without a tuned config. */
typedef struct kf_cublaslt kf_cublaslt;
typedef struct kf_lt_op kf_lt_op;

enum { KF_LT_BIAS = 1, KF_LT_RELU_BIAS, KF_LT_GELU_BIAS };

typedef struct kf_lt_plan {
	kf_vid a, b, bias, out; /* the fusion's inputs and result (top-level values) */
	int64_t M, N, K;
	bool ta, tb;            /* A stored [K, M], B stored [N, K] */
	int dt;                 /* kf_dtype of operands, bias and result */
	int epi;                /* KF_LT_* */
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

/* True when fusion n maps to one cublasLtMatmul (above); fills *p. */
bool kf_cublaslt_plan(kf_graph *g, kf_nid n, kf_lt_plan *p);
/* The choice when no tile is tuned: large f16/bf16 GEMMs. */
bool kf_cublaslt_default(const kf_lt_plan *p);
/* NULL with the reason in why (no error: callers fall back to a kernel);
 * later errors go to c. */
kf_cublaslt *kf_cublaslt_open(kf_ctx *c, kf_cuda *cu, char *why, size_t nwhy);
void kf_cublaslt_close(kf_cublaslt *b);
/* Descriptors and the heuristic's algorithm, made once (so that a run is
 * only the launch); NULL with the reason in why. */
kf_lt_op *kf_cublaslt_prepare(kf_cublaslt *b, const kf_lt_plan *p, char *why, size_t nwhy);
void kf_cublaslt_op_free(kf_cublaslt *b, kf_lt_op *o);
/* D = epilogue(A B + bias) on stream s (device addresses). */
int kf_cublaslt_run(kf_cublaslt *b, const kf_lt_op *o, kf_cuptr a, kf_cuptr bm, kf_cuptr bias, kf_cuptr out,
		    kf_custream s);

#endif
