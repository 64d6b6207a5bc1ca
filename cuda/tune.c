/* tune.c: the autotuner's cache file, the shipped tables, and applying
 * them to a graph (see tune.h); tune_time.c times the candidates. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "tune.h"
#include "tune_int.h"
#include "kcache.h"
#include "emit_matmul.h"

/* ---- the table and the file ---------------------------------------------------------- */

int kf_tune_path(const char *cache_dir, kf_buf *out)
{
	const char *f = getenv("KFUSE_TUNE_FILE");
	if (f && *f) {
		kf_buf_puts(out, f);
	} else if (cache_dir && *cache_dir) {
		kf_buf_printf(out, "%s/tune.txt", cache_dir);
	} else {
		if (kf_kcache_default_dir(out) != 0)
			return -1;
		kf_buf_puts(out, "/tune.txt");
	}
	kf_buf_putc(out, '\0');
	out->n--;
	return 0;
}

const kf_tune_entry *kf_tune_find(const kf_tune_table *t, const char *key)
{
	for (uint32_t i = t->n; i-- > 0;)
		if (!strcmp(t->e[i].key, key))
			return &t->e[i];
	return NULL;
}

const kf_tune_entry *kf_tune_find_prefix(const kf_tune_table *t, const char *prefix)
{
	size_t n = strlen(prefix);
	for (uint32_t i = t->n; i-- > 0;)
		if (!strncmp(t->e[i].key, prefix, n) && (t->e[i].key[n] == ':' || !t->e[i].key[n]))
			return &t->e[i];
	return NULL;
}

void kf_tune_set(kf_tune_table *t, const char *key, const char *cfg, double ms)
{
	kf_tune_entry *e = (kf_tune_entry *)kf_tune_find(t, key);
	if (!e) {
		if (t->n == t->cap) {
			t->cap = t->cap ? 2 * t->cap : 16;
			t->e = realloc(t->e, t->cap * sizeof *t->e);
		}
		e = &t->e[t->n++];
		snprintf(e->key, sizeof e->key, "%s", key);
	}
	snprintf(e->cfg, sizeof e->cfg, "%s", cfg);
	e->ms = ms;
}

void kf_tune_table_free(kf_tune_table *t)
{
	free(t->e);
	memset(t, 0, sizeof *t);
}

void kf_tune_parse(kf_ctx *c, const char *name, const char *text, kf_tune_table *t)
{
	int ln = 0;
	for (const char *p = text; *p;) {
		const char *e = strchr(p, '\n');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		char line[512], key[160], cfg[64], rest[8];
		double ms = 0;
		ln++;
		snprintf(line, sizeof line, "%.*s", (int)(len < sizeof line ? len : sizeof line - 1), p);
		p += len + (e != NULL);
		if (line[0] == '#' || strspn(line, " \t\r") == strlen(line))
			continue;
		int n = sscanf(line, "%159s %63s %lf %7s", key, cfg, &ms, rest);
		kf_mm_config mc;
		if (len >= sizeof line || n < 2 || n > 3 || strlen(key) >= sizeof t->e->key ||
		    kf_mm_config_parse(cfg, &mc) != 0) {
			kf_warning(c, KF_NOLOC, "tune: %s:%d: not 'KEY CONFIG [MS]'; line skipped", name, ln);
			continue;
		}
		kf_tune_set(t, key, cfg, ms);
	}
}

int kf_tune_load(kf_ctx *c, const char *path, kf_tune_table *t)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		if (errno == ENOENT)
			return 0;
		kf_error(c, KF_NOLOC, "tune: cannot read %s: %s", path, strerror(errno));
		return -1;
	}
	kf_buf b = {0};
	char chunk[4096];
	size_t n;
	while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
		kf_buf_put(&b, chunk, n);
	bool bad = ferror(f);
	fclose(f);
	if (bad) {
		kf_error(c, KF_NOLOC, "tune: cannot read %s", path);
		kf_buf_free(&b);
		return -1;
	}
	kf_buf_putc(&b, '\0');
	kf_tune_parse(c, path, b.p, t);
	kf_buf_free(&b);
	return 0;
}

/* cuda/tune_h200.txt, built in (cmake/embed.cmake) */
extern const char kf_tune_table_h200[];

const char *kf_tune_shipped(const char *device, const char **which)
{
	static const struct {
		const char *device, *file, *text;
	} tables[] = {{"H200", "cuda/tune_h200.txt", kf_tune_table_h200}};
	const char *off = getenv("KFUSE_TUNE_SHIPPED");
	if (!device || (off && !strcmp(off, "0")))
		return NULL;
	for (size_t i = 0; i < sizeof tables / sizeof *tables; i++)
		if (strstr(device, tables[i].device)) {
			if (which)
				*which = tables[i].file;
			return tables[i].text;
		}
	return NULL;
}

/* mkdir -p of path's directory */
static void make_parent(const char *path)
{
	char d[1024];
	snprintf(d, sizeof d, "%s", path);
	for (char *p = d + 1; *p; p++)
		if (*p == '/') {
			*p = 0;
			mkdir(d, 0777);
			*p = '/';
		}
}

int kf_tune_save(kf_ctx *c, const char *path, const kf_tune_table *t)
{
	make_parent(path);
	kf_ofile o; /* atomic: a failed save leaves the old table */
	int e = kf_ofile_open(&o, path);
	if (!e) {
		fprintf(o.f, "# kfuse tune cache v1: KEY CONFIG MS (kfuse-run --tune writes it)\n");
		for (uint32_t i = 0; i < t->n; i++)
			fprintf(o.f, "%s %s %.4f\n", t->e[i].key, t->e[i].cfg, t->e[i].ms);
		e = kf_ofile_commit(&o);
	}
	if (e) {
		kf_warning(c, KF_NOLOC, "tune: cannot write %s: %s", path, kf_file_strerror(e));
		return -1;
	}
	return 0;
}

/* A fusion the tuner tunes: a contraction, or a conv that runs as an
 * implicit GEMM (its key has the conv's geometry). */
bool kf_tune_is_contraction(kf_graph *g, kf_nid n, kf_mm_shape *sh)
{
	return kf_N(g, n)->op == KF_OP_FUSION && (kf_mm_node_shape(g, n, sh) || kf_conv_node_shape(g, n, sh));
}

void kf_tune_set_tile(kf_graph *g, kf_nid n, const char *cfg)
{
	kf_ctx *c = g->ctx;
	kf_node_set_attr(g, n, kf_intern_cstr(c, "tile"), (kf_attrval){.kind = KF_ATTR_STR, .s = kf_intern_cstr(c, cfg)});
}

int kf_tune_apply(kf_graph *g, const char *arch, const char *cache_dir, kf_buf *report)
{
	return kf_tune_apply_for(g, arch, NULL, cache_dir, report, NULL);
}

int kf_tune_apply_for(kf_graph *g, const char *arch, const char *device, const char *cache_dir, kf_buf *report,
		      const struct kf_emit_target *tg)
{
	kf_mm_shape sh;
	bool any = false;
	kf_foreach_node(g, 0, n)
		any |= kf_tune_is_contraction(g, n, &sh) && !kf_attr_get(g, n, "tile");
	kf_buf path = {0};
	kf_tune_table t = {0}, ship = {0};
	const char *which = NULL, *text = any ? kf_tune_shipped(device, &which) : NULL;
	int set = 0;
	if (!any || kf_tune_path(cache_dir, &path) != 0 || kf_tune_load(g->ctx, path.p, &t) != 0)
		goto done;
	if (text)
		kf_tune_parse(g->ctx, which, text, &ship);
	kf_foreach_node(g, 0, n) {
		char key[128];
		if (!kf_tune_is_contraction(g, n, &sh) || kf_attr_get(g, n, "tile"))
			continue;
		kf_mm_node_shape_sized(g, n, tg, &sh);
		kf_mm_shape_key(&sh, arch, key, sizeof key);
		const kf_tune_entry *e = kf_tune_find(&t, key);
		const char *from = path.p;
		if (!e && (e = kf_tune_find(&ship, key)))
			from = which;
		/* a conv of a tuned geometry with another epilogue (a residual
		 * add, no activation): the mainloop decides its config, so the
		 * geometry's line applies (its "s" epilogue falls back by itself
		 * where the outputs do not suit it) */
		if (!e && sh.conv) {
			char geo[128];
			sh.tag[0] = 0;
			kf_mm_shape_key(&sh, arch, geo, sizeof geo);
			if ((e = kf_tune_find_prefix(&t, geo)))
				from = path.p;
			else if ((e = kf_tune_find_prefix(&ship, geo)))
				from = which;
		}
		if (!e)
			continue;
		kf_tune_set_tile(g, n, e->cfg);
		set++;
		if (report)
			kf_buf_printf(report, "tune: @%s: fusion @%s: %s from %s%s\n", kf_str(g->ctx, g->name),
				      kf_str(g->ctx, kf_N(g, n)->sym), e->cfg, from,
				      strcmp(e->key, key) ? " (its conv geometry)" : "");
	}
done:
	kf_buf_free(&path);
	kf_tune_table_free(&t);
	kf_tune_table_free(&ship);
	return set;
}

int kf_tune_allow_tf32(kf_graph *g)
{
	kf_mm_shape sh;
	int set = 0;
	kf_foreach_node(g, 0, n) {
		/* (PyTorch's allow_tf32 is for matmuls: convs keep f32; attention's
		 * two products are matmuls, and its kernel reads the flag only
		 * where q, k and v are f32) */
		if (kf_N(g, n)->op != KF_OP_FUSION || kf_attr_bool(g, n, "tf32", false))
			continue;
		bool att = !strcmp(kf_attr_str(g, n, "kind", ""), "attention") &&
			   kf_vtype(g, kf_res(g, n, 0))->dtype == KF_F32;
		if (!att && (!kf_mm_node_shape(g, n, &sh) || sh.in != KF_F32))
			continue;
		kf_node_set_attr(g, n, kf_intern_cstr(g->ctx, "tf32"), (kf_attrval){.kind = KF_ATTR_BOOL, .b = true});
		set++;
	}
	return set;
}
