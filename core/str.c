/* str.c: interned strings, the text buffer, hashing and float formatting. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
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

/* ---- interned strings ---- */

static uint64_t rd64(const char *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

static uint64_t rd32(const char *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}

static uint64_t mix(uint64_t a, uint64_t b)
{
	__uint128_t r = (__uint128_t)a * b;
	return (uint64_t)r ^ (uint64_t)(r >> 64);
}

/* wyhash's shape: a few loads and two multiplications for a short name,
 * where FNV-1a spends a multiply on each byte. */
uint32_t kf_str_hash(const char *s, size_t n)
{
	const uint64_t p0 = 0xa0761d6478bd642fULL, p1 = 0xe7037ed1a0b428dbULL;
	uint64_t a, b, seed = 0x8ebc6af09c88c6e3ULL;
	if (n <= 16) {
		if (n >= 4) {
			size_t q = (n >> 3) << 2;
			a = rd32(s) << 32 | rd32(s + q);
			b = rd32(s + n - 4) << 32 | rd32(s + n - 4 - q);
		} else if (n > 0) {
			a = (uint64_t)(unsigned char)s[0] << 16 | (uint64_t)(unsigned char)s[n >> 1] << 8 |
			    (unsigned char)s[n - 1];
			b = 0;
		} else
			a = b = 0;
	} else {
		size_t i = n;
		const char *q = s;
		for (; i > 16; i -= 16, q += 16)
			seed = mix(rd64(q) ^ p1, rd64(q + 8) ^ seed);
		a = rd64(q + i - 16);
		b = rd64(q + i - 8);
	}
	uint64_t h = mix(p1 ^ n, mix(a ^ p1, b ^ seed ^ p0));
	return (uint32_t)(h ^ (h >> 32));
}

static uint32_t str_len(const char *t)
{
	uint32_t n;
	memcpy(&n, t - 4, 4);
	return n;
}

/* The id of s, or KF_NONE with *slot the empty slot where it goes. */
static inline __attribute__((always_inline)) kf_sid str_find(const kf_ctx *c, const char *s, size_t n,
							   uint32_t h, uint32_t *slot)
{
	const uint64_t *tab = c->strtab.slot;
	uint32_t mask = c->strtab.cap - 1;
	for (uint32_t i = h & mask, step = 1;; i = (i + step++) & mask) {
		uint64_t e = tab[i];
		if (!e) {
			*slot = i;
			return KF_NONE;
		}
		if ((uint32_t)(e >> 32) == h) {
			kf_sid id = (uint32_t)e - 1;
			const char *t = c->str[id];
			if (str_len(t) == n && memcmp(t, s, n) == 0)
				return id;
		}
	}
}

/* Moves every slot to a table of cap slots; the hash in the slot places
 * it, so no string is read. */
static void str_rehash(kf_ctx *c, uint32_t cap)
{
	kf_strtab old = c->strtab;
	c->strtab.slot = kf_xcalloc(cap, sizeof *c->strtab.slot);
	c->strtab.cap = cap;
	for (uint32_t i = 0; i < old.cap; i++) {
		uint64_t e = old.slot[i];
		if (!e)
			continue;
		uint32_t j = (uint32_t)(e >> 32) & (cap - 1);
		for (uint32_t step = 1; c->strtab.slot[j]; j = (j + step++) & (cap - 1))
			;
		c->strtab.slot[j] = e;
	}
	free(old.slot);
}

kf_sid kf_intern_hashed(kf_ctx *c, const char *s, size_t n, uint32_t h)
{
	if (!c->strtab.cap)
		str_rehash(c, 1024);
	uint32_t slot = 0;
	kf_sid id = str_find(c, s, n, h, &slot);
	if (id != KF_NONE)
		return id;
	if ((uint64_t)(c->strtab.n + 1) * 5 > (uint64_t)c->strtab.cap * 4) { /* 80 %: the tags keep probes cheap */
		str_rehash(c, c->strtab.cap * 2);
		str_find(c, s, n, h, &slot);
	}
	if (c->nstr == c->capstr)
		kf_grow((void **)&c->str, &c->capstr, c->nstr + 1, sizeof *c->str);
	/* the length, the bytes and a NUL, packed: 12 bytes for "v12345" */
	char *t = kf_arena_take(&c->arena, 4 + n + 1, 4);
	uint32_t len = (uint32_t)n;
	memcpy(t, &len, 4);
	memcpy(t + 4, s, n);
	t[4 + n] = 0;
	id = c->nstr++;
	c->str[id] = t + 4;
	c->strtab.slot[slot] = (uint64_t)h << 32 | (id + 1);
	c->strtab.n++;
	return id;
}

kf_sid kf_intern(kf_ctx *c, const char *s, size_t n) { return kf_intern_hashed(c, s, n, kf_str_hash(s, n)); }

void kf_str_reserve(kf_ctx *c, uint32_t n)
{
	uint64_t need = (uint64_t)c->strtab.n + n, cap = c->strtab.cap ? c->strtab.cap : 1024;
	while (need * 5 > cap * 4 && cap < (1u << 31))
		cap *= 2;
	if (cap > c->strtab.cap)
		str_rehash(c, (uint32_t)cap);
	if (need > c->capstr && need < UINT32_MAX)
		kf_grow((void **)&c->str, &c->capstr, (uint32_t)need, sizeof *c->str);
}

kf_sid kf_intern_cstr(kf_ctx *c, const char *s) { return kf_intern(c, s, strlen(s)); }

kf_sid kf_lookup_hashed(const kf_ctx *c, const char *s, size_t n, uint32_t h)
{
	uint32_t slot;
	if (!c->strtab.cap)
		return KF_NONE;
	return str_find(c, s, n, h, &slot);
}

kf_sid kf_lookup_str(const kf_ctx *c, const char *s, size_t n) { return kf_lookup_hashed(c, s, n, kf_str_hash(s, n)); }

void kf_str_prefetch(const kf_ctx *c, uint32_t h)
{
	if (c->strtab.cap)
		__builtin_prefetch(&c->strtab.slot[h & (c->strtab.cap - 1)]);
}

const char *kf_str(const kf_ctx *c, kf_sid id) { return id < c->nstr ? c->str[id] : ""; }

const char *kf_str_padded(const kf_ctx *c, kf_sid id, size_t *len)
{
	static const char none[KF_ARENA_SLACK + 1]; /* "", readable as far as a real one */
	if (id >= c->nstr) {
		*len = 0;
		return none;
	}
	*len = str_len(c->str[id]);
	return c->str[id]; /* in the arena: its slack covers the 16 bytes */
}
size_t kf_strlen(const kf_ctx *c, kf_sid id) { return id < c->nstr ? str_len(c->str[id]) : 0; }

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

double kf_round_to_dtype(double v, kf_dtype t)
{
	if (t == KF_F32)
		return (float)v;
	if (t == KF_F16 || t == KF_BF16) {
		int mant = t == KF_F16 ? 11 : 8;
		if (v == 0 || !isfinite(v))
			return v;
		if (fabs(v) >= kf_dtype_overflow(t))
			return v < 0 ? -INFINITY : INFINITY;
		int e;
		frexp(v, &e);
		/* subnormals: a fixed quantum below the smallest normal
		 * (f16 2^-14: quantum 2^-24; bf16 2^-126, as f32: 2^-133) */
		int emin = t == KF_F16 ? -13 : -125;
		if (e < emin)
			e = emin;
		double q = ldexp(1.0, e - mant);
		return nearbyint(v / q) * q;
	}
	return v;
}

double kf_dtype_overflow(kf_dtype t)
{
	/* the largest finite value plus half its unit in the last place:
	 * from there on, round-to-nearest-even gives infinity */
	switch (t) {
	case KF_F16: return 65520.0;                      /* 65504 + 16 */
	case KF_BF16: return ldexp(1.0, 128) - ldexp(1.0, 119);
	case KF_F32: return ldexp(1.0, 128) - ldexp(1.0, 103);
	default: return INFINITY;
	}
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
	double want = kf_round_to_dtype(v, t);
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(s, sizeof s, "%.*g", prec, v);
		if (kf_round_to_dtype(strtod(s, NULL), t) == want)
			break;
	}
	if (!strpbrk(s, ".e"))
		strcat(s, ".0"); /* keep it a float literal */
	kf_buf_puts(b, s);
}

int kf_write_all(int fd, const void *p, size_t n)
{
	const char *s = p;
	while (n) {
		ssize_t w = write(fd, s, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? errno : EIO;
		s += w;
		n -= (size_t)w;
	}
	return 0;
}
