/* infer_index.c: result types of the ops that compute where they read:
 * gather, pad, resize, and of the generators iota and shape.  Semantics are
 * ONNX's (Gather, Pad, Resize, Shape) and XLA's (iota); docs/ops.md is the
 * reference. */
#include <math.h>
#include <string.h>

#include "infer.h"

/* gather(data, indices) {axis = 0}: data's dims with dim `axis` replaced
 * by all of indices' dims. */
int kf_infer_gather(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen)
{
	kf_ic ic = kf_ic_make(g, n, err, errlen);
	const kf_type *x = kf_ic_in(&ic, 0), *ix = kf_ic_in(&ic, 1);
	int64_t axis;
	int a;
	if (!kf_ic_int(&ic, "axis", 0, &axis))
		return -1;
	if (x->rank == 0)
		return kf_ic_fail(&ic, "'gather' data must have rank >= 1");
	if (!kf_ic_axis(&ic, "axis", axis, x->rank, &a))
		return -1;
	if (ix->dtype != KF_I32 && ix->dtype != KF_I64)
		return kf_ic_fail(&ic, "'gather' indices must be i32 or i64, got %s", kf_dtype_name(ix->dtype));
	int r = x->rank - 1 + ix->rank;
	if (r > KF_MAX_RANK)
		return kf_ic_fail(&ic, "'gather' result rank %d is over %d", r, KF_MAX_RANK);
	int64_t dim[KF_MAX_RANK];
	int k = 0;
	for (int i = 0; i < a; i++)
		dim[k++] = x->dim[i];
	for (int i = 0; i < ix->rank; i++)
		dim[k++] = ix->dim[i];
	for (int i = a + 1; i < x->rank; i++)
		dim[k++] = x->dim[i];
	out[0] = kf_type_make(x->dtype, r, dim);
	return 1;
}

/* gather_elements(data, indices) {axis}: one rank; the result has the
 * indices' shape and the data's dtype; every other dim of the indices at
 * most the data's (torch.gather's rule; ONNX's tests use it). */
int kf_infer_gather_elements(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen)
{
	kf_ic ic = kf_ic_make(g, n, err, errlen);
	const kf_type *x = kf_ic_in(&ic, 0), *ix = kf_ic_in(&ic, 1);
	int64_t axis;
	int a;
	if (!kf_ic_int(&ic, "axis", 0, &axis))
		return -1;
	if (x->rank == 0 || ix->rank != x->rank)
		return kf_ic_fail(&ic, "'gather_elements' data and indices must have one rank >= 1, not %d and %d",
				  x->rank, ix->rank);
	if (!kf_ic_axis(&ic, "axis", axis, x->rank, &a))
		return -1;
	if (ix->dtype != KF_I32 && ix->dtype != KF_I64)
		return kf_ic_fail(&ic, "'gather_elements' indices must be i32 or i64, got %s", kf_dtype_name(ix->dtype));
	for (int d = 0; d < x->rank; d++)
		if (d != a && !KF_IS_SYM(ix->dim[d]) && !KF_IS_SYM(x->dim[d]) && ix->dim[d] > x->dim[d])
			return kf_ic_fail(&ic, "'gather_elements' indices' dim %d (%lld) exceeds the data's (%lld)", d,
					  (long long)ix->dim[d], (long long)x->dim[d]);
	out[0] = kf_type_make(x->dtype, ix->rank, ix->dim);
	return 1;
}

/* pad {pads, mode = "constant", value = 0.0}: pads holds the begin counts
 * of every dim, then the end counts (ONNX's order); negative counts crop. */
int kf_infer_pad(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen)
{
	kf_ic ic = kf_ic_make(g, n, err, errlen);
	const kf_type *x = kf_ic_in(&ic, 0);
	const kf_attrval *p;
	uint32_t np;
	bool present;
	const char *mode;
	double value;
	kf_tstr tx, td;
	if (!kf_ic_need(&ic, "pads") || !kf_ic_ints(&ic, "pads", &p, &np, &present) ||
	    !kf_ic_str(&ic, "mode", "constant", &mode) || !kf_ic_float(&ic, "value", 0.0, &value))
		return -1;
	if (strcmp(mode, "constant") && strcmp(mode, "reflect") && strcmp(mode, "edge") && strcmp(mode, "wrap"))
		return kf_ic_fail(&ic, "'pad' mode must be \"constant\", \"reflect\", \"edge\" or \"wrap\", got \"%s\"",
				  mode);
	if (np != 2u * x->rank)
		return kf_ic_fail(&ic, "'pad' pads has %u entries for %s (rank %d: %d wanted)", np,
				  kf_ops_tstr(g->ctx, x, &tx), x->rank, 2 * x->rank);
	out[0] = *x;
	for (int i = 0; i < x->rank; i++) {
		int64_t b = p[i].i, e = p[i + x->rank].i, d = x->dim[i], s;
		if (b == 0 && e == 0)
			continue;
		if (KF_IS_SYM(d))
			return kf_ic_fail(&ic, "'pad' cannot pad symbolic dim %s (axis %d)", kf_ops_dstr(g->ctx, d, &td), i);
		if (__builtin_add_overflow(d, b, &s) || __builtin_add_overflow(s, e, &s) || s < 0 ||
		    s > (INT64_C(1) << 40))
			return kf_ic_fail(&ic, "'pad' of %s by %lld and %lld on axis %d leaves %lld elements",
					  kf_ops_tstr(g->ctx, x, &tx), (long long)b, (long long)e, i, (long long)s);
		if (strcmp(mode, "constant") && d == 0 && s > 0)
			return kf_ic_fail(&ic, "'pad' mode \"%s\" cannot pad the empty axis %d", mode, i);
		out[0].dim[i] = s;
	}
	return 1;
}

/* Reads a list of floats (ints accepted); -1 when absent. */
static int float_list(kf_ic *ic, const char *key, double *out, int max)
{
	const kf_attrval *v = kf_attr_get(ic->g, ic->n, key);
	if (!v)
		return -1;
	if (v->kind != KF_ATTR_LIST || v->n > (uint32_t)max)
		return kf_ic_fail(ic, "attribute '%s' of '%s' must be a list of at most %d floats", key, ic->op, max),
		       -2;
	for (uint32_t i = 0; i < v->n; i++) {
		if (v->list[i].kind == KF_ATTR_FLOAT)
			out[i] = v->list[i].f;
		else if (v->list[i].kind == KF_ATTR_INT)
			out[i] = (double)v->list[i].i;
		else
			return kf_ic_fail(ic, "attribute '%s' of '%s' must be a list of floats", key, ic->op), -2;
	}
	return (int)v->n;
}

static bool one_of(const char *s, const char *const *list)
{
	for (; *list; list++)
		if (!strcmp(s, *list))
			return true;
	return false;
}

/* resize {mode, coordinate_transformation_mode, nearest_mode, scales, sizes?,
 * cubic_coeff_a = -0.75, exclude_outside = 0 (cubic)}:
 * one scale per dim; the result dim is sizes[i] when given, else
 * floor(dim * scale).  A symbolic dim keeps scale 1. */
int kf_infer_resize(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen)
{
	static const char *const modes[] = {"nearest", "linear", "cubic", NULL};
	static const char *const coords[] = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
					     "tf_half_pixel_for_nn", NULL};
	static const char *const nearest[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil", NULL};
	kf_ic ic = kf_ic_make(g, n, err, errlen);
	const kf_type *x = kf_ic_in(&ic, 0);
	const char *mode, *coord, *near;
	double scale[KF_MAX_RANK];
	int64_t sz[KF_MAX_RANK];
	bool szsym[KF_MAX_RANK], have_sizes = kf_attr_get(g, n, "sizes") != NULL;
	int nsz = 0;
	kf_tstr td;
	if (!kf_ic_str(&ic, "mode", "nearest", &mode) ||
	    !kf_ic_str(&ic, "coordinate_transformation_mode", "half_pixel", &coord) ||
	    !kf_ic_str(&ic, "nearest_mode", "round_prefer_floor", &near) || !kf_ic_need(&ic, "scales"))
		return -1;
	if (have_sizes && (nsz = kf_attr_dims(g, n, "sizes", sz, szsym, KF_MAX_RANK)) < 0)
		return kf_ic_fail(&ic, "attribute 'sizes' of 'resize' must be a list of dims");
	if (!one_of(mode, modes))
		return kf_ic_fail(&ic, "'resize' mode must be \"nearest\", \"linear\" or \"cubic\", got \"%s\"", mode);
	if (!one_of(coord, coords))
		return kf_ic_fail(&ic, "'resize' coordinate_transformation_mode \"%s\" is not one of half_pixel, "
				       "pytorch_half_pixel, align_corners, asymmetric, tf_half_pixel_for_nn", coord);
	if (!one_of(near, nearest))
		return kf_ic_fail(&ic, "'resize' nearest_mode \"%s\" is not one of round_prefer_floor, "
				       "round_prefer_ceil, floor, ceil", near);
	if (strcmp(mode, "nearest") && !kf_dtype_is_float(x->dtype))
		return kf_ic_fail(&ic, "'resize' %s mode takes a float operand, got %s", mode, kf_dtype_name(x->dtype));
	int ns = float_list(&ic, "scales", scale, KF_MAX_RANK);
	if (ns == -2)
		return -1;
	if (ns != x->rank)
		return kf_ic_fail(&ic, "'resize' scales has %d entries for rank %d", ns, x->rank);
	if (have_sizes && nsz != x->rank)
		return kf_ic_fail(&ic, "'resize' sizes has %d entries for rank %d", nsz, x->rank);
	out[0] = *x;
	for (int i = 0; i < x->rank; i++) {
		if (!(scale[i] > 0) || !isfinite(scale[i]))
			return kf_ic_fail(&ic, "'resize' scale %g (axis %d) must be positive and finite", scale[i], i);
		int64_t d = x->dim[i];
		if (KF_IS_SYM(d) || (have_sizes && szsym[i])) {
			if (scale[i] != 1 || (have_sizes && sz[i] != d))
				return kf_ic_fail(&ic, "'resize' can only keep symbolic dim %s (axis %d): scale 1",
						  kf_ops_dstr(g->ctx, KF_IS_SYM(d) ? d : sz[i], &td), i);
			continue;
		}
		double o = have_sizes ? (double)sz[i] : floor((double)d * scale[i]);
		if (o < 0 || o > (double)(INT64_C(1) << 40))
			return kf_ic_fail(&ic, "'resize' result dim %g (axis %d) is out of range", o, i);
		out[0].dim[i] = (int64_t)o;
	}
	return 1;
}

/* iota {dtype = "i64", shape, axis = 0}: every element is its index along
 * axis.  Operand-free; the shape may name symbolic dims. */
int kf_infer_iota(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen)
{
	kf_ic ic = kf_ic_make(g, n, err, errlen);
	const char *dt;
	int64_t axis, dim[KF_MAX_RANK];
	bool sym[KF_MAX_RANK];
	if (!kf_ic_str(&ic, "dtype", "i64", &dt) || !kf_ic_int(&ic, "axis", 0, &axis) || !kf_ic_need(&ic, "shape"))
		return -1;
	int d = kf_dtype_parse(dt, strlen(dt));
	if (d < 0 || d == KF_I1)
		return kf_ic_fail(&ic, "'iota' dtype must be a numeric dtype, got \"%s\"", dt);
	const kf_attrval *s = kf_attr_get(g, n, "shape");
	if (s->kind == KF_ATTR_LIST && s->n > KF_MAX_RANK)
		return kf_ic_fail(&ic, "'iota' shape has %u dims, at most %d", s->n, KF_MAX_RANK);
	int r = kf_attr_dims(g, n, "shape", dim, sym, KF_MAX_RANK);
	if (r < 0)
		return kf_ic_fail(&ic, "attribute 'shape' of 'iota' must be a list of dims (ints, or strings naming "
				       "symbolic dims)");
	for (int i = 0; i < r; i++)
		if (!sym[i] && dim[i] < 0)
			return kf_ic_fail(&ic, "'iota' shape[%d] = %lld is negative", i, (long long)dim[i]);
	kf_type t = kf_type_make((kf_dtype)d, r, dim);
	if (r == 0)
		return kf_ic_fail(&ic, "'iota' needs a shape of rank >= 1");
	if (axis < -r || axis >= r)
		return kf_ic_fail(&ic, "'iota' axis %lld is out of range for rank %d", (long long)axis, r);
	out[0] = t;
	return 1;
}

/* shape(x) {start = 0, end = rank}: x's dims as i64, ONNX Shape's clamping. */
int kf_infer_shape_of(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen)
{
	kf_ic ic = kf_ic_make(g, n, err, errlen);
	const kf_type *x = kf_ic_in(&ic, 0);
	int64_t r = x->rank, lo, hi;
	if (!kf_ic_int(&ic, "start", 0, &lo) || !kf_ic_int(&ic, "end", r, &hi))
		return -1;
	kf_shape_range(r, &lo, &hi);
	int64_t len = hi - lo;
	out[0] = kf_type_make(KF_I64, 1, &len);
	return 1;
}

void kf_shape_range(int64_t rank, int64_t *lo, int64_t *hi)
{
	int64_t a = *lo < 0 ? *lo + rank : *lo, b = *hi < 0 ? *hi + rank : *hi;
	a = a < 0 ? 0 : a > rank ? rank : a;
	b = b < a ? a : b > rank ? rank : b;
	*lo = a;
	*hi = b;
}

/* opaque: the types the node declares (the model's), as kfuse cannot know
 * them; it needs its @name. */
int kf_infer_opaque(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen)
{
	kf_ic ic = kf_ic_make(g, n, err, errlen);
	const kf_node *nd = kf_N(g, n);
	if (!nd->sym)
		return kf_ic_fail(&ic, "'opaque' needs the name of the op it stands for (opaque @Name)");
	if (nd->nres > (uint32_t)maxout)
		return kf_ic_fail(&ic, "'opaque' has %u results, room for %d", nd->nres, maxout);
	for (uint32_t i = 0; i < nd->nres; i++)
		out[i] = *kf_vtype(g, kf_res(g, n, i));
	return (int)nd->nres;
}
