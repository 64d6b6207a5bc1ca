/* kf-roundtrip TESTS_DIR CANONICAL_DIR: checks that printing is a fixed
 * point of parsing for every .kf file under TESTS_DIR, and the identity for
 * those under CANONICAL_DIR.
 *
 * Skipped: directories named errors/ and fuzz/ (inputs meant not to parse),
 * files that say `kf-roundtrip: skip` (in a comment) and files with no line
 * that starts with `graph` (a golden test that runs on other files holds
 * only RUN: and CHECK: comments).  Any other file that does not parse is a
 * failure, with its diagnostics. */
#define _GNU_SOURCE /* memmem */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "kf.h"

static int nfiles, nfail;

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

/* Prints the first line where a and b differ. */
static void show_diff(const char *what, const char *a, size_t na, const char *b, size_t nb)
{
	size_t i = 0, line = 1, start = 0;
	for (; i < na && i < nb && a[i] == b[i]; i++)
		if (a[i] == '\n')
			line++, start = i + 1;
	const char *ea = memchr(a + start, '\n', na - start), *eb = memchr(b + start, '\n', nb - start);
	int la = (int)((ea ? (size_t)(ea - a) : na) - start), lb = (int)((eb ? (size_t)(eb - b) : nb) - start);
	fprintf(stderr, "  %s differ at line %zu:\n    - %.*s\n    + %.*s\n", what, line,
		la > 200 ? 200 : la, a + start, lb > 200 ? 200 : lb, b + start);
}

/* Whether some line starts with the word `graph`. */
static bool has_graph(const char *t, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (i && t[i - 1] != '\n')
			continue;
		while (i < n && (t[i] == ' ' || t[i] == '\t'))
			i++;
		if (n - i >= 6 && !memcmp(t + i, "graph", 5) && (t[i + 5] == ' ' || t[i + 5] == '@'))
			return true;
	}
	return false;
}

static kf_buf print_text(kf_ctx *c, const char *name, const char *text, size_t len, bool *ok)
{
	kf_buf out = {0};
	kf_module *m = kf_parse(c, name, text, len);
	*ok = m != NULL;
	if (m)
		kf_print_module(&out, m);
	kf_module_free(m);
	return out;
}

static void check_file(const char *path, bool canonical)
{
	size_t len;
	char *text = slurp(path, &len);
	if (!text) {
		fprintf(stderr, "FAIL %s: cannot read\n", path);
		nfail++;
		return;
	}
	if (memmem(text, len, "kf-roundtrip: skip", 18) || !has_graph(text, len)) {
		free(text);
		return;
	}
	nfiles++;
	kf_ctx *c = kf_ctx_new();
	bool ok1, ok2 = false;
	kf_buf p1 = print_text(c, path, text, len, &ok1), p2 = {0};
	if (ok1)
		p2 = print_text(c, "<printed>", p1.p, p1.n, &ok2);
	bool bad = !ok1 || !ok2 || p1.n != p2.n || memcmp(p1.p, p2.p, p1.n) != 0 ||
		   (canonical && (p1.n != len || memcmp(p1.p, text, len) != 0));
	if (bad) {
		nfail++;
		fprintf(stderr, "FAIL %s\n", path);
		if (!ok1)
			fprintf(stderr, "  does not parse (move it to tests/errors/ or mark it 'kf-roundtrip: skip'):\n");
		else if (!ok2)
			fprintf(stderr, "  its printed form does not parse:\n");
		else if (p1.n != p2.n || memcmp(p1.p, p2.p, p1.n) != 0)
			show_diff("print(parse(x)) and print(parse(print(parse(x))))", p1.p, p1.n, p2.p, p2.n);
		else
			show_diff("the canonical file and print(parse(file))", text, len, p1.p, p1.n);
		kf_diag_flush(c, stderr);
	}
	kf_buf_free(&p1);
	kf_buf_free(&p2);
	kf_ctx_free(c);
	free(text);
}

static void walk(const char *dir, const char *canon)
{
	DIR *d = opendir(dir);
	if (!d) {
		fprintf(stderr, "FAIL %s: cannot open directory\n", dir);
		nfail++;
		return;
	}
	struct dirent *e;
	while ((e = readdir(d))) {
		const char *n = e->d_name;
		if (n[0] == '.' || !strcmp(n, "errors") || !strcmp(n, "fuzz"))
			continue;
		size_t len = strlen(dir) + strlen(n) + 2;
		char *path = malloc(len);
		snprintf(path, len, "%s/%s", dir, n);
		struct stat st;
		if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
			walk(path, canon);
		else if (strlen(n) > 3 && !strcmp(n + strlen(n) - 3, ".kf"))
			check_file(path, !strncmp(path, canon, strlen(canon)) && path[strlen(canon)] == '/');
		free(path);
	}
	closedir(d);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: kf-roundtrip TESTS_DIR CANONICAL_DIR\n");
		return 2;
	}
	walk(argv[1], argv[2]);
	printf("%d files, %d failed\n", nfiles, nfail);
	if (!nfiles)
		fprintf(stderr, "no .kf files found under %s\n", argv[1]);
	return nfail || !nfiles;
}
