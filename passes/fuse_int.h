/* fuse_int.h: the fuse pass's working state, shared by passes/fuse.c and
 * passes/fuse_explain.c; not for other modules. */
#ifndef KF_FUSE_INT_H
#define KF_FUSE_INT_H

#include "fuse.h"

/* Top-level nodes are addressed by position p in program order.  Groups are
 * union-find sets of positions; a root keeps the group's member list, size,
 * position span, kind (loop or row) and row shape. */
typedef struct fz {
	kf_graph *g;
	const kf_fuse_opts *o;
	uint32_t n;           /* top-level nodes */
	kf_nid *order;        /* position -> node */
	uint32_t *pos;        /* node -> position, KF_NONE inside bodies */
	uint32_t npos;        /* nodes when the pass began; later ones are its own */
	uint8_t *kind;        /* KF_FK_LOOP / KF_FK_ROW when fusible, else 0 */
	uint8_t *ckind;       /* kf_fuse_kind_of, for explanations */
	uint8_t *gkind;       /* group roots: G_LOOP or G_ROW */
	uint32_t *parent, *next, *head, *tail, *size, *minpos, *maxpos;
	kf_tid *rowT;         /* group roots of kind G_ROW: F */
	int *rowA;            /* and the first reduced axis */
	uint32_t *pmark, *stack, *mem, epoch;
	uint32_t *vmark;      /* per value, compared with epoch */
	uint8_t *why;         /* per operand slot: kf_fuse_reason of its edge */
	kf_vid *vmap, *vbuf;
	uint32_t nvmap, nvmark, nvbuf;
	kf_uid *ubuf;
} fz;

uint32_t kf_fuse_find(fz *z, uint32_t p);
/* The position of node n; KF_NONE for nodes in bodies or made by the pass. */
static inline uint32_t kf_fuse_pos(const fz *z, kf_nid n) { return n < z->npos ? z->pos[n] : KF_NONE; }
/* True when every operand and result of n has a static shape. */
bool kf_fuse_node_static(const kf_graph *g, kf_nid n);
/* One line per unfused producer -> consumer edge, into log. */
void kf_fuse_explain(fz *z, kf_buf *log);
/* Re-sorts block 0 so that every value is defined before its uses (stable
 * where the order is already valid); the terminator stays last. */
void kf_fuse_toposort(kf_graph *g);

#endif
