/* emit_attention_simt.c: the attention kernel without tensor cores: for
 * decoding (a few query rows, where the work is reading k and v once), for
 * f32, and for head dims the flash kernel does not take.
 *
 * A block of 4 warps owns one query row and a slice of its keys; lane l
 * holds head dims l*V .. l*V + V - 1 of q and of the output (V = D / 32
 * rounded up), so that a key's row is read by the warp in one coalesced
 * sweep (16-byte, 8-byte or 4-byte loads where the layout allows).  Each
 * warp takes U = 4 keys at a time (their loads in flight together): dot
 * products reduced over the warp with shuffles, the score chain, the
 * online softmax (a running maximum and sum, the output rescaled when the
 * maximum grows).  The 4 warps' partial results are combined in shared
 * memory.  When rows are few the keys are split across NS blocks per row
 * (split-K): each block writes its partial (maximum, sum, unnormalised
 * output) to a workspace, and the last block of a row to finish (an atomic
 * counter; the writes fenced before it) combines them and writes the row,
 * then resets the counter for the next launch.  The workspace and the
 * counters are the kernel's own __device__ arrays (static shapes).
 */
#include <stdio.h>
#include <string.h>
#include "emit_att_int.h"

#define SIMT_WARPS 4
#define SIMT_U 4
#define SIMT_SMS 132 /* the H200's SMs: the split aims at about 12 blocks per SM */
#define LOG2E "1.44269504f"

/* The loads of n elements of operand op along its dim of stride `stride`
 * (contiguous when 1) from offset text base into a[0..n) as f32, the first
 * at element l*n of that dim; guarded by lim (elements of the dim) unless
 * whole. */
static void load_run(kf_buf *b, const kx_attop *op, int n, int64_t stride, int64_t lim, const char *base,
		     const char *a, bool vec)
{
	int e = (int)kf_dtype_size(op->st);
	if (vec) {
		kf_buf_printf(b, "        { %s t[%d]; kf_vld<%s, %d>(t, p%d + %s + lane * %d);\n", kx_st(op->st), n, kx_st(op->st),
			      n, op->param, base, n);
		for (int i = 0; i < n; i++) {
			kf_buf_printf(b, "          %s[%d] = ", a, i);
			kx_load(b, op->st, "t[%d]", i);
			kf_buf_puts(b, ";\n");
		}
		kf_buf_puts(b, "        }\n");
		(void)e;
		return;
	}
	for (int i = 0; i < n; i++) {
		kf_buf_printf(b, "        { const int d = lane * %d + %d;\n          %s[%d] = d < %lld ? ", n, i, a, i, (long long)lim);
		char ix[160];
		snprintf(ix, sizeof ix, "%s + (long long)d * %lldLL", base, (long long)stride);
		kf_buf lv = {0};
		kx_load(&lv, op->st, "p%d[%s]", op->param, ix);
		kf_buf_printf(b, "%.*s : 0.0f; }\n", (int)lv.n, lv.p);
		kf_buf_free(&lv);
	}
}

/* Whether n elements per lane of operand op along its dim of stride 1 can
 * be one vector load: the dim is exactly 32 n, the vector 4, 8 or 16 bytes,
 * and every other offset a multiple of n (skip: that dim). */
static bool vec_ok(const kx_attop *op, int n, int64_t dim, int64_t stride, int skip)
{
	int bytes = n * (int)kf_dtype_size(op->st);
	if (stride != 1 || dim != 32LL * n || (bytes != 4 && bytes != 8 && bytes != 16) || op->npro)
		return false;
	const kf_view *v = &op->view;
	if (v->off % n)
		return false;
	for (int d = 0; d < v->rank; d++)
		for (int f = 0; f < v->d[d].nf; f++)
			if (d != skip && v->d[d].stride[f] % n)
				return false;
	return true;
}

/* Split-K: this block's partial (M, L, the unnormalised output) to the
 * workspace, fenced, then counted in; the last block of the row combines
 * every slice's and writes the row, and resets the counter for the next
 * launch. */
static void split_combine(kx *k, const kx_att *at, int64_t ns, int nt)
{
	kf_buf *b = &k->b;
	/* split-K: this block's partial to the workspace, the last block of
	 * the row combines */
	long long W = (long long)(at->DV + 2);
	kf_buf_printf(b, "  float *const wp = KF_KERNEL_ws + (rowg * %lld + sp) * %lld;\n", (long long)ns, W);
	kf_buf_printf(b, "  for (int d = threadIdx.x; d < %lld; d += %d) {\n    float O = 0.0f;\n", (long long)at->DV, nt);
	kf_buf_printf(b, "    for (int w = 0; w < %d; w++) O += co[w * %lld + d] * f[w];\n    wp[2 + d] = O;\n  }\n", SIMT_WARPS,
		      (long long)at->DV);
	kf_buf_puts(b, "  int *const last = (int *)(cm + 8);\n  if (threadIdx.x == 0) {\n    wp[0] = M;\n    wp[1] = L;\n  }\n"
		       "  __threadfence();\n  __syncthreads();\n"
		       "  if (threadIdx.x == 0)\n");
	kf_buf_printf(b, "    *last = atomicAdd(&KF_KERNEL_cnt[rowg], 1u) == %lldu;\n", (long long)(ns - 1));
	kf_buf_puts(b, "  __syncthreads();\n  if (!*last)\n    return;\n  __threadfence();\n");
	kf_buf_printf(b, "  const float *const wr = KF_KERNEL_ws + rowg * %lld * %lld;\n", (long long)ns, W);
	kf_buf_printf(b, "  float MM = -KF_INF;\n  for (int s = 0; s < %lld; s++) MM = fmaxf(MM, __ldcg(wr + s * %lld));\n",
		      (long long)ns, W);
	char ms[64];
	snprintf(ms, sizeof ms, "__ldcg(wr + s * %lld)", W);
	kf_buf_puts(b, "  const float bs = ");
	kx_att_exp_off(at, b, "MM", LOG2E);
	kf_buf_puts(b, ";\n  float LL = 0.0f;\n");
	kf_buf_printf(b, "  for (int s = 0; s < %lld; s++) LL += __ldcg(wr + s * %lld + 1) * ", (long long)ns, W);
	kx_att_ex2(at, b, ms, "bs", LOG2E);
	kf_buf_printf(b, ";\n  for (int d = threadIdx.x; d < %lld; d += %d) {\n    float O = 0.0f;\n", (long long)at->DV, nt);
	kf_buf_printf(b, "    for (int s = 0; s < %lld; s++) O += __ldcg(wr + s * %lld + 2 + d) * ", (long long)ns, W);
	kx_att_ex2(at, b, ms, "bs", LOG2E);
	kf_buf_puts(b, ";\n    ");
	kx_att_out_call(k, b, false);
	kf_buf_puts(b, "z, i, d, O / LL);\n  }\n  if (threadIdx.x == 0)\n    KF_KERNEL_cnt[rowg] = 0u;\n");
}

/* Each warp's keys, U at a time: their k and v rows loaded together, the
 * dot products reduced over the warp, the score chain, the online softmax
 * into the warp's m, l and ov[VV]. */
static void key_loop(kx *k, const kx_att *at, int V, int VV, bool kv, bool vv)
{
	kf_buf *b = &k->b;
	kf_buf_printf(b, "  float ov[%d];\n  for (int e = 0; e < %d; e++) ov[e] = 0.0f;\n  float m = -KF_INF, l = 0.0f;\n", VV, VV);
	kf_buf_printf(b, "  for (int j0 = kb + warp * %d; j0 < ke; j0 += %d) {\n", SIMT_U, SIMT_U * SIMT_WARPS);
	kf_buf_printf(b, "    float kx[%d][%d], vx[%d][%d];\n#pragma unroll\n    for (int u = 0; u < %d; u++) {\n", SIMT_U, V, SIMT_U, VV,
		      SIMT_U);
	kf_buf_puts(b, "      const int j = j0 + u;\n      if (j < ke) {\n");
	kf_buf_puts(b, "        const long long kj = ko + (long long)j * ");
	kx_dimll(k, b, at->k.cs, KX_ATT_S(k, at, k.cs));
	kf_buf_puts(b, ", vj = vo + (long long)j * ");
	kx_dimll(k, b, at->v.rs, KX_ATT_S(k, at, v.rs));
	kf_buf_puts(b, ";\n");
	load_run(b, &at->k, V, at->k.rs, at->D, "kj", "kx[u]", kv);
	load_run(b, &at->v, VV, at->v.cs, at->DV, "vj", "vx[u]", vv);
	kf_buf_printf(b, "      } else {\n        for (int e = 0; e < %d; e++) kx[u][e] = 0.0f;\n        for (int e = 0; e < %d; e++) "
		      "vx[u][e] = 0.0f;\n      }\n    }\n", V, VV);
	kf_buf_printf(b, "    float s[%d];\n#pragma unroll\n    for (int u = 0; u < %d; u++) {\n      float d = 0.0f;\n", SIMT_U, SIMT_U);
	kf_buf_printf(b, "#pragma unroll\n      for (int e = 0; e < %d; e++) d += qv[e] * kx[u][e];\n", V);
	kf_buf_puts(b, "#pragma unroll\n      for (int o = 16; o > 0; o >>= 1) d += __shfl_xor_sync(0xffffffffu, d, o);\n"
		       "      s[u] = j0 + u < ke ? ");
	kx_att_score_call(k, b);
	kf_buf_puts(b, "z, i, j0 + u, d) : -KF_INF;\n    }\n");
	kf_buf_printf(b, "    float mx = m;\n#pragma unroll\n    for (int u = 0; u < %d; u++) mx = fmaxf(mx, s[u]);\n", SIMT_U);
	kf_buf_puts(b, "    const float bb = ");
	kx_att_exp_off(at, b, "mx", LOG2E);
	kf_buf_puts(b, ", a = ");
	kx_att_ex2(at, b, "m", "bb", LOG2E);
	kf_buf_puts(b, ";\n    m = mx;\n    l *= a;\n");
	kf_buf_printf(b, "#pragma unroll\n    for (int e = 0; e < %d; e++) ov[e] *= a;\n", VV);
	kf_buf_printf(b, "#pragma unroll\n    for (int u = 0; u < %d; u++) {\n      const float p = ", SIMT_U);
	kx_att_ex2(at, b, "s[u]", "bb", LOG2E);
	kf_buf_printf(b, ";\n      l += p;\n#pragma unroll\n      for (int e = 0; e < %d; e++) ov[e] += p * vx[u][e];\n    }\n  }\n", VV);
}

/* The block's row: its batch index z and query row i (rowg: the row over
 * the batch), the operands' offsets, and kend, the keys it sees (a causal
 * mask ends them). */
static void row_head(kx *k, const kx_att *at, int64_t sTq, int64_t sTk)
{
	kf_buf *b = &k->b;
	kf_buf_puts(b, "  const int z = (int)(rowg / ");
	kx_dim(k, b, at->Tq, sTq);
	kf_buf_puts(b, "), i = (int)(rowg % ");
	kx_dim(k, b, at->Tq, sTq);
	kf_buf_puts(b, ");\n");
	kf_buf q = {0}, kk = {0}, vo = {0};
	kx_att_boff(k, at, &at->q.view, "z", &q);
	kx_att_boff(k, at, &at->k.view, "z", &kk);
	kx_att_boff(k, at, &at->v.view, "z", &vo);
	kf_buf_printf(b, "  const long long qo = %.*s + (long long)i * ", (int)q.n, q.p);
	kx_dimll(k, b, at->q.rs, KX_ATT_S(k, at, q.rs));
	kf_buf_printf(b, ", ko = %.*s, vo = %.*s;\n", (int)kk.n, kk.p, (int)vo.n, vo.p);
	kf_buf_free(&q);
	kf_buf_free(&kk);
	kf_buf_free(&vo);
	/* the row's keys (a causal mask ends them), then this block's slice */
	kf_buf_puts(b, "  const int kend = ");
	if (at->causal)
		kf_buf_puts(b, "min(");
	kx_dimlini(k, b, at->Tk, sTk, 0, 1, 0);
	if (at->causal)
		kf_buf_printf(b, ", i + %lld)", (long long)(at->off + 1));
	kf_buf_puts(b, ";\n");
}

int kx_emit_attention_simt(kx *k, kx_att *at)
{
	kf_buf *b = &k->b;
	int V = (int)((at->D + 31) / 32), VV = (int)((at->DV + 31) / 32), nt = 32 * SIMT_WARPS;
	if (V > 16 || VV > 16) { /* (EdgeNeXt's attention across channels: 1024) */
		char why[80];
		snprintf(why, sizeof why, "head dims over 512 (%lld, %lld)", (long long)at->D, (long long)at->DV);
		return kx_att_decline(k, why);
	}
	int64_t rows = at->NB * at->Tq;
	int64_t sNB = KX_ATT_S(k, at, NB), sTq = KX_ATT_S(k, at, Tq), sTk = KX_ATT_S(k, at, Tk);
	/* keys split across blocks when rows are too few to fill the GPU, each
	 * slice at least 256 keys, the workspace within 64 MiB (a sized plan:
	 * for its bucket's rows and keys, the workspace as large as theirs) */
	int64_t rrows = kx_rep(k, rows, kx_smul(k, sNB, sTq)), rTk = kx_rep(k, at->Tk, sTk);
	int64_t ns = (SIMT_SMS * 12 + rrows - 1) / rrows, maxs = (rTk + 255) / 256;
	ns = ns < 1 ? 1 : ns > maxs ? maxs : ns;
	while (ns > 1 && rrows * ns * (at->DV + 2) * 4 > (64LL << 20))
		ns--;
	if (ns < 1)
		ns = 1;
	int r = at->q.view.rank;
	bool qv = vec_ok(&at->q, V, at->D, at->q.cs, r - 1), kv = vec_ok(&at->k, V, at->D, at->k.rs, r - 2);
	bool vv = vec_ok(&at->v, VV, at->DV, at->v.cs, r - 1);
	if (kx_att_out_helper(k, at, false) != 0)
		return -1;
	k->k->block = nt;
	k->k->units = rows * ns;
	k->k->per_sm = -1;
	k->k->smem = (int)((4 * SIMT_WARPS + 4 + SIMT_WARPS * at->DV) * 4);
	if (ns > 1)
		kf_buf_printf(&k->decl, "__device__ float KF_KERNEL_ws[%lld];\n__device__ unsigned KF_KERNEL_cnt[%lld];\n",
			      (long long)(rrows * ns * (at->DV + 2)), (long long)rrows);
	kf_buf_puts(&k->decl, kx_att_helpers());
	kf_buf_printf(b, "  /* simt: %d warps a row, %d keys a step, %lld slice%s of keys a row */\n", SIMT_WARPS, SIMT_U,
		      (long long)ns, ns == 1 ? "" : "s");
	kf_buf_puts(b, "  extern __shared__ __align__(16) unsigned char kf_smem[];\n  float *const cm = (float *)kf_smem, "
		       "*const cl = cm + 4, *const co = cm + 12;\n");
	kf_buf_puts(b, "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n");
	kf_buf_printf(b, "  const long long rowg = blockIdx.x / %lld;\n  const int sp = (int)(blockIdx.x %% %lld);\n", (long long)ns,
		      (long long)ns);
	row_head(k, at, sTq, sTk);
	kf_buf_printf(b, "  const int per = (kend + %lld) / %lld, kb = sp * per, ke = min(kend, kb + per);\n", (long long)(ns - 1),
		      (long long)ns);
	/* q, with its prologue */
	kf_buf_printf(b, "  float qv[%d];\n", V);
	kf_buf_puts(b, "  {\n");
	load_run(b, &at->q, V, at->q.cs, at->D, "qo", "qv", qv);
	if (at->q.npro) {
		kf_buf_printf(b, "    for (int e = 0; e < %d; e++) qv[e] = lane * %d + e < %lld ? ", V, V, (long long)at->D);
		kx_att_qpro_call(k, b);
		kf_buf_puts(b, "qv[e]) : 0.0f;\n");
	}
	if (at->mdt == KF_F16 || at->mdt == KF_BF16)
		kf_buf_printf(b, "    for (int e = 0; e < %d; e++) qv[e] = %s(%s(qv[e]));\n", V,
			      at->mdt == KF_F16 ? "kf_h2f" : "kf_b2f", at->mdt == KF_F16 ? "kf_f2h" : "kf_f2b");
	kf_buf_puts(b, "  }\n");
	key_loop(k, at, V, VV, kv, vv);
	/* the warps' partials, combined by the block's threads, one head dim each */
	kf_buf_printf(b, "  if (lane == 0) {\n    cm[warp] = m;\n    cl[warp] = l;\n  }\n"
		      "  for (int e = 0; e < %d; e++)\n    if (lane * %d + e < %lld) co[warp * %lld + lane * %d + e] = ov[e];\n"
		      "  __syncthreads();\n", VV, VV, (long long)at->DV, (long long)at->DV, VV);
	kf_buf_printf(b, "  float M = cm[0];\n  for (int w = 1; w < %d; w++) M = fmaxf(M, cm[w]);\n", SIMT_WARPS);
	kf_buf_puts(b, "  const float bm = ");
	kx_att_exp_off(at, b, "M", LOG2E);
	kf_buf_printf(b, ";\n  float L = 0.0f, f[%d];\n  for (int w = 0; w < %d; w++) {\n    f[w] = ", SIMT_WARPS, SIMT_WARPS);
	kx_att_ex2(at, b, "cm[w]", "bm", LOG2E);
	kf_buf_puts(b, ";\n    L += cl[w] * f[w];\n  }\n");
	if (ns == 1) {
		kf_buf_printf(b, "  for (int d = threadIdx.x; d < %lld; d += %d) {\n    float O = 0.0f;\n", (long long)at->DV, nt);
		kf_buf_printf(b, "    for (int w = 0; w < %d; w++) O += co[w * %lld + d] * f[w];\n    ", SIMT_WARPS, (long long)at->DV);
		kx_att_out_call(k, b, false);
		kf_buf_puts(b, "z, i, d, O / L);\n  }\n");
		return 0;
	}
	split_combine(k, at, ns, nt);
	return 0;
}
