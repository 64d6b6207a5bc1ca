/* onnx_import.h: ONNX models in.
 *
 * kf_onnx_import translates an ONNX ModelProto (opset 7 to 21, default
 * domain) into a kfuse module: graph inputs that are not initializers become
 * graph arguments, initializers become constants (inline when small, else
 * `file("NAME.npy")` written to the weights directory), and every node maps
 * onto built-in ops with ONNX's semantics (broadcasting, negative axes,
 * keepdims, Gemm's alpha/beta/trans, Softmax's axis by opset, ...).  Shapes
 * computed from dynamic axes are carried as symbolic dims (f32[B,T,768]).
 * An op or attribute kfuse cannot express is an error naming the node, the
 * op, the opset and what it would need; with allow_unsupported the op is
 * kept as `opaque @Op` instead.  External data files are read from the
 * model's directory (kf_onnx_import_file).  Errors go to the context with
 * the model file named.
 */
#ifndef KF_ONNX_IMPORT_H
#define KF_ONNX_IMPORT_H
#include "kf.h"

/* A graph input frozen as a constant (--bind NAME=FILE.npy): the node
 * tests that pass axes or shapes as inputs, or a model specialised to one
 * input. */
typedef struct kf_onnx_bind {
	const char *name;
	const kf_tensor *value; /* borrowed for the import */
} kf_onnx_bind;

typedef struct kf_onnx_opts {
	const char *weights_dir; /* where large initializers go; NULL: keep all inline */
	const char *weights_ref; /* how the .kf text names that directory (prefix of file("...")) */
	int64_t inline_max;      /* initializers up to this many elements stay inline (default 64) */
	bool allow_unsupported;  /* keep unknown ops as `opaque @Op` nodes with their attributes */
	const kf_onnx_bind *bind; /* graph inputs made constants; each name must be an input */
	int nbind;
} kf_onnx_opts;

kf_module *kf_onnx_import(kf_ctx *c, const char *name, const void *buf, size_t len, const kf_onnx_opts *o);
/* path "-" reads stdin. */
kf_module *kf_onnx_import_file(kf_ctx *c, const char *path, const kf_onnx_opts *o);

/* Reads a serialized TensorProto (the test data sets' input_0.pb); its
 * name into name[cap] when name is not NULL. */
int kf_onnx_read_tensor(kf_ctx *c, const char *path, kf_tensor *out, char *name, size_t cap);
/* The ONNX data type code as a kfuse dtype, -1 when kfuse has none. */
int kf_onnx_dtype(int32_t onnx_type);

#endif
