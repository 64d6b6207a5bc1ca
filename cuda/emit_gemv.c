/* emit_gemv.c: the GEMV kernels (M = 1, one batch) of a contraction (see
 * emit_matmul.c for the analysis, configs and epilogue they share).
 *
 * requires: kx_mm filled by emit_matmul.c; keeps the graph unchanged.
 *
 * Memory-bound: every weight element is read once, in 16-byte
 * ld.global.nc.L1::no_allocate loads (the weight is not reused, x is: x
 * goes through L1).  The design aims at one round of loads: a 16 MiB weight
 * on 132 SMs is ~128 KiB per SM, about what 1-2K threads with 8 loads of 16
 * bytes each have in flight, so by default each thread issues all its U
 * loads at once and the grid holds the whole weight (a few blocks per SM),
 * instead of looping round trip after round trip.
 *
 * B stored [K, N]: 32 lanes x V columns (16 bytes) per warp, 8 warps on
 * interleaved k-rows, K split over gridDim.y (config gemvkKS[uU]).  Each
 * block sums its 8 warps in shared memory, writes one partial per column,
 * and the last block of a column strip (an atomicInc counter that wraps
 * back to 0, ready for the next CUDA-graph replay) adds the KS partials: all
 * its threads load them at once (L2, .cg), groups of threads summing fixed
 * ranges, then the groups in order: a fixed order, so the result does not
 * depend on timing.  B stored [N, K]: S warps per output (gemvkS[uU]: 1, 2,
 * 4, 8), 16-byte loads along K for both x and the weight, shuffles, the S
 * partial sums added in warp order.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "emit_mm_int.h"

static const char *conv_fn(kf_dtype t)
{
	return t == KF_F16 ? "kf_h2f" : t == KF_BF16 ? "kf_b2f" : "";
}

/* 16-byte loads of the weight per thread issued together (cfg.un, else 8:
 * 8 x 16 bytes x 1-2K threads per SM is the ~128 KiB a 16 MiB weight puts
 * on each of 132 SMs). */
static int gemv_unroll(const kx_mm *mm)
{
	return mm->cfg.un > 0 ? mm->cfg.un : 8;
}

/* [K, N]: the K split; config ks, else about 4 blocks per SM of a 132-SM
 * GPU but no block under 8 U k-rows (one round of loads per thread), and
 * the partials buffer under 4M elements.  *kc: k-rows per block. */
static int64_t kn_split(const kx_mm *mm, int64_t gx, int U, int64_t *kc)
{
	int64_t K = mm->K, ks = mm->cfg.ks;
	if (ks <= 0) {
		ks = (528 + gx - 1) / gx;
		if (ks > (K + 8 * U - 1) / (8 * U))
			ks = (K + 8 * U - 1) / (8 * U);
	}
	if (ks < 1)
		ks = 1;
	while (ks > 1 && ks * mm->N > (1 << 22))
		ks /= 2;
	*kc = ((K + ks - 1) / ks + 7) / 8 * 8;
	ks = (K + *kc - 1) / *kc;
	return ks < 1 ? 1 : ks;
}

/* [K, N]: the loads and FMAs into acc[V]. */
static void kn_body(kx *k, kx_mm *mm, const char *acc, int v)
{
	kf_buf *b = &k->b;
	const char *it = kx_it(k), *st = kx_st(mm->b.st);
	int64_t N = mm->N;
	kf_buf x = {0}, w = {0};
	kx_mm_operand(k, mm, 0, "kk", &x);
	if (v > 1) {
		int U = gemv_unroll(mm);
		kf_buf_printf(b, "  for (%s k0 = kb + ty; k0 < ke; k0 += %d) {\n    %s w[%d][%d];\n    %s xs[%d];\n", it, 8 * U, st,
			      U, v, acc, U);
		kf_buf_printf(b, "#pragma unroll\n    for (int u = 0; u < %d; u++) {\n      const %s kk = k0 + u * 8;\n"
			      "      const bool ok = kk < ke && n0 < %lld;\n", U, it, (long long)N);
		kf_buf_printf(b, "      if (ok) kf_vldna<%s, %d>(w[u], p%d + kk * %lldLL + n0);\n"
			      "      else\n#pragma unroll\n        for (int v = 0; v < %d; v++) w[u][v] = 0;\n", st, v,
			      mm->b.param, (long long)N, v);
		kf_buf_printf(b, "      xs[u] = kk < ke ? (%s)(%.*s) : (%s)0;\n    }\n", acc, (int)x.n, x.p, acc);
		kf_buf_printf(b, "#pragma unroll\n    for (int u = 0; u < %d; u++)\n#pragma unroll\n"
			      "      for (int v = 0; v < %d; v++) acc[v] += xs[u] * (%s)%s(w[u][v]);\n  }\n", U, v, acc,
			      conv_fn(mm->b.st));
	} else {
		kf_buf_printf(b, "#pragma unroll 4\n  for (%s kk = kb + ty; kk < ke; kk += 8) {\n    const %s x = %.*s;\n", it,
			      acc, (int)x.n, x.p);
		char ix[96];
		snprintf(ix, sizeof ix, "kk * %lldLL + n0", (long long)N);
		kx_mm_operand(k, mm, 1, ix, &w);
		kf_buf_printf(b, "    if (n0 < %lld) acc[0] += x * %.*s;\n  }\n", (long long)N, (int)w.n, w.p);
	}
	kf_buf_free(&x);
	kf_buf_free(&w);
}

/* [K, N], KS > 1: the last block of a strip adds the KS partials of its
 * columns.  P = 256 / CW groups of CW threads, group g summing partials
 * [g R, g R + R) in 16-load batches (all issued before the adds), then
 * group 0 adds the P group sums in order. */
static void kn_final(kx *k, kx_mm *mm, const char *acc, int64_t cw, int64_t ks)
{
	kf_buf *b = &k->b;
	const char *it = kx_it(k);
	int64_t N = mm->N, P = 256 / cw, R = (ks + P - 1) / P;
	kf_buf_printf(b, "  __threadfence();\n  __syncthreads();\n  __shared__ bool last;\n"
		      "  if (threadIdx.x == 0) last = atomicInc(&KF_KERNEL_cnt[blockIdx.x], %lldu) == %lldu;\n"
		      "  __syncthreads();\n  if (!last) return;\n  __threadfence();\n",
		      (long long)(ks - 1), (long long)(ks - 1));
	kf_buf_printf(b, "  const int c = threadIdx.x %% %lld, gp = threadIdx.x / %lld;\n"
		      "  const %s col = (%s)blockIdx.x * %lld + c;\n  %s s = 0;\n",
		      (long long)cw, (long long)cw, it, it, (long long)cw, acc);
	kf_buf_printf(b, "  if (col < %lld)\n    for (int j0 = 0; j0 < %lld; j0 += 16) {\n      %s t[16];\n"
		      "#pragma unroll\n      for (int j = 0; j < 16; j++) {\n"
		      "        const int r = gp * %lld + j0 + j;\n"
		      "        t[j] = j0 + j < %lld && r < %lld ? __ldcg(&KF_KERNEL_ws[(%s)r * %lld + col]) : (%s)0;\n      }\n"
		      "#pragma unroll\n      for (int j = 0; j < 16; j++) s += t[j];\n    }\n",
		      (long long)N, (long long)R, acc, (long long)R, (long long)R, (long long)ks, it, (long long)N, acc);
	if (P > 1)
		kf_buf_printf(b, "  red[gp][c] = s;\n  __syncthreads();\n  if (gp != 0) return;\n  s = red[0][c];\n"
			      "#pragma unroll\n  for (int j = 1; j < %lld; j++) s += red[j][c];\n", (long long)P);
	kf_buf_printf(b, "  if (gp == 0 && col < %lld) ", (long long)N);
	kx_mm_epi_call(k, b);
	kf_buf_printf(b, "0, (%s)0, col, s);\n", it);
}

/* B stored [K, N]: column strips of 32 x V, K split over gridDim.y. */
static void gemv_kn(kx *k, kx_mm *mm, const char *acc)
{
	kf_buf *b = &k->b;
	const char *it = kx_it(k);
	int e = (int)kf_dtype_size(mm->b.st), v = kx_mm_raw(k, &mm->b) && mm->N % (16 / e) == 0 ? 16 / e : 1;
	int64_t N = mm->N, K = mm->K, cw = 32 * v, gx = (N + cw - 1) / cw, kc;
	int64_t ks = kn_split(mm, gx, gemv_unroll(mm), &kc);
	k->k->units = gx;
	k->k->grid_y = (unsigned)ks;
	if (ks > 1)
		kf_buf_printf(&k->decl, "__device__ %s KF_KERNEL_ws[%lld];\n__device__ unsigned KF_KERNEL_cnt[%lld];\n", acc,
			      (long long)(ks * N), (long long)gx);
	kf_buf_printf(b, "  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;\n");
	kf_buf_printf(b, "  const %s n0 = (%s)blockIdx.x * %lld + tx * %d, kb = (%s)blockIdx.y * %lld;\n", it, it, (long long)cw,
		      v, it, (long long)kc);
	kf_buf_printf(b, "  const %s ke = kb + %lld < %lld ? kb + %lld : %lld;\n", it, (long long)kc, (long long)K,
		      (long long)kc, (long long)K);
	kf_buf_printf(b, "  %s acc[%d];\n#pragma unroll\n  for (int v = 0; v < %d; v++) acc[v] = 0;\n", acc, v, v);
	kn_body(k, mm, acc, v);
	/* the block's 8 warps, added in warp order by one thread per column */
	kf_buf_printf(b, "  __shared__ %s red[8][%lld];\n#pragma unroll\n  for (int v = 0; v < %d; v++) red[ty][tx * %d + v] = acc[v];\n"
		      "  __syncthreads();\n", acc, (long long)cw, v, v);
	kf_buf_printf(b, "  %s bs = 0;\n  const %s bc = (%s)blockIdx.x * %lld + threadIdx.x;\n"
		      "  if (threadIdx.x < %lld) {\n#pragma unroll\n    for (int j = 0; j < 8; j++) bs += red[j][threadIdx.x];\n  }\n",
		      acc, it, it, (long long)cw, (long long)cw);
	if (ks == 1) {
		kf_buf_printf(b, "  if (threadIdx.x < %lld && bc < %lld) ", (long long)cw, (long long)N);
		kx_mm_epi_call(k, b);
		kf_buf_printf(b, "0, (%s)0, bc, bs);\n", it);
		return;
	}
	kf_buf_printf(b, "  if (threadIdx.x < %lld && bc < %lld) KF_KERNEL_ws[(%s)blockIdx.y * %lld + bc] = bs;\n",
		      (long long)cw, (long long)N, it, (long long)N);
	kn_final(k, mm, acc, cw, ks);
}

/* B stored [K, N], "gemvc": a block of 1024 threads owns CW = 8 V columns
 * (128 bytes of each row) and all of K, so there is no K split and no
 * second pass through global memory (gemv_kn's last block adds KS partials
 * after a fence and an atomic: two more L2 round trips, ~1.5 us of a 6 us
 * kernel).  Lane = 8 r + q: chunk q (V columns) of row 4 warp + r, the
 * warp's loads are 4 rows x 128 bytes (whole lines); each thread issues
 * its U loads (rows 128 apart) before using any.  Then the 4 lanes of a
 * chunk add by shuffles, the 32 warps in shared memory in warp order: the
 * result does not depend on timing. */
static void gemv_kn_cols(kx *k, kx_mm *mm, const char *acc)
{
	kf_buf *b = &k->b;
	const char *it = kx_it(k), *st = kx_st(mm->b.st);
	int v = 16 / (int)kf_dtype_size(mm->b.st), U = gemv_unroll(mm);
	int64_t N = mm->N, K = mm->K, cw = 8 * v;
	kf_buf x = {0};
	kx_mm_operand(k, mm, 0, "kk", &x);
	k->k->block = 1024;
	k->k->min_blocks = 1; /* 64 registers: all U loads in flight (ptxas picks 32 otherwise) */
	k->k->units = (N + cw - 1) / cw;
	kf_buf_printf(b, "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n");
	kf_buf_printf(b, "  const %s n0 = (%s)blockIdx.x * %lld + (lane & 7) * %d;\n  %s acc[%d];\n", it, it, (long long)cw,
		      v, acc, v);
	kf_buf_printf(b, "#pragma unroll\n  for (int v = 0; v < %d; v++) acc[v] = 0;\n", v);
	kf_buf_printf(b, "  for (%s k0 = warp * 4 + (lane >> 3); k0 < %lld; k0 += %d) {\n    %s w[%d][%d];\n    %s xs[%d];\n", it,
		      (long long)K, 128 * U, st, U, v, acc, U);
	kf_buf_printf(b, "#pragma unroll\n    for (int u = 0; u < %d; u++) {\n      const %s kk = k0 + u * 128;\n"
		      "      if (kk < %lld && n0 < %lld) kf_vldna<%s, %d>(w[u], p%d + kk * %lldLL + n0);\n"
		      "      else\n#pragma unroll\n        for (int v = 0; v < %d; v++) w[u][v] = 0;\n"
		      "      xs[u] = kk < %lld ? (%s)(%.*s) : (%s)0;\n    }\n",
		      U, it, (long long)K, (long long)N, st, v, mm->b.param, (long long)N, v, (long long)K, acc, (int)x.n, x.p,
		      acc);
	kf_buf_printf(b, "#pragma unroll\n    for (int u = 0; u < %d; u++)\n#pragma unroll\n"
		      "      for (int v = 0; v < %d; v++) acc[v] += xs[u] * (%s)%s(w[u][v]);\n  }\n",
		      U, v, acc, conv_fn(mm->b.st));
	kf_buf_free(&x);
	kf_buf_printf(b, "  __shared__ %s red[32][%lld];\n#pragma unroll\n  for (int v = 0; v < %d; v++) {\n"
		      "    acc[v] += __shfl_xor_sync(0xffffffffu, acc[v], 8);\n"
		      "    acc[v] += __shfl_xor_sync(0xffffffffu, acc[v], 16);\n"
		      "    if (lane < 8) red[warp][lane * %d + v] = acc[v];\n  }\n  __syncthreads();\n",
		      acc, (long long)cw, v, v);
	kf_buf_printf(b, "  const %s col = (%s)blockIdx.x * %lld + threadIdx.x;\n  if (threadIdx.x >= %lld || col >= %lld) return;\n"
		      "  %s s = 0;\n#pragma unroll\n  for (int j = 0; j < 32; j++) s += red[j][threadIdx.x];\n  ",
		      it, it, (long long)cw, (long long)cw, (long long)N, acc);
	kx_mm_epi_call(k, b);
	kf_buf_printf(b, "0, (%s)0, col, s);\n", it);
}

/* [N, K]: warps per output, config ks (1, 2, 4, 8), else enough that one
 * round of U loads per lane covers K (at most 8 warps). */
static int nk_warps(const kx_mm *mm, int v, int U)
{
	int S = mm->cfg.ks;
	if (S > 0)
		return S;
	for (S = 1; S < 8 && 32LL * v * U * S < mm->K; S *= 2)
		;
	return S;
}

/* B stored [N, K]: S warps per output column (K split among them, 16-byte
 * loads along K of x and the weight, U of them in flight per thread),
 * shuffles, then the S partial sums added in a fixed order. */
static void gemv_nk(kx *k, kx_mm *mm, const char *acc)
{
	kf_buf *b = &k->b;
	const char *it = kx_it(k), *st = kx_st(mm->b.st), *cv = conv_fn(mm->b.st);
	int e = (int)kf_dtype_size(mm->b.st), v = kx_mm_raw(k, &mm->b) && mm->K % (16 / e) == 0 ? 16 / e : 1;
	int64_t N = mm->N, K = mm->K;
	int U = gemv_unroll(mm), S = nk_warps(mm, v, U);
	/* x as stored, in the weight's vector width: 16-byte loads (M = 1: x is
	 * contiguous along K whether stored [1, K] or [K, 1]) */
	bool xv = v > 1 && kx_mm_raw(k, &mm->a) && mm->a.st == mm->b.st;
	int cols = 8 / S;
	k->k->units = (N + cols - 1) / cols;
	kf_buf_printf(b, "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, part = warp %% %d;\n", S);
	kf_buf_printf(b, "  const %s col = (%s)blockIdx.x * %d + warp / %d;\n  const bool in = col < %lld;\n  %s acc = 0;\n", it,
		      it, cols, S, (long long)N, acc);
	kf_buf x = {0}, w = {0};
	int64_t step = 32LL * v * S;
	if (v > 1) {
		kx_mm_operand(k, mm, 0, "kk + v", &x);
		kf_buf_printf(b, "  for (%s k0 = (part * 32 + lane) * %d; in && k0 < %lld; k0 += %lld) {\n    %s w[%d][%d];\n", it, v,
			      (long long)K, (long long)step * U, st, U, v);
		kf_buf_printf(b, "#pragma unroll\n    for (int u = 0; u < %d; u++) {\n      const %s kk = k0 + u * %lld;\n"
			      "      if (kk < %lld) kf_vldna<%s, %d>(w[u], p%d + col * %lldLL + kk);\n    }\n",
			      U, it, (long long)step, (long long)K, st, v, mm->b.param, (long long)K);
		kf_buf_printf(b, "#pragma unroll\n    for (int u = 0; u < %d; u++) {\n      const %s kk = k0 + u * %lld;\n"
			      "      if (kk < %lld) {\n", U, it, (long long)step, (long long)K);
		if (xv)
			kf_buf_printf(b, "        %s xv[%d];\n        kf_vld<%s, %d>(xv, p%d + kk);\n#pragma unroll\n"
				      "        for (int v = 0; v < %d; v++) acc += (%s)%s(xv[v]) * (%s)%s(w[u][v]);\n",
				      st, v, st, v, mm->a.param, v, acc, cv, acc, cv);
		else
			kf_buf_printf(b, "#pragma unroll\n        for (int v = 0; v < %d; v++) acc += %.*s * (%s)%s(w[u][v]);\n",
				      v, (int)x.n, x.p, acc, cv);
		kf_buf_puts(b, "      }\n    }\n  }\n");
	} else {
		char ix[96];
		snprintf(ix, sizeof ix, "col * %lldLL + kk", (long long)K);
		kx_mm_operand(k, mm, 0, "kk", &x);
		kx_mm_operand(k, mm, 1, ix, &w);
		kf_buf_printf(b, "  for (%s kk = part * 32 + lane; in && kk < %lld; kk += %d)\n    acc += %.*s * %.*s;\n", it,
			      (long long)K, 32 * S, (int)x.n, x.p, (int)w.n, w.p);
	}
	kf_buf_free(&x);
	kf_buf_free(&w);
	kf_buf_puts(b, "#pragma unroll\n  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);\n");
	if (S > 1) {
		kf_buf_printf(b, "  __shared__ %s red[8];\n  if (lane == 0) red[warp] = acc;\n  __syncthreads();\n"
			      "  if (part != 0 || lane != 0 || !in) return;\n  acc = red[warp];\n"
			      "#pragma unroll\n  for (int j = 1; j < %d; j++) acc += red[warp + j];\n  ",
			      acc, S);
	} else {
		kf_buf_puts(b, "  if (lane == 0 && in) ");
	}
	kx_mm_epi_call(k, b);
	kf_buf_printf(b, "0, (%s)0, col, acc);\n", it);
}

/* ---- B [N, K] by bulk copies ("gemvb[S]") ----------------------------------------
 *
 * Cold, the weight comes from HBM after ~0.7 us of latency, and per-thread
 * 16-byte loads keep only 32-64 KiB per SM in flight: the ramp is lost.
 * Here each CTA (one per SM) owns a contiguous range of rows, one range of
 * bytes, and one thread issues ALL of it at once as 1-D bulk copies
 * (cp.async.bulk ... complete_tx, no tensor map) into shared memory, in S
 * chunks of whole rows, each completing on its own mbarrier: compute on
 * chunk 0 starts while the others stream.  Warp w takes rows w, w + 8, ...
 * of the slice: lanes read consecutive 16-byte words of a row and of x
 * (conflict-free), a shuffle sum (fixed order), the epilogue.  A slice
 * over the shared-memory budget streams through a ring of slots: each warp
 * arrives on the slot's `empty` barrier after its rows of the chunk, and
 * warp 0 then refills the slot with the chunk S slots later. */

int kf_gemvb_plan_of(int64_t N, int64_t K, int elem, int chunks, kf_gemvb_plan *p)
{
	memset(p, 0, sizeof *p);
	int64_t rb = K * elem, xb = (K * 4 + 15) / 16 * 16, room = KF_GEMVB_SMEM - xb;
	if (N < 1 || K < 1 || elem < 1 || rb % 16 || rb > room)
		return -1;
	int S = chunks > 0 ? chunks : 4;
	p->row_bytes = rb;
	p->rows = (N + KF_MM_SMS - 1) / KF_MM_SMS;
	p->grid = (N + p->rows - 1) / p->rows;
	p->crows = (p->rows + S - 1) / S;
	/* a slice over the budget: chunks small enough for a ring of 2 */
	if (p->rows * rb > room && 2 * p->crows * rb > room)
		p->crows = room / (2 * rb) > 0 ? room / (2 * rb) : 1;
	p->nchunk = (int)((p->rows + p->crows - 1) / p->crows);
	int64_t fit = room / (p->crows * rb);
	p->slots = (int)(fit < p->nchunk ? fit : p->nchunk);
	if (p->slots > KF_GEMVB_MAXSLOT)
		p->slots = KF_GEMVB_MAXSLOT;
	p->smem = (int)(p->slots * p->crows * rb + xb);
	return 0;
}

void kf_gemvb_copy(const kf_gemvb_plan *p, int64_t N, int64_t c, int64_t j, int64_t *off, int64_t *bytes)
{
	int64_t r0 = c * p->rows, nr = N - r0 < p->rows ? N - r0 : p->rows, first = j * p->crows;
	*off = *bytes = 0;
	if (c < 0 || c >= p->grid || j < 0 || first >= nr)
		return;
	*off = (r0 + first) * p->row_bytes;
	*bytes = (nr - first < p->crows ? nr - first : p->crows) * p->row_bytes;
}

static const char gb_helpers[] =
	"#ifndef KF_GB_HELPERS\n"
	"#define KF_GB_HELPERS\n"
	"__device__ __forceinline__ unsigned kf_gb_saddr(const void *p) {\n"
	"  return (unsigned)__cvta_generic_to_shared(p); }\n"
	"__device__ __forceinline__ void kf_gb_init(unsigned b, unsigned n) {\n"
	"  asm volatile(\"mbarrier.init.shared::cta.b64 [%0], %1;\" :: \"r\"(b), \"r\"(n) : \"memory\"); }\n"
	"__device__ __forceinline__ void kf_gb_arrive(unsigned b) {\n"
	"  asm volatile(\"mbarrier.arrive.shared::cta.b64 _, [%0];\" :: \"r\"(b) : \"memory\"); }\n"
	"__device__ __forceinline__ void kf_gb_wait(unsigned b, unsigned parity) {\n"
	"  unsigned ok = 0;\n"
	"  do asm volatile(\"{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }\"\n"
	"                 : \"=r\"(ok) : \"r\"(b), \"r\"(parity) : \"memory\");\n"
	"  while (!ok); }\n"
	"/* the barrier expects the bytes (its one arrival), then the copy */\n"
	"__device__ __forceinline__ void kf_gb_copy(unsigned dst, const void *src, unsigned bytes, unsigned bar) {\n"
	"  asm volatile(\"mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\" :: \"r\"(bar), \"r\"(bytes) : \"memory\");\n"
	"  asm volatile(\"cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\"\n"
	"               :: \"r\"(dst), \"l\"(src), \"r\"(bytes), \"r\"(bar) : \"memory\"); }\n"
	"#endif\n";

/* One thread issues chunk J (an expression) of the slice into slot SLOT. */
static void gb_issue(kf_buf *b, const kf_gemvb_plan *p, const char *ind, const char *j, const char *slot)
{
	kf_buf_printf(b, "%s{\n%s  const int n = nr - (%s) * %lld < %lld ? nr - (%s) * %lld : %lld;\n", ind, ind, j,
		      (long long)p->crows, (long long)p->crows, j, (long long)p->crows, (long long)p->crows);
	kf_buf_printf(b, "%s  kf_gb_copy(sw + (%s) * %lldu, wg + (long long)(%s) * %lldLL, (unsigned)n * %lldu, full + (%s) * 8u);\n%s}\n",
		      ind, slot, (long long)(p->crows * p->row_bytes), j, (long long)(p->crows * p->row_bytes),
		      (long long)p->row_bytes, slot, ind);
}

/* The prologue: barriers, every first copy, x into shared memory. */
static void gb_start(kx *k, kx_mm *mm, const kf_gemvb_plan *p, bool ring)
{
	kf_buf *b = &k->b;
	int64_t slotb = p->crows * p->row_bytes;
	kf_buf_printf(b, "  extern __shared__ __align__(128) unsigned char kf_smem[];\n"
		      "  __shared__ __align__(8) unsigned long long kf_gbar[%d];\n", (ring ? 2 : 1) * p->slots);
	kf_buf_printf(b, "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n"
		      "  const long long r0 = (long long)blockIdx.x * %lldLL;\n"
		      "  const int nr = (int)(%lldLL - r0 < %lldLL ? %lldLL - r0 : %lldLL);\n"
		      "  const int nch = (nr + %lld) / %lld;\n", (long long)p->rows, (long long)mm->N, (long long)p->rows,
		      (long long)mm->N, (long long)p->rows, (long long)p->crows - 1, (long long)p->crows);
	kf_buf_printf(b, "  const unsigned sw = kf_gb_saddr(kf_smem), full = kf_gb_saddr(kf_gbar), empty = full + %du;\n"
		      "  const unsigned char *const wg = (const unsigned char *)p%d + r0 * %lldLL;\n"
		      "  float *const xs = (float *)(kf_smem + %lld);\n", 8 * p->slots, mm->b.param,
		      (long long)p->row_bytes, (long long)(p->slots * slotb));
	kf_buf_printf(b, "  (void)empty;\n  if (threadIdx.x == 0) {\n    for (int s = 0; s < %d; s++) {\n"
		      "      kf_gb_init(full + s * 8u, 1);\n", p->slots);
	if (ring)
		kf_buf_puts(b, "      kf_gb_init(empty + s * 8u, 8);\n");
	/* the inits visible to the other threads and to the async proxy (the
	 * copies) before the first copy completes on them */
	kf_buf_printf(b, "    }\n    asm volatile(\"fence.mbarrier_init.release.cluster;\" ::: \"memory\");\n"
		      "    asm volatile(\"fence.proxy.async.shared::cta;\" ::: \"memory\");\n"
		      "    for (int j = 0; j < nch && j < %d; j++)\n", p->slots);
	gb_issue(b, p, "      ", "j", "j");
	kf_buf x = {0};
	kx_mm_operand(k, mm, 0, "kk", &x);
	/* x while the weight streams: K floats, the prologue applied once */
	kf_buf_printf(b, "  }\n  for (int kk = threadIdx.x; kk < %lld; kk += 256) xs[kk] = (float)%.*s;\n  __syncthreads();\n",
		      (long long)mm->K, (int)x.n, x.p);
	kf_buf_free(&x);
}

/* One row of chunk j at local row i - first: lanes over 16-byte words. */
static void gb_row(kx *k, kx_mm *mm, const kf_gemvb_plan *p)
{
	kf_buf *b = &k->b;
	const char *st = kx_st(mm->b.st), *cv = conv_fn(mm->b.st);
	int e = (int)kf_dtype_size(mm->b.st), v = 16 / e;
	kf_buf_printf(b, "      const uint4 *const wr = (const uint4 *)(cb + (i - first) * %lld);\n      float a = 0;\n"
		      "#pragma unroll 4\n      for (int q = lane; q < %lld; q += 32) {\n        const uint4 u = wr[q];\n"
		      "        const %s *const we = reinterpret_cast<const %s *>(&u);\n"
		      "        const float4 *const xq = reinterpret_cast<const float4 *>(xs) + q * %d;\n",
		      (long long)p->row_bytes, (long long)(mm->K / v), st, st, v / 4);
	kf_buf_printf(b, "#pragma unroll\n        for (int h = 0; h < %d; h++) {\n          const float4 xv = xq[h];\n"
		      "          a += xv.x * (float)%s(we[4 * h]);\n          a += xv.y * (float)%s(we[4 * h + 1]);\n"
		      "          a += xv.z * (float)%s(we[4 * h + 2]);\n          a += xv.w * (float)%s(we[4 * h + 3]);\n"
		      "        }\n      }\n", v / 4, cv, cv, cv, cv);
	kf_buf_puts(b, "#pragma unroll\n      for (int o = 16; o > 0; o >>= 1) a += __shfl_xor_sync(0xffffffffu, a, o);\n"
		    "      if (lane == 0) ");
	kx_mm_epi_call(k, b);
	kf_buf_printf(b, "0, (%s)0, (%s)(r0 + i), a);\n", kx_it(k), kx_it(k));
}

static int gemvb(kx *k, kx_mm *mm)
{
	kf_gemvb_plan p;
	if (kf_gemvb_plan_of(mm->N, mm->K, (int)kf_dtype_size(mm->b.st), mm->cfg.stages, &p) != 0)
		return kx_fail(k, "gemvb: the rows do not fit the bulk-copy GEMV");
	bool ring = p.slots < p.nchunk;
	kf_buf *b = &k->b;
	kf_buf_puts(&k->decl, gb_helpers);
	k->k->units = p.grid;
	k->k->smem = p.smem;
	gb_start(k, mm, &p, ring);
	kf_buf_printf(b, "  for (int j = 0; j < nch; j++) {\n    const int s = j %% %d, first = j * %lld;\n"
		      "    const int n = nr - first < %lld ? nr - first : %lld;\n"
		      "    const unsigned char *const cb = kf_smem + s * %lld;\n"
		      "    kf_gb_wait(full + s * 8u, (unsigned)(j / %d) & 1u);\n"
		      "    for (int i = first + ((warp - first) & 7); i < first + n; i += 8) {\n",
		      p.slots, (long long)p.crows, (long long)p.crows, (long long)p.crows,
		      (long long)(p.crows * p.row_bytes), p.slots);
	gb_row(k, mm, &p);
	kf_buf_puts(b, "    }\n");
	if (ring) {
		/* every warp has waited for this chunk, so its arrival belongs to
		 * this use of the slot; warp 0 refills it once all 8 are done */
		kf_buf_printf(b, "    __syncwarp();\n    if (lane == 0) kf_gb_arrive(empty + s * 8u);\n"
			      "    if (warp == 0 && j + %d < nch) {\n      kf_gb_wait(empty + s * 8u, (unsigned)(j / %d) & 1u);\n"
			      "      if (lane == 0)\n", p.slots, p.slots);
		char jn[32];
		snprintf(jn, sizeof jn, "j + %d", p.slots);
		gb_issue(b, &p, "      ", jn, "s");
		kf_buf_puts(b, "      __syncwarp();\n    }\n");
	}
	kf_buf_puts(b, "  }\n");
	return 0;
}

int kx_mm_emit_gemv(kx *k, kx_mm *mm)
{
	const char *acc = kx_mm_acc_type(mm);
	k->k->block = 256;
	k->k->grid_y = k->k->grid_z = 1;
	if (mm->cfg.bulk)
		return gemvb(k, mm);
	if (mm->b.trans)
		gemv_nk(k, mm, acc);
	else if (mm->cfg.colb)
		gemv_kn_cols(k, mm, acc);
	else
		gemv_kn(k, mm, acc);
	return 0;
}
