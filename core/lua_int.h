/* lua_int.h: internals shared by the Lua bridge (lua_sandbox.c, lua_graph.c,
 * lua_rules.c, lua_ops.c) and plugin.c.  Not for other modules: they use
 * lua_rules.h and plugin.h. */
#ifndef KF_LUA_INT_H
#define KF_LUA_INT_H

#include <lauxlib.h>
#include <lua.h>

#include "lua_rules.h"
#include "rewrite.h"

/* What the Lua code running now may do. */
typedef enum {
	KF_LM_LOAD,     /* running a rule file: declarations */
	KF_LM_PATTERN,  /* tracing a pattern: ops build pattern nodes */
	KF_LM_REPLACE,  /* tracing a replacement once */
	KF_LM_WHERE,    /* checking a match: values are read-only */
	KF_LM_BUILD,    /* replace or transform: ops build graph nodes */
	KF_LM_OP,       /* an op's infer or cpu function */
} kf_lmode;

/* A rule's Lua side (kf_rule.user). */
typedef struct kf_lrule {
	kf_rule r;
	struct kf_lhost *h;
	int where_ref, replace_ref, apply_ref, verify_ref, examples_ref;
	uint32_t file;          /* index in h->file */
	kf_loc loc;             /* where rule{} was called */
	double vrtol, vatol;    /* verification tolerances */
	bool no_verify;         /* verify = false */
} kf_lrule;

typedef struct kf_lfile {
	char *path;
	kf_srcid src;
	bool module;            /* loaded by require */
	int env_ref;            /* its environment (globals such as can_fuse) */
	int examples_ref;       /* LUA_NOREF when the file has none */
	uint32_t first, n;      /* its rules in h->rule */
} kf_lfile;

/* An op defined by op{} (kf_opinfo.user). */
typedef struct kf_lop {
	struct kf_lhost *h;
	int op;
	char *name, *cuda, *attrs, *doc;
	int infer_ref, cpu_ref;
	bool reduce;            /* trait reduce: cpu takes the values reduced into one element */
	kf_loc loc;
} kf_lop;

struct kf_lrules {
	struct kf_lhost *h;
	char *path, *root;      /* as given; the directory `require` reads */
	char *realroot;         /* root with links resolved: no script is read outside it */
	bool broken;            /* a file failed to load */
	uint32_t first, nfile;  /* its files in h->file */
	kf_ruleset set;
};

/* The Lua host of a context: one sandboxed state for every rule file and op
 * plugin loaded into the context. */
typedef struct kf_lhost {
	kf_ctx *ctx;
	lua_State *L;
	size_t mem, mem_cap, mem_limit; /* bytes in use, overall cap, cap now */
	size_t call_budget;             /* bytes one callback may add */
	uint64_t instr, instr_limit;    /* instructions this callback, its cap */
	double time_limit, deadline;    /* seconds per call; when this one ends (0: none) */
	uint32_t depth;                 /* kf_lcall nesting (an op's infer inside replace) */
	bool sys_oom;                   /* an allocation failed for want of memory, not budget */
	char what[160];                 /* "rule 'x'": who runs now, for messages */
	kf_lmode mode;
	kf_pattern *trace;              /* PATTERN/REPLACE: the graph being traced */
	uint64_t trace_gen, ntrace;     /* the trace's generation (0: none), traces so far */
	bool dynamic;                   /* a replacement read per-match facts */
	kf_rewriter *rw;                /* BUILD: the rewrite in progress */
	uint64_t session;               /* bumps when a rewrite ends: handles go stale */
	kf_arena scratch;               /* attribute lists of one builder call */
	const char *root, *realroot;    /* directory `require` reads; resolved, the confinement */
	uint32_t cur_file;
	uint64_t entries;               /* calls into Lua from C */
	kf_lfile *file; uint32_t nfile, capfile;
	kf_lrule **rule; uint32_t nrule, caprule;
	kf_lrules **set; uint32_t nset, capset;
	kf_lop **op; uint32_t nop, capop;
} kf_lhost;

/* ---- lua_sandbox.c ---- */
kf_lhost *kf_lhost_new(kf_ctx *c);
void kf_lhost_free(kf_lhost *h);
/* Runs the function below nargs arguments in a protected call with the
 * limits for h->what (a rule, a file, an op).  0, or -1 with the error in
 * err when given, else in the context at the script position the message
 * names (or at `at`).  [-(nargs+1), +nres on success | +0 on error, -] */
int kf_lcall(kf_lhost *h, int nargs, int nres, kf_loc at, char *err, size_t errlen);
/* A location for "file:line" in a loaded script (col 1), or KF_NOLOC. */
kf_loc kf_lloc(kf_lhost *h, const char *file, int line);
/* The sandbox environment of a new file or module: its own copies of the
 * whitelist, op builders through a locked metatable, and a `require` over
 * the module cache at stack index cache (0: a new one).  [-0, +1, m] */
void kf_lnewenv(kf_lhost *h, int cache);
/* Charges steps of work done in C to the running script's instruction
 * budget; raises the budget's error when it is spent.  [-0, +0, v] */
void kf_lcharge(lua_State *L, uint64_t steps);
/* lua_strlib.c: the library functions that loop in C, counted, installed
 * into the string and table library tables at the two indices. */
void kf_lstrlib_open(lua_State *L, int string, int table);
/* Loads and runs a rule file (text only) in a fresh environment.  [-0, +0, -] */
int kf_lrun_file(kf_lhost *h, const char *path);

/* ---- lua_graph.c: values, nodes, the graph API, builders (lua_types.c:
 * types and attributes) ---- */
void kf_lgraph_open(lua_State *L);            /* metatables, builder functions */
/* A traced value of the trace running now (h->trace, h->trace_gen). */
void kf_lpush_sym(kf_lhost *h, kf_pv pv);
void kf_lpush_value(kf_lhost *h, kf_graph *g, kf_vid v);
void kf_lpush_node(kf_lhost *h, kf_graph *g, kf_nid n);
void kf_lpush_graph(kf_lhost *h, kf_graph *g);
/* The sym / value at idx, or NULL. */
/* A traced value is valid only in the trace that made it: the generation,
 * not the pattern's address, says which (a freed pattern's address is
 * reused by the next one, so a kept value would pass an address check). */
struct kf_lsym { uint64_t gen; kf_pv pv; };
struct kf_lval { uint64_t session; kf_graph *g; kf_vid v; };
struct kf_lsym *kf_ltosym(lua_State *L, int idx);
struct kf_lval *kf_ltoval(lua_State *L, int idx);
/* Pushes the op builder of op id (cached).  [-0, +1, m] */
void kf_lpush_builder(lua_State *L, int op);
/* A Lua table of attributes at idx into a kf_attr array in h->scratch.
 * Keys in `skip` (space-separated) are left out.  [-0, +0, v] */
uint32_t kf_ltoattrs(kf_lhost *h, int idx, kf_attr **out, const char *skip);
/* One attribute value from Lua (boolean, number, string, list) into
 * h->scratch, and back.  [-0, +0, v] / [-0, +1, m] */
kf_attrval kf_ltoattrval(kf_lhost *h, lua_State *L, int idx, int depth);
void kf_lpush_attrval(lua_State *L, const kf_ctx *c, const kf_attrval *v);
/* Pushes a type as {dtype=, shape=, rank=}.  [-0, +1, m] */
void kf_lpush_type(lua_State *L, const kf_ctx *c, const kf_type *t);
/* A type from "f32[4,N]" or a {dtype=, shape=} table.  [-0, +0, v] */
kf_type kf_ltotype(lua_State *L, kf_ctx *c, int idx);
/* A constant built by rw from the Lua value at vidx (a number, or a nested
 * list of numbers) typed by tidx ("f32", "f32[2,3]", {dtype=, shape=}, or
 * none: f32); see g:const in docs/rules.md.  [-0, +0, v] */
kf_vid kf_ltodense(lua_State *L, kf_lhost *h, kf_rewriter *rw, int vidx, int tidx);
/* Parses "f32[4,N]"; false on a malformed text. */
bool kf_parse_type_str(kf_ctx *c, const char *s, kf_type *t);

/* The i-th rule file (not module) of r and its rules (a view).  */
bool kf_lrules_file_at(const kf_lrules *r, uint32_t i, kf_ruleset *out, const char **path);

/* ---- lua_rules.c / lua_ops.c: the declarations ---- */
/* Raises an error naming any key of the table at idx not in `allowed`
 * (space-separated): a misspelt field must not be ignored.  [-0, +0, v] */
void kf_lcheck_fields(lua_State *L, int idx, const char *what, const char *allowed);
void kf_lrules_open(lua_State *L);            /* rule, transform, op */
int kf_lop_declare(lua_State *L);             /* op { ... } */
void kf_lop_detach(kf_lhost *h);              /* neuters Lua ops before the state goes */

kf_lhost *kf_lhost_of(lua_State *L);
/* The host of a context, created on first use (plugin.c). */
kf_lhost *kf_lhost_get(kf_ctx *c);

#endif
