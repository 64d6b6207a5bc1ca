/* fusion.h: the fusion kinds, as the fuse pass makes them and every backend
 * runs them: which ops a kernel of each kind holds, how a reduction splits its
 * input into rows or columns, and how each value of the body is indexed.
 * This is part of the IR's contract (a fusion's body is ordinary IR; its
 * kind says how it iterates), so it sits in core: the passes decide with it,
 * the backends emit with it, and neither reaches into the other.
 *
 *   kind = "elementwise": element-wise, broadcast and injective ops; one
 *          iteration space (every result the group writes has one element
 *          count), values computed on demand at the indices needed.
 *   kind = "reduce": reductions over trailing axes (reduce_*, softmax,
 *          log_softmax, layer_norm) of one row shape [R, C], with their
 *          element-wise prologue and epilogue; a row is kept in registers.
 *   kind = "colreduce": reduce_* over other axes (one axis not last, or
 *          several) of one shape, with prologue and epilogue; one thread per
 *          output column loops over the reduced axes, once per dependent
 *          reduction.
 * docs/fusion.md has the rules. */
#ifndef KF_FUSION_H
#define KF_FUSION_H

#include "kf.h"

/* How node n iterates, as kernels see it. */
typedef enum {
	KF_FK_NONE,     /* not fusible: contraction, opaque, fusion, terminator */
	KF_FK_LOOP,     /* element-wise, broadcast, injective */
	KF_FK_ROW,      /* reduction over trailing axes: rows of C elements */
	KF_FK_REDUCE,   /* another reduction (generic kernel, not fused) */
	KF_FK_CONST,
} kf_fuse_kind;

kf_fuse_kind kf_fuse_kind_of(const kf_graph *g, kf_nid n);

/* The row split of a reduction-like node: its input 0 has type F (rank r),
 * and it reduces axes a..r-1, so R = prod F[0..a), C = prod F[a..r).
 * Returns false when n is not a reduction over trailing axes. */
bool kf_fuse_row_split(const kf_graph *g, kf_nid n, int *a, int64_t *R, int64_t *C);

/* How a value of type t is indexed in a row kernel over F split at a:
 * FULL [row, col], COL (broadcast over rows) [col], ROW (one per row) [row],
 * SCALAR.  elem: t is an operand of a per-element op, so it aligns to F
 * from the right as numpy broadcasting does; otherwise (a result, or an
 * operand of a per-row op) F[0..a) without the reduced dims is a ROW too. */
typedef enum { KF_RC_BAD, KF_RC_FULL, KF_RC_COL, KF_RC_ROW, KF_RC_SCALAR } kf_rowclass;
kf_rowclass kf_fuse_rowclass(const kf_type *F, int a, const kf_type *t, bool elem);

/* Column kernels (kind = "colreduce", cuda/emit_colreduce.c): reductions
 * over any set of axes of one shape F.  S is the mask of reduced dims of F
 * (dims of size 1 left out); one thread owns each of the M "columns" (the
 * kept coordinates, consecutive threads on consecutive columns) and loops
 * over the L reduced ones.  Every value of the kernel is F-aligned: its type,
 * aligned to F from the right as numpy broadcasting does, has each dim equal
 * to F's or 1, so that it is evaluated at the thread's current point of F.
 * Returns false when n is not a float reduce_* whose result is its own
 * column (keepdims, or reduced dims leading). */
bool kf_fuse_col_split(const kf_graph *g, kf_nid n, unsigned *S, int64_t *M, int64_t *L);

/* How a value of type t sits in a column kernel over F with reduced dims S:
 * ELEM varies along a reduced dim (evaluated inside the loop over them),
 * OUT is constant along them (once per column); BAD is not F-aligned. */
typedef enum { KF_CC_BAD, KF_CC_ELEM, KF_CC_OUT } kf_colclass;
kf_colclass kf_fuse_colclass(const kf_type *F, unsigned S, const kf_type *t);
/* True when a value of type t can be written by a column kernel: an ELEM
 * value of F's dims (each thread writes its column's elements), or an OUT
 * value with F's kept dims (each thread writes its own column). */
bool kf_fuse_col_writable(const kf_type *F, unsigned S, const kf_type *t);

/* True for ops whose CUDA form is costly (transcendentals, division). */
bool kf_fuse_op_expensive(int op);

/* Reductions one row kernel holds at most (two layer norms). */
#define KF_FUSE_MAX_REDUCTIONS 4

/* A const that a kernel embeds in its text instead of reading it. */
#define KF_FUSE_EMBED_MAX 64
bool kf_fuse_const_embeddable(const kf_graph *g, kf_nid n);

/* True when every operand and result of n has a static type. */
bool kf_fuse_node_static(const kf_graph *g, kf_nid n);

/* True when node d (KF_NONE: false) moves data at the top level: one
 * operand, an injective op (reshape, transpose, slice, broadcast, split's
 * several results...): where it reads from is its operand's def. */
bool kf_fuse_is_view(const kf_graph *g, kf_nid d);

/* True when n is a transpose that swaps the last two axes and keeps the
 * others (a batched matrix transpose, foldable into a matmul's loads). */
bool kf_fuse_swaps_last_two(const kf_graph *g, kf_nid n);

#endif
