/* equiv.c: random tensors, tensor comparison and the equivalence check of
 * two graphs on random inputs (kfuse-opt --check-equivalence). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "cpu_ops.h"
#include "equiv.h"
#include "interp.h"

uint64_t kf_rng_next(uint64_t *rng)
{
	uint64_t z = (*rng += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* Uniform in [0, 1) with 53 random bits. */
static double uniform(uint64_t *rng) { return (double)(kf_rng_next(rng) >> 11) * 0x1.0p-53; }

int kf_tensor_random(kf_tensor *t, kf_dtype dt, int rank, const int64_t *dims, uint64_t *rng)
{
	if (kf_tensor_alloc(t, dt, rank, dims) != 0)
		return -1;
	int64_t n = kf_tensor_numel(t);
	size_t esz = kf_dtype_size(dt);
	bool isf = kf_dtype_is_float(dt);
	double fb[256];
	int64_t ib[256];
	for (int64_t at = 0; at < n; at += 256) {
		int64_t m = n - at < 256 ? n - at : 256;
		for (int64_t i = 0; i < m; i++) {
			if (isf) /* Irwin-Hall of 4, scaled to unit variance */
				fb[i] = (uniform(rng) + uniform(rng) + uniform(rng) + uniform(rng) - 2.0) * sqrt(3.0);
			else if (dt == KF_I1)
				ib[i] = (int64_t)(kf_rng_next(rng) >> 63);
			else
				ib[i] = (int64_t)(kf_rng_next(rng) % 17) - 8;
		}
		kf_rt_store(dt, (char *)t->data + at * (int64_t)esz, isf ? RT_F64 : RT_I64,
			    isf ? (const void *)fb : (const void *)ib, m);
	}
	return 0;
}

void kf_equiv_compare(const kf_tensor *got, const kf_tensor *want, double rtol, double atol,
		      kf_equiv_stat *st)
{
	memset(st, 0, sizeof *st);
	st->worst = -1;
	/* a float result may be judged against a reference of another float
	 * type (an f16 model's output against PyTorch's, kept in f32) */
	bool types_ok = got->dtype == want->dtype || (kf_dtype_is_float(got->dtype) && kf_dtype_is_float(want->dtype));
	bool dims_ok = got->rank == want->rank;
	for (int d = 0; dims_ok && d < got->rank; d++)
		dims_ok = got->dim[d] == want->dim[d];
	if (!types_ok || !dims_ok) {
		st->shape_differs = true;
		kf_buf b = {0};
		for (int i = 0; i < 2; i++) {
			const kf_tensor *t = i ? want : got;
			kf_buf_printf(&b, "%s%s[", i ? " vs " : "", kf_dtype_name(t->dtype));
			for (int d = 0; d < t->rank; d++)
				kf_buf_printf(&b, "%s%lld", d ? "," : "", (long long)t->dim[d]);
			kf_buf_putc(&b, ']');
		}
		snprintf(st->types, sizeof st->types, "%.*s", (int)b.n, b.p);
		kf_buf_free(&b);
		st->nbad = 1;
		return;
	}
	st->n = kf_tensor_numel(want);
	double worst_excess = -1;
	for (int64_t i = 0; i < st->n; i++) {
		double g = kf_tensor_get(got, i), w = kf_tensor_get(want, i);
		bool ok;
		if (isnan(g) || isnan(w) || isinf(g) || isinf(w)) {
			ok = (isnan(g) && isnan(w)) || g == w;
			st->nonfinite_bad += !ok;
		} else {
			st->sq_err += (g - w) * (g - w);
			st->sq_want += w * w;
			double ad = fabs(g - w), rd = w != 0 ? ad / fabs(w) : (ad != 0 ? INFINITY : 0);
			if (ad > st->max_abs)
				st->max_abs = ad;
			if (rd > st->max_rel)
				st->max_rel = rd;
			ok = ad <= atol + rtol * fabs(w);
		}
		if (!ok) {
			/* the worst is the one furthest past its tolerance */
			double ex = isfinite(g) && isfinite(w) ? fabs(g - w) - (atol + rtol * fabs(w)) : INFINITY;
			if (ex > worst_excess || st->worst < 0) {
				worst_excess = ex;
				st->worst = i;
				st->worst_got = g;
				st->worst_want = w;
			}
			st->nbad++;
		}
	}
	st->rel_l2 = st->sq_want > 0 ? sqrt(st->sq_err / st->sq_want) : st->sq_err > 0 ? INFINITY : 0;
}

void kf_equiv_describe(kf_buf *out, const kf_equiv_stat *st)
{
	if (st->shape_differs) {
		kf_buf_printf(out, "shapes or dtypes differ: %s", st->types);
		return;
	}
	kf_buf_printf(out, "max abs %.3g, max rel %.3g, rel L2 %.3g, %lld of %lld out of tolerance",
		      st->max_abs, st->max_rel, st->rel_l2, (long long)st->nbad, (long long)st->n);
	if (st->worst >= 0)
		kf_buf_printf(out, " (worst at [%lld]: %.9g vs %.9g)", (long long)st->worst, st->worst_got,
			      st->worst_want);
}

void kf_equiv_describe_tol(kf_buf *out, const kf_equiv_stat *st, const kf_equiv_tol *tol)
{
	if (tol->l2 > 0 && !st->shape_differs)
		kf_buf_printf(out, "rel L2 %.3g (at most %g), max abs %.3g, %lld non-finite mismatches", st->rel_l2,
			      tol->l2, st->max_abs, (long long)st->nonfinite_bad);
	else
		kf_equiv_describe(out, st);
}

/* The same inputs for both graphs: same count, dtypes and ranks, static
 * dims equal, symbolic dims with equal names. */
static int same_signature(kf_graph *a, kf_graph *b)
{
	kf_ctx *c = a->ctx;
	const kf_block *ba = &a->blk[0], *bb = &b->blk[0];
	if (ba->narg != bb->narg || a->nres != b->nres) {
		kf_error(c, b->loc, "@%s: %u inputs and %u results, but @%s has %u and %u",
			 kf_str(b->ctx, b->name), bb->narg, b->nres, kf_str(c, a->name), ba->narg, a->nres);
		return -1;
	}
	for (uint32_t i = 0; i < ba->narg; i++) {
		const kf_type *ta = kf_vtype(a, ba->arg[i]), *tb = kf_vtype(b, bb->arg[i]);
		bool ok = ta->dtype == tb->dtype && ta->rank == tb->rank;
		for (int d = 0; ok && d < ta->rank; d++) {
			int64_t x = ta->dim[d], y = tb->dim[d];
			ok = KF_IS_SYM(x) == KF_IS_SYM(y) &&
			     (KF_IS_SYM(x) ? strcmp(kf_str(c, KF_SYM_SID(x)), kf_str(b->ctx, KF_SYM_SID(y))) == 0
					   : x == y);
		}
		if (!ok) {
			kf_error(c, b->loc, "@%s: input %u has another type than in @%s", kf_str(b->ctx, b->name),
				 i, kf_str(c, a->name));
			return -1;
		}
	}
	return 0;
}

/* Sizes symbolic dims take, one per trial and symbol, in turn. */
static const int64_t sym_sizes[] = {3, 8, 1, 17, 32};

/* Random inputs for graph g in trial t; symbols bound by name. */
static int make_inputs(kf_graph *g, int t, uint64_t *rng, kf_tensor *in)
{
	const kf_block *b0 = &g->blk[0];
	const char *names[64];
	int nsym = 0;
	for (uint32_t i = 0; i < b0->narg; i++) {
		const kf_type *ty = kf_vtype(g, b0->arg[i]);
		int64_t dims[KF_MAX_RANK];
		for (int d = 0; d < ty->rank; d++) {
			dims[d] = ty->dim[d];
			if (!KF_IS_SYM(dims[d]))
				continue;
			const char *s = kf_str(g->ctx, KF_SYM_SID(dims[d]));
			int k = 0;
			while (k < nsym && strcmp(names[k], s) != 0)
				k++;
			if (k == nsym && nsym < 64)
				names[nsym++] = s;
			dims[d] = sym_sizes[(t + k) % (int)(sizeof sym_sizes / sizeof sym_sizes[0])];
		}
		if (kf_tensor_random(&in[i], (kf_dtype)ty->dtype, ty->rank, dims, rng) != 0) {
			kf_error(g->ctx, g->loc, "cannot allocate random input %u", i);
			return -1;
		}
	}
	return 0;
}

static void free_all(kf_tensor *t, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		kf_tensor_free(&t[i]);
}

/* got takes want's value wherever want is NaN or infinite (same shapes
 * and float types; otherwise the comparison reports the mismatch). */
static void take_nonfinite(kf_tensor *got, const kf_tensor *want)
{
	if (!kf_dtype_is_float(got->dtype) || !kf_dtype_is_float(want->dtype) ||
	    kf_tensor_numel(got) != kf_tensor_numel(want))
		return;
	for (int64_t e = 0, n = kf_tensor_numel(want); e < n; e++) {
		double w = kf_tensor_get(want, e);
		if (!isfinite(w))
			kf_tensor_set(got, e, w);
	}
}

bool kf_equiv_bad(const kf_equiv_stat *w, const kf_equiv_tol *tol)
{
	if (tol->l2 > 0)
		return w->shape_differs || w->nonfinite_bad > 0 || !(w->rel_l2 <= tol->l2);
	return w->nbad > 0;
}

int kf_equiv_check_tol(kf_graph *a, kf_graph *b, uint64_t seed, int trials, const kf_equiv_tol *tol,
		       kf_buf *report)
{
	if (same_signature(a, b) != 0)
		return -1;
	uint32_t nin = a->blk[0].narg, nres = a->nres;
	kf_tensor *in = calloc(nin + 2 * nres + 1, sizeof *in), *ra = in + nin, *rb = ra + nres;
	kf_equiv_stat *worst = calloc(nres + 1, sizeof *worst);
	if (!in || !worst) {
		free(in), free(worst);
		kf_error(a->ctx, a->loc, "out of memory");
		return -1;
	}
	for (uint32_t i = 0; i < nres; i++)
		worst[i].worst = -1;
	uint64_t rng = seed;
	int rc = 0;
	for (int t = 0; t < (trials > 0 ? trials : 1) && rc >= 0; t++) {
		if (make_inputs(a, t, &rng, in) != 0 || kf_interp_run(a, in, nin, ra, nres) != 0 ||
		    kf_interp_run(b, in, nin, rb, nres) != 0) {
			rc = -1;
		} else {
			for (uint32_t i = 0; i < nres; i++) {
				kf_equiv_stat st;
				if (tol->finite_ref)
					take_nonfinite(&rb[i], &ra[i]);
				kf_equiv_compare(&rb[i], &ra[i], tol->rtol, tol->atol, &st);
				kf_equiv_stat *w = &worst[i];
				/* sums and maxima over trials; the first bad element as example */
				w->nbad += st.nbad;
				w->n += st.n;
				w->max_abs = fmax(w->max_abs, st.max_abs);
				w->max_rel = fmax(w->max_rel, st.max_rel);
				w->shape_differs |= st.shape_differs;
				w->sq_err += st.sq_err;
				w->sq_want += st.sq_want;
				w->nonfinite_bad += st.nonfinite_bad;
				w->rel_l2 = w->sq_want > 0 ? sqrt(w->sq_err / w->sq_want) : w->sq_err > 0 ? INFINITY : 0;
				if (w->worst < 0 && st.worst >= 0) {
					w->worst = st.worst;
					w->worst_got = st.worst_got;
					w->worst_want = st.worst_want;
				}
			}
		}
		free_all(in, nin);
		free_all(ra, nres);
		free_all(rb, nres);
	}
	/* judged on the sums over all trials */
	for (uint32_t i = 0; rc == 0 && i < nres; i++)
		if (kf_equiv_bad(&worst[i], tol))
			rc = 1;
	for (uint32_t i = 0; rc >= 0 && report && i < nres; i++) {
		kf_vid v = kf_in(a, kf_block_terminator(a, 0), i);
		const char *vn = kf_str(a->ctx, kf_V(a, v)->name);
		kf_buf_printf(report, "@%s result %u%s%s%s: ", kf_str(a->ctx, a->name), i, vn[0] ? " (%" : "",
			      vn, vn[0] ? ")" : "");
		kf_equiv_describe_tol(report, &worst[i], tol);
		kf_buf_printf(report, " over %d trial%s [%s]\n", trials, trials == 1 ? "" : "s",
			      kf_equiv_bad(&worst[i], tol) ? "MISMATCH" : "ok");
	}
	free(in);
	free(worst);
	return rc;
}

int kf_equiv_check(kf_graph *a, kf_graph *b, uint64_t seed, int trials, double rtol, double atol,
		   kf_buf *report)
{
	kf_equiv_tol tol = {rtol, atol, 0};
	return kf_equiv_check_tol(a, b, seed, trials, &tol, report);
}

void kf_equiv_tol_describe(kf_buf *out, const kf_equiv_tol *tol)
{
	if (tol->l2 > 0)
		kf_buf_printf(out, "a relative L2 error of %g", tol->l2);
	else
		kf_buf_printf(out, "rtol=%g atol=%g", tol->rtol, tol->atol);
	if (tol->finite_ref)
		kf_buf_puts(out, " where the reference is finite");
}

kf_dtype kf_equiv_precision(const kf_graph *g)
{
	kf_dtype lo = KF_F32;
	for (uint32_t v = 0; v < g->nval; v++) {
		kf_dtype dt = (kf_dtype)kf_vtype(g, v)->dtype;
		if (dt == KF_BF16 || (dt == KF_F16 && lo != KF_BF16))
			lo = dt;
	}
	return lo;
}

kf_equiv_tol kf_equiv_default_tol(kf_dtype dt)
{
	switch (dt) {
	case KF_BF16: return (kf_equiv_tol){0, 0, 5e-2};
	case KF_F16: return (kf_equiv_tol){0, 0, 1e-2};
	default: return (kf_equiv_tol){1e-4, 1e-5, 0};
	}
}
