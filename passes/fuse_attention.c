/* fuse_attention.c: the fuse-attention pass: scaled dot-product attention
 * written as primitive ops, as exporters write it, becomes one
 * `fusion @aN(...) {kind = "attention"}` node whose body keeps the ops, so
 * that the interpreter and the verifier read it as ordinary IR and a
 * backend runs it as one kernel (cuda/emit_attention.c).
 *
 * requires: a verified graph with softmax as an op (rules{path=patterns}
 * turns the primitive spelling into one, and patterns/attention.lua moves
 * scales written on q and k after the first matmul); runs before
 * fuse-matmul and fuse, which leave fusion nodes alone.  keeps: values,
 * names, attributes and locations of the ops it moves.  breaks: nothing;
 * the fusion takes the place of its last op.
 *
 * What it recognises, anchored on each top-level softmax over the last
 * axis (every spelling of the issue reduces to this shape once the ops
 * are primitive):
 *
 *   q, k, v   <- prologues: layout ops the kernel reads through
 *                (transpose, reshape, broadcast_to, slice, split: k
 *                transposed into the contraction, k/v heads repeated for
 *                grouped-query attention), and on q scalar scaling and
 *                casts.  Each must be a strided view (core/view.h) whose
 *                rows are contiguous; the first op that is not stays
 *                outside.
 *   s  = matmul(q, k)
 *   s' = score chain: element-wise ops from s to the softmax's input,
 *        each with the scores' shape, reading s' and values from outside
 *        that broadcast into it: scaling by a constant before or after,
 *        division by sqrt(d), additive masks of any broadcastable shape,
 *        boolean masks through where with -inf or finfo.min, casts (the
 *        softmax in f32 of an f16 model), soft-capping
 *   p  = softmax(s', axis = -1), then casts
 *   o  = matmul(p, v)
 *   y  <- output chain: transposes and reshapes (written through a view),
 *        casts
 *
 * Every value inside except y must be read only inside (dropout is absent
 * in an eval export; the attention weights as an output stop it).  A
 * causal mask arrives as a constant (the importer folds triu, tril and
 * comparisons of ranges): a constant mask of the scores' last two dims
 * that keeps column j of row i exactly when j <= i + off, for one off >= 0,
 * is rewritten as comparisons of two iotas (op iota), equal element for
 * element, so the kernel reads no mask and skips the tiles above the
 * diagonal.
 *
 * Cost: each softmax looks at the chains around it (bounded lengths), so
 * the pass is linear in the graph.  With KF_PASSF_EXPLAIN it says, at each
 * softmax it leaves alone, why.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "fusion.h"
#include "interp.h"
#include "passes.h"
#include "tensor.h"
#include "view.h"

#define CHAIN 24 /* ops one chain holds at most */

/* A chain of ops; res[i] is the result of n[i] the chain goes on with
 * (a split's).  Prologues also keep their base: the value the farthest op
 * reads (the matmul's operand itself when the chain is empty). */
typedef struct chain {
	kf_nid n[CHAIN];
	uint32_t res[CHAIN];
	int nn;
	kf_vid base;
} chain;

typedef struct att {
	kf_graph *g;
	kf_nid sm, mm1, mm2;
	chain score;  /* mm1 -> softmax, in order */
	chain prob;   /* softmax -> mm2 */
	chain pro[3]; /* q, k, v: nearest to the matmul first */
	chain out;    /* after mm2, in order */
	const char *why;
	bool strong;  /* why names the likeliest cause: keep it */
	char buf[160];
} att;

static bool single_user(const kf_graph *g, kf_vid v, kf_nid *u)
{
	*u = KF_NONE;
	kf_foreach_use(g, v, x) {
		if (*u != KF_NONE)
			return false;
		*u = g->use[x].user;
	}
	return *u != KF_NONE;
}

static bool ew(const kf_graph *g, kf_nid n)
{
	const kf_node *x = kf_N(g, n);
	int t = kf_op(g->ctx, x->op)->trait;
	return (t == KF_TRAIT_ELEMENTWISE || t == KF_TRAIT_BROADCAST) && x->op != KF_OP_BROADCAST_TO &&
	       x->nres == 1 && x->blk == 0 && kf_fuse_node_static(g, n);
}

static bool layout_op(int op)
{
	return op == KF_OP_TRANSPOSE || op == KF_OP_RESHAPE || op == KF_OP_BROADCAST_TO || op == KF_OP_SLICE ||
	       op == KF_OP_SPLIT;
}

static const char *opname(const kf_graph *g, kf_nid n) { return kf_op(g->ctx, kf_N(g, n)->op)->name; }

static bool push(chain *c, kf_nid n, uint32_t res)
{
	if (c->nn == CHAIN)
		return false;
	c->res[c->nn] = res;
	c->n[c->nn++] = n;
	return true;
}

/* ---- the score chain: up from the softmax's input to the first matmul ---- */

/* v (of the scores' shape S) is read only by the chain above it; finds the
 * element-wise path from a matmul to v, depth first over the operands of
 * S's shape (an additive mask may have the full shape too). */
static bool score_up(att *a, kf_vid v, const kf_type *S, int depth)
{
	kf_graph *g = a->g;
	kf_nid d = kf_def(g, v);
	if (d == KF_NONE) {
		if (!a->strong)
			a->why = "the scores are a graph input, not a matmul's result";
		return false;
	}
	if (kf_N(g, d)->op == KF_OP_MATMUL && kf_N(g, d)->blk == 0) {
		a->mm1 = d;
		return true;
	}
	if (depth >= CHAIN - 1 || !ew(g, d)) {
		if (!a->strong) {
			snprintf(a->buf, sizeof a->buf,
				 "the scores come from '%s', not from a matmul through element-wise ops", opname(g, d));
			a->why = a->buf;
		}
		return false;
	}
	const kf_node *x = kf_N(g, d);
	for (uint32_t i = 0; i < x->nin; i++) {
		kf_vid u = kf_in(g, d, i);
		kf_nid only, ud = kf_def(g, u);
		const kf_type *t = kf_vtype(g, u);
		if (!kf_type_same_shape(t, S) || !kf_dtype_is_float((kf_dtype)t->dtype))
			continue;
		if (!single_user(g, u, &only)) {
			/* the likeliest cause, said over what other operands lead to */
			if (ud != KF_NONE && kf_N(g, ud)->op == KF_OP_MATMUL) {
				a->why = "the matmul's scores are read by other ops too";
				a->strong = true;
			}
			continue;
		}
		int keep = a->score.nn;
		if (score_up(a, u, S, depth + 1)) {
			push(&a->score, d, 0);
			return true;
		}
		a->score.nn = keep;
	}
	if (!a->why) {
		snprintf(a->buf, sizeof a->buf, "no operand of '%s' before the softmax is the scores of a matmul "
			 "read only by it", opname(g, d));
		a->why = a->buf;
	}
	return false;
}

/* ---- prologues of q, k, v ---------------------------------------------------- */

/* Scaling by a one-element value, or a cast: ops q's prologue may hold
 * (the kernel applies them as it loads q once). */
static bool q_scalar_op(const kf_graph *g, kf_nid n, kf_vid *src)
{
	const kf_node *x = kf_N(g, n);
	if (!ew(g, n))
		return false;
	const kf_type *rt = kf_vtype(g, kf_res(g, n, 0));
	if (x->op == KF_OP_CAST) {
		*src = kf_in(g, n, 0);
		return true;
	}
	if ((x->op != KF_OP_MUL && x->op != KF_OP_DIV) || x->nin != 2)
		return false;
	for (uint32_t i = 0; i < 2; i++) {
		kf_vid m = kf_in(g, n, i), s = kf_in(g, n, !i);
		if (x->op == KF_OP_DIV && i == 1)
			break;
		if (m != s && kf_type_same_shape(kf_vtype(g, m), rt) && kf_type_numel(kf_vtype(g, s)) == 1) {
			*src = m;
			return true;
		}
	}
	return false;
}

/* The operand of the matmul that prologue `which` feeds: q and k of the
 * first, v of the second. */
static kf_vid pro_operand(const att *a, int which)
{
	return which == 2 ? kf_in(a->g, a->mm2, 1) : kf_in(a->g, a->mm1, (uint32_t)which);
}

/* Walks up from the operand: ops whose only reader is the chain (a split
 * may have other results; it stays only when the group reads them all,
 * see close_group). */
static void prologue(att *a, int which)
{
	kf_graph *g = a->g;
	chain *c = &a->pro[which];
	kf_vid v = pro_operand(a, which);
	kf_nid user = which == 2 ? a->mm2 : a->mm1;
	c->nn = 0;
	for (;;) {
		c->base = v;
		kf_nid d = kf_def(g, v), u;
		if (d == KF_NONE || kf_N(g, d)->blk != 0 || !kf_fuse_node_static(g, d))
			return;
		kf_vid src = KF_NONE;
		if (!single_user(g, v, &u) || u != user)
			return;
		if (layout_op(kf_N(g, d)->op))
			src = kf_in(g, d, 0);
		else if (which != 0 || !q_scalar_op(g, d, &src))
			return;
		if (!push(c, d, kf_V(g, v)->idx))
			return;
		user = d;
		v = src;
	}
}

/* Keeps the first t ops of a prologue (the nearest to the matmul). */
static void truncate(att *a, int which, int t)
{
	chain *c = &a->pro[which];
	if (t >= c->nn)
		return;
	c->base = kf_res(a->g, c->n[t], c->res[t]);
	c->nn = t;
}

/* The view of the matmul operand through prologue `which` from its base,
 * aligned to the scores' batch dims B: [B..., rows, cols].  True when it is
 * one, with rows or columns contiguous (the kernel copies whole rows). */
static bool pro_view(const att *a, int which, const kf_type *B, kf_view *v)
{
	kf_graph *g = a->g;
	const chain *c = &a->pro[which];
	if (!kf_view_init(v, kf_vtype(g, c->base)))
		return false;
	for (int i = c->nn - 1; i >= 0; i--)
		if (layout_op(kf_N(g, c->n[i])->op) && !kf_view_through(g, c->n[i], c->res[i], v))
			return false;
	/* the matmul broadcasts the operand's batch dims to the scores' */
	const kf_type *ot = kf_vtype(g, pro_operand(a, which));
	if (ot->rank < 2 || ot->rank > B->rank + 2)
		return false;
	int64_t dims[KF_MAX_RANK];
	for (int d = 0; d < B->rank; d++)
		dims[d] = B->dim[d];
	dims[B->rank] = ot->dim[ot->rank - 2];
	dims[B->rank + 1] = ot->dim[ot->rank - 1];
	if (!kf_view_broadcast(v, dims, B->rank + 2))
		return false;
	return kf_view_stride(v, v->rank - 1) == 1 || kf_view_stride(v, v->rank - 2) == 1;
}

/* ---- the output chain -------------------------------------------------------- */

/* Down from o = matmul(p, v) while the only reader is a transpose, a
 * reshape or a cast; stops where o's rows would no longer be written
 * contiguously through the chain's inverse view. */
static void out_chain(att *a)
{
	kf_graph *g = a->g;
	kf_vid v = kf_res(g, a->mm2, 0);
	kf_nid u;
	a->out.nn = 0;
	while (single_user(g, v, &u) && kf_N(g, u)->blk == 0 && kf_fuse_node_static(g, u)) {
		int op = kf_N(g, u)->op;
		if (op != KF_OP_TRANSPOSE && op != KF_OP_RESHAPE && !(op == KF_OP_CAST && ew(g, u)))
			break;
		/* the view of o from the end of the chain, back through it */
		kf_view w;
		if (!kf_view_init(&w, kf_vtype(g, kf_res(g, u, 0))))
			break;
		bool ok = true;
		if (op != KF_OP_CAST)
			ok = kf_view_back_through(g, u, &w);
		for (int i = a->out.nn - 1; i >= 0 && ok; i--)
			if (kf_N(g, a->out.n[i])->op != KF_OP_CAST)
				ok = kf_view_back_through(g, a->out.n[i], &w);
		if (!ok || kf_view_stride(&w, w.rank - 1) != 1 || !push(&a->out, u, 0))
			break;
		v = kf_res(g, u, 0);
	}
}

/* ---- the group ----------------------------------------------------------------- */

static kf_vid group_out(const att *a)
{
	return a->out.nn ? kf_res(a->g, a->out.n[a->out.nn - 1], 0) : kf_res(a->g, a->mm2, 0);
}

static bool in_chain(const chain *c, kf_nid n)
{
	for (int i = 0; i < c->nn; i++)
		if (c->n[i] == n)
			return true;
	return false;
}

static bool in_group(const att *a, kf_nid n)
{
	if (n == a->mm1 || n == a->mm2 || n == a->sm)
		return true;
	if (in_chain(&a->score, n) || in_chain(&a->prob, n) || in_chain(&a->out, n))
		return true;
	for (int w = 0; w < 3; w++)
		if (in_chain(&a->pro[w], n))
			return true;
	return false;
}

/* Every result of every prologue op must be read inside the group (a
 * split whose other parts go elsewhere stays outside, with what is above
 * it); prologues are cut until that holds. */
static void close_group(att *a)
{
	kf_graph *g = a->g;
	bool again = true;
	while (again) {
		again = false;
		for (int w = 0; w < 3; w++) {
			chain *c = &a->pro[w];
			for (int i = 0; i < c->nn; i++) {
				const kf_node *x = kf_N(g, c->n[i]);
				bool ok = true;
				for (uint32_t r = 0; r < x->nres && ok; r++)
					kf_foreach_use(g, kf_res(g, c->n[i], r), u)
						ok = ok && in_group(a, g->use[u].user);
				if (!ok) {
					truncate(a, w, i);
					again = true;
					break;
				}
			}
		}
	}
}

/* Cuts each prologue to the longest prefix that is a view with contiguous
 * rows or columns. */
static void fit_views(att *a, const kf_type *B)
{
	for (int w = 0; w < 3; w++) {
		kf_view v;
		while (a->pro[w].nn > 0 && !pro_view(a, w, B, &v))
			truncate(a, w, a->pro[w].nn - 1);
	}
}

/* Recognises the attention around softmax sm; false with a->why. */
static bool recognise(att *a, kf_nid sm)
{
	kf_graph *g = a->g;
	memset(&a->score, 0, sizeof *a - offsetof(att, score));
	a->sm = sm;
	a->mm1 = a->mm2 = KF_NONE;
	a->why = NULL;
	a->strong = false;
	const kf_type *S = kf_vtype(g, kf_in(g, sm, 0));
	if (!kf_fuse_node_static(g, sm)) {
		a->why = "symbolic shapes";
		return false;
	}
	int64_t ax = kf_attr_int(g, sm, "axis", -1);
	if (S->rank < 2 || (ax != -1 && ax != S->rank - 1)) {
		a->why = "the softmax is not over the last axis of a matrix";
		return false;
	}
	/* down: casts, then the second matmul reading p as its left operand */
	kf_vid v = kf_res(g, sm, 0);
	kf_nid u;
	for (;;) {
		if (!single_user(g, v, &u)) {
			a->why = kf_has_uses(g, v) ? "the probabilities are read by more than one op (the attention "
						     "weights are an output?)"
						   : "the probabilities are not read";
			return false;
		}
		if (kf_N(g, u)->op == KF_OP_MATMUL && kf_N(g, u)->blk == 0)
			break;
		if (kf_N(g, u)->op != KF_OP_CAST || !ew(g, u) || !push(&a->prob, u, 0)) {
			snprintf(a->buf, sizeof a->buf, "the probabilities go to '%s', not to a matmul", opname(g, u));
			a->why = a->buf;
			return false;
		}
		v = kf_res(g, u, 0);
	}
	a->mm2 = u;
	if (kf_in(g, u, 0) != v || kf_in(g, u, 1) == v) {
		a->why = "the probabilities are not the left operand of the matmul that reads them";
		return false;
	}
	/* up: the score chain to the first matmul */
	kf_nid only;
	if (!single_user(g, kf_in(g, sm, 0), &only)) {
		a->why = "the softmax's input is read by other ops too";
		return false;
	}
	if (!score_up(a, kf_in(g, sm, 0), S, 0))
		return false;
	/* shapes: s [B..., Tq, Tk], o [B..., Tq, dv], no 1-D operands, floats */
	const kf_type *Q = kf_vtype(g, kf_in(g, a->mm1, 0)), *K = kf_vtype(g, kf_in(g, a->mm1, 1));
	const kf_type *V = kf_vtype(g, kf_in(g, a->mm2, 1)), *O = kf_vtype(g, kf_res(g, a->mm2, 0));
	if (!kf_fuse_node_static(g, a->mm1) || !kf_fuse_node_static(g, a->mm2)) {
		a->why = "symbolic shapes";
		return false;
	}
	if (Q->rank < 2 || K->rank < 2 || V->rank < 2 || O->rank != S->rank) {
		a->why = "a matmul operand is a vector";
		return false;
	}
	if (!kf_dtype_is_float((kf_dtype)Q->dtype) || !kf_dtype_is_float((kf_dtype)V->dtype)) {
		a->why = "the matmuls are not of floats";
		return false;
	}
	for (int d = 0; d < S->rank - 1; d++)
		if (O->dim[d] != S->dim[d]) {
			a->why = "the second matmul's batch dims differ from the scores'";
			return false;
		}
	kf_type B = *S;
	B.rank = (uint8_t)(S->rank - 2);
	for (int w = 0; w < 3; w++)
		prologue(a, w);
	out_chain(a);
	close_group(a);
	fit_views(a, &B);
	/* a prologue may have been cut above a split the group no longer reads whole */
	close_group(a);
	fit_views(a, &B);
	for (int w = 0; w < 3; w++) {
		kf_view vw;
		if (!pro_view(a, w, &B, &vw)) {
			snprintf(a->buf, sizeof a->buf, "the %s operand's layout is not a strided view of its value",
				 w == 0 ? "q" : w == 1 ? "k" : "v");
			a->why = a->buf;
			return false;
		}
	}
	return true;
}

/* ---- causal masks ------------------------------------------------------------- */

/* The values of constant node d (inline or file()) through the
 * interpreter's const kernel; false when it cannot be read here. */
static bool const_values(kf_graph *g, kf_nid d, kf_tensor *t)
{
	const kf_opinfo *oi = kf_op(g->ctx, KF_OP_CONST);
	char err[256];
	memset(t, 0, sizeof *t);
	if (!oi->cpu || kf_tensor_alloc_type(t, kf_vtype(g, kf_res(g, d, 0))) != 0)
		return false;
	if (oi->cpu(g, d, NULL, 0, t, 1, err, sizeof err) != 0) {
		kf_tensor_free(t);
		return false;
	}
	return true;
}

/* Whether mask m (a tensor [1..., Tq, Tk]) keeps column j of row i exactly
 * when j <= i + off (keep = nonzero for a boolean mask, keep = 0 for an
 * additive one, whose other elements all hold *fill); 0 <= off < Tk - 1,
 * so that every row keeps a column and one is cut.  For a boolean mask,
 * *neg says that it is true where cut. */
static bool causal_off(const kf_tensor *m, bool additive, int64_t *off, bool *neg, double *fill)
{
	int r = m->rank;
	if (r < 2)
		return false;
	for (int d = 0; d < r - 2; d++)
		if (m->dim[d] != 1)
			return false;
	int64_t Tq = m->dim[r - 2], Tk = m->dim[r - 1];
	if (Tq < 1 || Tk < 2)
		return false;
	/* row 0 decides off (and the polarity): it keeps columns 0..off */
	bool first = additive ? kf_tensor_get(m, 0) == 0 : kf_tensor_get(m, 0) != 0;
	*neg = !additive && !first;
	int64_t k = 0;
	while (k < Tk && (additive ? kf_tensor_get(m, k) == 0 : (kf_tensor_get(m, k) != 0) != *neg))
		k++;
	if (k == 0 || k == Tk)
		return false;
	*off = k - 1;
	*fill = additive ? kf_tensor_get(m, k) : 0;
	if (additive && !(*fill < 0))
		return false;
	for (int64_t i = 0; i < Tq; i++)
		for (int64_t j = 0; j < Tk; j++) {
			double x = kf_tensor_get(m, i * Tk + j);
			bool keep = j <= i + *off;
			if (additive ? (keep ? x != 0 : x != *fill) : ((x != 0) != *neg) != keep)
				return false;
		}
	return true;
}

static kf_nid new_node(kf_graph *g, kf_nid before, int op, const kf_vid *in, uint32_t nin, const kf_type *t)
{
	kf_tid tid = kf_type_intern(g->ctx, t);
	kf_nid n = kf_node_new(g, 0, before, op, in, nin, &tid, 1);
	kf_N(g, n)->loc = kf_N(g, before)->loc;
	return n;
}

/* Replaces each constant causal mask the score chain reads by comparisons
 * of two iotas placed before its reader; the new nodes are added to *extra
 * and their reader to *reader (they join the group).  Equal element for element, so nothing changes
 * but where the mask comes from. */
static void causal_masks(att *a, kf_nid *extra, kf_nid *reader, int *nextra)
{
	kf_graph *g = a->g;
	kf_ctx *c = g->ctx;
	for (int i = 0; i < a->score.nn; i++) {
		kf_nid n = a->score.n[i];
		const kf_node *x = kf_N(g, n);
		kf_vid chainv = i ? kf_res(g, a->score.n[i - 1], 0) : kf_res(g, a->mm1, 0);
		for (uint32_t j = 0; j < x->nin; j++) {
			kf_vid m = kf_in(g, n, j);
			kf_nid d = kf_def(g, m);
			bool additive = x->op == KF_OP_ADD, cond = x->op == KF_OP_WHERE && j == 0;
			if (m == chainv || d == KF_NONE || kf_N(g, d)->op != KF_OP_CONST || (!additive && !cond))
				continue;
			const kf_type *mt = kf_vtype(g, m);
			if (additive != kf_dtype_is_float((kf_dtype)mt->dtype) || !kf_type_is_static(mt))
				continue;
			kf_tensor t;
			int64_t off;
			bool neg;
			double fill;
			if (!const_values(g, d, &t))
				continue;
			bool ok = causal_off(&t, additive, &off, &neg, &fill);
			kf_tensor_free(&t);
			if (!ok || *nextra + 8 > CHAIN)
				continue;
			kf_type it = *mt;
			it.dtype = KF_I64;
			kf_nid row = new_node(g, n, KF_OP_IOTA, NULL, 0, &it), col = new_node(g, n, KF_OP_IOTA, NULL, 0, &it);
			kf_node_set_attr(g, row, kf_intern_cstr(c, "axis"), (kf_attrval){.kind = KF_ATTR_INT, .i = it.rank - 2});
			kf_node_set_attr(g, col, kf_intern_cstr(c, "axis"), (kf_attrval){.kind = KF_ATTR_INT, .i = it.rank - 1});
			extra[(*nextra)++] = row;
			extra[(*nextra)++] = col;
			kf_vid rv = kf_res(g, row, 0);
			if (off) {
				kf_type st = kf_type_make(KF_I64, 0, NULL);
				kf_vid in[2] = {rv, kf_fold_splat(g, n, kf_type_intern(c, &st), (double)off)};
				kf_nid sh = new_node(g, n, KF_OP_ADD, in, 2, &it);
				extra[(*nextra)++] = sh;
				rv = kf_res(g, sh, 0);
			}
			kf_type bt = *mt;
			bt.dtype = KF_I1;
			kf_vid cin[2] = {kf_res(g, col, 0), rv};
			kf_nid cmp = new_node(g, n, neg ? KF_OP_GT : KF_OP_LE, cin, 2, &bt);
			extra[(*nextra)++] = cmp;
			kf_vid mask = kf_res(g, cmp, 0);
			if (additive) {
				kf_type st = kf_type_make((kf_dtype)mt->dtype, 0, NULL);
				kf_tid sid = kf_type_intern(c, &st);
				kf_vid win[3] = {mask, kf_fold_splat(g, n, sid, 0.0), kf_fold_splat(g, n, sid, fill)};
				kf_nid w = new_node(g, n, KF_OP_WHERE, win, 3, mt);
				extra[(*nextra)++] = w;
				mask = kf_res(g, w, 0);
			}
			for (int e = 0; e < *nextra; e++)
				if (reader[e] == KF_NONE)
					reader[e] = n;
			kf_V(g, mask)->name = kf_V(g, m)->name;
			kf_set_operand(g, n, j, mask);
			if (!kf_has_uses(g, m))
				kf_node_erase(g, d);
		}
	}
}

/* ---- the pass ---------------------------------------------------------------------- */

static void explain(kf_buf *log, const kf_graph *g, kf_nid n, const char *why)
{
	kf_loc l = kf_N(g, n)->loc;
	if (l.src == KF_NONE) {
		kf_buf_printf(log, "@%s: ", kf_str(g->ctx, g->name));
	} else {
		int line, col;
		kf_source_linecol(g->ctx, l.src, l.off, &line, &col);
		kf_buf_printf(log, "%s:%d:%d: ", kf_source_name(g->ctx, l.src), line, col);
	}
	kf_buf_printf(log, "not attention: %s\n", why);
}

/* Sorts a group's nodes into program order (pos: positions; a group is
 * at most a few hundred nodes). */
static void sort_by_pos(kf_nid *m, int n, const int64_t *pos)
{
	for (int i = 1; i < n; i++) {
		kf_nid x = m[i];
		int j = i;
		for (; j > 0 && pos[m[j - 1]] > pos[x]; j--)
			m[j] = m[j - 1];
		m[j] = x;
	}
}

/* The next free fusion symbol a<N>. */
static int first_index(const kf_graph *g)
{
	int next = 0;
	for (uint32_t n = 0; n < g->nnode; n++) {
		const kf_node *x = kf_N(g, n);
		if (x->op != KF_OP_FUSION || (x->flags & KF_NODE_DEAD) || !x->sym)
			continue;
		const char *s = kf_str(g->ctx, x->sym);
		if (s[0] == 'a' && s[1] >= '0' && s[1] <= '9' && atoi(s + 1) >= next)
			next = atoi(s + 1) + 1;
	}
	return next;
}

/* Collects the group's nodes (and the causal masks' new ones) in program
 * order and outlines them. */
static void build(att *a, int index, int64_t **pos, uint32_t *npos)
{
	kf_graph *g = a->g;
	kf_nid mem[CHAIN * 8 + 8], extra[CHAIN], reader[CHAIN];
	int nm = 0, ne = 0;
	for (int i = 0; i < CHAIN; i++)
		reader[i] = KF_NONE;
	causal_masks(a, extra, reader, &ne);
	/* node ids of new nodes lie past the positions computed at the start:
	 * each takes its reader's position, less one, which keeps them before
	 * it and, the sort being stable, in the order they were made */
	if (g->nnode > *npos) {
		*pos = realloc(*pos, (g->nnode + 1) * sizeof **pos);
		*npos = g->nnode;
	}
	for (int i = 0; i < ne; i++)
		(*pos)[extra[i]] = (*pos)[reader[i]] - 1;
	const chain *cs[] = {&a->pro[0], &a->pro[1], &a->pro[2], &a->score, &a->prob, &a->out};
	for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++)
		for (int i = 0; i < cs[k]->nn; i++) {
			bool dup = false;
			for (int j = 0; j < nm && !dup; j++)
				dup = mem[j] == cs[k]->n[i];
			if (!dup)
				mem[nm++] = cs[k]->n[i];
		}
	mem[nm++] = a->mm1;
	mem[nm++] = a->sm;
	mem[nm++] = a->mm2;
	for (int i = 0; i < ne; i++)
		mem[nm++] = extra[i];
	sort_by_pos(mem, nm, *pos);
	char name[32];
	snprintf(name, sizeof name, "a%d", index);
	kf_pass_outline(g, mem, (uint32_t)nm, group_out(a), "attention", kf_intern_cstr(g->ctx, name));
}

/* A top-level matmul whose scores reach an exp or a reduce_max through
 * element-wise ops: a softmax written as primitive ops. */
static bool primitive_softmax(const kf_graph *g, kf_nid mm)
{
	kf_vid v = kf_res(g, mm, 0);
	for (int i = 0; i < CHAIN; i++) {
		kf_nid u = KF_NONE;
		kf_foreach_use(g, v, x) {
			int op = kf_N(g, g->use[x].user)->op;
			if (op == KF_OP_EXP || op == KF_OP_REDUCE_MAX)
				return true;
			u = g->use[x].user;
		}
		if (u == KF_NONE || !ew(g, u))
			return false;
		v = kf_res(g, u, 0);
	}
	return false;
}

static int run(kf_graph *g, const kf_passopts *po, bool *changed)
{
	bool why = po->log && (po->flags & KF_PASSF_EXPLAIN);
	uint32_t npos = g->nnode, nsm = 0;
	int64_t *pos = malloc((npos + 1) * sizeof *pos);
	kf_nid *todo = malloc((npos + 1) * sizeof *todo);
	int64_t p = 0;
	kf_foreach_node(g, 0, n) {
		pos[n] = p += 2;
		int op = kf_N(g, n)->op;
		if (op == KF_OP_SOFTMAX)
			todo[nsm++] = n;
		else if (why && op == KF_OP_MATMUL && primitive_softmax(g, n))
			explain(po->log, g, n, "the scores go into a softmax written as primitive ops (run "
					       "rules{path=patterns} before fuse-attention)");
	}
	int made = 0, index = first_index(g);
	att a = {.g = g};
	for (uint32_t i = 0; i < nsm; i++) {
		if (!recognise(&a, todo[i])) {
			if (why)
				explain(po->log, g, todo[i], a.why);
			continue;
		}
		build(&a, index++, &pos, &npos);
		made++;
	}
	free(pos);
	free(todo);
	if (made)
		*changed = true;
	if (po->log && made)
		kf_buf_printf(po->log, "fuse-attention: @%s: %d attention kernel%s\n", kf_str(g->ctx, g->name), made,
			      made == 1 ? "" : "s");
	return 0;
}

const kf_pass kf_pass_fuse_attention = {
	.name = "fuse-attention",
	.doc = "group scaled dot-product attention (matmul, scale, mask, softmax, matmul) into one attention kernel",
	.run = run,
};
