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
 * Shapes that differ, or dtypes unless both are float types (an f16 result
 * against an f32 reference compares values), are a mismatch with
 * shape_differs set and both types in `types`. */
typedef struct kf_equiv_stat {
	double max_abs, max_rel; /* over finite pairs */
	double rel_l2;           /* ||got - want|| / ||want|| over finite pairs (0 when want is 0) */
	double sq_err, sq_want;  /* its sums */
	int64_t nonfinite_bad;   /* NaN or infinity in one and not the other */
	int64_t nbad, n;         /* elements out of tolerance, of n */
	int64_t worst;           /* index of the worst element out of tolerance, -1 if none */
	double worst_got, worst_want;
	bool shape_differs;
	char types[96];          /* "f16[1,1000] vs f32[1,1001]" when shape_differs */
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

/* What "within tolerance" means for one output.  l2 == 0: element by
 * element, as kf_equiv_compare says (the f32 contract).  l2 > 0: the
 * output's relative L2 error ||got - want|| / ||want|| is at most l2 and
 * no NaN or infinity appears in one output and not the other: the
 * contract of a low-precision graph, whose elementwise errors near zero
 * say nothing (a sum of K products rounded to bf16 is off by about
 * sqrt(K) * 2^-9 of its terms' size, not of its own). */
typedef struct kf_equiv_tol {
	double rtol, atol, l2;
	/* Compare only the elements that a (the reference) computes finite:
	 * the check of a rewrite that may refine, defined where the original
	 * overflowed (a stable softmax for exp(x) / sum(exp(x))). */
	bool finite_ref;
} kf_equiv_tol;
int kf_equiv_check_tol(kf_graph *a, kf_graph *b, uint64_t seed, int trials, const kf_equiv_tol *tol,
		       kf_buf *report);
/* Whether stats (of one output, possibly summed over trials) break tol. */
bool kf_equiv_bad(const kf_equiv_stat *st, const kf_equiv_tol *tol);
/* stats as tol judges them: kf_equiv_describe's line when tol is element by
 * element, else "rel L2 0.013 (at most 0.01), max abs 0.028, 0 non-finite
 * mismatches". */
void kf_equiv_describe_tol(kf_buf *out, const kf_equiv_stat *st, const kf_equiv_tol *tol);
/* "rtol=1e-4 atol=1e-5" or "a relative L2 error of 0.05". */
void kf_equiv_tol_describe(kf_buf *out, const kf_equiv_tol *tol);
/* The lowest-precision float type any value of g (bodies included) has:
 * KF_F32 for an f32 graph, KF_BF16 or KF_F16 after `amp`. */
kf_dtype kf_equiv_precision(const kf_graph *g);
/* The default tolerance for a result computed at precision dt: f32 (and
 * wider) rtol 1e-4, atol 1e-5; f16 relative L2 1e-2; bf16 5e-2.  These are
 * kfuse-opt --check-equivalence's defaults (docs/amp.md gives the
 * measurements they rest on). */
kf_equiv_tol kf_equiv_default_tol(kf_dtype dt);

#endif
