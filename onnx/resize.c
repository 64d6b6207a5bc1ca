/* resize.c: ONNX Pad and Resize onto kfuse's pad and resize ops, every
 * opset's spelling (attributes before 11, inputs after; axes from 18). */
#include <math.h>
#include <string.h>
#include "passes.h"
#include "tr.h"

/* Spreads per-axis values (n of them, for `axes`) over all rank dims,
 * `dflt` elsewhere; pads have begins then ends, so `halves` is 2. */
static int spread(kf_imp *I, const int64_t *axes, int na, int rank, const int64_t *v, int n, int halves,
		  int64_t dflt, int64_t *out)
{
	if (n != halves * na)
		return kf_imp_fail(I, "%d values for %d axes", n, na);
	for (int i = 0; i < halves * rank; i++)
		out[i] = dflt;
	for (int k = 0; k < na; k++) {
		int64_t a = axes[k] < 0 ? axes[k] + rank : axes[k];
		if (a < 0 || a >= rank)
			return kf_imp_fail(I, "axis %lld is out of range for rank %d", (long long)axes[k], rank);
		for (int h = 0; h < halves; h++)
			out[h * rank + a] = v[h * na + k];
	}
	return 0;
}

/* The axes input (opset 18) or attribute, else all of them. */
static int axes_of(kf_imp *I, kf_np *np, size_t input, int rank, int64_t *axes)
{
	bool present;
	int na = kf_tr_ints_from(I, np, input, "axes", axes, KF_MAX_RANK, &present);
	if (na < 0)
		return -1;
	if (!present || na == 0) {
		for (int i = 0; i < rank; i++)
			axes[i] = i;
		na = rank;
	}
	return na;
}

int kf_tr_Pad(kf_imp *I, kf_np *np, kf_vid *out, int op)
{
	kf_vid x = kf_imp_input(I, np, 0);
	if (x == KF_NONE)
		return -1;
	int rank = kf_tr_ty(I, x)->rank;
	int64_t p[2 * KF_MAX_RANK], pads[2 * KF_MAX_RANK], axes[KF_MAX_RANK];
	bool present;
	const char *pads_attr = I->opset < 11 ? (kf_imp_attr(np, "paddings") ? "paddings" : "pads") : NULL;
	int n = kf_tr_ints_from(I, np, 1, pads_attr, p, 2 * KF_MAX_RANK, &present);
	int na = I->opset >= 18 ? axes_of(I, np, 3, rank, axes) : axes_of(I, np, 99, rank, axes);
	if (n < 0 || na < 0 || spread(I, axes, na, rank, p, n, 2, 0, pads) < 0)
		return -1;
	double value = kf_tr_float(np, "value", 0.0);
	if (I->opset >= 11 && kf_tr_has_in(np, 2)) {
		kf_vid c = kf_imp_input(I, np, 2);
		if (c == KF_NONE || !kf_imp_const_scalar(I, c, &value))
			return kf_imp_fail(I, "input 2 ('%s') must be a constant (kfuse needs the pad value at compile "
					      "time; --bind NAME=FILE.npy freezes a graph input)", np->input[2]);
	}
	char mode[16];
	kf_imp_attr_str(np, "mode", "constant", mode, sizeof mode);
	if (strcmp(mode, "constant") && strcmp(mode, "reflect") && strcmp(mode, "edge") && strcmp(mode, "wrap"))
		return kf_imp_fail(I, "mode \"%s\" is not supported", mode);
	kf_attrval it[2 * KF_MAX_RANK];
	kf_attr a[3] = {kf_imp_ints_attr(I, "pads", it, pads, 2 * rank), kf_tr_as(I, "mode", mode), kf_tr_af(I, "value", value)};
	return (out[0] = kf_imp_op(I, KF_OP_PAD, &x, 1, a, 3)) != KF_NONE;
}

/* Resize 10 (and Upsample's semantics): asymmetric coordinates, nearest
 * rounds down; 11 on: every mode spelled out. */
int kf_tr_Resize(kf_imp *I, kf_np *np, kf_vid *out, int op)
{
	kf_vid x = kf_imp_input(I, np, 0);
	if (x == KF_NONE)
		return -1;
	const kf_type *t = kf_tr_ty(I, x);
	int rank = t->rank;
	char mode[24], coord[32], near[32], policy[24];
	kf_imp_attr_str(np, "mode", "nearest", mode, sizeof mode);
	kf_imp_attr_str(np, "coordinate_transformation_mode", I->opset < 11 ? "asymmetric" : "half_pixel", coord, sizeof coord);
	kf_imp_attr_str(np, "nearest_mode", I->opset < 11 ? "floor" : "round_prefer_floor", near, sizeof near);
	kf_imp_attr_str(np, "keep_aspect_ratio_policy", "stretch", policy, sizeof policy);
	if (!strcmp(coord, "tf_crop_and_resize") || !strcmp(coord, "half_pixel_symmetric"))
		return kf_imp_fail(I, "coordinate_transformation_mode \"%s\" is not supported", coord);
	if (kf_imp_attr_int(np, "antialias", 0))
		return kf_imp_fail(I, "antialias = 1 is not supported");
	if (strcmp(policy, "stretch"))
		return kf_imp_fail(I, "keep_aspect_ratio_policy \"%s\" is not supported", policy);
	int64_t axes[KF_MAX_RANK];
	int na = axes_of(I, np, 99, rank, axes);
	if (na < 0)
		return -1;
	/* scales: input 1 (opset 10) or 2; sizes: input 3 */
	size_t si = I->opset < 11 ? 1 : 2;
	kf_vid sv = kf_tr_has_in(np, si) ? kf_imp_input(I, np, si) : KF_NONE;
	double scale[KF_MAX_RANK];
	int64_t sizes[KF_MAX_RANK];
	bool use_sizes = false;
	for (int i = 0; i < rank; i++)
		scale[i] = 1;
	if (sv != KF_NONE && kf_type_numel(kf_tr_ty(I, sv)) > 0) {
		const kf_const *k = kf_fold_const_of(I->g, sv);
		int64_t ns = kf_type_numel(kf_tr_ty(I, sv));
		if (!k || !k->f)
			return kf_imp_fail(I, "input %zu ('%s') must be a constant (kfuse needs the scales at compile "
					      "time; --bind NAME=FILE.npy freezes a graph input)", si, np->input[si]);
		if (ns != na || (k->n != 1 && (int64_t)k->n != ns))
			return kf_imp_fail(I, "scales has %lld entries for %d axes", (long long)ns, na);
		for (int i = 0; i < na; i++)
			scale[(axes[i] + rank) % rank] = k->f[k->n == 1 ? 0 : i];
	} else if (I->opset >= 11 && kf_tr_has_in(np, 3)) {
		int64_t v[KF_MAX_RANK];
		bool vs[KF_MAX_RANK], present;
		int n = kf_tr_dims_from(I, np, 3, NULL, v, vs, KF_MAX_RANK, &present);
		if (n < 0)
			return -1;
		if (n != na)
			return kf_imp_fail(I, "sizes has %d entries for %d axes", n, na);
		for (int i = 0; i < rank; i++)
			sizes[i] = t->dim[i];
		for (int i = 0; i < na; i++) {
			int a = (int)((axes[i] + rank) % rank);
			sizes[a] = v[i];
			if (!vs[i] && !KF_IS_SYM(t->dim[a]) && t->dim[a] > 0)
				scale[a] = (double)v[i] / (double)t->dim[a];
		}
		use_sizes = true;
	} else {
		return kf_imp_fail(I, "neither scales nor sizes is given");
	}
	kf_attrval sc[KF_MAX_RANK], sz[KF_MAX_RANK];
	for (int i = 0; i < rank; i++)
		sc[i] = (kf_attrval){.kind = KF_ATTR_FLOAT, .f = scale[i]};
	kf_attr a[7] = {kf_tr_as(I, "mode", mode), kf_tr_as(I, "coordinate_transformation_mode", coord),
			kf_tr_as(I, "nearest_mode", near),
			{kf_intern_cstr(I->c, "scales"), {.kind = KF_ATTR_LIST, .n = (uint32_t)rank, .list = sc}}};
	int nattr = 4;
	if (use_sizes)
		a[nattr++] = kf_tr_dims(I, "sizes", sz, sizes, rank);
	if (!strcmp(mode, "cubic")) { /* (PyTorch's bicubic: -0.75, edges clamped) */
		a[nattr++] = kf_tr_af(I, "cubic_coeff_a", kf_tr_float(np, "cubic_coeff_a", -0.75));
		a[nattr++] = kf_imp_int_attr(I, "exclude_outside", kf_imp_attr_int(np, "exclude_outside", 0));
	}
	return (out[0] = kf_imp_op(I, KF_OP_RESIZE, &x, 1, a, nattr)) != KF_NONE;
}
