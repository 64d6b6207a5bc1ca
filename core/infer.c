/* infer.c: result types of constants, reductions, normalisations and
 * contractions.  Each function runs after kf_infer has checked the arity and
 * the attribute names, so operands exist; it checks kinds and values. */
#include <math.h>
#include <string.h>

#include "infer.h"

/* ---- const ---------------------------------------------------------------- */

/* Integer payloads must fit the dtype: a literal 300 in an i8 constant is a
 * mistake the printer would otherwise round-trip silently. */
static bool int_fits(kf_dtype dt, int64_t v)
{
	switch (dt) {
	case KF_I1: return v == 0 || v == 1;
	case KF_I8: return v >= -128 && v <= 127;
	case KF_I32: return v >= INT32_MIN && v <= INT32_MAX;
	default: return true;
	}
}

int kf_infer_const(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen)
{
	kf_ic ic = kf_ic_make(g, n, err, errlen);
	const kf_node *nd = kf_N(g, n);
	const kf_const *k = nd->cst;
	kf_tstr ts;
	if (nd->nres != 1)
		return kf_ic_fail(&ic, "'const' has %u results, expected 1", nd->nres);
	/* the declared type is the truth; only the payload is checked */
	const kf_type *t = kf_vtype(g, kf_res(g, n, 0));
	const char *tn = kf_ops_tstr(g->ctx, t, &ts);
	if (!k)
		return kf_ic_fail(&ic, "'const' %s has no value", tn);
	switch (k->kind) {
	case KF_CONST_FILE:
		if (!k->path)
			return kf_ic_fail(&ic, "'const' %s has an empty file name", tn);
		break;
	case KF_CONST_SCALAR:
	case KF_CONST_DENSE: {
		int64_t numel = kf_type_numel(t);
		bool isf = kf_dtype_is_float(t->dtype);
		/* n == 1 is a splat of any shape, symbolic ones included */
		if (k->n != 1 && numel < 0)
			return kf_ic_fail(&ic, "'const' %s: a dense constant needs a static shape", tn);
		if (k->n != 1 && (uint64_t)numel != k->n)
			return kf_ic_fail(&ic, "'const' %s has %llu values, expected %lld (or 1 to splat)", tn,
					  (unsigned long long)k->n, (long long)numel);
		if (k->n && isf && !k->f)
			return kf_ic_fail(&ic, "'const' %s holds integer values for a float dtype", tn);
		if (k->n && !isf && !k->i)
			return kf_ic_fail(&ic, "'const' %s holds float values for an integer dtype", tn);
		for (uint64_t i = 0; !isf && i < k->n; i++)
			if (!int_fits(t->dtype, k->i[i]))
				return kf_ic_fail(&ic, "'const' %s: value %lld does not fit %s", tn,
						  (long long)k->i[i], kf_dtype_name(t->dtype));
		break;
	}
	default:
		return kf_ic_fail(&ic, "'const' %s has an unknown payload kind %u", tn, k->kind);
	}
	out[0] = *t;
	return 1;
}

/* ---- reductions ------------------------------------------------------------ */

int kf_infer_reduce(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen)
{
	kf_ic ic = kf_ic_make(g, n, err, errlen);
	const kf_type *x = kf_ic_in(&ic, 0);
	const kf_attrval *axes;
	uint32_t nax;
	bool present, red[KF_MAX_RANK] = {false};
	int64_t keep;
	if (x->dtype == KF_I1)
		return kf_ic_fail(&ic, "'%s' takes float or integer operands, got i1", ic.op);
	if (!kf_ic_ints(&ic, "axes", &axes, &nax, &present) || !kf_ic_int(&ic, "keepdims", 1, &keep))
		return -1;
	/* no axes, or an empty list (ONNX noop_with_empty_axes = 0): all axes */
	for (int i = 0; i < x->rank && nax == 0; i++)
		red[i] = true;
	for (uint32_t i = 0; i < nax; i++) {
		int a;
		if (!kf_ic_axis(&ic, "axis", axes[i].i, x->rank, &a))
			return -1;
		if (red[a])
			return kf_ic_fail(&ic, "'%s' axis %d appears twice in 'axes'", ic.op, a);
		red[a] = true;
	}
	int64_t dim[KF_MAX_RANK];
	int r = 0;
	for (int i = 0; i < x->rank; i++)
		if (!red[i])
			dim[r++] = x->dim[i];
		else if (keep)
			dim[r++] = 1;
	out[0] = kf_type_make(x->dtype, r, dim);
	return 1;
}

int kf_infer_softmax(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen)
{
	kf_ic ic = kf_ic_make(g, n, err, errlen);
	const kf_type *x = kf_ic_in(&ic, 0);
	int64_t axis;
	int a;
	if (!kf_dtype_is_float(x->dtype))
		return kf_ic_fail(&ic, "'%s' takes float operands, got %s", ic.op, kf_dtype_name(x->dtype));
	if (!kf_ic_int(&ic, "axis", -1, &axis) || !kf_ic_axis(&ic, "axis", axis, x->rank, &a))
		return -1;
	out[0] = *x;
	return 1;
}

int kf_infer_layer_norm(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen)
{
	kf_ic ic = kf_ic_make(g, n, err, errlen);
	const kf_type *x = kf_ic_in(&ic, 0);
	int64_t axis;
	double eps;
	int a;
	if (!kf_dtype_is_float(x->dtype))
		return kf_ic_fail(&ic, "'layer_norm' takes float operands, got %s", kf_dtype_name(x->dtype));
	if (!kf_ic_int(&ic, "axis", -1, &axis) || !kf_ic_float(&ic, "epsilon", 1e-5, &eps) ||
	    !kf_ic_axis(&ic, "axis", axis, x->rank, &a))
		return -1;
	if (!(eps >= 0) || isinf(eps))
		return kf_ic_fail(&ic, "'layer_norm' epsilon must be finite and >= 0, got %g", eps);
	/* scale and bias have exactly the normalised shape x.shape[axis:] */
	kf_type want = kf_type_make(x->dtype, x->rank - a, x->dim + a);
	for (uint32_t i = 1; i < kf_ic_nin(&ic); i++) {
		const kf_type *s = kf_ic_in(&ic, i);
		if (s->dtype != want.dtype || s->rank != want.rank ||
		    memcmp(s->dim, want.dim, sizeof(int64_t) * want.rank)) {
			kf_tstr ts, tw;
			return kf_ic_fail(&ic, "'layer_norm' %s has type %s, expected %s (x's dims from axis %d)",
					  i == 1 ? "scale" : "bias", kf_ops_tstr(g->ctx, s, &ts),
					  kf_ops_tstr(g->ctx, &want, &tw), a);
		}
	}
	out[0] = *x;
	return 1;
}

/* ---- contractions --------------------------------------------------------- */

static int contraction_dims(kf_ic *ic, const char *what, int64_t ka, int64_t kb,
			    const kf_type *a, const kf_type *b)
{
	kf_tstr ta, tb, sa, sb;
	const kf_ctx *c = ic->g->ctx;
	return kf_ic_fail(ic, "'%s' %s dims differ: %s vs %s (%s and %s)", ic->op, what,
			  kf_ops_dstr(c, ka, &sa), kf_ops_dstr(c, kb, &sb), kf_ops_tstr(c, a, &ta),
			  kf_ops_tstr(c, b, &tb));
}

int kf_infer_matmul(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen)
{
	kf_ic ic = kf_ic_make(g, n, err, errlen);
	const kf_type *a = kf_ic_in(&ic, 0), *b = kf_ic_in(&ic, 1);
	if (!kf_ic_same_dtype(&ic, a, b))
		return -1;
	if (a->dtype == KF_I1)
		return kf_ic_fail(&ic, "'matmul' takes float or integer operands, got i1");
	if (a->rank == 0 || b->rank == 0)
		return kf_ic_fail(&ic, "'matmul' operands must have rank >= 1, got rank %d and %d", a->rank, b->rank);
	/* a 1-D a is a row [1,K], a 1-D b a column [K,1]; the added dim is
	 * removed from the result */
	int64_t m = a->rank == 1 ? 1 : a->dim[a->rank - 2], ka = a->dim[a->rank - 1];
	int64_t kb = b->rank == 1 ? b->dim[0] : b->dim[b->rank - 2], nn = b->rank == 1 ? 1 : b->dim[b->rank - 1];
	if (ka != kb)
		return contraction_dims(&ic, "inner", ka, kb, a, b);
	kf_type ba = kf_type_make(a->dtype, a->rank > 2 ? a->rank - 2 : 0, a->dim);
	kf_type bb = kf_type_make(b->dtype, b->rank > 2 ? b->rank - 2 : 0, b->dim);
	kf_type batch;
	if (!kf_ic_broadcast(&ic, &ba, &bb, &batch))
		return -1;
	int64_t dim[KF_MAX_RANK];
	int r = batch.rank;
	memcpy(dim, batch.dim, sizeof(int64_t) * r);
	if (a->rank > 1)
		dim[r++] = m;
	if (b->rank > 1)
		dim[r++] = nn;
	out[0] = kf_type_make(a->dtype, r, dim);
	return 1;
}

int kf_infer_gemm(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen)
{
	kf_ic ic = kf_ic_make(g, n, err, errlen);
	const kf_type *a = kf_ic_in(&ic, 0), *b = kf_ic_in(&ic, 1);
	int64_t ta, tb;
	double alpha, beta;
	if (!kf_ic_float(&ic, "alpha", 1.0, &alpha) || !kf_ic_float(&ic, "beta", 1.0, &beta) ||
	    !kf_ic_int(&ic, "trans_a", 0, &ta) || !kf_ic_int(&ic, "trans_b", 0, &tb))
		return -1;
	if (a->rank != 2 || b->rank != 2)
		return kf_ic_fail(&ic, "'gemm' takes 2-D a and b, got rank %d and %d", a->rank, b->rank);
	if (!kf_ic_same_dtype(&ic, a, b))
		return -1;
	if (a->dtype == KF_I1)
		return kf_ic_fail(&ic, "'gemm' takes float or integer operands, got i1");
	int64_t m = a->dim[ta ? 1 : 0], ka = a->dim[ta ? 0 : 1];
	int64_t kb = b->dim[tb ? 1 : 0], nn = b->dim[tb ? 0 : 1];
	if (ka != kb)
		return contraction_dims(&ic, "inner", ka, kb, a, b);
	int64_t mn[2] = {m, nn};
	out[0] = kf_type_make(a->dtype, 2, mn);
	if (kf_ic_nin(&ic) == 3) {
		/* c broadcasts one way only: to [M,N], never widening the result */
		const kf_type *c = kf_ic_in(&ic, 2);
		kf_type r;
		if (!kf_ic_same_dtype(&ic, a, c) || !kf_ic_broadcast(&ic, c, &out[0], &r))
			return -1;
		if (r.rank != 2 || r.dim[0] != m || r.dim[1] != nn) {
			kf_tstr tc, to;
			return kf_ic_fail(&ic, "'gemm' c of type %s does not broadcast to the result %s",
					  kf_ops_tstr(g->ctx, c, &tc), kf_ops_tstr(g->ctx, &out[0], &to));
		}
	}
	return 1;
}
