/* infer.h: helpers shared by the op registry (ops.c) and the shape/dtype
 * functions of the built-in ops (infer.c, infer_shape.c, infer_index.c).  Private to the
 * registry; the verifier uses only kf.h, the type text helper and
 * kf_infer_types_only. */
#ifndef KF_INFER_H
#define KF_INFER_H
#include "kf_int.h"

/* One inference call: the node, its op's name for messages, where errors go. */
typedef struct kf_ic {
	kf_graph *g;
	kf_nid n;
	const char *op;
	char *err;
	size_t errlen;
} kf_ic;

static inline kf_ic kf_ic_make(kf_graph *g, kf_nid n, char *err, size_t errlen)
{
	kf_ic ic = {g, n, kf_op(g->ctx, kf_N(g, n)->op)->name, err, errlen};
	return ic;
}

/* Writes a message into ic->err and returns -1, so `return kf_ic_fail(...)`. */
int kf_ic_fail(kf_ic *ic, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static inline const kf_type *kf_ic_in(const kf_ic *ic, uint32_t i)
{
	return kf_vtype(ic->g, kf_in(ic->g, ic->n, i));
}
static inline uint32_t kf_ic_nin(const kf_ic *ic) { return kf_N(ic->g, ic->n)->nin; }

/* Text of a type / one dim, as the IR writes it, into a caller's buffer. */
typedef struct kf_tstr {
	char s[192];
} kf_tstr;
const char *kf_ops_tstr(const kf_ctx *c, const kf_type *t, kf_tstr *buf);
const char *kf_ops_dstr(const kf_ctx *c, int64_t d, kf_tstr *buf);

/* Attribute readers: false after writing an error when the attribute has the
 * wrong kind; the default when absent.  Ints accept bools and bools ints
 * (flags); floats accept ints. */
bool kf_ic_int(kf_ic *ic, const char *key, int64_t dflt, int64_t *out);
bool kf_ic_float(kf_ic *ic, const char *key, double dflt, double *out);
bool kf_ic_str(kf_ic *ic, const char *key, const char *dflt, const char **out);
/* A list of ints: *list NULL and *n 0 when absent (then *present is false). */
bool kf_ic_ints(kf_ic *ic, const char *key, const kf_attrval **list, uint32_t *n, bool *present);
/* A required attribute: false with "'op' needs attribute 'key'" when absent. */
bool kf_ic_need(kf_ic *ic, const char *key);
/* Normalises a possibly negative axis against rank; false with an error
 * naming `what` (an attribute name) when out of range. */
bool kf_ic_axis(kf_ic *ic, const char *what, int64_t axis, int rank, int *out);

/* Numpy broadcasting of the shapes of a and b into out (rank and dims; the
 * dtype is left to the caller).  False with an error when they do not
 * broadcast. */
bool kf_ic_broadcast(kf_ic *ic, const kf_type *a, const kf_type *b, kf_type *out);
/* a and b must have one dtype (no implicit promotion). */
bool kf_ic_same_dtype(kf_ic *ic, const kf_type *a, const kf_type *b);

/* Whether op's inference is a function of its operands' types and the
 * node's attributes alone (no constant payload, body or plugin code): then
 * two nodes of op with equal operand types and no attributes infer equal
 * types, which lets the verifier run it once per such combination. */
bool kf_infer_types_only(const kf_opinfo *op);

/* Inference functions of the ops in infer.c, infer_shape.c and infer_conv.c. */
int kf_infer_const(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen);
int kf_infer_reduce(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen);
int kf_infer_softmax(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen);
int kf_infer_layer_norm(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen);
int kf_infer_matmul(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen);
int kf_infer_gemm(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen);
int kf_infer_fusion(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen);
int kf_infer_transpose(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen);
int kf_infer_reshape(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen);
int kf_infer_broadcast_to(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen);
int kf_infer_concat(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen);
int kf_infer_slice(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen);
int kf_infer_split(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen);
/* infer_index.c */
int kf_infer_gather(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen);
int kf_infer_gather_elements(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen);
int kf_infer_pad(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen);
int kf_infer_resize(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen);
int kf_infer_iota(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen);
int kf_infer_shape_of(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen);
int kf_infer_opaque(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen);
/* infer_conv.c: conv, conv_transpose, and max_pool / avg_pool (one function) */
int kf_infer_conv(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen);
int kf_infer_conv_transpose(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen);
int kf_infer_pool(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen);

#endif
