/* kfuse-opt: parse a .kf file, verify it, run a pass pipeline, print it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "equiv.h"
#include "interp.h"
#include "kf.h"
#include "pass.h"
#include "passes.h"
#include "emit_cuda.h"
#include "plugin.h"

static const char usage[] =
	"usage: kfuse-opt FILE|- [options]\n"
	"  -o OUT                    write the result to OUT (default: stdout)\n"
	"  -p, --pipeline PIPELINE   passes to run, e.g. 'canonicalize,cse,rules{path=patterns},dce'\n"
	"  --emit=ir|dot|cuda|ptx    output the IR (default), Graphviz text, CUDA kernels or PTX\n"
	"  --print-ir-after-all      print the IR to stderr after every pass\n"
	"  --print-ir-after-change   ... after every pass that changed something\n"
	"  --print-ir-before=PASS    ... before each run of PASS (a comma list is fine)\n"
	"  --print-ir-after=PASS     ... after each run of PASS\n"
	"  --verify-each             verify every graph after each pass (default)\n"
	"  --no-verify-each          do not\n"
	"  --timing                  print wall time per phase and pass to stderr\n"
	"  --trace-rewrites          passes log each rewrite to stderr\n"
	"  --explain-fusion          the fuse pass says why edges did not fuse\n"
	"  --list-passes             list the passes and their options\n"
	"  --check-equivalence       run input and result on random inputs and compare\n"
	"    --rtol R --atol A --seed N --trials T   (defaults 1e-4, 1e-5, 0, 3; after amp:\n"
	"    --l2 E                  relative L2 error 5e-2 for bf16, 1e-2 for f16)\n"
	"  --plugin LIB.so|OPS.lua   load an op/pass plugin (repeatable)\n"
	"  --help, --version\n";

typedef struct opt {
	const char *input, *output, *pipeline, *emit;
	const char *before, *after;
	bool after_all, after_change, verify_each, timing, list, equiv;
	uint32_t flags;
	double rtol, atol, l2;
	bool tol_given;  /* --rtol, --atol or --l2: no default by precision */
	uint64_t seed;
	int trials;
	const char **plugin;
	int nplugin;
} opt;

static int fail_usage(const char *fmt, const char *arg)
{
	fprintf(stderr, "kfuse-opt: error: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n%s", usage);
	return 1;
}

/* `--name=value` or `--name value`; advances *i for the second form. */
static const char *optval(int argc, char **argv, int *i, const char *name)
{
	size_t n = strlen(name);
	const char *a = argv[*i];
	if (strncmp(a, name, n))
		return NULL;
	if (a[n] == '=')
		return a + n + 1;
	if (a[n] == 0 && *i + 1 < argc)
		return argv[++*i];
	return NULL;
}

static char *join(const char *a, const char *b)
{
	size_t n = a ? strlen(a) : 0;
	char *s = malloc(n + strlen(b) + 2);
	if (!s)
		abort();
	sprintf(s, "%s%s%s", a ? a : "", a ? "," : "", b);
	return s;
}

static bool num(const char *s, double *out)
{
	char *e;
	errno = 0;
	*out = strtod(s, &e);
	return e != s && !*e && !errno;
}

static int parse_args(int argc, char **argv, opt *o)
{
	const char *v;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		double d;
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			fputs(usage, stdout);
			exit(0);
		} else if (!strcmp(a, "--version")) {
			printf("kfuse-opt %s\n", KF_VERSION);
			exit(0);
		} else if (!strcmp(a, "-o") && i + 1 < argc) {
			o->output = argv[++i];
		} else if (!strncmp(a, "-o", 2) && a[2]) {
			o->output = a + 2;
		} else if ((v = optval(argc, argv, &i, "-p")) || (v = optval(argc, argv, &i, "--pipeline")) ||
			   (v = optval(argc, argv, &i, "--passes"))) {
			o->pipeline = join(o->pipeline, v);
		} else if ((v = optval(argc, argv, &i, "--emit"))) {
			o->emit = v;
		} else if ((v = optval(argc, argv, &i, "--print-ir-before"))) {
			o->before = join(o->before, v);
		} else if ((v = optval(argc, argv, &i, "--print-ir-after"))) {
			o->after = join(o->after, v);
		} else if (!strcmp(a, "--print-ir-after-all")) {
			o->after_all = true;
		} else if (!strcmp(a, "--print-ir-after-change")) {
			o->after_change = true;
		} else if (!strcmp(a, "--verify-each")) {
			o->verify_each = true;
		} else if (!strcmp(a, "--no-verify-each")) {
			o->verify_each = false;
		} else if (!strcmp(a, "--timing")) {
			o->timing = true;
		} else if (!strcmp(a, "--trace-rewrites")) {
			o->flags |= KF_PASSF_TRACE;
		} else if (!strcmp(a, "--explain-fusion")) {
			o->flags |= KF_PASSF_EXPLAIN;
		} else if (!strcmp(a, "--list-passes")) {
			o->list = true;
		} else if (!strcmp(a, "--check-equivalence")) {
			o->equiv = true;
		} else if ((v = optval(argc, argv, &i, "--rtol"))) {
			if (!num(v, &o->rtol) || o->rtol < 0)
				return fail_usage("--rtol needs a number >= 0, not '%s'", v);
			o->tol_given = true;
		} else if ((v = optval(argc, argv, &i, "--atol"))) {
			if (!num(v, &o->atol) || o->atol < 0)
				return fail_usage("--atol needs a number >= 0, not '%s'", v);
			o->tol_given = true;
		} else if ((v = optval(argc, argv, &i, "--l2"))) {
			if (!num(v, &o->l2) || o->l2 <= 0)
				return fail_usage("--l2 needs a number > 0, not '%s'", v);
			o->tol_given = true;
		} else if ((v = optval(argc, argv, &i, "--seed"))) {
			if (!num(v, &d) || d < 0 || d != (double)(uint64_t)d)
				return fail_usage("--seed needs a non-negative integer, not '%s'", v);
			o->seed = (uint64_t)d;
		} else if ((v = optval(argc, argv, &i, "--trials"))) {
			if (!num(v, &d) || d < 1 || d > 1000 || d != (int)d)
				return fail_usage("--trials needs an integer in 1..1000, not '%s'", v);
			o->trials = (int)d;
		} else if ((v = optval(argc, argv, &i, "--plugin"))) {
			o->plugin = realloc(o->plugin, (o->nplugin + 1) * sizeof *o->plugin);
			if (!o->plugin)
				abort();
			o->plugin[o->nplugin++] = v;
		} else if (a[0] == '-' && a[1]) {
			return fail_usage("unknown option '%s'", a);
		} else if (!o->input) {
			o->input = a;
		} else {
			return fail_usage("more than one input file ('%s')", a);
		}
	}
	if (!o->emit)
		o->emit = "ir";
	if (strcmp(o->emit, "ir") && strcmp(o->emit, "dot") && strcmp(o->emit, "cuda") && strcmp(o->emit, "ptx"))
		return fail_usage("unknown --emit kind '%s' (valid: ir dot cuda ptx)", o->emit);
	if (!o->input && !o->list)
		return fail_usage("%s", "no input file (use - for stdin)");
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

static void dump(void *ud, kf_module *m, const kf_pass *p, kf_dump_when when)
{
	kf_buf b = {0};
	kf_buf_printf(&b, "# -----// IR Dump %s %s //----- #\n", when == KF_DUMP_BEFORE ? "Before" : "After",
		      p->name);
	kf_print_module(&b, m);
	fwrite(b.p, 1, b.n, stderr);
	kf_buf_free(&b);
}

static int die(kf_ctx *c)
{
	kf_diag_flush(c, stderr);
	return 1;
}

/* The output file (stdout for none or "-"), or NULL after an error. */
static FILE *open_out(kf_ctx *c, const char *path)
{
	FILE *f = path && strcmp(path, "-") ? fopen(path, "wb") : stdout;
	if (!f)
		kf_error(c, (kf_loc){kf_source_add(c, path, NULL, 0), 0}, "cannot open for writing: %s",
			 strerror(errno));
	return f;
}

/* Closes (or flushes stdout) after a write that went well or not. */
static int close_out(kf_ctx *c, const char *path, FILE *f, bool ok)
{
	int e = errno;
	if (f == stdout)
		ok &= fflush(f) == 0;
	else
		ok &= fclose(f) == 0;
	if (!ok) {
		kf_error(c, (kf_loc){kf_source_add(c, path ? path : "<stdout>", NULL, 0), 0},
			 "write failed: %s", strerror(e ? e : errno));
		return -1;
	}
	return 0;
}

static int write_out(kf_ctx *c, const char *path, const kf_buf *b)
{
	FILE *f = open_out(c, path);
	if (!f)
		return -1;
	errno = 0;
	return close_out(c, path, f, fwrite(b->p, 1, b->n, f) == b->n);
}

/* The IR goes to the file as it is printed: a big module's text is never
 * held whole (it was an eighth of the peak memory). */
static int print_out(kf_ctx *c, const char *path, kf_module *m)
{
	FILE *f = open_out(c, path);
	if (!f)
		return -1;
	errno = 0;
	return close_out(c, path, f, kf_print_module_file(f, m) == 0);
}

/* A copy of the input module for --check-equivalence: its printed text,
 * parsed again (print(parse(x)) is a fixed point, so this is the input). */
static kf_module *copy_module(kf_ctx *c, kf_module *m, const char *name)
{
	kf_buf b = {0};
	kf_print_module(&b, m);
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
static int load_plugins(kf_ctx *c, kf_passreg *reg, const opt *o)
{
	for (int i = 0; i < o->nplugin; i++)
		if (kf_plugin_load(c, o->plugin[i]) < 0)
			return -1;
	kf_plugin_passes(c, reg);
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

static int run(kf_ctx *c, kf_passreg *reg, opt *o, kf_timing *tm)
{
	if (check_names(c, reg, "--print-ir-before", o->before) < 0 ||
	    check_names(c, reg, "--print-ir-after", o->after) < 0)
		return -1;
	double t0 = kf_now();
	kf_pipeline *pl = kf_pipeline_parse(c, reg, o->pipeline ? o->pipeline : "");
	if (!pl)
		return -1;
	kf_module *m = kf_parse_file(c, o->input), *orig = NULL;
	kf_timing_add(tm, "parse", kf_now() - t0);
	int rc = -1;
	kf_buf log = {0}, out = {0};
	if (!m)
		goto done;
	t0 = kf_now();
	int nerr = 0;
	for (uint32_t i = 0; i < m->ngraph; i++)
		nerr += kf_verify(m->graph[i]);
	kf_timing_add(tm, "verify", kf_now() - t0);
	if (nerr)
		goto done;
	if (o->equiv && !(orig = copy_module(c, m, o->input)))
		goto done;
	kf_runopts ro = {
		.verify_each = o->verify_each, .after_all = o->after_all, .after_change = o->after_change,
		.before = o->before, .after = o->after, .flags = o->flags, .log = &log, .timing = tm,
		.dump = dump,
	};
	int prc = kf_pipeline_run(pl, m, &ro);
	if (log.n)
		fwrite(log.p, 1, log.n, stderr);
	if (prc < 0)
		goto done;
	t0 = kf_now();
	if (!strcmp(o->emit, "dot"))
		kf_dot_module(&out, m);
	else if (!strcmp(o->emit, "cuda") && kf_emit_cuda_module(m, &out) < 0)
		goto done;
	else if (!strcmp(o->emit, "ptx") && kf_emit_ptx_module(m, &out) < 0)
		goto done;
	if (!strcmp(o->emit, "ir") ? print_out(c, o->output, m) < 0 : write_out(c, o->output, &out) < 0)
		goto done;
	kf_timing_add(tm, "print", kf_now() - t0);
	if (orig) {
		t0 = kf_now();
		if (check_equiv(c, orig, m, o) < 0)
			goto done;
		kf_timing_add(tm, "check-equivalence", kf_now() - t0);
	}
	rc = 0;
done:
	kf_buf_free(&log);
	kf_buf_free(&out);
	kf_module_free(orig);
	kf_module_free(m);
	kf_pipeline_free(pl);
	return rc;
}

int main(int argc, char **argv)
{
	opt o = {.verify_each = true, .rtol = 1e-4, .atol = 1e-5, .trials = 3};
	if (parse_args(argc, argv, &o))
		return 1;
	kf_ctx *c = kf_ctx_new();
	/* The CPU kernels let canonicalize fold constants through kf_op()->cpu. */
	kf_rt_register(c);
	kf_passreg reg = {0};
	kf_passes_builtin(&reg);
	int rc = 0;
	kf_timing tm = {0};
	if (load_plugins(c, &reg, &o) < 0)
		rc = 1;
	else if (o.list)
		list_passes(&reg);
	else if (run(c, &reg, &o, &tm) < 0)
		rc = 1;
	if (o.timing && tm.n) {
		kf_buf b = {0};
		kf_timing_render(&tm, &b);
		fwrite(b.p, 1, b.n, stderr);
		kf_buf_free(&b);
	}
	if (rc)
		die(c);
	else
		kf_diag_flush(c, stderr); /* warnings */
	kf_timing_free(&tm);
	kf_passreg_free(&reg);
	kf_plugin_release(c); /* the Lua state and libraries plugins and rules live in */
	free((char *)o.pipeline);
	free((char *)o.before);
	free((char *)o.after);
	free(o.plugin);
	kf_ctx_free(c);
	return rc;
}
