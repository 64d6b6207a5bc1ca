/* tr.h: what the node translators (translate.c, layout.c, resize.c,
 * einsum.c, compose.c, shapes.c, opaque.c, rnn.c) share beyond importer.h (whose
 * attr.c reads ONNX attributes and inputs).  Private to onnx/.
 *
 * Each translator builds kfuse ops through kf_imp_op, which infers their
 * types and folds them when their operands are constants, and returns
 * KF_NONE (after an error, or when an operand was KF_NONE): a chain of
 * builders needs no check between links, only at its end. */
#ifndef KF_ONNX_TR_H
#define KF_ONNX_TR_H
#include "importer.h"

typedef const Onnx__NodeProto kf_np;

/* ---- ONNX attributes (tr.c; attr.c has the plain readers) ---- */
/* ONNX floats are f32: the shortest decimal that reads back as that f32,
 * so that 0.35f prints as 0.35 rather than 0.3499999940395355. */
double kf_tr_f32(float f);
double kf_tr_float(kf_np *np, const char *name, double dflt);
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
kf_attr kf_tr_af(kf_imp *I, const char *k, double v);
kf_attr kf_tr_ab(kf_imp *I, const char *k, bool v);
kf_attr kf_tr_as(kf_imp *I, const char *k, const char *v);
/* A list of dims: static ones as ints, symbolic ones as their names. */
kf_attr kf_tr_dims(kf_imp *I, const char *k, kf_attrval *items, const int64_t *dims, int n);

/* ---- operands and ops ---- */
/* The value of a one-element inline constant (import.c); false otherwise. */
bool kf_imp_const_scalar(kf_imp *I, kf_vid v, double *out);
/* shape values (shapes.c) */
/* The shape value of v: tracked, or a constant int vector of at most
 * KF_SV_MAX elements (all known).  False when v is neither. */
bool kf_sv_of(kf_imp *I, kf_vid v, kf_sv *out);
/* After node np translated into out[0..nout): tracks the shape values its
 * outputs hold when its inputs hold shape values (Shape, Gather, Concat,
 * Unsqueeze, arithmetic, ...). */
void kf_sv_track(kf_imp *I, const Onnx__NodeProto *np, const kf_vid *out, int nout);
/* Every element of v's shape value when all are known: their count, the
 * values in out[] (symbolic dims as KF_SYM values) and sym[] telling them
 * from negative ints; -1 otherwise. */
int kf_sv_dims(kf_imp *I, kf_vid v, int64_t *out, bool *sym, int max);


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
/* The float type v[0..n) compute in, as PyTorch promotes: the widest (f16
 * and bf16 meet in f32); v[0]'s type where an operand is not a float.
 * Absent operands (KF_NONE) are passed over. */
kf_dtype kf_tr_float_join(kf_imp *I, const kf_vid *v, int n);
/* The type a normalisation or norm of x = v[0] (with parameters v[1..n))
 * computes in, as torch's kernels do: f32 where x is f16 or bf16
 * (statistics and a per-channel factor rounded to the low type shift whole
 * channels, squares overflow; y is rounded once), else kf_tr_float_join's. */
kf_dtype kf_tr_norm_type(kf_imp *I, const kf_vid *v, int n);
/* Operands of two float types, which ONNX forbids (one T) but PyTorch's
 * exporter writes where torch promoted at run time (a bf16 model's f32
 * mask added to its scores, F.normalize's f32 eps in a bf16 max): cast to
 * the type torch computes in, the wider one, or the tensor's own where the
 * other is 0-d.  0, or -1 when an operand is absent or a cast fails. */
int kf_tr_promote(kf_imp *I, kf_vid *a, kf_vid *b);
/* A per-channel parameter [C] as [C,1,...,1], to broadcast over an
 * [N,C,...] of that rank (other shapes as they are). */
kf_vid kf_tr_per_channel(kf_imp *I, kf_vid p, int rank);
/* iota {dtype, shape = dims, axis}: each element its index along axis. */
kf_vid kf_tr_iota(kf_imp *I, kf_dtype dt, const int64_t *dims, int rank, int axis);
/* An error (-1) unless x's shape is static. */
int kf_tr_need_static(kf_imp *I, kf_vid x);

/* An op the importer has no translation for (opaque.c): an error saying
 * what it would need, or with allow_unsupported an `opaque @Op` node. */
int kf_imp_unsupported(kf_imp *I, kf_np *np);

/* ---- translators (of the table in translate.c): each writes its results
 * to out[] and returns how many, or -1 ---- */
#define KF_TR(name) int kf_tr_##name(kf_imp *I, kf_np *np, kf_vid *out, int op);
KF_TR(Reshape) KF_TR(Flatten) KF_TR(Squeeze) KF_TR(Expand) KF_TR(Slice) KF_TR(Shape)     /* layout.c */
KF_TR(ConstantOfShape) KF_TR(Range) KF_TR(Gather) KF_TR(Trilu) KF_TR(GatherElements) KF_TR(Mod)
KF_TR(Pad) KF_TR(Resize)                                                                   /* resize.c */
KF_TR(Einsum)                                                                              /* einsum.c */
KF_TR(InstanceNormalization) KF_TR(ArgExtreme) KF_TR(CumSum) KF_TR(ScatterND) KF_TR(Tile)    /* compose.c */
KF_TR(DepthSpace) KF_TR(OneHot) KF_TR(ReduceProd)
#undef KF_TR

#endif
