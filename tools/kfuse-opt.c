/* kfuse-opt: parse a .kf file, verify it, run a pass pipeline, print it. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "equiv.h"
#include "interp.h"
#include "kf.h"
#include "pass.h"
#include "passes.h"
#include "kfuse_int.h"
#include "cli.h"

static const char usage[] =
	"usage: kfuse-opt FILE.kf|FILE.onnx|- [options]\n"
	"Reads a model (- for stdin), verifies it, runs a pass pipeline and writes the result.\n"
	"  -o OUT                    write the result to OUT (default: stdout); its file(\"...\")\n"
	"                            paths and plugin lines are rewritten to name the same files\n"
	"  -p, --pipeline PIPELINE   passes to run, e.g. 'canonicalize,cse,rules,fuse,dce'\n"
	"                            (repeatable; `rules` alone applies the standard rules)\n"
	"  --emit=ir|dot|cuda|ptx    output the IR (default), Graphviz text, CUDA kernels or PTX\n"
	"  --print-ir-after-all      print the IR to stderr after every pass\n"
	"  --print-ir-after-change   ... after every pass that changed something\n"
	"  --print-ir-before=PASS    ... before each run of PASS (a comma list is fine)\n"
	"  --print-ir-after=PASS     ... after each run of PASS\n"
	"  --verify-each             verify every graph after each pass (default)\n"
	"  --no-verify-each          do not\n"
	"  --timing                  print wall time per phase and pass to stderr\n"
	"  --trace-rewrites          passes log each rewrite to stderr\n"
	"  --trace-rule NAME         the rules pass logs every candidate root of rule NAME (or of\n"
	"                            the rules NAME* names): how far its match got, and why it stopped\n"
	"  --explain-fusion          the fuse pass says why edges did not fuse\n"
	"  --list-passes             list the passes and their options\n"
	"  --check-equivalence       run input and result on random inputs and compare\n"
	"    --rtol R --atol A --seed N --trials T   (defaults 1e-4, 1e-5, 0, 3; after amp:\n"
	"    --l2 E                  relative L2 error 5e-2 for bf16, 1e-2 for f16)\n"
	"    --data-root DIR         file(\"...\") constants and plugin lines must resolve within\n"
	"                            DIR (default: anywhere)\n"
	"    --max-memory SIZE       memory budget of all tensors (8G, 512M; default 3/4 of RAM)\n"
	"  --plugin LIB.so|OPS.lua   load an op/pass plugin (repeatable)\n"
	"  --quiet                   no progress line (shown on a terminal when a pass runs past a second)\n"
	"  -h, --help, --version     (--version also names the standard rules' directory)\n"
	"Exit status: 0 done, 1 an error in the input, a pass or the check, 2 a usage error.\n";

typedef struct opt {
	const char *input, *output, *pipeline, *emit, *data_root;
	const char *before, *after;
	bool after_all, after_change, verify_each, timing, list, equiv, quiet;
	uint32_t flags;
	const char *trace_rule;
	double rtol, atol, l2;
	bool tol_given;  /* --rtol, --atol or --l2: no default by precision */
	uint64_t seed;
	int trials;
	const char **plugin;
	int nplugin;
} opt;

static char *join(const char *a, const char *b)
{
	size_t n = a ? strlen(a) : 0;
	char *s = malloc(n + strlen(b) + 2);
	if (!s)
		abort();
	sprintf(s, "%s%s%s", a ? a : "", a ? "," : "", b);
	free((char *)a);
	return s;
}

enum {
	O_EMIT = 256, O_BEFORE, O_AFTER, O_AFTER_ALL, O_AFTER_CHANGE, O_VERIFY, O_NO_VERIFY, O_TIMING,
	O_TRACE, O_TRACE_RULE, O_EXPLAIN, O_LIST, O_EQUIV, O_RTOL, O_ATOL, O_L2, O_SEED, O_TRIALS, O_PLUGIN, O_VERSION,
	O_QUIET, O_DATA_ROOT, O_MAXMEM,
};

static int check_args(int argc, char **argv, opt *o);

/* 0 to go on; else main returns parse_args's value - 1 (so --help is 0). */
static int parse_args(int argc, char **argv, opt *o)
{
	static const struct option longs[] = {
		{"pipeline", required_argument, 0, 'p'}, {"passes", required_argument, 0, 'p'},
		{"emit", required_argument, 0, O_EMIT},
		{"print-ir-before", required_argument, 0, O_BEFORE},
		{"print-ir-after", required_argument, 0, O_AFTER},
		{"print-ir-after-all", no_argument, 0, O_AFTER_ALL},
		{"print-ir-after-change", no_argument, 0, O_AFTER_CHANGE},
		{"verify-each", no_argument, 0, O_VERIFY}, {"no-verify-each", no_argument, 0, O_NO_VERIFY},
		{"timing", no_argument, 0, O_TIMING}, {"trace-rewrites", no_argument, 0, O_TRACE},
		{"trace-rule", required_argument, 0, O_TRACE_RULE},
		{"explain-fusion", no_argument, 0, O_EXPLAIN}, {"list-passes", no_argument, 0, O_LIST},
		{"check-equivalence", no_argument, 0, O_EQUIV}, {"rtol", required_argument, 0, O_RTOL},
		{"atol", required_argument, 0, O_ATOL}, {"l2", required_argument, 0, O_L2},
		{"seed", required_argument, 0, O_SEED},
		{"trials", required_argument, 0, O_TRIALS}, {"plugin", required_argument, 0, O_PLUGIN},
		{"quiet", no_argument, 0, O_QUIET},
		{"data-root", required_argument, 0, O_DATA_ROOT}, {"max-memory", required_argument, 0, O_MAXMEM},
		{"help", no_argument, 0, 'h'}, {"version", no_argument, 0, O_VERSION}, {0, 0, 0, 0},
	};
	int ch;
	long long n;
	uint64_t bytes;
	while ((ch = getopt_long(argc, argv, ":o:p:h", longs, NULL)) != -1) {
		switch (ch) {
		case 'h': fputs(usage, stdout); return 1;
		case O_VERSION: kf_cli_version_rules(); return 1;
		case 'o': o->output = optarg; break;
		case 'p': o->pipeline = join(o->pipeline, optarg); break;
		case O_EMIT: o->emit = optarg; break;
		case O_BEFORE: o->before = join(o->before, optarg); break;
		case O_AFTER: o->after = join(o->after, optarg); break;
		case O_AFTER_ALL: o->after_all = true; break;
		case O_AFTER_CHANGE: o->after_change = true; break;
		case O_VERIFY: o->verify_each = true; break;
		case O_NO_VERIFY: o->verify_each = false; break;
		case O_TIMING: o->timing = true; break;
		case O_TRACE: o->flags |= KF_PASSF_TRACE; break;
		case O_TRACE_RULE: o->trace_rule = optarg; break;
		case O_EXPLAIN: o->flags |= KF_PASSF_EXPLAIN; break;
		case O_LIST: o->list = true; break;
		case O_EQUIV: o->equiv = true; break;
		case O_QUIET: o->quiet = true; break;
		case O_DATA_ROOT: o->data_root = optarg; break;
		case O_MAXMEM:
			if (!kf_cli_size("--max-memory", optarg, &bytes))
				return kf_cli_status() + 1;
			kf_mem_set_budget(bytes);
			break;
		case O_RTOL:
			if (!kf_cli_double("--rtol", optarg, 0, &o->rtol))
				return kf_cli_status() + 1;
			o->tol_given = true;
			break;
		case O_ATOL:
			if (!kf_cli_double("--atol", optarg, 0, &o->atol))
				return kf_cli_status() + 1;
			o->tol_given = true;
			break;
		case O_L2:
			if (!kf_cli_double("--l2", optarg, 0, &o->l2))
				return kf_cli_status() + 1;
			if (o->l2 <= 0)
				return kf_cli_usage("--l2 needs a number > 0, not '%s'", optarg) + 1;
			o->tol_given = true;
			break;
		case O_SEED:
			if (!kf_cli_u64("--seed", optarg, &o->seed))
				return kf_cli_status() + 1;
			break;
		case O_TRIALS:
			if (!kf_cli_int("--trials", optarg, 1, 1000, &n))
				return kf_cli_status() + 1;
			o->trials = (int)n;
			break;
		case O_PLUGIN:
			o->plugin = realloc(o->plugin, (o->nplugin + 1) * sizeof *o->plugin);
			if (!o->plugin)
				abort();
			o->plugin[o->nplugin++] = optarg;
			break;
		default: return kf_cli_bad_option(ch, argv) + 1;
		}
	}
	return check_args(argc, argv, o);
}

/* The file operand and the --emit kind; parse_args's result. */
static int check_args(int argc, char **argv, opt *o)
{
	for (int i = optind; i < argc; i++) {
		if (o->input)
			return kf_cli_usage("more than one input file ('%s')", argv[i]) + 1;
		o->input = argv[i];
	}
	if (!o->emit)
		o->emit = "ir";
	if (strcmp(o->emit, "ir") && strcmp(o->emit, "dot") && strcmp(o->emit, "cuda") && strcmp(o->emit, "ptx"))
		return kf_cli_usage("unknown --emit kind '%s' (valid: ir dot cuda ptx)", o->emit) + 1;
	if (!o->input && !o->list)
		return kf_cli_usage("no input file (use - for stdin)") + 1;
	return 0;
}

static void list_passes(const kf_passreg *r)
{
	for (uint32_t i = 0; i < r->n; i++) {
		const kf_pass *p = r->p[i];
		printf("%-14s %s\n", p->name, p->doc ? p->doc : "");
		if (p->opts && p->opts[0]) {
			printf("%-14s options:", "");
			for (uint32_t k = 0; p->opts[k]; k++)
				printf(" %s", p->opts[k]);
			printf("\n");
		}
	}
}

/* ---- the progress line ------------------------------------------------------ */

/* One line on stderr, redrawn at most ten times a second, once a pass has
 * run for `after` seconds (KFUSE_PROGRESS_AFTER, default 1) on a terminal;
 * erased when the pass ends.  Passes report through the pass manager
 * (kf_progress_fn); this only draws. */
typedef struct progress {
	double after, t0, last;
	bool shown;
} progress;

static void draw_progress(void *ud, const char *pass, const kf_graph *g, uint64_t done, uint64_t total)
{
	progress *pr = ud;
	double now = kf_now();
	if (!pass) { /* the pass is done */
		if (pr->shown)
			fputs("\r\033[K", stderr);
		pr->shown = false;
		return;
	}
	if (!total) { /* it starts */
		pr->t0 = now;
		pr->last = 0;
		return;
	}
	if (now - pr->t0 < pr->after || now - pr->last < 0.1)
		return;
	pr->last = now;
	pr->shown = true;
	fprintf(stderr, "\rkfuse-opt: %s on @%s: %3.0f%% (%.1f s)\033[K", pass, kf_str(g->ctx, g->name),
		100.0 * (double)done / (double)total, now - pr->t0);
	fflush(stderr);
}

static void dump(void *ud, kf_module *m, const kf_pass *p, kf_dump_when when)
{
	kf_buf b = {0};
	kf_buf_printf(&b, "# -----// IR Dump %s %s //----- #\n", when == KF_DUMP_BEFORE ? "Before" : "After",
		      p->name);
	kf_print_module(&b, m);
	fwrite(b.p, 1, b.n, stderr);
	kf_buf_free(&b);
}

/* Kernels, PTX or dot text to path (stdout for none or "-"), written
 * atomically (kf_ofile, as kfuse_save writes the IR): a failure names the
 * file and leaves it as it was. */
static int write_out(kf_ctx *c, const char *path, const char *text, size_t len)
{
	int e = kf_write_file(path, text, len);
	if (e)
		kf_error(c, (kf_loc){kf_source_add(c, path && strcmp(path, "-") ? path : "<stdout>", NULL, 0), 0},
			 "cannot write: %s", kf_file_strerror(e));
	return e ? -1 : 0;
}

/* A copy of the input module for --check-equivalence: its printed text,
 * parsed again (print(parse(x)) is a fixed point, so this is the input). */
static kf_module *copy_module(kf_ctx *c, kf_module *m, const char *name)
{
	kf_buf b = {0};
	/* without the plugin lines: those plugins are loaded already, and the
	 * lines name them from the input's directory, not from here */
	uint32_t np = m->nplugin;
	m->nplugin = 0;
	kf_print_module(&b, m);
	m->nplugin = np;
	kf_module *cp = kf_parse(c, name, b.p ? b.p : "", b.n);
	kf_buf_free(&b);
	for (uint32_t i = 0; cp && i < cp->ngraph && i < m->ngraph; i++)
		cp->graph[i]->dir = m->graph[i]->dir;
	return cp;
}

/* The tolerance of one graph's check: as given (--rtol/--atol element by
 * element, --l2 by relative L2 error), else by the lowest precision the
 * result computes in (runtime/equiv.h). */
static kf_equiv_tol tolerance(kf_graph *after, const opt *o, char *what, size_t n)
{
	kf_equiv_tol t = {o->rtol, o->atol, o->l2};
	if (!o->tol_given)
		t = kf_equiv_default_tol(kf_equiv_precision(after));
	if (t.l2 > 0)
		snprintf(what, n, "a relative L2 error of %g", t.l2);
	else
		snprintf(what, n, "rtol=%g atol=%g", t.rtol, t.atol);
	return t;
}

static int check_equiv(kf_ctx *c, kf_module *before, kf_module *after, const opt *o)
{
	int worst = 0;
	for (uint32_t i = 0; i < before->ngraph && i < after->ngraph; i++) {
		kf_buf rep = {0};
		char what[80];
		kf_equiv_tol tol = tolerance(after->graph[i], o, what, sizeof what);
		int rc = kf_equiv_check_tol(before->graph[i], after->graph[i], o->seed, o->trials, &tol, &rep);
		if (rep.n)
			fprintf(stderr, "%.*s%s", (int)rep.n, rep.p, rep.p[rep.n - 1] == '\n' ? "" : "\n");
		kf_buf_free(&rep);
		if (rc < 0)
			return -1;
		if (rc > 0) {
			kf_error(c, after->graph[i]->loc, "@%s: the result differs from the input beyond %s",
				 kf_str(c, after->graph[i]->name), what);
			worst = 1;
		}
	}
	return worst ? -1 : 0;
}

/* Plugins load before the pipeline is parsed, so that their ops parse and
 * their passes can be named in -p. */
static int load_plugins(kfuse_ctx *k, kf_passreg *reg, const opt *o)
{
	for (int i = 0; i < o->nplugin; i++)
		if (kfuse_load_plugin(k, o->plugin[i]) < 0)
			return -1;
	kf_api_passes(k, reg);
	return 0;
}

/* Every name in --print-ir-before/after must be a pass: a typo would
 * otherwise print nothing and say nothing. */
static int check_names(kf_ctx *c, const kf_passreg *reg, const char *flag, const char *list)
{
	for (const char *s = list; s && *s;) {
		const char *e = strchr(s, ',');
		size_t n = e ? (size_t)(e - s) : strlen(s);
		if (!kf_passreg_find(reg, s, n)) {
			kf_error(c, KF_NOLOC, "%s: unknown pass '%.*s' (see --list-passes)", flag, (int)n, s);
			return -1;
		}
		s = e ? e + 1 : NULL;
	}
	return 0;
}

/* Through the embedding API (include/kfuse/kfuse.h): load, pipeline, save
 * or emit; the tool adds dumps, timing and the equivalence check. */
static int run(kfuse_ctx *k, kf_passreg *reg, opt *o, kf_timing *tm)
{
	kf_ctx *c = k->c;
	kf_ctx_set_data_root(c, o->data_root);
	if (check_names(c, reg, "--print-ir-before", o->before) < 0 ||
	    check_names(c, reg, "--print-ir-after", o->after) < 0)
		return -1;
	/* the pipeline's text first: a mistake in it is found before a big
	 * input is read */
	double t0 = kf_now();
	kf_pipeline *pl = kf_pipeline_parse(c, reg, o->pipeline ? o->pipeline : "");
	if (!pl)
		return -1;
	kf_pipeline_free(pl);
	kfuse_model *m = kfuse_load(k, o->input);
	kf_timing_add(tm, "parse and verify", kf_now() - t0);
	kf_module *orig = NULL;
	int rc = -1;
	kf_buf log = {0};
	char *text = NULL;
	size_t len = 0;
	if (!m)
		goto done;
	if (o->equiv && !(orig = copy_module(c, m->m, o->input)))
		goto done;
	kf_runopts ro = {
		.verify_each = o->verify_each, .after_all = o->after_all, .after_change = o->after_change,
		.before = o->before, .after = o->after, .flags = o->flags, .trace_rule = o->trace_rule, .log = &log, .timing = tm,
		.dump = dump,
	};
	const char *after = getenv("KFUSE_PROGRESS_AFTER");
	progress pr = {.after = after && *after ? atof(after) : 1.0};
	if (!o->quiet && isatty(2)) {
		ro.progress = draw_progress;
		ro.progress_ud = &pr;
	}
	int prc = kf_api_pipeline(m, o->pipeline, &ro);
	if (log.n)
		fwrite(log.p, 1, log.n, stderr);
	if (prc < 0)
		goto done;
	t0 = kf_now();
	if (!strcmp(o->emit, "ir") ? kfuse_save(m, o->output) < 0
				   : kfuse_emit(m, o->emit, &text, &len) < 0 || write_out(c, o->output, text, len) < 0)
		goto done;
	kf_timing_add(tm, "print", kf_now() - t0);
	if (orig) {
		t0 = kf_now();
		if (check_equiv(c, orig, m->m, o) < 0)
			goto done;
		kf_timing_add(tm, "check-equivalence", kf_now() - t0);
	}
	rc = 0;
done:
	kf_buf_free(&log);
	free(text);
	kf_module_free(orig);
	kfuse_model_free(m);
	return rc;
}

int main(int argc, char **argv)
{
	opt o = {.verify_each = true, .rtol = 1e-4, .atol = 1e-5, .trials = 3};
	kf_cli_init("kfuse-opt", 2);
	int st = parse_args(argc, argv, &o);
	if (st) {
		free((char *)o.pipeline);
		free((char *)o.before);
		free((char *)o.after);
		free(o.plugin);
		return st - 1;
	}
	kfuse_ctx *k = kfuse_new();
	kf_passreg reg = {0};
	int rc = 0;
	kf_timing tm = {0};
	if (load_plugins(k, &reg, &o) < 0)
		rc = 1;
	else if (o.list)
		list_passes(&reg);
	else if (run(k, &reg, &o, &tm) < 0)
		rc = 1;
	if (o.timing && tm.n) {
		kf_buf b = {0};
		kf_timing_render(&tm, &b);
		fwrite(b.p, 1, b.n, stderr);
		kf_buf_free(&b);
	}
	fputs(kfuse_error(k), stderr); /* errors, or warnings */
	kf_timing_free(&tm);
	kf_passreg_free(&reg);
	free((char *)o.pipeline);
	free((char *)o.before);
	free((char *)o.after);
	free(o.plugin);
	kfuse_free(k); /* and the Lua state and libraries plugins and rules live in */
	return rc;
}
