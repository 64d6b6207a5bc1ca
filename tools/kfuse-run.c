/* kfuse-run: parse a .kf file, verify it, run one graph on a backend and
 * print (and optionally write) its outputs. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "equiv.h"
#include "interp.h"
#include "cuda.h"
#include "cuda_backend.h"
#include "kf.h"
#include "npy.h"
#include "plugin.h"
#include "tensor.h"
#include "tune.h"

static const char usage[] =
	"usage: kfuse-run FILE.kf [options]\n"
	"  --graph NAME            the graph to run (default: the first)\n"
	"  --plugin FILE           load an op plugin (FILE.so, or FILE.lua with op{} declarations)\n"
	"                          before parsing, so graphs may use its ops; repeatable\n"
	"  --input NAME=FILE.npy   an input, by parameter name (without %) or index; repeatable\n"
	"  --random-inputs         inputs not given are random (normal floats, small ints)\n"
	"  --seed N                seed for --random-inputs (default 0)\n"
	"  --dim SYM=SIZE          size of a symbolic dim no input fixes (default 4); repeatable\n"
	"  --save-inputs DIR       write the inputs used as DIR/NAME.npy\n"
	"  --output-dir DIR        write output i as DIR/out<i>.npy\n"
	"  --backend=cpu|cuda|auto the backend (default cpu; auto: cuda when a GPU and its driver are there)\n"
	"  --compare=cpu           also run the CPU interpreter and compare (see --rtol/--atol)\n"
	"  --expect OUT=FILE.npy   compare output OUT (index or returned name) with a file\n"
	"  --rtol R --atol A       tolerances for --compare and --expect (default 1e-4, 1e-5)\n"
	"  --bench N               time N more runs, report median and min (cuda: device time of\n"
	"                          the captured CUDA graph, inputs resident; KFUSE_BENCH_FLUSH=1:\n"
	"                          256 MiB written before each run, a cold-L2 time)\n"
	"  --profile               cuda: per-kernel table (name, time, bytes, GB/s)\n"
	"  --no-graph              cuda: launch kernel by kernel, no CUDA graph (--bench too)\n"
	"  --tune                  cuda: time the tile configs of each contraction kernel, keep the\n"
	"                          fastest, record it in $KFUSE_CACHE_DIR/tune.txt (docs/matmul.md);\n"
	"                          --tune=force also re-tunes shapes the file has\n"
	"  --help, --version\n";

#define MAXKV 64

typedef struct opt {
	const char *file, *graph, *outdir, *savedir, *backend, *compare;
	const char *input[MAXKV], *dim[MAXKV], *expect[MAXKV], *plugin[MAXKV];
	int ninput, ndim, nexpect, nplugin, bench;
	bool random, profile, no_graph;
	int tune;            /* 1: --tune, 2: --tune=force */
	uint64_t seed;
	double rtol, atol;
} opt;

static int fail_usage(const char *fmt, const char *arg)
{
	fprintf(stderr, "kfuse-run: error: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n%s", usage);
	return 1;
}

/* `--name=value` or `--name value`; advances *i for the second form. */
static const char *optval(int argc, char **argv, int *i, const char *name)
{
	size_t n = strlen(name);
	if (strncmp(argv[*i], name, n) != 0)
		return NULL;
	if (argv[*i][n] == '=')
		return argv[*i] + n + 1;
	if (argv[*i][n] == 0 && *i + 1 < argc)
		return argv[++*i];
	return NULL;
}

static bool parse_num(const char *s, double *out)
{
	char *end;
	errno = 0;
	*out = strtod(s, &end);
	return s[0] && !*end && !errno;
}

static int parse_args(int argc, char **argv, opt *o)
{
	*o = (opt){.rtol = 1e-4, .atol = 1e-5, .backend = "cpu"};
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v;
		double d;
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			fputs(usage, stdout);
			exit(0);
		} else if (!strcmp(a, "--version")) {
			printf("kfuse-run %s\n", KF_VERSION);
			exit(0);
		} else if (!strcmp(a, "--random-inputs")) {
			o->random = true;
		} else if ((v = optval(argc, argv, &i, "--graph"))) {
			o->graph = v[0] == '@' ? v + 1 : v;
		} else if ((v = optval(argc, argv, &i, "--input"))) {
			if (o->ninput == MAXKV || !strchr(v, '='))
				return fail_usage("--input wants NAME=FILE.npy, not '%s'", v);
			o->input[o->ninput++] = v;
		} else if ((v = optval(argc, argv, &i, "--dim"))) {
			if (o->ndim == MAXKV || !strchr(v, '='))
				return fail_usage("--dim wants SYM=SIZE, not '%s'", v);
			o->dim[o->ndim++] = v;
		} else if ((v = optval(argc, argv, &i, "--plugin"))) {
			if (o->nplugin == MAXKV || !v[0])
				return fail_usage("--plugin wants a file (at most 64 of them), not '%s'", v);
			o->plugin[o->nplugin++] = v;
		} else if ((v = optval(argc, argv, &i, "--expect"))) {
			if (o->nexpect == MAXKV || !strchr(v, '='))
				return fail_usage("--expect wants OUT=FILE.npy, not '%s'", v);
			o->expect[o->nexpect++] = v;
		} else if ((v = optval(argc, argv, &i, "--seed"))) {
			if (!parse_num(v, &d) || d < 0)
				return fail_usage("--seed wants a number, not '%s'", v);
			o->seed = (uint64_t)d;
		} else if ((v = optval(argc, argv, &i, "--output-dir"))) {
			o->outdir = v;
		} else if ((v = optval(argc, argv, &i, "--save-inputs"))) {
			o->savedir = v;
		} else if ((v = optval(argc, argv, &i, "--backend"))) {
			o->backend = v;
		} else if ((v = optval(argc, argv, &i, "--compare"))) {
			if (strcmp(v, "cpu") != 0)
				return fail_usage("--compare knows only 'cpu', not '%s'", v);
			o->compare = v;
		} else if ((v = optval(argc, argv, &i, "--rtol"))) {
			if (!parse_num(v, &o->rtol) || o->rtol < 0)
				return fail_usage("--rtol wants a number >= 0, not '%s'", v);
		} else if ((v = optval(argc, argv, &i, "--atol"))) {
			if (!parse_num(v, &o->atol) || o->atol < 0)
				return fail_usage("--atol wants a number >= 0, not '%s'", v);
		} else if (!strcmp(a, "--tune") || !strcmp(a, "--tune=force")) {
			o->tune = a[6] ? 2 : 1;
		} else if (!strcmp(a, "--profile")) {
			o->profile = true;
		} else if (!strcmp(a, "--no-graph")) {
			o->no_graph = true;
		} else if ((v = optval(argc, argv, &i, "--bench"))) {
			if (!parse_num(v, &d) || d < 1 || d > 1e6)
				return fail_usage("--bench wants a count from 1, not '%s'", v);
			o->bench = (int)d;
		} else if (a[0] == '-' && a[1]) {
			return fail_usage("unknown or incomplete option '%s'", a);
		} else if (o->file) {
			return fail_usage("one input file only ('%s' is a second)", a);
		} else {
			o->file = a;
		}
	}
	if (!o->file)
		return fail_usage("%s", "no input file");
	return 0;
}

/* The backend named by --backend (runtime/backend.h).  auto: cuda when its
 * driver loads and a device is there, else the interpreter, said plainly. */
static kf_backend *pick_backend(kf_ctx *c, const char *name, const kf_cuda_opts *co)
{
	if (!strcmp(name, "cpu"))
		return kf_backend_cpu_new(c);
	if (!strcmp(name, "cuda"))
		return kf_backend_cuda_new(c, co);
	if (strcmp(name, "auto")) {
		kf_error(c, KF_NOLOC, "--backend: unknown backend '%s' (cpu, cuda, auto)", name);
		return NULL;
	}
	kf_backend *be = kf_backend_cuda_new(c, co);
	char why[512];
	if (!be || be->available(be, why, sizeof why))
		return be;
	kf_backend_free(be);
	fprintf(stderr, "kfuse-run: note: --backend=auto runs on the CPU interpreter: %s\n", why);
	return kf_backend_cpu_new(c);
}

static kf_graph *pick_graph(kf_ctx *c, kf_module *m, const char *name)
{
	for (uint32_t i = 0; i < m->ngraph; i++)
		if (!name || !strcmp(kf_str(c, m->graph[i]->name), name))
			return m->graph[i];
	if (!name) {
		kf_error(c, (kf_loc){m->src, 0}, "the file holds no graph");
		return NULL;
	}
	kf_buf have = {0};
	for (uint32_t i = 0; i < m->ngraph; i++)
		kf_buf_printf(&have, "%s@%s", i ? ", " : "", kf_str(c, m->graph[i]->name));
	kf_error(c, (kf_loc){m->src, 0}, "no graph @%s here (it has %.*s)", name, (int)have.n, have.p);
	kf_buf_free(&have);
	return NULL;
}

/* Index of the graph input called name (with or without '%', or a number). */
static int input_index(kf_graph *g, const char *name, size_t len)
{
	const kf_block *b0 = &g->blk[0];
	if (len && name[0] == '%')
		name++, len--;
	for (uint32_t i = 0; i < b0->narg; i++) {
		const char *s = kf_str(g->ctx, kf_V(g, b0->arg[i])->name);
		if (strlen(s) == len && !memcmp(s, name, len))
			return (int)i;
	}
	char *end;
	long k = strtol(name, &end, 10);
	return end == name + len && len && k >= 0 && (uint32_t)k < b0->narg ? (int)k : -1;
}

static int load_inputs(kf_graph *g, const opt *o, kf_tensor *in, bool *given)
{
	kf_ctx *c = g->ctx;
	const kf_block *b0 = &g->blk[0];
	for (int k = 0; k < o->ninput; k++) {
		const char *eq = strchr(o->input[k], '=');
		int i = input_index(g, o->input[k], (size_t)(eq - o->input[k]));
		if (i < 0) {
			kf_buf have = {0};
			for (uint32_t j = 0; j < b0->narg; j++)
				kf_buf_printf(&have, "%s%%%s", j ? ", " : "", kf_str(c, kf_V(g, b0->arg[j])->name));
			kf_error(c, KF_NOLOC, "--input %.*s: @%s has no such input (it takes %.*s)",
				 (int)(eq - o->input[k]), o->input[k], kf_str(c, g->name), (int)have.n,
				 have.p ? have.p : "");
			kf_buf_free(&have);
			return -1;
		}
		kf_tensor_free(&in[i]);
		given[i] = true;
		if (kf_npy_read(c, eq + 1, &in[i]) != 0)
			return -1;
	}
	return 0;
}

/* Random inputs where none was given: symbols sized by the inputs that were
 * given, then --dim, then 4. */
static int random_inputs(kf_graph *g, const opt *o, kf_tensor *in, const bool *given)
{
	kf_ctx *c = g->ctx;
	const kf_block *b0 = &g->blk[0];
	uint64_t rng = o->seed;
	for (uint32_t i = 0; i < b0->narg; i++) {
		if (given[i])
			continue;
		const kf_type *ty = kf_vtype(g, b0->arg[i]);
		int64_t dims[KF_MAX_RANK];
		for (int d = 0; d < ty->rank; d++) {
			dims[d] = ty->dim[d];
			if (!KF_IS_SYM(dims[d]))
				continue;
			const char *s = kf_str(c, KF_SYM_SID(dims[d]));
			int64_t size = -1;
			for (uint32_t j = 0; j < b0->narg && size < 0; j++) {
				const kf_type *tj = kf_vtype(g, b0->arg[j]);
				for (int e = 0; given[j] && e < tj->rank && e < in[j].rank; e++)
					if (tj->dim[e] == ty->dim[d])
						size = in[j].dim[e];
			}
			for (int k = 0; k < o->ndim && size < 0; k++) {
				const char *eq = strchr(o->dim[k], '=');
				if ((size_t)(eq - o->dim[k]) == strlen(s) && !strncmp(o->dim[k], s, strlen(s)))
					size = atoll(eq + 1);
			}
			dims[d] = size >= 0 ? size : 4;
		}
		if (kf_tensor_random(&in[i], (kf_dtype)ty->dtype, ty->rank, dims, &rng) != 0) {
			kf_error(c, KF_NOLOC, "cannot allocate random input %%%s",
				 kf_str(c, kf_V(g, b0->arg[i])->name));
			return -1;
		}
	}
	return 0;
}

static int ensure_dir(kf_ctx *c, const char *dir)
{
	if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
		kf_error(c, KF_NOLOC, "cannot create directory %s: %s", dir, strerror(errno));
		return -1;
	}
	return 0;
}

static int write_tensors(kf_ctx *c, const char *dir, const char *prefix, kf_graph *g, bool inputs,
			 const kf_tensor *t, uint32_t n)
{
	if (ensure_dir(c, dir) != 0)
		return -1;
	for (uint32_t i = 0; i < n; i++) {
		kf_buf path = {0};
		if (inputs)
			kf_buf_printf(&path, "%s/%s.npy", dir, kf_str(c, kf_V(g, g->blk[0].arg[i])->name));
		else
			kf_buf_printf(&path, "%s/%s%u.npy", dir, prefix, i);
		int rc = kf_npy_write(c, path.p, &t[i]);
		if (rc == 0 && !inputs)
			printf("wrote %s\n", path.p);
		kf_buf_free(&path);
		if (rc != 0)
			return -1;
	}
	return 0;
}

static void print_outputs(kf_graph *g, const kf_tensor *out)
{
	kf_nid ret = kf_block_terminator(g, 0);
	for (uint32_t i = 0; i < g->nres; i++) {
		kf_buf b = {0};
		const char *vn = ret != KF_NONE ? kf_str(g->ctx, kf_V(g, kf_in(g, ret, i))->name) : "";
		kf_buf_printf(&b, "out%u%s%s: ", i, vn[0] ? " %" : "", vn);
		kf_tensor_summary(&b, &out[i]);
		printf("%.*s\n", (int)b.n, b.p);
		kf_buf_free(&b);
	}
}

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

/* Times n runs from the host, for a backend without a device-side bench. */
static int bench(kf_plan *p, const kf_tensor *in, uint32_t nin, int n)
{
	kf_graph *g = p->g;
	double *ms = calloc(n, sizeof *ms);
	kf_tensor *out = calloc(g->nres + 1, sizeof *out);
	int rc = ms && out ? 0 : -1;
	for (int k = 0; k < n && rc == 0; k++) {
		double t0 = now_ms();
		rc = p->be->run(p, in, (int)nin, out, (int)g->nres);
		ms[k] = now_ms() - t0;
		for (uint32_t i = 0; i < g->nres; i++)
			kf_tensor_free(&out[i]);
	}
	if (rc == 0) {
		qsort(ms, n, sizeof *ms, cmp_double);
		printf("bench %s @%s: %d runs, median %.3f ms, min %.3f ms\n", p->be->name,
		       kf_str(g->ctx, g->name), n, ms[n / 2], ms[0]);
	}
	free(ms);
	free(out);
	return rc;
}

/* Runs the CPU interpreter too and compares each output with it. */
static int compare_cpu(kf_graph *g, const kf_tensor *in, uint32_t nin, const kf_tensor *out, const opt *o)
{
	kf_tensor *ref = calloc(g->nres + 1, sizeof *ref);
	int rc = ref ? kf_interp_run(g, in, (int)nin, ref, (int)g->nres) : -1;
	bool bad = false;
	for (uint32_t i = 0; rc == 0 && i < g->nres; i++) {
		kf_equiv_stat st;
		kf_equiv_compare(&out[i], &ref[i], o->rtol, o->atol, &st);
		kf_buf b = {0};
		kf_buf_printf(&b, "compare out%u with cpu: ", i);
		kf_equiv_describe(&b, &st);
		printf("%.*s [%s]\n", (int)b.n, b.p, st.nbad ? "MISMATCH" : "ok");
		kf_buf_free(&b);
		bad |= st.nbad != 0;
	}
	for (uint32_t i = 0; ref && i < g->nres; i++)
		kf_tensor_free(&ref[i]);
	free(ref);
	if (rc == 0 && bad)
		kf_error(g->ctx, g->loc, "outputs differ from the CPU interpreter beyond rtol=%g atol=%g",
			 o->rtol, o->atol);
	return rc != 0 || bad ? -1 : 0;
}

/* Index of the output called name: a number, or the returned value's name. */
static int output_index(kf_graph *g, const char *name, size_t len)
{
	kf_nid ret = kf_block_terminator(g, 0);
	if (len && name[0] == '%')
		name++, len--;
	for (uint32_t i = 0; ret != KF_NONE && i < g->nres; i++) {
		const char *s = kf_str(g->ctx, kf_V(g, kf_in(g, ret, i))->name);
		if (strlen(s) == len && !memcmp(s, name, len))
			return (int)i;
	}
	char *end;
	long k = strtol(name, &end, 10);
	return end == name + len && len && k >= 0 && (uint32_t)k < g->nres ? (int)k : -1;
}

/* --expect: each named output against a .npy file. */
static int check_expected(kf_graph *g, const kf_tensor *out, const opt *o)
{
	kf_ctx *c = g->ctx;
	bool bad = false;
	for (int k = 0; k < o->nexpect; k++) {
		const char *eq = strchr(o->expect[k], '=');
		int i = output_index(g, o->expect[k], (size_t)(eq - o->expect[k]));
		kf_tensor want = {0};
		if (i < 0) {
			kf_error(c, KF_NOLOC, "--expect %.*s: @%s has no such output (%u results)",
				 (int)(eq - o->expect[k]), o->expect[k], kf_str(c, g->name), g->nres);
			return -1;
		}
		if (kf_npy_read(c, eq + 1, &want) != 0)
			return -1;
		kf_equiv_stat st;
		kf_equiv_compare(&out[i], &want, o->rtol, o->atol, &st);
		kf_buf b = {0};
		kf_buf_printf(&b, "expect out%d = %s: ", i, eq + 1);
		kf_equiv_describe(&b, &st);
		printf("%.*s [%s]\n", (int)b.n, b.p, st.nbad ? "MISMATCH" : "ok");
		kf_buf_free(&b);
		kf_tensor_free(&want);
		bad |= st.nbad != 0;
	}
	if (bad)
		kf_error(c, g->loc, "outputs differ from the expected files beyond rtol=%g atol=%g", o->rtol,
			 o->atol);
	return bad ? -1 : 0;
}

/* cuda: the backend's notes and tables (plan, --profile), then the
 * device-side bench of the captured graph. */
static int cuda_report(kf_plan *p, kf_buf *report, int n)
{
	printf("%.*s", (int)report->n, report->p ? report->p : "");
	report->n = 0;
	kf_cuda_session *s = kf_cuda_plan_session(p);
	kf_graph *g = p->g;
	double med, mn;
	if (!n || !s)
		return 0;
	if (p->be->bench(p, n, &med, &mn) != 0)
		return -1;
	kf_cuda_stats st;
	kf_cuda_session_stats(s, &st);
	printf("bench cuda @%s: %d runs, median %.4f ms, min %.4f ms, %d kernels, %lld bytes in+out,"
	       " %.1f GB/s", kf_str(g->ctx, g->name), n, med, mn, st.kernels, (long long)st.graph_bytes,
	       st.graph_bytes / (med * 1e6));
	if (st.flush_bytes)
		printf(", cold L2 (%lld MiB written before each run)", (long long)(st.flush_bytes >> 20));
	printf("\n");
	return 0;
}

static int run(kf_ctx *c, const opt *o)
{
	kf_buf report = {0};
	kf_cuda_opts co = {.profile = o->profile, .no_graph = o->no_graph, .report = &report};
	kf_backend *be = pick_backend(c, o->backend, &co);
	bool cuda = be && !strcmp(be->name, "cuda");
	/* plugins first: their ops must be registered for the file to parse,
	 * and they bring their own CPU functions, which kf_rt_register keeps */
	bool ok = be != NULL;
	for (int i = 0; ok && i < o->nplugin; i++)
		ok = kf_plugin_load(c, o->plugin[i]) >= 0;
	kf_module *m = ok ? kf_parse_file(c, o->file) : NULL;
	kf_graph *g = m ? pick_graph(c, m, o->graph) : NULL;
	if (!g || kf_verify(g) > 0) {
		kf_module_free(m);
		kf_backend_free(be);
		return -1;
	}
	kf_rt_register(c);
	uint32_t nin = g->blk[0].narg;
	kf_tensor *in = calloc(nin + g->nres + 1, sizeof *in), *out = in + nin;
	bool *given = calloc(nin + 1, sizeof *given);
	int rc = in && given ? load_inputs(g, o, in, given) : -1;
	for (uint32_t i = 0; rc == 0 && i < nin; i++) {
		if (!given[i] && !o->random) {
			kf_error(c, g->loc, "@%s: input %%%s is not given (--input %s=FILE.npy, or --random-inputs)",
				 kf_str(c, g->name), kf_str(c, kf_V(g, g->blk[0].arg[i])->name),
				 kf_str(c, kf_V(g, g->blk[0].arg[i])->name));
			rc = -1;
		}
	}
	if (rc == 0 && o->random)
		rc = random_inputs(g, o, in, given);
	if (rc == 0 && o->savedir)
		rc = write_tensors(c, o->savedir, "", g, true, in, nin);
	if (rc == 0 && o->tune && !cuda) {
		kf_error(c, KF_NOLOC, "--tune needs --backend=cuda");
		rc = -1;
	}
	if (rc == 0 && o->tune) {
		kf_tune_opts to = {.reps = 20, .force = o->tune == 2, .report = &report};
		rc = kf_tune_graph(g, &to);
	}
	kf_plan *plan = NULL;
	if (rc == 0 && !(plan = be->compile(be, g)))
		rc = -1;
	if (rc == 0)
		rc = be->run(plan, in, (int)nin, out, (int)g->nres);
	if (rc == 0) {
		printf("@%s on %s:\n", kf_str(c, g->name), be->name);
		print_outputs(g, out);
	}
	if (rc == 0 && o->outdir)
		rc = write_tensors(c, o->outdir, "out", g, false, out, g->nres);
	if (rc == 0 && o->nexpect)
		rc = check_expected(g, out, o);
	if (rc == 0 && o->compare)
		rc = compare_cpu(g, in, nin, out, o);
	if (rc == 0 && cuda)
		rc = cuda_report(plan, &report, o->bench);
	else if (rc == 0 && o->bench)
		rc = bench(plan, in, nin, o->bench);
	for (uint32_t i = 0; in && i < nin + g->nres; i++)
		kf_tensor_free(&in[i]);
	free(in);
	free(given);
	if (report.n)
		printf("%.*s", (int)report.n, report.p);
	kf_buf_free(&report);
	kf_plan_free(plan);
	kf_backend_free(be);
	kf_module_free(m);
	return rc;
}

int main(int argc, char **argv)
{
	opt o;
	if (parse_args(argc, argv, &o) != 0)
		return 1;
	kf_ctx *c = kf_ctx_new();
	int rc = run(c, &o);
	fflush(stdout);
	kf_diag_flush(c, stderr);
	kf_ctx_free(c);
	return rc == 0 ? 0 : 1;
}
