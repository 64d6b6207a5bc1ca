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
/* Messages nested deeper than this are refused before unpacking (protobuf-c
 * recurses per level); a model is 1, its graph 2, a node 3, an attribute 4,
 * so it allows about 30 levels of subgraphs. */
#define KF_ONNX_MAX_DEPTH 100
/* Unpacks a message of descriptor d (what names it in errors) after the
 * depth pre-scan, allocating within the memory budget: NULL with an error
 * at src.  Free with kf_onnx_unpack_free (unpack.c). */
ProtobufCMessage *kf_onnx_unpack(kf_ctx *c, kf_srcid src, const ProtobufCMessageDescriptor *d, const void *buf,
				 size_t len, const char *what);
void kf_onnx_unpack_free(ProtobufCMessage *m);
/* Reads a whole file; the source added names it in errors. */
int kf_onnx_read_file(kf_ctx *c, const char *path, kf_srcid *src, char **buf, size_t *len);

#endif
