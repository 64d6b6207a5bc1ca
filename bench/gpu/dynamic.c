/* dynamic.c: one compiled model serving many shapes (docs/dynamic.md), on a
 * GPU, through the embedding API alone.
 *
 *     dynamic MODEL.onnx PIPELINE SHAPES [N [BACKEND]]
 *
 * MODEL is a transformer exported with dynamic axes: its inputs are i64
 * [batch, seq] (token ids first, then masks, which get all ones).  It is
 * optimised with PIPELINE (on the symbolic graph: the fuse passes group it
 * once for every size; each shape's plan specialises that) and compiled
 * ONCE for cuda and once for the interpreter.  SHAPES is a list such as
 * 1x8,4x32,16x64 (batch x seq).  For each shape, in one session:
 *   first   the first run (binds, specialises, plans, compiles what the
 *           kernel cache lacks: a miss)
 *   repeat  the median of N more runs (hits)
 *   static  the median of N runs of the model compiled for that shape alone
 *           (specialize{...} then PIPELINE, a session of its own): what a
 *           hit should cost
 * and the output is checked against the interpreter.  Then every shape
 * again ("again": its first run in the second sweep, a hit: every plan is
 * kept).  Host wall times in ms.  Exit 0 when every shape matches.
 * BACKEND (default cuda; cpu to try this program without a GPU) is the one
 * timed.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <kfuse/kfuse.h>

#define MAXS 64
#define MAXIO 8

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static void die(kfuse_ctx *k, const char *what)
{
	fprintf(stderr, "dynamic: %s: %s", what, kfuse_error(k));
	exit(1);
}

typedef struct io {
	int nin, nout;
	kfuse_buffer in[MAXIO], out[MAXIO], ref[MAXIO];
} io;

/* Inputs of shape [b,s] (ids in [0,100): the zoo's vocabulary; masks 1)
 * and outputs sized from the graph's output types, symbols "batch"/"seq"
 * (or whatever the inputs name) replaced. */
static void make_io(kfuse_ctx *k, kfuse_model *m, int64_t b, int64_t s, io *x)
{
	kfuse_tensor_info ii, oi;
	x->nin = kfuse_num_inputs(m, NULL);
	x->nout = kfuse_num_outputs(m, NULL);
	if (x->nin > MAXIO || x->nout > MAXIO || kfuse_input_info(m, NULL, 0, &ii) != 0)
		die(k, "model inputs");
	for (int i = 0; i < x->nin; i++) {
		kfuse_buffer *t = &x->in[i];
		*t = (kfuse_buffer){.dtype = KFUSE_I64, .rank = 2, .dim = {b, s}, .nbytes = (size_t)(b * s) * 8};
		t->data = malloc(t->nbytes);
		for (int64_t e = 0; e < b * s; e++)
			((int64_t *)t->data)[e] = i ? 1 : (e * 37 + 11) % 100;
	}
	for (int i = 0; i < x->nout; i++) {
		if (kfuse_output_info(m, NULL, i, &oi) != 0)
			die(k, "model outputs");
		size_t n = kfuse_dtype_size(oi.dtype);
		for (int d = 0; d < oi.rank; d++) {
			int64_t v = oi.dim[d];
			if (v < 0 && oi.sym[d])
				v = ii.sym[0] && !strcmp(oi.sym[d], ii.sym[0]) ? b
				    : ii.sym[1] && !strcmp(oi.sym[d], ii.sym[1]) ? s : -1;
			if (v < 0) {
				fprintf(stderr, "dynamic: output %d dim %d (%s) is no input's symbol\n", i, d, oi.sym[d]);
				exit(1);
			}
			n *= (size_t)v;
		}
		x->out[i] = (kfuse_buffer){.data = malloc(n), .nbytes = n};
		x->ref[i] = (kfuse_buffer){.data = malloc(n), .nbytes = n};
	}
}

static void free_io(io *x)
{
	for (int i = 0; i < x->nin; i++)
		free(x->in[i].data);
	for (int i = 0; i < x->nout; i++) {
		free(x->out[i].data);
		free(x->ref[i].data);
	}
}

/* max |out - ref| / (1 + max |ref|) over f32 outputs. */
static double err_of(const io *x)
{
	double worst = 0;
	for (int i = 0; i < x->nout; i++) {
		const float *a = x->out[i].data, *r = x->ref[i].data;
		size_t n = x->ref[i].nbytes / 4;
		double e = 0, big = 0;
		for (size_t j = 0; x->out[i].dtype == KFUSE_F32 && j < n; j++) {
			e = fmax(e, isnan(a[j]) != isnan(r[j]) ? INFINITY : fabs((double)a[j] - r[j]));
			big = fmax(big, fabs((double)r[j]));
		}
		worst = fmax(worst, e / (1 + big));
	}
	return worst;
}

static double median_runs(kfuse_ctx *k, kfuse_compiled *c, io *x, int n)
{
	double *ms = calloc((size_t)n, sizeof *ms);
	for (int r = 0; r < n; r++) {
		double t0 = now_ms();
		if (kfuse_run(c, x->in, x->nin, x->out, x->nout) != 0)
			die(k, "run");
		ms[r] = now_ms() - t0;
	}
	qsort(ms, (size_t)n, sizeof *ms, cmp_double);
	double med = ms[n / 2];
	free(ms);
	return med;
}

/* The model compiled for [b,s] alone: its repeat median. */
static const char *backend = "cuda";

static double static_ms(const char *path, const char *pipe, int64_t b, int64_t s, io *x, int n)
{
	kfuse_ctx *k = kfuse_new();
	kfuse_model *m = kfuse_load(k, path);
	kfuse_tensor_info ii;
	if (!m || kfuse_input_info(m, NULL, 0, &ii) != 0 || !ii.sym[0] || !ii.sym[1])
		die(k, "static load");
	char p[2048];
	snprintf(p, sizeof p, "specialize{%s=%lld,%s=%lld},%s", ii.sym[0], (long long)b, ii.sym[1], (long long)s,
		 pipe);
	if (kfuse_pipeline(m, p) != 0)
		die(k, "static pipeline");
	kfuse_compiled *c = kfuse_compile(m, NULL, backend, NULL);
	if (!c || kfuse_run(c, x->in, x->nin, x->out, x->nout) != 0)
		die(k, "static compile");
	double ms = median_runs(k, c, x, n);
	kfuse_compiled_free(c);
	kfuse_model_free(m);
	kfuse_free(k);
	return ms;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: dynamic MODEL.onnx PIPELINE SHAPES [N [BACKEND]]  (SHAPES: 1x8,4x32,...)\n");
		return 2;
	}
	const char *path = argv[1], *pipe = argv[2];
	int n = argc > 4 ? atoi(argv[4]) : 20, ns = 0;
	int64_t sb[MAXS], ss[MAXS];
	for (char *t = strtok(argv[3], ","); t && ns < MAXS; t = strtok(NULL, ","))
		if (sscanf(t, "%ldx%ld", &sb[ns], &ss[ns]) == 2)
			ns++;
	n = n > 0 ? n : 1;
	if (argc > 5)
		backend = argv[5];
	kfuse_ctx *k = kfuse_new();
	kfuse_model *m = kfuse_load(k, path);
	if (!m || kfuse_pipeline(m, pipe) != 0)
		die(k, "load");
	kfuse_compiled *gpu = kfuse_compile(m, NULL, backend, NULL), *cpu = kfuse_compile(m, NULL, "cpu", NULL);
	if (!gpu || !cpu)
		die(k, "compile");
	/* every shape's plan kept: the second sweep's first runs are hits */
	kfuse_set_max_plans(gpu, MAXS);
	printf("%-8s %6s %6s %10s %10s %10s %10s %9s\n", "model", "batch", "seq", "first", "repeat", "static",
	       "again", "err");
	double rep[MAXS];
	int bad = 0;
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < ns; i++) {
			io x;
			make_io(k, m, sb[i], ss[i], &x);
			double t0 = now_ms();
			if (kfuse_run(gpu, x.in, x.nin, x.out, x.nout) != 0)
				die(k, "cuda run");
			double first = now_ms() - t0;
			if (kfuse_run(cpu, x.in, x.nin, x.ref, x.nout) != 0)
				die(k, "cpu run");
			double e = err_of(&x);
			bool ok = e <= 1e-3;
			bad += !ok;
			if (pass == 0) {
				rep[i] = median_runs(k, gpu, &x, n);
				double st = static_ms(path, pipe, sb[i], ss[i], &x, n);
				printf("%-8.8s %6ld %6ld %10.3f %10.4f %10.4f %10s %9.2e %s\n", strrchr(path, '/') ? strrchr(path, '/') + 1 : path,
				       (long)sb[i], (long)ss[i], first, rep[i], st, "", e, ok ? "ok" : "MISMATCH");
			} else {
				printf("%-8s %6ld %6ld %10s %10.4f %10s %10.3f %9.2e %s\n", "again", (long)sb[i], (long)ss[i], "",
				       rep[i], "", first, e, ok ? "ok" : "MISMATCH");
			}
			free_io(&x);
		}
	printf("%s\n", bad ? "SOME SHAPES DIFFER FROM THE INTERPRETER" : "every shape matches the interpreter");
	kfuse_compiled_free(gpu);
	kfuse_compiled_free(cpu);
	kfuse_model_free(m);
	kfuse_free(k);
	return bad ? 1 : 0;
}
