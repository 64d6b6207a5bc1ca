/* interp.h: the CPU reference interpreter, the oracle for every numerical
 * check, and the backend seam that kfuse-run selects through.
 *
 * The interpreter runs any verified graph, fused or not: it walks the body
 * in order, binds symbolic dims from the inputs, computes each node's result
 * shapes at run time, calls kf_op(c, op)->cpu (built-ins and plugin ops
 * alike) and frees each intermediate after its last use.  Semantics per op
 * are in docs/ops.md; the numeric contract (compute precision, integer
 * division by zero, NaN) is in docs/interpreter.md.  As a backend
 * (backend.h) it is kf_backend_cpu_new.
 */
#ifndef KF_INTERP_H
#define KF_INTERP_H

#include "kf.h"
#include "tensor.h"

/* Sets the cpu function of every built-in op in c.  Idempotent; leaves ops
 * whose cpu is already set (by a plugin) alone.  kf_interp_run calls it. */
void kf_rt_register(kf_ctx *c);

/* Runs graph g on in[0..nin) (one per graph input, in order; borrowed) and
 * allocates out[0..nout) (nout must be the graph's result count; the caller
 * frees them with kf_tensor_free).  Returns 0, or -1 with an error in the
 * context: wrong input count, dtype or shape (naming the input), symbolic
 * dims bound inconsistently, or an op failing at run time (at its node). */
int kf_interp_run(kf_graph *g, const kf_tensor *in, int nin, kf_tensor *out, int nout);

/* Symbols and the sizes bound to them. */
typedef struct kf_symbind {
	kf_sid *sym;
	int64_t *val;
	uint32_t n, cap;
} kf_symbind;
/* The sizes inputs in[0..nin) give g's symbolic dims, checked as
 * kf_interp_run checks its inputs (count, dtype, rank, static dims, one
 * size per symbol; the error names the input and the symbol): 0 with *b
 * filled (free it with kf_symbind_free), or -1 with an error in the
 * context and *b empty.  A product of symbols none of which is known yet
 * (B*T alone) is bound under its own name. */
int kf_interp_bind_inputs(kf_graph *g, const kf_tensor *in, int nin, kf_symbind *b);
void kf_symbind_free(kf_symbind *b);

/* What a run saw at the top level: how many nodes produced a float result
 * holding an infinity or a NaN, and the first of them (KF_NONE if none). */
typedef struct kf_interp_watch {
	uint32_t nonfinite_nodes;
	kf_nid first_nonfinite;
} kf_interp_watch;

/* kf_interp_run, filling *w (which may be NULL). */
int kf_interp_run_watch(kf_graph *g, const kf_tensor *in, int nin, kf_tensor *out, int nout, kf_interp_watch *w);

/* The result shape of node n for concrete inputs, as the interpreter computes
 * it (for built-in ops from the op's rule; for others from the declared type
 * with symbols bound).  out[i] comes in holding the declared type with known
 * symbols replaced; returns 0 or -1 with a message in err. */
int kf_rt_shape(kf_graph *g, kf_nid n, const kf_tensor *in, int nin, kf_type *out, int nout,
		char *err, size_t errlen);

#endif
