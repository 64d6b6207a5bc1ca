/* rewrite_attr.c: what one pattern node accepts of one graph value, apart
 * from the search: attributes (defaults, axes as sets, numbers within
 * rtol), constants (one value, broadcasting into the user) and type
 * constraints with their type variables (rewrite_match.c searches). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kf_int.h"
#include "rewrite_int.h"

/* ---- attributes ---------------------------------------------------------------- */

/* The value an op uses when the attribute is absent (docs/ops.md), so that a
 * pattern that spells out a default matches a node that leaves it out. */
bool kf_rwa_attr_default(const kf_ctx *c, int op, const char *key, kf_attrval *v)
{
	memset(v, 0, sizeof *v);
	if (!strcmp(key, "keepdims")) {
		v->kind = KF_ATTR_BOOL, v->b = true;
	} else if (!strcmp(key, "axis")) {
		v->kind = KF_ATTR_INT;
		v->i = op == KF_OP_SPLIT ? 0 : -1;
		if (op != KF_OP_SPLIT && op != KF_OP_SOFTMAX && op != KF_OP_LOG_SOFTMAX && op != KF_OP_LAYER_NORM)
			return false;
	} else if (!strcmp(key, "approximate")) {
		v->kind = KF_ATTR_STR, v->s = kf_lookup_str(c, "none", 4);
		return v->s != KF_NONE;
	} else if (!strcmp(key, "epsilon")) {
		v->kind = KF_ATTR_FLOAT, v->f = 1e-5;
	} else if (!strcmp(key, "alpha") || !strcmp(key, "beta")) {
		v->kind = KF_ATTR_FLOAT, v->f = 1.0;
	} else if (!strcmp(key, "trans_a") || !strcmp(key, "trans_b")) {
		v->kind = KF_ATTR_INT, v->i = 0;
	} else {
		return false;
	}
	return true;
}

static bool num_of(const kf_attrval *v, double *x)
{
	switch (v->kind) {
	case KF_ATTR_INT: *x = (double)v->i; return true;
	case KF_ATTR_FLOAT: *x = v->f; return true;
	case KF_ATTR_BOOL: *x = v->b; return true;
	default: return false;
	}
}

bool kf_rwa_close_to(double a, double b, double rtol)
{
	if (a == b)
		return true;
	/* an infinity is close to nothing else: inf - 0 <= rtol * inf holds */
	if (!isfinite(a) || !isfinite(b))
		return false;
	return fabs(a - b) <= rtol * fmax(fabs(a), fabs(b));
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

/* An axis list as a sorted set with negative axes counted from the end. */
static int axes_of(const kf_attrval *v, int rank, int64_t *out)
{
	int n = 0;
	if (v->kind == KF_ATTR_INT)
		out[n++] = v->i;
	else if (v->kind == KF_ATTR_LIST && v->n <= KF_MAX_RANK)
		for (uint32_t i = 0; i < v->n; i++) {
			if (v->list[i].kind != KF_ATTR_INT)
				return -1;
			out[n++] = v->list[i].i;
		}
	else
		return -1;
	for (int i = 0; i < n; i++)
		if (out[i] < 0)
			out[i] += rank;
	qsort(out, (size_t)n, sizeof *out, cmp_i64);
	return n;
}

/* Loose equality: numbers by value (1 == 1.0 == true) within rtol, axes as
 * normalised sets, lists element-wise. */
bool kf_rwa_attr_match(const kf_attrval *pa, const kf_attrval *na, bool axes, int rank, double rtol)
{
	if (axes) {
		int64_t x[KF_MAX_RANK], y[KF_MAX_RANK];
		int nx = axes_of(pa, rank, x), ny = axes_of(na, rank, y);
		return nx >= 0 && nx == ny && !memcmp(x, y, (size_t)nx * sizeof *x);
	}
	double a, b;
	if (num_of(pa, &a) && num_of(na, &b))
		return kf_rwa_close_to(a, b, rtol);
	if (pa->kind != na->kind)
		return false;
	if (pa->kind == KF_ATTR_LIST) {
		if (pa->n != na->n)
			return false;
		for (uint32_t i = 0; i < pa->n; i++)
			if (!kf_rwa_attr_match(&pa->list[i], &na->list[i], false, rank, rtol))
				return false;
		return true;
	}
	return kf_attrval_eq(pa, na);
}

/* ---- constants ------------------------------------------------------------------- */

/* The one value of a constant whose elements are all equal (a scalar, a splat
 * or a small dense literal of one repeated value). */
bool kf_rwa_const_scalar(const kf_graph *g, kf_nid n, double *v)
{
	const kf_node *nd = kf_N(g, n);
	const kf_const *k = nd->cst;
	if (!k || k->kind == KF_CONST_FILE || k->n == 0 || k->n > 4096)
		return false;
	bool fl = kf_dtype_is_float(kf_vtype(g, nd->res0)->dtype);
	if (fl ? !k->f : !k->i)
		return false;
	double x = fl ? k->f[0] : (double)k->i[0];
	for (uint64_t i = 1; i < k->n; i++)
		if ((fl ? k->f[i] : (double)k->i[i]) != x)
			return false;
	*v = x;
	return true;
}

/* A constant standing for a scalar must not widen its user's result: its
 * shape broadcasts into the user's result shape. */
bool kf_rwa_broadcasts_into(const kf_type *c, const kf_type *r)
{
	if (c->rank > r->rank)
		return false;
	for (int i = 1; i <= c->rank; i++) {
		int64_t cd = c->dim[c->rank - i], rd = r->dim[r->rank - i];
		if (cd != 1 && cd != rd)
			return false;
	}
	return true;
}

/* ---- type constraints ---------------------------------------------------------- */

/* Binds type variable tv to x, or checks it is x. */
bool kf_rwa_bind_tv(kf_rw_tvars *tv, int i, int64_t x, uint32_t *newly)
{
	uint32_t bit = 1u << i;
	if (tv->bound & bit)
		return tv->val[i] == x;
	tv->bound |= bit;
	tv->val[i] = x;
	*newly |= bit;
	return true;
}

void kf_rwa_unbind_tv(kf_rw_tvars *tv, uint32_t newly)
{
	tv->bound &= ~newly;
}

/* "T[N, D]": the constraint as written, for messages. */
void kf_rwa_ptype_str(kf_buf *b, const kf_pattern *p, const kf_ptype *t)
{
	if (t->dtype >= 0)
		kf_buf_puts(b, kf_dtype_name((kf_dtype)t->dtype));
	else if (t->dtype == -1)
		kf_buf_putc(b, '?');
	else
		kf_buf_puts(b, kf_str(p->ctx, p->tvname[-2 - t->dtype]));
	if (t->rank < 0)
		return;
	kf_buf_putc(b, '[');
	if (t->ellipsis)
		kf_buf_puts(b, t->rank ? "..., " : "...");
	for (int i = 0; i < t->rank; i++) {
		if (i)
			kf_buf_puts(b, ", ");
		if (t->dvar[i] == -1)
			kf_buf_printf(b, "%lld", (long long)t->dim[i]);
		else if (t->dvar[i] == -2)
			kf_buf_putc(b, '?');
		else
			kf_buf_puts(b, kf_str(p->ctx, p->tvname[t->dvar[i]]));
	}
	kf_buf_putc(b, ']');
}

/* Whether type t satisfies constraint pt, binding type variables (the new
 * bindings in *newly, undone on failure). */
bool kf_rwa_type_ok(kf_rw_tvars *tv, const kf_ptype *pt, const kf_type *t, uint32_t *newly)
{
	uint32_t mine = 0;
	bool ok = true;
	if (pt->dtype >= 0)
		ok = t->dtype == pt->dtype;
	else if (pt->dtype <= -2)
		ok = kf_rwa_bind_tv(tv, -2 - pt->dtype, t->dtype, &mine);
	if (ok && pt->rank >= 0) {
		ok = pt->ellipsis ? t->rank >= pt->rank : t->rank == pt->rank;
		for (int i = 0; ok && i < pt->rank; i++) {
			int64_t d = t->dim[t->rank - pt->rank + i];
			if (pt->dvar[i] == -1)
				ok = d == pt->dim[i];
			else if (pt->dvar[i] >= 0)
				ok = kf_rwa_bind_tv(tv, pt->dvar[i], d, &mine);
		}
	}
	if (!ok)
		kf_rwa_unbind_tv(tv, mine);
	else
		*newly |= mine;
	return ok;
}

bool kf_pat_bind_types(const kf_pattern *p, const kf_type *types, int64_t *tval, uint32_t *bound)
{
	kf_rw_tvars tv = {{0}, 0};
	uint32_t newly = 0;
	for (uint32_t v = 0; v < p->nvar; v++)
		if (p->vtype && p->vtype[v] && !kf_rwa_type_ok(&tv, p->vtype[v], &types[v], &newly))
			return false;
	memcpy(tval, tv.val, sizeof tv.val);
	*bound = tv.bound;
	return true;
}

