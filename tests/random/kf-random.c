/* kf-random: the middle end against the interpreter on random graphs.
 *
 *   kf-random [--seed S] [--count N] [--nodes MIN[-MAX]] [--pipelines K]
 *             [--nvrtc-every M] [--nvrtc-max K] [--keep DIR] [--max-numel E] [-v]
 *       N graphs (seeds S, S+1, ...) of MIN..MAX ops (kf_gen.h), each
 *       through K random pipelines of canonicalize, cse,
 *       rules{path=patterns}, fuse (now and then with small limits),
 *       fuse-matmul and dce in random order, checked pass by pass
 *       (kf_mid.h); the kernels of every M-th checked pipeline that fuses
 *       compile with NVRTC (0: never; when NVRTC is absent it says so and
 *       skips), each distinct kernel once, until K kernels were compiled
 *       (a time budget: NVRTC takes about 30 ms a kernel).  A finding is written to DIR/seed-S-K.kf with its pipeline
 *       in a `# PIPELINE:` line, ready for reduce.py and tests/random/regress/.
 *   kf-random --check FILE.kf|DIR... [--pipeline P] [--expect KIND] [--nvrtc]
 *       checks each file with P, or with each of its `# PIPELINE:` lines.
 *       --expect KIND: exit 0 exactly when the first check fails with KIND
 *       (the reducer's oracle).
 *   kf-random --gen --seed S --nodes N [-o FILE]: writes the graph.
 *
 * Exit status: 0 all checks passed, 1 a finding (or --expect not met),
 * 2 a usage error or an unreadable file.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include "cuda.h"
#include "interp.h"
#include "kf_gen.h"
#include "kf_mid.h"
#include "pass.h"
#include "passes.h"

#ifndef KF_SOURCE_DIR
#define KF_SOURCE_DIR "."
#endif

typedef struct opts {
	uint64_t seed;
	uint32_t count, nmin, nmax, pipelines, nvrtc_every, nvrtc_max;
	int64_t max_numel;
	const char *keep, *pipeline, *out, *patterns;
	int expect;
	bool check, gen, nvrtc, verbose, uneven;
	char **files;
	int nfiles;
} opts;

static int usage(const char *msg)
{
	fprintf(stderr, "kf-random: %s\nusage: kf-random [--seed S] [--count N] [--nodes MIN[-MAX]] [--pipelines K]\n"
			"                 [--nvrtc-every M] [--nvrtc-max K] [--keep DIR] [--max-numel E] [--patterns DIR] [--uneven-split] [-v]\n"
			"       kf-random --check FILE|DIR... [--pipeline P] [--expect KIND] [--nvrtc]\n"
			"       kf-random --gen --seed S --nodes N [-o FILE]\n", msg);
	return 2;
}

static bool num(const char *s, uint64_t *v)
{
	char *e;
	errno = 0;
	unsigned long long x = strtoull(s, &e, 0);
	if (e == s || *e || errno)
		return false;
	*v = x;
	return true;
}

static int parse(int argc, char **argv, opts *o)
{
	uint64_t v;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
#define NEEDS(flag) if (!val) return usage("missing value after " flag)
		if (!strcmp(a, "--seed")) {
			NEEDS("--seed");
			if (!num(val, &o->seed))
				return usage("--seed needs a number");
			i++;
		} else if (!strcmp(a, "--count") || !strcmp(a, "--pipelines") || !strcmp(a, "--nvrtc-every") ||
			   !strcmp(a, "--max-numel") || !strcmp(a, "--nvrtc-max")) {
			NEEDS("a count option");
			if (!num(val, &v) || v > 100000000)
				return usage("a count option needs a number");
			if (!strcmp(a, "--count"))
				o->count = (uint32_t)v;
			else if (!strcmp(a, "--pipelines"))
				o->pipelines = (uint32_t)v;
			else if (!strcmp(a, "--nvrtc-every"))
				o->nvrtc_every = (uint32_t)v;
			else if (!strcmp(a, "--nvrtc-max"))
				o->nvrtc_max = (uint32_t)v;
			else
				o->max_numel = (int64_t)v;
			i++;
		} else if (!strcmp(a, "--nodes")) {
			NEEDS("--nodes");
			char *dash = strchr(val, '-');
			char lo[32];
			snprintf(lo, sizeof lo, "%.*s", dash ? (int)(dash - val) : 31, val);
			uint64_t x, y;
			if (!num(lo, &x) || (dash && !num(dash + 1, &y)) || x < 1 || x > 10000000)
				return usage("--nodes needs MIN or MIN-MAX");
			o->nmin = (uint32_t)x;
			o->nmax = dash ? (uint32_t)y : o->nmin;
			if (o->nmax < o->nmin)
				return usage("--nodes: MAX below MIN");
			i++;
		} else if (!strcmp(a, "--keep")) {
			NEEDS("--keep");
			o->keep = argv[++i];
		} else if (!strcmp(a, "--pipeline")) {
			NEEDS("--pipeline");
			o->pipeline = argv[++i];
		} else if (!strcmp(a, "--patterns")) {
			NEEDS("--patterns");
			o->patterns = argv[++i];
		} else if (!strcmp(a, "-o")) {
			NEEDS("-o");
			o->out = argv[++i];
		} else if (!strcmp(a, "--expect")) {
			NEEDS("--expect");
			if ((o->expect = kf_mid_verdict_parse(argv[++i])) <= 0)
				return usage("--expect: one of pipeline verify differs interp roundtrip emit nvrtc");
		} else if (!strcmp(a, "--check")) {
			o->check = true;
		} else if (!strcmp(a, "--gen")) {
			o->gen = true;
		} else if (!strcmp(a, "--nvrtc")) {
			o->nvrtc = true;
		} else if (!strcmp(a, "--uneven-split")) {
			o->uneven = true;
		} else if (!strcmp(a, "-v")) {
			o->verbose = true;
		} else if (a[0] == '-') {
			return usage("unknown option");
		} else {
			o->files = realloc(o->files, (o->nfiles + 1) * sizeof *o->files);
			o->files[o->nfiles++] = (char *)a;
		}
	}
	if (o->check && !o->nfiles)
		return usage("--check needs a file or directory");
	return 0;
}

/* ---- random pipelines ---------------------------------------------------- */

static uint32_t draw(uint64_t *rng, uint32_t n)
{
	kf_gen_src s = {.rng = *rng};
	uint32_t r = kf_gen_pick(&s, n);
	*rng = s.rng;
	return r;
}

/* A pipeline: each pass in with some chance, in random order; fuse nearly
 * always, now and then with small limits so that they bind.  The rules
 * are named `rules{path=patterns}` (resolve() makes it the tree's). */
static void random_pipeline(uint64_t *rng, kf_buf *out)
{
	char fuse[64];
	static const char *const lim[] = {"max-nodes=3", "max-inputs=2", "max-search=8", "siblings=false",
					  "max-row=64", "max-regs=40"};
	if (draw(rng, 4) == 0)
		snprintf(fuse, sizeof fuse, "fuse{%s}", lim[draw(rng, 6)]);
	else
		snprintf(fuse, sizeof fuse, "fuse");
	const char *pass[8];
	int n = 0;
	const char *all[] = {"canonicalize", "cse", "rules{path=patterns}", fuse, "fuse-matmul", "dce"};
	static const uint32_t in_of_8[] = {4, 4, 3, 7, 4, 4};
	for (int i = 0; i < 6; i++)
		if (draw(rng, 8) < in_of_8[i])
			pass[n++] = all[i];
	if (!n)
		pass[n++] = fuse;
	if (draw(rng, 6) == 0)
		pass[n++] = all[draw(rng, 6)]; /* one pass twice */
	for (int i = n - 1; i > 0; i--) {
		int j = (int)draw(rng, (uint32_t)i + 1);
		const char *t = pass[i];
		pass[i] = pass[j];
		pass[j] = t;
	}
	out->n = 0;
	for (int i = 0; i < n; i++)
		kf_buf_printf(out, "%s%s", i ? "," : "", pass[i]);
	kf_buf_putc(out, 0);
}

/* The pipeline with `path=patterns` naming the tree's rule scripts. */
static void resolve(const char *pipeline, const char *patterns, kf_buf *out)
{
	out->n = 0;
	for (const char *s = pipeline; *s;) {
		const char *hit = strstr(s, "path=patterns");
		if (!hit) {
			kf_buf_puts(out, s);
			break;
		}
		kf_buf_put(out, s, (size_t)(hit - s));
		kf_buf_printf(out, "path=\"%s\"", patterns);
		s = hit + strlen("path=patterns");
	}
	kf_buf_putc(out, 0);
}

static bool fuses(const char *pipeline) { return strstr(pipeline, "fuse") != NULL; }

/* ---- runs ---------------------------------------------------------------- */

static int write_file(const char *path, const char *head, const char *text, size_t n)
{
	FILE *f = fopen(path, "w");
	if (!f)
		return -1;
	fputs(head, f);
	fwrite(text, 1, n, f);
	return fclose(f);
}

static int random_runs(kf_ctx *c, const kf_passreg *reg, const opts *o, kf_nvrtc *nv)
{
	uint32_t findings = 0, checks = 0, fusing = 0, withnv = 0;
	uint64_t kernels = 0;
	kf_mid_seen *seen = kf_mid_seen_new();
	uint64_t nodes = 0;
	kf_buf text = {0}, pipe = {0}, full = {0}, rep = {0};
	double t0 = (double)clock() / CLOCKS_PER_SEC;
	for (uint32_t k = 0; k < o->count; k++) {
		uint64_t seed = o->seed + k, rng = seed * 0x9e3779b97f4a7c15ULL + 1;
		uint32_t n = o->nmin + draw(&rng, o->nmax - o->nmin + 1);
		kf_gen_src src = {.rng = seed};
		kf_gen_opts go = {.nodes = n, .max_numel = o->max_numel, .uneven_split = o->uneven};
		kf_graph *g = kf_gen_graph(c, &src, &go, "g");
		text.n = 0;
		kf_print_graph(&text, g);
		nodes += kf_graph_live_nodes(g);
		kf_graph_free(g);
		for (uint32_t p = 0; p < o->pipelines; p++) {
			random_pipeline(&rng, &pipe);
			resolve(pipe.p, o->patterns, &full);
			kf_mid_opts mo = {.reg = reg, .pipeline = full.p, .seed = seed, .nv = nv, .seen = seen,
					  .compiled = &kernels};
			/* every M-th pipeline that fuses compiles its kernels (those
			 * not compiled before in this run) */
			if (fuses(pipe.p) && o->nvrtc_every && fusing++ % o->nvrtc_every == 0 && nv &&
			    (!o->nvrtc_max || kernels < o->nvrtc_max)) {
				mo.nvrtc = true;
				withnv++;
			}
			rep.n = 0;
			kf_mid_verdict v = kf_mid_check(c, "random.kf", text.p, text.n, &mo, &rep);
			checks++;
			if (o->verbose)
				fprintf(stderr, "seed %llu (%u ops) %s: %s\n", (unsigned long long)seed, n, pipe.p,
					kf_mid_verdict_name(v));
			if (v == KF_MID_OK)
				continue;
			findings++;
			fprintf(stderr, "kf-random: FINDING seed %llu, %u ops, pipeline %s\n%.*s",
				(unsigned long long)seed, n, pipe.p, (int)(rep.n < 6000 ? rep.n : 6000), rep.p);
			if (o->keep) {
				char path[4096], head[4400];
				mkdir(o->keep, 0777);
				snprintf(path, sizeof path, "%s/seed-%llu-%u.kf", o->keep, (unsigned long long)seed, p);
				snprintf(head, sizeof head, "# kf-random finding: %s (seed %llu)\n# PIPELINE: %s\n",
					 kf_mid_verdict_name(v), (unsigned long long)seed, pipe.p);
				if (write_file(path, head, text.p, text.n) == 0)
					fprintf(stderr, "kf-random: wrote %s\n", path);
			}
		}
	}
	double t1 = (double)clock() / CLOCKS_PER_SEC;
	printf("kf-random: %u graphs (%llu ops), %u pipeline checks, %u of them through NVRTC (%llu distinct "
	       "kernels compiled), %u findings, %.1f s CPU\n",
	       o->count, (unsigned long long)nodes, checks, withnv, (unsigned long long)kernels, findings, t1 - t0);
	kf_mid_seen_free(seen);
	kf_buf_free(&text);
	kf_buf_free(&pipe);
	kf_buf_free(&full);
	kf_buf_free(&rep);
	return findings ? 1 : 0;
}

static char *slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	kf_buf b = {0};
	char chunk[65536];
	size_t k;
	while ((k = fread(chunk, 1, sizeof chunk, f)) > 0)
		kf_buf_put(&b, chunk, k);
	fclose(f);
	kf_buf_putc(&b, 0);
	*n = b.n - 1;
	return b.p;
}

/* Checks one file with --pipeline or each of its `# PIPELINE:` lines;
 * returns the first verdict that is not ok (or ok). */
static int check_file(kf_ctx *c, const kf_passreg *reg, const opts *o, kf_nvrtc *nv, const char *path,
		      kf_mid_verdict *first)
{
	size_t n;
	char *text = slurp(path, &n);
	if (!text) {
		fprintf(stderr, "kf-random: %s: %s\n", path, strerror(errno));
		return -1;
	}
	int checked = 0;
	kf_buf rep = {0};
	const char *p = o->pipeline ? "" : text;
	for (;;) {
		char line[4096];
		const char *pipeline = o->pipeline;
		if (!pipeline) {
			const char *at = strstr(p, "# PIPELINE:");
			if (!at)
				break;
			at += strlen("# PIPELINE:");
			while (*at == ' ')
				at++;
			size_t len = strcspn(at, "\n");
			snprintf(line, sizeof line, "%.*s", (int)len, at);
			pipeline = line;
			p = at + len;
		}
		kf_buf pl = {0};
		resolve(pipeline, o->patterns, &pl);
		kf_mid_opts mo = {.reg = reg, .pipeline = pl.p, .seed = 1, .nvrtc = nv != NULL, .nv = nv};
		rep.n = 0;
		kf_mid_verdict v = kf_mid_check(c, path, text, n, &mo, &rep);
		checked++;
		if (v != KF_MID_OK && *first == KF_MID_OK)
			*first = v;
		if (o->verbose || (v != KF_MID_OK && o->expect <= 0))
			fprintf(stderr, "%s: %s: %s\n%.*s", path, pipeline, kf_mid_verdict_name(v),
				v == KF_MID_OK ? 0 : (int)(rep.n < 6000 ? rep.n : 6000), rep.p);
		kf_buf_free(&pl);
		if (o->pipeline)
			break;
	}
	if (!checked)
		fprintf(stderr, "kf-random: %s: no pipeline (give --pipeline or a '# PIPELINE:' line)\n", path);
	kf_buf_free(&rep);
	free(text);
	return checked ? 0 : -1;
}

static int checks(kf_ctx *c, const kf_passreg *reg, const opts *o, kf_nvrtc *nv)
{
	kf_mid_verdict first = KF_MID_OK;
	int files = 0, bad = 0;
	for (int i = 0; i < o->nfiles; i++) {
		struct stat st;
		if (stat(o->files[i], &st) == 0 && S_ISDIR(st.st_mode)) {
			struct dirent **list;
			int k = scandir(o->files[i], &list, NULL, alphasort);
			for (int j = 0; j < k; j++) {
				size_t l = strlen(list[j]->d_name);
				if (l > 3 && !strcmp(list[j]->d_name + l - 3, ".kf")) {
					char path[4096];
					snprintf(path, sizeof path, "%s/%s", o->files[i], list[j]->d_name);
					bad |= check_file(c, reg, o, nv, path, &first) != 0;
					files++;
				}
				free(list[j]);
			}
			free(list);
		} else {
			bad |= check_file(c, reg, o, nv, o->files[i], &first) != 0;
			files++;
		}
	}
	if (bad)
		return 2;
	if (o->expect > 0)
		return (int)first == o->expect ? 0 : 1;
	if (!o->verbose)
		printf("kf-random: %d files checked, %s\n", files, first == KF_MID_OK ? "all ok" : "FAILED");
	return first == KF_MID_OK ? 0 : 1;
}

int main(int argc, char **argv)
{
	opts o = {.seed = 1, .count = 10, .nmin = 500, .nmax = 5000, .pipelines = 2, .nvrtc_every = 0,
		  .patterns = KF_SOURCE_DIR "/patterns"};
	int rc = parse(argc, argv, &o);
	if (rc)
		return rc;
	kf_ctx *c = kf_ctx_new();
	kf_rt_register(c);
	kf_passreg reg = {0};
	kf_passes_builtin(&reg);
	kf_nvrtc *nv = NULL;
	if ((o.check && o.nvrtc) || (!o.check && !o.gen && o.nvrtc_every)) {
		nv = kf_nvrtc_open(c);
		if (!nv) {
			printf("kf-random: NVRTC is not available here: kernels are not compiled\n");
			kf_diag_clear(c);
		}
	}
	if (o.gen) {
		kf_gen_src src = {.rng = o.seed};
		kf_gen_opts go = {.nodes = o.nmin, .max_numel = o.max_numel, .uneven_split = o.uneven};
		kf_graph *g = kf_gen_graph(c, &src, &go, "g");
		kf_buf b = {0};
		kf_print_graph(&b, g);
		FILE *f = o.out ? fopen(o.out, "w") : stdout;
		rc = f && fwrite(b.p, 1, b.n, f) == b.n ? 0 : 2;
		if (f && f != stdout && fclose(f) != 0)
			rc = 2;
		if (rc)
			fprintf(stderr, "kf-random: cannot write %s\n", o.out ? o.out : "stdout");
		kf_buf_free(&b);
		kf_graph_free(g);
	} else if (o.check) {
		rc = checks(c, &reg, &o, nv);
	} else {
		rc = random_runs(c, &reg, &o, nv);
	}
	kf_nvrtc_close(nv);
	kf_passreg_free(&reg);
	free(o.files);
	kf_ctx_free(c);
	return rc;
}
