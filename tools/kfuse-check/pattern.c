/* pattern.c: one check pattern -> fixed string or regex template; matching.
 *
 * Mirrors FileCheck's Pattern::parsePattern and Pattern::match: text without
 * {{ or [[ is a fixed string (memmem); otherwise the fixed pieces are escaped
 * into one regex with the {{...}} pieces, [[V:re]] definitions become capture
 * groups, [[V]] uses of a variable defined earlier on the same line become
 * backreferences, and every other use is a substitution inserted into the
 * template at match time.  Variables take their values when a match is found,
 * even one a later rule (CHECK-NEXT, DAG overlap) rejects, as in FileCheck.
 */
#include "kfc.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

int kfc_var_find(kfc_ctx *c, const char *name, size_t n)
{
	for (int i = 0; i < c->nvars; i++)
		if (strlen(c->vars[i].name) == n && !memcmp(c->vars[i].name, name, n))
			return i;
	return -1;
}

int kfc_var_add(kfc_ctx *c, const char *name, size_t n, bool numeric)
{
	kfc_var v = {.name = kfc_strndup(&c->arena, name, n), .numeric = numeric};
	KFC_PUSH(c->vars, c->nvars, c->capvars, v);
	return c->nvars - 1;
}

kfc_file *kfc_add_buffer(kfc_ctx *c, const char *name, const char *text, size_t n)
{
	kfc_file *f = kfc_alloc(&c->arena, sizeof *f);
	f->name = name;
	f->text = kfc_strndup(&c->arena, text, n);
	f->len = n;
	KFC_PUSH(c->extra, c->nextra, c->capextra, f);
	return f;
}

typedef struct pstate {
	kfc_ctx *c;
	kfc_pattern *p;
	kfc_str re;
	int cur_paren;
	int sdef_var[64], sdef_group[64], nsdefs; /* string defs on this line */
	kfc_subst *subs;
	int nsubs, capsubs;
	kfc_def *defs;
	int ndefs, capdefs;
} pstate;

static bool add_regex(pstate *st, const char *s, size_t n, bool wrapped)
{
	int ng = 0;
	bool dead = false;
	const char *err;
	if (!kfc_regex_translate(s, n, st->cur_paren, wrapped, &st->re, &ng, &dead, &err)) {
		kfc_msg(st->c, s, NULL, "error", "invalid regex: %s", err);
		return false;
	}
	st->cur_paren += ng;
	st->p->dead |= dead;
	return true;
}

static size_t find2(const char *s, size_t n, size_t from, const char *two)
{
	for (size_t i = from; i + 1 < n; i++)
		if (s[i] == two[0] && s[i + 1] == two[1])
			return i;
	return n;
}

/* FileCheck's FindRegexVarEnd: the "]]" closing a block, skipping nested
 * [...] and backslash escapes.  Returns n when absent, n+1 on a stray ']'. */
static size_t var_end(kfc_ctx *c, const char *s, size_t n)
{
	size_t depth = 0, i = 0;
	while (i < n) {
		if (i + 1 < n && s[i] == ']' && s[i + 1] == ']' && depth == 0)
			return i;
		if (s[i] == '\\') {
			i += 2;
			continue;
		}
		if (s[i] == '[')
			depth++;
		else if (s[i] == ']') {
			if (depth == 0) {
				kfc_msg(c, s + i, NULL, "error", "missing closing \"]\" for regex variable");
				return n + 1;
			}
			depth--;
		}
		i++;
	}
	return n;
}

static bool var_name_ok(const char *s, size_t n, size_t *len, bool *pseudo, kfc_ctx *c)
{
	size_t i = 0;
	*pseudo = n && s[0] == '@';
	if (n == 0) {
		kfc_msg(c, s, NULL, "error", "empty variable name");
		fputc('\n', stderr);
		return false;
	}
	if (s[0] == '$' || *pseudo)
		i++;
	if (i == n) {
		kfc_msg(c, s + i, NULL, "error", "empty %svariable name", *pseudo ? "pseudo " : "global ");
		fputc('\n', stderr);
		return false;
	}
	if (!(isalpha((unsigned char)s[i]) || s[i] == '_')) {
		kfc_msg(c, s, NULL, "error", "invalid variable name");
		fputc('\n', stderr); /* logged as an llvm::Error, as above */
		return false;
	}
	for (i++; i < n && (isalnum((unsigned char)s[i]) || s[i] == '_'); i++)
		;
	*len = i;
	return true;
}

/* One [[...]] block; s/n is its content without the brackets. */
/* What a [[...]] block says: a definition (is_def, of var, matching
 * mre), a use to substitute (subst), numeric or not. */
typedef struct {
	bool numeric, is_def, subst, legacy;
	int var;
	const char *mre;
	size_t mrelen;
} sblock;

/* The head of a string-variable block (NAME or NAME:REGEX) into *b. */
static bool string_block(kfc_ctx *c, const char *s, size_t n, sblock *b)
{
	const char *colon = memchr(s, ':', n);
	size_t head = colon ? (size_t)(colon - s) : n;
	for (size_t i = 0; i < head; i++)
		if (s[i] == ' ' || s[i] == '\t') {
			kfc_msg(c, s + i, NULL, "error", "unexpected whitespace");
			return false;
		}
	size_t len;
	bool pseudo;
	if (!var_name_ok(s, n, &len, &pseudo, c))
		return false;
	b->is_def = colon != NULL;
	if (b->is_def) {
		if (pseudo || len >= n || s[len] != ':') {
			kfc_msg(c, s, NULL, "error", "invalid name in string variable definition");
			return false;
		}
		b->var = kfc_var_find(c, s, len);
		if (b->var >= 0 && c->vars[b->var].numeric) {
			kfc_msg(c, s, NULL, "error", "numeric variable with name '%.*s' already exists", (int)len, s);
			return false;
		}
		if (b->var < 0)
			b->var = kfc_var_add(c, s, len, false);
		b->mre = s + len + 1;
		b->mrelen = n - len - 1;
	} else if (pseudo) {
		b->numeric = b->legacy = true;
	} else {
		if (len != n) {
			kfc_msg(c, s, NULL, "error", "invalid name in string variable use");
			return false;
		}
		b->var = kfc_var_find(c, s, len);
		if (b->var < 0)
			b->var = kfc_var_add(c, s, len, false);
		b->subst = true;
	}
	return true;
}

/* A use: a back-reference to the group of the same line that defined the
 * string variable, else a substitution made when the line is matched. */
static bool block_use(pstate *st, const sblock *b, kfc_expr *expr, kfc_fmt fmt, const char *s, size_t n,
		      size_t insert_at)
{
	int group = -1;
	for (int i = st->nsdefs - 1; !b->numeric && i >= 0 && group < 0; i--)
		if (st->sdef_var[i] == b->var)
			group = st->sdef_group[i];
	if (group >= 0) {
		if (group < 1 || group > 9) {
			kfc_msg(st->c, s, NULL, "error", "Can't back-reference more than 9 variables");
			return false;
		}
		kfc_str_printf(&st->re, "\\%d", group);
	} else {
		kfc_subst sb = {.at = insert_at, .numeric = b->numeric, .var = b->var,
			.expr = expr, .fmt = fmt, .from = s, .fromlen = n};
		KFC_PUSH(st->subs, st->nsubs, st->capsubs, sb);
	}
	return true;
}

static bool subst_block(pstate *st, const char *s, size_t n)
{
	kfc_ctx *c = st->c;
	sblock b = {.numeric = n && s[0] == '#', .var = -1};
	kfc_expr *expr = NULL;
	kfc_fmt fmt = {0};
	kfc_str wild = {0};
	size_t insert_at = st->re.n;
	if (b.numeric) {
		s++;
		n--;
	} else if (!string_block(c, s, n, &b))
		return false;
	if (b.numeric) {
		const char *dn;
		size_t dl;
		if (!kfc_expr_block(c, s, n, b.legacy, st->p->line, &expr, &fmt, &b.var, &dn, &dl))
			return false;
		b.subst = expr != NULL;
		b.is_def = b.var >= 0;
		if (!b.subst) {
			kfc_fmt_wildcard(fmt, &wild);
			b.mre = wild.p;
			b.mrelen = wild.n;
		}
	}
	bool ok = true;
	if (b.is_def) {
		kfc_str_putc(&st->re, '(');
		insert_at++;
		kfc_def d = {.var = b.var, .group = st->cur_paren, .numeric = b.numeric};
		KFC_PUSH(st->defs, st->ndefs, st->capdefs, d);
		if (!b.numeric && st->nsdefs < 64) {
			st->sdef_var[st->nsdefs] = b.var;
			st->sdef_group[st->nsdefs++] = st->cur_paren;
		}
		st->cur_paren++;
	}
	if (b.mrelen)
		ok = add_regex(st, b.mre, b.mrelen, b.is_def);
	kfc_str_free(&wild);
	if (!ok)
		return false;
	if (b.is_def)
		kfc_str_putc(&st->re, ')');
	return !b.subst || block_use(st, &b, expr, fmt, s, n, insert_at);
}

static bool build_regex(pstate *st, const char *s, size_t n, bool full)
{
	kfc_ctx *c = st->c;
	bool strict = c->o.strict_ws;
	if (full)
		kfc_str_put(&st->re, strict ? "^" : "^ *", strict ? 1 : 3);
	size_t i = 0;
	while (i < n) {
		if (n - i >= 2 && s[i] == '{' && s[i + 1] == '{') {
			size_t end = find2(s, n, i, "}}");
			if (end == n) {
				kfc_msg(c, s + i, NULL, "error", "found start of regex string with no end '}}'");
				return false;
			}
			/* FileCheck wraps the piece in a group only when an alternation
			 * follows anywhere in the rest of the pattern. */
			bool alt = memchr(s + i, '|', n - i) != NULL;
			if (alt) {
				kfc_str_putc(&st->re, '(');
				st->cur_paren++;
			}
			if (!add_regex(st, s + i + 2, end - i - 2, alt))
				return false;
			if (alt)
				kfc_str_putc(&st->re, ')');
			i = end + 2;
			continue;
		}
		if (n - i >= 2 && s[i] == '[' && s[i + 1] == '[' && !(n - i >= 3 && s[i + 2] == '[')) {
			size_t end = var_end(c, s + i + 2, n - i - 2);
			if (end == n - i - 1) {
				c->failed = true; /* FileCheck exits 1 here */
				return false;
			}
			if (end == n - i - 2) {
				kfc_msg(c, s + i, NULL, "error", "Invalid substitution block, no ]] found");
				return false;
			}
			if (!subst_block(st, s + i + 2, end))
				return false;
			i += 2 + end + 2;
			continue;
		}
		size_t e = find2(s, n, i + 1, "{{"), e2 = find2(s, n, i + 1, "[[");
		if (e2 < e)
			e = e2;
		kfc_regex_escape(&st->re, s + i, e - i);
		i = e;
	}
	if (full)
		kfc_str_put(&st->re, strict ? "$" : " *$", strict ? 1 : 3);
	return true;
}

bool kfc_pattern_parse(kfc_ctx *c, kfc_pattern *p, const char *s, size_t n)
{
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
		n--;
	p->loc = s;
	bool full = c->o.match_full_lines && p->kind != KFC_NOT;
	if (n == 0 && p->kind != KFC_EMPTY) {
		kfc_msg(c, s, NULL, "error", "found empty check string with prefix '%.*s:'",
			(int)p->prefixlen, p->prefix);
		return false;
	}
	if (n != 0 && p->kind == KFC_EMPTY) {
		kfc_msg(c, s, NULL, "error", "found non-empty check string for empty check with prefix '%.*s:'",
			(int)p->prefixlen, p->prefix);
		return false;
	}
	if (p->kind == KFC_EMPTY) {
		p->re = "(\n$)";
		p->relen = 4;
		p->ngroups = 1;
		return true;
	}
	if (p->literal || (!full && (n < 2 || (find2(s, n, 0, "{{") == n && find2(s, n, 0, "[[") == n)))) {
		p->is_fixed = true;
		p->fixed = s;
		p->fixedlen = n;
		return true;
	}
	pstate st = {.c = c, .p = p, .cur_paren = 1};
	bool ok = build_regex(&st, s, n, full);
	if (ok) {
		p->re = kfc_strndup(&c->arena, st.re.p ? st.re.p : "", st.re.n);
		p->relen = st.re.n;
		p->ngroups = st.cur_paren - 1;
		p->nsubs = st.nsubs;
		p->subs = kfc_alloc(&c->arena, (size_t)st.nsubs * sizeof *p->subs + 1);
		if (st.nsubs)
			memcpy(p->subs, st.subs, (size_t)st.nsubs * sizeof *p->subs);
		p->ndefs = st.ndefs;
		p->defs = kfc_alloc(&c->arena, (size_t)st.ndefs * sizeof *p->defs + 1);
		if (st.ndefs)
			memcpy(p->defs, st.defs, (size_t)st.ndefs * sizeof *p->defs);
		int nstr = 0;
		for (int i = 0; i < st.ndefs; i++)
			nstr += !st.defs[i].numeric;
		p->has_var = st.nsubs > 0 || nstr > 0;
	}
	kfc_str_free(&st.re);
	free(st.subs);
	free(st.defs);
	return ok;
}

/* The text a substitution inserts into the regex, or false with errors. */
static bool subst_value(kfc_ctx *c, kfc_pattern *p, kfc_subst *sb, kfc_str *out,
	bool escape, kfc_err *errs, int *nerrs, int maxerrs)
{
	if (!sb->numeric) {
		kfc_var *v = &c->vars[sb->var];
		if (!v->has_value || v->numeric) {
			if (*nerrs < maxerrs) {
				errs[*nerrs].at = sb->from;
				snprintf(errs[*nerrs].msg, sizeof errs->msg, "undefined variable: %.*s",
					(int)sb->fromlen, sb->from);
				(*nerrs)++;
			}
			return false;
		}
		if (escape)
			kfc_regex_escape(out, v->sval, v->slen);
		else
			kfc_str_put(out, v->sval, v->slen);
		return true;
	}
	int64_t val;
	int before = *nerrs;
	if (!kfc_expr_eval(c, sb->expr, p->line, &val, errs, nerrs, maxerrs) ||
	    !kfc_fmt_value(sb->fmt, val, out)) {
		/* An overflow is reported once, at the whole substitution. */
		bool ovf = *nerrs == before;
		for (int i = before; i < *nerrs; i++)
			if (!strcmp(errs[i].msg, "overflow")) {
				ovf = true;
				errs[i--] = errs[--*nerrs];
			}
		if (ovf && *nerrs < maxerrs) {
			errs[*nerrs].at = sb->from;
			snprintf(errs[*nerrs].msg, sizeof errs->msg,
				"unable to substitute variable or numeric expression: overflow error");
			(*nerrs)++;
		}
		return false;
	}
	return true;
}

void kfc_print_substs(kfc_ctx *c, kfc_pattern *p, const char *at, int mtype)
{
	for (int i = 0; i < p->nsubs; i++) {
		kfc_str v = {0}, msg = {0};
		kfc_err errs[8];
		int nerrs = 0;
		/* FileCheck 19 shows the regex-escaped value */
		if (subst_value(c, p, &p->subs[i], &v, true, errs, &nerrs, 8)) {
			kfc_str_put(&msg, "with \"", 6);
			kfc_write_escaped(&msg, p->subs[i].from, p->subs[i].fromlen);
			kfc_str_put(&msg, "\" equal to \"", 12);
			kfc_write_escaped(&msg, v.p ? v.p : "", v.n);
			kfc_str_putc(&msg, '"');
			kfc_str_putc(&msg, 0);
			if (c->record)
				kfc_record(c, p, mtype, (size_t)(at - c->input.text),
					(size_t)(at - c->input.text), kfc_strndup(&c->arena, msg.p, msg.n - 1));
			kfc_msg(c, at, NULL, "note", "%s", msg.p);
		}
		kfc_str_free(&v);
		kfc_str_free(&msg);
	}
}

static const char *find_fixed(const kfc_pattern *p, const char *buf, size_t n, bool icase)
{
	if (!icase)
		return memmem(buf, n, p->fixed, p->fixedlen);
	if (p->fixedlen > n)
		return NULL;
	int f0 = tolower((unsigned char)p->fixed[0]);
	for (size_t i = 0; i + p->fixedlen <= n; i++) {
		if (tolower((unsigned char)buf[i]) != f0)
			continue;
		size_t k = 1;
		while (k < p->fixedlen && tolower((unsigned char)buf[i + k]) == tolower((unsigned char)p->fixed[k]))
			k++;
		if (k == p->fixedlen)
			return buf + i;
	}
	return NULL;
}

static void set_vars(kfc_ctx *c, kfc_pattern *p, const char *buf, const regmatch_t *m)
{
	for (int i = 0; i < p->ndefs; i++) {
		kfc_def *d = &p->defs[i];
		kfc_var *v = &c->vars[d->var];
		const char *s = buf + m[d->group].rm_so;
		size_t n = (size_t)(m[d->group].rm_eo - m[d->group].rm_so);
		if (m[d->group].rm_so < 0)
			s = buf, n = 0;
		v->has_value = true;
		if (d->numeric)
			v->nval = kfc_fmt_parse(v->fmt, s, n);
		else {
			v->sval = s;
			v->slen = n;
		}
	}
}

int kfc_pattern_match(kfc_ctx *c, kfc_pattern *p, const char *buf, size_t n,
	size_t *pos, size_t *len, kfc_err *errs, int *nerrs, int maxerrs)
{
	*nerrs = 0;
	if (p->kind == KFC_EOF) {
		*pos = n;
		*len = 0;
		return KFC_MATCH;
	}
	if (p->is_fixed) {
		const char *f = find_fixed(p, buf, n, c->o.ignore_case);
		if (!f)
			return KFC_NOMATCH;
		*pos = (size_t)(f - buf);
		*len = p->fixedlen;
		return KFC_MATCH;
	}
	bool icase = c->o.ignore_case;
	kfc_re tmp, *rx = &p->rx;
	if (p->nsubs) {
		kfc_str re = {0};
		size_t at = 0;
		bool ok = true;
		for (int i = 0; i < p->nsubs; i++) {
			kfc_str_put(&re, p->re + at, p->subs[i].at - at);
			at = p->subs[i].at;
			ok = subst_value(c, p, &p->subs[i], &re, true, errs, nerrs, maxerrs) && ok;
		}
		kfc_str_put(&re, p->re + at, p->relen - at);
		if (!ok) {
			kfc_str_free(&re);
			return KFC_MERROR;
		}
		int rc = p->dead ? 1 : kfc_re_compile(&tmp, re.p ? re.p : "", re.n, icase);
		kfc_str_free(&re);
		if (rc)
			return KFC_NOMATCH;
		rx = &tmp;
	} else if (p->rx_state == 0) {
		/* The regex is compiled once; a combined regex that does not
		 * compile never matches, as llvm::Regex::match returns false. */
		p->rx_state = !p->dead && kfc_re_compile(&p->rx, p->re, p->relen, icase) == 0 ? 1 : -1;
	}
	if (!p->nsubs && p->rx_state < 0)
		return KFC_NOMATCH;
	regmatch_t mstack[16], *m = mstack;
	size_t nm = (size_t)p->ngroups + 1;
	if (nm > 16)
		m = kfc_xrealloc(NULL, nm * sizeof *m);
	int rc = kfc_re_exec(rx, buf, n, p->ndefs ? nm : 1, m);
	if (rc == 0) {
		set_vars(c, p, buf, m);
		/* CHECK-EMPTY's match starts after the newline its regex consumes. */
		size_t skip = p->kind == KFC_EMPTY;
		*pos = (size_t)m[0].rm_so + skip;
		*len = (size_t)(m[0].rm_eo - m[0].rm_so) - skip;
	} else if (rc < 0 && *nerrs < maxerrs) {
		errs[*nerrs].at = p->loc;
		snprintf(errs[*nerrs].msg, sizeof errs->msg, "regular expression too complex: its backreferences "
			 "took more than %d steps to match", KFC_RE_BUDGET);
		++*nerrs;
	}
	if (m != mstack)
		free(m);
	if (rx == &tmp)
		kfc_re_free(&tmp);
	return rc == 0 ? KFC_MATCH : rc < 0 ? KFC_MERROR : KFC_NOMATCH;
}

bool kfc_pattern_literal(kfc_ctx *c, kfc_pattern *p, const char **lit, size_t *n)
{
	if (c->o.ignore_case || p->nsubs || p->kind == KFC_EOF)
		return false;
	if (p->is_fixed) {
		*lit = p->fixed;
		*n = p->fixedlen;
		return p->fixedlen > 0 && !memchr(p->fixed, '\n', p->fixedlen);
	}
	if (p->rx_state == 0)
		p->rx_state = !p->dead && kfc_re_compile(&p->rx, p->re, p->relen, false) == 0 ? 1 : -1;
	if (p->rx_state < 0 || !p->rx.oneline || !p->rx.nlit)
		return false;
	*lit = p->rx.lit;
	*n = p->rx.nlit;
	return true;
}

void kfc_pattern_free(kfc_pattern *p)
{
	if (p->rx_state == 1)
		kfc_re_free(&p->rx);
	p->rx_state = 0;
}

/* -D#[FMT,]NUM=EXPR: parsed as the block [[#FMT,NUM:EXPR]] in a buffer of its
 * own (for the messages), evaluated at once. */
static bool define_numeric(kfc_ctx *c, int i, const char *d)
{
	const char *eq = strchr(d, '=');
	if (!eq) {
		fprintf(stderr, "Missing equal sign in command-line definition '-D%s'\n", d);
		return false;
	}
	kfc_str buf = {0};
	kfc_str_printf(&buf, "Global define #%d: %s (parsed as: [[", i + 1, d);
	size_t start = buf.n;
	kfc_str_put(&buf, d, (size_t)(eq - d));
	kfc_str_putc(&buf, ':');
	kfc_str_put(&buf, eq + 1, strlen(eq + 1));
	size_t end = buf.n;
	kfc_str_put(&buf, "]])", 3);
	kfc_file *f = kfc_add_buffer(c, "Global defines", buf.p, buf.n);
	kfc_str_free(&buf);
	kfc_expr *x;
	kfc_fmt fmt;
	int var;
	const char *dn;
	size_t dl;
	kfc_err errs[4];
	int nerrs = 0;
	int64_t val;
	if (!kfc_expr_block(c, f->text + start + 1, end - start - 1, false, 0, &x, &fmt, &var, &dn, &dl))
		return false;
	if (var < 0 || !x) {
		kfc_msg(c, f->text + start + 1, NULL, "error", "invalid variable definition");
		return false;
	}
	if (!kfc_expr_eval(c, x, 0, &val, errs, &nerrs, 4)) {
		for (int k = 0; k < nerrs; k++)
			kfc_msg(c, errs[k].at, NULL, "error", "%s", errs[k].msg);
		return false;
	}
	c->vars[var].has_value = true;
	c->vars[var].nval = val;
	c->vars[var].def_line = 0;
	return true;
}

/* -DVAR=VAL: the value is taken verbatim. */
static bool define_string(kfc_ctx *c, const char *d)
{
	const char *eq = strchr(d, '=');
	if (!eq) {
		fprintf(stderr, "Missing equal sign in command-line definition '-D%s'\n", d);
		return false;
	}
	size_t len = 0, nlen = (size_t)(eq - d);
	bool pseudo = false;
	if (nlen == 0) {
		kfc_msg(c, NULL, NULL, "error", "Missing variable name in command-line definition '-D%s'", d);
		return false;
	}
	kfc_file *f = kfc_add_buffer(c, "Global defines", d, strlen(d));
	if (!var_name_ok(f->text, nlen, &len, &pseudo, c))
		return false;
	if (pseudo || len != nlen) {
		kfc_msg(c, f->text, NULL, "error", "invalid name in string variable definition '%.*s'",
			(int)nlen, d);
		return false;
	}
	int v = kfc_var_find(c, d, nlen);
	if (v >= 0 && c->vars[v].numeric) {
		kfc_msg(c, f->text, NULL, "error", "numeric variable with name '%.*s' already exists",
			(int)nlen, d);
		return false;
	}
	if (v < 0)
		v = kfc_var_add(c, d, nlen, false);
	c->vars[v].has_value = true;
	c->vars[v].sval = eq + 1;
	c->vars[v].slen = strlen(eq + 1);
	return true;
}

/* -D definitions, as FileCheck's defineCmdlineVariables: all are tried. */
bool kfc_define_cmdline(kfc_ctx *c)
{
	bool ok = true;
	for (int i = 0; i < c->o.ndefines; i++) {
		const char *d = c->o.defines[i];
		ok = (d[0] == '#' ? define_numeric(c, i, d) : define_string(c, d)) && ok;
	}
	return ok;
}
