/* emit_depthwise_toep.c: a channels-last depthwise conv of f16 or bf16 on
 * tensor cores, each kernel row a Toeplitz matrix (mma.sync m16n8k16,
 * f32 accumulation).
 *
 * Why: the band kernel (emit_depthwise_rows.c) is bound by issuing
 * instructions at 5x5 (session 21: about 60 an output, 25 of them FFMAs
 * and 9 f16-to-f32 conversions; 58% of issue slots busy, DRAM 9-14%).  A
 * depthwise conv has no sum over channels, but along a row of one channel
 * it is a product with a banded matrix that every row of that channel
 * shares:
 *
 *     out[seg][n] += sum_k x[seg][k] T[k][n],  T[k][n] = w[kh][k - n]
 *                                              (0 <= k - n < KW, else 0)
 *
 * where seg is a segment of 8 output columns of one output row (16 of
 * them the rows of A), k the 16 input columns under it, n its 8 outputs.
 * One ldmatrix.x4 and one mma add a kernel row's taps into 128 outputs;
 * the products are exact in f32 and summed in f32, as the FFMA kernels
 * sum them.  With a stride or dilation along the row, T[k][n] = w[kh][(k
 * - s n) / d] where d divides, and the 8 outputs may need more than 16
 * input columns: KS steps of 16 (1: 3x3 to 9x9 at stride 1; 2: up to 9x9
 * at stride 2), an ldmatrix and an mma each.  The session before tried the
 * other way round (a diagonal B over channels: 15/16 of the tensor work
 * zeros, 0.55-0.93x of the band kernel); here 8 x KW of T's 128 entries
 * are taps (5x5: 31%).
 *
 * The price is a transpose: ldmatrix gives 8 contiguous elements a row,
 * and T's rows must be columns of one channel, so the block's band of
 * input is stored channel by channel ([channel][row][column]) as it is
 * loaded, and its results go through shared memory ([channel][segment]
 * [8] of f32) to be stored channels-last by the matmul kernels' epilogue.
 *
 * The plan: a block owns CSV channels (8 or 16) of R output rows of one
 * image, every column; its NW warps take CPW = CSV / NW channels each,
 * each channel its MT tiles of 16 segments (the segments ordered row first: the 8
 * ldmatrix rows of a phase are 8 rows of the band, in distinct banks by
 * the row stride); T's fragments for a channel come from a table of
 * weight pairs ([channel][kh][TS] of 32 bits, zeros off the taps), two
 * 32-bit loads a kernel row and step.  The results stay in registers
 * (CPW x MT x 4) until every warp is done with the band, and the result
 * tile then takes the band's place: half the shared memory of separate
 * arrays, more blocks an SM to overlap one's loads with another's work.
 * Strides and dilations down the image are free (a segment's rows are
 * addresses).
 *
 * $KFUSE_DEPTHWISE "toep" forces it; "toep:" then any of h<R>c<CSV>
 * w<warps>b<MB> overrides the rows of a band, the channels and warps of a
 * block and the blocks an SM of __launch_bounds__.
 *
 * requires: a 2-D channels-last depthwise conv, x and w f16 or bf16, C a
 * multiple of 8, 8 outputs along W reading at most 32 input columns
 * (7 s + (KW - 1) d + 1 <= 32), at most 2^20 output rows and columns (the
 * plan's sizes in int); keeps: the epilogue calls of the matmul kernels.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "emit_mm_int.h"

typedef struct dwt_plan {
	int CSV, R, NW, MB;   /* channels, output rows, warps of a block; blocks an SM (0: by the block's size) */
	int CPW;              /* channels a warp (CSV / NW) */
	int SG, S, MT;        /* 8-column groups of a row, segments (R x SG), tiles of 16 segments */
	int KS, OFF, TS;      /* 16-column steps of a segment's inputs; pair j holds w at j - OFF; pairs a kernel row */
	int NI, LWC, RSE;     /* input rows and columns of the band, its row stride (elements) */
	int PLE, OPL;         /* a channel's plane of band (elements), of results (floats) */
	int STG;              /* the stagger of 8-channel vector v's planes in the band: v STG elements */
	int smem, pairs;      /* bytes: the band or the results, then the weight pairs (at byte `pairs`) */
	int64_t OHG, NS;      /* bands down an image, channel slices */
} dwt_plan;

/* The shared memory a plan may take by default: 48 KiB, four blocks an
 * SM and the loads of some overlapping the others' arithmetic. */
#define DWT_SMEM (48 * 1024)
/* The result registers a thread may hold (CPW x MT x 4). */
#define DWT_ACC 64

/* The input columns 8 outputs along W read. */
static int64_t dwt_span(const kx_conv *cv)
{
	return 7 * cv->s[2] + (cv->k[2] - 1) * cv->d[2] + 1;
}

static void dwt_shape(const kx_conv *cv, dwt_plan *p)
{
	p->KS = (int)((dwt_span(cv) + 15) / 16);
	p->OFF = (int)(7 * cv->s[2] + 1);
	p->TS = 16 * p->KS + p->OFF;
	p->SG = (int)((cv->out[2] + 7) / 8);
	p->S = p->R * p->SG;
	p->MT = (p->S + 15) / 16;
	p->NI = (int)((p->R - 1) * cv->s[1] + (cv->k[1] - 1) * cv->d[1] + 1);
	p->LWC = (int)((p->SG - 1) * 8 * cv->s[2]) + 16 * p->KS;
	/* a row stride of an odd number of 16-byte units: 8 rows of the band
	 * at one column are 8 distinct bank quads for ldmatrix */
	p->RSE = p->LWC / 8 % 2 ? p->LWC : p->LWC + 8;
	p->PLE = p->NI * p->RSE;
	p->OPL = p->MT * 128;
	int cvv = p->CSV / 8;
	p->STG = 8 * (cvv < 8 ? 8 / cvv : 1);
	int band = (p->CSV * p->PLE + cvv * p->STG) * 2, out = (p->CSV * p->OPL + 24) * 4;
	p->CPW = p->CSV / p->NW;
	p->pairs = band > out ? band : out;
	p->smem = p->pairs + p->CSV * (int)cv->k[1] * p->TS * 4;
	p->OHG = (cv->out[1] + p->R - 1) / p->R;
	p->NS = cv->C / p->CSV;
}

/* 16 channels where C allows, two a warp, then of the row counts up to
 * 16 whose block fits DWT_SMEM and DWT_ACC the one loading and computing
 * the least: bands x (input rows + half the padded segment rows).  Two
 * channels a warp (256 threads) against one (512) and four (128 threads,
 * 16 warps an SM), at ConvNeXt-T's 7x7 layers, batch 32, f16 on the H200
 * (bench/results/2026-12-04-gpu-s22b-depthwise-toep.txt): 0.0395 against
 * 0.0453 ms at 96 channels of 56x56, 0.0176 against 0.0203 at 384 of
 * 14x14, 0.0308 against 0.0288 at 192 of 28x28. */
static int dwt_pick(const kx_conv *cv, dwt_plan *p, int smem, int acc)
{
	p->CSV = cv->C % 16 == 0 ? 16 : 8;
	p->NW = p->CSV / 2;
	double least = -1;
	dwt_plan best = *p;
	for (int r = 1; r <= 16 && r <= cv->out[1]; r++) {
		dwt_plan t = *p;
		t.R = r;
		dwt_shape(cv, &t);
		if (t.smem > smem || t.CPW * t.MT * 4 > acc)
			continue;
		double cost = (double)t.OHG * (t.NI + 0.5 * t.MT * 16.0 / t.SG);
		if (least < 0 || cost < least)
			best = t, least = cost;
	}
	*p = best;
	return least >= 0;
}

static int dwt_override(kx *k, const kx_conv *cv, dwt_plan *p, const char *env, const char *knobs)
{
	int kv[4] = {p->R, p->CSV, p->NW, p->MB};
	if (!kx_dw_knobs(knobs, "hcwb", "b", kv))
		return kx_fail(k, "$KFUSE_DEPTHWISE '%s' is not toep:h<R>c<CSV>w<warps>b<MB>", env);
	/* without w, two channels a warp as by default */
	p->R = kv[0], p->CSV = kv[1], p->NW = strchr(knobs, 'w') ? kv[2] : (kv[1] + 1) / 2, p->MB = kv[3];
	bool ok = p->R <= 64 && p->CSV % 8 == 0 && cv->C % p->CSV == 0 && p->NW <= 32 && p->CSV % p->NW == 0 &&
		  p->MB <= 32;
	if (ok) {
		dwt_shape(cv, p);
		ok = p->smem <= 200 * 1024 && p->CPW * p->MT * 4 <= 128;
	}
	if (!ok)
		return kx_fail(k, "$KFUSE_DEPTHWISE '%s' does not fit this conv (R <= 64; CSV a multiple of 8 dividing "
			       "%lld; at most 32 warps, dividing CSV; the block's shared memory within 200 KiB; at most 128 "
			       "result registers a thread)", env, (long long)cv->C);
	return 0;
}

/* The block's place (image n, first output row oh0), its shared arrays,
 * and the band loaded: a cell two adjacent positions of 8 channels (two
 * 16-byte loads, channels-last), written as 8 pairs of 32 bits into the
 * channels' planes kf_band[c PLE + (c / 8) STG + row RSE + column]
 * (column j is input column j - pad; zeros outside the image).  A warp's
 * lanes take the slice's channel vectors first: its stores are 128 / CVV
 * bytes of each vector's plane, which the STG stagger puts in distinct
 * banks.  (One position a cell and 2-byte stores: twice the stores, and
 * 77% of L1's throughput at EfficientNet-B0's 5x5 in s22c.) */
static void dwt_load(kx *k, const kx_mm *mm, const dwt_plan *p, int T)
{
	const kx_conv *cv = &mm->cv;
	const char *it = kx_it(k);
	int cvv = p->CSV / 8, pw = p->LWC / 2, cells = p->NI * pw * cvv;
	char cell[128]; /* cell e's vector, first column and row, for the loads and the stores */
	snprintf(cell, sizeof cell, "      const int cv = e %% %d, cl = e / %d %% %d * 2, row = e / %d;\n", cvv, cvv, pw,
		 cvv * pw);
	kf_buf *b = &k->b;
	kf_buf_printf(b, "  const %s u = (%s)(blockIdx.x / %lldu), n = u / %lld;\n", it, it, (long long)p->NS,
		      (long long)p->OHG);
	kf_buf_printf(b, "  const int oh0 = (int)(u - n * %lld) * %d, ih0 = oh0 * %lld - %lld;\n", (long long)p->OHG, p->R,
		      (long long)cv->s[1], (long long)cv->pb[1]);
	kf_buf_printf(b, "  extern __shared__ __align__(16) unsigned char kf_smem[];\n"
		      "  unsigned short *const kf_band = (unsigned short *)kf_smem;\n"
		      "  float *const kf_out = (float *)kf_smem; /* the band's place, once it is read */\n"
		      "  unsigned *const kf_pairs = (unsigned *)(kf_smem + %d);\n", p->pairs);
	kf_buf_printf(b, "  for (int e0 = threadIdx.x; e0 < %d; e0 += %d) {\n    uint4 v[4][2];\n", cells, 4 * T);
	kf_buf_printf(b, "#pragma unroll\n    for (int q = 0; q < 4; q++) {\n      const int e = e0 + q * %d;\n", T);
	kf_buf_puts(b, cell);
	kf_buf_printf(b, "      const int ih = ih0 + row, iw = cl - %lld;\n", (long long)cv->pb[2]);
	kf_buf_printf(b, "      const %s xo = ((n * %lld + ih) * %lld + iw) * %lld + c0 + cv * 8;\n", it, (long long)cv->in[1],
		      (long long)cv->in[2], (long long)cv->C);
	kf_buf_printf(b, "#pragma unroll\n      for (int h = 0; h < 2; h++)\n"
		      "        v[q][h] = e < %d && (unsigned)ih < %lldu && (unsigned)(iw + h) < %lldu ? "
		      "__ldg((const uint4 *)(p%d + xo + h * %lld)) : make_uint4(0, 0, 0, 0);\n    }\n",
		      cells, (long long)cv->in[1], (long long)cv->in[2], mm->a.param, (long long)cv->C);
	kf_buf_printf(b, "#pragma unroll\n    for (int q = 0; q < 4; q++) {\n      const int e = e0 + q * %d;\n"
		      "      if (e >= %d) break;\n", T, cells);
	kf_buf_puts(b, cell);
	kf_buf_printf(b, "      unsigned *d = (unsigned *)(kf_band + cv * %d + row * %d + cl);\n", 8 * p->PLE + p->STG, p->RSE);
	kf_buf_puts(b, "      const unsigned short *h0 = (const unsigned short *)&v[q][0], *h1 = (const unsigned short *)&v[q][1];\n");
	kf_buf_printf(b, "#pragma unroll\n      for (int j = 0; j < 8; j++) d[j * %d] = h0[j] | (unsigned)h1[j] << 16;\n    }\n  }\n",
		      p->PLE / 2);
}

/* The weight pairs: kf_pairs[(c KH + kh) TS + j] holds tap(j - OFF) in
 * its low half and tap(j - OFF + 1) in its high one, tap(i) = w[kh][i /
 * d] where d divides i and i / d < KW, else 0; so lane (g, t)'s B
 * registers of kernel row kh at step ks are entries 16 ks + 8 h + 2t -
 * s g + OFF (h = 0, 1): T[k][n] = tap(k - s n) at k = 16 ks + 8 h + 2t,
 * + 1 and n = g. */
static void dwt_pairs(kx *k, const kx_mm *mm, const dwt_plan *p, int T)
{
	const kx_conv *cv = &mm->cv;
	long long KH = (long long)cv->k[1], KW = (long long)cv->k[2];
	kf_buf *b = &k->b;
	long long D = (long long)cv->d[2];
	kf_buf_printf(b, "  for (int e = threadIdx.x; e < %lld; e += %d) {\n", p->CSV * KH * p->TS, T);
	kf_buf_printf(b, "    const int c = e / %lld, kh = e / %d %% %lld, i = e %% %d - %d;\n", KH * p->TS, p->TS, KH,
		      p->TS, p->OFF);
	kf_buf_printf(b, "    const unsigned short *w = p%d + (c0 + c) * %lld + kh * %lld;\n", mm->b.param,
		      (long long)cv->KK, KW);
	kf_buf_printf(b, "    const unsigned lo = i >= 0 && i %% %lld == 0 && i / %lld < %lld ? w[i / %lld] : 0u;\n", D, D, KW, D);
	kf_buf_printf(b, "    const unsigned hi = i + 1 >= 0 && (i + 1) %% %lld == 0 && (i + 1) / %lld < %lld ? w[(i + 1) / %lld] : 0u;\n",
		      D, D, KW, D);
	kf_buf_puts(b, "    kf_pairs[e] = lo | hi << 16;\n  }\n");
}

/* The warps' walk: channel by channel (warp w's are w, w + NW, ...), its
 * tiles of 16 segments, each kernel row and step one ldmatrix.x4 (lanes
 * 0-15 address the tile's segments at its first 8 input columns, lanes
 * 16-31 at the next 8) and one mma; then, the band read by all, each
 * tile's 16 x 8 results into kf_out[c OPL + (c / 8 % 4) 8 + segment 8 +
 * n]. */
static void dwt_walk(kx *k, const kx_mm *mm, const dwt_plan *p)
{
	const kx_conv *cv = &mm->cv;
	long long KH = (long long)cv->k[1];
	const char *mma = mm->a.st == KF_BF16 ? "kf_mma_bf16" : "kf_mma_f16";
	kf_buf *b = &k->b;
	kf_buf_puts(b, "  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;\n");
	long long SW = (long long)cv->s[2];
	kf_buf_printf(b, "  float acc[%d][%d][4];\n#pragma unroll\n  for (int ci = 0; ci < %d; ci++) {\n"
		      "    const int c = (threadIdx.x >> 5) + ci * %d;\n    unsigned bw[%lld][%d][2];\n", p->CPW, p->MT, p->CPW,
		      p->NW, KH, p->KS);
	kf_buf_printf(b, "    const unsigned *pw = kf_pairs + c * %lld + 2 * t - %lld * g + %d;\n", KH * p->TS, SW, p->OFF);
	kf_buf_printf(b, "#pragma unroll\n    for (int kh = 0; kh < %lld; kh++)\n#pragma unroll\n"
		      "      for (int ks = 0; ks < %d; ks++) {\n"
		      "        bw[kh][ks][0] = pw[kh * %d + ks * 16];\n        bw[kh][ks][1] = pw[kh * %d + ks * 16 + 8];\n      }\n",
		      KH, p->KS, p->TS, p->TS);
	kf_buf_printf(b, "    const unsigned short *pl = kf_band + c * %d + (c >> 3) * %d;\n", p->PLE, p->STG);
	kf_buf_printf(b, "#pragma unroll\n    for (int mt = 0; mt < %d; mt++) {\n", p->MT);
	kf_buf_printf(b, "      int s = mt * 16 + (lane & 15);\n      if (s >= %d) s = %d;\n", p->S, p->S - 1);
	kf_buf_printf(b, "      const unsigned short *pa = pl + s %% %d * %lld + s / %d * %lld + (lane >> 4) * 8;\n", p->R,
		      (long long)cv->s[1] * p->RSE, p->R, 8 * SW);
	kf_buf_puts(b, "      float *d = acc[ci][mt];\n      d[0] = d[1] = d[2] = d[3] = 0.f;\n");
	kf_buf_printf(b, "#pragma unroll\n      for (int kh = 0; kh < %lld; kh++)\n#pragma unroll\n"
		      "        for (int ks = 0; ks < %d; ks++) {\n          unsigned a[4];\n"
		      "          kf_ldsm4(a, pa + kh * %lld + ks * 16);\n          %s(d, a, bw[kh][ks]);\n        }\n    }\n  }\n",
		      KH, p->KS, (long long)cv->d[1] * p->RSE, mma);
	kf_buf_puts(b, "  __syncthreads();\n");
	kf_buf_printf(b, "#pragma unroll\n  for (int ci = 0; ci < %d; ci++) {\n    const int c = (threadIdx.x >> 5) + ci * %d;\n",
		      p->CPW, p->NW);
	kf_buf_printf(b, "    float *po = kf_out + c * %d + (c >> 3 & 3) * 8;\n", p->OPL);
	kf_buf_printf(b, "#pragma unroll\n    for (int mt = 0; mt < %d; mt++) {\n", p->MT);
	kf_buf_puts(b, "      *(float2 *)(po + (mt * 16 + g) * 8 + 2 * t) = make_float2(acc[ci][mt][0], acc[ci][mt][1]);\n"
		       "      *(float2 *)(po + (mt * 16 + g + 8) * 8 + 2 * t) = make_float2(acc[ci][mt][2], acc[ci][mt][3]);\n"
		       "    }\n  }\n");
}

/* The results channels-last: a thread 8 channels of two adjacent
 * positions of a segment (lanes across the slice's channel vectors first:
 * the stores are whole runs), read as 8 pairs from the channels' planes
 * and stored through the epilogue. */
static void dwt_store(kx *k, const kx_mm *mm, const dwt_plan *p, int T, int sb)
{
	const kx_conv *cv = &mm->cv;
	const char *it = kx_it(k);
	int cvv = p->CSV / 8;
	long long OW = (long long)cv->out[2];
	kf_buf *b = &k->b;
	long long OWP = (OW + 1) / 2;
	kf_buf_printf(b, "  for (int e = threadIdx.x; e < %lld; e += %d) {\n", p->R * OWP * cvv, T);
	kf_buf_printf(b, "    const int cv = e %% %d, q = e / %d, ow = (int)(q %% %lld) * 2, r = (int)(q / %lld);\n", cvv, cvv,
		      OWP, OWP);
	kf_buf_printf(b, "    if (oh0 + r >= %lld) break;\n", (long long)cv->out[1]);
	kf_buf_printf(b, "    const float *po = kf_out + cv * %d + (cv & 3) * 8 + ((ow >> 3) * %d + r) * 8 + (ow & 7);\n",
		      8 * p->OPL, p->R);
	kf_buf_printf(b, "    float a[8], a1[8];\n#pragma unroll\n    for (int j = 0; j < 8; j++) {\n"
		      "      const float2 f = *(const float2 *)(po + j * %d);\n      a[j] = f.x, a1[j] = f.y;\n    }\n", p->OPL);
	kf_buf_printf(b, "    const %s col = c0 + cv * 8, row = (n * %lld + oh0 + r) * %lld + ow;\n", it,
		      (long long)cv->out[1], OW);
	kx_dw_store_vec(k, mm, b, sb, 8, "row", "a");
	if (OW % 2) /* the second position of the last pair is past the row's end */
		kf_buf_printf(b, "    if (ow + 1 < %lld) {\n", OW);
	kx_dw_store_vec(k, mm, b, sb, 8, "row + 1", "a1");
	if (OW % 2)
		kf_buf_puts(b, "    }\n");
	kf_buf_puts(b, "  }\n");
}

int kx_dw_emit_toep(kx *k, kx_mm *mm, int V, const char *env, const char *knobs)
{
	const kx_conv *cv = &mm->cv;
	dwt_plan p = {0};
	bool fits = cv->in[0] == 1 && cv->k[0] == 1 && cv->out[0] == 1 && V == 8 &&
		    (mm->a.st == KF_F16 || mm->a.st == KF_BF16) && mm->b.st == mm->a.st && cv->C % 8 == 0 &&
		    dwt_span(cv) <= 32 && cv->out[1] <= (1 << 20) && cv->out[2] <= (1 << 20) &&
		    !strcmp(kx_mm_acc_type(mm), "float");
	if (!fits)
		return knobs ? kx_fail(k, "$KFUSE_DEPTHWISE '%s': the toep kernel takes 2-D convs of f16 or bf16 whose "
				     "channels are a multiple of 8, whose 8 outputs along W read at most 32 input columns, "
				     "of at most 2^20 output rows and columns", env) : 1;
	/* forced: where no plan fits the defaults' bounds, the override's (or
	 * the knobs' own plan, checked below) */
	if (!dwt_pick(cv, &p, DWT_SMEM, DWT_ACC) && !(knobs && dwt_pick(cv, &p, 200 * 1024, 128)) && !(knobs && *knobs))
		return knobs ? kx_fail(k, "$KFUSE_DEPTHWISE '%s': no band of this conv fits shared memory", env) : 1;
	if (knobs && *knobs && dwt_override(k, cv, &p, env, knobs) != 0)
		return -1;
	if (p.R < 1 || p.smem > 200 * 1024)
		return knobs ? kx_fail(k, "$KFUSE_DEPTHWISE '%s': no band of this conv fits shared memory", env) : 1;
	int T = 32 * p.NW;
	int64_t units = p.NS * cv->N * p.OHG;
	if (units >= (1LL << 31))
		return kx_fail(k, "a conv with more than 2^31 blocks of outputs");
	k->k->block = T;
	k->k->per_sm = -1;
	k->k->smem = p.smem;
	k->k->min_blocks = p.MB ? p.MB : T <= 512 ? 1024 / T : 1; /* at most 64 registers */
	k->k->units = units;
	int sb = kx_dw_store_kind(k, mm, 8);
	kf_buf *b = &k->b;
	kf_buf_puts(&k->decl, kx_mm_helpers());
	kf_buf_printf(b, "  /* depthwise toep: %d rows x %lld columns x %d channels a block (%d x %d inputs a channel), "
		      "%d tiles of 16 segments a channel, %d threads */\n", p.R, (long long)cv->out[2], p.CSV, p.NI, p.LWC,
		      p.MT, T);
	kx_dw_slice_c0(k, p.CSV, p.NS);
	dwt_load(k, mm, &p, T);
	dwt_pairs(k, mm, &p, T);
	kf_buf_puts(b, "  __syncthreads();\n");
	dwt_walk(k, mm, &p);
	kf_buf_puts(b, "  __syncthreads();\n");
	dwt_store(k, mm, &p, T, sb);
	return 0;
}
