/* kfc.h: kfuse-check internals, a FileCheck-compatible text matcher.
 *
 * The phases follow LLVM FileCheck (v19) closely, because the contract is
 * that one check file gives the same verdict under both tools:
 *   main.c     options, reading and canonicalising files, exit codes
 *   parse.c    finding directives in the check file (prefix scan)
 *   pattern.c  compiling one pattern: fixed text, {{regex}}, [[VAR]], [[#EXPR]]
 *   regex.c    LLVM-style ERE -> a canonical ERE, with LLVM's validity rules
 *   recomp.c   compiling it to a program (rematch.h)
 *   rematch.c  running that in bounded time (Pike VM; a budget for backreferences)
 *   dagscan.c  CHECK-DAG without repeated scans
 *   expr.c     numeric expressions and formats ([[#%x,N:]], [[#N+1]])
 *   match.c    the check algorithm: LABEL regions, DAG/NOT groups, NEXT/SAME
 *   diag.c     SourceMgr-style messages and the annotated input dump
 * The tool is self-contained: it needs nothing from the kfuse core.
 */
#ifndef KFC_H
#define KFC_H

/* memmem; kfc.h is each file's first include */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>

#include <regex.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kf.h" /* kf_oom, kf_read_regular, kf_ofile */

/* ---- memory ---------------------------------------------------------------- */

/* Everything parsed lives until exit; one arena frees it in one call. */
typedef struct kfc_arena {
	struct kfc_block *head;
} kfc_arena;
void *kfc_alloc(kfc_arena *a, size_t n); /* zeroed; aborts on OOM (tool code) */
char *kfc_strndup(kfc_arena *a, const char *s, size_t n);
void kfc_arena_free(kfc_arena *a);

/* A growable byte string (malloc'd; free with kfc_str_free). */
typedef struct kfc_str {
	char *p;
	size_t n, cap;
} kfc_str;
void kfc_str_put(kfc_str *s, const char *p, size_t n);
void kfc_str_putc(kfc_str *s, char c);
void kfc_str_printf(kfc_str *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void kfc_str_free(kfc_str *s);

/* Appends one element to a malloc'd array, doubling its capacity. */
#define KFC_PUSH(arr, n, cap, val) do { \
	if ((n) == (cap)) { \
		(cap) = (cap) ? 2 * (cap) : 8; \
		(arr) = kfc_xrealloc((arr), (cap) * sizeof *(arr)); \
	} \
	(arr)[(n)++] = (val); \
} while (0)
void *kfc_xrealloc(void *p, size_t n);

/* ---- files --------------------------------------------------------------- */

/* A named text buffer: the check file, the input, or a synthetic one for a
 * command-line pattern.  Line starts are indexed lazily for diagnostics. */
typedef struct kfc_file {
	const char *name;
	char *text;
	size_t len;
	size_t *lines;
	size_t nlines;
} kfc_file;

/* ---- numeric values ---------------------------------------------------------- */

typedef enum { KFC_FMT_NONE, KFC_FMT_U, KFC_FMT_D, KFC_FMT_LX, KFC_FMT_UX } kfc_fmtkind;
typedef struct kfc_fmt {
	uint8_t kind; /* kfc_fmtkind */
	bool alt;     /* '#': 0x prefix */
	unsigned prec;
} kfc_fmt;

/* A variable: string ([[V:re]], -DV=x) or numeric ([[#N:]], -D#N=1). */
typedef struct kfc_var {
	const char *name;
	bool numeric;
	bool has_value;
	const char *sval; /* string value (arena) */
	size_t slen;
	int64_t nval;
	kfc_fmt fmt;
	int def_line; /* numeric: check line of its definition, 0 if none */
} kfc_var;

typedef struct kfc_expr kfc_expr;
struct kfc_expr {
	char op;          /* 'n' literal, 'v' variable, '+', '-', 'f' call */
	int64_t lit;
	int var;          /* 'v': variable index; -1 for @LINE */
	int func;         /* 'f': index into the function table */
	kfc_expr *a, *b;
	const char *text; /* source of this node, for diagnostics */
	size_t textlen;
};

/* ---- patterns -------------------------------------------------------------- */

enum {
	KFC_PLAIN, KFC_NEXT, KFC_SAME, KFC_NOT, KFC_DAG, KFC_LABEL, KFC_EMPTY,
	KFC_COMMENT, KFC_EOF
};

typedef struct kfc_subst {
	size_t at;        /* insertion offset into the regex template */
	bool numeric;
	int var;          /* string substitution: variable index */
	kfc_expr *expr;   /* numeric substitution */
	kfc_fmt fmt;
	const char *from; /* the source text, e.g. "N+1", for notes */
	size_t fromlen;
} kfc_subst;

typedef struct kfc_def {
	int var;
	int group;        /* capture group of the definition */
	bool numeric;
} kfc_def;

/* rematch.c: a compiled regex (the canonical ERE regex.c writes). */
#define KFC_RE_BUDGET 20000000 /* backtracking steps of one search */
typedef struct kfc_re {
	struct kfc_inst *prog;
	int n, cap;
	uint64_t (*sets)[4];
	int nsets;
	int ngroups, nreg;
	bool backrefs, icase;
	bool skip;            /* first[] holds every byte a match can begin with */
	uint64_t first[4];
	char *lit;            /* bytes every match contains, in a row (nlit >= 2) */
	size_t nlit;
	bool oneline;         /* no match can hold a newline */
	bool have_posix;      /* posix: the same regex for glibc, to take captures */
	regex_t posix;
} kfc_re;
/* 0, or -1 when the regex cannot compile (too large, malformed). */
int kfc_re_compile(kfc_re *re, const char *s, size_t n, bool icase);
/* The leftmost-longest match in b[0, n) with REG_NEWLINE's rules, groups
 * into m[0, nm): 0 found, 1 none, -1 over the backtracking budget (a
 * regex with backreferences). */
int kfc_re_exec(const kfc_re *re, const char *b, size_t n, size_t nm, regmatch_t *m);
void kfc_re_free(kfc_re *re);

typedef struct kfc_pattern {
	int kind, count;
	bool literal;
	int line;             /* check-file line (0 for command-line patterns) */
	int imp;              /* --implicit-check-not index + 1, else 0 */
	const char *loc;      /* where the pattern text starts */
	const char *prefix;   /* "CHECK", or "IMPLICIT-CHECK" */
	size_t prefixlen;
	bool is_fixed;
	const char *fixed;
	size_t fixedlen;
	const char *re;       /* regex template (glibc ERE) */
	size_t relen;
	kfc_subst *subs;
	int nsubs;
	kfc_def *defs;
	int ndefs;
	bool has_var;
	bool dead;            /* can never match (see kfc_regex_translate) */
	int ngroups;
	kfc_re rx;            /* compiled once when there are no substitutions */
	int rx_state;         /* 0 not yet, 1 ok, -1 failed */
} kfc_pattern;

/* One non-DAG/NOT directive with the DAG/NOT directives that precede it. */
typedef struct kfc_check {
	kfc_pattern *pat;
	kfc_pattern **dagnot;
	int ndagnot;
} kfc_check;

/* ---- the run ------------------------------------------------------------------ */

enum { KFC_DUMP_FAIL, KFC_DUMP_ALWAYS, KFC_DUMP_NEVER };
enum { KFC_FILTER_DEFAULT, KFC_FILTER_ALL, KFC_FILTER_ANNOT_FULL, KFC_FILTER_ANNOT, KFC_FILTER_ERROR };

/* Kinds of match result, as FileCheckDiag::MatchType. */
enum {
	KFC_M_FOUND, KFC_M_EXCLUDED_FOUND, KFC_M_WRONG_LINE, KFC_M_DISCARDED,
	KFC_M_NONE_OK, KFC_M_NONE, KFC_M_INVALID, KFC_M_FUZZY
};

typedef struct kfc_diag {
	const kfc_pattern *pat;
	int kind;          /* the directive kind (EOF for the implicit end) */
	int mtype;
	size_t start, end; /* input offsets */
	const char *note;  /* arena; NULL for the marker's own note */
} kfc_diag;

typedef struct kfc_opts {
	const char **prefixes;
	int nprefixes;
	const char **comments;
	int ncomments;
	const char **implicit_not;
	int nimplicit_not;
	const char **defines;
	int ndefines;
	bool match_full_lines, strict_ws, ignore_case, allow_empty;
	bool var_scope, dag_overlap, verbose, vverbose;
	int dump, filter, context;
} kfc_opts;

typedef struct kfc_ctx {
	kfc_arena arena;
	kfc_opts o;
	kfc_file check, input;
	kfc_file **extra;  /* command-line buffers */
	int nextra, capextra;
	kfc_var *vars;
	int nvars, capvars;
	kfc_check *checks;
	int nchecks, capchecks;
	kfc_diag *diags;   /* only kept when the input will be dumped */
	int ndiags, capdiags;
	bool record;
	bool failed;
} kfc_ctx;

/* diag.c */
void kfc_msg(kfc_ctx *c, const char *at, const char *rend, const char *sev,
	const char *fmt, ...) __attribute__((format(printf, 5, 6)));
void kfc_file_linecol(kfc_file *f, size_t off, size_t *line, size_t *col);
kfc_file *kfc_file_of(kfc_ctx *c, const char *p);
void kfc_record(kfc_ctx *c, const kfc_pattern *p, int mtype, size_t start,
	size_t end, const char *note);
void kfc_dump_input(kfc_ctx *c);
void kfc_write_escaped(kfc_str *s, const char *p, size_t n);

/* parse.c */
bool kfc_parse_checks(kfc_ctx *c);
const char *kfc_kind_name(const kfc_pattern *p, kfc_str *out); /* "CHECK-NEXT" */

/* pattern.c */
kfc_file *kfc_add_buffer(kfc_ctx *c, const char *name, const char *text, size_t n);
bool kfc_pattern_parse(kfc_ctx *c, kfc_pattern *p, const char *s, size_t n);
int kfc_var_find(kfc_ctx *c, const char *name, size_t n);
int kfc_var_add(kfc_ctx *c, const char *name, size_t n, bool numeric);
bool kfc_define_cmdline(kfc_ctx *c);

/* A match result: position and length relative to the searched buffer. */
typedef struct kfc_err {
	const char *at;
	char msg[160];
} kfc_err;
enum { KFC_MATCH, KFC_NOMATCH, KFC_MERROR };
int kfc_pattern_match(kfc_ctx *c, kfc_pattern *p, const char *buf, size_t n,
	size_t *pos, size_t *len, kfc_err *errs, int *nerrs, int maxerrs);
void kfc_print_substs(kfc_ctx *c, kfc_pattern *p, const char *at, int mtype);
void kfc_pattern_free(kfc_pattern *p);
/* Bytes that every match of p contains, when no match of p can hold a
 * newline: a search may then begin at the start of the line where they
 * first occur.  false when p has no such bytes (or uses substitutions or
 * --ignore-case). */
bool kfc_pattern_literal(kfc_ctx *c, kfc_pattern *p, const char **lit, size_t *n);

/* dagscan.c: CHECK-DAG without repeated scans.  hint[i]: where pattern i's
 * first search from buf may begin (0: at buf); the memo: searches done. */
void kfc_dag_hints(kfc_ctx *c, kfc_pattern **pats, int np, const char *buf, size_t n, size_t *hint);
typedef struct kfc_dag_memo kfc_dag_memo;
kfc_dag_memo *kfc_dag_memo_new(void);
void kfc_dag_memo_free(kfc_dag_memo *m);
bool kfc_dag_memo_get(kfc_dag_memo *m, const kfc_pattern *p, size_t from, int *r, size_t *pos, size_t *len);
void kfc_dag_memo_put(kfc_dag_memo *m, const kfc_pattern *p, size_t from, int r, size_t pos, size_t len);

/* regex.c */
/* Translates one {{...}} or [[V:...]] regex (LLVM ERE) to glibc ERE, appended
 * to out; on an invalid regex returns false with LLVM's message in err.
 * first is the absolute number its first group gets in the combined regex,
 * wrapped says group first-1 encloses it; ngroups gets its own group count;
 * dead is set when a backreference names a group still open in the combined
 * regex (FileCheck's combined regex then fails to compile: never matches). */
bool kfc_regex_translate(const char *s, size_t n, int first, bool wrapped,
	kfc_str *out, int *ngroups, bool *dead, const char **err);
void kfc_regex_escape(kfc_str *out, const char *s, size_t n);

/* expr.c */
bool kfc_expr_block(kfc_ctx *c, const char *s, size_t n, bool legacy, int line,
	kfc_expr **expr, kfc_fmt *fmt, int *defvar, const char **defname, size_t *deflen);
bool kfc_expr_eval(kfc_ctx *c, const kfc_expr *e, int line, int64_t *out,
	kfc_err *errs, int *nerrs, int maxerrs);
bool kfc_fmt_value(kfc_fmt f, int64_t v, kfc_str *out); /* false: overflow */
void kfc_fmt_wildcard(kfc_fmt f, kfc_str *out);
int64_t kfc_fmt_parse(kfc_fmt f, const char *s, size_t n);

/* match.c */
bool kfc_check_input(kfc_ctx *c);

#endif
