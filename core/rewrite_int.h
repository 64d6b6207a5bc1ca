/* rewrite_int.h: internals of the rewrite engine shared by its files
 * (rewrite_driver.c applies rules, rewrite_trace.c writes what happened). */
#ifndef KF_REWRITE_INT_H
#define KF_REWRITE_INT_H

#include "rewrite.h"

/* "rewrite 'name' at file:l:c: mul erf add -> gelu". */
void kf_rwt_rewrite(kf_buf *b, const kf_graph *g, const kf_rule *r, kf_nid root, const kf_match *m,
		    const kf_rewriter *rw);
/* trace=2: "  'name' at file:l:c: why". */
void kf_rwt_reject(kf_buf *b, const kf_graph *g, const kf_rule *r, kf_nid n, const char *why);
/* --trace-rule: one candidate root n of rule r and what became of it: the
 * outcome given, else how far match m got and why it stopped. */
void kf_rwt_candidate(kf_buf *b, const kf_graph *g, const kf_rule *r, kf_nid n, const kf_match *m,
		      const char *outcome);

/* ---- rewrite_attr.c ---- */

/* The value op uses when attribute key is absent (docs/ops.md). */
bool kf_rwa_attr_default(const kf_ctx *c, int op, const char *key, kf_attrval *v);
/* Loose equality: numbers by value within rtol, axes as normalised sets
 * (of a rank-`rank` operand), lists element-wise. */
bool kf_rwa_attr_match(const kf_attrval *pa, const kf_attrval *na, bool axes, int rank, double rtol);
bool kf_rwa_close_to(double a, double b, double rtol);
/* The one value of a constant node whose elements are all equal. */
bool kf_rwa_const_scalar(const kf_graph *g, kf_nid n, double *v);
/* Shape c broadcasts into shape r without widening it. */
bool kf_rwa_broadcasts_into(const kf_type *c, const kf_type *r);

/* Type variables' values and which are bound (bit i: variable i). */
typedef struct kf_rw_tvars {
	int64_t val[KF_PAT_MAXTVAR];
	uint32_t bound;
} kf_rw_tvars;

/* Binds type variable i to x (the new binding in *newly), or checks it. */
bool kf_rwa_bind_tv(kf_rw_tvars *tv, int i, int64_t x, uint32_t *newly);
void kf_rwa_unbind_tv(kf_rw_tvars *tv, uint32_t newly);
/* Whether t satisfies constraint pt, binding type variables (undone on
 * failure). */
bool kf_rwa_type_ok(kf_rw_tvars *tv, const kf_ptype *pt, const kf_type *t, uint32_t *newly);
/* The constraint as written: "T[..., N, 4]". */
void kf_rwa_ptype_str(kf_buf *b, const kf_pattern *p, const kf_ptype *t);

/* ---- rewrite_hash.c ---- */

/* The region a match covers (m given: its nodes are inside) or a rewrite
 * built (m NULL: nodes >= mark are inside), from its outputs. */
uint64_t kf_rw_region_hash(const kf_graph *g, const kf_match *m, kf_nid mark, const kf_vid *out, uint32_t nout);

/* A built region (key h), the region it started from, and the rule. */
typedef struct kf_rw_seen_ent {
	uint64_t h, from;
	uint32_t rule; /* +1; 0: empty */
} kf_rw_seen_ent;

typedef struct kf_rw_seen {
	kf_rw_seen_ent *ent;
	uint32_t cap, n;
} kf_rw_seen;

/* The earlier rewrite that built region h, or NULL. */
const kf_rw_seen_ent *kf_rw_seen_find(const kf_rw_seen *s, uint64_t h);
void kf_rw_seen_add(kf_rw_seen *s, uint64_t h, uint64_t from, uint32_t rule);

/* ---- the driver (rewrite_driver.c, rewrite_transform.c) ---- */

typedef struct kf_rw_driver {
	kf_graph *g;
	const kf_ruleset *rs;
	const kf_rw_opts *o;
	kf_rw_stats *st;
	uint32_t **byop;   /* per op: rule indices by benefit */
	uint32_t *nbyop;
	int16_t (*want)[2]; /* per rule: ops its root's two operands need, -1 any, -2 no check */
	uint8_t *acleaf;   /* per rule: the leaves of its root's AC chain, 0 when none */
	uint8_t *maxleaf;  /* per op: the most leaves of an AC root on it */
	int nop;
	int depth;         /* deepest pattern */
	kf_nid *wl; uint32_t nwl, capwl;
	uint8_t *inwl; uint32_t capin;
	kf_rw_seen seen;   /* the regions rewrites built, and what from */
	uint32_t recent[64]; uint32_t nrecent;
	uint64_t max_rewrites;
	uint64_t max_steps;
	const kf_rule *hungriest; /* the rule whose match took the most steps */
	uint32_t most_steps;
	bool changed;
	uint8_t *warned;   /* per rule: reported its replacement's type (1), a search that gave up (2) */
	kf_rw_order ord;   /* node positions: builders place after operands, transforms are checked */
	bool ordered;      /* ord is kept: the set has transforms (a rule's nodes go before its root) */
} kf_rw_driver;


/* Pushes n on the worklist (once); the users of v up to depth levels. */
void kf_rwd_wl_push(kf_rw_driver *d, kf_nid n);
void kf_rwd_push_users(kf_rw_driver *d, kf_vid v, int depth);
/* Erases n and pushes its operands' producers. */
void kf_rwd_erase_node(kf_rw_driver *d, kf_nid n);
bool kf_rwd_node_unused(const kf_graph *g, kf_nid n);
void kf_rwd_trace_rewrite(kf_rw_driver *d, const kf_rule *r, kf_nid root, const kf_match *m,
			  const kf_rewriter *rw);
void kf_rwd_trace_candidate(kf_rw_driver *d, const kf_rule *r, kf_nid n, const kf_match *m, const char *outcome,
			    bool failed);
kf_rw_rulestat *kf_rwd_rstat(kf_rw_driver *d, const kf_rule *r);
void kf_rwd_note_fired(kf_rw_driver *d, const kf_rule *r);
/* The value made in place of `from` takes its name. */
void kf_rwd_keep_name(kf_graph *g, kf_vid from, kf_vid to, kf_nid mark);
/* Rolls rw back and notes the rule and node: -1. */
int kf_rwd_fail_rule(kf_rw_driver *d, kf_rewriter *rw, kf_nid n, const char *what);
/* Applies transform r at n: 1 changed, 0 not, -1 error (rolled back). */
int kf_rwd_apply_transform(kf_rw_driver *d, const kf_rule *r, kf_nid n);

#endif
