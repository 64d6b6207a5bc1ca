/* kfuse-verify-rules: checks Lua rule files.
 *
 *   kfuse-verify-rules [PATH...] [--seed N] [--trials N] [--no-examples] [--only-examples]
 *                      [--no-orders] [--no-low] [--covers OLD] [-v]   (--help has the details)
 *
 * For every rule: builds its pattern as a graph for each set of input types
 * (the rule's `verify = {...}`, else every variable f32[16], f32[4,8] and
 * f64[2,3,5] in turn, shaped to its `types`), applies the rule to a copy,
 * and runs both on the CPU interpreter with the same random inputs; a rule
 * whose replacement computes something else is reported with the inputs
 * that show it.  Then builds the pattern in every operand order and
 * grouping (orders.c) and checks the rule rewrites each.  Then runs each
 * file's embedded examples.  Every rule that holds in f32 is checked again
 * with its float operands in f16 and in bf16, judged by that type's
 * relative L2 tolerance (--no-low skips this).  --covers OLD also checks
 * that every graph a rule of OLD rewrites, the rules of PATH rewrite the
 * same way (covers.c).
 * Transforms and `verify = false` rules are counted apart: only their
 * examples check them.  Exit 0 when all is well, 1 when a rule or an
 * example is wrong or a file does not load.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "equiv.h"
#include "interp.h"
#include "plugin.h"
#include "rules.h"
#include "tensor.h"
#include "verify.h"

typedef vopts opts;

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

kf_graph *kfv_pattern_graph(kf_ctx *c, const kf_rule *r, const kf_pattern *p, const vspec *vs, uint64_t cseed,
			    char *why, size_t whylen)
{
	kf_graph *g = kf_graph_new(c, r->name);
	kf_vid bind[KF_PAT_MAXNODE];
	kf_type types[KF_PAT_MAXNODE];
	uint64_t rng = cseed;
	kf_vid seq[2];
	for (uint32_t i = 0; i < p->nvar; i++) {
		types[i] = vs[i].t;
		if ((int)i == p->seqvar) {
			/* `...` stands for two inputs of its type */
			kf_tid t = kf_type_intern(c, &vs[i].t);
			for (int k = 0; k < 2; k++) {
				char name[16];
				snprintf(name, sizeof name, "rest%d", k + 1);
				seq[k] = kf_block_add_arg(g, 0, t, kf_intern_cstr(c, name));
			}
			bind[i] = KF_NONE;
		} else if (vs[i].konst) {
			bind[i] = make_const(g, &vs[i].t, vs[i].value, &rng);
		} else {
			kf_tid t = kf_type_intern(c, &vs[i].t);
			bind[i] = kf_block_add_arg(g, 0, t, kf_intern_cstr(c, p->varname[i]));
		}
	}
	/* type variables (`cast(x, {to = "T"})`) take the values the
	 * variables' types give them, as a match would */
	int64_t tval[KF_PAT_MAXTVAR];
	uint32_t bound;
	if (!kf_pat_bind_types(r->pat, types, tval, &bound)) {
		snprintf(why, whylen, "the types do not satisfy the rule's type constraints");
		kf_graph_free(g);
		return NULL;
	}
	for (uint32_t i = 0; i < r->pat->ntvar; i++)
		if (!(bound & (1u << i)))
			tval[i] = r->pat->tvkind[i] == KF_TV_DTYPE && p->nvar ? vs[0].t.dtype : 1;
	kf_nid ret = kf_node_new(g, 0, KF_NONE, KF_OP_RETURN, NULL, 0, NULL, 0);
	kf_rewriter rw;
	kf_rw_begin(&rw, g, ret);
	rw.tval = tval;
	rw.seq = seq;
	rw.nseq = p->seqvar >= 0 ? 2 : 0;
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

void kfv_describe(kf_buf *b, const kf_ctx *c, const kf_pattern *p, const vspec *vs)
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
int kfv_compare(kf_ctx *c, const kf_rule *r, kf_graph *a, kf_graph *b, uint64_t seed, const kf_equiv_tol *ltol,
		kf_buf *rep)
{
	kf_equiv_tol tol = {0, 0, 0};
	if (ltol)
		tol = *ltol;
	else
		kf_lua_rule_tolerance(r, &tol.rtol, &tol.atol);
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
		if (kf_tensor_random(&in[i], (kf_dtype)t->dtype, t->rank, t->dim, &rng) < 0) {
			char why[200]; /* a failure always says why */
			kf_tensor_why(why, sizeof why, (kf_dtype)t->dtype, t->rank, t->dim);
			kf_error(c, KF_NOLOC, "cannot allocate random input %%%s: %s",
				 kf_str(c, kf_V(a, blk->arg[i])->name), why);
			rc = -1;
		}
	}
	if (rc == 0 && (kf_interp_run(a, in, (int)nin, oa, (int)nout) < 0 ||
			kf_interp_run(b, in, (int)nin, ob, (int)nout) < 0))
		rc = -1;
	for (uint32_t k = 0; k < nout && rc == 0; k++) {
		kf_equiv_stat st;
		kf_equiv_compare(&ob[k], &oa[k], tol.rtol, tol.atol, &st);
		if (!kf_equiv_bad(&st, &tol) && !st.shape_differs)
			continue;
		kf_buf_printf(rep, "  output %u: ", k + 1);
		kf_equiv_describe_tol(rep, &st, &tol); /* "(worst at [i]: replacement vs pattern)" */
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

/* Default type i of variable v under its constraint (or none): dtype
 * variables take the default's dtype, dim variables a size of their own,
 * free dims 3, a leading "..." i dims. */
static kf_type default_type(const kf_pattern *p, uint32_t v, const kf_type *dflt, uint32_t i)
{
	const kf_ptype *pt = p->vtype ? p->vtype[v] : NULL;
	if (!pt)
		return *dflt;
	static const int64_t sizes[] = {4, 8, 6, 5, 7, 3, 9, 2};
	kf_type t = *dflt;
	if (pt->dtype >= 0)
		t.dtype = (uint8_t)pt->dtype;
	if (pt->rank < 0)
		return t;
	int lead = pt->ellipsis ? (int)i : 0;
	if (lead + pt->rank > KF_MAX_RANK)
		lead = KF_MAX_RANK - pt->rank;
	memset(t.dim, 0, sizeof t.dim);
	t.rank = (uint8_t)(lead + pt->rank);
	for (int k = 0; k < lead; k++)
		t.dim[k] = 2 + k;
	for (int k = 0; k < pt->rank; k++)
		t.dim[lead + k] = pt->dvar[k] == -1 ? pt->dim[k] : pt->dvar[k] == -2 ? 3 : sizes[pt->dvar[k] % 8];
	return t;
}

int kfv_config(const kf_rule *r, uint32_t i, vspec *vs)
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
		vs[v] = (vspec){default_type(r->pat, v, &dflt[i], i), false, NAN};
	return 1;
}

int kfv_apply(const kf_ruleset *rs, kf_graph *g)
{
	kf_rw_stats st;
	kf_rw_stats_init(&st, rs);
	int rc = kf_rw_run(g, rs, NULL, &st);
	int n = (int)st.rewrites;
	kf_rw_stats_free(&st);
	return rc < 0 || kf_verify(g) ? -1 : n;
}

/* Applies r to b (a copy of a); the number of rewrites, or -1. */
static int apply_once(const kf_rule *r, kf_graph *b)
{
	kf_ruleset rs = {0};
	kf_ruleset_add(&rs, (kf_rule *)r);
	int n = kfv_apply(&rs, b);
	kf_ruleset_free(&rs);
	return n;
}

/* One set of input types: 1 the rule fired and agrees, 0 it did not fire
 * (why in skipped), 2 it disagrees (reported to out), -1 error.  tol NULL:
 * the rule's own tolerance (f32); else tol (a low type's). */
static int check_config(kf_ctx *c, const kf_rule *r, const opts *o, const vspec *vs, uint64_t cseed,
			const kf_equiv_tol *tol, kf_buf *skipped, kf_buf *out)
{
	char why[256];
	kf_graph *a = kfv_pattern_graph(c, r, r->pat, vs, cseed, why, sizeof why);
	if (!a) {
		kf_buf_puts(skipped, "  (");
		kfv_describe(skipped, c, r->pat, vs);
		kf_buf_printf(skipped, ": %s)\n", why);
		kf_diag_clear(c);
		return 0;
	}
	kf_graph *b = kfv_pattern_graph(c, r, r->pat, vs, cseed, why, sizeof why);
	int n = apply_once(r, b), rc = n < 0 ? -1 : n > 0;
	for (int t = 0; rc == 1 && t < o->trials; t++) {
		kf_buf rep = {0};
		int d = kfv_compare(c, r, a, b, cseed + (uint64_t)t * 104729, tol, &rep);
		if (d > 0) {
			kf_buf_printf(out, "%s: rule '%s' does not compute what its pattern does, for ", r->origin,
				      r->name);
			kfv_describe(out, c, r->pat, vs);
			if (tol) {
				kf_buf_puts(out, " (within ");
				kf_equiv_tol_describe(out, tol);
				kf_buf_putc(out, ')');
			}
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

/* What became of a rule. */
typedef struct tally {
	int verified, transforms, off, wrong;
	/* per low type: rules checked in it here, by their own verify entries,
	 * and rules that do not apply to it */
	int low_fit[2], low_own[2], low_unfit[2];
	uint64_t orders;
} tally;

/* The low types a rule is also checked in (issue 23: rules hold in the
 * types amp computes in), with the tolerance of a result computed there. */
static const kf_dtype low_types[2] = {KF_F16, KF_BF16};

/* Type set i of rule r with every f32 or f64 variable in `low` instead:
 * 1, 0 past the end, -1 on a malformed entry; *any false when no variable
 * was a wide float (the set is one the f32 pass checked already), *own
 * when one was `low` already (the rule's own entry names the type). */
static int low_config(const kf_rule *r, uint32_t i, kf_dtype low, vspec *vs, bool *any, bool *own)
{
	int k = kfv_config(r, i, vs);
	*any = *own = false;
	for (uint32_t v = 0; k > 0 && v < r->pat->nvar; v++) {
		*own |= vs[v].t.dtype == low;
		if (vs[v].t.dtype == KF_F32 || vs[v].t.dtype == KF_F64) {
			vs[v].t.dtype = (uint8_t)low;
			*any = true;
		}
	}
	return k;
}

/* Rule r in the low types, after it held in f32: wherever it applies to
 * its own pattern with f16 or bf16 operands, the replacement computes the
 * pattern within that type's tolerance (kf_equiv_default_tol: a relative
 * L2 error, as kfuse-opt --check-equivalence judges an amp graph).  A rule
 * may decline a low type (its types or where() say f32); that is counted,
 * not an error.  0 fine, 1 wrong (reported), -1 could not check. */
static int verify_low(kf_ctx *c, const kf_rule *r, const opts *o, kf_buf *out, tally *t)
{
	int rc = 0, bad = 0;
	for (int l = 0; l < 2 && !bad && rc >= 0; l++) {
		kf_equiv_tol tol = kf_equiv_default_tol(low_types[l]);
		int fired = 0;
		bool any, own, owned = false;
		kf_buf skipped = {0};
		for (uint32_t i = 0; !bad && rc >= 0; i++) {
			vspec vs[KF_PAT_MAXNODE];
			int k = low_config(r, i, low_types[l], vs, &any, &own);
			if (k <= 0) {
				rc = k;
				break;
			}
			owned |= own;
			if (!any)
				continue;
			k = check_config(c, r, o, vs, o->seed + 7919 * i, &tol, &skipped, out);
			rc = k < 0 ? -1 : 0;
			fired += k > 0;
			bad = k == 2;
		}
		kf_buf_free(&skipped);
		t->low_fit[l] += rc >= 0 && fired > 0;
		t->low_own[l] += rc >= 0 && !fired && owned;
		t->low_unfit[l] += rc >= 0 && !fired && !owned;
		if (rc >= 0 && o->verbose && !bad)
			kf_buf_printf(out, "%s: rule '%s': in %s, %s\n", r->origin, r->name, kf_dtype_name(low_types[l]),
				      fired ? "within tolerance" : owned ? "checked by its own verify entries"
				      : "does not apply");
	}
	return rc < 0 ? -1 : bad;
}

/* Verifies one rule (counted in t): 0 fine or not verifiable, 1 wrong
 * (reported), -1 could not check. */
static int verify_rule(kf_ctx *c, const kf_rule *r, const opts *o, kf_buf *out, tally *t)
{
	const char *off = !r->pat ? "transform '%s': not verified, its file's examples check it"
		        : kf_lua_rule_verify_off(r) ? "rule '%s': verify = false, its examples check it" : NULL;
	if (off) {
		/* counted apart: nothing here checked what it computes */
		if (r->pat)
			t->off++;
		else
			t->transforms++;
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
		int k = kfv_config(r, i, vs);
		if (k <= 0) {
			rc = k;
			break;
		}
		rc = check_config(c, r, o, vs, o->seed + 7919 * i, NULL, &skipped, out);
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
	if (rc >= 0 && !bad && o->low) {
		rc = verify_low(c, r, o, out, t);
		bad = rc > 0;
	}
	if (rc >= 0 && !bad && o->orders) {
		uint64_t n = 0;
		rc = kfv_orders(c, r, o, out, &n);
		bad = rc > 0;
		t->orders += n;
	}
	t->verified += rc >= 0 && !bad;
	t->wrong += rc >= 0 && bad;
	return rc < 0 ? -1 : bad;
}

static const char usage[] =
	"usage: kfuse-verify-rules [PATH...] [options]\n"
	"Checks Lua rule files or directories of them (default: the standard rules; a\n"
	"PATH not found here is looked up among them): every rule's replacement\n"
	"computes what its pattern computes, on random inputs of each type set; every\n"
	"rule rewrites its pattern in every operand order and grouping; and every\n"
	"embedded example gives its expected output.\n"
	"  --seed N          seed of the random inputs (default 12345)\n"
	"  --trials N        random input sets per type set (default 3)\n"
	"  --no-examples     skip the embedded examples\n"
	"  --only-examples   run the examples only\n"
	"  --no-orders       skip the operand orders\n"
	"  --no-low          skip the low types: by default every rule that holds in f32\n"
	"                    is checked again with its f32 and f64 operands in f16 and in\n"
	"                    bf16, judged by the type's relative L2 tolerance (f16 1e-2,\n"
	"                    bf16 5e-2: docs/amp.md); a rule that declines them is counted,\n"
	"                    not an error\n"
	"  --covers OLD      also: every graph a rule of OLD rewrites, the rules of the\n"
	"                    PATHs rewrite to the same graph\n"
	"  -v, --verbose     a line for every rule verified\n"
	"  -h, --help, --version\n"
	"Transforms and verify = false rules are counted apart (their examples check\n"
	"them).  Exit status: 0 all verified, 1 a rule or an example is wrong or a\n"
	"file does not load, 2 a usage error.\n";

enum { O_SEED = 256, O_TRIALS, O_NO_EXAMPLES, O_ONLY_EXAMPLES, O_NO_ORDERS, O_NO_LOW, O_COVERS, O_VERSION };

/* 0 to go on; else main returns parse_args's value - 1 (so --help is 0). */
static int parse_args(int argc, char **argv, opts *o, const char **paths, int *npath, const char **old)
{
	static const struct option longs[] = {
		{"seed", required_argument, 0, O_SEED}, {"trials", required_argument, 0, O_TRIALS},
		{"no-examples", no_argument, 0, O_NO_EXAMPLES},
		{"only-examples", no_argument, 0, O_ONLY_EXAMPLES}, {"no-orders", no_argument, 0, O_NO_ORDERS},
		{"no-low", no_argument, 0, O_NO_LOW},
		{"covers", required_argument, 0, O_COVERS}, {"verbose", no_argument, 0, 'v'},
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
		case O_NO_ORDERS: o->orders = false; break;
		case O_NO_LOW: o->low = false; break;
		case O_COVERS: *old = optarg; break;
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

/* --covers OLD: the rules of every PATH (together) against those of OLD. */
static int covers(kf_ctx *c, const char *old, kf_lrules **now, int nnow, const opts *o, kf_buf *out)
{
	kf_buf path = {0};
	kf_lrules *r = kf_rules_find(c, old, &path) == 0 ? kf_lua_rules_load(c, path.p) : NULL;
	kf_buf_free(&path);
	if (!r)
		return -1;
	kf_ruleset all = {0};
	for (int p = 0; p < nnow; p++)
		for (uint32_t i = 0; i < kf_lua_rules_set(now[p])->n; i++)
			kf_ruleset_add(&all, kf_lua_rules_set(now[p])->rule[i]);
	uint64_t n = 0;
	int k = kfv_covers(c, kf_lua_rules_set(r), &all, o, out, &n);
	kf_ruleset_free(&all);
	if (k == 0)
		kf_buf_printf(out, "ok: the rules cover %s: %llu graphs its rules rewrite are rewritten alike\n", old,
			      (unsigned long long)n);
	return k;
}

/* Loads and checks the rules of each path (the standard rules when there
 * are none): 0 all well, 1 not. */
static int verify_paths(kf_ctx *c, const char **paths, int npath, const opts *o, const char *old, kf_buf *out)
{
	int bad = 0, nload = 0;
	tally t = {0};
	uint32_t nex = 0;
	kf_lrules *loaded[64];
	for (int p = 0; p < (npath ? npath : 1); p++) {
		kf_buf path = {0};
		kf_lrules *r = kf_rules_find(c, npath ? paths[p] : NULL, &path) == 0 ? kf_lua_rules_load(c, path.p) : NULL;
		kf_buf_free(&path);
		if (!r) {
			bad = 1;
			break;
		}
		loaded[nload++] = r;
		const kf_ruleset *rs = kf_lua_rules_set(r);
		for (uint32_t i = 0; o->rules && i < rs->n; i++) {
			int k = verify_rule(c, rs->rule[i], o, out, &t);
			if (k < 0) {
				kf_note(c, KF_NOLOC, "while verifying rule '%s' (%s)", rs->rule[i]->name,
					rs->rule[i]->origin);
				bad = 1;
				break;
			}
			bad |= k;
		}
		if (o->examples && !kf_nerrors(c)) {
			uint32_t n;
			int f = kf_rules_run_examples(r, out, &n);
			nex += n;
			bad |= f != 0;
		}
		if (kf_nerrors(c))
			break;
	}
	if (old && !bad && !kf_nerrors(c))
		bad |= covers(c, old, loaded, nload, o, out) != 0;
	if (!bad) {
		kf_buf_printf(out, "ok: %d rules verified", t.verified);
		if (o->orders && o->rules)
			kf_buf_printf(out, " (%llu operand orders matched)", (unsigned long long)t.orders);
		if (t.transforms || t.off)
			kf_buf_printf(out, "; not verified, their examples check them: %d transforms, %d verify = false "
				      "rules", t.transforms, t.off);
		kf_buf_printf(out, "; %u examples passed\n", nex);
		for (int l = 0; o->low && o->rules && l < 2; l++)
			kf_buf_printf(out, "ok: in %s: %d rules within a relative L2 error of %g, %d checked by "
				      "their own verify entries, %d do not apply\n", kf_dtype_name(low_types[l]),
				      t.low_fit[l], kf_equiv_default_tol(low_types[l]).l2, t.low_own[l], t.low_unfit[l]);
	}
	return bad;
}

int main(int argc, char **argv)
{
	opts o = {12345, 3, true, true, true, false, true};
	const char *paths[64], *old = NULL;
	int npath = 0;
	kf_cli_init("kfuse-verify-rules", 2);
	int st = parse_args(argc, argv, &o, paths, &npath, &old);
	if (st)
		return st - 1;
	kf_ctx *c = kf_ctx_new();
	kf_rt_register(c);
	kf_buf out = {0};
	int bad = verify_paths(c, paths, npath, &o, old, &out);
	fwrite(out.p ? out.p : "", 1, out.n, stdout);
	kf_buf_free(&out);
	kf_diag_flush(c, stderr);
	int e = kf_stdout_flush();
	if (e) {
		fprintf(stderr, "<stdout>: error: cannot write: %s\n", kf_file_strerror(e));
		bad = 1;
	}
	kf_plugin_release(c);
	kf_ctx_free(c);
	return bad;
}
