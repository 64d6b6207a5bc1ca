/* cpu_infer.c: result shapes at run time, from the concrete input shapes.
 *
 * Declared types may hold symbolic dims; the interpreter binds symbols from
 * the inputs and asks here for each node's actual result shape, then checks
 * it against the declared type.  This is deliberately an independent
 * implementation of the op shape rules (the registry's infer functions work
 * on IR types): the oracle should not trust what it checks.  Ops without a
 * rule here (const, fusion, plugin ops) keep their declared type with the
 * known symbols substituted.
 */
#include <math.h>
#include <string.h>
#include "cpu_ops.h"
#include "interp.h"

static void set_dims(kf_type *t, int rank, const int64_t *dim)
{
	t->rank = (uint8_t)rank;
	memset(t->dim, 0, sizeof t->dim);
	memcpy(t->dim, dim, sizeof(int64_t) * rank);
}

static int bcast(const kf_tensor *in, int nin, kf_type *out, char *err, size_t errlen)
{
	int r = in[0].rank;
	int64_t d[KF_MAX_RANK];
	memcpy(d, in[0].dim, sizeof(int64_t) * r);
	for (int i = 1; i < nin; i++) {
		int64_t t[KF_MAX_RANK];
		if (kf_rt_bcast_shape(r, d, in[i].rank, in[i].dim, &r, t) != 0) {
			char a[96], b[96];
			return kf_rt_fail(err, errlen, "shapes %s and %s do not broadcast",
					  kf_rt_shape_str(a, sizeof a, r, d),
					  kf_rt_shape_str(b, sizeof b, in[i].rank, in[i].dim));
		}
		memcpy(d, t, sizeof(int64_t) * r);
	}
	set_dims(out, r, d);
	return 0;
}

static int reduce_shape(kf_graph *g, kf_nid n, const kf_tensor *x, kf_type *out, char *err, size_t errlen)
{
	bool red[KF_MAX_RANK] = {0}, keep = kf_attr_bool(g, n, "keepdims", true);
	int64_t axes[KF_MAX_RANK], d[KF_MAX_RANK];
	int na = kf_attr_ints(g, n, "axes", axes, KF_MAX_RANK), r = 0;
	for (int i = 0; i < (na <= 0 ? x->rank : na); i++) {
		int a = na <= 0 ? i : kf_rt_axis(axes[i], x->rank);
		if (a < 0)
			return kf_rt_fail(err, errlen, "axis %lld out of range for rank %d",
					  (long long)axes[i], x->rank);
		red[a] = true;
	}
	for (int i = 0; i < x->rank; i++)
		if (!red[i] || keep)
			d[r++] = red[i] ? 1 : x->dim[i];
	set_dims(out, r, d);
	return 0;
}

static int matmul_shape(const kf_tensor *a, const kf_tensor *b, kf_type *out, char *err, size_t errlen)
{
	if (a->rank < 1 || b->rank < 1)
		return kf_rt_fail(err, errlen, "matmul operands must have rank >= 1");
	int64_t K = a->dim[a->rank - 1], Kb = b->rank > 1 ? b->dim[b->rank - 2] : b->dim[0];
	if (K != Kb)
		return kf_rt_fail(err, errlen, "inner dims differ (%lld vs %lld)", (long long)K, (long long)Kb);
	int ra = a->rank > 2 ? a->rank - 2 : 0, rb = b->rank > 2 ? b->rank - 2 : 0, r;
	int64_t d[KF_MAX_RANK + 2];
	if (kf_rt_bcast_shape(ra, a->dim, rb, b->dim, &r, d) != 0)
		return kf_rt_fail(err, errlen, "batch dims do not broadcast");
	if (a->rank > 1)
		d[r++] = a->dim[a->rank - 2];
	if (b->rank > 1)
		d[r++] = b->dim[b->rank - 1];
	if (r > KF_MAX_RANK)
		return kf_rt_fail(err, errlen, "result rank above %d", KF_MAX_RANK);
	set_dims(out, r, d);
	return 0;
}

static int reshape_shape(kf_graph *g, kf_nid n, const kf_tensor *x, kf_type *out, char *err, size_t errlen)
{
	int64_t s[KF_MAX_RANK];
	int r = kf_attr_ints(g, n, "shape", s, KF_MAX_RANK), infer = -1;
	if (r < 0)
		return 0; /* no attribute: the declared type says it */
	int64_t known = 1, numel = kf_tensor_numel(x);
	for (int i = 0; i < r; i++) {
		if (s[i] == 0 && i < x->rank) /* ONNX: 0 copies the input's dim */
			s[i] = x->dim[i];
		if (s[i] == -1) {
			if (infer >= 0)
				return kf_rt_fail(err, errlen, "shape has more than one -1");
			infer = i;
		} else if (s[i] < 0) {
			return kf_rt_fail(err, errlen, "shape entry %lld is negative", (long long)s[i]);
		} else {
			known *= s[i];
		}
	}
	if (infer >= 0) {
		if (known == 0 || numel % known != 0)
			return kf_rt_fail(err, errlen, "cannot infer -1: %lld elements into blocks of %lld",
					  (long long)numel, (long long)known);
		s[infer] = numel / known;
	} else if (known != numel) {
		return kf_rt_fail(err, errlen, "cannot reshape %lld elements into %lld", (long long)numel,
				  (long long)known);
	}
	set_dims(out, r, s);
	return 0;
}

static int bcast_to_shape(kf_graph *g, kf_nid n, const kf_tensor *x, kf_type *out, char *err, size_t errlen)
{
	int64_t s[KF_MAX_RANK];
	int r = kf_attr_ints(g, n, "shape", s, KF_MAX_RANK);
	if (r < 0) { /* the declared type is the target */
		r = out->rank;
		memcpy(s, out->dim, sizeof(int64_t) * r);
	}
	bool ok = x->rank <= r;
	for (int i = 0; ok && i < x->rank; i++) {
		int64_t t = s[r - x->rank + i];
		ok = x->dim[i] == 1 || x->dim[i] == t;
	}
	if (!ok) {
		char a[96], b[96];
		return kf_rt_fail(err, errlen, "%s does not broadcast to %s",
				  kf_rt_shape_str(a, sizeof a, x->rank, x->dim), kf_rt_shape_str(b, sizeof b, r, s));
	}
	set_dims(out, r, s);
	return 0;
}

static int concat_shape(kf_graph *g, kf_nid n, const kf_tensor *in, int nin, kf_type *out, char *err,
			size_t errlen)
{
	int r = in[0].rank, axis = kf_rt_axis(kf_attr_int(g, n, "axis", 0), r);
	if (axis < 0)
		return kf_rt_fail(err, errlen, "axis out of range for rank %d", r);
	int64_t d[KF_MAX_RANK];
	memcpy(d, in[0].dim, sizeof(int64_t) * r);
	for (int i = 1; i < nin; i++) {
		bool ok = in[i].rank == r;
		for (int k = 0; ok && k < r; k++)
			ok = k == axis || in[i].dim[k] == d[k];
		if (!ok) {
			char a[96], b[96];
			return kf_rt_fail(err, errlen, "operand %d of shape %s does not match %s off axis %d", i,
					  kf_rt_shape_str(a, sizeof a, in[i].rank, in[i].dim),
					  kf_rt_shape_str(b, sizeof b, r, in[0].dim), axis);
		}
		d[axis] += in[i].dim[axis];
	}
	set_dims(out, r, d);
	return 0;
}

int kf_rt_slice_geom(kf_graph *g, kf_nid n, const kf_tensor *x, const kf_type *res, int64_t *start,
		     int64_t *step, int64_t *len, char *err, size_t errlen)
{
	int64_t st[KF_MAX_RANK], en[KF_MAX_RANK], ax[KF_MAX_RANK], sp[KF_MAX_RANK];
	bool esym[KF_MAX_RANK];
	int ns = kf_attr_ints(g, n, "starts", st, KF_MAX_RANK), ne = kf_attr_dims(g, n, "ends", en, esym, KF_MAX_RANK);
	int na = kf_attr_ints(g, n, "axes", ax, KF_MAX_RANK), np = kf_attr_ints(g, n, "steps", sp, KF_MAX_RANK);
	if (ns < 0 || ne != ns || (na >= 0 && na != ns) || (np >= 0 && np != ns))
		return kf_rt_fail(err, errlen, "starts, ends, axes and steps must be int lists of one length");
	for (int d = 0; d < x->rank; d++) {
		start[d] = 0;
		step[d] = 1;
		len[d] = x->dim[d];
	}
	for (int i = 0; i < ns; i++) {
		int a = kf_rt_axis(na >= 0 ? ax[i] : i, x->rank);
		int64_t s = st[i], e = en[i], k = np >= 0 ? sp[i] : 1, d = x->rank > 0 && a >= 0 ? x->dim[a] : 0;
		if (a < 0)
			return kf_rt_fail(err, errlen, "slice axis %lld out of range for rank %d",
					  (long long)(na >= 0 ? ax[i] : i), x->rank);
		if (k == 0)
			return kf_rt_fail(err, errlen, "slice step is 0");
		if (i < KF_MAX_RANK && esym[i]) {
			/* a symbolic end: the result's dim, as bound (inference
			 * allows it only from 0 with step 1) */
			if (!res || KF_IS_SYM(res->dim[a]))
				return kf_rt_fail(err, errlen, "the symbolic end of axis %d is not bound", a);
			e = res->dim[a];
			if (e > d)
				return kf_rt_fail(err, errlen, "slice end %lld (a symbolic dim) is past dim %d's %lld",
						  (long long)e, a, (long long)d);
		}
		/* ONNX clamping: negatives count from the end, then clamp to
		 * [0, d] going forward and [-1, d-1] going backward. */
		if (s < 0)
			s += d;
		if (e < 0)
			e += d;
		if (k > 0) {
			s = s < 0 ? 0 : s > d ? d : s;
			e = e < 0 ? 0 : e > d ? d : e;
		} else {
			s = s < 0 ? 0 : s > d - 1 ? d - 1 : s;
			e = e < -1 ? -1 : e > d - 1 ? d - 1 : e;
		}
		/* written so that no step (INT64_MIN included) overflows */
		int64_t l = k > 0 ? (e > s ? (e - s - 1) / k + 1 : 0)
				  : (s > e ? (k == INT64_MIN ? 0 : (s - e - 1) / -k) + 1 : 0);
		start[a] = s;
		step[a] = k;
		len[a] = l;
	}
	return 0;
}

int kf_rt_split_sizes(kf_graph *g, kf_nid n, const kf_tensor *x, int nres, int64_t *sizes, char *err,
		      size_t errlen)
{
	int axis = kf_rt_axis(kf_attr_int(g, n, "axis", 0), x->rank);
	if (axis < 0)
		return kf_rt_fail(err, errlen, "axis out of range for rank %d", x->rank);
	int64_t d = x->dim[axis], sum = 0;
	int ns = kf_attr_ints(g, n, "sizes", sizes, nres);
	if (ns >= 0 && ns != nres)
		return kf_rt_fail(err, errlen, "sizes has %d entries for %d results", ns, nres);
	if (ns < 0) { /* ONNX 18: equal parts, the last one smaller if need be */
		int64_t part = (d + nres - 1) / nres;
		for (int i = 0; i < nres; i++) {
			sizes[i] = d - sum < part ? d - sum : part;
			sum += sizes[i];
		}
	} else {
		for (int i = 0; i < nres; i++) {
			if (sizes[i] < 0)
				return kf_rt_fail(err, errlen, "split size %lld is negative", (long long)sizes[i]);
			sum += sizes[i];
		}
	}
	if (sum != d)
		return kf_rt_fail(err, errlen, "split sizes add up to %lld, but the axis has %lld",
				  (long long)sum, (long long)d);
	return axis;
}

static int gemm_shape(kf_graph *g, kf_nid n, const kf_tensor *in, kf_type *out, char *err, size_t errlen)
{
	if (in[0].rank != 2 || in[1].rank != 2)
		return kf_rt_fail(err, errlen, "gemm operands must be 2-D");
	bool ta = kf_attr_int(g, n, "trans_a", 0) != 0, tb = kf_attr_int(g, n, "trans_b", 0) != 0;
	if (in[0].dim[!ta] != in[1].dim[tb])
		return kf_rt_fail(err, errlen, "inner dims differ (%lld vs %lld)",
				  (long long)in[0].dim[!ta], (long long)in[1].dim[tb]);
	int64_t d[2] = {in[0].dim[ta], in[1].dim[!tb]};
	set_dims(out, 2, d);
	return 0;
}

static int gather_shape(kf_graph *g, kf_nid n, const kf_tensor *in, kf_type *out, char *err, size_t errlen)
{
	const kf_tensor *x = &in[0], *ix = &in[1];
	int a = kf_rt_axis(kf_attr_int(g, n, "axis", 0), x->rank), r = x->rank - 1 + ix->rank;
	if (a < 0 || r > KF_MAX_RANK)
		return kf_rt_fail(err, errlen, "gather axis out of range, or result rank above %d", KF_MAX_RANK);
	int64_t d[KF_MAX_RANK];
	int k = 0;
	for (int i = 0; i < x->rank; i++) {
		if (i != a) {
			d[k++] = x->dim[i];
			continue;
		}
		for (int j = 0; j < ix->rank; j++)
			d[k++] = ix->dim[j];
	}
	set_dims(out, r, d);
	return 0;
}

static int pad_shape(kf_graph *g, kf_nid n, const kf_tensor *x, kf_type *out, char *err, size_t errlen)
{
	int64_t p[2 * KF_MAX_RANK], d[KF_MAX_RANK];
	if (kf_attr_ints(g, n, "pads", p, 2 * KF_MAX_RANK) != 2 * x->rank)
		return kf_rt_fail(err, errlen, "pads must hold 2 ints per dim (rank %d)", x->rank);
	for (int i = 0; i < x->rank; i++) {
		d[i] = x->dim[i] + p[i] + p[i + x->rank];
		if (d[i] < 0)
			return kf_rt_fail(err, errlen, "pads crop axis %d below nothing", i);
	}
	set_dims(out, x->rank, d);
	return 0;
}

static int resize_shape(kf_graph *g, kf_nid n, const kf_tensor *x, kf_type *out, char *err, size_t errlen)
{
	const kf_attrval *sc = kf_attr_get(g, n, "scales");
	int64_t sz[KF_MAX_RANK], d[KF_MAX_RANK];
	bool sym[KF_MAX_RANK];
	int ns = kf_attr_dims(g, n, "sizes", sz, sym, KF_MAX_RANK);
	if (!sc || sc->kind != KF_ATTR_LIST || sc->n != (uint32_t)x->rank || (ns >= 0 && ns != x->rank))
		return kf_rt_fail(err, errlen, "scales (and sizes) must have one entry per dim");
	for (int i = 0; i < x->rank; i++) {
		double s = sc->list[i].kind == KF_ATTR_FLOAT ? sc->list[i].f : (double)sc->list[i].i;
		/* a symbolic size keeps the dim (inference allows nothing else) */
		d[i] = ns >= 0 ? (sym[i] ? x->dim[i] : sz[i]) : (int64_t)floor((double)x->dim[i] * s);
	}
	set_dims(out, x->rank, d);
	return 0;
}

int kf_rt_shape(kf_graph *g, kf_nid n, const kf_tensor *in, int nin, kf_type *out, int nout,
		char *err, size_t errlen)
{
	int op = kf_N(g, n)->op;
	/* generators and ops without rules: their declared type, symbols bound */
	if (op >= KF_NBUILTIN || op == KF_OP_CONST || op == KF_OP_FUSION || op == KF_OP_IOTA || op == KF_OP_OPAQUE)
		return 0;
	const kf_opinfo *info = kf_op(g->ctx, op);
	if (nin < info->min_in || nout < 1)
		return kf_rt_fail(err, errlen, "%d operands, %d results: malformed node", nin, nout);
	switch (op) {
	case KF_OP_ADD: case KF_OP_SUB: case KF_OP_MUL: case KF_OP_DIV: case KF_OP_POW:
	case KF_OP_MAX: case KF_OP_MIN: case KF_OP_WHERE:
	case KF_OP_EQ: case KF_OP_NE: case KF_OP_LT: case KF_OP_LE: case KF_OP_GT: case KF_OP_GE:
	case KF_OP_AND: case KF_OP_OR:
		return bcast(in, nin, &out[0], err, errlen);
	case KF_OP_REDUCE_SUM: case KF_OP_REDUCE_MEAN: case KF_OP_REDUCE_MAX: case KF_OP_REDUCE_MIN:
		return reduce_shape(g, n, &in[0], &out[0], err, errlen);
	case KF_OP_MATMUL:
		return matmul_shape(&in[0], &in[1], &out[0], err, errlen);
	case KF_OP_GEMM:
		return gemm_shape(g, n, in, &out[0], err, errlen);
	case KF_OP_TRANSPOSE: {
		int64_t perm[KF_MAX_RANK], d[KF_MAX_RANK];
		int np = kf_attr_ints(g, n, "perm", perm, KF_MAX_RANK), r = in[0].rank;
		if (np >= 0 && np != r)
			return kf_rt_fail(err, errlen, "perm has %d entries for rank %d", np, r);
		for (int i = 0; i < r; i++) {
			int p = np < 0 ? r - 1 - i : kf_rt_axis(perm[i], r);
			if (p < 0)
				return kf_rt_fail(err, errlen, "perm entry %lld out of range", (long long)perm[i]);
			d[i] = in[0].dim[p];
		}
		set_dims(&out[0], r, d);
		return 0;
	}
	case KF_OP_RESHAPE:
		return reshape_shape(g, n, &in[0], &out[0], err, errlen);
	case KF_OP_BROADCAST_TO:
		return bcast_to_shape(g, n, &in[0], &out[0], err, errlen);
	case KF_OP_CONCAT:
		return concat_shape(g, n, in, nin, &out[0], err, errlen);
	case KF_OP_SLICE: {
		int64_t s[KF_MAX_RANK], k[KF_MAX_RANK], l[KF_MAX_RANK];
		if (kf_rt_slice_geom(g, n, &in[0], &out[0], s, k, l, err, errlen) != 0)
			return -1;
		set_dims(&out[0], in[0].rank, l);
		return 0;
	}
	case KF_OP_SPLIT: {
		int64_t sizes[256];
		if (nout > 256)
			return kf_rt_fail(err, errlen, "split into more than 256 parts");
		int axis = kf_rt_split_sizes(g, n, &in[0], nout, sizes, err, errlen);
		if (axis < 0)
			return -1;
		for (int i = 0; i < nout; i++) {
			set_dims(&out[i], in[0].rank, in[0].dim);
			out[i].dim[axis] = sizes[i];
		}
		return 0;
	}
	case KF_OP_CONV: case KF_OP_CONV_TRANSPOSE: case KF_OP_MAX_POOL: case KF_OP_AVG_POOL: {
		kf_rt_win w;
		int64_t d[KF_MAX_RANK];
		if (kf_rt_win_geom(g, n, in, nin, &w, d, err, errlen) != 0)
			return -1;
		set_dims(&out[0], in[0].rank, d);
		return 0;
	}
	case KF_OP_GATHER:
		return gather_shape(g, n, in, &out[0], err, errlen);
	case KF_OP_GATHER_ELEMENTS: /* the indices' shape */
		set_dims(&out[0], in[1].rank, in[1].dim);
		return 0;
	case KF_OP_PAD:
		return pad_shape(g, n, &in[0], &out[0], err, errlen);
	case KF_OP_RESIZE:
		return resize_shape(g, n, &in[0], &out[0], err, errlen);
	case KF_OP_SHAPE: {
		int64_t lo = kf_attr_int(g, n, "start", 0), hi = kf_attr_int(g, n, "end", in[0].rank);
		kf_shape_range(in[0].rank, &lo, &hi);
		int64_t len = hi - lo;
		set_dims(&out[0], 1, &len);
		return 0;
	}
	default: /* unary, cast, not, softmax, layer_norm: x's shape */
		set_dims(&out[0], in[0].rank, in[0].dim);
		return 0;
	}
}
