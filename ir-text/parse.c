/* parse.c: the .kf parser: modules, graphs, statements, regions, names.
 *
 * Recursive descent over re2c tokens with one token of lookahead (two at a
 * region's '{').  Nodes are built as statements are read; after the first
 * error no more are built (the module is thrown away anyway) but parsing and
 * name resolution go on, so one run reports several errors.  After a bad
 * statement the parser resyncs at the next line.
 *
 * Names live in an array indexed by their interned sid, stamped with a scope
 * id: lookups are O(1), and a region hides every outer name by taking a new
 * id (regions are isolated).  Bindings a region shadows are restored from an
 * undo stack when it closes.
 *
 * The parser checks syntax, names, result counts and operand counts (since
 * kf_node_new trusts them); types are left to kf_verify, which tools run. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "parse_int.h"

/* ---- tokens and errors ---- */

void kf_parse_err(kf_parser *p, uint32_t off, const char *fmt, ...)
{
	if (p->stop)
		return;
	p->building = false;
	if (p->nerr >= KF_PARSE_MAX_ERRORS) {
		kf_error(p->c, (kf_loc){p->src, off}, "too many errors; stopping");
		p->stop = true;
		return;
	}
	p->nerr++;
	va_list ap;
	va_start(ap, fmt);
	kf_diag_v(p->c, KF_DIAG_ERROR, (kf_loc){p->src, off}, fmt, ap);
	va_end(ap);
}

static void lex_error(kf_parser *p, const kf_token *t)
{
	unsigned char ch = t->len ? (unsigned char)p->text[t->off] : 0;
	char near[48];
	switch (t->err) {
	case KF_LEXERR_NUL: kf_parse_err(p, t->off, "NUL byte in the text"); break;
	case KF_LEXERR_UTF8: kf_parse_err(p, t->off, "invalid UTF-8 byte 0x%02x", ch); break;
	case KF_LEXERR_NONASCII:
		kf_parse_err(p, t->off, "non-ASCII character outside a string or comment");
		break;
	case KF_LEXERR_STR_EOL: kf_parse_err(p, t->off, "unterminated string (missing '\"' before the end of the line)"); break;
	case KF_LEXERR_STR_EOF: kf_parse_err(p, t->off, "unterminated string at end of file"); break;
	case KF_LEXERR_STR_BYTE: {
		uint32_t at = t->off + t->nlen;
		kf_parse_err(p, at, p->text[at] ? "invalid UTF-8 in string" : "NUL byte in string");
		break;
	}
	case KF_LEXERR_NUMBER: kf_parse_err(p, t->off, "invalid number %s", kf_parse_near(p, t, near, sizeof near)); break;
	case KF_LEXERR_SIGIL: kf_parse_err(p, t->off, "expected a name after '%c'", ch); break;
	default:
		if (ch >= 32 && ch < 127)
			kf_parse_err(p, t->off, "unexpected character '%c'", ch);
		else
			kf_parse_err(p, t->off, "unexpected control character 0x%02x", ch);
	}
}

void kf_parse_next(kf_parser *p)
{
	kf_lex_next(&p->lx, &p->tok);
	if (p->tok.kind == KF_T_ERROR)
		lex_error(p, &p->tok);
}

static kf_token peek(const kf_parser *p)
{
	kf_lexer lx = p->lx;
	kf_token t;
	kf_lex_next(&lx, &t);
	return t;
}

const char *kf_parse_near(const kf_parser *p, const kf_token *t, char *buf, size_t n)
{
	if (t->kind == KF_T_EOF)
		return "end of file";
	/* a 10 MB token must not make a 10 MB message */
	size_t len = t->len, max = n - 6;
	bool cut = len > max;
	if (cut)
		len = max - 3;
	snprintf(buf, n, "'%.*s%s'", (int)len, p->text + t->off, cut ? "..." : "");
	return buf;
}

void kf_parse_expected(kf_parser *p, const char *what)
{
	char near[48];
	if (p->tok.kind == KF_T_ERROR)
		return;
	kf_parse_err(p, p->tok.off, "expected %s near %s", what, kf_parse_near(p, &p->tok, near, sizeof near));
}

bool kf_parse_accept(kf_parser *p, int kind)
{
	if (p->tok.kind != kind)
		return false;
	kf_parse_next(p);
	return true;
}

bool kf_parse_expect(kf_parser *p, int kind, const char *what)
{
	if (kf_parse_accept(p, kind))
		return true;
	kf_parse_expected(p, what);
	return false;
}

static int line_of(kf_parser *p, uint32_t off)
{
	int line, col;
	kf_source_linecol(p->c, p->src, off, &line, &col);
	return line;
}

bool kf_parse_close(kf_parser *p, int kind, const char *what, char opench, uint32_t open_off)
{
	char near[48];
	if (kf_parse_accept(p, kind))
		return true;
	if (p->tok.kind == KF_T_ERROR)
		return false;
	int ol = line_of(p, open_off);
	if (ol != line_of(p, p->tok.off))
		kf_parse_err(p, p->tok.off, "expected %s near %s (to close '%c' at line %d)", what,
			     kf_parse_near(p, &p->tok, near, sizeof near), opench, ol);
	else
		kf_parse_expected(p, what);
	return false;
}

bool kf_parse_is_word(const kf_parser *p, const char *w)
{
	size_t n = strlen(w);
	return p->tok.kind == KF_T_IDENT && p->tok.len == n && memcmp(p->text + p->tok.off, w, n) == 0;
}

/* Skips to the first token of a later line than off (or a '}' / EOF). */
static void resync(kf_parser *p, uint32_t off)
{
	while (p->tok.kind != KF_T_EOF && !(p->tok.bol && p->tok.off > off))
		kf_parse_next(p);
}

/* ---- names ---- */

static uint32_t name_hash(const char *s, uint32_t n)
{
	uint64_t h = 1469598103934665603ULL;
	for (uint32_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
	return (uint32_t)(h ^ (h >> 32));
}

static bool is_namech(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
	       ch == '_' || ch == '.' || ch == '$';
}

/* Whether slot e binds name s: the defining token spells it and ends there. */
static bool slot_is(const kf_parser *p, const kf_pslot *e, const char *s, uint32_t n, uint32_t h)
{
	if (e->hash != h)
		return false;
	const char *d = p->text + e->off + 1;
	return (size_t)(e->off + 1) + n <= p->len && memcmp(d, s, n) == 0 &&
	       ((size_t)(e->off + 1) + n == p->len || !is_namech(d[n]));
}

/* The slot holding name s (of any scope), or the empty slot where it goes. */
static kf_pslot *slot_find(kf_parser *p, const char *s, uint32_t n, uint32_t h)
{
	uint32_t mask = p->captab - 1;
	for (uint32_t i = h & mask;; i = (i + 1) & mask) {
		kf_pslot *e = &p->tab[i];
		if (e->scope == KF_SCOPE_EMPTY || slot_is(p, e, s, n, h))
			return e;
	}
}

static void tab_grow(kf_parser *p)
{
	kf_pslot *old = p->tab;
	uint32_t oldcap = p->captab;
	p->captab = oldcap ? oldcap * 2 : 1024;
	p->tab = calloc(p->captab, sizeof *p->tab);
	if (!p->tab)
		abort();
	for (uint32_t i = 0; i < oldcap; i++)
		if (old[i].scope != KF_SCOPE_EMPTY) {
			uint32_t j = old[i].hash & (p->captab - 1);
			while (p->tab[j].scope != KF_SCOPE_EMPTY)
				j = (j + 1) & (p->captab - 1);
			p->tab[j] = old[i];
		}
	free(old);
}

/* The binding of value token t, in whatever scope (check e->scope). */
static kf_pslot *lookup(kf_parser *p, const kf_token *t)
{
	const char *s = p->text + t->off + 1;
	if (!p->captab)
		tab_grow(p);
	return slot_find(p, s, t->nlen, name_hash(s, t->nlen));
}

static void print_loc(kf_parser *p, uint32_t off, char *buf, size_t n)
{
	int line, col;
	kf_source_linecol(p->c, p->src, off, &line, &col);
	snprintf(buf, n, "%d:%d", line, col);
}

static void redefinition(kf_parser *p, const kf_token *t, uint32_t first)
{
	char at[32];
	print_loc(p, first, at, sizeof at);
	kf_parse_err(p, t->off, "redefinition of '%%%.*s' (first at %s)", (int)t->nlen, p->text + t->off + 1, at);
}

/* Binds %name (token t) to vid..vid+nres-1 in the current scope; a
 * redefinition is reported unless `quiet` (the caller already did). */
static void define(kf_parser *p, const kf_token *t, kf_vid vid, uint32_t nres, bool quiet)
{
	if ((p->ntab + 1) * 4 > p->captab * 3)
		tab_grow(p);
	kf_pslot *e = lookup(p, t);
	if ((e->scope & ~KF_SCOPE_MULTI) == p->scope) {
		if (!quiet)
			redefinition(p, t, e->off);
		return;
	}
	if (e->scope == KF_SCOPE_EMPTY) {
		p->ntab++;
		*e = (kf_pslot){.hash = name_hash(p->text + t->off + 1, t->nlen), .scope = KF_SCOPE_DEAD};
	}
	if (p->depth > 0) { /* keep the shadowed binding for when the region closes */
		if (p->nundo == p->capundo) {
			p->capundo = p->capundo ? p->capundo * 2 : 64;
			p->undo = realloc(p->undo, p->capundo * sizeof *p->undo);
			if (!p->undo)
				abort();
		}
		p->undo[p->nundo++] = *e;
	}
	e->scope = p->scope | (nres > 1 ? KF_SCOPE_MULTI : 0);
	e->vid = vid;
	e->off = t->off;
}

/* Puts back the bindings shadowed since undo mark `mark`. */
static void restore(kf_parser *p, uint32_t mark)
{
	while (p->nundo > mark) {
		kf_pslot *u = &p->undo[--p->nundo];
		const char *s = p->text + u->off + 1;
		uint32_t n = 0;
		while (u->off + 1 + n < p->len && is_namech(s[n]))
			n++;
		*slot_find(p, s, n, u->hash) = *u;
	}
}

static bool in_outer_scope(const kf_parser *p, const kf_pslot *e)
{
	for (int i = 0; i < p->depth; i++)
		if (p->outer[i] == (e->scope & ~KF_SCOPE_MULTI))
			return true;
	return false;
}

/* Resolves the value token t; KF_POISON after a reported error or for a
 * name whose definition failed. */
static kf_vid resolve(kf_parser *p, const kf_token *t)
{
	const char *nm = p->text + t->off + 1;
	int nl = (int)t->nlen;
	kf_pslot *e = lookup(p, t);
	if ((e->scope & ~KF_SCOPE_MULTI) != p->scope) {
		if (in_outer_scope(p, e))
			kf_parse_err(p, t->off, "use of undefined value '%%%.*s' (a region sees only its own '^' arguments)", nl, nm);
		else
			kf_parse_err(p, t->off, "use of undefined value '%%%.*s'", nl, nm);
		return KF_POISON;
	}
	if (e->vid == KF_POISON)
		return KF_POISON;
	/* a valid binding of several results is a built node: it knows how many */
	uint32_t nres = e->scope & KF_SCOPE_MULTI ? p->g->node[p->g->val[e->vid].def].nres : 1;
	if (t->idx >= 0) {
		if ((uint64_t)t->idx >= nres) {
			kf_parse_err(p, t->off, "'%%%.*s' has %u result%s; '%.*s' is out of range", nl, nm,
				     nres, nres == 1 ? "" : "s", (int)t->len, p->text + t->off);
			return KF_POISON;
		}
		return e->vid + (uint32_t)t->idx;
	}
	if (nres != 1) {
		kf_parse_err(p, t->off, "'%%%.*s' has %u results; use '%%%.*s#0' .. '%%%.*s#%u'", nl, nm,
			     nres, nl, nm, nl, nm, nres - 1);
		return KF_POISON;
	}
	return e->vid;
}

/* ---- statements ---- */

typedef struct stmt {
	kf_vid *in; uint32_t nin, capin;
	kf_tid *res; uint32_t nres, capres;
} stmt;

static void push_vid(stmt *s, kf_vid v)
{
	if (s->nin == s->capin) {
		s->capin = s->capin ? s->capin * 2 : 8;
		s->in = realloc(s->in, s->capin * sizeof *s->in);
		if (!s->in)
			abort();
	}
	s->in[s->nin++] = v;
}

static void push_tid(stmt *s, kf_tid t)
{
	if (s->nres == s->capres) {
		s->capres = s->capres ? s->capres * 2 : 4;
		s->res = realloc(s->res, s->capres * sizeof *s->res);
		if (!s->res)
			abort();
	}
	s->res[s->nres++] = t;
}

/* value {',' value}; *poisoned when one did not resolve. */
static bool parse_values(kf_parser *p, stmt *s, bool *poisoned)
{
	do {
		if (p->tok.kind != KF_T_VALUE) {
			kf_parse_expected(p, "a value");
			return false;
		}
		kf_vid v = resolve(p, &p->tok);
		*poisoned |= v == KF_POISON;
		push_vid(s, v);
		kf_parse_next(p);
	} while (kf_parse_accept(p, KF_T_COMMA));
	return true;
}

/* type {',' type}; *poisoned when one was bad. */
static bool parse_types(kf_parser *p, stmt *s, bool *poisoned)
{
	do {
		kf_tid t;
		if (!kf_parse_type(p, &t))
			return false;
		*poisoned |= t == KF_NONE;
		push_tid(s, t);
	} while (kf_parse_accept(p, KF_T_COMMA));
	return true;
}

/* Edit distance, for "did you mean"; names past 63 bytes are not compared. */
static int edit_distance(const char *a, size_t na, const char *b, size_t nb)
{
	int row[64];
	if (na > 63 || nb > 63)
		return 99;
	for (size_t j = 0; j <= nb; j++)
		row[j] = (int)j;
	for (size_t i = 1; i <= na; i++) {
		int diag = row[0];
		row[0] = (int)i;
		for (size_t j = 1; j <= nb; j++) {
			int up = row[j], best = diag + (a[i - 1] != b[j - 1]);
			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			diag = up;
			row[j] = best;
		}
	}
	return row[nb];
}

static void unknown_op(kf_parser *p, const kf_token *t)
{
	const char *nm = p->text + t->off;
	const char *best = NULL;
	int bestd = t->len <= 3 ? 1 : 2;
	for (int i = 0; i < kf_op_count(p->c); i++) {
		const char *on = kf_op(p->c, i)->name;
		int d = edit_distance(nm, t->len, on, strlen(on));
		if (d <= bestd && (!best || d < bestd)) {
			best = on;
			bestd = d;
		}
	}
	char near[48];
	kf_parse_near(p, t, near, sizeof near);
	if (best)
		kf_parse_err(p, t->off, "unknown op %s; did you mean '%s'?", near, best);
	else
		kf_parse_err(p, t->off, "unknown op %s", near);
}

static void check_arity(kf_parser *p, const kf_opinfo *op, uint32_t nin, uint32_t off)
{
	if (op->min_in >= 0 && nin < (uint32_t)op->min_in) {
		if (op->max_in == op->min_in)
			kf_parse_err(p, off, "'%s' takes %d operand%s, got %u", op->name, op->min_in,
				     op->min_in == 1 ? "" : "s", nin);
		else if (op->max_in < 0)
			kf_parse_err(p, off, "'%s' takes at least %d operand%s, got %u", op->name,
				     op->min_in, op->min_in == 1 ? "" : "s", nin);
		else
			kf_parse_err(p, off, "'%s' takes %d to %d operands, got %u", op->name, op->min_in,
				     op->max_in, nin);
	} else if (op->max_in >= 0 && nin > (uint32_t)op->max_in) {
		if (op->max_in == op->min_in)
			kf_parse_err(p, off, "'%s' takes %d operand%s, got %u", op->name, op->max_in,
				     op->max_in == 1 ? "" : "s", nin);
		else
			kf_parse_err(p, off, "'%s' takes %d to %d operands, got %u", op->name, op->min_in,
				     op->max_in, nin);
	}
}

static bool parse_block(kf_parser *p, kf_bid b, uint32_t open_off, bool region);

/* Skips to the '}' that closes an already consumed '{', and past it. */
static void skip_braces(kf_parser *p)
{
	for (int depth = 1; p->tok.kind != KF_T_EOF;) {
		depth += p->tok.kind == KF_T_LBRACE;
		depth -= p->tok.kind == KF_T_RBRACE;
		kf_parse_next(p);
		if (!depth)
			return;
	}
}

/* '{' '^' '(' args ')' ':' statements '}' for node n (KF_NONE when not built). */
static bool parse_region(kf_parser *p, kf_nid n)
{
	uint32_t open = p->tok.off;
	if (!kf_parse_expect(p, KF_T_LBRACE, "'{' to open the region"))
		return false;
	if (p->depth >= KF_PARSE_MAX_REGION) {
		kf_parse_err(p, open, "regions nested too deeply (limit %d)", KF_PARSE_MAX_REGION);
		p->stop = true; /* too deep to resync sensibly */
		return false;
	}
	kf_bid b = KF_NONE;
	if (p->building && n != KF_NONE) {
		b = kf_block_new(p->g, n);
		p->g->node[n].body = b;
	}
	p->outer[p->depth++] = p->scope;
	uint32_t saved_scope = p->scope, mark = p->nundo;
	p->scope = ++p->nscope;
	bool ok = false, opened = true;
	uint32_t caret = p->tok.off;
	if (!kf_parse_expect(p, KF_T_CARET, "'^' to begin the region's arguments") ||
	    !kf_parse_expect(p, KF_T_LPAREN, "'('"))
		goto out;
	if (p->tok.kind != KF_T_RPAREN) {
		do {
			kf_token v = p->tok;
			kf_tid t;
			if (!kf_parse_expect(p, KF_T_VALUE, "a region argument '%name'") ||
			    !kf_parse_expect(p, KF_T_COLON, "':'") || !kf_parse_type(p, &t))
				goto out;
			if (v.idx >= 0)
				kf_parse_err(p, v.off, "an argument name cannot have a '#' index");
			kf_vid a = KF_POISON;
			if (p->building && b != KF_NONE && t != KF_NONE)
				a = kf_block_add_arg(p->g, b, t, kf_intern(p->c, p->text + v.off + 1, v.nlen));
			define(p, &v, a, 1, false);
		} while (kf_parse_accept(p, KF_T_COMMA));
	}
	if (!kf_parse_close(p, KF_T_RPAREN, "')'", '(', caret) || !kf_parse_expect(p, KF_T_COLON, "':' after the region's arguments"))
		goto out;
	opened = false;
	ok = parse_block(p, b, open, true);
out:
	if (opened) /* a broken region head: skip its body, not parse it as the graph's */
		skip_braces(p);
	restore(p, mark);
	p->scope = saved_scope;
	p->depth--;
	return ok;
}

/* The part after `%r =` (or the op word of a result-less statement).
 * lhs: the defining token (kind KF_T_EOF when none); nres: results named. */
static bool parse_op(kf_parser *p, kf_bid b, bool region, const kf_token *lhs, uint32_t nres,
		     bool redef, bool *terminated)
{
	stmt *s = &(stmt){0};
	bool ok = false, poisoned = false, term = false;
	kf_token optok = p->tok;
	uint32_t start = lhs->kind == KF_T_VALUE ? lhs->off : optok.off;
	if (optok.kind != KF_T_IDENT) {
		kf_parse_expected(p, "an op name");
		goto done;
	}
	int op = kf_op_lookup(p->c, p->text + optok.off, optok.len);
	if (op < 0) {
		unknown_op(p, &optok);
		poisoned = true;
	}
	const kf_opinfo *info = op >= 0 ? kf_op(p->c, op) : NULL;
	kf_parse_next(p);
	kf_const *cst = NULL;
	kf_attr *attrs = NULL;
	uint32_t nattr = 0;
	kf_sid sym = 0;
	if (op == KF_OP_CONST) {
		kf_tid t;
		if (!kf_parse_const(p, &cst, &attrs, &nattr, &t))
			goto done;
		push_tid(s, t);
		poisoned |= t == KF_NONE;
	} else if (info && (info->flags & KF_OPF_TERMINATOR)) {
		if (p->tok.kind == KF_T_VALUE && !parse_values(p, s, &poisoned))
			goto done;
		if (op == KF_OP_RETURN && region)
			kf_parse_err(p, optok.off, "'return' inside a region; a region ends with 'yield'");
		if (op == KF_OP_YIELD && !region)
			kf_parse_err(p, optok.off, "'yield' outside a region; a graph ends with 'return'");
		term = *terminated = true;
	} else {
		/* unknown ops are read in the general form to stay in step */
		if (p->tok.kind == KF_T_GLOBAL && (!info || (info->flags & KF_OPF_SYMBOL))) {
			sym = kf_intern(p->c, p->text + p->tok.off + 1, p->tok.nlen);
			kf_parse_next(p);
		} else if (info && (info->flags & KF_OPF_SYMBOL)) {
			kf_parse_expected(p, "'@name'");
			goto done;
		}
		uint32_t lp = p->tok.off;
		if (!kf_parse_expect(p, KF_T_LPAREN, "'('"))
			goto done;
		if (p->tok.kind != KF_T_RPAREN && !parse_values(p, s, &poisoned))
			goto done;
		if (!kf_parse_close(p, KF_T_RPAREN, "')'", '(', lp))
			goto done;
		if (p->tok.kind == KF_T_LBRACE && peek(p).kind != KF_T_CARET &&
		    !kf_parse_attrs(p, &attrs, &nattr))
			goto done;
		if (kf_parse_accept(p, KF_T_COLON) && !parse_types(p, s, &poisoned))
			goto done;
	}
	/* the statement must end here (or open its region) before it is judged */
	if (p->tok.kind == KF_T_ERROR)
		goto done;
	if (!p->tok.bol && p->tok.kind != KF_T_RBRACE && p->tok.kind != KF_T_LBRACE) {
		kf_parse_expected(p, s->nres == 0 && nres > 0 && !term ? "':' and the result type" : "end of line");
		goto done;
	}
	if (info) {
		if (info->nres >= 0 && nres != (uint32_t)info->nres && !(term && nres == 0)) {
			if (nres == 0)
				kf_parse_err(p, optok.off, "'%s' has a result; name it: '%%x = %s(...)'", info->name, info->name);
			else
				kf_parse_err(p, lhs->off, "'%s' has %d result%s, but %u %s named", info->name,
					     info->nres, info->nres == 1 ? "" : "s", nres, nres == 1 ? "is" : "are");
		} else if (s->nres != nres && !term)
			kf_parse_err(p, optok.off, "'%s' names %u result%s but gives %u type%s", info->name, nres,
				     nres == 1 ? "" : "s", s->nres, s->nres == 1 ? "" : "s");
		check_arity(p, info, s->nin, optok.off);
	}
	kf_nid n = KF_NONE;
	if (p->building && !poisoned) {
		n = kf_node_new(p->g, b, KF_NONE, op, s->in, s->nin, s->res, nres);
		kf_node *x = kf_N(p->g, n);
		x->loc = (kf_loc){p->src, start};
		x->sym = sym;
		x->cst = cst;
		if (nattr)
			kf_node_set_attrs(p->g, n, attrs, nattr);
		if (lhs->kind == KF_T_VALUE) {
			kf_sid nm = kf_intern(p->c, p->text + lhs->off + 1, lhs->nlen);
			for (uint32_t i = 0; i < nres; i++)
				p->g->val[x->res0 + i].name = nm;
		}
	}
	if (lhs->kind == KF_T_VALUE)
		define(p, lhs, n == KF_NONE ? KF_POISON : kf_N(p->g, n)->res0, nres, redef);
	lhs = NULL; /* defined */
	ok = true;
	if ((info && (info->flags & KF_OPF_REGION)) || (!info && p->tok.kind == KF_T_LBRACE))
		ok = parse_region(p, n);
	else if (p->tok.kind == KF_T_LBRACE && peek(p).kind == KF_T_CARET) {
		kf_parse_err(p, p->tok.off, "'%s' takes no region", info->name);
		ok = parse_region(p, KF_NONE);
	}
done:
	if (!ok && lhs && lhs->kind == KF_T_VALUE && !redef) /* quiet later uses of the name */
		define(p, lhs, KF_POISON, nres ? nres : 1, true);
	free(s->in);
	free(s->res);
	return ok;
}

/* One statement: `%r = op...`, `%r:N = op...`, or `op ...` without results. */
static bool parse_stmt(kf_parser *p, kf_bid b, bool region, bool *terminated)
{
	kf_token lhs = {.kind = KF_T_EOF};
	uint32_t nres = 0;
	bool redef = false;
	if (p->tok.kind == KF_T_VALUE) {
		lhs = p->tok;
		nres = 1;
		kf_pslot *e = lookup(p, &lhs); /* told here, so that messages come in source order */
		if ((e->scope & ~KF_SCOPE_MULTI) == p->scope) {
			redefinition(p, &lhs, e->off);
			redef = true;
		}
		if (lhs.idx >= 0)
			kf_parse_err(p, lhs.off, "cannot define '%.*s'; name several results as '%%%.*s:N'",
				     (int)lhs.len, p->text + lhs.off, (int)lhs.nlen, p->text + lhs.off + 1);
		kf_parse_next(p);
		if (kf_parse_accept(p, KF_T_COLON)) {
			kf_token k = p->tok;
			if (!kf_parse_expect(p, KF_T_INT, "a result count"))
				return false;
			nres = 0;
			for (uint32_t i = 0; i < k.len && nres <= 65536; i++)
				nres = nres * 10 + (uint32_t)(p->text[k.off + i] - '0');
			if (nres < 1 || nres > 65535) {
				kf_parse_err(p, k.off, "result count must be 1 to 65535");
				nres = 1;
			}
		}
		if (!kf_parse_expect(p, KF_T_EQ, "'='")) {
			define(p, &lhs, KF_POISON, nres, true);
			return false;
		}
	} else if (p->tok.kind != KF_T_IDENT) {
		kf_parse_expected(p, "a statement");
		return false;
	}
	return parse_op(p, b, region, &lhs, nres, redef, terminated);
}

/* Statements up to the closing '}' of a graph body or region. */
static bool parse_block(kf_parser *p, kf_bid b, uint32_t open_off, bool region)
{
	bool terminated = false, told = false;
	char near[48];
	while (!p->stop) {
		if (p->tok.kind == KF_T_RBRACE) {
			if (!terminated)
				kf_parse_err(p, p->tok.off, region ? "region does not end with 'yield'"
							       : "graph does not end with 'return'");
			kf_parse_next(p);
			return true;
		}
		if (p->tok.kind == KF_T_EOF || (!region && p->tok.bol && kf_parse_is_word(p, "graph"))) {
			kf_parse_err(p, p->tok.off, "expected '}' near %s (to close '{' at line %d)",
				     kf_parse_near(p, &p->tok, near, sizeof near), line_of(p, open_off));
			return false;
		}
		if (terminated && !told) {
			kf_parse_err(p, p->tok.off, "expected '}' after the %s near %s",
				     region ? "'yield'" : "'return'", kf_parse_near(p, &p->tok, near, sizeof near));
			told = true;
		}
		uint32_t start = p->tok.off;
		if (!parse_stmt(p, b, region, &terminated))
			resync(p, start);
		else if (!p->tok.bol && p->tok.kind != KF_T_RBRACE) {
			kf_parse_expected(p, "end of line");
			resync(p, start);
		}
	}
	return false;
}

/* ---- graphs and modules ---- */

/* Skips a graph whose header is broken: to its closing '}' line or the next
 * `graph`. */
static void skip_graph(kf_parser *p)
{
	for (;;) {
		kf_parse_next(p);
		if (p->tok.kind == KF_T_EOF || (p->tok.bol && kf_parse_is_word(p, "graph")))
			return;
		if (p->tok.bol && p->tok.kind == KF_T_RBRACE) {
			kf_parse_next(p);
			return;
		}
	}
}

static bool parse_header(kf_parser *p, kf_graph *g)
{
	uint32_t lp = p->tok.off;
	if (!kf_parse_expect(p, KF_T_LPAREN, "'('"))
		return false;
	if (p->tok.kind != KF_T_RPAREN) {
		do {
			kf_token v = p->tok;
			kf_tid t;
			if (!kf_parse_expect(p, KF_T_VALUE, "an argument '%name'") ||
			    !kf_parse_expect(p, KF_T_COLON, "':'") || !kf_parse_type(p, &t))
				return false;
			if (v.idx >= 0)
				kf_parse_err(p, v.off, "an argument name cannot have a '#' index");
			kf_vid a = KF_POISON;
			if (p->building && t != KF_NONE)
				a = kf_block_add_arg(g, 0, t, kf_intern(p->c, p->text + v.off + 1, v.nlen));
			define(p, &v, a, 1, false);
		} while (kf_parse_accept(p, KF_T_COMMA));
	}
	if (!kf_parse_close(p, KF_T_RPAREN, "')'", '(', lp) || !kf_parse_expect(p, KF_T_ARROW, "'->'"))
		return false;
	lp = p->tok.off;
	if (!kf_parse_expect(p, KF_T_LPAREN, "'(' before the result types"))
		return false;
	stmt s = {0};
	bool poisoned = false, ok = true;
	if (p->tok.kind != KF_T_RPAREN)
		ok = parse_types(p, &s, &poisoned);
	ok = ok && kf_parse_close(p, KF_T_RPAREN, "')'", '(', lp);
	if (ok && p->building && !poisoned)
		kf_graph_set_results(g, s.nres ? s.res : (kf_tid[1]){0}, s.nres); /* never NULL to memcpy */
	free(s.res);
	return ok;
}

/* `graph @name(args) -> (types) { ... }` at the word `graph`. */
static kf_graph *parse_graph(kf_parser *p)
{
	uint32_t at = p->tok.off;
	kf_parse_next(p);
	kf_token nt = p->tok;
	if (!kf_parse_expect(p, KF_T_GLOBAL, "a graph name '@name'")) {
		skip_graph(p);
		return NULL;
	}
	kf_sid name = kf_intern(p->c, p->text + nt.off + 1, nt.nlen);
	kf_graph *g = kf_graph_new(p->c, kf_str(p->c, name));
	g->loc = (kf_loc){p->src, at};
	p->g = g;
	p->scope = ++p->nscope;
	if (!parse_header(p, g)) {
		skip_graph(p);
		kf_graph_free(g);
		return NULL;
	}
	uint32_t open = p->tok.off;
	if (!kf_parse_expect(p, KF_T_LBRACE, "'{'")) {
		skip_graph(p);
		kf_graph_free(g);
		return NULL;
	}
	parse_block(p, 0, open, false);
	return g;
}

/* The module: graphs until the end. */
static kf_module *parse_module(kf_parser *p)
{
	kf_graph **gs = NULL;
	uint32_t ng = 0;
	uint32_t *byname = NULL, capbyname = 0; /* graph name sid -> index + 1 */
	kf_parse_next(p);
	while (p->tok.kind != KF_T_EOF && !p->stop) {
		if (!kf_parse_is_word(p, "graph")) {
			kf_parse_expected(p, "'graph'");
			do
				kf_parse_next(p);
			while (p->tok.kind != KF_T_EOF && !(p->tok.bol && kf_parse_is_word(p, "graph")));
			continue;
		}
		kf_token nt = peek(p);
		kf_graph *g = parse_graph(p);
		if (!g)
			continue;
		if (g->name >= capbyname) {
			uint32_t cap = capbyname ? capbyname : 64;
			while (cap <= g->name)
				cap *= 2;
			byname = realloc(byname, cap * sizeof *byname);
			if (!byname)
				abort();
			memset(byname + capbyname, 0, (cap - capbyname) * sizeof *byname);
			capbyname = cap;
		}
		if (byname[g->name]) {
			char first[32];
			print_loc(p, gs[byname[g->name] - 1]->loc.off, first, sizeof first);
			kf_parse_err(p, nt.off, "redefinition of graph '@%s' (first at %s)", kf_str(p->c, g->name), first);
		} else
			byname[g->name] = ng + 1;
		gs = realloc(gs, (ng + 1) * sizeof *gs);
		if (!gs)
			abort();
		gs[ng++] = g;
	}
	free(byname);
	if (ng == 0 && p->nerr == 0)
		kf_parse_err(p, p->tok.off, "expected 'graph' near end of file (the file holds no graph)");
	kf_module *m = NULL;
	if (p->nerr == 0 && !p->stop) {
		m = kf_module_new(p->c);
		m->src = p->src;
		for (uint32_t i = 0; i < ng; i++)
			kf_module_add(m, gs[i]);
	} else {
		for (uint32_t i = 0; i < ng; i++)
			kf_graph_free(gs[i]);
	}
	free(gs);
	return m;
}

static kf_module *parse_source(kf_ctx *c, kf_srcid src)
{
	size_t len;
	kf_parser p = {.c = c, .src = src, .building = true, .nscope = KF_SCOPE_DEAD};
	p.text = kf_source_text(c, src, &len);
	p.len = len;
	kf_lex_init(&p.lx, p.text, len);
	kf_module *m = parse_module(&p);
	free(p.tab);
	free(p.undo);
	free(p.lit);
	kf_buf_free(&p.sbuf);
	kf_arena_free(&p.tmp);
	return m;
}

/* Offsets are 32-bit; a text this large is refused rather than misread. */
static bool too_large(kf_ctx *c, const char *name, size_t len)
{
	if (len < UINT32_MAX)
		return false;
	kf_srcid s = kf_source_add(c, name, NULL, 0);
	kf_error(c, (kf_loc){s, 0}, "file too large (%zu bytes; the limit is 4 GiB)", len);
	return true;
}

kf_module *kf_parse(kf_ctx *c, const char *filename, const char *text, size_t len)
{
	if (too_large(c, filename, len))
		return NULL;
	return parse_source(c, kf_source_add(c, filename, text, len));
}

/* Reads f to the end; sized from fstat when it is a regular file, so that a
 * large file is not read through a buffer twice its size (peak memory). */
static char *read_all(FILE *f, size_t *len)
{
	struct stat st;
	size_t cap = 1 << 16, n = 0;
	if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
		cap = (size_t)st.st_size + 1; /* +1: the read that sees the end */
	char *buf = malloc(cap);
	for (;;) {
		if (!buf)
			abort();
		n += fread(buf + n, 1, cap - n, f);
		if (n < cap)
			break;
		cap *= 2;
		buf = realloc(buf, cap);
	}
	*len = n;
	return buf;
}

kf_module *kf_parse_file(kf_ctx *c, const char *path)
{
	bool in = strcmp(path, "-") == 0;
	const char *name = in ? "<stdin>" : path;
	FILE *f = in ? stdin : fopen(path, "rb");
	if (!f) {
		int e = errno;
		kf_error(c, (kf_loc){kf_source_add(c, name, NULL, 0), 0}, "cannot open: %s", strerror(e));
		return NULL;
	}
	size_t len;
	char *text = read_all(f, &len);
	int failed = ferror(f);
	if (!in)
		fclose(f);
	if (failed) {
		free(text);
		kf_error(c, (kf_loc){kf_source_add(c, name, NULL, 0), 0}, "cannot read (is it a directory?)");
		return NULL;
	}
	if (too_large(c, name, len)) {
		free(text);
		return NULL;
	}
	/* the context keeps its own copy; drop ours before the graph grows */
	kf_srcid src = kf_source_add(c, name, text, len);
	free(text);
	kf_module *m = parse_source(c, src);
	if (!m)
		return NULL;
	const char *slash = in ? NULL : strrchr(path, '/');
	kf_sid dir = slash ? kf_intern(c, path, slash == path ? 1 : (size_t)(slash - path)) : kf_intern_cstr(c, ".");
	for (uint32_t i = 0; i < m->ngraph; i++)
		m->graph[i]->dir = dir;
	return m;
}
