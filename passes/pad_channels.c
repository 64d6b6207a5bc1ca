/* pad_channels.c: the pad-channels pass: a channels-last conv whose input
 * channels do not come in whole 16-byte runs (a network's stem: 3 colour
 * channels of f16) reads them zero-padded to the next multiple of 16
 * bytes, its weight padded alike:
 *
 *   conv(x [N, D.., C], w [O, K.., C], b)
 *     ->  conv(pad(x) [N, D.., C'], pad(w) [O, K.., C'], b)
 *
 * The product is the same (the new channels are zeros on both sides), and
 * the GPU's implicit GEMM then copies each (tap, 8 channels) as one 16-byte
 * chunk (cp.async) instead of gathering element by element: the 7x7 stem of
 * ResNet-50 at batch 32 ran at 0.35x cuDNN that way (docs/conv.md).  The
 * weight's pad is over a constant, computed once at plan time by the CUDA
 * backend; the input's is a loop kernel that `fuse` merges with the
 * transpose before it (the layout pass's, at the network's input).
 *
 * requires: a verified graph, after `layout` (convs channels last), before
 * `fuse-conv`.  keeps: the function, value names (the conv keeps its
 * result).  Only 2-byte element types (f16, bf16: 8 channels a run) with
 * one group and static shapes are padded.  Options: none.
 * Linear: each node visited once.
 */
#include <stdlib.h>
#include <string.h>
#include "pass.h"
#include "passes.h"

/* v zero-padded by `add` at the end of its last dim, before node `at`; the
 * pad op typed by inference (KF_NONE: a bug, reported). */
static kf_vid pad_last(kf_graph *g, kf_vid v, int64_t add, kf_nid at)
{
	const kf_type *t = kf_vtype(g, v);
	int r = t->rank;
	kf_attrval el[2 * KF_MAX_RANK];
	for (int i = 0; i < 2 * r; i++)
		el[i] = (kf_attrval){.kind = KF_ATTR_INT, .i = i == 2 * r - 1 ? add : 0};
	kf_attrval lst = {.kind = KF_ATTR_LIST, .n = (uint32_t)(2 * r), .list = el};
	kf_attr a = {kf_intern_cstr(g->ctx, "pads"), kf_attrval_copy(g, &lst)};
	kf_tid t0 = kf_V(g, v)->type;
	kf_nid n = kf_node_new(g, 0, at, KF_OP_PAD, &v, 1, &t0, 1);
	kf_node_set_attrs(g, n, &a, 1);
	kf_N(g, n)->loc = kf_N(g, at)->loc;
	kf_type rt;
	char err[256];
	if (kf_infer(g, n, &rt, 1, err, sizeof err) != 1) {
		kf_error(g->ctx, kf_N(g, at)->loc, "internal: pad-channels made an ill-typed pad: %s", err);
		kf_node_erase(g, n);
		return KF_NONE;
	}
	kf_V(g, kf_res(g, n, 0))->type = kf_type_intern(g->ctx, &rt);
	return kf_res(g, n, 0);
}

/* The channels conv n's input gets: C rounded up to a 16-byte run, or 0
 * when n is left as it is. */
static int64_t padded(kf_graph *g, kf_nid n)
{
	const kf_node *x = kf_N(g, n);
	if (x->op != KF_OP_CONV || x->nin < 2 || !kf_attr_bool(g, n, "channels_last", false) ||
	    kf_attr_int(g, n, "group", 1) != 1)
		return 0;
	const kf_type *xt = kf_vtype(g, kf_in(g, n, 0)), *wt = kf_vtype(g, kf_in(g, n, 1));
	if (!kf_type_is_static(xt) || !kf_type_is_static(wt) || kf_dtype_size((kf_dtype)xt->dtype) != 2 ||
	    wt->dtype != xt->dtype || xt->rank < 3)
		return 0;
	int64_t C = xt->dim[xt->rank - 1], run = 16 / (int64_t)kf_dtype_size((kf_dtype)xt->dtype);
	if (C % run == 0 || wt->dim[wt->rank - 1] != C)
		return 0;
	return (C + run - 1) / run * run;
}

static int run(kf_graph *g, const kf_passopts *po, bool *changed)
{
	int done = 0, nerr = kf_nerrors(g->ctx);
	kf_foreach_node(g, 0, n) {
		int64_t C2 = padded(g, n);
		if (!C2)
			continue;
		int64_t add = C2 - kf_vtype(g, kf_in(g, n, 0))->dim[kf_vtype(g, kf_in(g, n, 0))->rank - 1];
		kf_vid xp = pad_last(g, kf_in(g, n, 0), add, n);
		kf_vid wp = xp == KF_NONE ? KF_NONE : pad_last(g, kf_in(g, n, 1), add, n);
		if (wp == KF_NONE)
			return -1;
		kf_set_operand(g, n, 0, xp);
		kf_set_operand(g, n, 1, wp);
		done++;
	}
	if (done)
		*changed = true;
	if (po->log && done)
		kf_buf_printf(po->log, "pad-channels: @%s: %d conv%s read their channels padded to 16-byte runs\n",
			      kf_str(g->ctx, g->name), done, done == 1 ? "" : "s");
	return kf_nerrors(g->ctx) == nerr ? 0 : -1;
}

const kf_pass kf_pass_pad_channels = {
	.name = "pad-channels",
	.doc = "zero-pad the channels of channels-last convs to 16-byte runs (the stem's 3), for the GPU's 16-byte gathers",
	.run = run,
};
