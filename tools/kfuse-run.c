/* kfuse-run: parse a .kf file, verify it, run one graph on a backend and
 * print (and optionally write) its outputs. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "equiv.h"
#include "interp.h"
#include "cli.h"
#include "cuda.h"
#include "cuda_backend.h"
#include "dyn.h"
#include "kf.h"
#include "kfuse_int.h"
#include "npy.h"
#include "tensor.h"
#include "tune.h"

static const char usage[] =
	"usage: kfuse-run FILE.kf|FILE.onnx|- [options]\n"
	"Runs one graph of a model (- for stdin) on a backend and prints its outputs.\n"
	"  --graph NAME            the graph to run (default: the first)\n"
	"  --plugin FILE           load an op plugin (FILE.so, or FILE.lua with op{} declarations)\n"
	"                          before parsing, so graphs may use its ops; repeatable\n"
	"  --input NAME=FILE.npy   an input, by index (a number) or parameter name (%NAME or NAME);\n"
	"                          repeatable (a bf16 input also takes an f32 or f64 file, rounded)\n"
	"  --random-inputs         inputs not given are random (normal floats, small ints)\n"
	"  --seed N                seed for --random-inputs (default 0)\n"
	"  --dim SYM=SIZE          size of a symbolic dim no input fixes (default 4); repeatable\n"
	"  --shape SYM=N,SYM=N     with --random-inputs: run at these sizes too (after the first run),\n"
	"                          twice each (the first plans on a GPU backend, the second reuses it),\n"
	"                          timing both; repeatable, one session for all (docs/dynamic.md)\n"
	"  --shape-pipeline P      cuda, symbolic graph: the passes run on its copy specialised to each\n"
	"                          input shape (default canonicalize,cse,rules,fuse,dce)\n"
	"  --max-plans N           cuda, symbolic graph: plans kept, one per shape (LRU; default 8)\n"
	"  --save-inputs DIR       write the inputs used as DIR/NAME.npy\n"
	"  --output-dir DIR        write output i as DIR/out<i>.npy\n"
	"  --backend=cpu|cuda|auto the backend (default cpu; auto: cuda when a GPU and its driver are there)\n"
	"  --compare=cpu           also run the CPU interpreter and compare (see --rtol/--atol)\n"
	"  --expect OUT=FILE.npy   compare output OUT with a file: an index (a number; %0 names the\n"
	"                          value %0) or the name of a returned value\n"
	"  --rtol R --atol A       tolerances for --compare and --expect (default 1e-4, 1e-5)\n"
	"  --l2 E                  judge --compare and --expect by each output's relative L2\n"
	"                          error instead (at most E; NaN and infinities must agree)\n"
	"  --bench N               time N more runs, report median and min (cuda: device time of\n"
	"                          the captured CUDA graph, inputs resident; KFUSE_BENCH_FLUSH=1:\n"
	"                          256 MiB written before each run, a cold-L2 time)\n"
	"  --profile               cuda: per-kernel table (name, time, bytes, GB/s)\n"
	"  --no-graph              cuda: launch kernel by kernel, no CUDA graph (--bench too)\n"
	"  --tune                  cuda: time the tile configs of each contraction kernel, keep the\n"
	"                          fastest, record it in $KFUSE_CACHE_DIR/tune.txt (docs/matmul.md);\n"
	"                          --tune=force also re-tunes shapes the file has\n"
	"  --data-root DIR         file(\"...\") constants and plugin lines must resolve within\n"
	"                          DIR (links followed, then checked; default: anywhere): for\n"
	"                          models from elsewhere\n"
	"  --max-memory SIZE       memory budget of all tensors (e.g. 8G, 512M; default 3/4 of\n"
	"                          physical memory)\n"
	"  --compile-only          cuda without a GPU: plan the graph at its inputs' shapes (and each\n"
	"                          --shape) and compile every kernel for sm_90 with NVRTC; nothing\n"
	"                          runs. Reports the kernels each shape compiled (0: all were in the\n"
	"                          cache): checks a model compiles for the GPU, or fills the kernel\n"
	"                          cache ($KFUSE_CACHE_DIR) on a build machine\n"
	"  --allow-tf32            cuda: f32 contractions and attention may round their inputs to tf32\n"
	"                          for the tensor cores (PyTorch's allow_tf32; off by default; about\n"
	"                          3e-4 relative error: docs/matmul.md, \"TF32\")\n"
	"  -h, --help, --version\n"
	"Exit status: 0 done (and every check passed), 1 an error or a failed check, 2 a usage error.\n";

#define MAXKV 64

typedef struct opt {
	const char *file, *graph, *outdir, *savedir, *backend, *compare, *data_root;
	const char *input[MAXKV], *dim[MAXKV], *expect[MAXKV], *plugin[MAXKV], *shape[MAXKV];
	const char *shape_pipeline;
	int ninput, ndim, nexpect, nplugin, bench, nshape, max_plans;
	bool random, profile, no_graph, tf32, compile_only;
	int tune;            /* 1: --tune, 2: --tune=force */
	uint64_t seed;
	double rtol, atol, l2;
} opt;

enum {
	O_GRAPH = 256, O_PLUGIN, O_INPUT, O_RANDOM, O_SEED, O_DIM, O_SAVE, O_OUTDIR, O_BACKEND, O_COMPARE,
	O_EXPECT, O_RTOL, O_ATOL, O_L2, O_BENCH, O_PROFILE, O_NO_GRAPH, O_TUNE, O_VERSION,
	O_DATA_ROOT, O_MAXMEM, O_TF32, O_SHAPE, O_SHAPE_PIPELINE, O_MAX_PLANS,
	O_COMPILE_ONLY,
};

/* Appends v to list (at most MAXKV) when it has an '='; else a usage error. */
static bool add_kv(const char **list, int *n, const char *opt, const char *want, const char *v)
{
	if (*n == MAXKV || !strchr(v, '=')) {
		kf_cli_usage("%s wants %s, not '%s' (at most %d of them)", opt, want, v, MAXKV);
		return false;
	}
	list[(*n)++] = v;
	return true;
}

static int check_args(int argc, char **argv, opt *o);

/* 0 to go on; else main returns parse_args's value - 1 (so --help is 0). */
static int parse_args(int argc, char **argv, opt *o)
{
	static const struct option longs[] = {
		{"graph", required_argument, 0, O_GRAPH}, {"plugin", required_argument, 0, O_PLUGIN},
		{"input", required_argument, 0, O_INPUT}, {"random-inputs", no_argument, 0, O_RANDOM},
		{"seed", required_argument, 0, O_SEED}, {"dim", required_argument, 0, O_DIM},
		{"save-inputs", required_argument, 0, O_SAVE}, {"output-dir", required_argument, 0, O_OUTDIR},
		{"backend", required_argument, 0, O_BACKEND}, {"compare", required_argument, 0, O_COMPARE},
		{"expect", required_argument, 0, O_EXPECT}, {"rtol", required_argument, 0, O_RTOL},
		{"atol", required_argument, 0, O_ATOL}, {"bench", required_argument, 0, O_BENCH},
		{"l2", required_argument, 0, O_L2},
		{"profile", no_argument, 0, O_PROFILE}, {"no-graph", no_argument, 0, O_NO_GRAPH},
		{"tune", optional_argument, 0, O_TUNE}, {"allow-tf32", no_argument, 0, O_TF32},
		{"help", no_argument, 0, 'h'},
		{"version", no_argument, 0, O_VERSION}, {"data-root", required_argument, 0, O_DATA_ROOT},
		{"max-memory", required_argument, 0, O_MAXMEM}, {"shape", required_argument, 0, O_SHAPE},
		{"shape-pipeline", required_argument, 0, O_SHAPE_PIPELINE},
		{"max-plans", required_argument, 0, O_MAX_PLANS}, {"compile-only", no_argument, 0, O_COMPILE_ONLY},
		{0, 0, 0, 0},
	};
	*o = (opt){.rtol = 1e-4, .atol = 1e-5, .backend = "cpu", .shape_pipeline = "canonicalize,cse,rules,fuse,dce"};
	int ch;
	long long n;
	uint64_t bytes;
	bool ok = true;
	while (ok && (ch = getopt_long(argc, argv, ":h", longs, NULL)) != -1) {
		switch (ch) {
		case 'h': fputs(usage, stdout); return 1;
		case O_VERSION: kf_cli_version(); return 1;
		case O_RANDOM: o->random = true; break;
		case O_GRAPH: o->graph = optarg[0] == '@' ? optarg + 1 : optarg; break;
		case O_INPUT: ok = add_kv(o->input, &o->ninput, "--input", "NAME=FILE.npy", optarg); break;
		case O_DIM: ok = add_kv(o->dim, &o->ndim, "--dim", "SYM=SIZE", optarg); break;
		case O_SHAPE: ok = add_kv(o->shape, &o->nshape, "--shape", "SYM=N,SYM=N", optarg); break;
		case O_SHAPE_PIPELINE: o->shape_pipeline = optarg; break;
		case O_MAX_PLANS:
			ok = kf_cli_int("--max-plans", optarg, 1, 4096, &n);
			o->max_plans = (int)n;
			break;
		case O_EXPECT: ok = add_kv(o->expect, &o->nexpect, "--expect", "OUT=FILE.npy", optarg); break;
		case O_PLUGIN:
			if (o->nplugin == MAXKV || !optarg[0])
				return kf_cli_usage("--plugin wants a file (at most %d of them), not '%s'", MAXKV,
						    optarg) + 1;
			o->plugin[o->nplugin++] = optarg;
			break;
		case O_SEED: ok = kf_cli_u64("--seed", optarg, &o->seed); break;
		case O_OUTDIR: o->outdir = optarg; break;
		case O_DATA_ROOT: o->data_root = optarg; break;
		case O_MAXMEM:
			ok = kf_cli_size("--max-memory", optarg, &bytes);
			if (ok)
				kf_mem_set_budget(bytes);
			break;
		case O_SAVE: o->savedir = optarg; break;
		case O_BACKEND:
			if (strcmp(optarg, "cpu") && strcmp(optarg, "cuda") && strcmp(optarg, "auto"))
				return kf_cli_usage("--backend is cpu, cuda or auto, not '%s'", optarg) + 1;
			o->backend = optarg;
			break;
		case O_COMPARE:
			if (strcmp(optarg, "cpu") != 0)
				return kf_cli_usage("--compare knows only 'cpu', not '%s'", optarg) + 1;
			o->compare = optarg;
			break;
		case O_RTOL: ok = kf_cli_double("--rtol", optarg, 0, &o->rtol); break;
		case O_ATOL: ok = kf_cli_double("--atol", optarg, 0, &o->atol); break;
		case O_L2: ok = kf_cli_double("--l2", optarg, 0, &o->l2) && o->l2 > 0; break;
		case O_TUNE:
			if (optarg && strcmp(optarg, "force"))
				return kf_cli_usage("--tune takes no value or =force, not '%s'", optarg) + 1;
			o->tune = optarg ? 2 : 1;
			break;
		case O_PROFILE: o->profile = true; break;
		case O_TF32: o->tf32 = true; break;
		case O_NO_GRAPH: o->no_graph = true; break;
		case O_COMPILE_ONLY: o->compile_only = o->random = true; break;
		case O_BENCH:
			ok = kf_cli_int("--bench", optarg, 1, 1000000, &n);
			o->bench = (int)n;
			break;
		default: return kf_cli_bad_option(ch, argv) + 1;
		}
	}
	if (!ok)
		return kf_cli_status() + 1;
	return check_args(argc, argv, o);
}

/* The file operand and the options that need each other; parse_args's
 * result. */
static int check_args(int argc, char **argv, opt *o)
{
	for (int i = optind; i < argc; i++) {
		if (o->file)
			return kf_cli_usage("one input file only ('%s' is a second)", argv[i]) + 1;
		o->file = argv[i];
	}
	if (!o->file)
		return kf_cli_usage("no input file (use - for stdin)") + 1;
	if (o->nshape && !o->random)
		return kf_cli_usage("--shape needs --random-inputs (it sizes the random inputs)") + 1;
	if (o->compile_only && (strcmp(o->backend, "cpu") && strcmp(o->backend, "cuda")))
		return kf_cli_usage("--compile-only plans for cuda; --backend=%s says otherwise", o->backend) + 1;
	if (o->compile_only && (o->tune || o->bench || o->profile || o->compare || o->nexpect || o->outdir))
		return kf_cli_usage("--compile-only runs nothing: --tune, --bench, --profile, --compare, --expect and "
				    "--output-dir need a run") + 1;
	return 0;
}

/* Index of the graph input called name (with or without '%', or a number). */
/* The position named by NAME in --input NAME=... and --expect NAME=...: a
 * bare number is a position, %NAME (or any other text) a value name.  A
 * number is never read as a name first: rewrites name values %0, %1, ...
 * in their own order, so "0" as a name can be another output than output 0. */
static int slot_index(kf_graph *g, const kf_vid *vals, uint32_t n, const char *name, size_t len)
{
	char *end;
	long k = len && name[0] >= '0' && name[0] <= '9' ? strtol(name, &end, 10) : -1;
	if (k >= 0 && end == name + len)
		return (uint32_t)k < n ? (int)k : -1;
	if (len && name[0] == '%')
		name++, len--;
	for (uint32_t i = 0; i < n; i++) {
		const char *s = kf_str(g->ctx, kf_V(g, vals[i])->name);
		if (strlen(s) == len && !memcmp(s, name, len))
			return (int)i;
	}
	return -1;
}

static int input_index(kf_graph *g, const char *name, size_t len)
{
	return slot_index(g, g->blk[0].arg, g->blk[0].narg, name, len);
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
		bool rounded;
		kf_vid p = b0->arg[i];
		if (kf_npy_read_input(c, eq + 1, (kf_dtype)kf_vtype(g, p)->dtype, &in[i], &rounded) != 0)
			return -1;
		if (rounded) /* numpy has no bf16: PyTorch users save x.float() */
			fprintf(stderr, "kfuse-run: %s: rounded to bf16 for input %d (%%%s)\n", eq + 1, i,
				kf_str(c, kf_V(g, p)->name));
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
			char why[200];
			kf_tensor_why(why, sizeof why, (kf_dtype)ty->dtype, ty->rank, dims);
			kf_error(c, KF_NOLOC, "cannot allocate random input %%%s: %s",
				 kf_str(c, kf_V(g, b0->arg[i])->name), why);
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
	kf_equiv_tol tol = {o->rtol, o->atol, o->l2};
	bool bad = false;
	for (uint32_t i = 0; rc == 0 && i < g->nres; i++) {
		kf_equiv_stat st;
		kf_equiv_compare(&out[i], &ref[i], o->rtol, o->atol, &st);
		bool b_i = kf_equiv_bad(&st, &tol);
		kf_buf b = {0};
		kf_buf_printf(&b, "compare out%u with cpu: ", i);
		kf_equiv_describe_tol(&b, &st, &tol);
		printf("%.*s [%s]\n", (int)b.n, b.p, b_i ? "MISMATCH" : "ok");
		kf_buf_free(&b);
		bad |= b_i;
	}
	for (uint32_t i = 0; ref && i < g->nres; i++)
		kf_tensor_free(&ref[i]);
	free(ref);
	if (rc == 0 && bad) {
		kf_buf t = {0};
		kf_equiv_tol_describe(&t, &tol);
		kf_error(g->ctx, g->loc, "outputs differ from the CPU interpreter beyond %s", t.p);
		kf_buf_free(&t);
	}
	return rc != 0 || bad ? -1 : 0;
}

/* Index of the output called name: a number, or the returned value's name. */
static int output_index(kf_graph *g, const char *name, size_t len)
{
	kf_nid ret = kf_block_terminator(g, 0);
	if (ret == KF_NONE)
		return -1;
	uint32_t n = kf_N(g, ret)->nin;
	kf_vid *v = malloc((n ? n : 1) * sizeof *v);
	if (!v)
		return -1;
	for (uint32_t i = 0; i < n; i++)
		v[i] = kf_in(g, ret, i);
	int k = slot_index(g, v, n, name, len);
	free(v);
	return k;
}

/* --expect: each named output against a .npy file. */
static int check_expected(kf_graph *g, const kf_tensor *out, const opt *o)
{
	kf_ctx *c = g->ctx;
	kf_equiv_tol tol = {o->rtol, o->atol, o->l2};
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
		bool b_i = kf_equiv_bad(&st, &tol);
		kf_buf b = {0};
		kf_buf_printf(&b, "expect out%d = %s: ", i, eq + 1);
		kf_equiv_describe_tol(&b, &st, &tol);
		printf("%.*s [%s]\n", (int)b.n, b.p, b_i ? "MISMATCH" : "ok");
		kf_buf_free(&b);
		kf_tensor_free(&want);
		bad |= b_i;
	}
	if (bad) {
		kf_buf t = {0};
		kf_equiv_tol_describe(&t, &tol);
		kf_error(c, g->loc, "outputs differ from the expected files beyond %s", t.p);
		kf_buf_free(&t);
	}
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

/* The plan that ran last: a symbolic graph's for the last shape (dyn.h). */
static kf_plan *last_plan(kfuse_compiled *x)
{
	return kf_dyn_is(x->plan) ? kf_dyn_last(x->plan) : x->plan;
}

/* o with --shape's sizes (SYM=N,SYM=N, split into buf) before its --dim
 * ones, so that they size the random inputs. */
static int shape_opt(kf_ctx *c, const opt *o, const char *shape, opt *o2, char *buf, size_t n)
{
	*o2 = *o;
	o2->ndim = 0;
	snprintf(buf, n, "%s", shape);
	for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
		const char *eq = strchr(tok, '=');
		char *end;
		long long v = eq ? strtoll(eq + 1, &end, 10) : -1;
		if (!eq || eq == tok || !eq[1] || *end || v < 0 || o2->ndim == MAXKV) {
			kf_error(c, KF_NOLOC, "--shape %s: '%s' is not SYM=SIZE (a non-negative int)", shape, tok);
			return -1;
		}
		o2->dim[o2->ndim++] = tok;
	}
	for (int i = 0; i < o->ndim && o2->ndim < MAXKV; i++)
		o2->dim[o2->ndim++] = o->dim[i];
	return 0;
}

/* in[0..nin) replaced by new random inputs of --shape's sizes. */
static int shape_inputs(kf_graph *g, const opt *o, const char *shape, kf_tensor *in)
{
	uint32_t nin = g->blk[0].narg;
	char buf[1024];
	opt o2;
	bool *given = calloc(nin + 1, sizeof *given);
	int rc = given ? shape_opt(g->ctx, o, shape, &o2, buf, sizeof buf) : -1;
	for (uint32_t i = 0; i < nin; i++)
		kf_tensor_free(&in[i]);
	if (rc == 0)
		rc = random_inputs(g, &o2, in, given);
	free(given);
	return rc;
}

/* --shape: new random inputs of those sizes, run twice through the same
 * compiled graph (the first run of a new shape plans it, the second finds
 * the plan: both timed from the host), checked and reported as the first
 * run is.  in[] holds the inputs, then the outputs. */
static int run_shape(kfuse_compiled *x, kf_graph *g, const opt *o, const char *shape, kf_tensor *in,
		     kf_buf *report, bool cuda)
{
	uint32_t nin = g->blk[0].narg;
	kf_tensor *out = in + nin;
	int rc = shape_inputs(g, o, shape, in);
	double ms[2] = {0};
	for (int k = 0; rc == 0 && k < 2; k++) {
		for (uint32_t i = 0; i < g->nres; i++)
			kf_tensor_free(&out[i]);
		double t0 = now_ms();
		rc = kf_api_run(x, in, (int)nin, out, (int)g->nres);
		ms[k] = now_ms() - t0;
	}
	if (rc == 0) {
		printf("@%s at %s on %s: first run %.3f ms, repeat %.3f ms\n", kf_str(g->ctx, g->name), shape,
		       kfuse_compiled_backend(x), ms[0], ms[1]);
		print_outputs(g, out);
	}
	if (rc == 0 && o->compare)
		rc = compare_cpu(g, in, nin, out, o);
	if (rc == 0 && cuda)
		return cuda_report(last_plan(x), report, o->bench);
	printf("%.*s", (int)report->n, report->p ? report->p : "");
	report->n = 0;
	return rc;
}

/* --compile-only: x planned (kernels compiled, nothing run) at in's shapes
 * and at each --shape's, with a line each.  in[] holds the inputs. */
static int compile_only(kfuse_compiled *x, kf_graph *g, const opt *o, kf_tensor *in)
{
	uint32_t nin = g->blk[0].narg;
	int rc = 0;
	for (int i = -1; rc == 0 && i < o->nshape; i++) {
		if (i >= 0)
			rc = shape_inputs(g, o, o->shape[i], in);
		kf_plan *p = rc != 0 ? NULL : kf_dyn_is(x->plan) ? kf_dyn_plan_for(x->plan, in, (int)nin) : x->plan;
		kf_cuda_session *s = p ? kf_cuda_plan_session(p) : NULL;
		if (!s)
			return -1;
		kf_cuda_stats st;
		kf_cuda_session_stats(s, &st);
		printf("@%s%s%s compiled for %s (no GPU): %d kernels, %d compiled now, %d from the cache\n",
		       kf_str(g->ctx, g->name), i >= 0 ? " at " : "", i >= 0 ? o->shape[i] : "",
		       kf_cuda_session_arch(s), st.kernels, st.compiled, st.cached);
	}
	return rc;
}

/* The inputs not given: random with --random-inputs, else an error naming
 * the first; then --save-inputs. */
static int complete_inputs(kf_graph *g, const opt *o, kf_tensor *in, const bool *given)
{
	kf_ctx *c = g->ctx;
	uint32_t nin = g->blk[0].narg;
	for (uint32_t i = 0; i < nin; i++) {
		if (!given[i] && !o->random) {
			kf_error(c, g->loc, "@%s: input %%%s is not given (--input %s=FILE.npy, or --random-inputs)",
				 kf_str(c, g->name), kf_str(c, kf_V(g, g->blk[0].arg[i])->name),
				 kf_str(c, kf_V(g, g->blk[0].arg[i])->name));
			return -1;
		}
	}
	int rc = o->random ? random_inputs(g, o, in, given) : 0;
	if (rc == 0 && o->savedir)
		rc = write_tensors(c, o->savedir, "", g, true, in, nin);
	return rc;
}

/* --allow-tf32 and --tune, which need the cuda backend. */
static int tune(kf_graph *g, const opt *o, bool cuda, kf_buf *report)
{
	kf_ctx *c = g->ctx;
	if (o->tune && !cuda) {
		kf_error(c, KF_NOLOC, "--tune needs --backend=cuda");
		return -1;
	}
	if (o->tf32 && !cuda) {
		kf_error(c, KF_NOLOC, "--allow-tf32 needs --backend=cuda (the interpreter computes f32 exactly)");
		return -1;
	}
	/* before tuning: the tuner keys and tries tf32 configs */
	if (o->tf32)
		kf_tune_allow_tf32(g);
	if (!o->tune)
		return 0;
	kf_tune_opts to = {.reps = 20, .force = o->tune == 2, .report = report};
	return kf_tune_graph(g, &to);
}

/* Through the embedding API (include/kfuse/kfuse.h): the tool adds its
 * inputs (files, random), reports and checks. */
static int run(kfuse_ctx *k, const opt *o)
{
	kf_ctx *c = k->c;
	kf_buf report = {0};
	kf_cuda_opts co = {.profile = o->profile, .no_graph = o->no_graph, .allow_tf32 = o->tf32, .report = &report,
			   .dry_run = o->compile_only};
	char why[512] = "";
	kf_backend *be = kf_api_backend(c, o->compile_only ? "cuda" : o->backend, &co, why, sizeof why);
	if (be && why[0])
		fprintf(stderr, "kfuse-run: note: --backend=auto runs on the CPU interpreter: %s\n", why);
	bool cuda = be && !strcmp(be->name, "cuda");
	/* plugins first: their ops must be registered for the file to parse,
	 * and they bring their own CPU functions, which kf_rt_register keeps */
	bool ok = be != NULL;
	for (int i = 0; ok && i < o->nplugin; i++)
		ok = kfuse_load_plugin(k, o->plugin[i]) == 0;
	kfuse_model *m = ok ? kfuse_load(k, o->file) : NULL;
	kf_graph *g = m ? kf_api_graph(m, o->graph) : NULL;
	if (!g) {
		kfuse_model_free(m);
		kf_backend_free(be);
		return -1;
	}
	uint32_t nin = g->blk[0].narg;
	kf_tensor *in = calloc(nin + g->nres + 1, sizeof *in), *out = in + nin;
	bool *given = calloc(nin + 1, sizeof *given);
	int rc = in && given ? load_inputs(g, o, in, given) : -1;
	if (rc == 0)
		rc = complete_inputs(g, o, in, given);
	if (rc == 0)
		rc = tune(g, o, cuda, &report);
	kfuse_compiled *x = NULL;
	if (rc == 0) {
		kf_dyn_opts dyn = {.pipeline = o->shape_pipeline, .max_plans = o->max_plans, .report = &report,
				   .dims = o->dim, .ndim = o->ndim};
		x = kf_api_compile_dyn(m, o->graph, be, &dyn); /* owns be from here on */
		be = NULL;
		rc = x ? 0 : -1;
	}
	if (rc == 0 && o->compile_only) {
		rc = compile_only(x, g, o, in);
		goto done;
	}
	if (rc == 0)
		rc = kf_api_run(x, in, (int)nin, out, (int)g->nres);
	if (rc == 0) {
		printf("@%s on %s:\n", kf_str(c, g->name), kfuse_compiled_backend(x));
		print_outputs(g, out);
	}
	if (rc == 0 && o->outdir)
		rc = write_tensors(c, o->outdir, "out", g, false, out, g->nres);
	if (rc == 0 && o->nexpect)
		rc = check_expected(g, out, o);
	if (rc == 0 && o->compare)
		rc = compare_cpu(g, in, nin, out, o);
	if (rc == 0 && cuda)
		rc = cuda_report(last_plan(x), &report, o->bench);
	else if (rc == 0 && o->bench)
		rc = bench(x->plan, in, nin, o->bench);
	for (int i = 0; rc == 0 && i < o->nshape; i++)
		rc = run_shape(x, g, o, o->shape[i], in, &report, cuda);
done:
	for (uint32_t i = 0; in && i < nin + g->nres; i++)
		kf_tensor_free(&in[i]);
	free(in);
	free(given);
	if (report.n)
		printf("%.*s", (int)report.n, report.p);
	kf_buf_free(&report);
	kfuse_compiled_free(x);
	kf_backend_free(be);
	kfuse_model_free(m);
	return rc;
}

int main(int argc, char **argv)
{
	opt o;
	kf_cli_init("kfuse-run", 2);
	int st = parse_args(argc, argv, &o);
	if (st)
		return st - 1;
	kfuse_ctx *k = kfuse_new();
	kf_ctx_set_data_root(k->c, o.data_root);
	int rc = run(k, &o);
	int e = kf_stdout_flush(); /* what was printed must get out, or the run fails */
	if (e) {
		kf_error(k->c, (kf_loc){kf_source_add(k->c, "<stdout>", NULL, 0), 0}, "cannot write: %s",
			 kf_file_strerror(e));
		rc = -1;
	}
	fputs(kfuse_error(k), stderr);
	kfuse_free(k);
	return rc == 0 ? 0 : 1;
}
