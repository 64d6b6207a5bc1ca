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

int kx_mm_emit_gemv(kx *k, kx_mm *mm)
{
	const char *acc = kx_mm_acc_type(mm);
	k->k->block = 256;
	k->k->grid_y = k->k->grid_z = 1;
	if (mm->b.trans)
		gemv_nk(k, mm, acc);
	else
		gemv_kn(k, mm, acc);
	return 0;
}
