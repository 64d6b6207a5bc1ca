/* registry.c: the table of built-in passes, and helpers the passes share.
 * To add a pass: export `const kf_pass kf_pass_NAME` from its file and add
 * X(NAME) below (the order is the order of --list-passes). */
#include "passes.h"

#define KF_PASS_LIST(X) \
	X(canonicalize) \
	X(cse) \
	X(dce) \
	X(shape_infer) \
	X(specialize) \
	X(rules) \
	X(amp) \
	X(persistent) \
	X(merge_matmul) \
	X(fuse_attention) \
	X(fuse_matmul) \
	X(layout) \
	X(pad_channels) \
	X(fuse_conv) \
	X(fuse)

#define KF_PASS_DECL(id) extern const kf_pass kf_pass_##id;
KF_PASS_LIST(KF_PASS_DECL)
#undef KF_PASS_DECL

void kf_passes_builtin(kf_passreg *r)
{
#define KF_PASS_ADD(id) kf_passreg_add(r, &kf_pass_##id);
	KF_PASS_LIST(KF_PASS_ADD)
#undef KF_PASS_ADD
}

bool kf_pass_node_pinned(const kf_graph *g, kf_nid n)
{
	const kf_opinfo *oi = kf_op(g->ctx, kf_N(g, n)->op);
	return (oi->flags & (KF_OPF_EFFECT | KF_OPF_TERMINATOR)) != 0;
}
