/* rewrite_trace.c: what the rewrite driver says about its work: a line per
 * rewrite (trace=1), why candidates failed (trace=2), every candidate of
 * the rules --trace-rule names and how far its match got, and the summary
 * and per-rule coverage tables (`rules{stats}`). */
#include <string.h>

#include "kf_int.h"
#include "rewrite_int.h"

void kf_rwt_rewrite(kf_buf *b, const kf_graph *g, const kf_rule *r, kf_nid root, const kf_match *m,
		    const kf_rewriter *rw)
{
	kf_buf_printf(b, "rewrite '%s' at ", r->name);
	kf_rw_locstr(b, g->ctx, kf_N(g, root)->loc);
	kf_buf_puts(b, ":");
	if (m)
		for (uint32_t i = 0; i < m->nnode; i++)
			kf_buf_printf(b, " %s", kf_op(g->ctx, kf_N(g, m->node[i])->op)->name);
	else
		kf_buf_printf(b, " %s", kf_op(g->ctx, kf_N(g, root)->op)->name);
	kf_buf_puts(b, " ->");
	uint32_t shown = 0;
	for (uint32_t i = 0; i < rw->ncreated; i++) {
		const kf_node *nd = kf_N(g, rw->created[i]);
		if (nd->op != KF_OP_CONST && !(nd->flags & KF_NODE_DEAD)) {
			kf_buf_printf(b, " %s", kf_op(g->ctx, nd->op)->name);
			shown++;
		}
	}
	if (!shown)
		kf_buf_puts(b, rw->ncreated ? " const" : " (existing values)");
	kf_buf_putc(b, '\n');
}

void kf_rwt_reject(kf_buf *b, const kf_graph *g, const kf_rule *r, kf_nid n, const char *why)
{
	kf_buf_printf(b, "  '%s' at ", r->name);
	kf_rw_locstr(b, g->ctx, kf_N(g, n)->loc);
	kf_buf_printf(b, ": %s\n", why ? why : "no match");
}

bool kf_rw_selects(const char *spec, const char *name)
{
	size_t n = strlen(spec);
	if (n && spec[n - 1] == '*')
		return !strncmp(spec, name, n - 1);
	return !strcmp(spec, name);
}

/* "%e = tanh(...) at f.kf:3:3", "%x (an argument)", "a const at ...". */
static void describe_value(kf_buf *b, const kf_graph *g, kf_vid v)
{
	const kf_value *x = kf_V(g, v);
	if (x->name)
		kf_buf_printf(b, "%%%s", kf_str(g->ctx, x->name));
	if (x->def == KF_NONE) {
		kf_buf_puts(b, x->name ? " (an argument)" : "an argument");
		return;
	}
	kf_buf_printf(b, "%s%s at ", x->name ? " = " : "a ", kf_op(g->ctx, kf_N(g, x->def)->op)->name);
	kf_rw_locstr(b, g->ctx, kf_N(g, x->def)->loc);
}

void kf_rwt_candidate(kf_buf *b, const kf_graph *g, const kf_rule *r, kf_nid n, const kf_match *m,
		      const char *outcome)
{
	kf_buf_printf(b, "trace-rule '%s' at ", r->name);
	kf_rw_locstr(b, g->ctx, kf_N(g, n)->loc);
	kf_buf_printf(b, " (%s): ", kf_op(g->ctx, kf_N(g, n)->op)->name);
	if (outcome || !m || !r->pat) {
		kf_buf_printf(b, "%s\n", outcome ? outcome : "no match");
		return;
	}
	uint32_t total = kf_pat_size(r->pat);
	if (m->why_depth >= total) {
		kf_buf_printf(b, "matched; %s\n", m->why ? m->why : "declined");
		return;
	}
	kf_buf_printf(b, "%u of %u pattern nodes matched, then ", m->why_depth, total);
	kf_pat_print_at(b, r->pat, KF_PV(m->why_pn, 0), 72);
	kf_buf_puts(b, " against ");
	if (m->why_v != KF_NONE)
		describe_value(b, g, m->why_v);
	else
		kf_buf_puts(b, "the match");
	kf_buf_printf(b, ": %s\n", m->why ? m->why : "no match");
}

/* ---- tables ---------------------------------------------------------------- */

static void counters(kf_buf *out, const kf_rw_stats *st)
{
	kf_buf_printf(out, "rules: %llu rewrites, %u iterations, %s; %llu nodes visited, %llu match attempts, "
		      "%llu structural matches, %llu script entries, %llu declined, %llu dead nodes removed, "
		      "%llu search steps\n",
		      (unsigned long long)st->rewrites, st->iterations,
		      st->converged ? "converged" : "not converged", (unsigned long long)st->visited,
		      (unsigned long long)st->tried, (unsigned long long)st->matched,
		      (unsigned long long)st->callbacks, (unsigned long long)st->rejected,
		      (unsigned long long)st->dead, (unsigned long long)st->steps);
}

void kf_rw_summary(kf_buf *out, const kf_ruleset *rs, const kf_rw_stats *st)
{
	counters(out, st);
	for (uint32_t i = 0; i < rs->n && i < st->nrule; i++)
		if (st->rule[i].rewritten)
			kf_buf_printf(out, "  %6llu  %s\n", (unsigned long long)st->rule[i].rewritten, rs->rule[i]->name);
}

void kf_rw_coverage(kf_buf *out, const kf_ruleset *rs, const kf_rw_stats *st)
{
	counters(out, st);
	kf_buf_printf(out, "  %10s %10s %10s %10s %10s  %s\n", "attempted", "matched", "where-no", "declined",
		      "rewritten", "rule");
	for (uint32_t i = 0; i < rs->n && i < st->nrule; i++) {
		const kf_rw_rulestat *x = &st->rule[i];
		if (!rs->rule[i]->pat) {
			/* a transform: apply decides, there is no match to count */
			kf_buf_printf(out, "  %10llu %10s %10s %10s %10llu  %s (transform)\n",
				      (unsigned long long)x->attempted, "-", "-", "-",
				      (unsigned long long)x->rewritten, rs->rule[i]->name);
			continue;
		}
		kf_buf_printf(out, "  %10llu %10llu %10llu %10llu %10llu  %s\n", (unsigned long long)x->attempted,
			      (unsigned long long)x->matched, (unsigned long long)x->where_no,
			      (unsigned long long)x->declined, (unsigned long long)x->rewritten, rs->rule[i]->name);
	}
}
