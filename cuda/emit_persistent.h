/* emit_persistent.h: the persistent-kernel emitter's working state, shared
 * by cuda/emit_persistent.c (one recurrence: its analysis, its cell's
 * code, a kernel of one layer) and cuda/emit_stack.c (a stack of layers
 * as one wavefront kernel, which generates each layer's cell with the
 * former).  Not for other modules.  docs/persistent.md. */
#ifndef KF_EMIT_PERSISTENT_H
#define KF_EMIT_PERSISTENT_H

#include "emit_int.h"
#include "recurrence.h"

#define NT 256 /* threads per block */
#define NW (NT / 32)
#define KF_PM_BMAX 16 /* batch rows a persistent kernel takes */

typedef struct pm {
	kx *k;
	kf_nid fn;         /* the persistent node of one layer: k->at, or a layer in a stack's body */
	int lyr, nl;       /* in a stack: this layer and the number of layers; -1 and 1 alone */
	kf_vid xarg;       /* in a stack, layer >= 1: the body argument that is the projection of
			      the layer below's sequence, computed in the kernel; else KF_NONE */
	kf_vid xw, xb;     /* ... its weight [K, G] (stack body value) and bias (or KF_NONE) */
	kf_rec r;
	int64_t H, K, G;   /* state width, matmul inner dim, gate rows */
	int64_t B;         /* batch: the rows of a state (1, or up to KF_PM_BMAX) */
	struct { kf_nid n; int8_t sg; } dir[64]; /* per-step row slices: +1 forward, -1 backward */
	int ndir;
	int upb, ng;       /* units per block, groups */
	int64_t S[64];     /* gate offsets read from the matmul */
	int ns;
	int64_t SX[64];    /* gate offsets read from the in-kernel input projection (stack) */
	int nsx;
	int hslot;         /* the slot the matmul reads */
	bool gsync;        /* KFUSE_PERSISTENT_SYNC=grid: a grid barrier per step, no tags */
	bool pf;           /* KFUSE_PERSISTENT_PF (default 1): loads issued before the wait */
	int hv;            /* h words read per thread and load: 2 (16 bytes) or 1 */
	int npf;           /* prefetch registers kf_pf<i> (a stack numbers them across layers) */
	kf_vid *yv;        /* the values the layer writes out ... */
	int *yo;           /* ... each as kernel output o<yo[i]>, or nowhere (-1) */
	uint32_t ny;
	kf_buf ew;         /* the element-wise part of a step */
	kf_buf pf0, pfs;   /* prefetches: once before the steps, per step before the wait */
	struct { kf_vid v; int64_t off; bool zc, zr; int s, t; } memo[512]; /* s: the state slot read, or -1 */
	int nmemo, ntmp;
	char why[200];
} pm;

int kx_pm_bad(pm *p, const char *msg);
/* The slot of gate offset off in set[0 .. *n) (S or SX), added when new;
 * -1 with msg (kx_pm_bad) when all 64 are taken. */
int kx_pm_slot(pm *p, int64_t *set, int *n, int64_t off, const char *msg);
/* The kernel parameter of the layer's body argument v (-1: none). */
int kx_pm_param(const pm *p, kf_vid v);
/* The lines `kf_sh[kk + i] = h0[kk + i];` (i < n), each indented by ind,
 * that load the initial state at step 0: a constant's element or a load. */
void kx_pm_h0_load(pm *p, int n, const char *ind);
/* Finds the recurrence in p->fn's body; sets H, K, G, upb, ng, ... */
int kx_pm_analyze(pm *p);
/* The cell's code for one unit into p->ew (states, h published, outputs). */
int kx_pm_cell(pm *p, unsigned T);
/* W(row, kk) of the recurrent weight. */
void kx_pm_wexpr(pm *p, const char *row, const char *kk, kf_buf *o);
/* The h hand-off helpers KFP_wait, KFP_wait2, KFP_put (tags), with the
 * declaration of the exchange buffer hb after the spin macro. */
void kx_pm_handoff_decl(pm *p, kf_buf *d, const char *hb);
/* Names the kernel's globals (k->decl, k->b) after a hash of its text,
 * so two kernels of one program never share them. */
void kx_pm_name_globals(kx *k);

/* emit_stack.c: column j + off of the layer's input row, computed in the
 * kernel from the layer below's h (a gate row of the input projection). */
int kx_stack_xrow(pm *p, int64_t off, kf_buf *o);
int kx_emit_stack(kx *k);

#endif
