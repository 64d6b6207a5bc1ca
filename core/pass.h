/* pass.h: graph passes and the pass manager.
 *
 * A pass is a const struct exported by its file (`const kf_pass kf_pass_cse`)
 * and listed in passes/registry.c.  A pipeline is text:
 *
 *     canonicalize,cse,rules{path=patterns,max-iter=10},dce
 *
 * Passes are separated by ',' at the top level; options are `key=value` pairs
 * (a bare `key` means `key=true`) inside braces; values run up to the next
 * ',' or '}' outside quotes, and may be "quoted" to hold those characters.
 * The manager runs pass-major: each pass over every graph of the module, so
 * that the IR can be printed whole between passes.
 *
 * The manager does not print: IR dumps go through a callback the tool gives,
 * timings into a table the tool renders, and pass logs (--trace-rewrites,
 * fusion explanations, summaries) into a kf_buf the tool prints.
 */
#ifndef KF_PASS_H
#define KF_PASS_H

#include "kf.h"

typedef struct kf_passopt {
	const char *key, *val;
} kf_passopt;

/* Flags the tool sets for every pass of a run (each pass reads what it uses). */
enum {
	KF_PASSF_TRACE = 1 << 0,   /* --trace-rewrites: one log line per rewrite */
	KF_PASSF_EXPLAIN = 1 << 1, /* --explain-fusion */
};

typedef struct kf_pass kf_pass;

/* What a pass's run() sees besides the graph. */
typedef struct kf_passopts {
	const kf_pass *pass;
	uint32_t n;
	const kf_passopt *kv;  /* options as written, in order */
	uint32_t flags;        /* KF_PASSF_* */
	kf_buf *log;           /* text for the user; NULL when nobody listens */
	void *state;           /* set by pass->begin, freed by pass->end */
	kf_loc loc;            /* the pass's position in the pipeline text */
} kf_passopts;

struct kf_pass {
	const char *name;
	const char *doc;          /* one line */
	const char *const *opts;  /* NULL-terminated option names; NULL: none; "*": any name */
	/* Runs on one graph; sets *changed when it changed anything.  Returns 0,
	 * or -1 after adding errors to the context. */
	int (*run)(kf_graph *g, const kf_passopts *o, bool *changed);
	/* Optional: once before and after the pass runs over the graphs of a
	 * module (load scripts, check options, free o->state). */
	int (*begin)(kf_ctx *c, kf_passopts *o);
	void (*end)(kf_ctx *c, kf_passopts *o);
};

/* Option values.  A malformed value is an error naming the pass and option;
 * the functions then return dflt, and kf_passopt_ok tells the pass to stop. */
const char *kf_passopt_str(const kf_passopts *o, const char *key, const char *dflt);
int64_t kf_passopt_int(kf_ctx *c, const kf_passopts *o, const char *key, int64_t dflt);
bool kf_passopt_bool(kf_ctx *c, const kf_passopts *o, const char *key, bool dflt);
/* A level 0, 1, 2, ...: an integer, or true (a bare key) for 1, false for 0. */
int64_t kf_passopt_level(kf_ctx *c, const kf_passopts *o, const char *key, int64_t dflt);
double kf_passopt_float(kf_ctx *c, const kf_passopts *o, const char *key, double dflt);

/* ---- the set of known passes ------------------------------------------- */

/* The built-in table comes from passes/registry.c (kf_passes_builtin); a
 * plugin adds its passes with kf_passreg_add. */
typedef struct kf_passreg {
	const kf_pass **p;
	uint32_t n, cap;
} kf_passreg;

/* Adds a pass; a later pass of the same name replaces the earlier one. */
void kf_passreg_add(kf_passreg *r, const kf_pass *p);
const kf_pass *kf_passreg_find(const kf_passreg *r, const char *name, size_t n);
void kf_passreg_free(kf_passreg *r);

/* ---- pipelines ------------------------------------------------------------ */

typedef struct kf_pipeline kf_pipeline;

/* Parses pipeline text (an empty text is an empty pipeline).  Errors (unknown
 * pass, listing the valid ones; unknown option, listing the pass's; syntax)
 * point into a source named "<pipeline>".  NULL on error. */
kf_pipeline *kf_pipeline_parse(kf_ctx *c, const kf_passreg *r, const char *text);
void kf_pipeline_free(kf_pipeline *p);
uint32_t kf_pipeline_len(const kf_pipeline *p);
const kf_pass *kf_pipeline_pass(const kf_pipeline *p, uint32_t i);
/* Appends one pass to a pipeline (for tools and tests that build it in C). */
void kf_pipeline_append(kf_pipeline *p, const kf_pass *pass, const kf_passopt *kv, uint32_t n);
kf_pipeline *kf_pipeline_new(kf_ctx *c);

/* One row of the timing table. */
typedef struct kf_timing_row {
	const char *name;   /* static or owned by the table */
	double seconds;
} kf_timing_row;

typedef struct kf_timing {
	kf_timing_row *row;
	uint32_t n, cap;
} kf_timing;

void kf_timing_add(kf_timing *t, const char *name, double seconds);
/* The table: one row per entry (a pass run twice has two; with verify_each a
 * "(verify-each)" row follows each pass), then a total. */
void kf_timing_render(const kf_timing *t, kf_buf *out);
void kf_timing_free(kf_timing *t);
double kf_now(void); /* monotonic seconds */

typedef enum {
	KF_DUMP_BEFORE, KF_DUMP_AFTER
} kf_dump_when;

/* How to run a pipeline.  verify_each verifies each graph a pass changed
 * (a pass that reports no change is trusted to have left it alone).  Print conditions: after every pass (after_all),
 * after a pass that changed something (after_change), before/after the passes
 * named in before/after (comma-separated names). */
typedef struct kf_runopts {
	bool verify_each;
	bool after_all, after_change;
	const char *before, *after;
	uint32_t flags;       /* KF_PASSF_*, handed to every pass */
	kf_buf *log;          /* pass logs; may be NULL */
	kf_timing *timing;    /* one row per pass when non-NULL */
	/* Called to print the module (the tool prints); NULL: no dumps. */
	void (*dump)(void *ud, kf_module *m, const kf_pass *p, kf_dump_when when);
	void *ud;
} kf_runopts;

/* Runs each pass over each graph of m.  Returns 0, or -1 when a pass failed
 * or the verifier found the graph broken after a pass (with a note naming
 * the pass); the errors are in the context. */
int kf_pipeline_run(kf_pipeline *p, kf_module *m, const kf_runopts *ro);

#endif
