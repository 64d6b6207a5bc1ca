/* translate.c: one ONNX node to kfuse ops, with ONNX's semantics per opset.
 * Ops kfuse has are mapped one to one; activations kfuse lacks are written
 * as the primitive ops that ONNX's own function definitions use. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "importer.h"
#include "tensor.h"

typedef const Onnx__NodeProto NP;

/* ---- ONNX attributes ---- */

static const Onnx__AttributeProto *oattr(NP *np, const char *name)
{
	for (size_t i = 0; i < np->n_attribute; i++)
		if (strcmp(np->attribute[i]->name, name) == 0)
			return np->attribute[i];
	return NULL;
}

static int64_t oint(NP *np, const char *name, int64_t dflt)
{
	const Onnx__AttributeProto *a = oattr(np, name);
	return a ? a->i : dflt;
}

/* ONNX float attributes are f32: take the shortest decimal that reads back
 * as the same f32, so that 0.35f prints as 0.35 rather than 0.3499999940395355. */
static double f32_clean(float f)
{
	char buf[32];
	for (int prec = 1; prec <= 9; prec++) {
		snprintf(buf, sizeof buf, "%.*g", prec, (double)f);
		if ((float)strtod(buf, NULL) == f)
			return strtod(buf, NULL);
	}
	return f;
}

static double ofloat(NP *np, const char *name, double dflt)
{
	const Onnx__AttributeProto *a = oattr(np, name);
	return a ? f32_clean(a->f) : dflt;
}

static void ostr(NP *np, const char *name, const char *dflt, char *out, size_t cap)
{
	const Onnx__AttributeProto *a = oattr(np, name);
	if (!a) {
		snprintf(out, cap, "%s", dflt);
		return;
	}
	size_t n = a->s.len < cap - 1 ? a->s.len : cap - 1;
	memcpy(out, a->s.data, n);
	out[n] = 0;
}

static int oints(NP *np, const char *name, int64_t *out, int max)
{
	const Onnx__AttributeProto *a = oattr(np, name);
	if (!a || (int)a->n_ints > max)
		return -1;
	memcpy(out, a->ints, a->n_ints * sizeof *out);
	return (int)a->n_ints;
}

/* ---- kfuse attributes ---- */

static kf_attr ai(kf_imp *I, const char *k, int64_t v) { return (kf_attr){kf_intern_cstr(I->c, k), {.kind = KF_ATTR_INT, .i = v}}; }
static kf_attr af(kf_imp *I, const char *k, double v) { return (kf_attr){kf_intern_cstr(I->c, k), {.kind = KF_ATTR_FLOAT, .f = v}}; }
static kf_attr ab(kf_imp *I, const char *k, bool v) { return (kf_attr){kf_intern_cstr(I->c, k), {.kind = KF_ATTR_BOOL, .b = v}}; }
static kf_attr astr(kf_imp *I, const char *k, const char *v)
{
	return (kf_attr){kf_intern_cstr(I->c, k), {.kind = KF_ATTR_STR, .s = kf_intern_cstr(I->c, v)}};
}
/* items must live until the node copies the attribute (kf_imp_op). */
static kf_attr alist(kf_imp *I, const char *k, kf_attrval *items, const int64_t *v, int n)
{
	for (int i = 0; i < n; i++)
		items[i] = (kf_attrval){.kind = KF_ATTR_INT, .i = v[i]};
	return (kf_attr){kf_intern_cstr(I->c, k), {.kind = KF_ATTR_LIST, .n = (uint32_t)n, .list = items}};
}

/* ---- operands ---- */

static kf_vid in(kf_imp *I, NP *np, size_t i)
{
	if (i >= np->n_input || !np->input[i][0])
		return KF_NONE;
	return kf_imp_lookup(I, np->input[i]);
}

static bool has_in(NP *np, size_t i) { return i < np->n_input && np->input[i][0]; }

static const kf_type *ty(kf_imp *I, kf_vid v) { return kf_vtype(I->g, v); }
static kf_dtype dt(kf_imp *I, kf_vid v) { return (kf_dtype)ty(I, v)->dtype; }

static kf_vid op1(kf_imp *I, int op, kf_vid a) { return kf_imp_op(I, op, &a, 1, NULL, 0); }
static kf_vid op2(kf_imp *I, int op, kf_vid a, kf_vid b)
{
	kf_vid v[2] = {a, b};
	return kf_imp_op(I, op, v, 2, NULL, 0);
}
static kf_vid op3(kf_imp *I, int op, kf_vid a, kf_vid b, kf_vid c)
{
	kf_vid v[3] = {a, b, c};
	return kf_imp_op(I, op, v, 3, NULL, 0);
}
static kf_vid sc(kf_imp *I, double v, kf_vid like) { return kf_imp_scalar(I, v, dt(I, like)); }

static kf_vid reshape_to(kf_imp *I, kf_vid x, const int64_t *shape, int rank)
{
	kf_attrval items[KF_MAX_RANK];
	kf_attr a = alist(I, "shape", items, shape, rank);
	return kf_imp_op(I, KF_OP_RESHAPE, &x, 1, &a, 1);
}

static kf_vid reduce(kf_imp *I, int op, kf_vid x, const int64_t *axes, int n, bool keep)
{
	kf_attrval items[KF_MAX_RANK];
	kf_attr a[2] = {ab(I, "keepdims", keep)};
	int na = 1;
	if (n > 0)
		a[na++] = alist(I, "axes", items, axes, n);
	return kf_imp_op(I, op, &x, 1, a, na);
}

static int need_static(kf_imp *I, kf_vid x)
{
	if (!kf_type_is_static(ty(I, x)))
		return kf_imp_fail(I, "needs a static input shape (has symbolic dims)");
	return 0;
}

/* Constant int operand or attribute, as opset decides. */
static int ints_from(kf_imp *I, NP *np, size_t input, const char *attr, int64_t *out, int max, bool *present)
{
	*present = false;
	if (attr && oattr(np, attr)) {
		*present = true;
		return oints(np, attr, out, max);
	}
	if (!has_in(np, input))
		return 0;
	*present = true;
	kf_vid v = in(I, np, input);
	if (v == KF_NONE)
		return -1;
	int n = kf_imp_const_ints(I, v, out, max);
	if (n < 0)
		return kf_imp_fail(I, "input %zu must be a constant (kfuse needs it at compile time)", input);
	return n;
}

/* ---- translators: each writes its results to out[] and returns how many ---- */

typedef int (*tr_fn)(kf_imp *I, NP *np, kf_vid *out, int op);

static int tr_unary(kf_imp *I, NP *np, kf_vid *out, int op) { return (out[0] = op1(I, op, in(I, np, 0))) != KF_NONE; }

static int tr_binary(kf_imp *I, NP *np, kf_vid *out, int op)
{
	kf_vid a = in(I, np, 0), b = in(I, np, 1);
	if (a == KF_NONE || b == KF_NONE)
		return -1;
	if (op == KF_OP_POW && dt(I, a) != dt(I, b)) { /* ONNX lets the exponent's type differ */
		kf_attr to = astr(I, "to", kf_dtype_name(dt(I, a)));
		b = kf_imp_op(I, KF_OP_CAST, &b, 1, &to, 1);
	}
	return (out[0] = op2(I, op, a, b)) != KF_NONE;
}

static int tr_variadic(kf_imp *I, NP *np, kf_vid *out, int op)
{
	bool mean = op < 0;
	kf_vid acc = in(I, np, 0);
	for (size_t i = 1; acc != KF_NONE && i < np->n_input; i++)
		acc = op2(I, mean ? KF_OP_ADD : op, acc, in(I, np, i));
	if (mean && acc != KF_NONE && np->n_input > 1)
		acc = op2(I, KF_OP_DIV, acc, sc(I, (double)np->n_input, acc));
	return (out[0] = acc) != KF_NONE;
}

static int tr_identity(kf_imp *I, NP *np, kf_vid *out, int op) { return (out[0] = in(I, np, 0)) != KF_NONE; }

static int tr_reciprocal(kf_imp *I, NP *np, kf_vid *out, int op)
{
	kf_vid x = in(I, np, 0);
	return x != KF_NONE && (out[0] = op2(I, KF_OP_DIV, sc(I, 1, x), x)) != KF_NONE;
}

static int tr_where(kf_imp *I, NP *np, kf_vid *out, int op)
{
	return (out[0] = op3(I, KF_OP_WHERE, in(I, np, 0), in(I, np, 1), in(I, np, 2))) != KF_NONE;
}

static int tr_cast(kf_imp *I, NP *np, kf_vid *out, int op)
{
	int64_t to = oint(np, "to", 0);
	int d = kf_onnx_dtype((int32_t)to);
	if (d < 0)
		return kf_imp_fail(I, "cast to %s is not supported", kf_onnx_dtype_name((int32_t)to));
	kf_attr a = astr(I, "to", kf_dtype_name((kf_dtype)d));
	kf_vid x = in(I, np, 0);
	return (out[0] = kf_imp_op(I, KF_OP_CAST, &x, 1, &a, 1)) != KF_NONE;
}

static int tr_constant(kf_imp *I, NP *np, kf_vid *out, int op)
{
	const Onnx__AttributeProto *a;
	if ((a = oattr(np, "value")) && a->t) {
		kf_tensor t;
		char err[256];
		if (kf_onnx_tensor(a->t, &t, err, sizeof err) < 0)
			return kf_imp_fail(I, "%s", err);
		out[0] = kf_imp_tensor_const(I, &t, np->output[0]);
		kf_tensor_free(&t);
	} else if ((a = oattr(np, "value_float"))) {
		out[0] = kf_imp_scalar(I, a->f, KF_F32);
	} else if ((a = oattr(np, "value_int"))) {
		out[0] = kf_imp_scalar(I, (double)a->i, KF_I64);
	} else if ((a = oattr(np, "value_floats")) || (a = oattr(np, "value_ints"))) {
		bool fl = a->n_floats > 0 || strcmp(a->name, "value_floats") == 0;
		int64_t n = (int64_t)(fl ? a->n_floats : a->n_ints);
		kf_tensor t;
		if (kf_tensor_alloc(&t, fl ? KF_F32 : KF_I64, 1, &n) < 0)
			return kf_imp_fail(I, "constant too large");
		for (int64_t i = 0; i < n; i++)
			kf_tensor_set(&t, i, fl ? a->floats[i] : (double)a->ints[i]);
		out[0] = kf_imp_tensor_const(I, &t, np->output[0]);
		kf_tensor_free(&t);
	} else {
		return kf_imp_fail(I, "only tensor, float(s) and int(s) constants are supported");
	}
	return out[0] != KF_NONE;
}

static int tr_gemm(kf_imp *I, NP *np, kf_vid *out, int op)
{
	kf_vid v[3] = {in(I, np, 0), in(I, np, 1), in(I, np, 2)};
	kf_attr a[4] = {af(I, "alpha", ofloat(np, "alpha", 1.0)), af(I, "beta", ofloat(np, "beta", 1.0)),
			ai(I, "trans_a", oint(np, "transA", 0)), ai(I, "trans_b", oint(np, "transB", 0))};
	return (out[0] = kf_imp_op(I, KF_OP_GEMM, v, has_in(np, 2) ? 3 : 2, a, 4)) != KF_NONE;
}

static int tr_transpose(kf_imp *I, NP *np, kf_vid *out, int op)
{
	kf_vid x = in(I, np, 0);
	int64_t perm[KF_MAX_RANK];
	int n = oints(np, "perm", perm, KF_MAX_RANK);
	kf_attrval items[KF_MAX_RANK];
	kf_attr a = alist(I, "perm", items, perm, n < 0 ? 0 : n);
	return (out[0] = kf_imp_op(I, KF_OP_TRANSPOSE, &x, 1, &a, n < 0 ? 0 : 1)) != KF_NONE;
}

static int tr_reshape(kf_imp *I, NP *np, kf_vid *out, int op)
{
	int64_t shape[KF_MAX_RANK + 1];
	bool present;
	int n = ints_from(I, np, 1, I->opset < 5 ? "shape" : NULL, shape, KF_MAX_RANK, &present);
	if (n < 0)
		return -1;
	if (oint(np, "allowzero", 0))
		for (int i = 0; i < n; i++)
			if (shape[i] == 0)
				return kf_imp_fail(I, "allowzero = 1 with a zero in the shape is not supported");
	return (out[0] = reshape_to(I, in(I, np, 0), shape, n)) != KF_NONE;
}

static int tr_flatten(kf_imp *I, NP *np, kf_vid *out, int op)
{
	kf_vid x = in(I, np, 0);
	if (x == KF_NONE || need_static(I, x) < 0)
		return -1;
	const kf_type *t = ty(I, x);
	int64_t axis = oint(np, "axis", 1);
	if (axis < 0)
		axis += t->rank;
	int64_t s[2] = {1, 1};
	for (int i = 0; i < t->rank; i++)
		s[i >= axis] *= t->dim[i];
	return (out[0] = reshape_to(I, x, s, 2)) != KF_NONE;
}

static int tr_squeeze(kf_imp *I, NP *np, kf_vid *out, int unsq)
{
	kf_vid x = in(I, np, 0);
	if (x == KF_NONE || need_static(I, x) < 0)
		return -1;
	int64_t axes[KF_MAX_RANK];
	bool present;
	int na = ints_from(I, np, 1, I->opset < 13 ? "axes" : NULL, axes, KF_MAX_RANK, &present);
	if (na < 0)
		return -1;
	const kf_type *t = ty(I, x);
	int64_t s[KF_MAX_RANK];
	int r = 0;
	if (unsq) {
		int outr = t->rank + na;
		bool ins[KF_MAX_RANK * 2] = {0};
		if (outr > KF_MAX_RANK)
			return kf_imp_fail(I, "result rank %d is over kfuse's limit of %d", outr, KF_MAX_RANK);
		for (int i = 0; i < na; i++) {
			int64_t a = axes[i] < 0 ? axes[i] + outr : axes[i];
			if (a < 0 || a >= outr || ins[a])
				return kf_imp_fail(I, "axis %lld is out of range or repeated", (long long)axes[i]);
			ins[a] = true;
		}
		for (int i = 0, j = 0; i < outr; i++)
			s[r++] = ins[i] ? 1 : t->dim[j++];
	} else {
		bool drop[KF_MAX_RANK] = {0};
		for (int i = 0; i < na; i++) {
			int64_t a = axes[i] < 0 ? axes[i] + t->rank : axes[i];
			if (a < 0 || a >= t->rank || t->dim[a] != 1)
				return kf_imp_fail(I, "cannot squeeze axis %lld", (long long)axes[i]);
			drop[a] = true;
		}
		for (int i = 0; i < t->rank; i++)
			if (!(na ? drop[i] : t->dim[i] == 1))
				s[r++] = t->dim[i];
	}
	return (out[0] = reshape_to(I, x, s, r)) != KF_NONE;
}

static int tr_expand(kf_imp *I, NP *np, kf_vid *out, int op)
{
	kf_vid x = in(I, np, 0);
	int64_t shape[KF_MAX_RANK];
	bool present;
	int n = ints_from(I, np, 1, NULL, shape, KF_MAX_RANK, &present);
	if (x == KF_NONE || n < 0)
		return -1;
	/* Expand broadcasts both ways: the result is the broadcast of both shapes */
	const kf_type *t = ty(I, x);
	int r = n > t->rank ? n : t->rank;
	int64_t s[KF_MAX_RANK];
	for (int i = 0; i < r; i++) {
		int64_t a = i - (r - n) >= 0 ? shape[i - (r - n)] : 1;
		int64_t b = i - (r - t->rank) >= 0 ? t->dim[i - (r - t->rank)] : 1;
		s[i] = a == 1 ? b : a;
	}
	kf_attrval items[KF_MAX_RANK];
	kf_attr a = alist(I, "shape", items, s, r);
	return (out[0] = kf_imp_op(I, KF_OP_BROADCAST_TO, &x, 1, &a, 1)) != KF_NONE;
}

static int tr_concat(kf_imp *I, NP *np, kf_vid *out, int op)
{
	kf_vid v[64];
	if (np->n_input > 64)
		return kf_imp_fail(I, "more than 64 inputs");
	for (size_t i = 0; i < np->n_input; i++)
		if ((v[i] = in(I, np, i)) == KF_NONE)
			return -1;
	kf_attr a = ai(I, "axis", oint(np, "axis", 0));
	return (out[0] = kf_imp_op(I, KF_OP_CONCAT, v, (int)np->n_input, &a, 1)) != KF_NONE;
}

static int tr_slice(kf_imp *I, NP *np, kf_vid *out, int op)
{
	int64_t v[4][KF_MAX_RANK];
	bool present[4];
	const char *names[4] = {"starts", "ends", "axes", "steps"};
	int n[4];
	for (int k = 0; k < 4; k++) {
		n[k] = ints_from(I, np, (size_t)k + 1, I->opset < 10 ? names[k] : NULL, v[k], KF_MAX_RANK, &present[k]);
		if (n[k] < 0)
			return -1;
	}
	kf_attrval items[4][KF_MAX_RANK];
	kf_attr a[4];
	int na = 0;
	for (int k = 0; k < 4; k++)
		if (present[k] && (k < 2 || n[k] > 0))
			a[na++] = alist(I, names[k], items[k], v[k], n[k]);
	kf_vid x = in(I, np, 0);
	return (out[0] = kf_imp_op(I, KF_OP_SLICE, &x, 1, a, na)) != KF_NONE;
}

static int tr_split(kf_imp *I, NP *np, kf_vid *out, int op)
{
	kf_vid x = in(I, np, 0);
	int64_t sizes[64];
	bool present;
	int n = ints_from(I, np, 1, I->opset < 13 ? "split" : NULL, sizes, 64, &present);
	if (x == KF_NONE || n < 0)
		return -1;
	int nres = (int)np->n_output;
	if (nres > 64)
		return kf_imp_fail(I, "more than 64 outputs");
	kf_attrval items[64];
	kf_attr a[2] = {ai(I, "axis", oint(np, "axis", 0))};
	int na = 1;
	if (n > 0)
		a[na++] = alist(I, "sizes", items, sizes, n);
	return kf_imp_node(I, KF_OP_SPLIT, &x, 1, a, na, nres, out) < 0 ? -1 : nres;
}

static int tr_reduce(kf_imp *I, NP *np, kf_vid *out, int op)
{
	kf_vid x = in(I, np, 0);
	int64_t axes[KF_MAX_RANK];
	bool present;
	bool axes_input = I->opset >= 18 || (op == KF_OP_REDUCE_SUM && I->opset >= 13);
	int n = ints_from(I, np, 1, axes_input ? NULL : "axes", axes, KF_MAX_RANK, &present);
	if (x == KF_NONE || n < 0)
		return -1;
	if (n == 0 && oint(np, "noop_with_empty_axes", 0))
		return (out[0] = x), 1;
	kf_attrval items[KF_MAX_RANK];
	kf_attr a[2] = {ab(I, "keepdims", oint(np, "keepdims", 1) != 0)};
	int na = 1;
	if (n > 0)
		a[na++] = alist(I, "axes", items, axes, n);
	return (out[0] = kf_imp_op(I, op, &x, 1, a, na)) != KF_NONE;
}

static int tr_softmax(kf_imp *I, NP *np, kf_vid *out, int op)
{
	kf_vid x = in(I, np, 0);
	if (x == KF_NONE)
		return -1;
	const kf_type *t = ty(I, x);
	int64_t axis = oint(np, "axis", I->opset < 13 ? 1 : -1);
	if (axis < 0)
		axis += t->rank;
	kf_attr a = ai(I, "axis", -1);
	if (I->opset >= 13 || axis == t->rank - 1) {
		a.v.i = I->opset >= 13 ? oint(np, "axis", -1) : -1;
		return (out[0] = kf_imp_op(I, op, &x, 1, &a, 1)) != KF_NONE;
	}
	/* before opset 13 the input is seen as 2-D at axis: softmax over all trailing dims */
	if (need_static(I, x) < 0)
		return -1;
	int64_t s[2] = {1, 1}, orig[KF_MAX_RANK];
	int rank = t->rank;
	for (int i = 0; i < rank; i++) {
		orig[i] = t->dim[i];
		s[i >= axis] *= t->dim[i];
	}
	kf_vid y = reshape_to(I, x, s, 2);
	y = kf_imp_op(I, op, &y, 1, &a, 1);
	return (out[0] = y == KF_NONE ? KF_NONE : reshape_to(I, y, orig, rank)) != KF_NONE;
}

static int tr_layer_norm(kf_imp *I, NP *np, kf_vid *out, int op)
{
	kf_vid v[3] = {in(I, np, 0), in(I, np, 1), in(I, np, 2)};
	double eps = ofloat(np, "epsilon", 1e-5);
	int64_t axis = oint(np, "axis", -1);
	kf_attr a[2] = {ai(I, "axis", axis), af(I, "epsilon", eps)};
	if ((out[0] = kf_imp_op(I, KF_OP_LAYER_NORM, v, has_in(np, 2) ? 3 : 2, a, 2)) == KF_NONE)
		return -1;
	bool stats = false;
	for (size_t i = 1; i < np->n_output; i++)
		stats |= np->output[i][0] != 0;
	if (!stats)
		return 1;
	/* Mean and InvStdDev, kept-dim shaped, as the op's function body defines them */
	kf_vid x = v[0];
	int r = ty(I, x)->rank;
	int64_t ax = axis < 0 ? axis + r : axis, axes[KF_MAX_RANK];
	int n = 0;
	for (int64_t i = ax; i < r; i++)
		axes[n++] = i;
	kf_vid mean = reduce(I, KF_OP_REDUCE_MEAN, x, axes, n, true);
	kf_vid d = op2(I, KF_OP_SUB, x, mean);
	kf_vid var = reduce(I, KF_OP_REDUCE_MEAN, op2(I, KF_OP_MUL, d, d), axes, n, true);
	out[1] = mean;
	out[2] = op1(I, KF_OP_RSQRT, op2(I, KF_OP_ADD, var, sc(I, eps, x)));
	return out[1] == KF_NONE || out[2] == KF_NONE ? -1 : 3;
}

static int tr_gelu(kf_imp *I, NP *np, kf_vid *out, int op)
{
	char ap[16];
	ostr(np, "approximate", "none", ap, sizeof ap);
	kf_attr a = astr(I, "approximate", ap);
	kf_vid x = in(I, np, 0);
	return (out[0] = kf_imp_op(I, KF_OP_GELU, &x, 1, &a, 1)) != KF_NONE;
}

/* Activations kfuse has no op for, as ONNX's function bodies define them. */
static int tr_activation(kf_imp *I, NP *np, kf_vid *out, int which)
{
	kf_vid x = in(I, np, 0), y = KF_NONE;
	if (x == KF_NONE)
		return -1;
	double alpha = ofloat(np, "alpha", NAN), beta = ofloat(np, "beta", NAN);
	kf_vid zero = sc(I, 0, x), one = sc(I, 1, x);
	switch (which) {
	case 0: /* LeakyRelu */
		y = op3(I, KF_OP_WHERE, op2(I, KF_OP_LT, x, zero), op2(I, KF_OP_MUL, x, sc(I, isnan(alpha) ? 0.01 : alpha, x)), x);
		break;
	case 1: /* Elu */
		y = op3(I, KF_OP_WHERE, op2(I, KF_OP_LT, x, zero),
			op2(I, KF_OP_MUL, sc(I, isnan(alpha) ? 1 : alpha, x), op2(I, KF_OP_SUB, op1(I, KF_OP_EXP, x), one)), x);
		break;
	case 2: { /* Selu */
		double a = isnan(alpha) ? 1.67326319217681884765625 : alpha;
		double g = ofloat(np, "gamma", 1.05070102214813232421875);
		kf_vid neg = op2(I, KF_OP_SUB, op2(I, KF_OP_MUL, sc(I, a, x), op1(I, KF_OP_EXP, x)), sc(I, a, x));
		y = op2(I, KF_OP_MUL, sc(I, g, x), op3(I, KF_OP_WHERE, op2(I, KF_OP_LE, x, zero), neg, x));
		break;
	}
	case 3: { /* Celu */
		double a = isnan(alpha) ? 1 : alpha;
		kf_vid e = op2(I, KF_OP_SUB, op1(I, KF_OP_EXP, op2(I, KF_OP_DIV, x, sc(I, a, x))), one);
		y = op2(I, KF_OP_ADD, op2(I, KF_OP_MAX, x, zero), op2(I, KF_OP_MIN, zero, op2(I, KF_OP_MUL, sc(I, a, x), e)));
		break;
	}
	case 4: /* HardSigmoid */
	case 5: { /* HardSwish = x * HardSigmoid(alpha = 1/6, beta = 0.5) */
		double a = which == 5 ? 1.0 / 6 : isnan(alpha) ? 0.2 : alpha, b = which == 5 ? 0.5 : isnan(beta) ? 0.5 : beta;
		kf_vid h = op2(I, KF_OP_ADD, op2(I, KF_OP_MUL, x, sc(I, a, x)), sc(I, b, x));
		h = op2(I, KF_OP_MAX, zero, op2(I, KF_OP_MIN, one, h));
		y = which == 5 ? op2(I, KF_OP_MUL, x, h) : h;
		break;
	}
	case 6: /* Softplus */
		y = op1(I, KF_OP_LOG, op2(I, KF_OP_ADD, op1(I, KF_OP_EXP, x), one));
		break;
	case 7: /* Softsign */
		y = op2(I, KF_OP_DIV, x, op2(I, KF_OP_ADD, one, op1(I, KF_OP_ABS, x)));
		break;
	case 8: /* ThresholdedRelu */
		y = op3(I, KF_OP_WHERE, op2(I, KF_OP_GT, x, sc(I, isnan(alpha) ? 1 : alpha, x)), x, zero);
		break;
	case 9: /* PRelu */
		y = op3(I, KF_OP_WHERE, op2(I, KF_OP_LT, x, zero), op2(I, KF_OP_MUL, x, in(I, np, 1)), x);
		break;
	case 10: /* Sign */
		y = op3(I, KF_OP_WHERE, op2(I, KF_OP_GT, x, zero), one,
			op3(I, KF_OP_WHERE, op2(I, KF_OP_LT, x, zero), sc(I, -1, x), zero));
		break;
	}
	return (out[0] = y) != KF_NONE;
}

static int tr_clip(kf_imp *I, NP *np, kf_vid *out, int op)
{
	kf_vid x = in(I, np, 0), lo = KF_NONE, hi = KF_NONE;
	if (x == KF_NONE)
		return -1;
	if (I->opset < 11) {
		if (oattr(np, "min"))
			lo = sc(I, ofloat(np, "min", 0), x);
		if (oattr(np, "max"))
			hi = sc(I, ofloat(np, "max", 0), x);
	} else {
		lo = has_in(np, 1) ? in(I, np, 1) : KF_NONE;
		hi = has_in(np, 2) ? in(I, np, 2) : KF_NONE;
	}
	if (lo != KF_NONE)
		x = op2(I, KF_OP_MAX, x, lo);
	if (hi != KF_NONE && x != KF_NONE)
		x = op2(I, KF_OP_MIN, x, hi);
	return (out[0] = x) != KF_NONE;
}


/* ---- shape queries and simple ops ONNX has and kfuse composes ---- */

static int tr_shape(kf_imp *I, NP *np, kf_vid *out, int size)
{
	kf_vid x = in(I, np, 0);
	if (x == KF_NONE || need_static(I, x) < 0)
		return -1;
	const kf_type *t = ty(I, x);
	if (size)
		return (out[0] = kf_imp_scalar(I, (double)kf_type_numel(t), KF_I64)) != KF_NONE;
	int64_t r = t->rank, lo = oint(np, "start", 0), hi = oint(np, "end", r);
	lo = lo < 0 ? lo + r : lo;
	hi = hi < 0 ? hi + r : hi;
	lo = lo < 0 ? 0 : lo > r ? r : lo;
	hi = hi < lo ? lo : hi > r ? r : hi;
	int64_t n = hi - lo;
	kf_tensor v;
	if (kf_tensor_alloc(&v, KF_I64, 1, &n) < 0)
		return -1;
	for (int64_t i = 0; i < n; i++)
		kf_tensor_set_i64(&v, i, t->dim[lo + i]);
	out[0] = kf_imp_tensor_const(I, &v, np->output[0]);
	kf_tensor_free(&v);
	return out[0] != KF_NONE;
}

static int tr_constant_of_shape(kf_imp *I, NP *np, kf_vid *out, int op)
{
	int64_t shape[KF_MAX_RANK];
	bool present;
	int r = ints_from(I, np, 0, NULL, shape, KF_MAX_RANK, &present);
	if (r < 0)
		return -1;
	kf_tensor fill = {0};
	const Onnx__AttributeProto *a = oattr(np, "value");
	char err[256];
	if (a && a->t && kf_onnx_tensor(a->t, &fill, err, sizeof err) < 0)
		return kf_imp_fail(I, "%s", err);
	kf_dtype d = a && a->t ? (kf_dtype)fill.dtype : KF_F32;
	double x = a && a->t && kf_tensor_numel(&fill) ? kf_tensor_get(&fill, 0) : 0;
	kf_tensor_free(&fill);
	for (int i = 0; i < r; i++)
		if (shape[i] < 0)
			return kf_imp_fail(I, "the shape has a negative dim");
	out[0] = kf_imp_splat(I, x, d, r, shape);
	return out[0] != KF_NONE;
}

static int tr_cast_like(kf_imp *I, NP *np, kf_vid *out, int op)
{
	kf_vid x = in(I, np, 0), like = in(I, np, 1);
	if (x == KF_NONE || like == KF_NONE)
		return -1;
	kf_attr a = astr(I, "to", kf_dtype_name(dt(I, like)));
	return (out[0] = kf_imp_op(I, KF_OP_CAST, &x, 1, &a, 1)) != KF_NONE;
}

static int tr_isnan_inf(kf_imp *I, NP *np, kf_vid *out, int inf)
{
	kf_vid x = in(I, np, 0);
	if (x == KF_NONE)
		return -1;
	if (!inf)
		return (out[0] = op2(I, KF_OP_NE, x, x)) != KF_NONE;
	bool pos = oint(np, "detect_positive", 1), neg = oint(np, "detect_negative", 1);
	kf_vid y = pos && neg ? op2(I, KF_OP_EQ, op1(I, KF_OP_ABS, x), sc(I, INFINITY, x))
		 : op2(I, KF_OP_EQ, x, sc(I, pos ? INFINITY : neg ? -INFINITY : NAN, x));
	return (out[0] = y) != KF_NONE;
}

/* Inference-mode Dropout: the identity, and an all-true mask. */
static int tr_dropout(kf_imp *I, NP *np, kf_vid *out, int op)
{
	kf_vid x = in(I, np, 0);
	if (x == KF_NONE)
		return -1;
	if (has_in(np, 2)) {
		int64_t train;
		if (kf_imp_const_ints(I, in(I, np, 2), &train, 1) != 1 || train)
			return kf_imp_fail(I, "training mode is not supported (it is random)");
	}
	out[0] = x;
	if (np->n_output < 2 || !np->output[1][0])
		return 1;
	if (need_static(I, x) < 0)
		return -1;
	const kf_type *t = ty(I, x);
	kf_tensor m;
	if (kf_tensor_alloc(&m, KF_I1, t->rank, t->dim) < 0)
		return -1;
	for (int64_t i = 0, n = kf_tensor_numel(&m); i < n; i++)
		kf_tensor_set(&m, i, 1);
	out[1] = kf_imp_tensor_const(I, &m, np->output[1]);
	kf_tensor_free(&m);
	return out[1] == KF_NONE ? -1 : 2;
}

/* A per-channel parameter [C] as [C,1,...,1] so it broadcasts over NC... */
static kf_vid per_channel(kf_imp *I, kf_vid p, int rank)
{
	const kf_type *t = ty(I, p);
	int64_t s[KF_MAX_RANK];
	if (t->rank != 1 || rank < 2)
		return p;
	s[0] = t->dim[0];
	for (int i = 1; i < rank - 1; i++)
		s[i] = 1;
	return reshape_to(I, p, s, rank - 1);
}

static int tr_batch_norm(kf_imp *I, NP *np, kf_vid *out, int op)
{
	if (oint(np, "training_mode", 0))
		return kf_imp_fail(I, "training mode is not supported");
	for (size_t i = 1; i < np->n_output; i++)
		if (np->output[i][0])
			return kf_imp_fail(I, "output %zu (running statistics) is not supported", i);
	kf_vid x = in(I, np, 0);
	if (x == KF_NONE)
		return -1;
	int r = ty(I, x)->rank;
	kf_vid scale = per_channel(I, in(I, np, 1), r), b = per_channel(I, in(I, np, 2), r);
	kf_vid mean = per_channel(I, in(I, np, 3), r), var = per_channel(I, in(I, np, 4), r);
	kf_vid inv = op1(I, KF_OP_RSQRT, op2(I, KF_OP_ADD, var, sc(I, ofloat(np, "epsilon", 1e-5), x)));
	kf_vid y = op2(I, KF_OP_MUL, op2(I, KF_OP_SUB, x, mean), op2(I, KF_OP_MUL, inv, scale));
	return (out[0] = op2(I, KF_OP_ADD, y, b)) != KF_NONE;
}

/* ReduceSumSquare, L1, L2, LogSum, LogSumExp as ONNX's function bodies write them. */
static int tr_reduce_composite(kf_imp *I, NP *np, kf_vid *out, int which)
{
	kf_vid x = in(I, np, 0);
	int64_t axes[KF_MAX_RANK];
	bool present;
	int n = ints_from(I, np, 1, I->opset >= 18 ? NULL : "axes", axes, KF_MAX_RANK, &present);
	if (x == KF_NONE || n < 0)
		return -1;
	if (n == 0 && oint(np, "noop_with_empty_axes", 0))
		return (out[0] = x), 1;
	bool keep = oint(np, "keepdims", 1) != 0;
	kf_vid y = KF_NONE;
	switch (which) {
	case 0: y = reduce(I, KF_OP_REDUCE_SUM, op2(I, KF_OP_MUL, x, x), axes, n, keep); break;
	case 1: y = reduce(I, KF_OP_REDUCE_SUM, op1(I, KF_OP_ABS, x), axes, n, keep); break;
	case 2: y = op1(I, KF_OP_SQRT, reduce(I, KF_OP_REDUCE_SUM, op2(I, KF_OP_MUL, x, x), axes, n, keep)); break;
	case 3: y = op1(I, KF_OP_LOG, reduce(I, KF_OP_REDUCE_SUM, x, axes, n, keep)); break;
	case 4: { /* max-shifted for range: log(sum(exp(x - m))) + m */
		kf_vid m = reduce(I, KF_OP_REDUCE_MAX, x, axes, n, true);
		kf_vid s = reduce(I, KF_OP_REDUCE_SUM, op1(I, KF_OP_EXP, op2(I, KF_OP_SUB, x, m)), axes, n, keep);
		kf_vid mk = keep ? m : reduce(I, KF_OP_REDUCE_MAX, x, axes, n, false);
		y = op2(I, KF_OP_ADD, op1(I, KF_OP_LOG, s), mk);
		break;
	}
	}
	if (which != 4 && !kf_dtype_is_float(dt(I, x)) && which >= 2)
		return kf_imp_fail(I, "integer input is not supported");
	return (out[0] = y) != KF_NONE;
}

static const struct {
	const char *name;
	tr_fn fn;
	int op;
	const char *attrs; /* the ONNX attributes the translation understands */
} table[] = {
	{"Add", tr_binary, KF_OP_ADD, ""}, {"Sub", tr_binary, KF_OP_SUB, ""},
	{"Mul", tr_binary, KF_OP_MUL, ""}, {"Div", tr_binary, KF_OP_DIV, ""},
	{"Pow", tr_binary, KF_OP_POW, ""},
	{"Equal", tr_binary, KF_OP_EQ, ""}, {"Less", tr_binary, KF_OP_LT, ""},
	{"LessOrEqual", tr_binary, KF_OP_LE, ""}, {"Greater", tr_binary, KF_OP_GT, ""},
	{"GreaterOrEqual", tr_binary, KF_OP_GE, ""}, {"And", tr_binary, KF_OP_AND, ""},
	{"Or", tr_binary, KF_OP_OR, ""}, {"Xor", tr_binary, KF_OP_NE, ""},
	{"Max", tr_variadic, KF_OP_MAX, ""}, {"Min", tr_variadic, KF_OP_MIN, ""},
	{"Sum", tr_variadic, KF_OP_ADD, ""}, {"Mean", tr_variadic, -1, ""},
	{"Neg", tr_unary, KF_OP_NEG, ""}, {"Abs", tr_unary, KF_OP_ABS, ""},
	{"Exp", tr_unary, KF_OP_EXP, ""}, {"Log", tr_unary, KF_OP_LOG, ""},
	{"Sqrt", tr_unary, KF_OP_SQRT, ""}, {"Tanh", tr_unary, KF_OP_TANH, ""},
	{"Sigmoid", tr_unary, KF_OP_SIGMOID, ""}, {"Relu", tr_unary, KF_OP_RELU, ""},
	{"Erf", tr_unary, KF_OP_ERF, ""}, {"Not", tr_unary, KF_OP_NOT, ""},
	{"Reciprocal", tr_reciprocal, 0, ""}, {"Identity", tr_identity, 0, ""},
	{"Where", tr_where, 0, ""}, {"Cast", tr_cast, 0, "to saturate"},
	{"Constant", tr_constant, 0, "value value_float value_floats value_int value_ints"},
	{"MatMul", tr_binary, KF_OP_MATMUL, ""}, {"Gemm", tr_gemm, 0, "alpha beta transA transB"},
	{"Transpose", tr_transpose, 0, "perm"}, {"Reshape", tr_reshape, 0, "shape allowzero"},
	{"Flatten", tr_flatten, 0, "axis"}, {"Squeeze", tr_squeeze, 0, "axes"},
	{"Unsqueeze", tr_squeeze, 1, "axes"}, {"Expand", tr_expand, 0, ""},
	{"Concat", tr_concat, 0, "axis"}, {"Slice", tr_slice, 0, "starts ends axes"},
	{"Split", tr_split, 0, "axis split"},
	{"ReduceSum", tr_reduce, KF_OP_REDUCE_SUM, "axes keepdims noop_with_empty_axes"},
	{"ReduceMean", tr_reduce, KF_OP_REDUCE_MEAN, "axes keepdims noop_with_empty_axes"},
	{"ReduceMax", tr_reduce, KF_OP_REDUCE_MAX, "axes keepdims noop_with_empty_axes"},
	{"ReduceMin", tr_reduce, KF_OP_REDUCE_MIN, "axes keepdims noop_with_empty_axes"},
	{"Softmax", tr_softmax, KF_OP_SOFTMAX, "axis"}, {"LogSoftmax", tr_softmax, KF_OP_LOG_SOFTMAX, "axis"},
	{"LayerNormalization", tr_layer_norm, 0, "axis epsilon stash_type"},
	{"Gelu", tr_gelu, 0, "approximate"},
	{"LeakyRelu", tr_activation, 0, "alpha"}, {"Elu", tr_activation, 1, "alpha"},
	{"Selu", tr_activation, 2, "alpha gamma"}, {"Celu", tr_activation, 3, "alpha"},
	{"HardSigmoid", tr_activation, 4, "alpha beta"}, {"HardSwish", tr_activation, 5, ""},
	{"Softplus", tr_activation, 6, ""}, {"Softsign", tr_activation, 7, ""},
	{"ThresholdedRelu", tr_activation, 8, "alpha"}, {"PRelu", tr_activation, 9, ""},
	{"Sign", tr_activation, 10, ""}, {"Clip", tr_clip, 0, "min max"},
	{"LSTM", kf_imp_lstm, 0, "hidden_size direction layout activations clip input_forget"},
	{"GRU", kf_imp_gru, 0, "hidden_size direction layout activations clip linear_before_reset"},
	{"Shape", tr_shape, 0, "start end"}, {"Size", tr_shape, 1, ""},
	{"ConstantOfShape", tr_constant_of_shape, 0, "value"}, {"CastLike", tr_cast_like, 0, "saturate"},
	{"IsNaN", tr_isnan_inf, 0, ""}, {"IsInf", tr_isnan_inf, 1, "detect_positive detect_negative"},
	{"Dropout", tr_dropout, 0, "ratio seed"},
	{"BatchNormalization", tr_batch_norm, 0, "epsilon momentum training_mode spatial"},
	{"Conv", kf_imp_conv, 0, "auto_pad dilations group kernel_shape pads strides"},
	{"ConvTranspose", kf_imp_conv_transpose, 0,
	 "auto_pad dilations group kernel_shape output_padding output_shape pads strides"},
	{"MaxPool", kf_imp_pool, KF_OP_MAX_POOL, "auto_pad ceil_mode dilations kernel_shape pads storage_order strides"},
	{"AveragePool", kf_imp_pool, KF_OP_AVG_POOL,
	 "auto_pad ceil_mode count_include_pad dilations kernel_shape pads strides"},
	{"GlobalAveragePool", kf_imp_global_pool, KF_OP_REDUCE_MEAN, ""},
	{"GlobalMaxPool", kf_imp_global_pool, KF_OP_REDUCE_MAX, ""},
	{"ReduceSumSquare", tr_reduce_composite, 0, "axes keepdims noop_with_empty_axes"},
	{"ReduceL1", tr_reduce_composite, 1, "axes keepdims noop_with_empty_axes"},
	{"ReduceL2", tr_reduce_composite, 2, "axes keepdims noop_with_empty_axes"},
	{"ReduceLogSum", tr_reduce_composite, 3, "axes keepdims noop_with_empty_axes"},
	{"ReduceLogSumExp", tr_reduce_composite, 4, "axes keepdims noop_with_empty_axes"},
};

static bool word_in(const char *list, const char *w)
{
	size_t n = strlen(w);
	if (n == 0) /* strstr finds "" everywhere: the loop would not advance (found by fuzzing) */
		return false;
	for (const char *p = list; (p = strstr(p, w)); p += n)
		if ((p == list || p[-1] == ' ') && (p[n] == 0 || p[n] == ' '))
			return true;
	return false;
}

static const Onnx__ValueInfoProto *declared(kf_imp *I, const char *name)
{
	const Onnx__GraphProto *gp = I->gp;
	for (size_t i = 0; i < gp->n_value_info; i++)
		if (strcmp(gp->value_info[i]->name, name) == 0)
			return gp->value_info[i];
	for (size_t i = 0; i < gp->n_output; i++)
		if (strcmp(gp->output[i]->name, name) == 0)
			return gp->output[i];
	return NULL;
}

/* --allow-unsupported: an opaque op `onnx_<Op>` whose result types are the
 * ones the model declares; no inference, no CPU kernel. */
static int keep_opaque(kf_imp *I, NP *np)
{
	char name[160];
	snprintf(name, sizeof name, "onnx_%s", np->op_type);
	int op = kf_op_lookup(I->c, name, strlen(name));
	if (op < 0) {
		kf_opinfo info = {.name = name, .min_in = 0, .max_in = -1, .nres = -1,
				  .trait = KF_TRAIT_OPAQUE, .doc = "an ONNX op kept opaque by the importer"};
		op = kf_op_register(I->c, &info);
		if (op < 0)
			return -1;
	}
	kf_vid in_[64];
	kf_tid res[64];
	if (np->n_input > 64 || np->n_output > 64)
		return kf_imp_fail(I, "too many inputs or outputs to keep opaque");
	for (size_t i = 0; i < np->n_input; i++)
		if ((in_[i] = in(I, np, i)) == KF_NONE)
			return kf_imp_fail(I, "cannot keep it opaque: optional inputs are not supported");
	for (size_t i = 0; i < np->n_output; i++) {
		const Onnx__ValueInfoProto *vi = declared(I, np->output[i]);
		kf_type t;
		if (!vi)
			return kf_imp_fail(I, "op '%s' is not supported, and it cannot be kept opaque: the model "
					      "declares no type for its output '%s'", np->op_type, np->output[i]);
		if (kf_imp_value_type(I, vi, &t) < 0)
			return -1;
		res[i] = kf_type_intern(I->c, &t);
	}
	kf_nid n = kf_node_new(I->g, 0, KF_NONE, op, in_, (uint32_t)np->n_input, res, (uint32_t)np->n_output);
	for (size_t i = 0; i < np->n_output; i++)
		kf_imp_bind(I, np->output[i], kf_res(I->g, n, (uint32_t)i));
	return 0;
}

int kf_imp_translate(kf_imp *I, NP *np)
{
	if (np->domain && *np->domain && strcmp(np->domain, "ai.onnx"))
		return kf_imp_fail(I, "domain '%s' is not supported", np->domain);
	/* translations name constants after output 0 (found by fuzzing) */
	if (np->n_output == 0)
		return kf_imp_fail(I, "the node has no outputs");
	for (size_t k = 0; k < sizeof table / sizeof *table; k++) {
		if (strcmp(table[k].name, np->op_type))
			continue;
		for (size_t i = 0; i < np->n_attribute; i++)
			if (!word_in(table[k].attrs, np->attribute[i]->name))
				return kf_imp_fail(I, "attribute '%s' is not supported", np->attribute[i]->name);
		kf_vid out[64];
		int n = table[k].fn(I, np, out, table[k].op);
		if (I->failed)
			return -1;
		/* a translation that gave up without a message met a required
		 * input that is absent or empty (found by fuzzing) */
		if (n < 0)
			return kf_imp_fail(I, "a required input is missing (%zu given)", np->n_input);
		for (size_t i = 0; i < np->n_output; i++) {
			if (!np->output[i][0])
				continue;
			if ((int)i >= n)
				return kf_imp_fail(I, "output %zu is not supported", i);
			if (out[i] == KF_NONE)
				return kf_imp_fail(I, "output %zu could not be translated", i);
			kf_imp_bind(I, np->output[i], out[i]);
		}
		return 0;
	}
	if (I->o.allow_unsupported)
		return keep_opaque(I, np);
	return kf_imp_fail(I, "op '%s' is not supported", np->op_type);
}
