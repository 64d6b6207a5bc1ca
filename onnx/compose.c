/* compose.c: ONNX ops kfuse has no op for, translated into the ops it has
 * (so the fuse pass, the interpreter and the CUDA backend need nothing new,
 * and each folds at import when its operands are constants):
 *
 *   InstanceNormalization   mean and variance over the spatial dims (what
 *                           PyTorch's GroupNorm and InstanceNorm2d export)
 *   ArgMax, ArgMin          the extreme by a reduction, its index by a second
 *                           one over where(x == extreme, iota, sentinel)
 *   CumSum                  a masked sum: y[i] = sum_j x[j] * (j <= i); the
 *                           loop kernel reads x n times, fine for the position
 *                           ids and masks exporters cumsum, not for long scans
 *   ScatterND               with constant indices: where(written, gather(updates,
 *                           position map), data); Swin's shifted-window masks
 *                           and in-place slice assignment export so
 *   Tile                    reshape, broadcast_to, reshape
 *   DepthToSpace,           reshape, transpose, reshape (PixelShuffle,
 *   SpaceToDepth            PixelUnshuffle)
 *   OneHot                  where(indices == iota, on, off)
 *   ReduceProd              of a constant or of a shape value whose dims are
 *                           known (torch's numel, the count var/std divide
 *                           by), folded here; kfuse has no product reduction
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "passes.h"
#include "tensor.h"
#include "tr.h"

/* axis in [-rank, rank) as [0, rank); -1 after an error. */
static int norm_axis(kf_imp *I, int64_t axis, int rank)
{
	if (axis < -rank || axis >= rank)
		return kf_imp_fail(I, "axis %lld is out of range for rank %d", (long long)axis, rank);
	return (int)(axis < 0 ? axis + rank : axis);
}

/* x's dims with a 1 inserted before dim `at`. */
static kf_vid insert_one(kf_imp *I, kf_vid x, int at)
{
	const kf_type *t = kf_tr_ty(I, x);
	int64_t s[KF_MAX_RANK];
	if (t->rank + 1 > KF_MAX_RANK)
		return kf_imp_fail(I, "the result would have rank %d (kfuse's limit is %d)", t->rank + 1, KF_MAX_RANK),
		       KF_NONE;
	for (int i = 0, k = 0; i <= t->rank; i++)
		s[i] = i == at ? 1 : t->dim[k++];
	return kf_tr_reshape(I, x, s, t->rank + 1);
}

int kf_tr_InstanceNormalization(kf_imp *I, kf_np *np, kf_vid *out, int op)
{
	kf_vid x = kf_imp_input(I, np, 0), scale = kf_imp_input(I, np, 1), b = kf_imp_input(I, np, 2);
	if (x == KF_NONE || scale == KF_NONE || b == KF_NONE)
		return -1;
	int r = kf_tr_ty(I, x)->rank;
	if (r < 3)
		return kf_imp_fail(I, "the input must have rank >= 3 ([N, C, spatial...]), not %d", r);
	int64_t axes[KF_MAX_RANK];
	for (int i = 2; i < r; i++)
		axes[i - 2] = i;
	/* in f32 where x is f16 or bf16, y rounded once, as torch's group and
	 * instance norms compute (statistics rounded to f16 shift whole
	 * channels: see BatchNormalization's training mode) */
	kf_vid p[3] = {x, scale, b};
	kf_dtype xt = kf_tr_dt(I, x), ct = kf_tr_norm_type(I, p, 3);
	kf_vid xs = kf_tr_cast(I, x, ct);
	kf_vid mean = kf_tr_reduce(I, KF_OP_REDUCE_MEAN, xs, axes, r - 2, true);
	kf_vid d = kf_tr_op2(I, KF_OP_SUB, xs, mean);
	kf_vid var = kf_tr_reduce(I, KF_OP_REDUCE_MEAN, kf_tr_op2(I, KF_OP_MUL, d, d), axes, r - 2, true);
	kf_vid inv = kf_tr_op1(I, KF_OP_RSQRT, kf_tr_op2(I, KF_OP_ADD, var, kf_tr_sc(I, kf_tr_float(np, "epsilon", 1e-5), xs)));
	kf_vid y = kf_tr_op2(I, KF_OP_MUL, kf_tr_op2(I, KF_OP_MUL, d, inv), kf_tr_per_channel(I, kf_tr_cast(I, scale, ct), r));
	y = kf_tr_op2(I, KF_OP_ADD, y, kf_tr_per_channel(I, kf_tr_cast(I, b, ct), r));
	return (out[0] = kf_tr_cast(I, y, xt)) != KF_NONE;
}

/* ArgMax (op 1) and ArgMin (op 0) {axis, keepdims, select_last_index}.  A
 * NaN counts as the extreme (PyTorch's argmax and argmin return the first
 * NaN's index); a sentinel past every index loses the index reduction. */
int kf_tr_ArgExtreme(kf_imp *I, kf_np *np, kf_vid *out, int op)
{
	kf_vid x = kf_imp_input(I, np, 0);
	if (x == KF_NONE)
		return -1;
	const kf_type *t = kf_tr_ty(I, x);
	int axis = norm_axis(I, kf_imp_attr_int(np, "axis", 0), t->rank);
	if (axis < 0)
		return -1;
	bool keep = kf_imp_attr_int(np, "keepdims", 1) != 0, last = kf_imp_attr_int(np, "select_last_index", 0) != 0;
	int64_t ax = axis;
	kf_vid ext = kf_tr_reduce(I, op ? KF_OP_REDUCE_MAX : KF_OP_REDUCE_MIN, x, &ax, 1, true);
	kf_vid hit = kf_tr_op2(I, KF_OP_EQ, x, ext);
	if (kf_dtype_is_float(kf_tr_dt(I, x)))
		hit = kf_tr_op2(I, KF_OP_OR, hit, kf_tr_op2(I, KF_OP_NE, x, x));
	/* the index along axis only ([1, .., n, .., 1]): it broadcasts, and a
	 * folded one is n elements, not x's count */
	int64_t id[KF_MAX_RANK];
	for (int d = 0; d < t->rank; d++)
		id[d] = d == axis ? t->dim[d] : 1;
	kf_vid idx = kf_tr_iota(I, KF_I64, id, t->rank, axis);
	/* 2^62: above any index, and exact as the double the scalar is made from */
	kf_vid cand = kf_tr_op3(I, KF_OP_WHERE, hit, idx, kf_imp_scalar(I, last ? -1.0 : 0x1p62, KF_I64));
	return (out[0] = kf_tr_reduce(I, last ? KF_OP_REDUCE_MAX : KF_OP_REDUCE_MIN, cand, &ax, 1, keep)) != KF_NONE;
}

int kf_tr_CumSum(kf_imp *I, kf_np *np, kf_vid *out, int op)
{
	kf_vid x = kf_imp_input(I, np, 0);
	int64_t a;
	bool present;
	if (x == KF_NONE || kf_tr_ints_from(I, np, 1, NULL, &a, 1, &present) < 0)
		return -1;
	if (!present)
		return kf_imp_fail(I, "the axis (input 1) must be a constant scalar");
	const kf_type *t = kf_tr_ty(I, x);
	int axis = norm_axis(I, a, t->rank);
	if (axis < 0)
		return -1;
	bool excl = kf_imp_attr_int(np, "exclusive", 0) != 0, rev = kf_imp_attr_int(np, "reverse", 0) != 0;
	int64_t n = t->dim[axis], n1[2] = {n, 1}, one_n[2] = {1, n}, ms[KF_MAX_RANK];
	/* mask[i, j]: output i sums input j (j <= i; j < i exclusive; >=, > reversed);
	 * the iotas [n, 1] and [1, n] broadcast */
	kf_vid i = kf_tr_iota(I, KF_I64, n1, 2, 0), j = kf_tr_iota(I, KF_I64, one_n, 2, 1);
	int cmp = rev ? (excl ? KF_OP_GT : KF_OP_GE) : (excl ? KF_OP_LT : KF_OP_LE);
	int mr = 2 + t->rank - 1 - axis; /* [n, n, 1...] broadcasts against x's dims after axis */
	if (mr > KF_MAX_RANK || t->rank + 1 > KF_MAX_RANK)
		return kf_imp_fail(I, "rank %d is above what the masked sum can hold", t->rank);
	ms[0] = ms[1] = n;
	for (int k = 2; k < mr; k++)
		ms[k] = 1;
	kf_vid mask = kf_tr_reshape(I, kf_tr_op2(I, cmp, j, i), ms, mr);
	/* x as [..., 1 (i), n (j), ...] */
	kf_vid xe = insert_one(I, x, axis);
	kf_vid sel = kf_tr_op3(I, KF_OP_WHERE, mask, xe, kf_tr_sc(I, 0, x));
	int64_t sum_ax = axis + 1;
	return (out[0] = kf_tr_reduce(I, KF_OP_REDUCE_SUM, sel, &sum_ax, 1, false)) != KF_NONE;
}

/* ScatterND's position map: for each element of data, the element of the
 * flattened updates written there (map) and whether one is (hit); idx holds
 * the constant [U, k] index tuples.  Later tuples win, as ONNX's reference
 * writes them in order. */
static int scatter_map(kf_imp *I, const kf_type *dt, const int64_t *idx, int64_t U, int k, int64_t S,
		       int64_t *map, uint8_t *hit)
{
	int64_t stride[KF_MAX_RANK];
	for (int d = dt->rank - 1; d >= 0; d--)
		stride[d] = d + 1 < dt->rank ? stride[d + 1] * dt->dim[d + 1] : 1;
	for (int64_t u = 0; u < U; u++) {
		int64_t base = 0;
		for (int j = 0; j < k; j++) {
			int64_t v = idx[u * k + j], n = dt->dim[j];
			if (v < -n || v >= n)
				return kf_imp_fail(I, "index %lld of update %lld is out of range for dim %d of size %lld",
						   (long long)v, (long long)u, j, (long long)n);
			base += (v < 0 ? v + n : v) * stride[j];
		}
		for (int64_t s = 0; s < S; s++) {
			map[base + s] = u * S + s;
			hit[base + s] = 1;
		}
	}
	return 0;
}

/* A constant tensor of dtype dt and x's shape from n values (i64 or bytes). */
static kf_vid const_like(kf_imp *I, const kf_type *t, kf_dtype dt, const int64_t *iv, const uint8_t *bv,
			 const char *name)
{
	kf_tensor c;
	if (kf_tensor_alloc(&c, dt, t->rank, t->dim) < 0)
		return kf_imp_fail(I, "out of memory"), KF_NONE;
	for (int64_t e = 0, n = kf_tensor_numel(&c); e < n; e++)
		kf_tensor_set_i64(&c, e, iv ? iv[e] : bv[e]);
	kf_vid v = kf_imp_tensor_const(I, &c, name);
	kf_tensor_free(&c);
	return v;
}

/* The largest data a constant position map may cover (its i64 map is 8
 * bytes an element). */
#define SCATTER_MAX_ELEMS (1 << 24)

int kf_tr_ScatterND(kf_imp *I, kf_np *np, kf_vid *out, int op)
{
	kf_vid x = kf_imp_input(I, np, 0), ix = kf_imp_input(I, np, 1), up = kf_imp_input(I, np, 2);
	if (x == KF_NONE || ix == KF_NONE || up == KF_NONE)
		return -1;
	char red[16];
	kf_imp_attr_str(np, "reduction", "none", red, sizeof red);
	if (strcmp(red, "none"))
		return kf_imp_fail(I, "reduction '%s' is not supported (only 'none')", red);
	const kf_type *t = kf_tr_ty(I, x), *it = kf_tr_ty(I, ix);
	if (kf_tr_need_static(I, x) < 0 || kf_tr_need_static(I, ix) < 0)
		return -1;
	int64_t nd = kf_type_numel(t), ni = kf_type_numel(it);
	int k = it->rank ? (int)it->dim[it->rank - 1] : -1;
	if (it->rank < 1 || k > t->rank)
		return kf_imp_fail(I, "indices must have rank >= 1 and a last dim of at most data's rank %d", t->rank);
	if (nd > SCATTER_MAX_ELEMS)
		return kf_imp_fail(I, "data has %lld elements; the position map is made for at most %d",
				   (long long)nd, SCATTER_MAX_ELEMS);
	/* U tuples (indices' leading dims), each writing S elements (data's dims from k) */
	int64_t U = 1, S = 1, nu = kf_type_numel(kf_tr_ty(I, up));
	for (int d = 0; d + 1 < it->rank; d++) /* capped: no overflow, and over the cap is an error */
		U = it->dim[d] == 0 || U == 0 ? 0 : U > SCATTER_MAX_ELEMS || it->dim[d] > SCATTER_MAX_ELEMS ? SCATTER_MAX_ELEMS + 1
											       : U * it->dim[d];
	for (int d = k; d < t->rank; d++)
		S *= t->dim[d];
	int64_t *idx = malloc(((size_t)ni + 1) * sizeof *idx), *map = calloc((size_t)nd + 1, sizeof *map);
	uint8_t *hit = calloc((size_t)nd + 1, 1);
	int rc = -1;
	if (!idx || !map || !hit)
		kf_imp_fail(I, "out of memory");
	else if (kf_imp_const_ints(I, ix, idx, (int)(ni < INT32_MAX ? ni : 0)) != ni)
		kf_imp_fail(I, "input 1 ('%s') must be a constant (kfuse has no scatter op for computed indices)",
			    np->input[1]);
	else if (U > SCATTER_MAX_ELEMS || nu != U * S)
		kf_imp_fail(I, "updates have %lld elements; indices and data need %lld", (long long)nu, (long long)(U * S));
	else if (scatter_map(I, t, idx, U, k, S, map, hit) == 0) {
		kf_vid m = const_like(I, t, KF_I64, map, NULL, np->output[0]);
		kf_vid h = const_like(I, t, KF_I1, NULL, hit, np->output[0]);
		kf_vid flat = kf_tr_reshape(I, up, &nu, 1);
		kf_attr a = kf_imp_int_attr(I, "axis", 0);
		kf_vid g = m == KF_NONE || flat == KF_NONE ? KF_NONE : kf_imp_op(I, KF_OP_GATHER, (kf_vid[]){flat, m}, 2, &a, 1);
		rc = (out[0] = kf_tr_op3(I, KF_OP_WHERE, h, g, x)) != KF_NONE ? 1 : -1;
	}
	free(idx);
	free(map);
	free(hit);
	return rc;
}

int kf_tr_Tile(kf_imp *I, kf_np *np, kf_vid *out, int op)
{
	kf_vid x = kf_imp_input(I, np, 0);
	int64_t rep[KF_MAX_RANK];
	bool present;
	int n = x == KF_NONE ? -1 : kf_tr_ints_from(I, np, 1, NULL, rep, KF_MAX_RANK, &present);
	if (n < 0)
		return -1;
	const kf_type *t = kf_tr_ty(I, x);
	if (!present || n != t->rank)
		return kf_imp_fail(I, "repeats must be a constant of %d ints", t->rank);
	/* [.., d, ..] -> [.., 1, d, ..] -> [.., r, d, ..] -> [.., r * d, ..], only
	 * for the dims repeated */
	int64_t in[KF_MAX_RANK], big[KF_MAX_RANK], res[KF_MAX_RANK];
	int r = 0;
	for (int i = 0; i < t->rank; i++) {
		if (rep[i] < 0)
			return kf_imp_fail(I, "repeats[%d] = %lld is negative", i, (long long)rep[i]);
		if (rep[i] != 1 && KF_IS_SYM(t->dim[i]))
			return kf_imp_fail(I, "dim %d is symbolic and repeated %lld times", i, (long long)rep[i]);
		if (rep[i] > 1 && t->dim[i] > (INT64_C(1) << 62) / rep[i])
			return kf_imp_fail(I, "dim %d (%lld) repeated %lld times is too large", i, (long long)t->dim[i],
					   (long long)rep[i]);
		if (rep[i] != 1 && r + 2 > KF_MAX_RANK)
			return kf_imp_fail(I, "too many repeated dims for rank %d", KF_MAX_RANK);
		if (rep[i] != 1) {
			in[r] = 1;
			big[r++] = rep[i];
		}
		in[r] = big[r] = t->dim[i];
		r++;
		res[i] = rep[i] == 1 ? t->dim[i] : rep[i] * t->dim[i];
	}
	kf_attrval items[KF_MAX_RANK];
	kf_vid y = kf_tr_reshape(I, x, in, r);
	kf_attr a = kf_tr_dims(I, "shape", items, big, r);
	y = y == KF_NONE ? KF_NONE : kf_imp_op(I, KF_OP_BROADCAST_TO, &y, 1, &a, 1);
	return (out[0] = kf_tr_reshape(I, y, res, t->rank)) != KF_NONE;
}

/* DepthToSpace (op 0) and SpaceToDepth (op 1) {blocksize, mode}. */
int kf_tr_DepthSpace(kf_imp *I, kf_np *np, kf_vid *out, int op)
{
	kf_vid x = kf_imp_input(I, np, 0);
	if (x == KF_NONE)
		return -1;
	const kf_type *t = kf_tr_ty(I, x);
	int64_t b = kf_imp_attr_int(np, "blocksize", 0);
	if (t->rank != 4 || b < 1 || b > (1 << 16)) /* b * b and H * b stay far from overflow */
		return kf_imp_fail(I, "needs a rank-4 [N, C, H, W] input and a blocksize in [1, 65536]");
	/* the batch may be symbolic; C, H and W are multiplied and divided */
	for (int d = 1; d < 4; d++)
		if (KF_IS_SYM(t->dim[d]))
			return kf_imp_fail(I, "dim %d of the input is symbolic (%s): only the batch may be", d,
					   kf_str(I->c, KF_SYM_SID(t->dim[d])));
	int64_t N = t->dim[0], C = t->dim[1], H = t->dim[2], W = t->dim[3];
	char mode[8];
	kf_imp_attr_str(np, "mode", "DCR", mode, sizeof mode);
	bool crd = !strcmp(mode, "CRD");
	if (!crd && strcmp(mode, "DCR"))
		return kf_imp_fail(I, "mode '%s' is neither DCR nor CRD", mode);
	if (C > (INT64_C(1) << 40) || H > (INT64_C(1) << 40) || W > (INT64_C(1) << 40))
		return kf_imp_fail(I, "the input's dims are too large");
	if (op == 0 && C % (b * b))
		return kf_imp_fail(I, "channels %lld are not a multiple of blocksize^2 = %lld", (long long)C, (long long)(b * b));
	if (op == 1 && (H % b || W % b))
		return kf_imp_fail(I, "H %lld and W %lld must be multiples of the blocksize %lld", (long long)H, (long long)W,
				   (long long)b);
	kf_vid y;
	if (op == 0 && crd) {
		y = kf_tr_reshape(I, x, (int64_t[]){N, C / (b * b), b, b, H, W}, 6);
		y = kf_tr_transpose(I, y, (int64_t[]){0, 1, 4, 2, 5, 3}, 6);
	} else if (op == 0) {
		y = kf_tr_reshape(I, x, (int64_t[]){N, b, b, C / (b * b), H, W}, 6);
		y = kf_tr_transpose(I, y, (int64_t[]){0, 3, 4, 1, 5, 2}, 6);
	} else {
		y = kf_tr_reshape(I, x, (int64_t[]){N, C, H / b, b, W / b, b}, 6);
		y = kf_tr_transpose(I, y, (int64_t[]){0, 3, 5, 1, 2, 4}, 6);
	}
	int64_t s[4] = {N, op ? C * b * b : C / (b * b), op ? H / b : H * b, op ? W / b : W * b};
	return (out[0] = kf_tr_reshape(I, y, s, 4)) != KF_NONE;
}

int kf_tr_OneHot(kf_imp *I, kf_np *np, kf_vid *out, int op)
{
	kf_vid ix = kf_imp_input(I, np, 0), vals = kf_imp_input(I, np, 2);
	double depth;
	if (ix == KF_NONE || vals == KF_NONE)
		return -1;
	if (!kf_imp_const_scalar(I, kf_imp_input(I, np, 1), &depth) || !(depth >= 1 && depth < 1e9))
		return kf_imp_fail(I, "input 1 ('%s') must be a constant scalar >= 1 (the depth)",
				   kf_tr_has_in(np, 1) ? np->input[1] : "");
	const kf_type *t = kf_tr_ty(I, ix), *vt = kf_tr_ty(I, vals);
	if (vt->rank != 1 || vt->dim[0] != 2)
		return kf_imp_fail(I, "values (input 2) must have shape [2] (off, on)");
	int r = t->rank + 1, axis = norm_axis(I, kf_imp_attr_int(np, "axis", -1), r);
	if (axis < 0)
		return -1;
	int64_t d = (int64_t)depth, s[KF_MAX_RANK];
	/* indices in [-depth, 0) count from the end */
	kf_vid i = kf_tr_cast(I, ix, KF_I64);
	kf_vid dv = kf_imp_scalar(I, (double)d, KF_I64), zero = kf_imp_scalar(I, 0, KF_I64);
	i = kf_tr_op3(I, KF_OP_WHERE, kf_tr_op2(I, KF_OP_LT, i, zero), kf_tr_op2(I, KF_OP_ADD, i, dv), i);
	for (int k = 0; k < r - axis; k++)
		s[k] = k ? 1 : d;
	kf_vid pos = kf_tr_reshape(I, kf_tr_iota(I, KF_I64, &d, 1, 0), s, r - axis);
	kf_vid hit = kf_tr_op2(I, KF_OP_EQ, i == KF_NONE ? KF_NONE : insert_one(I, i, axis), pos);
	kf_vid off = kf_tr_reshape(I, kf_tr_slice(I, vals, 0, 0, 1), NULL, 0);
	kf_vid on = kf_tr_reshape(I, kf_tr_slice(I, vals, 0, 1, 2), NULL, 0);
	return (out[0] = kf_tr_op3(I, KF_OP_WHERE, hit, on, off)) != KF_NONE;
}

/* ReduceProd of a constant (opset 13: axes an attribute; 18: an input). */
int kf_tr_ReduceProd(kf_imp *I, kf_np *np, kf_vid *out, int op)
{
	kf_vid x = kf_imp_input(I, np, 0);
	if (x == KF_NONE)
		return -1;
	const kf_const *k = kf_fold_const_of(I->g, x);
	const kf_type *t = kf_tr_ty(I, x);
	int64_t sv[KF_SV_MAX];
	bool sym[KF_SV_MAX];
	int nsv = k ? -1 : kf_sv_dims(I, x, sv, sym, KF_SV_MAX);
	if (nsv >= 0 && t->rank == 1) { /* a shape value (numel, a count) whose dims are all known */
		int64_t prod = 1;
		bool known = true;
		for (int i = 0; i < nsv; i++) {
			known &= !sym[i];
			prod = (int64_t)((uint64_t)prod * (uint64_t)sv[i]);
		}
		if (known && !kf_tr_has_in(np, 1) && !kf_imp_attr(np, "axes")) { /* all of it */
			int64_t one = 1;
			kf_vid p = kf_imp_scalar(I, (double)prod, kf_tr_dt(I, x));
			return (out[0] = kf_imp_attr_int(np, "keepdims", 1) ? kf_tr_reshape(I, p, &one, 1) : p) != KF_NONE;
		}
	}
	if (!k || !kf_type_is_static(t))
		return kf_imp_fail(I, "the product of a computed tensor is not supported (kfuse has no product reduction; "
				      "a constant's product folds)");
	int64_t axes[KF_MAX_RANK];
	bool present, red[KF_MAX_RANK] = {0};
	int n = kf_tr_ints_from(I, np, 1, "axes", axes, KF_MAX_RANK, &present);
	if (n < 0)
		return -1;
	bool keep = kf_imp_attr_int(np, "keepdims", 1) != 0;
	if (!present || n == 0) {
		if (kf_imp_attr_int(np, "noop_with_empty_axes", 0))
			return (out[0] = x), 1;
		for (int d = 0; d < t->rank; d++)
			red[d] = true;
	}
	for (int a = 0; a < n; a++) {
		int d = norm_axis(I, axes[a], t->rank);
		if (d < 0)
			return -1;
		red[d] = true;
	}
	int64_t od[KF_MAX_RANK], kd[KF_MAX_RANK], on = 1;
	int orank = 0;
	for (int d = 0; d < t->rank; d++) {
		kd[d] = red[d] ? 1 : t->dim[d];
		on *= kd[d];
		if (keep || !red[d])
			od[orank++] = kd[d];
	}
	kf_tensor o;
	if (kf_tensor_alloc(&o, (kf_dtype)t->dtype, orank, od) < 0)
		return kf_imp_fail(I, "out of memory");
	for (int64_t e = 0; e < on; e++)
		kf_tensor_set(&o, e, 1);
	/* each element of x multiplies the output element it reduces into */
	for (int64_t e = 0, n_in = kf_type_numel(t); e < n_in; e++) {
		int64_t rem = e, oe = 0, ostride = 1;
		for (int d = t->rank - 1; d >= 0; d--) {
			int64_t c = rem % t->dim[d];
			rem /= t->dim[d];
			oe += (red[d] ? 0 : c) * ostride;
			ostride *= kd[d];
		}
		uint64_t j = k->n == 1 ? 0 : (uint64_t)e;
		double v = k->i ? (double)k->i[j] : k->f[j];
		if (k->i) /* wrapping, as int64 arithmetic in ONNX runtimes does */
			kf_tensor_set_i64(&o, oe, (int64_t)((uint64_t)kf_tensor_get_i64(&o, oe) * (uint64_t)k->i[j]));
		else
			kf_tensor_set(&o, oe, kf_tensor_get(&o, oe) * v);
	}
	out[0] = kf_imp_tensor_const(I, &o, np->output[0]);
	kf_tensor_free(&o);
	return out[0] == KF_NONE ? -1 : 1;
}
