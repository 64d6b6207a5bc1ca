/* equiv.h: numerical equivalence of two graphs on random inputs, the
 * comparison of tensors it rests on, and the random tensors it feeds.
 *
 * kfuse-opt --check-equivalence runs the graph before and after its passes
 * through kf_equiv_check; kfuse-run --random-inputs and --compare use
 * kf_tensor_random and kf_equiv_compare.
 */
#ifndef KF_EQUIV_H
#define KF_EQUIV_H

#include "kf.h"
#include "tensor.h"

/* One step of the generator (splitmix64): deterministic for a seed, and the
 * same on every platform. */
uint64_t kf_rng_next(uint64_t *rng);

/* Allocates t as dt[dims] and fills it from *rng: floats normal-ish (mean 0,
 * deviation 1, exactly representable in dt), integers uniform in [-8, 8]
 * (i8 too), i1 uniform 0/1.  0, or -1 on a bad shape or OOM. */
int kf_tensor_random(kf_tensor *t, kf_dtype dt, int rank, const int64_t *dims, uint64_t *rng);

/* How far `got` is from `want`: elements match when both are NaN, both the
 * same infinity, or |got - want| <= atol + rtol * |want| (numpy's allclose).
 * Shapes or dtypes that differ are a mismatch with shape_differs set. */
typedef struct kf_equiv_stat {
	double max_abs, max_rel; /* over finite pairs */
	int64_t nbad, n;         /* elements out of tolerance, of n */
	int64_t worst;           /* index of the worst element out of tolerance, -1 if none */
	double worst_got, worst_want;
	bool shape_differs;
} kf_equiv_stat;

void kf_equiv_compare(const kf_tensor *got, const kf_tensor *want, double rtol, double atol,
		      kf_equiv_stat *st);
/* One line: "max abs 1.2e-07, max rel 3e-08, 0 of 256 out of tolerance". */
void kf_equiv_describe(kf_buf *out, const kf_equiv_stat *st);

/* Runs a and b on the same random inputs `trials` times (symbolic dims bound
 * to a different size each trial; the seed advances) and appends to report
 * one line per output with its largest errors.  The graphs must take the
 * same inputs (count, dtypes, shapes; symbols by name) and give the same
 * number of results.  Returns 0 when every output is within tolerance, 1
 * when one is not, -1 on an error (in the context). */
int kf_equiv_check(kf_graph *a, kf_graph *b, uint64_t seed, int trials, double rtol, double atol,
		   kf_buf *report);

#endif
