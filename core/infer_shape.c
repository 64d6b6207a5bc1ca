/* infer_shape.c: result types of the layout ops (transpose, reshape,
 * broadcast_to, concat, slice, split) and of fusion regions.  Symbolic dims
 * pass through where the result is certain and are refused where it would
 * depend on their run-time value. */
#include <string.h>

#include "infer.h"

int kf_infer_transpose(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen)
{
	kf_ic ic = kf_ic_make(g, n, err, errlen);
	const kf_type *x = kf_ic_in(&ic, 0);
	const kf_attrval *perm;
	uint32_t np;
	bool present, seen[KF_MAX_RANK] = {false};
	int64_t dim[KF_MAX_RANK];
	if (!kf_ic_ints(&ic, "perm", &perm, &np, &present))
		return -1;
	if (present && np != x->rank)
		return kf_ic_fail(&ic, "'transpose' perm has %u entries for rank %d", np, x->rank);
	for (int i = 0; i < x->rank; i++) {
		int64_t p = present ? perm[i].i : x->rank - 1 - i;
		if (p < 0 || p >= x->rank || seen[p])
			return kf_ic_fail(&ic, "'transpose' perm is not a permutation of 0..%d", x->rank - 1);
		seen[p] = true;
		dim[i] = x->dim[p];
	}
	out[0] = kf_type_make(x->dtype, x->rank, dim);
	return 1;
}

/* Reads a shape attribute (`shape`) of at most KF_MAX_RANK entries: ints
 * (none below `min`) and strings naming symbolic dims; sym[i] marks those. */
static int shape_attr(kf_ic *ic, int64_t *dim, bool *sym, int64_t min)
{
	if (!kf_ic_need(ic, "shape"))
		return -1;
	const kf_attrval *v = kf_attr_get(ic->g, ic->n, "shape");
	if (v->kind == KF_ATTR_LIST && v->n > KF_MAX_RANK)
		return kf_ic_fail(ic, "'%s' shape has %u dims, at most %d are supported", ic->op, v->n, KF_MAX_RANK);
	int r = kf_attr_dims(ic->g, ic->n, "shape", dim, sym, KF_MAX_RANK);
	if (r < 0)
		return kf_ic_fail(ic, "attribute 'shape' of '%s' must be a list of dims (ints, or strings naming "
				      "symbolic dims such as \"B\" or \"8*B*T\")", ic->op);
	for (int i = 0; i < r; i++)
		if (!sym[i] && dim[i] < min)
			return kf_ic_fail(ic, "'%s' shape[%d] = %lld is negative", ic->op, i, (long long)dim[i]);
	return r;
}

/* The product of dims[0..n) as a dim (a monomial when symbolic). */
static int64_t dims_product(kf_ctx *c, const int64_t *dim, int n)
{
	int64_t p = 1;
	for (int i = 0; i < n && p != KF_DIM_BAD; i++)
		p = kf_dim_mul(c, p, dim[i]);
	return p;
}

/* Symbolic dims are monomials, so the element counts of input and result
 * compare exactly, and -1 is their quotient when that is a monomial:
 * f32[B,T,768] to [-1, 768] gives f32[B*T,768], and f32[B*T,12,64] to
 * ["B", "T", 768] gives f32[B,T,768]. */
int kf_infer_reshape(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen)
{
	kf_ic ic = kf_ic_make(g, n, err, errlen);
	const kf_type *x = kf_ic_in(&ic, 0);
	int64_t dim[KF_MAX_RANK];
	bool sym[KF_MAX_RANK];
	int r = shape_attr(&ic, dim, sym, -1), minus = -1;
	kf_tstr tx, tt, ta, tb;
	if (r < 0)
		return -1;
	int64_t in = dims_product(g->ctx, x->dim, x->rank);
	if (in == KF_DIM_BAD)
		return kf_ic_fail(&ic, "'reshape' input %s is too large", kf_ops_tstr(g->ctx, x, &tx));
	for (int i = 0; i < r; i++) {
		if (sym[i])
			continue;
		if (dim[i] == 0) {
			if (i >= x->rank)
				return kf_ic_fail(&ic, "'reshape' shape[%d] = 0 copies a dim %s does not have", i,
						  kf_ops_tstr(g->ctx, x, &tx));
			dim[i] = x->dim[i];
		} else if (dim[i] == -1) {
			if (minus >= 0)
				return kf_ic_fail(&ic, "'reshape' shape has more than one -1");
			minus = i;
			dim[i] = 1;
		}
	}
	int64_t have = dims_product(g->ctx, dim, r);
	if (have == KF_DIM_BAD)
		return kf_ic_fail(&ic, "'reshape' shape is too large");
	if (minus >= 0) {
		int64_t q;
		if (have == 0 || !kf_dim_div(g->ctx, in, have, &q))
			return kf_ic_fail(&ic, "'reshape' cannot infer -1: %s has %s elements, not a multiple of %s",
					  kf_ops_tstr(g->ctx, x, &tx), kf_ops_dstr(g->ctx, in, &ta),
					  kf_ops_dstr(g->ctx, have, &tb));
		dim[minus] = q;
		have = in;
	}
	if (have != in) {
		kf_type t = kf_type_make(x->dtype, r, dim);
		return kf_ic_fail(&ic, "'reshape' from %s to %s changes the element count (%s vs %s)",
				  kf_ops_tstr(g->ctx, x, &tx), kf_ops_tstr(g->ctx, &t, &tt), kf_ops_dstr(g->ctx, in, &ta),
				  kf_ops_dstr(g->ctx, have, &tb));
	}
	out[0] = kf_type_make(x->dtype, r, dim);
	return 1;
}

int kf_infer_broadcast_to(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen)
{
	kf_ic ic = kf_ic_make(g, n, err, errlen);
	const kf_type *x = kf_ic_in(&ic, 0);
	int64_t dim[KF_MAX_RANK];
	bool sym[KF_MAX_RANK];
	int r = shape_attr(&ic, dim, sym, 0);
	if (r < 0)
		return -1;
	kf_type t = kf_type_make(x->dtype, r, dim);
	/* numpy broadcast_to is one way: every input dim is the target's or 1 */
	bool ok = x->rank <= r;
	for (int i = 1; ok && i <= x->rank; i++) {
		int64_t d = x->dim[x->rank - i];
		ok = d == 1 || d == dim[r - i];
	}
	if (!ok) {
		kf_tstr tx, tt;
		return kf_ic_fail(&ic, "'broadcast_to' cannot broadcast %s to %s", kf_ops_tstr(g->ctx, x, &tx),
				  kf_ops_tstr(g->ctx, &t, &tt));
	}
	out[0] = t;
	return 1;
}

int kf_infer_concat(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen)
{
	kf_ic ic = kf_ic_make(g, n, err, errlen);
	const kf_type *x = kf_ic_in(&ic, 0);
	uint32_t nin = kf_ic_nin(&ic);
	int64_t axis, sum = 0;
	int a;
	if (!kf_ic_need(&ic, "axis") || !kf_ic_int(&ic, "axis", 0, &axis))
		return -1;
	if (x->rank == 0)
		return kf_ic_fail(&ic, "'concat' operands must have rank >= 1");
	if (!kf_ic_axis(&ic, "axis", axis, x->rank, &a))
		return -1;
	for (uint32_t i = 0; i < nin; i++) {
		const kf_type *y = kf_ic_in(&ic, i);
		kf_tstr tx, ty;
		if (!kf_ic_same_dtype(&ic, x, y))
			return -1;
		bool ok = y->rank == x->rank;
		for (int d = 0; ok && d < x->rank; d++)
			ok = d == a || y->dim[d] == x->dim[d];
		if (!ok)
			return kf_ic_fail(&ic, "'concat' operand %u has type %s, which does not match %s outside axis %d",
					  i, kf_ops_tstr(g->ctx, y, &ty), kf_ops_tstr(g->ctx, x, &tx), a);
		/* a sum of symbols has no name; one operand passes its dim through */
		if (KF_IS_SYM(y->dim[a]) && nin > 1)
			return kf_ic_fail(&ic, "'concat' cannot join along symbolic dim %s (operand %u)",
					  kf_ops_dstr(g->ctx, y->dim[a], &tx), i);
		if (__builtin_add_overflow(sum, y->dim[a], &sum))
			return kf_ic_fail(&ic, "'concat' result dim overflows");
	}
	out[0] = *x;
	if (nin > 1)
		out[0].dim[a] = sum;
	return 1;
}

/* ONNX Slice on one dim: negative indices count from the end, then starts and
 * ends are clamped to the dim ([0,d] going forward, [-1,d-1] backward). */
static int64_t slice_len(int64_t d, int64_t start, int64_t end, int64_t step)
{
	if (start < 0)
		start += d;
	if (end < 0)
		end += d;
	/* ceil(len / step) as 1 + (len - 1) / step: no overflow for any step */
	if (step > 0) {
		start = start < 0 ? 0 : start > d ? d : start;
		end = end < 0 ? 0 : end > d ? d : end;
		return end > start ? 1 + (end - start - 1) / step : 0;
	}
	if (step == INT64_MIN)
		step = -INT64_MAX;
	start = start < 0 ? 0 : start > d - 1 ? d - 1 : start;
	end = end < -1 ? -1 : end > d - 1 ? d - 1 : end;
	return start > end ? 1 + (start - end - 1) / -step : 0;
}

/* Reads starts/ends/axes/steps; returns the count, or -1.  `ends` may
 * name symbolic dims (strings): their values come back in end[], sym[]
 * marking them. */
static int slice_attrs(kf_ic *ic, const kf_attrval **v, uint32_t *cnt, int64_t *end, bool *sym)
{
	static const char *const key[4] = {"starts", "ends", "axes", "steps"};
	bool present[4];
	if (!kf_ic_need(ic, "starts") || !kf_ic_need(ic, "ends"))
		return -1;
	for (int k = 0; k < 4; k++)
		if (k != 1 && !kf_ic_ints(ic, key[k], &v[k], &cnt[k], &present[k]))
			return -1;
	const kf_attrval *e = kf_attr_get(ic->g, ic->n, "ends");
	present[1] = true;
	cnt[1] = e->kind == KF_ATTR_LIST ? e->n : 0;
	if (e->kind != KF_ATTR_LIST || (cnt[1] <= KF_MAX_RANK &&
					kf_attr_dims(ic->g, ic->n, "ends", end, sym, KF_MAX_RANK) < 0))
		return kf_ic_fail(ic, "attribute 'ends' of 'slice' must be a list of ints (or strings naming "
				      "symbolic dims)");
	for (int k = 1; k < 4; k++)
		if (present[k] && cnt[k] != cnt[0])
			return kf_ic_fail(ic, "'slice' %s has %u entries but starts has %u", key[k], cnt[k], cnt[0]);
	return (int)cnt[0];
}

/* A symbolic end (a dim's name, as an exporter's x[:, :T] writes it) is
 * taken to be within the dim, which the interpreter checks when it runs:
 * from 0 with step 1 the result is that dim. */
int kf_infer_slice(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen)
{
	kf_ic ic = kf_ic_make(g, n, err, errlen);
	const kf_type *x = kf_ic_in(&ic, 0);
	const kf_attrval *v[4];
	uint32_t cnt[4];
	int64_t ends[KF_MAX_RANK];
	bool esym[KF_MAX_RANK], seen[KF_MAX_RANK] = {false};
	int k = slice_attrs(&ic, v, cnt, ends, esym);
	if (k < 0)
		return -1;
	if (k > KF_MAX_RANK)
		return kf_ic_fail(&ic, "'slice' has %d axes, at most %d", k, KF_MAX_RANK);
	out[0] = *x;
	for (int i = 0; i < k; i++) {
		int64_t ax = v[2] ? v[2][i].i : i, step = v[3] ? v[3][i].i : 1;
		int64_t start = v[0][i].i, end = ends[i];
		int a;
		kf_tstr td, te;
		if (!kf_ic_axis(&ic, "axis", ax, x->rank, &a))
			return -1;
		if (seen[a])
			return kf_ic_fail(&ic, "'slice' axis %d appears twice", a);
		seen[a] = true;
		if (step == 0)
			return kf_ic_fail(&ic, "'slice' step for axis %d is 0", a);
		int64_t d = x->dim[a];
		if (esym[i]) {
			if (start == 0 && step == 1) {
				out[0].dim[a] = end;
				continue;
			}
			return kf_ic_fail(&ic, "'slice' with symbolic end %s (axis %d) must start at 0 with step 1",
					  kf_ops_dstr(g->ctx, end, &te), a);
		}
		if (KF_IS_SYM(d)) {
			/* the whole dim (start 0, end past it, step 1), or a run
			 * of static length counted from the front or from the
			 * back (x[:, :4], x[:, -1]) on the premise that the dim
			 * is long enough, which the interpreter checks */
			bool big = end >= INT32_MAX;
			int64_t len = -1;
			if (step == 1 && start == 0 && big)
				continue;
			if (step > 0 && start >= 0 && !big && end >= 0)
				len = end > start ? end - start : 0;
			else if (step > 0 && start < 0 && (big || end < 0) && start > INT64_MIN)
				len = (big ? 0 : end) > start ? (big ? 0 : end) - start : 0;
			if (len < 0)
				return kf_ic_fail(&ic, "'slice' cannot slice symbolic dim %s (axis %d) but whole or by a "
						       "static count from one end", kf_ops_dstr(g->ctx, d, &td), a);
			out[0].dim[a] = len ? 1 + (len - 1) / step : 0;
			continue;
		}
		out[0].dim[a] = slice_len(d, start, end, step);
	}
	return 1;
}

int kf_infer_split(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen)
{
	kf_ic ic = kf_ic_make(g, n, err, errlen);
	const kf_type *x = kf_ic_in(&ic, 0);
	uint32_t nres = kf_N(g, n)->nres, ns;
	const kf_attrval *sizes;
	bool present;
	int64_t axis, sum = 0;
	int a;
	kf_tstr tx, td;
	if (!kf_ic_int(&ic, "axis", 0, &axis) || !kf_ic_ints(&ic, "sizes", &sizes, &ns, &present))
		return -1;
	if (!kf_ic_axis(&ic, "axis", axis, x->rank, &a))
		return -1;
	if (nres == 0)
		return kf_ic_fail(&ic, "'split' needs at least one result");
	if (nres > (uint32_t)maxout)
		return kf_ic_fail(&ic, "'split' has %u results, room for %d", nres, maxout);
	int64_t d = x->dim[a];
	if (KF_IS_SYM(d) && nres > 1)
		return kf_ic_fail(&ic, "'split' cannot split symbolic dim %s (axis %d)", kf_ops_dstr(g->ctx, d, &td), a);
	if (present && ns != nres)
		return kf_ic_fail(&ic, "'split' has %u results but %u sizes", nres, ns);
	if (!present && !KF_IS_SYM(d) && d % nres)
		return kf_ic_fail(&ic, "'split' of %s into %u equal parts: dim %lld (axis %d) does not divide",
				  kf_ops_tstr(g->ctx, x, &tx), nres, (long long)d, a);
	for (uint32_t i = 0; i < nres; i++) {
		out[i] = *x;
		if (KF_IS_SYM(d))
			continue;
		int64_t s = present ? sizes[i].i : d / nres;
		if (s < 0)
			return kf_ic_fail(&ic, "'split' size %u is negative (%lld)", i, (long long)s);
		out[i].dim[a] = s;
		if (__builtin_add_overflow(sum, s, &sum))
			return kf_ic_fail(&ic, "'split' sizes overflow");
	}
	if (present && !KF_IS_SYM(d) && sum != d)
		return kf_ic_fail(&ic, "'split' sizes sum to %lld, but dim %d of %s is %lld", (long long)sum, a,
				  kf_ops_tstr(g->ctx, x, &tx), (long long)d);
	return (int)nres;
}

/* A fusion's results are what its body yields; its body's arguments take the
 * operands' types one for one. */
int kf_infer_fusion(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen)
{
	kf_ic ic = kf_ic_make(g, n, err, errlen);
	const kf_node *nd = kf_N(g, n);
	const char *kind;
	kf_tstr ta, tb;
	if (!kf_ic_str(&ic, "kind", "", &kind))
		return -1;
	if (nd->body == KF_NONE || nd->body >= g->nblk)
		return kf_ic_fail(&ic, "'fusion' has no body");
	const kf_block *b = &g->blk[nd->body];
	if (b->narg != nd->nin)
		return kf_ic_fail(&ic, "'fusion' body takes %u arguments, but the node has %u operands", b->narg,
				  nd->nin);
	for (uint32_t i = 0; i < nd->nin; i++) {
		kf_tid at = kf_V(g, b->arg[i])->type, ot = kf_V(g, kf_in(g, n, i))->type;
		if (at != ot)
			return kf_ic_fail(&ic, "'fusion' body argument %u has type %s, but operand %u has type %s", i,
					  kf_ops_tstr(g->ctx, kf_type_get(g->ctx, at), &ta), i,
					  kf_ops_tstr(g->ctx, kf_type_get(g->ctx, ot), &tb));
	}
	kf_nid y = b->last;
	if (y == KF_NONE || y >= g->nnode || kf_N(g, y)->op != KF_OP_YIELD)
		return kf_ic_fail(&ic, "'fusion' body does not end with 'yield'");
	const kf_node *yn = kf_N(g, y);
	if (yn->nin > (uint32_t)maxout)
		return kf_ic_fail(&ic, "'fusion' body yields %u values, room for %d", yn->nin, maxout);
	for (uint32_t i = 0; i < yn->nin; i++) {
		kf_vid v = kf_in(g, y, i);
		if (v >= g->nval)
			return kf_ic_fail(&ic, "'fusion' yield operand %u is not a value", i);
		out[i] = *kf_vtype(g, v);
	}
	return (int)yn->nin;
}
