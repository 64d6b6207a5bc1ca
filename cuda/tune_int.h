/* tune_int.h: what tune.c gives tune_time.c (the tuner's two halves). */
#ifndef KF_TUNE_INT_H
#define KF_TUNE_INT_H

#include "kf.h"
#include "emit_matmul.h"

/* Whether n is a fusion the tuner tunes: a contraction, or a conv that
 * runs as an implicit GEMM (its key has the conv's geometry); its shape
 * into *sh. */
bool kf_tune_is_contraction(kf_graph *g, kf_nid n, kf_mm_shape *sh);
/* Sets n's `tile` attribute to cfg. */
void kf_tune_set_tile(kf_graph *g, kf_nid n, const char *cfg);

#endif
