/* print_lit.c: the printer's buffer and the texts inside a statement:
 * numbers, strings, types, op names, attributes and constants (see
 * print_int.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "print_int.h"

/* ---- the buffer and numbers ---- */

void kf_print_grow(kf_buf *b, size_t n)
{
	size_t cap = b->cap ? b->cap : 256;
	while (cap < b->n + n + 1)
		cap *= 2;
	b->p = realloc(b->p, cap);
	if (!b->p)
		abort();
	b->cap = cap;
}

/* A copy of s in the printer's arena, readable to a multiple of 16 bytes. */
pstr kf_print_keep(printer *pr, const char *s, size_t n)
{
	char *d = kf_alloc(&pr->arena, n + 16);
	memcpy(d, s, n);
	return (pstr){d, (uint32_t)n};
}

void kf_print_u64(printer *pr, uint64_t v)
{
	char s[24];
	int i = 24;
	do
		s[--i] = (char)('0' + v % 10);
	while ((v /= 10) != 0);
	put(pr, s + i, (size_t)(24 - i));
}

static void put_i64(printer *pr, int64_t v)
{
	if (v < 0) {
		putch(pr, '-');
		kf_print_u64(pr, 0 - (uint64_t)v);
	} else
		kf_print_u64(pr, (uint64_t)v);
}

void kf_print_flush(printer *pr, bool all)
{
	kf_buf *b = pr->out;
	if (!pr->sink || (!all && b->n < PRINT_CHUNK))
		return;
	if (b->n && !pr->werr && fwrite(b->p, 1, b->n, pr->sink) != b->n)
		pr->werr = errno ? errno : EIO;
	b->n = 0;
}

/* ---- strings and names ---- */

/* Length of the valid UTF-8 sequence at s (of at most n bytes), or 0. */
static int utf8_len(const unsigned char *s, size_t n)
{
	int len = s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc2 && s[0] < 0xe0 ? 2 : 0;
	if (!len || (size_t)len > n)
		return 0;
	for (int i = 1; i < len; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] > 0x9f) ||
	    (s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] > 0x8f))
		return 0;
	return len;
}

/* A string literal; what the lexer would not take back is escaped. */
void kf_print_string(kf_buf *b, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	kf_buf_putc(b, '"');
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];
		int u;
		if (ch == '"' || ch == '\\') {
			kf_buf_putc(b, '\\');
			kf_buf_putc(b, (char)ch);
		} else if (ch == '\n') {
			kf_buf_put(b, "\\n", 2);
		} else if (ch == '\t') {
			kf_buf_put(b, "\\t", 2);
		} else if (ch >= 32 && ch < 127) {
			kf_buf_putc(b, (char)ch);
		} else if (ch >= 0x80 && (u = utf8_len((const unsigned char *)s + i, n - i)) > 0) {
			kf_buf_put(b, s + i, (size_t)u);
			i += (size_t)u - 1;
		} else {
			char e[4] = {'\\', 'x', hex[ch >> 4], hex[ch & 15]};
			kf_buf_put(b, e, 4);
		}
	}
	kf_buf_putc(b, '"');
}

/* The bytes of a name: [A-Za-z0-9_.$]. */
static const bool namech[256] = {
	['0'] = 1, ['1'] = 1, ['2'] = 1, ['3'] = 1, ['4'] = 1, ['5'] = 1, ['6'] = 1, ['7'] = 1,
	['8'] = 1, ['9'] = 1, ['_'] = 1, ['.'] = 1, ['$'] = 1,
	['a'] = 1, ['b'] = 1, ['c'] = 1, ['d'] = 1, ['e'] = 1, ['f'] = 1, ['g'] = 1, ['h'] = 1,
	['i'] = 1, ['j'] = 1, ['k'] = 1, ['l'] = 1, ['m'] = 1, ['n'] = 1, ['o'] = 1, ['p'] = 1,
	['q'] = 1, ['r'] = 1, ['s'] = 1, ['t'] = 1, ['u'] = 1, ['v'] = 1, ['w'] = 1, ['x'] = 1,
	['y'] = 1, ['z'] = 1,
	['A'] = 1, ['B'] = 1, ['C'] = 1, ['D'] = 1, ['E'] = 1, ['F'] = 1, ['G'] = 1, ['H'] = 1,
	['I'] = 1, ['J'] = 1, ['K'] = 1, ['L'] = 1, ['M'] = 1, ['N'] = 1, ['O'] = 1, ['P'] = 1,
	['Q'] = 1, ['R'] = 1, ['S'] = 1, ['T'] = 1, ['U'] = 1, ['V'] = 1, ['W'] = 1, ['X'] = 1,
	['Y'] = 1, ['Z'] = 1,
};

bool kf_print_valid_name(const char *s, size_t n)
{
	if (!n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!namech[(unsigned char)s[i]])
			return false;
	return true;
}

/* ---- types ---- */

void kf_print_type(kf_buf *out, const kf_ctx *c, kf_tid tid)
{
	const kf_type *t = kf_type_get(c, tid);
	kf_buf_puts(out, kf_dtype_name((kf_dtype)t->dtype));
	kf_buf_putc(out, '[');
	for (int i = 0; i < t->rank; i++) {
		if (i)
			kf_buf_putc(out, ',');
		if (KF_IS_SYM(t->dim[i])) {
			kf_sid s = KF_SYM_SID(t->dim[i]);
			kf_buf_put(out, kf_str(c, s), kf_strlen(c, s));
		} else
			kf_buf_printf(out, "%lld", (long long)t->dim[i]);
	}
	kf_buf_putc(out, ']');
}

/* Grows a per-id cache of texts to hold id. */
static void cache_grow(pstr **tab, uint32_t *cap, uint32_t id)
{
	uint32_t n = *cap ? *cap : 64;
	while (n <= id)
		n *= 2;
	*tab = realloc(*tab, n * sizeof **tab);
	if (!*tab)
		abort();
	memset(*tab + *cap, 0, (n - *cap) * sizeof **tab);
	*cap = n;
}

/* Tids are small in practice: a larger one is printed without the cache. */
const pstr *kf_print_type_text(printer *pr, kf_tid tid)
{
	if (tid >= (1u << 24))
		return NULL;
	if (tid >= pr->captc)
		cache_grow(&pr->tc, &pr->captc, tid);
	pstr *e = &pr->tc[tid];
	if (!e->s) {
		kf_buf b = {0};
		kf_print_type(&b, pr->c, tid);
		*e = kf_print_keep(pr, b.p, b.n);
		kf_buf_free(&b);
	}
	return e;
}

void kf_print_put_type(printer *pr, kf_tid tid)
{
	const pstr *t = kf_print_type_text(pr, tid);
	if (t)
		put_padded(pr, t);
	else
		kf_print_type(pr->out, pr->c, tid);
}

const pstr *kf_print_op_text(printer *pr, int op)
{
	if ((uint32_t)op >= pr->capoc)
		cache_grow(&pr->oc, &pr->capoc, (uint32_t)op);
	pstr *e = &pr->oc[op];
	if (!e->s) {
		const char *nm = kf_op(pr->c, op)->name;
		*e = kf_print_keep(pr, nm, strlen(nm));
	}
	return e;
}
/* ---- attributes and constants ---- */

static void put_attrval(printer *pr, const kf_attrval *v)
{
	switch (v->kind) {
	case KF_ATTR_INT: put_i64(pr, v->i); break;
	case KF_ATTR_FLOAT: kf_buf_float(pr->out, v->f, KF_F64); break;
	case KF_ATTR_STR: kf_print_string(pr->out, kf_str(pr->c, v->s), kf_strlen(pr->c, v->s)); break;
	case KF_ATTR_BOOL:
		if (v->b)
			PUTS(pr, "true");
		else
			PUTS(pr, "false");
		break;
	case KF_ATTR_LIST:
		putch(pr, '[');
		for (uint32_t i = 0; i < v->n; i++) {
			if (i)
				PUTS(pr, ", ");
			put_attrval(pr, &v->list[i]);
		}
		putch(pr, ']');
		break;
	}
}

void kf_print_attrs(printer *pr, const kf_node *x)
{
	PUTS(pr, " {");
	for (uint32_t i = 0; i < x->nattr; i++) {
		const char *k = kf_str(pr->c, x->attr[i].key);
		size_t kn = kf_strlen(pr->c, x->attr[i].key);
		if (i)
			PUTS(pr, ", ");
		if (kf_print_valid_name(k, kn) && !(k[0] >= '0' && k[0] <= '9') && k[0] != '.')
			put(pr, k, kn);
		else
			kf_print_string(pr->out, k, kn);
		PUTS(pr, " = ");
		put_attrval(pr, &x->attr[i].v);
	}
	putch(pr, '}');
}

static void put_elem(printer *pr, const kf_const *k, kf_dtype dt, uint64_t i)
{
	if (kf_dtype_is_float(dt))
		kf_buf_float(pr->out, k->f[i], dt);
	else if (dt == KF_I1 && k->i[i])
		PUTS(pr, "true");
	else if (dt == KF_I1)
		PUTS(pr, "false");
	else
		put_i64(pr, k->i[i]);
}

/* Elements from *i on, nested by the dims from d on. */
static void put_nested(printer *pr, const kf_const *k, const kf_type *t, int d, uint64_t *i)
{
	if (d == t->rank) {
		put_elem(pr, k, (kf_dtype)t->dtype, (*i)++);
		return;
	}
	putch(pr, '[');
	for (int64_t j = 0; j < t->dim[d]; j++) {
		if (j)
			PUTS(pr, ", ");
		put_nested(pr, k, t, d + 1, i);
		kf_print_flush(pr, false); /* a big constant streams too */
	}
	putch(pr, ']');
}

void kf_print_const(printer *pr, const kf_const *k, kf_tid tid)
{
	const kf_type *t = kf_type_get(pr->c, tid);
	kf_dtype dt = (kf_dtype)t->dtype;
	if (k->kind == KF_CONST_FILE) {
		PUTS(pr, "file(");
		kf_print_string(pr->out, kf_str(pr->c, k->path), kf_strlen(pr->c, k->path));
		putch(pr, ')');
		return;
	}
	if (k->kind == KF_CONST_SCALAR && k->n >= 1) {
		put_elem(pr, k, dt, 0);
		return;
	}
	int64_t numel = kf_type_numel(t);
	PUTS(pr, "dense<");
	if (k->n == 1 && (numel != 1 || t->rank == 0)) {
		put_elem(pr, k, dt, 0); /* a splat */
	} else if (numel >= 0 && k->n == (uint64_t)numel) {
		uint64_t i = 0;
		put_nested(pr, k, t, 0, &i);
	} else { /* a payload that disagrees with its type: flat, so it shows */
		putch(pr, '[');
		for (uint64_t i = 0; i < k->n; i++) {
			if (i)
				PUTS(pr, ", ");
			put_elem(pr, k, dt, i);
			kf_print_flush(pr, false);
		}
		putch(pr, ']');
	}
	putch(pr, '>');
}
