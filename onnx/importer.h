/* importer.h: state and helpers shared by import.c and translate.c. */
#ifndef KF_IMPORTER_H
#define KF_IMPORTER_H
#include "onnx_import.h"
#include "tensor_pb.h"

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
	bool failed;
} kf_imp;

int kf_imp_fail(kf_imp *I, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
kf_vid kf_imp_lookup(kf_imp *I, const char *name);
void kf_imp_bind(kf_imp *I, const char *name, kf_vid v);
/* A node of op over in[], typed by inference (folded when its operands are
 * constants); its results in res[].  -1 after an error. */
int kf_imp_node(kf_imp *I, int op, const kf_vid *in, int nin, const kf_attr *a, int na, int nres, kf_vid *res);
kf_vid kf_imp_op(kf_imp *I, int op, const kf_vid *in, int nin, const kf_attr *a, int na);
kf_vid kf_imp_scalar(kf_imp *I, double v, kf_dtype dt);
kf_vid kf_imp_splat(kf_imp *I, double v, kf_dtype dt, int rank, const int64_t *dims);
kf_vid kf_imp_tensor_const(kf_imp *I, const kf_tensor *t, const char *name);
int kf_imp_const_ints(kf_imp *I, kf_vid v, int64_t *out, int max);
/* ONNX LSTM and GRU, unrolled into primitive ops (rnn.c); translate.c's
 * table calls them.  Return the number of outputs or -1. */
int kf_imp_lstm(kf_imp *I, const Onnx__NodeProto *np, kf_vid *out, int op);
int kf_imp_gru(kf_imp *I, const Onnx__NodeProto *np, kf_vid *out, int op);
/* Translates one node; binds its outputs. */
int kf_imp_translate(kf_imp *I, const Onnx__NodeProto *np);
/* The declared type of a graph value (input, output or value_info). */
int kf_imp_value_type(kf_imp *I, const Onnx__ValueInfoProto *vi, kf_type *t);

#endif
