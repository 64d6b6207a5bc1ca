/* attr.c: reading an ONNX node's attributes and inputs, and writing kfuse
 * attributes, for the translation files (conv.c, rnn.c). */
#include <stdio.h>
#include <string.h>
#include "importer.h"

const Onnx__AttributeProto *kf_imp_attr(const Onnx__NodeProto *np, const char *name)
{
	for (size_t i = 0; i < np->n_attribute; i++)
		if (strcmp(np->attribute[i]->name, name) == 0)
			return np->attribute[i];
	return NULL;
}

int64_t kf_imp_attr_int(const Onnx__NodeProto *np, const char *name, int64_t dflt)
{
	const Onnx__AttributeProto *a = kf_imp_attr(np, name);
	return a ? a->i : dflt;
}

int kf_imp_attr_ints(const Onnx__NodeProto *np, const char *name, int64_t *out, int max)
{
	const Onnx__AttributeProto *a = kf_imp_attr(np, name);
	if (!a || a->n_ints > (size_t)max)
		return -1;
	if (a->n_ints) /* an attribute of another type has no ints array: NULL (found by fuzzing) */
		memcpy(out, a->ints, a->n_ints * sizeof *out);
	return (int)a->n_ints;
}

void kf_imp_attr_str(const Onnx__NodeProto *np, const char *name, const char *dflt, char *out, size_t cap)
{
	const Onnx__AttributeProto *a = kf_imp_attr(np, name);
	if (!a) {
		snprintf(out, cap, "%s", dflt);
		return;
	}
	size_t n = a->s.len < cap - 1 ? a->s.len : cap - 1;
	if (n) /* an attribute of another type has no string: NULL (found by fuzzing) */
		memcpy(out, a->s.data, n);
	out[n] = 0;
}

kf_vid kf_imp_input(kf_imp *I, const Onnx__NodeProto *np, size_t i)
{
	return i < np->n_input && np->input[i][0] ? kf_imp_lookup(I, np->input[i]) : KF_NONE;
}

kf_attr kf_imp_int_attr(kf_imp *I, const char *key, int64_t v)
{
	return (kf_attr){kf_intern_cstr(I->c, key), {.kind = KF_ATTR_INT, .i = v}};
}

kf_attr kf_imp_ints_attr(kf_imp *I, const char *key, kf_attrval *items, const int64_t *v, int n)
{
	for (int i = 0; i < n; i++)
		items[i] = (kf_attrval){.kind = KF_ATTR_INT, .i = v[i]};
	return (kf_attr){kf_intern_cstr(I->c, key), {.kind = KF_ATTR_LIST, .n = (uint32_t)n, .list = items}};
}
