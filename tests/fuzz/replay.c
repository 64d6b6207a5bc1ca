/* replay.c: a main for a fuzz target built without libFuzzer (gcc, the
 * normal test build): feeds LLVMFuzzerTestOneInput each file named on the
 * command line, or each file of each directory named, in name order.
 *
 * The regression inputs under regress/<target>/ and the seed corpus under
 * corpus/<target>/ are replayed this way by ctest, so a crash that a fuzz
 * run found stays fixed in every build, sanitized or not.  A target aborts
 * on a broken invariant; a clean replay prints how many inputs it ran. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int nrun;

static int replay_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "replay: cannot open %s\n", path);
		return -1;
	}
	size_t cap = 4096, n = 0, k;
	uint8_t *buf = malloc(cap);
	while (buf && (k = fread(buf + n, 1, cap - n, f)) > 0) {
		n += k;
		if (n == cap)
			buf = realloc(buf, cap *= 2);
	}
	fclose(f);
	if (!buf) {
		fprintf(stderr, "replay: out of memory reading %s\n", path);
		return -1;
	}
	/* an exact-size copy, so that ASan catches a read one past the end */
	uint8_t *exact = malloc(n ? n : 1);
	memcpy(exact, buf, n);
	free(buf);
	fprintf(stderr, "replay: %s (%zu bytes)\n", path, n);
	LLVMFuzzerTestOneInput(exact, n);
	free(exact);
	nrun++;
	return 0;
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int replay_dir(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d) {
		fprintf(stderr, "replay: cannot open directory %s\n", dir);
		return -1;
	}
	char **names = NULL;
	size_t n = 0, cap = 0;
	for (struct dirent *e; (e = readdir(d));) {
		if (e->d_name[0] == '.')
			continue;
		if (n == cap)
			names = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof *names);
		size_t len = strlen(dir) + strlen(e->d_name) + 2;
		names[n] = malloc(len);
		snprintf(names[n++], len, "%s/%s", dir, e->d_name);
	}
	closedir(d);
	qsort(names, n, sizeof *names, cmp_name);
	int rc = 0;
	for (size_t i = 0; i < n; i++) {
		struct stat st;
		if (stat(names[i], &st) == 0 && S_ISREG(st.st_mode))
			rc |= replay_file(names[i]);
		free(names[i]);
	}
	free(names);
	return rc;
}

int main(int argc, char **argv)
{
	if (LLVMFuzzerInitialize)
		LLVMFuzzerInitialize(&argc, &argv);
	int rc = 0;
	for (int i = 1; i < argc; i++) {
		struct stat st;
		if (stat(argv[i], &st) != 0) {
			/* a regression directory with no crashes in it yet is absent
			 * from a git checkout (git keeps no empty directories) */
			fprintf(stderr, "replay: %s: absent, skipped\n", argv[i]);
			continue;
		}
		rc |= S_ISDIR(st.st_mode) ? replay_dir(argv[i]) : replay_file(argv[i]);
	}
	printf("replayed %d inputs\n", nrun);
	return rc ? 1 : 0;
}
