/* recurrence_hoist.c: the `persistent` pass's per-step inputs computed for
 * all steps at once.  A per-step input of step k (x_t W^T + b, a gate's
 * columns of it, a sequence-length mask) is an expression over slices of
 * outside values that move by their length each step (recurrence.h); the
 * same expression over the whole values computes every step's rows at
 * once, since each op it holds works row by row: matmul and gemm by an
 * invariant weight, element-wise ops with row-invariant operands, slices
 * and concats along other axes, reshapes (rows regrouped).  Step k then
 * reads rows [r0 + k * dr, + n) of the result (kf_hrow).
 *
 * The bases: a slice along axis 0 of any length n (a batch's rows: dr =
 * ±n), and a slice of length 1 along another axis (x[:, t] of a
 * batch-first input: that axis goes first and its steps become blocks of
 * rows).  Several hoisted operands of one op must agree on their rows, or
 * the per-step input is refused (with the reason).  What only one step
 * would need is never computed for all. */
#include <stdlib.h>
#include <string.h>
#include "recurrence_int.h"

static bool fail(kf_rw *w, const char *fmt, const char *arg)
{
	snprintf(w->why, sizeof w->why, fmt, arg);
	return false;
}

static const char *opname(const kf_graph *g, kf_vid v)
{
	kf_nid d = kf_def(g, v);
	return d == KF_NONE ? "argument" : kf_op(g->ctx, kf_N(g, d)->op)->name;
}

kf_vid kf_rw_peel(const kf_graph *g, kf_vid a, kf_vid *b, uint32_t *n)
{
	*n = 0;
	for (;;) {
		kf_nid x = kf_def(g, a), y = kf_def(g, *b);
		int64_t ax, s, len;
		if (x == KF_NONE || y == KF_NONE || !kf_rec_axis_slice(g, x, &ax, &s, &len) || ax == 0 ||
		    kf_N(g, y)->op != KF_OP_SLICE || !kf_rec_attrs_eq(g, x, y) ||
		    kf_vtype(g, a)->dim[0] != kf_vtype(g, kf_in(g, x, 0))->dim[0])
			return a;
		/* the same slice in both steps: not the one that moves */
		a = kf_in(g, x, 0);
		*b = kf_in(g, y, 0);
		(*n)++;
	}
}

static int64_t prod(const kf_type *t, int from)
{
	int64_t p = 1;
	for (int i = from; i < t->rank; i++)
		p *= t->dim[i];
	return p;
}

/* The base: a slice of an outside value X that moves each step. */
static bool base(kf_rw *w, kf_vid a, kf_vid b, kf_nid before, kf_hrow *o)
{
	kf_graph *g = w->g;
	kf_nid x = kf_def(g, a), y = kf_def(g, b);
	int64_t ax, s, n, ax2, s2, n2;
	kf_vid X = kf_in(g, x, 0);
	const kf_type *tx = kf_vtype(g, X), *ta = kf_vtype(g, a);
	if (!kf_rec_axis_slice(g, y, &ax2, &s2, &n2) || !kf_rec_axis_slice(g, x, &ax, &s, &n))
		return fail(w, "%s", "a per-step input is not a slice");
	if (!kf_type_is_static(tx))
		return fail(w, "a per-step input slices a value of symbolic size ('%s'; specialize it first)",
			    opname(g, X));
	int64_t sg = s2 > s ? 1 : -1;
	if (ax == 0) {
		*o = (kf_hrow){X, s, sg * n, n};
		return true;
	}
	if (n != 1)
		return fail(w, "%s", "a per-step input takes several positions along an axis other than the first");
	/* x[:, t]: axis ax goes first; step t is then rows [t * d0, + d0) */
	int64_t perm[KF_MAX_RANK], shape[KF_MAX_RANK];
	kf_type tt = *tx, tr = *ta;
	perm[0] = ax;
	for (int i = 0, k = 1; i < tx->rank; i++)
		if (i != ax)
			perm[k++] = i;
	for (int i = 0; i < tx->rank; i++)
		tt.dim[i] = tx->dim[perm[i]];
	kf_vid t = kf_rw_new1(g, 0, before, KF_OP_TRANSPOSE, &X, 1, kf_type_intern(g->ctx, &tt));
	kf_rw_set_ints(g, kf_def(g, t), "perm", perm, tx->rank);
	int64_t d0 = ta->dim[0];
	tr.dim[0] = tx->dim[ax] * d0;
	for (int i = 0; i < tr.rank; i++)
		shape[i] = tr.dim[i];
	kf_vid h = kf_rw_new1(g, 0, before, KF_OP_RESHAPE, &t, 1, kf_type_intern(g->ctx, &tr));
	kf_rw_set_ints(g, kf_def(g, h), "shape", shape, tr.rank);
	*o = (kf_hrow){h, s * d0, sg * d0, d0};
	return true;
}

/* reshape(u), u's rows hoisted as *o: the rows regrouped, when every
 * step's block starts and ends on a row of the new shape. */
static bool reshape(kf_rw *w, kf_vid a, kf_vid u, kf_nid before, kf_hrow *o)
{
	kf_graph *g = w->g;
	/* copies: kf_type_intern below may move the table these point into */
	const kf_type ca = *kf_vtype(g, a), cu = *kf_vtype(g, u), ch = *kf_vtype(g, o->h);
	const kf_type *ta = &ca, *tu = &cu, *th = &ch;
	int64_t P = prod(tu, 1), Q = prod(ta, 1);
	if (ta->rank < 1 || !kf_type_is_static(ta) || Q == 0 || (o->r0 * P) % Q || (o->dr * P) % Q ||
	    (th->dim[0] * P) % Q || (o->n * P) != ta->dim[0] * Q)
		return fail(w, "%s", "a per-step input is reshaped across its steps' rows");
	kf_type t = *ta;
	t.dim[0] = th->dim[0] * P / Q;
	int64_t shape[KF_MAX_RANK];
	for (int i = 0; i < t.rank; i++)
		shape[i] = t.dim[i];
	kf_vid h = kf_rw_new1(g, 0, before, KF_OP_RESHAPE, &o->h, 1, kf_type_intern(g->ctx, &t));
	kf_rw_set_ints(g, kf_def(g, h), "shape", shape, t.rank);
	*o = (kf_hrow){h, o->r0 * P / Q, o->dr * P / Q, ta->dim[0]};
	return true;
}

static bool hoist(kf_rw *w, kf_vid a, kf_vid b, kf_nid before, kf_hrow *o);

/* Operand i of a row-wise op: invariant (and then the same for every
 * row), or hoisted with the rows of the others. */
static bool operand(kf_rw *w, kf_nid x, kf_nid y, uint32_t i, kf_nid before, kf_vid *in, kf_hrow *rows, bool *have)
{
	kf_graph *g = w->g;
	kf_vid u = kf_in(g, x, i), v = kf_in(g, y, i);
	const kf_node *p = kf_N(g, x);
	int rank = kf_vtype(g, kf_res(g, x, 0))->rank;
	bool mm = p->op == KF_OP_MATMUL || p->op == KF_OP_GEMM;
	if (kf_rec_same_inv(g, u, v)) {
		const kf_type *t = kf_vtype(g, u);
		bool rowinv = mm ? (i == 1 ? t->rank == 2 : i == 2 && (t->rank < 2 || t->dim[0] == 1))
				 : t->rank < rank || t->dim[0] == 1;
		in[i] = u;
		return rowinv || fail(w, "a per-step input's '%s' reads a value that differs by row but not by step",
				      kf_op(g->ctx, p->op)->name);
	}
	if (mm && i >= 1)
		return fail(w, "a per-step input's '%s' has a weight that changes each step", kf_op(g->ctx, p->op)->name);
	kf_hrow h;
	if (!hoist(w, u, v, before, &h))
		return false;
	if (kf_vtype(g, u)->rank != rank && !mm)
		return fail(w, "a per-step input's '%s' broadcasts a step's rows", kf_op(g->ctx, p->op)->name);
	if (*have && (h.r0 != rows->r0 || h.dr != rows->dr || h.n != rows->n ||
		      kf_vtype(g, h.h)->dim[0] != kf_vtype(g, rows->h)->dim[0]))
		return fail(w, "a per-step input's '%s' combines rows of different steps", kf_op(g->ctx, p->op)->name);
	*rows = h;
	*have = true;
	in[i] = h.h;
	return true;
}

/* Ops that work row by row (on rows along axis 0). */
static bool rowwise(const kf_graph *g, kf_nid x)
{
	const kf_node *p = kf_N(g, x);
	const kf_opinfo *oi = kf_op(g->ctx, p->op);
	int64_t ax, s, n;
	if (oi->trait == KF_TRAIT_ELEMENTWISE || oi->trait == KF_TRAIT_BROADCAST || p->op == KF_OP_MATMUL)
		return true;
	if (p->op == KF_OP_GEMM)
		return kf_attr_int(g, x, "trans_a", 0) == 0;
	if (p->op == KF_OP_SLICE)
		return kf_rec_axis_slice(g, x, &ax, &s, &n) && ax != 0;
	if (p->op == KF_OP_CONCAT)
		return kf_attr_int(g, x, "axis", 0) != 0;
	return false;
}

static bool hoist(kf_rw *w, kf_vid a, kf_vid b, kf_nid before, kf_hrow *o)
{
	kf_graph *g = w->g;
	for (uint32_t i = 0; i < w->nhm; i++)
		if (w->hm_a[i] == a) {
			*o = w->hm_h[i];
			return true;
		}
	kf_nid x = kf_def(g, a), y = kf_def(g, b);
	if (x == KF_NONE || y == KF_NONE)
		return fail(w, "%s", "a per-step input is an argument that differs per step");
	const kf_node *p = kf_N(g, x);
	if (kf_in(g, x, 0) == kf_in(g, y, 0) && p->op == KF_OP_SLICE && !kf_rec_attrs_eq(g, x, y)) {
		if (!base(w, a, b, before, o))
			return false;
	} else if (p->op == KF_OP_RESHAPE) {
		if (!hoist(w, kf_in(g, x, 0), kf_in(g, y, 0), before, o) || !reshape(w, a, kf_in(g, x, 0), before, o))
			return false;
	} else {
		if (!rowwise(g, x) || p->nin > KF_REC_MAXIN || p->nres != 1 || p->nin == 0)
			return fail(w, "a per-step input holds a '%s', which does not work row by row",
				    kf_op(g->ctx, p->op)->name);
		kf_vid in[KF_REC_MAXIN];
		kf_hrow rows = {0};
		bool have = false;
		for (uint32_t i = 0; i < kf_N(g, x)->nin; i++)
			if (!operand(w, x, y, i, before, in, &rows, &have))
				return false;
		if (!have)
			return fail(w, "a per-step input's '%s' reads nothing that moves", kf_op(g->ctx, p->op)->name);
		kf_vid h = kf_rw_new1(g, 0, before, kf_N(g, x)->op, in, kf_N(g, x)->nin, kf_V(g, a)->type);
		x = kf_def(g, a); /* re-fetch: nodes were added */
		kf_node_set_attrs(g, kf_def(g, h), kf_N(g, x)->attr, kf_N(g, x)->nattr);
		kf_N(g, kf_def(g, h))->loc = kf_N(g, x)->loc;
		if (!kf_rw_retype(g, kf_def(g, h)))
			return fail(w, "a per-step input's '%s' cannot take every step's rows at once",
				    kf_op(g->ctx, kf_N(g, x)->op)->name);
		*o = (kf_hrow){h, rows.r0, rows.dr, rows.n};
	}
	/* shared parts of several per-step inputs are hoisted once */
	if (w->nhm < w->caphm) {
		w->hm_a[w->nhm] = a;
		w->hm_h[w->nhm++] = *o;
	}
	return true;
}

uint32_t kf_rw_ext_index(const kf_rw *w, kf_vid a)
{
	uint32_t e = 0;
	while (e < w->next && w->ext0[e] != a)
		e++;
	return e;
}

int kf_rw_hoist_all(kf_rw *w)
{
	kf_graph *g = w->g;
	kf_rec *r = w->r;
	for (uint32_t i = 0; i < r->nper; i++)
		for (uint32_t j = 0; j < kf_N(g, r->node[i])->nin; j++) {
			if (r->cls[i * KF_REC_MAXIN + j] != KF_REC_EXT)
				continue;
			uint32_t np;
			if (r->node[r->nper + i] == KF_NONE) {
				/* two steps, the second lacking the node: which way
				 * its input moves is not known */
				snprintf(w->why, sizeof w->why, "the second of two steps lacks a '%s' node",
					 kf_op(g->ctx, kf_N(g, r->node[i])->op)->name);
				return -1;
			}
			kf_vid b = kf_rec_in(r, r->node[r->nper + i], j);
			kf_vid a = kf_rw_peel(g, kf_in(g, r->node[i], j), &b, &np);
			if (kf_rw_ext_index(w, a) < w->next)
				continue;
			kf_hrow h;
			char why0[sizeof w->why], d[320];
			bool ok = hoist(w, a, b, kf_def(g, a), &h);
			int64_t lo = h.dr < 0 ? h.r0 + (int64_t)(r->T - 1) * h.dr : h.r0;
			int64_t hi = h.dr < 0 ? h.r0 + h.n : h.r0 + (int64_t)(r->T - 1) * h.dr + h.n;
			if (ok && (lo < 0 || hi > kf_vtype(g, h.h)->dim[0]))
				ok = fail(w, "%s", "a per-step input's rows run past its value");
			if (!ok) {
				/* which input, in the user's terms */
				memcpy(why0, w->why, sizeof why0);
				kf_rec_describe(g, kf_def(g, kf_in(g, r->node[i], j)), d, sizeof d);
				snprintf(w->why, sizeof w->why, "step 1's input %s: %s", d, why0);
				return -1;
			}
			w->ext0[w->next] = a;
			w->hx[w->next++] = h;
		}
	return 0;
}
