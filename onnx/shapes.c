/* shapes.c: shape arithmetic as exporters write it, carried as symbols.
 *
 * A model exported with dynamic axes computes its reshape targets at run
 * time: Shape, Gather of one dim, Unsqueeze, Concat with constants, now and
 * then Mul, Div, Sub or Where, into Reshape, Expand, Slice or Range.  Each
 * of those nodes is translated into real ops (so the value exists if a
 * model uses it as data), and beside it this file keeps what the value is
 * in terms of the input's dims: a vector of at most KF_SV_MAX elements, each
 * a static int or a symbolic dim (a monomial, kf_dim_*).  The consumers read
 * it instead of needing a constant: Reshape(x, Concat(B, T, 12, 64)) becomes
 * reshape {shape = ["B", "T", 12, 64]}, and the ops that computed it are
 * dead code.  An element the arithmetic cannot express as a monomial (T + 1,
 * T / 2 when T may be odd) is unknown, and a consumer that needs it says so.
 */
#include <stdlib.h>
#include <string.h>
#include "passes.h"
#include "tr.h"

static kf_sv *slot(kf_imp *I, kf_vid v)
{
	if (v >= I->nsv) {
		uint32_t n = I->nsv ? I->nsv : 256;
		while (n <= v)
			n *= 2;
		I->sv = realloc(I->sv, n * sizeof *I->sv);
		if (!I->sv)
			abort(); /* as kf_alloc */
		memset(I->sv + I->nsv, 0, (n - I->nsv) * sizeof *I->sv);
		I->nsv = n;
	}
	return &I->sv[v];
}

bool kf_sv_of(kf_imp *I, kf_vid v, kf_sv *out)
{
	if (v == KF_NONE)
		return false;
	if (v < I->nsv && I->sv[v].set) {
		*out = I->sv[v];
		return true;
	}
	const kf_type *t = kf_vtype(I->g, v);
	int64_t val[KF_SV_MAX];
	if (t->rank > 1 || kf_dtype_is_float(t->dtype))
		return false;
	int n = kf_imp_const_ints(I, v, val, KF_SV_MAX);
	if (n < 0)
		return false;
	*out = (kf_sv){.set = true, .n = (uint8_t)n, .rank = t->rank, .known = (uint16_t)((1u << n) - 1)};
	memcpy(out->e, val, sizeof(int64_t) * (size_t)n);
	return true;
}

int kf_sv_dims(kf_imp *I, kf_vid v, int64_t *out, bool *sym, int max)
{
	kf_sv s;
	if (!kf_sv_of(I, v, &s) || s.n > max || s.known != (1u << s.n) - 1)
		return -1;
	for (int i = 0; i < s.n; i++) {
		out[i] = s.e[i];
		sym[i] = s.sym >> i & 1;
	}
	return s.n;
}

/* ---- element arithmetic: a static int, or a symbolic dim ---- */

typedef struct el {
	bool known, sym;
	int64_t v;
} el;

static el get(const kf_sv *s, int i)
{
	int k = s->n == 1 ? 0 : i; /* a one-element operand broadcasts */
	return (el){s->known >> k & 1, s->sym >> k & 1, s->e[k]};
}

static void put(kf_sv *s, int i, el e)
{
	s->known = (uint16_t)(s->known & ~(1u << i));
	s->sym = (uint16_t)(s->sym & ~(1u << i));
	if (e.known && e.sym && !KF_IS_SYM(e.v)) /* a product that came out static */
		e.sym = false;
	if (e.known && e.v == KF_DIM_BAD)
		e.known = false;
	s->known = (uint16_t)(s->known | (unsigned)e.known << i);
	s->sym = (uint16_t)(s->sym | (unsigned)(e.known && e.sym) << i);
	s->e[i] = e.v;
}

static const el UNKNOWN = {false, false, 0};
static el stat(int64_t v) { return (el){true, false, v}; }
static el symb(int64_t d) { return (el){true, true, d}; }

/* a + sign * b for two monomials of the same symbols */
static el same_symbols(kf_ctx *c, el a, el b, int sign)
{
	kf_mono x, y;
	if (!kf_dim_split(c, a.v, &x) || !kf_dim_split(c, b.v, &y) || x.n != y.n)
		return UNKNOWN;
	int64_t ux = a.v, uy = b.v;
	x.coef = 1;
	y.coef = 1;
	if (kf_dim_join(c, &x) != kf_dim_join(c, &y)) /* not the same symbols */
		return UNKNOWN;
	kf_mono mx, my;
	kf_dim_split(c, ux, &mx);
	kf_dim_split(c, uy, &my);
	int64_t k = mx.coef + sign * my.coef;
	if (k < 0)
		return UNKNOWN;
	mx.coef = k;
	int64_t d = kf_dim_join(c, &mx);
	return d == KF_DIM_BAD ? UNKNOWN : KF_IS_SYM(d) ? symb(d) : stat(d);
}

static el arith(kf_ctx *c, char op, el a, el b, bool intdiv)
{
	int64_t r;
	if (!a.known || !b.known)
		return UNKNOWN;
	if (!a.sym && !b.sym) {
		switch (op) {
		case '+': return __builtin_add_overflow(a.v, b.v, &r) ? UNKNOWN : stat(r);
		case '-': return __builtin_sub_overflow(a.v, b.v, &r) ? UNKNOWN : stat(r);
		case '*': return __builtin_mul_overflow(a.v, b.v, &r) ? UNKNOWN : stat(r);
		case '/':
			if (b.v == 0 || (a.v == INT64_MIN && b.v == -1) || (!intdiv && a.v % b.v))
				return UNKNOWN;
			return stat(a.v / b.v);
		}
		return UNKNOWN;
	}
	switch (op) {
	case '+':
		if (!b.sym && b.v == 0)
			return a;
		if (!a.sym && a.v == 0)
			return b;
		return a.sym && b.sym ? same_symbols(c, a, b, 1) : UNKNOWN;
	case '-':
		if (!b.sym && b.v == 0)
			return a;
		if (a.sym && b.sym)
			return a.v == b.v ? stat(0) : same_symbols(c, a, b, -1);
		return UNKNOWN;
	case '*': {
		if ((!a.sym && a.v < 0) || (!b.sym && b.v < 0))
			return UNKNOWN;
		int64_t d = kf_dim_mul(c, a.v, b.v);
		return d == KF_DIM_BAD ? UNKNOWN : KF_IS_SYM(d) ? symb(d) : stat(d);
	}
	case '/': {
		/* a dim divided exactly stays a dim; T / 2 truncating is no monomial */
		int64_t q;
		if ((!a.sym && a.v < 0) || (!b.sym && b.v <= 0) || !kf_dim_div(c, a.v, b.v, &q))
			return UNKNOWN;
		return KF_IS_SYM(q) ? symb(q) : stat(q);
	}
	}
	return UNKNOWN;
}

/* a == b: definite when both are static, when they are one dim, or when a
 * dim (never negative) meets a negative int (Expand's -1 test). */
static el equal(el a, el b)
{
	if (!a.known || !b.known)
		return UNKNOWN;
	if (a.sym == b.sym)
		return a.v == b.v ? stat(1) : a.sym ? UNKNOWN : stat(0);
	el s = a.sym ? b : a;
	return s.v < 0 ? stat(0) : UNKNOWN;
}

/* ---- tracking ---- */

/* The result kf_sv for value v of n elements (v's type must agree). */
static bool result(kf_imp *I, kf_vid v, int n, kf_sv *s)
{
	const kf_type *t = kf_vtype(I->g, v);
	int64_t ne = kf_type_numel(t);
	if (t->rank > 1 || ne != n || n > KF_SV_MAX)
		return false;
	*s = (kf_sv){.set = true, .n = (uint8_t)n, .rank = t->rank};
	return true;
}

static void store(kf_imp *I, kf_vid v, const kf_sv *s)
{
	if (v != KF_NONE)
		*slot(I, v) = *s;
}

static bool const_int(kf_imp *I, kf_vid v, int64_t *out)
{
	return v != KF_NONE && kf_imp_const_ints(I, v, out, 1) == 1;
}

static void track_shape(kf_imp *I, kf_np *np, kf_vid x, kf_vid y)
{
	const kf_type *t = kf_vtype(I->g, x);
	int64_t lo = kf_imp_attr_int(np, "start", 0), hi = kf_imp_attr_int(np, "end", t->rank);
	kf_shape_range(t->rank, &lo, &hi);
	kf_sv s;
	if (!result(I, y, (int)(hi - lo), &s))
		return;
	for (int64_t i = lo; i < hi; i++)
		put(&s, (int)(i - lo), KF_IS_SYM(t->dim[i]) ? symb(t->dim[i]) : stat(t->dim[i]));
	store(I, y, &s);
}

static void track_gather(kf_imp *I, kf_np *np, kf_vid y)
{
	kf_sv d, ix, s;
	if (kf_imp_attr_int(np, "axis", 0) != 0 || !kf_sv_of(I, kf_imp_input(I, np, 0), &d) || d.rank != 1 ||
	    !kf_sv_of(I, kf_imp_input(I, np, 1), &ix) || ix.known != (1u << ix.n) - 1 || ix.sym ||
	    !result(I, y, ix.n, &s))
		return;
	for (int i = 0; i < ix.n; i++) {
		int64_t k = ix.e[i] < 0 ? ix.e[i] + d.n : ix.e[i];
		if (k < 0 || k >= d.n)
			return;
		put(&s, i, get(&d, (int)k));
	}
	store(I, y, &s);
}

static void track_concat(kf_imp *I, kf_np *np, kf_vid y)
{
	kf_sv s, p;
	int n = 0;
	if (!result(I, y, (int)kf_type_numel(kf_vtype(I->g, y)), &s))
		return;
	for (size_t i = 0; i < np->n_input; i++) {
		if (!kf_sv_of(I, kf_imp_input(I, np, i), &p) || n + p.n > s.n)
			return;
		for (int k = 0; k < p.n; k++)
			put(&s, n++, get(&p, k));
	}
	if (n == s.n)
		store(I, y, &s);
}

/* Unsqueeze, Squeeze, Reshape, Flatten, Identity, Cast, Expand: the same
 * elements (a one-element value may be repeated by Expand). */
static void track_same(kf_imp *I, kf_np *np, kf_vid y)
{
	kf_sv x, s;
	int64_t ne = kf_type_numel(kf_vtype(I->g, y));
	if (!kf_sv_of(I, kf_imp_input(I, np, 0), &x) || (ne != x.n && x.n != 1) || !result(I, y, (int)ne, &s))
		return;
	for (int i = 0; i < s.n; i++)
		put(&s, i, get(&x, i));
	store(I, y, &s);
}

static void track_slice(kf_imp *I, kf_np *np, kf_vid y)
{
	kf_sv x, s;
	int64_t st, en, ax = 0, step = 1;
	if (!kf_sv_of(I, kf_imp_input(I, np, 0), &x) || x.rank != 1 || !const_int(I, kf_imp_input(I, np, 1), &st) ||
	    !const_int(I, kf_imp_input(I, np, 2), &en) || (kf_tr_has_in(np, 3) && !const_int(I, kf_imp_input(I, np, 3), &ax)) ||
	    (kf_tr_has_in(np, 4) && !const_int(I, kf_imp_input(I, np, 4), &step)) || (ax != 0 && ax != -1) ||
	    step == 0 || !result(I, y, (int)kf_type_numel(kf_vtype(I->g, y)), &s))
		return;
	int64_t d = x.n;
	st = st < 0 ? st + d : st;
	en = en < 0 ? en + d : en;
	if (step > 0) {
		st = st < 0 ? 0 : st > d ? d : st;
		en = en < 0 ? 0 : en > d ? d : en;
	} else {
		st = st < 0 ? 0 : st > d - 1 ? d - 1 : st;
		en = en < -1 ? -1 : en > d - 1 ? d - 1 : en;
	}
	int k = 0;
	for (int64_t i = st; step > 0 ? i < en : i > en; i += step) {
		if (k >= s.n)
			return;
		put(&s, k++, get(&x, (int)i));
	}
	if (k == s.n)
		store(I, y, &s);
}

static void track_binary(kf_imp *I, kf_np *np, kf_vid y, char op)
{
	kf_sv a, b, s;
	if (!kf_sv_of(I, kf_imp_input(I, np, 0), &a) || !kf_sv_of(I, kf_imp_input(I, np, 1), &b))
		return;
	int n = a.n > b.n ? a.n : b.n;
	if ((a.n != n && a.n != 1) || (b.n != n && b.n != 1) || !result(I, y, n, &s))
		return;
	bool intdiv = !kf_dtype_is_float((kf_dtype)kf_vtype(I->g, y)->dtype);
	for (int i = 0; i < n; i++) {
		el x = get(&a, i), z = get(&b, i), r = UNKNOWN;
		if (op == '=')
			r = equal(x, z);
		else if (op == '<' || op == '>') { /* Min, Max: static, or one operand twice */
			if (x.known && z.known && x.sym == z.sym && (!x.sym || x.v == z.v))
				r = (op == '<') == (x.v < z.v) ? x : z;
		} else
			r = arith(I->c, op, x, z, intdiv);
		put(&s, i, r);
	}
	store(I, y, &s);
}

static void track_where(kf_imp *I, kf_np *np, kf_vid y)
{
	kf_sv c, a, b, s;
	if (!kf_sv_of(I, kf_imp_input(I, np, 0), &c) || !kf_sv_of(I, kf_imp_input(I, np, 1), &a) ||
	    !kf_sv_of(I, kf_imp_input(I, np, 2), &b))
		return;
	int n = c.n > a.n ? c.n : a.n;
	n = b.n > n ? b.n : n;
	if ((c.n != n && c.n != 1) || (a.n != n && a.n != 1) || (b.n != n && b.n != 1) || !result(I, y, n, &s))
		return;
	for (int i = 0; i < n; i++) {
		el k = get(&c, i);
		put(&s, i, !k.known || k.sym ? UNKNOWN : k.v ? get(&a, i) : get(&b, i));
	}
	store(I, y, &s);
}

static void track_neg(kf_imp *I, kf_np *np, kf_vid y)
{
	kf_sv x, s;
	if (!kf_sv_of(I, kf_imp_input(I, np, 0), &x) || !result(I, y, x.n, &s))
		return;
	for (int i = 0; i < x.n; i++) {
		el e = get(&x, i);
		put(&s, i, e.known && !e.sym && e.v != INT64_MIN ? stat(-e.v) : UNKNOWN);
	}
	store(I, y, &s);
}

void kf_sv_track(kf_imp *I, kf_np *np, const kf_vid *out, int nout)
{
	if (nout < 1 || out[0] == KF_NONE || kf_fold_const_of(I->g, out[0]))
		return; /* a constant is its own shape value */
	const char *op = np->op_type;
	kf_vid y = out[0];
	if (!strcmp(op, "Shape"))
		track_shape(I, np, kf_imp_input(I, np, 0), y);
	else if (!strcmp(op, "Gather"))
		track_gather(I, np, y);
	else if (!strcmp(op, "Concat"))
		track_concat(I, np, y);
	else if (!strcmp(op, "Unsqueeze") || !strcmp(op, "Squeeze") || !strcmp(op, "Reshape") ||
		 !strcmp(op, "Flatten") || !strcmp(op, "Identity") || !strcmp(op, "Cast") || !strcmp(op, "Expand"))
		track_same(I, np, y);
	else if (!strcmp(op, "Slice"))
		track_slice(I, np, y);
	else if (!strcmp(op, "Add"))
		track_binary(I, np, y, '+');
	else if (!strcmp(op, "Sub"))
		track_binary(I, np, y, '-');
	else if (!strcmp(op, "Mul"))
		track_binary(I, np, y, '*');
	else if (!strcmp(op, "Div"))
		track_binary(I, np, y, '/');
	else if (!strcmp(op, "Equal"))
		track_binary(I, np, y, '=');
	else if (!strcmp(op, "Min"))
		track_binary(I, np, y, '<');
	else if (!strcmp(op, "Max"))
		track_binary(I, np, y, '>');
	else if (!strcmp(op, "Where"))
		track_where(I, np, y);
	else if (!strcmp(op, "Neg"))
		track_neg(I, np, y);
}
