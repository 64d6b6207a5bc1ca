/* importer.h: state and helpers shared by import.c and translate.c. */
#ifndef KF_IMPORTER_H
#define KF_IMPORTER_H
#include "onnx_import.h"
#include "tensor_pb.h"

/* A small integer vector (or scalar) whose elements may be symbolic dims:
 * what Shape and the shape arithmetic after it compute (shapes.c).  It is
 * tracked beside the graph values that compute it at run time, so that
 * Reshape, Expand, Slice, Range and ConstantOfShape can take their sizes
 * from it at compile time; the values it stood for die as dead code. */
#define KF_SV_MAX KF_MAX_RANK
typedef struct kf_sv {
	bool set;
	uint8_t n, rank;     /* elements; rank 0 (a scalar) or 1 */
	uint16_t sym, known; /* bit i: e[i] is a symbolic dim; e[i] is known */
	int64_t e[KF_SV_MAX];
} kf_sv;

typedef struct kf_imp {
	kf_ctx *c;
	kf_graph *g;
	kf_srcid src;        /* the model file, for errors */
	kf_onnx_opts o;
	int64_t opset;       /* of the default domain */
	const Onnx__GraphProto *gp;
	const Onnx__NodeProto *node; /* being translated, for errors */
	uint32_t *map;       /* interned ONNX name -> value + 1 */
	uint32_t nmap;
	uint8_t *wused;      /* interned .npy file name -> written by this import */
	uint32_t nwused;
	kf_tid scalar_f32;   /* placeholder type until inference runs */
	kf_sv *sv;           /* by value id: shape values (shapes.c) */
	uint32_t nsv;
	char dir[4096];      /* the model's directory, for external data */
	bool failed;
} kf_imp;

int kf_imp_fail(kf_imp *I, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
kf_vid kf_imp_lookup(kf_imp *I, const char *name);
void kf_imp_bind(kf_imp *I, const char *name, kf_vid v);
/* A node of op over in[], typed by inference (folded when its operands are
 * constants); its results in res[].  -1 after an error. */
int kf_imp_node(kf_imp *I, int op, const kf_vid *in, int nin, const kf_attr *a, int na, int nres, kf_vid *res);
/* The most results a node, operands a Concat and sizes a Split may have
 * (torch.split(x, 1) of a 100-step sequence, and its torch.stack, pass 64) */
#define KF_IMP_MAX_LIST 4096
kf_vid kf_imp_op(kf_imp *I, int op, const kf_vid *in, int nin, const kf_attr *a, int na);
kf_vid kf_imp_scalar(kf_imp *I, double v, kf_dtype dt);
kf_vid kf_imp_splat(kf_imp *I, double v, kf_dtype dt, int rank, const int64_t *dims);
kf_vid kf_imp_tensor_const(kf_imp *I, const kf_tensor *t, const char *name);
int kf_imp_const_ints(kf_imp *I, kf_vid v, int64_t *out, int max);
/* An ONNX node's attributes and inputs (attr.c): the attribute or NULL;
 * an int (dflt when absent); an int list into out (its length, or -1 when
 * absent or longer than max); a string into out (truncated to cap - 1
 * bytes); input i or KF_NONE when absent or empty. */
const Onnx__AttributeProto *kf_imp_attr(const Onnx__NodeProto *np, const char *name);
int64_t kf_imp_attr_int(const Onnx__NodeProto *np, const char *name, int64_t dflt);
int kf_imp_attr_ints(const Onnx__NodeProto *np, const char *name, int64_t *out, int max);
void kf_imp_attr_str(const Onnx__NodeProto *np, const char *name, const char *dflt, char *out, size_t cap);
kf_vid kf_imp_input(kf_imp *I, const Onnx__NodeProto *np, size_t i);
/* kfuse attributes: an int; an int list whose items[n] must live until the
 * node copies it (kf_imp_op). */
kf_attr kf_imp_int_attr(kf_imp *I, const char *key, int64_t v);
kf_attr kf_imp_ints_attr(kf_imp *I, const char *key, kf_attrval *items, const int64_t *v, int n);
/* ONNX LSTM, GRU and RNN, unrolled into primitive ops (rnn.c); translate.c's
 * table calls them.  Return the number of outputs or -1. */
int kf_imp_lstm(kf_imp *I, const Onnx__NodeProto *np, kf_vid *out, int op);
int kf_imp_gru(kf_imp *I, const Onnx__NodeProto *np, kf_vid *out, int op);
/* Conv, ConvTranspose, MaxPool and AveragePool, GlobalAveragePool and
 * GlobalMaxPool (op: 1 for max) (conv.c). */
int kf_imp_conv(kf_imp *I, const Onnx__NodeProto *np, kf_vid *out, int op);
int kf_imp_conv_transpose(kf_imp *I, const Onnx__NodeProto *np, kf_vid *out, int op);
int kf_imp_pool(kf_imp *I, const Onnx__NodeProto *np, kf_vid *out, int op);
int kf_imp_global_pool(kf_imp *I, const Onnx__NodeProto *np, kf_vid *out, int op);
int kf_imp_rnn(kf_imp *I, const Onnx__NodeProto *np, kf_vid *out, int op);
/* Translates one node; binds its outputs. */
int kf_imp_translate(kf_imp *I, const Onnx__NodeProto *np);
/* The declared type of a graph value (input, output or value_info). */
int kf_imp_value_type(kf_imp *I, const Onnx__ValueInfoProto *vi, kf_type *t);

#endif
