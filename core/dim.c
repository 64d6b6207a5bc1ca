/* dim.c: symbolic dims as monomials (kf.h, "symbolic dims").
 *
 * A symbolic dim is one interned name.  A plain symbol is its own name (`B`);
 * a product is named by its canonical text: the coefficient first when it is
 * not 1, then the symbols sorted by name, '*' between (`8*B`, `B*T`,
 * `2*T*T`).  Canonical text makes equal products one string, hence one sid
 * and one dim value, so every `==` on dims elsewhere stays right.  The parts
 * are recovered from the text when arithmetic needs them (short strings; no
 * cache to keep in step). */
#include <stdlib.h>
#include <string.h>

#include "kf_int.h"

static bool sym_char(char ch, bool first)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' || ch == '$' ||
	       (!first && ((ch >= '0' && ch <= '9') || ch == '.'));
}

static int cmp_sid(const kf_ctx *c, kf_sid a, kf_sid b) { return strcmp(kf_str(c, a), kf_str(c, b)); }

/* Parses "t*t*..." where each t is an integer or a symbol name into m
 * (unsorted); false when malformed or out of range. */
static bool parse_terms(kf_ctx *c, const char *s, size_t n, kf_mono *m)
{
	m->coef = 1;
	m->n = 0;
	size_t i = 0;
	if (n == 0)
		return false;
	for (;;) {
		size_t j = i;
		if (j < n && s[j] >= '0' && s[j] <= '9') {
			int64_t v = 0;
			for (; j < n && s[j] >= '0' && s[j] <= '9'; j++)
				if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, s[j] - '0', &v))
					return false;
			if (__builtin_mul_overflow(m->coef, v, &m->coef))
				return false;
		} else {
			if (j >= n || !sym_char(s[j], true))
				return false;
			while (j < n && sym_char(s[j], false))
				j++;
			if (m->n == KF_DIM_MAXSYM)
				return false;
			m->sym[m->n++] = kf_intern(c, s + i, j - i);
		}
		if (j == n)
			return m->coef <= (INT64_C(1) << 62);
		if (s[j] != '*')
			return false;
		i = j + 1;
	}
}

bool kf_dim_split(kf_ctx *c, int64_t d, kf_mono *m)
{
	m->n = 0;
	if (!KF_IS_SYM(d)) {
		m->coef = d;
		return d >= 0;
	}
	kf_sid s = KF_SYM_SID(d);
	const char *t = kf_str(c, s);
	if (!strchr(t, '*')) { /* a plain symbol: itself */
		m->coef = 1;
		m->n = 1;
		m->sym[0] = s;
		return true;
	}
	return parse_terms(c, t, strlen(t), m);
}

int64_t kf_dim_join(kf_ctx *c, const kf_mono *in)
{
	kf_mono m = *in;
	if (m.coef < 0 || m.n < 0 || m.n > KF_DIM_MAXSYM)
		return KF_DIM_BAD;
	if (m.n == 0 || m.coef == 0)
		return m.coef;
	/* insertion sort by name: at most KF_DIM_MAXSYM symbols */
	for (int i = 1; i < m.n; i++)
		for (int j = i; j > 0 && cmp_sid(c, m.sym[j - 1], m.sym[j]) > 0; j--) {
			kf_sid t = m.sym[j];
			m.sym[j] = m.sym[j - 1];
			m.sym[j - 1] = t;
		}
	if (m.n == 1 && m.coef == 1)
		return KF_SYM(m.sym[0]);
	kf_buf b = {0};
	if (m.coef != 1)
		kf_buf_printf(&b, "%lld*", (long long)m.coef);
	for (int i = 0; i < m.n; i++)
		kf_buf_printf(&b, "%s%s", i ? "*" : "", kf_str(c, m.sym[i]));
	kf_sid s = kf_intern(c, b.p, b.n);
	kf_buf_free(&b);
	return KF_SYM(s);
}

int64_t kf_dim_parse(kf_ctx *c, const char *s, size_t n)
{
	kf_mono m;
	if (!parse_terms(c, s, n, &m))
		return KF_DIM_BAD;
	return kf_dim_join(c, &m);
}

int64_t kf_dim_mul(kf_ctx *c, int64_t a, int64_t b)
{
	kf_mono x, y;
	if (!kf_dim_split(c, a, &x) || !kf_dim_split(c, b, &y) || x.n + y.n > KF_DIM_MAXSYM)
		return KF_DIM_BAD;
	if (__builtin_mul_overflow(x.coef, y.coef, &x.coef) || x.coef > (INT64_C(1) << 62))
		return KF_DIM_BAD;
	if (x.coef == 0)
		return 0;
	for (int i = 0; i < y.n; i++)
		x.sym[x.n++] = y.sym[i];
	return kf_dim_join(c, &x);
}

bool kf_dim_div(kf_ctx *c, int64_t a, int64_t b, int64_t *q)
{
	kf_mono x, y;
	if (!kf_dim_split(c, a, &x) || !kf_dim_split(c, b, &y) || y.coef == 0 || x.coef % y.coef)
		return false;
	x.coef /= y.coef;
	for (int i = 0; i < y.n; i++) { /* remove each of b's symbols from a's, one occurrence each */
		int j = 0;
		while (j < x.n && x.sym[j] != y.sym[i])
			j++;
		if (j == x.n)
			return false;
		x.sym[j] = x.sym[--x.n];
	}
	if (x.coef == 0 && x.n > 0)
		return false; /* 0 / B: zero, but so is 0 / anything; only a static 0 is sure */
	*q = kf_dim_join(c, &x);
	return *q != KF_DIM_BAD;
}

bool kf_dim_eval(kf_ctx *c, int64_t d, kf_sym_lookup look, void *ud, int64_t *out)
{
	kf_mono m;
	if (!kf_dim_split(c, d, &m))
		return false;
	int64_t v = m.coef;
	for (int i = 0; i < m.n; i++) {
		int64_t s;
		if (!look(ud, m.sym[i], &s) || __builtin_mul_overflow(v, s, &v))
			return false;
	}
	*out = v;
	return true;
}

bool kf_dim_is_product(const kf_ctx *c, int64_t d)
{
	return KF_IS_SYM(d) && strchr(kf_str(c, KF_SYM_SID(d)), '*') != NULL;
}
