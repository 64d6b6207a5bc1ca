/* recurrence_norm.c: the `persistent` pass's first step: the forms
 * exporters write for a recurrence, brought to the one the analysis reads
 * (core/recurrence.h: one rank-2 matmul a step over one weight, slices
 * for the gates).  A Python loop over LSTMCell / GRUCell traced by
 * torch.onnx.export writes each step's h W^T + b as a Gemm (transB = 1)
 * and cuts the gates with a Split:
 *   gemm(h, W, b) {alpha, beta, trans_b}  ->  add(matmul(h, W^T) [* alpha], b [* beta])
 *     with one transpose of W (and one scaled bias) that every step reads;
 *   split(g) {axis, sizes}                ->  one slice per result.
 * Only where a recurrence is: the gemms over a weight that two or more
 * gemms read in a chain (each step's depends on the one before), and the
 * splits among the steps (that depend on the chain's first gemm) or that
 * feed them (the per-step input's gates).  Elsewhere nothing changes.
 *
 * requires exact use lists; keeps the graph valid and its values (the
 * same arithmetic, gemm's spelled out).  O(chains x steps x nodes), as the
 * analysis. */
#include <stdlib.h>
#include <string.h>
#include "recurrence_int.h"

static bool is_gemm(const kf_graph *g, kf_nid n)
{
	return n != KF_NONE && kf_N(g, n)->op == KF_OP_GEMM && kf_attr_int(g, n, "trans_a", 0) == 0 &&
	       kf_N(g, n)->nres == 1;
}

/* Marks the nodes of block 0 that depend on node `from`. */
static void forward(const kf_graph *g, kf_nid from, uint8_t *mark)
{
	mark[from] = 1;
	for (kf_nid n = kf_N(g, from)->next; n != KF_NONE; n = kf_N(g, n)->next)
		for (uint32_t i = 0; i < kf_N(g, n)->nin && !mark[n]; i++) {
			kf_nid d = kf_def(g, kf_in(g, n, i));
			mark[n] = d != KF_NONE && mark[d];
		}
}

static kf_vid scalar(kf_graph *g, kf_nid before, double v, kf_dtype dt)
{
	kf_type t = {.dtype = dt, .rank = 0};
	return kf_fold_splat(g, before, kf_type_intern(g->ctx, &t), v);
}

static kf_vid binop(kf_graph *g, kf_nid before, int op, kf_vid a, kf_vid b)
{
	kf_vid in[2] = {a, b};
	kf_vid v = kf_rw_new1(g, 0, before, op, in, 2, kf_V(g, a)->type);
	kf_rw_retype(g, kf_def(g, v));
	return v;
}

/* The gemms over W, in block order, lowered: W^T (and beta b) once,
 * before the first. */
static int lower_gemms(kf_graph *g, const kf_nid *mm, uint32_t n)
{
	kf_nid first = mm[0];
	kf_vid W = kf_in(g, first, 1), Wt = W;
	kf_dtype dt = (kf_dtype)kf_vtype(g, W)->dtype;
	if (kf_attr_int(g, first, "trans_b", 0)) {
		kf_type t = *kf_vtype(g, W);
		t.dim[0] = kf_vtype(g, W)->dim[1];
		t.dim[1] = kf_vtype(g, W)->dim[0];
		Wt = kf_rw_new1(g, 0, first, KF_OP_TRANSPOSE, &W, 1, kf_type_intern(g->ctx, &t));
		kf_rw_set_ints(g, kf_def(g, Wt), "perm", (int64_t[]){1, 0}, 2);
	}
	kf_vid bias = KF_NONE, cseen = KF_NONE;
	for (uint32_t i = 0; i < n; i++) {
		kf_nid x = mm[i];
		double alpha = kf_attr_float(g, x, "alpha", 1.0), beta = kf_attr_float(g, x, "beta", 1.0);
		kf_vid a = kf_in(g, x, 0), C = kf_N(g, x)->nin > 2 ? kf_in(g, x, 2) : KF_NONE;
		kf_vid in[2] = {a, Wt};
		kf_type t = *kf_vtype(g, kf_res(g, x, 0));
		kf_vid v = kf_rw_new1(g, 0, x, KF_OP_MATMUL, in, 2, kf_type_intern(g->ctx, &t));
		if (alpha != 1.0)
			v = binop(g, x, KF_OP_MUL, v, scalar(g, x, alpha, dt));
		if (C != KF_NONE) {
			if (C != cseen) {
				/* one scaled bias for every step that adds the same */
				cseen = C;
				bias = beta == 1.0 ? C : binop(g, first, KF_OP_MUL, C, scalar(g, first, beta, dt));
			}
			v = binop(g, x, KF_OP_ADD, v, bias);
		}
		kf_replace_all_uses(g, kf_res(g, x, 0), v);
		kf_node_erase(g, x);
	}
	return (int)n;
}

/* split(x) {axis, sizes} as one slice per result. */
static void lower_split(kf_graph *g, kf_nid s)
{
	kf_vid x = kf_in(g, s, 0);
	int rank = kf_vtype(g, x)->rank;
	int64_t ax = kf_attr_int(g, s, "axis", 0), at = 0;
	if (ax < 0)
		ax += rank;
	for (uint32_t q = 0; q < kf_N(g, s)->nres; q++) {
		kf_vid r = kf_res(g, s, q);
		int64_t len = kf_vtype(g, r)->dim[ax], e = at + len;
		kf_vid v = kf_rw_new1(g, 0, s, KF_OP_SLICE, &x, 1, kf_V(g, r)->type);
		kf_rw_set_ints(g, kf_def(g, v), "axes", &ax, 1);
		kf_rw_set_ints(g, kf_def(g, v), "starts", &at, 1);
		kf_rw_set_ints(g, kf_def(g, v), "ends", &e, 1);
		kf_V(g, v)->name = kf_V(g, r)->name;
		kf_replace_all_uses(g, r, v);
		at = e;
	}
	kf_node_erase(g, s);
}

/* The splits in the cone or feeding it, lowered. */
static int lower_splits(kf_graph *g, const uint8_t *cone, uint32_t ncone)
{
	int n = 0;
	kf_nid *todo = malloc((g->nnode + 1) * sizeof *todo);
	uint32_t nt = 0;
	kf_foreach_node(g, 0, s) {
		if (kf_N(g, s)->op != KF_OP_SPLIT || !kf_type_is_static(kf_vtype(g, kf_in(g, s, 0))))
			continue;
		bool near = s < ncone && cone[s];
		for (uint32_t q = 0; q < kf_N(g, s)->nres && !near; q++)
			kf_foreach_use(g, kf_res(g, s, q), u) {
				kf_nid un = g->use[u].user;
				near = near || (un < ncone && cone[un]);
			}
		if (near)
			todo[nt++] = s;
	}
	for (uint32_t i = 0; i < nt; i++, n++)
		lower_split(g, todo[i]);
	free(todo);
	return n;
}

int kf_rec_normalize(kf_graph *g)
{
	/* weights two or more gemms read, in order of first use */
	uint32_t nn = g->nnode, nw = 0;
	kf_vid *ws = malloc((nn + 1) * sizeof *ws);
	uint8_t *seen = calloc(g->nval + 1, 1);
	kf_foreach_node(g, 0, m) {
		if (!is_gemm(g, m))
			continue;
		kf_vid W = kf_in(g, m, 1);
		uint32_t cnt = 0;
		kf_foreach_use(g, W, u)
			cnt += is_gemm(g, g->use[u].user) && kf_N(g, g->use[u].user)->blk == 0 &&
			       u == kf_N(g, g->use[u].user)->in0 + 1;
		if (cnt >= 2 && !seen[W]) {
			seen[W] = 1;
			ws[nw++] = W;
		}
	}
	int changed = 0;
	kf_nid *mm = malloc((nn + 1) * sizeof *mm);
	for (uint32_t w = 0; w < nw; w++) {
		uint32_t n = 0;
		kf_foreach_node(g, 0, m)
			if (is_gemm(g, m) && kf_in(g, m, 1) == ws[w] && n < nn)
				mm[n++] = m;
		/* a chain: each gemm depends on the one before */
		uint32_t ncone = g->nnode;
		uint8_t *mark = calloc(ncone + 1, 1), *cone = calloc(ncone + 1, 1);
		bool chain = n >= 2;
		for (uint32_t k = 0; k + 1 < n && chain; k++) {
			memset(mark, 0, ncone + 1);
			forward(g, mm[k], mark);
			chain = mark[mm[k + 1]];
		}
		if (chain) {
			forward(g, mm[0], cone);
			changed += lower_splits(g, cone, ncone);
			changed += lower_gemms(g, mm, n);
		}
		free(mark);
		free(cone);
	}
	free(mm);
	free(ws);
	free(seen);
	return changed;
}
