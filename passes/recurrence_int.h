/* recurrence_int.h: what the files of the `persistent` pass share
 * (recurrence.c: the rewrite and the pass; recurrence_hoist.c: per-step
 * inputs computed for all steps at once; recurrence_norm.c: the forms
 * exporters write, brought to the one the analysis reads;
 * recurrence_stack.c and recurrence_pair.c: nodes that become one).
 * Private to passes/.  docs/persistent.md. */
#ifndef KF_RECURRENCE_INT_H
#define KF_RECURRENCE_INT_H

#include "passes.h"
#include "recurrence.h"

/* A per-step input computed for all steps at once: rows [r0 + k * dr,
 * r0 + k * dr + n) of h are step k's value (dr = n forward, -n backward). */
typedef struct kf_hrow {
	kf_vid h;
	int64_t r0, dr, n;
} kf_hrow;

typedef struct kf_rw {
	kf_graph *g;
	kf_rec *r;
	kf_vid *ext0;        /* per distinct per-step input (under its column slices) of step 0 */
	kf_hrow *hx;         /* ... computed for all steps */
	uint32_t next;
	kf_vid *ins;         /* the fusion's operands */
	uint32_t nin;
	kf_vid *vmap;        /* outer value -> body value (for the current step) */
	kf_vid *sinit;       /* [nslot]: each slot's initial value in the body */
	kf_vid *hm_a;        /* hoisted so far: step 0's value ... */
	kf_hrow *hm_h;       /* ... and what it became */
	uint32_t nhm, caphm;
	char why[768];
} kf_rw;

/* recurrence_hoist.c */
/* The value under the column slices (along other axes than 0, every row
 * kept) on top of per-step input a of step 0, whose step-1 image is *b
 * (moved down alike); the slices stay in the body, where the kernel reads
 * them as offsets into the row.  *n gets how many were peeled. */
kf_vid kf_rw_peel(const kf_graph *g, kf_vid a, kf_vid *b, uint32_t *n);
/* Hoists every distinct per-step input of the chain; -1 with w->why. */
int kf_rw_hoist_all(kf_rw *w);
/* The index in w->ext0 of per-step input core a. */
uint32_t kf_rw_ext_index(const kf_rw *w, kf_vid a);

/* Shared small builders (recurrence.c). */
kf_vid kf_rw_new1(kf_graph *g, kf_bid b, kf_nid before, int op, const kf_vid *in, uint32_t nin, kf_tid t);
void kf_rw_set_ints(kf_graph *g, kf_nid n, const char *key, const int64_t *v, int k);
/* Retypes node n's result from inference; false when inference fails. */
bool kf_rw_retype(kf_graph *g, kf_nid n);
/* A slice of rows [lo, lo + n) of v, inserted before `before` in block b. */
kf_vid kf_rw_rows(kf_graph *g, kf_bid b, kf_nid before, kf_vid v, int64_t lo, int64_t n);

/* recurrence_norm.c: gemm over the recurrent weight and split among the
 * steps become matmul, transpose, add and slices (what the analysis
 * reads); returns how many nodes were rewritten. */
int kf_rec_normalize(kf_graph *g);

#endif
