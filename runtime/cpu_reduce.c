/* cpu_reduce.c: reductions (reduce_sum/mean/max/min), softmax, log_softmax
 * and layer_norm.
 *
 * Everything is brought to rows: the input is viewed as [outer, R, inner]
 * with the reduced dims in the middle (permuted into place by a strided copy
 * when they are not adjacent).  Floating dtypes accumulate in double, the
 * oracle's precision, and round once on store; integers accumulate in int64
 * and wrap.  max/min propagate NaN; an empty reduction gives the identity
 * (0 for sum, NaN for a float mean, -inf/+inf or the dtype's extreme for
 * max/min).
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

#define ROWTILE 1024

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		kf_oom(); /* as kf_alloc */
	return p;
}

/* ---- row views ------------------------------------------------------------ */

/* Copies x permuted by perm into t (allocated here). */
static int permute(const kf_tensor *x, const int *perm, kf_tensor *t)
{
	int64_t dim[KF_MAX_RANK], xs[KF_MAX_RANK], st[KF_MAX_RANK];
	int64_t s = 1;
	for (int d = x->rank - 1; d >= 0; d--) {
		xs[d] = s;
		s *= x->dim[d];
	}
	for (int d = 0; d < x->rank; d++) {
		dim[d] = x->dim[perm[d]];
		st[d] = xs[perm[d]];
	}
	if (kf_tensor_alloc(t, x->dtype, x->rank, dim) != 0)
		return -1;
	kf_rt_strided_copy(t->data, x->data, kf_dtype_size(x->dtype), 0, x->rank, dim, st);
	return 0;
}

/* Views x as [outer, R, inner] with the dims flagged in red[] as R.  When
 * they are not one block after dropping size-1 dims, x is permuted (kept
 * dims first) into *tmp and the view is [outer, R, 1] of it.  Returns the
 * tensor to read, or NULL on OOM. */
static const kf_tensor *rows_view(const kf_tensor *x, const bool *red, kf_tensor *tmp,
				  int64_t *outer, int64_t *R, int64_t *inner)
{
	int first = -1, last = -1;
	bool gap = false;
	for (int d = 0; d < x->rank; d++) {
		if (x->dim[d] == 1 || !red[d])
			continue;
		if (last >= 0)
			for (int e = last + 1; e < d; e++)
				gap |= x->dim[e] != 1 && !red[e];
		if (first < 0)
			first = d;
		last = d;
	}
	*outer = *R = *inner = 1;
	if (first < 0) { /* nothing of size > 1 reduced */
		*outer = kf_tensor_numel(x);
		return x;
	}
	if (!gap) {
		for (int d = 0; d < x->rank; d++)
			*(d < first ? outer : d <= last ? R : inner) *= x->dim[d];
		return x;
	}
	int perm[KF_MAX_RANK], k = 0;
	for (int d = 0; d < x->rank; d++)
		if (!red[d])
			perm[k++] = d;
	for (int d = 0; d < x->rank; d++)
		if (red[d])
			perm[k++] = d;
	if (permute(x, perm, tmp) != 0)
		return NULL;
	for (int d = 0; d < x->rank; d++)
		*(red[d] ? R : outer) *= x->dim[d];
	return tmp;
}

/* ---- reductions ------------------------------------------------------------- */

struct red {
	const kf_tensor *x;
	kf_tensor *y;
	int op;
	int64_t R, inner;
	double fid;      /* float identity for max/min */
	int64_t iid;     /* integer identity for max/min */
};

static inline double fred(int op, double a, double b)
{
	switch (op) {
	case KF_OP_REDUCE_MAX: return a > b || a != a ? a : b;
	case KF_OP_REDUCE_MIN: return a < b || a != a ? a : b;
	default: return a + b;
	}
}

static inline int64_t ired(int op, int64_t a, int64_t b)
{
	switch (op) {
	case KF_OP_REDUCE_MAX: return a > b ? a : b;
	case KF_OP_REDUCE_MIN: return a < b ? a : b;
	default: return (int64_t)((uint64_t)a + (uint64_t)b);
	}
}

/* Reduces R rows of `inner` elements starting at element `at` of x into acc
 * (inner values), tile by tile through buf. */
static void red_float(const struct red *r, int64_t at, double *acc, double *buf)
{
	size_t esz = kf_dtype_size(r->x->dtype);
	const char *base = (const char *)r->x->data + at * (int64_t)esz;
	for (int64_t j = 0; j < r->inner; j++)
		acc[j] = r->op == KF_OP_REDUCE_MAX || r->op == KF_OP_REDUCE_MIN ? r->fid : 0;
	if (r->inner == 1) {
		/* four partial sums: faster, and no less accurate */
		double s[4] = {acc[0], acc[0], acc[0], acc[0]};
		for (int64_t k = 0; k < r->R; k += ROWTILE) {
			int64_t m = r->R - k < ROWTILE ? r->R - k : ROWTILE, i = 0;
			kf_rt_load(r->x->dtype, base + k * (int64_t)esz, 1, m, RT_F64, buf);
			for (; i + 4 <= m; i += 4)
				for (int q = 0; q < 4; q++)
					s[q] = fred(r->op, s[q], buf[i + q]);
			for (; i < m; i++)
				s[0] = fred(r->op, s[0], buf[i]);
		}
		acc[0] = fred(r->op, fred(r->op, s[0], s[1]), fred(r->op, s[2], s[3]));
		return;
	}
	for (int64_t k = 0; k < r->R; k++)
		for (int64_t j = 0; j < r->inner; j += ROWTILE) {
			int64_t m = r->inner - j < ROWTILE ? r->inner - j : ROWTILE;
			kf_rt_load(r->x->dtype, base + (k * r->inner + j) * (int64_t)esz, 1, m, RT_F64, buf);
			if (r->op == KF_OP_REDUCE_SUM || r->op == KF_OP_REDUCE_MEAN)
				for (int64_t i = 0; i < m; i++)
					acc[j + i] += buf[i];
			else
				for (int64_t i = 0; i < m; i++)
					acc[j + i] = fred(r->op, acc[j + i], buf[i]);
		}
}

static void red_int(const struct red *r, int64_t at, int64_t *acc, int64_t *buf)
{
	size_t esz = kf_dtype_size(r->x->dtype);
	const char *base = (const char *)r->x->data + at * (int64_t)esz;
	for (int64_t j = 0; j < r->inner; j++)
		acc[j] = r->op == KF_OP_REDUCE_MAX || r->op == KF_OP_REDUCE_MIN ? r->iid : 0;
	for (int64_t k = 0; k < r->R; k++)
		for (int64_t j = 0; j < r->inner; j += ROWTILE) {
			int64_t m = r->inner - j < ROWTILE ? r->inner - j : ROWTILE;
			kf_rt_load(r->x->dtype, base + (k * r->inner + j) * (int64_t)esz, 1, m, RT_I64, buf);
			for (int64_t i = 0; i < m; i++)
				acc[j + i] = ired(r->op, acc[j + i], buf[i]);
		}
}

static void red_range(void *arg, int64_t lo, int64_t hi)
{
	const struct red *r = arg;
	bool isf = kf_dtype_is_float(r->x->dtype);
	size_t osz = kf_dtype_size(r->y->dtype);
	void *acc = xmalloc(r->inner * 8), *buf = xmalloc(ROWTILE * 8);
	for (int64_t o = lo; o < hi; o++) {
		int64_t at = o * r->R * r->inner;
		if (isf)
			red_float(r, at, acc, buf);
		else
			red_int(r, at, acc, buf);
		if (r->op == KF_OP_REDUCE_MEAN) {
			for (int64_t j = 0; j < r->inner; j++) {
				if (isf)
					((double *)acc)[j] /= (double)r->R;
				else /* integer mean truncates; of nothing it is 0 */
					((int64_t *)acc)[j] = r->R ? ((int64_t *)acc)[j] / r->R : 0;
			}
		}
		kf_rt_store(r->y->dtype, (char *)r->y->data + o * r->inner * (int64_t)osz,
			    isf ? RT_F64 : RT_I64, acc, r->inner);
	}
	free(acc);
	free(buf);
}

static int64_t int_extreme(kf_dtype dt, bool max)
{
	switch (dt) {
	case KF_I1: return max ? 1 : 0;
	case KF_I8: return max ? INT8_MAX : INT8_MIN;
	case KF_I32: return max ? INT32_MAX : INT32_MIN;
	default: return max ? INT64_MAX : INT64_MIN;
	}
}

int kf_cpu_reduce(KF_RT_CPU_ARGS)
{
	const kf_tensor *x = &in[0];
	bool red[KF_MAX_RANK] = {0};
	int64_t axes[KF_MAX_RANK];
	int na = kf_attr_ints(g, n, "axes", axes, KF_MAX_RANK);
	if (na <= 0) /* no axes or an empty list: all of them, as ONNX */
		for (int d = 0; d < x->rank; d++)
			red[d] = true;
	for (int i = 0; i < na; i++) {
		int a = kf_rt_axis(axes[i], x->rank);
		if (a < 0)
			return kf_rt_fail(err, errlen, "axis %lld out of range for rank %d",
					  (long long)axes[i], x->rank);
		red[a] = true;
	}
	struct red r = {.y = &out[0], .op = kf_N(g, n)->op};
	kf_tensor tmp = {0};
	int64_t outer;
	r.x = rows_view(x, red, &tmp, &outer, &r.R, &r.inner);
	if (!r.x)
		return kf_rt_fail(err, errlen, "out of memory");
	/* Dims of size 0 that are reduced make R 0; kept ones make outer 0. */
	r.R = 1;
	for (int d = 0; d < x->rank; d++)
		if (red[d])
			r.R *= x->dim[d];
	if (r.R == 0) {
		r.inner = 1;
		outer = kf_tensor_numel(&out[0]);
	}
	bool max = r.op == KF_OP_REDUCE_MAX;
	r.fid = max ? -INFINITY : INFINITY;
	r.iid = int_extreme(x->dtype, !max);
	kf_rt_parallel(outer, outer * r.R * r.inner, red_range, &r);
	kf_tensor_free(&tmp);
	return 0;
}

/* ---- softmax ---------------------------------------------------------------- */

struct smax {
	const kf_tensor *x;
	kf_tensor *y;
	int64_t A;
	bool log;
};

static void smax_range(void *arg, int64_t lo, int64_t hi)
{
	const struct smax *s = arg;
	double *v = xmalloc(s->A * sizeof(double));
	size_t xsz = kf_dtype_size(s->x->dtype), ysz = kf_dtype_size(s->y->dtype);
	for (int64_t o = lo; o < hi; o++) {
		kf_rt_load(s->x->dtype, (const char *)s->x->data + o * s->A * (int64_t)xsz, 1, s->A,
			   RT_F64, v);
		double m = -INFINITY, sum = 0;
		for (int64_t i = 0; i < s->A; i++)
			m = v[i] > m || v[i] != v[i] ? v[i] : m;
		if (s->log) {
			for (int64_t i = 0; i < s->A; i++)
				sum += exp(v[i] - m);
			double ls = log(sum);
			for (int64_t i = 0; i < s->A; i++)
				v[i] = v[i] - m - ls;
		} else { /* one exp per element: keep them */
			for (int64_t i = 0; i < s->A; i++) {
				v[i] = exp(v[i] - m);
				sum += v[i];
			}
			for (int64_t i = 0; i < s->A; i++)
				v[i] /= sum;
		}
		kf_rt_store(s->y->dtype, (char *)s->y->data + o * s->A * (int64_t)ysz, RT_F64, v, s->A);
	}
	free(v);
}

/* Softmax over rows; an axis that is not last is moved last and back. */
int kf_cpu_softmax(KF_RT_CPU_ARGS)
{
	const kf_tensor *x = &in[0];
	if (kf_tensor_numel(x) == 0)
		return 0;
	int axis = kf_rt_axis(kf_attr_int(g, n, "axis", -1), x->rank);
	if (axis < 0 && x->rank > 0)
		return kf_rt_fail(err, errlen, "axis %lld out of range for rank %d",
				  (long long)kf_attr_int(g, n, "axis", -1), x->rank);
	int64_t inner = 1;
	for (int d = axis + 1; d < x->rank; d++)
		inner *= x->dim[d];
	struct smax s = {.x = x, .y = &out[0], .A = x->rank ? x->dim[axis] : 1,
			 .log = kf_N(g, n)->op == KF_OP_LOG_SOFTMAX};
	kf_tensor xt = {0}, yt = {0};
	int perm[KF_MAX_RANK], inv[KF_MAX_RANK];
	if (inner > 1) {
		for (int d = 0, k = 0; d < x->rank; d++)
			if (d != axis)
				perm[k++] = d;
		perm[x->rank - 1] = axis;
		for (int d = 0; d < x->rank; d++)
			inv[perm[d]] = d;
		if (permute(x, perm, &xt) != 0 ||
		    kf_tensor_alloc(&yt, out[0].dtype, xt.rank, xt.dim) != 0) {
			kf_tensor_free(&xt);
			return kf_rt_fail(err, errlen, "out of memory");
		}
		s.x = &xt;
		s.y = &yt;
	}
	int64_t rows = s.A ? kf_tensor_numel(x) / s.A : 0;
	kf_rt_parallel(rows, rows * s.A * 8, smax_range, &s);
	if (inner > 1) {
		kf_tensor back = {0};
		int rc = permute(&yt, inv, &back);
		if (rc == 0) {
			memcpy(out[0].data, back.data, out[0].nbytes);
			kf_tensor_free(&back);
		}
		kf_tensor_free(&xt);
		kf_tensor_free(&yt);
		if (rc != 0)
			return kf_rt_fail(err, errlen, "out of memory");
	}
	return 0;
}

/* ---- layer_norm -------------------------------------------------------------- */

struct lnorm {
	const kf_tensor *x;
	kf_tensor *y;
	int64_t N;
	double eps;
	const double *scale, *bias; /* N values each, or NULL */
};

static void lnorm_range(void *arg, int64_t lo, int64_t hi)
{
	const struct lnorm *l = arg;
	double *v = xmalloc(l->N * sizeof(double));
	size_t xsz = kf_dtype_size(l->x->dtype), ysz = kf_dtype_size(l->y->dtype);
	for (int64_t o = lo; o < hi; o++) {
		kf_rt_load(l->x->dtype, (const char *)l->x->data + o * l->N * (int64_t)xsz, 1, l->N,
			   RT_F64, v);
		double mean = 0, var = 0;
		for (int64_t i = 0; i < l->N; i++)
			mean += v[i];
		mean /= (double)l->N;
		for (int64_t i = 0; i < l->N; i++)
			var += (v[i] - mean) * (v[i] - mean);
		var /= (double)l->N;
		double inv = 1.0 / sqrt(var + l->eps);
		for (int64_t i = 0; i < l->N; i++) {
			double t = (v[i] - mean) * inv;
			if (l->scale)
				t *= l->scale[i];
			if (l->bias)
				t += l->bias[i];
			v[i] = t;
		}
		kf_rt_store(l->y->dtype, (char *)l->y->data + o * l->N * (int64_t)ysz, RT_F64, v, l->N);
	}
	free(v);
}

/* scale or bias broadcast to the normalised shape dim[0..rank), as doubles. */
static double *expand_param(const kf_tensor *p, int rank, const int64_t *dim, int64_t N,
			    const char *what, char *err, size_t errlen)
{
	int r;
	int64_t bd[KF_MAX_RANK], st[KF_MAX_RANK];
	if (p->rank > rank || kf_rt_bcast_shape(rank, dim, p->rank, p->dim, &r, bd) != 0 ||
	    memcmp(bd, dim, sizeof(int64_t) * rank) != 0) {
		char a[96], b[96];
		kf_rt_fail(err, errlen, "%s of shape %s does not broadcast to the normalised shape %s",
			   what, kf_rt_shape_str(a, sizeof a, p->rank, p->dim),
			   kf_rt_shape_str(b, sizeof b, rank, dim));
		return NULL;
	}
	kf_tensor t = {0};
	if (kf_tensor_alloc(&t, p->dtype, rank, dim) != 0) {
		kf_rt_fail(err, errlen, "out of memory");
		return NULL;
	}
	kf_rt_bcast_strides(p, rank, st);
	kf_rt_strided_copy(t.data, p->data, kf_dtype_size(p->dtype), 0, rank, dim, st);
	double *v = xmalloc(N * sizeof(double));
	kf_rt_load(p->dtype, t.data, 1, N, RT_F64, v);
	kf_tensor_free(&t);
	return v;
}

int kf_cpu_layer_norm(KF_RT_CPU_ARGS)
{
	const kf_tensor *x = &in[0];
	int64_t a = kf_attr_int(g, n, "axis", -1);
	int axis = kf_rt_axis(a, x->rank);
	if (axis < 0)
		return kf_rt_fail(err, errlen, "axis %lld out of range for rank %d", (long long)a, x->rank);
	struct lnorm l = {.x = x, .y = &out[0], .eps = kf_attr_float(g, n, "epsilon", 1e-5)};
	l.N = kf_rt_numel(x->rank - axis, x->dim + axis);
	double *sb[2] = {NULL, NULL};
	for (int i = 1; i < nin && i < 3; i++) {
		sb[i - 1] = expand_param(&in[i], x->rank - axis, x->dim + axis, l.N,
					 i == 1 ? "scale" : "bias", err, errlen);
		if (!sb[i - 1]) {
			free(sb[0]);
			return -1;
		}
	}
	l.scale = sb[0];
	l.bias = sb[1];
	int64_t rows = l.N ? kf_tensor_numel(x) / l.N : 0;
	kf_rt_parallel(rows, rows * l.N * 4, lnorm_range, &l);
	free(sb[0]);
	free(sb[1]);
	return 0;
}
