/* lua_rules.h: fusion rules written in Lua (docs/rules.md).
 *
 * A rule file declares rules, transforms and ops:
 *
 *     rule { name = "gelu-tanh", benefit = 2,
 *            pattern = function(x) return 0.5 * x * (1 + tanh(...)) end,
 *            replace = function(x) return gelu(x, {approximate = "tanh"}) end,
 *            where = function(m) return m.x.dtype ~= "i32" end }
 *     transform { name = ..., on = "op", apply = function(g, node) ... end }
 *     op { name = ..., trait = ..., arity = ..., infer = ..., cpu = ..., cuda = "..." }
 *     examples = { {before = "...", after = "..."} }
 *
 * Patterns and replacements are traced once into kf_pattern graphs (see
 * rewrite.h); Lua runs again only for `where`, for replacements that read
 * per-match facts, and for transforms.  Scripts run in one sandboxed state
 * per context (base, string, table and math only; text chunks only;
 * `require` inside the rule path; instruction and memory budgets).
 */
#ifndef KF_LUA_RULES_H
#define KF_LUA_RULES_H

#include "rewrite.h"

typedef struct kf_lrules kf_lrules;

/* Loads one .lua file, or every *.lua file of a directory in name order
 * (its subdirectories hold modules for `require`).  The result is owned by
 * the context's Lua host and cached by path: loading a path twice gives the
 * same rules.  NULL with errors in the context. */
kf_lrules *kf_lua_rules_load(kf_ctx *c, const char *path);
const kf_ruleset *kf_lua_rules_set(const kf_lrules *r);
kf_ctx *kf_lrules_ctx(const kf_lrules *r);
/* The rules of the i-th file of r into out (a view); false past the end.
 * *path is set to the file's path. */
bool kf_lua_rules_file(const kf_lrules *r, uint32_t i, kf_ruleset *out, const char **path);

/* An embedded example: a graph before and after the rules of its file. */
typedef struct kf_rule_example {
	char *before, *after;   /* .kf texts (owned) */
	size_t nbefore, nafter;
	const char *path;       /* the rule file */
	const char *rule;       /* the rule that carries it, or NULL (the file) */
	uint32_t index;         /* 1-based, within its examples table */
	kf_ruleset rules;       /* the file's rules (a view, owned) */
} kf_rule_example;

/* The k-th example of r (a file's examples, then its rules', file by file):
 * 1, 0 past the end, -1 on a malformed one (error in the context).  The
 * `rules` pass's file runs them (passes/rules.h: kf_rules_run_examples). */
int kf_lua_rules_example(kf_lrules *r, uint32_t k, kf_rule_example *ex);
void kf_rule_example_free(kf_rule_example *ex);

/* A global function of r's first rule file used as a hook by a pass (the
 * fuse pass's can_fuse(producer, consumer)): called with two node handles,
 * it answers 1 (true), 0 (false) or -1 (nil: no opinion); -2 on an error
 * (in the context) or when the file defines no such function. */
int kf_lua_hook_nodes(kf_lrules *r, const char *name, kf_graph *g, kf_nid a, kf_nid b);

/* A policy read from Lua: for each file of r in load order (numbered from
 * 0), the global table `global` = {key = {"item", ...}, ...} gives one call
 * fn(ud, file, key, item) per item (keys in no set order).  fn returns NULL,
 * or why the item is refused (reported at the file).  A file without the
 * global gives no calls.  0, or -1 with an error in the context. */
typedef const char *(*kf_lua_list_fn)(void *ud, uint32_t file, const char *key, const char *item);
int kf_lua_table_lists(kf_lrules *r, const char *global, kf_lua_list_fn fn, void *ud);
/* Calls from C into Lua since the context's host started. */
uint64_t kf_lua_entries(kf_ctx *c);

/* Budgets for scripts run from now on (0 keeps a value): instructions per
 * call, bytes one call may add, bytes of the whole state. */
void kf_lua_set_limits(kf_ctx *c, uint64_t instructions, size_t call_bytes, size_t total_bytes);

/* ---- for kfuse-verify-rules ---- */

/* The i-th set of input types rule r asks to be verified with (its
 * `verify = { {x = "f32[4,8]", w = "const f32[8]", eps = "const f32[]=1e-5"}, ... }`),
 * one per pattern variable; konst[k] says the variable is to be a constant,
 * value[k] its value (a splat) or NaN (random): 1, 0 when there is no i-th
 * set, -1 on a malformed one (error in ctx). */
int kf_lua_rule_verify_types(const kf_rule *r, uint32_t i, kf_type *types, bool *konst, double *value);
/* True for a rule declared with verify = false (its pattern has open
 * attributes a random graph cannot stand for; its examples check it). */
bool kf_lua_rule_verify_off(const kf_rule *r);
/* Tolerances the rule asks for (`tolerance = {rtol = , atol = }`). */
void kf_lua_rule_tolerance(const kf_rule *r, double *rtol, double *atol);

/* Structural equality of two graphs: same signature, and each result
 * computed by the same ops, attributes and constants from the same inputs
 * (value names, node order, commutative operand order and dead nodes do not
 * matter).  On a difference, says which result in why. */
bool kf_graph_same(kf_graph *a, kf_graph *b, kf_buf *why);

#endif
