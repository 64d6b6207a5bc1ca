/* parse_stmt.c: the parser's statements: `%r = op(...) {attrs} : types`,
 * constants, terminators, regions and the blocks that hold them, and a
 * graph's header.
 *
 * A statement is read first (operand names only collected, their string
 * table slots prefetched), then judged in source order (the name defined,
 * the op, the operands, the counts) and built.  After a bad statement the
 * parser resyncs at the next line.  The common statement,
 * `%r = op(%a, %b) : type` on one line, is read from the bytes without the
 * token machinery (fast_read); anything else, and every error, goes the
 * general way from the same token. */
#include <stdlib.h>
#include <string.h>
#include "parse_int.h"
#include "plugin.h"

/* Skips to the first token of a later line than off (or a '}' / EOF). */
static void resync(kf_parser *p, uint32_t off)
{
	while (p->tok.kind != KF_T_EOF && !(p->tok.bol && p->tok.off > off))
		kf_parse_next(p);
}

/* ---- statements ---- */

/* A statement's operands and result types, on the stack unless it has
 * more than STMT_INLINE (a malloc per statement was a tenth of the parse). */
#define STMT_INLINE 8
typedef struct stmt {
	kf_token *tk; uint32_t *th; uint32_t ntk, captk; /* operand tokens and their names' hashes */
	kf_vid *in; uint32_t nin, capin;
	kf_tid *res; uint32_t nres, capres;
	kf_token tkbuf[STMT_INLINE];
	uint32_t thbuf[STMT_INLINE];
	kf_vid inbuf[STMT_INLINE];
	kf_tid resbuf[STMT_INLINE];
} stmt;

static void stmt_init(stmt *s)
{
	s->tk = s->tkbuf;
	s->th = s->thbuf;
	s->in = s->inbuf;
	s->res = s->resbuf;
	s->captk = s->capin = s->capres = STMT_INLINE;
	s->ntk = s->nin = s->nres = 0;
}

static void stmt_free(stmt *s)
{
	if (s->tk != s->tkbuf) {
		free(s->tk);
		free(s->th);
	}
	if (s->in != s->inbuf)
		free(s->in);
	if (s->res != s->resbuf)
		free(s->res);
}

/* Doubles an array of cap elements of size sz, moving it off the stack
 * (inl) the first time. */
static void *grow(void *arr, const void *inl, uint32_t cap, size_t sz)
{
	void *q = arr == inl ? malloc(2 * (size_t)cap * sz) : realloc(arr, 2 * (size_t)cap * sz);
	if (!q)
		abort();
	if (arr == inl)
		memcpy(q, inl, cap * sz);
	return q;
}

static void push_vid(stmt *s, kf_vid v)
{
	if (s->nin == s->capin) {
		s->in = grow(s->in, s->inbuf, s->capin, sizeof *s->in);
		s->capin *= 2;
	}
	s->in[s->nin++] = v;
}

static void push_tid(stmt *s, kf_tid t)
{
	if (s->nres == s->capres) {
		s->res = grow(s->res, s->resbuf, s->capres, sizeof *s->res);
		s->capres *= 2;
	}
	s->res[s->nres++] = t;
}

/* An operand token, its name hashed (and its table slot prefetched). */
static void push_operand(kf_parser *p, stmt *s, const kf_token *t)
{
	if (s->ntk == s->captk) {
		s->th = grow(s->th, s->thbuf, s->captk, sizeof *s->th);
		s->tk = grow(s->tk, s->tkbuf, s->captk, sizeof *s->tk);
		s->captk *= 2;
	}
	s->th[s->ntk] = kf_parse_hash(p, t);
	s->tk[s->ntk++] = *t;
}

/* value {',' value}, collected to be resolved by resolve_values. */
static bool parse_values(kf_parser *p, stmt *s)
{
	do {
		if (p->tok.kind != KF_T_VALUE) {
			kf_parse_expected(p, "a value");
			return false;
		}
		push_operand(p, s, &p->tok);
		kf_parse_next(p);
	} while (kf_parse_accept(p, KF_T_COMMA));
	return true;
}

/* The operands' values; *poisoned when one did not resolve. */
static void resolve_values(kf_parser *p, stmt *s, bool *poisoned)
{
	for (uint32_t i = 0; i < s->ntk; i++) {
		kf_vid v = kf_parse_resolve(p, &s->tk[i], s->th[i]);
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
	/* an op of the standard rules' op{} declarations (their output uses
	 * them): say which file declares it.  That loads the rules, so only
	 * for the first few unknown ops of a file. */
	kf_buf prov = {0};
	char name[64];
	snprintf(name, sizeof name, "%.*s", (int)t->len, nm);
	if (p->nprovider++ < 4 && t->len < sizeof name && kf_plugin_provider(name, &prov) == 0)
		kf_parse_err(p, t->off, "unknown op %s: the standard rule file %s declares it (name it with "
			     "a line `plugin \"%s\"` before the graphs, or use --plugin)", near, prov.p, prov.p);
	else if (best)
		kf_parse_err(p, t->off, "unknown op %s; did you mean '%s'?", near, best);
	else
		kf_parse_err(p, t->off, "unknown op %s", near);
	kf_buf_free(&prov);
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
			kf_sid nm = kf_parse_name(p, &v);
			kf_vid a = KF_POISON;
			if (p->building && b != KF_NONE && t != KF_NONE)
				a = kf_block_add_arg(p->g, b, t, nm);
			kf_parse_define(p, &v, nm, a, 1, false);
		} while (kf_parse_accept(p, KF_T_COMMA));
	}
	if (!kf_parse_close(p, KF_T_RPAREN, "')'", '(', caret) || !kf_parse_expect(p, KF_T_COLON, "':' after the region's arguments"))
		goto out;
	opened = false;
	ok = kf_parse_block(p, b, open, true);
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
	kf_sid lsid;       /* its name */
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
	o->op = kf_parse_op(p, p->text + o->optok.off, o->optok.len);
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
		if (p->tok.kind == KF_T_LBRACE && kf_parse_peek(p).kind != KF_T_CARET &&
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
		const kf_pbind *e = kf_parse_bind(p, o->lsid);
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
		kf_value *v = &p->g->val[x->res0];
		for (uint32_t i = 0; i < o->nres; i++)
			v[i].name = o->lsid;
	}
	return n;
}

/* After a statement was read (read) or not: judges and builds it, binds
 * its name and reads its region. */
static bool finish_op(kf_parser *p, kf_bid b, opstmt *o, stmt *s, bool read, bool *terminated)
{
	const kf_token *lhs = &o->lhs;
	bool redef = false, ok = false;
	if (read) {
		*terminated |= o->term;
		kf_nid n = KF_NONE;
		if (judge_op(p, o, s, &redef) && p->building)
			n = build_op(p, b, o, s);
		if (lhs->kind == KF_T_VALUE)
			kf_parse_define(p, lhs, o->lsid, n == KF_NONE ? KF_POISON : kf_N(p->g, n)->res0, o->nres, redef);
		ok = true;
		if ((o->info && (o->info->flags & KF_OPF_REGION)) || (!o->info && p->tok.kind == KF_T_LBRACE))
			ok = parse_region(p, n);
		else if (p->tok.kind == KF_T_LBRACE && kf_parse_peek(p).kind == KF_T_CARET) {
			kf_parse_err(p, p->tok.off, "'%s' takes no region", o->info->name);
			ok = parse_region(p, KF_NONE);
		}
	} else if (lhs->kind == KF_T_VALUE) { /* quiet later uses of the name */
		kf_parse_define(p, lhs, o->lsid, KF_POISON, o->nres ? o->nres : 1, true);
	}
	stmt_free(s);
	return ok;
}

/* ---- the common statement, from the bytes ---- */

/* Reads the token after a plain line that ends at e: the next line's
 * `%name` (followed by a blank or '=') is made here, as the lexer would make
 * it; anything else is lexed. */
static void next_line(kf_parser *p, const char *e)
{
	if (*e == '\n') {
		const char *v = kf_parse_blanks(e + 1), *q = v + 1;
		if (*v == '%' && kf_parse_namech[(unsigned char)*q]) {
			while (kf_parse_namech[(unsigned char)*q])
				q++;
			if (kf_parse_blank[(unsigned char)*q] || *q == '=') {
				p->tok = (kf_token){.kind = KF_T_VALUE, .bol = true, .off = (uint32_t)(v - p->text),
						    .len = (uint32_t)(q - v), .nlen = (uint32_t)(q - v - 1), .idx = -1};
				p->lx.cur = q;
				p->lx.nl = false;
				return;
			}
		}
	}
	kf_parse_relex(p, e);
}

/* Reads `= op(%a, ...) : type` after the defining name o->lhs (p->tok)
 * straight from the bytes (the text ends in a NUL, which stops every scan),
 * when the line is as plain as most are: a known op of the general form,
 * operands without '#k', no attributes, and one type.  Such bytes are what
 * the general path would read token by token, without a diagnostic, so
 * taking them here changes nothing but the time; from the type on, the
 * general path's own readers go on.  -1: not taken, nothing read and the
 * lexer where it was; else as read_op: 1 read, 0 after a reported error. */
static int fast_read(kf_parser *p, opstmt *o, stmt *s)
{
	const char *t = p->text, *q = kf_parse_blanks(t + p->tok.off + p->tok.len), *w;
	if (*q != '=' || !kf_parse_wordstart[(unsigned char)*(w = q = kf_parse_blanks(q + 1))])
		return -1;
	while (kf_parse_namech[(unsigned char)*q])
		q++;
	kf_token optok = {.kind = KF_T_IDENT, .off = (uint32_t)(w - t), .len = (uint32_t)(q - w), .idx = -1};
	int op = kf_parse_op(p, t + optok.off, optok.len);
	const kf_opinfo *info = op >= 0 ? kf_op(p->c, op) : NULL;
	q = kf_parse_blanks(q);
	if (!info || op == KF_OP_CONST || (info->flags & (KF_OPF_TERMINATOR | KF_OPF_SYMBOL | KF_OPF_REGION)) ||
	    *q != '(')
		return -1;
	for (q = kf_parse_blanks(q + 1); *q != ')';) {
		const char *v = q++;
		if (*v != '%' || !kf_parse_namech[(unsigned char)*q])
			goto undo;
		while (kf_parse_namech[(unsigned char)*q])
			q++;
		if (*q == '#')
			goto undo;
		kf_token vt = {.kind = KF_T_VALUE, .off = (uint32_t)(v - t), .len = (uint32_t)(q - v),
			       .nlen = (uint32_t)(q - v - 1), .idx = -1};
		push_operand(p, s, &vt);
		q = kf_parse_blanks(q);
		if (*q == ',')
			q = kf_parse_blanks(q + 1);
		else if (*q != ')')
			goto undo;
	}
	q = kf_parse_blanks(q + 1);
	if (*q != ':')
		goto undo;
	o->optok = optok;
	o->op = op;
	o->info = info;
	q = kf_parse_blanks(q + 1);
	/* the type of the line before, and then the end of the line */
	size_t tl = p->last_type_len;
	if (tl && (size_t)(t + p->len - q) >= tl && !memcmp(q, t + p->last_type_off, tl)) {
		const char *e = kf_parse_blanks(q + tl);
		if (*e == '\n' || *e == '#' || e == t + p->len) {
			push_tid(s, p->last_type);
			next_line(p, e);
			return 1;
		}
	}
	bool poisoned = false;
	kf_parse_relex(p, q);
	if (!parse_types(p, s, &poisoned) || p->tok.kind == KF_T_ERROR)
		return 0;
	if (!p->tok.bol && p->tok.kind != KF_T_RBRACE && p->tok.kind != KF_T_LBRACE) {
		kf_parse_expected(p, "end of line");
		return 0;
	}
	return 1;
undo:
	s->ntk = 0;
	return -1;
}

/* The part after `%r =` (or the op word of a result-less statement), its
 * node and its region. */
static bool parse_op(kf_parser *p, kf_bid b, bool region, const kf_token *lhs, kf_sid lsid,
		     uint32_t nres, bool *terminated)
{
	stmt st;
	stmt_init(&st);
	opstmt o = {.lhs = *lhs, .lsid = lsid, .nres = nres};
	return finish_op(p, b, &o, &st, read_op(p, &o, &st, region), terminated);
}

/* One statement: `%r = op...`, `%r:N = op...`, or `op ...` without results. */
static bool parse_stmt(kf_parser *p, kf_bid b, bool region, bool *terminated)
{
	kf_token lhs = {.kind = KF_T_EOF};
	kf_sid lsid = 0;
	uint32_t nres = 0;
	if (p->tok.kind == KF_T_VALUE) {
		lhs = p->tok;
		lsid = kf_parse_name(p, &lhs);
		nres = 1;
		if (lhs.idx < 0) {
			stmt st;
			stmt_init(&st);
			opstmt o = {.lhs = lhs, .lsid = lsid, .nres = 1};
			int r = fast_read(p, &o, &st);
			if (r >= 0)
				return finish_op(p, b, &o, &st, r, terminated);
			stmt_free(&st);
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
			kf_parse_define(p, &lhs, lsid, KF_POISON, nres, true);
			return false;
		}
	} else if (p->tok.kind != KF_T_IDENT) {
		kf_parse_expected(p, "a statement");
		return false;
	}
	return parse_op(p, b, region, &lhs, lsid, nres, terminated);
}

/* Statements up to the closing '}' of a graph body or region. */
bool kf_parse_block(kf_parser *p, kf_bid b, uint32_t open_off, bool region)
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
				     kf_parse_near(p, &p->tok, near, sizeof near), kf_parse_line(p, open_off));
			return false;
		}
		if (terminated && !told) {
			kf_parse_err(p, p->tok.off, "expected '}' after the %s near %s",
				     region ? "'yield'" : "'return'", kf_parse_near(p, &p->tok, near, sizeof near));
			told = true;
		}
		if (p->tok.kind == KF_T_VALUE && p->tok.bol && !terminated && p->building && kf_parse_lane(p, b))
			continue;
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


/* `(args) -> (types)` of a graph. */
bool kf_parse_header(kf_parser *p, kf_graph *g)
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
			kf_sid nm = kf_parse_name(p, &v);
			kf_vid a = KF_POISON;
			if (p->building && t != KF_NONE)
				a = kf_block_add_arg(g, 0, t, nm);
			kf_parse_define(p, &v, nm, a, 1, false);
		} while (kf_parse_accept(p, KF_T_COMMA));
	}
	if (!kf_parse_close(p, KF_T_RPAREN, "')'", '(', lp) || !kf_parse_expect(p, KF_T_ARROW, "'->'"))
		return false;
	lp = p->tok.off;
	if (!kf_parse_expect(p, KF_T_LPAREN, "'(' before the result types"))
		return false;
	stmt s;
	stmt_init(&s);
	bool poisoned = false, ok = true;
	if (p->tok.kind != KF_T_RPAREN)
		ok = parse_types(p, &s, &poisoned);
	ok = ok && kf_parse_close(p, KF_T_RPAREN, "')'", '(', lp);
	if (ok && p->building && !poisoned)
		kf_graph_set_results(g, s.res, s.nres);
	stmt_free(&s);
	return ok;
}

