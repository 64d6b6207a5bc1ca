/* opaque.c: an ONNX op the importer cannot translate.  By default it is an
 * error naming the node, the op, the opset and what kfuse would need; with
 * allow_unsupported it becomes `opaque @Op(...) {attributes} : types`, the
 * model's declared result types and the node's attributes kept, which every
 * tool reads and a plugin op named Op runs (docs/onnx.md). */
#include <string.h>
#include "tr.h"

/* What importing an op would take, for the common ones. */
static const char *needs(const char *op)
{
	static const struct {
		const char *ops, *need;
	} hint[] = {
		{" Conv ConvTranspose MaxPool AveragePool GlobalAveragePool GlobalMaxPool LpPool ",
		 "kfuse's convolution and pooling ops (conv, conv_transpose, max_pool, avg_pool)"},
		{" GatherND ScatterElements Scatter ",
		 "a gather or scatter op with an index per element"},
		{" TopK NonMaxSuppression Unique NonZero Compress ",
		 "results whose size depends on the data, which static shapes cannot express"},
		{" If Loop Scan SequenceMap ", "control flow: kfuse graphs have no subgraphs"},
		{" Floor Ceil Round Tan Sinh Cosh Asin Acos Atan Asinh Acosh Atanh Mod BitShift Det Hardmax Shrink ",
		 "an element-wise op of that name (a registry entry and a CPU kernel)"},
		{" EyeLike ReverseSequence ",
		 "a data-movement op of that name, or its translation into reshape/transpose/gather"},
		{" NegativeLogLikelihoodLoss SoftmaxCrossEntropyLoss Dropout Bernoulli RandomUniform RandomUniformLike "
		 "RandomNormal RandomNormalLike ", "training-time or random ops, which kfuse does not run"},
		{" QuantizeLinear DequantizeLinear DynamicQuantizeLinear QLinearConv QLinearMatMul MatMulInteger "
		 "ConvInteger ", "integer quantisation (uint8 tensors and their ops)"},
	};
	char key[160];
	snprintf(key, sizeof key, " %s ", op);
	for (size_t i = 0; i < sizeof hint / sizeof *hint; i++)
		if (strstr(hint[i].ops, key))
			return hint[i].need;
	return "a kfuse op with its ONNX semantics";
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

/* One ONNX attribute as a kfuse attribute value (lists in the graph's
 * arena); -1 for kinds kfuse attributes cannot hold. */
static int attr_value(kf_imp *I, const Onnx__AttributeProto *a, kf_attrval *v)
{
	kf_arena *ar = &I->g->arena;
	switch (a->type) {
	case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT:
		*v = (kf_attrval){.kind = KF_ATTR_INT, .i = a->i};
		return 0;
	case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT:
		*v = (kf_attrval){.kind = KF_ATTR_FLOAT, .f = kf_tr_f32(a->f)};
		return 0;
	case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING:
		*v = (kf_attrval){.kind = KF_ATTR_STR, .s = kf_intern(I->c, a->s.len ? (const char *)a->s.data : "", a->s.len)};
		return 0;
	case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
	case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS:
	case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS: {
		size_t n = a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS     ? a->n_ints
			 : a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS ? a->n_floats
										    : a->n_strings;
		kf_attrval *l = kf_alloc(ar, (n ? n : 1) * sizeof *l);
		for (size_t i = 0; i < n; i++)
			l[i] = a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS
				       ? (kf_attrval){.kind = KF_ATTR_INT, .i = a->ints[i]}
			       : a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS
				       ? (kf_attrval){.kind = KF_ATTR_FLOAT, .f = kf_tr_f32(a->floats[i])}
				       : (kf_attrval){.kind = KF_ATTR_STR,
						      .s = kf_intern(I->c, a->strings[i].len ? (const char *)a->strings[i].data : "",
								     a->strings[i].len)};
		*v = (kf_attrval){.kind = KF_ATTR_LIST, .n = (uint32_t)n, .list = l};
		return 0;
	}
	default:
		return -1;
	}
}

/* A name kfuse can write after '@' or as an attribute key. */
static bool word(const char *s)
{
	if (!*s)
		return false;
	for (const char *p = s; *p; p++) {
		char ch = *p;
		bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' || ch == '$' ||
			  (p > s && ((ch >= '0' && ch <= '9') || ch == '.'));
		if (!ok)
			return false;
	}
	return true;
}

static int keep_opaque(kf_imp *I, kf_np *np, const char *what)
{
	char name[256];
	bool dom = np->domain && *np->domain && strcmp(np->domain, "ai.onnx");
	snprintf(name, sizeof name, "%s%s%s", dom ? np->domain : "", dom ? "." : "", np->op_type);
	if (!word(name))
		return kf_imp_fail(I, "%s, and it cannot be kept opaque: '%s' is no name kfuse can write", what, name);
	kf_vid in[64];
	kf_tid res[64];
	kf_attr at[64];
	if (np->n_input > 64 || np->n_output > 64 || np->n_attribute > 64)
		return kf_imp_fail(I, "%s, and it has too many inputs, outputs or attributes to keep opaque", what);
	for (size_t i = 0; i < np->n_input; i++)
		if ((in[i] = kf_imp_input(I, np, i)) == KF_NONE)
			return kf_imp_fail(I, "%s, and it cannot be kept opaque: input %zu is left out", what, i);
	for (size_t i = 0; i < np->n_output; i++) {
		const Onnx__ValueInfoProto *vi = declared(I, np->output[i]);
		kf_type t;
		if (!vi)
			return kf_imp_fail(I, "%s, and it cannot be kept opaque: the model declares no type for its "
					      "output '%s' (onnx.shape_inference.infer_shapes declares them)", what,
					   np->output[i]);
		if (kf_imp_value_type(I, vi, &t) < 0)
			return -1;
		res[i] = kf_type_intern(I->c, &t);
	}
	for (size_t i = 0; i < np->n_attribute; i++) {
		const Onnx__AttributeProto *a = np->attribute[i];
		if (!word(a->name) || attr_value(I, a, &at[i].v) < 0)
			return kf_imp_fail(I, "%s, and it cannot be kept opaque: attribute '%s' is a tensor, graph or "
					      "name kfuse attributes cannot hold", what, a->name);
		at[i].key = kf_intern_cstr(I->c, a->name);
	}
	kf_nid n = kf_node_new(I->g, 0, KF_NONE, KF_OP_OPAQUE, in, (uint32_t)np->n_input, res, (uint32_t)np->n_output);
	kf_N(I->g, n)->sym = kf_intern_cstr(I->c, name);
	if (np->n_attribute)
		kf_node_set_attrs(I->g, n, at, (uint32_t)np->n_attribute);
	for (size_t i = 0; i < np->n_output; i++)
		if (np->output[i][0])
			kf_imp_bind(I, np->output[i], kf_res(I->g, n, (uint32_t)i));
	return 0;
}

int kf_imp_unsupported(kf_imp *I, kf_np *np)
{
	char what[512];
	bool dom = np->domain && *np->domain && strcmp(np->domain, "ai.onnx");
	if (dom)
		snprintf(what, sizeof what, "op '%s' of domain '%s' is not supported", np->op_type, np->domain);
	else
		snprintf(what, sizeof what, "op '%s' is not supported", np->op_type);
	if (I->o.allow_unsupported)
		return keep_opaque(I, np, what);
	return kf_imp_fail(I, "%s: it would need %s (--allow-unsupported keeps it as `opaque @%s%s%s` for a plugin "
			      "to run)", what, dom ? "an op of that domain" : needs(np->op_type), dom ? np->domain : "",
			   dom ? "." : "", np->op_type);
}
