/* recurrence.h: recognising an unrolled recurrence (an RNN's steps written
 * out), shared by the `persistent` pass (passes/recurrence.c), which finds
 * it in the graph body, and the persistent-kernel emitter
 * (cuda/emit_persistent.c), which finds it again in the fusion body; so it
 * sits in core, below both.
 *
 * A recurrence in block b is a chain of T >= 2 steps.  Step k holds the
 * matmul mm[k] = matmul(s, R) of a state value s with the one weight R
 * that all steps read, and every node that depends on mm[k], not on
 * mm[k+1], and that mm[k+1] depends on (the cell).  Step k+1 is step k's
 * image: the same ops and attributes, operands related one for one:
 *   - internal: a value of the same step;
 *   - slot j: a state the step reads from the step before (step 0 reads
 *     the initial value init[j]; h and c of an LSTM; two slots may start
 *     from one value, as an exporter's h0 and c0 of zeros after cse);
 *   - invariant: one value read by every step (R, a bias, a constant);
 *   - per-step input: an outside value that differs per step only by
 *     slices along one axis whose start moves by the slice's length per
 *     step, all forward or all backward (x_t: one row, or a batch's B
 *     rows, or x[:, t]; a reverse direction's x_{T-1-t}).
 * See docs/persistent.md. */
#ifndef KF_RECURRENCE_H
#define KF_RECURRENCE_H

#include "kf.h"

enum { KF_REC_INTERNAL, KF_REC_SLOT, KF_REC_INV, KF_REC_EXT };

typedef struct kf_rec {
	kf_graph *g;
	kf_bid blk;
	kf_vid R;            /* operand 1 of every step's matmul */
	uint32_t T;          /* steps */
	uint32_t nper;       /* nodes per step */
	kf_nid *node;        /* [T * nper]: node i of step k at k * nper + i, step 0 in block order;
				the last step's is KF_NONE where it lacks a node that only a next
				step would read (dead code: a masked state nobody outputs) */
	uint32_t nnode;      /* g->nnode when analysed */
	uint32_t *stepof;    /* [nnode]: 1 + the step of a chain node, 0 outside */
	uint32_t *idx;       /* [nnode]: a chain node's index i in its step */
	uint8_t *sw;         /* [nnode]: 1 when a chain node's two operands are in the other
				order than step 0's node (a commutative op); kf_rec_in */
	uint8_t *cls;        /* [nper * KF_REC_MAXIN]: operand class of step 0's node i, operand j */
	int8_t *esign;       /* [nper * KF_REC_MAXIN]: a per-step input's direction: +1 forward, -1 backward */
	uint16_t *slot;      /* [nper * KF_REC_MAXIN]: the slot of a KF_REC_SLOT operand */
	uint32_t nslot;
	kf_vid *init;        /* [nslot]: what step 0 reads */
	kf_vid *sval;        /* [T * nslot]: slot j's value after step k at k * nslot + j (the last
				step's KF_NONE where its node is) */
	char why[768];       /* why the chain was refused */
	char miss[320];      /* why the last candidate for a step's node did not match */
} kf_rec;

#define KF_REC_MAXIN 8

/* The dtypes of recurrences the persistent kernels take (the pass leaves
 * others as they are: cuda/emit_persistent.c would refuse the node and
 * its body would run op by op). */
static inline bool kf_rec_dtype_ok(int dt)
{
	return dt == KF_F32 || dt == KF_F16 || dt == KF_BF16;
}

/* Values in block b used as operand 1 by two or more matmuls of rank-2
 * operands, in order of first use; returns how many (at most max). */
uint32_t kf_rec_candidates(kf_graph *g, kf_bid b, kf_vid *out, uint32_t max);
/* Analyses the chain of matmuls over R in block b.  0 when it is a
 * recurrence (r filled; free with kf_rec_free), -1 when not (r->why says
 * why; nothing to free). */
int kf_rec_analyze(kf_graph *g, kf_bid b, kf_vid R, kf_rec *r);
void kf_rec_free(kf_rec *r);

/* The chain node of step k that is step 0's node n (by index; KF_NONE for
 * a node the last step lacks). */
static inline kf_nid kf_rec_at(const kf_rec *r, uint32_t k, kf_nid n0)
{
	return r->node[k * r->nper + r->idx[n0]];
}

/* Operand j of chain node n, in the order of step 0's node. */
static inline kf_vid kf_rec_in(const kf_rec *r, kf_nid n, uint32_t j)
{
	return kf_in(r->g, n, j ^ (n < r->nnode ? r->sw[n] : 0));
}

/* True when per-step inputs a (of step k) and b (of step k+d) differ only
 * by slices along one axis each that start d of their lengths later
 * (*sign 1) or earlier (*sign -1); *sign 0 on entry takes either and
 * says which, else it must be that one. */
bool kf_rec_same_ext(const kf_graph *g, const kf_rec *r, kf_vid a, kf_vid b, int64_t d, int *sign);

/* Helpers shared with the pass. */
/* Two values every step may read as one: the same value, or constants of
 * one type and payload. */
bool kf_rec_same_inv(const kf_graph *g, kf_vid a, kf_vid b);
/* Node n in the user's terms, for messages: its op and the name of its
 * value, and where it was written when that is known:
 * "'mul' %h1 (lstm.kf:12:3)". */
void kf_rec_describe(const kf_graph *g, kf_nid n, char *out, size_t cap);
/* Two nodes with the same attributes. */
bool kf_rec_attrs_eq(const kf_graph *g, kf_nid a, kf_nid b);
/* The first int of list attribute key (dflt when absent; INT64_MIN when it
 * has another length). */
int64_t kf_rec_first_int(const kf_graph *g, kf_nid n, const char *key, int64_t dflt);
/* A slice along one axis with unit step (what a per-step input reads):
 * *axis, *start and *len (ends - starts) of it. */
bool kf_rec_axis_slice(const kf_graph *g, kf_nid n, int64_t *axis, int64_t *start, int64_t *len);

#endif
