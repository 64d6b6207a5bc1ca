/* limits.c: every limit kfuse enforces gives a clear error with the
 * expected message, and input just inside a limit still works
 * (docs/reliability.md lists them).
 *
 *   input size      .kf 4 GiB (32-bit offsets), ONNX 2 GiB (protobuf),
 *                   .npy data no larger than the file
 *   nesting         regions 64, attribute lists 256
 *   tensor sizes    a static type whose byte count overflows int64 does not
 *                   verify; a tensor over 2^48 bytes is not allocated
 *   Lua             instruction and memory budgets, naming the script
 *   rewriting       the driver's rewrite cap, rules that undo each other
 *   GPU             a failed cuMemAlloc is reported by name (skipped
 *                   without a GPU)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "kf.h"
#include "cuda.h"
#include "lua_rules.h"
#include "npy.h"
#include "plugin.h"
#include "rewrite.h"
#include "tensor.h"
#ifdef KF_HAVE_ONNX
#include "onnx_import.h"
#endif

static char tmpdir[64];

/* ---- helpers ---------------------------------------------------------------- */

/* The pending diagnostics must contain want; they are then cleared. */
static void expect_diag(kf_ctx *c, const char *want)
{
	kf_buf d = {0};
	kf_diag_render(c, &d);
	kf_buf_putc(&d, 0);
	if (!strstr(d.p, want)) {
		print_error("expected a diagnostic containing\n  %s\ngot\n%s\n", want, d.p);
		kf_buf_free(&d);
		fail();
	}
	kf_buf_free(&d);
	kf_diag_clear(c);
}

static void expect_clean(kf_ctx *c)
{
	if (kf_nerrors(c)) {
		kf_buf d = {0};
		kf_diag_render(c, &d);
		print_error("unexpected errors:\n%.*s\n", (int)d.n, d.p);
		kf_buf_free(&d);
		fail();
	}
}

static const char *tmp_file(const char *name, const char *text)
{
	static char path[4][128];
	static int k;
	char *p = path[k++ % 4];
	snprintf(p, sizeof path[0], "%s/%s", tmpdir, name);
	FILE *f = fopen(p, "wb");
	assert_non_null(f);
	if (text)
		fputs(text, f);
	fclose(f);
	return p;
}

/* Parses text; every graph must verify. */
static void expect_ok(kf_ctx *c, const char *text, size_t len)
{
	kf_module *m = kf_parse(c, "ok.kf", text, len);
	expect_clean(c);
	assert_non_null(m);
	for (uint32_t i = 0; i < m->ngraph; i++)
		assert_int_equal(kf_verify(m->graph[i]), 0);
	expect_clean(c);
	kf_module_free(m);
}

/* Parses (and, when it parses, verifies) text; the result must be the error want. */
static void expect_refused(kf_ctx *c, const char *text, const char *want)
{
	kf_module *m = kf_parse(c, "limit.kf", text, strlen(text));
	for (uint32_t i = 0; m && i < m->ngraph; i++)
		kf_verify(m->graph[i]);
	assert_true(kf_nerrors(c) > 0);
	expect_diag(c, want);
	kf_module_free(m);
}

/* ---- input size ------------------------------------------------------------- */

static void parse_text_size(void **st)
{
	kf_ctx *c = kf_ctx_new();
	/* the length is checked before the text is read: it can be a lie */
	assert_null(kf_parse(c, "big.kf", "", (size_t)UINT32_MAX));
	expect_diag(c, "big.kf: error: file too large (4294967295 bytes; the limit is 4 GiB)");
	kf_ctx_free(c);
}

static void parse_file_size(void **st)
{
	const char *p = tmp_file("huge.kf", NULL);
	if (truncate(p, (off_t)5 << 30) != 0) { /* sparse: no disk used */
		unlink(p);
		skip();
	}
	kf_ctx *c = kf_ctx_new();
	assert_null(kf_parse_file(c, p));
	expect_diag(c, "huge.kf: error: file too large (5368709120 bytes; the limit is 4 GiB)");
	kf_ctx_free(c);
	unlink(p);
}

static void onnx_size(void **st)
{
#ifdef KF_HAVE_ONNX
	kf_ctx *c = kf_ctx_new();
	assert_null(kf_onnx_import(c, "big.onnx", "", (size_t)INT32_MAX + 1, NULL));
	expect_diag(c, "big.onnx: error: ONNX model too large (2147483648 bytes; protobuf's limit is 2 GiB)");
	const char *p = tmp_file("huge.onnx", NULL);
	if (truncate(p, (off_t)3 << 30) == 0) {
		assert_null(kf_onnx_import_file(c, p, NULL));
		expect_diag(c, "huge.onnx: error: file too large (3221225472 bytes; protobuf's limit is 2 GiB)");
	}
	unlink(p);
	kf_ctx_free(c);
#else
	skip();
#endif
}

/* A header may promise terabytes; the reader must not try to allocate them. */
static void npy_data_size(void **st)
{
	static const char hdr[] = "{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776,), }";
	char buf[256];
	size_t hl = 118 - 10; /* header text length: magic + version + length + text is 118 */
	memcpy(buf, "\x93NUMPY\x01\x00", 8);
	buf[8] = (char)hl;
	buf[9] = 0;
	memset(buf + 10, ' ', hl);
	memcpy(buf + 10, hdr, sizeof hdr - 1);
	buf[10 + hl - 1] = '\n';
	memset(buf + 10 + hl, 0, 16); /* 16 bytes of data */
	const char *p = tmp_file("huge.npy", NULL);
	FILE *f = fopen(p, "wb");
	fwrite(buf, 1, 10 + hl + 16, f);
	fclose(f);
	kf_ctx *c = kf_ctx_new();
	kf_tensor t;
	assert_int_equal(kf_npy_read(c, p, &t), -1);
	expect_diag(c, "huge.npy: error: truncated data: expected 4398046511104 bytes, found 16");
	assert_int_equal(kf_npy_read(c, KF_TEST_DATA "/npy/bad_shape_overflow.npy", &t), -1);
	expect_diag(c, "error: shape is too large (more than 2^48 elements)");
	kf_ctx_free(c);
	unlink(p);
}

/* ---- nesting ------------------------------------------------------------------- */

/* n fusions, each inside the previous one's body. */
static char *nested_regions(int n)
{
	kf_buf b = {0};
	kf_buf_puts(&b, "graph @g(%x: f32[4]) -> (f32[4]) {\n");
	for (int i = 0; i < n; i++) {
		char in[16];
		snprintf(in, sizeof in, i ? "%%p%d" : "%%x", i - 1);
		kf_buf_printf(&b, "%%r%d = fusion @k%d(%s) : f32[4] {\n^(%%p%d: f32[4]):\n", i, i, in, i);
	}
	kf_buf_printf(&b, "yield %%p%d\n", n - 1);
	for (int i = n - 1; i >= 0; i--)
		kf_buf_printf(&b, "}\n%s %%r%d\n", i ? "yield" : "return", i);
	kf_buf_puts(&b, "}\n");
	kf_buf_putc(&b, 0);
	return b.p;
}

static void region_nesting(void **st)
{
	kf_ctx *c = kf_ctx_new();
	char *ok = nested_regions(64), *deep = nested_regions(65);
	expect_ok(c, ok, strlen(ok));
	expect_refused(c, deep, "limit.kf:130:35: error: regions nested too deeply (limit 64)");
	free(ok);
	free(deep);
	kf_ctx_free(c);
}

static char *nested_list(int n)
{
	kf_buf b = {0};
	kf_buf_puts(&b, "graph @g(%x: f32[4]) -> (f32[4]) {\n  %y = neg(%x) {deep = ");
	for (int i = 0; i < n; i++)
		kf_buf_putc(&b, '[');
	kf_buf_putc(&b, '1');
	for (int i = 0; i < n; i++)
		kf_buf_putc(&b, ']');
	kf_buf_puts(&b, "} : f32[4]\n  return %y\n}\n");
	kf_buf_putc(&b, 0);
	return b.p;
}

static void list_nesting(void **st)
{
	kf_ctx *c = kf_ctx_new();
	char *ok = nested_list(256), *deep = nested_list(257);
	/* parses; neg takes no attribute 'deep', so it does not verify: the
	 * limit under test is the parser's */
	kf_module *m = kf_parse(c, "ok.kf", ok, strlen(ok));
	expect_clean(c);
	assert_non_null(m);
	kf_module_free(m);
	expect_refused(c, deep, "limit.kf:2:280: error: attribute list nested too deeply (limit 256)");
	free(ok);
	free(deep);
	kf_ctx_free(c);
}

/* A megabyte-long name and string: no fixed buffers on the way. */
static void long_tokens(void **st)
{
	size_t n = 1 << 20;
	kf_buf b = {0};
	char *name = malloc(n + 1);
	memset(name, 'v', n);
	name[n] = 0;
	kf_buf_printf(&b, "graph @g(%%x: f32[4]) -> (f32[4]) {\n  %%%s = neg(%%x) : f32[4]\n", name);
	kf_buf_printf(&b, "  %%z = cast(%%%s) {to = \"f32\"} : f32[4]\n  return %%z\n}\n", name);
	kf_ctx *c = kf_ctx_new();
	expect_ok(c, b.p, b.n);
	kf_module *m = kf_parse(c, "ok.kf", b.p, b.n);
	kf_buf out = {0};
	kf_print_module(&out, m);
	assert_true(out.n > n);
	kf_buf_free(&out);
	kf_module_free(m);
	kf_ctx_free(c);
	kf_buf_free(&b);
	free(name);
}

/* ---- tensor sizes -------------------------------------------------------------- */

static void type_byte_overflow(void **st)
{
	kf_ctx *c = kf_ctx_new();
	/* 2^62 * 4 elements */
	expect_refused(c,
		"graph @g(%x: f32[4611686018427387904,4]) -> (f32[4611686018427387904,4]) {\n  return %x\n}\n",
		"limit.kf:1:1: error: type f32[4611686018427387904,4] of %x is too large: its size in bytes overflows int64");
	/* 2^61 elements fit in int64, their 2^64 bytes do not */
	expect_refused(c,
		"graph @g(%x: f32[4]) -> (f64[2305843009213693952]) {\n"
		"  %y = const 0.0 : f64[2305843009213693952]\n  return %y\n}\n",
		"limit.kf:2:3: error: type f64[2305843009213693952] of %y is too large: its size in bytes overflows int64");
	expect_refused(c, "graph @g(%x: f32[9223372036854775808]) -> (f32[1]) {\n  return %x\n}\n",
		       "limit.kf:1:18: error: dimension out of range");
	/* 2^62 bytes fit: declaring it is fine (allocating it is not) */
	const char *ok = "graph @g(%x: i8[4611686018427387904]) -> (i8[4611686018427387904]) {\n  return %x\n}\n";
	expect_ok(c, ok, strlen(ok));
	kf_ctx_free(c);
}

static void tensor_alloc_cap(void **st)
{
	kf_tensor t;
	int64_t over[2] = {(int64_t)1 << 46, 8};          /* 2^51 bytes of f32: over the 2^48 cap */
	int64_t wrap[2] = {(int64_t)1 << 40, (int64_t)1 << 40}; /* 2^80 elements */
	int64_t neg[1] = {-1};
	assert_int_equal(kf_tensor_alloc(&t, KF_F32, 2, over), -1);
	assert_int_equal(kf_tensor_alloc(&t, KF_I8, 2, wrap), -1);
	assert_int_equal(kf_tensor_alloc(&t, KF_F32, 1, neg), -1);
	assert_int_equal(kf_tensor_alloc(&t, KF_F32, KF_MAX_RANK + 1, over), -1);
	assert_int_equal(kf_tensor_alloc(&t, KF_F32, 1, (int64_t[]){4}), 0);
	assert_int_equal(t.nbytes, 16);
	kf_tensor_free(&t);
}

/* ---- Lua budgets --------------------------------------------------------------- */

static kf_lrules *load(kf_ctx *c, const char *name, const char *text)
{
	return kf_lua_rules_load(c, tmp_file(name, text));
}

static void lua_instructions(void **st)
{
	kf_ctx *c = kf_ctx_new();
	kf_lua_set_limits(c, 100000, 0, 0);
	assert_null(load(c, "spin.lua", "local n = 0\nwhile true do n = n + 1 end\n"));
	expect_diag(c, "spin.lua:2:1: error: rule file '");
	assert_null(load(c, "spin2.lua", "while true do end\n"));
	expect_diag(c, "spin2.lua' exceeded the instruction limit (100000)");
	kf_plugin_release(c);
	kf_ctx_free(c);
}

static void lua_memory(void **st)
{
	kf_ctx *c = kf_ctx_new();
	kf_lua_set_limits(c, 0, (size_t)4 << 20, (size_t)64 << 20);
	assert_null(load(c, "hog.lua", "local t = {}\nfor i = 1, 1e9 do t[i] = string.rep('x', 100) .. i end\n"));
	expect_diag(c, "hog.lua' ran out of memory (over its budget of 4194304 bytes)");
	/* the state survives: a later script still loads */
	assert_non_null(load(c, "fine.lua", "rule { name = 'r', pattern = function(x) return -(-x) end,\n"
				      "       replace = function(x) return x end }\n"));
	expect_clean(c);
	kf_plugin_release(c);
	kf_ctx_free(c);
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Work no budget counts (a long string operation, repeated) is stopped by
 * the wall clock. */
static void lua_time(void **st)
{
	kf_ctx *c = kf_ctx_new();
	kf_lua_set_time_limit(c, 0.5);
	double t0 = now_s();
	assert_null(load(c, "slow.lua", "local s = ('a'):rep(1e7)\nfor i = 1, 1e9 do local u = s:upper() end\n"));
	expect_diag(c, "slow.lua' exceeded the time limit (0.5 s)");
	assert_true(now_s() - t0 < 5);
	kf_plugin_release(c);
	kf_ctx_free(c);
}

/* A runaway `where` is stopped with an error naming the rule. */
static void lua_where_budget(void **st)
{
	kf_ctx *c = kf_ctx_new();
	kf_lua_set_limits(c, 100000, 0, 0);
	kf_lrules *r = load(c, "where.lua", "rule { name = 'spin', pattern = function(x) return -x end,\n"
				       "  replace = function(x) return x end,\n"
				       "  where = function(m) while true do end end }\n");
	assert_non_null(r);
	const char *g = "graph @g(%x: f32[4]) -> (f32[4]) {\n  %y = neg(%x) : f32[4]\n  return %y\n}\n";
	kf_module *m = kf_parse(c, "g.kf", g, strlen(g));
	assert_non_null(m);
	kf_rw_opts o = {0};
	kf_rw_stats s;
	kf_rw_stats_init(&s, kf_lua_rules_set(r));
	assert_int_equal(kf_rw_run(m->graph[0], kf_lua_rules_set(r), &o, &s), -1);
	expect_diag(c, "'spin'");
	assert_int_equal(kf_verify(m->graph[0]), 0); /* no half-done rewrite */
	kf_rw_stats_free(&s);
	kf_module_free(m);
	kf_plugin_release(c);
	kf_ctx_free(c);
}

/* ---- the rewrite driver's caps ------------------------------------------------- */

static int run_rules(kf_ctx *c, const char *name, const char *rules, uint64_t cap)
{
	kf_lrules *r = load(c, name, rules);
	assert_non_null(r);
	const char *g = "graph @g(%x: f32[4]) -> (f32[4]) {\n  %y = neg(%x) : f32[4]\n  return %y\n}\n";
	kf_module *m = kf_parse(c, "g.kf", g, strlen(g));
	kf_rw_opts o = {.max_rewrites = cap};
	kf_rw_stats s;
	kf_rw_stats_init(&s, kf_lua_rules_set(r));
	int rc = kf_rw_run(m->graph[0], kf_lua_rules_set(r), &o, &s);
	assert_int_equal(kf_verify(m->graph[0]), 0); /* what it did is still a graph */
	kf_rw_stats_free(&s);
	kf_module_free(m);
	return rc;
}

static void rewrite_caps(void **st)
{
	kf_ctx *c = kf_ctx_new();
	/* each rewrite makes a new match: only the cap stops it */
	assert_int_equal(run_rules(c, "grow.lua", "rule { name = 'grow', pattern = function(x) return -x end,\n"
					       "  replace = function(x) return -(-(-x)) end }\n", 50), -1);
	expect_diag(c, "g.kf:1:1: error: rules did not converge: 50 rewrites hit the cap (max-rewrites=50); "
		    "the last ones were by 'grow' (50)");
	assert_int_equal(run_rules(c, "flip.lua",
				   "rule { name = 'to-abs', pattern = function(x) return -x end, replace = function(x) return abs(x) end }\n"
				   "rule { name = 'to-neg', pattern = function(x) return abs(x) end, replace = function(x) return -x end }\n",
				   0), -1);
	expect_diag(c, "undo each other");
	kf_plugin_release(c);
	kf_ctx_free(c);
}

/* ---- GPU memory ------------------------------------------------------------------- */

static void gpu_out_of_memory(void **st)
{
	kf_ctx *c = kf_ctx_new();
	kf_cuda *cu = kf_cuda_open(c, 0);
	if (!cu) { /* no driver or no GPU here */
		kf_ctx_free(c);
		skip();
	}
	kf_cuptr p = 0;
	assert_int_equal(kf_cuda_malloc(cu, (size_t)1 << 50, &p), -1); /* 1 PiB */
	kf_buf d = {0};
	kf_diag_render(c, &d);
	print_message("%.*s", (int)d.n, d.p); /* the message a user sees */
	kf_buf_free(&d);
	expect_diag(c, "kfuse: error: cuMemAlloc(1125899906842624 bytes) failed: CUDA_ERROR_OUT_OF_MEMORY (");
	/* and the device is still usable afterwards */
	assert_int_equal(kf_cuda_malloc(cu, 1 << 20, &p), 0);
	assert_int_equal(kf_cuda_free(cu, p), 0);
	kf_cuda_close(cu);
	kf_ctx_free(c);
}

/* ---- main ------------------------------------------------------------------------------ */

static int setup(void **st)
{
	snprintf(tmpdir, sizeof tmpdir, "/tmp/kf-limits-XXXXXX");
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **st)
{
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

/* kf-limits [PATTERN]: only the tests whose names match (cmocka's filter). */
int main(int argc, char **argv)
{
	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(parse_text_size),
		cmocka_unit_test(parse_file_size),
		cmocka_unit_test(onnx_size),
		cmocka_unit_test(npy_data_size),
		cmocka_unit_test(region_nesting),
		cmocka_unit_test(list_nesting),
		cmocka_unit_test(long_tokens),
		cmocka_unit_test(type_byte_overflow),
		cmocka_unit_test(tensor_alloc_cap),
		cmocka_unit_test(lua_instructions),
		cmocka_unit_test(lua_memory),
		cmocka_unit_test(lua_time),
		cmocka_unit_test(lua_where_budget),
		cmocka_unit_test(rewrite_caps),
		cmocka_unit_test(gpu_out_of_memory),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
