/* rewrite_driver.c: the greedy worklist driver of the rewrite engine.
 *
 * requires exact use lists; keeps them; removes dead nodes (not pinned ones).
 *
 * Shaped like MLIR's greedy driver: rules are indexed by root op and tried
 * by benefit; the worklist is a de-duplicated stack seeded top-down; after a
 * rewrite the new nodes, and the users of the new values up to the deepest
 * pattern's depth, are pushed again, so one sweep reaches a fixed point and
 * a second one (with nothing to do) proves it.  Iterations (sweeps) and
 * rewrites are capped.  Each rewrite hashes the region it replaced and the
 * region it built (rewrite_hash.c); equal hashes mean a rule that changed
 * nothing, and a built region equal to one an earlier rewrite started from
 * means two rules undo each other.
 */
#include <stdlib.h>
#include <string.h>

#include "kf_int.h"
#include "rewrite.h"
#include "rewrite_int.h"

/* ---- worklist -------------------------------------------------------------- */

void kf_rwd_wl_push(kf_rw_driver *d, kf_nid n)
{
	if (n == KF_NONE || (kf_N(d->g, n)->flags & KF_NODE_DEAD))
		return;
	if (n >= d->capin) {
		uint32_t cap = d->capin;
		kf_grow((void **)&d->inwl, &cap, n + 1, 1);
		memset(d->inwl + d->capin, 0, cap - d->capin);
		d->capin = cap;
	}
	if (d->inwl[n])
		return;
	d->inwl[n] = 1;
	kf_grow((void **)&d->wl, &d->capwl, d->nwl + 1, sizeof *d->wl);
	d->wl[d->nwl++] = n;
}

/* Users of v, and their users, up to depth levels: a pattern rooted there
 * may now match through the new value. */
void kf_rwd_push_users(kf_rw_driver *d, kf_vid v, int depth)
{
	if (depth <= 0)
		return;
	kf_foreach_use(d->g, v, u) {
		kf_nid user = d->g->use[u].user;
		kf_rwd_wl_push(d, user);
		const kf_node *nd = kf_N(d->g, user);
		for (uint32_t r = 0; r < nd->nres && depth > 1; r++)
			kf_rwd_push_users(d, nd->res0 + r, depth - 1);
	}
}

static void seed(kf_rw_driver *d)
{
	kf_graph *g = d->g;
	if (d->ordered)
		kf_rw_order_graph(&d->ord, g);
	for (kf_bid b = g->nblk; b-- > 0;) {
		if (b && (g->blk[b].parent == KF_NONE || (kf_N(g, g->blk[b].parent)->flags & KF_NODE_DEAD)))
			continue;
		/* pushed last to first, so that popping goes top-down */
		for (kf_nid n = g->blk[b].last; n != KF_NONE; n = g->node[n].prev)
			kf_rwd_wl_push(d, n);
	}
}

/* ---- the rule index ------------------------------------------------------------ */

static int build_index(kf_rw_driver *d)
{
	const kf_ruleset *rs = d->rs;
	d->nop = kf_op_count(d->g->ctx);
	d->byop = calloc((size_t)d->nop, sizeof *d->byop);
	d->nbyop = calloc((size_t)d->nop, sizeof *d->nbyop);
	if (!d->byop || !d->nbyop)
		return -1;
	d->depth = 1;
	d->want = malloc((rs->n ? rs->n : 1) * sizeof *d->want);
	d->acleaf = calloc(rs->n ? rs->n : 1, 1);
	d->maxleaf = calloc((size_t)d->nop, 1);
	if (!d->want || !d->acleaf || !d->maxleaf)
		return -1;
	for (uint32_t i = 0; i < rs->n; i++) {
		kf_rule *r = rs->rule[i];
		r->index = i;
		d->want[i][0] = d->want[i][1] = -2;
		if (r->pat) {
			const kf_pnode *root = &r->pat->node[KF_PV_NODE(r->pat->out[0])];
			/* an AC chain's operands may sit deeper: kf_rw_may_match knows */
			d->acleaf[i] = root->nleaf;
			if (r->on_op >= 0 && r->on_op < d->nop && root->nleaf > d->maxleaf[r->on_op])
				d->maxleaf[r->on_op] = root->nleaf;
			for (uint32_t k = 0; k < 2 && root->nin == 2 && !root->nleaf; k++) {
				const kf_pnode *c = &r->pat->node[KF_PV_NODE(root->in[k])];
				d->want[i][k] = c->kind == KF_PN_OP ? (int16_t)c->op
					      : c->kind == KF_PN_CONST ? KF_OP_CONST : -1;
			}
		}
		if (r->on_op < 0 || r->on_op >= d->nop)
			continue;
		if (r->pat && kf_pat_depth(r->pat) > d->depth)
			d->depth = kf_pat_depth(r->pat);
		d->nbyop[r->on_op]++;
	}
	for (int op = 0; op < d->nop; op++) {
		d->byop[op] = d->nbyop[op] ? malloc(d->nbyop[op] * sizeof **d->byop) : NULL;
		d->nbyop[op] = 0;
	}
	for (uint32_t i = 0; i < rs->n; i++) {
		int op = rs->rule[i]->on_op;
		if (op < 0 || op >= d->nop)
			continue;
		/* insertion keeps load order among equal benefits */
		uint32_t *l = d->byop[op], k = d->nbyop[op]++;
		while (k > 0 && rs->rule[l[k - 1]]->benefit < rs->rule[i]->benefit) {
			l[k] = l[k - 1];
			k--;
		}
		l[k] = i;
	}
	return 0;
}

/* ---- rollback and commit ------------------------------------------------------------ */

bool kf_rwd_node_unused(const kf_graph *g, kf_nid n)
{
	const kf_node *nd = kf_N(g, n);
	for (uint32_t r = 0; r < nd->nres; r++)
		if (kf_has_uses(g, nd->res0 + r))
			return false;
	return true;
}

static bool pinned(const kf_graph *g, kf_nid n)
{
	return (kf_op(g->ctx, kf_N(g, n)->op)->flags & (KF_OPF_EFFECT | KF_OPF_TERMINATOR)) != 0;
}

/* Erases n and pushes its operands' producers (they may be dead now). */
void kf_rwd_erase_node(kf_rw_driver *d, kf_nid n)
{
	kf_graph *g = d->g;
	const kf_node *nd = kf_N(g, n);
	uint32_t nin = nd->nin;
	kf_vid in[16];
	for (uint32_t i = 0; i < nin && i < 16; i++)
		in[i] = kf_in(g, n, i);
	kf_node_erase(g, n);
	for (uint32_t i = 0; i < nin && i < 16; i++) {
		kf_rwd_wl_push(d, kf_def(g, in[i]));
		kf_rwd_push_users(d, in[i], d->depth);
	}
}

/* Erases the nodes in list that nothing reads any more, repeatedly. */
static void erase_dead(kf_rw_driver *d, const kf_nid *list, uint32_t n)
{
	bool again = true;
	while (again) {
		again = false;
		for (uint32_t i = 0; i < n; i++) {
			kf_nid x = list[i];
			if (!(kf_N(d->g, x)->flags & KF_NODE_DEAD) && !pinned(d->g, x) && kf_rwd_node_unused(d->g, x)) {
				kf_rwd_erase_node(d, x);
				again = true;
			}
		}
	}
}

/* ---- tracing ------------------------------------------------------------------- */

void kf_rwd_trace_rewrite(kf_rw_driver *d, const kf_rule *r, kf_nid root, const kf_match *m,
			  const kf_rewriter *rw)
{
	if (d->o->log && d->o->trace >= 1)
		kf_rwt_rewrite(d->o->log, d->g, r, root, m, rw);
}

/* A candidate root of rule r came to `outcome` (trace=2: failures; and
 * every candidate of the rules --trace-rule names). */
void kf_rwd_trace_candidate(kf_rw_driver *d, const kf_rule *r, kf_nid n, const kf_match *m, const char *outcome,
			    bool failed)
{
	if (!d->o->log)
		return;
	if (d->o->trace_rule && kf_rw_selects(d->o->trace_rule, r->name))
		kf_rwt_candidate(d->o->log, d->g, r, n, m, outcome);
	else if (failed && d->o->trace >= 2)
		kf_rwt_reject(d->o->log, d->g, r, n, m ? m->why : outcome);
}

/* "'a' (40), 'b' (24)": the rules among the last rewrites. */
static void recent_rules(kf_rw_driver *d, kf_buf *out)
{
	uint32_t n = d->nrecent < 64 ? d->nrecent : 64;
	uint32_t cnt[64] = {0}, idx[64], k = 0;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t r = d->recent[i], j = 0;
		while (j < k && idx[j] != r)
			j++;
		if (j == k)
			idx[k++] = r;
		cnt[j]++;
	}
	for (uint32_t j = 0; j < k; j++)
		kf_buf_printf(out, "%s'%s' (%u)", j ? ", " : "", d->rs->rule[idx[j]]->name, cnt[j]);
}

/* (kf_rw_run sized st->rule for the set) */
kf_rw_rulestat *kf_rwd_rstat(kf_rw_driver *d, const kf_rule *r)
{
	return &d->st->rule[r->index];
}

void kf_rwd_note_fired(kf_rw_driver *d, const kf_rule *r)
{
	d->st->rewrites++;
	kf_rwd_rstat(d, r)->rewritten++;
	d->recent[d->nrecent++ % 64] = r->index;
	d->changed = true;
}

/* The value a rewrite made in place of `from` takes its name (a result the
 * user named %y stays %y, and kfuse-run --expect y= still finds it). */
void kf_rwd_keep_name(kf_graph *g, kf_vid from, kf_vid to, kf_nid mark)
{
	kf_nid d = kf_def(g, to);
	if (from == to || !g->val[from].name || g->val[to].name || d == KF_NONE || d < mark ||
	    kf_N(g, d)->nres != 1)
		return;
	g->val[to].name = g->val[from].name;
	g->val[from].name = 0;
}

/* ---- applying one rule ------------------------------------------------------------ */

int kf_rwd_fail_rule(kf_rw_driver *d, kf_rewriter *rw, kf_nid n, const char *what)
{
	kf_rw_rollback(rw);
	kf_note(d->g->ctx, kf_N(d->g, n)->loc, "while %s rule '%s' (%s) here", what, rw->rule->name,
		rw->rule->origin ? rw->rule->origin : "C");
	return -1;
}

/* Checks the replacement of a match before it is swapped in: 1 fine, 0 to
 * decline (reason in rw->err), -1 on a broken rule (error in the context). */
static int check_replacement(kf_rw_driver *d, kf_rewriter *rw, const kf_match *m, kf_nid n)
{
	kf_graph *g = d->g;
	const kf_rule *r = rw->rule;
	if (rw->nout != m->nout) {
		kf_error(g->ctx, kf_N(g, n)->loc, "rule '%s' (%s): replace gave %u values for %u pattern outputs",
			 r->name, r->origin ? r->origin : "C", rw->nout, m->nout);
		return -1;
	}
	for (uint32_t k = 0; k < m->nout; k++) {
		if (rw->out[k] >= g->nval || kf_rw_erased(rw, kf_def(g, rw->out[k]))) {
			kf_error(g->ctx, kf_N(g, n)->loc, "rule '%s': replace result %u is not a live value",
				 r->name, k + 1);
			return -1;
		}
		if (kf_V(g, rw->out[k])->type != kf_V(g, m->out[k])->type) {
			kf_buf a = {0}, b = {0};
			kf_rw_type_str(&a, g->ctx, kf_V(g, rw->out[k])->type);
			kf_rw_type_str(&b, g->ctx, kf_V(g, m->out[k])->type);
			snprintf(rw->err, sizeof rw->err, "the replacement has type %s, not %s", a.p, b.p);
			if (!(d->warned[r->index] & 1)) {
				/* once per rule and graph: a rule that builds the wrong
				 * type is a bug that would otherwise never show */
				d->warned[r->index] |= 1;
				kf_warning(g->ctx, kf_N(g, n)->loc, "rule '%s' (%s): its replacement has type %s where "
					   "it replaces %s; the match is declined (--trace-rule '%s' shows each)",
					   r->name, r->origin ? r->origin : "C", a.p, b.p, r->name);
			}
			kf_buf_free(&a);
			kf_buf_free(&b);
			return 0;
		}
	}
	/* a replacement that reads what it replaces would become a cycle */
	for (uint32_t i = 0; i < rw->ncreated; i++) {
		const kf_node *nd = kf_N(g, rw->created[i]);
		for (uint32_t j = 0; j < nd->nin; j++)
			for (uint32_t k = 0; k < m->nout; k++)
				if (kf_in(g, rw->created[i], j) == m->out[k] && rw->out[k] != m->out[k]) {
					kf_error(g->ctx, kf_N(g, n)->loc,
						 "rule '%s' (%s): the replacement reads the value it replaces",
						 r->name, r->origin ? r->origin : "C");
					return -1;
				}
	}
	if (m->nout > 1) {
		/* outputs besides the root are rewired to values made just before
		 * the root: none of their users may come before it */
		uint32_t left = m->nnode;
		for (kf_nid x = kf_N(g, n)->prev; x != KF_NONE && left > 1; x = kf_N(g, x)->prev) {
			if (x >= rw->mark)
				continue;
			bool matched = false;
			for (uint32_t i = 0; i < m->nnode; i++)
				matched |= m->node[i] == x;
			if (matched) {
				left--;
				continue;
			}
			for (uint32_t j = 0; j < kf_N(g, x)->nin; j++)
				for (uint32_t k = 1; k < m->nout; k++)
					if (kf_in(g, x, j) == m->out[k]) {
						snprintf(rw->err, sizeof rw->err,
							 "output %u has a user before the root", k + 1);
						return 0;
					}
		}
	}
	return 1;
}

/* A rule whose every match gives back what it matched: an error (it would
 * claim success forever). */
static int report_noop(kf_rw_driver *d, const kf_rule *r, kf_nid n)
{
	kf_error(d->g->ctx, kf_N(d->g, n)->loc, "rule '%s' (%s) claims success but leaves the graph unchanged",
		 r->name, r->origin ? r->origin : "C");
	return -1;
}

/* Rewrite rw (from region hb to ha) gives back a graph an earlier rewrite
 * started from: -1 with the error (rolled back), else 0. */
static int report_undo(kf_rw_driver *d, kf_rewriter *rw, kf_nid n, uint64_t hb, uint64_t ha)
{
	kf_graph *g = d->g;
	const kf_rule *r = rw->rule;
	const char *org = r->origin ? r->origin : "C";
	const kf_rw_seen_ent *e = kf_rw_seen_find(&d->seen, hb);
	if (e && e->from == ha) {
		const kf_rule *a = d->rs->rule[e->rule - 1];
		kf_rw_rollback(rw);
		if (a == r)
			kf_error(g->ctx, kf_N(g, n)->loc, "rule '%s' (%s) undoes itself: it gives back the graph "
				 "it rewrote", r->name, org);
		else
			kf_error(g->ctx, kf_N(g, n)->loc, "rules '%s' (%s) and '%s' (%s) undo each other: "
				 "'%s' gives back the graph that '%s' rewrote", a->name,
				 a->origin ? a->origin : "C", r->name, org, r->name, a->name);
		return -1;
	}
	return 0;
}

/* One candidate root of a rule: the match, and what accept made of it. */
typedef struct attempt {
	kf_rw_driver *d;
	const kf_rule *r;
	kf_rewriter *rw;
	kf_nid n;
	bool begun;        /* rw is started (on the first complete match) */
	uint32_t where_no, declined, noop;
	uint64_t hb, ha;   /* the accepted rewrite's regions: matched, built */
	char why[256];
} attempt;

/* The driver's accept (kf_rw_match): where(), then the replacement built
 * and checked; a declined one is rolled back and the matcher goes on. */
static int accept_match(void *ud, kf_match *m)
{
	attempt *a = ud;
	kf_rw_driver *d = a->d;
	const kf_rule *r = a->r;
	kf_rewriter *rw = a->rw;
	if (!a->begun) {
		kf_rw_begin(rw, d->g, a->n);
		rw->rule = r;
		rw->ord = d->ordered ? &d->ord : NULL;
		a->begun = true;
	}
	d->st->matched++;
	rw->m = m;
	rw->tval = m->tval;
	rw->seq = m->seq;
	rw->nseq = m->nseq;
	rw->err[0] = 0;
	if (r->where) {
		d->st->callbacks++;
		int k = r->where(rw);
		if (k < 0)
			return kf_rwd_fail_rule(d, rw, a->n, "checking");
		if (k == 0) {
			d->st->rejected++;
			a->where_no++;
			m->declined = "where() said no";
			return 0;
		}
	}
	int k;
	if (r->tmpl) {
		k = kf_rw_instantiate(rw, r->tmpl, m->bind, (kf_dtype)kf_vtype(d->g, m->out[0])->dtype, m->out);
	} else {
		d->st->callbacks++;
		k = r->replace(rw);
	}
	if (k > 0)
		k = check_replacement(d, rw, m, a->n);
	if (k < 0)
		return kf_rwd_fail_rule(d, rw, a->n, "applying");
	if (k == 0) {
		kf_rw_rollback(rw);
		d->st->rejected++;
		a->declined++;
		snprintf(a->why, sizeof a->why, "%s", rw->err[0] ? rw->err : "replace declined");
		m->declined = a->why;
		return 0;
	}
	a->hb = kf_rw_region_hash(d->g, m, 0, m->out, m->nout);
	a->ha = kf_rw_region_hash(d->g, NULL, rw->mark, rw->out, rw->nout);
	if (a->ha == a->hb) {
		/* another binding (an AC chain's other order) may change
		 * something; if none does, the rule is reported */
		kf_rw_rollback(rw);
		a->noop++;
		m->declined = "the replacement is the graph it matched";
		return 0;
	}
	return 1;
}

/* 1 rewritten, 0 no match (or declined), -1 error. */
static int apply_rule(kf_rw_driver *d, const kf_rule *r, kf_nid n)
{
	kf_graph *g = d->g;
	kf_match m;
	kf_rewriter rw;
	d->st->tried++;
	kf_rw_rulestat *rs = kf_rwd_rstat(d, r);
	rs->attempted++;
	attempt a;
	a.d = d, a.r = r, a.rw = &rw, a.n = n, a.begun = false, a.where_no = a.declined = a.noop = 0;
	int k = kf_rw_match(g, r, n, &m, accept_match, &a);
	d->st->steps += m.steps;
	if (m.steps > d->most_steps) {
		d->most_steps = m.steps;
		d->hungriest = r;
	}
	if (k >= 0 && d->st->steps > d->max_steps) {
		/* a pattern whose search grows with the graph (many symmetric
		 * operands) must not hang the pass */
		if (k > 0)
			kf_rw_rollback(&rw);
		kf_error(g->ctx, kf_N(g, n)->loc, "rules: the matcher's search took over %llu steps (max-steps=%llu); "
			 "rule '%s' (%s) took the most in one match (%u)", (unsigned long long)d->st->steps,
			 (unsigned long long)d->max_steps, d->hungriest->name,
			 d->hungriest->origin ? d->hungriest->origin : "C", d->most_steps);
		k = -1;
	}
	if (k == 0 && m.steps > KF_MATCH_STEPS && !(d->warned[r->index] & 2)) {
		/* a miss that is not the pattern's answer but the search's
		 * limit: say so (once per rule and graph) */
		d->warned[r->index] |= 2;
		kf_warning(g->ctx, kf_N(g, n)->loc, "rule '%s' (%s): the match here gave up after %d search steps "
			   "(a chain of many operands that the rest of the pattern rejects in every order?)",
			   r->name, r->origin ? r->origin : "C", KF_MATCH_STEPS);
	}
	if (k == 0 && a.noop)
		k = report_noop(d, r, n);
	if (k <= 0) {
		rs->matched += a.where_no || a.declined;
		rs->where_no += a.where_no && !a.declined;
		rs->declined += a.declined > 0;
		if (k == 0)
			kf_rwd_trace_candidate(d, r, n, &m, NULL, true);
		if (a.begun)
			kf_rw_end(&rw);
		return k;
	}
	rs->matched++;
	if (report_undo(d, &rw, n, a.hb, a.ha) < 0) {
		kf_rw_end(&rw);
		return -1;
	}
	kf_rw_seen_add(&d->seen, a.ha, a.hb, r->index);
	kf_rwd_trace_rewrite(d, r, n, &m, &rw);
	if (d->o->trace_rule && d->o->log && kf_rw_selects(d->o->trace_rule, r->name))
		kf_rwt_candidate(d->o->log, g, r, n, &m, "rewritten");
	for (uint32_t i = 0; i < m.nout; i++) {
		kf_replace_all_uses(g, m.out[i], rw.out[i]);
		kf_rwd_keep_name(g, m.out[i], rw.out[i], rw.mark);
	}
	kf_rwd_note_fired(d, r);
	for (uint32_t i = 0; i < rw.ncreated; i++)
		kf_rwd_wl_push(d, rw.created[i]);
	for (uint32_t i = 0; i < rw.nout; i++)
		kf_rwd_push_users(d, rw.out[i], d->depth);
	erase_dead(d, m.node, m.nnode);
	kf_rw_end(&rw);
	return 1;
}

/* ---- the loop ------------------------------------------------------------------ */

static int cap_hit(kf_rw_driver *d)
{
	kf_buf b = {0};
	recent_rules(d, &b);
	kf_error(d->g->ctx, d->g->loc, "rules did not converge: %llu rewrites hit the cap (max-rewrites=%llu); "
		 "the last ones were by %s", (unsigned long long)d->st->rewrites,
		 (unsigned long long)d->max_rewrites, b.p ? b.p : "?");
	kf_buf_free(&b);
	return -1;
}

static int process(kf_rw_driver *d)
{
	kf_graph *g = d->g;
	while (d->nwl) {
		kf_nid n = d->wl[--d->nwl];
		d->inwl[n] = 0;
		const kf_node *nd = kf_N(g, n);
		if (nd->flags & KF_NODE_DEAD)
			continue;
		d->st->visited++;
		if (nd->nres && !pinned(g, n) && kf_rwd_node_unused(g, n)) {
			kf_rwd_erase_node(d, n);
			d->st->dead++;
			d->changed = true;
			continue;
		}
		int op = nd->op;
		/* the ops of a binary node's operands (-3: a graph argument),
		 * against which most candidates fail at once (kf_rw_match
		 * checks it too, for callers that match directly) */
		int have0 = -3, have1 = -3;
		if (nd->nin == 2) {
			kf_nid a = kf_def(g, kf_in(g, n, 0)), b = kf_def(g, kf_in(g, n, 1));
			have0 = a == KF_NONE ? -3 : kf_N(g, a)->op;
			have1 = b == KF_NONE ? -3 : kf_N(g, b)->op;
		}
		bool comm = (kf_op(g->ctx, op)->flags & KF_OPF_COMMUTATIVE) != 0;
		int have[KF_AC_MAXPIECES];
		int nhave = -1; /* the pieces of an AC chain at n, found once for all its rules */
		uint32_t most = 0;
		for (uint32_t i = 0; op < d->nop && i < d->nbyop[op]; i++) {
			uint32_t ri = d->byop[op][i];
			const kf_rule *r = d->rs->rule[ri];
			int w0 = d->want[ri][0], w1 = d->want[ri][1];
			bool may;
			if (!r->pat) {
				may = true;
			} else if (d->acleaf[ri]) {
				if (nhave < 0)
					nhave = (int)kf_rw_ac_pieces(g, n, d->maxleaf[op], have, &most);
				may = kf_rw_ac_fits(r->pat, &r->pat->node[KF_PV_NODE(r->pat->out[0])], have,
						    (uint32_t)nhave, most);
			} else if (nd->nin == 2 && w0 != -2) {
				may = ((w0 < 0 || w0 == have0) && (w1 < 0 || w1 == have1)) ||
				      (comm && (w0 < 0 || w0 == have1) && (w1 < 0 || w1 == have0));
			} else {
				may = kf_rw_may_match(g, r, n);
			}
			if (!may) {
				d->st->tried++;
				kf_rwd_rstat(d, r)->attempted++;
				if (d->o->log && d->o->trace_rule && kf_rw_selects(d->o->trace_rule, r->name))
					kf_rwt_candidate(d->o->log, g, r, n, NULL, "the ops around the root cannot match");
				continue;
			}
			int k = r->pat ? apply_rule(d, r, n) : kf_rwd_apply_transform(d, r, n);
			if (k < 0)
				return -1;
			if (k > 0) {
				if (d->st->rewrites >= d->max_rewrites)
					return cap_hit(d);
				break;
			}
		}
	}
	return 0;
}

int kf_rw_run(kf_graph *g, const kf_ruleset *rs, const kf_rw_opts *o, kf_rw_stats *st)
{
	static const kf_rw_opts dflt = {0};
	kf_rw_driver d;
	memset(&d, 0, sizeof d);
	d.g = g;
	d.rs = rs;
	d.o = o ? o : &dflt;
	d.st = st;
	if (st->nrule < rs->n) {
		/* a rule set that grew since kf_rw_stats_init */
		st->rule = kf_xrealloc(st->rule, rs->n * sizeof *st->rule);
		memset(st->rule + st->nrule, 0, (rs->n - st->nrule) * sizeof *st->rule);
		st->nrule = rs->n;
	}
	d.warned = kf_xcalloc(rs->n ? rs->n : 1, 1);
	for (uint32_t i = 0; i < rs->n; i++)
		d.ordered |= !rs->rule[i]->pat;
	int rc = build_index(&d);
	if (rc < 0)
		kf_error(g->ctx, g->loc, "out of memory building the rule index");
	d.max_rewrites = d.o->max_rewrites ? d.o->max_rewrites : 100000 + 8 * (uint64_t)g->nnode;
	d.max_steps = d.o->max_steps ? d.o->max_steps : 50000000 + 200 * (uint64_t)g->nnode;
	int max_iter = d.o->max_iter > 0 ? d.o->max_iter : 10;
	st->converged = false;
	uint64_t before = st->rewrites;
	for (int it = 0; rc == 0 && it < max_iter; it++) {
		st->iterations++;
		d.changed = false;
		seed(&d);
		rc = process(&d);
		if (rc == 0 && !d.changed) {
			st->converged = true;
			break;
		}
	}
	if (rc == 0 && !st->converged) {
		kf_buf b = {0};
		recent_rules(&d, &b);
		kf_error(g->ctx, g->loc, "rules did not converge in %d iterations (max-iter=%d, %llu rewrites); "
			 "the last ones were by %s", max_iter, max_iter,
			 (unsigned long long)(st->rewrites - before), b.p ? b.p : "?");
		kf_buf_free(&b);
		rc = -1;
	}
	for (int op = 0; op < d.nop && d.byop; op++)
		free(d.byop[op]);
	free(d.byop);
	free(d.nbyop);
	free(d.want);
	free(d.acleaf);
	free(d.maxleaf);
	free(d.wl);
	free(d.inwl);
	free(d.seen.ent);
	free(d.warned);
	kf_rw_order_free(&d.ord);
	return rc;
}

void kf_rw_stats_init(kf_rw_stats *st, const kf_ruleset *rs)
{
	memset(st, 0, sizeof *st);
	st->nrule = rs->n;
	st->rule = kf_xcalloc(rs->n ? rs->n : 1, sizeof *st->rule);
}

void kf_rw_stats_free(kf_rw_stats *st)
{
	free(st->rule);
	memset(st, 0, sizeof *st);
}
