/* conformance: the ONNX backend node tests (Debian's libonnx-testdata) run
 * through kfuse-import-onnx's translation and the CPU interpreter, compared
 * with the expected outputs at ONNX's tolerances (rtol 1e-3, atol 1e-7).
 *
 * Each test ends as one of: pass; fail (wrong values, a run error, or an
 * import error that is not an unsupported feature); unsupported (the model
 * uses an op, attribute or type kfuse does not have: the reason is shown).
 * Exit status 1 when any test fails.
 */
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "interp.h"
#include "onnx_import.h"
#include "passes.h"
#include "tensor.h"

enum { PASS, FAIL, UNSUP };
static const char *verdict_name[] = {"pass", "FAIL", "unsupported"};

typedef struct result {
	char name[128];
	int verdict;
	int kernels; /* after the pipeline: nodes that launch work */
	char why[256];
} result;

/* --pipeline: passes run on every imported graph before it runs. */
static const char *pipeline_text;
static int max_kernels = -1;
/* --kernel-limit STR=N: tests whose name holds STR may take N kernels */
static const char *limit_str;
static int limit_n;

/* Nodes that would each be a kernel: not constants, aliases or the return. */
static int count_kernels(kf_graph *g)
{
	int k = 0;
	kf_foreach_node(g, 0, n) {
		int op = g->node[n].op;
		k += op != KF_OP_CONST && op != KF_OP_RETURN && op != KF_OP_RESHAPE;
	}
	return k;
}

static int run_pipeline(kf_ctx *c, kf_module *m)
{
	kf_passreg reg = {0};
	kf_passes_builtin(&reg);
	kf_pipeline *p = kf_pipeline_parse(c, &reg, pipeline_text);
	kf_runopts ro = {.verify_each = true};
	int rc = p ? kf_pipeline_run(p, m, &ro) : -1;
	kf_pipeline_free(p);
	kf_passreg_free(&reg);
	return rc;
}

/* One test data set: inputs (with their names, the graph inputs') and
 * expected outputs. */
typedef struct dataset {
	kf_tensor in[32], want[32];
	char name[32][128];
	int nin, nout;
} dataset;

static int load_tensors(kf_ctx *c, const char *dir, const char *prefix, kf_tensor *t, char (*name)[128], int max)
{
	int n = 0;
	for (; n < max; n++) {
		char path[4096];
		snprintf(path, sizeof path, "%s/%s_%d.pb", dir, prefix, n);
		struct stat st;
		if (stat(path, &st) != 0)
			break;
		if (kf_onnx_read_tensor(c, path, &t[n], name ? name[n] : NULL, 128) < 0)
			return -1;
	}
	return n;
}

/* 0, 1 when the set does not exist, -1 on a read error (in the context). */
static int load_set(kf_ctx *c, const char *dir, dataset *d)
{
	struct stat st;
	memset(d, 0, sizeof *d);
	if (stat(dir, &st) != 0)
		return 1;
	d->nin = load_tensors(c, dir, "input", d->in, d->name, 32);
	d->nout = load_tensors(c, dir, "output", d->want, NULL, 32);
	return d->nin < 0 || d->nout < 0 ? -1 : 0;
}

static void free_set(dataset *d)
{
	for (int i = 0; i < 32; i++) {
		kf_tensor_free(&d->in[i]);
		kf_tensor_free(&d->want[i]);
	}
}

/* The graph inputs frozen with --bind (kfuse needs them at compile time:
 * axes, shapes, pads given as inputs), by name. */
typedef struct binds {
	char name[8][128];
	int n;
} binds;

static bool is_bound(const binds *b, const char *name)
{
	for (int i = 0; i < b->n; i++)
		if (!strcmp(b->name[i], name))
			return true;
	return false;
}

static kf_module *import_bound(kf_ctx *c, const char *model, const dataset *d, const binds *b)
{
	kf_onnx_bind kb[8];
	int k = 0;
	for (int i = 0; i < b->n; i++)
		for (int j = 0; j < d->nin; j++)
			if (!strcmp(b->name[i], d->name[j]))
				kb[k++] = (kf_onnx_bind){d->name[j], &d->in[j]};
	kf_onnx_opts o = {.bind = kb, .nbind = k};
	return kf_onnx_import_file(c, model, &o);
}

/* The input an import error asks to be a constant: "input N ('name') must
 * be a constant", when the set has an input of that name; when the value
 * named is computed from the graph's inputs, the first integer input of
 * rank <= 1 not bound yet (the axes, shapes and sizes of the node tests). */
static bool wanted_constant(kf_ctx *c, const dataset *d, const binds *b, char *name, size_t cap)
{
	kf_buf t = {0};
	kf_diag_render(c, &t);
	const char *p = t.p ? strstr(t.p, "('") : NULL, *q = p ? strstr(p, "') must be a constant") : NULL;
	bool ok = false;
	if (p && q && q - p - 2 < (long)cap) {
		snprintf(name, cap, "%.*s", (int)(q - p - 2), p + 2);
		for (int j = 0; j < d->nin; j++)
			ok |= !strcmp(d->name[j], name);
		for (int j = 0; j < d->nin && !ok; j++)
			if (!kf_dtype_is_float(d->in[j].dtype) && d->in[j].rank <= 1 && !is_bound(b, d->name[j])) {
				snprintf(name, cap, "%s", d->name[j]);
				ok = true;
			}
		ok = ok && !is_bound(b, name) && b->n < 8;
	}
	kf_buf_free(&t);
	return ok;
}

/* numpy.isclose with ONNX's tolerances; NaN matches NaN. */
static int compare(const kf_tensor *got, const kf_tensor *want, char *why, size_t cap)
{
	if (!kf_tensor_same_shape(got, want)) {
		kf_buf a = {0}, b = {0};
		kf_tensor_summary(&a, got);
		kf_tensor_summary(&b, want);
		snprintf(why, cap, "shape/dtype: got %.60s, want %.60s", a.p, b.p);
		kf_buf_free(&a);
		kf_buf_free(&b);
		return -1;
	}
	int64_t n = kf_tensor_numel(got);
	double worst = 0;
	int64_t at = -1;
	for (int64_t i = 0; i < n; i++) {
		double x = kf_tensor_get(got, i), y = kf_tensor_get(want, i);
		if (isnan(x) && isnan(y))
			continue;
		double err = fabs(x - y);
		if (x == y)
			continue;
		if (!(err <= 1e-7 + 1e-3 * fabs(y)) && (at < 0 || err > worst || isnan(err))) {
			worst = err;
			at = i;
		}
	}
	if (at >= 0) {
		snprintf(why, cap, "largest error %.3g at element %lld (got %.9g, want %.9g)", worst, (long long)at,
			 kf_tensor_get(got, at), kf_tensor_get(want, at));
		return -1;
	}
	return 0;
}

static bool is_unsupported(const char *msg)
{
	return strstr(msg, "not supported") || strstr(msg, "does not support") || strstr(msg, "does not read") ||
	       strstr(msg, "needs a static") || strstr(msg, "must be a constant") || strstr(msg, "not a tensor");
}

static void first_line(kf_ctx *c, char *out, size_t cap)
{
	kf_buf b = {0};
	kf_diag_render(c, &b);
	char *nl = b.p ? strchr(b.p, '\n') : NULL;
	if (nl)
		*nl = 0;
	snprintf(out, cap, "%s", b.p ? b.p : "");
	kf_buf_free(&b);
	kf_diag_clear(c);
}

/* Imports the model for data set d, binding the graph inputs the importer
 * asks to be constants (learned on the first set, when `learn`; later sets
 * bind the same names), and verifies it.  NULL with the diagnostics
 * pending when it cannot. */
static kf_module *import_for(kf_ctx *c, const char *model, const dataset *d, binds *b, bool learn)
{
	for (;;) {
		kf_module *m = import_bound(c, model, d, b);
		if (m && kf_verify(m->graph[0]) > 0) {
			kf_module_free(m);
			m = NULL;
		}
		char nm[128];
		if (m || !learn || !wanted_constant(c, d, b, nm, sizeof nm))
			return m;
		kf_diag_clear(c);
		snprintf(b->name[b->n++], sizeof b->name[0], "%s", nm);
	}
}

/* Runs data set d on m (the inputs not bound, in order); the verdict in r. */
static void run_set(kf_ctx *c, kf_module *m, const dataset *d, const binds *b, result *r)
{
	kf_tensor in[32], got[32] = {0};
	int nin = 0;
	for (int j = 0; j < d->nin; j++)
		if (!is_bound(b, d->name[j]))
			in[nin++] = d->in[j]; /* borrowed */
	kf_graph *g = m->graph[0];
	if ((uint32_t)d->nout != g->nres) {
		snprintf(r->why, sizeof r->why, "graph has %u outputs, test data %d", g->nres, d->nout);
		r->verdict = FAIL;
	} else if (kf_interp_run(g, in, nin, got, d->nout) < 0) {
		first_line(c, r->why, sizeof r->why);
		r->verdict = FAIL;
	} else {
		for (int i = 0; i < d->nout && r->verdict == PASS; i++)
			if (compare(&got[i], &d->want[i], r->why, sizeof r->why) < 0)
				r->verdict = FAIL;
	}
	for (int i = 0; i < 32; i++)
		kf_tensor_free(&got[i]);
}

/* An import or pipeline failure: unsupported or FAIL by its message. */
static void import_failed(kf_ctx *c, result *r, bool pipeline)
{
	first_line(c, r->why, sizeof r->why);
	const char *msg = strstr(r->why, "error: ");
	r->verdict = !pipeline && is_unsupported(r->why) ? UNSUP : FAIL;
	if (msg && !pipeline)
		memmove(r->why, msg + 7, strlen(msg + 7) + 1);
}

static void run_test(const char *root, const char *name, result *r)
{
	char dir[4096], model[4200], data[4200];
	snprintf(dir, sizeof dir, "%s/%s", root, name);
	snprintf(model, sizeof model, "%s/model.onnx", dir);
	snprintf(r->name, sizeof r->name, "%s", name);
	kf_ctx *c = kf_ctx_new();
	dataset *d = calloc(1, sizeof *d);
	binds b = {.n = 0};
	snprintf(data, sizeof data, "%s/test_data_set_0", dir);
	int rc = load_set(c, data, d);
	char data_err[256] = "";
	if (rc < 0) { /* the model's own error, if any, says more (sequences, ...) */
		first_line(c, data_err, sizeof data_err);
		free_set(d);
		memset(d, 0, sizeof *d);
	}
	kf_module *m = import_for(c, model, d, &b, rc == 0);
	if (!m || (pipeline_text && run_pipeline(c, m) < 0)) {
		import_failed(c, r, m != NULL);
		goto done;
	}
	if (rc < 0) {
		snprintf(r->why, sizeof r->why, "%s", data_err);
		r->verdict = is_unsupported(r->why) ? UNSUP : FAIL;
		goto done;
	}
	r->kernels = count_kernels(m->graph[0]);
	r->verdict = PASS;
	for (int set = 0; r->verdict == PASS; set++) {
		if (set > 0) {
			free_set(d);
			snprintf(data, sizeof data, "%s/test_data_set_%d", dir, set);
			if ((rc = load_set(c, data, d)) != 0) {
				if (rc < 0)
					import_failed(c, r, false);
				break;
			}
			/* a bound input has this set's value: import again */
			if (b.n) {
				kf_module_free(m);
				m = import_for(c, model, d, &b, false);
				if (!m || (pipeline_text && run_pipeline(c, m) < 0)) {
					import_failed(c, r, m != NULL);
					break;
				}
			}
		} else if (rc != 0) {
			break;
		}
		run_set(c, m, d, &b, r);
	}
	int want = limit_str && strstr(name, limit_str) ? limit_n : max_kernels;
	if (r->verdict == PASS && want >= 0 && r->kernels > want) {
		snprintf(r->why, sizeof r->why, "%d kernels after the pipeline (at most %d wanted)", r->kernels, want);
		r->verdict = FAIL;
	}
	if (r->verdict == PASS && b.n) {
		size_t k = (size_t)snprintf(r->why, sizeof r->why, "--bind");
		for (int i = 0; i < b.n && k < sizeof r->why; i++)
			k += (size_t)snprintf(r->why + k, sizeof r->why - k, " %s", b.name[i]);
	}
done:
	free_set(d);
	free(d);
	kf_module_free(m);
	kf_ctx_free(c);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv)
{
	const char *root = "/usr/share/libonnx-testdata/data/node", *table = NULL, *filter = NULL;
	int min_pass = 0; /* --min-pass N: fewer passing tests (an op lost) fail the run */
	bool verbose = false;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--table") && i + 1 < argc)
			table = argv[++i];
		else if (!strcmp(argv[i], "--filter") && i + 1 < argc)
			filter = argv[++i];
		else if (!strcmp(argv[i], "--pipeline") && i + 1 < argc)
			pipeline_text = argv[++i];
		else if (!strcmp(argv[i], "--max-kernels") && i + 1 < argc)
			max_kernels = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--kernel-limit") && i + 1 < argc && strchr(argv[i + 1], '=')) {
			static char lim[128];
			snprintf(lim, sizeof lim, "%s", argv[++i]);
			*strchr(lim, '=') = 0;
			limit_str = lim;
			limit_n = atoi(lim + strlen(lim) + 1);
		} else if (!strcmp(argv[i], "--min-pass") && i + 1 < argc)
			min_pass = atoi(argv[++i]);
		else if (!strcmp(argv[i], "-v"))
			verbose = true;
		else
			root = argv[i];
	}
	DIR *d = opendir(root);
	if (!d) {
		fprintf(stderr, "%s: error: cannot open the ONNX node tests (apt-get install libonnx-testdata)\n", root);
		return 2;
	}
	char **names = NULL;
	size_t n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, "test_", 5) && (!filter || strstr(e->d_name, filter))) {
			names = realloc(names, (n + 1) * sizeof *names);
			names[n++] = strdup(e->d_name);
		}
	closedir(d);
	qsort(names, n, sizeof *names, cmp_str);
	result *res = calloc(n + 1, sizeof *res);
	int count[3] = {0};
	for (size_t i = 0; i < n; i++) {
		run_test(root, names[i], &res[i]);
		count[res[i].verdict]++;
		if (res[i].verdict == FAIL || verbose)
			printf("%-60s %-11s %2d kernels  %s\n", res[i].name, verdict_name[res[i].verdict], res[i].kernels,
			       res[i].why);
	}
	FILE *t = table ? fopen(table, "w") : NULL;
	if (t) {
		fprintf(t, "| test | verdict | kernels | detail |\n|---|---|---|---|\n");
		for (size_t i = 0; i < n; i++)
			fprintf(t, "| %s | %s | %d | %s |\n", res[i].name, verdict_name[res[i].verdict], res[i].kernels,
				res[i].why);
		fclose(t);
	}
	printf("ONNX node tests: %d passed, %d failed, %d unsupported, of %zu\n", count[PASS], count[FAIL],
	       count[UNSUP], n);
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	free(res);
	if (count[PASS] < min_pass)
		fprintf(stderr, "onnx-conformance: %d tests passed, --min-pass %d asked for\n", count[PASS], min_pass);
	return count[FAIL] || count[PASS] < min_pass ? 1 : 0;
}
