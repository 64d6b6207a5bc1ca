/* tr.c: what the node translators share: ONNX attributes read, kfuse
 * attributes built, operands, and the ops most translations build. */
#include <stdlib.h>
#include <string.h>
#include "tr.h"

/* ---- ONNX attributes ---- */



/* ONNX float attributes are f32: take the shortest decimal that reads back
 * as the same f32, so that 0.35f prints as 0.35 rather than 0.3499999940395355. */
double kf_tr_f32(float f)
{
	char buf[32];
	for (int prec = 1; prec <= 9; prec++) {
		snprintf(buf, sizeof buf, "%.*g", prec, (double)f);
		if ((float)strtod(buf, NULL) == f)
			return strtod(buf, NULL);
	}
	return f;
}

double kf_tr_float(kf_np *np, const char *name, double dflt)
{
	const Onnx__AttributeProto *a = kf_imp_attr(np, name);
	return a ? kf_tr_f32(a->f) : dflt;
}



/* ---- kfuse attributes ---- */

kf_attr kf_tr_af(kf_imp *I, const char *k, double v) { return (kf_attr){kf_intern_cstr(I->c, k), {.kind = KF_ATTR_FLOAT, .f = v}}; }
kf_attr kf_tr_ab(kf_imp *I, const char *k, bool v) { return (kf_attr){kf_intern_cstr(I->c, k), {.kind = KF_ATTR_BOOL, .b = v}}; }
kf_attr kf_tr_as(kf_imp *I, const char *k, const char *v)
{
	return (kf_attr){kf_intern_cstr(I->c, k), {.kind = KF_ATTR_STR, .s = kf_intern_cstr(I->c, v)}};
}

/* ---- operands ---- */


kf_vid kf_tr_reshape(kf_imp *I, kf_vid x, const int64_t *shape, int rank)
{
	kf_attrval items[KF_MAX_RANK];
	kf_attr a = kf_tr_dims(I, "shape", items, shape, rank);
	return kf_imp_op(I, KF_OP_RESHAPE, &x, 1, &a, 1);
}

kf_vid kf_tr_reduce(kf_imp *I, int op, kf_vid x, const int64_t *axes, int n, bool keep)
{
	kf_attrval items[KF_MAX_RANK];
	kf_attr a[2] = {kf_tr_ab(I, "keepdims", keep)};
	int na = 1;
	if (n > 0)
		a[na++] = kf_imp_ints_attr(I, "axes", items, axes, n);
	return kf_imp_op(I, op, &x, 1, a, na);
}

int kf_tr_need_static(kf_imp *I, kf_vid x)
{
	if (!kf_type_is_static(kf_tr_ty(I, x)))
		return kf_imp_fail(I, "needs a static input shape (has symbolic dims)");
	return 0;
}



kf_attr kf_tr_dims(kf_imp *I, const char *k, kf_attrval *items, const int64_t *dims, int n)
{
	/* -1 is no symbol (sid 0 is the empty string): reshape's "infer this dim" */
	for (int i = 0; i < n; i++)
		items[i] = dims[i] < -1 ? (kf_attrval){.kind = KF_ATTR_STR, .s = KF_SYM_SID(dims[i])}
					: (kf_attrval){.kind = KF_ATTR_INT, .i = dims[i]};
	return (kf_attr){kf_intern_cstr(I->c, k), {.kind = KF_ATTR_LIST, .n = (uint32_t)n, .list = items}};
}

kf_vid kf_tr_slice(kf_imp *I, kf_vid x, int64_t axis, int64_t start, int64_t end)
{
	kf_attrval i0[1], i1[1], i2[1];
	kf_attr at[3] = {kf_imp_ints_attr(I, "axes", i0, &axis, 1), kf_imp_ints_attr(I, "starts", i1, &start, 1),
			 kf_tr_dims(I, "ends", i2, &end, 1)};
	return kf_imp_op(I, KF_OP_SLICE, &x, 1, at, 3);
}

kf_vid kf_tr_transpose(kf_imp *I, kf_vid x, const int64_t *perm, int rank)
{
	kf_attrval it[KF_MAX_RANK];
	kf_attr a = kf_imp_ints_attr(I, "perm", it, perm, rank);
	return kf_imp_op(I, KF_OP_TRANSPOSE, &x, 1, &a, 1);
}

kf_vid kf_tr_concat(kf_imp *I, const kf_vid *v, int n, int64_t axis)
{
	kf_attr a = kf_imp_int_attr(I, "axis", axis);
	return kf_imp_op(I, KF_OP_CONCAT, v, n, &a, 1);
}

kf_vid kf_tr_cast(kf_imp *I, kf_vid x, kf_dtype to)
{
	if (x == KF_NONE || kf_tr_dt(I, x) == to)
		return x;
	kf_attr a = kf_tr_as(I, "to", kf_dtype_name(to));
	return kf_imp_op(I, KF_OP_CAST, &x, 1, &a, 1);
}

kf_dtype kf_tr_float_join(kf_imp *I, const kf_vid *v, int n)
{
	/* an absent operand (KF_NONE) has no type: the translation fails on
	 * it later, with its message (found by fuzzing) */
	kf_dtype t = v[0] == KF_NONE ? KF_F32 : kf_tr_dt(I, v[0]);
	for (int i = 1; i < n; i++) {
		if (v[i] == KF_NONE)
			continue;
		kf_dtype u = kf_tr_dt(I, v[i]);
		if (u == t || !kf_dtype_is_float(u) || !kf_dtype_is_float(t))
			continue;
		/* f16 and bf16 meet in f32; otherwise the wider one */
		if (kf_dtype_size(u) == kf_dtype_size(t))
			t = KF_F32;
		else if (kf_dtype_size(u) > kf_dtype_size(t))
			t = u;
	}
	return t;
}

kf_dtype kf_tr_norm_type(kf_imp *I, const kf_vid *v, int n)
{
	kf_dtype xt = kf_tr_dt(I, v[0]), ct = kf_tr_float_join(I, v, n);
	return (xt == KF_F16 || xt == KF_BF16) && ct != KF_F64 ? KF_F32 : ct;
}

/* v is 0-d, or a constant of one element */
static bool scalar_like(kf_imp *I, kf_vid v)
{
	const kf_type *t = kf_tr_ty(I, v);
	if (t->rank == 0)
		return true;
	kf_nid d = kf_def(I->g, v);
	return d != KF_NONE && kf_N(I->g, d)->op == KF_OP_CONST && kf_type_is_static(t) && kf_type_numel(t) == 1;
}

int kf_tr_promote(kf_imp *I, kf_vid *a, kf_vid *b)
{
	if (*a == KF_NONE || *b == KF_NONE)
		return -1;
	kf_dtype ta = kf_tr_dt(I, *a), tb = kf_tr_dt(I, *b);
	if (ta == tb || !kf_dtype_is_float(ta) || !kf_dtype_is_float(tb))
		return 0;
	bool sa = scalar_like(I, *a), sb = scalar_like(I, *b);
	kf_vid v[2] = {*a, *b};
	/* a scalar does not widen a tensor (torch's rule for 0-d tensors and
	 * Python numbers, which the exporter writes as constants of one
	 * element: cosine_similarity's eps, f32[1] beside bf16 norms) */
	kf_dtype t = sa && !sb ? tb : sb && !sa ? ta : kf_tr_float_join(I, v, 2);
	*a = kf_tr_cast(I, *a, t);
	*b = kf_tr_cast(I, *b, t);
	return *a == KF_NONE || *b == KF_NONE ? -1 : 0;
}

int kf_tr_dims_from(kf_imp *I, kf_np *np, size_t input, const char *attr, int64_t *out, bool *sym, int max,
		    bool *present)
{
	*present = false;
	int n = -1;
	if (attr && kf_imp_attr(np, attr)) {
		*present = true;
		n = kf_imp_attr_ints(np, attr, out, max);
		for (int i = 0; i < n; i++)
			sym[i] = false;
		return n;
	}
	if (!kf_tr_has_in(np, input))
		return 0;
	*present = true;
	kf_vid v = kf_imp_input(I, np, input);
	if (v == KF_NONE)
		return -1;
	if ((n = kf_imp_const_ints(I, v, out, max)) >= 0) {
		for (int i = 0; i < n; i++)
			sym[i] = false;
		return n;
	}
	const kf_type *t = kf_tr_ty(I, v);
	if (kf_type_is_static(t) && kf_type_numel(t) > max)
		return kf_imp_fail(I, "input %zu ('%s') holds %lld values, more than the %d kfuse takes here", input,
				   np->input[input], (long long)kf_type_numel(t), max);
	if ((n = kf_sv_dims(I, v, out, sym, max)) >= 0)
		return n;
	return kf_imp_fail(I, "input %zu ('%s') must be a constant, or computed from the input shapes "
			      "(kfuse needs it at compile time; --bind NAME=FILE.npy freezes a graph input)",
			   input, np->input[input]);
}

int kf_tr_ints_from(kf_imp *I, kf_np *np, size_t input, const char *attr, int64_t *out, int max, bool *present)
{
	bool sym[KF_IMP_MAX_LIST];
	if (max > KF_IMP_MAX_LIST)
		max = KF_IMP_MAX_LIST;
	int n = kf_tr_dims_from(I, np, input, attr, out, sym, max, present);
	for (int i = 0; i < n; i++)
		if (sym[i])
			return kf_imp_fail(I, "input %zu ('%s') holds the symbolic dim %s where kfuse needs a static int "
					      "(it must be a constant at compile time)",
					   input, np->input[input], kf_str(I->c, KF_SYM_SID(out[i])));
	return n;
}

/* A per-channel parameter [C] as [C,1,...,1] so it broadcasts over NC... */
kf_vid kf_tr_per_channel(kf_imp *I, kf_vid p, int rank)
{
	if (p == KF_NONE)
		return p;
	const kf_type *t = kf_tr_ty(I, p);
	int64_t s[KF_MAX_RANK];
	if (t->rank != 1 || rank < 2)
		return p;
	s[0] = t->dim[0];
	for (int i = 1; i < rank - 1; i++)
		s[i] = 1;
	return kf_tr_reshape(I, p, s, rank - 1);
}

kf_vid kf_tr_iota(kf_imp *I, kf_dtype dt, const int64_t *dims, int rank, int axis)
{
	kf_attrval items[KF_MAX_RANK];
	kf_attr a[3] = {kf_tr_as(I, "dtype", kf_dtype_name(dt)), kf_tr_dims(I, "shape", items, dims, rank),
			kf_imp_int_attr(I, "axis", axis)};
	return kf_imp_op(I, KF_OP_IOTA, NULL, 0, a, 3);
}
