/* rewrite_transform.c: applying a transform (a rule with an apply
 * callback instead of a pattern) for the driver: the callback's changes
 * are checked before they are committed (every moved use reads a value
 * defined before its reader, set_attr keeps result types), deferred
 * erasures done, and the worklist told; anything wrong rolls the whole
 * transform back and names it.
 *
 * requires the driver's node order (rewrite_order.c); keeps use lists.
 */
#include <stdlib.h>
#include <string.h>

#include "kf_int.h"
#include "rewrite_int.h"

/* Commits a transform's deferred erasures; -1 when one is still used. */
static int commit_erasures(kf_rw_driver *d, kf_rewriter *rw, kf_nid n)
{
	kf_graph *g = d->g;
	for (uint32_t i = 0; i < rw->nerase; i++) {
		const kf_node *nd = kf_N(g, rw->erase[i]);
		for (uint32_t r = 0; r < nd->nres; r++)
			kf_foreach_use(g, nd->res0 + r, u) {
				kf_nid user = g->use[u].user;
				bool gone = false;
				for (uint32_t j = 0; j < rw->nerase; j++)
					gone |= rw->erase[j] == user;
				if (!gone) {
					kf_error(g->ctx, kf_N(g, rw->erase[i])->loc,
						 "rule '%s' (%s) erased a node whose result is still used",
						 rw->rule->name, rw->rule->origin ? rw->rule->origin : "C");
					return kf_rwd_fail_rule(d, rw, n, "applying");
				}
			}
	}
	/* users first: erase what is unused until the list is done */
	for (bool again = true; again;) {
		again = false;
		for (uint32_t i = 0; i < rw->nerase; i++) {
			kf_nid x = rw->erase[i];
			if (!(kf_N(g, x)->flags & KF_NODE_DEAD) && kf_rwd_node_unused(g, x)) {
				kf_rwd_erase_node(d, x);
				again = true;
			}
		}
	}
	return 0;
}

/* The name of value v and its node, for messages: "%q (matmul at f.kf:3:3)". */
static void value_str(kf_buf *b, const kf_graph *g, kf_vid v)
{
	kf_sid name = kf_V(g, v)->name;
	kf_nid d = kf_def(g, v);
	if (name)
		kf_buf_printf(b, "%%%s ", kf_str(g->ctx, name));
	if (d == KF_NONE) {
		kf_buf_puts(b, "(an argument)");
		return;
	}
	kf_buf_printf(b, "(%s at ", kf_op(g->ctx, kf_N(g, d)->op)->name);
	kf_rw_locstr(b, g->ctx, kf_N(g, d)->loc);
	kf_buf_putc(b, ')');
}

/* What a transform left must be a valid graph before it is committed:
 * every use it moved reads a value defined before the user, and every node
 * whose attributes it set still has the types it had.  0, or -1 with an
 * error naming the transform (and the rewrite rolled back). */
static int check_transform(kf_rw_driver *d, kf_rewriter *rw, kf_nid n)
{
	kf_graph *g = d->g;
	const kf_rule *r = rw->rule;
	kf_buf why = {0};
	for (uint32_t i = 0; i < rw->nmoved && !why.n; i++) {
		kf_nid user = rw->moved[i].user;
		if (kf_rw_erased(rw, user))
			continue;
		kf_vid v = kf_in(g, user, rw->moved[i].slot);
		if (kf_rw_order_available(&d->ord, g, v, user))
			continue;
		kf_buf_puts(&why, "it made ");
		if (kf_N(g, user)->nres) {
			value_str(&why, g, kf_res(g, user, 0));
		} else {
			kf_buf_printf(&why, "'%s' at ", kf_op(g->ctx, kf_N(g, user)->op)->name);
			kf_rw_locstr(&why, g->ctx, kf_N(g, user)->loc);
		}
		kf_buf_puts(&why, " read ");
		value_str(&why, g, v);
		kf_buf_puts(&why, ", which is defined after it");
	}
	for (uint32_t i = 0; i < rw->nattrs && !why.n; i++) {
		kf_nid x = rw->attrs[i].n;
		const kf_node *nd = kf_N(g, x);
		if (kf_rw_erased(rw, x) || nd->nres > KF_PAT_MAXOUT)
			continue;
		kf_type t[KF_PAT_MAXOUT];
		char err[200];
		int k = kf_infer(g, x, t, KF_PAT_MAXOUT, err, sizeof err);
		bool same = k == (int)kf_N(g, x)->nres;
		for (int j = 0; same && j < k; j++)
			same = kf_type_intern(g->ctx, &t[j]) == kf_V(g, kf_res(g, x, (uint32_t)j))->type;
		if (same)
			continue;
		kf_buf_puts(&why, "its set_attr changed the result types of ");
		value_str(&why, g, kf_res(g, x, 0));
		kf_buf_printf(&why, " (%s)", k < 0 ? err : "its users expect the old ones");
	}
	if (!why.n)
		return 0;
	kf_error(g->ctx, kf_N(g, n)->loc, "transform '%s' (%s) would leave the graph invalid: %s; it was rolled back",
		 r->name, r->origin ? r->origin : "C", why.p);
	kf_buf_free(&why);
	return kf_rwd_fail_rule(d, rw, n, "applying");
}

int kf_rwd_apply_transform(kf_rw_driver *d, const kf_rule *r, kf_nid n)
{
	kf_graph *g = d->g;
	kf_rewriter rw;
	kf_rw_begin(&rw, g, n);
	rw.rule = r;
	rw.ord = &d->ord;
	d->st->tried++;
	d->st->callbacks++;
	kf_rwd_rstat(d, r)->attempted++;
	int k = r->apply(&rw, n);
	if (k < 0 || (k == 0 && rw.nmut)) {
		if (k == 0)
			kf_error(g->ctx, kf_N(g, n)->loc, "transform '%s' (%s) changed the graph but returned false",
				 r->name, r->origin ? r->origin : "C");
		k = kf_rwd_fail_rule(d, &rw, n, "applying");
		kf_rw_end(&rw);
		return k;
	}
	if (k == 0) {
		kf_rwd_trace_candidate(d, r, n, NULL, "apply returned false", true);
		kf_rw_end(&rw);
		return 0;
	}
	if (rw.nmut == 0) {
		kf_error(g->ctx, kf_N(g, n)->loc, "transform '%s' (%s) claims success but leaves the graph unchanged",
			 r->name, r->origin ? r->origin : "C");
		kf_rw_end(&rw);
		return -1;
	}
	if (check_transform(d, &rw, n) < 0) {
		kf_rw_end(&rw);
		return -1;
	}
	kf_rwd_trace_rewrite(d, r, n, NULL, &rw);
	if (d->o->trace_rule && d->o->log && kf_rw_selects(d->o->trace_rule, r->name))
		kf_rwt_candidate(d->o->log, g, r, n, NULL, "rewritten");
	if (commit_erasures(d, &rw, n) < 0) {
		kf_rw_end(&rw);
		return -1;
	}
	for (uint32_t i = 0; i < rw.nmoved; i++)
		if (!(kf_N(g, rw.moved[i].user)->flags & KF_NODE_DEAD))
			kf_rwd_keep_name(g, rw.moved[i].old, kf_in(g, rw.moved[i].user, rw.moved[i].slot), rw.mark);
	kf_rwd_note_fired(d, r);
	kf_rwd_wl_push(d, n);
	for (uint32_t i = 0; i < rw.ncreated; i++) {
		kf_rwd_wl_push(d, rw.created[i]);
		const kf_node *nd = kf_N(g, rw.created[i]);
		for (uint32_t j = 0; j < nd->nres; j++)
			kf_rwd_push_users(d, nd->res0 + j, d->depth);
	}
	for (uint32_t i = 0; i < rw.nmoved; i++)
		kf_rwd_wl_push(d, rw.moved[i].user);
	for (uint32_t i = 0; i < rw.nattrs; i++) {
		/* a changed attribute may let a pattern rooted above it match */
		const kf_node *nd = kf_N(g, rw.attrs[i].n);
		kf_rwd_wl_push(d, rw.attrs[i].n);
		for (uint32_t j = 0; j < nd->nres; j++)
			kf_rwd_push_users(d, nd->res0 + j, d->depth);
	}
	kf_rw_end(&rw);
	return 1;
}

