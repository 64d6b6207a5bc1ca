/* fuse.h: the fuse pass (passes/fuse.c) and what the CUDA emitter shares
 * with it: which ops fuse, how a reduction splits its input into rows.
 *
 * The pass groups top-level nodes into `fusion @kN(...) {kind = ...}` nodes:
 *   kind = "elementwise": element-wise, broadcast and injective ops; one
 *          iteration space (every result the group writes has one element
 *          count), values computed on demand at the indices needed.
 *   kind = "reduce": reductions over trailing axes (reduce_*, softmax,
 *          log_softmax, layer_norm) of one row shape [R, C], with their
 *          element-wise prologue and epilogue; a row is kept in registers.
 *   kind = "colreduce": reduce_* over other axes (one axis not last, or
 *          several) of one shape, with prologue and epilogue; one thread per
 *          output column loops over the reduced axes, once per dependent
 *          reduction.
 * Reshapes at the boundary of a reduce or colreduce group stay outside it:
 * they are aliases of the buffers the kernel reads or writes.
 * See docs/fusion.md for the rules and the reason codes.
 */
#ifndef KF_FUSE_H
#define KF_FUSE_H

#include "kf.h"
#include "fusion.h"

/* Why a producer -> consumer edge did not fuse (--explain-fusion). */
#define KF_FUSE_REASONS(X) \
	X(NONE, "fused") \
	X(CYCLE, "fusing would create a cycle through a node outside both groups") \
	X(OPAQUE_OP, "the op has no fusible CUDA form") \
	X(CONTRACTION, "contractions (matmul, gemm) run as their own kernel") \
	X(TOO_MANY_INPUTS, "the kernel would take too many inputs") \
	X(TOO_MANY_NODES, "the kernel would hold too many ops") \
	X(REGISTER_LIMIT, "the kernel's estimated registers per thread exceed the limit") \
	X(REDUCE_THEN_BROADCAST_MISMATCH, "the reduction's result is broadcast in a shape other than its rows") \
	X(REDUCE_LAYOUT, "the reduction fits neither a row kernel (trailing axes, rows that fit in registers) nor a column kernel") \
	X(POLICY_VETO, "the fusion policy vetoed it") \
	X(MULTI_USE_EXPENSIVE, "an expensive value would be recomputed for each element it is broadcast to") \
	X(SHAPE_MISMATCH, "the groups iterate over different shapes") \
	X(SYMBOLIC_SHAPE, "symbolic shapes are not fused") \
	X(GRAPH_OUTPUT, "the value is a graph output only") \
	X(SEARCH_LIMIT, "proving that no path leaves one group and re-enters the other took more than max-search steps")

typedef enum {
#define KF_FUSE_REASON_ENUM(id, text) KF_FR_##id,
	KF_FUSE_REASONS(KF_FUSE_REASON_ENUM)
#undef KF_FUSE_REASON_ENUM
	KF_FR_COUNT
} kf_fuse_reason;

const char *kf_fuse_reason_code(kf_fuse_reason r); /* "CYCLE" */
const char *kf_fuse_reason_text(kf_fuse_reason r);

/* The policy hook: asked for every producer -> consumer edge (and every
 * sibling pair, with producer = the first node of one group) that passed
 * the legality checks.  KF_FUSE_VETO blocks it (POLICY_VETO); KF_FUSE_ALLOW
 * waives the heuristic limits (MULTI_USE_EXPENSIVE, TOO_MANY_NODES,
 * REGISTER_LIMIT) but never legality (cycles, shapes, inputs);
 * KF_FUSE_DEFAULT leaves the decision to the pass. */
typedef enum { KF_FUSE_DEFAULT = -1, KF_FUSE_VETO = 0, KF_FUSE_ALLOW = 1 } kf_fuse_verdict;
typedef int (*kf_fuse_policy_fn)(void *ud, kf_graph *g, kf_nid producer, kf_nid consumer);
typedef struct kf_fuse_policy {
	kf_fuse_policy_fn fn;  /* NULL: no policy */
	void *ud;
	void (*free)(void *ud); /* called by the pass when it is done; may be NULL */
} kf_fuse_policy;

/* The pass option `policy=FILE.lua` asks this function for a policy.  It is
 * a weak symbol: the Lua bridge (core/lua_*.c) defines it to load the script
 * and wrap its can_fuse(producer, consumer); without it the option is an
 * error.  Returns 0, or -1 with an error in the context. */
int kf_lua_fuse_policy_open(kf_ctx *c, const char *path, kf_fuse_policy *out) __attribute__((weak));

struct kf_passopts;

typedef struct kf_fuse_opts {
	bool explain;       /* one line per unfused edge into log */
	bool siblings;      /* fuse groups that read one input (default on) */
	int max_inputs;     /* distinct inputs of one kernel (default 24) */
	int max_nodes;      /* ops in one kernel (default 256) */
	int max_regs;       /* estimated registers per thread (default 160) */
	int max_row;        /* longest row (elements) a reduce kernel fuses (default 32768) */
	int64_t max_search; /* edges one cycle check may look at (default 65536) */
	kf_fuse_policy policy;
	kf_buf *log;        /* explanations and the summary; NULL: none */
	const struct kf_passopts *pass; /* progress goes to its listener (pass.h); NULL: none */
} kf_fuse_opts;

void kf_fuse_opts_default(kf_fuse_opts *o);
/* Runs the fusion on the top level of g.  Returns 0, or -1 with an error. */
int kf_fuse_run(kf_graph *g, const kf_fuse_opts *o, bool *changed);

/* ---- contraction kernels: fuse-matmul and fuse-conv (fuse_contraction.c) -- */

/* Top-level nodes that become one kernel around a contraction. */
#define KF_FUSE_GROUP_MAX 64
typedef struct kf_fuse_group {
	kf_nid n[KF_FUSE_GROUP_MAX];
	uint32_t nn;
} kf_fuse_group;

/* Adds to gr (up to max_epi nodes, and room) the element-wise epilogue of
 * root's result 0: walking down while every use of the value is in one
 * element-wise or broadcast op whose result has root's shape and whose other
 * operands broadcast into it (bias, residual, activation, scaling, cast). */
void kf_fuse_epilogue(kf_graph *g, kf_nid root, int max_epi, kf_fuse_group *gr);
/* Replaces the group's nodes (whose last one in program order yields the
 * result) by `fusion @sym(...) {kind = kind}` holding them, and returns
 * it.  Small constants the non-contraction members read are copied into the
 * body; their nodes are appended to copied (3 per member at most) for
 * kf_fuse_drop_dead_consts, which erases those nothing else reads. */
kf_nid kf_fuse_make_group(kf_graph *g, kf_fuse_group *gr, const char *sym, const char *kind, kf_nid *copied,
			  uint32_t *ncopied);
void kf_fuse_drop_dead_consts(kf_graph *g, const kf_nid *copied, uint32_t n);

#endif
