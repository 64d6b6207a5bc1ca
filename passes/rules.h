/* rules.h: the `rules` pass (kf_pass_rules, in registry.c) and the runner
 * of the examples embedded in rule files. */
#ifndef KF_RULES_H
#define KF_RULES_H

#include "lua_rules.h"
#include "pass.h"

extern const kf_pass kf_pass_rules;

/* Runs every embedded example of r: parses `before`, applies the rules of
 * its file, and compares the result structurally with `after` (value
 * names, node order, commutative operand order and dead nodes aside).
 * Appends a report per failing example to log.  Returns the number of
 * failures, or -1 when an example could not run (errors in the context);
 * *nrun is the number run. */
int kf_rules_run_examples(kf_lrules *r, kf_buf *log, uint32_t *nrun);

#endif
