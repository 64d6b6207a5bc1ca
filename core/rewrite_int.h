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

#endif
