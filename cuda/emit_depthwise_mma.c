/* emit_depthwise_mma.c: a channels-last depthwise conv of f16 or bf16 on
 * tensor cores (mma.sync m16n8k16, f32 accumulation), over a band of
 * input in shared memory as the band kernel (emit_depthwise_rows.c) has.
 *
 * Why: the band kernel is bound by issuing instructions, not by memory
 * (session 21: Nsight Compute and the SASS of the 5x5 layers of
 * EfficientNet-B0 at batch 32: 58% of issue slots busy, DRAM 9-12%, about
 * 60 instructions an output, 25 of them FFMAs and 9 f16-to-f32
 * conversions).  A depthwise conv has no contraction over channels, but a
 * tap's products for 16 positions x 8 channels are a matrix product
 * whose B is diagonal:
 *
 *     C[pos, c] += sum_k A[pos, k] B[k, c],  A[pos, k] = x[pos shifted by
 *     the tap, channel k],  B[k, c] = w[c, tap] where k = c, else 0
 *
 * A is 16 positions x 16 channels of the band as it lies in shared memory
 * (channels-last: a position's channels contiguous), one ldmatrix.x4; two
 * mma (B diagonal over channels 0-7, then 8-15) give a 16 x 16 tile of one
 * tap's products: 1/16 of the tensor cores' work is useful, and still one
 * tap costs a warp 2 instructions for 256 outputs where FFMAs cost 8 and
 * the conversions and shared loads half as many again.  The products are
 * exact in f32 and summed in f32 as the FFMA kernels sum them.
 *
 * The plan: a warp owns 16 channels and 16 output columns of a band of R
 * output rows; a block, CSV channels (16 to 64, dividing C) by every
 * column of the band; each tap's two B fragments sit in registers for the
 * whole band (2 KK registers: only lanes with t = g / 2 hold a weight);
 * the band's rows are walked down once, each of its KW shifted A
 * fragments added into every output row that reads that input row, a row
 * stored (the matmul kernels' epilogue, pairs of channels) when its last
 * input row is in.  The band is stored [row][column][CSV + 8]: the 16
 * bytes of padding put ldmatrix's 8 rows (8 positions) in distinct banks.
 *
 * $KFUSE_DEPTHWISE "mma" forces it; "mma:" then any of h<R>c<CSV>b<MB>
 * overrides the rows of a band, the channels of a block and the blocks an
 * SM of __launch_bounds__.
 *
 * requires: a 2-D channels-last depthwise conv, x and w f16 or bf16, C a
 * multiple of 16; keeps: the epilogue calls of the matmul kernels.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "emit_mm_int.h"

typedef struct dwm_plan {
	int CSV, R, MB;       /* channels a block, output rows a band, blocks an SM */
	int SEG, NI, LW, PST; /* 16-column segments, input rows and columns of a band, its position stride */
	int BB;               /* the band's bytes */
	int64_t OHG, NS;      /* bands down an image, channel slices */
} dwm_plan;

/* A band's shared memory at most (48 KiB: two blocks an SM and the
 * weights beside them). */
#define DWM_SMEM (48 * 1024)

static void dwm_shape(const kx_conv *cv, dwm_plan *p)
{
	p->SEG = (int)((cv->out[2] + 15) / 16);
	p->NI = (int)((p->R - 1) * cv->s[1] + (cv->k[1] - 1) * cv->d[1] + 1);
	p->LW = (int)((p->SEG * 16 - 1) * cv->s[2] + (cv->k[2] - 1) * cv->d[2] + 1);
	p->PST = p->CSV + 8;
	p->BB = p->NI * p->LW * p->PST * 2;
	p->OHG = (cv->out[1] + p->R - 1) / p->R;
	p->NS = cv->C / p->CSV;
}

/* The widest slice up to 64 channels whose block is at most 512 threads,
 * then of the row counts up to 8 whose band fits DWM_SMEM the one loading
 * and adding up the fewest rows (bands x (R + NI)). */
static int dwm_pick(const kx_conv *cv, dwm_plan *p)
{
	int seg = (int)((cv->out[2] + 15) / 16);
	for (p->CSV = 64; p->CSV >= 16; p->CSV -= 16)
		if (cv->C % p->CSV == 0 && p->CSV / 16 * seg <= 16)
			break;
	if (p->CSV < 16)
		return 0;
	int64_t least = -1;
	dwm_plan best = *p;
	for (int r = 8; r >= 1; r--) {
		dwm_plan t = *p;
		t.R = r;
		dwm_shape(cv, &t);
		if (r > cv->out[1] || t.BB > DWM_SMEM)
			continue;
		int64_t cost = t.OHG * (r + t.NI);
		if (least < 0 || cost < least)
			best = t, least = cost;
	}
	*p = best;
	return least >= 0;
}

static int dwm_override(kx *k, const kx_conv *cv, dwm_plan *p, const char *env, const char *knobs)
{
	int kv[3] = {p->R, p->CSV, p->MB};
	if (!kx_dw_knobs(knobs, "hcb", "b", kv))
		return kx_fail(k, "$KFUSE_DEPTHWISE '%s' is not mma:h<R>c<CSV>b<MB>", env);
	p->R = kv[0], p->CSV = kv[1], p->MB = kv[2];
	bool ok = p->R <= 16 && p->CSV % 16 == 0 && cv->C % p->CSV == 0 && p->MB <= 32;
	if (ok) {
		dwm_shape(cv, p);
		ok = p->BB <= 200 * 1024 && p->CSV / 16 * p->SEG <= 32;
	}
	if (!ok)
		return kx_fail(k, "$KFUSE_DEPTHWISE '%s' does not fit this conv (R <= 16; CSV a multiple of 16 dividing "
			       "%lld; at most 32 warps a block; the band in 200 KiB)", env, (long long)cv->C);
	return 0;
}

/* The band of block blockIdx.x (image n, output rows oh0..) into kf_band
 * ([NI][LW][PST] of x's type, zeros in the padding), issued with
 * cp.async, one commit group. */
static void dwm_load(kx *k, const kx_mm *mm, const dwm_plan *p, int T)
{
	const kx_conv *cv = &mm->cv;
	const char *it = kx_it(k), *st = kx_st(mm->a.st);
	int cvv = p->CSV / 8, n16 = p->NI * p->LW * cvv;
	kf_buf *b = &k->b;
	kf_buf_printf(b, "  const %s u = (%s)(blockIdx.x / %lldu), n = u / %lld;\n", it, it, (long long)p->NS,
		      (long long)p->OHG);
	kf_buf_printf(b, "  const int oh0 = (int)(u - n * %lld) * %d, ih0 = oh0 * %lld - %lld, iw0 = -%lld;\n",
		      (long long)p->OHG, p->R, (long long)cv->s[1], (long long)cv->pb[1], (long long)cv->pb[2]);
	kf_buf_printf(b, "  extern __shared__ __align__(16) unsigned char kf_smem[];\n  %s *const kf_band = (%s *)kf_smem;\n",
		      st, st);
	kf_buf_printf(b, "  for (int e = threadIdx.x; e < %d; e += %d) {\n", n16, T);
	kf_buf_printf(b, "    const int r = e / %d, m = e - r * %d, cw = m / %d, v = m - cw * %d;\n", p->LW * cvv, p->LW * cvv,
		      cvv, cvv);
	kf_buf_printf(b, "    const int ih = ih0 + r, iw = iw0 + cw;\n    const bool ok = (unsigned)ih < %lldu && (unsigned)iw < %lldu;\n",
		      (long long)cv->in[1], (long long)cv->in[2]);
	kf_buf_printf(b, "    kf_cp16(kf_band + (r * %d + cw) * %d + v * 8, p%d + (ok ? ((n * %lld + ih) * %lld + iw) * %lld + c0 + v * 8 : 0), ok);\n  }\n",
		      p->LW, p->PST, mm->a.param, (long long)cv->in[1], (long long)cv->in[2], (long long)cv->C);
	kf_buf_puts(b, "  kf_cp_commit();\n");
}

/* The warp's place (channel group c16 of the slice, first column ow0) and
 * its lane's B fragments: wlo[tap] (channels 0-7 of the group) and
 * whi[tap] (8-15), the weight of channel g (or 8 + g) in half g & 1 where
 * t == g / 2, else 0: B[k][n] = w[n] on k == n. */
static void dwm_weights(kx *k, const kx_mm *mm, const dwm_plan *p)
{
	long long KK = (long long)mm->cv.KK;
	bool bf = mm->a.st == KF_BF16;
	kf_buf *b = &k->b;
	kf_buf_printf(b, "  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, wid = threadIdx.x >> 5;\n");
	kf_buf_printf(b, "  const int c16 = wid %% %d, ow0 = wid / %d * 16;\n", p->CSV / 16, p->CSV / 16);
	kf_buf_printf(b, "  const bool diag = t == (g >> 1);\n  unsigned wlo[%lld], whi[%lld];\n", KK, KK);
	kf_buf_printf(b, "#pragma unroll\n  for (int tap = 0; tap < %lld; tap++) {\n", KK);
	kf_buf_printf(b, "    const float *wt = kf_w + tap * %d + c16 * 16 + g;\n", p->CSV);
	kf_buf_printf(b, "    wlo[tap] = diag ? (unsigned)%s(wt[0]) << ((g & 1) * 16) : 0u;\n", bf ? "kf_f2b" : "kf_f2h");
	kf_buf_printf(b, "    whi[tap] = diag ? (unsigned)%s(wt[8]) << ((g & 1) * 16) : 0u;\n  }\n", bf ? "kf_f2b" : "kf_f2h");
}

/* Output row r's 16 x 16 tile of the warp (acc[r][h][.]: positions g and
 * g + 8, channels h 8 + 2t, + 1) through the epilogue, where in the image. */
static void dwm_store(kx *k, const kx_mm *mm, const dwm_plan *p, int sb)
{
	const kx_conv *cv = &mm->cv;
	kf_buf *b = &k->b;
	kf_buf_printf(b, "#pragma unroll\n      for (int r = 0; r < %d; r++) {\n", p->R);
	kf_buf_printf(b, "        if (i != r * %lld + %lld || oh0 + r >= %lld) continue;\n", (long long)cv->s[1],
		      (long long)((cv->k[1] - 1) * cv->d[1]), (long long)cv->out[1]);
	kf_buf_puts(b, "#pragma unroll\n        for (int q = 0; q < 2; q++) {\n");
	kf_buf_printf(b, "          const int ow = ow0 + g + q * 8;\n          if (ow >= %lld) continue;\n",
		      (long long)cv->out[2]);
	kf_buf_printf(b, "#pragma unroll\n          for (int h = 0; h < 2; h++) {\n            const %s col = c0 + c16 * 16 + h * 8 + 2 * t;\n",
		      kx_it(k));
	kf_buf_printf(b, "            const %s row = (n * %lld + oh0 + r) * %lld + ow;\n", kx_it(k), (long long)cv->out[1],
		      (long long)cv->out[2]);
	kf_buf_puts(b, "            ");
	if (sb) {
		kx_mm_epi2_call(k, b);
		kf_buf_puts(b, "0, row, col, acc[r][h][2 * q], acc[r][h][2 * q + 1]);\n");
	} else {
		kx_mm_epi_call(k, b);
		kf_buf_puts(b, "0, row, col, acc[r][h][2 * q]);\n            ");
		kx_mm_epi_call(k, b);
		kf_buf_puts(b, "0, row, col + 1, acc[r][h][2 * q + 1]);\n");
	}
	kf_buf_puts(b, "          }\n        }\n      }\n");
}

/* The walk down the band: per input row i, per kernel column kw, the A
 * fragment of the warp's 16 positions (ldmatrix.x4: lanes 0-7 address
 * positions 0-7 of channels 0-7, 8-15 positions 8-15, 16-31 the same of
 * channels 8-15), two mma into each output row reading row i. */
static void dwm_walk(kx *k, const kx_mm *mm, const dwm_plan *p, int sb)
{
	const kx_conv *cv = &mm->cv;
	kf_buf *b = &k->b;
	const char *mma = mm->a.st == KF_BF16 ? "kf_mma_bf16" : "kf_mma_f16";
	long long KW = (long long)cv->k[2], sh = (long long)cv->s[1], dh = (long long)cv->d[1];
	kf_buf_printf(b, "  float acc[%d][2][4];\n#pragma unroll\n  for (int r = 0; r < %d; r++)\n#pragma unroll\n"
		      "    for (int e = 0; e < 8; e++) acc[r][e >> 2][e & 3] = 0.f;\n", p->R, p->R);
	kf_buf_printf(b, "  const int arow = (ow0 + (lane & 7) + ((lane >> 3) & 1) * 8) * %lld, ach = c16 * 16 + (lane >> 4) * 8;\n",
		      (long long)cv->s[2]);
	kf_buf_printf(b, "#pragma unroll\n  for (int i = 0; i < %d; i++) {\n", p->NI);
	kf_buf_printf(b, "#pragma unroll\n    for (int kw = 0; kw < %lld; kw++) {\n      unsigned a[4];\n", KW);
	kf_buf_printf(b, "      kf_ldsm4(a, kf_band + (i * %d + arow + kw * %lld) * %d + ach);\n", p->LW, (long long)cv->d[2],
		      p->PST);
	kf_buf_printf(b, "#pragma unroll\n      for (int r = 0; r < %d; r++) {\n", p->R);
	kf_buf_printf(b, "        const int e = i - r * %lld;\n        if (e < 0 || e > %lld || e %% %lld) continue;\n", sh,
		      (long long)((cv->k[1] - 1) * dh), dh);
	kf_buf_printf(b, "        const int tap = e / %lld * %lld + kw;\n", dh, KW);
	kf_buf_puts(b, "        const unsigned blo[2] = {wlo[tap], 0u}, bhi[2] = {0u, whi[tap]};\n");
	kf_buf_printf(b, "        %s(acc[r][0], a, blo);\n        %s(acc[r][1], a, bhi);\n      }\n    }\n", mma, mma);
	dwm_store(k, mm, p, sb);
	kf_buf_puts(b, "  }\n");
}

int kx_dw_emit_mma(kx *k, kx_mm *mm, int V, const char *env, const char *knobs)
{
	const kx_conv *cv = &mm->cv;
	dwm_plan p = {0};
	bool fits = cv->in[0] == 1 && cv->k[0] == 1 && cv->out[0] == 1 && V == 8 &&
		    (mm->a.st == KF_F16 || mm->a.st == KF_BF16) && mm->b.st == mm->a.st && cv->C % 16 == 0 &&
		    !strcmp(kx_mm_acc_type(mm), "float");
	if (!fits)
		return knobs ? kx_fail(k, "$KFUSE_DEPTHWISE '%s': the mma kernel takes 2-D convs of f16 or bf16 whose "
				     "channels are a multiple of 16", env) : 1;
	if (!dwm_pick(cv, &p) && !knobs)
		return 1;
	if (knobs && *knobs && dwm_override(k, cv, &p, env, knobs) != 0)
		return -1;
	if (p.CSV < 16 || p.R < 1 || p.BB > 200 * 1024)
		return knobs ? kx_fail(k, "$KFUSE_DEPTHWISE '%s': no band of this conv fits shared memory", env) : 1;
	int T = 32 * (p.CSV / 16) * p.SEG;
	int64_t units = p.NS * cv->N * p.OHG;
	if (units >= (1LL << 31))
		return kx_fail(k, "a conv with more than 2^31 blocks of outputs");
	k->k->block = T;
	k->k->per_sm = -1;
	k->k->smem = p.BB;
	k->k->min_blocks = p.MB ? p.MB : T <= 512 ? 512 / T : 1;
	k->k->units = units;
	int sb = kx_dw_store_kind(k, mm, 2); /* 4: pairs of channels (epi2), else 0 */
	kf_buf *b = &k->b;
	kf_buf_puts(&k->decl, kx_mm_helpers());
	kf_buf_printf(b, "  /* depthwise mma: %d rows x %lld columns x %d channels a block (%d x %d inputs in shared memory), "
		      "16 columns x 16 channels a warp, %d threads */\n", p.R, (long long)cv->out[2], p.CSV, p.NI, p.LW, T);
	kx_dw_slice_c0(k, p.CSV, p.NS);
	dwm_load(k, mm, &p, T);
	kx_dw_stage_weights(k, mm, "float", p.CSV, T);
	dwm_weights(k, mm, &p);
	kf_buf_puts(b, "  kf_cp_wait<0>();\n  __syncthreads();\n");
	dwm_walk(k, mm, &p, sb);
	return 0;
}
