/* tr.h: what the node translators (translate.c, shapes.c, index.c,
 * einsum.c, rnn.c) share.  Private to onnx/.
 *
 * Each translator builds kfuse ops through kf_imp_op, which infers their
 * types and folds them when their operands are constants, and returns
 * KF_NONE (after an error, or when an operand was KF_NONE): a chain of
 * builders needs no check between links, only at its end. */
#ifndef KF_ONNX_TR_H
#define KF_ONNX_TR_H
#include "importer.h"

typedef const Onnx__NodeProto kf_np;

/* ---- ONNX attributes (tr.c) ---- */
const Onnx__AttributeProto *kf_tr_attr(kf_np *np, const char *name);
int64_t kf_tr_int(kf_np *np, const char *name, int64_t dflt);
/* ONNX floats are f32: the shortest decimal that reads back as that f32,
 * so that 0.35f prints as 0.35 rather than 0.3499999940395355. */
double kf_tr_f32(float f);
double kf_tr_float(kf_np *np, const char *name, double dflt);
void kf_tr_str(kf_np *np, const char *name, const char *dflt, char *out, size_t cap);
/* An ints attribute into out (at most max): its length, -1 when absent. */
int kf_tr_ints(kf_np *np, const char *name, int64_t *out, int max);
/* An int list from attribute `attr` (when given and the node has it) or
 * else from constant input `input`; 0 when neither is there (*present
 * false); -1 after an error. */
int kf_tr_ints_from(kf_imp *I, kf_np *np, size_t input, const char *attr, int64_t *out, int max, bool *present);

/* Like kf_tr_ints_from, but an input may also be a shape value (shapes.c)
 * whose elements are symbolic dims: those come back as KF_SYM values with
 * sym[i] set. */
int kf_tr_dims_from(kf_imp *I, kf_np *np, size_t input, const char *attr, int64_t *out, bool *sym, int max,
		    bool *present);

/* ---- kfuse attributes (the list's items must live until the node is made) ---- */
kf_attr kf_tr_ai(kf_imp *I, const char *k, int64_t v);
kf_attr kf_tr_af(kf_imp *I, const char *k, double v);
kf_attr kf_tr_ab(kf_imp *I, const char *k, bool v);
kf_attr kf_tr_as(kf_imp *I, const char *k, const char *v);
kf_attr kf_tr_al(kf_imp *I, const char *k, kf_attrval *items, const int64_t *v, int n);
/* A list of dims: static ones as ints, symbolic ones as their names. */
kf_attr kf_tr_dims(kf_imp *I, const char *k, kf_attrval *items, const int64_t *dims, int n);

/* ---- operands and ops ---- */
/* Input i of the node (KF_NONE when absent or empty; an undefined name is an error). */
kf_vid kf_tr_in(kf_imp *I, kf_np *np, size_t i);
static inline bool kf_tr_has_in(kf_np *np, size_t i) { return i < np->n_input && np->input[i][0]; }

static inline const kf_type *kf_tr_ty(kf_imp *I, kf_vid v) { return kf_vtype(I->g, v); }
static inline kf_dtype kf_tr_dt(kf_imp *I, kf_vid v) { return (kf_dtype)kf_tr_ty(I, v)->dtype; }

static inline kf_vid kf_tr_op1(kf_imp *I, int op, kf_vid a) { return kf_imp_op(I, op, &a, 1, NULL, 0); }
static inline kf_vid kf_tr_op2(kf_imp *I, int op, kf_vid a, kf_vid b)
{
	kf_vid v[2] = {a, b};
	return kf_imp_op(I, op, v, 2, NULL, 0);
}
static inline kf_vid kf_tr_op3(kf_imp *I, int op, kf_vid a, kf_vid b, kf_vid c)
{
	kf_vid v[3] = {a, b, c};
	return kf_imp_op(I, op, v, 3, NULL, 0);
}
static inline kf_vid kf_tr_sc(kf_imp *I, double v, kf_vid like) { return kf_imp_scalar(I, v, kf_tr_dt(I, like)); }

/* reshape to `shape`: ONNX entries (0 copies, -1 infers) and symbolic dims. */
kf_vid kf_tr_reshape(kf_imp *I, kf_vid x, const int64_t *shape, int rank);
kf_vid kf_tr_reduce(kf_imp *I, int op, kf_vid x, const int64_t *axes, int n, bool keep);
kf_vid kf_tr_slice(kf_imp *I, kf_vid x, int64_t axis, int64_t start, int64_t end);
kf_vid kf_tr_transpose(kf_imp *I, kf_vid x, const int64_t *perm, int rank);
kf_vid kf_tr_concat(kf_imp *I, const kf_vid *v, int n, int64_t axis);
kf_vid kf_tr_cast(kf_imp *I, kf_vid x, kf_dtype to);
/* An error (-1) unless x's shape is static. */
int kf_tr_need_static(kf_imp *I, kf_vid x);

/* An op the importer has no translation for (opaque.c): an error saying
 * what it would need, or with allow_unsupported an `opaque @Op` node. */
int kf_imp_unsupported(kf_imp *I, kf_np *np);

/* ---- translators (of the table in translate.c): each writes its results
 * to out[] and returns how many, or -1 ---- */
#define KF_TR(name) int kf_tr_##name(kf_imp *I, kf_np *np, kf_vid *out, int op);
KF_TR(Reshape) KF_TR(Flatten) KF_TR(Squeeze) KF_TR(Expand) KF_TR(Slice) KF_TR(Shape)     /* layout.c */
KF_TR(ConstantOfShape) KF_TR(Range) KF_TR(Gather) KF_TR(Trilu)
KF_TR(Pad) KF_TR(Resize)                                                                   /* resize.c */
KF_TR(Einsum)                                                                              /* einsum.c */
#undef KF_TR

#endif
