/* emit_index.c: the loop kernels' index ops, the ops that compute where
 * they read (gather, gather_elements, pad, resize): each gives the value of
 * node n's result at index variable ix as a temporary, through the loop
 * emitter's index arithmetic (emit_elementwise.c, emit_loop_int.h).  Split
 * from emit_elementwise.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "emit_loop_int.h"

/* An index variable for index value t<ti> into a dim of D: negative from
 * the end, clamped into [0, D) (a GPU cannot stop on a bad index as the
 * interpreter does). */
static int clamped_index(kx *k, int ti, int64_t D, int64_t sD)
{
	kf_buf ce = {0};
	kf_buf_printf(&ce, "kf_min(kf_max((%s)(t%d < 0 ? t%d + ", kx_it(k), ti, ti);
	kx_dim(k, &ce, D, sD);
	kf_buf_printf(&ce, " : t%d), (%s)0), (%s)", ti, kx_it(k), kx_it(k));
	kx_dimd(k, &ce, D, sD, -1);
	kf_buf_putc(&ce, ')');
	return kx_ix_add(k, &ce, IXF_OTHER, 0, 0);
}

/* gather(data, indices) {axis}: the index tensor read at the coordinates
 * the result takes from it, that value (negative from the end, clamped into
 * the dim: a GPU cannot stop on a bad index as the interpreter does) at
 * `axis` of the data. */
int kx_gather_at(kx *k, kf_nid n, const kf_type *out, const kf_type *sout, int ix)
{
	kf_graph *g = k->g;
	kf_vid x = kf_in(g, n, 0), iv = kf_in(g, n, 1);
	const kf_type *xt = kf_vtype(g, x), *it = kf_vtype(g, iv), *sxt = kx_stype(k, x);
	int a = (int)kf_attr_int(g, n, "axis", 0), q = it->rank;
	if (a < 0)
		a += xt->rank;
	int64_t sx[KF_MAX_RANK], si[KF_MAX_RANK], ssx[KF_MAX_RANK], ssi[KF_MAX_RANK];
	kx_strides(k, xt, sxt, sx, ssx);
	kx_strides(k, it, kx_stype(k, iv), si, ssi);
	char xs[16];
	kx_ix_name(ix, xs, sizeof xs);
	/* the element of the index tensor */
	kf_buf ie = {0};
	int nterm = 0;
	for (int j = 0; j < q && ix != IX_ZERO; j++) {
		if (it->dim[j] == 1)
			continue;
		if (nterm++)
			kf_buf_puts(&ie, " + ");
		kx_coord(k, &ie, out, sout, a + j, xs);
		if (si[j] != 1) {
			kf_buf_puts(&ie, " * ");
			kx_dim(k, &ie, si[j], ssi[j]);
		}
	}
	int iix = kx_ix_add(k, &ie, nterm ? IXF_OTHER : -2, 0, 0);
	int ti = kx_value_at(k, iv, iix);
	if (ti < 0)
		return -1;
	int cix = clamped_index(k, ti, xt->dim[a], sxt->dim[a]);
	kf_buf de = {0};
	kf_buf_printf(&de, "i%d * ", cix);
	kx_dim(k, &de, sx[a], ssx[a]);
	for (int d = 0; d < out->rank && ix != IX_ZERO; d++) {
		if ((d >= a && d < a + q) || out->dim[d] == 1)
			continue;
		kf_buf_puts(&de, " + ");
		kx_coord(k, &de, out, sout, d, xs);
		int e = d < a ? d : d - q + 1;
		if (sx[e] != 1) {
			kf_buf_puts(&de, " * ");
			kx_dim(k, &de, sx[e], ssx[e]);
		}
	}
	return kx_value_at(k, x, kx_ix_add(k, &de, IXF_OTHER, 0, 0));
}

/* gather_elements(data, indices) {axis}: the index read at the result's
 * own position (one shape), clamped into the dim as gather's is, replaces
 * the `axis` coordinate of the data read. */
int kx_gather_elements_at(kx *k, kf_nid n, const kf_type *out, const kf_type *sout, int ix)
{
	kf_graph *g = k->g;
	kf_vid x = kf_in(g, n, 0), iv = kf_in(g, n, 1);
	const kf_type *xt = kf_vtype(g, x), *sxt = kx_stype(k, x);
	int a = (int)kf_attr_int(g, n, "axis", 0);
	if (a < 0)
		a += xt->rank;
	int64_t sx[KF_MAX_RANK], ssx[KF_MAX_RANK];
	kx_strides(k, xt, sxt, sx, ssx);
	char xs[16];
	kx_ix_name(ix, xs, sizeof xs);
	int ti = kx_value_at(k, iv, ix);
	if (ti < 0)
		return -1;
	int cix = clamped_index(k, ti, xt->dim[a], sxt->dim[a]);
	kf_buf de = {0};
	kf_buf_printf(&de, "i%d * ", cix);
	kx_dim(k, &de, sx[a], ssx[a]);
	for (int d = 0; d < out->rank && ix != IX_ZERO; d++) {
		if (d == a || out->dim[d] == 1)
			continue;
		kf_buf_puts(&de, " + ");
		kx_coord(k, &de, out, sout, d, xs);
		if (sx[d] != 1) {
			kf_buf_puts(&de, " * ");
			kx_dim(k, &de, sx[d], ssx[d]);
		}
	}
	return kx_value_at(k, x, kx_ix_add(k, &de, IXF_OTHER, 0, 0));
}

/* pad {pads, mode, value}: per padded dim the input coordinate of the
 * output one (edge clamps, wrap wraps, reflect folds back without the
 * edge); in constant mode the read is clamped in and a select puts the
 * value where the coordinate fell outside. */
int kx_pad_at(kx *k, kf_nid n, const kf_type *out, const kf_type *sout, int ix)
{
	kf_graph *g = k->g;
	kf_vid x = kf_in(g, n, 0);
	const kf_type *xt = kf_vtype(g, x);
	int64_t p[2 * KF_MAX_RANK], sx[KF_MAX_RANK];
	int r = xt->rank;
	if (kf_attr_ints(g, n, "pads", p, 2 * KF_MAX_RANK) != 2 * r)
		return kx_fail(k, "pad without 2 pads per dim");
	kx_strides(k, xt, NULL, sx, NULL);
	const char *mode = kf_attr_str(g, n, "mode", "constant"), *it = kx_it(k);
	bool constant = !strcmp(mode, "constant");
	char xs[16];
	kx_ix_name(ix, xs, sizeof xs);
	kf_buf de = {0}, valid = {0};
	int nterm = 0;
	for (int d = 0; d < r; d++) {
		int64_t b = p[d], D = xt->dim[d];
		if (out->dim[d] == 1 && D == 1 && b == 0)
			continue;
		kf_buf ce = {0};
		kf_buf_printf(&ce, "(%s)", it);
		if (ix == IX_ZERO)
			kf_buf_putc(&ce, '0');
		else
			kx_coord(k, &ce, out, sout, d, xs);
		if (b)
			kf_buf_printf(&ce, " - (%s)%lld", it, (long long)b);
		int s = kx_ix_add(k, &ce, IXF_OTHER, 0, 0), m = s;
		if (b || p[d + r]) {
			kf_buf me = {0};
			if (constant) {
				kf_buf_printf(&valid, "%si%d >= 0 && i%d < %lld", valid.n ? " && " : "", s, s, (long long)D);
				kf_buf_printf(&me, "kf_min(kf_max(i%d, (%s)0), (%s)%lld)", s, it, it, (long long)(D - 1));
			} else if (!strcmp(mode, "edge")) {
				kf_buf_printf(&me, "kf_min(kf_max(i%d, (%s)0), (%s)%lld)", s, it, it, (long long)(D - 1));
			} else if (!strcmp(mode, "wrap")) {
				kf_buf_printf(&me, "((i%d %% %lld) + %lld) %% %lld", s, (long long)D, (long long)D, (long long)D);
			} else if (D == 1) { /* reflect of one element: itself */
				kf_buf_puts(&me, "0");
			} else {
				long long P = 2 * (D - 1);
				kf_buf_printf(&me, "((i%d %% %lld) + %lld) %% %lld < %lld ? ((i%d %% %lld) + %lld) %% %lld : "
						   "%lld - ((i%d %% %lld) + %lld) %% %lld",
					      s, P, P, P, (long long)D, s, P, P, P, P, s, P, P, P);
			}
			m = kx_ix_add(k, &me, IXF_OTHER, 0, 0);
		}
		kf_buf_printf(&de, "%si%d", nterm++ ? " + " : "", m);
		if (sx[d] != 1)
			kf_buf_printf(&de, " * %lld", (long long)sx[d]);
	}
	int t = kx_value_at(k, x, kx_ix_add(k, &de, nterm ? IXF_OTHER : -2, 0, 0));
	if (t < 0 || !valid.n) {
		kf_buf_free(&valid);
		return t;
	}
	kf_dtype dt = kx_dt(k, kf_res(g, n, 0));
	kf_buf e = {0};
	kf_buf_printf(&e, "(%s) ? t%d : ", valid.p, t);
	double v = kf_attr_float(g, n, "value", 0.0);
	kx_literal(&e, dt, v, (long long)v);
	kf_buf_free(&valid);
	return kx_tmp(k, kf_res(g, n, 0), ix, kx_ct(dt), &e);
}

/* resize's input coordinate of output coordinate `c` (text) on one dim, as
 * double text (the modes of ONNX Resize, as cpu_index.c computes them). */
static void rs_coord_expr(kf_buf *e, const char *mode, const char *c, double s, int64_t in, double outlen)
{
	if (!strcmp(mode, "align_corners"))
		outlen == 1 ? kf_buf_puts(e, "0.0")
			    : kf_buf_printf(e, "((double)(%s) * %.17g)", c, (double)(in - 1) / (outlen - 1));
	else if (!strcmp(mode, "asymmetric"))
		kf_buf_printf(e, "((double)(%s) / %.17g)", c, s);
	else if (!strcmp(mode, "tf_half_pixel_for_nn"))
		kf_buf_printf(e, "(((double)(%s) + 0.5) / %.17g)", c, s);
	else if (!strcmp(mode, "pytorch_half_pixel") && !(outlen > 1))
		kf_buf_puts(e, "0.0");
	else
		kf_buf_printf(e, "(((double)(%s) + 0.5) / %.17g - 0.5)", c, s);
}

/* resize {mode, coordinate_transformation_mode, nearest_mode, scales,
 * sizes, cubic_coeff_a, exclude_outside}: per dim the input coordinate of
 * the output one; nearest reads the rounded one, linear the 2 and cubic
 * the 4 elements around it on each dim it interpolates, T^k of them for k
 * such dims, weighted (neighbours clamped into the input, as the
 * interpreter: cpu_index.c). */
/* A resize's source index: per dim the elements it reads (tap[d][0] alone
 * where the dim is not interpolated) and, for the ni interpolated dims
 * interp[], each tap's weight as text. */
typedef struct {
	int tap[KF_MAX_RANK][4], interp[KF_MAX_RANK], ni, T;
	kf_buf w[KF_MAX_RANK][4];
} rs_src;

/* Keys' cubic kernel (kf_rs_cub) and, for exclude_outside, tap j's weight
 * of coordinate c on a dim of D elements with the taps past the edge left
 * out and the rest renormalised (kf_rs_cubx). */
static const char rs_cubic_helpers[] =
	"#ifndef KF_RS_CUBIC\n#define KF_RS_CUBIC\n"
	"__device__ __forceinline__ double kf_rs_cub(double x, double a) {\n"
	"  x = fabs(x);\n"
	"  return x <= 1.0 ? ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0\n"
	"       : x < 2.0 ? ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a : 0.0;\n}\n"
	"__device__ __forceinline__ double kf_rs_cubx(double c, int j, double a, long long D) {\n"
	"  const double f = floor(c), t = c - f;\n  double s = 0.0, wj = 0.0;\n"
	"  for (int i = 0; i < 4; i++) {\n"
	"    const long long e = (long long)f - 1 + i;\n"
	"    const double w = e < 0 || e >= D ? 0.0 : kf_rs_cub(t + 1.0 - i, a);\n"
	"    s += w;\n    if (i == j) wj = w;\n  }\n"
	"  return s != 0.0 ? wj / s : 0.0;\n}\n#endif\n";

/* Fills dim d of *src for output dim O of input dim D at scale s. */
static void rs_dim(kx *k, kf_nid n, const kf_type *out, const kf_type *sout, int ix, int d, int64_t D, double s,
		   rs_src *src)
{
	kf_graph *g = k->g;
	const char *mode = kf_attr_str(g, n, "mode", "nearest");
	const char *cmode = kf_attr_str(g, n, "coordinate_transformation_mode", "half_pixel");
	const char *nmode = kf_attr_str(g, n, "nearest_mode", "round_prefer_floor"), *it = kx_it(k);
	int64_t O = out->dim[d];
	double outlen = (double)D * s;
	if (kf_attr_get(g, n, "sizes") && D > 0) {
		s = (double)O / (double)D;
		outlen = (double)O;
	}
	char xs[16];
	kx_ix_name(ix, xs, sizeof xs);
	kf_buf c = {0}, ce = {0};
	if (ix == IX_ZERO)
		kf_buf_putc(&c, '0');
	else
		kx_coord(k, &c, out, sout, d, xs);
	/* a dim the map leaves alone (batch, channels) is read as it is: the
	 * coordinates are the integers, where every mode puts all the weight
	 * on the element itself */
	bool ident = D == O && (!strcmp(cmode, "align_corners") ||
				(s == 1 && (!strcmp(cmode, "half_pixel") || !strcmp(cmode, "asymmetric") ||
					    (!strcmp(cmode, "pytorch_half_pixel") && outlen > 1))));
	if (ident) {
		src->tap[d][0] = kx_ix_add(k, &c, ix == IX_ZERO ? -2 : IXF_OTHER, 0, 0);
		return;
	}
	kf_buf_putc(&c, '\0');
	rs_coord_expr(&ce, cmode, c.p, s, D, outlen);
	kf_buf_putc(&ce, '\0');
	if (!strcmp(mode, "nearest")) {
		kf_buf e = {0};
		const char *rnd = !strcmp(nmode, "floor") ? "floor(%s)" : !strcmp(nmode, "ceil") ? "ceil(%s)"
				: !strcmp(nmode, "round_prefer_ceil") ? "floor(%s + 0.5)" : "ceil(%s - 0.5)";
		kf_buf_printf(&e, "kf_min(kf_max((%s)", it);
		kf_buf_printf(&e, rnd, ce.p);
		kf_buf_printf(&e, ", (%s)0), (%s)%lld)", it, it, (long long)(D - 1));
		src->tap[d][0] = kx_ix_add(k, &e, IXF_OTHER, 0, 0);
	} else {
		bool cubic = src->T == 4, excl = kf_attr_int(g, n, "exclude_outside", 0) != 0;
		double a = kf_attr_float(g, n, "cubic_coeff_a", -0.75);
		for (int j = 0; j < src->T; j++) {
			kf_buf e = {0};
			kf_buf_printf(&e, "kf_min(kf_max((%s)floor(%s)", it, ce.p);
			if (j - cubic)
				kf_buf_printf(&e, " %c %d", j - cubic < 0 ? '-' : '+', abs(j - cubic));
			kf_buf_printf(&e, ", (%s)0), (%s)%lld)", it, it, (long long)(D - 1));
			src->tap[d][j] = kx_ix_add(k, &e, IXF_OTHER, 0, 0);
			kf_buf *w = &src->w[src->ni][j];
			if (!cubic)
				kf_buf_printf(w, j ? "(%s - floor(%s))" : "(1.0 - (%s - floor(%s)))", ce.p, ce.p);
			else if (excl)
				kf_buf_printf(w, "kf_rs_cubx(%s, %d, %.17g, %lldLL)", ce.p, j, a, (long long)D);
			else
				kf_buf_printf(w, "kf_rs_cub(%s - floor(%s) + %d.0, %.17g)", ce.p, ce.p, 1 - j, a);
		}
		src->interp[src->ni++] = d;
	}
	kf_buf_free(&c);
	kf_buf_free(&ce);
}

/* The weighted sum over the T^ni tap combinations of *src into acc (the
 * element read, for nearest); -1 when a read fails. */
static int rs_corners(kx *k, kf_vid x, kf_dtype dt, const rs_src *src, kf_buf *acc)
{
	const kf_type *xt = kf_vtype(k->g, x);
	int r = xt->rank, ni = src->ni, T = src->T;
	int64_t sx[KF_MAX_RANK], combos = 1;
	kx_strides(k, xt, NULL, sx, NULL);
	for (int j = 0; j < ni; j++)
		combos *= T;
	for (int64_t cmb = 0; cmb < combos; cmb++) {
		kf_buf ie = {0};
		int pick[KF_MAX_RANK] = {0}; /* the tap of each interpolated dim */
		for (int j = 0, q = (int)cmb; j < ni; j++, q /= T)
			pick[j] = q % T;
		for (int d = 0, j = 0; d < r; d++) {
			int id = src->tap[d][0];
			if (j < ni && src->interp[j] == d)
				id = src->tap[d][pick[j++]];
			if (id == IX_ZERO)
				kf_buf_printf(&ie, "%s0", d ? " + " : "");
			else
				kf_buf_printf(&ie, "%si%d * %lld", d ? " + " : "", id, (long long)sx[d]);
		}
		int t = kx_value_at(k, x, kx_ix_add(k, &ie, r ? IXF_OTHER : -2, 0, 0));
		if (t < 0)
			return -1;
		/* the weight: the product of each interpolated dim's tap weight */
		kf_buf_printf(acc, "%s(%s)(", cmb ? " + " : "", kx_ct(dt));
		for (int j = 0; j < ni; j++)
			kf_buf_printf(acc, "%s%s", j ? " * " : "", src->w[j][pick[j]].p);
		kf_buf_printf(acc, "%s) * t%d", ni ? "" : "1.0", t);
	}
	if (!ni) { /* nearest: the element read */
		acc->n = 0;
		kf_buf_printf(acc, "t%d", k->ntmp - 1);
	}
	return 0;
}

int kx_resize_at(kx *k, kf_nid n, const kf_type *out, const kf_type *sout, int ix)
{
	kf_graph *g = k->g;
	kf_vid x = kf_in(g, n, 0);
	const kf_type *xt = kf_vtype(g, x);
	const kf_attrval *sc = kf_attr_get(g, n, "scales");
	int r = xt->rank;
	if (!sc || sc->kind != KF_ATTR_LIST || sc->n != (uint32_t)r)
		return kx_fail(k, "resize without one scale per dim");
	const char *mode = kf_attr_str(g, n, "mode", "nearest");
	rs_src src = {.ni = 0, .T = !strcmp(mode, "cubic") ? 4 : 2};
	if (!strcmp(mode, "cubic"))
		kf_buf_puts(&k->decl, rs_cubic_helpers);
	for (int d = 0; d < r; d++)
		rs_dim(k, n, out, sout, ix, d, xt->dim[d],
		       sc->list[d].kind == KF_ATTR_FLOAT ? sc->list[d].f : (double)sc->list[d].i, &src);
	kf_dtype dt = kx_dt(k, kf_res(g, n, 0));
	kf_buf acc = {0};
	int rc = rs_corners(k, x, dt, &src, &acc);
	for (int j = 0; j < src.ni; j++)
		for (int t = 0; t < src.T; t++)
			kf_buf_free(&src.w[j][t]);
	if (rc < 0) {
		kf_buf_free(&acc);
		return -1;
	}
	return kx_tmp(k, kf_res(g, n, 0), ix, kx_ct(dt), &acc);
}

