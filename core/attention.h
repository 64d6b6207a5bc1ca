/* attention.h: the anatomy of scaled dot-product attention as primitive
 * ops, shared by the fuse-attention pass (passes/fuse_attention.c), which
 * finds it in a graph, and the attention kernels (cuda/emit_attention.c),
 * which find it again in the body of a `fusion {kind = "attention"}`:
 *
 *   q, k, v   <- prologues: layout ops a kernel reads through (transpose,
 *                reshape, broadcast_to, slice, split), and on q scalar
 *                scaling and casts; each a strided view (view.h) of its
 *                base whose rows or columns are contiguous
 *   s  = matmul(q, k)                       [B..., Tq, Tk]
 *   s' = the score chain: element-wise ops of the scores' shape from s to
 *        the softmax's input; their other operands broadcast into it
 *   p  = softmax(s', axis = -1), then casts (the prob chain)
 *   o  = matmul(p, v)                       [B..., Tq, Dv]
 *   y  <- the output chain: transposes, reshapes (whose inverse is a view
 *        with contiguous rows) and casts
 *
 * Every value between the operands' bases and y is read only inside
 * (a split of the prologue only when all its results are).  Chains are
 * bounded (KF_ATT_CHAIN), so recognition costs O(1) per softmax. */
#ifndef KF_ATTENTION_H
#define KF_ATTENTION_H

#include "kf.h"
#include "view.h"

#define KF_ATT_CHAIN 24

/* A chain of ops; res[i] is the result of n[i] the chain goes on with (a
 * split's).  Prologues keep their base: the value the farthest op reads
 * (the matmul's operand itself when the chain is empty).  Order: score
 * and prob chains and the output chain from first to last; prologues
 * from the matmul up to the base. */
typedef struct kf_att_chain {
	kf_nid n[KF_ATT_CHAIN];
	uint32_t res[KF_ATT_CHAIN];
	int nn;
	kf_vid base;
} kf_att_chain;

typedef struct kf_att {
	kf_graph *g;
	kf_nid sm, mm1, mm2;
	kf_type B;               /* the scores' batch dims (B..., no dtype) */
	kf_att_chain score;      /* mm1 -> softmax */
	kf_att_chain prob;       /* softmax -> mm2 */
	kf_att_chain pro[3];     /* q, k, v */
	kf_att_chain out;        /* after mm2 */
	const char *why;         /* when not recognised: why, for --explain-fusion */
	bool strong;             /* why names the likeliest cause */
	char buf[160];
} kf_att;

/* Recognises the attention around softmax node sm (in any block); false
 * with a->why when it is not one. */
bool kf_att_recognise(kf_graph *g, kf_nid sm, kf_att *a);

/* The operand of the matmuls prologue `which` (0 q, 1 k, 2 v) feeds. */
kf_vid kf_att_operand(const kf_att *a, int which);
/* The value the group computes: the end of the output chain. */
kf_vid kf_att_result(const kf_att *a);
/* Whether node n is one of the group's. */
bool kf_att_member(const kf_att *a, kf_nid n);
/* The view of operand `which` over its prologue's base, as [B..., rows,
 * cols] (a matmul's batch broadcasting included); false when it is not a
 * view or neither rows nor columns are contiguous. */
bool kf_att_view(const kf_att *a, int which, const kf_type *B, kf_view *v);
/* Layout ops: read through by views. */
bool kf_att_layout_op(int op);
/* The ops q's prologue holds besides layout ops: a cast, or a scaling by
 * a one-element value (*src: the matrix operand). */
bool kf_att_q_op(const kf_graph *g, kf_nid n, kf_vid *src);

#endif
