/* translate.c: one ONNX node to kfuse ops, with ONNX's semantics per opset.
 * Ops kfuse has are mapped one to one; activations kfuse lacks are written
 * as the primitive ops that ONNX's own function definitions use. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "tr.h"
#include "tensor.h"


/* ---- translators: each writes its results to out[] and returns how many ---- */

typedef int (*tr_fn)(kf_imp *I, kf_np *np, kf_vid *out, int op);

static int tr_unary(kf_imp *I, kf_np *np, kf_vid *out, int op) { return (out[0] = kf_tr_op1(I, op, kf_imp_input(I, np, 0))) != KF_NONE; }

static int tr_binary(kf_imp *I, kf_np *np, kf_vid *out, int op)
{
	kf_vid a = kf_imp_input(I, np, 0), b = kf_imp_input(I, np, 1);
	if (a == KF_NONE || b == KF_NONE)
		return -1;
	if (op == KF_OP_POW) /* ONNX lets the exponent's type differ: the base's is the result's */
		b = kf_tr_cast(I, b, kf_tr_dt(I, a));
	return kf_tr_promote(I, &a, &b) == 0 && (out[0] = kf_tr_op2(I, op, a, b)) != KF_NONE;
}

static int tr_variadic(kf_imp *I, kf_np *np, kf_vid *out, int op)
{
	bool mean = op < 0;
	kf_vid acc = kf_imp_input(I, np, 0);
	for (size_t i = 1; acc != KF_NONE && i < np->n_input; i++) {
		kf_vid x = kf_imp_input(I, np, i);
		acc = x == KF_NONE || kf_tr_promote(I, &acc, &x) != 0 ? KF_NONE
									: kf_tr_op2(I, mean ? KF_OP_ADD : op, acc, x);
	}
	if (mean && acc != KF_NONE && np->n_input > 1)
		acc = kf_tr_op2(I, KF_OP_DIV, acc, kf_tr_sc(I, (double)np->n_input, acc));
	return (out[0] = acc) != KF_NONE;
}

static int tr_identity(kf_imp *I, kf_np *np, kf_vid *out, int op) { return (out[0] = kf_imp_input(I, np, 0)) != KF_NONE; }

static int tr_reciprocal(kf_imp *I, kf_np *np, kf_vid *out, int op)
{
	kf_vid x = kf_imp_input(I, np, 0);
	return x != KF_NONE && (out[0] = kf_tr_op2(I, KF_OP_DIV, kf_tr_sc(I, 1, x), x)) != KF_NONE;
}

static int tr_where(kf_imp *I, kf_np *np, kf_vid *out, int op)
{
	kf_vid c = kf_imp_input(I, np, 0), x = kf_imp_input(I, np, 1), y = kf_imp_input(I, np, 2);
	if (c == KF_NONE || x == KF_NONE || y == KF_NONE || kf_tr_promote(I, &x, &y) != 0)
		return -1;
	return (out[0] = kf_tr_op3(I, KF_OP_WHERE, c, x, y)) != KF_NONE;
}

static int tr_cast(kf_imp *I, kf_np *np, kf_vid *out, int op)
{
	int64_t to = kf_imp_attr_int(np, "to", 0);
	int d = kf_onnx_dtype((int32_t)to);
	if (d < 0)
		return kf_imp_fail(I, "cast to %s is not supported", kf_onnx_dtype_name((int32_t)to));
	kf_attr a = kf_tr_as(I, "to", kf_dtype_name((kf_dtype)d));
	kf_vid x = kf_imp_input(I, np, 0);
	return (out[0] = kf_imp_op(I, KF_OP_CAST, &x, 1, &a, 1)) != KF_NONE;
}

static int tr_constant(kf_imp *I, kf_np *np, kf_vid *out, int op)
{
	const Onnx__AttributeProto *a;
	if ((a = kf_imp_attr(np, "value")) && a->t) {
		kf_tensor t;
		char err[256];
		if (kf_onnx_tensor(a->t, I->dir[0] ? I->dir : NULL, &t, err, sizeof err) < 0)
			return kf_imp_fail(I, "%s", err);
		out[0] = kf_imp_tensor_const(I, &t, np->output[0]);
		kf_tensor_free(&t);
	} else if ((a = kf_imp_attr(np, "value_float"))) {
		out[0] = kf_imp_scalar(I, a->f, KF_F32);
	} else if ((a = kf_imp_attr(np, "value_int"))) {
		out[0] = kf_imp_scalar(I, (double)a->i, KF_I64);
	} else if ((a = kf_imp_attr(np, "value_floats")) || (a = kf_imp_attr(np, "value_ints"))) {
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

/* Gemm before opset 7 says `broadcast = 1` when C broadcasts; kfuse's gemm
 * broadcasts C one way always, which is that, and with broadcast = 0 the
 * model's C already is [M, N]. */
static int tr_gemm(kf_imp *I, kf_np *np, kf_vid *out, int op)
{
	kf_vid v[3] = {kf_imp_input(I, np, 0), kf_imp_input(I, np, 1), kf_imp_input(I, np, 2)};
	kf_attr a[4] = {kf_tr_af(I, "alpha", kf_tr_float(np, "alpha", 1.0)), kf_tr_af(I, "beta", kf_tr_float(np, "beta", 1.0)),
			kf_imp_int_attr(I, "trans_a", kf_imp_attr_int(np, "transA", 0)), kf_imp_int_attr(I, "trans_b", kf_imp_attr_int(np, "transB", 0))};
	return (out[0] = kf_imp_op(I, KF_OP_GEMM, v, kf_tr_has_in(np, 2) ? 3 : 2, a, 4)) != KF_NONE;
}

static int tr_transpose(kf_imp *I, kf_np *np, kf_vid *out, int op)
{
	kf_vid x = kf_imp_input(I, np, 0);
	int64_t perm[KF_MAX_RANK];
	int n = kf_imp_attr_ints(np, "perm", perm, KF_MAX_RANK);
	kf_attrval items[KF_MAX_RANK];
	kf_attr a = kf_imp_ints_attr(I, "perm", items, perm, n < 0 ? 0 : n);
	return (out[0] = kf_imp_op(I, KF_OP_TRANSPOSE, &x, 1, &a, n < 0 ? 0 : 1)) != KF_NONE;
}

static int tr_concat(kf_imp *I, kf_np *np, kf_vid *out, int op)
{
	if (np->n_input > KF_IMP_MAX_LIST)
		return kf_imp_fail(I, "more than %d inputs", KF_IMP_MAX_LIST);
	kf_vid *v = malloc((np->n_input + 1) * sizeof *v);
	if (!v)
		return kf_imp_fail(I, "out of memory");
	int rc = 1;
	for (size_t i = 0; i < np->n_input && rc == 1; i++)
		if ((v[i] = kf_imp_input(I, np, i)) == KF_NONE)
			rc = -1;
	kf_attr a = kf_imp_int_attr(I, "axis", kf_imp_attr_int(np, "axis", 0));
	if (rc == 1 && (out[0] = kf_imp_op(I, KF_OP_CONCAT, v, (int)np->n_input, &a, 1)) == KF_NONE)
		rc = -1;
	free(v);
	return rc;
}

static int tr_split(kf_imp *I, kf_np *np, kf_vid *out, int op)
{
	kf_vid x = kf_imp_input(I, np, 0);
	int nres = (int)np->n_output;
	if (x == KF_NONE)
		return -1;
	if (np->n_output > KF_IMP_MAX_LIST)
		return kf_imp_fail(I, "more than %d outputs", KF_IMP_MAX_LIST);
	int64_t *sizes = malloc(KF_IMP_MAX_LIST * sizeof *sizes);
	kf_attrval *items = malloc(KF_IMP_MAX_LIST * sizeof *items);
	if (!sizes || !items) {
		free(sizes), free(items);
		return kf_imp_fail(I, "out of memory");
	}
	bool present;
	int n = kf_tr_ints_from(I, np, 1, I->opset < 13 ? "split" : NULL, sizes, KF_IMP_MAX_LIST, &present);
	int rc = -1;
	if (n >= 0) {
		kf_attr a[2] = {kf_imp_int_attr(I, "axis", kf_imp_attr_int(np, "axis", 0))};
		int na = 1;
		if (n > 0)
			a[na++] = kf_imp_ints_attr(I, "sizes", items, sizes, n);
		rc = kf_imp_node(I, KF_OP_SPLIT, &x, 1, a, na, nres, out) < 0 ? -1 : nres;
	}
	free(sizes);
	free(items);
	return rc;
}

static int tr_reduce(kf_imp *I, kf_np *np, kf_vid *out, int op)
{
	kf_vid x = kf_imp_input(I, np, 0);
	int64_t axes[KF_MAX_RANK];
	bool present;
	bool axes_input = I->opset >= 18 || (op == KF_OP_REDUCE_SUM && I->opset >= 13);
	int n = kf_tr_ints_from(I, np, 1, axes_input ? NULL : "axes", axes, KF_MAX_RANK, &present);
	if (x == KF_NONE || n < 0)
		return -1;
	if (n == 0 && kf_imp_attr_int(np, "noop_with_empty_axes", 0))
		return (out[0] = x), 1;
	kf_attrval items[KF_MAX_RANK];
	kf_attr a[2] = {kf_tr_ab(I, "keepdims", kf_imp_attr_int(np, "keepdims", 1) != 0)};
	int na = 1;
	if (n > 0)
		a[na++] = kf_imp_ints_attr(I, "axes", items, axes, n);
	return (out[0] = kf_imp_op(I, op, &x, 1, a, na)) != KF_NONE;
}

static int tr_softmax(kf_imp *I, kf_np *np, kf_vid *out, int op)
{
	kf_vid x = kf_imp_input(I, np, 0);
	if (x == KF_NONE)
		return -1;
	const kf_type *t = kf_tr_ty(I, x);
	int64_t axis = kf_imp_attr_int(np, "axis", I->opset < 13 ? 1 : -1);
	if (axis < 0)
		axis += t->rank;
	kf_attr a = kf_imp_int_attr(I, "axis", -1);
	if (I->opset >= 13 || axis == t->rank - 1) {
		a.v.i = I->opset >= 13 ? kf_imp_attr_int(np, "axis", -1) : -1;
		return (out[0] = kf_imp_op(I, op, &x, 1, &a, 1)) != KF_NONE;
	}
	/* before opset 13 the input is seen as 2-D at axis: softmax over all trailing dims */
	if (kf_tr_need_static(I, x) < 0)
		return -1;
	int64_t s[2] = {1, 1}, orig[KF_MAX_RANK];
	int rank = t->rank;
	for (int i = 0; i < rank; i++) {
		orig[i] = t->dim[i];
		s[i >= axis] *= t->dim[i];
	}
	kf_vid y = kf_tr_reshape(I, x, s, 2);
	y = kf_imp_op(I, op, &y, 1, &a, 1);
	return (out[0] = y == KF_NONE ? KF_NONE : kf_tr_reshape(I, y, orig, rank)) != KF_NONE;
}

static int tr_layer_norm(kf_imp *I, kf_np *np, kf_vid *out, int op)
{
	kf_vid v[3] = {kf_imp_input(I, np, 0), kf_imp_input(I, np, 1), kf_imp_input(I, np, 2)};
	double eps = kf_tr_float(np, "epsilon", 1e-5);
	int64_t axis = kf_imp_attr_int(np, "axis", -1);
	kf_attr a[2] = {kf_imp_int_attr(I, "axis", axis), kf_tr_af(I, "epsilon", eps)};
	int nin = kf_tr_has_in(np, 2) ? 3 : 2;
	if (v[0] == KF_NONE || v[1] == KF_NONE || (nin == 3 && v[2] == KF_NONE))
		return -1; /* an absent operand has no type (found by fuzzing) */
	/* PyTorch exports layer_norm with a scale and bias of another float
	 * type than x (ONNX wants one type; torch's mixed-type layer_norm runs
	 * them: timm's ConvNeXt-V2 in f16, whose response norm casts its block
	 * to f32): computed in the widest of the three, the result in x's type,
	 * as torch returns it */
	kf_dtype xt = kf_tr_dt(I, v[0]), wt = kf_tr_float_join(I, v, nin);
	for (int i = 0; i < nin; i++)
		if ((v[i] = kf_tr_cast(I, v[i], wt)) == KF_NONE)
			return -1;
	if ((out[0] = kf_imp_op(I, KF_OP_LAYER_NORM, v, nin, a, 2)) == KF_NONE)
		return -1;
	if (wt != xt && (out[0] = kf_tr_cast(I, out[0], xt)) == KF_NONE)
		return -1;
	bool stats = false;
	for (size_t i = 1; i < np->n_output; i++)
		stats |= np->output[i][0] != 0;
	if (!stats)
		return 1;
	/* Mean and InvStdDev, kept-dim shaped, as the op's function body defines them */
	kf_vid x = v[0];
	int r = kf_tr_ty(I, x)->rank;
	int64_t ax = axis < 0 ? axis + r : axis, axes[KF_MAX_RANK];
	int n = 0;
	for (int64_t i = ax; i < r; i++)
		axes[n++] = i;
	kf_vid mean = kf_tr_reduce(I, KF_OP_REDUCE_MEAN, x, axes, n, true);
	kf_vid d = kf_tr_op2(I, KF_OP_SUB, x, mean);
	kf_vid var = kf_tr_reduce(I, KF_OP_REDUCE_MEAN, kf_tr_op2(I, KF_OP_MUL, d, d), axes, n, true);
	out[1] = mean;
	out[2] = kf_tr_op1(I, KF_OP_RSQRT, kf_tr_op2(I, KF_OP_ADD, var, kf_tr_sc(I, eps, x)));
	return out[1] == KF_NONE || out[2] == KF_NONE ? -1 : 3;
}

static int tr_gelu(kf_imp *I, kf_np *np, kf_vid *out, int op)
{
	char ap[16];
	kf_imp_attr_str(np, "approximate", "none", ap, sizeof ap);
	kf_attr a = kf_tr_as(I, "approximate", ap);
	kf_vid x = kf_imp_input(I, np, 0);
	return (out[0] = kf_imp_op(I, KF_OP_GELU, &x, 1, &a, 1)) != KF_NONE;
}

/* Activations kfuse has no op for, as ONNX's function bodies define them. */
static int tr_activation(kf_imp *I, kf_np *np, kf_vid *out, int which)
{
	kf_vid x = kf_imp_input(I, np, 0), y = KF_NONE;
	if (x == KF_NONE)
		return -1;
	double alpha = kf_tr_float(np, "alpha", NAN), beta = kf_tr_float(np, "beta", NAN);
	kf_vid zero = kf_tr_sc(I, 0, x), one = kf_tr_sc(I, 1, x);
	switch (which) {
	case 0: /* LeakyRelu */
		y = kf_tr_op3(I, KF_OP_WHERE, kf_tr_op2(I, KF_OP_LT, x, zero), kf_tr_op2(I, KF_OP_MUL, x, kf_tr_sc(I, isnan(alpha) ? 0.01 : alpha, x)), x);
		break;
	case 1: /* Elu */
		y = kf_tr_op3(I, KF_OP_WHERE, kf_tr_op2(I, KF_OP_LT, x, zero),
			kf_tr_op2(I, KF_OP_MUL, kf_tr_sc(I, isnan(alpha) ? 1 : alpha, x), kf_tr_op2(I, KF_OP_SUB, kf_tr_op1(I, KF_OP_EXP, x), one)), x);
		break;
	case 2: { /* Selu */
		double a = isnan(alpha) ? 1.67326319217681884765625 : alpha;
		double g = kf_tr_float(np, "gamma", 1.05070102214813232421875);
		kf_vid neg = kf_tr_op2(I, KF_OP_SUB, kf_tr_op2(I, KF_OP_MUL, kf_tr_sc(I, a, x), kf_tr_op1(I, KF_OP_EXP, x)), kf_tr_sc(I, a, x));
		y = kf_tr_op2(I, KF_OP_MUL, kf_tr_sc(I, g, x), kf_tr_op3(I, KF_OP_WHERE, kf_tr_op2(I, KF_OP_LE, x, zero), neg, x));
		break;
	}
	case 3: { /* Celu */
		double a = isnan(alpha) ? 1 : alpha;
		kf_vid e = kf_tr_op2(I, KF_OP_SUB, kf_tr_op1(I, KF_OP_EXP, kf_tr_op2(I, KF_OP_DIV, x, kf_tr_sc(I, a, x))), one);
		y = kf_tr_op2(I, KF_OP_ADD, kf_tr_op2(I, KF_OP_MAX, x, zero), kf_tr_op2(I, KF_OP_MIN, zero, kf_tr_op2(I, KF_OP_MUL, kf_tr_sc(I, a, x), e)));
		break;
	}
	case 4: /* HardSigmoid */
	case 5: { /* HardSwish = x * HardSigmoid(alpha = 1/6, beta = 0.5) */
		double a = which == 5 ? 1.0 / 6 : isnan(alpha) ? 0.2 : alpha, b = which == 5 ? 0.5 : isnan(beta) ? 0.5 : beta;
		kf_vid h = kf_tr_op2(I, KF_OP_ADD, kf_tr_op2(I, KF_OP_MUL, x, kf_tr_sc(I, a, x)), kf_tr_sc(I, b, x));
		h = kf_tr_op2(I, KF_OP_MAX, zero, kf_tr_op2(I, KF_OP_MIN, one, h));
		y = which == 5 ? kf_tr_op2(I, KF_OP_MUL, x, h) : h;
		break;
	}
	case 6: /* Softplus, log(exp(x) + 1), as max(x, 0) + log(1 + exp(-|x|)):
		 * exp(x) is infinite from x = 11.1 in f16 (88.7 in f32) where the
		 * value is x; torch's softplus returns x past 20 */
		y = kf_tr_op2(I, KF_OP_ADD, kf_tr_op2(I, KF_OP_MAX, x, zero),
			      kf_tr_op1(I, KF_OP_LOG, kf_tr_op2(I, KF_OP_ADD, one,
								kf_tr_op1(I, KF_OP_EXP, kf_tr_op1(I, KF_OP_NEG, kf_tr_op1(I, KF_OP_ABS, x))))));
		break;
	case 7: /* Softsign */
		y = kf_tr_op2(I, KF_OP_DIV, x, kf_tr_op2(I, KF_OP_ADD, one, kf_tr_op1(I, KF_OP_ABS, x)));
		break;
	case 8: /* ThresholdedRelu */
		y = kf_tr_op3(I, KF_OP_WHERE, kf_tr_op2(I, KF_OP_GT, x, kf_tr_sc(I, isnan(alpha) ? 1 : alpha, x)), x, zero);
		break;
	case 9: /* PRelu */
		y = kf_tr_op3(I, KF_OP_WHERE, kf_tr_op2(I, KF_OP_LT, x, zero), kf_tr_op2(I, KF_OP_MUL, x, kf_imp_input(I, np, 1)), x);
		break;
	case 10: /* Sign */
		y = kf_tr_op3(I, KF_OP_WHERE, kf_tr_op2(I, KF_OP_GT, x, zero), one,
			kf_tr_op3(I, KF_OP_WHERE, kf_tr_op2(I, KF_OP_LT, x, zero), kf_tr_sc(I, -1, x), zero));
		break;
	}
	return (out[0] = y) != KF_NONE;
}

static int tr_clip(kf_imp *I, kf_np *np, kf_vid *out, int op)
{
	kf_vid x = kf_imp_input(I, np, 0), lo = KF_NONE, hi = KF_NONE;
	if (x == KF_NONE)
		return -1;
	if (I->opset < 11) {
		if (kf_imp_attr(np, "min"))
			lo = kf_tr_sc(I, kf_tr_float(np, "min", 0), x);
		if (kf_imp_attr(np, "max"))
			hi = kf_tr_sc(I, kf_tr_float(np, "max", 0), x);
	} else {
		lo = kf_tr_has_in(np, 1) ? kf_imp_input(I, np, 1) : KF_NONE;
		hi = kf_tr_has_in(np, 2) ? kf_imp_input(I, np, 2) : KF_NONE;
	}
	if (lo != KF_NONE)
		x = kf_tr_op2(I, KF_OP_MAX, x, lo);
	if (hi != KF_NONE && x != KF_NONE)
		x = kf_tr_op2(I, KF_OP_MIN, x, hi);
	return (out[0] = x) != KF_NONE;
}


/* ---- shape queries and simple ops ONNX has and kfuse composes ---- */

static int tr_cast_like(kf_imp *I, kf_np *np, kf_vid *out, int op)
{
	kf_vid x = kf_imp_input(I, np, 0), like = kf_imp_input(I, np, 1);
	if (x == KF_NONE || like == KF_NONE)
		return -1;
	kf_attr a = kf_tr_as(I, "to", kf_dtype_name(kf_tr_dt(I, like)));
	return (out[0] = kf_imp_op(I, KF_OP_CAST, &x, 1, &a, 1)) != KF_NONE;
}

static int tr_isnan_inf(kf_imp *I, kf_np *np, kf_vid *out, int inf)
{
	kf_vid x = kf_imp_input(I, np, 0);
	if (x == KF_NONE)
		return -1;
	/* an integer is never NaN nor infinite (ONNX allows floats only) */
	if (!inf || !kf_dtype_is_float(kf_tr_dt(I, x)))
		return (out[0] = kf_tr_op2(I, KF_OP_NE, x, x)) != KF_NONE;
	bool pos = kf_imp_attr_int(np, "detect_positive", 1), neg = kf_imp_attr_int(np, "detect_negative", 1);
	kf_vid y = pos && neg ? kf_tr_op2(I, KF_OP_EQ, kf_tr_op1(I, KF_OP_ABS, x), kf_tr_sc(I, INFINITY, x))
		 : kf_tr_op2(I, KF_OP_EQ, x, kf_tr_sc(I, pos ? INFINITY : neg ? -INFINITY : NAN, x));
	return (out[0] = y) != KF_NONE;
}

/* Inference-mode Dropout: the identity, and an all-true mask. */
static int tr_dropout(kf_imp *I, kf_np *np, kf_vid *out, int op)
{
	kf_vid x = kf_imp_input(I, np, 0);
	if (x == KF_NONE)
		return -1;
	if (kf_tr_has_in(np, 2)) {
		int64_t train;
		double ratio = 0.5; /* the default when training mode gives none */
		if (kf_tr_has_in(np, 1) && !kf_imp_const_scalar(I, kf_imp_input(I, np, 1), &ratio))
			ratio = -1;
		/* training mode with ratio 0 drops nothing: the identity (torchvision's
		 * Swin exports F.dropout(p=0.0, training=self.training) so) */
		if (kf_imp_const_ints(I, kf_imp_input(I, np, 2), &train, 1) != 1 || (train && ratio != 0))
			return kf_imp_fail(I, "training mode is not supported (it is random) unless its ratio is a "
					      "constant 0");
	}
	out[0] = x;
	if (np->n_output < 2 || !np->output[1][0])
		return 1;
	/* the mask: true broadcast to x's shape (symbolic dims too) */
	const kf_type *t = kf_tr_ty(I, x);
	kf_attrval items[KF_MAX_RANK];
	kf_attr a = kf_tr_dims(I, "shape", items, t->dim, t->rank);
	kf_vid yes = kf_imp_scalar(I, 1, KF_I1);
	out[1] = kf_imp_op(I, KF_OP_BROADCAST_TO, &yes, 1, &a, 1);
	return out[1] == KF_NONE ? -1 : 2;
}

/* Training mode: the batch's own statistics (population variance) of x in
 * ct, over every axis but the channels: how timm's weight-standardised
 * convs (StdConv2d: NF-ResNets, BiT) normalise their weights, with
 * F.batch_norm(training=True) on a constant.  In ct, not x's type, as torch
 * accumulates them: an f16 mean near 1 is 2^-11 off, a twentieth of a conv
 * weight's spread of 0.01, and shifts the whole channel (NF-ResNet-26 in
 * f16 on the H200: 1.5x PyTorch's distance from f64, session 21).  Outputs
 * 1 and 2, the running statistics, as the operator defines them, in their
 * inputs' types (the exporter names them; nothing reads them in an
 * inference graph, and dce removes them).  -1 on a failure. */
static int bn_batch_stats(kf_imp *I, kf_np *np, kf_vid x, kf_dtype ct, kf_vid *mean, kf_vid *var, kf_vid *out)
{
	int r = kf_tr_ty(I, x)->rank;
	int64_t axes[KF_MAX_RANK];
	int n = 0;
	for (int d = 0; d < r; d++)
		if (d != 1)
			axes[n++] = d;
	kf_vid xs = kf_tr_cast(I, x, ct);
	kf_vid cm = kf_tr_reduce(I, KF_OP_REDUCE_MEAN, xs, axes, n, false);
	*mean = kf_tr_per_channel(I, cm, r);
	kf_vid dx = kf_tr_op2(I, KF_OP_SUB, xs, *mean);
	kf_vid cv = kf_tr_reduce(I, KF_OP_REDUCE_MEAN, kf_tr_op2(I, KF_OP_MUL, dx, dx), axes, n, false);
	*var = kf_tr_per_channel(I, cv, r);
	double mom = kf_tr_float(np, "momentum", 0.9);
	kf_vid cur[2] = {cm, cv};
	for (int i = 0; i < 2; i++) {
		kf_vid in = kf_imp_input(I, np, 3 + i);
		if (in == KF_NONE)
			return -1;
		kf_vid run = kf_tr_cast(I, in, ct);
		out[1 + i] = kf_tr_cast(I, kf_tr_op2(I, KF_OP_ADD, kf_tr_op2(I, KF_OP_MUL, run, kf_tr_sc(I, mom, run)),
						      kf_tr_op2(I, KF_OP_MUL, cur[i], kf_tr_sc(I, 1 - mom, cur[i]))),
					kf_tr_dt(I, in));
	}
	return *mean == KF_NONE || *var == KF_NONE ? -1 : 0;
}

static int tr_batch_norm(kf_imp *I, kf_np *np, kf_vid *out, int op)
{
	bool train = kf_imp_attr_int(np, "training_mode", 0);
	for (size_t i = 1; i < np->n_output && !train; i++)
		if (np->output[i][0])
			return kf_imp_fail(I, "output %zu (running statistics) is given only in training mode", i);
	kf_vid x = kf_imp_input(I, np, 0);
	if (x == KF_NONE)
		return -1;
	int r = kf_tr_ty(I, x)->rank;
	kf_vid scale = kf_tr_per_channel(I, kf_imp_input(I, np, 1), r), b = kf_tr_per_channel(I, kf_imp_input(I, np, 2), r);
	kf_vid p[5] = {x, scale, b, KF_NONE, KF_NONE};
	kf_dtype xt = kf_tr_dt(I, x), ct;
	if (train) {
		ct = kf_tr_norm_type(I, p, 3);
		if (bn_batch_stats(I, np, x, ct, &p[3], &p[4], out) != 0)
			return -1;
	} else {
		p[3] = kf_tr_per_channel(I, kf_imp_input(I, np, 3), r);
		p[4] = kf_tr_per_channel(I, kf_imp_input(I, np, 4), r);
		ct = kf_tr_norm_type(I, p, 5);
	}
	/* in f32 where x is f16 or bf16, as cuDNN's and torch's kernels compute
	 * (kf_tr_norm_type; ONNX lets scale and bias, T1, and the statistics,
	 * T2, differ from x: PyTorch's export under autocast has f16 x and f32
	 * parameters); y in x's type, rounded once */
	for (int i = 0; i < 5; i++)
		p[i] = kf_tr_cast(I, p[i], ct);
	kf_vid inv = kf_tr_op1(I, KF_OP_RSQRT, kf_tr_op2(I, KF_OP_ADD, p[4], kf_tr_sc(I, kf_tr_float(np, "epsilon", 1e-5), p[4])));
	kf_vid y = kf_tr_op2(I, KF_OP_MUL, kf_tr_op2(I, KF_OP_SUB, p[0], p[3]), kf_tr_op2(I, KF_OP_MUL, inv, p[1]));
	y = kf_tr_cast(I, kf_tr_op2(I, KF_OP_ADD, y, p[2]), xt);
	if ((out[0] = y) == KF_NONE)
		return -1;
	return train ? 3 : 1;
}

/* ReduceSumSquare, L1, L2, LogSum, LogSumExp as ONNX's function bodies write them. */
static int tr_reduce_composite(kf_imp *I, kf_np *np, kf_vid *out, int which)
{
	kf_vid x = kf_imp_input(I, np, 0);
	int64_t axes[KF_MAX_RANK];
	bool present;
	int n = kf_tr_ints_from(I, np, 1, I->opset >= 18 ? NULL : "axes", axes, KF_MAX_RANK, &present);
	if (x == KF_NONE || n < 0)
		return -1;
	if (n == 0 && kf_imp_attr_int(np, "noop_with_empty_axes", 0))
		return (out[0] = x), 1;
	bool keep = kf_imp_attr_int(np, "keepdims", 1) != 0;
	/* f16 and bf16 in f32 (kf_tr_norm_type), the result rounded once, as
	 * torch's norms and logsumexp compute: squares rounded to f16 overflow
	 * from |x| = 256 and their sum from 65504, so F.normalize of a
	 * 512-wide embedding of values near 12 (norm 270) was infinite */
	kf_dtype xt = kf_tr_dt(I, x);
	x = kf_tr_cast(I, x, kf_tr_norm_type(I, &x, 1));
	kf_vid y = KF_NONE;
	switch (which) {
	case 0: y = kf_tr_reduce(I, KF_OP_REDUCE_SUM, kf_tr_op2(I, KF_OP_MUL, x, x), axes, n, keep); break;
	case 1: y = kf_tr_reduce(I, KF_OP_REDUCE_SUM, kf_tr_op1(I, KF_OP_ABS, x), axes, n, keep); break;
	case 2: y = kf_tr_op1(I, KF_OP_SQRT, kf_tr_reduce(I, KF_OP_REDUCE_SUM, kf_tr_op2(I, KF_OP_MUL, x, x), axes, n, keep)); break;
	case 3: y = kf_tr_op1(I, KF_OP_LOG, kf_tr_reduce(I, KF_OP_REDUCE_SUM, x, axes, n, keep)); break;
	case 4: { /* max-shifted for range: log(sum(exp(x - m))) + m */
		kf_vid m = kf_tr_reduce(I, KF_OP_REDUCE_MAX, x, axes, n, true);
		kf_vid s = kf_tr_reduce(I, KF_OP_REDUCE_SUM, kf_tr_op1(I, KF_OP_EXP, kf_tr_op2(I, KF_OP_SUB, x, m)), axes, n, keep);
		kf_vid mk = keep ? m : kf_tr_reduce(I, KF_OP_REDUCE_MAX, x, axes, n, false);
		y = kf_tr_op2(I, KF_OP_ADD, kf_tr_op1(I, KF_OP_LOG, s), mk);
		break;
	}
	}
	if (which != 4 && !kf_dtype_is_float(kf_tr_dt(I, x)) && which >= 2)
		return kf_imp_fail(I, "integer input is not supported");
	return (out[0] = kf_tr_cast(I, y, xt)) != KF_NONE;
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
	{"MatMul", tr_binary, KF_OP_MATMUL, ""}, {"Gemm", tr_gemm, 0, "alpha beta transA transB broadcast"},
	{"Transpose", tr_transpose, 0, "perm"}, {"Reshape", kf_tr_Reshape, 0, "shape allowzero"},
	{"Flatten", kf_tr_Flatten, 0, "axis"}, {"Squeeze", kf_tr_Squeeze, 0, "axes"},
	{"Unsqueeze", kf_tr_Squeeze, 1, "axes"}, {"Expand", kf_tr_Expand, 0, ""},
	{"Concat", tr_concat, 0, "axis"}, {"Slice", kf_tr_Slice, 0, "starts ends axes"},
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
	{"RNN", kf_imp_rnn, 0, "hidden_size direction layout activations clip"},
	{"Shape", kf_tr_Shape, 0, "start end"}, {"Size", kf_tr_Shape, 1, ""},
	{"ConstantOfShape", kf_tr_ConstantOfShape, 0, "value"}, {"CastLike", tr_cast_like, 0, "saturate"},
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
	{"Gather", kf_tr_Gather, 0, "axis"}, {"Range", kf_tr_Range, 0, ""}, {"Trilu", kf_tr_Trilu, 0, "upper"},
	{"GatherElements", kf_tr_GatherElements, 0, "axis"}, {"Mod", kf_tr_Mod, 0, "fmod"},
	{"Pad", kf_tr_Pad, 0, "mode pads value"},
	{"Resize", kf_tr_Resize, 0, "mode coordinate_transformation_mode nearest_mode cubic_coeff_a exclude_outside "
				    "extrapolation_value antialias axes keep_aspect_ratio_policy"},
	{"InstanceNormalization", kf_tr_InstanceNormalization, 0, "epsilon"},
	{"ArgMax", kf_tr_ArgExtreme, 1, "axis keepdims select_last_index"},
	{"ArgMin", kf_tr_ArgExtreme, 0, "axis keepdims select_last_index"},
	{"CumSum", kf_tr_CumSum, 0, "exclusive reverse"}, {"ScatterND", kf_tr_ScatterND, 0, "reduction"},
	{"Tile", kf_tr_Tile, 0, ""}, {"DepthToSpace", kf_tr_DepthSpace, 0, "blocksize mode"},
	{"SpaceToDepth", kf_tr_DepthSpace, 1, "blocksize"}, {"OneHot", kf_tr_OneHot, 0, "axis"},
	{"ReduceProd", kf_tr_ReduceProd, 0, "axes keepdims noop_with_empty_axes"},
	{"Einsum", kf_tr_Einsum, 0, "equation"}, {"Sin", tr_unary, KF_OP_SIN, ""}, {"Cos", tr_unary, KF_OP_COS, ""},
	{"Floor", tr_unary, KF_OP_FLOOR, ""}, {"Ceil", tr_unary, KF_OP_CEIL, ""}, {"Round", tr_unary, KF_OP_ROUND, ""},
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

int kf_imp_translate(kf_imp *I, kf_np *np)
{
	if (np->domain && *np->domain && strcmp(np->domain, "ai.onnx"))
		return kf_imp_unsupported(I, np);
	/* translations name constants after output 0 (found by fuzzing) */
	if (np->n_output == 0)
		return kf_imp_fail(I, "the node has no outputs");
	if (np->n_output > KF_IMP_MAX_LIST)
		return kf_imp_fail(I, "more than %d outputs", KF_IMP_MAX_LIST);
	for (size_t k = 0; k < sizeof table / sizeof *table; k++) {
		if (strcmp(table[k].name, np->op_type))
			continue;
		for (size_t i = 0; i < np->n_attribute; i++)
			if (!word_in(table[k].attrs, np->attribute[i]->name))
				return kf_imp_fail(I, "attribute '%s' is not supported", np->attribute[i]->name);
		/* a translation writes at most one value per output (a Split's
		 * many on the heap) */
		kf_vid out_s[64], *out = out_s;
		if (np->n_output > 64 && !(out = malloc(np->n_output * sizeof *out)))
			return kf_imp_fail(I, "out of memory");
		int n = table[k].fn(I, np, out, table[k].op), rc = 0;
		if (I->failed)
			rc = -1;
		/* a translation that gave up without a message met a required
		 * input that is absent or empty (found by fuzzing) */
		else if (n < 0)
			rc = kf_imp_fail(I, "a required input is missing (%zu given)", np->n_input);
		for (size_t i = 0; rc == 0 && i < np->n_output; i++) {
			if (!np->output[i][0])
				continue;
			if ((int)i >= n)
				rc = kf_imp_fail(I, "output %zu is not supported", i);
			else if (out[i] == KF_NONE)
				rc = kf_imp_fail(I, "output %zu could not be translated", i);
			else
				kf_imp_bind(I, np->output[i], out[i]);
		}
		if (rc == 0)
			kf_sv_track(I, np, out, n);
		if (out != out_s)
			free(out);
		return rc;
	}
	return kf_imp_unsupported(I, np);
}
