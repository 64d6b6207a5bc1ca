/* emit_dims.c: the dims the emitter writes in a sized plan (emit_cuda.h's
 * kf_emit_dyn; the helpers' contract is in emit_int.h): a dim that comes
 * from symbols becomes an expression over the kernel's size arguments
 * (kd<i>), checked to evaluate to the number it replaces at the size
 * emitted; the buckets that size-dependent choices are made for; what a
 * symbolic dim is a multiple of for every size.  In a static plan every
 * helper writes the number, as the emitter always did.  Split from
 * emit_cuda.c. */
#include <stdio.h>
#include <string.h>
#include "emit_int.h"

int64_t kf_emit_bucket(int64_t v)
{
	int64_t b = 1;
	while (b < v && b < (INT64_C(1) << 62))
		b <<= 1;
	return v <= 1 ? v : b;
}

const kf_type *kx_stype(const kx *k, kf_vid v)
{
	const kf_type *t = kf_vtype(k->g, v);
	if (!k->dyn || v >= k->dyn->sym->nval)
		return t;
	const kf_type *s = kf_vtype(k->dyn->sym, v);
	return s->rank == t->rank && s->dtype == t->dtype ? s : t;
}

/* The binding's index of symbol sid, or -1. */
static int dyn_index(const kx *k, kf_sid sid)
{
	for (uint32_t i = 0; k->dyn && i < k->dyn->n; i++)
		if (k->dyn->sid[i] == sid)
			return (int)i;
	return -1;
}

/* sym's value at the sizes (rep: at the buckets' sizes); false when it
 * names a symbol the plan does not size, or overflows. */
static bool dyn_eval(const kx *k, int64_t sym, bool rep, int64_t *out)
{
	kf_mono m;
	if (sym == KF_DIM_BAD || !kf_dim_split(k->c, sym, &m))
		return false;
	int64_t v = m.coef;
	for (int i = 0; i < m.n; i++) {
		int j = dyn_index(k, m.sym[i]);
		if (j < 0 || __builtin_mul_overflow(v, rep ? k->dyn->rep[j] : k->dyn->val[j], &v))
			return false;
	}
	*out = v;
	return true;
}

bool kx_varies(const kx *k, int64_t sym)
{
	return k->dyn && sym != KF_DIM_BAD && KF_IS_SYM(sym);
}

/* Whether (val, sym) is written as an expression. */
static bool dyn_writes(kx *k, int64_t val, int64_t sym)
{
	int64_t v;
	if (!kx_varies(k, sym))
		return false;
	if (!dyn_eval(k, sym, false, &v) || v != val) {
		/* a form that is not the number (a sum of symbols read off the
		 * probe as a product, or a bug): the number, which is right here */
		k->k->dynbad++;
		return false;
	}
	return true;
}

static void dyn_expr(kx *k, kf_buf *o, int64_t sym)
{
	kf_mono m;
	kf_dim_split(k->c, sym, &m);
	bool paren = m.n > 1 || m.coef != 1;
	if (paren)
		kf_buf_putc(o, '(');
	if (m.coef != 1)
		kf_buf_printf(o, "%lld", (long long)m.coef);
	for (int i = 0; i < m.n; i++) {
		int j = dyn_index(k, m.sym[i]);
		k->k->kd |= 1u << j;
		kf_buf_printf(o, "%skd%d", i || m.coef != 1 ? " * " : "", j);
	}
	if (paren)
		kf_buf_putc(o, ')');
}

void kx_dim(kx *k, kf_buf *o, int64_t val, int64_t sym)
{
	if (dyn_writes(k, val, sym))
		dyn_expr(k, o, sym);
	else
		kf_buf_printf(o, "%lld", (long long)val);
}

void kx_dimll(kx *k, kf_buf *o, int64_t val, int64_t sym)
{
	if (dyn_writes(k, val, sym)) {
		kf_buf_puts(o, "((long long)");
		dyn_expr(k, o, sym);
		kf_buf_putc(o, ')');
	} else {
		kf_buf_printf(o, "%lldLL", (long long)val);
	}
}

void kx_dimfloor(kx *k, kf_buf *o, int64_t val, int64_t sym, int64_t m)
{
	if (!dyn_writes(k, val, sym) || kx_multiple(k, val, sym, m)) {
		kx_dim(k, o, m > 1 && !kx_multiple(k, val, sym, m) ? val / m * m : val, sym);
		return;
	}
	kf_buf_puts(o, "(");
	dyn_expr(k, o, sym);
	kf_buf_printf(o, " / %lld * %lld)", (long long)m, (long long)m);
}

void kx_dimlin(kx *k, kf_buf *o, int64_t val, int64_t sym, int64_t add, int64_t div, int64_t add2)
{
	if (!dyn_writes(k, val, sym)) {
		kf_buf_printf(o, "%lld", (long long)((val + add) / div + add2));
		return;
	}
	kf_buf_putc(o, '(');
	if (div > 1)
		kf_buf_putc(o, '(');
	dyn_expr(k, o, sym);
	if (add)
		kf_buf_printf(o, " %c %lld", add < 0 ? '-' : '+', (long long)(add < 0 ? -add : add));
	if (div > 1)
		kf_buf_printf(o, ") / %lld", (long long)div);
	if (add2)
		kf_buf_printf(o, " %c %lld", add2 < 0 ? '-' : '+', (long long)(add2 < 0 ? -add2 : add2));
	kf_buf_putc(o, ')');
}

void kx_dimlini(kx *k, kf_buf *o, int64_t val, int64_t sym, int64_t add, int64_t div, int64_t add2)
{
	bool e = dyn_writes(k, val, sym);
	if (e)
		kf_buf_puts(o, "(int)");
	kx_dimlin(k, o, val, sym, add, div, add2);
}

void kx_dimceil(kx *k, kf_buf *o, int64_t val, int64_t sym, int64_t m)
{
	if (!dyn_writes(k, val, sym) || kx_multiple(k, val, sym, m)) {
		if (dyn_writes(k, val, sym) && m > 1) { /* a multiple of m for every size */
			kf_mono mo;
			kf_dim_split(k->c, sym, &mo);
			mo.coef /= m;
			int64_t q = kf_dim_join(k->c, &mo);
			kx_dim(k, o, val / m, q);
			return;
		}
		kf_buf_printf(o, "%lld", (long long)((val + m - 1) / m));
		return;
	}
	kf_buf_puts(o, "((");
	dyn_expr(k, o, sym);
	kf_buf_printf(o, " + %lld) / %lld)", (long long)(m - 1), (long long)m);
}

void kx_dimd(kx *k, kf_buf *o, int64_t val, int64_t sym, int64_t delta)
{
	if (!dyn_writes(k, val, sym)) {
		kf_buf_printf(o, "%lld", (long long)(val + delta));
		return;
	}
	kf_buf_putc(o, '(');
	dyn_expr(k, o, sym);
	kf_buf_printf(o, " %c %lld)", delta < 0 ? '-' : '+', (long long)(delta < 0 ? -delta : delta));
}

int64_t kx_sadd(const kx *k, int64_t a, int64_t b)
{
	(void)k;
	if (a == KF_DIM_BAD || b == KF_DIM_BAD)
		return KF_DIM_BAD;
	if (a == 0)
		return b;
	if (b == 0)
		return a;
	return !KF_IS_SYM(a) && !KF_IS_SYM(b) ? a + b : KF_DIM_BAD;
}

int64_t kx_smul(const kx *k, int64_t a, int64_t b)
{
	if (a == KF_DIM_BAD || b == KF_DIM_BAD)
		return KF_DIM_BAD;
	return kf_dim_mul(k->c, a, b);
}

bool kx_multiple(const kx *k, int64_t val, int64_t sym, int64_t m)
{
	kf_mono mo;
	if (m <= 1)
		return true;
	if (!kx_varies(k, sym))
		return val % m == 0;
	return kf_dim_split(k->c, sym, &mo) && mo.coef % m == 0 && val % m == 0;
}

int64_t kx_rep(const kx *k, int64_t val, int64_t sym)
{
	int64_t v;
	if (!kx_varies(k, sym) || !dyn_eval(k, sym, true, &v) || v < val)
		return val;
	return v;
}

int64_t kx_snumel(const kx *k, kf_vid v)
{
	const kf_type *t = kx_stype(k, v);
	int64_t n = 1;
	for (int d = 0; d < t->rank && n != KF_DIM_BAD; d++)
		n = kx_smul(k, n, t->dim[d]);
	return n;
}

int64_t kx_pmono(const kx *k, int64_t pv)
{
	if (!k->dyn || !k->dyn->probe || pv <= 0)
		return pv;
	kf_mono m = {.coef = pv};
	for (uint32_t i = 0; i < k->dyn->n && m.n < KF_DIM_MAXSYM; i++) {
		int64_t p = k->dyn->pval[i];
		while (p > 1 && m.coef % p == 0 && m.n < KF_DIM_MAXSYM) {
			m.coef /= p;
			m.sym[m.n++] = k->dyn->sid[i];
		}
	}
	int64_t d = kf_dim_join(k->c, &m);
	return d == KF_DIM_BAD ? pv : d;
}

kf_type kx_ptype(const kx *k, const kf_type *pt)
{
	kf_type t = *pt;
	for (int d = 0; d < t.rank; d++)
		t.dim[d] = kx_pmono(k, pt->dim[d]);
	return t;
}
