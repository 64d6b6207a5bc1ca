/* covers.c: one rule set against another (--covers OLD): the pattern of
 * every rule of OLD, built for each of its type sets, is rewritten by all
 * of OLD and by all of the new rules, and the results must be the same
 * graph (kf_graph_same: names, node order and commutative operand order
 * aside).  This is how a smaller rule file is shown to do what a larger one
 * did (patterns/gelu.lua against tests/rules/covers/gelu-24.lua).
 */
#include <string.h>

#include "verify.h"

int kfv_covers(kf_ctx *c, const kf_ruleset *old, const kf_ruleset *now, const vopts *o, kf_buf *out,
	       uint64_t *nchecked)
{
	int bad = 0;
	*nchecked = 0;
	for (uint32_t i = 0; i < old->n && bad < 3; i++) {
		const kf_rule *r = old->rule[i];
		if (!r->pat || kf_lua_rule_verify_off(r))
			continue;
		vspec vs[KF_PAT_MAXNODE];
		for (uint32_t k = 0; kfv_config(r, k, vs) > 0; k++) {
			char why[256];
			kf_graph *a = kfv_pattern_graph(c, r, r->pat, vs, o->seed + k, why, sizeof why);
			kf_graph *b = kfv_pattern_graph(c, r, r->pat, vs, o->seed + k, why, sizeof why);
			int na = a ? kfv_apply(old, a) : 0, nb = b ? kfv_apply(now, b) : 0;
			if (na < 0 || nb < 0) {
				kf_graph_free(a);
				kf_graph_free(b);
				return -1;
			}
			kf_diag_clear(c);
			if (na > 0) {
				kf_buf diff = {0};
				++*nchecked;
				if (!kf_graph_same(a, b, &diff)) {
					bad++;
					kf_buf_printf(out, "%s: the pattern of rule '%s', for ", r->origin, r->name);
					kfv_describe(out, c, r->pat, vs);
					kf_buf_printf(out, ", is rewritten otherwise by the new rules (%s)%s\n",
						      diff.p ? diff.p : "?", nb ? "" : ": they do not match it");
				}
				kf_buf_free(&diff);
			}
			kf_graph_free(a);
			kf_graph_free(b);
		}
	}
	return bad ? 1 : 0;
}
