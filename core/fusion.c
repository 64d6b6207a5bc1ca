/* fusion.c: the fusion kinds (fusion.h): which ops a kernel of each kind
 * holds and how it iterates; shared by the fuse pass and the backends. */
#include "fusion.h"

bool kf_fuse_op_expensive(int op)
{
	switch (op) {
	case KF_OP_EXP: case KF_OP_LOG: case KF_OP_TANH: case KF_OP_SIGMOID: case KF_OP_GELU:
	case KF_OP_ERF: case KF_OP_SILU: case KF_OP_POW: case KF_OP_SQRT: case KF_OP_RSQRT:
	case KF_OP_DIV:
		return true;
	default:
		return op >= KF_NBUILTIN;
	}
}

bool kf_fuse_const_embeddable(const kf_graph *g, kf_nid n)
{
	const kf_node *x = kf_N(g, n);
	if (x->op != KF_OP_CONST || !x->cst || x->cst->kind == KF_CONST_FILE)
		return false;
	const kf_type *t = kf_vtype(g, x->res0);
	return kf_type_is_static(t) && (x->cst->n == 1 || x->cst->n <= KF_FUSE_EMBED_MAX);
}

bool kf_fuse_is_view(const kf_graph *g, kf_nid d)
{
	return d != KF_NONE && kf_N(g, d)->nin == 1 && kf_N(g, d)->blk == 0 &&
	       kf_op(g->ctx, kf_N(g, d)->op)->trait == KF_TRAIT_INJECTIVE;
}

bool kf_fuse_node_static(const kf_graph *g, kf_nid n)
{
	const kf_node *x = kf_N(g, n);
	for (uint32_t i = 0; i < x->nin; i++)
		if (!kf_type_is_static(kf_vtype(g, kf_in(g, n, i))))
			return false;
	for (uint32_t i = 0; i < x->nres; i++)
		if (!kf_type_is_static(kf_vtype(g, x->res0 + i)))
			return false;
	return true;
}

static int norm_axis(int64_t ax, int rank)
{
	if (ax < 0)
		ax += rank;
	return ax < 0 ? 0 : ax > rank ? rank : (int)ax;
}

bool kf_fuse_row_split(const kf_graph *g, kf_nid n, int *pa, int64_t *R, int64_t *C)
{
	const kf_node *x = kf_N(g, n);
	if (x->nin < 1)
		return false;
	const kf_type *F = kf_vtype(g, kf_in(g, n, 0));
	int r = F->rank, a;
	switch (x->op) {
	case KF_OP_REDUCE_SUM: case KF_OP_REDUCE_MEAN: case KF_OP_REDUCE_MAX: case KF_OP_REDUCE_MIN: {
		int64_t ax[KF_MAX_RANK];
		int na = kf_attr_ints(g, n, "axes", ax, KF_MAX_RANK);
		bool on[KF_MAX_RANK] = {0};
		if (na <= 0) {
			for (int d = 0; d < r; d++)
				on[d] = true;
		} else {
			if (na > KF_MAX_RANK)
				return false;
			for (int i = 0; i < na; i++) {
				int64_t v = ax[i] < 0 ? ax[i] + r : ax[i];
				if (v < 0 || v >= r)
					return false;
				on[v] = true;
			}
		}
		/* trailing: once an axis is reduced, every later one is too, except
		 * dims of size 1, which do not change the layout */
		a = r;
		while (a > 0 && (on[a - 1] || F->dim[a - 1] == 1))
			a--;
		for (int d = 0; d < a; d++)
			if (on[d] && F->dim[d] != 1)
				return false;
		break;
	}
	case KF_OP_SOFTMAX: case KF_OP_LOG_SOFTMAX:
		a = norm_axis(kf_attr_int(g, n, "axis", -1), r);
		/* one axis: trailing when every dim after it is 1 */
		for (int d = a + 1; d < r; d++)
			if (F->dim[d] != 1)
				return false;
		break;
	case KF_OP_LAYER_NORM:
		a = norm_axis(kf_attr_int(g, n, "axis", -1), r);
		break;
	default:
		return false;
	}
	int64_t rr = 1, cc = 1;
	for (int d = 0; d < r; d++) {
		if (F->dim[d] < 0)
			return false;
		if (d < a)
			rr *= F->dim[d];
		else
			cc *= F->dim[d];
	}
	/* rows of one element (only dims of size 1 reduced): a value of F's
	 * shape would be both per row and per element, which a row kernel
	 * cannot tell apart; the generic kernel runs these */
	if (cc < 2)
		return false;
	*pa = a;
	*R = rr;
	*C = cc;
	return true;
}

kf_fuse_kind kf_fuse_kind_of(const kf_graph *g, kf_nid n)
{
	const kf_node *x = kf_N(g, n);
	if (x->op == KF_OP_CONST)
		return KF_FK_CONST;
	if (x->op == KF_OP_FUSION || x->op == KF_OP_RETURN || x->op == KF_OP_YIELD)
		return KF_FK_NONE;
	if (!kf_fuse_node_static(g, n))
		return KF_FK_NONE;
	const kf_opinfo *oi = kf_op(g->ctx, x->op);
	switch (oi->trait) {
	case KF_TRAIT_ELEMENTWISE: case KF_TRAIT_BROADCAST: case KF_TRAIT_INJECTIVE:
		if (x->op >= KF_NBUILTIN && !oi->cuda)
			return KF_FK_NONE;
		return KF_FK_LOOP;
	case KF_TRAIT_REDUCE: {
		int a;
		if (x->op >= KF_NBUILTIN)
			return KF_FK_NONE; /* a plugin's reduction (a Lua op{}): no kernel template */
		int64_t R, C;
		return kf_fuse_row_split(g, n, &a, &R, &C) ? KF_FK_ROW : KF_FK_REDUCE;
	}
	default:
		return KF_FK_NONE;
	}
}

kf_rowclass kf_fuse_rowclass(const kf_type *F, int a, const kf_type *t, bool elem)
{
	int r = F->rank, s = t->rank;
	if (!elem && s == a) {
		bool same = true;
		for (int d = 0; d < a; d++)
			same = same && t->dim[d] == F->dim[d];
		if (same && s > 0)
			return KF_RC_ROW;
	}
	if (s > r)
		return KF_RC_BAD;
	bool full = true, scalar = true, row = true, col = true;
	for (int d = 0; d < r; d++) {
		int64_t td = d < r - s ? 1 : t->dim[d - (r - s)];
		int64_t fd = F->dim[d];
		bool eq = td == fd, one = td == 1;
		full = full && eq;
		scalar = scalar && one;
		row = row && (d < a ? eq : one);
		col = col && (d < a ? one : eq);
	}
	if (full)
		return KF_RC_FULL;
	if (scalar)
		return KF_RC_SCALAR;
	if (row)
		return KF_RC_ROW;
	if (col)
		return KF_RC_COL;
	return KF_RC_BAD;
}

/* dim d of t aligned to a rank-r shape from the right (1 where t has none) */
static int64_t aligned_dim(const kf_type *t, int r, int d)
{
	return d < r - t->rank ? 1 : t->dim[d - (r - t->rank)];
}

kf_colclass kf_fuse_colclass(const kf_type *F, unsigned S, const kf_type *t)
{
	if (t->rank > F->rank)
		return KF_CC_BAD;
	bool elem = false;
	for (int d = 0; d < F->rank; d++) {
		int64_t td = aligned_dim(t, F->rank, d);
		if (td != F->dim[d] && td != 1)
			return KF_CC_BAD;
		elem = elem || ((S >> d & 1) && td != 1);
	}
	return elem ? KF_CC_ELEM : KF_CC_OUT;
}

bool kf_fuse_col_writable(const kf_type *F, unsigned S, const kf_type *t)
{
	kf_colclass k = kf_fuse_colclass(F, S, t);
	if (k == KF_CC_BAD || t->rank > F->rank)
		return false;
	for (int d = 0; d < F->rank; d++) {
		int64_t want = k == KF_CC_ELEM || !(S >> d & 1) ? F->dim[d] : 1;
		if (aligned_dim(t, F->rank, d) != want)
			return false;
	}
	return true;
}

bool kf_fuse_col_split(const kf_graph *g, kf_nid n, unsigned *S, int64_t *M, int64_t *L)
{
	const kf_node *x = kf_N(g, n);
	if ((x->op != KF_OP_REDUCE_SUM && x->op != KF_OP_REDUCE_MEAN && x->op != KF_OP_REDUCE_MAX &&
	     x->op != KF_OP_REDUCE_MIN) || x->nin < 1 || x->nres != 1 || !kf_fuse_node_static(g, n))
		return false;
	const kf_type *F = kf_vtype(g, kf_in(g, n, 0));
	/* integer means and wrapping sums stay with the generic kernel */
	if (!kf_dtype_is_float((kf_dtype)F->dtype))
		return false;
	int64_t ax[KF_MAX_RANK];
	int na = kf_attr_ints(g, n, "axes", ax, KF_MAX_RANK);
	if (na > KF_MAX_RANK)
		return false;
	bool on[KF_MAX_RANK] = {0};
	for (int d = 0; d < F->rank; d++)
		on[d] = na <= 0;
	for (int i = 0; i < na; i++) {
		int64_t v = ax[i] < 0 ? ax[i] + F->rank : ax[i];
		if (v < 0 || v >= F->rank)
			return false;
		on[v] = true;
	}
	unsigned s = 0;
	int64_t m = 1, l = 1;
	for (int d = 0; d < F->rank; d++) {
		if (on[d] && F->dim[d] != 1) {
			s |= 1u << d;
			l *= F->dim[d];
		} else {
			m *= F->dim[d];
		}
	}
	/* the result must be the thread's own column where F-aligned values
	 * read it: keepdims, or only leading dims reduced; and something must
	 * be reduced (only dims of size 1: the generic kernel) */
	if (!s || !kf_fuse_col_writable(F, s, kf_vtype(g, x->res0)) ||
	    kf_fuse_colclass(F, s, kf_vtype(g, x->res0)) != KF_CC_OUT)
		return false;
	*S = s;
	*M = m;
	*L = l;
	return true;
}

bool kf_fuse_swaps_last_two(const kf_graph *g, kf_nid n)
{
	const kf_node *x = kf_N(g, n);
	if (x->op != KF_OP_TRANSPOSE || x->nres != 1)
		return false;
	int64_t p[KF_MAX_RANK];
	int r = kf_attr_ints(g, n, "perm", p, KF_MAX_RANK);
	if (r < 2 || r != kf_vtype(g, kf_res(g, n, 0))->rank || p[r - 1] != r - 2 || p[r - 2] != r - 1)
		return false;
	for (int d = 0; d < r - 2; d++)
		if (p[d] != d)
			return false;
	return true;
}
