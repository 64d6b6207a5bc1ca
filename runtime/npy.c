/* npy.c: the numpy .npy format, versions 1.0, 2.0 and 3.0.
 *
 * Layout: "\x93NUMPY", major, minor, header length (u16 LE for 1.x, u32 LE
 * for 2.x and 3.x), then a Python dict literal
 *     {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
 * padded with spaces and a '\n', then the raw data.  We parse the literal
 * ourselves (never evaluate it) and accept only what numpy writes for plain
 * arrays; anything else is an error naming the file and what was wrong.
 * The host is assumed little endian, as kf_tensor is.
 */
#include "npy.h"
#include "tensor.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NPY_MAGIC "\x93NUMPY"
#define NPY_SUPPORTED "f16 f32 f64 bool i8 i32 i64 and bf16 as '|V2'"

typedef struct npy_hdr {
	kf_dtype dtype;
	int rank;
	int64_t dim[KF_MAX_RANK];
	size_t data_off; /* bytes from the start of the file */
	uint64_t data_len;
} npy_hdr;

/* A cursor over the header text; err is set on the first problem. */
typedef struct hp {
	const char *p, *end;
	char err[160];
} hp;

static void hp_ws(hp *h)
{
	while (h->p < h->end && (*h->p == ' ' || *h->p == '\t' || *h->p == '\n' || *h->p == '\r'))
		h->p++;
}

static bool hp_eat(hp *h, char ch)
{
	hp_ws(h);
	if (h->p < h->end && *h->p == ch) {
		h->p++;
		return true;
	}
	return false;
}

/* A Python string literal in ' or " quotes, without escapes (numpy's keys and
 * descrs have none). */
static bool hp_str(hp *h, char *out, size_t max)
{
	hp_ws(h);
	if (h->p >= h->end || (*h->p != '\'' && *h->p != '"'))
		return false;
	char q = *h->p++;
	size_t n = 0;
	while (h->p < h->end && *h->p != q) {
		if (*h->p == '\\' || n + 1 >= max)
			return false;
		out[n++] = *h->p++;
	}
	if (h->p >= h->end)
		return false;
	h->p++;
	out[n] = 0;
	return true;
}

static bool hp_word(hp *h, const char *w)
{
	size_t n = strlen(w);
	hp_ws(h);
	if ((size_t)(h->end - h->p) >= n && memcmp(h->p, w, n) == 0) {
		h->p += n;
		return true;
	}
	return false;
}

/* A tuple of non-negative ints: (), (3,), (2, 3).  Python 2 wrote 3L. */
static bool hp_shape(hp *h, npy_hdr *out)
{
	if (!hp_eat(h, '(')) {
		snprintf(h->err, sizeof h->err, "'shape' is not a tuple");
		return false;
	}
	out->rank = 0;
	for (;;) {
		if (hp_eat(h, ')'))
			return true;
		hp_ws(h);
		if (h->p >= h->end || *h->p < '0' || *h->p > '9') {
			snprintf(h->err, sizeof h->err, "'shape' holds something other than non-negative integers");
			return false;
		}
		uint64_t v = 0;
		while (h->p < h->end && *h->p >= '0' && *h->p <= '9') {
			if (v > (UINT64_C(1) << 62)) {
				snprintf(h->err, sizeof h->err, "shape dimension is too large");
				return false;
			}
			v = v * 10 + (uint64_t)(*h->p++ - '0');
		}
		if (h->p < h->end && (*h->p == 'L' || *h->p == 'l'))
			h->p++;
		if (out->rank == KF_MAX_RANK) {
			snprintf(h->err, sizeof h->err, "rank exceeds kfuse's maximum of %d", KF_MAX_RANK);
			return false;
		}
		if (v > (UINT64_C(1) << 62)) {
			snprintf(h->err, sizeof h->err, "shape dimension is too large");
			return false;
		}
		out->dim[out->rank++] = (int64_t)v;
		if (!hp_eat(h, ',') && !(hp_ws(h), h->p < h->end && *h->p == ')')) {
			snprintf(h->err, sizeof h->err, "malformed 'shape' tuple");
			return false;
		}
	}
}

/* Maps a numpy descr to a dtype, or explains why not. */
static bool descr_dtype(const char *d, kf_dtype *dt, char *err, size_t errlen)
{
	static const struct { const char *code; kf_dtype dt; } tab[] = {
		{"f2", KF_F16}, {"f4", KF_F32}, {"f8", KF_F64}, {"b1", KF_I1},
		{"i1", KF_I8}, {"i4", KF_I32}, {"i8", KF_I64}, {"V2", KF_BF16},
	};
	if (strcmp(d, "bfloat16") == 0) {
		*dt = KF_BF16;
		return true;
	}
	char bo = d[0];
	if ((bo == '<' || bo == '>' || bo == '|' || bo == '=') && d[1]) {
		for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++) {
			if (strcmp(d + 1, tab[i].code) != 0)
				continue;
			/* Byte order means nothing for one-byte types and voids
			 * (numpy writes '|V2'; '<V2' is accepted too). */
			bool nobo = tab[i].code[1] == '1' || tab[i].code[0] == 'V';
			if (!nobo && bo == '>') {
				snprintf(err, errlen, "big-endian data ('%s') is not supported; "
					 "save it little-endian (arr.astype('<%s'))", d, tab[i].code);
				return false;
			}
			if ((nobo && bo != '>') || bo == '<') {
				*dt = tab[i].dt;
				return true;
			}
		}
		if (strcmp(d + 1, "O") == 0) {
			snprintf(err, errlen, "object arrays ('%s') are not supported (they hold pickled Python objects)", d);
			return false;
		}
	}
	snprintf(err, errlen, "unsupported dtype '%s' (kfuse reads " NPY_SUPPORTED ")", d);
	return false;
}

/* Parses the dict literal of hdrlen bytes at text. */
static bool parse_dict(hp *h, npy_hdr *out)
{
	bool have_descr = false, have_fo = false, have_shape = false;
	char key[32], val[64];

	if (!hp_eat(h, '{')) {
		snprintf(h->err, sizeof h->err, "malformed header: expected a '{' dictionary");
		return false;
	}
	while (!hp_eat(h, '}')) {
		if (!hp_str(h, key, sizeof key) || !hp_eat(h, ':')) {
			snprintf(h->err, sizeof h->err, "malformed header dictionary");
			return false;
		}
		if (strcmp(key, "descr") == 0) {
			hp_ws(h);
			if (h->p < h->end && *h->p == '[') {
				snprintf(h->err, sizeof h->err, "structured (record) dtypes are not supported");
				return false;
			}
			if (!hp_str(h, val, sizeof val)) {
				snprintf(h->err, sizeof h->err, "malformed 'descr' in header");
				return false;
			}
			if (!descr_dtype(val, &out->dtype, h->err, sizeof h->err))
				return false;
			have_descr = true;
		} else if (strcmp(key, "fortran_order") == 0) {
			if (hp_word(h, "True")) {
				snprintf(h->err, sizeof h->err, "Fortran-order arrays are not supported; "
					 "save a C-order copy (np.ascontiguousarray)");
				return false;
			}
			if (!hp_word(h, "False")) {
				snprintf(h->err, sizeof h->err, "malformed 'fortran_order' in header");
				return false;
			}
			have_fo = true;
		} else if (strcmp(key, "shape") == 0) {
			if (!hp_shape(h, out))
				return false;
			have_shape = true;
		} else {
			snprintf(h->err, sizeof h->err, "unexpected key '%s' in header", key);
			return false;
		}
		if (!hp_eat(h, ',')) {
			if (hp_eat(h, '}'))
				break;
			snprintf(h->err, sizeof h->err, "malformed header dictionary");
			return false;
		}
	}
	if (!have_descr || !have_fo || !have_shape) {
		snprintf(h->err, sizeof h->err, "header lacks '%s'",
			 !have_descr ? "descr" : !have_fo ? "fortran_order" : "shape");
		return false;
	}
	hp_ws(h);
	if (h->p != h->end) {
		snprintf(h->err, sizeof h->err, "junk after the header dictionary");
		return false;
	}
	return true;
}

/* Reads the preamble and header from the first len bytes of a file (len may
 * be short of the whole file).  need is set to the header's full length when
 * buf is too short to hold it.  Returns false with err set otherwise. */
static bool parse_header(const unsigned char *buf, size_t len, npy_hdr *out, size_t *need,
			 char *err, size_t errlen)
{
	*need = 0;
	memset(out, 0, sizeof *out);
	if (len < 8 || memcmp(buf, NPY_MAGIC, 6) != 0) {
		if (len >= 2 && buf[0] == 0x80 && buf[1] <= 5)
			snprintf(err, errlen, "not a .npy file (it looks like a Python pickle; kfuse reads no pickles)");
		else if (len >= 4 && memcmp(buf, "PK\x03\x04", 4) == 0)
			snprintf(err, errlen, "not a .npy file (it is a .npz zip archive; extract its arrays first)");
		else if (len < 8 && len > 0 && memcmp(buf, NPY_MAGIC, len < 6 ? len : 6) == 0)
			snprintf(err, errlen, "truncated .npy preamble (%zu bytes)", len);
		else
			snprintf(err, errlen, "not a .npy file (bad magic)");
		return false;
	}
	int major = buf[6], minor = buf[7];
	size_t lenbytes = major == 1 ? 2 : 4;
	if (major < 1 || major > 3 || minor != 0) {
		snprintf(err, errlen, "unsupported .npy format version %d.%d (kfuse reads 1.0, 2.0, 3.0)",
			 major, minor);
		return false;
	}
	if (len < 8 + lenbytes) {
		snprintf(err, errlen, "truncated .npy preamble (%zu bytes)", len);
		return false;
	}
	uint64_t hlen = buf[8] | (uint64_t)buf[9] << 8;
	if (lenbytes == 4)
		hlen |= (uint64_t)buf[10] << 16 | (uint64_t)buf[11] << 24;
	if (hlen > (1u << 24)) {
		snprintf(err, errlen, "header length %llu is implausibly large", (unsigned long long)hlen);
		return false;
	}
	size_t off = 8 + lenbytes + (size_t)hlen;
	if (len < off) {
		*need = off;
		snprintf(err, errlen, "truncated header (%llu bytes announced, %zu present)",
			 (unsigned long long)hlen, len - 8 - lenbytes);
		return false;
	}
	hp h = {(const char *)buf + 8 + lenbytes, (const char *)buf + off, ""};
	for (const char *q = h.p; q < h.end; q++) {
		/* 1.0 and 2.0 headers are latin-1, 3.0 utf-8; ours is pure ASCII,
		 * and a NUL means a damaged file. */
		if (*q == 0) {
			snprintf(err, errlen, "malformed header: it contains a NUL byte");
			return false;
		}
	}
	if (!parse_dict(&h, out)) {
		snprintf(err, errlen, "%s", h.err);
		return false;
	}
	uint64_t n = 1;
	for (int i = 0; i < out->rank; i++) {
		if (out->dim[i] && n > ((UINT64_C(1) << 48) / (uint64_t)out->dim[i])) {
			snprintf(err, errlen, "shape is too large (more than 2^48 elements)");
			return false;
		}
		n *= (uint64_t)out->dim[i];
	}
	out->data_off = off;
	out->data_len = n * kf_dtype_size(out->dtype);
	return true;
}

static int fail(kf_ctx *c, const char *name, const char *msg)
{
	kf_srcid s = kf_source_add(c, name, NULL, 0);
	kf_error(c, (kf_loc){s, 0}, "%s", msg);
	return -1;
}

/* Makes bools canonical (0/1): numpy treats any non-zero byte as True. */
static void canon_bool(kf_tensor *t)
{
	if (t->dtype != KF_I1)
		return;
	unsigned char *p = t->data;
	for (size_t i = 0; i < t->nbytes; i++)
		p[i] = p[i] != 0;
}

static int alloc_for(kf_ctx *c, const char *name, const npy_hdr *h, kf_tensor *out)
{
	if (kf_tensor_alloc(out, h->dtype, h->rank, h->dim) < 0) {
		char why[200], msg[256];
		kf_tensor_why(why, sizeof why, h->dtype, h->rank, h->dim);
		snprintf(msg, sizeof msg, "cannot allocate the array: %s", why);
		return fail(c, name, msg);
	}
	return 0;
}

int kf_npy_parse(kf_ctx *c, const char *name, const void *buf, size_t len, kf_tensor *out)
{
	npy_hdr h;
	size_t need;
	char err[256], msg[320];

	memset(out, 0, sizeof *out);
	if (!parse_header(buf, len, &h, &need, err, sizeof err))
		return fail(c, name, err);
	if (len - h.data_off < h.data_len) {
		snprintf(msg, sizeof msg, "truncated data: expected %llu bytes, found %zu",
			 (unsigned long long)h.data_len, len - h.data_off);
		return fail(c, name, msg);
	}
	if (len - h.data_off > h.data_len) {
		snprintf(msg, sizeof msg, "%zu unexpected bytes after the data",
			 (size_t)(len - h.data_off - h.data_len));
		return fail(c, name, msg);
	}
	if (alloc_for(c, name, &h, out) < 0)
		return -1;
	memcpy(out->data, (const char *)buf + h.data_off, h.data_len);
	canon_bool(out);
	return 0;
}

static int read_stream(kf_ctx *c, const char *path, FILE *f, kf_tensor *out);

int kf_npy_read(kf_ctx *c, const char *path, kf_tensor *out)
{
	char msg[320];
	memset(out, 0, sizeof *out);
	FILE *f = fopen(path, "rb");
	if (!f) {
		snprintf(msg, sizeof msg, "cannot open: %s", strerror(errno));
		return fail(c, path, msg);
	}
	return read_stream(c, path, f, out);
}

int kf_npy_read_regular(kf_ctx *c, const char *path, kf_tensor *out)
{
	char msg[320];
	memset(out, 0, sizeof *out);
	int e = 0, fd = kf_open_regular(path, &e);
	FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
	if (!f) {
		if (fd >= 0) {
			e = errno;
			close(fd);
		}
		snprintf(msg, sizeof msg, "cannot open: %s", kf_file_strerror(e));
		return fail(c, path, msg);
	}
	return read_stream(c, path, f, out);
}

/* Reads and closes f. */
static int read_stream(kf_ctx *c, const char *path, FILE *f, kf_tensor *out)
{
	char err[256], msg[320];
	npy_hdr h;
	size_t need, got;
	unsigned char small[4096], *hbuf = small;
	int rc = -1;

	/* Read the header first, then the data straight into the tensor, so a
	 * large weight file is not held twice. */
	got = fread(small, 1, sizeof small, f);
	if (!parse_header(small, got, &h, &need, err, sizeof err)) {
		if (!need || got < sizeof small) {
			fail(c, path, err);
			goto out;
		}
		hbuf = kf_try_malloc(need);
		if (!hbuf) {
			fail(c, path, "out of memory for the header");
			goto out;
		}
		memcpy(hbuf, small, got);
		got += fread(hbuf + got, 1, need - got, f);
		if (!parse_header(hbuf, got, &h, &need, err, sizeof err)) {
			fail(c, path, err);
			goto out;
		}
	}
	/* A header that promises more data than the file holds is refused
	 * before the array is allocated (it may claim terabytes). */
	struct stat st;
	if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) &&
	    (uint64_t)st.st_size - h.data_off < h.data_len) {
		snprintf(msg, sizeof msg, "truncated data: expected %llu bytes, found %llu",
			 (unsigned long long)h.data_len, (unsigned long long)st.st_size - h.data_off);
		fail(c, path, msg);
		goto out;
	}
	if (alloc_for(c, path, &h, out) < 0)
		goto out;
	/* The first read may already hold part (or all) of the data. */
	size_t have = got - h.data_off;
	if (have > h.data_len)
		have = h.data_len;
	memcpy(out->data, hbuf + h.data_off, have);
	size_t extra = got - h.data_off - have;
	if (have < h.data_len)
		have += fread((char *)out->data + have, 1, h.data_len - have, f);
	if (ferror(f)) {
		snprintf(msg, sizeof msg, "read error: %s", strerror(errno));
		fail(c, path, msg);
		goto out;
	}
	if (have < h.data_len) {
		snprintf(msg, sizeof msg, "truncated data: expected %llu bytes, found %zu",
			 (unsigned long long)h.data_len, have);
		fail(c, path, msg);
		goto out;
	}
	char probe[256];
	while ((got = fread(probe, 1, sizeof probe, f)) > 0)
		extra += got;
	if (extra) {
		snprintf(msg, sizeof msg, "%zu unexpected bytes after the data", extra);
		fail(c, path, msg);
		goto out;
	}
	canon_bool(out);
	rc = 0;
out:
	if (rc < 0)
		kf_tensor_free(out);
	if (hbuf != small)
		free(hbuf);
	fclose(f);
	return rc;
}

/* The preamble and header of t's .npy image. */
static void npy_header(const kf_tensor *t, kf_buf *out)
{
	static const char *const descr[KF_NDTYPE] = {
		[KF_F16] = "<f2", [KF_BF16] = "|V2", [KF_F32] = "<f4", [KF_F64] = "<f8",
		[KF_I1] = "|b1", [KF_I8] = "|i1", [KF_I32] = "<i4", [KF_I64] = "<i8",
	};
	kf_buf h = {0};
	kf_buf_printf(&h, "{'descr': '%s', 'fortran_order': False, 'shape': (",
		      t->dtype < KF_NDTYPE ? descr[t->dtype] : "?");
	for (int i = 0; i < t->rank; i++)
		kf_buf_printf(&h, "%lld,%s", (long long)t->dim[i], i + 1 < t->rank ? " " : "");
	/* numpy writes (3,) and (2, 3): a trailing comma only for rank 1. */
	if (t->rank > 1)
		h.n--;
	kf_buf_puts(&h, "), }");
	/* Pad with spaces to a multiple of 64 bytes, '\n' last, as numpy does
	 * so that the data is aligned when mapped. */
	size_t pre = h.n + 1 < 65536 - 10 ? 10 : 12;
	while ((pre + h.n + 1) % 64)
		kf_buf_putc(&h, ' ');
	kf_buf_putc(&h, '\n');
	kf_buf_put(out, NPY_MAGIC, 6);
	if (pre == 10) {
		unsigned char v[4] = {1, 0, (unsigned char)h.n, (unsigned char)(h.n >> 8)};
		kf_buf_put(out, (const char *)v, 4);
	} else {
		unsigned char v[6] = {2, 0, (unsigned char)h.n, (unsigned char)(h.n >> 8),
				      (unsigned char)(h.n >> 16), (unsigned char)(h.n >> 24)};
		kf_buf_put(out, (const char *)v, 6);
	}
	kf_buf_put(out, h.p, h.n);
	kf_buf_free(&h);
}

void kf_npy_serialize(const kf_tensor *t, kf_buf *out)
{
	npy_header(t, out);
	if (t->data)
		kf_buf_put(out, t->data, t->nbytes);
}

int kf_npy_write(kf_ctx *c, const char *path, const kf_tensor *t)
{
	char msg[320];
	if (!t->data || t->dtype >= KF_NDTYPE || t->rank > KF_MAX_RANK)
		return fail(c, path, "cannot write a tensor that was never allocated");
	kf_buf b = {0};
	npy_header(t, &b);
	/* atomic (kf_ofile): a reader never sees a half-written file, and a
	 * failed write leaves the old one; the data goes straight from the
	 * tensor, no copy of a large array */
	kf_ofile o;
	int e = kf_ofile_open(&o, path);
	if (!e) {
		kf_ofile_write(&o, b.p, b.n);
		kf_ofile_write(&o, t->data, t->nbytes);
		e = kf_ofile_commit(&o);
	}
	kf_buf_free(&b);
	if (e) {
		snprintf(msg, sizeof msg, "cannot write: %s", kf_file_strerror(e));
		return fail(c, path, msg);
	}
	return 0;
}

int kf_npy_read_input(kf_ctx *c, const char *path, kf_dtype want, kf_tensor *out, bool *rounded)
{
	*rounded = false;
	if (kf_npy_read(c, path, out) != 0)
		return -1;
	if (want != KF_BF16 || (out->dtype != KF_F32 && out->dtype != KF_F64))
		return 0;
	kf_tensor b;
	if (kf_tensor_alloc(&b, KF_BF16, out->rank, out->dim) != 0) {
		kf_error(c, KF_NOLOC, "%s: no memory to round it to bf16", path);
		kf_tensor_free(out);
		return -1;
	}
	for (int64_t e = 0, n = kf_tensor_numel(out); e < n; e++)
		kf_tensor_set(&b, e, kf_tensor_get(out, e));
	kf_tensor_free(out);
	*out = b;
	*rounded = true;
	return 0;
}
