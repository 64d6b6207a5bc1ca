/* parse.c: the .kf parser: modules, graphs, statements, regions, names.
 *
 * Recursive descent over re2c tokens with one token of lookahead (two at a
 * region's '{').  Nodes are built as statements are read; after the first
 * error no more are built (the module is thrown away anyway) but parsing and
 * name resolution go on, so one run reports several errors.  After a bad
 * statement the parser resyncs at the next line.
 *
 * Names live in the parser's own hash table (parse_names.c), stamped with a
 * scope id: a region hides every outer name by taking a new id (regions are
 * isolated), and the bindings it shadows come back when it closes.  A
 * statement is read first (operand names only collected, their table slots
 * prefetched), then judged in source order and built.
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

/* ---- statements ---- */

typedef struct stmt {
	kf_token *tk; uint32_t ntk, captk; /* operand tokens, resolved after the line is read */
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

/* value {',' value}, collected to be resolved by resolve_values. */
static bool parse_values(kf_parser *p, stmt *s)
{
	do {
		if (p->tok.kind != KF_T_VALUE) {
			kf_parse_expected(p, "a value");
			return false;
		}
		if (s->ntk == s->captk) {
			s->captk = s->captk ? s->captk * 2 : 8;
			s->tk = realloc(s->tk, s->captk * sizeof *s->tk);
			if (!s->tk)
				abort();
		}
		kf_parse_prefetch(p, &p->tok);
		s->tk[s->ntk++] = p->tok;
		kf_parse_next(p);
	} while (kf_parse_accept(p, KF_T_COMMA));
	return true;
}

/* The operands' values; *poisoned when one did not resolve. */
static void resolve_values(kf_parser *p, stmt *s, bool *poisoned)
{
	for (uint32_t i = 0; i < s->ntk; i++) {
		kf_vid v = kf_parse_resolve(p, &s->tk[i]);
		*poisoned |= v == KF_POISON;
		push_vid(s, v);
	}
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
			kf_parse_define(p, &v, a, 1, false);
		} while (kf_parse_accept(p, KF_T_COMMA));
	}
	if (!kf_parse_close(p, KF_T_RPAREN, "')'", '(', caret) || !kf_parse_expect(p, KF_T_COLON, "':' after the region's arguments"))
		goto out;
	opened = false;
	ok = parse_block(p, b, open, true);
out:
	if (opened) /* a broken region head: skip its body, not parse it as the graph's */
		skip_braces(p);
	kf_parse_restore(p, mark);
	p->scope = saved_scope;
	p->depth--;
	return ok;
}

/* What one statement says, as it is read and then judged. */
typedef struct opstmt {
	kf_token lhs;      /* the defining %name; kind KF_T_EOF when none */
	uint32_t nres;     /* results named */
	kf_token optok;    /* the op word */
	int op;            /* -1: unknown */
	const kf_opinfo *info;
	bool term;         /* return or yield */
	kf_sid sym;
	kf_const *cst;
	kf_attr *attrs;
	uint32_t nattr;
} opstmt;

/* Reads the statement from the op word to its end (or its region's '{');
 * false after a syntax error. */
static bool read_op(kf_parser *p, opstmt *o, stmt *s, bool region)
{
	bool poisoned = false;
	o->optok = p->tok;
	if (o->optok.kind != KF_T_IDENT) {
		kf_parse_expected(p, "an op name");
		return false;
	}
	o->op = kf_op_lookup(p->c, p->text + o->optok.off, o->optok.len);
	o->info = o->op >= 0 ? kf_op(p->c, o->op) : NULL;
	const kf_opinfo *info = o->info;
	kf_parse_next(p);
	if (!info && p->tok.kind != KF_T_LPAREN && p->tok.kind != KF_T_GLOBAL) {
		unknown_op(p, &o->optok); /* a misspelt `return %x`: one error is enough */
		return false;
	}
	if (o->op == KF_OP_CONST) {
		kf_tid t;
		if (!kf_parse_const(p, &o->cst, &o->attrs, &o->nattr, &t))
			return false;
		push_tid(s, t);
	} else if (info && (info->flags & KF_OPF_TERMINATOR)) {
		if (p->tok.kind == KF_T_VALUE && !parse_values(p, s))
			return false;
		if (o->op == KF_OP_RETURN && region)
			kf_parse_err(p, o->optok.off, "'return' inside a region; a region ends with 'yield'");
		if (o->op == KF_OP_YIELD && !region)
			kf_parse_err(p, o->optok.off, "'yield' outside a region; a graph ends with 'return'");
		o->term = true;
	} else {
		/* unknown ops are read in the general form to stay in step */
		if (p->tok.kind == KF_T_GLOBAL && (!info || (info->flags & KF_OPF_SYMBOL))) {
			o->sym = kf_intern(p->c, p->text + p->tok.off + 1, p->tok.nlen);
			kf_parse_next(p);
		} else if (info && (info->flags & KF_OPF_SYMBOL)) {
			kf_parse_expected(p, "'@name'");
			return false;
		}
		uint32_t lp = p->tok.off;
		if (!kf_parse_expect(p, KF_T_LPAREN, "'('") ||
		    (p->tok.kind != KF_T_RPAREN && !parse_values(p, s)) ||
		    !kf_parse_close(p, KF_T_RPAREN, "')'", '(', lp))
			return false;
		if (p->tok.kind == KF_T_LBRACE && peek(p).kind != KF_T_CARET &&
		    !kf_parse_attrs(p, &o->attrs, &o->nattr))
			return false;
		if (kf_parse_accept(p, KF_T_COLON) && !parse_types(p, s, &poisoned))
			return false;
	}
	/* the statement must end here (or open its region) before it is judged */
	if (p->tok.kind == KF_T_ERROR)
		return false;
	if (!p->tok.bol && p->tok.kind != KF_T_RBRACE && p->tok.kind != KF_T_LBRACE) {
		kf_parse_expected(p, s->nres == 0 && o->nres > 0 && !o->term ? "':' and the result type" : "end of line");
		return false;
	}
	return true;
}

/* Checks the statement in source order (the name defined, the op, the
 * operands, the counts); false when it cannot become a node. */
static bool judge_op(kf_parser *p, opstmt *o, stmt *s, bool *redef)
{
	const kf_opinfo *info = o->info;
	uint32_t nres = o->nres;
	bool poisoned = false;
	for (uint32_t i = 0; i < s->nres; i++)
		poisoned |= s->res[i] == KF_NONE;
	if (o->lhs.kind == KF_T_VALUE) {
		kf_pslot *e = kf_parse_lookup(p, &o->lhs);
		if ((e->scope & ~KF_SCOPE_MULTI) == p->scope) {
			kf_parse_redefinition(p, &o->lhs, e->off);
			*redef = true;
		}
	}
	if (!info) {
		unknown_op(p, &o->optok);
		poisoned = true;
	}
	resolve_values(p, s, &poisoned);
	if (!info)
		return false;
	if (info->nres >= 0 && nres != (uint32_t)info->nres && !(o->term && nres == 0)) {
		if (nres == 0)
			kf_parse_err(p, o->optok.off, "'%s' has a result; name it: '%%x = %s(...)'", info->name, info->name);
		else
			kf_parse_err(p, o->lhs.off, "'%s' has %d result%s, but %u %s named", info->name,
				     info->nres, info->nres == 1 ? "" : "s", nres, nres == 1 ? "is" : "are");
	} else if (s->nres != nres && !o->term)
		kf_parse_err(p, o->optok.off, "'%s' names %u result%s but gives %u type%s", info->name, nres,
			     nres == 1 ? "" : "s", s->nres, s->nres == 1 ? "" : "s");
	check_arity(p, info, s->nin, o->optok.off);
	return !poisoned;
}

/* Makes the node of a judged statement at the end of block b. */
static kf_nid build_op(kf_parser *p, kf_bid b, const opstmt *o, const stmt *s)
{
	kf_nid n = kf_node_new(p->g, b, KF_NONE, o->op, s->in, s->nin, s->res, o->nres);
	kf_node *x = kf_N(p->g, n);
	x->loc = (kf_loc){p->src, o->lhs.kind == KF_T_VALUE ? o->lhs.off : o->optok.off};
	x->sym = o->sym;
	x->cst = o->cst;
	if (o->nattr)
		kf_node_set_attrs(p->g, n, o->attrs, o->nattr);
	if (o->lhs.kind == KF_T_VALUE) {
		kf_sid nm = kf_intern(p->c, p->text + o->lhs.off + 1, o->lhs.nlen);
		x = kf_N(p->g, n);
		for (uint32_t i = 0; i < o->nres; i++)
			p->g->val[x->res0 + i].name = nm;
	}
	return n;
}

/* The part after `%r =` (or the op word of a result-less statement), its
 * node and its region. */
static bool parse_op(kf_parser *p, kf_bid b, bool region, const kf_token *lhs, uint32_t nres,
		     bool *terminated)
{
	stmt *s = &(stmt){0};
	opstmt o = {.lhs = *lhs, .nres = nres};
	bool redef = false, ok = false, defined = false;
	if (read_op(p, &o, s, region)) {
		*terminated |= o.term;
		kf_nid n = KF_NONE;
		if (judge_op(p, &o, s, &redef) && p->building)
			n = build_op(p, b, &o, s);
		if (lhs->kind == KF_T_VALUE)
			kf_parse_define(p, lhs, n == KF_NONE ? KF_POISON : kf_N(p->g, n)->res0, nres, redef);
		defined = true;
		ok = true;
		if ((o.info && (o.info->flags & KF_OPF_REGION)) || (!o.info && p->tok.kind == KF_T_LBRACE))
			ok = parse_region(p, n);
		else if (p->tok.kind == KF_T_LBRACE && peek(p).kind == KF_T_CARET) {
			kf_parse_err(p, p->tok.off, "'%s' takes no region", o.info->name);
			ok = parse_region(p, KF_NONE);
		}
	}
	if (!defined && lhs->kind == KF_T_VALUE) /* quiet later uses of the name */
		kf_parse_define(p, lhs, KF_POISON, nres ? nres : 1, true);
	free(s->tk);
	free(s->in);
	free(s->res);
	return ok;
}

/* One statement: `%r = op...`, `%r:N = op...`, or `op ...` without results. */
static bool parse_stmt(kf_parser *p, kf_bid b, bool region, bool *terminated)
{
	kf_token lhs = {.kind = KF_T_EOF};
	uint32_t nres = 0;
	if (p->tok.kind == KF_T_VALUE) {
		lhs = p->tok;
		nres = 1;
		kf_parse_prefetch(p, &lhs);
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
			kf_parse_define(p, &lhs, KF_POISON, nres, true);
			return false;
		}
	} else if (p->tok.kind != KF_T_IDENT) {
		kf_parse_expected(p, "a statement");
		return false;
	}
	return parse_op(p, b, region, &lhs, nres, terminated);
}

/* Statements up to the closing '}' of a graph body or region. */
static bool parse_block(kf_parser *p, kf_bid b, uint32_t open_off, bool region)
{
	bool terminated = false, told = false;
	char near[48];
	while (!p->stop) {
		if (p->tok.kind == KF_T_RBRACE) {
			if (!terminated && p->building) /* after an error it may be the broken line */
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
			kf_parse_define(p, &v, a, 1, false);
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
			kf_parse_loc(p, gs[byname[g->name] - 1]->loc.off, first, sizeof first);
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
	/* size the name table for the text (a statement takes ~32+ bytes), so
	 * that a big file is not rehashed through a chain of growing tables */
	while ((uint64_t)p.captab * 3 / 4 < len / 32 && p.captab < (1u << 28))
		p.captab = p.captab ? p.captab * 2 : 1024;
	if (p.captab) {
		p.tab = calloc(p.captab, sizeof *p.tab);
		if (!p.tab)
			abort();
	}
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
	/* refuse a file too large before reading it, not after */
	struct stat st;
	if (!in && fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size >= UINT32_MAX) {
		fclose(f);
		too_large(c, name, (size_t)st.st_size);
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
