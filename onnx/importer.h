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
kf_vid kf_imp_op(kf_imp *I, int op, const kf_vid *in, int nin, const kf_attr *a, int na);
kf_vid kf_imp_scalar(kf_imp *I, double v, kf_dtype dt);
kf_vid kf_imp_splat(kf_imp *I, double v, kf_dtype dt, int rank, const int64_t *dims);
kf_vid kf_imp_tensor_const(kf_imp *I, const kf_tensor *t, const char *name);
int kf_imp_const_ints(kf_imp *I, kf_vid v, int64_t *out, int max);
/* The value of a one-element constant (inline); false otherwise. */
bool kf_imp_const_scalar(kf_imp *I, kf_vid v, double *out);
/* ONNX LSTM and GRU, unrolled into primitive ops (rnn.c); translate.c's
 * table calls them.  Return the number of outputs or -1. */
int kf_imp_lstm(kf_imp *I, const Onnx__NodeProto *np, kf_vid *out, int op);
int kf_imp_gru(kf_imp *I, const Onnx__NodeProto *np, kf_vid *out, int op);
/* Translates one node; binds its outputs. */
int kf_imp_translate(kf_imp *I, const Onnx__NodeProto *np);
/* ---- shape values (shapes.c) ---- */
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

/* The declared type of a graph value (input, output or value_info). */
int kf_imp_value_type(kf_imp *I, const Onnx__ValueInfoProto *vi, kf_type *t);

#endif
