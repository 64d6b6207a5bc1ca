/* verify.h: the parts of kfuse-verify-rules its files share: a rule's
 * pattern built as a graph for given variable types (main.c), every
 * operand order of it (orders.c), and a rule set checked against another
 * (covers.c). */
#ifndef KF_VERIFY_H
#define KF_VERIFY_H

#include "equiv.h"
#include "kf.h"
#include "lua_rules.h"
#include "rewrite.h"

typedef struct vopts {
	uint64_t seed;
	int trials;
	bool examples, rules, orders, verbose;
	bool low; /* also check each rule with f16 and bf16 operands (main.c) */
} vopts;

/* A variable typed "const f32[8]" in a verify entry becomes a random dense
 * constant (for rules whose where wants constants); others are inputs. */
typedef struct vspec {
	kf_type t;
	bool konst;
	double value; /* NaN: random */
} vspec;

/* The i-th set of variable types for rule r: its own `verify` entries,
 * else three defaults (f32[16], f32[4,8], f64[2,3,5]) shaped to its type
 * constraints.  1, 0 past the end, -1 on a malformed entry. */
int kfv_config(const kf_rule *r, uint32_t i, vspec *vs);
/* Pattern p (r's, or a variant of it) as a graph with variables typed vs;
 * NULL, with why, when it does not type-check with them. */
kf_graph *kfv_pattern_graph(kf_ctx *c, const kf_rule *r, const kf_pattern *p, const vspec *vs, uint64_t cseed,
			    char *why, size_t whylen);
/* "x: f32[16], w: const f32[8]". */
void kfv_describe(kf_buf *b, const kf_ctx *c, const kf_pattern *p, const vspec *vs);
/* Runs a and b on the same random inputs: 0 same, 1 different (reported to
 * rep), -1 error.  Judged by tol, or when it is NULL by the rule's own
 * rtol/atol (its f32 contract). */
int kfv_compare(kf_ctx *c, const kf_rule *r, kf_graph *a, kf_graph *b, uint64_t seed, const kf_equiv_tol *tol,
		kf_buf *rep);
/* Applies the rules of rs to g until done: the rewrites, or -1. */
int kfv_apply(const kf_ruleset *rs, kf_graph *g);

/* orders.c: builds rule r's pattern in every operand order of its
 * commutative ops and every grouping and order of its AC chains, and
 * checks that r rewrites each (and, for a sample, computes the same).
 * *norders gets the count checked.  0 all matched, 1 some did not
 * (reported to out), -1 error. */
int kfv_orders(kf_ctx *c, const kf_rule *r, const vopts *o, kf_buf *out, uint64_t *norders);

/* covers.c: every graph a rule of `old` rewrites (its pattern, for its
 * type sets, in every operand order), the rules of `now` rewrite to the
 * same graph.  *nchecked gets the graphs compared.  0, 1 (a difference,
 * reported to out), -1 error. */
int kfv_covers(kf_ctx *c, const kf_ruleset *old, const kf_ruleset *now, const vopts *o, kf_buf *out,
	       uint64_t *nchecked);

#endif
