/* tensor_pb.c: ONNX TensorProto <-> kf_tensor, and reading the .pb files of
 * the ONNX test data sets.  Data comes from raw_data (little endian) or from
 * the typed repeated fields, as the proto documents for each type. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "onnx.pb-c.h"
#include "onnx_import.h"
#include "tensor.h"
#include "tensor_pb.h"

int kf_onnx_dtype(int32_t t)
{
	switch (t) {
	case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: return KF_F32;
	case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16: return KF_F16;
	case ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16: return KF_BF16;
	case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: return KF_F64;
	case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL: return KF_I1;
	case ONNX__TENSOR_PROTO__DATA_TYPE__INT8: return KF_I8;
	case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: return KF_I32;
	case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: return KF_I64;
	}
	return -1;
}

const char *kf_onnx_dtype_name(int32_t t)
{
	static const char *names[] = {"UNDEFINED", "FLOAT", "UINT8", "INT8", "UINT16", "INT16", "INT32",
				      "INT64", "STRING", "BOOL", "FLOAT16", "DOUBLE", "UINT32", "UINT64",
				      "COMPLEX64", "COMPLEX128", "BFLOAT16"};
	return t >= 0 && t < (int32_t)(sizeof names / sizeof *names) ? names[t] : "an unknown type";
}

/* The bytes of an external-data tensor: `location` (relative to the
 * model's directory, inside it), `offset` and `length`, as onnx's
 * save_model(save_as_external_data = True) writes them. */
static int external(const Onnx__TensorProto *tp, const char *dir, kf_dtype dt, int64_t n, kf_tensor *out,
		    char *err, size_t errlen)
{
	const char *loc = NULL, *name = tp->name ? tp->name : "";
	long long off = 0, len = -1;
	size_t want = (size_t)n * kf_dtype_size(dt);
	for (size_t i = 0; i < tp->n_external_data; i++) {
		const Onnx__StringStringEntryProto *e = tp->external_data[i];
		if (!e->key || !e->value)
			continue;
		if (!strcmp(e->key, "location"))
			loc = e->value;
		else if (!strcmp(e->key, "offset"))
			off = strtoll(e->value, NULL, 10);
		else if (!strcmp(e->key, "length"))
			len = strtoll(e->value, NULL, 10);
	}
	if (!dir) {
		snprintf(err, errlen, "tensor '%s' keeps its data in an external file, which is read only for a model "
				      "loaded from a file", name);
		return -1;
	}
	/* the data must sit beside the model: no absolute path, no way up */
	if (!loc || !*loc || loc[0] == '/' || strstr(loc, "..")) {
		snprintf(err, errlen, "tensor '%s' has external data at '%s', which is not a file inside the model's "
				      "directory", name, loc ? loc : "");
		return -1;
	}
	if (off < 0 || (len >= 0 && (size_t)len != want)) {
		snprintf(err, errlen, "tensor '%s' has external data of %lld bytes at offset %lld, its shape needs %zu",
			 name, len, off, want);
		return -1;
	}
	char path[8192];
	snprintf(path, sizeof path, "%s/%s", dir, loc);
	FILE *f = fopen(path, "rb");
	struct stat st;
	if (!f || fstat(fileno(f), &st) != 0) {
		snprintf(err, errlen, "tensor '%s': cannot open its external data %s: %s", name, path, strerror(errno));
		if (f)
			fclose(f);
		return -1;
	}
	/* the file must hold the bytes before anything is allocated for them */
	if (st.st_size < off || (size_t)(st.st_size - off) < want) {
		fclose(f);
		snprintf(err, errlen, "tensor '%s': %s holds %lld bytes, the data needs %zu at offset %lld", name, path,
			 (long long)st.st_size, want, off);
		return -1;
	}
	if (kf_tensor_alloc(out, dt, (int)tp->n_dims, tp->dims) < 0) {
		fclose(f);
		snprintf(err, errlen, "tensor '%s' is too large", name);
		return -1;
	}
	size_t got = want && fseek(f, off, SEEK_SET) == 0 ? fread(out->data, 1, want, f) : 0;
	fclose(f);
	if (got != want) {
		kf_tensor_free(out);
		snprintf(err, errlen, "tensor '%s': read error in %s", name, path);
		return -1;
	}
	return 0;
}

/* Fills out from a TensorProto; on failure writes why into err.  dir is the
 * model's directory (external data), or NULL. */
int kf_onnx_tensor(const Onnx__TensorProto *tp, const char *dir, kf_tensor *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof *out);
	int dt = kf_onnx_dtype(tp->data_type);
	if (dt < 0) {
		snprintf(err, errlen, "tensor '%s' has data type %s, which kfuse does not support",
			 tp->name ? tp->name : "", kf_onnx_dtype_name(tp->data_type));
		return -1;
	}
	bool ext = tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
	if (tp->n_dims > KF_MAX_RANK) {
		snprintf(err, errlen, "tensor '%s' has rank %zu (kfuse supports up to %d)", tp->name ? tp->name : "",
			 tp->n_dims, KF_MAX_RANK);
		return -1;
	}
	for (size_t i = 0; i < tp->n_dims; i++)
		if (tp->dims[i] < 0) {
			snprintf(err, errlen, "tensor '%s' has a negative dim", tp->name ? tp->name : "");
			return -1;
		}
	/* the element count the shape claims, checked against the data the
	 * proto holds before anything is allocated (a few bytes must not make
	 * us allocate gigabytes) */
	int64_t n = 1;
	for (size_t i = 0; i < tp->n_dims; i++) {
		if (tp->dims[i] && n > ((int64_t)1 << 48) / tp->dims[i]) {
			snprintf(err, errlen, "tensor '%s' is too large", tp->name ? tp->name : "");
			return -1;
		}
		n *= tp->dims[i];
	}
	size_t esz = kf_dtype_size((kf_dtype)dt);
	if (ext)
		return external(tp, dir, (kf_dtype)dt, n, out, err, errlen);
	size_t have = tp->has_raw_data ? tp->raw_data.len / esz
		    : dt == KF_F32 ? tp->n_float_data : dt == KF_F64 ? tp->n_double_data
		    : dt == KF_I64 ? tp->n_int64_data : tp->n_int32_data;
	if ((tp->has_raw_data && tp->raw_data.len != (size_t)n * esz) || (!tp->has_raw_data && have != (size_t)n)) {
		if (tp->has_raw_data)
			snprintf(err, errlen, "tensor '%s' has %zu bytes of data, its shape needs %zu",
				 tp->name ? tp->name : "", tp->raw_data.len, (size_t)n * esz);
		else
			snprintf(err, errlen, "tensor '%s' has %zu values, its shape needs %lld",
				 tp->name ? tp->name : "", have, (long long)n);
		return -1;
	}
	if (kf_tensor_alloc(out, (kf_dtype)dt, (int)tp->n_dims, tp->dims) < 0) {
		snprintf(err, errlen, "tensor '%s' is too large", tp->name ? tp->name : "");
		return -1;
	}
	if (tp->has_raw_data) {
		if (n)
			memcpy(out->data, tp->raw_data.data, (size_t)n * esz);
		return 0;
	}
	/* typed fields: floats in float_data, f64 in double_data, i64 in
	 * int64_data, and every narrower type (f16/bf16 as bit patterns) in int32_data */
	for (int64_t i = 0; i < n; i++) {
		switch (dt) {
		case KF_F32: ((float *)out->data)[i] = tp->float_data[i]; break;
		case KF_F64: ((double *)out->data)[i] = tp->double_data[i]; break;
		case KF_I64: ((int64_t *)out->data)[i] = tp->int64_data[i]; break;
		case KF_F16: case KF_BF16: ((uint16_t *)out->data)[i] = (uint16_t)tp->int32_data[i]; break;
		case KF_I32: ((int32_t *)out->data)[i] = tp->int32_data[i]; break;
		default: ((int8_t *)out->data)[i] = (int8_t)(dt == KF_I1 ? tp->int32_data[i] != 0 : tp->int32_data[i]);
		}
	}
	return 0;
}

/* The whole file ("-": stdin), at most KF_ONNX_MAX_BYTES. */
static int read_whole(kf_ctx *c, const char *path, kf_srcid src, char **buf, size_t *len)
{
	bool in = !strcmp(path, "-");
	FILE *f = in ? stdin : fopen(path, "rb");
	if (!f) {
		kf_error(c, (kf_loc){src, 0}, "cannot open: %s", strerror(errno));
		return -1;
	}
	/* protobuf messages are limited to 2 GiB: refuse larger before reading */
	struct stat st;
	if (!in && fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > KF_ONNX_MAX_BYTES) {
		fclose(f);
		kf_error(c, (kf_loc){src, 0}, "file too large (%lld bytes; protobuf's limit is 2 GiB)",
			 (long long)st.st_size);
		return -1;
	}
	size_t cap = 1 << 16, n = 0;
	char *p = malloc(cap), *q;
	size_t k;
	bool big = false;
	while (p && (k = fread(p + n, 1, cap - n, f)) > 0) {
		n += k;
		/* a pipe has no size to check first: stop at the limit */
		if (n > (size_t)KF_ONNX_MAX_BYTES) {
			big = true;
			break;
		}
		if (n == cap) {
			q = realloc(p, cap *= 2);
			if (!q)
				free(p);
			p = q;
		}
	}
	int bad = ferror(f);
	if (!in)
		fclose(f);
	if (!p || bad || big) {
		free(p);
		kf_error(c, (kf_loc){src, 0}, big ? "input too large (protobuf's limit is 2 GiB)"
						  : !p ? "out of memory reading the model" : "read error");
		return -1;
	}
	*buf = p;
	*len = n;
	return 0;
}

int kf_onnx_read_file(kf_ctx *c, const char *path, kf_srcid *src, char **buf, size_t *len)
{
	*src = kf_source_add(c, strcmp(path, "-") ? path : "<stdin>", NULL, 0);
	return read_whole(c, path, *src, buf, len);
}

int kf_onnx_read_tensor(kf_ctx *c, const char *path, kf_tensor *out, char *name, size_t cap)
{
	kf_srcid src;
	char *buf;
	size_t len;
	memset(out, 0, sizeof *out);
	if (kf_onnx_read_file(c, path, &src, &buf, &len) < 0)
		return -1;
	Onnx__TensorProto *tp = onnx__tensor_proto__unpack(NULL, len, (const uint8_t *)buf);
	free(buf);
	if (!tp) {
		kf_error(c, (kf_loc){src, 0}, "not a valid serialized ONNX TensorProto");
		return -1;
	}
	char err[512];
	int rc = kf_onnx_tensor(tp, NULL, out, err, sizeof err);
	if (name && cap)
		snprintf(name, cap, "%s", tp->name ? tp->name : "");
	if (rc < 0)
		kf_error(c, (kf_loc){src, 0}, "%s", err);
	onnx__tensor_proto__free_unpacked(tp, NULL);
	return rc;
}
