/* tensor_pb.h: the importer's internal helpers for TensorProto and files. */
#ifndef KF_TENSOR_PB_H
#define KF_TENSOR_PB_H
#include "kf.h"
#include "onnx.pb-c.h"

/* Protobuf messages are limited to 2 GiB; larger files and buffers are refused. */
#define KF_ONNX_MAX_BYTES INT32_MAX

/* A TensorProto as a tensor; dir is the model's directory, where external
 * data lives (NULL: refused).  -1 with why in err. */
int kf_onnx_tensor(const Onnx__TensorProto *tp, const char *dir, kf_tensor *out, char *err, size_t errlen);
const char *kf_onnx_dtype_name(int32_t t);
/* Reads a whole file; the source added names it in errors. */
int kf_onnx_read_file(kf_ctx *c, const char *path, kf_srcid *src, char **buf, size_t *len);

#endif
