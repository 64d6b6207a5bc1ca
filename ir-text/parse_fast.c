/* parse_fast.c: the parser's fast lane: runs of plain statements, read and
 * built straight from the bytes; and the byte tables and op cache the
 * statement readers share.
 *
 * Most lines of a big graph are `%r = op(%a, %b) : T`, with T the type of
 * the line before.  The lane takes such a line only when the general path
 * (parse_stmt.c) would read it without a diagnostic and build one node from
 * it: a known op of the general form with one result, no attributes, the
 * right operand count, operands bound in this scope to single values, a
 * name new to the scope, and a next line (past blank ones) that starts with
 * a `%name` too, so that nothing ('{' of a region) can follow the
 * statement.  It does what the general path would do (intern the name,
 * build the node, bind the name) and goes on to the next line.  Any other
 * line, and every error, is left to the general path, from a token the
 * lexer makes: taking a line here changes nothing but the time.  The text
 * ends in a NUL, which stops every scan. */
#include <string.h>
#include "parse_int.h"

#define LETTERS(X) \
	X('a') X('b') X('c') X('d') X('e') X('f') X('g') X('h') X('i') X('j') X('k') X('l') X('m') \
	X('n') X('o') X('p') X('q') X('r') X('s') X('t') X('u') X('v') X('w') X('x') X('y') X('z') \
	X('A') X('B') X('C') X('D') X('E') X('F') X('G') X('H') X('I') X('J') X('K') X('L') X('M') \
	X('N') X('O') X('P') X('Q') X('R') X('S') X('T') X('U') X('V') X('W') X('X') X('Y') X('Z')
#define ONE(ch) [ch] = 1,
const bool kf_parse_wordstart[256] = {LETTERS(ONE) ['_'] = 1, ['$'] = 1};
const bool kf_parse_namech[256] = {
	LETTERS(ONE) ['_'] = 1, ['$'] = 1, ['.'] = 1,
	['0'] = 1, ['1'] = 1, ['2'] = 1, ['3'] = 1, ['4'] = 1, ['5'] = 1, ['6'] = 1, ['7'] = 1, ['8'] = 1, ['9'] = 1,
};
#undef ONE
#undef LETTERS
const bool kf_parse_blank[256] = {[' '] = 1, ['\t'] = 1, ['\r'] = 1};

void kf_parse_relex(kf_parser *p, const char *q)
{
	p->lx.cur = q;
	p->lx.nl = false;
	kf_parse_next(p);
}

static bool same_bytes(const char *a, const char *b, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (a[i] != b[i])
			return false;
	return true;
}

/* An op word is looked up once per statement; a file uses a handful of
 * ops, so a small cache by length and end bytes answers before the
 * registry's hash table. */
static inline int op_cached(kf_parser *p, const char *s, uint32_t n)
{
	kf_opcache *e = &p->opc[(n * 7 + (unsigned char)s[0] * 3 + (unsigned char)s[n - 1]) & (KF_PARSE_OPCACHE - 1)];
	if (e->len == n && same_bytes(e->name, s, n))
		return e->op;
	int op = kf_op_lookup(p->c, s, n);
	if (op >= 0)
		*e = (kf_opcache){kf_op(p->c, op)->name, n, op};
	return op;
}

int kf_parse_op(kf_parser *p, const char *s, uint32_t n) { return op_cached(p, s, n); }

#define LANE_MAX_IN 8

/* A plain line's operands, as read. */
typedef struct lane_ops {
	uint32_t n;
	const char *s[LANE_MAX_IN];
	uint32_t len[LANE_MAX_IN], hash[LANE_MAX_IN];
} lane_ops;

/* `%a, %b)` from q (past the '('): the names, hashed (their string table
 * slots prefetched); the byte after the ')', or NULL. */
static const char *lane_operands(kf_parser *p, const char *q, lane_ops *o)
{
	o->n = 0;
	for (q = kf_parse_blanks(q); *q != ')';) {
		if (o->n == LANE_MAX_IN || *q != '%' || !kf_parse_namech[(unsigned char)q[1]])
			return NULL;
		const char *s = ++q;
		while (kf_parse_namech[(unsigned char)*q])
			q++;
		if (*q == '#')
			return NULL;
		o->s[o->n] = s;
		o->len[o->n] = (uint32_t)(q - s);
		o->hash[o->n] = kf_str_hash(s, o->len[o->n]);
		kf_str_prefetch(p->c, o->hash[o->n]);
		o->n++;
		q = kf_parse_blanks(q);
		if (*q == ',')
			q = kf_parse_blanks(q + 1);
		else if (*q != ')')
			return NULL;
	}
	return q + 1;
}

/* Reads the plain line whose `%name` is at v: its op, operands and (by
 * *next) the `%` that starts the next line; false when it is not plain. */
static bool lane_read(kf_parser *p, const char *v, const char **name_end, int *op, lane_ops *o,
		      const char **next)
{
	const char *q = v + 1;
	while (kf_parse_namech[(unsigned char)*q])
		q++;
	*name_end = q;
	if (*q == '#')
		return false;
	q = kf_parse_blanks(q);
	if (*q != '=')
		return false;
	const char *w = q = kf_parse_blanks(q + 1);
	if (!kf_parse_wordstart[(unsigned char)*q])
		return false;
	while (kf_parse_namech[(unsigned char)*q])
		q++;
	*op = op_cached(p, w, (uint32_t)(q - w));
	if (*op < 0 || *op == KF_OP_CONST)
		return false;
	const kf_opinfo *info = kf_op(p->c, *op);
	if ((info->flags & (KF_OPF_TERMINATOR | KF_OPF_SYMBOL | KF_OPF_REGION)) || (info->nres >= 0 && info->nres != 1))
		return false;
	q = kf_parse_blanks(q);
	if (*q != '(' || !(q = lane_operands(p, q + 1, o)))
		return false;
	if ((info->min_in >= 0 && o->n < (uint32_t)info->min_in) || (info->max_in >= 0 && o->n > (uint32_t)info->max_in))
		return false;
	q = kf_parse_blanks(q);
	if (*q != ':')
		return false;
	q = kf_parse_blanks(q + 1);
	size_t tl = p->last_type_len;
	if (!tl || (size_t)(p->text + p->len - q) < tl || memcmp(q, p->text + p->last_type_off, tl))
		return false;
	q = kf_parse_blanks(q + tl);
	if (*q != '\n')
		return false;
	while (*q == '\n' || kf_parse_blank[(unsigned char)*q])
		q++;
	*next = q;
	return *q == '%' && kf_parse_namech[(unsigned char)q[1]];
}

bool kf_parse_lane(kf_parser *p, kf_bid b)
{
	const char *t = p->text, *v = t + p->tok.off, *end = NULL, *name_end, *next;
	int op;
	lane_ops o;
	kf_vid in[LANE_MAX_IN];
	while (lane_read(p, v, &name_end, &op, &o, &next)) {
		/* the name new to this scope; the operands bound here to one value each */
		uint32_t nlen = (uint32_t)(name_end - v - 1);
		kf_sid lsid = kf_intern(p->c, v + 1, nlen);
		if (((lsid < p->capbind ? &p->bind[lsid] : kf_parse_bind(p, lsid))->scope & ~KF_SCOPE_MULTI) == p->scope)
			break;
		uint32_t i;
		for (i = 0; i < o.n; i++) {
			kf_sid sid = kf_lookup_hashed(p->c, o.s[i], o.len[i], o.hash[i]);
			if (sid >= p->capbind || p->bind[sid].scope != p->scope || p->bind[sid].vid == KF_POISON)
				break;
			in[i] = p->bind[sid].vid;
		}
		if (i < o.n)
			break;
		/* as build_op and finish_op do */
		kf_nid n = kf_node_new(p->g, b, KF_NONE, op, in, o.n, &p->last_type, 1);
		kf_node *x = &p->g->node[n];
		x->loc = (kf_loc){p->src, (uint32_t)(v - t)};
		p->g->val[x->res0].name = lsid;
		if (p->depth > 0) { /* a region keeps what the binding shadows */
			kf_token lt = {.kind = KF_T_VALUE, .bol = true, .off = (uint32_t)(v - t), .len = nlen + 1,
				       .nlen = nlen, .idx = -1};
			kf_parse_define(p, &lt, lsid, x->res0, 1, true);
		} else {
			p->bind[lsid] = (kf_pbind){p->scope, x->res0, (uint32_t)(v - t)};
		}
		end = name_end; /* anywhere in the line: the lexer goes on past its '\n' */
		v = next;
	}
	if (!end)
		return false;
	/* the next line's first token, from the end of the last line taken */
	const char *nl = strchr(end, '\n');
	kf_parse_relex(p, nl);
	return true;
}
