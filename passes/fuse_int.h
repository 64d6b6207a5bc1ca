/* fuse_int.h: the fuse pass's working state, shared by passes/fuse.c and
 * passes/fuse_explain.c; not for other modules. */
#ifndef KF_FUSE_INT_H
#define KF_FUSE_INT_H

#include "fuse.h"

/* Top-level nodes are addressed by position p in program order.  Groups are
 * union-find sets of positions; a root keeps the group's member list, size,
 * position span, kind (loop, row or column) and its shape. */
typedef struct fz {
	kf_graph *g;
	const kf_fuse_opts *o;
	uint32_t n;           /* top-level nodes */
	kf_nid *order;        /* position -> node */
	uint32_t *pos;        /* node -> position, KF_NONE inside bodies */
	uint32_t npos;        /* nodes when the pass began; later ones are its own */
	uint8_t *kind;        /* KF_FK_LOOP / KF_FK_ROW / FZ_COL when fusible, else 0 */
	uint8_t *ckind;       /* kf_fuse_kind_of, for explanations */
	uint8_t *gkind;       /* group roots: G_LOOP or G_ROW */
	uint32_t *parent, *next, *head, *tail, *size, *minpos, *maxpos;
	kf_tid *rowT;         /* group roots of kind G_ROW or G_COL: F */
	int *rowA;            /* G_ROW: the first reduced axis */
	unsigned *colS;       /* G_COL: the mask of reduced dims */
	uint32_t *vw, vepoch; /* boundary reshapes of the group being checked */
	uint8_t *view;        /* boundary reshapes left outside their group */
	uint32_t *pmark, *stack, *mem, epoch;
	uint32_t *vmark;      /* per value, compared with epoch */
	uint8_t *why;         /* per operand slot: kf_fuse_reason of its edge */
	kf_vid *vmap, *vbuf;
	uint32_t nvmap, nvmark, nvbuf;
	kf_uid *ubuf;
} fz;

/* z->kind of a reduction a column kernel takes (kf_fuse_kind_of says
 * KF_FK_REDUCE: alone, it runs the generic kernel). */
#define FZ_COL 16

uint32_t kf_fuse_find(fz *z, uint32_t p);
/* The position of node n; KF_NONE for nodes in bodies or made by the pass. */
static inline uint32_t kf_fuse_pos(const fz *z, kf_nid n) { return n < z->npos ? z->pos[n] : KF_NONE; }

/* Group kinds (fz.gkind). */
enum { G_LOOP = 1, G_ROW = 2, G_COL = 3 };

/* The position of v's defining node at the top level, or KF_NONE. */
static inline uint32_t fz_pos_of(const fz *z, kf_vid v)
{
	kf_nid d = kf_def(z->g, v);
	return d == KF_NONE || kf_N(z->g, d)->blk != 0 ? KF_NONE : kf_fuse_pos(z, d);
}

/* True when position p is in group ga or gb. */
static inline bool fz_member(fz *z, uint32_t p, uint32_t ga, uint32_t gb)
{
	if (p == KF_NONE || !z->kind[p])
		return false;
	uint32_t r = kf_fuse_find(z, p);
	return r == ga || r == gb;
}

/* A member that the kernel computes: not a boundary reshape (kf_fuse_mark_views). */
static inline bool fz_rmember(fz *z, uint32_t p, uint32_t ga, uint32_t gb)
{
	return fz_member(z, p, ga, gb) && z->vw[p] != z->vepoch;
}

/* True when a node outside groups ga and gb (or a boundary view) reads v. */
static inline bool fz_outside_user(fz *z, kf_vid v, uint32_t ga, uint32_t gb)
{
	kf_foreach_use(z->g, v, u) {
		kf_nid un = z->g->use[u].user;
		if (kf_N(z->g, un)->blk != 0 || !fz_rmember(z, kf_fuse_pos(z, un), ga, gb))
			return true;
	}
	return false;
}

/* Row shapes agree on dims; the dtype does not matter (a cast between two
 * reductions keeps the rows). */
static inline bool fz_same_dims(const kf_graph *g, kf_tid a, kf_tid b)
{
	const kf_type *x = kf_type_get(g->ctx, a), *y = kf_type_get(g->ctx, b);
	if (x->rank != y->rank)
		return false;
	for (int d = 0; d < x->rank; d++)
		if (x->dim[d] != y->dim[d])
			return false;
	return true;
}

/* Boundary reshapes (views) of row and column groups, and the legality of a
 * column group (passes/fuse_explain.c). */
void kf_fuse_mark_views(fz *z, uint32_t ga, uint32_t gb);
void kf_fuse_detach_views(fz *z);
kf_fuse_reason kf_fuse_check_col(fz *z, uint32_t ga, uint32_t gb, kf_tid FT, unsigned S);
kf_fuse_reason kf_fuse_merged_colshape(fz *z, uint32_t ga, uint32_t gb, kf_tid *F, unsigned *S);

/* One line per unfused producer -> consumer edge, into log. */
void kf_fuse_explain(fz *z, kf_buf *log);
/* Re-sorts block 0 so that every value is defined before its uses (stable
 * where the order is already valid); the terminator stays last. */
void kf_fuse_toposort(kf_graph *g);

#endif
