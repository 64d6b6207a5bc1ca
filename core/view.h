/* view.h: strided views.  A chain of layout ops (transpose, reshape,
 * broadcast_to, slice, a result of split) reads its base tensor at an
 * offset that is a sum of one term per dim of the view: the dim's index i
 * is split into factors, outermost first, of extents e_k and strides s_k,
 * and factor k adds ((i / inner_k) % e_k) * s_k, inner_k being the product
 * of the extents after k.  A transpose or a slice keeps one factor per dim;
 * a reshape that merges dims which are not adjacent in memory keeps each
 * as a factor (grouped-query attention repeats the k/v heads with
 * broadcast_to and a reshape: head h reads k/v head h / rep, a stride-0
 * factor inside a stride-T*D one).  A kernel that reads or writes through
 * such a chain computes addresses with the view instead of materialising
 * the intermediate tensors.
 *
 * Shapes are static; every function returns false (leaving *v unspecified)
 * when the chain is not a view of this form: a symbolic or zero dim, a
 * reshape that splits a factor unevenly, more than KF_VIEW_MAXF factors in
 * a dim. */
#ifndef KF_VIEW_H
#define KF_VIEW_H

#include "kf.h"

#define KF_VIEW_MAXF 4

typedef struct kf_view_dim {
	int64_t size;                 /* the dim's extent: the product of ext[] */
	int nf;                       /* factors; 0 for a dim of size 1 */
	int64_t ext[KF_VIEW_MAXF];    /* outermost first, each > 1 */
	int64_t stride[KF_VIEW_MAXF]; /* elements of the base; 0 repeats */
} kf_view_dim;

typedef struct kf_view {
	int rank;
	int64_t off; /* base offset, elements */
	kf_view_dim d[KF_MAX_RANK];
} kf_view;

/* The contiguous (row-major) view of a tensor of type t. */
bool kf_view_init(kf_view *v, const kf_type *t);
/* Dim i of the result is dim perm[i] of v. */
bool kf_view_transpose(kf_view *v, const int64_t *perm, int rank);
/* The same elements in row-major order, dims dims[0..rank). */
bool kf_view_reshape(kf_view *v, const int64_t *dims, int rank);
/* numpy broadcast_to: v aligned to dims from the right; added dims and
 * dims of size 1 that grow repeat (stride 0). */
bool kf_view_broadcast(kf_view *v, const int64_t *dims, int rank);
/* Dim axis becomes len elements start, start + step, ... (step may be
 * negative; the dim must have at most one factor). */
bool kf_view_slice(kf_view *v, int axis, int64_t start, int64_t step, int64_t len);

/* The start and step of slice node n along each dim of its (static)
 * operand, ONNX's clamping applied (the length is the result's dim);
 * false when the attributes are not ints of one length. */
bool kf_slice_geom(const kf_graph *g, kf_nid n, int64_t *start, int64_t *step);

/* v is the view of operand 0 of node n; makes it the view of n's result
 * `res` (transpose, reshape, broadcast_to, slice, split).  False for other
 * ops. */
bool kf_view_through(const kf_graph *g, kf_nid n, uint32_t res, kf_view *v);
/* v is the view of n's result; makes it the view of n's operand 0 for the
 * ops that move every element to one place (transpose, reshape): the
 * inverse of kf_view_through, used to write through an output chain. */
bool kf_view_back_through(const kf_graph *g, kf_nid n, kf_view *v);

/* The offset of element idx[0..rank) (in range). */
int64_t kf_view_offset(const kf_view *v, const int64_t *idx);
/* The stride of dim d when it is one factor (or size 1: 0); -1 when it is
 * several. */
int64_t kf_view_stride(const kf_view *v, int d);

#endif
