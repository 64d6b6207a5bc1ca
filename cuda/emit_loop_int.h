/* emit_loop_int.h: the loop emitter's index arithmetic (emit_elementwise.c),
 * shared with its index ops (emit_index.c).  Index variables are numbered
 * (IX_ZERO: the constant 0); values are temporaries t<N> memoised per
 * (value, index). */
#ifndef KF_EMIT_LOOP_INT_H
#define KF_EMIT_LOOP_INT_H
#include "emit_int.h"

/* Row-major strides of t (st) and of its symbolic form ts (ss, may be
 * NULL; ts NULL: t's). */
void kx_strides(const kx *k, const kf_type *t, const kf_type *ts, int64_t *st, int64_t *ss);
/* Appends coordinate d of the row-major index x into shape t (symbolic
 * form ts, NULL: t). */
void kx_coord(kx *k, kf_buf *o, const kf_type *t, const kf_type *ts, int d, const char *x);
/* An index variable for expr (memoised by its text, form IXF_*, argument
 * arg with symbolic form sarg): its number, or IX_ZERO. */
int kx_ix_add(kx *k, kf_buf *expr, int form, int64_t arg, int64_t sarg);
/* The C name of index variable ix ("0" for IX_ZERO). */
void kx_ix_name(int ix, char *buf, size_t n);
/* The temporary holding value v at index ix, emitted on first use; -1 on failure. */
int kx_value_at(kx *k, kf_vid v, int ix);
/* A new temporary of C type ct for v at ix holding expr (freed). */
int kx_tmp(kx *k, kf_vid v, int ix, const char *ct, kf_buf *expr);

/* emit_index.c: node n's result at index ix, for output type out
 * (symbolic form sout). */
int kx_gather_at(kx *k, kf_nid n, const kf_type *out, const kf_type *sout, int ix);
int kx_gather_elements_at(kx *k, kf_nid n, const kf_type *out, const kf_type *sout, int ix);
int kx_pad_at(kx *k, kf_nid n, const kf_type *out, const kf_type *sout, int ix);
int kx_resize_at(kx *k, kf_nid n, const kf_type *out, const kf_type *sout, int ix);
#endif
