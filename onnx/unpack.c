/* unpack.c: unpacking a serialized ModelProto or TensorProto within limits.
 *
 * protobuf-c's unpacker recurses once per nested message and has no limit:
 * a 122 KB model whose subgraphs nest 3000 deep overflowed the stack.  So a
 * pre-scan walks the wire format first, with the message's descriptor (the
 * schema protoc-c generated from onnx.proto), following exactly the fields
 * that hold messages, and refuses nesting deeper than KF_ONNX_MAX_DEPTH.  It
 * reads each byte once, at its innermost message, so it is linear, and its
 * own recursion is bounded by the same limit.  What it does not judge (a bad
 * tag, a truncated field) it leaves to protobuf-c, which reports it.
 *
 * protobuf-c then allocates through an allocator that charges the memory
 * budget (kf_mem_reserve): a small file claiming a huge repeated field or
 * blob fails with a message naming the budget, not by taking the machine's
 * memory.
 */
#include <stdlib.h>
#include <string.h>

#include "tensor_pb.h"

/* ---- the depth pre-scan --------------------------------------------------------- */

typedef enum { SCAN_OK, SCAN_BAD, SCAN_DEEP } scan_rc;

static bool varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	*v = 0;
	for (int shift = 0; shift < 64; shift += 7) {
		if (*p >= end)
			return false;
		uint8_t b = *(*p)++;
		*v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return true;
	}
	return false;
}

static scan_rc scan(const uint8_t *p, const uint8_t *end, const ProtobufCMessageDescriptor *d, int depth)
{
	if (depth > KF_ONNX_MAX_DEPTH)
		return SCAN_DEEP;
	while (p < end) {
		uint64_t key, n;
		if (!varint(&p, end, &key))
			return SCAN_BAD;
		switch (key & 7) {
		case 0: /* varint */
			if (!varint(&p, end, &n))
				return SCAN_BAD;
			break;
		case 1: /* 64-bit */
			if (end - p < 8)
				return SCAN_BAD;
			p += 8;
			break;
		case 5: /* 32-bit */
			if (end - p < 4)
				return SCAN_BAD;
			p += 4;
			break;
		case 2: { /* length-delimited: a message when the schema says so */
			if (!varint(&p, end, &n) || n > (uint64_t)(end - p))
				return SCAN_BAD;
			const ProtobufCFieldDescriptor *f =
				key >> 3 <= UINT32_MAX ? protobuf_c_message_descriptor_get_field(d, (unsigned)(key >> 3)) : NULL;
			if (f && f->type == PROTOBUF_C_TYPE_MESSAGE) {
				scan_rc r = scan(p, p + n, f->descriptor, depth + 1);
				if (r != SCAN_OK)
					return r;
			}
			p += n;
			break;
		}
		default: /* groups (3, 4) and the rest: not in onnx.proto */
			return SCAN_BAD;
		}
	}
	return SCAN_OK;
}

/* ---- an allocator that charges the memory budget ------------------------------------ */

typedef struct budget_alloc {
	ProtobufCAllocator a;
	char why[200]; /* why a request was refused ("" if none), said when it was */
} budget_alloc;

#define HDR 16 /* the block's size, kept before it; keeps malloc's alignment */

static void *pb_alloc(void *ud, size_t n)
{
	budget_alloc *b = ud;
	if (n > SIZE_MAX - HDR || !kf_mem_reserve(n + HDR)) {
		kf_mem_why(b->why, sizeof b->why, n);
		return NULL;
	}
	char *p = kf_try_malloc(n + HDR);
	if (!p) {
		kf_mem_release(n + HDR);
		return NULL;
	}
	memcpy(p, &n, sizeof n);
	return p + HDR;
}

static void pb_free(void *ud, void *q)
{
	(void)ud;
	if (!q)
		return;
	char *p = (char *)q - HDR;
	size_t n;
	memcpy(&n, p, sizeof n);
	kf_mem_release(n + HDR);
	free(p);
}

static ProtobufCAllocator budget_allocator = {pb_alloc, pb_free, NULL};

ProtobufCMessage *kf_onnx_unpack(kf_ctx *c, kf_srcid src, const ProtobufCMessageDescriptor *d, const void *buf,
				 size_t len, const char *what)
{
	if (len > KF_ONNX_MAX_BYTES) {
		kf_error(c, (kf_loc){src, 0}, "%s too large (%zu bytes; protobuf's limit is 2 GiB)", what, len);
		return NULL;
	}
	const uint8_t *p = buf;
	scan_rc r = scan(p, p + len, d, 1);
	if (r == SCAN_DEEP) {
		kf_error(c, (kf_loc){src, 0}, "not a valid %s: messages nested deeper than %d (subgraphs within "
			 "subgraphs?)", what, KF_ONNX_MAX_DEPTH);
		return NULL;
	}
	budget_alloc b = {budget_allocator, ""};
	b.a.allocator_data = &b;
	ProtobufCMessage *m = r == SCAN_OK ? protobuf_c_message_unpack(d, &b.a, len, p) : NULL;
	if (!m && b.why[0]) {
		kf_error(c, (kf_loc){src, 0}, "cannot unpack the %s: %s", what, b.why);
	} else if (!m) {
		kf_error(c, (kf_loc){src, 0}, "not a valid %s (the protobuf does not parse)", what);
	}
	return m;
}

void kf_onnx_unpack_free(ProtobufCMessage *m)
{
	if (m)
		protobuf_c_message_free_unpacked(m, &budget_allocator);
}
