/* rules.c: the `rules` pass: applies the Lua fusion rules of a file or
 * directory (docs/rules.md) with the greedy rewrite driver.
 *
 * requires exact use lists; keeps them and verified types; removes the
 * nodes its rewrites leave dead (and any other dead node it visits).
 *
 * Options: path=FILE|DIR (default: the standard rules; a relative path not
 * found from the current directory is looked up among the standard rules:
 * kf_rules_find), max-iter=N (sweeps, default 10), max-rewrites=N,
 * trace=0|1|2 (a bare `trace` is 1: a line per rewrite and a summary of the
 * rules that fired; 2: also why candidate matches failed; --trace-rewrites
 * sets 1), stats (the summary alone).  The rules are loaded once per context and kept (Lua-defined
 * ops must outlive the pass).
 */
#include <stdlib.h>
#include <string.h>

#include "fuse.h"
#include "passes.h"
#include "rules.h"

typedef struct rules_state {
	kf_lrules *rules;
	kf_rw_opts opts;
	kf_rw_stats st;
	const char *path;
	bool stats;             /* print the summary at the end */
} rules_state;

static int rules_begin(kf_ctx *c, kf_passopts *o)
{
	kf_buf found = {0};
	if (kf_rules_find(c, kf_passopt_str(o, "path", NULL), &found) < 0) {
		kf_note(c, o->loc, "in this rules pass");
		return -1;
	}
	/* interned: the path outlives this pass in messages */
	const char *path = kf_str(c, kf_intern_cstr(c, found.p));
	kf_buf_free(&found);
	int64_t iter = kf_passopt_int(c, o, "max-iter", 10);
	int64_t cap = kf_passopt_int(c, o, "max-rewrites", 0);
	int64_t trace = kf_passopt_level(c, o, "trace", (o->flags & KF_PASSF_TRACE) ? 1 : 0);
	if (iter < 1 || cap < 0 || trace < 0 || trace > 2) {
		kf_error(c, o->loc, "rules: max-iter must be at least 1, max-rewrites at least 0, trace 0 to 2");
		return -1;
	}
	kf_lrules *r = kf_lua_rules_load(c, path);
	if (!r) {
		kf_note(c, o->loc, "while loading the rules of this pass");
		return -1;
	}
	bool stats = kf_passopt_bool(c, o, "stats", false);
	rules_state *s = calloc(1, sizeof *s);
	if (!s)
		return -1;
	s->stats = stats || trace;
	s->rules = r;
	s->path = path;
	s->opts.max_iter = (int)iter;
	s->opts.max_rewrites = (uint64_t)cap;
	s->opts.trace = (int)trace;
	s->opts.log = trace ? o->log : NULL;
	kf_rw_stats_init(&s->st, kf_lua_rules_set(r));
	o->state = s;
	return 0;
}

static int rules_run(kf_graph *g, const kf_passopts *o, bool *changed)
{
	rules_state *s = o->state;
	uint64_t before = s->st.rewrites + s->st.dead;
	int rc = kf_rw_run(g, kf_lua_rules_set(s->rules), &s->opts, &s->st);
	*changed = s->st.rewrites + s->st.dead != before;
	return rc;
}

static void rules_end(kf_ctx *c, kf_passopts *o)
{
	rules_state *s = o->state;
	if (!s)
		return;
	if (s->stats && o->log)
		kf_rw_summary(o->log, kf_lua_rules_set(s->rules), &s->st);
	kf_rw_stats_free(&s->st);
	free(s);
	o->state = NULL;
}

static const char *const rules_opts[] = {"path", "max-iter", "max-rewrites", "trace", "stats", NULL};

const kf_pass kf_pass_rules = {
	.name = "rules",
	.doc = "apply the Lua fusion rules of path=FILE|DIR (default: the standard rules; docs/rules.md)",
	.opts = rules_opts,
	.run = rules_run,
	.begin = rules_begin,
	.end = rules_end,
};

/* ---- embedded examples ------------------------------------------------------------ */

/* One example: 0 pass, 1 fail (reported to log), -1 error. */
static int run_example(kf_ctx *c, const kf_rule_example *ex, kf_buf *log)
{
	char name[512];
	snprintf(name, sizeof name, "%s: example %u%s%s%s (before)", ex->path, ex->index,
		 ex->rule ? " of rule '" : "", ex->rule ? ex->rule : "", ex->rule ? "'" : "");
	kf_module *mb = kf_parse(c, name, ex->before, ex->nbefore);
	snprintf(name + strlen(name) - 8, 9, "(after)");
	kf_module *ma = kf_parse(c, name, ex->after, ex->nafter);
	int rc = mb && ma ? 0 : -1;
	if (rc == 0 && mb->ngraph != ma->ngraph) {
		kf_error(c, KF_NOLOC, "%s: example %u: before and after hold different numbers of graphs",
			 ex->path, ex->index);
		rc = -1;
	}
	for (uint32_t g = 0; rc == 0 && g < mb->ngraph; g++) {
		if (kf_verify(mb->graph[g]) || kf_verify(ma->graph[g])) {
			rc = -1;
			break;
		}
		kf_rw_stats st;
		kf_rw_stats_init(&st, &ex->rules);
		int k = kf_rw_run(mb->graph[g], &ex->rules, NULL, &st);
		kf_rw_stats_free(&st);
		if (k < 0 || kf_verify(mb->graph[g])) {
			kf_note(c, KF_NOLOC, "in %s: example %u", ex->path, ex->index);
			rc = -1;
			break;
		}
		kf_buf why = {0};
		if (!kf_graph_same(mb->graph[g], ma->graph[g], &why)) {
			kf_buf_printf(log, "%s: example %u%s%s%s: the rules give another graph (%s)\n--- got:\n",
				      ex->path, ex->index, ex->rule ? " of rule '" : "", ex->rule ? ex->rule : "",
				      ex->rule ? "'" : "", why.p);
			kf_print_graph(log, mb->graph[g]);
			kf_buf_puts(log, "--- expected:\n");
			kf_print_graph(log, ma->graph[g]);
			rc = 1;
		}
		kf_buf_free(&why);
	}
	kf_module_free(mb);
	kf_module_free(ma);
	return rc;
}

int kf_rules_run_examples(kf_lrules *r, kf_buf *log, uint32_t *nrun)
{
	kf_ctx *c = kf_lrules_ctx(r);
	int fails = 0;
	*nrun = 0;
	for (uint32_t k = 0;; k++) {
		kf_rule_example ex;
		int rc = kf_lua_rules_example(r, k, &ex);
		if (rc <= 0)
			return rc < 0 ? -1 : fails;
		(*nrun)++;
		int e = run_example(c, &ex, log);
		kf_rule_example_free(&ex);
		if (e < 0)
			return -1;
		fails += e;
	}
}

/* ---- the fuse pass's Lua policy ------------------------------------------------------- */

/* can_fuse(producer, consumer): true allows, false vetoes, nil leaves it to
 * the pass.  A script error vetoes (and is in the context). */
static int lua_policy(void *ud, kf_graph *g, kf_nid producer, kf_nid consumer)
{
	int k = kf_lua_hook_nodes(ud, "can_fuse", g, producer, consumer);
	return k == 1 ? KF_FUSE_ALLOW : k == 0 || k == -2 ? KF_FUSE_VETO : KF_FUSE_DEFAULT;
}

/* Defined here, in a file every tool links (the rules pass is in the
 * registry), so that fuse.c's weak reference finds it. */
int kf_lua_fuse_policy_open(kf_ctx *c, const char *path, kf_fuse_policy *out)
{
	kf_lrules *r = kf_lua_rules_load(c, path);
	if (!r)
		return -1;
	out->fn = lua_policy;
	out->ud = r; /* owned by the context's Lua host */
	out->free = NULL;
	return 0;
}
