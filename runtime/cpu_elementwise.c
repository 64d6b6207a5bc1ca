/* cpu_elementwise.c: element-wise ops under numpy broadcasting: unary math,
 * binary arithmetic, comparisons, logic, where and cast.
 *
 * The driver (kf_rt_elementwise) cuts the output into tiles; each operand's
 * tile is gathered (converted, broadcast by precomputed strides) into a
 * buffer of its compute kind, unless it is already contiguous and native, in
 * which case the kernel reads the tensor itself.  Kernels are plain loops
 * over those buffers.  Integer arithmetic is made total: see
 * docs/interpreter.md (division by zero gives 0, INT_MIN / -1 wraps).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "cpu_ops.h"

/* The build's -O2 (gcc 12) vectorises only loops whose trip count is known;
 * these kernels are all unknown-length loops over contiguous buffers. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3")
#endif

#define TILE 1024

struct ew {
	const kf_tensor *const *ops;
	const rt_kind *kind;
	int nop;
	kf_tensor *out;
	rt_kind okind;
	kf_rt_kern kern;
	const void *param;
	rt_iter it;
	int64_t total;
	/* per tile, set by ew_range */
	int64_t start;
	void *buf[KF_RT_MAXOP];
};

static void ew_gather(void *arg, int64_t pos, const int64_t *off, int64_t n)
{
	struct ew *e = arg;
	for (int k = 0; k < e->nop; k++) {
		if (!e->buf[k])
			continue; /* read in place */
		const kf_tensor *t = e->ops[k];
		size_t esz = kf_dtype_size(t->dtype);
		kf_rt_load(t->dtype, (const char *)t->data + off[k] * (int64_t)esz,
			   e->it.stride[k][e->it.rank - 1], n, e->kind[k],
			   (char *)e->buf[k] + (pos - e->start) * rt_kind_size(e->kind[k]));
	}
}

static void ew_range(void *arg, int64_t lo, int64_t hi)
{
	struct ew e = *(struct ew *)arg; /* a private copy per thread */
	/* Heap, not a char array on the stack: the kernels read it as float,
	 * double or int64, which only untyped (malloc'd) storage allows. */
	char *mem = malloc((KF_RT_MAXOP + 1) * TILE * 8);
	if (!mem)
		kf_oom(); /* as kf_alloc: out of memory is not recoverable here */
	char *bufs[KF_RT_MAXOP + 1];
	for (int k = 0; k <= KF_RT_MAXOP; k++)
		bufs[k] = mem + k * TILE * 8;
	const void *in[KF_RT_MAXOP];
	bool contig = e.it.rank == 1;
	size_t osz = kf_dtype_size(e.out->dtype);
	for (int64_t t = lo; t < hi; t++) {
		int64_t start = t * TILE, len = e.total - start < TILE ? e.total - start : TILE;
		bool gather = false;
		e.start = start;
		for (int k = 0; k < e.nop; k++) {
			const kf_tensor *x = e.ops[k];
			if (contig && e.it.stride[k][0] == 1 && rt_native(x->dtype, e.kind[k])) {
				e.buf[k] = NULL;
				in[k] = (const char *)x->data + start * (int64_t)kf_dtype_size(x->dtype);
			} else {
				e.buf[k] = bufs[k];
				in[k] = bufs[k];
				gather = true;
			}
		}
		if (gather)
			kf_rt_iter_walk(&e.it, start, start + len, ew_gather, &e);
		char *dst = (char *)e.out->data + start * (int64_t)osz;
		if (rt_native(e.out->dtype, e.okind)) {
			e.kern(in, dst, len, e.param);
		} else {
			e.kern(in, bufs[KF_RT_MAXOP], len, e.param);
			kf_rt_store(e.out->dtype, dst, e.okind, bufs[KF_RT_MAXOP], len);
		}
	}
	free(mem);
}

void kf_rt_elementwise(const kf_tensor *const *ops, const rt_kind *kind, int nop,
		       kf_tensor *out, rt_kind okind, kf_rt_kern kern, const void *param)
{
	struct ew e = {.ops = ops, .kind = kind, .nop = nop, .out = out, .okind = okind,
		       .kern = kern, .param = param};
	e.total = kf_tensor_numel(out);
	if (e.total == 0)
		return;
	int64_t stride[KF_RT_MAXOP][KF_MAX_RANK];
	for (int k = 0; k < nop; k++)
		kf_rt_bcast_strides(ops[k], out->rank, stride[k]);
	kf_rt_iter_init(&e.it, out->rank, out->dim, nop, stride);
	kf_rt_parallel((e.total + TILE - 1) / TILE, e.total, ew_range, &e);
}

/* ---- kernels ---------------------------------------------------------------- */

#define EACH(E)                                 \
	for (int64_t i = 0; i < n; i++) {       \
		E;                              \
	}                                       \
	break

struct ewparam {
	int op;
	bool tanh_approx; /* gelu */
};

/* max/min as numpy's maximum/minimum: a NaN in either operand wins. */
#define FMAX(a, b) ((a) > (b) || (a) != (a) ? (a) : (b))
#define FMIN(a, b) ((a) < (b) || (a) != (a) ? (a) : (b))

#define UNARY_FLOAT(T, EXP, LOG, SQRT, TANH, ERF, ABS, SIN, COS, HALF, ONE, K0, K1)            \
	const T *x = a[0];                                                                     \
	T *y = o;                                                                              \
	switch (p->op) {                                                                       \
	case KF_OP_NEG: EACH(y[i] = -x[i]);                                                    \
	case KF_OP_ABS: EACH(y[i] = ABS(x[i]));                                                \
	case KF_OP_EXP: EACH(y[i] = EXP(x[i]));                                                \
	case KF_OP_LOG: EACH(y[i] = LOG(x[i]));                                                \
	case KF_OP_SQRT: EACH(y[i] = SQRT(x[i]));                                              \
	case KF_OP_RSQRT: EACH(y[i] = ONE / SQRT(x[i]));                                       \
	case KF_OP_TANH: EACH(y[i] = TANH(x[i]));                                              \
	case KF_OP_SIGMOID: EACH(y[i] = ONE / (ONE + EXP(-x[i])));                             \
	case KF_OP_RELU: EACH(y[i] = x[i] < 0 ? 0 : x[i]);                                     \
	case KF_OP_ERF: EACH(y[i] = ERF(x[i]));                                                \
	case KF_OP_SILU: EACH(y[i] = x[i] / (ONE + EXP(-x[i])));                               \
	case KF_OP_SIN: EACH(y[i] = SIN(x[i]));                                                \
	case KF_OP_COS: EACH(y[i] = COS(x[i]));                                                \
	case KF_OP_FLOOR: EACH(y[i] = (T)floor(x[i])); /* exact in double for either T */      \
	case KF_OP_CEIL: EACH(y[i] = (T)ceil(x[i]));                                           \
	case KF_OP_ROUND: EACH(y[i] = (T)nearbyint(x[i])); /* halves to even (the default mode) */ \
	case KF_OP_GELU:                                                                       \
		if (p->tanh_approx) {                                                          \
			EACH(T v = x[i];                                                       \
			     y[i] = HALF * v * (ONE + TANH(K0 * (v + K1 * v * v * v))));       \
		}                                                                              \
		EACH(y[i] = HALF * x[i] * (ONE + ERF(x[i] * (T)M_SQRT1_2)));                   \
	default: break;                                                                        \
	}

static void unary_f32(const void *const *a, void *o, int64_t n, const void *param)
{
	const struct ewparam *p = param;
	UNARY_FLOAT(float, expf, logf, sqrtf, tanhf, erff, fabsf, sinf, cosf, 0.5f, 1.0f, 0.7978845608028654f,
		    0.044715f)
}

static void unary_f64(const void *const *a, void *o, int64_t n, const void *param)
{
	const struct ewparam *p = param;
	UNARY_FLOAT(double, exp, log, sqrt, tanh, erf, fabs, sin, cos, 0.5, 1.0, 0.7978845608028654, 0.044715)
}

/* Integers: negation and abs wrap (abs(INT_MIN) is INT_MIN, as numpy). */
static void unary_i64(const void *const *a, void *o, int64_t n, const void *param)
{
	const struct ewparam *p = param;
	const int64_t *x = a[0];
	int64_t *y = o;
	switch (p->op) {
	case KF_OP_NEG: EACH(y[i] = (int64_t)(0 - (uint64_t)x[i]));
	case KF_OP_ABS: EACH(y[i] = x[i] < 0 ? (int64_t)(0 - (uint64_t)x[i]) : x[i]);
	case KF_OP_RELU: EACH(y[i] = x[i] < 0 ? 0 : x[i]);
	default: break;
	}
}

int kf_cpu_unary(KF_RT_CPU_ARGS)
{
	int op = kf_N(g, n)->op;
	struct ewparam p = {op, false};
	if (op == KF_OP_GELU) {
		const char *ap = kf_attr_str(g, n, "approximate", "none");
		if (strcmp(ap, "tanh") == 0)
			p.tanh_approx = true;
		else if (strcmp(ap, "none") != 0)
			return kf_rt_fail(err, errlen, "gelu: approximate must be \"none\" or \"tanh\", not \"%s\"", ap);
	}
	rt_kind k = rt_kind_of(out[0].dtype);
	/* Integer dtypes compute transcendental ops in double and store back
	 * truncated and saturated; neg, abs and relu stay exact in int64. */
	if (k == RT_I64 && op != KF_OP_NEG && op != KF_OP_ABS && op != KF_OP_RELU)
		k = RT_F64;
	kf_rt_kern kern = k == RT_F32 ? unary_f32 : k == RT_F64 ? unary_f64 : unary_i64;
	const kf_tensor *ops[1] = {&in[0]};
	kf_rt_elementwise(ops, &k, 1, &out[0], k, kern, &p);
	return 0;
}

#define BINARY_FLOAT(T, POW)                                    \
	const T *x = a[0], *z = a[1];                           \
	T *y = o;                                               \
	switch (p->op) {                                        \
	case KF_OP_ADD: EACH(y[i] = x[i] + z[i]);               \
	case KF_OP_SUB: EACH(y[i] = x[i] - z[i]);               \
	case KF_OP_MUL: EACH(y[i] = x[i] * z[i]);               \
	case KF_OP_DIV: EACH(y[i] = x[i] / z[i]);               \
	case KF_OP_POW: EACH(y[i] = POW(x[i], z[i]));           \
	case KF_OP_MAX: EACH(y[i] = FMAX(x[i], z[i]));          \
	case KF_OP_MIN: EACH(y[i] = FMIN(x[i], z[i]));          \
	default: break;                                         \
	}

static void binary_f32(const void *const *a, void *o, int64_t n, const void *param)
{
	const struct ewparam *p = param;
	BINARY_FLOAT(float, powf)
}

static void binary_f64(const void *const *a, void *o, int64_t n, const void *param)
{
	const struct ewparam *p = param;
	BINARY_FLOAT(double, pow)
}

/* Total integer division: x / 0 is 0 and INT64_MIN / -1 wraps to INT64_MIN
 * (narrower dtypes wrap on store the same way). */
static inline int64_t idiv(int64_t x, int64_t z)
{
	if (z == 0)
		return 0;
	if (z == -1)
		return (int64_t)(0 - (uint64_t)x);
	return x / z;
}

/* Integer power by squaring, wrapping; a negative exponent gives 1/x^-e
 * truncated: 1 for x = 1, +-1 for x = -1, else 0 (0^-e included). */
static inline int64_t ipow(int64_t x, int64_t e)
{
	if (e < 0)
		return x == 1 ? 1 : x == -1 ? (e & 1 ? -1 : 1) : 0;
	uint64_t r = 1, b = (uint64_t)x;
	for (; e; e >>= 1) {
		if (e & 1)
			r *= b;
		b *= b;
	}
	return (int64_t)r;
}

static void binary_i64(const void *const *a, void *o, int64_t n, const void *param)
{
	const struct ewparam *p = param;
	const int64_t *x = a[0], *z = a[1];
	int64_t *y = o;
	switch (p->op) {
	case KF_OP_ADD: EACH(y[i] = (int64_t)((uint64_t)x[i] + (uint64_t)z[i]));
	case KF_OP_SUB: EACH(y[i] = (int64_t)((uint64_t)x[i] - (uint64_t)z[i]));
	case KF_OP_MUL: EACH(y[i] = (int64_t)((uint64_t)x[i] * (uint64_t)z[i]));
	case KF_OP_DIV: EACH(y[i] = idiv(x[i], z[i]));
	case KF_OP_POW: EACH(y[i] = ipow(x[i], z[i]));
	case KF_OP_MAX: EACH(y[i] = x[i] > z[i] ? x[i] : z[i]);
	case KF_OP_MIN: EACH(y[i] = x[i] < z[i] ? x[i] : z[i]);
	default: break;
	}
}

int kf_cpu_binary(KF_RT_CPU_ARGS)
{
	struct ewparam p = {kf_N(g, n)->op, false};
	rt_kind k = rt_kind_of(out[0].dtype);
	rt_kind kk[2] = {k, k};
	kf_rt_kern kern = k == RT_F32 ? binary_f32 : k == RT_F64 ? binary_f64 : binary_i64;
	const kf_tensor *ops[2] = {&in[0], &in[1]};
	kf_rt_elementwise(ops, kk, 2, &out[0], k, kern, &p);
	return 0;
}

/* Comparisons write i1 bytes; IEEE: every comparison with NaN is false but ne. */
#define COMPARE(T)                                              \
	const T *x = a[0], *z = a[1];                           \
	uint8_t *y = o;                                         \
	switch (p->op) {                                        \
	case KF_OP_EQ: EACH(y[i] = x[i] == z[i]);               \
	case KF_OP_NE: EACH(y[i] = x[i] != z[i]);               \
	case KF_OP_LT: EACH(y[i] = x[i] < z[i]);                \
	case KF_OP_LE: EACH(y[i] = x[i] <= z[i]);               \
	case KF_OP_GT: EACH(y[i] = x[i] > z[i]);                \
	case KF_OP_GE: EACH(y[i] = x[i] >= z[i]);               \
	default: break;                                         \
	}

static void compare_f32(const void *const *a, void *o, int64_t n, const void *param)
{
	const struct ewparam *p = param;
	COMPARE(float)
}

static void compare_f64(const void *const *a, void *o, int64_t n, const void *param)
{
	const struct ewparam *p = param;
	COMPARE(double)
}

static void compare_i64(const void *const *a, void *o, int64_t n, const void *param)
{
	const struct ewparam *p = param;
	COMPARE(int64_t)
}

int kf_cpu_compare(KF_RT_CPU_ARGS)
{
	struct ewparam p = {kf_N(g, n)->op, false};
	/* Operands of different float widths compare in the wider kind. */
	rt_kind k0 = rt_kind_of(in[0].dtype), k1 = rt_kind_of(in[1].dtype);
	rt_kind k = k0 == k1 ? k0 : (k0 == RT_F64 || k1 == RT_F64) ? RT_F64 : RT_F32;
	rt_kind kk[2] = {k, k};
	kf_rt_kern kern = k == RT_F32 ? compare_f32 : k == RT_F64 ? compare_f64 : compare_i64;
	const kf_tensor *ops[2] = {&in[0], &in[1]};
	kf_rt_elementwise(ops, kk, 2, &out[0], RT_U8, kern, &p);
	return 0;
}

static void logic_u8(const void *const *a, void *o, int64_t n, const void *param)
{
	const struct ewparam *p = param;
	const uint8_t *x = a[0], *z = a[1];
	uint8_t *y = o;
	switch (p->op) {
	case KF_OP_AND: EACH(y[i] = x[i] & z[i]);
	case KF_OP_OR: EACH(y[i] = x[i] | z[i]);
	case KF_OP_NOT: EACH(y[i] = x[i] ^ 1);
	default: break;
	}
}

int kf_cpu_logic(KF_RT_CPU_ARGS)
{
	struct ewparam p = {kf_N(g, n)->op, false};
	rt_kind kk[2] = {RT_U8, RT_U8};
	const kf_tensor *ops[2] = {&in[0], nin > 1 ? &in[1] : NULL};
	kf_rt_elementwise(ops, kk, p.op == KF_OP_NOT ? 1 : 2, &out[0], RT_U8, logic_u8, &p);
	return 0;
}

static void where_4(const void *const *a, void *o, int64_t n, const void *param)
{
	const uint8_t *c = a[0];
	const uint32_t *x = a[1], *z = a[2];
	uint32_t *y = o;
	for (int64_t i = 0; i < n; i++)
		y[i] = c[i] ? x[i] : z[i];
}

static void where_8(const void *const *a, void *o, int64_t n, const void *param)
{
	const uint8_t *c = a[0];
	const uint64_t *x = a[1], *z = a[2];
	uint64_t *y = o;
	for (int64_t i = 0; i < n; i++)
		y[i] = c[i] ? x[i] : z[i];
}

int kf_cpu_where(KF_RT_CPU_ARGS)
{
	rt_kind k = rt_kind_of(out[0].dtype);
	rt_kind kk[3] = {RT_U8, k, k};
	const kf_tensor *ops[3] = {&in[0], &in[1], &in[2]};
	kf_rt_elementwise(ops, kk, 3, &out[0], k, rt_kind_size(k) == 4 ? where_4 : where_8, NULL);
	return 0;
}

static void copy_kern(const void *const *a, void *o, int64_t n, const void *param)
{
	memcpy(o, a[0], n * rt_kind_size(*(const rt_kind *)param));
}

/* Load in the source's kind, store into the target dtype: one rounding for
 * every pair (f64 -> f16 included), int -> int wraps, float -> int
 * truncates and saturates with NaN -> 0, anything -> i1 is `!= 0`. */
int kf_cpu_cast(KF_RT_CPU_ARGS)
{
	rt_kind k = rt_kind_of(in[0].dtype);
	const kf_tensor *ops[1] = {&in[0]};
	kf_rt_elementwise(ops, &k, 1, &out[0], k, copy_kern, &k);
	return 0;
}
