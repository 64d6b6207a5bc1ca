/* backend.h: what a backend is, the seam between the graph world (core,
 * passes) and the machines that run graphs.
 *
 * A backend takes a verified graph, fused or not, and gives a plan: the
 * graph made runnable (for the CPU interpreter, the graph itself; for CUDA,
 * compiled kernels, a buffer arena and a captured CUDA graph).  A plan runs
 * many times on the caller's tensors.  The graph must outlive its plans and
 * stay unchanged while they live.
 *
 * Backends are objects with this table of functions: the CPU interpreter is
 * the first (kf_backend_cpu_new, runtime/interp.c), the CUDA backend the
 * second (kf_backend_cuda_new, cuda/cuda_backend.h).  A third fills the same
 * table in its own folder; nothing in core, the passes or the other
 * backends changes, and the tools name it beside the others.
 */
#ifndef KF_BACKEND_H
#define KF_BACKEND_H

#include "kf.h"
#include "tensor.h"

typedef struct kf_backend kf_backend;

/* The sizes a graph was specialised to (api/dyn.h): it is a copy of the
 * symbolic graph `sym` (kf_graph_clone, then kf_specialize: the same node
 * and value ids) with symbol sid[i] of size val[i]. */
typedef struct kf_sizes {
	const kf_graph *sym;
	const kf_sid *sid;
	const int64_t *val;
	uint32_t n;
	/* NULL, or sym specialised to generic sizes (passes.h's
	 * kf_graph_probe: distinct primes, pval[i] for sid[i], 0 where it has
	 * none): a backend may compute a quantity there too, and read which
	 * symbols it is made of by factoring (same ids again) */
	const kf_graph *probe;
	const int64_t *pval;
} kf_sizes;

/* Every backend's plan begins with this head; backends extend it. */
typedef struct kf_plan {
	kf_backend *be;
	kf_graph *g;
} kf_plan;

struct kf_backend {
	const char *name;
	/* NULL, or false with a reason in why when the backend cannot run here
	 * (no driver, no device); a backend that is not available may still
	 * compile (a dry run). */
	bool (*available)(kf_backend *be, char *why, size_t whylen);
	/* Plans g.  NULL with an error in g's context. */
	kf_plan *(*compile)(kf_backend *be, kf_graph *g);
	/* NULL, or plans g, which is sz->sym specialised to sz's sizes, as
	 * compile does; the backend may make code that reads those sizes at run
	 * time, so that the plans of other sizes share it (cuda: kernels that
	 * take their dims as arguments, cuda/emit_cuda.h's kf_emit_dyn).  sz->sym
	 * outlives the plan; the arrays are read now. */
	kf_plan *(*compile_sized)(kf_backend *be, kf_graph *g, const kf_sizes *sz);
	/* Runs plan p on in[0..nin) (one per graph input, in order; borrowed)
	 * and allocates out[0..nout) (the graph's result count; the caller
	 * frees them with kf_tensor_free).  0, or -1 with an error in the
	 * context: wrong input count, dtype or shape (naming the input), or a
	 * failure at a node. */
	int (*run)(kf_plan *p, const kf_tensor *in, int nin, kf_tensor *out, int nout);
	/* NULL, or runs p on memory of the backend's device: in[i].data and
	 * out[i].data are device addresses the caller owns (cast to pointers),
	 * described by the rest of each kf_tensor (out[] typed and sized as the
	 * graph's results by the caller), with the work ordered on stream (the
	 * backend's stream type: a CUstream for cuda; NULL its default stream)
	 * and no host wait.  0, or -1 with an error in the context.  The
	 * embedding API's kfuse_run_device (include/kfuse/kfuse.h). */
	int (*run_device)(kf_plan *p, const kf_tensor *in, int nin, const kf_tensor *out, int nout,
			  void *stream);
	/* NULL, or times n runs of the last run's inputs on the device itself
	 * (median and min in ms), where host timing would measure the host. */
	int (*bench)(kf_plan *p, int n, double *median_ms, double *min_ms);
	void (*plan_free)(kf_plan *p);
	/* Frees the backend (not its plans: free those first). */
	void (*free)(kf_backend *be);
	void *state;
};

/* The CPU interpreter as a backend (kf_interp_run's semantics). */
kf_backend *kf_backend_cpu_new(kf_ctx *c);

/* Compiles g on be, runs it once and frees the plan. */
int kf_backend_run_once(kf_backend *be, kf_graph *g, const kf_tensor *in, int nin, kf_tensor *out, int nout);
void kf_plan_free(kf_plan *p);
void kf_backend_free(kf_backend *be);

#endif
