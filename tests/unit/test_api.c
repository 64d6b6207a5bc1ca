/* Unit tests of the embedding API (include/kfuse/kfuse.h, api/): what a
 * graph takes and gives (symbolic dims included), a run on the caller's
 * buffers against the interpreter, the errors a caller can make (each
 * reported, named, never a crash), a model that may not change while
 * compiled, and a model saved elsewhere that reads back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#include "kfuse/kfuse.h"

static const char block[] =
	"graph @b(%x: f32[N,4], %w: f32[4,4]) -> (f32[N,4]) {\n"
	"  %h = matmul(%x, %w) : f32[N,4]\n"
	"  %c = const 0.5 : f32[]\n"
	"  %m = mul(%c, %h) : f32[N,4]\n"
	"  %t = tanh(%h) : f32[N,4]\n"
	"  %y = add(%m, %t) : f32[N,4]\n"
	"  return %y\n"
	"}\n"
	"graph @two(%a: i32[3]) -> (i32[3], i32[3]) {\n"
	"  %n = neg(%a) : i32[3]\n"
	"  return %a, %n\n"
	"}\n";

/* Asserts that k holds an error containing want, and clears it. */
static void error_has(kfuse_ctx *k, const char *want)
{
	const char *e = kfuse_error(k);
	if (!strstr(e, want))
		fail_msg("expected an error with '%s', got: %s", want, e);
	assert_string_equal(kfuse_error(k), ""); /* rendered once */
}

static kfuse_model *load(kfuse_ctx *k)
{
	kfuse_model *m = kfuse_load_text(k, "block.kf", block, sizeof block - 1);
	if (!m)
		fail_msg("%s", kfuse_error(k));
	return m;
}

static void test_info(void **st)
{
	kfuse_ctx *k = kfuse_new();
	kfuse_model *m = load(k);
	assert_int_equal(kfuse_graph_count(m), 2);
	assert_string_equal(kfuse_graph_name(m, 1), "two");
	assert_null(kfuse_graph_name(m, 2));
	assert_int_equal(kfuse_num_inputs(m, NULL), 2);
	assert_int_equal(kfuse_num_outputs(m, "two"), 2);
	assert_int_equal(kfuse_num_outputs(m, "@two"), 2);
	kfuse_tensor_info t;
	assert_int_equal(kfuse_input_info(m, NULL, 0, &t), 0);
	assert_string_equal(t.name, "x");
	assert_int_equal(t.dtype, KFUSE_F32);
	assert_int_equal(t.rank, 2);
	assert_int_equal(t.dim[0], -1);
	assert_string_equal(t.sym[0], "N");
	assert_int_equal(t.dim[1], 4);
	assert_null(t.sym[1]);
	assert_int_equal(kfuse_output_info(m, "two", 1, &t), 0);
	assert_string_equal(t.name, "n");
	assert_int_equal(t.dtype, KFUSE_I32);
	assert_int_equal(kfuse_dtype_size(t.dtype), 4);
	assert_string_equal(kfuse_dtype_name(KFUSE_BF16), "bf16");
	/* bad graph, bad index: errors that name them */
	assert_int_equal(kfuse_num_inputs(m, "nope"), -1);
	error_has(k, "no graph @nope here (it has @b, @two)");
	assert_int_equal(kfuse_input_info(m, NULL, 2, &t), -1);
	error_has(k, "@b has no input 2 (it takes 2)");
	assert_int_equal(kfuse_output_info(m, "two", -1, &t), -1);
	error_has(k, "@two has no output -1");
	kfuse_model_free(m);
	kfuse_free(k);
}

/* y = 0.5 x.w + tanh(x.w), by hand */
static void expect_block(const float *x, const float *w, int n, const float *y)
{
	for (int i = 0; i < n; i++)
		for (int j = 0; j < 4; j++) {
			double h = 0;
			for (int q = 0; q < 4; q++)
				h += (double)x[i * 4 + q] * w[q * 4 + j];
			double want = 0.5 * h + tanh(h);
			if (fabs(y[i * 4 + j] - want) > 1e-5 + 1e-4 * fabs(want))
				fail_msg("y[%d,%d] = %g, want %g", i, j, y[i * 4 + j], want);
		}
}

static void test_run(void **st)
{
	kfuse_ctx *k = kfuse_new();
	kfuse_model *m = load(k);
	assert_int_equal(kfuse_pipeline(m, "canonicalize,cse,dce"), 0);
	kfuse_compiled *x = kfuse_compile(m, NULL, "cpu", NULL);
	assert_non_null(x);
	assert_string_equal(kfuse_compiled_backend(x), "cpu");
	float xs[3 * 4], ws[16], ys[3 * 4];
	for (int i = 0; i < 12; i++)
		xs[i] = (float)sin(i) * 0.7f;
	for (int i = 0; i < 16; i++)
		ws[i] = (float)cos(i) * 0.3f;
	kfuse_buffer in[2] = {
		{.data = xs, .nbytes = sizeof xs, .dtype = KFUSE_F32, .rank = 2, .dim = {3, 4}},
		{.data = ws, .nbytes = sizeof ws, .dtype = KFUSE_F32, .rank = 2, .dim = {4, 4}},
	};
	/* no room for the output: an error that says what it needs, and the
	 * output's shape, sized by the input's N */
	kfuse_buffer out = {0};
	assert_int_equal(kfuse_run(x, in, 2, &out, 1), -1);
	error_has(k, "output 0 needs 48 bytes, its buffer has 0");
	assert_int_equal(out.dtype, KFUSE_F32);
	assert_int_equal(out.rank, 2);
	assert_int_equal(out.dim[0], 3);
	assert_int_equal(out.dim[1], 4);
	out.data = ys;
	out.nbytes = sizeof ys;
	assert_int_equal(kfuse_run(x, in, 2, &out, 1), 0);
	expect_block(xs, ws, 3, ys);
	/* the caller's mistakes */
	assert_int_equal(kfuse_run(x, in, 1, &out, 1), -1);
	error_has(k, "@b takes 2 inputs and gives 1 results, not 1 and 1");
	in[0].nbytes = 40;
	assert_int_equal(kfuse_run(x, in, 2, &out, 1), -1);
	error_has(k, "input 0 is 40 bytes, its shape needs 48");
	in[0].nbytes = sizeof xs;
	in[1].dtype = KFUSE_F64;
	in[1].nbytes = 16 * 8;
	assert_int_equal(kfuse_run(x, in, 2, &out, 1), -1);
	assert_string_not_equal(kfuse_error(k), "");
	in[1].dtype = KFUSE_F32;
	in[1].nbytes = sizeof ws;
	assert_int_equal(kfuse_run_device(x, in, 2, &out, 1, NULL), -1);
	error_has(k, "the cpu backend runs on host memory: use kfuse_run");
	/* the model may not change while compiled */
	assert_int_equal(kfuse_pipeline(m, "dce"), -1);
	error_has(k, "the model has 1 compiled graph alive");
	kfuse_compiled_free(x);
	assert_int_equal(kfuse_pipeline(m, "dce"), 0);
	kfuse_model_free(m);
	kfuse_free(k);
}

static void test_errors(void **st)
{
	kfuse_ctx *k = kfuse_new();
	assert_null(kfuse_load(k, "/no/such/model.kf"));
	error_has(k, "/no/such/model.kf: error: cannot open");
	assert_null(kfuse_load_text(k, "bad.kf", "graph @g(", 9));
	error_has(k, "bad.kf:1:10: error:");
	kfuse_model *m = load(k);
	assert_null(kfuse_compile(m, NULL, "tpu", NULL));
	error_has(k, "unknown backend 'tpu' (cpu, cuda, auto)");
	assert_null(kfuse_compile(m, "nope", "cpu", NULL));
	error_has(k, "no graph @nope");
	assert_int_equal(kfuse_pipeline(m, "cse2"), -1);
	error_has(k, "unknown pass 'cse2'");
	/* a pipeline that does not parse changes nothing: still usable */
	kfuse_compiled *x = kfuse_compile(m, "two", "auto", NULL);
	assert_non_null(x);
	kfuse_compiled_free(x);
	char *text;
	assert_int_equal(kfuse_emit(m, "llvm", &text, NULL), -1);
	error_has(k, "unknown kind of output 'llvm'");
	size_t n;
	assert_int_equal(kfuse_emit(m, "dot", &text, &n), 0);
	assert_true(n > 0 && strstr(text, "digraph"));
	free(text);
	assert_int_equal(kfuse_load_plugin(k, "/no/such/plugin.so"), -1);
	error_has(k, "cannot load plugin");
	kfuse_model_free(m);
	kfuse_free(k);
}

/* A model with a file() constant, saved into another directory, names the
 * same .npy from there and computes the same. */
static void test_save_elsewhere(void **st)
{
	char dir[] = "/tmp/kf-api-XXXXXX", path[256];
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/a", dir);
	assert_int_equal(mkdir(path, 0777), 0);
	snprintf(path, sizeof path, "%s/b", dir);
	assert_int_equal(mkdir(path, 0777), 0);
	/* a/w.npy: f32[2] = [1.5, -2] */
	static const unsigned char npy[] = "\x93NUMPY\x01\x00\x76\x00{'descr': '<f4', 'fortran_order': False, "
					   "'shape': (2,), }";
	snprintf(path, sizeof path, "%s/a/w.npy", dir);
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	fwrite(npy, 1, sizeof npy - 1, f);
	for (size_t i = sizeof npy - 1; i < 10 + 0x76 - 1; i++)
		fputc(' ', f);
	fputc('\n', f);
	float w[2] = {1.5f, -2.0f};
	fwrite(w, sizeof w, 1, f);
	fclose(f);
	static const char text[] = "graph @g(%x: f32[2]) -> (f32[2]) {\n"
				   "  %w = const file(\"w.npy\") : f32[2]\n"
				   "  %y = mul(%x, %w) : f32[2]\n"
				   "  return %y\n"
				   "}\n";
	snprintf(path, sizeof path, "%s/a/m.kf", dir);
	f = fopen(path, "w");
	fputs(text, f);
	fclose(f);
	kfuse_ctx *k = kfuse_new();
	kfuse_model *m = kfuse_load(k, path);
	assert_non_null(m);
	snprintf(path, sizeof path, "%s/b/m2.kf", dir);
	if (kfuse_save(m, path) < 0)
		fail_msg("%s", kfuse_error(k));
	kfuse_model_free(m);
	char *saved;
	m = kfuse_load(k, path);
	if (!m)
		fail_msg("%s", kfuse_error(k));
	assert_int_equal(kfuse_emit(m, "ir", &saved, NULL), 0);
	assert_non_null(strstr(saved, "file(\"../a/w.npy\")"));
	free(saved);
	kfuse_compiled *x = kfuse_compile(m, NULL, "cpu", NULL);
	float xs[2] = {2, 3}, ys[2];
	kfuse_buffer in = {.data = xs, .nbytes = sizeof xs, .dtype = KFUSE_F32, .rank = 1, .dim = {2}};
	kfuse_buffer out = {.data = ys, .nbytes = sizeof ys};
	if (kfuse_run(x, &in, 1, &out, 1) < 0)
		fail_msg("%s", kfuse_error(k));
	assert_true(ys[0] == 3.0f && ys[1] == -6.0f);
	kfuse_compiled_free(x);
	kfuse_model_free(m);
	kfuse_free(k);
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_info),
		cmocka_unit_test(test_run),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_save_elsewhere),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
