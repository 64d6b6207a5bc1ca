/* cudnn.h: cuDNN, loaded with dlopen: a candidate for the implicit-GEMM
 * convs that the tuner measures against the own kernels, never a
 * requirement (docs/conv.md, "cuDNN as a candidate").  A conv fusion whose
 * tile config says `cudnn` runs as
 *   one cudnnConvolutionForward (x, w -> the conv's result) ->
 *   [the fused epilogue kernel of the rest of the body: bias, batch norm's
 *    affine, activation, residual; cuda/emit_mm_blas.c's part EPI]
 * in the channels-last layout kfuse's convs have (x [N, D?, H, W, C], w
 * [O, KD?, KH, KW, C], y [N, OD?, OH, OW, O]: cuDNN's NHWC / KRSC).
 *
 * Library: $KFUSE_CUDNN_LIB (if set, only that), else libcudnn.so.9,
 * libcudnn.so.  The legacy convolution API of cuDNN 9 (libcudnn.so's
 * shim loads libcudnn_cnn); the algorithm is the first of cuDNN's
 * heuristic list (cudnnGetConvolutionForwardAlgorithm_v7, as PyTorch
 * without cudnn.benchmark; $KFUSE_CUDNN_ALGO=find: the fastest that
 * cudnnFindConvolutionForwardAlgorithm times) that runs in the handle's
 * workspace with the math the conv allows: tensor cores for f16/bf16, and for f32 only with
 * tf32 allowed (else CUDNN_FMA_MATH).  The handle uses the driver's
 * current context and a workspace of its own, so runs can be captured
 * into a CUDA graph.
 */
#ifndef KF_CUDNN_H
#define KF_CUDNN_H

#include "kf.h"
#include "cuda.h"

/* A conv in cuDNN's terms: spatial dims padded to 3 at the front (size 1,
 * kernel 1, stride 1, pad 0), cuDNN seeing 2 of them (a 1-D or 2-D conv)
 * or 3; symmetric pads only (cuDNN has one pad a dim). */
typedef struct kf_dnn_conv {
	int dt;              /* kf_dtype of x, w and y: f16, bf16 or f32 */
	bool tf32;           /* f32 on tensor cores (allowed by the user) */
	int64_t N, C, O;
	int64_t in[3], out[3], k[3], s[3], d[3], p[3];
} kf_dnn_conv;

/* True when cuDNN takes c: a dtype above, extents in 32 bits, a
 * consistent output size (out = (in + 2p - d(k-1) - 1) / s + 1). */
bool kf_dnn_fits(const kf_dnn_conv *c);

/* What kf_cudnn_prepare hands the library, as data (a host-only test
 * checks it against cudnn.h): dims in cuDNN's order (N, C, spatial..)
 * whatever the format, the NHWC format for x, w and y. */
typedef struct kf_dnn_desc {
	int nbdims;          /* 4 (2 spatial dims) or 5 */
	int type;            /* cudnnDataType_t of x, w, y */
	int format;          /* cudnnTensorFormat_t: CUDNN_TENSOR_NHWC */
	int xdim[5], wdim[5], ydim[5];
	int pad[3], stride[3], dil[3]; /* nbdims - 2 of them */
	int mode;            /* CUDNN_CROSS_CORRELATION (a conv is one, as ONNX's) */
	int compute;         /* cudnnDataType_t of the accumulation: float */
	int math;            /* cudnnMathType_t */
} kf_dnn_desc;
void kf_cudnn_describe(const kf_dnn_conv *c, kf_dnn_desc *d);

typedef struct kf_cudnn kf_cudnn;
typedef struct kf_dnn_op kf_dnn_op;

/* NULL with the reason in why (no error: a caller keeps its own kernel);
 * later errors go to c. */
kf_cudnn *kf_cudnn_open(kf_ctx *c, kf_cuda *cu, char *why, size_t nwhy);
void kf_cudnn_close(kf_cudnn *b);
/* Descriptors and the algorithm, made once (a run is only the call);
 * NULL with the reason in why. */
kf_dnn_op *kf_cudnn_prepare(kf_cudnn *b, const kf_dnn_conv *c, char *why, size_t nwhy);
void kf_cudnn_op_free(kf_dnn_op *o);
/* The algorithm prepare chose (cudnnConvolutionFwdAlgo_t), for reports. */
int kf_cudnn_algo(const kf_dnn_op *o);
/* y = conv(x, w) on stream s (device addresses); 0, or -1 with an error. */
int kf_cudnn_run(kf_cudnn *b, const kf_dnn_op *o, kf_cuptr x, kf_cuptr w, kf_cuptr y, kf_custream s);

#endif
