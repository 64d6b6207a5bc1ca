/* conv.h: the window geometry of the windowed ops (conv, conv_transpose,
 * max_pool, avg_pool; docs/ops.md) as a node's attributes and operand
 * types give it, for what lowers them (the CUDA emitter).  The checks are
 * the type inference's (core/infer_conv.c), which this shares; the
 * interpreter keeps its own reading of the attributes (runtime/cpu_conv.c),
 * so the oracle does not trust what it checks. */
#ifndef KF_CONV_H
#define KF_CONV_H

#include "kf.h"

typedef struct kf_win {
	int nsp;             /* spatial dims: 1..3 (entries past nsp are unused) */
	bool cl;             /* channels_last */
	bool ceil, cip;      /* pools: ceil_mode, count_include_pad */
	int64_t N, C, O, group; /* O: output channels (C for pools) */
	int64_t in[3], out[3], k[3], s[3], d[3], pb[3], pe[3], opad[3];
} kf_win;

/* Fills w from node n of g, a conv, conv_transpose, max_pool or avg_pool
 * whose operand and result types are static and check (a verified graph).
 * Returns 0, or -1 when n is none of these or its shapes are symbolic. */
int kf_win_of(const kf_graph *g, kf_nid n, kf_win *w);

#endif
