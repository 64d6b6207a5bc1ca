/* cpu_matmul.c: matmul (numpy semantics: batched, broadcast batch dims, 1-D
 * operands promoted and their dim dropped) and gemm (ONNX:
 * alpha * A' B' + beta * C, C broadcast to [M, N]).
 *
 * Operands are converted once to the accumulation kind (double for every
 * float dtype: the oracle's dot products are exact to double; int64 for
 * integers, wrapping) and multiplied in i-k-j order in blocks of
 * MB x NB outputs over KB-deep panels, so the inner loop is a contiguous
 * axpy the compiler vectorises.  Row blocks of all batches run in parallel.
 * The convolutions (cpu_conv.c) run their im2col products through the same
 * kernel (kf_rt_mm_run).
 */
#include <stdlib.h>
#include <string.h>
#include "cpu_ops.h"

/* The build's -O2 (gcc 12) vectorises only loops whose trip count is known;
 * these kernels are all unknown-length loops over contiguous buffers. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3")
#endif

#define MB 32
#define NB 256
#define KB 128

struct mmrun {
	const kf_rt_mm *m;
	int64_t nib; /* row blocks per batch */
};

/* acc[mb][NB] += A[i0.., k0..] * B[k0.., j0..] for one KB panel. */
#define MM_PANEL(T)                                                                     \
	do {                                                                            \
		const T *a_ = (const T *)m->A + aoff;                                   \
		const T *b_ = (const T *)m->B + boff;                                   \
		T *acc_ = acc;                                                          \
		for (int64_t i = 0; i < mb; i++)                                        \
			for (int64_t k = k0; k < k0 + kb; k++) {                        \
				T aik = a_[(i0 + i) * m->K + k];                        \
				const T *brow = b_ + k * m->N + j0;                     \
				T *arow = acc_ + i * NB;                                \
				for (int64_t j = 0; j < nb; j++)                        \
					arow[j] += aik * brow[j];                       \
			}                                                               \
	} while (0)

/* Applies gemm's alpha/beta or conv's bias (if any) to one row of acc and
 * stores it. */
static void mm_store(const kf_rt_mm *m, int64_t batch, int64_t i, int64_t j0, int64_t nb, void *row)
{
	if (m->k == RT_F64 && (m->alpha != 1 || m->C)) {
		double *r = row;
		const double *c = m->C ? (const double *)m->C + i * m->N + j0 : NULL;
		for (int64_t j = 0; j < nb; j++)
			r[j] = m->alpha * r[j] + (c ? m->beta * c[j] : 0);
	} else if (m->k == RT_I64 && (m->alpha != 1 || m->C)) {
		/* integers: exact when alpha is 1 and beta 0 or 1, else via double */
		uint64_t *r = row;
		const int64_t *c = m->C ? (const int64_t *)m->C + i * m->N + j0 : NULL;
		bool exact = m->alpha == 1 && (m->beta == 1 || m->beta == 0);
		for (int64_t j = 0; j < nb; j++) {
			int64_t cv = c ? c[j] : 0;
			if (exact)
				r[j] += m->beta == 1 ? (uint64_t)cv : 0;
			else
				r[j] = (uint64_t)kf_rt_f2i(m->alpha * (double)(int64_t)r[j] + m->beta * (double)cv,
							   INT64_MIN, INT64_MAX);
		}
	}
	if (m->bias && m->k == RT_F64) {
		double *r = row;
		const double *b = m->bias + m->bias_off[batch];
		if (m->bias_rows)
			for (int64_t j = 0; j < nb; j++)
				r[j] += b[i];
		else
			for (int64_t j = 0; j < nb; j++)
				r[j] += b[j0 + j];
	}
	size_t osz = kf_dtype_size(m->ydt);
	kf_rt_store(m->ydt, (char *)m->y + (m->yoff[batch] + i * m->ldy + j0) * (int64_t)osz, m->k, row, nb);
}

static void mm_range(void *arg, int64_t lo, int64_t hi)
{
	const struct mmrun *r = arg;
	const kf_rt_mm *m = r->m;
	void *acc = calloc(MB * NB, 8);
	if (!acc)
		kf_oom(); /* as kf_alloc */
	for (int64_t t = lo; t < hi; t++) {
		int64_t batch = t / r->nib, i0 = (t % r->nib) * MB;
		int64_t mb = m->M - i0 < MB ? m->M - i0 : MB;
		int64_t aoff = m->aoff[batch], boff = m->boff[batch];
		for (int64_t j0 = 0; j0 < m->N; j0 += NB) {
			int64_t nb = m->N - j0 < NB ? m->N - j0 : NB;
			memset(acc, 0, MB * NB * 8);
			for (int64_t k0 = 0; k0 < m->K; k0 += KB) {
				int64_t kb = m->K - k0 < KB ? m->K - k0 : KB;
				if (m->k == RT_F64)
					MM_PANEL(double);
				else
					MM_PANEL(uint64_t);
			}
			for (int64_t i = 0; i < mb; i++)
				mm_store(m, batch, i0 + i, j0, nb, (char *)acc + i * NB * 8);
		}
	}
	free(acc);
}

void kf_rt_mm_run(const kf_rt_mm *m)
{
	struct mmrun r = {m, (m->M + MB - 1) / MB};
	if (m->M * m->N == 0)
		return;
	kf_rt_parallel(m->nbatch * r.nib, m->nbatch * m->M * m->N * (m->K + 1), mm_range, &r);
}

static void *convert(const kf_tensor *t, rt_kind k)
{
	int64_t n = kf_tensor_numel(t);
	void *p = malloc(n ? n * 8 : 8);
	if (p)
		kf_rt_load(t->dtype, t->data, 1, n, k, p);
	return p;
}

int kf_cpu_matmul(KF_RT_CPU_ARGS)
{
	const kf_tensor *a = &in[0], *b = &in[1];
	if (a->rank < 1 || b->rank < 1)
		return kf_rt_fail(err, errlen, "matmul operands must have rank >= 1");
	/* 1-D promotion: a [K] is [1, K], b [K] is [K, 1]. */
	int64_t M = a->rank > 1 ? a->dim[a->rank - 2] : 1, K = a->dim[a->rank - 1];
	int64_t Kb = b->rank > 1 ? b->dim[b->rank - 2] : b->dim[0];
	int64_t N = b->rank > 1 ? b->dim[b->rank - 1] : 1;
	if (K != Kb)
		return kf_rt_fail(err, errlen, "matmul: inner dims differ (%lld vs %lld)",
				  (long long)K, (long long)Kb);
	int ra = a->rank > 2 ? a->rank - 2 : 0, rb = b->rank > 2 ? b->rank - 2 : 0, r;
	int64_t bd[KF_MAX_RANK];
	if (kf_rt_bcast_shape(ra, a->dim, rb, b->dim, &r, bd) != 0)
		return kf_rt_fail(err, errlen, "matmul: batch dims do not broadcast");
	int64_t nbatch = kf_rt_numel(r, bd);
	if (kf_tensor_numel(&out[0]) == 0)
		return 0;
	kf_rt_mm m = {.k = kf_dtype_is_float(out[0].dtype) ? RT_F64 : RT_I64, .M = M, .N = N, .K = K,
		      .nbatch = nbatch, .y = out[0].data, .ydt = out[0].dtype, .ldy = N, .alpha = 1, .beta = 0};
	/* per-batch element offsets, broadcasting by zero strides */
	int64_t *off = malloc(3 * (size_t)nbatch * sizeof(int64_t));
	void *A = convert(a, m.k), *B = convert(b, m.k);
	if (!off || !A || !B) {
		free(off), free(A), free(B);
		return kf_rt_fail(err, errlen, "out of memory");
	}
	kf_tensor ta = {.rank = (uint8_t)ra}, tb = {.rank = (uint8_t)rb};
	memcpy(ta.dim, a->dim, sizeof(int64_t) * ra);
	memcpy(tb.dim, b->dim, sizeof(int64_t) * rb);
	int64_t sa[KF_MAX_RANK], sb[KF_MAX_RANK];
	kf_rt_bcast_strides(&ta, r, sa);
	kf_rt_bcast_strides(&tb, r, sb);
	for (int64_t t = 0; t < nbatch; t++) {
		int64_t rem = t, oa = 0, ob = 0;
		for (int d = r - 1; d >= 0; d--) {
			int64_t i = rem % bd[d];
			rem /= bd[d];
			oa += i * sa[d];
			ob += i * sb[d];
		}
		off[t] = oa * M * K;
		off[nbatch + t] = ob * K * N;
		off[2 * nbatch + t] = t * M * N;
	}
	m.A = A;
	m.B = B;
	m.aoff = off;
	m.boff = off + nbatch;
	m.yoff = off + 2 * nbatch;
	kf_rt_mm_run(&m);
	free(off), free(A), free(B);
	return 0;
}

/* Loads a 2-D tensor as [rows, cols] of kind k, transposed when trans. */
static void *convert2(const kf_tensor *t, bool trans, rt_kind k)
{
	int64_t r = t->dim[0], c = t->dim[1];
	void *p = malloc(r * c != 0 ? r * c * 8 : 8);
	if (!p || !trans) {
		if (p)
			kf_rt_load(t->dtype, t->data, 1, r * c, k, p);
		return p;
	}
	size_t esz = kf_dtype_size(t->dtype);
	for (int64_t j = 0; j < c; j++) /* row j of the transpose is column j */
		kf_rt_load(t->dtype, (const char *)t->data + j * (int64_t)esz, c, r, k, (char *)p + j * r * 8);
	return p;
}

int kf_cpu_gemm(KF_RT_CPU_ARGS)
{
	const kf_tensor *a = &in[0], *b = &in[1];
	if (a->rank != 2 || b->rank != 2)
		return kf_rt_fail(err, errlen, "gemm operands must be 2-D");
	bool ta = kf_attr_int(g, n, "trans_a", 0) != 0, tb = kf_attr_int(g, n, "trans_b", 0) != 0;
	int64_t M = a->dim[ta], K = a->dim[!ta], Kb = b->dim[tb], N = b->dim[!tb];
	if (K != Kb)
		return kf_rt_fail(err, errlen, "gemm: inner dims differ (%lld vs %lld)",
				  (long long)K, (long long)Kb);
	kf_rt_mm m = {.k = kf_dtype_is_float(out[0].dtype) ? RT_F64 : RT_I64, .M = M, .N = N, .K = K,
		      .nbatch = 1, .y = out[0].data, .ydt = out[0].dtype, .ldy = N,
		      .alpha = kf_attr_float(g, n, "alpha", 1.0), .beta = kf_attr_float(g, n, "beta", 1.0)};
	if (M * N == 0)
		return 0;
	void *A = convert2(a, ta, m.k), *B = convert2(b, tb, m.k), *C = NULL;
	kf_tensor cx = {0};
	int rc = 0;
	if (!A || !B) {
		rc = kf_rt_fail(err, errlen, "out of memory");
		goto done;
	}
	if (nin > 2) { /* C broadcast to [M, N] */
		int64_t mn[2] = {M, N}, st[KF_MAX_RANK], bd[KF_MAX_RANK];
		int r;
		if (in[2].rank > 2 || kf_rt_bcast_shape(2, mn, in[2].rank, in[2].dim, &r, bd) != 0 ||
		    bd[0] != M || bd[1] != N) {
			rc = kf_rt_fail(err, errlen, "gemm: C does not broadcast to [%lld,%lld]",
					(long long)M, (long long)N);
			goto done;
		}
		if (kf_tensor_alloc(&cx, in[2].dtype, 2, mn) != 0 || !(C = malloc(M * N * 8))) {
			rc = kf_rt_fail(err, errlen, "out of memory");
			goto done;
		}
		kf_rt_bcast_strides(&in[2], 2, st);
		kf_rt_strided_copy(cx.data, in[2].data, kf_dtype_size(in[2].dtype), 0, 2, mn, st);
		kf_rt_load(cx.dtype, cx.data, 1, M * N, m.k, C);
	}
	int64_t zero = 0;
	m.A = A;
	m.B = B;
	m.C = C;
	m.aoff = m.boff = m.yoff = &zero;
	kf_rt_mm_run(&m);
done:
	free(A), free(B), free(C);
	kf_tensor_free(&cx);
	return rc;
}
