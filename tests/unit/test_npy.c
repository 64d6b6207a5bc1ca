/* Unit tests of runtime/npy.c: numpy-written samples in tests/npy (made by
 * tests/npy/gen.py) read back with the right dtype, shape and values;
 * every dtype round-trips through kf_npy_write/kf_npy_read; every bad file
 * gives its exact error, naming the file, and no crash. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include "kf.h"
#include "npy.h"
#include "tensor.h"

#define NPY_DIR KF_TEST_DATA "/npy/"

static void read_ok(kf_ctx *c, const char *name, kf_tensor *t, kf_dtype dt, int rank, const int64_t *dim)
{
	char path[512];
	snprintf(path, sizeof path, NPY_DIR "%s", name);
	int rc = kf_npy_read(c, path, t);
	if (rc != 0)
		kf_diag_flush(c, stderr);
	assert_int_equal(rc, 0);
	assert_int_equal(t->dtype, dt);
	assert_int_equal(t->rank, rank);
	for (int i = 0; i < rank; i++)
		assert_int_equal(t->dim[i], dim[i]);
}

static void test_read_numpy_files(void **st)
{
	kf_ctx *c = kf_ctx_new();
	kf_tensor t;
	int64_t d23[] = {2, 3}, d4[] = {4}, d22[] = {2, 2}, d03[] = {0, 3};
	const double v[6] = {-2.5, -1.0, 0.0, 0.5, 1.5, 65504.0};
	const char *floats[] = {"good_f2.npy", "good_f4.npy", "good_f8.npy"};
	kf_dtype fdt[] = {KF_F16, KF_F32, KF_F64};

	for (int k = 0; k < 3; k++) {
		read_ok(c, floats[k], &t, fdt[k], 2, d23);
		for (int i = 0; i < 6; i++)
			assert_true(kf_tensor_get(&t, i) == v[i]);
		kf_tensor_free(&t);
	}
	read_ok(c, "good_b1.npy", &t, KF_I1, 1, d4);
	assert_memory_equal(t.data, "\1\0\1\1", 4);
	kf_tensor_free(&t);
	read_ok(c, "good_i1.npy", &t, KF_I8, 1, d4);
	assert_true(kf_tensor_get(&t, 0) == -128 && kf_tensor_get(&t, 3) == 127);
	kf_tensor_free(&t);
	read_ok(c, "good_i4.npy", &t, KF_I32, 2, d22);
	assert_true(kf_tensor_get(&t, 0) == -2147483648.0 && kf_tensor_get(&t, 3) == 2147483647);
	kf_tensor_free(&t);
	read_ok(c, "good_i8.npy", &t, KF_I64, 1, d4);
	assert_true(kf_tensor_get_i64(&t, 0) == INT64_MIN);
	assert_true(kf_tensor_get_i64(&t, 2) == (INT64_C(1) << 53) + 1);
	assert_true(kf_tensor_get_i64(&t, 3) == INT64_MAX);
	kf_tensor_free(&t);
	read_ok(c, "good_bf16.npy", &t, KF_BF16, 1, d4);
	assert_true(kf_tensor_get(&t, 0) == 1.0 && kf_tensor_get(&t, 1) == -2.5);
	assert_true(isinf(kf_tensor_get(&t, 2)));
	assert_true(kf_tensor_get(&t, 3) == ldexp(1, -133));
	kf_tensor_free(&t);
	read_ok(c, "good_scalar.npy", &t, KF_F32, 0, NULL);
	assert_true(kf_tensor_get(&t, 0) == 3.25);
	kf_tensor_free(&t);
	read_ok(c, "good_empty.npy", &t, KF_F32, 2, d03);
	assert_int_equal(kf_tensor_numel(&t), 0);
	kf_tensor_free(&t);
	int64_t d8[8] = {2, 2, 2, 2, 2, 2, 2, 2};
	read_ok(c, "good_rank8.npy", &t, KF_I32, 8, d8);
	assert_true(kf_tensor_get(&t, 255) == 255);
	kf_tensor_free(&t);
	read_ok(c, "good_v2.npy", &t, KF_F32, 2, d23);
	assert_true(kf_tensor_get(&t, 5) == 5);
	kf_tensor_free(&t);
	read_ok(c, "good_v3.npy", &t, KF_F32, 2, d23);
	assert_true(kf_tensor_get(&t, 4) == 4);
	kf_tensor_free(&t);
	assert_int_equal(kf_nerrors(c), 0);
	kf_ctx_free(c);
}

/* Fills t with values that exercise the dtype: signs, extremes, specials. */
static void fill(kf_tensor *t)
{
	static const double fv[] = {0.0, -0.0, 1.0, -2.5, 0.1, 65504.0, INFINITY, -INFINITY, NAN, 1e-7, 3.0, -1e30};
	static const double iv[] = {0, 1, -1, 127, -128, 100, -5, 7, 2147483647.0, -2147483648.0, 42, 9.0};
	for (int64_t i = 0; i < kf_tensor_numel(t); i++)
		kf_tensor_set(t, i, kf_dtype_is_float(t->dtype) ? fv[i % 12] : iv[i % 12]);
	if (t->dtype == KF_I64)
		kf_tensor_set_i64(t, 0, INT64_MIN + 1);
}

static void test_roundtrip_every_dtype(void **st)
{
	kf_ctx *c = kf_ctx_new();
	char dir[] = "/tmp/kf_npy_XXXXXX", path[600];
	assert_non_null(mkdtemp(dir));
	int64_t shapes[3][3] = {{3, 4, 1}, {12, 0, 0}, {0, 0, 0}};
	int ranks[3] = {3, 1, 0};

	for (int dt = 0; dt < KF_NDTYPE; dt++) {
		for (int s = 0; s < 3; s++) {
			kf_tensor a, b, p;
			assert_int_equal(kf_tensor_alloc(&a, dt, ranks[s], shapes[s]), 0);
			fill(&a);
			snprintf(path, sizeof path, "%s/%s_%d.npy", dir, kf_dtype_name(dt), s);
			assert_int_equal(kf_npy_write(c, path, &a), 0);
			assert_int_equal(kf_npy_read(c, path, &b), 0);
			assert_true(kf_tensor_same_shape(&a, &b));
			assert_int_equal(a.nbytes, b.nbytes);
			assert_memory_equal(a.data, b.data, a.nbytes); /* bit-exact, NaN too */

			kf_buf img = {0};
			kf_npy_serialize(&a, &img);
			assert_int_equal(img.n % 64, a.nbytes % 64); /* header padded to 64 */
			assert_int_equal(kf_npy_parse(c, "mem.npy", img.p, img.n, &p), 0);
			assert_memory_equal(a.data, p.data, a.nbytes);
			kf_buf_free(&img);
			kf_tensor_free(&a);
			kf_tensor_free(&b);
			kf_tensor_free(&p);
			unlink(path);
		}
	}
	/* Overwrites replace the file whole. */
	snprintf(path, sizeof path, "%s/over.npy", dir);
	kf_tensor a, b;
	int64_t d1[] = {1000}, d2[] = {2};
	kf_tensor_alloc(&a, KF_F64, 1, d1);
	assert_int_equal(kf_npy_write(c, path, &a), 0);
	kf_tensor_free(&a);
	kf_tensor_alloc(&a, KF_I8, 1, d2);
	assert_int_equal(kf_npy_write(c, path, &a), 0);
	assert_int_equal(kf_npy_read(c, path, &b), 0);
	assert_int_equal(b.dtype, KF_I8);
	assert_int_equal(b.dim[0], 2);
	kf_tensor_free(&a);
	kf_tensor_free(&b);
	unlink(path);
	assert_int_equal(rmdir(dir), 0); /* no temporary files left behind */
	assert_int_equal(kf_nerrors(c), 0);
	kf_ctx_free(c);
}

/* The exact header numpy writes, so numpy (and other readers) take it. */
static void test_header_text(void **st)
{
	kf_tensor t;
	int64_t d[] = {2, 3};
	kf_buf img = {0};
	kf_tensor_alloc(&t, KF_F32, 2, d);
	kf_npy_serialize(&t, &img);
	const char want[] = "\x93NUMPY\x01\x00\x76\x00{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
	assert_memory_equal(img.p, want, sizeof want - 1);
	assert_int_equal(img.p[127], '\n');
	assert_int_equal(img.n, 128 + 24);
	kf_buf_free(&img);
	kf_tensor_free(&t);
	int64_t d1[] = {5};
	kf_tensor_alloc(&t, KF_BF16, 1, d1);
	kf_npy_serialize(&t, &img);
	assert_non_null(strstr(img.p + 10, "{'descr': '|V2', 'fortran_order': False, 'shape': (5,), }"));
	kf_buf_free(&img);
	kf_tensor_free(&t);
}

static void expect_error(const char *name, const char *msg)
{
	kf_ctx *c = kf_ctx_new();
	char path[512], want[1024];
	kf_tensor t;
	memset(&t, 0x5a, sizeof t); /* must come back zeroed */
	snprintf(path, sizeof path, NPY_DIR "%s", name);
	assert_int_equal(kf_npy_read(c, path, &t), -1);
	assert_null(t.data);
	assert_int_equal(t.rank, 0);
	assert_int_equal(kf_nerrors(c), 1);
	kf_buf b = {0};
	kf_diag_render(c, &b);
	snprintf(want, sizeof want, "%s: error: %s\n", path, msg);
	assert_string_equal(b.p, want);
	kf_buf_free(&b);

	/* The in-memory parser says the same, under the name it is given. */
	FILE *f = fopen(path, "rb");
	if (f) {
		char data[4096];
		size_t n = fread(data, 1, sizeof data, f);
		fclose(f);
		kf_diag_clear(c);
		assert_int_equal(kf_npy_parse(c, "buf.npy", data, n, &t), -1);
		kf_diag_render(c, &b);
		snprintf(want, sizeof want, "buf.npy: error: %s\n", msg);
		assert_string_equal(b.p, want);
		kf_buf_free(&b);
	}
	kf_ctx_free(c);
}

static void test_bad_files(void **st)
{
	static const struct { const char *file, *msg; } cases[] = {
		{"missing.npy", "cannot open: No such file or directory"},
		{"bad_empty.npy", "not a .npy file (bad magic)"},
		{"bad_fortran.npy", "Fortran-order arrays are not supported; save a C-order copy (np.ascontiguousarray)"},
		{"bad_bigendian.npy", "big-endian data ('>f4') is not supported; save it little-endian (arr.astype('<f4'))"},
		{"bad_u4.npy", "unsupported dtype '<u4' (kfuse reads f16 f32 f64 bool i8 i32 i64 and bf16 as '|V2')"},
		{"bad_u1.npy", "unsupported dtype '|u1' (kfuse reads f16 f32 f64 bool i8 i32 i64 and bf16 as '|V2')"},
		{"bad_c8.npy", "unsupported dtype '<c8' (kfuse reads f16 f32 f64 bool i8 i32 i64 and bf16 as '|V2')"},
		{"bad_struct.npy", "structured (record) dtypes are not supported"},
		{"bad_object.npy", "object arrays ('|O') are not supported (they hold pickled Python objects)"},
		{"bad_pickle.npy", "not a .npy file (it looks like a Python pickle; kfuse reads no pickles)"},
		{"bad_npz.npy", "not a .npy file (it is a .npz zip archive; extract its arrays first)"},
		{"bad_magic.npy", "not a .npy file (bad magic)"},
		{"bad_truncated.npy", "truncated data: expected 24 bytes, found 19"},
		{"bad_trailing.npy", "3 unexpected bytes after the data"},
		{"bad_short_header.npy", "truncated header (118 bytes announced, 30 present)"},
		{"bad_version.npy", "unsupported .npy format version 4.0 (kfuse reads 1.0, 2.0, 3.0)"},
		{"bad_noshape.npy", "header lacks 'shape'"},
		{"bad_shape_overflow.npy", "shape is too large (more than 2^48 elements)"},
		{"bad_rank9.npy", "rank exceeds kfuse's maximum of 8"},
		{"bad_negative.npy", "'shape' holds something other than non-negative integers"},
		{"bad_dict.npy", "malformed header: expected a '{' dictionary"},
		{"bad_key.npy", "unexpected key 'extra' in header"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		expect_error(cases[i].file, cases[i].msg);
}

/* Every prefix of a good file and every single-byte corruption of its
 * header is rejected or accepted without a crash (ASan watches). */
static void test_mutations(void **st)
{
	kf_ctx *c = kf_ctx_new();
	kf_tensor a, t;
	int64_t d[] = {2, 3};
	kf_buf img = {0};
	kf_tensor_alloc(&a, KF_F32, 2, d);
	kf_npy_serialize(&a, &img);
	for (size_t n = 0; n < img.n; n++) {
		char *cut = malloc(n ? n : 1);
		memcpy(cut, img.p, n);
		assert_int_equal(kf_npy_parse(c, "cut.npy", cut, n, &t), -1);
		free(cut);
	}
	const unsigned char repl[] = {0, '\'', '(', ')', ',', '{', '}', '9', 'L', 0xff};
	for (size_t i = 0; i < 128; i++) {
		for (size_t k = 0; k < sizeof repl; k++) {
			char *m = malloc(img.n);
			memcpy(m, img.p, img.n);
			m[i] = (char)repl[k];
			if (kf_npy_parse(c, "mut.npy", m, img.n, &t) == 0)
				kf_tensor_free(&t);
			free(m);
		}
	}
	kf_diag_clear(c);
	kf_buf_free(&img);
	kf_tensor_free(&a);
	kf_ctx_free(c);
}

/* A 2.0 header longer than the reader's first gulp (numpy allows up to
 * 4 GiB of header): read from a file, the data still lands right. */
static void test_long_header(void **st)
{
	kf_ctx *c = kf_ctx_new();
	char path[] = "/tmp/kf_npy_long_XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	const char dict[] = "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }";
	size_t hlen = 70000;
	kf_buf img = {0};
	kf_buf_put(&img, "\x93NUMPY\x02\x00", 8);
	unsigned char len[4] = {hlen & 0xff, (hlen >> 8) & 0xff, (hlen >> 16) & 0xff, 0};
	kf_buf_put(&img, (const char *)len, 4);
	kf_buf_puts(&img, dict);
	while (img.n < 12 + hlen - 1)
		kf_buf_putc(&img, ' ');
	kf_buf_putc(&img, '\n');
	int32_t data[3] = {7, -8, 9};
	kf_buf_put(&img, (const char *)data, sizeof data);
	assert_int_equal(write(fd, img.p, img.n), (ssize_t)img.n);
	close(fd);
	kf_tensor t;
	assert_int_equal(kf_npy_read(c, path, &t), 0);
	assert_int_equal(t.dtype, KF_I32);
	assert_int_equal(t.dim[0], 3);
	assert_memory_equal(t.data, data, sizeof data);
	kf_tensor_free(&t);
	/* Cut inside the header: a clear error, not a short read. */
	assert_int_equal(truncate(path, 5000), 0);
	assert_int_equal(kf_npy_read(c, path, &t), -1);
	kf_buf msg = {0};
	kf_diag_render(c, &msg);
	assert_non_null(strstr(msg.p, "error: truncated header (70000 bytes announced, 4988 present)\n"));
	kf_buf_free(&msg);
	unlink(path);
	kf_buf_free(&img);
	kf_ctx_free(c);
}

static void test_write_error(void **st)
{
	kf_ctx *c = kf_ctx_new();
	kf_tensor a;
	int64_t d[] = {2};
	kf_tensor_alloc(&a, KF_F32, 1, d);
	assert_int_equal(kf_npy_write(c, "/nonexistent-dir/x.npy", &a), -1);
	kf_buf b = {0};
	kf_diag_render(c, &b);
	assert_string_equal(b.p, "/nonexistent-dir/x.npy: error: cannot write: No such file or directory\n");
	kf_buf_free(&b);
	kf_diag_clear(c);
	kf_tensor z = {0};
	assert_int_equal(kf_npy_write(c, "/tmp/never-written.npy", &z), -1);
	kf_diag_render(c, &b);
	assert_string_equal(b.p, "/tmp/never-written.npy: error: cannot write a tensor that was never allocated\n");
	assert_int_equal(access("/tmp/never-written.npy", F_OK), -1);
	kf_buf_free(&b);
	kf_tensor_free(&a);
	kf_ctx_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_read_numpy_files),
		cmocka_unit_test(test_roundtrip_every_dtype),
		cmocka_unit_test(test_header_text),
		cmocka_unit_test(test_bad_files),
		cmocka_unit_test(test_mutations),
		cmocka_unit_test(test_long_header),
		cmocka_unit_test(test_write_error),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
