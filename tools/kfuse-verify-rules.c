/* kfuse-verify-rules: checks Lua rule files.
 *
 *   kfuse-verify-rules PATH... [--seed N] [--trials N] [--no-examples] [--only-examples] [-v]
 *   (--help has the details)
 *
 * For every rule: builds its pattern as a graph for each set of input types
 * (the rule's `verify = {...}`, else every variable f32[16], f32[4,8] and
 * f64[2,3,5] in turn), applies the rule to a copy, and runs both on the CPU
 * interpreter with the same random inputs; a rule whose replacement
 * computes something else is reported with the inputs that show it.  Then
 * runs each file's embedded examples.  Exit 0 when all is well, 1 when a
 * rule or an example is wrong or a file does not load.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "equiv.h"
#include "interp.h"
#include "kf.h"
#include "lua_rules.h"
#include "plugin.h"
#include "rules.h"
#include "tensor.h"

typedef struct opts {
	uint64_t seed;
	int trials;
	bool examples, rules, verbose;
} opts;

/* A variable typed "const f32[8]" in a verify entry becomes a random dense
 * constant (for rules whose where wants constants); others are inputs. */
typedef struct vspec {
	kf_type t;
	bool konst;
	double value; /* NaN: random */
} vspec;

static kf_vid make_const(kf_graph *g, const kf_type *t, double value, uint64_t *rng)
{
	kf_tensor x;
	kf_tid tid = kf_type_intern(g->ctx, t);
	kf_nid n = kf_node_new(g, 0, KF_NONE, KF_OP_CONST, NULL, 0, &tid, 1);
	kf_const *k = kf_alloc(&g->arena, sizeof *k);
	k->kind = KF_CONST_DENSE;
	if (kf_tensor_random(&x, (kf_dtype)t->dtype, t->rank, t->dim, rng) < 0)
		return KF_NONE;
	k->n = (uint64_t)kf_tensor_numel(&x);
	if (kf_dtype_is_float(t->dtype)) {
		k->f = kf_alloc(&g->arena, (k->n ? k->n : 1) * sizeof *k->f);
		for (uint64_t i = 0; i < k->n; i++)
			k->f[i] = kf_tensor_get(&x, (int64_t)i);
	} else {
		k->i = kf_alloc(&g->arena, (k->n ? k->n : 1) * sizeof *k->i);
		for (uint64_t i = 0; i < k->n; i++)
			k->i[i] = (int64_t)kf_tensor_get(&x, (int64_t)i);
	}
	kf_tensor_free(&x);
	if (value == value) {
		/* a splat of the given value */
		k->n = 1;
		if (k->f)
			k->f[0] = value;
		else
			k->i[0] = (int64_t)value;
	}
	kf_N(g, n)->cst = k;
	return kf_res(g, n, 0);
}

/* The rule's pattern as a graph with the given variable types; NULL (and
 * why) when the pattern does not type-check with them. */
static kf_graph *pattern_graph(kf_ctx *c, const kf_rule *r, const vspec *vs, uint64_t cseed, char *why,
			       size_t whylen)
{
	const kf_pattern *p = r->pat;
	kf_graph *g = kf_graph_new(c, r->name);
	kf_vid bind[KF_PAT_MAXNODE];
	uint64_t rng = cseed;
	for (uint32_t i = 0; i < p->nvar; i++) {
		if (vs[i].konst) {
			bind[i] = make_const(g, &vs[i].t, vs[i].value, &rng);
		} else {
			kf_tid t = kf_type_intern(c, &vs[i].t);
			bind[i] = kf_block_add_arg(g, 0, t, kf_intern_cstr(c, p->varname[i]));
		}
	}
	kf_nid ret = kf_node_new(g, 0, KF_NONE, KF_OP_RETURN, NULL, 0, NULL, 0);
	kf_rewriter rw;
	kf_rw_begin(&rw, g, ret);
	int ok = kf_rw_instantiate(&rw, p, bind, p->nvar ? (kf_dtype)vs[0].t.dtype : KF_F32, NULL);
	snprintf(why, whylen, "%s", rw.err);
	kf_vid out[KF_PAT_MAXOUT];
	uint32_t nout = rw.nout;
	memcpy(out, rw.out, sizeof out);
	kf_rw_end(&rw);
	if (!ok) {
		kf_graph_free(g);
		return NULL;
	}
	kf_node_erase(g, ret);
	kf_node_new(g, 0, KF_NONE, KF_OP_RETURN, out, nout, NULL, 0);
	kf_tid rt[KF_PAT_MAXOUT];
	for (uint32_t k = 0; k < nout; k++)
		rt[k] = kf_V(g, out[k])->type;
	kf_graph_set_results(g, rt, nout);
	return g;
}

static void describe(kf_buf *b, const kf_ctx *c, const kf_pattern *p, const vspec *vs)
{
	for (uint32_t i = 0; i < p->nvar; i++) {
		kf_tid t = kf_type_intern((kf_ctx *)c, &vs[i].t);
		kf_buf_printf(b, "%s%s: %s", i ? ", " : "", p->varname[i], vs[i].konst ? "const " : "");
		kf_print_type(b, c, t);
		if (vs[i].konst && vs[i].value == vs[i].value)
			kf_buf_printf(b, "=%g", vs[i].value);
	}
}

/* Runs a and b on the same random inputs; 0 same, 1 different (reported),
 * -1 on an error. */
static int compare(kf_ctx *c, const kf_rule *r, kf_graph *a, kf_graph *b, uint64_t seed, kf_buf *rep)
{
	double rtol, atol;
	kf_lua_rule_tolerance(r, &rtol, &atol);
	const kf_block *blk = &a->blk[0];
	uint32_t nin = blk->narg, nout = a->nres;
	kf_tensor in[KF_PAT_MAXNODE], oa[KF_PAT_MAXOUT], ob[KF_PAT_MAXOUT];
	memset(in, 0, sizeof in);
	memset(oa, 0, sizeof oa);
	memset(ob, 0, sizeof ob);
	uint64_t rng = seed;
	int rc = 0;
	for (uint32_t i = 0; i < nin && rc == 0; i++) {
		const kf_type *t = kf_vtype(a, blk->arg[i]);
		if (kf_tensor_random(&in[i], (kf_dtype)t->dtype, t->rank, t->dim, &rng) < 0)
			rc = -1;
	}
	if (rc == 0 && (kf_interp_run(a, in, (int)nin, oa, (int)nout) < 0 ||
			kf_interp_run(b, in, (int)nin, ob, (int)nout) < 0))
		rc = -1;
	for (uint32_t k = 0; k < nout && rc == 0; k++) {
		kf_equiv_stat st;
		kf_equiv_compare(&ob[k], &oa[k], rtol, atol, &st);
		if (st.nbad == 0 && !st.shape_differs)
			continue;
		kf_buf_printf(rep, "  output %u: ", k + 1);
		kf_equiv_describe(rep, &st); /* "(worst at [i]: replacement vs pattern)" */
		kf_buf_puts(rep, "\n  inputs:\n");
		for (uint32_t i = 0; i < nin; i++) {
			kf_buf_printf(rep, "    %s = ", kf_str(c, kf_V(a, blk->arg[i])->name));
			kf_tensor_summary(rep, &in[i]);
			kf_buf_putc(rep, '\n');
		}
		rc = 1;
	}
	for (uint32_t i = 0; i < nin; i++)
		kf_tensor_free(&in[i]);
	for (uint32_t k = 0; k < nout; k++) {
		kf_tensor_free(&oa[k]);
		kf_tensor_free(&ob[k]);
	}
	return rc;
}

/* The i-th set of variable types: the rule's own, else the defaults.
 * 1, 0 past the end, -1 on a malformed verify entry. */
static int config(const kf_rule *r, uint32_t i, vspec *vs)
{
	kf_type t[KF_PAT_MAXNODE];
	bool kc[KF_PAT_MAXNODE];
	double val[KF_PAT_MAXNODE];
	int own = kf_lua_rule_verify_types(r, 0, t, kc, val);
	if (own < 0)
		return -1;
	if (own > 0) {
		int k = kf_lua_rule_verify_types(r, i, t, kc, val);
		for (uint32_t v = 0; k > 0 && v < r->pat->nvar; v++)
			vs[v] = (vspec){t[v], kc[v], val[v]};
		return k;
	}
	static const kf_type dflt[] = {
		{KF_F32, 1, {16}}, {KF_F32, 2, {4, 8}}, {KF_F64, 3, {2, 3, 5}},
	};
	if (i >= sizeof dflt / sizeof dflt[0])
		return 0;
	for (uint32_t v = 0; v < r->pat->nvar; v++)
		vs[v] = (vspec){dflt[i], false, NAN};
	return 1;
}

/* Applies r to b (a copy of a); the number of rewrites, or -1. */
static int apply_once(const kf_rule *r, kf_graph *b)
{
	kf_ruleset rs = {0};
	kf_ruleset_add(&rs, (kf_rule *)r);
	kf_rw_stats st;
	kf_rw_stats_init(&st, &rs);
	int rc = kf_rw_run(b, &rs, NULL, &st);
	int n = (int)st.rewrites;
	kf_rw_stats_free(&st);
	kf_ruleset_free(&rs);
	return rc < 0 || kf_verify(b) ? -1 : n;
}

/* One set of input types: 1 the rule fired and agrees, 0 it did not fire
 * (why in skipped), 2 it disagrees (reported to out), -1 error. */
static int check_config(kf_ctx *c, const kf_rule *r, const opts *o, const vspec *vs, uint64_t cseed,
			kf_buf *skipped, kf_buf *out)
{
	char why[256];
	kf_graph *a = pattern_graph(c, r, vs, cseed, why, sizeof why);
	if (!a) {
		kf_buf_puts(skipped, "  (");
		describe(skipped, c, r->pat, vs);
		kf_buf_printf(skipped, ": %s)\n", why);
		kf_diag_clear(c);
		return 0;
	}
	kf_graph *b = pattern_graph(c, r, vs, cseed, why, sizeof why);
	int n = apply_once(r, b), rc = n < 0 ? -1 : n > 0;
	for (int t = 0; rc == 1 && t < o->trials; t++) {
		kf_buf rep = {0};
		int d = compare(c, r, a, b, cseed + (uint64_t)t * 104729, &rep);
		if (d > 0) {
			kf_buf_printf(out, "%s: rule '%s' does not compute what its pattern does, for ", r->origin,
				      r->name);
			describe(out, c, r->pat, vs);
			kf_buf_printf(out, ":\n%s", rep.p);
		}
		rc = d < 0 ? -1 : d > 0 ? 2 : 1;
		kf_buf_free(&rep);
	}
	if (rc == 0)
		kf_buf_puts(skipped, "  (where() or the replacement declined)\n");
	kf_graph_free(a);
	kf_graph_free(b);
	return rc;
}

/* Verifies one rule: 0 fine, 1 wrong (reported), -1 could not check. */
static int verify_rule(kf_ctx *c, const kf_rule *r, const opts *o, kf_buf *out)
{
	const char *off = !r->pat ? "transform '%s': checked by its file's examples only"
		        : kf_lua_rule_verify_off(r) ? "rule '%s': verify = false, checked by the examples" : NULL;
	if (off) {
		if (o->verbose) {
			kf_buf_printf(out, "%s: ", r->origin);
			kf_buf_printf(out, off, r->name);
			kf_buf_putc(out, '\n');
		}
		return 0;
	}
	int fired = 0, bad = 0, rc = 0;
	kf_buf skipped = {0};
	for (uint32_t i = 0; !bad && rc >= 0; i++) {
		vspec vs[KF_PAT_MAXNODE];
		int k = config(r, i, vs);
		if (k <= 0) {
			rc = k;
			break;
		}
		rc = check_config(c, r, o, vs, o->seed + 7919 * i, &skipped, out);
		fired += rc > 0;
		bad = rc == 2;
	}
	if (rc >= 0 && !bad && fired == 0) {
		kf_buf_printf(out, "%s: rule '%s' never applies to its own pattern; give it verify = "
			      "{ {var = \"f32[4,8]\", ...} } with types it fits:\n%s", r->origin, r->name,
			      skipped.p ? skipped.p : "");
		bad = 1;
	} else if (rc >= 0 && o->verbose && !bad) {
		kf_buf_printf(out, "%s: rule '%s': same results for %d type set%s\n", r->origin, r->name, fired,
			      fired == 1 ? "" : "s");
	}
	kf_buf_free(&skipped);
	return rc < 0 ? -1 : bad;
}

static const char usage[] =
	"usage: kfuse-verify-rules [PATH...] [options]\n"
	"Checks Lua rule files or directories of them (default: the standard rules; a\n"
	"PATH not found here is looked up among them): every rule's replacement\n"
	"computes what its pattern computes, on random inputs of each type set, and\n"
	"every embedded example gives its expected output.\n"
	"  --seed N          seed of the random inputs (default 12345)\n"
	"  --trials N        random input sets per type set (default 3)\n"
	"  --no-examples     skip the embedded examples\n"
	"  --only-examples   run the examples only\n"
	"  -v, --verbose     a line for every rule verified\n"
	"  -h, --help, --version\n"
	"Exit status: 0 all verified, 1 a rule or an example is wrong or a file does\n"
	"not load, 2 a usage error.\n";

enum { O_SEED = 256, O_TRIALS, O_NO_EXAMPLES, O_ONLY_EXAMPLES, O_VERSION };

/* 0 to go on; else main returns parse_args's value - 1 (so --help is 0). */
static int parse_args(int argc, char **argv, opts *o, const char **paths, int *npath)
{
	static const struct option longs[] = {
		{"seed", required_argument, 0, O_SEED}, {"trials", required_argument, 0, O_TRIALS},
		{"no-examples", no_argument, 0, O_NO_EXAMPLES},
		{"only-examples", no_argument, 0, O_ONLY_EXAMPLES}, {"verbose", no_argument, 0, 'v'},
		{"help", no_argument, 0, 'h'}, {"version", no_argument, 0, O_VERSION}, {0, 0, 0, 0},
	};
	int ch;
	long long n;
	while ((ch = getopt_long(argc, argv, ":vh", longs, NULL)) != -1) {
		switch (ch) {
		case 'h': fputs(usage, stdout); return 1;
		case O_VERSION: kf_cli_version_rules(); return 1;
		case O_SEED:
			if (!kf_cli_u64("--seed", optarg, &o->seed))
				return kf_cli_status() + 1;
			break;
		case O_TRIALS:
			if (!kf_cli_int("--trials", optarg, 1, 1000, &n))
				return kf_cli_status() + 1;
			o->trials = (int)n;
			break;
		case O_NO_EXAMPLES: o->examples = false; break;
		case O_ONLY_EXAMPLES: o->rules = false; break;
		case 'v': o->verbose = true; break;
		default: return kf_cli_bad_option(ch, argv) + 1;
		}
	}
	for (int i = optind; i < argc; i++) {
		if (*npath == 64)
			return kf_cli_usage("at most 64 paths") + 1;
		paths[(*npath)++] = argv[i];
	}
	return 0;
}

int main(int argc, char **argv)
{
	opts o = {12345, 3, true, true, false};
	const char *paths[64];
	int npath = 0;
	kf_cli_init("kfuse-verify-rules", 2);
	int st = parse_args(argc, argv, &o, paths, &npath);
	if (st)
		return st - 1;
	kf_ctx *c = kf_ctx_new();
	kf_rt_register(c);
	int bad = 0, nrules = 0;
	uint32_t nex = 0;
	kf_buf out = {0};
	for (int p = 0; p < (npath ? npath : 1); p++) {
		kf_buf path = {0};
		kf_lrules *r = kf_rules_find(c, npath ? paths[p] : NULL, &path) == 0 ? kf_lua_rules_load(c, path.p) : NULL;
		kf_buf_free(&path);
		if (!r) {
			bad = 1;
			break;
		}
		const kf_ruleset *rs = kf_lua_rules_set(r);
		for (uint32_t i = 0; o.rules && i < rs->n; i++) {
			nrules++;
			int k = verify_rule(c, rs->rule[i], &o, &out);
			if (k < 0) {
				kf_note(c, KF_NOLOC, "while verifying rule '%s' (%s)", rs->rule[i]->name,
					rs->rule[i]->origin);
				bad = 1;
				break;
			}
			bad |= k;
		}
		if (o.examples && !kf_nerrors(c)) {
			uint32_t n;
			int f = kf_rules_run_examples(r, &out, &n);
			nex += n;
			bad |= f != 0;
		}
		if (kf_nerrors(c))
			break;
	}
	fwrite(out.p ? out.p : "", 1, out.n, stdout);
	kf_buf_free(&out);
	kf_diag_flush(c, stderr);
	if (!bad)
		printf("ok: %d rules verified, %u examples passed\n", nrules, nex);
	kf_plugin_release(c);
	kf_ctx_free(c);
	return bad;
}
