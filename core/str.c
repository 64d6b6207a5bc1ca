/* str.c: interned strings, the text buffer, hashing and float formatting. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "kf_int.h"

uint64_t kf_hash_bytes(const void *p, size_t n, uint64_t h)
{
	/* FNV-1a, then a final mix so that low bits spread for power-of-two tables */
	const unsigned char *s = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ s[i]) * 1099511628211ULL;
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	return h;
}

static uint64_t str_hash(const char *s, size_t n) { return kf_hash_bytes(s, n, KF_HASH_SEED); }

static void tab_init(kf_idtab *t, uint32_t cap)
{
	t->slot = kf_xrealloc(NULL, cap * sizeof *t->slot);
	memset(t->slot, 0xff, cap * sizeof *t->slot);
	t->cap = cap;
	t->n = 0;
}

static kf_sid str_find(const kf_ctx *c, const char *s, size_t n, uint64_t h, uint32_t *slot)
{
	uint32_t mask = c->strtab.cap - 1, i = (uint32_t)h & mask;
	for (;; i = (i + 1) & mask) {
		uint32_t id = c->strtab.slot[i];
		if (id == KF_NONE) {
			*slot = i;
			return KF_NONE;
		}
		if (c->strlen_[id] == n && memcmp(c->str[id], s, n) == 0)
			return id;
	}
}

static void str_rehash(kf_ctx *c)
{
	kf_idtab old = c->strtab;
	tab_init(&c->strtab, old.cap * 2);
	for (uint32_t id = 0; id < c->nstr; id++) {
		uint32_t slot;
		str_find(c, c->str[id], c->strlen_[id], str_hash(c->str[id], c->strlen_[id]), &slot);
		c->strtab.slot[slot] = id;
	}
	c->strtab.n = c->nstr;
	free(old.slot);
}

kf_sid kf_intern(kf_ctx *c, const char *s, size_t n)
{
	if (!c->strtab.cap)
		tab_init(&c->strtab, 1024);
	uint64_t h = str_hash(s, n);
	uint32_t slot;
	kf_sid id = str_find(c, s, n, h, &slot);
	if (id != KF_NONE)
		return id;
	if ((c->strtab.n + 1) * 2 > c->strtab.cap) {
		str_rehash(c);
		str_find(c, s, n, h, &slot);
	}
	if (c->nstr + 1 > c->capstr) {
		uint32_t cap = c->capstr;
		kf_grow((void **)&c->str, &cap, c->nstr + 1, sizeof *c->str);
		c->strlen_ = kf_xrealloc(c->strlen_, cap * sizeof *c->strlen_);
		c->capstr = cap;
	}
	id = c->nstr++;
	c->str[id] = kf_strdup_arena(&c->arena, s, n);
	c->strlen_[id] = (uint32_t)n;
	c->strtab.slot[slot] = id;
	c->strtab.n++;
	return id;
}

kf_sid kf_intern_cstr(kf_ctx *c, const char *s) { return kf_intern(c, s, strlen(s)); }

kf_sid kf_lookup_str(const kf_ctx *c, const char *s, size_t n)
{
	uint32_t slot;
	if (!c->strtab.cap)
		return KF_NONE;
	return str_find(c, s, n, str_hash(s, n), &slot);
}

const char *kf_str(const kf_ctx *c, kf_sid id) { return id < c->nstr ? c->str[id] : ""; }
size_t kf_strlen(const kf_ctx *c, kf_sid id) { return id < c->nstr ? c->strlen_[id] : 0; }

/* ---- kf_buf ---- */

static void buf_reserve(kf_buf *b, size_t extra)
{
	if (b->n + extra + 1 <= b->cap)
		return;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < b->n + extra + 1)
		cap *= 2;
	b->p = kf_xrealloc(b->p, cap);
	b->cap = cap;
}

void kf_buf_put(kf_buf *b, const char *s, size_t n)
{
	buf_reserve(b, n);
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = 0;
}

void kf_buf_puts(kf_buf *b, const char *s) { kf_buf_put(b, s, strlen(s)); }

void kf_buf_putc(kf_buf *b, char ch)
{
	buf_reserve(b, 1);
	b->p[b->n++] = ch;
	b->p[b->n] = 0;
}

void kf_buf_printf(kf_buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char small[256];
	int n = vsnprintf(small, sizeof small, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n < sizeof small) {
		kf_buf_put(b, small, (size_t)n);
		return;
	}
	buf_reserve(b, (size_t)n);
	va_start(ap, fmt);
	vsnprintf(b->p + b->n, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->n += (size_t)n;
}

void kf_buf_free(kf_buf *b)
{
	free(b->p);
	memset(b, 0, sizeof *b);
}

/* Rounds v to the precision of t, so that the shortest text is judged by
 * what the type can hold (0.1 in f16 prints as 0.1, not 0.0999755859375). */
static double round_to(double v, kf_dtype t)
{
	if (t == KF_F32)
		return (float)v;
	if (t == KF_F16 || t == KF_BF16) {
		int mant = t == KF_F16 ? 11 : 8;
		if (v == 0 || !isfinite(v))
			return v;
		int e;
		frexp(v, &e);
		if (t == KF_F16 && e < -13)
			e = -13; /* subnormal f16: fixed quantum 2^-24 */
		double q = ldexp(1.0, e - mant);
		return nearbyint(v / q) * q;
	}
	return v;
}

void kf_buf_float(kf_buf *b, double v, kf_dtype t)
{
	if (isnan(v)) {
		kf_buf_puts(b, "nan");
		return;
	}
	if (isinf(v)) {
		kf_buf_puts(b, v < 0 ? "-inf" : "inf");
		return;
	}
	char s[64];
	double want = round_to(v, t);
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(s, sizeof s, "%.*g", prec, v);
		if (round_to(strtod(s, NULL), t) == want)
			break;
	}
	if (!strpbrk(s, ".e"))
		strcat(s, ".0"); /* keep it a float literal */
	kf_buf_puts(b, s);
}
