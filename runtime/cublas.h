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

#endif
