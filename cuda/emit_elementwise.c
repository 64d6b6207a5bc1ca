/* emit_elementwise.c: loop kernels (kind = "elementwise", and every
 * element-wise, broadcast or injective op run alone).
 *
 * One iteration space per element count of the outputs (one when they are
 * all as large; a split of unequal sizes has several, written as loops one
 * after the other over one grid, each computing its own outputs).  Each thread
 * handles U vectors of V consecutive elements (16 bytes of the widest
 * output) per trip, a block a tile of block * U vectors; one block per tile,
 * or a grid-stride loop over the tiles (KFUSE_EW_*: kx_tune).  Inputs read
 * at the loop index, or broadcast along leading dims (a row vector: index %
 * n), are loaded as one 16-byte vector per vector, all before the lanes;
 * inputs broadcast along trailing dims (index / m) once per vector;
 * anything else per lane.  Values are computed on demand at the
 * index each consumer needs (an injective op maps the index), memoised per
 * (value, index).  A scalar loop handles the N % V tail.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "emit_int.h"
#include "view.h"

/* ---- index arithmetic ------------------------------------------------------- */

static void strides(const kf_type *t, int64_t *st)
{
	int64_t s = 1;
	for (int d = t->rank - 1; d >= 0; d--) {
		st[d] = s;
		s *= t->dim[d];
	}
}

/* Coordinate d of linear index x in shape t, as text. */
static void coord(kf_buf *o, const kf_type *t, int d, const char *x)
{
	int64_t st[KF_MAX_RANK], before = 1;
	strides(t, st);
	for (int e = 0; e < d; e++)
		before *= t->dim[e];
	kf_buf_putc(o, '(');
	if (st[d] != 1)
		kf_buf_printf(o, "(%s / %lld)", x, (long long)st[d]);
	else
		kf_buf_puts(o, x);
	if (before != 1)
		kf_buf_printf(o, " %% %lld", (long long)t->dim[d]);
	kf_buf_putc(o, ')');
}

int kx_bcast_expr(const kf_type *from, const kf_type *to, const char *x, kf_buf *o, int64_t *arg)
{
	int64_t nf = kf_type_numel(from), nt = kf_type_numel(to);
	if (nt == 1) {
		kf_buf_putc(o, '0');
		return -2;
	}
	if (nt == nf) {
		kf_buf_puts(o, x);
		return IXF_ROOT;
	}
	int r = from->rank, s = to->rank;
	int64_t sf[KF_MAX_RANK], tdim[KF_MAX_RANK], stt[KF_MAX_RANK];
	strides(from, sf);
	int64_t acc = 1;
	for (int d = r - 1; d >= 0; d--) {
		tdim[d] = d < r - s ? 1 : to->dim[d - (r - s)];
		stt[d] = acc;
		acc *= tdim[d];
	}
	/* runs of kept dims (same size in both, > 1); dims of size 1 in from
	 * are transparent, broadcast dims end a run */
	int nterm = 0, form = IXF_OTHER;
	int d = 0;
	while (d < r) {
		if (from->dim[d] == 1 || tdim[d] != from->dim[d]) {
			d++;
			continue;
		}
		int d0 = d, d1 = d;
		int64_t P = 1;
		while (d < r && (from->dim[d] == 1 || tdim[d] == from->dim[d])) {
			if (from->dim[d] != 1)
				d1 = d;
			P *= from->dim[d];
			d++;
		}
		int64_t before = 1;
		for (int e = 0; e < d0; e++)
			before *= from->dim[e];
		if (nterm++)
			kf_buf_puts(o, " + ");
		kf_buf_putc(o, '(');
		if (sf[d1] != 1)
			kf_buf_printf(o, "(%s / %lld)", x, (long long)sf[d1]);
		else
			kf_buf_puts(o, x);
		if (before != 1)
			kf_buf_printf(o, " %% %lld", (long long)P);
		kf_buf_putc(o, ')');
		if (stt[d1] != 1)
			kf_buf_printf(o, " * %lld", (long long)stt[d1]);
		if (nterm == 1) {
			if (sf[d1] == 1 && stt[d1] == 1 && before != 1) {
				form = IXF_MOD;
				*arg = P;
			} else if (before == 1 && stt[d1] == 1) {
				form = IXF_DIV;
				*arg = sf[d1];
			}
		} else {
			form = IXF_OTHER;
		}
	}
	if (!nterm) {
		kf_buf_putc(o, '0');
		return -2;
	}
	return form;
}

/* An index variable: memoised by its text; returns its number, or IX_ZERO. */
static int ix_add(kx *k, kf_buf *expr, int form, int64_t arg)
{
	if (form == -2) {
		kf_buf_free(expr);
		return IX_ZERO;
	}
	kf_buf_putc(expr, '\0');
	for (uint32_t i = 0; i < k->nix; i++)
		if (strcmp(k->ix[i].expr, expr->p) == 0) {
			kf_buf_free(expr);
			return (int)i;
		}
	if (k->nix == k->capix) {
		k->capix = k->capix ? k->capix * 2 : 16;
		k->ix = realloc(k->ix, k->capix * sizeof *k->ix);
	}
	int id = (int)k->nix++;
	k->ix[id] = (kx_ix){expr->p, form, arg};
	kf_buf_printf(&k->cur, "      const %s i%d = %s;\n", kx_it(k), id, expr->p);
	return id;
}

static void ix_name(int ix, char *buf, size_t n)
{
	if (ix == IX_ZERO)
		snprintf(buf, n, "0");
	else
		snprintf(buf, n, "i%d", ix);
}

/* Index into `to` read at index ix of `from` under broadcasting. */
static int ix_bcast(kx *k, int ix, const kf_type *from, const kf_type *to)
{
	if (ix == IX_ZERO)
		return IX_ZERO;
	char x[16];
	ix_name(ix, x, sizeof x);
	kf_buf e = {0};
	int64_t arg = 0;
	int form = kx_bcast_expr(from, to, x, &e, &arg);
	if (form == IXF_ROOT) {
		kf_buf_free(&e);
		return ix;
	}
	if (ix != 0 && form != -2)
		form = IXF_OTHER;
	return ix_add(k, &e, form, arg);
}

/* ---- values ----------------------------------------------------------------- */

static int value_at(kx *k, kf_vid v, int ix);

static int tmp(kx *k, kf_vid v, int ix, const char *ct, kf_buf *expr)
{
	int t = k->ntmp++;
	kf_buf_putc(expr, '\0');
	kf_buf_printf(&k->cur, "      const %s t%d = %s;\n", ct, t, expr->p);
	kf_buf_free(expr);
	if (k->nmemo == k->capmemo) {
		k->capmemo = k->capmemo ? k->capmemo * 2 : 32;
		k->memo = realloc(k->memo, k->capmemo * sizeof *k->memo);
	}
	k->memo[k->nmemo++] = (kx_memo){v, ix, t};
	return t;
}

/* Loop kernels: vector j of a thread starts at element b + j * (block * V)
 * (so that each load instruction of a warp reads 32 consecutive vectors);
 * a guard is needed when the tiles of block * U vectors do not divide the
 * vectorised part (the last tile is partial). */
static int64_t vec_stride(const kx *k) { return (int64_t)k->k->block * k->V; }

static bool tile_guard(const kx *k)
{
	int64_t nv = k->n / k->V;
	return nv % ((int64_t)k->k->block * k->U) != 0;
}

static void guard(kf_buf *b, const kx *k)
{
	if (tile_guard(k))
		kf_buf_printf(b, "if (b + j * %lld < %lld) ", (long long)vec_stride(k), (long long)(k->n / k->V * k->V));
}

static int load_param(kx *k, kf_vid v, int p, int ix)
{
	kf_dtype dt = kx_dt(k, v);
	size_t sz = kf_dtype_size(dt);
	kf_buf e = {0};
	int V = k->V, U = k->U;
	int form = ix == IX_ZERO ? -2 : k->ix[ix].form;
	int64_t arg = ix == IX_ZERO ? 0 : k->ix[ix].arg;
	bool vec = V > 1 && sz * (size_t)V <= 16 &&
		   (form == IXF_ROOT || (form == IXF_MOD && arg % V == 0));
	if (vec) {
		/* one 16-byte (or narrower) load per vector of the thread, all
		 * issued before the lanes use them; a tensor read at the loop
		 * index is streamed (cache hints), a broadcast row is reused */
		int t = k->ntmp++;
		char at[64];
		if (form == IXF_ROOT)
			snprintf(at, sizeof at, "b + j * %lld", (long long)vec_stride(k));
		else
			snprintf(at, sizeof at, "(b + j * %lld) %% %lld", (long long)vec_stride(k), (long long)arg);
		kf_buf_printf(&k->pre, "    __align__(16) %s t%d[%d];\n#pragma unroll\n    for (int j = 0; j < %d; j++) ",
			      kx_st(dt), t, U * V, U);
		guard(&k->pre, k);
		kf_buf_printf(&k->pre, "%s<%s, %d>(t%d + j * %d, p%d + %s);\n",
			      form == IXF_ROOT ? kx_vld_stream(k) : "kf_vld", kx_st(dt), V, t, V, p, at);
		kx_load(&e, dt, "t%d[j * %d + l]", t, V);
	} else if (V > 1 && form == IXF_DIV && arg % V == 0) {
		/* the same element for every lane of a vector */
		int t = k->ntmp++;
		kf_buf_printf(&k->pre, "    %s t%d[%d];\n#pragma unroll\n    for (int j = 0; j < %d; j++) ", kx_ct(dt), t,
			      U, U);
		guard(&k->pre, k);
		kf_buf_printf(&k->pre, "t%d[j] = ", t);
		kx_load(&k->pre, dt, "p%d[(b + j * %lld) / %lld]", p, (long long)vec_stride(k), (long long)arg);
		kf_buf_puts(&k->pre, ";\n");
		kf_buf_printf(&e, "t%d[j]", t);
	} else {
		char x[16];
		ix_name(ix, x, sizeof x);
		kx_load(&e, dt, "p%d[%s]", p, x);
	}
	return tmp(k, v, ix, kx_ct(dt), &e);
}

/* The index into operand type `in` of a value read at coordinates
 * start[d] + coord_d(ix in out) * step[d] (transpose: perm maps out dims to
 * operand dims). */
static int ix_affine(kx *k, int ix, const kf_type *out, const kf_type *in, const int64_t *perm,
		     const int64_t *start, const int64_t *step)
{
	int64_t si[KF_MAX_RANK], off = 0;
	strides(in, si);
	char x[16];
	ix_name(ix, x, sizeof x);
	kf_buf e = {0};
	int nterm = 0;
	for (int d = 0; d < in->rank; d++)
		off += (start ? start[d] : 0) * si[d];
	for (int d = 0; d < out->rank; d++) {
		if (out->dim[d] == 1)
			continue;
		int id = perm ? (int)perm[d] : d;
		int64_t mul = si[id] * (step ? step[id] : 1);
		if (nterm++)
			kf_buf_puts(&e, " + ");
		if (ix == IX_ZERO)
			kf_buf_putc(&e, '0');
		else
			coord(&e, out, d, x);
		if (mul != 1)
			kf_buf_printf(&e, " * %lld", (long long)mul);
	}
	if (off || !nterm)
		kf_buf_printf(&e, "%s%lld", nterm ? " + " : "", (long long)off);
	return ix_add(k, &e, IXF_OTHER, 0);
}

static int concat_at(kx *k, kf_nid n, const kf_type *out, int ix)
{
	kf_graph *g = k->g;
	const kf_node *x = kf_N(g, n);
	int axis = (int)kf_attr_int(g, n, "axis", 0);
	if (axis < 0)
		axis += out->rank;
	char xs[16];
	ix_name(ix, xs, sizeof xs);
	kf_buf ce = {0};
	coord(&ce, out, axis, xs);
	int cix = ix_add(k, &ce, IXF_OTHER, 0);
	int *parts = malloc(x->nin * sizeof *parts);
	int64_t off = 0, *offs = malloc(x->nin * sizeof *offs);
	for (uint32_t i = 0; i < x->nin; i++) {
		kf_vid u = kf_in(g, n, i);
		const kf_type *in = kf_vtype(g, u);
		int64_t si[KF_MAX_RANK];
		strides(in, si);
		/* the coordinate along axis is clamped into the operand so that
		 * every operand can be evaluated; the select below picks one */
		kf_buf e = {0};
		int nterm = 0;
		for (int d = 0; d < out->rank; d++) {
			if (in->dim[d] == 1 && d != axis)
				continue;
			if (nterm++)
				kf_buf_puts(&e, " + ");
			if (d == axis)
				kf_buf_printf(&e, "kf_min(kf_max((%s)i%d - (%s)%lld, (%s)0), (%s)%lld)", kx_it(k),
					      cix, kx_it(k), (long long)off, kx_it(k), kx_it(k),
					      (long long)(in->dim[d] - 1));
			else
				coord(&e, out, d, xs);
			if (si[d] != 1)
				kf_buf_printf(&e, " * %lld", (long long)si[d]);
		}
		if (!nterm)
			kf_buf_putc(&e, '0');
		int pix = ix_add(k, &e, IXF_OTHER, 0);
		offs[i] = off;
		off += in->dim[axis];
		parts[i] = value_at(k, u, pix);
		if (parts[i] < 0) {
			free(parts);
			free(offs);
			return -1;
		}
	}
	kf_buf e = {0};
	for (uint32_t i = 0; i + 1 < x->nin; i++)
		kf_buf_printf(&e, "i%d < %lld ? t%d : ", cix, (long long)offs[i + 1], parts[i]);
	kf_buf_printf(&e, "t%d", parts[x->nin - 1]);
	free(parts);
	free(offs);
	return tmp(k, kf_res(g, n, 0), ix, kx_ct(kx_dt(k, kf_res(g, n, 0))), &e);
}

/* gather(data, indices) {axis}: the index tensor read at the coordinates
 * the result takes from it, that value (negative from the end, clamped into
 * the dim: a GPU cannot stop on a bad index as the interpreter does) at
 * `axis` of the data. */
static int gather_at(kx *k, kf_nid n, const kf_type *out, int ix)
{
	kf_graph *g = k->g;
	kf_vid x = kf_in(g, n, 0), iv = kf_in(g, n, 1);
	const kf_type *xt = kf_vtype(g, x), *it = kf_vtype(g, iv);
	int a = (int)kf_attr_int(g, n, "axis", 0), q = it->rank;
	if (a < 0)
		a += xt->rank;
	int64_t sx[KF_MAX_RANK], si[KF_MAX_RANK];
	strides(xt, sx);
	strides(it, si);
	char xs[16];
	ix_name(ix, xs, sizeof xs);
	/* the element of the index tensor */
	kf_buf ie = {0};
	int nterm = 0;
	for (int j = 0; j < q && ix != IX_ZERO; j++) {
		if (it->dim[j] == 1)
			continue;
		if (nterm++)
			kf_buf_puts(&ie, " + ");
		coord(&ie, out, a + j, xs);
		if (si[j] != 1)
			kf_buf_printf(&ie, " * %lld", (long long)si[j]);
	}
	int iix = ix_add(k, &ie, nterm ? IXF_OTHER : -2, 0);
	int ti = value_at(k, iv, iix);
	if (ti < 0)
		return -1;
	int64_t D = xt->dim[a];
	kf_buf ce = {0};
	kf_buf_printf(&ce, "kf_min(kf_max((%s)(t%d < 0 ? t%d + %lld : t%d), (%s)0), (%s)%lld)", kx_it(k), ti, ti,
		      (long long)D, ti, kx_it(k), kx_it(k), (long long)(D - 1));
	int cix = ix_add(k, &ce, IXF_OTHER, 0);
	kf_buf de = {0};
	kf_buf_printf(&de, "i%d * %lld", cix, (long long)sx[a]);
	for (int d = 0; d < out->rank && ix != IX_ZERO; d++) {
		if ((d >= a && d < a + q) || out->dim[d] == 1)
			continue;
		kf_buf_puts(&de, " + ");
		coord(&de, out, d, xs);
		int64_t st = sx[d < a ? d : d - q + 1];
		if (st != 1)
			kf_buf_printf(&de, " * %lld", (long long)st);
	}
	return value_at(k, x, ix_add(k, &de, IXF_OTHER, 0));
}

/* gather_elements(data, indices) {axis}: the index read at the result's
 * own position (one shape), clamped into the dim as gather's is, replaces
 * the `axis` coordinate of the data read. */
static int gather_elements_at(kx *k, kf_nid n, const kf_type *out, int ix)
{
	kf_graph *g = k->g;
	kf_vid x = kf_in(g, n, 0), iv = kf_in(g, n, 1);
	const kf_type *xt = kf_vtype(g, x);
	int a = (int)kf_attr_int(g, n, "axis", 0);
	if (a < 0)
		a += xt->rank;
	int64_t sx[KF_MAX_RANK];
	strides(xt, sx);
	char xs[16];
	ix_name(ix, xs, sizeof xs);
	int ti = value_at(k, iv, ix);
	if (ti < 0)
		return -1;
	int64_t D = xt->dim[a];
	kf_buf ce = {0};
	kf_buf_printf(&ce, "kf_min(kf_max((%s)(t%d < 0 ? t%d + %lld : t%d), (%s)0), (%s)%lld)", kx_it(k), ti, ti,
		      (long long)D, ti, kx_it(k), kx_it(k), (long long)(D - 1));
	int cix = ix_add(k, &ce, IXF_OTHER, 0);
	kf_buf de = {0};
	kf_buf_printf(&de, "i%d * %lld", cix, (long long)sx[a]);
	for (int d = 0; d < out->rank && ix != IX_ZERO; d++) {
		if (d == a || out->dim[d] == 1)
			continue;
		kf_buf_puts(&de, " + ");
		coord(&de, out, d, xs);
		if (sx[d] != 1)
			kf_buf_printf(&de, " * %lld", (long long)sx[d]);
	}
	return value_at(k, x, ix_add(k, &de, IXF_OTHER, 0));
}

/* pad {pads, mode, value}: per padded dim the input coordinate of the
 * output one (edge clamps, wrap wraps, reflect folds back without the
 * edge); in constant mode the read is clamped in and a select puts the
 * value where the coordinate fell outside. */
static int pad_at(kx *k, kf_nid n, const kf_type *out, int ix)
{
	kf_graph *g = k->g;
	kf_vid x = kf_in(g, n, 0);
	const kf_type *xt = kf_vtype(g, x);
	int64_t p[2 * KF_MAX_RANK], sx[KF_MAX_RANK];
	int r = xt->rank;
	if (kf_attr_ints(g, n, "pads", p, 2 * KF_MAX_RANK) != 2 * r)
		return kx_fail(k, "pad without 2 pads per dim");
	strides(xt, sx);
	const char *mode = kf_attr_str(g, n, "mode", "constant"), *it = kx_it(k);
	bool constant = !strcmp(mode, "constant");
	char xs[16];
	ix_name(ix, xs, sizeof xs);
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
			coord(&ce, out, d, xs);
		if (b)
			kf_buf_printf(&ce, " - (%s)%lld", it, (long long)b);
		int s = ix_add(k, &ce, IXF_OTHER, 0), m = s;
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
			m = ix_add(k, &me, IXF_OTHER, 0);
		}
		kf_buf_printf(&de, "%si%d", nterm++ ? " + " : "", m);
		if (sx[d] != 1)
			kf_buf_printf(&de, " * %lld", (long long)sx[d]);
	}
	int t = value_at(k, x, ix_add(k, &de, nterm ? IXF_OTHER : -2, 0));
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
	return tmp(k, kf_res(g, n, 0), ix, kx_ct(dt), &e);
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
 * sizes}: per dim the input coordinate of the output one; nearest reads
 * the rounded one, linear the 2^k corners of the dims it interpolates,
 * weighted (neighbours clamped into the input, as the interpreter). */
static int resize_at(kx *k, kf_nid n, const kf_type *out, int ix)
{
	kf_graph *g = k->g;
	kf_vid x = kf_in(g, n, 0);
	const kf_type *xt = kf_vtype(g, x);
	const kf_attrval *sc = kf_attr_get(g, n, "scales");
	int r = xt->rank;
	if (!sc || sc->kind != KF_ATTR_LIST || sc->n != (uint32_t)r)
		return kx_fail(k, "resize without one scale per dim");
	bool linear = !strcmp(kf_attr_str(g, n, "mode", "nearest"), "linear"), sizes = kf_attr_get(g, n, "sizes");
	const char *cmode = kf_attr_str(g, n, "coordinate_transformation_mode", "half_pixel");
	const char *nmode = kf_attr_str(g, n, "nearest_mode", "round_prefer_floor"), *it = kx_it(k);
	int64_t sx[KF_MAX_RANK];
	strides(xt, sx);
	char xs[16];
	ix_name(ix, xs, sizeof xs);
	int lo[KF_MAX_RANK], hi[KF_MAX_RANK], interp[KF_MAX_RANK], ni = 0;
	kf_buf w[KF_MAX_RANK] = {{0}};
	for (int d = 0; d < r; d++) {
		int64_t D = xt->dim[d], O = out->dim[d];
		double s = sc->list[d].kind == KF_ATTR_FLOAT ? sc->list[d].f : (double)sc->list[d].i;
		double outlen = (double)D * s;
		if (sizes && D > 0) {
			s = (double)O / (double)D;
			outlen = (double)O;
		}
		kf_buf c = {0}, ce = {0};
		if (ix == IX_ZERO)
			kf_buf_putc(&c, '0');
		else
			coord(&c, out, d, xs);
		/* a dim the map leaves alone (batch, channels) is read as it is */
		bool ident = D == O && (!strcmp(cmode, "align_corners") ||
					(s == 1 && (!strcmp(cmode, "half_pixel") || !strcmp(cmode, "asymmetric") ||
						    (!strcmp(cmode, "pytorch_half_pixel") && outlen > 1))));
		if (ident) {
			lo[d] = ix_add(k, &c, ix == IX_ZERO ? -2 : IXF_OTHER, 0);
			continue;
		}
		kf_buf_putc(&c, '\0');
		rs_coord_expr(&ce, cmode, c.p, s, D, outlen);
		kf_buf_putc(&ce, '\0');
		kf_buf e = {0};
		if (!linear) {
			const char *rnd = !strcmp(nmode, "floor") ? "floor(%s)" : !strcmp(nmode, "ceil") ? "ceil(%s)"
					: !strcmp(nmode, "round_prefer_ceil") ? "floor(%s + 0.5)" : "ceil(%s - 0.5)";
			kf_buf_printf(&e, "kf_min(kf_max((%s)", it);
			kf_buf_printf(&e, rnd, ce.p);
			kf_buf_printf(&e, ", (%s)0), (%s)%lld)", it, it, (long long)(D - 1));
			lo[d] = ix_add(k, &e, IXF_OTHER, 0);
		} else {
			kf_buf_printf(&e, "kf_min(kf_max((%s)floor(%s), (%s)0), (%s)%lld)", it, ce.p, it, it, (long long)(D - 1));
			lo[d] = ix_add(k, &e, IXF_OTHER, 0);
			kf_buf h = {0};
			kf_buf_printf(&h, "kf_min(kf_max((%s)floor(%s) + 1, (%s)0), (%s)%lld)", it, ce.p, it, it,
				      (long long)(D - 1));
			hi[d] = ix_add(k, &h, IXF_OTHER, 0);
			kf_buf_printf(&w[ni], "(%s - floor(%s))", ce.p, ce.p);
			interp[ni++] = d;
		}
		kf_buf_free(&c);
		kf_buf_free(&ce);
	}
	kf_dtype dt = kx_dt(k, kf_res(g, n, 0));
	kf_buf acc = {0};
	int rc = 0;
	for (int corner = 0; corner < (1 << ni) && rc == 0; corner++) {
		kf_buf ie = {0};
		for (int d = 0, j = 0; d < r; d++) {
			bool up = j < ni && interp[j] == d && (corner >> j & 1);
			j += j < ni && interp[j] == d;
			int id = up ? hi[d] : lo[d];
			if (id == IX_ZERO)
				kf_buf_printf(&ie, "%s0", d ? " + " : "");
			else
				kf_buf_printf(&ie, "%si%d * %lld", d ? " + " : "", id, (long long)sx[d]);
		}
		int t = value_at(k, x, ix_add(k, &ie, r ? IXF_OTHER : -2, 0));
		if (t < 0) {
			rc = -1;
			break;
		}
		kf_buf_printf(&acc, "%s(%s)(", corner ? " + " : "", kx_ct(dt));
		/* the weight: per interpolated dim its fraction, or 1 - it
		 * (each factor closed where it ends: (1.0 - a) * b) */
		for (int j = 0; j < ni; j++)
			kf_buf_printf(&acc, "%s%s%s%s", j ? " * " : "", corner >> j & 1 ? "" : "(1.0 - ", w[j].p,
				      corner >> j & 1 ? "" : ")");
		kf_buf_printf(&acc, "%s) * t%d", ni ? "" : "1.0", t);
	}
	for (int j = 0; j < ni; j++)
		kf_buf_free(&w[j]);
	if (rc < 0) {
		kf_buf_free(&acc);
		return -1;
	}
	if (!ni) { /* nearest: the element read */
		acc.n = 0;
		kf_buf_printf(&acc, "t%d", k->ntmp - 1);
	}
	return tmp(k, kf_res(g, n, 0), ix, kx_ct(dt), &acc);
}

/* Emits value v (of this kernel) at index ix into v's own shape; returns
 * its temporary, or -1. */
static int value_at(kx *k, kf_vid v, int ix)
{
	for (uint32_t i = 0; i < k->nmemo; i++)
		if (k->memo[i].v == v && k->memo[i].ix == ix)
			return k->memo[i].t;
	kf_graph *g = k->g;
	int p = kx_param(k, v);
	if (p >= 0)
		return load_param(k, v, p, ix);
	kf_nid n = kf_def(g, v);
	const kf_node *x = kf_N(g, n);
	const kf_type *vt = kf_vtype(g, v);
	kf_type out = *vt;
	kf_dtype dt = (kf_dtype)vt->dtype;
	char xs[16];
	ix_name(ix, xs, sizeof xs);
	kf_buf e = {0};
	switch (x->op) {
	case KF_OP_CONST:
		kx_const_elem(k, n, xs, &e);
		return tmp(k, v, ix, kx_ct(dt), &e);
	case KF_OP_RESHAPE:
		return value_at(k, kf_in(g, n, 0), ix);
	case KF_OP_BROADCAST_TO:
		return value_at(k, kf_in(g, n, 0), ix_bcast(k, ix, &out, kf_vtype(g, kf_in(g, n, 0))));
	case KF_OP_TRANSPOSE: {
		kf_type in = *kf_vtype(g, kf_in(g, n, 0));
		int64_t perm[KF_MAX_RANK];
		if (kf_attr_ints(g, n, "perm", perm, KF_MAX_RANK) != in.rank)
			for (int d = 0; d < in.rank; d++)
				perm[d] = in.rank - 1 - d;
		for (int d = 0; d < in.rank; d++)
			if (perm[d] < 0)
				perm[d] += in.rank;
		return value_at(k, kf_in(g, n, 0), ix_affine(k, ix, &out, &in, perm, NULL, NULL));
	}
	case KF_OP_SLICE: {
		kf_type in = *kf_vtype(g, kf_in(g, n, 0));
		int64_t start[KF_MAX_RANK], step[KF_MAX_RANK];
		kf_slice_geom(g, n, start, step);
		return value_at(k, kf_in(g, n, 0), ix_affine(k, ix, &out, &in, NULL, start, step));
	}
	case KF_OP_SPLIT: {
		kf_type in = *kf_vtype(g, kf_in(g, n, 0));
		int axis = (int)kf_attr_int(g, n, "axis", 0);
		if (axis < 0)
			axis += in.rank;
		int64_t start[KF_MAX_RANK] = {0};
		for (uint32_t r = 0; r < kf_V(g, v)->idx; r++)
			start[axis] += kf_vtype(g, x->res0 + r)->dim[axis];
		return value_at(k, kf_in(g, n, 0), ix_affine(k, ix, &out, &in, NULL, start, NULL));
	}
	case KF_OP_CONCAT:
		return concat_at(k, n, &out, ix);
	case KF_OP_GATHER:
		return gather_at(k, n, &out, ix);
	case KF_OP_GATHER_ELEMENTS:
		return gather_elements_at(k, n, &out, ix);
	case KF_OP_PAD:
		return pad_at(k, n, &out, ix);
	case KF_OP_RESIZE:
		return resize_at(k, n, &out, ix);
	case KF_OP_IOTA: { /* the coordinate along axis */
		int a = (int)kf_attr_int(g, n, "axis", 0);
		if (a < 0)
			a += out.rank;
		kf_buf_printf(&e, "(%s)", kx_ct(dt));
		if (ix == IX_ZERO)
			kf_buf_putc(&e, '0');
		else
			coord(&e, &out, a, xs);
		return tmp(k, v, ix, kx_ct(dt), &e);
	}
	default:
		break;
	}
	int trait = kf_op(k->c, x->op)->trait;
	if (trait != KF_TRAIT_ELEMENTWISE && trait != KF_TRAIT_BROADCAST)
		return kx_fail(k, "op '%s' cannot run in an element-wise kernel", kf_op(k->c, x->op)->name);
	char names[3][16];
	const char *a[3] = {names[0], names[1], names[2]};
	if (x->nin > 3)
		return kx_fail(k, "op '%s' has more than 3 operands", kf_op(k->c, x->op)->name);
	for (uint32_t i = 0; i < x->nin; i++) {
		kf_vid u = kf_in(g, n, i);
		int t = value_at(k, u, ix_bcast(k, ix, &out, kf_vtype(g, u)));
		if (t < 0)
			return -1;
		snprintf(names[i], sizeof names[i], "t%d", t);
	}
	if (kx_op_expr(k, n, a, &e) != 0) {
		kf_buf_free(&e);
		return -1;
	}
	return tmp(k, v, ix, kx_ct(dt), &e);
}

/* ---- the kernel ------------------------------------------------------------- */

static void reset_region(kx *k)
{
	for (uint32_t i = 0; i < k->nix; i++)
		free(k->ix[i].expr);
	k->nix = 0;
	k->nmemo = 0;
	k->pre.n = 0;
	k->cur.n = 0;
	/* index 0 is the root, declared by the loop */
	kf_buf r = {0};
	kf_buf_puts(&r, "i0");
	kf_buf_putc(&r, '\0');
	k->capix = k->capix ? k->capix : 16;
	k->ix = realloc(k->ix, k->capix * sizeof *k->ix);
	k->ix[0] = (kx_ix){r.p, IXF_ROOT, 0};
	k->nix = 1;
}

/* The lanes' body: every output the loop writes (sel[j], or all when sel
 * is NULL) at i0. */
static int lanes(kx *k, bool vec, const bool *sel)
{
	for (uint32_t j = 0; j < k->nout; j++) {
		if (sel && !sel[j])
			continue;
		int t = value_at(k, k->out[j], 0);
		if (t < 0)
			return -1;
		kf_dtype dt = kx_dt(k, k->out[j]);
		if (vec) {
			kf_buf_printf(&k->cur, "      r%u[j * %d + l] = ", j, k->V);
		} else {
			kf_buf_printf(&k->cur, "      o%u[i0] = ", j);
		}
		kx_store(&k->cur, dt, "t%d", t);
		kf_buf_puts(&k->cur, ";\n");
	}
	return 0;
}

/* The vectorised part: U vectors of V lanes per thread and trip; every
 * load of a trip is issued before the lanes (more bytes in flight per
 * thread), then the lanes, then the stores.  One tile of block * U
 * vectors per block: the grid covers the tiles once (no loop) or loops
 * over them (a grid-stride loop; the backend picks the grid). */
static int vector_part(kx *k, int64_t nv, const bool *sel)
{
	const char *it = kx_it(k);
	int V = k->V, U = k->U;
	int64_t S = vec_stride(k), tile = (int64_t)k->k->block * U;
	reset_region(k);
	if (lanes(k, true, sel) != 0)
		return -1;
	kf_buf *b = &k->b;
	if (k->k->per_sm < 0)
		kf_buf_printf(b, "  {\n    const %s b = ((%s)blockIdx.x * %lld + threadIdx.x) * %d;\n", it, it,
			      (long long)tile, V);
	else
		kf_buf_printf(b, "  for (%s b = ((%s)blockIdx.x * %lld + threadIdx.x) * %d; b < %lld; b += (%s)gridDim.x * %lld) {\n",
			      it, it, (long long)tile, V, (long long)(nv * V), it, (long long)(tile * V));
	kf_buf_put(b, k->pre.p ? k->pre.p : "", k->pre.n);
	for (uint32_t j = 0; j < k->nout; j++)
		if (!sel || sel[j])
			kf_buf_printf(b, "    __align__(16) %s r%u[%d];\n", kx_st(kx_dt(k, k->out[j])), j, U * V);
	kf_buf_printf(b, "#pragma unroll\n    for (int j = 0; j < %d; j++) ", U);
	guard(b, k);
	kf_buf_printf(b, "{\n#pragma unroll\n      for (int l = 0; l < %d; l++) {\n        const %s i0 = b + j * %lld + l;\n",
		      V, it, (long long)S);
	/* the lane body is written for one loop level; here it is in two */
	for (const char *p = k->cur.p, *end = k->cur.p + k->cur.n; p && p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p + 1) : (size_t)(end - p);
		kf_buf_puts(b, "  ");
		kf_buf_put(b, p, n);
		p += n;
	}
	kf_buf_puts(b, "      }\n    }\n");
	for (uint32_t j = 0; j < k->nout; j++) {
		if (sel && !sel[j])
			continue;
		kf_buf_printf(b, "#pragma unroll\n    for (int j = 0; j < %d; j++) ", U);
		guard(b, k);
		kf_buf_printf(b, "%s<%s, %d>(o%u + b + j * %lld, r%u + j * %d);\n", kx_vst_stream(k),
			      kx_st(kx_dt(k, k->out[j])), V, j, (long long)S, j, V);
	}
	kf_buf_puts(b, "  }\n");
	return 0;
}

/* The loop over the N elements of the outputs sel selects (NULL: all),
 * V lanes wide (one, for few elements), with a scalar tail. */
static int loop(kx *k, int64_t N, int V, const bool *sel)
{
	const char *it = kx_it(k);
	k->n = N;
	if (N < 4 * V)
		V = 1;
	int64_t nv = N / V;
	if (V > 1) {
		k->V = V;
		if (vector_part(k, nv, sel) != 0)
			return -1;
	}
	if (N % V != 0 || V == 1) {
		k->V = 1;
		reset_region(k);
		if (lanes(k, false, sel) != 0)
			return -1;
		kf_buf_printf(&k->b, "  for (%s i0 = %lld + blockIdx.x * (%s)blockDim.x + threadIdx.x; i0 < %lld; i0 += (%s)gridDim.x * blockDim.x) {\n",
			      it, (long long)(nv * V) * (V > 1), it, (long long)N, it);
		kf_buf_put(&k->b, k->cur.p ? k->cur.p : "", k->cur.n);
		kf_buf_puts(&k->b, "  }\n");
	}
	return 0;
}

int kx_emit_loop(kx *k)
{
	/* the largest output sizes the grid; outputs of other sizes (a split
	 * of unequal parts) get loops of their own over the same grid */
	int64_t N = 0;
	bool uneven = false;
	for (uint32_t j = 0; j < k->nout; j++) {
		int64_t n = kx_numel(k, k->out[j]);
		uneven |= j && n != kx_numel(k, k->out[0]);
		N = n > N ? n : N;
	}
	size_t maxsz = 1;
	for (uint32_t j = 0; j < k->nout; j++)
		if (kf_dtype_size(kx_dt(k, k->out[j])) > maxsz)
			maxsz = kf_dtype_size(kx_dt(k, k->out[j]));
	int V = (int)(16 / maxsz);
	if (V > 8)
		V = 8;
	int Vmax = N < 4 * V ? 1 : V;
	int64_t nv = N / Vmax;
	int B = k->tune.ew_block;
	k->k->block = B;
	k->U = k->tune.ew_vec;
	/* a grid of one block per tile must fit gridDim.x; else it loops, as
	 * it must when loops of several sizes share it */
	int grid = k->tune.ew_grid;
	int64_t units = Vmax > 1 ? (nv + (int64_t)B * k->U - 1) / ((int64_t)B * k->U) : (N + B - 1) / B;
	kx_grid(k, grid == 0 && (units > 0x7fffffff || uneven) ? -1 : grid, units);
	if (!uneven)
		return loop(k, N, V, NULL);
	bool *sel = calloc(k->nout, sizeof *sel), *done = calloc(k->nout, sizeof *done);
	int rc = sel && done ? 0 : kx_fail(k, "out of memory");
	for (uint32_t j = 0; rc == 0 && j < k->nout; j++) {
		if (done[j])
			continue;
		int64_t n = kx_numel(k, k->out[j]);
		for (uint32_t i = 0; i < k->nout; i++)
			done[i] |= sel[i] = kx_numel(k, k->out[i]) == n;
		rc = loop(k, n, V, sel);
	}
	free(sel);
	free(done);
	return rc;
}
