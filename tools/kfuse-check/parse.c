/* parse.c: finds the directives in the check file.
 *
 * As FileCheck's ParseCheckFile: scan for the earliest (then longest) check
 * or comment prefix that does not end a longer word, read the suffix
 * (-NEXT, -COUNT-3, {LITERAL}, ...), take the rest of the line as the pattern.
 * A suffix that is not a directive (CHECK-NXT:, CHECK-FOO:) is skipped as
 * FileCheck skips it; CHECK_NEXT: is a "misspelled directive" error, as are
 * -NOT combinations and bad counts.  DAG and NOT directives attach to the
 * next other directive; trailing ones to an implicit end-of-input check.
 */
#include "kfc.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

enum { T_NONE = -1, T_MISSPELLED = -2, T_BADNOT = -3, T_BADCOUNT = -4 };

typedef struct pfx {
	const char *s;
	size_t len;
	size_t pos; /* next occurrence at or after the last search start */
	bool comment;
} pfx;

static int by_len_desc(const void *a, const void *b)
{
	const pfx *x = a, *y = b;
	return (x->len < y->len) - (x->len > y->len);
}

/* The earliest prefix occurrence at or after `from`, longest on a tie. */
static pfx *next_prefix(pfx *ps, int n, const char *text, size_t len, size_t from)
{
	pfx *best = NULL;
	for (int i = 0; i < n; i++) {
		if (ps[i].pos == SIZE_MAX || ps[i].pos < from) {
			const char *f = from < len ? memmem(text + from, len - from, ps[i].s, ps[i].len) : NULL;
			ps[i].pos = f ? (size_t)(f - text) : SIZE_MAX - 1;
		}
		if (ps[i].pos != SIZE_MAX - 1 && (!best || best->pos > ps[i].pos))
			best = &ps[i];
	}
	return best;
}

static bool part_of_word(int ch)
{
	return isalnum(ch) || ch == '-' || ch == '_';
}

static bool eat(const char **s, const char *e, const char *w)
{
	size_t n = strlen(w);
	if ((size_t)(e - *s) >= n && !memcmp(*s, w, n)) {
		*s += n;
		return true;
	}
	return false;
}

static bool starts(const char *s, const char *e, const char *w)
{
	size_t n = strlen(w);
	return (size_t)(e - s) >= n && !memcmp(s, w, n);
}

/* ":" or "{LITERAL,...}:" after a directive name. */
static int modifiers(int kind, const char **s, const char *e, bool *literal)
{
	if (eat(s, e, ":"))
		return kind;
	if (!eat(s, e, "{"))
		return T_NONE;
	do {
		while (*s < e && isspace((unsigned char)**s))
			(*s)++;
		if (!eat(s, e, "LITERAL"))
			return T_NONE;
		*literal = true;
		while (*s < e && isspace((unsigned char)**s))
			(*s)++;
	} while (eat(s, e, ","));
	return eat(s, e, "}:") ? kind : T_NONE;
}

/* FileCheck's FindCheckType.  *after is where the pattern begins. */
static int check_type(const pfx *p, const char *at, const char *e, const char **after,
	int *count, bool *literal)
{
	const char *s = at + p->len;
	*after = NULL;
	*count = 1;
	*literal = false;
	if (s >= e)
		return T_NONE;
	if (p->comment) {
		if (eat(&s, e, ":")) {
			*after = s;
			return KFC_COMMENT;
		}
		return T_NONE;
	}
	int k;
	if (eat(&s, e, ":")) {
		*after = s;
		return KFC_PLAIN;
	}
	if (*s == '{') {
		k = modifiers(KFC_PLAIN, &s, e, literal);
		*after = s;
		return k;
	}
	bool misspelled = false;
	if (eat(&s, e, "_"))
		misspelled = true;
	else if (!eat(&s, e, "-"))
		return T_NONE;
	if (eat(&s, e, "COUNT-")) {
		int64_t n = 0;
		const char *d = s;
		while (s < e && isdigit((unsigned char)*s) && n <= INT32_MAX)
			n = n * 10 + (*s++ - '0');
		*after = s;
		if (s == d || n <= 0 || n > INT32_MAX || s >= e || (*s != ':' && *s != '{'))
			return misspelled ? T_MISSPELLED : T_BADCOUNT;
		*count = (int)n;
		k = modifiers(KFC_PLAIN, &s, e, literal);
		*after = s;
		return k == T_NONE || !misspelled ? k : T_MISSPELLED;
	}
	static const char *const badnot[] = {"DAG-NOT:", "NOT-DAG:", "NEXT-NOT:", "NOT-NEXT:",
		"SAME-NOT:", "NOT-SAME:", "EMPTY-NOT:", "NOT-EMPTY:"};
	for (int i = 0; i < 8; i++)
		if (starts(s, e, badnot[i])) {
			*after = s;
			return misspelled ? T_MISSPELLED : T_BADNOT;
		}
	static const struct { const char *w; int kind; } names[] = {
		{"NEXT", KFC_NEXT}, {"SAME", KFC_SAME}, {"NOT", KFC_NOT}, {"DAG", KFC_DAG},
		{"LABEL", KFC_LABEL}, {"EMPTY", KFC_EMPTY},
	};
	for (int i = 0; i < 6; i++)
		if (eat(&s, e, names[i].w)) {
			k = modifiers(names[i].kind, &s, e, literal);
			*after = s;
			return k == T_NONE || !misspelled ? k : T_MISSPELLED;
		}
	return T_NONE;
}

const char *kfc_kind_name(const kfc_pattern *p, kfc_str *out)
{
	static const char *const sfx[] = {"", "-NEXT", "-SAME", "-NOT", "-DAG", "-LABEL", "-EMPTY", "", ""};
	out->n = 0;
	if (p->kind == KFC_EOF)
		kfc_str_put(out, "implicit EOF", 12);
	else {
		kfc_str_put(out, p->prefix, p->prefixlen);
		const char *x = p->count > 1 ? "-COUNT" : sfx[p->kind];
		kfc_str_put(out, x, strlen(x));
		if (p->literal)
			kfc_str_put(out, "{LITERAL}", 9);
	}
	kfc_str_putc(out, 0);
	return out->p;
}

static kfc_pattern *new_pattern(kfc_ctx *c, int kind, const char *prefix, size_t plen, int line)
{
	kfc_pattern *p = kfc_alloc(&c->arena, sizeof *p);
	p->kind = kind;
	p->count = 1;
	p->prefix = prefix;
	p->prefixlen = plen;
	p->line = line;
	return p;
}

/* DAG/NOT directives waiting for the next directive; the implicit NOTs
 * start every group (FileCheck's DagNotMatches = ImplicitNegativeChecks). */
typedef struct pending {
	kfc_pattern **imp, **dn;
	int nimp, ndn, capdn;
} pending;

static void add_check(kfc_ctx *c, kfc_pattern *p, pending *q)
{
	kfc_check ck = {.pat = p, .ndagnot = q->ndn};
	ck.dagnot = kfc_alloc(&c->arena, (size_t)q->ndn * sizeof *ck.dagnot + 1);
	if (q->ndn)
		memcpy(ck.dagnot, q->dn, (size_t)q->ndn * sizeof *q->dn);
	KFC_PUSH(c->checks, c->nchecks, c->capchecks, ck);
	q->ndn = 0;
	for (int i = 0; i < q->nimp; i++)
		KFC_PUSH(q->dn, q->ndn, q->capdn, q->imp[i]);
}

/* The --implicit-check-not patterns, each in a "command line" buffer. */
static void implicit_nots(kfc_ctx *c, kfc_pattern ***imp, int *nimp)
{
	*imp = kfc_alloc(&c->arena, (size_t)c->o.nimplicit_not * sizeof **imp + 1);
	*nimp = 0;
	for (int i = 0; i < c->o.nimplicit_not; i++) {
		kfc_str b = {0};
		kfc_str_printf(&b, "-implicit-check-not='%s'", c->o.implicit_not[i]);
		kfc_file *f = kfc_add_buffer(c, "command line", b.p, b.n);
		kfc_str_free(&b);
		kfc_pattern *p = new_pattern(c, KFC_NOT, "IMPLICIT-CHECK", 14, 0);
		p->imp = i + 1;
		/* FileCheck ignores a parse failure here, after printing it */
		kfc_pattern_parse(c, p, f->text + 21, strlen(c->o.implicit_not[i]));
		(*imp)[(*nimp)++] = p;
	}
}

static bool directive(kfc_ctx *c, pfx *used, const char *at, int kind, const char **bufp,
	int line, int count, bool literal, pending *q)
{
	const char *buf = *bufp, *end = c->check.text + c->check.len;
	if (!(c->o.strict_ws && c->o.match_full_lines))
		while (buf < end && (*buf == ' ' || *buf == '\t'))
			buf++;
	const char *eol = buf;
	while (eol < end && *eol != '\n' && *eol != '\r')
		eol++;
	*bufp = eol;
	if (kind == KFC_COMMENT)
		return true;
	kfc_pattern *p = new_pattern(c, kind, used->s, used->len, line);
	p->count = count;
	p->literal = literal;
	if (!kfc_pattern_parse(c, p, buf, (size_t)(eol - buf)))
		return false;
	if (kind == KFC_LABEL && p->has_var) {
		kfc_msg(c, at, NULL, "error", "found '%s-LABEL:' with variable definition or use", used->s);
		return false;
	}
	if ((kind == KFC_NEXT || kind == KFC_SAME || kind == KFC_EMPTY) && c->nchecks == 0) {
		const char *t = kind == KFC_NEXT ? "NEXT" : kind == KFC_EMPTY ? "EMPTY" : "SAME";
		kfc_msg(c, at, NULL, "error", "found '%s-%s' without previous '%s: line", used->s, t, used->s);
		return false;
	}
	if (kind == KFC_DAG || kind == KFC_NOT) {
		KFC_PUSH(q->dn, q->ndn, q->capdn, p);
		return true;
	}
	add_check(c, p, q);
	return true;
}

bool kfc_parse_checks(kfc_ctx *c)
{
	int np = c->o.nprefixes + c->o.ncomments;
	pfx *ps = calloc((size_t)np, sizeof *ps);
	for (int i = 0; i < np; i++) {
		bool com = i >= c->o.nprefixes;
		ps[i].s = com ? c->o.comments[i - c->o.nprefixes] : c->o.prefixes[i];
		ps[i].len = strlen(ps[i].s);
		ps[i].pos = SIZE_MAX;
		ps[i].comment = com;
	}
	qsort(ps, (size_t)np, sizeof *ps, by_len_desc);
	pending q = {0};
	implicit_nots(c, &q.imp, &q.nimp);
	for (int i = 0; i < q.nimp; i++)
		KFC_PUSH(q.dn, q.ndn, q.capdn, q.imp[i]);
	const char *text = c->check.text, *end = text + c->check.len, *buf = text;
	int line = 1;
	bool ok = true;
	while (ok && buf < end) {
		pfx *p = next_prefix(ps, np, text, c->check.len, (size_t)(buf - text));
		if (!p)
			break;
		const char *at = text + p->pos;
		for (const char *q = buf; q < at; q++)
			line += *q == '\n';
		buf = at;
		int count, kind = T_NONE;
		bool literal;
		const char *after = NULL;
		if (at == text || !part_of_word((unsigned char)at[-1]))
			kind = check_type(p, at, end, &after, &count, &literal);
		if (kind == T_NONE) {
			/* not a directive: skip the whole word */
			buf = at + p->len;
			while (buf < end && part_of_word((unsigned char)*buf))
				buf++;
			continue;
		}
		buf = after ? after : at + p->len;
		if (kind == T_MISSPELLED) {
			kfc_msg(c, at, NULL, "error", "misspelled directive '%.*s'", (int)(buf - at), at);
			ok = false;
		} else if (kind == T_BADNOT) {
			kfc_msg(c, buf, NULL, "error", "unsupported -NOT combo on prefix '%s'", p->s);
			ok = false;
		} else if (kind == T_BADCOUNT) {
			kfc_msg(c, buf, NULL, "error", "invalid count in -COUNT specification on prefix '%s'", p->s);
			ok = false;
		} else
			ok = directive(c, p, at, kind, &buf, line, count, literal, &q);
	}
	if (ok && q.ndn) {
		/* trailing DAG/NOTs (and --implicit-check-not) run to the end */
		kfc_pattern *eof = new_pattern(c, KFC_EOF, c->o.prefixes[0], strlen(c->o.prefixes[0]), line + 1);
		eof->loc = end;
		add_check(c, eof, &q);
	}
	if (ok && c->nchecks == 0) {
		kfc_str m = {0};
		kfc_str_printf(&m, "no check strings found with prefix%s", c->o.nprefixes > 1 ? "es " : " ");
		for (int i = 0; i < c->o.nprefixes; i++)
			kfc_str_printf(&m, "%s'%s:'", i ? ", " : "", c->o.prefixes[i]);
		kfc_msg(c, NULL, NULL, "error", "%s", m.p);
		kfc_str_free(&m);
		ok = false;
	}
	free(ps);
	free(q.dn);
	return ok;
}
