/* attention.c: the anatomy of scaled dot-product attention (attention.h),
 * shared by the fuse-attention pass and the attention kernels. */
#include <string.h>
#include "attention.h"
#include "fusion.h"



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

/* An element-wise op of one result (in any block: the caller checks). */
static bool ew(const kf_graph *g, kf_nid n)
{
	const kf_node *x = kf_N(g, n);
	int t = kf_op(g->ctx, x->op)->trait;
	return (t == KF_TRAIT_ELEMENTWISE || t == KF_TRAIT_BROADCAST) && x->op != KF_OP_BROADCAST_TO &&
	       x->nres == 1 && kf_fuse_node_static(g, n);
}

bool kf_att_layout_op(int op)
{
	return op == KF_OP_TRANSPOSE || op == KF_OP_RESHAPE || op == KF_OP_BROADCAST_TO || op == KF_OP_SLICE ||
	       op == KF_OP_SPLIT;
}

static const char *opname(const kf_graph *g, kf_nid n) { return kf_op(g->ctx, kf_N(g, n)->op)->name; }

static bool push(kf_att_chain *c, kf_nid n, uint32_t res)
{
	if (c->nn == KF_ATT_CHAIN)
		return false;
	c->res[c->nn] = res;
	c->n[c->nn++] = n;
	return true;
}

/* ---- the score chain: up from the softmax's input to the first matmul ---- */

/* v (of the scores' shape S) is read only by the chain above it; finds the
 * element-wise path from a matmul to v, depth first over the operands of
 * S's shape (an additive mask may have the full shape too). */
static bool score_up(kf_att *a, kf_vid v, const kf_type *S, int depth)
{
	kf_graph *g = a->g;
	kf_nid d = kf_def(g, v);
	if (d == KF_NONE) {
		if (!a->strong)
			a->why = "the scores are a graph input, not a matmul's result";
		return false;
	}
	if (kf_N(g, d)->op == KF_OP_MATMUL) {
		a->mm1 = d;
		return true;
	}
	if (depth >= KF_ATT_CHAIN - 1 || !ew(g, d)) {
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
bool kf_att_q_op(const kf_graph *g, kf_nid n, kf_vid *src)
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
kf_vid kf_att_operand(const kf_att *a, int which)
{
	return which == 2 ? kf_in(a->g, a->mm2, 1) : kf_in(a->g, a->mm1, (uint32_t)which);
}

/* Walks up from the operand: ops whose only reader is the chain (a split
 * may have other results; it stays only when the group reads them all,
 * see close_group). */
static void prologue(kf_att *a, int which)
{
	kf_graph *g = a->g;
	kf_att_chain *c = &a->pro[which];
	kf_vid v = kf_att_operand(a, which);
	kf_nid user = which == 2 ? a->mm2 : a->mm1;
	c->nn = 0;
	for (;;) {
		c->base = v;
		kf_nid d = kf_def(g, v), u;
		if (d == KF_NONE || !kf_fuse_node_static(g, d))
			return;
		kf_vid src = KF_NONE;
		if (!single_user(g, v, &u) || u != user)
			return;
		if (kf_att_layout_op(kf_N(g, d)->op))
			src = kf_in(g, d, 0);
		else if (which != 0 || !kf_att_q_op(g, d, &src))
			return;
		if (!push(c, d, kf_V(g, v)->idx))
			return;
		user = d;
		v = src;
	}
}

/* Keeps the first t ops of a prologue (the nearest to the matmul). */
static void cut(kf_att *a, int which, int t)
{
	kf_att_chain *c = &a->pro[which];
	if (t >= c->nn)
		return;
	c->base = kf_res(a->g, c->n[t], c->res[t]);
	c->nn = t;
}

/* The view of the matmul operand through prologue `which` from its base,
 * aligned to the scores' batch dims B: [B..., rows, cols].  True when it is
 * one, with rows or columns contiguous (the kernel copies whole rows). */
bool kf_att_view(const kf_att *a, int which, const kf_type *B, kf_view *v)
{
	kf_graph *g = a->g;
	const kf_att_chain *c = &a->pro[which];
	if (!kf_view_init(v, kf_vtype(g, c->base)))
		return false;
	for (int i = c->nn - 1; i >= 0; i--)
		if (kf_att_layout_op(kf_N(g, c->n[i])->op) && !kf_view_through(g, c->n[i], c->res[i], v))
			return false;
	/* the matmul broadcasts the operand's batch dims to the scores' */
	const kf_type *ot = kf_vtype(g, kf_att_operand(a, which));
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
static void out_chain(kf_att *a)
{
	kf_graph *g = a->g;
	kf_vid v = kf_res(g, a->mm2, 0);
	kf_nid u;
	a->out.nn = 0;
	while (single_user(g, v, &u) && kf_fuse_node_static(g, u)) {
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

kf_vid kf_att_result(const kf_att *a)
{
	return a->out.nn ? kf_res(a->g, a->out.n[a->out.nn - 1], 0) : kf_res(a->g, a->mm2, 0);
}

static bool in_chain(const kf_att_chain *c, kf_nid n)
{
	for (int i = 0; i < c->nn; i++)
		if (c->n[i] == n)
			return true;
	return false;
}

bool kf_att_member(const kf_att *a, kf_nid n)
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
static void close_group(kf_att *a)
{
	kf_graph *g = a->g;
	bool again = true;
	while (again) {
		again = false;
		for (int w = 0; w < 3; w++) {
			kf_att_chain *c = &a->pro[w];
			for (int i = 0; i < c->nn; i++) {
				const kf_node *x = kf_N(g, c->n[i]);
				bool ok = true;
				for (uint32_t r = 0; r < x->nres && ok; r++)
					kf_foreach_use(g, kf_res(g, c->n[i], r), u)
						ok = ok && kf_att_member(a, g->use[u].user);
				if (!ok) {
					cut(a, w, i);
					again = true;
					break;
				}
			}
		}
	}
}

/* Cuts each prologue to the longest prefix that is a view with contiguous
 * rows or columns. */
static void fit_views(kf_att *a, const kf_type *B)
{
	for (int w = 0; w < 3; w++) {
		kf_view v;
		while (a->pro[w].nn > 0 && !kf_att_view(a, w, B, &v))
			cut(a, w, a->pro[w].nn - 1);
	}
}

bool kf_att_recognise(kf_graph *g, kf_nid sm, kf_att *a)
{
	memset(a, 0, sizeof *a);
	a->g = g;
	a->sm = sm;
	a->mm1 = a->mm2 = KF_NONE;
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
		if (kf_N(g, u)->op == KF_OP_MATMUL)
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
	kf_type B = kf_type_make((kf_dtype)S->dtype, S->rank - 2, S->dim);
	a->B = B;
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
		if (!kf_att_view(a, w, &B, &vw)) {
			snprintf(a->buf, sizeof a->buf, "the %s operand's layout is not a strided view of its value",
				 w == 0 ? "q" : w == 1 ? "k" : "v");
			a->why = a->buf;
			return false;
		}
	}
	return true;
}

