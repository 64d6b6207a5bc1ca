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
 * Speed: per-sid marks stamped with a scope id (no clearing), a string set
 * only for generated names, a cache of type texts and the use text of each
 * value in one slot; O(n) in the graph. */
#include <stdlib.h>
#include <string.h>
#include "kf.h"

typedef struct pstr {
	const char *s;
	uint32_t n;
} pstr;

/* The text of a use of a value, `%name` or `%name#k`, kept inline when short
 * so that printing an operand touches one slot, not the string table. */
typedef struct pname {
	uint32_t n;  /* bytes of the use text */
	uint32_t bn; /* bytes of `%name` alone (the definition) */
	union {
		char s[16];
		const char *p;
	};
} pname;

typedef struct printer {
	kf_buf *out;
	kf_graph *g;
	kf_ctx *c;
	pname *pn;    /* per value */
	struct smark { uint32_t mark, suf; } *sm; /* per sid: 2*stamp used, +1 taken */
	uint32_t capsm, stamp;
	pstr *gen; uint32_t ngen, capgen;
	uint32_t *gset; uint32_t capgset, ngset; /* generated names of this scope */
	pstr *tc; uint32_t captc;                /* type texts by tid */
	kf_arena arena;
} printer;

/* ---- small writers ---- */

static void put_u64(kf_buf *b, uint64_t v)
{
	char s[24];
	int i = 24;
	do
		s[--i] = (char)('0' + v % 10);
	while ((v /= 10) != 0);
	kf_buf_put(b, s + i, (size_t)(24 - i));
}

static void put_i64(kf_buf *b, int64_t v)
{
	if (v < 0) {
		kf_buf_putc(b, '-');
		put_u64(b, 0 - (uint64_t)v);
	} else
		put_u64(b, (uint64_t)v);
}

static void indent(kf_buf *b, int n)
{
	static const char sp[] = "                                ";
	for (; n > 32; n -= 32)
		kf_buf_put(b, sp, 32);
	kf_buf_put(b, sp, (size_t)n);
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

static bool is_namech(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
	       ch == '_' || ch == '.' || ch == '$';
}

static bool valid_name(const char *s, size_t n)
{
	if (!n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!is_namech(s[i]))
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
			put_i64(out, t->dim[i]);
	}
	kf_buf_putc(out, ']');
}

static void put_type(printer *pr, kf_tid tid)
{
	if (tid >= (1u << 24)) { /* not worth caching; tids are small in practice */
		kf_print_type(pr->out, pr->c, tid);
		return;
	}
	if (tid >= pr->captc) {
		uint32_t cap = pr->captc ? pr->captc : 64;
		while (cap <= tid)
			cap *= 2;
		pr->tc = realloc(pr->tc, cap * sizeof *pr->tc);
		if (!pr->tc)
			abort();
		memset(pr->tc + pr->captc, 0, (cap - pr->captc) * sizeof *pr->tc);
		pr->captc = cap;
	}
	pstr *e = &pr->tc[tid];
	if (!e->s) {
		kf_buf b = {0};
		kf_print_type(&b, pr->c, tid);
		e->s = kf_strdup_arena(&pr->arena, b.p, b.n);
		e->n = (uint32_t)b.n;
		kf_buf_free(&b);
	}
	kf_buf_put(pr->out, e->s, e->n);
}

/* ---- naming ---- */

static struct smark *smark(printer *pr, kf_sid s)
{
	if (s >= pr->capsm) {
		uint32_t cap = pr->capsm ? pr->capsm : 1024;
		while (cap <= s)
			cap *= 2;
		pr->sm = realloc(pr->sm, cap * sizeof *pr->sm);
		if (!pr->sm)
			abort();
		memset(pr->sm + pr->capsm, 0, (cap - pr->capsm) * sizeof *pr->sm);
		pr->capsm = cap;
	}
	return &pr->sm[s];
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
	if (sid != KF_NONE && sid < pr->capsm && pr->sm[sid].mark >= 2 * pr->stamp)
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
	pr->gen[pr->ngen] = (pstr){kf_strdup_arena(&pr->arena, s, n), (uint32_t)n};
	pr->gset[j] = pr->ngen++;
	pr->ngset++;
	return true;
}

static bool printable_name(printer *pr, kf_sid s)
{
	return s && valid_name(kf_str(pr->c, s), kf_strlen(pr->c, s));
}

static void set_pname(printer *pr, kf_vid v, const char *name, uint32_t len, int64_t idx)
{
	char buf[32];
	uint32_t n = len + 1;
	if (idx >= 0)
		n += (uint32_t)snprintf(buf, sizeof buf, "#%lld", (long long)idx);
	pname *e = &pr->pn[v];
	e->n = n;
	e->bn = len + 1;
	char *d = e->s;
	if (n > sizeof e->s) {
		d = kf_alloc(&pr->arena, n);
		e->p = d;
	}
	d[0] = '%';
	memcpy(d + 1, name, len);
	if (idx >= 0)
		memcpy(d + 1 + len, buf, n - len - 1);
}

/* Gives value v (and the other results of its node) its printed name. */
static void assign(printer *pr, kf_vid v, uint32_t nres, uint32_t *counter)
{
	kf_sid s = pr->g->val[v].name;
	const char *name;
	uint32_t len;
	char buf[64];
	if (printable_name(pr, s) && smark(pr, s)->mark != 2 * pr->stamp + 1) {
		pr->sm[s].mark = 2 * pr->stamp + 1;
		name = kf_str(pr->c, s);
		len = (uint32_t)kf_strlen(pr->c, s);
	} else if (printable_name(pr, s)) {
		kf_buf b = {0};
		for (;;) { /* the per-name suffix counter keeps many clashes linear */
			uint32_t k = ++pr->sm[s].suf;
			b.n = 0;
			kf_buf_put(&b, kf_str(pr->c, s), kf_strlen(pr->c, s));
			kf_buf_printf(&b, "_%u", k);
			if (gen_claim(pr, b.p, b.n))
				break;
		}
		kf_buf_free(&b);
		name = pr->gen[pr->ngen - 1].s;
		len = pr->gen[pr->ngen - 1].n;
	} else {
		int n;
		do
			n = snprintf(buf, sizeof buf, "%u", (*counter)++);
		while (!gen_claim(pr, buf, (size_t)n));
		name = pr->gen[pr->ngen - 1].s;
		len = pr->gen[pr->ngen - 1].n;
	}
	for (uint32_t i = 0; i < nres; i++)
		set_pname(pr, v + i, name, len, nres > 1 ? (int64_t)i : -1);
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
	/* first every name of the scope, so that generated ones avoid them all */
	for (uint32_t i = 0; i < bk->narg; i++) {
		kf_sid s = g->val[bk->arg[i]].name;
		if (printable_name(pr, s))
			smark(pr, s)->mark = 2 * pr->stamp, pr->sm[s].suf = 0;
	}
	kf_foreach_node(g, b, n) {
		if (!g->node[n].nres)
			continue;
		kf_sid s = g->val[g->node[n].res0].name;
		if (printable_name(pr, s))
			smark(pr, s)->mark = 2 * pr->stamp, pr->sm[s].suf = 0;
	}
	for (uint32_t i = 0; i < bk->narg; i++)
		assign(pr, bk->arg[i], 1, &counter);
	kf_foreach_node(g, b, n)
		if (g->node[n].nres)
			assign(pr, g->node[n].res0, g->node[n].nres, &counter);
}

static const char *pname_text(const pname *e) { return e->n > sizeof e->s ? e->p : e->s; }

/* The name at a definition: `%name`. */
static void put_name(printer *pr, kf_vid v)
{
	const pname *e = &pr->pn[v];
	kf_buf_put(pr->out, pname_text(e), e->bn);
}

/* A use: %name, or %name#k for a result of a node with several. */
static void put_use(printer *pr, kf_vid v)
{
	if (v >= pr->g->nval || !pr->pn[v].n) { /* a broken graph still prints */
		kf_buf_puts(pr->out, "%<bad>");
		return;
	}
	const pname *e = &pr->pn[v];
	kf_buf_put(pr->out, pname_text(e), e->n);
}

/* ---- attributes and constants ---- */

static void put_attrval(printer *pr, const kf_attrval *v)
{
	kf_buf *b = pr->out;
	switch (v->kind) {
	case KF_ATTR_INT: put_i64(b, v->i); break;
	case KF_ATTR_FLOAT: kf_buf_float(b, v->f, KF_F64); break;
	case KF_ATTR_STR: put_string(b, kf_str(pr->c, v->s), kf_strlen(pr->c, v->s)); break;
	case KF_ATTR_BOOL: kf_buf_puts(b, v->b ? "true" : "false"); break;
	case KF_ATTR_LIST:
		kf_buf_putc(b, '[');
		for (uint32_t i = 0; i < v->n; i++) {
			if (i)
				kf_buf_put(b, ", ", 2);
			put_attrval(pr, &v->list[i]);
		}
		kf_buf_putc(b, ']');
		break;
	}
}

static void put_attrs(printer *pr, const kf_node *x)
{
	if (!x->nattr)
		return;
	kf_buf_put(pr->out, " {", 2);
	for (uint32_t i = 0; i < x->nattr; i++) {
		const char *k = kf_str(pr->c, x->attr[i].key);
		size_t kn = kf_strlen(pr->c, x->attr[i].key);
		if (i)
			kf_buf_put(pr->out, ", ", 2);
		if (valid_name(k, kn) && !(k[0] >= '0' && k[0] <= '9') && k[0] != '.')
			kf_buf_put(pr->out, k, kn);
		else
			put_string(pr->out, k, kn);
		kf_buf_put(pr->out, " = ", 3);
		put_attrval(pr, &x->attr[i].v);
	}
	kf_buf_putc(pr->out, '}');
}

static void put_elem(printer *pr, const kf_const *k, kf_dtype dt, uint64_t i)
{
	if (kf_dtype_is_float(dt))
		kf_buf_float(pr->out, k->f[i], dt);
	else if (dt == KF_I1)
		kf_buf_puts(pr->out, k->i[i] ? "true" : "false");
	else
		put_i64(pr->out, k->i[i]);
}

/* Elements from *i on, nested by the dims from d on. */
static void put_nested(printer *pr, const kf_const *k, const kf_type *t, int d, uint64_t *i)
{
	if (d == t->rank) {
		put_elem(pr, k, (kf_dtype)t->dtype, (*i)++);
		return;
	}
	kf_buf_putc(pr->out, '[');
	for (int64_t j = 0; j < t->dim[d]; j++) {
		if (j)
			kf_buf_put(pr->out, ", ", 2);
		put_nested(pr, k, t, d + 1, i);
	}
	kf_buf_putc(pr->out, ']');
}

static void put_const(printer *pr, const kf_const *k, kf_tid tid)
{
	const kf_type *t = kf_type_get(pr->c, tid);
	kf_dtype dt = (kf_dtype)t->dtype;
	kf_buf *b = pr->out;
	if (k->kind == KF_CONST_FILE) {
		kf_buf_puts(b, "file(");
		put_string(b, kf_str(pr->c, k->path), kf_strlen(pr->c, k->path));
		kf_buf_putc(b, ')');
		return;
	}
	if (k->kind == KF_CONST_SCALAR && k->n >= 1) {
		put_elem(pr, k, dt, 0);
		return;
	}
	int64_t numel = kf_type_numel(t);
	kf_buf_puts(b, "dense<");
	if (k->n == 1 && (numel != 1 || t->rank == 0)) {
		put_elem(pr, k, dt, 0); /* a splat */
	} else if (numel >= 0 && k->n == (uint64_t)numel) {
		uint64_t i = 0;
		put_nested(pr, k, t, 0, &i);
	} else { /* a payload that disagrees with its type: flat, so it shows */
		kf_buf_putc(b, '[');
		for (uint64_t i = 0; i < k->n; i++) {
			if (i)
				kf_buf_put(b, ", ", 2);
			put_elem(pr, k, dt, i);
		}
		kf_buf_putc(b, ']');
	}
	kf_buf_putc(b, '>');
}

/* ---- nodes, blocks, graphs ---- */

static void put_block(printer *pr, kf_bid b, int ind);

static void put_node(printer *pr, kf_nid n, int ind)
{
	kf_graph *g = pr->g;
	kf_buf *b = pr->out;
	const kf_node *x = &g->node[n];
	const kf_opinfo *op = kf_op(pr->c, x->op);
	indent(b, ind);
	if (x->nres) {
		put_name(pr, x->res0);
		if (x->nres > 1) {
			kf_buf_putc(b, ':');
			put_u64(b, x->nres);
		}
		kf_buf_put(b, " = ", 3);
	}
	kf_buf_puts(b, op->name);
	if ((op->flags & KF_OPF_TERMINATOR) && x->body == KF_NONE) {
		for (uint32_t i = 0; i < x->nin; i++) {
			kf_buf_put(b, i ? ", " : " ", i ? 2 : 1);
			put_use(pr, kf_in(g, n, i));
		}
		kf_buf_putc(b, '\n');
		return;
	}
	if (x->op == KF_OP_CONST && x->cst) {
		kf_buf_putc(b, ' ');
		put_const(pr, x->cst, g->val[x->res0].type);
	} else {
		if (x->sym) {
			kf_buf_put(b, " @", 2);
			kf_buf_put(b, kf_str(pr->c, x->sym), kf_strlen(pr->c, x->sym));
		}
		kf_buf_putc(b, '(');
		for (uint32_t i = 0; i < x->nin; i++) {
			if (i)
				kf_buf_put(b, ", ", 2);
			put_use(pr, kf_in(g, n, i));
		}
		kf_buf_putc(b, ')');
	}
	put_attrs(pr, x);
	for (uint32_t i = 0; i < x->nres; i++) {
		kf_buf_put(b, i ? ", " : " : ", i ? 2 : 3);
		put_type(pr, g->val[x->res0 + i].type);
	}
	if (x->body != KF_NONE) {
		kf_buf_put(b, " {\n", 3);
		put_block(pr, x->body, ind);
		indent(b, ind);
		kf_buf_putc(b, '}');
	}
	kf_buf_putc(b, '\n');
}

/* A region body: `^(args):` at the node's indent, its nodes two deeper. */
static void put_block(printer *pr, kf_bid bid, int ind)
{
	kf_graph *g = pr->g;
	name_scope(pr, bid);
	indent(pr->out, ind);
	kf_buf_put(pr->out, "^(", 2);
	for (uint32_t i = 0; i < g->blk[bid].narg; i++) {
		kf_vid a = g->blk[bid].arg[i];
		if (i)
			kf_buf_put(pr->out, ", ", 2);
		put_name(pr, a);
		kf_buf_put(pr->out, ": ", 2);
		put_type(pr, g->val[a].type);
	}
	kf_buf_put(pr->out, "):\n", 3);
	kf_foreach_node(g, bid, n)
		put_node(pr, n, ind + 2);
}

static void print_graph(printer *pr)
{
	kf_graph *g = pr->g;
	kf_buf *b = pr->out;
	pr->pn = calloc(g->nval ? g->nval : 1, sizeof *pr->pn);
	if (!pr->pn)
		abort();
	name_scope(pr, 0);
	kf_buf_puts(b, "graph @");
	kf_buf_put(b, kf_str(pr->c, g->name), kf_strlen(pr->c, g->name));
	kf_buf_putc(b, '(');
	for (uint32_t i = 0; i < g->blk[0].narg; i++) {
		kf_vid a = g->blk[0].arg[i];
		if (i)
			kf_buf_put(b, ", ", 2);
		put_name(pr, a);
		kf_buf_put(b, ": ", 2);
		put_type(pr, g->val[a].type);
	}
	kf_buf_puts(b, ") -> (");
	for (uint32_t i = 0; i < g->nres; i++) {
		if (i)
			kf_buf_put(b, ", ", 2);
		put_type(pr, g->res[i]);
	}
	kf_buf_puts(b, ") {\n");
	kf_foreach_node(g, 0, n)
		put_node(pr, n, 2);
	kf_buf_puts(b, "}\n");
	free(pr->pn);
	pr->pn = NULL;
}

static void printer_free(printer *pr)
{
	free(pr->sm);
	free(pr->gen);
	free(pr->gset);
	free(pr->tc);
	kf_arena_free(&pr->arena);
}

void kf_print_graph(kf_buf *out, kf_graph *g)
{
	printer pr = {.out = out, .g = g, .c = g->ctx};
	print_graph(&pr);
	printer_free(&pr);
}

void kf_print_module(kf_buf *out, kf_module *m)
{
	printer pr = {.out = out, .c = m->ctx};
	for (uint32_t i = 0; i < m->ngraph; i++) {
		if (i)
			kf_buf_putc(out, '\n');
		pr.g = m->graph[i];
		print_graph(&pr);
	}
	printer_free(&pr);
}
