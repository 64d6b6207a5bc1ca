/* persistent_emu.h: a persistent kernel's text run on the host (tests):
 * compiled as C with a small CUDA shim (a block is a thread, its CUDA
 * threads are fibers switched at barriers, shuffles and spins), on the
 * interpreter's inputs of its node, its outputs compared with the
 * interpreter's, launch after launch.  Shared by tests/unit/test_persistent.c
 * (graphs written like examples/rnn/gen_rnn.py) and tests/rnn/emu.c (ONNX
 * exports of PyTorch's recurrences).  Needs cmocka (include after it). */
#ifndef KF_PERSISTENT_EMU_H
#define KF_PERSISTENT_EMU_H
#include "kf.h"

typedef struct kft_emu {
	const char *upb, *sync; /* KFUSE_PERSISTENT_UPB and _SYNC while emitting; NULL: unset */
	const char *hv, *pf;    /* KFUSE_PERSISTENT_HV and _PF while emitting; NULL: unset */
	int grid;               /* blocks */
	const char *from, *to;  /* a corruption of the kernel text (NULL: none) */
	const char *label;      /* for the report line */
	double rtol, atol;      /* the comparison's tolerances (0: 1e-4 and 1e-5) */
} kft_emu;

/* The i-th persistent node of g's top level (KF_NONE: none). */
kf_nid kft_nth_persistent(kf_graph *g, int i);

/* Node `node` (the node-th persistent one) of g emitted under e's tuning,
 * and run on the host with e->grid blocks against the interpreter; g2 is a
 * second copy of g (it becomes the graph that returns the kernel's
 * parameters), in[] g's arguments.  Returns the output elements out of
 * tolerance (e->rtol, e->atol; default 1e-4, 1e-5) and checks that a second launch gives
 * the first's bits; -1 when there is no C compiler here. */
int64_t kft_emu_run(kf_graph *g, kf_graph *g2, int node, const kft_emu *e, const kf_tensor *in);

#endif
