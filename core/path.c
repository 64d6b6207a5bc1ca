/* path.c: file paths as a module names them (file("...") constants,
 * plugin lines), and rewriting them when the module's text moves.
 *
 * Paths are handled lexically: "a/./b/../c" is "a/c" whether or not b is a
 * symbolic link.  A module's text names files relative to the directory
 * it lives in (docs/ir.md), so text written to another directory must name
 * them differently to name the same files: kf_module_locate does that.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kf_int.h"

void kf_path_join(kf_buf *out, const char *dir, const char *rel)
{
	if (rel[0] == '/' || !dir || !dir[0] || !strcmp(dir, ".")) {
		kf_buf_puts(out, rel);
		return;
	}
	kf_buf_puts(out, dir);
	if (dir[strlen(dir) - 1] != '/')
		kf_buf_putc(out, '/');
	kf_buf_puts(out, rel);
}

void kf_path_dir(kf_buf *out, const char *path)
{
	const char *slash = strrchr(path, '/');
	if (!slash)
		kf_buf_puts(out, ".");
	else if (slash == path)
		kf_buf_puts(out, "/");
	else
		kf_buf_put(out, path, (size_t)(slash - path));
}

/* The components of an absolute path, "." and ".." folded: at most
 * PATH_MAX/2 of them, each a (pointer, length) into s. */
typedef struct comps {
	const char *p[PATH_MAX / 2];
	size_t n[PATH_MAX / 2];
	int k;
} comps;

static void split(comps *c, const char *s)
{
	c->k = 0;
	while (*s) {
		while (*s == '/')
			s++;
		size_t n = strcspn(s, "/");
		if (!n)
			break;
		if (n == 1 && s[0] == '.') {
		} else if (n == 2 && s[0] == '.' && s[1] == '.') {
			if (c->k > 0)
				c->k--;
		} else if (c->k < PATH_MAX / 2) {
			c->p[c->k] = s;
			c->n[c->k++] = n;
		}
		s += n;
	}
}

int kf_path_rel(kf_buf *out, const char *dir, const char *path)
{
	char cwd[PATH_MAX];
	if (!getcwd(cwd, sizeof cwd))
		return -1;
	kf_buf a = {0}, b = {0};
	kf_path_join(&a, cwd, dir); /* each absolute: joined unless it is already */
	kf_path_join(&b, cwd, path);
	comps *ca = malloc(sizeof *ca), *cb = malloc(sizeof *cb);
	if (!ca || !cb)
		abort();
	split(ca, a.p);
	split(cb, b.p);
	int same = 0;
	while (same < ca->k && same < cb->k && ca->n[same] == cb->n[same] &&
	       !memcmp(ca->p[same], cb->p[same], ca->n[same]))
		same++;
	size_t start = out->n;
	for (int i = same; i < ca->k; i++)
		kf_buf_puts(out, "../");
	for (int i = same; i < cb->k; i++) {
		kf_buf_put(out, cb->p[i], cb->n[i]);
		if (i + 1 < cb->k)
			kf_buf_putc(out, '/');
	}
	if (out->n == start)
		kf_buf_putc(out, '.');
	else if (out->p[out->n - 1] == '/')
		out->p[--out->n] = 0;
	free(ca);
	free(cb);
	kf_buf_free(&a);
	kf_buf_free(&b);
	return 0;
}

/* ---- a module's files ---------------------------------------------------------- */

/* Adds s to the list unless it is there. */
static void add_once(kf_sid **list, uint32_t *n, kf_sid s)
{
	for (uint32_t k = 0; k < *n; k++)
		if ((*list)[k] == s)
			return;
	*list = kf_xrealloc(*list, (*n + 1) * sizeof **list);
	(*list)[(*n)++] = s;
}

typedef struct locator {
	kf_ctx *c;
	const char *from, *dir; /* the graph's directory, the new one */
	kf_buf t;
	kf_sid *plugin;
	uint32_t nplugin;
} locator;

/* The file constants and plugin ops of block b and the regions inside it. */
static int locate_block(locator *L, kf_graph *g, kf_bid b)
{
	kf_ctx *c = L->c;
	for (kf_nid n = g->blk[b].first; n != KF_NONE; n = kf_N(g, n)->next) {
		kf_node *nd = kf_N(g, n);
		if (nd->body != KF_NONE && locate_block(L, g, nd->body) < 0)
			return -1;
		/* a plugin loaded by an absolute path keeps it (the standard
		 * rules, where installed); a relative one is named from dir */
		const char *origin = kf_op_origin(c, nd->op);
		if (origin) {
			L->t.n = 0;
			if (origin[0] == '/')
				kf_buf_puts(&L->t, origin);
			else if (kf_path_rel(&L->t, L->dir, origin) < 0)
				return -1;
			add_once(&L->plugin, &L->nplugin, kf_intern_cstr(c, L->t.p));
		}
		if (nd->op != KF_OP_CONST || !nd->cst || nd->cst->kind != KF_CONST_FILE)
			continue;
		const char *path = kf_str(c, nd->cst->path);
		if (path[0] == '/')
			continue;
		kf_buf full = {0};
		kf_path_join(&full, L->from, path);
		L->t.n = 0;
		int rc = kf_path_rel(&L->t, L->dir, full.p);
		kf_buf_free(&full);
		if (rc < 0)
			return -1;
		/* a copy: a kf_const may be shared by nodes, and each must be
		 * rewritten from the path it had, once */
		kf_const *k = kf_alloc(&g->arena, sizeof *k);
		*k = *nd->cst;
		k->path = kf_intern_cstr(c, L->t.p);
		nd->cst = k;
	}
	return 0;
}

int kf_module_locate(kf_module *m, const char *dir)
{
	kf_ctx *c = m->ctx;
	locator L = {.c = c, .dir = dir};
	kf_sid d = kf_intern_cstr(c, dir);
	int rc = 0;
	for (uint32_t i = 0; i < m->ngraph && rc == 0; i++) {
		kf_graph *g = m->graph[i];
		L.from = g->dir != KF_NONE && g->dir ? kf_str(c, g->dir) : ".";
		rc = locate_block(&L, g, 0);
		g->dir = d;
	}
	kf_buf_free(&L.t);
	if (rc < 0) {
		free(L.plugin);
		kf_error(c, KF_NOLOC, "cannot read the current directory to rewrite the module's file paths");
		return -1;
	}
	free(m->plugin);
	m->plugin = L.plugin;
	m->nplugin = L.nplugin;
	return 0;
}
