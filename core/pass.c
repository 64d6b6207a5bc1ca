/* pass.c: the pass manager: pass options, the pass set, pipeline text,
 * running a pipeline with verification, dumps and timing.
 *
 * requires nothing of the graph; keeps it valid (checks it with kf_verify
 * after each pass when asked). */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kf_int.h"
#include "pass.h"

typedef struct kf_pipeitem {
	const kf_pass *pass;
	kf_passopts o;
	kf_passopt *kv; /* owned: the strings too */
} kf_pipeitem;

struct kf_pipeline {
	kf_ctx *ctx;
	kf_pipeitem *item;
	uint32_t n, cap;
};

/* ---- options ---------------------------------------------------------------- */

const char *kf_passopt_str(const kf_passopts *o, const char *key, const char *dflt)
{
	/* The last one written wins, as on a command line. */
	const char *v = dflt;
	for (uint32_t i = 0; o && i < o->n; i++)
		if (!strcmp(o->kv[i].key, key))
			v = o->kv[i].val;
	return v;
}

static void opt_bad(kf_ctx *c, const kf_passopts *o, const char *key, const char *val, const char *want)
{
	kf_error(c, o->loc, "pass '%s': option '%s' expects %s, not '%s'",
		 o->pass ? o->pass->name : "?", key, want, val);
}

int64_t kf_passopt_int(kf_ctx *c, const kf_passopts *o, const char *key, int64_t dflt)
{
	const char *s = kf_passopt_str(o, key, NULL);
	if (!s)
		return dflt;
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 0);
	if (end == s || *end || errno) {
		opt_bad(c, o, key, s, "an integer");
		return dflt;
	}
	return v;
}

double kf_passopt_float(kf_ctx *c, const kf_passopts *o, const char *key, double dflt)
{
	const char *s = kf_passopt_str(o, key, NULL);
	if (!s)
		return dflt;
	char *end;
	double v = strtod(s, &end);
	if (end == s || *end) {
		opt_bad(c, o, key, s, "a number");
		return dflt;
	}
	return v;
}

bool kf_passopt_bool(kf_ctx *c, const kf_passopts *o, const char *key, bool dflt)
{
	const char *s = kf_passopt_str(o, key, NULL);
	if (!s)
		return dflt;
	if (!strcmp(s, "true") || !strcmp(s, "1") || !strcmp(s, "on"))
		return true;
	if (!strcmp(s, "false") || !strcmp(s, "0") || !strcmp(s, "off"))
		return false;
	opt_bad(c, o, key, s, "true or false");
	return dflt;
}

int64_t kf_passopt_level(kf_ctx *c, const kf_passopts *o, const char *key, int64_t dflt)
{
	const char *s = kf_passopt_str(o, key, NULL);
	if (s && (!strcmp(s, "true") || !strcmp(s, "on")))
		return 1;
	if (s && (!strcmp(s, "false") || !strcmp(s, "off")))
		return 0;
	return kf_passopt_int(c, o, key, dflt);
}

/* ---- the pass set ------------------------------------------------------------ */

void kf_passreg_add(kf_passreg *r, const kf_pass *p)
{
	for (uint32_t i = 0; i < r->n; i++)
		if (!strcmp(r->p[i]->name, p->name)) {
			r->p[i] = p;
			return;
		}
	kf_grow((void **)&r->p, &r->cap, r->n + 1, sizeof *r->p);
	r->p[r->n++] = p;
}

const kf_pass *kf_passreg_find(const kf_passreg *r, const char *name, size_t n)
{
	for (uint32_t i = 0; i < r->n; i++)
		if (strlen(r->p[i]->name) == n && !memcmp(r->p[i]->name, name, n))
			return r->p[i];
	return NULL;
}

void kf_passreg_free(kf_passreg *r)
{
	free(r->p);
	memset(r, 0, sizeof *r);
}

/* ---- pipeline text ------------------------------------------------------------ */

kf_pipeline *kf_pipeline_new(kf_ctx *c)
{
	kf_pipeline *p = kf_xrealloc(NULL, sizeof *p);
	memset(p, 0, sizeof *p);
	p->ctx = c;
	return p;
}

static char *xstrndup(const char *s, size_t n)
{
	char *d = kf_xrealloc(NULL, n + 1);
	memcpy(d, s, n);
	d[n] = 0;
	return d;
}

void kf_pipeline_append(kf_pipeline *p, const kf_pass *pass, const kf_passopt *kv, uint32_t n)
{
	kf_grow((void **)&p->item, &p->cap, p->n + 1, sizeof *p->item);
	kf_pipeitem *it = &p->item[p->n++];
	memset(it, 0, sizeof *it);
	it->pass = pass;
	it->kv = n ? kf_xrealloc(NULL, n * sizeof *it->kv) : NULL;
	for (uint32_t i = 0; i < n; i++) {
		it->kv[i].key = xstrndup(kv[i].key, strlen(kv[i].key));
		it->kv[i].val = xstrndup(kv[i].val, strlen(kv[i].val));
	}
	it->o.pass = pass;
	it->o.n = n;
	it->o.kv = it->kv;
	it->o.loc = KF_NOLOC;
}

void kf_pipeline_free(kf_pipeline *p)
{
	if (!p)
		return;
	for (uint32_t i = 0; i < p->n; i++) {
		for (uint32_t k = 0; k < p->item[i].o.n; k++) {
			free((char *)p->item[i].kv[k].key);
			free((char *)p->item[i].kv[k].val);
		}
		free(p->item[i].kv);
	}
	free(p->item);
	free(p);
}

uint32_t kf_pipeline_len(const kf_pipeline *p) { return p->n; }
const kf_pass *kf_pipeline_pass(const kf_pipeline *p, uint32_t i) { return p->item[i].pass; }

typedef struct pl_lex {
	kf_ctx *c;
	kf_srcid src;
	const char *s;
	size_t i, n;
} pl_lex;

static void pl_ws(pl_lex *L)
{
	while (L->i < L->n && isspace((unsigned char)L->s[L->i]))
		L->i++;
}

static bool is_name(int ch) { return isalnum(ch) || ch == '_' || ch == '-' || ch == '.'; }

static size_t pl_name(pl_lex *L)
{
	size_t b = L->i;
	while (L->i < L->n && is_name((unsigned char)L->s[L->i]))
		L->i++;
	return L->i - b;
}

static kf_loc pl_loc(pl_lex *L, size_t off) { return (kf_loc){L->src, (uint32_t)off}; }

static void list_names(kf_buf *b, const char *const *names, const kf_passreg *r)
{
	for (uint32_t i = 0; names ? names[i] != NULL : i < r->n; i++) {
		if (i)
			kf_buf_puts(b, " ");
		kf_buf_puts(b, names ? names[i] : r->p[i]->name);
	}
	if (b->n == 0)
		kf_buf_puts(b, "none");
	kf_buf_putc(b, 0);
}

static bool pass_has_opt(const kf_pass *p, const char *k, size_t n)
{
	for (uint32_t i = 0; p->opts && p->opts[i]; i++)
		if ((strlen(p->opts[i]) == n && !memcmp(p->opts[i], k, n)) || !strcmp(p->opts[i], "*"))
			return true;
	return false;
}

/* A value: "quoted" (with \" and \\), or raw up to ',' or '}' and trimmed. */
static char *pl_value(pl_lex *L)
{
	kf_buf b = {0};
	if (L->i < L->n && L->s[L->i] == '"') {
		size_t open = L->i++;
		while (L->i < L->n && L->s[L->i] != '"') {
			if (L->s[L->i] == '\\' && L->i + 1 < L->n)
				L->i++;
			kf_buf_putc(&b, L->s[L->i++]);
		}
		if (L->i >= L->n) {
			kf_error(L->c, pl_loc(L, open), "unterminated string in pass options");
			kf_buf_free(&b);
			return NULL;
		}
		L->i++;
	} else {
		size_t st = L->i, en;
		while (L->i < L->n && L->s[L->i] != ',' && L->s[L->i] != '}')
			L->i++;
		en = L->i;
		while (en > st && isspace((unsigned char)L->s[en - 1]))
			en--;
		kf_buf_put(&b, L->s + st, en - st);
	}
	kf_buf_putc(&b, 0);
	return b.p;
}

/* `{k=v, k2, ...}` after a pass name; appends to kv. */
static int pl_opts(pl_lex *L, const kf_pass *pass, kf_passopt **kv, uint32_t *nkv, uint32_t *cap)
{
	size_t open = L->i++;
	pl_ws(L);
	if (L->i < L->n && L->s[L->i] == '}') {
		L->i++;
		return 0;
	}
	for (;;) {
		pl_ws(L);
		size_t ks = L->i, kn = pl_name(L);
		if (!kn) {
			kf_error(L->c, pl_loc(L, L->i), "expected an option name in '%s{...}'", pass->name);
			return -1;
		}
		if (!pass_has_opt(pass, L->s + ks, kn)) {
			kf_buf b = {0};
			list_names(&b, pass->opts ? pass->opts : (const char *const[]){NULL}, NULL);
			kf_error(L->c, pl_loc(L, ks), "unknown option '%.*s' for pass '%s' (valid: %s)",
				 (int)kn, L->s + ks, pass->name, b.p);
			kf_buf_free(&b);
			return -1;
		}
		pl_ws(L);
		char *val;
		if (L->i < L->n && L->s[L->i] == '=') {
			L->i++;
			pl_ws(L);
			if (!(val = pl_value(L)))
				return -1;
		} else {
			val = xstrndup("true", 4);
		}
		kf_grow((void **)kv, cap, *nkv + 1, sizeof **kv);
		(*kv)[*nkv].key = xstrndup(L->s + ks, kn);
		(*kv)[(*nkv)++].val = val;
		pl_ws(L);
		if (L->i < L->n && L->s[L->i] == ',') {
			L->i++;
			continue;
		}
		if (L->i < L->n && L->s[L->i] == '}') {
			L->i++;
			return 0;
		}
		kf_error(L->c, pl_loc(L, L->i < L->n ? L->i : open),
			 L->i < L->n ? "expected ',' or '}' in pass options" : "expected '}' to close '{'");
		return -1;
	}
}

static int pl_pass(pl_lex *L, kf_pipeline *p, const kf_passreg *r)
{
	size_t ns = L->i, nn = pl_name(L);
	if (!nn) {
		kf_error(L->c, pl_loc(L, L->i), "expected a pass name");
		return -1;
	}
	const kf_pass *pass = kf_passreg_find(r, L->s + ns, nn);
	if (!pass) {
		kf_buf b = {0};
		list_names(&b, NULL, r);
		kf_error(L->c, pl_loc(L, ns), "unknown pass '%.*s' (valid: %s)", (int)nn, L->s + ns, b.p);
		kf_buf_free(&b);
		return -1;
	}
	kf_passopt *kv = NULL;
	uint32_t nkv = 0, cap = 0;
	pl_ws(L);
	if (L->i < L->n && L->s[L->i] == '{' && pl_opts(L, pass, &kv, &nkv, &cap) < 0) {
		for (uint32_t k = 0; k < nkv; k++) {
			free((char *)kv[k].key);
			free((char *)kv[k].val);
		}
		free(kv);
		return -1;
	}
	kf_pipeline_append(p, pass, NULL, 0);
	kf_pipeitem *it = &p->item[p->n - 1];
	it->kv = kv; /* take ownership rather than copy */
	it->o.kv = kv;
	it->o.n = nkv;
	it->o.loc = pl_loc(L, ns);
	return 0;
}

kf_pipeline *kf_pipeline_parse(kf_ctx *c, const kf_passreg *r, const char *text)
{
	pl_lex L = {c, 0, text, 0, strlen(text)};
	L.src = kf_source_add(c, "<pipeline>", text, L.n);
	kf_pipeline *p = kf_pipeline_new(c);
	pl_ws(&L);
	if (L.i == L.n)
		return p;
	for (;;) {
		pl_ws(&L);
		if (pl_pass(&L, p, r) < 0)
			goto fail;
		pl_ws(&L);
		if (L.i == L.n)
			return p;
		if (L.s[L.i] != ',') {
			kf_error(c, pl_loc(&L, L.i), "expected ',' between passes near '%c'", L.s[L.i]);
			goto fail;
		}
		L.i++;
	}
fail:
	kf_pipeline_free(p);
	return NULL;
}

/* ---- timing ------------------------------------------------------------------- */

double kf_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void kf_timing_add(kf_timing *t, const char *name, double seconds)
{
	kf_grow((void **)&t->row, &t->cap, t->n + 1, sizeof *t->row);
	t->row[t->n++] = (kf_timing_row){name, seconds};
}

void kf_timing_render(const kf_timing *t, kf_buf *out)
{
	double total = 0;
	for (uint32_t i = 0; i < t->n; i++)
		total += t->row[i].seconds;
	kf_buf_printf(out, "===-------------------------------------------===\n");
	kf_buf_printf(out, "  kfuse-opt timing report\n");
	kf_buf_printf(out, "===-------------------------------------------===\n");
	kf_buf_printf(out, "  %10s  %6s  %s\n", "wall (ms)", "%", "name");
	for (uint32_t i = 0; i < t->n; i++)
		kf_buf_printf(out, "  %10.3f  %5.1f%%  %s\n", t->row[i].seconds * 1e3,
			      total > 0 ? 100.0 * t->row[i].seconds / total : 0.0, t->row[i].name);
	kf_buf_printf(out, "  %10.3f  %5.1f%%  total\n", total * 1e3, 100.0);
}

void kf_timing_free(kf_timing *t)
{
	free(t->row);
	memset(t, 0, sizeof *t);
}

/* ---- running ------------------------------------------------------------------- */

/* Is `name` one of the comma-separated names in list? */
static bool name_in(const char *list, const char *name)
{
	size_t n = strlen(name);
	for (const char *s = list; s && *s;) {
		const char *e = strchr(s, ',');
		size_t len = e ? (size_t)(e - s) : strlen(s);
		if (len == n && !memcmp(s, name, n))
			return true;
		s = e ? e + 1 : NULL;
	}
	return false;
}

/* Runs one pass over every graph; *vt gets the time spent verifying. */
static int run_item(kf_pipeitem *it, kf_module *m, const kf_runopts *ro, bool *changed, double *vt)
{
	kf_ctx *c = m->ctx;
	int nerr = kf_nerrors(c);
	if (it->pass->begin && it->pass->begin(c, &it->o) < 0)
		return -1;
	if (kf_nerrors(c) > nerr)
		goto fail; /* a malformed option reported by begin */
	for (uint32_t gi = 0; gi < m->ngraph; gi++) {
		bool ch = false;
		kf_graph *g = m->graph[gi];
		if (it->pass->run(g, &it->o, &ch) < 0 || kf_nerrors(c) > nerr)
			goto fail;
		*changed |= ch;
		/* A graph the pass did not change is as valid as before (MLIR skips
		 * verification after a pass that preserved everything, too). */
		double t0 = kf_now();
		int bad = ro->verify_each && ch ? kf_verify(g) : 0;
		*vt += kf_now() - t0;
		if (bad > 0) {
			kf_note(c, g->loc, "the graph @%s is broken after pass '%s'",
				kf_str(c, g->name), it->pass->name);
			goto fail;
		}
	}
	if (it->pass->end)
		it->pass->end(c, &it->o);
	return 0;
fail:
	if (it->pass->end)
		it->pass->end(c, &it->o);
	return -1;
}

int kf_pipeline_run(kf_pipeline *p, kf_module *m, const kf_runopts *ro)
{
	static const kf_runopts none = {0};
	if (!ro)
		ro = &none;
	for (uint32_t i = 0; i < p->n; i++) {
		kf_pipeitem *it = &p->item[i];
		it->o.flags = ro->flags;
		it->o.log = ro->log;
		it->o.state = NULL;
		if (ro->dump && name_in(ro->before, it->pass->name))
			ro->dump(ro->ud, m, it->pass, KF_DUMP_BEFORE);
		bool changed = false;
		double t0 = kf_now(), vt = 0;
		int rc = run_item(it, m, ro, &changed, &vt);
		if (ro->timing) {
			/* Verification is the manager's cost, not the pass's: own row. */
			kf_timing_add(ro->timing, it->pass->name, kf_now() - t0 - vt);
			if (ro->verify_each)
				kf_timing_add(ro->timing, "(verify-each)", vt);
		}
		if (rc < 0)
			return -1;
		if (ro->dump && (ro->after_all || (ro->after_change && changed) ||
				 name_in(ro->after, it->pass->name)))
			ro->dump(ro->ud, m, it->pass, KF_DUMP_AFTER);
	}
	return 0;
}
