/* diag.c: sources and diagnostics.  Locations are byte offsets; lines and
 * columns are computed only when a diagnostic is printed (ninja's way). */
#include <stdlib.h>
#include <string.h>
#include "kf_int.h"

#define KF_MAX_DIAGS 1000 /* past this, further ones are counted, not kept */

kf_srcid kf_source_add(kf_ctx *c, const char *name, const char *text, size_t len)
{
	kf_grow((void **)&c->src, &c->capsrc, c->nsrc + 1, sizeof *c->src);
	kf_source *s = &c->src[c->nsrc];
	memset(s, 0, sizeof *s);
	s->name = kf_strdup_arena(&c->arena, name, strlen(name));
	if (text) {
		s->text = kf_xrealloc(NULL, len + 1);
		memcpy(s->text, text, len);
		s->text[len] = 0;
		s->len = len;
	}
	return c->nsrc++;
}

const char *kf_source_name(const kf_ctx *c, kf_srcid s) { return s < c->nsrc ? c->src[s].name : "?"; }

const char *kf_source_text(const kf_ctx *c, kf_srcid s, size_t *len)
{
	if (s >= c->nsrc)
		return NULL;
	if (len)
		*len = c->src[s].len;
	return c->src[s].text;
}

static void index_lines(kf_source *s)
{
	uint32_t n = 1, cap = 0;
	for (size_t i = 0; i < s->len; i++)
		n += s->text[i] == '\n';
	s->line = kf_xrealloc(NULL, n * sizeof *s->line);
	s->line[0] = 0;
	n = 1;
	for (size_t i = 0; i < s->len; i++)
		if (s->text[i] == '\n')
			s->line[n++] = (uint32_t)(i + 1);
	s->nline = n;
	(void)cap;
}

void kf_source_linecol(const kf_ctx *c, kf_srcid id, uint32_t off, int *line, int *col)
{
	*line = *col = 0;
	if (id >= c->nsrc || !c->src[id].text)
		return;
	kf_source *s = &((kf_ctx *)c)->src[id];
	if (!s->line)
		index_lines(s);
	if (off > s->len)
		off = (uint32_t)s->len;
	uint32_t lo = 0, hi = s->nline; /* last line start <= off */
	while (hi - lo > 1) {
		uint32_t mid = (lo + hi) / 2;
		if (s->line[mid] <= off)
			lo = mid;
		else
			hi = mid;
	}
	*line = (int)lo + 1;
	*col = (int)(off - s->line[lo]) + 1;
}

void kf_diag_v(kf_ctx *c, kf_severity sev, kf_loc at, const char *fmt, va_list ap)
{
	if (sev == KF_DIAG_ERROR)
		c->nerrors++;
	if (c->ndiag >= KF_MAX_DIAGS)
		return;
	kf_buf b = {0};
	va_list aq;
	va_copy(aq, ap);
	char small[512];
	int n = vsnprintf(small, sizeof small, fmt, aq);
	va_end(aq);
	if (n >= (int)sizeof small) {
		b.p = kf_xrealloc(NULL, (size_t)n + 1);
		vsnprintf(b.p, (size_t)n + 1, fmt, ap);
	} else {
		b.p = kf_xrealloc(NULL, sizeof small);
		memcpy(b.p, small, sizeof small);
	}
	kf_grow((void **)&c->diag, &c->capdiag, c->ndiag + 1, sizeof *c->diag);
	c->diag[c->ndiag++] = (kf_diag){(uint8_t)sev, at, b.p};
}

#define KF_DIAG_FN(fn, sev) \
	void fn(kf_ctx *c, kf_loc at, const char *fmt, ...) \
	{ \
		va_list ap; \
		va_start(ap, fmt); \
		kf_diag_v(c, sev, at, fmt, ap); \
		va_end(ap); \
	}
KF_DIAG_FN(kf_error, KF_DIAG_ERROR)
KF_DIAG_FN(kf_warning, KF_DIAG_WARNING)
KF_DIAG_FN(kf_note, KF_DIAG_NOTE)

static const char *sev_name[] = {"error", "warning", "note"};

/* The source line holding the diagnostic, tabs kept so the caret lines up,
 * control bytes shown as spaces; long lines are cut around the column. */
static void render_line(kf_buf *out, const kf_source *s, uint32_t off, int col)
{
	uint32_t start = off - (uint32_t)(col - 1), end = off;
	while (end < s->len && s->text[end] != '\n')
		end++;
	uint32_t from = start, caret = (uint32_t)col - 1;
	if (caret > 100) { /* a 10 MB line: show the 100 bytes before the column */
		from = off - 100;
		caret = 100;
	}
	if (end - from > 200)
		end = from + 200;
	for (uint32_t i = from; i < end; i++) {
		unsigned char ch = (unsigned char)s->text[i];
		kf_buf_putc(out, ch == '\t' || (ch >= 32 && ch < 127) ? (char)ch : ' ');
	}
	kf_buf_putc(out, '\n');
	for (uint32_t i = from; i < from + caret; i++)
		kf_buf_putc(out, s->text[i] == '\t' ? '\t' : ' ');
	kf_buf_puts(out, "^\n");
}

void kf_diag_render(kf_ctx *c, kf_buf *out)
{
	for (uint32_t i = 0; i < c->ndiag; i++) {
		kf_diag *d = &c->diag[i];
		if (d->at.src == KF_NONE || d->at.src >= c->nsrc) {
			kf_buf_printf(out, "kfuse: %s: %s\n", sev_name[d->sev], d->msg);
			continue;
		}
		kf_source *s = &c->src[d->at.src];
		if (!s->text) {
			kf_buf_printf(out, "%s: %s: %s\n", s->name, sev_name[d->sev], d->msg);
			continue;
		}
		int line, col;
		kf_source_linecol(c, d->at.src, d->at.off, &line, &col);
		kf_buf_printf(out, "%s:%d:%d: %s: %s\n", s->name, line, col, sev_name[d->sev], d->msg);
		render_line(out, s, d->at.off > s->len ? (uint32_t)s->len : d->at.off, col);
	}
	if (c->ndiag >= KF_MAX_DIAGS)
		kf_buf_printf(out, "kfuse: note: further diagnostics suppressed\n");
}

static void drop_pending(kf_ctx *c)
{
	for (uint32_t i = 0; i < c->ndiag; i++)
		free(c->diag[i].msg);
	c->ndiag = 0;
}

void kf_diag_flush(kf_ctx *c, FILE *out)
{
	kf_buf b = {0};
	kf_diag_render(c, &b);
	if (b.n)
		fwrite(b.p, 1, b.n, out);
	kf_buf_free(&b);
	drop_pending(c);
}

int kf_nerrors(const kf_ctx *c) { return c->nerrors; }

void kf_diag_clear(kf_ctx *c)
{
	drop_pending(c);
	c->nerrors = 0;
}

kf_diag_mark kf_diag_mark_now(const kf_ctx *c) { return (kf_diag_mark){c->ndiag, c->nerrors}; }

void kf_diag_rewind(kf_ctx *c, kf_diag_mark m, kf_buf *text)
{
	for (uint32_t i = m.ndiag; i < c->ndiag; i++) {
		if (text)
			kf_buf_printf(text, "%s\n", c->diag[i].msg);
		free(c->diag[i].msg);
	}
	if (m.ndiag < c->ndiag)
		c->ndiag = m.ndiag;
	c->nerrors = m.nerrors;
}

void kf_diag_free_all(kf_ctx *c)
{
	drop_pending(c);
	free(c->diag);
	for (uint32_t i = 0; i < c->nsrc; i++) {
		free(c->src[i].text);
		free(c->src[i].line);
	}
	free(c->src);
}
