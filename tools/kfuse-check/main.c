/* kfuse-check: checks text against a check file, compatible with LLVM
 * FileCheck (v19): same directives, flags, verdicts and exit codes
 * (0 all checks pass, 1 a check failed, 2 bad check file or input).
 * See docs/kfuse-check.md for what is supported and the known divergences.
 *
 * Usage: kfuse-check CHECKFILE [--input-file F] [options]   (stdin default)
 */
#include "kfc.h"
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- memory ------------------------------------------------------------------ */

struct kfc_block {
	struct kfc_block *next;
	size_t used, cap;
	max_align_t data[];
};

void *kfc_xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);
	if (!q)
		kf_oom();
	return q;
}

void *kfc_alloc(kfc_arena *a, size_t n)
{
	n = (n + 15) & ~(size_t)15;
	struct kfc_block *b = a->head;
	if (!b || b->cap - b->used < n) {
		size_t cap = n > 65536 ? n : 65536;
		b = kfc_xrealloc(NULL, sizeof *b + cap);
		b->used = 0;
		b->cap = cap;
		b->next = a->head;
		a->head = b;
	}
	void *p = (char *)b->data + b->used;
	b->used += n;
	memset(p, 0, n);
	return p;
}

char *kfc_strndup(kfc_arena *a, const char *s, size_t n)
{
	char *p = kfc_alloc(a, n + 1);
	if (n)
		memcpy(p, s, n);
	p[n] = 0;
	return p;
}

void kfc_arena_free(kfc_arena *a)
{
	while (a->head) {
		struct kfc_block *b = a->head;
		a->head = b->next;
		free(b);
	}
}

void kfc_str_put(kfc_str *s, const char *p, size_t n)
{
	if (s->n + n + 1 > s->cap) {
		s->cap = (s->n + n + 1) * 2;
		s->p = kfc_xrealloc(s->p, s->cap);
	}
	if (n)
		memcpy(s->p + s->n, p, n);
	s->n += n;
	s->p[s->n] = 0;
}

void kfc_str_putc(kfc_str *s, char c)
{
	kfc_str_put(s, &c, 1);
}

void kfc_str_printf(kfc_str *s, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	kfc_str_put(s, "", 0);
	if (s->n + (size_t)n + 1 > s->cap) {
		s->cap = (s->n + (size_t)n + 1) * 2;
		s->p = kfc_xrealloc(s->p, s->cap);
	}
	va_start(ap, fmt);
	vsnprintf(s->p + s->n, (size_t)n + 1, fmt, ap);
	va_end(ap);
	s->n += (size_t)n;
}

void kfc_str_free(kfc_str *s)
{
	free(s->p);
	*s = (kfc_str){0};
}

/* ---- files ------------------------------------------------------------------- */

static bool read_all(const char *path, kfc_str *out)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
	if (!f)
		return false;
	char buf[65536];
	size_t n;
	kfc_str_put(out, "", 0);
	while ((n = fread(buf, 1, sizeof buf, f)) > 0)
		kfc_str_put(out, buf, n);
	bool ok = !ferror(f);
	if (f != stdin)
		fclose(f);
	return ok;
}

/* FileCheck's CanonicalizeFile: drop the \r of \r\n and, unless strict,
 * fold each run of spaces and tabs into one space. */
static void canonicalize(kfc_ctx *c, kfc_file *f, const kfc_str *raw)
{
	char *o = kfc_alloc(&c->arena, raw->n + 1);
	size_t k = 0;
	for (size_t i = 0; i < raw->n; i++) {
		char ch = raw->p[i];
		if (ch == '\r' && i + 1 < raw->n && raw->p[i + 1] == '\n')
			continue;
		if (c->o.strict_ws || (ch != ' ' && ch != '\t')) {
			o[k++] = ch;
			continue;
		}
		o[k++] = ' ';
		while (i + 1 < raw->n && (raw->p[i + 1] == ' ' || raw->p[i + 1] == '\t'))
			i++;
	}
	o[k] = 0;
	f->text = o;
	f->len = k;
}

/* ---- options ----------------------------------------------------------------- */

typedef struct args {
	const char *check, *input;
	const char **list[4]; /* prefixes, comments, implicit nots, defines */
	int n[4], cap[4];
	bool any_comment_opt;
} args;

static void add_list(args *a, int which, const char *v, bool split)
{
	if (!split) {
		KFC_PUSH(a->list[which], a->n[which], a->cap[which], v);
		return;
	}
	/* cl::CommaSeparated: "A,B" is two values (strings live in argv) */
	const char *s = v;
	for (;;) {
		const char *comma = strchr(s, ',');
		size_t n = comma ? (size_t)(comma - s) : strlen(s);
		char *item = malloc(n + 1);
		memcpy(item, s, n);
		item[n] = 0;
		KFC_PUSH(a->list[which], a->n[which], a->cap[which], item);
		if (!comma)
			break;
		s = comma + 1;
	}
}

static void usage(FILE *f)
{
	fputs("usage: kfuse-check CHECKFILE [--input-file F] [options]\n"
		"  --check-prefix P, --check-prefixes P,Q   directive prefixes (default CHECK)\n"
		"  --comment-prefixes P,Q                     comment prefixes (default COM,RUN)\n"
		"  --implicit-check-not PAT                   CHECK-NOT: PAT everywhere\n"
		"  --match-full-lines --strict-whitespace --ignore-case --allow-empty\n"
		"  --enable-var-scope --allow-deprecated-dag-overlap\n"
		"  -D VAR=VAL, -D#[FMT,]NUM=EXPR             define variables\n"
		"  --dump-input=fail|always|never|help       annotated input dump on stderr\n"
		"  --dump-input-filter=error|annotation|annotation-full|all\n"
		"  --dump-input-context=N  -v  -vv\n"
		"  -h, --help, --version\n"
		"Options take one dash or two, as FileCheck's.  Exit status: 0 checks pass, 1 a\n"
		"check fails (or a usage error, as FileCheck), 2 bad check file or input.\n", f);
}

static int pick(const char *v, const char *const *names, int n, const char *opt)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(v, names[i]))
			return i;
	fprintf(stderr, "kfuse-check: for the --%s option: Cannot find option named '%s'!\n", opt, v);
	return -1;
}

enum {
	O_PREFIX = 256, O_COMMENT, O_IMPLICIT_NOT, O_INPUT, O_DUMP, O_FILTER, O_CONTEXT, O_FULL_LINES,
	O_STRICT_WS, O_IGNORE_CASE, O_ALLOW_EMPTY, O_VAR_SCOPE, O_DAG_OVERLAP, O_NO_EFFECT, O_VV,
	O_VERSION,
};

/* An option getopt_long rejected (ch ':': its value is missing), in
 * FileCheck's words; parse_args's status 2. */
static int bad_option(int ch, char **argv)
{
	if (ch == ':' && optopt == 'D')
		fputs("kfuse-check: for the -D option: requires a value!\n", stderr);
	else if (ch == ':')
		fprintf(stderr, "kfuse-check: option '%s' requires a value\n", argv[optind - 1]);
	else
		fprintf(stderr, "kfuse-check: Unknown command line argument '%s'.  Try: 'kfuse-check --help'\n",
			argv[optind - 1]);
	return 2;
}

/* Returns 0 to go on, else the exit status + 1.  Options are LLVM's: one
 * or two dashes, `-opt=V` or `-opt V` (getopt_long_only), -DVAR=VAL
 * attached; messages are FileCheck's, which tests compare. */
static int parse_args(int argc, char **argv, kfc_opts *o, args *a)
{
	static const char *const dumps[] = {"fail", "always", "never", "help"};
	static const char *const filters[] = {"", "all", "annotation-full", "annotation", "error"};
	static const struct option longs[] = {
		{"check-prefix", required_argument, 0, O_PREFIX},
		{"check-prefixes", required_argument, 0, O_PREFIX},
		{"comment-prefixes", required_argument, 0, O_COMMENT},
		{"implicit-check-not", required_argument, 0, O_IMPLICIT_NOT},
		{"input-file", required_argument, 0, O_INPUT},
		{"dump-input", required_argument, 0, O_DUMP},
		{"dump-input-filter", required_argument, 0, O_FILTER},
		{"dump-input-context", required_argument, 0, O_CONTEXT},
		{"match-full-lines", no_argument, 0, O_FULL_LINES},
		{"strict-whitespace", no_argument, 0, O_STRICT_WS},
		{"ignore-case", no_argument, 0, O_IGNORE_CASE},
		{"allow-empty", no_argument, 0, O_ALLOW_EMPTY},
		{"enable-var-scope", no_argument, 0, O_VAR_SCOPE},
		{"allow-deprecated-dag-overlap", no_argument, 0, O_DAG_OVERLAP},
		/* accepted for compatibility; no effect here */
		{"allow-unused-prefixes", no_argument, 0, O_NO_EFFECT},
		{"color", no_argument, 0, O_NO_EFFECT}, {"no-color", no_argument, 0, O_NO_EFFECT},
		{"v", no_argument, 0, 'v'}, {"vv", no_argument, 0, O_VV},
		{"help", no_argument, 0, 'h'}, {"version", no_argument, 0, O_VERSION}, {0, 0, 0, 0},
	};
	long long n;
	int ch;
	opterr = 0;
	/* glibc's full restart: the fuzz target runs this main many times */
	optind = 0;
	while ((ch = getopt_long_only(argc, argv, ":D:hv", longs, NULL)) != -1) {
		switch (ch) {
		case 'D': add_list(a, 3, optarg, false); break;
		case O_PREFIX: add_list(a, 0, optarg, true); break;
		case O_COMMENT:
			a->any_comment_opt = true;
			add_list(a, 1, optarg, true);
			break;
		case O_IMPLICIT_NOT: add_list(a, 2, optarg, false); break;
		case O_INPUT: a->input = optarg; break;
		case O_DUMP:
			if ((o->dump = pick(optarg, dumps, 4, "dump-input")) < 0)
				return 2;
			if (o->dump == 3) {
				fputs("The input dump shows each input line once, numbered, followed by\n"
					"annotations: LABEL:LINE names the directive (check, next, same, not,\n"
					"dag, label, empty, count, eof; imp for --implicit-check-not), then a\n"
					"marker under the input: ^~~ match, X~~ searched without a match,\n"
					"!~~ a match that is an error, ? a possible intended match.\n", stdout);
				return 1;
			}
			break;
		case O_FILTER:
			if ((o->filter = pick(optarg, filters, 5, "dump-input-filter")) <= 0)
				return 2;
			break;
		case O_CONTEXT:
			if (!kf_cli_int("--dump-input-context", optarg, 0, 1000000, &n))
				return kf_cli_status() + 1;
			o->context = (int)n;
			break;
		case O_FULL_LINES: o->match_full_lines = true; break;
		case O_STRICT_WS: o->strict_ws = true; break;
		case O_IGNORE_CASE: o->ignore_case = true; break;
		case O_ALLOW_EMPTY: o->allow_empty = true; break;
		case O_VAR_SCOPE: o->var_scope = true; break;
		case O_DAG_OVERLAP: o->dag_overlap = true; break;
		case O_NO_EFFECT: break;
		case 'v': o->verbose = true; break;
		case O_VV: o->verbose = o->vverbose = true; break;
		case 'h': usage(stdout); return 1;
		case O_VERSION:
			kf_cli_version();
			puts("FileCheck 19 compatible");
			return 1;
		default: return bad_option(ch, argv);
		}
	}
	for (int i = optind; i < argc; i++) {
		if (a->check) {
			fputs("kfuse-check: Too many positional arguments specified!\n", stderr);
			return 2;
		}
		a->check = argv[i];
	}
	return 0;
}

/* FileCheck's ValidatePrefixes. */
static bool valid_prefixes(const char *kind, const char **ps, int n, const char **seen, int *nseen)
{
	for (int i = 0; i < n; i++) {
		const char *p = ps[i];
		if (!*p) {
			fprintf(stderr, "error: supplied %s prefix must not be the empty string\n", kind);
			return false;
		}
		if (strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != strlen(p)) {
			fprintf(stderr, "error: supplied %s prefix must start with a letter and contain only "
				"alphanumeric characters, hyphens, and underscores: '%s'\n", kind, p);
			return false;
		}
		for (int k = 0; k < *nseen; k++)
			if (!strcmp(seen[k], p)) {
				fprintf(stderr, "error: supplied %s prefix must be unique among check and "
					"comment prefixes: '%s'\n", kind, p);
				return false;
			}
		seen[(*nseen)++] = p;
	}
	return true;
}

static int run(kfc_ctx *c, args *a, int argc, char **argv)
{
	static const char *def_prefix[] = {"CHECK"}, *def_comment[] = {"COM", "RUN"};
	kfc_opts *o = &c->o;
	o->prefixes = a->n[0] ? a->list[0] : def_prefix;
	o->nprefixes = a->n[0] ? a->n[0] : 1;
	o->comments = a->any_comment_opt ? a->list[1] : def_comment;
	o->ncomments = a->any_comment_opt ? a->n[1] : 2;
	o->implicit_not = a->list[2];
	o->nimplicit_not = a->n[2];
	o->defines = a->list[3];
	o->ndefines = a->n[3];
	const char **seen = calloc((size_t)(o->nprefixes + o->ncomments) + 1, sizeof *seen);
	int nseen = 0;
	/* comment prefixes first, as FileCheck validates them */
	bool ok = valid_prefixes("comment", o->comments, o->ncomments, seen, &nseen) &&
		valid_prefixes("check", o->prefixes, o->nprefixes, seen, &nseen);
	free(seen);
	if (!ok)
		return 2;
	kfc_str raw = {0};
	if (!read_all(a->check, &raw)) {
		fprintf(stderr, "Could not open check file '%s': %s\n", a->check, strerror(errno));
		kfc_str_free(&raw);
		return 2;
	}
	c->check.name = a->check;
	canonicalize(c, &c->check, &raw);
	raw.n = 0;
	if (!kfc_define_cmdline(c) || !kfc_parse_checks(c)) {
		kfc_str_free(&raw);
		return c->failed ? 1 : 2;
	}
	const char *in = a->input ? a->input : "-";
	if (!read_all(in, &raw)) {
		fprintf(stderr, "Could not open input file '%s': %s\n", in, strerror(errno));
		kfc_str_free(&raw);
		return 2;
	}
	if (raw.n == 0 && !o->allow_empty) {
		fprintf(stderr, "kfuse-check error: '%s' is empty.\nkfuse-check command line: ", in);
		for (int i = 0; i < argc; i++)
			fprintf(stderr, " %s", argv[i]);
		fputc('\n', stderr);
		kfc_str_free(&raw);
		return 2;
	}
	c->input.name = strcmp(in, "-") ? in : "<stdin>";
	canonicalize(c, &c->input, &raw);
	kfc_str_free(&raw);
	c->record = o->dump != KFC_DUMP_NEVER;
	int rc = kfc_check_input(c) ? 0 : 1;
	if (o->dump == KFC_DUMP_ALWAYS || (rc == 1 && o->dump == KFC_DUMP_FAIL))
		kfc_dump_input(c);
	return rc;
}

static void cleanup(kfc_ctx *c, args *a)
{
	for (int i = 0; i < c->nchecks; i++) {
		kfc_pattern_free(c->checks[i].pat);
		for (int k = 0; k < c->checks[i].ndagnot; k++)
			kfc_pattern_free(c->checks[i].dagnot[k]);
	}
	/* implicit NOT patterns are shared by several checks; freeing twice is
	 * harmless because kfc_pattern_free resets the state */
	free(c->check.lines);
	free(c->input.lines);
	for (int i = 0; i < c->nextra; i++)
		free(c->extra[i]->lines);
	free(c->extra);
	free(c->vars);
	free(c->checks);
	free(c->diags);
	for (int w = 0; w < 2; w++)
		for (int i = 0; i < a->n[w]; i++)
			free((char *)a->list[w][i]);
	for (int w = 0; w < 4; w++)
		free(a->list[w]);
	kfc_arena_free(&c->arena);
}

int main(int argc, char **argv)
{
	kfc_ctx c = {0};
	args a = {0};
	c.o.context = 5;
	/* usage errors exit 1, as FileCheck's (LLVM's command line library) */
	kf_cli_init("kfuse-check", 1);
	int st = parse_args(argc, argv, &c.o, &a);
	int rc;
	if (st)
		rc = st - 1;
	else if (!a.check) {
		fputs("<check-file> not specified\n", stderr);
		rc = 2;
	} else
		rc = run(&c, &a, argc, argv);
	cleanup(&c, &a);
	return rc;
}
