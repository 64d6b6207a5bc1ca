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

#endif
