/* parse.c: the .kf parser: tokens, errors, graphs, modules, files.
 *
 * Recursive descent over re2c tokens with one token of lookahead (two at a
 * region's '{'); statements and blocks are in parse_stmt.c, names in
 * parse_names.c, types and literals in parse_lit.c.  Nodes are built as
 * statements are read; after the first error no more are built (the module
 * is thrown away anyway) but parsing and name resolution go on, so one run
 * reports several errors.
 *
 * Names are bound by their interned sid, stamped with a scope id: a region
 * hides every outer name by taking a new id (regions are isolated), and the
 * bindings it shadows come back when it closes.
 *
 * The parser checks syntax, names, result counts and operand counts (since
 * kf_node_new trusts them); types are left to kf_verify, which tools run. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include "parse_int.h"
#include "plugin.h"

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

kf_token kf_parse_peek(const kf_parser *p)
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

int kf_parse_line(kf_parser *p, uint32_t off)
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
	int ol = kf_parse_line(p, open_off);
	if (ol != kf_parse_line(p, p->tok.off))
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

/* Sizes g's arrays for its body, which starts at offset open and ends at
 * the next '}' in column 0 (where the printer puts it; else the end of the
 * text): a statement's line takes 20 bytes or more, an operand about 6.
 * Room is address space until it is used, and with it the arrays are not
 * copied (and held twice) as they grow. */
static void reserve_graph(kf_parser *p, kf_graph *g, uint32_t open)
{
	if (!p->building)
		return;
	const char *q = p->text + open + 1, *lim = p->text + p->len;
	while ((q = memchr(q, '}', (size_t)(lim - q))) && q[-1] != '\n')
		q++;
	size_t span = (size_t)((q ? q : lim) - p->text) - open;
	uint32_t nodes = (uint32_t)(span / 20 + 16);
	kf_graph_reserve(g, nodes, nodes, (uint32_t)(span / 6 + 16));
	/* names: one per statement of 64 bytes or less (most are 30 to 50): an
	 * underestimate, as the table is touched all over whatever its size */
	kf_str_reserve(p->c, (uint32_t)(span / 64));
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
	if (!kf_parse_header(p, g)) {
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
	reserve_graph(p, g, open);
	kf_parse_block(p, 0, open, false);
	return g;
}

/* `plugin "FILE"` at the word `plugin`: a Lua op script is loaded (they
 * run sandboxed, docs/reliability.md), a C plugin must have been loaded
 * by the command line (native code is never loaded because a data file
 * names it). */
static void parse_plugin(kf_parser *p)
{
	kf_parse_next(p);
	uint32_t at = p->tok.off;
	if (p->tok.kind != KF_T_STRING) {
		kf_parse_expected(p, "a plugin file name in quotes");
		return;
	}
	int nerr = p->nerr;
	kf_sid s = kf_parse_string(p); /* and the next token */
	if (p->nerr > nerr)
		return;
	p->plugin = realloc(p->plugin, (p->nplugin + 1) * sizeof *p->plugin);
	if (!p->plugin)
		abort();
	p->plugin[p->nplugin++] = s;
	const char *name = kf_str(p->c, s);
	kf_buf path = {0};
	kf_path_join(&path, p->dir, name);
	size_t n = path.n;
	if (n >= 4 && !strcmp(path.p + n - 4, ".lua")) {
		int before = kf_nerrors(p->c);
		if (kf_plugin_load(p->c, path.p) < 0)
			kf_parse_err(p, at, "cannot load plugin '%s'%s", path.p,
				     kf_nerrors(p->c) > before ? " (above)" : "");
	} else if (!kf_plugin_loaded(p->c, path.p)) {
		kf_parse_err(p, at, "this file's ops need the C plugin '%s': load it with --plugin %s "
			     "(a file never loads native code itself)", path.p, path.p);
	}
	kf_buf_free(&path);
}

/* The module: plugin lines, then graphs until the end. */
static kf_module *parse_module(kf_parser *p)
{
	kf_graph **gs = NULL;
	uint32_t ng = 0;
	uint32_t *byname = NULL, capbyname = 0; /* graph name sid -> index + 1 */
	kf_parse_next(p);
	while (kf_parse_is_word(p, "plugin") && !p->stop)
		parse_plugin(p);
	while (p->tok.kind != KF_T_EOF && !p->stop) {
		if (!kf_parse_is_word(p, "graph")) {
			kf_parse_expected(p, "'graph'");
			do
				kf_parse_next(p);
			while (p->tok.kind != KF_T_EOF && !(p->tok.bol && kf_parse_is_word(p, "graph")));
			continue;
		}
		kf_token nt = kf_parse_peek(p);
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
		m->plugin = p->plugin;
		m->nplugin = p->nplugin;
		p->plugin = NULL;
		for (uint32_t i = 0; i < ng; i++)
			kf_module_add(m, gs[i]);
	} else {
		for (uint32_t i = 0; i < ng; i++)
			kf_graph_free(gs[i]);
	}
	free(gs);
	return m;
}

static kf_module *parse_source(kf_ctx *c, kf_srcid src, const char *dir)
{
	size_t len;
	kf_parser p = {.c = c, .src = src, .building = true, .nscope = KF_SCOPE_DEAD, .dir = dir};
	p.text = kf_source_text(c, src, &len);
	p.len = len;
	kf_lex_init(&p.lx, p.text, len);
	kf_module *m = parse_module(&p);
	free(p.bind);
	free(p.undo);
	free(p.lit);
	free(p.plugin);
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
	return parse_source(c, kf_source_add(c, filename, text, len), NULL);
}

/* The read buffer is mapped, not malloc'd: freeing a malloc'd block of the
 * file's size would raise glibc's mmap threshold to it, and the arrays that
 * grow during the parse would then live in the heap, where each doubling
 * copies and leaves a hole (3 MB of the peak of a 200k-node graph). */
static char *map_bytes(size_t n)
{
	void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		abort(); /* out of memory, as kf_xrealloc */
	return p;
}

/* Reads f to the end into a mapped buffer of *cap bytes; sized from fstat
 * when f is a regular file, so that a large file is read once. */
static char *read_all(FILE *f, size_t *len, size_t *cap)
{
	struct stat st;
	size_t n = 0;
	*cap = 1 << 16;
	if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
		*cap = (size_t)st.st_size + 1; /* +1: the read that sees the end */
	char *buf = map_bytes(*cap);
	for (;;) {
		n += fread(buf + n, 1, *cap - n, f);
		if (n < *cap)
			break;
		char *big = map_bytes(*cap * 2);
		memcpy(big, buf, n);
		munmap(buf, *cap);
		buf = big;
		*cap *= 2;
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
	size_t len, cap;
	char *text = read_all(f, &len, &cap);
	int failed = ferror(f);
	if (!in)
		fclose(f);
	if (failed) {
		munmap(text, cap);
		kf_error(c, (kf_loc){kf_source_add(c, name, NULL, 0), 0}, "cannot read (is it a directory?)");
		return NULL;
	}
	if (too_large(c, name, len)) {
		munmap(text, cap);
		return NULL;
	}
	/* the context keeps its own copy; drop ours before the graph grows */
	kf_srcid src = kf_source_add(c, name, text, len);
	munmap(text, cap);
	kf_buf d = {0};
	kf_path_dir(&d, in ? "" : path);
	kf_sid dir = kf_intern_cstr(c, d.p);
	kf_buf_free(&d);
	kf_module *m = parse_source(c, src, kf_str(c, dir));
	if (!m)
		return NULL;
	for (uint32_t i = 0; i < m->ngraph; i++)
		m->graph[i]->dir = dir;
	return m;
}
