/* emit_loop_int.h: the loop emitter's index arithmetic (emit_elementwise.c),
 * shared with its index ops (emit_index.c).  Index variables are numbered
 * (IX_ZERO: the constant 0); values are temporaries t<N> memoised per
 * (value, index). */
#ifndef KF_EMIT_LOOP_INT_H
#define KF_EMIT_LOOP_INT_H
#include "emit_int.h"

/* Row-major strides of t. */
void kx_strides(const kf_type *t, int64_t *st);
/* Appends coordinate d of the row-major index x into shape t. */
void kx_coord(kf_buf *o, const kf_type *t, int d, const char *x);
/* An index variable for expr (memoised by its text, form IXF_*): its number, or IX_ZERO. */
int kx_ix_add(kx *k, kf_buf *expr, int form, int64_t arg);
/* The C name of index variable ix ("0" for IX_ZERO). */
void kx_ix_name(int ix, char *buf, size_t n);
/* The temporary holding value v at index ix, emitted on first use; -1 on failure. */
int kx_value_at(kx *k, kf_vid v, int ix);
/* A new temporary of C type ct for v at ix holding expr (freed). */
int kx_tmp(kx *k, kf_vid v, int ix, const char *ct, kf_buf *expr);

/* emit_index.c: node n's result at index ix, for output type out. */
int kx_gather_at(kx *k, kf_nid n, const kf_type *out, int ix);
int kx_gather_elements_at(kx *k, kf_nid n, const kf_type *out, int ix);
int kx_pad_at(kx *k, kf_nid n, const kf_type *out, int ix);
int kx_resize_at(kx *k, kf_nid n, const kf_type *out, int ix);
#endif
