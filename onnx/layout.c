/* layout.c: the ONNX ops that move data or make shapes: Reshape, Flatten,
 * Squeeze, Unsqueeze, Expand, Slice, Shape, Size, ConstantOfShape, Range,
 * Gather, Trilu.  Sizes may come from shape values (shapes.c), so graphs
 * with dynamic axes import with symbolic dims. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "passes.h"
#include "tensor.h"
#include "tr.h"

int kf_tr_Reshape(kf_imp *I, kf_np *np, kf_vid *out, int op)
{
	int64_t shape[KF_MAX_RANK + 1];
	bool sym[KF_MAX_RANK + 1], present;
	int n = kf_tr_dims_from(I, np, 1, I->opset < 5 ? "shape" : NULL, shape, sym, KF_MAX_RANK, &present);
	if (n < 0)
		return -1;
	for (int i = 0; i < n; i++) {
		if (kf_imp_attr_int(np, "allowzero", 0) && !sym[i] && shape[i] == 0)
			return kf_imp_fail(I, "allowzero = 1 with a zero in the shape is not supported");
		if (!sym[i] && shape[i] < -1)
			return kf_imp_fail(I, "shape[%d] = %lld is negative", i, (long long)shape[i]);
	}
	return (out[0] = kf_tr_reshape(I, kf_imp_input(I, np, 0), shape, n)) != KF_NONE;
}

int kf_tr_Flatten(kf_imp *I, kf_np *np, kf_vid *out, int op)
{
	kf_vid x = kf_imp_input(I, np, 0);
	if (x == KF_NONE)
		return -1;
	const kf_type *t = kf_tr_ty(I, x);
	int64_t axis = kf_imp_attr_int(np, "axis", 1);
	if (axis < 0)
		axis += t->rank;
	if (axis < 0 || axis > t->rank)
		return kf_imp_fail(I, "axis %lld is out of range for rank %d", (long long)kf_imp_attr_int(np, "axis", 1),
				   t->rank);
	int64_t s[2] = {1, 1};
	for (int i = 0; i < t->rank; i++)
		s[i >= axis] = kf_dim_mul(I->c, s[i >= axis], t->dim[i]);
	if (s[0] == KF_DIM_BAD || s[1] == KF_DIM_BAD)
		return kf_imp_fail(I, "the flattened dims are out of range");
	return (out[0] = kf_tr_reshape(I, x, s, 2)) != KF_NONE;
}

/* Squeeze (unsq 0) and Unsqueeze (1): a reshape; symbolic dims pass. */
int kf_tr_Squeeze(kf_imp *I, kf_np *np, kf_vid *out, int unsq)
{
	kf_vid x = kf_imp_input(I, np, 0);
	int64_t axes[KF_MAX_RANK];
	bool present;
	int na = kf_tr_ints_from(I, np, 1, I->opset < 13 ? "axes" : NULL, axes, KF_MAX_RANK, &present);
	if (x == KF_NONE || na < 0)
		return -1;
	const kf_type *t = kf_tr_ty(I, x);
	int64_t s[KF_MAX_RANK];
	int r = 0;
	if (unsq) {
		int outr = t->rank + na;
		bool ins[KF_MAX_RANK * 2] = {0};
		if (outr > KF_MAX_RANK)
			return kf_imp_fail(I, "result rank %d is over kfuse's limit of %d", outr, KF_MAX_RANK);
		for (int i = 0; i < na; i++) {
			int64_t a = axes[i] < 0 ? axes[i] + outr : axes[i];
			if (a < 0 || a >= outr || ins[a])
				return kf_imp_fail(I, "axis %lld is out of range or repeated", (long long)axes[i]);
			ins[a] = true;
		}
		for (int i = 0, j = 0; i < outr; i++)
			s[r++] = ins[i] ? 1 : t->dim[j++];
	} else {
		bool drop[KF_MAX_RANK] = {0};
		for (int i = 0; i < na; i++) {
			int64_t a = axes[i] < 0 ? axes[i] + t->rank : axes[i];
			if (a < 0 || a >= t->rank || t->dim[a] != 1)
				return kf_imp_fail(I, "cannot squeeze axis %lld of a dim that is not 1", (long long)axes[i]);
			drop[a] = true;
		}
		/* without axes every dim of 1 goes; a symbolic dim might be 1 at
		 * run time, which the exporter's graph would then squeeze too */
		for (int i = 0; i < t->rank; i++)
			if (!(na ? drop[i] : t->dim[i] == 1))
				s[r++] = t->dim[i];
	}
	return (out[0] = kf_tr_reshape(I, x, s, r)) != KF_NONE;
}

int kf_tr_Expand(kf_imp *I, kf_np *np, kf_vid *out, int op)
{
	kf_vid x = kf_imp_input(I, np, 0);
	int64_t shape[KF_MAX_RANK];
	bool sym[KF_MAX_RANK], present;
	int n = kf_tr_dims_from(I, np, 1, NULL, shape, sym, KF_MAX_RANK, &present);
	if (x == KF_NONE || n < 0)
		return -1;
	/* Expand broadcasts both ways: the result is the broadcast of both shapes */
	const kf_type *t = kf_tr_ty(I, x);
	int r = n > t->rank ? n : t->rank;
	int64_t s[KF_MAX_RANK];
	for (int i = 0; i < r; i++) {
		int k = i - (r - n), j = i - (r - t->rank);
		int64_t a = k >= 0 ? shape[k] : 1, b = j >= 0 ? t->dim[j] : 1;
		if (k >= 0 && !sym[k] && a < 0)
			return kf_imp_fail(I, "shape[%d] = %lld is negative", k, (long long)a);
		s[i] = a == 1 ? b : a;
	}
	kf_attrval items[KF_MAX_RANK];
	kf_attr a = kf_tr_dims(I, "shape", items, s, r);
	return (out[0] = kf_imp_op(I, KF_OP_BROADCAST_TO, &x, 1, &a, 1)) != KF_NONE;
}

int kf_tr_Slice(kf_imp *I, kf_np *np, kf_vid *out, int op)
{
	static const char *const names[4] = {"starts", "ends", "axes", "steps"};
	int64_t v[4][KF_MAX_RANK];
	bool sym[4][KF_MAX_RANK], present[4];
	int n[4];
	for (int k = 0; k < 4; k++) {
		n[k] = kf_tr_dims_from(I, np, (size_t)k + 1, I->opset < 10 ? names[k] : NULL, v[k], sym[k],
				       KF_MAX_RANK, &present[k]);
		if (n[k] < 0)
			return -1;
		for (int i = 0; i < n[k]; i++)
			if (sym[k][i] && k != 1)
				return kf_imp_fail(I, "%s[%d] is the symbolic dim %s: kfuse slices from static starts with "
						      "static steps", names[k], i, kf_str(I->c, KF_SYM_SID(v[k][i])));
	}
	kf_vid x = kf_imp_input(I, np, 0);
	kf_attrval items[4][KF_MAX_RANK];
	kf_attr a[4];
	int na = 0;
	for (int k = 0; k < 4; k++) {
		if (!present[k] || (k >= 2 && n[k] == 0))
			continue;
		/* an end that is the sliced dim itself (x[:, :T] of T) takes it whole */
		for (int i = 0; k == 1 && x != KF_NONE && i < n[1]; i++) {
			int64_t ax = n[2] > i ? v[2][i] : i, rank = kf_tr_ty(I, x)->rank;
			ax = ax < 0 ? ax + rank : ax;
			if (sym[1][i] && ax >= 0 && ax < rank && kf_tr_ty(I, x)->dim[ax] == v[1][i]) {
				v[1][i] = INT64_MAX;
				sym[1][i] = false;
			}
		}
		a[na] = kf_imp_ints_attr(I, names[k], items[k], v[k], n[k]);
		for (int i = 0; i < n[k]; i++)
			if (sym[k][i])
				items[k][i] = (kf_attrval){.kind = KF_ATTR_STR, .s = KF_SYM_SID(v[k][i])};
		na++;
	}
	return (out[0] = kf_imp_op(I, KF_OP_SLICE, &x, 1, a, na)) != KF_NONE;
}

/* Shape (size 0) and Size (1): constants for static shapes; a `shape` op
 * otherwise, its dims tracked as a shape value. */
int kf_tr_Shape(kf_imp *I, kf_np *np, kf_vid *out, int size)
{
	kf_vid x = kf_imp_input(I, np, 0);
	if (x == KF_NONE)
		return -1;
	const kf_type *t = kf_tr_ty(I, x);
	if (size) {
		if (!kf_type_is_static(t))
			return kf_imp_fail(I, "Size of a tensor with symbolic dims is not supported");
		return (out[0] = kf_imp_scalar(I, (double)kf_type_numel(t), KF_I64)) != KF_NONE;
	}
	int64_t r = t->rank, lo = kf_imp_attr_int(np, "start", 0), hi = kf_imp_attr_int(np, "end", r);
	kf_shape_range(r, &lo, &hi);
	bool stat = true;
	for (int64_t i = lo; i < hi; i++)
		stat = stat && !KF_IS_SYM(t->dim[i]);
	if (!stat) {
		kf_attr a[2] = {kf_imp_int_attr(I, "start", lo), kf_imp_int_attr(I, "end", hi)};
		return (out[0] = kf_imp_op(I, KF_OP_SHAPE, &x, 1, a, 2)) != KF_NONE;
	}
	int64_t n = hi - lo;
	kf_tensor v;
	if (kf_tensor_alloc(&v, KF_I64, 1, &n) < 0)
		return -1;
	for (int64_t i = 0; i < n; i++)
		kf_tensor_set_i64(&v, i, t->dim[lo + i]);
	out[0] = kf_imp_tensor_const(I, &v, np->output[0]);
	kf_tensor_free(&v);
	return out[0] != KF_NONE;
}

int kf_tr_ConstantOfShape(kf_imp *I, kf_np *np, kf_vid *out, int op)
{
	int64_t shape[KF_MAX_RANK];
	bool sym[KF_MAX_RANK], present;
	int r = kf_tr_dims_from(I, np, 0, NULL, shape, sym, KF_MAX_RANK, &present);
	if (r < 0)
		return -1;
	kf_tensor fill = {0};
	const Onnx__AttributeProto *a = kf_imp_attr(np, "value");
	char err[256];
	if (a && a->t && kf_onnx_tensor(a->t, I->dir[0] ? I->dir : NULL, &fill, err, sizeof err) < 0)
		return kf_imp_fail(I, "%s", err);
	kf_dtype d = a && a->t ? (kf_dtype)fill.dtype : KF_F32;
	double x = a && a->t && kf_tensor_numel(&fill) ? kf_tensor_get(&fill, 0) : 0;
	kf_tensor_free(&fill);
	for (int i = 0; i < r; i++)
		if (!sym[i] && shape[i] < 0)
			return kf_imp_fail(I, "the shape has a negative dim");
	out[0] = kf_imp_splat(I, x, d, r, shape);
	return out[0] != KF_NONE;
}

/* Range(start, limit, delta): a constant when all three are; else, for a
 * symbolic length (limit - start) / delta that is a dim, start + delta * iota. */
int kf_tr_Range(kf_imp *I, kf_np *np, kf_vid *out, int op)
{
	kf_vid s = kf_imp_input(I, np, 0), l = kf_imp_input(I, np, 1), d = kf_imp_input(I, np, 2);
	if (s == KF_NONE || l == KF_NONE || d == KF_NONE)
		return -1;
	kf_dtype dt = kf_tr_dt(I, s);
	double sv, lv, dv;
	if (kf_imp_const_scalar(I, s, &sv) && kf_imp_const_scalar(I, l, &lv) && kf_imp_const_scalar(I, d, &dv)) {
		if (dv == 0)
			return kf_imp_fail(I, "delta is 0");
		double cnt = ceil((lv - sv) / dv);
		int64_t n = cnt > 0 ? (int64_t)cnt : 0;
		if (n > (INT64_C(1) << 32))
			return kf_imp_fail(I, "the range has %lld elements", (long long)n);
		kf_tensor t;
		if (kf_tensor_alloc(&t, dt, 1, &n) < 0)
			return kf_imp_fail(I, "out of memory");
		for (int64_t i = 0; i < n; i++) {
			if (kf_dtype_is_float(dt))
				kf_tensor_set(&t, i, sv + (double)i * dv);
			else
				kf_tensor_set_i64(&t, i, (int64_t)sv + i * (int64_t)dv);
		}
		out[0] = kf_imp_tensor_const(I, &t, np->output[0]);
		kf_tensor_free(&t);
		return out[0] != KF_NONE;
	}
	int64_t lim[1], st[1], de[1];
	bool ls[1], ss[1], ds[1];
	kf_sv v;
	kf_vid need[3] = {s, l, d};
	double unused;
	for (int i = 0; i < 3; i++)
		if (!kf_imp_const_scalar(I, need[i], &unused) && !kf_sv_of(I, need[i], &v))
			return kf_imp_fail(I, "input %d ('%s') must be a constant, or computed from the input shapes "
					      "(kfuse needs the range's length at compile time; --bind NAME=FILE.npy "
					      "freezes a graph input)", i, np->input[i]);
	if (kf_sv_dims(I, l, lim, ls, 1) != 1 || kf_sv_dims(I, s, st, ss, 1) != 1 || kf_sv_dims(I, d, de, ds, 1) != 1 ||
	    ss[0] || ds[0])
		return kf_imp_fail(I, "start and delta must be constants, and limit one int (a dim of the input shapes)");
	/* (limit - start) / delta as a dim: start 0 and delta 1, or an exact quotient */
	int64_t len;
	if (!ls[0] || st[0] != 0 || de[0] <= 0 || !kf_dim_div(I->c, lim[0], de[0], &len))
		return kf_imp_fail(I, "a range from %lld by %lld to the symbolic %s has no dim for its length "
				      "(kfuse has products of symbols, not sums or quotients that may not divide)",
				   (long long)st[0], (long long)de[0], kf_str(I->c, KF_SYM_SID(lim[0])));
	kf_attrval it[1];
	kf_attr a[2] = {kf_tr_as(I, "dtype", kf_dtype_name(dt)), kf_tr_dims(I, "shape", it, &len, 1)};
	kf_vid y = kf_imp_op(I, KF_OP_IOTA, NULL, 0, a, 2);
	if (de[0] != 1)
		y = kf_tr_op2(I, KF_OP_MUL, y, kf_imp_scalar(I, (double)de[0], dt));
	return (out[0] = y) != KF_NONE;
}

/* Gather: a constant index on a tensor is a slice (and a reshape when the
 * index is a scalar); other indices are the gather op (folded at import
 * when data and indices are constants). */
int kf_tr_Gather(kf_imp *I, kf_np *np, kf_vid *out, int op)
{
	kf_vid x = kf_imp_input(I, np, 0), ix = kf_imp_input(I, np, 1);
	if (x == KF_NONE || ix == KF_NONE)
		return -1;
	const kf_type *t = kf_tr_ty(I, x), *it = kf_tr_ty(I, ix);
	int64_t axis = kf_imp_attr_int(np, "axis", 0), k;
	if (axis < -t->rank || axis >= t->rank)
		return kf_imp_fail(I, "axis %lld is out of range for rank %d", (long long)axis, t->rank);
	if (axis < 0)
		axis += t->rank;
	kf_attr a = kf_imp_int_attr(I, "axis", axis);
	if (kf_fold_const_of(I->g, x) || it->rank > 0 || kf_imp_const_ints(I, ix, &k, 1) != 1)
		return (out[0] = kf_imp_op(I, KF_OP_GATHER, (kf_vid[]){x, ix}, 2, &a, 1)) != KF_NONE;
	int64_t d = t->dim[axis];
	if (!KF_IS_SYM(d) && (k < -d || k >= d))
		return kf_imp_fail(I, "index %lld is out of range for dim %lld", (long long)k, (long long)d);
	if (k < 0 && !KF_IS_SYM(d))
		k += d;
	int64_t s[KF_MAX_RANK];
	int r = 0;
	for (int i = 0; i < t->rank; i++)
		if (i != axis)
			s[r++] = t->dim[i];
	/* from the back of a symbolic dim: x[:, -1] is [-1, end) */
	int64_t end = k == -1 ? INT64_MAX : k + 1;
	return (out[0] = kf_tr_reshape(I, kf_tr_slice(I, x, axis, k, end), s, r)) != KF_NONE;
}

/* Trilu: keeps the elements with col - row >= k (upper) or <= k (lower) of
 * the last two dims, as where(mask, x, 0) over iota; constant input folds. */
int kf_tr_Trilu(kf_imp *I, kf_np *np, kf_vid *out, int op)
{
	kf_vid x = kf_imp_input(I, np, 0);
	int64_t k = 0;
	bool present;
	if (x == KF_NONE || kf_tr_ints_from(I, np, 1, NULL, &k, 1, &present) < 0)
		return -1;
	const kf_type *t = kf_tr_ty(I, x);
	if (t->rank < 2)
		return kf_imp_fail(I, "the input must have rank >= 2");
	int64_t hw[2] = {t->dim[t->rank - 2], t->dim[t->rank - 1]};
	kf_attrval i0[2], i1[2];
	kf_attr ar[3] = {kf_tr_as(I, "dtype", "i64"), kf_tr_dims(I, "shape", i0, hw, 2), kf_imp_int_attr(I, "axis", 0)};
	kf_attr ac[3] = {kf_tr_as(I, "dtype", "i64"), kf_tr_dims(I, "shape", i1, hw, 2), kf_imp_int_attr(I, "axis", 1)};
	kf_vid row = kf_imp_op(I, KF_OP_IOTA, NULL, 0, ar, 3), col = kf_imp_op(I, KF_OP_IOTA, NULL, 0, ac, 3);
	kf_vid diff = kf_tr_op2(I, KF_OP_SUB, col, row);
	bool upper = kf_imp_attr_int(np, "upper", 1) != 0;
	kf_vid mask = kf_tr_op2(I, upper ? KF_OP_GE : KF_OP_LE, diff, kf_imp_scalar(I, (double)k, KF_I64));
	return (out[0] = kf_tr_op3(I, KF_OP_WHERE, mask, x, kf_tr_sc(I, 0, x))) != KF_NONE;
}

/* GatherElements: the gather_elements op (folded at import when data and
 * indices are constants, as BERT's position and token-type buffers are). */
int kf_tr_GatherElements(kf_imp *I, kf_np *np, kf_vid *out, int op)
{
	kf_vid x = kf_imp_input(I, np, 0), ix = kf_imp_input(I, np, 1);
	if (x == KF_NONE || ix == KF_NONE)
		return -1;
	int r = kf_tr_ty(I, x)->rank;
	int64_t axis = kf_imp_attr_int(np, "axis", 0);
	if (axis < -r || axis >= r)
		return kf_imp_fail(I, "axis %lld is out of range for rank %d", (long long)axis, r);
	kf_attr a = kf_imp_int_attr(I, "axis", axis < 0 ? axis + r : axis);
	return (out[0] = kf_imp_op(I, KF_OP_GATHER_ELEMENTS, (kf_vid[]){x, ix}, 2, &a, 1)) != KF_NONE;
}

/* Mod: a - trunc(a / b) * b, the sign of a (fmod = 1, C's fmod; floats
 * must say so); integers with fmod = 0 take the sign of b (Python's %):
 * a nonzero remainder of the other sign moves by b.  Integer division
 * truncates (docs/ops.md); b = 0 gives a, where ONNX leaves it undefined. */
int kf_tr_Mod(kf_imp *I, kf_np *np, kf_vid *out, int op)
{
	kf_vid a = kf_imp_input(I, np, 0), b = kf_imp_input(I, np, 1);
	if (a == KF_NONE || b == KF_NONE)
		return -1;
	bool fmod = kf_imp_attr_int(np, "fmod", 0) != 0;
	kf_dtype dt = kf_tr_dt(I, a);
	if (kf_dtype_is_float(dt) && !fmod)
		return kf_imp_fail(I, "a float Mod must have fmod = 1 (the ONNX rule)");
	kf_vid q = kf_tr_op2(I, KF_OP_DIV, a, b);
	if (kf_dtype_is_float(dt)) /* trunc, through i64 */
		q = kf_tr_cast(I, kf_tr_cast(I, q, KF_I64), dt);
	kf_vid rem = kf_tr_op2(I, KF_OP_SUB, a, kf_tr_op2(I, KF_OP_MUL, q, b));
	if (!fmod) {
		kf_vid z = kf_tr_sc(I, 0, rem);
		kf_vid other = kf_tr_op2(I, KF_OP_NE, kf_tr_op2(I, KF_OP_LT, rem, z), kf_tr_op2(I, KF_OP_LT, b, z));
		kf_vid move = kf_tr_op2(I, KF_OP_AND, kf_tr_op2(I, KF_OP_NE, rem, z), other);
		rem = kf_tr_op3(I, KF_OP_WHERE, move, kf_tr_op2(I, KF_OP_ADD, rem, b), rem);
	}
	return (out[0] = rem) != KF_NONE;
}
