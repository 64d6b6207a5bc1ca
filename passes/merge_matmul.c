/* merge_matmul.c: the merge-matmul pass: matmuls that read one value x
 * with constant right operands of one K and dtype become one matmul over
 * the constants concatenated along N, and a split of its result:
 *
 *   q = matmul(x, Wq); k = matmul(x, Wk); v = matmul(x, Wv)
 *     -> qkv = matmul(x, concat(Wq, Wk, Wv)); q, k, v = slices of qkv
 *
 * The q, k and v projections of attention (and the gate and up
 * projections of a gated MLP) then run as one contraction, which fills the
 * GPU where each alone would not, and x is read once.  Where each adds a
 * constant bias of its N (nn.Linear), the biases are concatenated and added
 * once, so that the add is the merged contraction's epilogue.  The concatenation
 * is a function of constants: canonicalize folds it when the weights are
 * inline, and the CUDA backend computes it once at plan time otherwise
 * (cuda_backend.c, mark_folds).  The parts are slices (not one split):
 * each is a view its reader takes in, a loop kernel or an attention's
 * prologue, where a split read by several kernels would be a kernel.
 *
 * requires: a verified graph.  keeps: the matmuls' result names (on the
 * slices).  breaks: nothing.  The merged matmul goes before the
 * first of the matmuls it replaces, so x and the weights (constants that
 * must be defined before it) dominate it, and every reader of a part comes
 * after.  Cost: one pass over the nodes and their users.
 */
#include <stdlib.h>
#include <string.h>
#include "fusion.h"
#include "passes.h"

#define MAXM 16

/* A matmul u that reads x as its left operand and a constant matrix as its
 * right one: its weight, else KF_NONE.  x may have symbolic dims (the
 * rows B*T of a transformer); the weights are static, so N and K are. */
static kf_vid weight_of(const kf_graph *g, kf_nid u, kf_vid x)
{
	const kf_node *n = kf_N(g, u);
	if (n->op != KF_OP_MATMUL || n->blk != 0 || kf_in(g, u, 0) != x || kf_in(g, u, 1) == x)
		return KF_NONE;
	kf_vid w = kf_in(g, u, 1);
	kf_nid d = kf_def(g, w);
	const kf_type *wt = kf_vtype(g, w), *xt = kf_vtype(g, x);
	if (d == KF_NONE || kf_N(g, d)->op != KF_OP_CONST || wt->rank != 2 || xt->rank < 1 || !kf_type_is_static(wt) ||
	    wt->dim[0] != xt->dim[xt->rank - 1])
		return KF_NONE;
	return w;
}

/* The bias of matmul u: its result's only reader adds a constant vector of
 * its N elements (nn.Linear's bias); KF_NONE otherwise. */
static kf_vid bias_of(const kf_graph *g, kf_nid u, kf_nid *add)
{
	kf_vid r = kf_res(g, u, 0);
	*add = KF_NONE;
	kf_uid f = kf_V(g, r)->first_use;
	if (f == KF_NONE || g->use[f].next != KF_NONE)
		return KF_NONE;
	kf_nid a = g->use[f].user;
	if (kf_N(g, a)->op != KF_OP_ADD || kf_N(g, a)->blk != 0)
		return KF_NONE;
	kf_vid b = kf_in(g, a, kf_in(g, a, 0) == r);
	kf_nid d = kf_def(g, b);
	const kf_type *bt = kf_vtype(g, b), *rt = kf_vtype(g, r);
	if (b == r || d == KF_NONE || kf_N(g, d)->op != KF_OP_CONST || bt->rank != 1 || bt->dtype != rt->dtype ||
	    bt->dim[0] != rt->dim[rt->rank - 1] || !kf_type_same_shape(kf_vtype(g, kf_res(g, a, 0)), rt))
		return KF_NONE;
	*add = a;
	return b;
}

/* The matmuls reading x by a constant weight of one dtype (at most MAXM):
 * into mm[] and w[] in program order (use lists are not), the weights
 * concatenated in that order.  The first is where the merged matmul goes,
 * so every weight must be defined before it: 0 when one is not. */
static int collect(kf_graph *g, kf_vid x, const int64_t *pos, uint32_t npos, kf_nid *mm, kf_vid *w)
{
	int m = 0;
	kf_foreach_use(g, x, us) {
		kf_nid u = g->use[us].user;
		kf_vid wu = u < npos ? weight_of(g, u, x) : KF_NONE;
		bool seen = false;
		for (int j = 0; j < m; j++)
			seen = seen || mm[j] == u;
		if (wu == KF_NONE || seen || m == MAXM)
			continue;
		if (m && (kf_vtype(g, wu)->dtype != kf_vtype(g, w[0])->dtype))
			continue;
		mm[m] = u;
		w[m++] = wu;
	}
	for (int a = 1; a < m; a++)
		for (int b = a; b > 0 && pos[mm[b - 1]] > pos[mm[b]]; b--) {
			kf_nid tn = mm[b];
			mm[b] = mm[b - 1];
			mm[b - 1] = tn;
			kf_vid tw = w[b];
			w[b] = w[b - 1];
			w[b - 1] = tw;
		}
	for (int j = 0; j < m; j++)
		if (kf_def(g, w[j]) >= npos || pos[kf_def(g, w[j])] >= pos[mm[0]])
			return 0;
	return m;
}

/* A slice of `whole`'s last axis, [at, at + size), before node `first`,
 * taking the place (and name) of value old. */
static void slice_part(kf_graph *g, kf_vid whole, kf_nid first, kf_vid old, int64_t at, int64_t size, kf_loc loc)
{
	kf_ctx *c = g->ctx;
	kf_tid rt = kf_V(g, old)->type;
	kf_nid sl = kf_node_new(g, 0, first, KF_OP_SLICE, &whole, 1, &rt, 1);
	kf_attrval st = {.kind = KF_ATTR_INT, .i = at}, en = {.kind = KF_ATTR_INT, .i = at + size};
	kf_attrval ax = {.kind = KF_ATTR_INT, .i = kf_vtype(g, whole)->rank - 1};
	kf_attrval l1 = {.kind = KF_ATTR_LIST, .n = 1, .list = &st}, l2 = {.kind = KF_ATTR_LIST, .n = 1, .list = &en},
		   l3 = {.kind = KF_ATTR_LIST, .n = 1, .list = &ax};
	kf_node_set_attr(g, sl, kf_intern_cstr(c, "starts"), kf_attrval_copy(g, &l1));
	kf_node_set_attr(g, sl, kf_intern_cstr(c, "ends"), kf_attrval_copy(g, &l2));
	kf_node_set_attr(g, sl, kf_intern_cstr(c, "axes"), kf_attrval_copy(g, &l3));
	kf_N(g, sl)->loc = loc;
	kf_V(g, kf_res(g, sl, 0))->name = kf_V(g, old)->name;
	kf_replace_all_uses(g, old, kf_res(g, sl, 0));
}

/* Matmuls mm[0..m) of x by weights w[]: concat(w...) : [K, sum N], one
 * matmul, its parts as slices of the last axis. */
static void merge(kf_graph *g, kf_vid x, const kf_nid *mm, kf_vid *w, int m, const int64_t *pos, uint32_t npos)
{
	kf_ctx *c = g->ctx;
	kf_nid first = mm[0];
	const kf_type *w0 = kf_vtype(g, w[0]), *r0 = kf_vtype(g, kf_res(g, mm[0], 0));
	int64_t N = 0, sizes[MAXM];
	for (int j = 0; j < m; j++) {
		sizes[j] = kf_vtype(g, w[j])->dim[1];
		N += sizes[j];
	}
	kf_type ct = *w0, yt = *r0;
	ct.dim[1] = N;
	yt.dim[yt.rank - 1] = N;
	kf_tid ctid = kf_type_intern(c, &ct), ytid = kf_type_intern(c, &yt);
	kf_nid cat = kf_node_new(g, 0, first, KF_OP_CONCAT, w, (uint32_t)m, &ctid, 1);
	kf_node_set_attr(g, cat, kf_intern_cstr(c, "axis"), (kf_attrval){.kind = KF_ATTR_INT, .i = 1});
	kf_vid in[2] = {x, kf_res(g, cat, 0)};
	kf_nid y = kf_node_new(g, 0, first, KF_OP_MATMUL, in, 2, &ytid, 1);
	/* biases that every part adds are added once, concatenated too (the
	 * merged contraction's epilogue); the parts then replace the adds */
	kf_vid bias[MAXM];
	kf_nid adds[MAXM];
	bool biased = true;
	for (int j = 0; j < m && biased; j++)
		biased = (bias[j] = bias_of(g, mm[j], &adds[j])) != KF_NONE && kf_def(g, bias[j]) < npos &&
			 pos[kf_def(g, bias[j])] < pos[first];
	kf_nid whole = y;
	if (biased) {
		kf_type bt = kf_type_make((kf_dtype)yt.dtype, 1, &N);
		kf_tid btid = kf_type_intern(c, &bt);
		kf_nid bc = kf_node_new(g, 0, first, KF_OP_CONCAT, bias, (uint32_t)m, &btid, 1);
		kf_node_set_attr(g, bc, kf_intern_cstr(c, "axis"), (kf_attrval){.kind = KF_ATTR_INT, .i = 0});
		kf_vid ain[2] = {kf_res(g, y, 0), kf_res(g, bc, 0)};
		whole = kf_node_new(g, 0, first, KF_OP_ADD, ain, 2, &ytid, 1);
		kf_N(g, bc)->loc = kf_N(g, whole)->loc = kf_N(g, first)->loc;
	}
	/* the parts as slices: each a view its own reader takes in (a split
	 * read by several kernels would be a kernel of its own) */
	int64_t at = 0;
	for (int j = 0; j < m; j++) {
		kf_vid old = biased ? kf_res(g, adds[j], 0) : kf_res(g, mm[j], 0);
		slice_part(g, kf_res(g, whole, 0), first, old, at, sizes[j], kf_N(g, mm[j])->loc);
		at += sizes[j];
	}
	kf_N(g, cat)->loc = kf_N(g, y)->loc = kf_N(g, first)->loc;
	for (int j = 0; j < m; j++) { /* after the slices went in before the first */
		if (biased)
			kf_node_erase(g, adds[j]);
		kf_node_erase(g, mm[j]);
	}
}

static int run(kf_graph *g, const kf_passopts *po, bool *changed)
{
	kf_ctx *c = g->ctx;
	uint32_t npos = g->nnode;
	int64_t *pos = malloc((npos + 1) * sizeof *pos);
	/* the values to look at: every top-level result and argument */
	kf_vid *xs = malloc((g->nval + 1) * sizeof *xs);
	uint32_t nx = 0;
	int64_t p = 0;
	kf_foreach_node(g, 0, n) {
		pos[n] = p++;
		for (uint32_t r = 0; r < kf_N(g, n)->nres; r++)
			xs[nx++] = kf_res(g, n, r);
	}
	for (uint32_t i = 0; i < g->blk[0].narg; i++)
		xs[nx++] = g->blk[0].arg[i];
	int merged = 0, mms = 0;
	for (uint32_t i = 0; i < nx; i++) {
		kf_nid mm[MAXM];
		kf_vid w[MAXM];
		int m = collect(g, xs[i], pos, npos, mm, w);
		if (m < 2)
			continue;
		merge(g, xs[i], mm, w, m, pos, npos);
		merged++;
		mms += m;
	}
	free(pos);
	free(xs);
	if (merged)
		*changed = true;
	if (po->log && merged)
		kf_buf_printf(po->log, "merge-matmul: @%s: %d matmul%s from %d\n", kf_str(c, g->name), merged,
			      merged == 1 ? "" : "s", mms);
	return 0;
}

const kf_pass kf_pass_merge_matmul = {
	.name = "merge-matmul",
	.doc = "matmuls of one input by constant weights (q, k, v projections) become one matmul and slices of it",
	.run = run,
};
