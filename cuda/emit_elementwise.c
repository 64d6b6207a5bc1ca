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
#include "emit_loop_int.h"
#include "view.h"

/* ---- index arithmetic ------------------------------------------------------- */

/* Every function here writes dims through kx_dim with their symbolic form
 * (ts, the value's type in the symbolic graph: kx_stype; NULL: t itself),
 * so a sized plan's kernel reads the sizes from its arguments. */

void kx_strides(const kx *k, const kf_type *t, const kf_type *ts, int64_t *st, int64_t *ss)
{
	int64_t s = 1, sy = 1;
	for (int d = t->rank - 1; d >= 0; d--) {
		st[d] = s;
		if (ss)
			ss[d] = sy;
		s *= t->dim[d];
		sy = kx_smul(k, sy, ts ? ts->dim[d] : t->dim[d]);
	}
}

/* Coordinate d of linear index x in shape t, as text. */
void kx_coord(kx *k, kf_buf *o, const kf_type *t, const kf_type *ts, int d, const char *x)
{
	int64_t st[KF_MAX_RANK], ss[KF_MAX_RANK], before = 1;
	kx_strides(k, t, ts, st, ss);
	for (int e = 0; e < d; e++)
		before *= t->dim[e];
	kf_buf_putc(o, '(');
	if (st[d] != 1) {
		kf_buf_printf(o, "(%s / ", x);
		kx_dim(k, o, st[d], ss[d]);
		kf_buf_putc(o, ')');
	} else {
		kf_buf_puts(o, x);
	}
	if (before != 1) {
		kf_buf_puts(o, " % ");
		kx_dim(k, o, t->dim[d], ts ? ts->dim[d] : t->dim[d]);
	}
	kf_buf_putc(o, ')');
}

/* One run's term of kx_bcast_expr: ((x / div) % mod) * mul, each part left
 * out where it is 1 (mod where !wrap); (value, symbolic form) pairs. */
static void bcast_term(kx *k, kf_buf *o, const char *x, int64_t div, int64_t sdiv, bool wrap, int64_t mod,
		       int64_t smod, int64_t mul, int64_t smul)
{
	kf_buf_putc(o, '(');
	if (div != 1) {
		kf_buf_printf(o, "(%s / ", x);
		kx_dim(k, o, div, sdiv);
		kf_buf_putc(o, ')');
	} else {
		kf_buf_puts(o, x);
	}
	if (wrap) {
		kf_buf_puts(o, " % ");
		kx_dim(k, o, mod, smod);
	}
	kf_buf_putc(o, ')');
	if (mul != 1) {
		kf_buf_puts(o, " * ");
		kx_dim(k, o, mul, smul);
	}
}

int kx_bcast_expr(kx *k, const kf_type *from, const kf_type *sfrom, const kf_type *to, const kf_type *sto,
		  const char *x, kf_buf *o, int64_t *arg, int64_t *sarg)
{
	int64_t nf = kf_type_numel(from), nt = kf_type_numel(to);
	if (!sfrom)
		sfrom = from;
	if (!sto)
		sto = to;
	if (nt == 1) {
		kf_buf_putc(o, '0');
		return -2;
	}
	if (nt == nf) {
		kf_buf_puts(o, x);
		return IXF_ROOT;
	}
	int r = from->rank, s = to->rank;
	int64_t sf[KF_MAX_RANK], ssf[KF_MAX_RANK], tdim[KF_MAX_RANK], stt[KF_MAX_RANK], sstt[KF_MAX_RANK];
	kx_strides(k, from, sfrom, sf, ssf);
	int64_t acc = 1, sacc = 1;
	for (int d = r - 1; d >= 0; d--) {
		tdim[d] = d < r - s ? 1 : to->dim[d - (r - s)];
		stt[d] = acc;
		sstt[d] = sacc;
		acc *= tdim[d];
		sacc = kx_smul(k, sacc, d < r - s ? 1 : sto->dim[d - (r - s)]);
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
		int64_t P = 1, sP = 1;
		while (d < r && (from->dim[d] == 1 || tdim[d] == from->dim[d])) {
			if (from->dim[d] != 1)
				d1 = d;
			P *= from->dim[d];
			sP = kx_smul(k, sP, sfrom->dim[d]);
			d++;
		}
		int64_t before = 1;
		for (int e = 0; e < d0; e++)
			before *= from->dim[e];
		if (nterm++)
			kf_buf_puts(o, " + ");
		bcast_term(k, o, x, sf[d1], ssf[d1], before != 1, P, sP, stt[d1], sstt[d1]);
		if (nterm == 1) {
			if (sf[d1] == 1 && stt[d1] == 1 && before != 1) {
				form = IXF_MOD;
				*arg = P;
				*sarg = sP;
			} else if (before == 1 && stt[d1] == 1) {
				form = IXF_DIV;
				*arg = sf[d1];
				*sarg = ssf[d1];
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
int kx_ix_add(kx *k, kf_buf *expr, int form, int64_t arg, int64_t sarg)
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
	k->ix[id] = (kx_ix){expr->p, form, arg, sarg};
	kf_buf_printf(&k->cur, "      const %s i%d = %s;\n", kx_it(k), id, expr->p);
	return id;
}

void kx_ix_name(int ix, char *buf, size_t n)
{
	if (ix == IX_ZERO)
		snprintf(buf, n, "0");
	else
		snprintf(buf, n, "i%d", ix);
}

/* Index into value u read at index ix of `from` (value v's shape) under
 * broadcasting. */
static int ix_bcast(kx *k, int ix, kf_vid v, kf_vid u)
{
	if (ix == IX_ZERO)
		return IX_ZERO;
	char x[16];
	kx_ix_name(ix, x, sizeof x);
	kf_buf e = {0};
	int64_t arg = 0, sarg = 0;
	int form = kx_bcast_expr(k, kf_vtype(k->g, v), kx_stype(k, v), kf_vtype(k->g, u), kx_stype(k, u), x, &e, &arg,
				 &sarg);
	if (form == IXF_ROOT) {
		kf_buf_free(&e);
		return ix;
	}
	if (ix != 0 && form != -2)
		form = IXF_OTHER;
	return kx_ix_add(k, &e, form, arg, sarg);
}

/* ---- values ----------------------------------------------------------------- */


int kx_tmp(kx *k, kf_vid v, int ix, const char *ct, kf_buf *expr)
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
	int64_t nv = k->n / k->V, tile = (int64_t)k->k->block * k->U;
	/* a sized plan: unless every size is whole tiles (768*T is not) */
	return nv % tile != 0 || (kx_varies(k, k->sn) && !kx_multiple(k, k->n, k->sn, tile * k->V));
}

static void guard(kf_buf *b, kx *k)
{
	if (!tile_guard(k))
		return;
	kf_buf_printf(b, "if (b + j * %lld < ", (long long)vec_stride(k));
	kx_dimfloor(k, b, k->n, k->sn, k->V);
	kf_buf_puts(b, ") ");
}

static int load_param(kx *k, kf_vid v, int p, int ix)
{
	kf_dtype dt = kx_dt(k, v);
	size_t sz = kf_dtype_size(dt);
	kf_buf e = {0};
	int V = k->V, U = k->U;
	int form = ix == IX_ZERO ? -2 : k->ix[ix].form;
	int64_t arg = ix == IX_ZERO ? 0 : k->ix[ix].arg, sarg = ix == IX_ZERO ? 0 : k->ix[ix].sarg;
	bool vec = V > 1 && sz * (size_t)V <= 16 &&
		   (form == IXF_ROOT || (form == IXF_MOD && kx_multiple(k, arg, sarg, V)));
	if (vec) {
		/* one 16-byte (or narrower) load per vector of the thread, all
		 * issued before the lanes use them; a tensor read at the loop
		 * index is streamed (cache hints), a broadcast row is reused */
		int t = k->ntmp++;
		kf_buf at = {0};
		kf_buf_printf(&at, "%sb + j * %lld", form == IXF_ROOT ? "" : "(", (long long)vec_stride(k));
		if (form != IXF_ROOT) {
			kf_buf_puts(&at, ") % ");
			kx_dim(k, &at, arg, sarg);
		}
		kf_buf_putc(&at, '\0');
		kf_buf_printf(&k->pre, "    __align__(16) %s t%d[%d];\n#pragma unroll\n    for (int j = 0; j < %d; j++) ",
			      kx_st(dt), t, U * V, U);
		guard(&k->pre, k);
		kf_buf_printf(&k->pre, "%s<%s, %d>(t%d + j * %d, p%d + %s);\n",
			      form == IXF_ROOT ? kx_vld_stream(k) : "kf_vld", kx_st(dt), V, t, V, p, at.p);
		kf_buf_free(&at);
		kx_load(&e, dt, "t%d[j * %d + l]", t, V);
	} else if (V > 1 && form == IXF_DIV && kx_multiple(k, arg, sarg, V)) {
		/* the same element for every lane of a vector */
		int t = k->ntmp++;
		kf_buf_printf(&k->pre, "    %s t%d[%d];\n#pragma unroll\n    for (int j = 0; j < %d; j++) ", kx_ct(dt), t,
			      U, U);
		guard(&k->pre, k);
		kf_buf_printf(&k->pre, "t%d[j] = ", t);
		kf_buf dv = {0};
		kx_dim(k, &dv, arg, sarg);
		kf_buf_putc(&dv, '\0');
		kx_load(&k->pre, dt, "p%d[(b + j * %lld) / %s]", p, (long long)vec_stride(k), dv.p);
		kf_buf_free(&dv);
		kf_buf_puts(&k->pre, ";\n");
		kf_buf_printf(&e, "t%d[j]", t);
	} else {
		char x[16];
		kx_ix_name(ix, x, sizeof x);
		kx_load(&e, dt, "p%d[%s]", p, x);
	}
	return kx_tmp(k, v, ix, kx_ct(dt), &e);
}

/* The index into operand value u of a value v read at coordinates
 * start[d] + coord_d(ix in v) * step[d] (transpose: perm maps v's dims to
 * u's dims).  The offset of start is written as a number (starts are
 * static: a slice's ends and a split's parts may be symbolic, a start past
 * a symbolic part is written from its symbolic form sstart when given). */
static int ix_affine(kx *k, int ix, kf_vid v, kf_vid u, const int64_t *perm, const int64_t *start,
		     const int64_t *sstart, const int64_t *step)
{
	const kf_type *out = kf_vtype(k->g, v), *sout = kx_stype(k, v), *in = kf_vtype(k->g, u);
	int64_t si[KF_MAX_RANK], ssi[KF_MAX_RANK], off = 0, soff = 0;
	kx_strides(k, in, kx_stype(k, u), si, ssi);
	char x[16];
	kx_ix_name(ix, x, sizeof x);
	kf_buf e = {0};
	int nterm = 0;
	for (int d = 0; d < in->rank; d++) {
		off += (start ? start[d] : 0) * si[d];
		/* a sum of monomials has no dim: the offset is symbolic only when
		 * one dim contributes */
		soff = kx_sadd(k, soff, kx_smul(k, sstart ? sstart[d] : start ? start[d] : 0, ssi[d]));
	}
	for (int d = 0; d < out->rank; d++) {
		if (out->dim[d] == 1)
			continue;
		int id = perm ? (int)perm[d] : d;
		int64_t mul = si[id] * (step ? step[id] : 1), smul = kx_smul(k, ssi[id], step ? step[id] : 1);
		if (nterm++)
			kf_buf_puts(&e, " + ");
		if (ix == IX_ZERO)
			kf_buf_putc(&e, '0');
		else
			kx_coord(k, &e, out, sout, d, x);
		if (mul != 1) {
			kf_buf_puts(&e, " * ");
			kx_dim(k, &e, mul, smul);
		}
	}
	if (off || !nterm) {
		kf_buf_puts(&e, nterm ? " + " : "");
		kx_dim(k, &e, off, soff);
	}
	return kx_ix_add(k, &e, IXF_OTHER, 0, 0);
}

/* concat along axis: the operands' offsets along it are written as
 * numbers unless one operand before is symbolic along it and alone so
 * (then its symbolic size) */
static int concat_at(kx *k, kf_nid n, kf_vid v, int ix)
{
	kf_graph *g = k->g;
	const kf_node *x = kf_N(g, n);
	const kf_type *out = kf_vtype(g, v), *sout = kx_stype(k, v);
	int axis = (int)kf_attr_int(g, n, "axis", 0);
	if (axis < 0)
		axis += out->rank;
	char xs[16];
	kx_ix_name(ix, xs, sizeof xs);
	kf_buf ce = {0};
	kx_coord(k, &ce, out, sout, axis, xs);
	int cix = kx_ix_add(k, &ce, IXF_OTHER, 0, 0);
	int *parts = malloc(x->nin * sizeof *parts);
	int64_t off = 0, soff = 0, *offs = malloc(2 * x->nin * sizeof *offs), *soffs = offs + x->nin;
	for (uint32_t i = 0; i < x->nin; i++) {
		kf_vid u = kf_in(g, n, i);
		const kf_type *in = kf_vtype(g, u), *sin = kx_stype(k, u);
		int64_t si[KF_MAX_RANK], ssi[KF_MAX_RANK];
		kx_strides(k, in, sin, si, ssi);
		/* the coordinate along axis is clamped into the operand so that
		 * every operand can be evaluated; the select below picks one */
		kf_buf e = {0};
		int nterm = 0;
		for (int d = 0; d < out->rank; d++) {
			if (in->dim[d] == 1 && d != axis)
				continue;
			if (nterm++)
				kf_buf_puts(&e, " + ");
			if (d == axis) {
				kf_buf_printf(&e, "kf_min(kf_max((%s)i%d - (%s)", kx_it(k), cix, kx_it(k));
				kx_dim(k, &e, off, soff);
				kf_buf_printf(&e, ", (%s)0), (%s)", kx_it(k), kx_it(k));
				kx_dimd(k, &e, in->dim[d], sin->dim[d], -1);
				kf_buf_puts(&e, ")");
			} else {
				kx_coord(k, &e, out, sout, d, xs);
			}
			if (si[d] != 1) {
				kf_buf_puts(&e, " * ");
				kx_dim(k, &e, si[d], ssi[d]);
			}
		}
		if (!nterm)
			kf_buf_putc(&e, '0');
		int pix = kx_ix_add(k, &e, IXF_OTHER, 0, 0);
		offs[i] = off;
		soffs[i] = soff;
		soff = kx_sadd(k, soff, sin->dim[axis]);
		off += in->dim[axis];
		parts[i] = kx_value_at(k, u, pix);
		if (parts[i] < 0) {
			free(parts);
			free(offs);
			return -1;
		}
	}
	kf_buf e = {0};
	for (uint32_t i = 0; i + 1 < x->nin; i++) {
		kf_buf_printf(&e, "i%d < ", cix);
		kx_dim(k, &e, offs[i + 1], i + 1 < x->nin ? soffs[i + 1] : 0);
		kf_buf_printf(&e, " ? t%d : ", parts[i]);
	}
	kf_buf_printf(&e, "t%d", parts[x->nin - 1]);
	free(parts);
	free(offs);
	return kx_tmp(k, kf_res(g, n, 0), ix, kx_ct(kx_dt(k, kf_res(g, n, 0))), &e);
}

/* Emits value v (of this kernel) at index ix into v's own shape; returns
 * its temporary, or -1. */
int kx_value_at(kx *k, kf_vid v, int ix)
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
	const kf_type *vt = kf_vtype(g, v), *sout = kx_stype(k, v);
	kf_type out = *vt;
	kf_dtype dt = (kf_dtype)vt->dtype;
	char xs[16];
	kx_ix_name(ix, xs, sizeof xs);
	kf_buf e = {0};
	switch (x->op) {
	case KF_OP_CONST:
		kx_const_elem(k, n, xs, &e);
		return kx_tmp(k, v, ix, kx_ct(dt), &e);
	case KF_OP_RESHAPE:
		return kx_value_at(k, kf_in(g, n, 0), ix);
	case KF_OP_BROADCAST_TO:
		return kx_value_at(k, kf_in(g, n, 0), ix_bcast(k, ix, v, kf_in(g, n, 0)));
	case KF_OP_TRANSPOSE: {
		kf_type in = *kf_vtype(g, kf_in(g, n, 0));
		int64_t perm[KF_MAX_RANK];
		if (kf_attr_ints(g, n, "perm", perm, KF_MAX_RANK) != in.rank)
			for (int d = 0; d < in.rank; d++)
				perm[d] = in.rank - 1 - d;
		for (int d = 0; d < in.rank; d++)
			if (perm[d] < 0)
				perm[d] += in.rank;
		return kx_value_at(k, kf_in(g, n, 0), ix_affine(k, ix, v, kf_in(g, n, 0), perm, NULL, NULL, NULL));
	}
	case KF_OP_SLICE: {
		int64_t start[KF_MAX_RANK], step[KF_MAX_RANK];
		kf_slice_geom(g, n, start, step);
		return kx_value_at(k, kf_in(g, n, 0), ix_affine(k, ix, v, kf_in(g, n, 0), NULL, start, NULL, step));
	}
	case KF_OP_SPLIT: {
		kf_type in = *kf_vtype(g, kf_in(g, n, 0));
		int axis = (int)kf_attr_int(g, n, "axis", 0);
		if (axis < 0)
			axis += in.rank;
		int64_t start[KF_MAX_RANK] = {0}, sstart[KF_MAX_RANK] = {0};
		for (uint32_t r = 0; r < kf_V(g, v)->idx; r++) {
			start[axis] += kf_vtype(g, x->res0 + r)->dim[axis];
			sstart[axis] = kx_sadd(k, sstart[axis], kx_stype(k, x->res0 + r)->dim[axis]);
		}
		return kx_value_at(k, kf_in(g, n, 0), ix_affine(k, ix, v, kf_in(g, n, 0), NULL, start, sstart, NULL));
	}
	case KF_OP_CONCAT:
		return concat_at(k, n, v, ix);
	case KF_OP_GATHER:
		return kx_gather_at(k, n, &out, sout, ix);
	case KF_OP_GATHER_ELEMENTS:
		return kx_gather_elements_at(k, n, &out, sout, ix);
	case KF_OP_PAD:
		return kx_pad_at(k, n, &out, sout, ix);
	case KF_OP_RESIZE:
		return kx_resize_at(k, n, &out, sout, ix);
	case KF_OP_IOTA: { /* the coordinate along axis */
		int a = (int)kf_attr_int(g, n, "axis", 0);
		if (a < 0)
			a += out.rank;
		kf_buf_printf(&e, "(%s)", kx_ct(dt));
		if (ix == IX_ZERO)
			kf_buf_putc(&e, '0');
		else
			kx_coord(k, &e, &out, sout, a, xs);
		return kx_tmp(k, v, ix, kx_ct(dt), &e);
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
		int t = kx_value_at(k, u, ix_bcast(k, ix, v, u));
		if (t < 0)
			return -1;
		snprintf(names[i], sizeof names[i], "t%d", t);
	}
	if (kx_op_expr(k, n, a, &e) != 0) {
		kf_buf_free(&e);
		return -1;
	}
	return kx_tmp(k, v, ix, kx_ct(dt), &e);
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
	k->ix[0] = (kx_ix){r.p, IXF_ROOT, 0, 0};
	k->nix = 1;
}

/* The lanes' body: every output the loop writes (sel[j], or all when sel
 * is NULL) at i0. */
static int lanes(kx *k, bool vec, const bool *sel)
{
	for (uint32_t j = 0; j < k->nout; j++) {
		if (sel && !sel[j])
			continue;
		int t = kx_value_at(k, k->out[j], 0);
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
	(void)nv;
	if (k->k->per_sm < 0) {
		kf_buf_printf(b, "  {\n    const %s b = ((%s)blockIdx.x * %lld + threadIdx.x) * %d;\n", it, it,
			      (long long)tile, V);
	} else {
		kf_buf_printf(b, "  for (%s b = ((%s)blockIdx.x * %lld + threadIdx.x) * %d; b < ", it, it, (long long)tile, V);
		kx_dimfloor(k, b, k->n, k->sn, V);
		kf_buf_printf(b, "; b += (%s)gridDim.x * %lld) {\n", it, (long long)(tile * V));
	}
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

/* The lanes of a loop over N elements (symbolic form sN) of outputs V
 * lanes wide at most: V, or one for few elements (a sized plan: few at
 * its bucket's size, so that the bucket shares the text). */
static int lanes_for(const kx *k, int64_t N, int64_t sN, int V)
{
	return kx_rep(k, N, sN) < 4 * V ? 1 : V;
}

/* The loop over the N elements (symbolic form sN) of the outputs sel
 * selects (NULL: all), V lanes wide (lanes_for), with a scalar tail. */
static int loop(kx *k, int64_t N, int64_t sN, int V, const bool *sel)
{
	const char *it = kx_it(k);
	k->n = N;
	k->sn = sN;
	V = lanes_for(k, N, sN, V);
	int64_t nv = N / V;
	if (V > 1) {
		k->V = V;
		if (vector_part(k, nv, sel) != 0)
			return -1;
	}
	if (!kx_multiple(k, N, sN, V) || V == 1) {
		k->V = 1;
		reset_region(k);
		if (lanes(k, false, sel) != 0)
			return -1;
		kf_buf_printf(&k->b, "  for (%s i0 = ", it);
		if (V > 1)
			kx_dimfloor(k, &k->b, N, sN, V);
		else
			kf_buf_puts(&k->b, "0");
		kf_buf_printf(&k->b, " + blockIdx.x * (%s)blockDim.x + threadIdx.x; i0 < ", it);
		kx_dim(k, &k->b, N, sN);
		kf_buf_printf(&k->b, "; i0 += (%s)gridDim.x * blockDim.x) {\n", it);
		kf_buf_put(&k->b, k->cur.p ? k->cur.p : "", k->cur.n);
		kf_buf_puts(&k->b, "  }\n");
	}
	return 0;
}

int kx_emit_loop(kx *k)
{
	/* the largest output sizes the grid; outputs of other sizes (a split
	 * of unequal parts) get loops of their own over the same grid */
	int64_t N = 0, sN = 0;
	bool uneven = false;
	for (uint32_t j = 0; j < k->nout; j++) {
		int64_t n = kx_numel(k, k->out[j]);
		uneven |= j && n != kx_numel(k, k->out[0]);
		if (n > N || j == 0) {
			N = n;
			sN = kx_snumel(k, k->out[j]);
		}
	}
	size_t maxsz = 1;
	for (uint32_t j = 0; j < k->nout; j++)
		if (kf_dtype_size(kx_dt(k, k->out[j])) > maxsz)
			maxsz = kf_dtype_size(kx_dt(k, k->out[j]));
	int V = (int)(16 / maxsz);
	if (V > 8)
		V = 8;
	int Vmax = lanes_for(k, N, sN, V);
	int64_t nv = N / Vmax;
	int B = k->tune.ew_block;
	k->k->block = B;
	k->U = k->tune.ew_vec;
	/* a grid of one block per tile must fit gridDim.x; else it loops, as
	 * it must when loops of several sizes share it */
	int grid = k->tune.ew_grid;
	int64_t units = Vmax > 1 ? (nv + (int64_t)B * k->U - 1) / ((int64_t)B * k->U) : (N + B - 1) / B;
	/* (a sized plan decides at its bucket's size: the text says which) */
	int64_t runits = k->dyn ? kx_rep(k, N, sN) / Vmax / ((int64_t)B * k->U) + 1 : units;
	kx_grid(k, grid == 0 && (units > 0x7fffffff || runits > 0x7fffffff || uneven) ? -1 : grid, units);
	if (!uneven)
		return loop(k, N, sN, V, NULL);
	bool *sel = calloc(k->nout, sizeof *sel), *done = calloc(k->nout, sizeof *done);
	int rc = sel && done ? 0 : kx_fail(k, "out of memory");
	for (uint32_t j = 0; rc == 0 && j < k->nout; j++) {
		if (done[j])
			continue;
		int64_t n = kx_numel(k, k->out[j]);
		for (uint32_t i = 0; i < k->nout; i++)
			done[i] |= sel[i] = kx_numel(k, k->out[i]) == n;
		rc = loop(k, n, kx_snumel(k, k->out[j]), V, sel);
	}
	free(sel);
	free(done);
	return rc;
}
