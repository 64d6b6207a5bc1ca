/* embed.c: kfuse inside a program, through the embedding API alone
 * (<kfuse/kfuse.h>, libkfuse).
 *
 *     embed [MODEL [BACKEND [PIPELINE]]]
 *
 * Loads MODEL (a .kf file or an ONNX model; default block.kf beside this
 * file), prints what its first graph takes and gives, optimises a copy
 * with PIPELINE (default: the standard rules and the fuse pass), compiles
 * both for BACKEND (cpu, cuda or auto; default cpu), runs them on the same
 * inputs in this program's own memory (a batch of 3 where a dim is
 * symbolic) and compares the results.  Exit status 0 when they agree.
 *
 * Build against an installed kfuse:
 *     cc embed.c $(pkg-config --cflags --libs kfuse) -o embed
 * or with CMake (CMakeLists.txt beside it: find_package(kfuse)).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kfuse/kfuse.h>

#ifndef EMBED_DIR
#define EMBED_DIR "." /* where block.kf is: CMakeLists.txt says */
#endif

static int fail(kfuse_ctx *k, const char *what)
{
	fprintf(stderr, "embed: %s failed:\n%s", what, kfuse_error(k));
	return 1;
}

static void show(const char *kind, int i, const kfuse_tensor_info *t)
{
	printf("  %s %d %%%s: %s[", kind, i, t->name, kfuse_dtype_name(t->dtype));
	for (int d = 0; d < t->rank; d++) {
		if (t->sym[d])
			printf("%s%s", d ? "," : "", t->sym[d]);
		else
			printf("%s%lld", d ? "," : "", (long long)t->dim[d]);
	}
	printf("]\n");
}

/* Input i of the graph as a buffer of deterministic values; symbolic dims
 * are 3.  Float inputs only, for the example's sake. */
static int make_input(const kfuse_tensor_info *t, int i, kfuse_buffer *b)
{
	if (t->dtype != KFUSE_F32) {
		fprintf(stderr, "embed: input %d is %s; this example feeds f32 only\n", i, kfuse_dtype_name(t->dtype));
		return -1;
	}
	memset(b, 0, sizeof *b);
	b->dtype = t->dtype;
	b->rank = t->rank;
	size_t n = 1;
	for (int d = 0; d < t->rank; d++) {
		b->dim[d] = t->dim[d] >= 0 ? t->dim[d] : 3;
		n *= (size_t)b->dim[d];
	}
	float *p = malloc(n * sizeof *p + 1);
	if (!p)
		return -1;
	for (size_t e = 0; e < n; e++)
		p[e] = (float)sin(0.37 * (double)e + i) * 0.5f;
	b->data = p;
	b->nbytes = n * sizeof *p;
	return 0;
}

/* The statements of the model's graphs (lines of its text indented two). */
static int statements(kfuse_model *m)
{
	char *ir;
	int n = 0;
	if (kfuse_emit(m, "ir", &ir, NULL) < 0)
		return -1;
	for (char *p = ir; (p = strstr(p, "\n  %")); p++)
		n++;
	free(ir);
	return n;
}

/* Runs x on in; the outputs' buffers are sized by a first try (an output
 * too small is an error that says its shape). */
static int run(kfuse_ctx *k, kfuse_compiled *x, const kfuse_buffer *in, int nin, kfuse_buffer *out, int nout)
{
	for (int i = 0; i < nout; i++)
		out[i] = (kfuse_buffer){0};
	if (kfuse_run(x, in, nin, out, nout) == 0)
		return 0;
	kfuse_error(k); /* "needs N bytes": now sized */
	for (int i = 0; i < nout; i++) {
		size_t n = kfuse_dtype_size(out[i].dtype);
		for (int d = 0; d < out[i].rank; d++)
			n *= (size_t)out[i].dim[d];
		out[i].data = malloc(n + 1);
		out[i].nbytes = n;
	}
	return kfuse_run(x, in, nin, out, nout);
}

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : EMBED_DIR "/block.kf";
	const char *backend = argc > 2 ? argv[2] : "cpu";
	const char *pipeline = argc > 3 ? argv[3] : "canonicalize,cse,rules,fuse,dce";
	printf("kfuse %s\n", kfuse_version());
	kfuse_ctx *k = kfuse_new();
	kfuse_model *ref = kfuse_load(k, path), *opt = kfuse_load(k, path);
	if (!ref || !opt)
		return fail(k, "loading the model");
	int nin = kfuse_num_inputs(ref, NULL), nout = kfuse_num_outputs(ref, NULL);
	printf("@%s takes %d input%s and gives %d:\n", kfuse_graph_name(ref, 0), nin, nin == 1 ? "" : "s", nout);
	kfuse_tensor_info t;
	kfuse_buffer *in = calloc((size_t)nin + 1, sizeof *in);
	for (int i = 0; i < nin; i++) {
		if (kfuse_input_info(ref, NULL, i, &t) < 0)
			return fail(k, "kfuse_input_info");
		show("input", i, &t);
		if (make_input(&t, i, &in[i]) < 0)
			return 1;
	}
	for (int i = 0; i < nout; i++) {
		if (kfuse_output_info(ref, NULL, i, &t) < 0)
			return fail(k, "kfuse_output_info");
		show("output", i, &t);
	}
	int before = statements(opt);
	if (kfuse_pipeline(opt, pipeline) < 0)
		return fail(k, "the pipeline");
	printf("after '%s': %d statements, %d before\n", pipeline, statements(opt), before);

	kfuse_compiled *xr = kfuse_compile(ref, NULL, backend, NULL);
	kfuse_compiled *xo = xr ? kfuse_compile(opt, NULL, backend, NULL) : NULL;
	if (!xo)
		return fail(k, "compiling");
	kfuse_buffer *a = calloc((size_t)nout + 1, sizeof *a), *b = calloc((size_t)nout + 1, sizeof *b);
	if (run(k, xr, in, nin, a, nout) < 0 || run(k, xo, in, nin, b, nout) < 0)
		return fail(k, "running");
	int bad = 0;
	for (int i = 0; i < nout; i++) {
		const float *p = a[i].data, *q = b[i].data;
		size_t n = a[i].nbytes / sizeof *p;
		double worst = 0, sum = 0;
		for (size_t e = 0; e < n; e++) {
			worst = fmax(worst, fabs(p[e] - q[e]) / (1e-5 + 1e-4 * fabs(p[e])));
			sum += q[e];
		}
		printf("output %d on %s: %zu values, sum %.6g, %s\n", i, kfuse_compiled_backend(xo), n, sum,
		       worst <= 1 ? "same as the unoptimised graph" : "DIFFERENT from the unoptimised graph");
		bad |= worst > 1 || a[i].nbytes != b[i].nbytes;
		free(a[i].data);
		free(b[i].data);
	}
	for (int i = 0; i < nin; i++)
		free(in[i].data);
	free(in);
	free(a);
	free(b);
	kfuse_compiled_free(xr);
	kfuse_compiled_free(xo);
	kfuse_model_free(ref);
	kfuse_model_free(opt);
	kfuse_free(k);
	return bad;
}
