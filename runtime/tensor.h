/* tensor.h: dense host tensors (kf_tensor, defined in kf.h) and the
 * conversions between our dtypes and double.
 *
 * A tensor owns its data (malloc'd, C order, little endian; i1 is one byte
 * 0/1).  A zeroed kf_tensor is a valid empty tensor: free and copy accept it.
 * Element access goes through double, which holds every value of every dtype
 * exactly except i64 beyond 2^53 (use the _i64 accessors for those).
 */
#ifndef KF_TENSOR_H
#define KF_TENSOR_H

#include "kf.h"

/* Allocates zeroed storage for dt[dim[0], ..., dim[rank-1]] (every dim >= 0,
 * rank <= KF_MAX_RANK), within the memory budget (kf_mem_reserve; freed by
 * kf_tensor_free).  t is overwritten (not freed first).  0; -1 on a bad
 * rank/dim, size overflow or OOM; KF_TENSOR_OVER_BUDGET when the bytes
 * would exceed the budget (kf_tensor_why says so); then t is zeroed. */
#define KF_TENSOR_OVER_BUDGET (-2)
int kf_tensor_alloc(kf_tensor *t, kf_dtype dt, int rank, const int64_t *dim);
/* Why allocating dt[dim...] fails: the bytes against the budget, or the
 * size limit (2^48 bytes). */
void kf_tensor_why(char *buf, size_t n, kf_dtype dt, int rank, const int64_t *dim);
/* Same, from a static kf_type; -1 also when the type has symbolic dims. */
int kf_tensor_alloc_type(kf_tensor *t, const kf_type *ty);
/* Frees data and zeroes t; safe on a zeroed tensor. */
void kf_tensor_free(kf_tensor *t);
int64_t kf_tensor_numel(const kf_tensor *t);
/* The tensor's type (dtype, rank, dims), for comparing with the IR. */
kf_type kf_tensor_type(const kf_tensor *t);
/* True when dtype, rank and every dim agree. */
bool kf_tensor_same_shape(const kf_tensor *a, const kf_tensor *b);

/* Element i (flat, C order) as double.  i must be in [0, numel). */
double kf_tensor_get(const kf_tensor *t, int64_t i);
/* Stores v converted to the dtype: f16/bf16 round to nearest even, f32 as a
 * C cast (round to nearest), integers truncate toward zero and saturate at
 * the dtype's range (NaN stores 0), i1 stores v != 0 (NaN is true). */
void kf_tensor_set(kf_tensor *t, int64_t i, double v);
/* Exact integer access for i64 (and any dtype: floats truncate as above). */
int64_t kf_tensor_get_i64(const kf_tensor *t, int64_t i);
void kf_tensor_set_i64(kf_tensor *t, int64_t i, int64_t v);

/* IEEE binary16 and bfloat16 <-> binary32.  Narrowing rounds to nearest,
 * ties to even; overflow gives inf; NaN stays NaN (quiet, sign kept);
 * subnormals are exact both ways. */
float kf_f16_to_f32(uint16_t h);
uint16_t kf_f32_to_f16(float f);
float kf_bf16_to_f32(uint16_t h);
uint16_t kf_f32_to_bf16(float f);
/* double -> f16 with a single rounding (no double rounding through f32). */
uint16_t kf_f64_to_f16(double d);
/* Rounds v to the nearest value representable in dt (as kf_tensor_set
 * stores it) and returns it as a double. */
double kf_dtype_round(kf_dtype dt, double v);

/* Deep copy: dst is overwritten (not freed first).  0, or -1 on OOM. */
int kf_tensor_copy(kf_tensor *dst, const kf_tensor *src);

/* One line for logs and tests: `f32[2,3] [1, 2, 3, 4, 5, 6] sum=21`.  At most
 * the first 8 elements are listed, then "...".  Elements are printed with
 * kf_buf_float's shortest text for floats; sum is over all elements as
 * double (nan/inf are printed as such). */
void kf_tensor_summary(kf_buf *out, const kf_tensor *t);

#endif
