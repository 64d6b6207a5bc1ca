/* emit_conv.h: the convolution and pooling kernels (cuda/emit_conv.c) and
 * the index math they share with the host's tests.
 *
 * A conv in the channels-last form (docs/ops.md; the `layout` pass makes
 * it) with one group runs as an implicit GEMM on the contraction kernels of
 * cuda/emit_matmul.c and emit_mma.c: Y [M, O] = A [M, K] x W^T with
 *   M = N * OD * OH * OW (output positions), K = KD * KH * KW * C,
 *   A[m, k] = x[n, id, ih, iw, c] (0 in the padding), the im2col element,
 * gathered on the way into shared memory (16-byte cp.async chunks of 8
 * f16 channels where C allows), W [O, KD, KH, KW, C] read as the [O, K]
 * operand it already is, and the epilogue (bias, activation, residual) of
 * the matmul kernels on the accumulator.  A depthwise conv runs as a
 * direct kernel of its own (weights in shared memory, a thread a row of
 * outputs of one channel vector), a grouped conv as a direct kernel (a
 * thread per output element), both with the same epilogue, and
 * max_pool / avg_pool as a direct kernel of their own.  2-D and 1-D convs
 * are 3-D ones with leading dims of size 1.
 */
#ifndef KF_EMIT_CONV_H
#define KF_EMIT_CONV_H

#include <stdbool.h>

/* The im2col element (m, kk) of a channels-last conv over x [N, ID, IH, IW,
 * C] (output [N, OD, OH, OW, .]; CG channels per group, kk = ((kd * KH +
 * kh) * KW + kw) * CG + c): whether it lies inside the input, and its index
 * in x (group 0's channels; a caller adds its group's offset).  Device
 * code is this very text (kf_conv_gather, stringified by the emitter). */
#define KF_CONV_GATHER_BODY                                                                          \
	const long long q0 = m / OW, q1 = q0 / OH;                                                   \
	const int ow = (int)(m - q0 * OW), oh = (int)(q0 - q1 * OH), od = (int)(q1 % OD);            \
	const long long n = q1 / OD;                                                                 \
	const int c = kk % CG, r0 = kk / CG, kw = r0 % KW, r1 = r0 / KW, kh = r1 % KH, kd = r1 / KH; \
	const int id = od * SD - PD + kd * DD, ih = oh * SH - PH + kh * DH, iw = ow * SW - PW + kw * DW; \
	*ix = (((n * ID + id) * IH + ih) * IW + iw) * C + c;                                         \
	return (unsigned)id < (unsigned)ID && (unsigned)ih < (unsigned)IH && (unsigned)iw < (unsigned)IW;
#define KF_CONV_GATHER_PARAMS                                                                        \
	long long m, int kk, int OD, int OH, int OW, int ID, int IH, int IW, int C, int CG, int KH, int KW, \
	int SD, int SH, int SW, int PD, int PH, int PW, int DD, int DH, int DW, long long *ix
bool kf_conv_gather(KF_CONV_GATHER_PARAMS);

#endif
