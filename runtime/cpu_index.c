/* cpu_index.c: the ops that compute where they read: gather, pad, resize;
 * the generators iota and shape; and opaque, which runs the plugin op of
 * its name.  Result shapes come from cpu_infer.c and are in out[] already.
 *
 * pad and nearest resize are a per-dim index map (the input coordinate of
 * every output coordinate, or -1 for pad's constant) walked over the
 * output; linear resize is a per-dim pair of input coordinates and a weight,
 * the 2^k corners of the dims that interpolate summed in double.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "cpu_ops.h"

static void row_strides(int rank, const int64_t *dim, int64_t *st)
{
	int64_t s = 1;
	for (int d = rank - 1; d >= 0; d--) {
		st[d] = s;
		s *= dim[d];
	}
}

/* ---- gather ---------------------------------------------------------------- */

int kf_cpu_gather(KF_RT_CPU_ARGS)
{
	const kf_tensor *x = &in[0], *ix = &in[1];
	int a = kf_rt_axis(kf_attr_int(g, n, "axis", 0), x->rank);
	if (a < 0)
		return kf_rt_fail(err, errlen, "gather axis out of range for rank %d", x->rank);
	int64_t outer = 1, inner = 1, d = x->dim[a], ni = kf_tensor_numel(ix);
	for (int i = 0; i < a; i++)
		outer *= x->dim[i];
	for (int i = a + 1; i < x->rank; i++)
		inner *= x->dim[i];
	size_t esz = kf_dtype_size(x->dtype), row = (size_t)inner * esz;
	char *y = out[0].data;
	const char *src = x->data;
	for (int64_t j = 0; j < ni; j++) {
		int64_t k = kf_tensor_get_i64(ix, j);
		/* ONNX: negative indices count from the end; outside [-d, d) is an error */
		if (k < -d || k >= d)
			return kf_rt_fail(err, errlen, "gather index %lld (element %lld) is out of range for dim %lld",
					  (long long)k, (long long)j, (long long)d);
		if (k < 0)
			k += d;
		for (int64_t o = 0; o < outer; o++)
			memcpy(y + ((size_t)o * (size_t)ni + (size_t)j) * row, src + ((size_t)o * (size_t)d + (size_t)k) * row,
			       row);
	}
	return 0;
}

/* out[i] = x[i with its `axis` coordinate replaced by ix[i]] */
int kf_cpu_gather_elements(KF_RT_CPU_ARGS)
{
	const kf_tensor *x = &in[0], *ix = &in[1];
	int r = x->rank, a = kf_rt_axis(kf_attr_int(g, n, "axis", 0), r);
	if (a < 0 || ix->rank != r)
		return kf_rt_fail(err, errlen, "gather_elements: axis out of range or ranks differ");
	int64_t xs[KF_MAX_RANK], c[KF_MAX_RANK] = {0}, m = kf_tensor_numel(ix), d = x->dim[a];
	row_strides(r, x->dim, xs);
	size_t esz = kf_dtype_size(x->dtype);
	char *y = out[0].data;
	const char *src = x->data;
	for (int64_t e = 0; e < m; e++) {
		int64_t k = kf_tensor_get_i64(ix, e), off = 0;
		if (k < -d || k >= d)
			return kf_rt_fail(err, errlen, "gather_elements index %lld (element %lld) is out of range for dim %lld",
					  (long long)k, (long long)e, (long long)d);
		for (int i = 0; i < r; i++)
			off += (i == a ? (k < 0 ? k + d : k) : c[i]) * xs[i];
		memcpy(y + (size_t)e * esz, src + (size_t)off * esz, esz);
		for (int i = r - 1; i >= 0 && ++c[i] == ix->dim[i]; i--) /* the next index, row-major */
			c[i] = 0;
	}
	return 0;
}

/* ---- index maps: pad and nearest resize ------------------------------------------ */

/* Copies out[i] = x[map_0[i_0], ..., map_r[i_r]], or the element `fill`
 * where a map entry is -1. */
static void gather_maps(const kf_tensor *x, kf_tensor *y, int64_t *const *map, const void *fill)
{
	int r = y->rank;
	size_t esz = kf_dtype_size(y->dtype);
	int64_t xs[KF_MAX_RANK], idx[KF_MAX_RANK] = {0}, numel = kf_tensor_numel(y);
	row_strides(x->rank, x->dim, xs);
	char *dst = y->data;
	const char *src = x->data;
	for (int64_t e = 0; e < numel; e++) {
		int64_t off = 0;
		bool hole = false;
		for (int d = 0; d < r; d++) {
			int64_t s = map[d][idx[d]];
			hole |= s < 0;
			off += s * xs[d];
		}
		memcpy(dst + (size_t)e * esz, hole ? fill : src + (size_t)off * esz, esz);
		for (int d = r - 1; d >= 0 && ++idx[d] == y->dim[d]; d--)
			idx[d] = 0;
	}
}

static void free_maps(int64_t **map, int r)
{
	for (int d = 0; d < r; d++)
		free(map[d]);
}

/* The input coordinate for coordinate i of a padded dim of size d with b
 * elements before it, by mode; -1 for the constant. */
static int64_t pad_index(int64_t i, int64_t b, int64_t d, char mode)
{
	int64_t s = i - b;
	if (s >= 0 && s < d)
		return s;
	switch (mode) {
	case 'e': /* edge */
		return s < 0 ? 0 : d - 1;
	case 'w': /* wrap */
		return ((s % d) + d) % d;
	case 'r': { /* reflect, the edge not repeated, as numpy.pad (repeatedly) */
		if (d == 1)
			return 0;
		int64_t p = 2 * (d - 1), m = ((s % p) + p) % p;
		return m < d ? m : p - m;
	}
	default:
		return -1;
	}
}

int kf_cpu_pad(KF_RT_CPU_ARGS)
{
	const kf_tensor *x = &in[0];
	kf_tensor *y = &out[0];
	int64_t pads[2 * KF_MAX_RANK];
	int r = x->rank;
	if (kf_attr_ints(g, n, "pads", pads, 2 * KF_MAX_RANK) != 2 * r)
		return kf_rt_fail(err, errlen, "pad: pads must hold 2 ints per dim");
	const char *mode = kf_attr_str(g, n, "mode", "constant");
	char m = !strcmp(mode, "edge") ? 'e' : !strcmp(mode, "wrap") ? 'w' : !strcmp(mode, "reflect") ? 'r' : 'c';
	if (kf_tensor_numel(y) == 0)
		return 0;
	int64_t *map[KF_MAX_RANK] = {0};
	for (int d = 0; d < r; d++) {
		map[d] = malloc(sizeof(int64_t) * (size_t)(y->dim[d] ? y->dim[d] : 1));
		if (!map[d]) {
			free_maps(map, r);
			return kf_rt_fail(err, errlen, "out of memory");
		}
		for (int64_t i = 0; i < y->dim[d]; i++)
			map[d][i] = x->dim[d] ? pad_index(i, pads[d], x->dim[d], m) : -1;
	}
	/* the constant, stored as the dtype stores it */
	double v = kf_attr_float(g, n, "value", 0.0);
	int64_t iv = kf_rt_f2i(v, INT64_MIN, INT64_MAX);
	char fill[16] = {0};
	if (kf_dtype_is_float(y->dtype))
		kf_rt_store(y->dtype, fill, RT_F64, &v, 1);
	else
		kf_rt_store(y->dtype, fill, RT_I64, &iv, 1);
	gather_maps(x, y, map, fill);
	free_maps(map, r);
	return 0;
}

/* ---- resize ----------------------------------------------------------------- */

typedef struct rs_axis {
	double scale, outlen; /* outlen: the output's length unrounded (in * scale), or its size */
	int64_t in, out;
	int coord; /* index into the modes below */
} rs_axis;

/* The input coordinate of output coordinate x (ONNX Resize's
 * coordinate_transformation_mode). */
static double rs_coord(const rs_axis *a, int64_t x)
{
	double s = a->scale;
	switch (a->coord) {
	case 1: /* pytorch_half_pixel */
		return a->outlen > 1 ? ((double)x + 0.5) / s - 0.5 : 0.0;
	case 2: /* align_corners, over the unrounded length as ONNX's reference has it */
		return a->outlen == 1 ? 0.0 : (double)x * (double)(a->in - 1) / (a->outlen - 1);
	case 3: /* asymmetric */
		return (double)x / s;
	case 4: /* tf_half_pixel_for_nn */
		return ((double)x + 0.5) / s;
	default: /* half_pixel */
		return ((double)x + 0.5) / s - 0.5;
	}
}

static int64_t clamp(int64_t v, int64_t hi) { return v < 0 ? 0 : v > hi ? hi : v; }

static int rs_axes(kf_graph *g, kf_nid n, const kf_tensor *x, const kf_tensor *y, rs_axis *ax, char *err,
		   size_t errlen)
{
	static const char *const coords[] = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
					     "tf_half_pixel_for_nn"};
	const kf_attrval *sc = kf_attr_get(g, n, "scales");
	const char *coord = kf_attr_str(g, n, "coordinate_transformation_mode", "half_pixel");
	int c = -1;
	for (int i = 0; i < 5; i++)
		if (!strcmp(coord, coords[i]))
			c = i;
	if (c < 0 || !sc || sc->kind != KF_ATTR_LIST || sc->n != (uint32_t)x->rank)
		return kf_rt_fail(err, errlen, "resize: bad scales or coordinate_transformation_mode");
	bool sizes = kf_attr_get(g, n, "sizes") != NULL;
	for (int d = 0; d < x->rank; d++) {
		const kf_attrval *v = &sc->list[d];
		ax[d].scale = v->kind == KF_ATTR_FLOAT ? v->f : (double)v->i;
		ax[d].in = x->dim[d];
		ax[d].out = y->dim[d];
		ax[d].coord = c;
		ax[d].outlen = (double)x->dim[d] * ax[d].scale;
		/* ONNX: with sizes given, the scale is output / input */
		if (sizes && x->dim[d] > 0) {
			ax[d].scale = (double)y->dim[d] / (double)x->dim[d];
			ax[d].outlen = (double)y->dim[d];
		}
	}
	return 0;
}

static int64_t rs_nearest(double v, const char *mode)
{
	if (!strcmp(mode, "floor"))
		return (int64_t)floor(v);
	if (!strcmp(mode, "ceil"))
		return (int64_t)ceil(v);
	double f = floor(v);
	if (v - f == 0.5) /* a tie */
		return (int64_t)(strcmp(mode, "round_prefer_ceil") ? f : f + 1);
	return (int64_t)floor(v + 0.5);
}

static int resize_nearest(kf_graph *g, kf_nid n, const kf_tensor *x, kf_tensor *y, const rs_axis *ax, char *err,
			  size_t errlen)
{
	const char *mode = kf_attr_str(g, n, "nearest_mode", "round_prefer_floor");
	int64_t *map[KF_MAX_RANK] = {0};
	for (int d = 0; d < y->rank; d++) {
		map[d] = malloc(sizeof(int64_t) * (size_t)y->dim[d]);
		if (!map[d]) {
			free_maps(map, y->rank);
			return kf_rt_fail(err, errlen, "out of memory");
		}
		for (int64_t i = 0; i < y->dim[d]; i++)
			map[d][i] = clamp(rs_nearest(rs_coord(&ax[d], i), mode), x->dim[d] - 1);
	}
	gather_maps(x, y, map, NULL);
	free_maps(map, y->rank);
	return 0;
}

/* Keys' cubic convolution kernel at distance x, coefficient a (ONNX
 * Resize's cubic_coeff_a; PyTorch's bicubic is a = -0.75). */
static double rs_cubic(double x, double a)
{
	x = fabs(x);
	return x <= 1 ? ((a + 2) * x - (a + 3)) * x * x + 1 : x < 2 ? ((a * x - 5 * a) * x + 8 * a) * x - 4 * a : 0;
}

/* Input coordinate c on a dim of D elements: the T (2: linear, 4: cubic)
 * elements it reads, clamped into the input (the edge repeated, as ONNX's
 * reference and PyTorch do), and their weights; exclude_outside: the
 * weights of taps past the edge are 0 and the rest renormalised. */
static void rs_taps(double c, int64_t D, int T, double a, bool excl, int64_t *ix, double *w)
{
	double f = floor(c), t = c - f;
	int64_t b = (int64_t)f - (T == 4);
	for (int j = 0; j < T; j++) {
		w[j] = T == 2 ? (j ? t : 1 - t) : rs_cubic(t + 1 - j, a);
		if (excl && (b + j < 0 || b + j >= D))
			w[j] = 0;
		ix[j] = clamp(b + j, D - 1);
	}
	if (excl) {
		double sum = 0;
		for (int j = 0; j < T; j++)
			sum += w[j];
		for (int j = 0; j < T && sum != 0; j++)
			w[j] /= sum;
	}
}

/* linear and cubic: per dim the T elements each output coordinate reads
 * and their weights; dims that map one to one (all weight on the same
 * index) are not interpolated; each output sums over the T^k tap
 * combinations of the k interpolated dims, in double. */
static int resize_taps(kf_graph *g, kf_nid n, const kf_tensor *x, kf_tensor *y, const rs_axis *ax, char *err,
		       size_t errlen)
{
	int r = y->rank, T = strcmp(kf_attr_str(g, n, "mode", "nearest"), "cubic") ? 2 : 4;
	double a = kf_attr_float(g, n, "cubic_coeff_a", -0.75);
	bool excl = kf_attr_int(g, n, "exclude_outside", 0) != 0;
	int64_t numel = kf_tensor_numel(y), nx = kf_tensor_numel(x);
	int64_t *ix[KF_MAX_RANK] = {0};
	double *w[KF_MAX_RANK] = {0}, *xv = malloc(sizeof(double) * (size_t)(nx ? nx : 1)),
	       *yv = malloc(sizeof(double) * (size_t)(numel ? numel : 1));
	int interp[KF_MAX_RANK], ni = 0, rc = 0;
	bool ok = xv && yv;
	for (int d = 0; ok && d < r; d++) {
		ix[d] = malloc(sizeof(int64_t) * (size_t)(y->dim[d] * T));
		w[d] = malloc(sizeof(double) * (size_t)(y->dim[d] * T));
		ok = ix[d] && w[d];
		bool ident = y->dim[d] == x->dim[d];
		for (int64_t i = 0; ok && i < y->dim[d]; i++) {
			rs_taps(rs_coord(&ax[d], i), x->dim[d], T, a, excl, ix[d] + i * T, w[d] + i * T);
			for (int j = 0; j < T; j++)
				ident = ident && (w[d][i * T + j] == 0 || (ix[d][i * T + j] == i && w[d][i * T + j] == 1));
		}
		if (ok && !ident)
			interp[ni++] = d;
	}
	if (!ok) {
		rc = kf_rt_fail(err, errlen, "out of memory");
		goto done;
	}
	kf_rt_load((kf_dtype)x->dtype, x->data, 1, nx, RT_F64, xv);
	int64_t xs[KF_MAX_RANK], idx[KF_MAX_RANK] = {0}, combos = 1;
	row_strides(x->rank, x->dim, xs);
	for (int k = 0; k < ni; k++)
		combos *= T;
	for (int64_t e = 0; e < numel; e++) {
		/* the dims read as they are (one to one: ident above) */
		int64_t base = 0;
		for (int d = 0, k = 0; d < r; d++) {
			if (k < ni && interp[k] == d)
				k++;
			else
				base += idx[d] * xs[d];
		}
		double acc = 0;
		for (int64_t cmb = 0; cmb < combos; cmb++) {
			double wt = 1;
			int64_t off = base, q = cmb;
			for (int k = 0; k < ni && wt != 0; k++, q /= T) {
				int d = interp[k], j = (int)(q % T);
				wt *= w[d][idx[d] * T + j];
				off += ix[d][idx[d] * T + j] * xs[d];
			}
			if (wt != 0)
				acc += wt * xv[off];
		}
		yv[e] = acc;
		for (int d = r - 1; d >= 0 && ++idx[d] == y->dim[d]; d--)
			idx[d] = 0;
	}
	kf_rt_store((kf_dtype)y->dtype, y->data, RT_F64, yv, numel);
done:
	for (int d = 0; d < r; d++) {
		free(ix[d]);
		free(w[d]);
	}
	free(xv);
	free(yv);
	return rc;
}

int kf_cpu_resize(KF_RT_CPU_ARGS)
{
	rs_axis ax[KF_MAX_RANK];
	if (kf_tensor_numel(&out[0]) == 0)
		return 0;
	if (kf_tensor_numel(&in[0]) == 0)
		return kf_rt_fail(err, errlen, "resize of an empty tensor to a non-empty one");
	if (rs_axes(g, n, &in[0], &out[0], ax, err, errlen) != 0)
		return -1;
	if (strcmp(kf_attr_str(g, n, "mode", "nearest"), "nearest"))
		return resize_taps(g, n, &in[0], &out[0], ax, err, errlen);
	return resize_nearest(g, n, &in[0], &out[0], ax, err, errlen);
}

/* ---- generators ---------------------------------------------------------------- */

int kf_cpu_iota(KF_RT_CPU_ARGS)
{
	kf_tensor *y = &out[0];
	int a = kf_rt_axis(kf_attr_int(g, n, "axis", 0), y->rank);
	if (a < 0)
		return kf_rt_fail(err, errlen, "iota axis out of range for rank %d", y->rank);
	int64_t inner = 1, numel = kf_tensor_numel(y);
	for (int d = a + 1; d < y->rank; d++)
		inner *= y->dim[d];
	bool fl = kf_dtype_is_float(y->dtype);
	for (int64_t e = 0; e < numel; e++) {
		int64_t v = (e / inner) % y->dim[a];
		if (fl)
			kf_tensor_set(y, e, (double)v);
		else
			kf_tensor_set_i64(y, e, v);
	}
	return 0;
}

int kf_cpu_shape(KF_RT_CPU_ARGS)
{
	int64_t lo = kf_attr_int(g, n, "start", 0), hi = kf_attr_int(g, n, "end", in[0].rank);
	kf_shape_range(in[0].rank, &lo, &hi);
	for (int64_t i = lo; i < hi; i++)
		kf_tensor_set_i64(&out[0], i - lo, in[0].dim[i]);
	return 0;
}

/* An opaque op runs as the op its symbol names, when a plugin registered
 * one with a CPU function. */
int kf_cpu_opaque(KF_RT_CPU_ARGS)
{
	const char *name = kf_str(g->ctx, kf_N(g, n)->sym);
	int op = kf_node_impl_op(g, n);
	if (op < 0 || !kf_op(g->ctx, op)->cpu)
		return kf_rt_fail(err, errlen, "opaque op @%s has no implementation (a plugin that registers an op "
					       "named '%s' with a CPU function runs it)", name, name);
	return kf_op(g->ctx, op)->cpu(g, n, in, nin, out, nout, err, errlen);
}
