/* dyn.h: a graph with symbolic dims (f32[batch,seq,768]) on a backend that
 * wants static shapes (cuda), behind the backend interface
 * (runtime/backend.h): a shape-keyed cache of plans.
 *
 * The caller's pipeline runs once, at compile, on a copy of the symbolic
 * graph (the fuse passes group symbolic dims at generic sizes; when the
 * pipeline fails there, it runs on each shape's copy instead, with a report
 * line).  Each run binds the graph's symbols from the concrete input
 * shapes (kf_interp_bind_inputs: a wrong rank, a static dim that differs,
 * or two inputs giving one symbol two sizes is an error naming the input
 * and the symbol), looks the bound sizes up in a bounded LRU of plans, and
 * on a miss specialises a copy of the fused graph to them (kf_specialize:
 * same ids), verifies it and plans it on the inner backend as a sized plan
 * (runtime/backend.h's compile_sized, where the backend has it: the cuda
 * kernels then read the sizes from arguments, their size-dependent
 * choices made per bucket, so the kernel cache serves every shape of known
 * buckets).  The least recently used plan is freed when the cache is full.
 * docs/dynamic.md has the story.
 */
#ifndef KF_API_DYN_H
#define KF_API_DYN_H

#include "kf.h"
#include "backend.h"
#include "pass.h"

typedef struct kf_dyn_opts {
	const char *pipeline;     /* passes run on each specialised copy (NULL or "": none) */
	int max_plans;            /* plans kept (LRU); 0: KF_DYN_DEFAULT_PLANS */
	kf_buf *report;           /* one line per run: the shape, hit or miss, evictions; NULL: none */
	const char *const *dims;  /* "SYM=SIZE": sizes of symbols no input gives (kfuse-run --dim) */
	int ndim;
} kf_dyn_opts;
#define KF_DYN_DEFAULT_PLANS 8

typedef struct kf_dyn_stats {
	int hits, misses, evictions, plans; /* plans: alive in the cache now */
} kf_dyn_stats;

/* Whether a type of g (a value's or a result's) has a symbolic dim. */
bool kf_dyn_graph_symbolic(const kf_graph *g);

/* The shape-keyed backend over inner (which it owns from here on, also on
 * an error), named as inner.  The pipeline is parsed now against reg's
 * passes, and o's strings are read now.  NULL with an error in c. */
kf_backend *kf_dyn_backend_new(kf_ctx *c, kf_backend *inner, const kf_passreg *reg, const kf_dyn_opts *o);
/* The inner plan for inputs in[0..nin) of dyn plan p: bound, looked up,
 * planned on a miss (this is a run without the run: tests plan on a
 * dry-run backend through it).  NULL with an error in the context. */
kf_plan *kf_dyn_plan_for(kf_plan *p, const kf_tensor *in, int nin);
/* The inner plan of p's last run or kf_dyn_plan_for; NULL when none, or
 * when p is not a dyn plan. */
kf_plan *kf_dyn_last(const kf_plan *p);
/* Whether p is a dyn plan. */
bool kf_dyn_is(const kf_plan *p);
void kf_dyn_get_stats(const kf_plan *p, kf_dyn_stats *out);
/* Keeps at most n >= 1 plans from now on, freeing the least recently used
 * ones beyond n. */
void kf_dyn_set_max(kf_plan *p, int n);

#endif
