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

/* Reads a shape attribute (`shape`) of at most KF_MAX_RANK entries. */
static int shape_attr(kf_ic *ic, int64_t *dim)
{
	const kf_attrval *s;
	uint32_t ns;
	bool present;
	if (!kf_ic_need(ic, "shape") || !kf_ic_ints(ic, "shape", &s, &ns, &present))
		return -1;
	if (ns > KF_MAX_RANK)
		return kf_ic_fail(ic, "'%s' shape has %u dims, at most %d are supported", ic->op, ns, KF_MAX_RANK);
	for (uint32_t i = 0; i < ns; i++)
		dim[i] = s[i].i;
	return (int)ns;
}

/* Product of static dims; false on overflow. */
static bool mul_ok(int64_t *acc, int64_t d)
{
	return !__builtin_mul_overflow(*acc, d, acc) && *acc <= (INT64_C(1) << 62);
}

/* The symbolic dims of x not copied through a 0 at the same position of the
 * new shape: they would have to be absorbed by -1 or re-expressed, which we
 * cannot do, so reshape refuses them. */
static int reshape_symbols(kf_ic *ic, const kf_type *x, const int64_t *dim, int r)
{
	for (int i = 0; i < x->rank; i++) {
		if (!KF_IS_SYM(x->dim[i]) || (i < r && dim[i] == 0))
			continue;
		kf_tstr ts, tx;
		return kf_ic_fail(ic, "'reshape' of %s must keep symbolic dim %s in place (write 0 at index %d)",
				  kf_ops_tstr(ic->g->ctx, x, &tx), kf_ops_dstr(ic->g->ctx, x->dim[i], &ts), i);
	}
	return 0;
}

int kf_infer_reshape(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen)
{
	kf_ic ic = kf_ic_make(g, n, err, errlen);
	const kf_type *x = kf_ic_in(&ic, 0);
	int64_t dim[KF_MAX_RANK], in = 1, have = 1;
	int r = shape_attr(&ic, dim), minus = -1;
	kf_tstr tx;
	if (r < 0 || reshape_symbols(&ic, x, dim, r) < 0)
		return -1;
	for (int i = 0; i < x->rank; i++)
		if (!KF_IS_SYM(x->dim[i]) && !mul_ok(&in, x->dim[i]))
			return kf_ic_fail(&ic, "'reshape' input %s is too large", kf_ops_tstr(g->ctx, x, &tx));
	for (int i = 0; i < r; i++) {
		if (dim[i] == 0) {
			if (i >= x->rank)
				return kf_ic_fail(&ic, "'reshape' shape[%d] = 0 copies a dim %s does not have", i,
						  kf_ops_tstr(g->ctx, x, &tx));
			dim[i] = x->dim[i];
		} else if (dim[i] == -1) {
			if (minus >= 0)
				return kf_ic_fail(&ic, "'reshape' shape has more than one -1");
			minus = i;
			continue;
		} else if (dim[i] < 0)
			return kf_ic_fail(&ic, "'reshape' shape[%d] = %lld is negative", i, (long long)dim[i]);
		if (!KF_IS_SYM(dim[i]) && !mul_ok(&have, dim[i]))
			return kf_ic_fail(&ic, "'reshape' shape is too large");
	}
	if (minus >= 0) {
		if (have == 0 || in % have)
			return kf_ic_fail(&ic, "'reshape' cannot infer -1: %s has %lld elements, not a multiple of %lld",
					  kf_ops_tstr(g->ctx, x, &tx), (long long)in, (long long)have);
		dim[minus] = in / have;
		have = in;
	}
	if (have != in) {
		kf_type t = kf_type_make(x->dtype, r, dim);
		kf_tstr tt;
		return kf_ic_fail(&ic, "'reshape' from %s to %s changes the element count (%lld vs %lld)",
				  kf_ops_tstr(g->ctx, x, &tx), kf_ops_tstr(g->ctx, &t, &tt), (long long)in,
				  (long long)have);
	}
	out[0] = kf_type_make(x->dtype, r, dim);
	return 1;
}

int kf_infer_broadcast_to(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen)
{
	kf_ic ic = kf_ic_make(g, n, err, errlen);
	const kf_type *x = kf_ic_in(&ic, 0);
	int64_t dim[KF_MAX_RANK];
	int r = shape_attr(&ic, dim);
	if (r < 0)
		return -1;
	for (int i = 0; i < r; i++)
		if (dim[i] < 0)
			return kf_ic_fail(&ic, "'broadcast_to' shape[%d] = %lld is negative", i, (long long)dim[i]);
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

/* Reads starts/ends/axes/steps; returns the count, or -1. */
static int slice_attrs(kf_ic *ic, const kf_attrval **v, uint32_t *cnt)
{
	static const char *const key[4] = {"starts", "ends", "axes", "steps"};
	bool present[4];
	if (!kf_ic_need(ic, "starts") || !kf_ic_need(ic, "ends"))
		return -1;
	for (int k = 0; k < 4; k++)
		if (!kf_ic_ints(ic, key[k], &v[k], &cnt[k], &present[k]))
			return -1;
	for (int k = 1; k < 4; k++)
		if (present[k] && cnt[k] != cnt[0])
			return kf_ic_fail(ic, "'slice' %s has %u entries but starts has %u", key[k], cnt[k], cnt[0]);
	return (int)cnt[0];
}

int kf_infer_slice(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen)
{
	kf_ic ic = kf_ic_make(g, n, err, errlen);
	const kf_type *x = kf_ic_in(&ic, 0);
	const kf_attrval *v[4];
	uint32_t cnt[4];
	bool seen[KF_MAX_RANK] = {false};
	int k = slice_attrs(&ic, v, cnt);
	if (k < 0)
		return -1;
	out[0] = *x;
	for (int i = 0; i < k; i++) {
		int64_t ax = v[2] ? v[2][i].i : i, step = v[3] ? v[3][i].i : 1;
		int64_t start = v[0][i].i, end = v[1][i].i;
		int a;
		kf_tstr td;
		if (!kf_ic_axis(&ic, "axis", ax, x->rank, &a))
			return -1;
		if (seen[a])
			return kf_ic_fail(&ic, "'slice' axis %d appears twice", a);
		seen[a] = true;
		if (step == 0)
			return kf_ic_fail(&ic, "'slice' step for axis %d is 0", a);
		int64_t d = x->dim[a];
		if (KF_IS_SYM(d)) {
			/* only the whole dim is certain: start 0, end past it, step 1 */
			if (start == 0 && end >= INT32_MAX && step == 1)
				continue;
			return kf_ic_fail(&ic, "'slice' cannot slice symbolic dim %s (axis %d) except whole",
					  kf_ops_dstr(g->ctx, d, &td), a);
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
