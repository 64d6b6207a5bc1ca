/* cpu_ops.h: internals shared by the CPU reference kernels (runtime/cpu_*.c).
 * Not for other modules: they use interp.h.
 *
 * Every kernel computes in one of three "compute kinds": f16, bf16 and f32
 * in float; f64 in double; i8, i32, i64 (and i1 in arithmetic) in int64_t,
 * wrapped to the dtype on store.  i1 in logic ops and `where` conditions is
 * loaded as bytes (RT_U8).  Loops run over contiguous buffers of the compute
 * kind so that the compiler vectorises them; conversion and broadcasting
 * happen in the gather/store around them.
 */
#ifndef KF_CPU_OPS_H
#define KF_CPU_OPS_H

#include <stdint.h>
#include "kf.h"
#include "tensor.h"

typedef enum { RT_F32, RT_F64, RT_I64, RT_U8 } rt_kind;

/* The compute kind a dtype is computed in. */
static inline rt_kind rt_kind_of(kf_dtype dt)
{
	switch (dt) {
	case KF_F16: case KF_BF16: case KF_F32: return RT_F32;
	case KF_F64: return RT_F64;
	default: return RT_I64;
	}
}

static inline size_t rt_kind_size(rt_kind k)
{
	return k == RT_F32 ? 4 : k == RT_U8 ? 1 : 8;
}

/* True when dtype dt is stored exactly as compute kind k (no conversion). */
static inline bool rt_native(kf_dtype dt, rt_kind k)
{
	return (k == RT_F32 && dt == KF_F32) || (k == RT_F64 && dt == KF_F64) ||
	       (k == RT_I64 && dt == KF_I64) || (k == RT_U8 && dt == KF_I1);
}

/* Writes a message to err and returns -1. */
int kf_rt_fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- conversions (cpu_ops.c) ---------------------------------------------- */

/* Loads n elements of dtype dt from p (element stride `stride`, may be 0)
 * into dst as compute kind k. */
void kf_rt_load(kf_dtype dt, const void *p, int64_t stride, int64_t n, rt_kind k, void *dst);
/* Stores n contiguous values of kind k into p as dtype dt: floats round to
 * nearest even, integers wrap, float to integer truncates and saturates
 * (NaN gives 0), anything to i1 is `!= 0`. */
void kf_rt_store(kf_dtype dt, void *p, rt_kind k, const void *src, int64_t n);
/* Float to int64 truncating toward zero, saturating at [lo, hi]; NaN is 0. */
int64_t kf_rt_f2i(double v, int64_t lo, int64_t hi);

/* ---- parallel loops (cpu_ops.c) ------------------------------------------ */

/* Below this many elements (or equivalent work) loops run on one thread. */
#define KF_RT_PAR_MIN 65536

typedef void (*kf_rt_range_fn)(void *arg, int64_t lo, int64_t hi);
/* Runs fn over [0, n) in contiguous chunks, on several threads when work
 * (an element count or flop estimate) is at least KF_RT_PAR_MIN. */
void kf_rt_parallel(int64_t n, int64_t work, kf_rt_range_fn fn, void *arg);

/* ---- strided iteration (cpu_ops.c) --------------------------------------- */

#define KF_RT_MAXOP 4

/* An output shape and, for each operand, its element strides over that
 * shape (0 on broadcast dims; any sign for slices).  rt_iter_init merges
 * dims that every operand walks contiguously, so a same-shape case is one
 * dim and runs are as long as possible. */
typedef struct rt_iter {
	int rank, nop;
	int64_t dim[KF_MAX_RANK];
	int64_t stride[KF_RT_MAXOP][KF_MAX_RANK];
} rt_iter;

void kf_rt_iter_init(rt_iter *it, int rank, const int64_t *dim, int nop,
		     int64_t (*stride)[KF_MAX_RANK]);
/* Row-major strides of a tensor aligned to the right of an output of rank
 * `rank` (numpy broadcasting): 0 where the tensor's dim is 1 or missing. */
void kf_rt_bcast_strides(const kf_tensor *t, int rank, int64_t *stride);
/* Calls fn for each inner run of the flat output range [lo, hi): pos is the
 * output offset of the run, off[k] operand k's element offset at its start,
 * n its length; operand k advances by it->stride[k][rank-1] per element. */
typedef void (*kf_rt_run_fn)(void *arg, int64_t pos, const int64_t *off, int64_t n);
void kf_rt_iter_walk(const rt_iter *it, int64_t lo, int64_t hi, kf_rt_run_fn fn, void *arg);

/* Copies elements of size esz: dst (contiguous, shape dim) from src at
 * element offset `base` with the given strides.  Multi-threaded when large. */
void kf_rt_strided_copy(void *dst, const void *src, size_t esz, int64_t base, int rank,
			const int64_t *dim, const int64_t *stride);

/* ---- helpers on shapes ----------------------------------------------------- */

int64_t kf_rt_numel(int rank, const int64_t *dim);
/* Normalises a possibly negative axis against rank; -1 if out of range. */
int kf_rt_axis(int64_t axis, int rank);
/* Numpy broadcast of shapes a and b into out (rank = max); -1 if they do not
 * broadcast. */
int kf_rt_bcast_shape(int ra, const int64_t *a, int rb, const int64_t *b, int *rout, int64_t *out);
/* Formats a shape as [2,3] into buf. */
const char *kf_rt_shape_str(char *buf, size_t len, int rank, const int64_t *dim);

/* ---- blocked matrix products (cpu_matmul.c) --------------------------------- */

/* A batch of products Y_b = alpha A_b B_b + beta C + bias, accumulated in
 * kind k (RT_F64 for float results: exact to double; RT_I64 wrapping) and
 * stored as dtype ydt.  A_b is [M][K] at element offset aoff[b] of A, B_b
 * [K][N] at boff[b] of B, both contiguous rows of kind k; row i of Y_b
 * starts at element yoff[b] + i * ldy of y.  C (gemm; NULL: none) is
 * [M][N] of kind k.  bias (RT_F64 only; NULL: none) adds
 * bias[bias_off[b] + j] to column j, or bias[bias_off[b] + i] to row i
 * when bias_rows.  Row blocks of all batches run on threads. */
typedef struct kf_rt_mm {
	rt_kind k;
	const void *A, *B, *C;
	int64_t M, N, K, nbatch, ldy;
	const int64_t *aoff, *boff, *yoff;
	void *y;
	kf_dtype ydt;
	double alpha, beta;
	const double *bias;
	const int64_t *bias_off;
	bool bias_rows;
} kf_rt_mm;
void kf_rt_mm_run(const kf_rt_mm *m);

/* ---- the kernels, by file -------------------------------------------------- */

#define KF_RT_CPU_ARGS kf_graph *g, kf_nid n, const kf_tensor *in, int nin, \
	kf_tensor *out, int nout, char *err, size_t errlen

int kf_cpu_unary(KF_RT_CPU_ARGS);   /* cpu_elementwise.c */
int kf_cpu_binary(KF_RT_CPU_ARGS);
int kf_cpu_compare(KF_RT_CPU_ARGS);
int kf_cpu_logic(KF_RT_CPU_ARGS);
int kf_cpu_where(KF_RT_CPU_ARGS);
int kf_cpu_cast(KF_RT_CPU_ARGS);
int kf_cpu_reduce(KF_RT_CPU_ARGS);  /* cpu_reduce.c */
int kf_cpu_softmax(KF_RT_CPU_ARGS);
int kf_cpu_layer_norm(KF_RT_CPU_ARGS);
int kf_cpu_matmul(KF_RT_CPU_ARGS);  /* cpu_matmul.c */
int kf_cpu_gemm(KF_RT_CPU_ARGS);
int kf_cpu_const(KF_RT_CPU_ARGS);   /* cpu_shape.c */
int kf_cpu_transpose(KF_RT_CPU_ARGS);
int kf_cpu_reshape(KF_RT_CPU_ARGS);
int kf_cpu_broadcast_to(KF_RT_CPU_ARGS);
int kf_cpu_concat(KF_RT_CPU_ARGS);
int kf_cpu_slice(KF_RT_CPU_ARGS);
int kf_cpu_split(KF_RT_CPU_ARGS);
int kf_cpu_conv(KF_RT_CPU_ARGS);    /* cpu_conv.c */
int kf_cpu_conv_transpose(KF_RT_CPU_ARGS);
int kf_cpu_pool(KF_RT_CPU_ARGS);
int kf_cpu_fusion(KF_RT_CPU_ARGS);  /* interp.c */
int kf_cpu_gather(KF_RT_CPU_ARGS);  /* cpu_index.c */
int kf_cpu_gather_elements(KF_RT_CPU_ARGS); /* cpu_index.c */
int kf_cpu_pad(KF_RT_CPU_ARGS);
int kf_cpu_resize(KF_RT_CPU_ARGS);
int kf_cpu_iota(KF_RT_CPU_ARGS);
int kf_cpu_shape(KF_RT_CPU_ARGS);
int kf_cpu_opaque(KF_RT_CPU_ARGS);

/* Element-wise over numpy-broadcast operands (cpu_elementwise.c): gathers
 * tiles of each operand in kind[k], calls kern on them and stores the result
 * tile (kind okind) into out.  Used by the reduce-family ops too. */
typedef void (*kf_rt_kern)(const void *const *a, void *o, int64_t n, const void *param);
void kf_rt_elementwise(const kf_tensor *const *ops, const rt_kind *kind, int nop,
		       kf_tensor *out, rt_kind okind, kf_rt_kern kern, const void *param);

/* Slice geometry (cpu_infer.c, shared with cpu_shape.c): for every dim of x
 * the first index, the step and the length of the result.  res is the
 * result's type as far as it is known (symbols bound): a symbolic end is
 * read from it. */
int kf_rt_slice_geom(kf_graph *g, kf_nid n, const kf_tensor *x, const kf_type *res, int64_t *start,
		     int64_t *step, int64_t *len, char *err, size_t errlen);
/* The geometry of a conv, conv_transpose or pool node on input x
 * (cpu_conv.c, for the kernels and kf_rt_shape): spatial dims padded to 3
 * at the front (size 1, kernel 1), so one loop nest serves 1-D to 3-D. */
typedef struct kf_rt_win {
	int nsp;                  /* spatial dims as written: 1..3 */
	bool cl;                  /* channels_last */
	int64_t N, C, O, group;   /* O: output channels (C for pools) */
	int64_t in[3], out[3], k[3], s[3], d[3], pb[3], pe[3]; /* pb, pe: pads before, after */
} kf_rt_win;
/* Fills w from node n, its input shapes and attributes; out is the result
 * shape.  0, or -1 with a message in err. */
int kf_rt_win_geom(kf_graph *g, kf_nid n, const kf_tensor *in, int nin, kf_rt_win *w,
		   int64_t *out, char *err, size_t errlen);
/* Split sizes along the axis (cpu_infer.c); returns the axis or -1. */
int kf_rt_split_sizes(kf_graph *g, kf_nid n, const kf_tensor *x, int nres, int64_t *sizes,
		      char *err, size_t errlen);

#endif
