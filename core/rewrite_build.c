/* rewrite_build.c: building replacements: the journaled builder callbacks
 * use (kf_rw_create, kf_rw_const, kf_rw_replace_uses, kf_rw_erase,
 * kf_rw_set_attr), rollback, and the instantiation of traced templates.
 *
 * Every mutation is recorded, so that a rewrite that fails half way is
 * undone exactly (nodes it created erased last first, uses moved back,
 * attribute arrays restored) and the graph is never left half rewritten.
 */
#include <stdlib.h>
#include <string.h>

#include "kf_int.h"
#include "rewrite.h"

/* ---- building replacements -------------------------------------------------- */

static void journal_created(kf_rewriter *rw, kf_nid n)
{
	kf_grow((void **)&rw->created, &rw->capcreated, rw->ncreated + 1, sizeof *rw->created);
	rw->created[rw->ncreated++] = n;
	rw->nmut++;
}

/* The result count of a new node: split's comes from `sizes`. */
static uint32_t result_count(const kf_opinfo *oi, const kf_attr *attr, uint32_t nattr, uint32_t nres,
			     const kf_ctx *c)
{
	if (nres)
		return nres;
	if (oi->nres >= 0)
		return (uint32_t)oi->nres;
	for (uint32_t i = 0; i < nattr; i++)
		if (!strcmp(kf_str(c, attr[i].key), "sizes") && attr[i].v.kind == KF_ATTR_LIST)
			return attr[i].v.n;
	return 1;
}

/* Moves constant c, made by this rewrite, to just before node p. */
static void hoist(kf_rewriter *rw, kf_nid c, kf_nid p)
{
	kf_node_move(rw->g, c, kf_N(rw->g, p)->blk, p);
	kf_rw_order_placed(rw->ord, rw->g, c);
}

/* The node a new node with operands in[] goes before (see kf_rw_create),
 * or KF_NONE with the reason in rw->err. */
static kf_nid place(kf_rewriter *rw, const kf_vid *in, uint32_t nin)
{
	kf_graph *g = rw->g;
	kf_nid at = rw->at;
	bool after = rw->at_after;
	rw->at = KF_NONE; /* for this node only */
	if (!rw->ord)
		return rw->root;
	kf_nid p = rw->root;
	if (at != KF_NONE) {
		p = after ? kf_N(g, at)->next : at;
		if (p == KF_NONE || (kf_op(g->ctx, kf_N(g, at)->op)->flags & KF_OPF_TERMINATOR && after)) {
			snprintf(rw->err, sizeof rw->err, "nothing can be placed after the block's last node");
			return KF_NONE;
		}
	} else {
		/* after the last operand, when that is not before the root */
		kf_nid last = KF_NONE;
		for (uint32_t i = 0; i < nin; i++) {
			kf_nid d = kf_def(g, in[i]);
			if (d == KF_NONE || kf_N(g, d)->blk != kf_N(g, p)->blk || kf_rw_order_before(rw->ord, g, d, p))
				continue;
			if (d >= rw->mark && kf_N(g, d)->op == KF_OP_CONST)
				continue; /* a constant of ours follows its user */
			if (last == KF_NONE || kf_rw_order_before(rw->ord, g, last, d))
				last = d;
		}
		if (last != KF_NONE)
			p = kf_N(g, last)->next;
	}
	for (uint32_t i = 0; i < nin; i++) {
		kf_nid d = kf_def(g, in[i]);
		if (d != KF_NONE && d >= rw->mark && kf_N(g, d)->op == KF_OP_CONST && d != p &&
		    !kf_rw_order_available(rw->ord, g, in[i], p))
			hoist(rw, d, p);
		if (!kf_rw_order_available(rw->ord, g, in[i], p)) {
			snprintf(rw->err, sizeof rw->err, "operand %u is not defined before the place given (%s)",
				 i + 1, d == KF_NONE ? "an argument of another block" : "it comes later");
			return KF_NONE;
		}
	}
	return p;
}

kf_vid kf_rw_create(kf_rewriter *rw, int op, const kf_vid *in, uint32_t nin,
		    const kf_attr *attr, uint32_t nattr, const kf_tid *types, uint32_t nres)
{
	kf_graph *g = rw->g;
	kf_ctx *c = g->ctx;
	if (op < 0 || op >= kf_op_count(c)) {
		snprintf(rw->err, sizeof rw->err, "unknown op id %d", op);
		return KF_NONE;
	}
	const kf_opinfo *oi = kf_op(c, op);
	if (oi->flags & (KF_OPF_TERMINATOR | KF_OPF_REGION)) {
		snprintf(rw->err, sizeof rw->err, "'%s' cannot be created by a rule", oi->name);
		return KF_NONE;
	}
	nres = result_count(oi, attr, nattr, nres, c);
	if (nres > KF_PAT_MAXOUT) {
		snprintf(rw->err, sizeof rw->err, "too many results (%u)", nres);
		return KF_NONE;
	}
	for (uint32_t i = 0; i < nin; i++)
		if (in[i] >= g->nval || kf_rw_erased(rw, kf_def(g, in[i]))) {
			snprintf(rw->err, sizeof rw->err, "operand %u of '%s' is not a live value", i + 1,
				 oi->name);
			return KF_NONE;
		}
	kf_nid before = place(rw, in, nin);
	if (before == KF_NONE)
		return KF_NONE;
	/* placeholder types until inference has run on the node itself */
	kf_tid tmp[KF_PAT_MAXOUT];
	kf_tid any = nin ? kf_V(g, in[0])->type : kf_type_intern(c, &(kf_type){KF_F32, 0, {0}});
	for (uint32_t i = 0; i < nres; i++)
		tmp[i] = types ? types[i] : any;
	kf_nid n = kf_node_new(g, kf_N(g, before)->blk, before, op, in, nin, tmp, nres);
	kf_N(g, n)->loc = kf_N(g, rw->root)->loc;
	if (rw->ord)
		kf_rw_order_placed(rw->ord, g, n);
	if (nattr)
		kf_node_set_attrs(g, n, attr, nattr);
	journal_created(rw, n);
	if (types)
		return kf_res(g, n, 0);
	kf_type out[KF_PAT_MAXOUT];
	char err[200];
	int k = kf_infer(g, n, out, KF_PAT_MAXOUT, err, sizeof err);
	if (k != (int)nres) {
		if (k >= 0)
			snprintf(err, sizeof err, "'%s' gives %d results, not %u", oi->name, k, nres);
		snprintf(rw->err, sizeof rw->err, "%s", err);
		kf_node_erase(g, n);
		rw->ncreated--;
		return KF_NONE;
	}
	for (uint32_t i = 0; i < nres; i++)
		kf_V(g, kf_res(g, n, i))->type = kf_type_intern(c, &out[i]);
	return kf_res(g, n, 0);
}

kf_vid kf_rw_const_dense(kf_rewriter *rw, const kf_type *t, const double *v, uint64_t n)
{
	kf_graph *g = rw->g;
	kf_tid tid = kf_type_intern(g->ctx, t);
	kf_nid nid = kf_node_new(g, kf_N(g, rw->root)->blk, rw->root, KF_OP_CONST, NULL, 0, &tid, 1);
	if (rw->ord)
		kf_rw_order_placed(rw->ord, g, nid);
	kf_node *nd = kf_N(g, nid);
	nd->loc = kf_N(g, rw->root)->loc;
	kf_const *k = kf_alloc(&g->arena, sizeof *k);
	/* a rank-0 value is a scalar; otherwise n values, or one (a splat) */
	k->kind = t->rank == 0 ? KF_CONST_SCALAR : KF_CONST_DENSE;
	k->n = n;
	if (kf_dtype_is_float((kf_dtype)t->dtype)) {
		k->f = kf_alloc(&g->arena, (n ? n : 1) * sizeof *k->f);
		memcpy(k->f, v, n * sizeof *v);
	} else {
		k->i = kf_alloc(&g->arena, (n ? n : 1) * sizeof *k->i);
		for (uint64_t i = 0; i < n; i++)
			k->i[i] = t->dtype == KF_I1 ? v[i] != 0 : (int64_t)v[i];
	}
	nd->cst = k;
	journal_created(rw, nid);
	return kf_res(g, nid, 0);
}

kf_vid kf_rw_const(kf_rewriter *rw, double v, kf_dtype dt)
{
	kf_type t = kf_type_make(dt, 0, NULL);
	return kf_rw_const_dense(rw, &t, &v, 1);
}

void kf_rw_replace_uses(kf_rewriter *rw, kf_vid from, kf_vid to)
{
	kf_graph *g = rw->g;
	if (from == to)
		return;
	kf_uid u = g->val[from].first_use;
	while (u != KF_NONE) {
		kf_uid next = g->use[u].next;
		kf_nid user = g->use[u].user;
		kf_grow((void **)&rw->moved, &rw->capmoved, rw->nmoved + 1, sizeof *rw->moved);
		rw->moved[rw->nmoved++] = (struct kf_rw_moved){user, u - kf_N(g, user)->in0, from};
		kf_set_operand(g, user, u - kf_N(g, user)->in0, to);
		u = next;
	}
	rw->nmut++;
}

void kf_rw_erase(kf_rewriter *rw, kf_nid n)
{
	if (kf_rw_erased(rw, n))
		return;
	kf_grow((void **)&rw->erase, &rw->caperase, rw->nerase + 1, sizeof *rw->erase);
	rw->erase[rw->nerase++] = n;
	rw->nmut++;
}

void kf_rw_set_attr(kf_rewriter *rw, kf_nid n, kf_sid key, kf_attrval v)
{
	kf_node *nd = kf_N(rw->g, n);
	kf_grow((void **)&rw->attrs, &rw->capattrs, rw->nattrs + 1, sizeof *rw->attrs);
	rw->attrs[rw->nattrs++] = (struct kf_rw_attrs){n, nd->attr, nd->nattr};
	/* a fresh array, so that the old one stays intact for a rollback */
	uint32_t na = nd->nattr;
	kf_attr *a = kf_xrealloc(NULL, (na + 1) * sizeof *a);
	if (na)
		memcpy(a, nd->attr, na * sizeof *a); /* attr is NULL when there are none */
	uint32_t i = 0;
	while (i < na && a[i].key != key)
		i++;
	a[i] = (kf_attr){key, v};
	kf_node_set_attrs(rw->g, n, a, i == na ? na + 1 : na);
	free(a);
	rw->nmut++;
}

bool kf_rw_erased(const kf_rewriter *rw, kf_nid n)
{
	if (n == KF_NONE)
		return false;
	if (kf_N(rw->g, n)->flags & KF_NODE_DEAD)
		return true;
	for (uint32_t i = 0; i < rw->nerase; i++)
		if (rw->erase[i] == n)
			return true;
	return false;
}

/* ---- a rewrite's lifetime ---------------------------------------------------------- */

void kf_rw_begin(kf_rewriter *rw, kf_graph *g, kf_nid root)
{
	memset(rw, 0, sizeof *rw);
	rw->g = g;
	rw->root = root;
	rw->at = KF_NONE;
	rw->mark = g->nnode;
}

void kf_rw_end(kf_rewriter *rw)
{
	free(rw->created);
	free(rw->moved);
	free(rw->attrs);
	free(rw->erase);
	rw->created = rw->erase = NULL;
	rw->moved = NULL;
	rw->attrs = NULL;
	rw->ncreated = rw->nmoved = rw->nattrs = rw->nerase = 0;
	rw->capcreated = rw->capmoved = rw->capattrs = rw->caperase = 0;
}

void kf_rw_rollback(kf_rewriter *rw)
{
	kf_graph *g = rw->g;
	for (uint32_t i = rw->nattrs; i-- > 0;) {
		g->node[rw->attrs[i].n].attr = rw->attrs[i].attr;
		g->node[rw->attrs[i].n].nattr = rw->attrs[i].nattr;
	}
	for (uint32_t i = rw->nmoved; i-- > 0;)
		kf_set_operand(g, rw->moved[i].user, rw->moved[i].slot, rw->moved[i].old);
	/* last first: a created node's users were created after it */
	for (uint32_t i = rw->ncreated; i-- > 0;)
		kf_node_erase(g, rw->created[i]);
	rw->nattrs = rw->nmoved = rw->ncreated = rw->nerase = 0;
}

/* ---- instantiating a traced graph ---------------------------------------------------- */

/* The dtype a constant operand of a new node takes: that of the first other
 * operand that is not a condition, else the fallback. */
static kf_dtype const_dtype(const kf_rewriter *rw, const kf_pnode *pn, const kf_vid *val,
			    const kf_pattern *t, kf_dtype fallback)
{
	const kf_graph *g = rw->g;
	int pick = -1;
	for (uint32_t i = 0; i < pn->nin; i++) {
		const kf_pnode *c = &t->node[KF_PV_NODE(pn->in[i])];
		if (c->kind == KF_PN_CONST)
			continue;
		int dt = kf_vtype(g, val[KF_PV_NODE(pn->in[i])] + KF_PV_RES(pn->in[i]))->dtype;
		if (dt != KF_I1)
			return (kf_dtype)dt;
		if (pick < 0)
			pick = dt;
	}
	return pick >= 0 ? (kf_dtype)pick : fallback;
}

/* A template constant's dtype: its own, a type variable's value, or that
 * of its sibling operands. */
static kf_dtype tmpl_const_dtype(const kf_rewriter *rw, const kf_pnode *c, const kf_pnode *user,
				 const kf_vid *val, const kf_pattern *t, kf_dtype fallback)
{
	if (c->cdtype >= 0)
		return (kf_dtype)c->cdtype;
	if (c->cdtype <= -2 && rw->tval)
		return (kf_dtype)rw->tval[-2 - c->cdtype];
	return user ? const_dtype(rw, user, val, t, fallback) : fallback;
}

/* A template node's attributes with type variables (`{to = "T"}`) replaced
 * by their values; attr itself when it names none.  tmp has room for n. */
static const kf_attr *tmpl_attrs(const kf_rewriter *rw, const kf_pattern *t, const kf_pnode *pn, kf_attr *tmp)
{
	if (!t->ntvar || !rw->tval)
		return pn->attr;
	bool any = false;
	for (uint32_t i = 0; i < pn->nattr; i++) {
		tmp[i] = pn->attr[i];
		int tv = tmp[i].v.kind == KF_ATTR_STR ? kf_pat_tvar_find(t, tmp[i].v.s) : -1;
		if (tv >= 0 && t->tvkind[tv] == KF_TV_DTYPE) {
			tmp[i].v.s = kf_intern_cstr(rw->g->ctx, kf_dtype_name((kf_dtype)rw->tval[tv]));
			any = true;
		}
	}
	return any ? tmp : pn->attr;
}

int kf_rw_instantiate(kf_rewriter *rw, const kf_pattern *t, const kf_vid *bind, kf_dtype fallback,
		      const kf_vid *like)
{
	kf_graph *g = rw->g;
	kf_vid val[KF_PAT_MAXNODE];
	for (uint32_t i = 0; i < t->nnode && i < KF_PAT_MAXNODE; i++) {
		const kf_pnode *pn = &t->node[i];
		val[i] = KF_NONE;
		if (pn->kind == KF_PN_VAR) {
			val[i] = bind[pn->var];
			continue;
		}
		if (pn->kind != KF_PN_OP)
			continue;
		kf_vid in[2 * KF_PAT_MAXNODE];
		uint32_t nin = 0;
		for (uint32_t k = 0; k < pn->nin; k++) {
			const kf_pnode *c = &t->node[KF_PV_NODE(pn->in[k])];
			if (c->kind == KF_PN_VAR && c->seq) {
				/* `...`: the values it stands for, in place */
				for (uint32_t j = 0; j < rw->nseq && nin < 2 * KF_PAT_MAXNODE; j++)
					in[nin++] = rw->seq[j];
				continue;
			}
			if (nin == 2 * KF_PAT_MAXNODE) {
				snprintf(rw->err, sizeof rw->err, "too many operands");
				return 0;
			}
			if (c->kind == KF_PN_CONST)
				in[nin++] = kf_rw_const(rw, c->cval, tmpl_const_dtype(rw, c, pn, val, t, fallback));
			else
				in[nin++] = val[KF_PV_NODE(pn->in[k])] + KF_PV_RES(pn->in[k]);
		}
		kf_attr *tmp = kf_xrealloc(NULL, (pn->nattr ? pn->nattr : 1) * sizeof *tmp);
		val[i] = kf_rw_create(rw, pn->op, in, nin, tmpl_attrs(rw, t, pn, tmp), pn->nattr, NULL, pn->nres);
		free(tmp);
		if (val[i] == KF_NONE)
			return 0;
	}
	rw->nout = t->nout;
	for (uint32_t k = 0; k < t->nout; k++) {
		const kf_pnode *pn = &t->node[KF_PV_NODE(t->out[k])];
		if (pn->kind == KF_PN_CONST) {
			/* a constant result is a splat of the type it stands for */
			kf_dtype dt = like ? (kf_dtype)kf_vtype(g, like[k])->dtype : fallback;
			rw->out[k] = kf_rw_const(rw, pn->cval, tmpl_const_dtype(rw, pn, NULL, val, t, dt));
			if (like)
				kf_V(g, rw->out[k])->type = kf_V(g, like[k])->type;
		} else {
			rw->out[k] = val[KF_PV_NODE(t->out[k])] + KF_PV_RES(t->out[k]);
		}
	}
	return 1;
}
