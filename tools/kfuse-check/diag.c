/* diag.c: messages in llvm::SourceMgr's format and FileCheck's input dump.
 *
 * A message is `file:line:col: error: text`, the source line, and a caret
 * line with '~' under a range.  Locations are pointers into the (already
 * canonicalised) buffers, turned into line:col only when printed.  The dump
 * reproduces FileCheck's -dump-input layout: numbered input lines, each
 * followed by annotations (`check:3'1  X~~ error: no match found`), filtered
 * to the lines near errors and elided with `.` lines.
 */
#include "kfc.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

kfc_file *kfc_file_of(kfc_ctx *c, const char *p)
{
	if (!p)
		return NULL;
	if (p >= c->check.text && p <= c->check.text + c->check.len)
		return &c->check;
	if (c->input.text && p >= c->input.text && p <= c->input.text + c->input.len)
		return &c->input;
	for (int i = 0; i < c->nextra; i++)
		if (p >= c->extra[i]->text && p <= c->extra[i]->text + c->extra[i]->len)
			return c->extra[i];
	return NULL;
}

void kfc_file_linecol(kfc_file *f, size_t off, size_t *line, size_t *col)
{
	if (!f->lines) {
		size_t cap = 64;
		f->lines = kfc_xrealloc(NULL, cap * sizeof *f->lines);
		f->lines[f->nlines++] = 0;
		for (size_t i = 0; i < f->len; i++)
			if (f->text[i] == '\n') {
				if (f->nlines == cap) {
					cap *= 2;
					f->lines = kfc_xrealloc(f->lines, cap * sizeof *f->lines);
				}
				f->lines[f->nlines++] = i + 1;
			}
	}
	size_t lo = 0, hi = f->nlines; /* last line start <= off */
	while (hi - lo > 1) {
		size_t mid = (lo + hi) / 2;
		if (f->lines[mid] <= off)
			lo = mid;
		else
			hi = mid;
	}
	*line = lo + 1;
	*col = off - f->lines[lo] + 1;
}

/* Prints a source line with tabs expanded, then the caret line to match. */
static void source_lines(FILE *out, const char *ls, size_t n, size_t col, size_t r0, size_t r1, bool range)
{
	char *caret = calloc(n + 2, 1);
	memset(caret, ' ', n + 1);
	if (range)
		for (size_t i = r0; i < r1 && i <= n; i++)
			caret[i] = '~';
	if (col <= n)
		caret[col] = '^';
	size_t cn = n + 1;
	while (cn && caret[cn - 1] == ' ')
		cn--;
	size_t oc = 0;
	for (size_t i = 0; i < n; i++) {
		if (ls[i] != '\t') {
			fputc(ls[i], out);
			oc++;
			continue;
		}
		do {
			fputc(' ', out);
			oc++;
		} while (oc % 8);
	}
	fputc('\n', out);
	oc = 0;
	for (size_t i = 0; i < cn; i++) {
		if (i >= n || ls[i] != '\t') {
			fputc(caret[i], out);
			oc++;
			continue;
		}
		do {
			fputc(caret[i], out);
			oc++;
		} while (oc % 8);
	}
	fputc('\n', out);
	free(caret);
}

void kfc_msg(kfc_ctx *c, const char *at, const char *rend, const char *sev, const char *fmt, ...)
{
	va_list ap;
	kfc_file *f = kfc_file_of(c, at);
	fflush(stdout);
	if (f) {
		size_t line, col;
		kfc_file_linecol(f, (size_t)(at - f->text), &line, &col);
		fprintf(stderr, "%s:%zu:%zu: ", f->name, line, col);
	}
	fprintf(stderr, "%s: ", sev);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	if (!f)
		return;
	const char *bs = f->text, *be = f->text + f->len, *ls = at, *le = at;
	while (ls != bs && ls[-1] != '\n' && ls[-1] != '\r')
		ls--;
	while (le != be && *le != '\n' && *le != '\r')
		le++;
	size_t r0 = 0, r1 = 0;
	bool range = rend && rend > at && at <= le;
	if (range)
		r0 = (size_t)(at - ls), r1 = (size_t)((rend > le ? le : rend) - ls);
	source_lines(stderr, ls, (size_t)(le - ls), (size_t)(at - ls), r0, r1, range);
}

void kfc_record(kfc_ctx *c, const kfc_pattern *p, int mtype, size_t start, size_t end, const char *note)
{
	if (!c->record)
		return;
	kfc_diag d = {.pat = p, .kind = p->kind, .mtype = mtype, .start = start, .end = end, .note = note};
	KFC_PUSH(c->diags, c->ndiags, c->capdiags, d);
}

void kfc_write_escaped(kfc_str *s, const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)p[i];
		if (ch == '\\' || ch == '"') {
			kfc_str_putc(s, '\\');
			kfc_str_putc(s, (char)ch);
		} else if (ch == '\n')
			kfc_str_put(s, "\\n", 2);
		else if (ch == '\t')
			kfc_str_put(s, "\\t", 2);
		else if (ch < 32 || ch == 127)
			kfc_str_printf(s, "\\%03o", ch);
		else
			kfc_str_putc(s, (char)ch);
	}
}

/* ---- the input dump ----------------------------------------------------------- */

typedef struct annot {
	char label[48];
	size_t line, scol, ecol; /* ecol SIZE_MAX: to the end of the line */
	char lead;
	const char *note;
	bool error, first;
	int diag;
} annot;

static const char *abbrev(const kfc_pattern *p)
{
	static const char *const n[] = {"check", "next", "same", "not", "dag", "label", "empty", "com", "eof"};
	return p->count > 1 ? "count" : n[p->kind];
}

static void marker(int mtype, char *lead, const char **note, bool *error)
{
	static const struct { char lead; const char *note; bool error; } m[] = {
		[KFC_M_FOUND] = {'^', NULL, false},
		[KFC_M_EXCLUDED_FOUND] = {'!', "error: no match expected", true},
		[KFC_M_WRONG_LINE] = {'!', "error: match on wrong line", true},
		[KFC_M_DISCARDED] = {'!', "discard: overlaps earlier match", false},
		[KFC_M_NONE_OK] = {'X', NULL, false},
		[KFC_M_NONE] = {'X', "error: no match found", true},
		[KFC_M_INVALID] = {'X', "error: match failed for invalid pattern", true},
		[KFC_M_FUZZY] = {'?', "possible intended match", true},
	};
	*lead = m[mtype].lead;
	*note = m[mtype].note;
	*error = m[mtype].error;
}

static int by_line(const void *a, const void *b)
{
	const annot *x = a, *y = b;
	if (x->line != y->line)
		return x->line < y->line ? -1 : 1;
	return (x->diag > y->diag) - (x->diag < y->diag);
}

static annot *build(kfc_ctx *c, int *nout, size_t *width)
{
	annot *as = NULL;
	int na = 0, cap = 0;
	int *count = calloc((size_t)c->ndiags + 1, sizeof *count);
	int *index = calloc((size_t)c->ndiags + 1, sizeof *index);
	/* the per-pattern suffix 'N is only shown when a pattern has several */
	for (int i = 0; i < c->ndiags; i++)
		for (int k = 0; k <= i; k++)
			if (c->diags[k].pat == c->diags[i].pat) {
				count[k]++;
				break;
			}
	*width = 0;
	for (int i = 0; i < c->ndiags; i++) {
		kfc_diag *d = &c->diags[i];
		int owner = 0;
		while (c->diags[owner].pat != d->pat)
			owner++;
		annot a = {.diag = i, .first = true};
		size_t cl, cc;
		if (d->pat->imp)
			snprintf(a.label, sizeof a.label, "%s:imp%d", abbrev(d->pat), d->pat->imp);
		else {
			kfc_file_linecol(&c->check, (size_t)(d->pat->loc - c->check.text), &cl, &cc);
			snprintf(a.label, sizeof a.label, "%s:%zu", abbrev(d->pat), cl);
		}
		if (count[owner] > 1) {
			size_t l = strlen(a.label);
			snprintf(a.label + l, sizeof a.label - l, "'%d", index[owner]++);
		}
		if (strlen(a.label) > *width)
			*width = strlen(a.label);
		marker(d->mtype, &a.lead, &a.note, &a.error);
		size_t sl, sc, el, ec;
		kfc_file_linecol(&c->input, d->start, &sl, &sc);
		kfc_file_linecol(&c->input, d->end, &el, &ec);
		if (d->note) {
			a.note = d->note;
			if (sl == el && sc == ec)
				a.lead = ' ';
		}
		a.line = sl;
		a.scol = sc;
		if (sl == el) {
			a.ecol = ec > sc + 1 ? ec : sc + 1;
			KFC_PUSH(as, na, cap, a);
			continue;
		}
		a.ecol = SIZE_MAX;
		KFC_PUSH(as, na, cap, a);
		for (size_t l = sl + 1; l <= el; l++) {
			if (ec == 1 && l == el)
				break;
			annot b = a;
			b.first = false;
			b.line = l;
			b.lead = '~';
			b.note = NULL;
			b.scol = 1;
			b.ecol = l != el ? SIZE_MAX : ec;
			KFC_PUSH(as, na, cap, b);
		}
	}
	free(count);
	free(index);
	if (na)
		qsort(as, (size_t)na, sizeof *as, by_line);
	*nout = na;
	return as;
}

static size_t next_in_filter(int filter, size_t line, const annot *a, int i, int n)
{
	if (filter == KFC_FILTER_ALL)
		return line;
	for (; i < n; i++) {
		if (filter == KFC_FILTER_ANNOT_FULL)
			return a[i].line;
		if (filter == KFC_FILTER_ANNOT && a[i].first)
			return a[i].line;
		if (filter == KFC_FILTER_ERROR && a[i].error && a[i].first)
			return a[i].line;
	}
	return SIZE_MAX;
}

static void flush_elided(FILE *out, kfc_str *el, size_t width)
{
	if (!el->n)
		return;
	size_t nl = 0;
	for (size_t i = 0; i < el->n; i++)
		nl += el->p[i] == '\n';
	if (nl > 3)
		for (int i = 0; i < 3; i++)
			fprintf(out, "%*s.\n", (int)width - 1, "");
	else
		fwrite(el->p, 1, el->n, out);
	el->n = 0;
}

static void put_line(kfc_str *o, const annot *a, size_t width, size_t lw)
{
	kfc_str_printf(o, "%-*s  ", (int)width, a->label);
	size_t col;
	for (col = 1; col < a->scol; col++)
		kfc_str_putc(o, ' ');
	kfc_str_putc(o, a->lead);
	for (col++; col < a->ecol && col <= lw; col++)
		kfc_str_putc(o, '~');
	if (a->note) {
		for (; col <= lw; col++)
			kfc_str_putc(o, ' ');
		kfc_str_printf(o, " %s", a->note);
	}
	kfc_str_putc(o, '\n');
}

void kfc_dump_input(kfc_ctx *c)
{
	FILE *out = stderr;
	int na;
	size_t width;
	annot *as = build(c, &na, &width);
	const char *p = c->input.text, *end = p + c->input.len;
	size_t nlines = 0;
	for (const char *q = p; q < end; q++)
		nlines += *q == '\n';
	if (c->input.len && end[-1] != '\n')
		nlines++;
	size_t lnw = 1;
	for (size_t v = nlines; v >= 10; v /= 10)
		lnw++;
	width = (width > lnw ? width : lnw) + 3;
	int filter = c->o.filter;
	if (filter == KFC_FILTER_DEFAULT)
		filter = c->o.dump == KFC_DUMP_ALWAYS ? KFC_FILTER_ALL : KFC_FILTER_ERROR;
	size_t ctx = (size_t)c->o.context;
	fprintf(out, "\nInput file: %s\nCheck file: %s\n\n"
		"-dump-input=help explains the following input dump.\n\nInput was:\n<<<<<<\n",
		c->input.name, c->check.name);
	kfc_str el = {0}, buf = {0};
	size_t prev_in = 0, next_in = 0;
	int ai = 0;
	for (size_t line = 1; p != end || ai < na; line++) {
		if (next_in < line)
			next_in = next_in_filter(filter, line, as, ai, na);
		if (next_in == line)
			prev_in = line;
		bool elide = (!prev_in || prev_in + ctx < line) &&
			(next_in == SIZE_MAX || line + ctx < next_in);
		buf.n = 0;
		kfc_str_printf(&buf, "%*zu: ", (int)width, line);
		const char *ls = p;
		bool nl = false;
		while (p != end && !nl) {
			nl = *p == '\n';
			kfc_str_putc(&buf, nl ? ' ' : *p);
			p++;
		}
		kfc_str_putc(&buf, '\n');
		size_t lw = (size_t)(p - ls);
		for (; ai < na && as[ai].line == line; ai++)
			put_line(&buf, &as[ai], width, lw);
		if (elide)
			kfc_str_put(&el, buf.p, buf.n);
		else {
			flush_elided(out, &el, width);
			fwrite(buf.p, 1, buf.n, out);
		}
	}
	flush_elided(out, &el, width);
	fputs(">>>>>>\n", out);
	kfc_str_free(&el);
	kfc_str_free(&buf);
	free(as);
}
