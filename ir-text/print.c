/* print.c: graphs back to .kf text, in the form the parser reads.
 *
 * Value names are printed as written.  Passes make values without names and
 * may leave two values of one scope with the same name; each scope (graph
 * body, region body) is named before it is printed: the first holder keeps
 * a name, later ones get `name_1`, `name_2`, ..., unnamed values get `%0`,
 * `%1`, ..., and no generated name equals any name of that scope.  So
 * print(parse(text)) is a fixed point: the printed names are unique and
 * parse back to themselves.
 *
 * Speed and size: per-sid marks stamped with a scope id (no clearing), a
 * string set only for generated names, 4 bytes per value for its printed
 * name (its own sid, or a generated one), cached texts of types and op
 * names, and writes into the buffer without a call or a NUL each; O(n) in
 * the graph.  kf_print_module_file streams: the buffer goes to the file
 * every PRINT_CHUNK bytes, so a big module's text is never held whole. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "kf.h"

#define PRINT_CHUNK (64 * 1024)

typedef struct pstr {
	const char *s; /* readable 16 bytes past its end (put_padded) */
	uint32_t n;
} pstr;

/* A value's printed name: 0 while unnamed, else a sid (its own name) or,
 * with PN_GEN, an index into gen; PN_MULTI: a result of a node with
 * several, used as `%name#k`. */
#define PN_GEN 0x80000000u
#define PN_MULTI 0x40000000u
#define PN_INDEX 0x3fffffffu

/* Per sid: the stamp of the scope that last marked it (2*stamp: a name of
 * that scope, 2*stamp + 1: taken), and whether it is a printable name. */
#define SM_KNOWN 0x80000000u
#define SM_VALID 0x40000000u
#define SM_MARK 0x3fffffffu

typedef struct printer {
	kf_buf *out;
	FILE *sink;   /* kf_print_module_file: where out goes */
	int werr;     /* errno of a failed write to sink, or 0 */
	kf_graph *g;
	kf_ctx *c;
	uint32_t *pn; /* per value */
	uint32_t *sm; uint32_t capsm, stamp; /* per sid */
	uint32_t *suf;                       /* per sid: the last suffix tried; NULL until a clash */
	pstr *gen; uint32_t ngen, capgen;
	uint32_t *gset; uint32_t capgset, ngset; /* generated names of this scope */
	pstr *tc; uint32_t captc;                /* type texts by tid */
	pstr *oc; uint32_t capoc;                /* op names by op */
	kf_arena arena;
} printer;

/* ---- small writers ---- */

static void out_grow(kf_buf *b, size_t n)
{
	size_t cap = b->cap ? b->cap : 256;
	while (cap < b->n + n + 1)
		cap *= 2;
	b->p = realloc(b->p, cap);
	if (!b->p)
		abort();
	b->cap = cap;
}

/* Room for n more bytes (and a NUL after them). */
static inline char *room(printer *pr, size_t n)
{
	kf_buf *b = pr->out;
	if (b->cap - b->n < n + 1)
		out_grow(b, n);
	return b->p + b->n;
}

static inline void put(printer *pr, const char *s, size_t n)
{
	memcpy(room(pr, n), s, n);
	pr->out->n += n;
}

/* Short constants: the copy is inlined. */
#define PUTS(pr, lit) put(pr, lit, sizeof lit - 1)

static inline void putch(printer *pr, char ch)
{
	*room(pr, 1) = ch;
	pr->out->n++;
}

/* A text whose storage is readable 16 bytes past its end (kf_str_padded,
 * keep_padded): copied in 16-byte pieces without a call. */
static inline void put_padded(printer *pr, const pstr *t)
{
	char *d = room(pr, t->n + 16);
	for (uint32_t i = 0; i < t->n; i += 16)
		memcpy(d + i, t->s + i, 16);
	pr->out->n += t->n;
}

/* A copy of s in the printer's arena, readable to a multiple of 16 bytes. */
static pstr keep_padded(printer *pr, const char *s, size_t n)
{
	char *d = kf_alloc(&pr->arena, n + 16);
	memcpy(d, s, n);
	return (pstr){d, (uint32_t)n};
}

static void put_u64(printer *pr, uint64_t v)
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
		put_u64(pr, 0 - (uint64_t)v);
	} else
		put_u64(pr, (uint64_t)v);
}

static void indent(printer *pr, int n)
{
	static const char sp[] = "                                ";
	for (; n > 32; n -= 32)
		put(pr, sp, 32);
	put(pr, sp, (size_t)n);
}

/* Hands the buffer to the sink when it is big enough (or at the end). */
static void flush(printer *pr, bool all)
{
	kf_buf *b = pr->out;
	if (!pr->sink || (!all && b->n < PRINT_CHUNK))
		return;
	if (b->n && !pr->werr && fwrite(b->p, 1, b->n, pr->sink) != b->n)
		pr->werr = errno ? errno : EIO;
	b->n = 0;
}

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
static void put_string(kf_buf *b, const char *s, size_t n)
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

static bool valid_name(const char *s, size_t n)
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

/* The cached text of type tid; NULL for a tid too large to cache (tids
 * are small in practice). */
static const pstr *type_text(printer *pr, kf_tid tid)
{
	if (tid >= (1u << 24))
		return NULL;
	if (tid >= pr->captc)
		cache_grow(&pr->tc, &pr->captc, tid);
	pstr *e = &pr->tc[tid];
	if (!e->s) {
		kf_buf b = {0};
		kf_print_type(&b, pr->c, tid);
		*e = keep_padded(pr, b.p, b.n);
		kf_buf_free(&b);
	}
	return e;
}

static void put_type(printer *pr, kf_tid tid)
{
	const pstr *t = type_text(pr, tid);
	if (t)
		put_padded(pr, t);
	else
		kf_print_type(pr->out, pr->c, tid);
}

static const pstr *opname_text(printer *pr, int op)
{
	if ((uint32_t)op >= pr->capoc)
		cache_grow(&pr->oc, &pr->capoc, (uint32_t)op);
	pstr *e = &pr->oc[op];
	if (!e->s) {
		const char *nm = kf_op(pr->c, op)->name;
		*e = keep_padded(pr, nm, strlen(nm));
	}
	return e;
}

/* ---- naming ---- */

/* The mark of sid s; the array grows to hold it. */
static uint32_t *smark(printer *pr, kf_sid s)
{
	if (s >= pr->capsm) {
		uint32_t cap = pr->capsm ? pr->capsm : 1024;
		while (cap <= s)
			cap *= 2;
		pr->sm = realloc(pr->sm, cap * sizeof *pr->sm);
		if (!pr->sm)
			abort();
		memset(pr->sm + pr->capsm, 0, (cap - pr->capsm) * sizeof *pr->sm);
		if (pr->suf) {
			pr->suf = realloc(pr->suf, cap * sizeof *pr->suf);
			if (!pr->suf)
				abort();
			memset(pr->suf + pr->capsm, 0, (cap - pr->capsm) * sizeof *pr->suf);
		}
		pr->capsm = cap;
	}
	return &pr->sm[s];
}

/* Whether sid s prints as a name: not empty, namech only, and small enough
 * for a PN code; checked once per sid. */
static bool printable_slow(printer *pr, kf_sid s)
{
	uint32_t *m = smark(pr, s);
	if (!(*m & SM_KNOWN)) {
		size_t n;
		const char *t = kf_str_padded(pr->c, s, &n);
		*m |= SM_KNOWN | (valid_name(t, n) ? SM_VALID : 0);
	}
	return *m & SM_VALID;
}

static inline bool printable_name(printer *pr, kf_sid s)
{
	if (!s || s > PN_INDEX)
		return false;
	if (s < pr->capsm && (pr->sm[s] & SM_KNOWN))
		return pr->sm[s] & SM_VALID;
	return printable_slow(pr, s);
}

static void set_mark(printer *pr, kf_sid s, uint32_t mark)
{
	pr->sm[s] = (pr->sm[s] & ~SM_MARK) | mark;
}

static uint64_t str_hash(const char *s, size_t n)
{
	uint64_t h = 1469598103934665603ULL;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
	return h ^ (h >> 29);
}

/* Adds candidate name s to this scope's generated set unless it is taken by
 * a name of the scope or an earlier generated one; true when added. */
static bool gen_claim(printer *pr, const char *s, size_t n)
{
	kf_sid sid = kf_lookup_str(pr->c, s, n);
	if (sid != KF_NONE && sid < pr->capsm && (pr->sm[sid] & SM_MARK) >= 2 * pr->stamp)
		return false;
	if ((pr->ngset + 1) * 2 > pr->capgset) {
		uint32_t cap = pr->capgset ? pr->capgset * 2 : 64, *old = pr->gset, oldcap = pr->capgset;
		pr->gset = malloc(cap * sizeof *pr->gset);
		if (!pr->gset)
			abort();
		memset(pr->gset, 0xff, cap * sizeof *pr->gset);
		pr->capgset = cap;
		for (uint32_t i = 0; i < oldcap; i++)
			if (old[i] != KF_NONE) {
				pstr *e = &pr->gen[old[i]];
				uint32_t j = (uint32_t)str_hash(e->s, e->n) & (cap - 1);
				while (pr->gset[j] != KF_NONE)
					j = (j + 1) & (cap - 1);
				pr->gset[j] = old[i];
			}
		free(old);
	}
	uint32_t mask = pr->capgset - 1, j = (uint32_t)str_hash(s, n) & mask;
	for (; pr->gset[j] != KF_NONE; j = (j + 1) & mask) {
		pstr *e = &pr->gen[pr->gset[j]];
		if (e->n == n && memcmp(e->s, s, n) == 0)
			return false;
	}
	if (pr->ngen == pr->capgen) {
		pr->capgen = pr->capgen ? pr->capgen * 2 : 64;
		pr->gen = realloc(pr->gen, pr->capgen * sizeof *pr->gen);
		if (!pr->gen)
			abort();
	}
	pr->gen[pr->ngen] = keep_padded(pr, s, n);
	pr->gset[j] = pr->ngen++;
	pr->ngset++;
	return true;
}

/* The next suffix to try for name s (`s_1`, `s_2`, ...): a counter per name
 * keeps many clashes linear. */
static uint32_t next_suffix(printer *pr, kf_sid s)
{
	if (!pr->suf) {
		pr->suf = calloc(pr->capsm, sizeof *pr->suf);
		if (!pr->suf)
			abort();
	}
	return ++pr->suf[s];
}

/* Gives value v (and the other results of its node) its printed name. */
static void assign(printer *pr, kf_vid v, uint32_t nres, uint32_t *counter)
{
	kf_sid s = pr->g->val[v].name;
	uint32_t code;
	if (printable_name(pr, s) && (pr->sm[s] & SM_MARK) != 2 * pr->stamp + 1) {
		set_mark(pr, s, 2 * pr->stamp + 1);
		code = s;
	} else if (printable_name(pr, s)) {
		kf_buf b = {0};
		for (;;) {
			b.n = 0;
			kf_buf_put(&b, kf_str(pr->c, s), kf_strlen(pr->c, s));
			kf_buf_printf(&b, "_%u", next_suffix(pr, s));
			if (gen_claim(pr, b.p, b.n))
				break;
		}
		kf_buf_free(&b);
		code = PN_GEN | (pr->ngen - 1);
	} else {
		char buf[16];
		int n;
		do
			n = snprintf(buf, sizeof buf, "%u", (*counter)++);
		while (!gen_claim(pr, buf, (size_t)n));
		code = PN_GEN | (pr->ngen - 1);
	}
	if (nres > 1)
		code |= PN_MULTI;
	for (uint32_t i = 0; i < nres; i++)
		pr->pn[v + i] = code;
}

static inline void mark_name(printer *pr, kf_sid s, uint32_t mine)
{
	if (printable_name(pr, s) && (pr->sm[s] & SM_MARK) < mine) {
		set_mark(pr, s, mine);
		if (pr->suf)
			pr->suf[s] = 0;
	}
}

static void name_scope(printer *pr, kf_bid b)
{
	kf_graph *g = pr->g;
	kf_block *bk = &g->blk[b];
	uint32_t counter = 0;
	pr->stamp++;
	if (pr->ngset) {
		memset(pr->gset, 0xff, pr->capgset * sizeof *pr->gset);
		pr->ngset = 0;
	}
	/* first every name of the scope, so that generated ones avoid them all;
	 * a name new to this scope starts its suffixes again */
	uint32_t mine = 2 * pr->stamp;
	for (uint32_t i = 0; i < bk->narg; i++)
		mark_name(pr, g->val[bk->arg[i]].name, mine);
	kf_foreach_node(g, b, n)
		if (g->node[n].nres)
			mark_name(pr, g->val[g->node[n].res0].name, mine);
	for (uint32_t i = 0; i < bk->narg; i++)
		assign(pr, bk->arg[i], 1, &counter);
	kf_foreach_node(g, b, n) {
		const kf_node *x = &g->node[n];
		kf_sid s = x->nres == 1 ? g->val[x->res0].name : 0;
		if (s && printable_name(pr, s) && (pr->sm[s] & SM_MARK) != mine + 1) {
			set_mark(pr, s, mine + 1); /* the common case of assign, inline */
			pr->pn[x->res0] = s;
		} else if (x->nres) {
			assign(pr, x->res0, x->nres, &counter);
		}
	}
}

/* `%name` of value v: at a definition, or (with #k) at a use. */
static void put_vname(printer *pr, kf_vid v, bool use)
{
	uint32_t e = v < pr->g->nval ? pr->pn[v] : 0;
	if (!e) { /* a broken graph still prints */
		PUTS(pr, "%<bad>");
		return;
	}
	putch(pr, '%');
	if (e & PN_GEN) {
		put_padded(pr, &pr->gen[e & PN_INDEX]);
	} else {
		size_t n;
		const char *t = kf_str_padded(pr->c, e & PN_INDEX, &n);
		put_padded(pr, &(pstr){t, (uint32_t)n});
	}
	if (use && (e & PN_MULTI)) {
		putch(pr, '#');
		put_u64(pr, pr->g->val[v].idx);
	}
}

/* The text of value v's name for put_simple; false when it takes more than
 * a copy (`#k`, or a broken graph's unnamed value). */
static inline bool vname_text(printer *pr, kf_vid v, pstr *t)
{
	uint32_t e = v < pr->g->nval ? pr->pn[v] : 0;
	if (!e || (e & PN_MULTI))
		return false;
	if (e & PN_GEN) {
		*t = pr->gen[e & PN_INDEX];
	} else {
		size_t n;
		t->s = kf_str_padded(pr->c, e, &n);
		t->n = (uint32_t)n;
	}
	return true;
}

static inline char *copy_padded(char *d, const pstr *t)
{
	for (uint32_t i = 0; i < t->n; i += 16)
		memcpy(d + i, t->s + i, 16);
	return d + t->n;
}

/* The common node, `%r = op(%a, %b) : type` (one result, at most 8
 * operands, no attributes, symbol, constant or region), written after one
 * room check: most of a big graph's text.  false: not such a node,
 * nothing written. */
static bool put_simple(printer *pr, kf_nid n, int ind)
{
	static const char sp[32] = "                                ";
	const kf_graph *g = pr->g;
	const kf_node *x = &g->node[n];
	pstr nm[9];
	if (x->nres != 1 || x->nin > 8 || x->nattr || x->sym || x->body != KF_NONE || x->op == KF_OP_CONST ||
	    ind > 32 || !vname_text(pr, x->res0, &nm[0]))
		return false;
	size_t need = 32 + 64 + nm[0].n;
	for (uint32_t i = 0; i < x->nin; i++) {
		if (!vname_text(pr, kf_in(g, n, i), &nm[i + 1]))
			return false;
		need += nm[i + 1].n + 20;
	}
	const pstr *op = opname_text(pr, x->op), *ty = type_text(pr, g->val[x->res0].type);
	if (!ty)
		return false;
	char *d = room(pr, need + op->n + ty->n), *d0 = d;
	memcpy(d, sp, 32);
	d += ind;
	*d++ = '%';
	d = copy_padded(d, &nm[0]);
	memcpy(d, " = ", 3);
	d = copy_padded(d + 3, op);
	*d++ = '(';
	for (uint32_t i = 0; i < x->nin; i++) {
		if (i) {
			memcpy(d, ", ", 2);
			d += 2;
		}
		*d++ = '%';
		d = copy_padded(d, &nm[i + 1]);
	}
	memcpy(d, ") : ", 4);
	d = copy_padded(d + 4, ty);
	*d++ = '\n';
	pr->out->n += (size_t)(d - d0);
	return true;
}

/* ---- attributes and constants ---- */

static void put_attrval(printer *pr, const kf_attrval *v)
{
	switch (v->kind) {
	case KF_ATTR_INT: put_i64(pr, v->i); break;
	case KF_ATTR_FLOAT: kf_buf_float(pr->out, v->f, KF_F64); break;
	case KF_ATTR_STR: put_string(pr->out, kf_str(pr->c, v->s), kf_strlen(pr->c, v->s)); break;
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

static void put_attrs(printer *pr, const kf_node *x)
{
	PUTS(pr, " {");
	for (uint32_t i = 0; i < x->nattr; i++) {
		const char *k = kf_str(pr->c, x->attr[i].key);
		size_t kn = kf_strlen(pr->c, x->attr[i].key);
		if (i)
			PUTS(pr, ", ");
		if (valid_name(k, kn) && !(k[0] >= '0' && k[0] <= '9') && k[0] != '.')
			put(pr, k, kn);
		else
			put_string(pr->out, k, kn);
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
		flush(pr, false); /* a big constant streams too */
	}
	putch(pr, ']');
}

static void put_const(printer *pr, const kf_const *k, kf_tid tid)
{
	const kf_type *t = kf_type_get(pr->c, tid);
	kf_dtype dt = (kf_dtype)t->dtype;
	if (k->kind == KF_CONST_FILE) {
		PUTS(pr, "file(");
		put_string(pr->out, kf_str(pr->c, k->path), kf_strlen(pr->c, k->path));
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
			flush(pr, false);
		}
		putch(pr, ']');
	}
	putch(pr, '>');
}

/* ---- nodes, blocks, graphs ---- */

static void put_block(printer *pr, kf_bid b, int ind);

static void put_node(printer *pr, kf_nid n, int ind)
{
	kf_graph *g = pr->g;
	const kf_node *x = &g->node[n];
	if (put_simple(pr, n, ind))
		return;
	uint32_t flags = kf_op(pr->c, x->op)->flags;
	indent(pr, ind);
	if (x->nres) {
		put_vname(pr, x->res0, false);
		if (x->nres > 1) {
			putch(pr, ':');
			put_u64(pr, x->nres);
		}
		PUTS(pr, " = ");
	}
	put_padded(pr, opname_text(pr, x->op));
	if ((flags & KF_OPF_TERMINATOR) && x->body == KF_NONE) {
		for (uint32_t i = 0; i < x->nin; i++) {
			putch(pr, i ? ',' : ' ');
			if (i)
				putch(pr, ' ');
			put_vname(pr, kf_in(g, n, i), true);
		}
		putch(pr, '\n');
		return;
	}
	if (x->op == KF_OP_CONST && x->cst) {
		putch(pr, ' ');
		put_const(pr, x->cst, g->val[x->res0].type);
	} else {
		if (x->sym) {
			PUTS(pr, " @");
			put(pr, kf_str(pr->c, x->sym), kf_strlen(pr->c, x->sym));
		}
		putch(pr, '(');
		for (uint32_t i = 0; i < x->nin; i++) {
			if (i)
				PUTS(pr, ", ");
			put_vname(pr, kf_in(g, n, i), true);
		}
		putch(pr, ')');
	}
	if (x->nattr)
		put_attrs(pr, x);
	for (uint32_t i = 0; i < x->nres; i++) {
		if (i)
			PUTS(pr, ", ");
		else
			PUTS(pr, " : ");
		put_type(pr, g->val[x->res0 + i].type);
	}
	if (x->body != KF_NONE) {
		PUTS(pr, " {\n");
		put_block(pr, x->body, ind);
		indent(pr, ind);
		putch(pr, '}');
	}
	putch(pr, '\n');
}

/* A region body: `^(args):` at the node's indent, its nodes two deeper. */
static void put_block(printer *pr, kf_bid bid, int ind)
{
	kf_graph *g = pr->g;
	name_scope(pr, bid);
	indent(pr, ind);
	PUTS(pr, "^(");
	for (uint32_t i = 0; i < g->blk[bid].narg; i++) {
		kf_vid a = g->blk[bid].arg[i];
		if (i)
			PUTS(pr, ", ");
		put_vname(pr, a, false);
		PUTS(pr, ": ");
		put_type(pr, g->val[a].type);
	}
	PUTS(pr, "):\n");
	kf_foreach_node(g, bid, n) {
		put_node(pr, n, ind + 2);
		flush(pr, false);
	}
}

static void print_graph(printer *pr)
{
	kf_graph *g = pr->g;
	pr->pn = calloc(g->nval ? g->nval : 1, sizeof *pr->pn);
	if (!pr->pn)
		abort();
	name_scope(pr, 0);
	PUTS(pr, "graph @");
	put(pr, kf_str(pr->c, g->name), kf_strlen(pr->c, g->name));
	putch(pr, '(');
	for (uint32_t i = 0; i < g->blk[0].narg; i++) {
		kf_vid a = g->blk[0].arg[i];
		if (i)
			PUTS(pr, ", ");
		put_vname(pr, a, false);
		PUTS(pr, ": ");
		put_type(pr, g->val[a].type);
	}
	PUTS(pr, ") -> (");
	for (uint32_t i = 0; i < g->nres; i++) {
		if (i)
			PUTS(pr, ", ");
		put_type(pr, g->res[i]);
	}
	PUTS(pr, ") {\n");
	kf_foreach_node(g, 0, n) {
		put_node(pr, n, 2);
		flush(pr, false);
	}
	PUTS(pr, "}\n");
	pr->out->p[pr->out->n] = 0; /* room() kept a byte for it */
	free(pr->pn);
	pr->pn = NULL;
}

static void printer_free(printer *pr)
{
	free(pr->sm);
	free(pr->suf);
	free(pr->gen);
	free(pr->gset);
	free(pr->tc);
	free(pr->oc);
	kf_arena_free(&pr->arena);
}

void kf_print_graph(kf_buf *out, kf_graph *g)
{
	printer pr = {.out = out, .g = g, .c = g->ctx};
	print_graph(&pr);
	printer_free(&pr);
}

static void print_module(printer *pr, kf_module *m)
{
	for (uint32_t i = 0; i < m->ngraph; i++) {
		if (i)
			putch(pr, '\n');
		pr->g = m->graph[i];
		print_graph(pr);
	}
	printer_free(pr);
}

void kf_print_module(kf_buf *out, kf_module *m)
{
	print_module(&(printer){.out = out, .c = m->ctx}, m);
}

int kf_print_module_file(FILE *f, kf_module *m)
{
	kf_buf out = {0};
	printer pr = {.out = &out, .sink = f, .c = m->ctx};
	print_module(&pr, m);
	flush(&pr, true);
	kf_buf_free(&out);
	if (pr.werr)
		errno = pr.werr;
	return pr.werr ? -1 : 0;
}
