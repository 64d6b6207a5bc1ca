/* cpu_ops.c: the CPU op table, dtype conversions around the kernels,
 * strided iteration and the thread pool-less parallel loop.
 *
 * The kernels themselves live in cpu_elementwise.c, cpu_reduce.c,
 * cpu_matmul.c and cpu_shape.c; shapes at run time in cpu_infer.c.
 */
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cpu_ops.h"

/* The build's -O2 (gcc 12) vectorises only loops whose trip count is known;
 * these kernels are all unknown-length loops over contiguous buffers. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3")
#endif
#include "interp.h"

int kf_rt_fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (err && errlen)
		vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}

void kf_rt_register(kf_ctx *c)
{
	static const struct {
		int op;
		kf_cpu_fn fn;
	} tab[] = {
		{KF_OP_CONST, kf_cpu_const},
		{KF_OP_ADD, kf_cpu_binary}, {KF_OP_SUB, kf_cpu_binary}, {KF_OP_MUL, kf_cpu_binary},
		{KF_OP_DIV, kf_cpu_binary}, {KF_OP_POW, kf_cpu_binary}, {KF_OP_MAX, kf_cpu_binary},
		{KF_OP_MIN, kf_cpu_binary},
		{KF_OP_NEG, kf_cpu_unary}, {KF_OP_ABS, kf_cpu_unary}, {KF_OP_EXP, kf_cpu_unary},
		{KF_OP_LOG, kf_cpu_unary}, {KF_OP_SQRT, kf_cpu_unary}, {KF_OP_RSQRT, kf_cpu_unary},
		{KF_OP_TANH, kf_cpu_unary}, {KF_OP_SIGMOID, kf_cpu_unary}, {KF_OP_RELU, kf_cpu_unary},
		{KF_OP_GELU, kf_cpu_unary}, {KF_OP_ERF, kf_cpu_unary}, {KF_OP_SILU, kf_cpu_unary},
		{KF_OP_WHERE, kf_cpu_where}, {KF_OP_CAST, kf_cpu_cast},
		{KF_OP_EQ, kf_cpu_compare}, {KF_OP_NE, kf_cpu_compare}, {KF_OP_LT, kf_cpu_compare},
		{KF_OP_LE, kf_cpu_compare}, {KF_OP_GT, kf_cpu_compare}, {KF_OP_GE, kf_cpu_compare},
		{KF_OP_AND, kf_cpu_logic}, {KF_OP_OR, kf_cpu_logic}, {KF_OP_NOT, kf_cpu_logic},
		{KF_OP_REDUCE_SUM, kf_cpu_reduce}, {KF_OP_REDUCE_MEAN, kf_cpu_reduce},
		{KF_OP_REDUCE_MAX, kf_cpu_reduce}, {KF_OP_REDUCE_MIN, kf_cpu_reduce},
		{KF_OP_SOFTMAX, kf_cpu_softmax}, {KF_OP_LOG_SOFTMAX, kf_cpu_softmax},
		{KF_OP_LAYER_NORM, kf_cpu_layer_norm},
		{KF_OP_MATMUL, kf_cpu_matmul}, {KF_OP_GEMM, kf_cpu_gemm},
		{KF_OP_TRANSPOSE, kf_cpu_transpose}, {KF_OP_RESHAPE, kf_cpu_reshape},
		{KF_OP_BROADCAST_TO, kf_cpu_broadcast_to}, {KF_OP_CONCAT, kf_cpu_concat},
		{KF_OP_SLICE, kf_cpu_slice}, {KF_OP_SPLIT, kf_cpu_split},
		{KF_OP_CONV, kf_cpu_conv}, {KF_OP_CONV_TRANSPOSE, kf_cpu_conv_transpose},
		{KF_OP_MAX_POOL, kf_cpu_pool}, {KF_OP_AVG_POOL, kf_cpu_pool},
		{KF_OP_FUSION, kf_cpu_fusion},
		{KF_OP_GATHER, kf_cpu_gather}, {KF_OP_GATHER_ELEMENTS, kf_cpu_gather_elements}, {KF_OP_PAD, kf_cpu_pad}, {KF_OP_RESIZE, kf_cpu_resize},
		{KF_OP_IOTA, kf_cpu_iota}, {KF_OP_SHAPE, kf_cpu_shape}, {KF_OP_SIN, kf_cpu_unary},
		{KF_OP_COS, kf_cpu_unary}, {KF_OP_FLOOR, kf_cpu_unary}, {KF_OP_CEIL, kf_cpu_unary},
		{KF_OP_ROUND, kf_cpu_unary},
		{KF_OP_OPAQUE, kf_cpu_opaque},
	};
	if (kf_op_count(c) < KF_NBUILTIN)
		return;
	for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++) {
		kf_opinfo *o = kf_op_mut(c, tab[i].op);
		if (o && !o->cpu)
			o->cpu = tab[i].fn;
	}
}

/* ---- conversions --------------------------------------------------------- */

int64_t kf_rt_f2i(double v, int64_t lo, int64_t hi)
{
	if (v != v)
		return 0;
	if (v <= (double)lo)
		return lo;
	/* (double)INT64_MAX rounds up to 2^63, which is out of range: compare
	 * against the next power of two instead of hi itself. */
	if (hi == INT64_MAX ? v >= 9223372036854775808.0 : v >= (double)hi)
		return hi;
	return (int64_t)v;
}

/* One loop per (source dtype, kind): contiguous and strided variants so the
 * common contiguous case vectorises. */
#define LOAD_LOOP(ST, DT, EXPR)                                         \
	do {                                                            \
		const ST *s_ = p;                                       \
		DT *d_ = dst;                                           \
		if (stride == 1)                                        \
			for (int64_t i = 0; i < n; i++) {               \
				ST x = s_[i];                           \
				d_[i] = (EXPR);                         \
			}                                               \
		else                                                    \
			for (int64_t i = 0; i < n; i++) {               \
				ST x = s_[i * stride];                  \
				d_[i] = (EXPR);                         \
			}                                               \
	} while (0)

#define LOAD_ALL(DT, F16, BF16, FLT, DBL, INT)                               \
	switch (dt) {                                                        \
	case KF_F16: LOAD_LOOP(uint16_t, DT, F16); break;                    \
	case KF_BF16: LOAD_LOOP(uint16_t, DT, BF16); break;                  \
	case KF_F32: LOAD_LOOP(float, DT, FLT); break;                       \
	case KF_F64: LOAD_LOOP(double, DT, DBL); break;                      \
	case KF_I1: LOAD_LOOP(uint8_t, DT, INT); break;                      \
	case KF_I8: LOAD_LOOP(int8_t, DT, INT); break;                       \
	case KF_I32: LOAD_LOOP(int32_t, DT, INT); break;                     \
	case KF_I64: LOAD_LOOP(int64_t, DT, INT); break;                     \
	default: break;                                                      \
	}

void kf_rt_load(kf_dtype dt, const void *p, int64_t stride, int64_t n, rt_kind k, void *dst)
{
	switch (k) {
	case RT_F32:
		LOAD_ALL(float, kf_f16_to_f32(x), kf_bf16_to_f32(x), x, (float)x, (float)x);
		break;
	case RT_F64:
		LOAD_ALL(double, (double)kf_f16_to_f32(x), (double)kf_bf16_to_f32(x), (double)x, x,
			 (double)x);
		break;
	case RT_I64:
		LOAD_ALL(int64_t, kf_rt_f2i(kf_f16_to_f32(x), INT64_MIN, INT64_MAX),
			 kf_rt_f2i(kf_bf16_to_f32(x), INT64_MIN, INT64_MAX),
			 kf_rt_f2i(x, INT64_MIN, INT64_MAX), kf_rt_f2i(x, INT64_MIN, INT64_MAX),
			 (int64_t)x);
		break;
	case RT_U8:
		LOAD_ALL(uint8_t, (kf_f16_to_f32(x) != 0), (kf_bf16_to_f32(x) != 0), x != 0,
			 x != 0, x != 0);
		break;
	}
}

#define STORE_LOOP(DT, ST, EXPR)                                \
	do {                                                    \
		const ST *s_ = src;                             \
		DT *d_ = p;                                     \
		for (int64_t i = 0; i < n; i++) {               \
			ST x = s_[i];                           \
			d_[i] = (EXPR);                         \
		}                                               \
	} while (0)

/* Float sources saturate into integers; integer sources wrap (the cast
 * through the unsigned type of the same width is modular by definition). */
#define STORE_ALL(ST, F16, BF16, ISFLT)                                                  \
	switch (dt) {                                                                    \
	case KF_F16: STORE_LOOP(uint16_t, ST, F16); break;                               \
	case KF_BF16: STORE_LOOP(uint16_t, ST, BF16); break;                             \
	case KF_F32: STORE_LOOP(float, ST, (float)x); break;                             \
	case KF_F64: STORE_LOOP(double, ST, (double)x); break;                           \
	case KF_I1: STORE_LOOP(uint8_t, ST, x != 0); break;                              \
	case KF_I8:                                                                      \
		STORE_LOOP(int8_t, ST, ISFLT ? (int8_t)kf_rt_f2i(x, INT8_MIN, INT8_MAX)  \
					     : (int8_t)(uint8_t)(int64_t)x);             \
		break;                                                                   \
	case KF_I32:                                                                     \
		STORE_LOOP(int32_t, ST, ISFLT ? (int32_t)kf_rt_f2i(x, INT32_MIN, INT32_MAX) \
					      : (int32_t)(uint32_t)(int64_t)x);          \
		break;                                                                   \
	case KF_I64:                                                                     \
		STORE_LOOP(int64_t, ST, ISFLT ? kf_rt_f2i(x, INT64_MIN, INT64_MAX)       \
					      : (int64_t)x);                             \
		break;                                                                   \
	default: break;                                                                  \
	}

/* bf16 from double with a single rounding: round to bf16 in double, which
 * is then exact in f32. */
static uint16_t f64_to_bf16(double v) { return kf_f32_to_bf16((float)kf_dtype_round(KF_BF16, v)); }

void kf_rt_store(kf_dtype dt, void *p, rt_kind k, const void *src, int64_t n)
{
	switch (k) {
	case RT_F32: STORE_ALL(float, kf_f32_to_f16(x), kf_f32_to_bf16(x), 1); break;
	case RT_F64: STORE_ALL(double, kf_f64_to_f16(x), f64_to_bf16(x), 1); break;
	case RT_I64:
		STORE_ALL(int64_t, kf_f64_to_f16((double)x), f64_to_bf16((double)x), 0);
		break;
	case RT_U8: STORE_ALL(uint8_t, kf_f32_to_f16((float)x), kf_f32_to_bf16((float)x), 0); break;
	}
}

/* ---- parallel loops --------------------------------------------------------- */

#define RT_MAXTHREADS 64

struct par_job {
	kf_rt_range_fn fn;
	void *arg;
	int64_t lo, hi;
};

static void *par_main(void *p)
{
	struct par_job *j = p;
	j->fn(j->arg, j->lo, j->hi);
	return NULL;
}

/* KF_THREADS overrides the count (1 makes runs single-threaded, for
 * debugging and timing). */
static int rt_nthreads(void)
{
	const char *s = getenv("KF_THREADS");
	long n = s && *s ? strtol(s, NULL, 10) : sysconf(_SC_NPROCESSORS_ONLN);
	if (n < 1)
		n = 1;
	return n > RT_MAXTHREADS ? RT_MAXTHREADS : (int)n;
}

void kf_rt_parallel(int64_t n, int64_t work, kf_rt_range_fn fn, void *arg)
{
	if (n <= 0)
		return;
	int nt = work >= KF_RT_PAR_MIN && n > 1 ? rt_nthreads() : 1;
	if (nt > n)
		nt = (int)n;
	if (nt < 2) {
		fn(arg, 0, n);
		return;
	}
	pthread_t th[RT_MAXTHREADS];
	struct par_job job[RT_MAXTHREADS];
	bool started[RT_MAXTHREADS];
	for (int t = 0; t < nt; t++) {
		job[t] = (struct par_job){fn, arg, n * t / nt, n * (t + 1) / nt};
		started[t] = t > 0 && pthread_create(&th[t], NULL, par_main, &job[t]) == 0;
	}
	/* Chunks whose thread could not start run here: the result is the same. */
	for (int t = 0; t < nt; t++)
		if (!started[t])
			par_main(&job[t]);
	for (int t = 1; t < nt; t++)
		if (started[t])
			pthread_join(th[t], NULL);
}

/* ---- strided iteration ------------------------------------------------------ */

void kf_rt_iter_init(rt_iter *it, int rank, const int64_t *dim, int nop,
		     int64_t (*stride)[KF_MAX_RANK])
{
	it->nop = nop;
	it->rank = 0;
	for (int d = 0; d < rank; d++) {
		if (dim[d] == 1)
			continue; /* its stride never matters */
		int r = it->rank;
		bool merge = r > 0;
		for (int k = 0; k < nop && merge; k++)
			merge = it->stride[k][r - 1] == stride[k][d] * dim[d];
		if (merge) {
			it->dim[r - 1] *= dim[d];
			for (int k = 0; k < nop; k++)
				it->stride[k][r - 1] = stride[k][d];
			continue;
		}
		it->dim[r] = dim[d];
		for (int k = 0; k < nop; k++)
			it->stride[k][r] = stride[k][d];
		it->rank++;
	}
	if (it->rank == 0) {
		it->rank = 1;
		it->dim[0] = 1;
		for (int k = 0; k < nop; k++)
			it->stride[k][0] = 0;
	}
}

void kf_rt_bcast_strides(const kf_tensor *t, int rank, int64_t *stride)
{
	int64_t s = 1;
	for (int d = rank - 1; d >= 0; d--) {
		int td = d - (rank - t->rank);
		if (td < 0 || t->dim[td] == 1) {
			stride[d] = 0;
		} else {
			stride[d] = s;
			s *= t->dim[td];
		}
	}
}

void kf_rt_iter_walk(const rt_iter *it, int64_t lo, int64_t hi, kf_rt_run_fn fn, void *arg)
{
	if (lo >= hi)
		return;
	int r = it->rank;
	int64_t idx[KF_MAX_RANK], rem = lo;
	for (int d = r - 1; d >= 0; d--) {
		idx[d] = rem % it->dim[d];
		rem /= it->dim[d];
	}
	for (int64_t pos = lo; pos < hi;) {
		int64_t off[KF_RT_MAXOP];
		for (int k = 0; k < it->nop; k++) {
			off[k] = 0;
			for (int d = 0; d < r; d++)
				off[k] += idx[d] * it->stride[k][d];
		}
		int64_t n = it->dim[r - 1] - idx[r - 1];
		if (n > hi - pos)
			n = hi - pos;
		fn(arg, pos, off, n);
		pos += n;
		idx[r - 1] += n;
		for (int d = r - 1; d > 0 && idx[d] == it->dim[d]; d--) {
			idx[d] = 0;
			idx[d - 1]++;
		}
	}
}

struct scopy {
	rt_iter it;
	char *dst;
	const char *src;
	size_t esz;
};

#define COPY_RUN(T)                                                     \
	do {                                                            \
		T *d_ = (T *)dst;                                       \
		const T *s_ = (const T *)src;                           \
		for (int64_t i = 0; i < n; i++)                         \
			d_[i] = s_[i * st];                             \
	} while (0)

static void scopy_run(void *arg, int64_t pos, const int64_t *off, int64_t n)
{
	struct scopy *s = arg;
	int64_t st = s->it.stride[0][s->it.rank - 1];
	char *dst = s->dst + pos * s->esz;
	const char *src = s->src + off[0] * (int64_t)s->esz;
	if (st == 1) {
		memcpy(dst, src, n * s->esz);
		return;
	}
	switch (s->esz) {
	case 1: COPY_RUN(uint8_t); break;
	case 2: COPY_RUN(uint16_t); break;
	case 4: COPY_RUN(uint32_t); break;
	default: COPY_RUN(uint64_t); break;
	}
}

static void scopy_range(void *arg, int64_t lo, int64_t hi)
{
	struct scopy *s = arg;
	kf_rt_iter_walk(&s->it, lo, hi, scopy_run, s);
}

void kf_rt_strided_copy(void *dst, const void *src, size_t esz, int64_t base, int rank,
			const int64_t *dim, const int64_t *stride)
{
	int64_t total = kf_rt_numel(rank, dim);
	if (total == 0)
		return;
	struct scopy s = {.dst = dst, .src = (const char *)src + base * (int64_t)esz, .esz = esz};
	int64_t st[1][KF_MAX_RANK];
	memcpy(st[0], stride, sizeof(int64_t) * rank);
	kf_rt_iter_init(&s.it, rank, dim, 1, st);
	kf_rt_parallel(total, total, scopy_range, &s);
}

/* ---- shapes ---------------------------------------------------------------- */

int64_t kf_rt_numel(int rank, const int64_t *dim)
{
	int64_t n = 1;
	for (int d = 0; d < rank; d++)
		n *= dim[d];
	return n;
}

int kf_rt_axis(int64_t axis, int rank)
{
	if (axis < 0)
		axis += rank;
	return axis >= 0 && axis < rank ? (int)axis : -1;
}

int kf_rt_bcast_shape(int ra, const int64_t *a, int rb, const int64_t *b, int *rout, int64_t *out)
{
	int r = ra > rb ? ra : rb;
	for (int d = 0; d < r; d++) {
		int64_t x = d - (r - ra) >= 0 ? a[d - (r - ra)] : 1;
		int64_t y = d - (r - rb) >= 0 ? b[d - (r - rb)] : 1;
		if (x != y && x != 1 && y != 1)
			return -1;
		out[d] = x == 1 ? y : x;
	}
	*rout = r;
	return 0;
}

const char *kf_rt_shape_str(char *buf, size_t len, int rank, const int64_t *dim)
{
	size_t k = 0;
	k += snprintf(buf + k, len - k, "[");
	for (int d = 0; d < rank && k < len; d++)
		k += snprintf(buf + k, len - k, d ? ",%lld" : "%lld", (long long)dim[d]);
	if (k < len)
		snprintf(buf + k, len - k, "]");
	return buf;
}
