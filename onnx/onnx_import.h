/* onnx_import.h: ONNX models in.
 *
 * kf_onnx_import translates an ONNX ModelProto (opset 7 to 21, default
 * domain) into a kfuse module: graph inputs that are not initializers become
 * graph arguments, initializers become constants (inline when small, else
 * `file("NAME.npy")` written to the weights directory), and every node maps
 * onto built-in ops with ONNX's semantics (broadcasting, negative axes,
 * keepdims, Gemm's alpha/beta/trans, Softmax's axis by opset, ...).  An op or
 * attribute kfuse cannot express is an error naming the node, the op and the
 * opset.  Errors go to the context with the model file named.
 */
#ifndef KF_ONNX_IMPORT_H
#define KF_ONNX_IMPORT_H
#include "kf.h"

typedef struct kf_onnx_opts {
	const char *weights_dir; /* where large initializers go; NULL: keep all inline */
	const char *weights_ref; /* how the .kf text names that directory (prefix of file("...")) */
	int64_t inline_max;      /* initializers up to this many elements stay inline (default 64) */
	bool allow_unsupported;  /* keep unknown ops as opaque `onnx_<Op>` nodes */
} kf_onnx_opts;

kf_module *kf_onnx_import(kf_ctx *c, const char *name, const void *buf, size_t len, const kf_onnx_opts *o);
/* path "-" reads stdin. */
kf_module *kf_onnx_import_file(kf_ctx *c, const char *path, const kf_onnx_opts *o);

/* Reads a serialized TensorProto (the test data sets' input_0.pb). */
int kf_onnx_read_tensor(kf_ctx *c, const char *path, kf_tensor *out);
/* The ONNX data type code as a kfuse dtype, -1 when kfuse has none. */
int kf_onnx_dtype(int32_t onnx_type);

#endif
