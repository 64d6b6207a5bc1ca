/* ops.c: the built-in op table, the shared inference helpers and kf_infer.
 *
 * The table is indexed by the KF_OP_* enum (designated initialisers), so the
 * registration order in kf_ops_builtin_init is the enum order and op ids
 * equal the enum.  Element-wise, broadcasting, comparison and logic ops infer
 * here; reductions and contractions in infer.c; layout ops and regions in
 * infer_shape.c.  Semantics follow ONNX where ONNX has the op; docs/ops.md is
 * the reference. */
#include <stdio.h>
#include <string.h>

#include "infer.h"

const char *kf_trait_name(kf_trait t)
{
	static const char *const names[] = {
		[KF_TRAIT_ELEMENTWISE] = "elementwise",
		[KF_TRAIT_BROADCAST] = "broadcast",
		[KF_TRAIT_INJECTIVE] = "injective",
		[KF_TRAIT_REDUCE] = "reduce",
		[KF_TRAIT_CONTRACTION] = "contraction",
		[KF_TRAIT_OPAQUE] = "opaque",
	};
	if ((unsigned)t >= sizeof names / sizeof names[0])
		return "?";
	return names[t];
}

/* ---- messages ------------------------------------------------------------ */

int kf_ic_fail(kf_ic *ic, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (ic->errlen)
		vsnprintf(ic->err, ic->errlen, fmt, ap);
	va_end(ap);
	return -1;
}

const char *kf_ops_dstr(const kf_ctx *c, int64_t d, kf_tstr *buf)
{
	if (KF_IS_SYM(d))
		snprintf(buf->s, sizeof buf->s, "%s", kf_str(c, KF_SYM_SID(d)));
	else
		snprintf(buf->s, sizeof buf->s, "%lld", (long long)d);
	return buf->s;
}

const char *kf_ops_tstr(const kf_ctx *c, const kf_type *t, kf_tstr *buf)
{
	size_t cap = sizeof buf->s, k;
	k = (size_t)snprintf(buf->s, cap, "%s[", t->dtype < KF_NDTYPE ? kf_dtype_name(t->dtype) : "?");
	for (int i = 0; i < t->rank && i < KF_MAX_RANK && k < cap; i++) {
		kf_tstr d;
		k += (size_t)snprintf(buf->s + k, cap - k, "%s%s", i ? "," : "", kf_ops_dstr(c, t->dim[i], &d));
	}
	if (k < cap)
		snprintf(buf->s + k, cap - k, "]");
	return buf->s;
}

/* ---- attributes ---------------------------------------------------------- */

static const char *attr_kind_name(const kf_attrval *v)
{
	switch (v->kind) {
	case KF_ATTR_INT: return "an int";
	case KF_ATTR_FLOAT: return "a float";
	case KF_ATTR_STR: return "a string";
	case KF_ATTR_BOOL: return "a bool";
	case KF_ATTR_LIST: return "a list";
	}
	return "?";
}

static int wrong_kind(kf_ic *ic, const char *key, const char *want, const kf_attrval *v)
{
	return kf_ic_fail(ic, "attribute '%s' of '%s' must be %s, got %s", key, ic->op, want,
			  attr_kind_name(v));
}

bool kf_ic_int(kf_ic *ic, const char *key, int64_t dflt, int64_t *out)
{
	const kf_attrval *v = kf_attr_get(ic->g, ic->n, key);
	*out = dflt;
	if (!v)
		return true;
	if (v->kind == KF_ATTR_INT)
		*out = v->i;
	else if (v->kind == KF_ATTR_BOOL)
		*out = v->b;
	else
		return wrong_kind(ic, key, "an int", v), false;
	return true;
}

bool kf_ic_float(kf_ic *ic, const char *key, double dflt, double *out)
{
	const kf_attrval *v = kf_attr_get(ic->g, ic->n, key);
	*out = dflt;
	if (!v)
		return true;
	if (v->kind == KF_ATTR_FLOAT)
		*out = v->f;
	else if (v->kind == KF_ATTR_INT)
		*out = (double)v->i;
	else
		return wrong_kind(ic, key, "a float", v), false;
	return true;
}

bool kf_ic_str(kf_ic *ic, const char *key, const char *dflt, const char **out)
{
	const kf_attrval *v = kf_attr_get(ic->g, ic->n, key);
	*out = dflt;
	if (!v)
		return true;
	if (v->kind != KF_ATTR_STR)
		return wrong_kind(ic, key, "a string", v), false;
	*out = kf_str(ic->g->ctx, v->s);
	return true;
}

bool kf_ic_ints(kf_ic *ic, const char *key, const kf_attrval **list, uint32_t *n, bool *present)
{
	const kf_attrval *v = kf_attr_get(ic->g, ic->n, key);
	*list = NULL;
	*n = 0;
	*present = v != NULL;
	if (!v)
		return true;
	if (v->kind != KF_ATTR_LIST)
		return wrong_kind(ic, key, "a list of ints", v), false;
	for (uint32_t i = 0; i < v->n; i++)
		if (v->list[i].kind != KF_ATTR_INT)
			return kf_ic_fail(ic, "attribute '%s' of '%s' must be a list of ints, element %u is %s",
					  key, ic->op, i, attr_kind_name(&v->list[i])), false;
	*list = v->list;
	*n = v->n;
	return true;
}

bool kf_ic_need(kf_ic *ic, const char *key)
{
	if (kf_attr_get(ic->g, ic->n, key))
		return true;
	kf_ic_fail(ic, "'%s' needs attribute '%s'", ic->op, key);
	return false;
}

bool kf_ic_axis(kf_ic *ic, const char *what, int64_t axis, int rank, int *out)
{
	if (axis < -rank || axis >= rank) {
		kf_tstr t;
		kf_ic_fail(ic, "'%s' %s %lld is out of range for %s (rank %d)", ic->op, what, (long long)axis,
			   kf_ops_tstr(ic->g->ctx, kf_ic_in(ic, 0), &t), rank);
		return false;
	}
	*out = (int)(axis < 0 ? axis + rank : axis);
	return true;
}

/* ---- broadcasting and dtypes --------------------------------------------- */

bool kf_ic_broadcast(kf_ic *ic, const kf_type *a, const kf_type *b, kf_type *out)
{
	int r = a->rank > b->rank ? a->rank : b->rank;
	int64_t dim[KF_MAX_RANK];
	if (a->rank == b->rank) {
		int i = 0;
		while (i < r && a->dim[i] == b->dim[i])
			i++;
		if (i == r) {
			*out = *a; /* the common case: one shape */
			return true;
		}
	}
	for (int i = 1; i <= r; i++) {
		int64_t da = i <= a->rank ? a->dim[a->rank - i] : 1;
		int64_t db = i <= b->rank ? b->dim[b->rank - i] : 1;
		/* equal symbols are one dim; a symbol against 1 stays the symbol;
		 * a symbol against anything else might or might not match at run
		 * time, which we refuse rather than guess */
		if (da == db || db == 1)
			dim[r - i] = da;
		else if (da == 1)
			dim[r - i] = db;
		else {
			kf_tstr ta, tb, sa, sb;
			const kf_ctx *c = ic->g->ctx;
			kf_ic_fail(ic, "'%s' cannot broadcast %s and %s: dim %s vs %s%s", ic->op,
				   kf_ops_tstr(c, a, &ta), kf_ops_tstr(c, b, &tb), kf_ops_dstr(c, da, &sa),
				   kf_ops_dstr(c, db, &sb),
				   KF_IS_SYM(da) || KF_IS_SYM(db) ? " (a symbolic dim broadcasts only with itself or 1)" : "");
			return false;
		}
	}
	*out = kf_type_make(a->dtype, r, dim);
	return true;
}

bool kf_ic_same_dtype(kf_ic *ic, const kf_type *a, const kf_type *b)
{
	if (a->dtype == b->dtype)
		return true;
	kf_ic_fail(ic, "'%s' operand dtypes differ: %s and %s", ic->op, kf_dtype_name(a->dtype),
		   kf_dtype_name(b->dtype));
	return false;
}

/* What an element-wise op accepts. */
enum { DT_FLOAT, DT_NUM, DT_BOOL, DT_ANY };

static bool dtype_ok(kf_ic *ic, const kf_type *t, int want)
{
	switch (want) {
	case DT_FLOAT:
		if (kf_dtype_is_float(t->dtype))
			return true;
		kf_ic_fail(ic, "'%s' takes float operands, got %s", ic->op, kf_dtype_name(t->dtype));
		return false;
	case DT_NUM:
		if (t->dtype != KF_I1)
			return true;
		kf_ic_fail(ic, "'%s' takes float or integer operands, got i1", ic->op);
		return false;
	case DT_BOOL:
		if (t->dtype == KF_I1)
			return true;
		kf_ic_fail(ic, "'%s' takes i1 operands, got %s", ic->op, kf_dtype_name(t->dtype));
		return false;
	}
	return true;
}

/* ---- element-wise, broadcasting, comparison, logic ---------------------- */

static int unary(kf_graph *g, kf_nid n, kf_type *out, char *err, size_t errlen, int want)
{
	kf_ic ic = kf_ic_make(g, n, err, errlen);
	const kf_type *a = kf_ic_in(&ic, 0);
	if (!dtype_ok(&ic, a, want))
		return -1;
	out[0] = *a;
	return 1;
}

static int inf_float1(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen)
{
	return unary(g, n, out, err, errlen, DT_FLOAT);
}

static int inf_num1(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen)
{
	return unary(g, n, out, err, errlen, DT_NUM);
}

static int inf_not(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen)
{
	return unary(g, n, out, err, errlen, DT_BOOL);
}

static int inf_gelu(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen)
{
	kf_ic ic = kf_ic_make(g, n, err, errlen);
	const char *ap;
	if (!kf_ic_str(&ic, "approximate", "none", &ap))
		return -1;
	if (strcmp(ap, "none") && strcmp(ap, "tanh"))
		return kf_ic_fail(&ic, "attribute 'approximate' of 'gelu' must be \"none\" or \"tanh\", got \"%s\"", ap);
	return unary(g, n, out, err, errlen, DT_FLOAT);
}

/* Two operands of one dtype under broadcasting; the result dtype is the
 * operands' or i1 for comparisons. */
static int binary(kf_graph *g, kf_nid n, kf_type *out, char *err, size_t errlen, int want, bool to_i1)
{
	kf_ic ic = kf_ic_make(g, n, err, errlen);
	const kf_type *a = kf_ic_in(&ic, 0), *b = kf_ic_in(&ic, 1);
	if (!kf_ic_same_dtype(&ic, a, b) || !dtype_ok(&ic, a, want) || !kf_ic_broadcast(&ic, a, b, out))
		return -1;
	if (to_i1)
		out->dtype = KF_I1;
	return 1;
}

static int inf_arith(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen)
{
	return binary(g, n, out, err, errlen, DT_NUM, false);
}

static int inf_eq(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen)
{
	return binary(g, n, out, err, errlen, DT_ANY, true);
}

static int inf_cmp(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen)
{
	return binary(g, n, out, err, errlen, DT_NUM, true);
}

static int inf_logic(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen)
{
	return binary(g, n, out, err, errlen, DT_BOOL, false);
}

static int inf_where(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen)
{
	kf_ic ic = kf_ic_make(g, n, err, errlen);
	const kf_type *c = kf_ic_in(&ic, 0), *a = kf_ic_in(&ic, 1), *b = kf_ic_in(&ic, 2);
	kf_type ab;
	if (c->dtype != KF_I1)
		return kf_ic_fail(&ic, "'where' condition must be i1, got %s", kf_dtype_name(c->dtype));
	if (!kf_ic_same_dtype(&ic, a, b) || !kf_ic_broadcast(&ic, a, b, &ab) ||
	    !kf_ic_broadcast(&ic, c, &ab, out))
		return -1;
	out->dtype = a->dtype;
	return 1;
}

static int inf_cast(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen)
{
	kf_ic ic = kf_ic_make(g, n, err, errlen);
	const char *to;
	if (!kf_ic_need(&ic, "to") || !kf_ic_str(&ic, "to", NULL, &to))
		return -1;
	int dt = kf_dtype_parse(to, strlen(to));
	if (dt < 0)
		return kf_ic_fail(&ic, "attribute 'to' of 'cast' is not a dtype: \"%s\"", to);
	out[0] = *kf_ic_in(&ic, 0);
	out[0].dtype = (uint8_t)dt;
	return 1;
}

static int inf_none(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen)
{
	return 0;
}

/* ---- the table ------------------------------------------------------------ */

#define EW KF_TRAIT_ELEMENTWISE
#define BC KF_TRAIT_BROADCAST
#define COMM KF_OPF_COMMUTATIVE
#define AC (KF_OPF_COMMUTATIVE | KF_OPF_ASSOCIATIVE)

/* name, min_in, max_in, nres, trait, flags, infer, cpu, cuda, attrs, doc */
static const kf_opinfo builtin[KF_NBUILTIN] = {
	[KF_OP_CONST] = {"const", 0, 0, 1, KF_TRAIT_OPAQUE, 0, kf_infer_const, NULL, NULL, "",
			 "a constant: scalar splat, dense literal or file(\"x.npy\")"},
	[KF_OP_ADD] = {"add", 2, 2, 1, BC, AC, inf_arith, NULL, "(a + b)", "", "a + b, broadcast"},
	[KF_OP_SUB] = {"sub", 2, 2, 1, BC, 0, inf_arith, NULL, "(a - b)", "", "a - b, broadcast"},
	[KF_OP_MUL] = {"mul", 2, 2, 1, BC, AC, inf_arith, NULL, "(a * b)", "", "a * b, broadcast"},
	[KF_OP_DIV] = {"div", 2, 2, 1, BC, 0, inf_arith, NULL, "(a / b)", "", "a / b, broadcast"},
	[KF_OP_POW] = {"pow", 2, 2, 1, BC, 0, inf_arith, NULL, "powf(a, b)", "", "a ^ b, broadcast"},
	[KF_OP_MAX] = {"max", 2, 2, 1, BC, AC, inf_arith, NULL, "(a > b || a != a ? a : b)", "", "larger of a and b (NaN if either is), broadcast"},
	[KF_OP_MIN] = {"min", 2, 2, 1, BC, AC, inf_arith, NULL, "(a < b || a != a ? a : b)", "", "smaller of a and b (NaN if either is), broadcast"},
	[KF_OP_NEG] = {"neg", 1, 1, 1, EW, 0, inf_num1, NULL, "(-a)", "", "-a"},
	[KF_OP_ABS] = {"abs", 1, 1, 1, EW, 0, inf_num1, NULL, "fabsf(a)", "", "|a|"},
	[KF_OP_EXP] = {"exp", 1, 1, 1, EW, 0, inf_float1, NULL, "expf(a)", "", "e^a"},
	[KF_OP_LOG] = {"log", 1, 1, 1, EW, 0, inf_float1, NULL, "logf(a)", "", "natural logarithm"},
	[KF_OP_SQRT] = {"sqrt", 1, 1, 1, EW, 0, inf_float1, NULL, "sqrtf(a)", "", "square root"},
	[KF_OP_RSQRT] = {"rsqrt", 1, 1, 1, EW, 0, inf_float1, NULL, "rsqrtf(a)", "", "1 / sqrt(a)"},
	[KF_OP_TANH] = {"tanh", 1, 1, 1, EW, 0, inf_float1, NULL, "tanhf(a)", "", "hyperbolic tangent"},
	[KF_OP_SIGMOID] = {"sigmoid", 1, 1, 1, EW, 0, inf_float1, NULL, "(1.f / (1.f + expf(-a)))", "",
			   "1 / (1 + e^-a)"},
	[KF_OP_RELU] = {"relu", 1, 1, 1, EW, 0, inf_num1, NULL, "(a < 0.f ? 0.f : a)", "", "max(a, 0); NaN stays NaN"},
	/* the expression is the exact (approximate = "none") form; the tanh form
	 * depends on the attribute, so an emitter must look at it */
	[KF_OP_GELU] = {"gelu", 1, 1, 1, EW, 0, inf_gelu, NULL, "(0.5f * a * (1.f + erff(a * 0.70710678118654752f)))",
			"approximate", "Gaussian error linear unit, {approximate = \"none\" | \"tanh\"}"},
	[KF_OP_ERF] = {"erf", 1, 1, 1, EW, 0, inf_float1, NULL, "erff(a)", "", "error function"},
	[KF_OP_SILU] = {"silu", 1, 1, 1, EW, 0, inf_float1, NULL, "(a / (1.f + expf(-a)))", "", "a * sigmoid(a)"},
	[KF_OP_WHERE] = {"where", 3, 3, 1, BC, 0, inf_where, NULL, "(a != 0.f ? b : c)", "",
			 "cond ? a : b, three-way broadcast"},
	[KF_OP_CAST] = {"cast", 1, 1, 1, EW, 0, inf_cast, NULL, NULL, "to", "converts to dtype {to}"},
	[KF_OP_EQ] = {"eq", 2, 2, 1, BC, COMM, inf_eq, NULL, "(float)(a == b)", "", "a == b, i1, broadcast"},
	[KF_OP_NE] = {"ne", 2, 2, 1, BC, COMM, inf_eq, NULL, "(float)(a != b)", "", "a != b, i1, broadcast"},
	[KF_OP_LT] = {"lt", 2, 2, 1, BC, 0, inf_cmp, NULL, "(float)(a < b)", "", "a < b, i1, broadcast"},
	[KF_OP_LE] = {"le", 2, 2, 1, BC, 0, inf_cmp, NULL, "(float)(a <= b)", "", "a <= b, i1, broadcast"},
	[KF_OP_GT] = {"gt", 2, 2, 1, BC, 0, inf_cmp, NULL, "(float)(a > b)", "", "a > b, i1, broadcast"},
	[KF_OP_GE] = {"ge", 2, 2, 1, BC, 0, inf_cmp, NULL, "(float)(a >= b)", "", "a >= b, i1, broadcast"},
	[KF_OP_AND] = {"and", 2, 2, 1, BC, AC, inf_logic, NULL, "(float)(a != 0.f && b != 0.f)", "",
		       "logical and of i1, broadcast"},
	[KF_OP_OR] = {"or", 2, 2, 1, BC, AC, inf_logic, NULL, "(float)(a != 0.f || b != 0.f)", "",
		      "logical or of i1, broadcast"},
	[KF_OP_NOT] = {"not", 1, 1, 1, EW, 0, inf_not, NULL, "(float)(a == 0.f)", "", "logical not of i1"},
	[KF_OP_REDUCE_SUM] = {"reduce_sum", 1, 1, 1, KF_TRAIT_REDUCE, 0, kf_infer_reduce, NULL, NULL,
			      "axes keepdims", "sum over {axes} (all when absent), {keepdims = true}"},
	[KF_OP_REDUCE_MEAN] = {"reduce_mean", 1, 1, 1, KF_TRAIT_REDUCE, 0, kf_infer_reduce, NULL, NULL,
			       "axes keepdims", "mean over {axes}, {keepdims = true}"},
	[KF_OP_REDUCE_MAX] = {"reduce_max", 1, 1, 1, KF_TRAIT_REDUCE, 0, kf_infer_reduce, NULL, NULL,
			      "axes keepdims", "maximum over {axes}, {keepdims = true}"},
	[KF_OP_REDUCE_MIN] = {"reduce_min", 1, 1, 1, KF_TRAIT_REDUCE, 0, kf_infer_reduce, NULL, NULL,
			      "axes keepdims", "minimum over {axes}, {keepdims = true}"},
	[KF_OP_SOFTMAX] = {"softmax", 1, 1, 1, KF_TRAIT_REDUCE, 0, kf_infer_softmax, NULL, NULL, "axis",
			   "softmax along {axis = -1}"},
	[KF_OP_LOG_SOFTMAX] = {"log_softmax", 1, 1, 1, KF_TRAIT_REDUCE, 0, kf_infer_softmax, NULL, NULL,
			       "axis", "log of softmax along {axis = -1}"},
	[KF_OP_LAYER_NORM] = {"layer_norm", 1, 3, 1, KF_TRAIT_REDUCE, 0, kf_infer_layer_norm, NULL, NULL,
			      "axis epsilon", "(x - mean) / sqrt(var + epsilon) * scale + bias over dims axis.."},
	[KF_OP_MATMUL] = {"matmul", 2, 2, 1, KF_TRAIT_CONTRACTION, 0, kf_infer_matmul, NULL, NULL, "",
			  "numpy matmul: batch dims broadcast, 1-D operands promoted"},
	[KF_OP_GEMM] = {"gemm", 2, 3, 1, KF_TRAIT_CONTRACTION, 0, kf_infer_gemm, NULL, NULL,
			"alpha beta trans_a trans_b", "alpha * op(a) @ op(b) + beta * c, 2-D"},
	[KF_OP_TRANSPOSE] = {"transpose", 1, 1, 1, KF_TRAIT_INJECTIVE, 0, kf_infer_transpose, NULL, NULL,
			     "perm", "permutes dims by {perm} (default reversed)"},
	[KF_OP_RESHAPE] = {"reshape", 1, 1, 1, KF_TRAIT_INJECTIVE, 0, kf_infer_reshape, NULL, NULL, "shape",
			   "same elements, new {shape} (0 copies a dim, one -1 inferred)"},
	[KF_OP_BROADCAST_TO] = {"broadcast_to", 1, 1, 1, BC, 0, kf_infer_broadcast_to, NULL, NULL, "shape",
				"numpy broadcast_to {shape}"},
	[KF_OP_CONCAT] = {"concat", 1, -1, 1, KF_TRAIT_INJECTIVE, 0, kf_infer_concat, NULL, NULL, "axis",
			  "joins operands along {axis}"},
	[KF_OP_SLICE] = {"slice", 1, 1, 1, KF_TRAIT_INJECTIVE, 0, kf_infer_slice, NULL, NULL,
			 "starts ends axes steps", "ONNX Slice with attributes"},
	[KF_OP_SPLIT] = {"split", 1, 1, -1, KF_TRAIT_INJECTIVE, 0, kf_infer_split, NULL, NULL, "axis sizes",
			 "splits along {axis = 0} into {sizes} or equal parts"},
	[KF_OP_GATHER] = {"gather", 2, 2, 1, KF_TRAIT_INJECTIVE, 0, kf_infer_gather, NULL, NULL, "axis",
			  "ONNX Gather: data's dim {axis = 0} replaced by the dims of indices (i32/i64, negative from the end)"},
	[KF_OP_GATHER_ELEMENTS] = {"gather_elements", 2, 2, 1, KF_TRAIT_INJECTIVE, 0, kf_infer_gather_elements, NULL, NULL,
				   "axis", "ONNX GatherElements: the data element at each index along {axis = 0}, indices' shape"},
	[KF_OP_PAD] = {"pad", 1, 1, 1, KF_TRAIT_INJECTIVE, 0, kf_infer_pad, NULL, NULL, "pads mode value",
		       "ONNX Pad: {pads} begins then ends, {mode = \"constant\"|reflect|edge|wrap, value = 0.0}"},
	[KF_OP_RESIZE] = {"resize", 1, 1, 1, KF_TRAIT_OPAQUE, 0, kf_infer_resize, NULL, NULL,
			  "mode coordinate_transformation_mode nearest_mode scales sizes cubic_coeff_a exclude_outside",
			  "ONNX Resize, nearest, linear or cubic: {scales} per dim, {sizes} when given"},
	[KF_OP_IOTA] = {"iota", 0, 0, 1, KF_TRAIT_OPAQUE, 0, kf_infer_iota, NULL, NULL, "dtype shape axis",
			"{dtype = \"i64\"}[{shape}]: each element its index along {axis = 0}"},
	[KF_OP_SHAPE] = {"shape", 1, 1, 1, KF_TRAIT_OPAQUE, 0, kf_infer_shape_of, NULL, NULL, "start end",
			 "the dims of x as i64, ONNX Shape {start, end}"},
	[KF_OP_SIN] = {"sin", 1, 1, 1, EW, 0, inf_float1, NULL, "sinf(a)", "", "sine"},
	[KF_OP_COS] = {"cos", 1, 1, 1, EW, 0, inf_float1, NULL, "cosf(a)", "", "cosine"},
	[KF_OP_FLOOR] = {"floor", 1, 1, 1, EW, 0, inf_float1, NULL, "floorf(a)", "", "the largest integer <= a"},
	[KF_OP_CEIL] = {"ceil", 1, 1, 1, EW, 0, inf_float1, NULL, "ceilf(a)", "", "the smallest integer >= a"},
	[KF_OP_ROUND] = {"round", 1, 1, 1, EW, 0, inf_float1, NULL, "rintf(a)", "", "the nearest integer, halves to even"},
	/* the importer's stand-in for an ONNX op kfuse lacks: @name is the op,
	 * the node's types and attributes are the model's (trusted, no
	 * inference); a plugin op of that name runs it */
	[KF_OP_OPAQUE] = {"opaque", 0, -1, -1, KF_TRAIT_OPAQUE, KF_OPF_SYMBOL, kf_infer_opaque, NULL, NULL, NULL,
			  "an op kfuse does not have, @name, kept with its attributes; a plugin op @name runs it"},
	[KF_OP_CONV] = {"conv", 2, 3, 1, KF_TRAIT_CONTRACTION, 0, kf_infer_conv, NULL, NULL,
			"strides pads dilations group channels_last",
			"ONNX Conv: x [N,C,spatial..], weight [O,C/group,kernel..], bias [O]?"},
	[KF_OP_CONV_TRANSPOSE] = {"conv_transpose", 2, 3, 1, KF_TRAIT_CONTRACTION, 0, kf_infer_conv_transpose,
				  NULL, NULL, "strides pads dilations group output_padding",
				  "ONNX ConvTranspose: weight [C,O/group,kernel..], bias [O]?"},
	/* opaque, not reduce: the fuse pass's reductions are over whole axes */
	[KF_OP_MAX_POOL] = {"max_pool", 1, 1, 1, KF_TRAIT_OPAQUE, 0, kf_infer_pool, NULL, NULL,
			    "kernel_shape strides pads dilations ceil_mode channels_last",
			    "ONNX MaxPool over {kernel_shape} windows (padding never wins)"},
	[KF_OP_AVG_POOL] = {"avg_pool", 1, 1, 1, KF_TRAIT_OPAQUE, 0, kf_infer_pool, NULL, NULL,
			    "kernel_shape strides pads dilations ceil_mode count_include_pad channels_last",
			    "ONNX AveragePool over {kernel_shape} windows"},
	[KF_OP_FUSION] = {"fusion", 0, -1, -1, KF_TRAIT_OPAQUE, KF_OPF_REGION | KF_OPF_SYMBOL, kf_infer_fusion,
			  NULL, NULL, "kind cell steps hidden layers bidirectional tile tf32", "a fused kernel: its body region computes its results"},
	[KF_OP_RETURN] = {"return", 0, -1, 0, KF_TRAIT_OPAQUE, KF_OPF_TERMINATOR | KF_OPF_EFFECT, inf_none,
			  NULL, NULL, "", "ends the graph body with its results"},
	[KF_OP_YIELD] = {"yield", 0, -1, 0, KF_TRAIT_OPAQUE, KF_OPF_TERMINATOR | KF_OPF_EFFECT, inf_none,
			 NULL, NULL, "", "ends a region body with its results"},
};

void kf_ops_builtin_init(kf_ctx *c)
{
	for (int i = 0; i < KF_NBUILTIN; i++) {
		int id = kf_op_register(c, &builtin[i]);
		/* ids must equal the enum; only a registry used before this call
		 * could break that, which is a bug in the caller */
		if (id != i)
			kf_error(c, KF_NOLOC, "internal: built-in op '%s' registered as id %d, not %d",
				 builtin[i].name, id, i);
	}
}

int kf_node_impl_op(const kf_graph *g, kf_nid n)
{
	const kf_node *nd = kf_N(g, n);
	if (nd->op != KF_OP_OPAQUE)
		return nd->op;
	const char *name = nd->sym ? kf_str(g->ctx, nd->sym) : "";
	int op = kf_op_lookup(g->ctx, name, strlen(name));
	return op == KF_OP_OPAQUE ? -1 : op;
}

/* ---- kf_infer: generic checks, then the op's own function ---------------- */

bool kf_op_attr_allowed(const char *allowed, const char *key)
{
	size_t k = strlen(key);
	for (const char *p = allowed; *p;) {
		size_t w = strcspn(p, " ");
		if (w == k && !memcmp(p, key, k))
			return true;
		p += w;
		p += strspn(p, " ");
	}
	return false;
}

static int check_arity(kf_ic *ic, const kf_opinfo *op, uint32_t nin)
{
	if (nin >= (uint32_t)op->min_in && (op->max_in < 0 || nin <= (uint32_t)op->max_in))
		return 0;
	if (op->max_in < 0)
		return kf_ic_fail(ic, "'%s' takes at least %d operand%s, got %u", op->name, op->min_in,
				  op->min_in == 1 ? "" : "s", nin);
	if (op->min_in == op->max_in)
		return kf_ic_fail(ic, "'%s' takes %d operand%s, got %u", op->name, op->min_in,
				  op->min_in == 1 ? "" : "s", nin);
	return kf_ic_fail(ic, "'%s' takes %d to %d operands, got %u", op->name, op->min_in, op->max_in, nin);
}

int kf_infer(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen)
{
	const kf_node *nd = kf_N(g, n);
	const kf_opinfo *op = nd->op < kf_op_count(g->ctx) ? kf_op(g->ctx, nd->op) : NULL;
	kf_ic ic = {g, n, op ? op->name : "?", err, errlen};
	if (!op)
		return kf_ic_fail(&ic, "unknown op id %u", nd->op);
	if (check_arity(&ic, op, nd->nin) < 0)
		return -1;
	for (uint32_t i = 0; i < nd->nin; i++) {
		kf_vid v = kf_in(g, n, i);
		if (v >= g->nval)
			return kf_ic_fail(&ic, "operand %u of '%s' is not a value", i, op->name);
	}
	for (uint32_t i = 0; op->attrs && i < nd->nattr; i++) {
		const char *key = kf_str(g->ctx, nd->attr[i].key);
		if (!kf_op_attr_allowed(op->attrs, key))
			return kf_ic_fail(&ic, "unknown attribute '%s' for '%s' (%s%s)", key, op->name,
					  *op->attrs ? "allowed: " : "it takes no attributes",
					  op->attrs);
	}
	if (op->nres >= 0 && op->nres > maxout)
		return kf_ic_fail(&ic, "'%s' has %d results, room for %d", op->name, op->nres, maxout);
	if (!op->infer) {
		/* plugin ops without a shape function: the node's types are trusted */
		if (nd->nres > (uint32_t)maxout)
			return kf_ic_fail(&ic, "'%s' has %u results, room for %d", op->name, nd->nres, maxout);
		for (uint32_t i = 0; i < nd->nres; i++)
			out[i] = *kf_vtype(g, kf_res(g, n, i));
		return (int)nd->nres;
	}
	return op->infer(g, n, out, maxout, err, errlen);
}

bool kf_infer_types_only(const kf_opinfo *op)
{
	/* each reads its operands' types (and, on nodes that have them,
	 * attributes) and nothing else of the graph */
	static const kf_infer_fn pure[] = {inf_arith, inf_num1, inf_float1, inf_not, inf_gelu, inf_eq,
					   inf_cmp,   inf_logic, inf_where, kf_infer_matmul};
	for (size_t i = 0; i < sizeof pure / sizeof pure[0]; i++)
		if (op->infer == pure[i])
			return true;
	return false;
}
