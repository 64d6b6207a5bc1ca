/* dce.c: dead code elimination.
 *
 * Removes every node whose results are unused and whose op has no effect
 * (KF_OPF_EFFECT) and is not a terminator, in the graph body and in fusion
 * bodies.  Graph inputs and region arguments stay: they are signatures.
 * requires exact use lists; keeps the graph valid.  Linear: each block is
 * walked once backwards, so a chain of dead nodes goes in one sweep (users
 * come after their operands within a block, and regions are isolated). */
#include "passes.h"

static uint32_t dce_block(kf_graph *g, kf_bid b)
{
	uint32_t removed = 0;
	kf_nid n = g->blk[b].last;
	while (n != KF_NONE) {
		kf_nid prev = kf_N(g, n)->prev;
		if (!kf_pass_node_pinned(g, n) && kf_pass_node_dead(g, n)) {
			kf_node_erase(g, n);
			removed++;
		} else if (kf_N(g, n)->body != KF_NONE) {
			removed += dce_block(g, kf_N(g, n)->body);
		}
		n = prev;
	}
	return removed;
}

uint32_t kf_dce_graph(kf_graph *g) { return dce_block(g, 0); }

static int dce_run(kf_graph *g, const kf_passopts *o, bool *changed)
{
	uint32_t removed = kf_dce_graph(g);
	*changed = removed > 0;
	return 0;
}

const kf_pass kf_pass_dce = {
	.name = "dce",
	.doc = "remove nodes whose results are unused and that have no effects (also in fusion bodies)",
	.run = dce_run,
};
