/* passes.h: the built-in passes and what the tools need of them.
 *
 * A pass file exports `const kf_pass kf_pass_NAME` (see core/pass.h) and
 * adds one X(NAME) line to KF_PASS_LIST in registry.c. */
#ifndef KF_PASSES_H
#define KF_PASSES_H

#include "pass.h"

/* Adds every built-in pass to r, in registry order. */
void kf_passes_builtin(kf_passreg *r);

/* Graphviz text of a graph / of every graph of a module (passes/dot.c). */
void kf_dot_graph(kf_buf *out, kf_graph *g);
void kf_dot_module(kf_buf *out, kf_module *m);

/* Helpers shared by the graph passes (registry.c). */

/* A node no pass may remove or merge: a terminator or an op with effects. */
bool kf_pass_node_pinned(const kf_graph *g, kf_nid n);

/* specialize's work (passes/specialize.c): symbols sym[i] get sizes
 * val[i] (val[i] >= 0) in every type and dim attribute of g; *changed is
 * set when something changed.  The pass parses its options into this. */
void kf_specialize(kf_graph *g, const kf_sid *sym, const int64_t *val, uint32_t n, bool *changed);
/* The symbols of g's types (values' and results'), each once, in order of
 * first appearance, into out[0..max); returns how many there are (which
 * may be more than max). */
uint32_t kf_graph_symbols(const kf_graph *g, kf_sid *out, uint32_t max);
/* A copy of g (kf_graph_clone: same ids) with every symbol given a
 * distinct prime size near 1000: generic sizes, at which two dims are
 * equal only when they are equal as monomials, for the passes that decide
 * on numbers (fuse) to decide once for every size; NULL when g has no
 * symbol.  The copy is for looking at, not for running (a slice may end
 * past its operand).  When sym and val are given, the symbols and their
 * sizes go there (at most KF_PROBE_MAX; *n how many). */
#define KF_PROBE_MAX 16
kf_graph *kf_graph_probe(const kf_graph *g, kf_sid *sym, int64_t *val, uint32_t *n);
/* True when no result of n has a use. */
static inline bool kf_pass_node_dead(const kf_graph *g, kf_nid n)
{
	const kf_node *nd = kf_N(g, n);
	for (uint32_t i = 0; i < nd->nres; i++)
		if (kf_has_uses(g, nd->res0 + i))
			return false;
	return true;
}

/* Moves the top-level nodes mem[0..n) (in program order; every result of
 * a member is read only by members, except out, which the last member
 * computes) into a new `fusion @sym(...) {kind = kind}` node in the
 * place of the last member: its operands are the outside values the
 * members read (small constants are copied into the body instead, and
 * erased outside when nothing else reads them), its body the members with
 * their names, attributes and locations, its result out's uses.  Returns
 * the fusion node.  Each lookup is linear in the group, so a group should
 * be small (the fusion passes' are at most a few hundred nodes). */
kf_nid kf_pass_outline(kf_graph *g, const kf_nid *mem, uint32_t n, kf_vid out, const char *kind, kf_sid sym);

/* Removes the dead nodes of g (dce.c, what the dce pass runs); returns how
 * many.  The importer runs it on what it built. */
uint32_t kf_dce_graph(kf_graph *g);

/* ---- the persistent pass (recurrence*.c) ---- */

/* The `persistent` pass's last step (passes/recurrence_stack.c): chains
 * of persistent nodes (layers = 1) where each reads the sequence of the
 * one below through its hoisted input projection move, with those
 * projections, into one node {layers = L}; symbols from @k<next_sym>.
 * Returns the number of stacks made. */
int kf_rec_merge_stacks(kf_graph *g, int next_sym, kf_buf *log);
/* Two persistent layers that project one input and do not depend on each
 * other (a bidirectional layer's directions) become one node of two
 * layers {bidirectional = true}; returns how many pairs. */
int kf_rec_merge_pairs(kf_graph *g, int next_sym, kf_buf *log);

/* ---- constant folding (fold.c, for canonicalize) ---- */

/* The inline payload of v when v is defined by a `const` (not file()). */
const kf_const *kf_fold_const_of(const kf_graph *g, kf_vid v);
/* True when v is a constant whose elements are all equal; *out gets it. */
bool kf_fold_uniform(const kf_graph *g, kf_vid v, double *out);
/* True when v is a constant whose every element equals x. */
bool kf_fold_is(const kf_graph *g, kf_vid v, double x);
/* A splat constant of type tid holding v, inserted before node `before`. */
kf_vid kf_fold_splat(kf_graph *g, kf_nid before, kf_tid tid, double v);
/* Folds node n when it can (see fold.c): creates one const node per result
 * before n, writes their values to out and returns 1; 0 when n does not fold.
 * Uses of n are left for the caller to move. */
int kf_fold_node(kf_graph *g, kf_nid n, int64_t max_elems, kf_vid *out);

/* Largest constant (in elements) that canonicalize materialises by folding. */
#define KF_FOLD_MAX_ELEMS (1 << 20)

#endif
