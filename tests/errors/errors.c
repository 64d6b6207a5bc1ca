/* kf-errors DIR [--update]: for every NAME.kf in DIR, parses it (as the file
 * name NAME.kf, so that messages do not depend on where the tree is) and
 * compares the diagnostics' first lines (`NAME.kf:L:C: error: ...`, without
 * the quoted source line and caret) with NAME.err.  A file that parses is a
 * failure.  --update rewrites the .err files (review the diff). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kf.h"

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	size_t cap = 4096, n = 0;
	char *p = malloc(cap);
	for (size_t k; p && (k = fread(p + n, 1, cap - n, f)) > 0;) {
		n += k;
		if (n == cap)
			p = realloc(p, cap *= 2);
	}
	fclose(f);
	*len = n;
	return p;
}

/* The diagnostics' header lines: those that start with "NAME:" or "kfuse:". */
static void headers(const kf_buf *all, const char *name, kf_buf *out)
{
	size_t nl = strlen(name);
	for (const char *s = all->p, *end = all->p + all->n; s < end;) {
		const char *e = memchr(s, '\n', (size_t)(end - s));
		e = e ? e + 1 : end;
		if (((size_t)(e - s) > nl && !memcmp(s, name, nl) && s[nl] == ':') || !strncmp(s, "kfuse:", 6))
			kf_buf_put(out, s, (size_t)(e - s));
		s = e;
	}
}

static int cmp_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: kf-errors DIR [--update]\n");
		return 2;
	}
	bool update = argc > 2 && !strcmp(argv[2], "--update");
	DIR *d = opendir(argv[1]);
	if (!d) {
		perror(argv[1]);
		return 2;
	}
	char **names = NULL;
	int n = 0, fails = 0;
	for (struct dirent *e; (e = readdir(d));) {
		size_t l = strlen(e->d_name);
		if (l > 3 && !strcmp(e->d_name + l - 3, ".kf")) {
			names = realloc(names, (size_t)(n + 1) * sizeof *names);
			names[n++] = strdup(e->d_name);
		}
	}
	closedir(d);
	qsort(names, (size_t)n, sizeof *names, cmp_name);
	for (int i = 0; i < n; i++) {
		char path[4096], errpath[4096];
		snprintf(path, sizeof path, "%s/%s", argv[1], names[i]);
		snprintf(errpath, sizeof errpath, "%s/%.*s.err", argv[1], (int)strlen(names[i]) - 3, names[i]);
		size_t len, elen = 0;
		char *text = slurp(path, &len), *want = slurp(errpath, &elen);
		kf_ctx *c = kf_ctx_new();
		kf_module *m = text ? kf_parse(c, names[i], text, len) : NULL;
		kf_buf all = {0}, got = {0};
		kf_diag_render(c, &all);
		headers(&all, names[i], &got);
		if (update && !m) {
			FILE *f = fopen(errpath, "wb");
			if (f) {
				fwrite(got.p ? got.p : "", 1, got.n, f);
				fclose(f);
			}
		} else if (m || !want || got.n != elen || (elen && memcmp(got.p, want, elen))) {
			fails++;
			fprintf(stderr, "FAIL %s\n", names[i]);
			if (m)
				fprintf(stderr, "  parsed without an error\n");
			else if (!want)
				fprintf(stderr, "  no %s\n", errpath);
			else
				fprintf(stderr, "  expected:\n%.*s  got:\n%.*s", (int)elen, want, (int)got.n, got.p ? got.p : "");
		}
		kf_module_free(m);
		kf_buf_free(&all);
		kf_buf_free(&got);
		kf_ctx_free(c);
		free(text);
		free(want);
		free(names[i]);
	}
	free(names);
	printf("%d files, %d failed\n", n, fails);
	return fails || !n;
}
