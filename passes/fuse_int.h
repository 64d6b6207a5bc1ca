/* fuse_int.h: the fuse pass's working state, shared by passes/fuse.c and
 * passes/fuse_explain.c; not for other modules. */
#ifndef KF_FUSE_INT_H
#define KF_FUSE_INT_H

#include "fuse.h"

/* Per value: the position of its top-level definer (KF_NONE for graph
 * inputs) and a mark compared with fz.epoch, side by side. */
typedef struct fz_val {
	uint32_t pos, mark;
} fz_val;

/* A list of values; cap 0: the storage is the pass's initial pool. */
typedef struct fz_vec {
	kf_vid *p;
	uint32_t n, cap;
} fz_vec;

/* An unfused edge, for --explain-fusion: printed after the fusion nodes
 * are made, so that values are named as the printed result names them. */
typedef struct fz_why {
	kf_loc loc;     /* the consumer's */
	kf_vid v, cv;   /* the value, the consumer's first result (KF_NONE: none) */
	uint16_t pop, cop; /* producer's and consumer's ops */
	uint8_t r;      /* kf_fuse_reason */
	bool lone;      /* a contraction alone because fuse-matmul did not run before */
} fz_why;

/* What the hot loops (find, the checks, the cycle search) read of a
 * position, together: one cache line for a group reached at random, where
 * eight arrays cost up to eight misses. */
typedef struct fz_grp {
	uint64_t lab;         /* group roots: the label (fuse_dag.c) */
	uint32_t parent;      /* union-find */
	uint32_t size;        /* group roots: members */
	uint32_t fmark, bmark; /* the cycle search's marks */
	uint32_t ident;       /* group roots: the position that names the group (the
				 producer side's in each merge; fusion nodes are made
				 in its order) */
	uint8_t kind;         /* KF_FK_LOOP / KF_FK_ROW / FZ_COL when fusible, else 0 */
	uint8_t gkind;        /* group roots: G_LOOP, G_ROW or G_COL */
} fz_grp;

/* Top-level nodes are addressed by position p in program order.  Groups are
 * union-find sets of positions; a root keeps the group's member list (sorted
 * by position), size, position span, kind (loop, row or column) and shape,
 * and its place in the order of the group graph (passes/fuse_dag.c). */
typedef struct fz {
	kf_graph *g;
	const kf_fuse_opts *o;
	uint32_t n;           /* top-level nodes */
	kf_nid *order;        /* position -> node */
	uint32_t *pos;        /* node -> position, KF_NONE inside bodies */
	uint32_t npos;        /* nodes when the pass began; later ones are its own */
	fz_val *vi;           /* per value of the input graph (reading the node would
				 be a cache miss in the hot loops) */
	uint32_t nvi;
	uint8_t *nstat;       /* per position: kf_fuse_node_static */
	fz_grp *gr;           /* per position (and the order's head and tail) */
	uint8_t *ckind;       /* kf_fuse_kind_of, for explanations */
	uint32_t *next, *head, *tail, *minpos, *maxpos;
	kf_tid *rowT;         /* group roots of kind G_ROW or G_COL: F */
	int *rowA;            /* G_ROW: the first reduced axis */
	unsigned *colS;       /* G_COL: the mask of reduced dims */
	uint32_t *vw, vepoch; /* boundary reshapes of the group being checked */
	uint32_t *ra_epoch;   /* per value: the check (vepoch) ra_how belongs to */
	uint8_t *ra_how;      /* per value: how that check's row group reads it (fuse.c read_as) */
	uint8_t *view;        /* boundary reshapes left outside their group */
	uint32_t *mem, epoch;
	uint32_t *vmark;      /* per value, compared with epoch */
	uint8_t *why;         /* per operand slot: kf_fuse_reason of its edge */
	kf_vid *vmap, *vbuf;
	uint32_t nvmap, nvmark, nvbuf;
	kf_uid *ubuf;
	/* group roots' boundaries, kept as groups merge (fuse.c) */
	fz_vec *gin, *gout;   /* distinct outside inputs; values read outside */
	int64_t *emin;        /* least element count of an expensive op's result */
	int64_t *onum;        /* loop groups: their outputs' element count (-1 none, -2 mixed) */
	uint32_t *oidx;       /* per value: its index in its group's gout */
	kf_vid *vpool;        /* the single nodes' lists */
	kf_vid *tin, *trem;   /* the merge being checked: its inputs, the lost outputs */
	uint32_t ntin, ntrem, captrem;
	uint64_t *hs;         /* ... the smaller group's boundary as a set (fuse_group.c) */
	uint32_t hmask, caphs, hsmall, hbig;
	fz_why *exp;          /* --explain-fusion's edges (fuse_explain.c) */
	uint32_t nexp, capexp;
	kf_vid *moved;        /* per value of the input: its copy in a fusion body, or KF_NONE */
	uint32_t nmoved;
	/* the group graph's order (fuse_dag.c): per group root, labels in gr
	 * (increasing along every edge of the group graph) */
	uint32_t *lnext, *lprev; /* the roots in label order; n, n + 1: head, tail */
	uint32_t sepoch;      /* the search's mark, in gr */
	uint32_t *fst, *bst;  /* its two stacks */
	uint32_t *fvis, *bvis, nfvis, nbvis; /* what each side visited */
	uint32_t *wit, meet;  /* per root: paths found before (fuse_dag.c) */
	uint32_t *reach;      /* per root: groups it is known to reach (fuse_dag.c) */
	int side;             /* the side whose search ran out (1 forward, 2 backward) */
	uint64_t steps;       /* edges the searches looked at, over the pass */
} fz;

/* z->kind of a reduction a column kernel takes (kf_fuse_kind_of says
 * KF_FK_REDUCE: alone, it runs the generic kernel). */
#define FZ_COL 16

/* The root of p's group (union-find with path halving). */
static inline uint32_t kf_fuse_find(fz *z, uint32_t p)
{
	while (z->gr[p].parent != p) {
		z->gr[p].parent = z->gr[z->gr[p].parent].parent;
		p = z->gr[p].parent;
	}
	return p;
}
/* The position of node n; KF_NONE for nodes in bodies or made by the pass. */
static inline uint32_t kf_fuse_pos(const fz *z, kf_nid n) { return n < z->npos ? z->pos[n] : KF_NONE; }

/* Group kinds (fz.gkind). */
enum { G_LOOP = 1, G_ROW = 2, G_COL = 3 };

/* The position of v's defining node at the top level, or KF_NONE. */
static inline uint32_t fz_pos_of(const fz *z, kf_vid v)
{
	return v < z->nvi ? z->vi[v].pos : KF_NONE;
}

/* Membership while groups form (before kf_fuse_detach_views): a node that
 * does not fuse is a group of its own, never ga or gb, so kind need not be
 * read. */
static inline bool fz_in(fz *z, uint32_t p, uint32_t ga, uint32_t gb)
{
	if (p == KF_NONE)
		return false;
	uint32_t r = kf_fuse_find(z, p);
	return r == ga || r == gb;
}

/* True when position p is in group ga or gb. */
static inline bool fz_member(fz *z, uint32_t p, uint32_t ga, uint32_t gb)
{
	if (p == KF_NONE || !z->gr[p].kind)
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
static inline int64_t fz_numel(const kf_graph *g, kf_vid v) { return kf_type_numel(kf_vtype(g, v)); }

/* ---- groups (fuse_group.c) ---- */

/* The boundary of the single node at position p (before any merge); its
 * lists go into *pool, which advances. */
void kf_fuse_boundary_init(fz *z, uint32_t p, kf_vid **pool);
void kf_fuse_vec_free(fz_vec *v);
/* The distinct outside inputs of the union of groups ga and gb into z->tin
 * (small constants are embedded, not inputs); stops counting past
 * max-inputs.  Returns the count. */
int kf_fuse_count_inputs(fz *z, uint32_t ga, uint32_t gb);
/* The outputs each group loses by the merge (values of one that only the
 * other reads) into z->trem; lost[0] for ga, lost[1] for gb.  Right after
 * kf_fuse_count_inputs on the same pair (it uses what that set up). */
void kf_fuse_lost_outputs(fz *z, uint32_t ga, uint32_t gb, uint32_t lost[2]);
/* The element count of the outputs a merged loop group keeps: -1 when
 * none, -2 when they differ. */
int64_t kf_fuse_merged_numel(fz *z, uint32_t ga, uint32_t gb, const uint32_t lost[2]);
/* Merges groups ga and gb (after every check and kf_fuse_count_inputs and
 * kf_fuse_lost_outputs on them): members, boundary, kind and shape (F, a,
 * S), the outputs' element count N, and the group graph's order. */
void kf_fuse_merge(fz *z, uint32_t ga, uint32_t gb, int kind, kf_tid F, int a, unsigned S, int64_t N);
/* The members of groups ga and gb (the same group when ga == gb) into
 * z->mem, sorted by position; returns their count. */
uint32_t kf_fuse_members(fz *z, uint32_t ga, uint32_t gb);

/* ---- fusion nodes (fuse_build.c) ---- */

/* Makes group `root`'s fusion node @k<index>. */
int kf_fuse_make_node(fz *z, uint32_t root, int index);
/* Erases the constants left without users after their copies moved into bodies. */
void kf_fuse_drop_group_consts(fz *z);
/* Marks the boundary views among the cnt members in z->mem. */
void kf_fuse_mark_views(fz *z, uint32_t ga, uint32_t gb, uint32_t cnt);
void kf_fuse_detach_views(fz *z);
kf_fuse_reason kf_fuse_check_col(fz *z, uint32_t ga, uint32_t gb, kf_tid FT, unsigned S);
kf_fuse_reason kf_fuse_merged_colshape(fz *z, uint32_t ga, uint32_t gb, kf_tid *F, unsigned *S);

/* --explain-fusion: the unfused producer -> consumer edges, noted before
 * the fusion nodes are made (collect), written one line each after
 * (print), naming values as the printed result does. */
void kf_fuse_explain_collect(fz *z);
void kf_fuse_explain_print(fz *z, kf_buf *log);
/* Re-sorts block 0 so that every value is defined before its uses (stable
 * where the order is already valid); the terminator stays last. */
void kf_fuse_toposort(kf_graph *g);

/* The group graph (passes/fuse_dag.c): every top-level node is in one group
 * (a union-find root); the edges are those of the nodes between groups.
 * Labels order the groups topologically. */
void kf_fuse_dag_init(fz *z);
void kf_fuse_dag_free(fz *z);
/* Whether groups ga and gb can merge without making a cycle: KF_FR_NONE,
 * KF_FR_CYCLE, or KF_FR_SEARCH_LIMIT when the search gave up.  After
 * KF_FR_NONE the caller merges them (union-find, members) and calls
 * kf_fuse_dag_merged before any other check. */
kf_fuse_reason kf_fuse_dag_check(fz *z, uint32_t ga, uint32_t gb);
/* Puts the merged group `root` (absorbing `gone`) in the order. */
void kf_fuse_dag_merged(fz *z, uint32_t root, uint32_t gone);
/* Checks that labels increase along every edge between groups (tests). */
bool kf_fuse_dag_valid(fz *z);

#endif
