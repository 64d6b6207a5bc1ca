/* fuse_conv.c: the fuse-conv pass: each conv becomes a
 * `fusion @cN(...) {kind = "conv"}` holding it and the element-wise
 * epilogue of its result (per-channel scale and shift, activation, residual
 * add, cast), so that one kernel reads its input once and writes the final
 * value once.  The epilogue walk and the making of the fusion node are
 * fuse-matmul's (fuse_contraction.c, through fuse.h): a conv in the
 * channels-last form is a matrix product [N*H*W, K] x [K, O] whose
 * per-channel operands are its columns, so its epilogue is a matmul's.
 *
 * requires: a verified graph; runs before `fuse` (which leaves fusion nodes
 * alone), and after `layout` when the GPU kernels are wanted (they take the
 * channels-last form).  keeps: values, names, attributes and locations of
 * every op (moved into bodies).  breaks: nothing.
 * Options: single (default true: a conv with no epilogue becomes a one-op
 * fusion too, so that the backends see every conv the same way),
 * max-epilogue (16).
 */
#include <stdio.h>
#include <stdlib.h>
#include "fuse.h"
#include "fusion.h"
#include "pass.h"
#include "passes.h"

static const char *const opts[] = {"single", "max-epilogue", NULL};

static int run(kf_graph *g, const kf_passopts *po, bool *changed)
{
	kf_ctx *c = g->ctx;
	int nerr = kf_nerrors(c);
	bool single = kf_passopt_bool(c, po, "single", true);
	int max_epi = (int)kf_passopt_int(c, po, "max-epilogue", 16);
	if (kf_nerrors(c) != nerr)
		return -1;
	if (max_epi < 0 || max_epi > 32) {
		kf_error(c, po->loc, "fuse-conv: max-epilogue must be 0..32");
		return -1;
	}
	kf_nid *todo = malloc((g->nnode + 1) * sizeof *todo);
	uint32_t nt = 0;
	kf_foreach_node(g, 0, n)
		if (kf_N(g, n)->op == KF_OP_CONV && kf_fuse_node_static(g, n))
			todo[nt++] = n;
	kf_nid *copied = malloc((nt * KF_FUSE_GROUP_MAX * 3 + 1) * sizeof *copied);
	uint32_t ncopied = 0;
	int made = 0, ops = 0;
	for (uint32_t i = 0; i < nt; i++) {
		kf_fuse_group gr = {.n = {todo[i]}, .nn = 1};
		kf_fuse_epilogue(g, todo[i], max_epi, &gr);
		if (gr.nn == 1 && !single)
			continue;
		ops += (int)gr.nn;
		char sym[32];
		snprintf(sym, sizeof sym, "c%d", made++);
		kf_fuse_make_group(g, &gr, sym, "conv", copied, &ncopied);
	}
	free(todo);
	if (made) {
		kf_fuse_drop_dead_consts(g, copied, ncopied);
		*changed = true;
	}
	free(copied);
	if (po->log && made)
		kf_buf_printf(po->log, "fuse-conv: @%s: %d conv kernel%s from %d ops\n", kf_str(c, g->name), made,
			      made == 1 ? "" : "s", ops);
	return 0;
}

const kf_pass kf_pass_fuse_conv = {
	.name = "fuse-conv",
	.doc = "group each conv with its element-wise epilogue (bias, activation, residual) into one conv kernel",
	.opts = opts,
	.run = run,
};
