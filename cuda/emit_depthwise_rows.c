/* emit_depthwise_rows.c: the rows kernel of channels-last depthwise
 * convs (emit_depthwise.c picks it for 2-D convs of many outputs whose
 * kernel is at most 5x5), and its band mode (below: the same walk over a
 * band of input in shared memory).
 *
 * Why another kernel: the tiled one (a thread R outputs along W of one
 * channel vector) is bound by L1 on the H200 (Nsight Compute on
 * MobileNetV2's 32-channel 3x3 at 112x112, batch 32: 78% of L1 against 26%
 * of DRAM; bench/results/2026-12-02-gpu-s6b-depthwise.txt): a 4-output
 * tile makes 18 16-byte input loads and 18 16-byte shared-memory weight
 * loads, each row of inputs read again by the next row's tile.  Here a
 * thread owns VT channels at RC adjacent output columns and walks DOWN a
 * strip of R output rows:
 * - its KK x VT weights sit in registers (f32) for the whole strip,
 *   copied once from the block's shared copy (as the tiled kernel stages
 *   them, [tap][channel]);
 * - it reads each input row of the strip once, L = (RC - 1) s + (KW - 1) d
 *   + 1 vectors, converts them once, and adds each into every output row
 *   that reads it (KH of them at stride 1): a 3x3 stride-1 strip of 8 rows
 *   and 2 columns loads 10 x 4 vectors for 16 outputs, 2.5 an output
 *   against the tiled kernel's 4.5 input and 4.5 weight loads;
 * - an output row is stored as soon as its last input row is in (one 16-
 *   or 8-byte store of the epilogue's staged pairs), so only the rows in
 *   flight hold accumulators: ceil(((KH - 1) d + 1) / s) of them;
 * - every loop has compile-time bounds and is unrolled; inputs outside the
 *   image load as zeros (a strip past the bottom row computes on zeros and
 *   stores nothing);
 * - f32 accumulation (autocast's numerics), the matmul kernels' epilogue.
 * Registers decide the shape: f32 weights take KK x VT of them, so a
 * thread takes fewer channels (VT = 4 or 2 f16: 8- or 4-byte loads, whole
 * sectors across a warp's adjacent channel vectors) rather than spill; the
 * plan keeps an estimate under DWR_REGS (the ptxas tests check for
 * spills).
 *
 * $KFUSE_DEPTHWISE "rows" forces this kernel; "rows:" then any of
 * v<VT>x<RC>h<R>c<CS>p<P>b<MB>s<16|8|4|1>f<PF> overrides its choices
 * (channels, columns and rows a thread; channel vectors and strips a block;
 * __launch_bounds__ blocks an SM; bytes a store at most; input rows loaded
 * ahead, 0 to 4).
 *
 * requires: a 2-D (or 1-D) channels-last depthwise conv, x and w read as
 * stored, channels a multiple of V, f16, bf16 or f32 with f32
 * accumulation; keeps: the epilogue calls of the matmul kernels.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "emit_mm_int.h"

typedef struct dwr_plan {
	int esz;              /* the input's element bytes */
	int VT, RC, R;        /* channels, output columns and output rows a thread */
	int CS, P, MB, SB;    /* channel vectors and strips a block; blocks an SM; bytes a store */
	int PF;               /* input rows loaded ahead of the one added in */
	int LW, BB;           /* band mode: input columns of the band, its bytes in shared memory */
	int DB, WG;           /* band mode: blocks walk bands, the next one copied while this one is added up;
			       * blocks a slice (0: as many as are resident) */
	int ST;               /* band mode: the band copied in ST stages of rows, each waited for when first read */
	int L, NI;            /* input vectors of a row, input rows of a strip */
	uint64_t cols, rows;  /* bit i: input vector (row) i is read by some output */
	int64_t G, NS, OWG, OHG, Q; /* channel vectors, slices, strips across and down, strips a vector */
} dwr_plan;

/* Registers a thread may plan for: __launch_bounds__ caps it at 128 (16
 * warps an SM, 2 blocks of 256), room left for what the estimate misses. */
#define DWR_REGS 112
/* Input rows a thread loads ahead by default. */
#define DWR_PF 0
/* Threads wanted at least: about two waves of 16 warps on 132 SMs, so that
 * enough loads are in flight; strips are made shorter or narrower until
 * there are (the choice with the most threads where none has). */
#define DWR_MIN_THREADS (1LL << 17)
/* A block's weights in shared memory (as the tiled kernel's). */
#define DWR_SMEM (40 * 1024)

static void dwr_shape(const kx_conv *cv, dwr_plan *p)
{
	p->L = (int)((p->RC - 1) * cv->s[2] + (cv->k[2] - 1) * cv->d[2] + 1);
	p->NI = (int)((p->R - 1) * cv->s[1] + (cv->k[1] - 1) * cv->d[1] + 1);
	p->cols = p->rows = 0;
	for (int c = 0; c < p->RC && p->L <= 64; c++)
		for (int64_t kw = 0; kw < cv->k[2]; kw++)
			p->cols |= 1ULL << (c * cv->s[2] + kw * cv->d[2]);
	for (int r = 0; r < p->R && p->NI <= 64; r++)
		for (int64_t kh = 0; kh < cv->k[1]; kh++)
			p->rows |= 1ULL << (r * cv->s[1] + kh * cv->d[1]);
	p->G = cv->C / p->VT;
	p->OWG = (cv->out[2] + p->RC - 1) / p->RC;
	p->OHG = (cv->out[1] + p->R - 1) / p->R;
	p->Q = cv->N * p->OHG * p->OWG;
}

/* A thread's registers, roughly: f32 weights, the accumulators of the
 * rows in flight, a row's converted inputs and the raw ring of PF + 1. */
static int dwr_regs(const kx_conv *cv, const dwr_plan *p)
{
	int64_t reach = (cv->k[1] - 1) * cv->d[1] + 1, live = (reach + cv->s[1] - 1) / cv->s[1];
	if (live > p->R)
		live = p->R;
	int64_t r = cv->KK * p->VT + live * p->RC * p->VT + p->L * p->VT + (p->PF + 1) * p->L * p->VT * p->esz / 4 + 24;
	return r > 4096 ? 4096 : (int)r;
}

/* A strip's instructions (a load counted 4 for L1, a conversion, a
 * multiply-add 1, an epilogue element 3, a store 4, 60 for the indices and
 * weights), over all strips, per channel: the shape with the least. */
static int64_t dwr_cost(const kx_conv *cv, const dwr_plan *p)
{
	int64_t loads = __builtin_popcountll(p->rows) * __builtin_popcountll(p->cols);
	int64_t outs = (int64_t)p->R * p->RC;
	int64_t strip = loads * (4 + p->VT) + outs * p->VT * (cv->KK + 3) + outs * 4 + 60 + cv->KK * p->VT / 4;
	return p->OHG * p->OWG * strip * 64 / p->VT;
}

/* The cheapest (VT, RC, R) whose registers fit and that makes at least
 * `least` threads; 0 when none does. */
static int dwr_pick_in(const kx_conv *cv, dwr_plan *p, int V, int64_t least)
{
	dwr_plan best = {0};
	int64_t bc = 0;
	for (int vt = V; vt >= 2; vt /= 2)
		for (int rc = 1; rc <= 4 && rc <= cv->out[2]; rc++)
			for (int r = 1; r <= 8 && r <= cv->out[1]; r++) {
				dwr_plan t = *p;
				t.VT = vt, t.RC = rc, t.R = r;
				dwr_shape(cv, &t);
				if (t.L > 64 || t.NI > 64 || dwr_regs(cv, &t) > DWR_REGS || t.Q * t.G < least)
					continue;
				int64_t c = dwr_cost(cv, &t);
				if (!best.VT || c < bc)
					best = t, bc = c;
			}
	if (best.VT)
		*p = best;
	return best.VT;
}

static int dwr_pick(const kx_conv *cv, dwr_plan *p, int V)
{
	for (int64_t least = DWR_MIN_THREADS; least >= 1; least /= 2)
		if (dwr_pick_in(cv, p, V, least))
			return 1;
	return 0;
}

/* The block: the widest slice of channel vectors up to 32 that divides G
 * and whose weights fit, 256 threads; fewer strips a block, down to a
 * warp, while the conv has fewer than 264 blocks (2 an H200 SM). */
static int dwr_pick_block(const kx_conv *cv, dwr_plan *p)
{
	p->CS = 0;
	for (int cs = 32; cs >= 1 && !p->CS; cs--)
		if (p->G % cs == 0 && cv->KK * cs * p->VT * 4 <= DWR_SMEM)
			p->CS = cs;
	if (!p->CS)
		return 0;
	p->P = 256 / p->CS;
	p->NS = p->G / p->CS;
	while (p->NS * ((p->Q + p->P - 1) / p->P) < 264 && p->CS * p->P > 32)
		p->P = (p->P + 1) / 2;
	return 1;
}

/* "v4x2h8c8p32b2s8" (any of them) over the plan: the thread's shape
 * first, then the block (its own choice for the shape unless given); an
 * error when a knob is not one or the conv cannot take it. */
static int dwr_override(kx *k, const kx_conv *cv, dwr_plan *p, int V, const char *env, const char *knobs)
{
	int kv[8] = {p->VT, p->RC, p->R, 0, 0, 0, p->SB ? p->SB : 1, p->PF};
	if (!kx_dw_knobs(knobs, "vxhcpbsf", "f", kv) || (kv[6] != 16 && kv[6] != 8 && kv[6] != 4 && kv[6] != 1) ||
	    kv[7] > 4)
		return kx_fail(k, "$KFUSE_DEPTHWISE '%s' is not rows:v<VT>x<RC>h<R>c<CS>p<P>b<MB>s<16|8|4|1>f<0..4>", env);
	p->VT = kv[0], p->RC = kv[1], p->R = kv[2], p->MB = kv[5], p->SB = kv[6] == 1 ? 0 : kv[6], p->PF = kv[7];
	bool ok = V % p->VT == 0 && p->VT >= 2 && p->RC <= 8 && p->R <= 16;
	if (ok) {
		dwr_shape(cv, p);
		ok = p->L <= 64 && p->NI <= 64 && dwr_pick_block(cv, p);
	}
	if (ok && kv[3]) {
		p->CS = kv[3], p->P = 256 / p->CS > 0 ? 256 / p->CS : 1;
		ok = p->G % p->CS == 0 && cv->KK * p->CS * p->VT * 4 <= DWR_SMEM;
		p->NS = p->G / p->CS;
	}
	if (kv[4])
		p->P = kv[4];
	if (!ok || p->CS * p->P > 1024 || p->MB > 32)
		return kx_fail(k, "$KFUSE_DEPTHWISE '%s' does not fit this conv (VT of at least 2 dividing %d; RC <= 8, "
			       "R <= 16; CS dividing C / VT, its weights in %d bytes; CS x P <= 1024; MB <= 32)",
			       env, V, DWR_SMEM);
	return 0;
}

/* Whether the rows kernel can run mm at all: 2-D (or 1-D), f32
 * accumulation, 16-byte vectors of at most 8 elements. */
static bool dwr_fits(const kx_mm *mm, int V)
{
	const kx_conv *cv = &mm->cv;
	return cv->k[0] == 1 && cv->in[0] == 1 && cv->out[0] == 1 && !strcmp(kx_mm_acc_type(mm), "float") && V >= 2 &&
	       V <= 8;
}

/* The plan: 0, 1 when this kernel does not take the conv (not forced), -1
 * on an error.  knobs: NULL (not forced) or the override's text. */
static int dwr_plan_of(kx *k, const kx_mm *mm, int V, const char *env, const char *knobs, dwr_plan *p)
{
	const kx_conv *cv = &mm->cv;
	*p = (dwr_plan){.esz = 16 / V, .SB = 16, .PF = DWR_PF};
	if (!dwr_fits(mm, V))
		return knobs ? kx_fail(k, "$KFUSE_DEPTHWISE '%s': the rows kernel takes 2-D convs accumulated in f32", env)
			     : 1;
	if (!dwr_pick(cv, p, V)) {
		if (!knobs)
			return 1;
		/* forced: the fewest registers (ptxas may spill) */
		p->VT = 2, p->RC = 1, p->R = 1;
		dwr_shape(cv, p);
	}
	if (!dwr_pick_block(cv, p))
		return knobs ? kx_fail(k, "$KFUSE_DEPTHWISE '%s': the weights do not fit shared memory", env) : 1;
	p->MB = 0;
	if (knobs && *knobs && dwr_override(k, cv, p, V, env, knobs) != 0)
		return -1;
	return 0;
}

/* The block's weights into shared memory as [tap][channel] f32 (a
 * coalesced read of the slice's run of [C, taps]; c0 in scope), then the
 * thread's into registers: wf[tap][j], its VT channels. */
static void dwr_weights(kx *k, const kx_mm *mm, const dwr_plan *p)
{
	const kx_conv *cv = &mm->cv;
	const char *it = kx_it(k);
	int CSV = p->CS * p->VT, T = p->CS * p->P;
	long long KK = (long long)cv->KK;
	kf_buf *b = &k->b;
	kx_dw_stage_weights(k, mm, "float", CSV, T);
	kf_buf_printf(b, "  const int cl = threadIdx.x %% %d * %d;\n  const %s col = c0 + cl;\n", p->CS, p->VT, it);
	const char *ct = p->VT * 4 >= 16 ? "uint4" : "uint2";
	int per = p->VT * 4 >= 16 ? 4 : 2;
	kf_buf_printf(b, "  __align__(16) float wf[%lld][%d];\n#pragma unroll\n  for (int t = 0; t < %lld; t++)\n#pragma unroll\n"
		      "    for (int h = 0; h < %d; h++) ((%s *)wf[t])[h] = ((const %s *)(kf_w + t * %d + cl))[h];\n",
		      KK, p->VT, KK, p->VT / per, ct, ct, CSV);
}

/* The thread's strip: its first output row oh0 and column ow0, image n,
 * the input's first row and column, x's base and the first output row. */
static void dwr_strip(kx *k, const kx_mm *mm, const dwr_plan *p)
{
	const kx_conv *cv = &mm->cv;
	const char *it = kx_it(k);
	kf_buf *b = &k->b;
	kf_buf_printf(b, "  const %s q = (%s)(blockIdx.x / %lldu) * %d + threadIdx.x / %d;\n  if (q >= %lldLL) return;\n", it,
		      it, (long long)p->NS, p->P, p->CS, (long long)p->Q);
	kf_buf_printf(b, "  const %s q1 = q / %lld;\n", it, (long long)p->OWG);
	kf_buf_printf(b, "  const int ow0 = (int)(q - q1 * %lld) * %d, oh0 = (int)(q1 %% %lld) * %d;\n", (long long)p->OWG,
		      p->RC, (long long)p->OHG, p->R);
	kf_buf_printf(b, "  const %s n = q1 / %lld;\n", it, (long long)p->OHG);
	kf_buf_printf(b, "  const int ih0 = oh0 * %lld - %lld, iw0 = ow0 * %lld - %lld;\n", (long long)cv->s[1],
		      (long long)cv->pb[1], (long long)cv->s[2], (long long)cv->pb[2]);
	kf_buf_printf(b, "  const %s xb = n * %lldLL + col, rb = (n * %lld + oh0) * %lld + ow0;\n", it,
		      (long long)(cv->in[1] * cv->in[2] * cv->C), (long long)cv->out[1], (long long)cv->out[2]);
}

/* The type of a thread's VT-channel load (16, 8 or 4 bytes). */
static const char *dwr_lt(const dwr_plan *p)
{
	int lb = p->VT * p->esz;
	return lb == 16 ? "uint4" : lb == 8 ? "uint2" : "unsigned";
}

/* Input row ii's raw vectors into ring slot `slot` of xr (those some
 * output reads; zeros outside the image): the loads of a row issued PF
 * rows before its multiply-adds, so each thread keeps PF + 1 rows of
 * loads in flight rather than one (the kernel is latency-bound at its 16
 * warps an SM: Nsight Compute, s12c). */
static void dwr_fetch(kx *k, const kx_mm *mm, const dwr_plan *p, const char *ii, const char *slot)
{
	const kx_conv *cv = &mm->cv;
	const char *it = kx_it(k);
	const char *lt = dwr_lt(p);
	const char *zero = !strcmp(lt, "uint4")   ? "make_uint4(0, 0, 0, 0)"
			   : !strcmp(lt, "uint2") ? "make_uint2(0, 0)"
						  : "0u";
	kf_buf *b = &k->b;
	kf_buf_printf(b, "    {\n      const int ihf = ih0 + %s;\n      const bool hin = (unsigned)ihf < %lldu;\n", ii,
		      (long long)cv->in[1]);
	kf_buf_printf(b, "#pragma unroll\n      for (int c = 0; c < %d; c++) {\n", p->L);
	if (p->cols != (p->L == 64 ? ~0ULL : (1ULL << p->L) - 1)) /* strides past the taps' reach skip vectors */
		kf_buf_printf(b, "        if (!((0x%llxULL >> c) & 1)) continue;\n", (unsigned long long)p->cols);
	kf_buf_printf(b, "        const int iw = iw0 + c;\n");
	kf_buf_printf(b, "        xr[%s][c] = hin && (unsigned)iw < %lldu ? __ldg((const %s *)(p%d + xb + ((%s)ihf * %lld + iw) * "
		      "%lld)) : %s;\n      }\n    }\n", slot, (long long)cv->in[2], lt, mm->a.param, it, (long long)cv->in[2],
		      (long long)cv->C, zero);
}

/* Input row i converted once into xf[c][j]: its vector c read as `src`
 * (an expression of c and i, of the load type): the strip's ring slot, or
 * the band in shared memory. */
static void dwr_load_row(kx *k, const kx_mm *mm, const dwr_plan *p, const char *src)
{
	kf_buf *b = &k->b;
	kf_buf_printf(b, "    float xf[%d][%d];\n#pragma unroll\n    for (int c = 0; c < %d; c++) {\n", p->L, p->VT, p->L);
	if (p->cols != (p->L == 64 ? ~0ULL : (1ULL << p->L) - 1))
		kf_buf_printf(b, "      if (!((0x%llxULL >> c) & 1)) continue;\n", (unsigned long long)p->cols);
	kf_buf_printf(b, "      __align__(16) %s xv[%d];\n      *(%s *)xv = %s;\n", kx_st(mm->a.st), p->VT, dwr_lt(p), src);
	kf_buf_printf(b, "#pragma unroll\n      for (int j = 0; j < %d; j++) xf[c][j] = ", p->VT);
	kx_load(b, mm->a.st, "xv[j]");
	kf_buf_puts(b, ";\n    }\n");
}

/* Row i into every output row r that reads it (tap row e / d), then the
 * output rows whose last input row i is, through the epilogue. */
static void dwr_accumulate(kx *k, const kx_mm *mm, const dwr_plan *p)
{
	const kx_conv *cv = &mm->cv;
	long long s1 = (long long)cv->s[1], d1 = (long long)cv->d[1], last = (long long)((cv->k[1] - 1) * cv->d[1]);
	kf_buf *b = &k->b;
	kf_buf_printf(b, "#pragma unroll\n    for (int r = 0; r < %d; r++) {\n      const int e = i - r * %lld;\n", p->R, s1);
	kf_buf_printf(b, "      if (e < 0 || e > %lld || e %% %lld) continue;\n", last, d1);
	kf_buf_printf(b, "#pragma unroll\n      for (int kw = 0; kw < %lld; kw++)\n#pragma unroll\n"
		      "        for (int c = 0; c < %d; c++)\n#pragma unroll\n          for (int j = 0; j < %d; j++)\n"
		      "            acc[r][c][j] += xf[c * %lld + kw * %lld][j] * wf[e / %lld * %lld + kw][j];\n    }\n",
		      (long long)cv->k[2], p->RC, p->VT, (long long)cv->s[2], (long long)cv->d[2], d1, (long long)cv->k[2]);
	kf_buf_printf(b, "#pragma unroll\n    for (int r = 0; r < %d; r++) {\n      if (i != r * %lld + %lld) continue;\n",
		      p->R, s1, last);
	if (cv->out[1] % p->R)
		kf_buf_printf(b, "      if (oh0 + r >= %lld) continue;\n", (long long)cv->out[1]);
	kf_buf_printf(b, "#pragma unroll\n      for (int c = 0; c < %d; c++) {\n", p->RC);
	if (cv->out[2] % p->RC)
		kf_buf_printf(b, "        if (ow0 + c >= %lld) continue;\n", (long long)cv->out[2]);
	char row[64];
	snprintf(row, sizeof row, "rb + r * %lld + c", (long long)cv->out[2]);
	kx_dw_store_vec(k, mm, b, p->SB, p->VT, row, "acc[r][c]");
	kf_buf_puts(b, "      }\n    }\n");
}

/* ---- band mode ------------------------------------------------------------
 * The same walk down R output rows, but a block's threads share one band
 * of input: R rows x every output column x CSV channels a block, whose NI
 * input rows x LW columns (zeros in the padding) the block copies into
 * shared memory with cp.async (16 bytes a copy, all of them issued before
 * the first wait), then each thread walks its column groups' rows reading
 * the band.  Why: the rows kernel keeps at most a few rows of loads in
 * flight per thread, at 16 warps an SM (registers), and is latency-bound
 * (Nsight Compute, s12c: DRAM at 26-30%); here every byte of a block's band
 * is in flight at once, tens of KiB an SM, whatever the registers.
 * $KFUSE_DEPTHWISE "band" or "band:" v<VT>x<RC>h<R>c<CSV>b<MB>d<0|1>g<G>s<ST>
 * (channels, columns, rows a thread; channels a block; blocks an SM; d1:
 * the double-buffered walk, dwb_walk, with G blocks a slice; ST stages of
 * the band's copy, dwb_load).
 * requires: CSV a multiple of V (whole 16-byte copies). */

/* Shared memory a band's plan may take (three or four blocks an H200 SM
 * of 228 KiB): 64 KiB for 5x5 kernels, whose 4 halo rows want tall bands
 * (EfficientNet-B0's 144 channels of 56 x 56 at stride 2, s13a: 4 rows in
 * 62 KiB 0.0278 ms, 2 rows 0.0318), 48 KiB for 3x3 (32 channels of 112 x
 * 112: 4 rows in 44 KiB 0.0246 ms, 6 rows in 58 KiB 0.0271). */
#define DWB_SMEM(cv) ((cv)->KK >= 25 ? 64 * 1024 : 48 * 1024)
/* Stages of a band's copy by default. */
#define DWB_ST 1

static void dwb_shape(const kx_conv *cv, dwr_plan *p, int csv)
{
	dwr_shape(cv, p);
	p->CS = csv / p->VT;
	p->NS = cv->C / csv;
	p->LW = (int)((p->OWG * p->RC - 1) * cv->s[2] + (cv->k[2] - 1) * cv->d[2] + 1);
	p->BB = p->NI * p->LW * csv * p->esz;
	/* threads: whole column groups of the slice, at most 256, as few as
	 * give every thread the same number of groups */
	int per = (int)((p->OWG + 256 / p->CS - 1) / (256 / p->CS));
	p->P = (int)((p->OWG + per - 1) / per);
}

/* Whether a block's threads are whole warps. */
static bool dwb_whole_warps(const dwr_plan *p)
{
	return p->CS * p->P % 32 == 0;
}

/* The plan: one column a thread, 4 channels (8-byte loads of f16) or 2
 * where the f32 weights would not fit the registers (5x5); the widest
 * slice up to 64 channels dividing C whose one row fits and whose block is
 * whole warps (else the widest that fits); then, of the row counts up to 8
 * whose band fits DWB_SMEM, the one adding up and loading the fewest rows
 * (bands x (R + NI): rows past the image's bottom are computed too).
 * Why (Nsight Compute, s20d, EfficientNet-B0's 672 channels of 14 x 14):
 * 56-channel slices made blocks of 196 threads, a warp of 4 in every 7,
 * and 8-row bands computed 16 rows of 14 (7 rows: 14). */
static int dwb_pick(const kx_conv *cv, dwr_plan *p, int V)
{
	p->VT = V >= 4 ? 4 : V, p->RC = 1, p->R = 8 < cv->out[1] ? 8 : (int)cv->out[1];
	dwr_shape(cv, p);
	if (p->VT > 2 && dwr_regs(cv, p) > DWR_REGS)
		p->VT = 2;
	p->R = 1;
	int csv = 0, widest = 0;
	for (int c = 64 / V * V; c >= V && !csv; c -= V) {
		if (cv->C % c)
			continue;
		dwb_shape(cv, p, c);
		if (p->BB > DWB_SMEM(cv) || cv->KK * c * 4 > DWR_SMEM)
			continue;
		if (!widest)
			widest = c;
		if (dwb_whole_warps(p))
			csv = c;
	}
	if (!csv)
		csv = widest;
	if (!csv)
		return 0;
	dwb_shape(cv, p, csv);
	int64_t least = -1;
	for (int r = 8; r >= 1; r--) {
		dwr_plan t = *p;
		t.R = r;
		dwb_shape(cv, &t, csv);
		if (r > cv->out[1] || t.BB > DWB_SMEM(cv) || t.NI > 64)
			continue;
		int64_t cost = (cv->out[1] + r - 1) / r * (r + t.NI);
		if (least < 0 || cost < least)
			*p = t, least = cost;
	}
	return 1;
}

/* Blocks an SM the band kernel's plan asks for (__launch_bounds__; 0:
 * as the block's size gives) at one column a thread.  5x5: three (80
 * registers, no spill): at two (86 registers) a block's copy phase left
 * the SM idle (Nsight Compute, s14c: 21% occupancy, DRAM at 8-11%);
 * 1.01-1.21x at all six of EfficientNet-B0's 5x5 layers (s14d).  Four
 * (72 registers at 224 threads, no spill) where that was faster still on
 * the H200 (s20f, s20h): 5x5 at stride 1 on images of 14 rows or more in
 * blocks of whole warps (1.04-1.07x; at 7 x 7, or 200 threads, 0.80-0.91x),
 * and 3x3 at stride 2, which takes the band kernel at 4 blocks on inputs
 * of at most 28 x 28 (dw_band_default).  Not under d1: its walk needs a
 * register more (a spill at 80), and its copies overlap its arithmetic
 * within a block. */
static int dwb_blocks(const kx_conv *cv, const dwr_plan *p)
{
	bool stride1 = cv->s[1] == 1 && cv->s[2] == 1;
	if (cv->KK >= 25)
		return stride1 && cv->out[1] >= 14 && dwb_whole_warps(p) ? 4 : 3;
	return stride1 ? 0 : 4;
}

/* "v4x1h4c32b2" (any of them) over the plan; an error when one is not a
 * knob or the conv cannot take it. */
static int dwb_override(kx *k, const kx_conv *cv, dwr_plan *p, int V, const char *env, const char *knobs)
{
	int kv[8] = {p->VT, p->RC, p->R, p->CS * p->VT, p->MB, p->DB, p->WG, p->ST};
	if (!kx_dw_knobs(knobs, "vxhcbdgs", "dg", kv))
		return kx_fail(k, "$KFUSE_DEPTHWISE '%s' is not band:v<VT>x<RC>h<R>c<CSV>b<MB>d<0|1>g<G>s<ST>", env);
	p->VT = kv[0], p->RC = kv[1], p->R = kv[2], p->MB = kv[4], p->DB = kv[5], p->WG = kv[6], p->ST = kv[7];
	bool ok = p->VT >= 2 && V % p->VT == 0 && p->RC <= 8 && p->R <= 16 && kv[3] % V == 0 && cv->C % kv[3] == 0 &&
		  p->MB <= 32 && p->DB <= 1 && p->ST <= 8 && (p->ST == 1 || !p->DB);
	if (ok) {
		dwb_shape(cv, p, kv[3]);
		ok = p->L <= 64 && p->NI <= 64 && p->BB * (p->DB + 1) <= 200 * 1024 && cv->KK * kv[3] * 4 <= DWR_SMEM;
	}
	if (!ok)
		return kx_fail(k, "$KFUSE_DEPTHWISE '%s' does not fit this conv (VT of at least 2 dividing %d; RC <= 8, "
			       "R <= 16; CSV a multiple of %d dividing the channels; the band (two with d1) in 200 KiB; "
			       "at most 8 stages, one under d1)", env, V, V);
	return 0;
}

/* kf_band: the block's dynamic shared memory, of x's storage type. */
static void dwb_smem(kx *k, const kx_mm *mm)
{
	const char *st = kx_st(mm->a.st);
	kf_buf_printf(&k->b, "  extern __shared__ __align__(16) unsigned char kf_smem[];\n  %s *const kf_band = (%s *)kf_smem;\n",
		      st, st);
}

/* Rows [r0, r1) of band u of this block's slice (image n, output rows
 * oh0..) copied into `dst` ([NI][LW][CSV]): its input rows and columns
 * from ih0, iw0, zeros in the padding; the copies issued, not waited for.
 * With u NULL, the n and oh0 in scope place the band.  `ind` indents it. */
static void dwb_copy(kx *k, const kx_mm *mm, const dwr_plan *p, const char *u, const char *dst, const char *ind, int r0,
		     int r1)
{
	const kx_conv *cv = &mm->cv;
	const char *it = kx_it(k);
	int csv = p->CS * p->VT, cvv = csv / (16 / p->esz), T = p->CS * p->P;
	kf_buf *b = &k->b;
	kf_buf_printf(b, "%s{\n", ind);
	if (u)
		kf_buf_printf(b, "%s  const %s n = (%s) / %lld;\n%s  const int oh0 = (int)((%s) - n * %lld) * %d;\n", ind, it, u,
			      (long long)p->OHG, ind, u, (long long)p->OHG, p->R);
	kf_buf_printf(b, "%s  const int ih0 = oh0 * %lld - %lld, iw0 = -%lld;\n", ind, (long long)cv->s[1],
		      (long long)cv->pb[1], (long long)cv->pb[2]);
	kf_buf_printf(b, "%s  for (int e = threadIdx.x + %d; e < %d; e += %d) {\n", ind, r0 * p->LW * cvv, r1 * p->LW * cvv, T);
	kf_buf_printf(b, "%s    const int r = e / %d, m = e - r * %d, cw = m / %d, v = m - cw * %d;\n", ind, p->LW * cvv,
		      p->LW * cvv, cvv, cvv);
	kf_buf_printf(b, "%s    const int ih = ih0 + r, iw = iw0 + cw;\n%s    const bool ok = (unsigned)ih < %lldu && (unsigned)iw < %lldu;\n",
		      ind, ind, (long long)cv->in[1], (long long)cv->in[2]);
	kf_buf_printf(b, "%s    kf_cp16(%s + e * %d, p%d + (ok ? ((n * %lld + ih) * %lld + iw) * %lld + c0 + v * %d : 0), ok);\n%s  }\n%s}\n",
		      ind, dst, 16 / p->esz, mm->a.param, (long long)cv->in[1], (long long)cv->in[2], (long long)cv->C,
		      16 / p->esz, ind, ind);
}

/* The first input row of stage j of ST (the last: NI), stages of equal
 * rows but the last. */
static int dwb_stage_row(const dwr_plan *p, int j)
{
	int rp = (p->NI + p->ST - 1) / p->ST, r = j * rp;
	return r < p->NI ? r : p->NI;
}

/* The band of block blockIdx.x (u, image n, output rows oh0..) copied
 * into kf_band in ST stages of rows, one commit group each, not waited for
 * (dwb_stage_wait waits for each as the walk reaches it): the copy is
 * issued before the weights are staged, so their round trip to memory
 * overlaps it, and a thread adds up a stage's rows while the next ones
 * arrive. */
static void dwb_load(kx *k, const kx_mm *mm, const dwr_plan *p)
{
	const char *it = kx_it(k);
	kf_buf *b = &k->b;
	kf_buf_printf(b, "  const %s u = (%s)(blockIdx.x / %lldu), n = u / %lld;\n", it, it, (long long)p->NS, (long long)p->OHG);
	kf_buf_printf(b, "  const int oh0 = (int)(u - n * %lld) * %d;\n", (long long)p->OHG, p->R);
	dwb_smem(k, mm);
	for (int j = 0; j < p->ST; j++) {
		dwb_copy(k, mm, p, NULL, "kf_band", "  ", dwb_stage_row(p, j), dwb_stage_row(p, j + 1));
		kf_buf_puts(b, "  kf_cp_commit();\n");
	}
}

/* At the top of the walk's row i: in a thread's first column group (which
 * every thread has), the wait for the stage that row i begins, then a
 * barrier (the stage's rows were copied by all the block's threads). */
static void dwb_stage_wait(kx *k, const dwr_plan *p)
{
	kf_buf *b = &k->b;
	kf_buf_puts(b, "      if (g == g0 && (");
	for (int j = 0; j < p->ST; j++)
		kf_buf_printf(b, "%si == %d", j ? " || " : "", dwb_stage_row(p, j));
	kf_buf_puts(b, ")) {\n        ");
	for (int j = 0; j < p->ST; j++)
		kf_buf_printf(b, "%sif (i == %d) kf_cp_wait<%d>();\n", j ? "        else " : "", dwb_stage_row(p, j),
			      p->ST - 1 - j);
	kf_buf_puts(b, "        __syncthreads();\n      }\n");
}

/* d1, the double-buffered walk: the grid is G blocks a slice (the
 * slice, and so the weights, stay a block's); block blockIdx.x takes its
 * slice's bands u = blockIdx.x / NS, + G, ..., and copies band u + G into
 * the other buffer while it adds up band u, so that a block's copies and
 * its arithmetic overlap rather than alternate (Nsight Compute, s14c: an
 * SM half idle while its blocks copy).  Opens the loop over u, in which
 * `band` is the buffer to read, n and oh0 the band's place; the caller
 * closes it (a barrier, then the brace). */
static void dwb_walk(kx *k, const kx_mm *mm, const dwr_plan *p, int64_t nb)
{
	const char *it = kx_it(k), *st = kx_st(mm->a.st);
	int be = p->BB / p->esz; /* a buffer's elements */
	kf_buf *b = &k->b;
	dwb_smem(k, mm);
	kf_buf_printf(b, "  const %s G = (%s)(gridDim.x / %lldu);\n  %s u = (%s)(blockIdx.x / %lldu);\n", it, it,
		      (long long)p->NS, it, it, (long long)p->NS);
	kf_buf_printf(b, "  if (u < %lldLL)\n", (long long)nb);
	dwb_copy(k, mm, p, "u", "kf_band", "  ", 0, p->NI);
	kf_buf_printf(b, "  kf_cp_commit();\n  for (int t = 0; u < %lldLL; u += G, t ^= 1) {\n", (long long)nb);
	kf_buf_printf(b, "    if (u + G < %lldLL)\n", (long long)nb);
	char dst[64];
	snprintf(dst, sizeof dst, "kf_band + (t ^ 1) * %d", be);
	dwb_copy(k, mm, p, "u + G", dst, "    ", 0, p->NI);
	/* this band's group is done when at most the next one's is pending */
	kf_buf_puts(b, "    kf_cp_commit();\n    kf_cp_wait<1>();\n    __syncthreads();\n");
	kf_buf_printf(b, "    const %s *const band = kf_band + t * %d;\n", st, be);
	kf_buf_printf(b, "    const %s n = u / %lld;\n    const int oh0 = (int)(u - n * %lld) * %d;\n", it, (long long)p->OHG,
		      (long long)p->OHG, p->R);
}

/* The grid of the walk: G blocks a slice (WG, or about `mb` blocks on
 * each of the H200's 132 SMs), at most one a band. */
static int64_t dwb_walk_grid(const dwr_plan *p, int64_t nb, int mb)
{
	int64_t g = p->WG ? p->WG : (132LL * mb + p->NS - 1) / p->NS;
	return (g < nb ? g : nb) * p->NS;
}

/* The band kernel: its plan (or the override's), the weights, the band,
 * then each thread's column groups walked down the band. */
int kx_dw_emit_band(kx *k, kx_mm *mm, int V, const char *env, const char *knobs)
{
	const kx_conv *cv = &mm->cv;
	const char *it = kx_it(k);
	dwr_plan p = {.esz = 16 / V, .SB = 16, .ST = DWB_ST};
	if (!dwr_fits(mm, V))
		return knobs ? kx_fail(k, "$KFUSE_DEPTHWISE '%s': the band kernel takes 2-D convs accumulated in f32", env) : 1;
	if (!dwb_pick(cv, &p, V)) {
		if (!knobs)
			return 1;
		dwb_shape(cv, &p, V); /* forced: the narrowest slice */
	}
	if (knobs && *knobs && dwb_override(k, cv, &p, V, env, knobs) != 0)
		return -1;
	if (p.BB > 200 * 1024)
		return knobs ? kx_fail(k, "$KFUSE_DEPTHWISE '%s': no band of this conv fits shared memory", env) : 1;
	/* 5x5 at one column a thread: three blocks an SM (80 registers, no
	 * spill): at two (86 registers) a block's copy phase left the SM idle
	 * (Nsight Compute, s14c: 21% occupancy, DRAM at 8-11%); 1.01-1.21x at
	 * all six of EfficientNet-B0's 5x5 layers (s14d).  Not under d1: its
	 * walk needs a register more (a spill at 80), and its copies overlap
	 * its arithmetic within a block */
	if (!p.MB && p.RC == 1 && !p.DB)
		p.MB = dwb_blocks(cv, &p);
	int T = p.CS * p.P;
	int64_t nb = cv->N * p.OHG; /* bands a slice */
	k->k->block = T;
	k->k->per_sm = -1;
	k->k->smem = p.BB * (p.DB + 1);
	k->k->min_blocks = p.MB ? p.MB : T <= 512 ? 512 / T : 1;
	if (p.DB) { /* resident blocks: registers (min_blocks) or shared memory */
		int64_t by_smem = (227 * 1024) / (k->k->smem + cv->KK * p.CS * p.VT * 4 + 1024);
		int mb = (int)(by_smem < k->k->min_blocks ? by_smem : k->k->min_blocks);
		k->k->units = dwb_walk_grid(&p, nb, mb > 1 ? mb : 1);
	} else
		k->k->units = p.NS * nb;
	if (k->k->units >= (1LL << 31))
		return kx_fail(k, "a conv with more than 2^31 blocks of outputs");
	int sb = kx_dw_store_kind(k, mm, p.VT);
	if (p.SB > sb)
		p.SB = sb;
	kf_buf *b = &k->b;
	kf_buf_puts(&k->decl, kx_mm_helpers());
	kf_buf_printf(b, "  /* depthwise band: %d rows x %lld columns x %d channels a block (%d x %d inputs in shared memory), "
		      "%d channels x %d columns a thread, %d threads */\n", p.R, (long long)cv->out[2], p.CS * p.VT, p.NI, p.LW,
		      p.VT, p.RC, T);
	kx_dw_slice_c0(k, p.CS * p.VT, p.NS);
	if (p.DB) {
		dwr_weights(k, mm, &p);
		dwb_walk(k, mm, &p, nb);
	} else {
		dwb_load(k, mm, &p);
		dwr_weights(k, mm, &p);
		kf_buf_printf(b, "  const int g0 = threadIdx.x / %d;\n", p.CS);
	}
	kf_buf_printf(b, "  for (int g = threadIdx.x / %d; g < %lld; g += %d) {\n", p.CS, (long long)p.OWG, p.P);
	kf_buf_printf(b, "    const int ow0 = g * %d;\n    const %s rb = (n * %lld + oh0) * %lld + ow0;\n", p.RC, it,
		      (long long)cv->out[1], (long long)cv->out[2]);
	kf_buf_printf(b, "    float acc[%d][%d][%d];\n#pragma unroll\n    for (int r = 0; r < %d; r++)\n#pragma unroll\n"
		      "      for (int c = 0; c < %d; c++)\n#pragma unroll\n        for (int j = 0; j < %d; j++) acc[r][c][j] = 0;\n",
		      p.R, p.RC, p.VT, p.R, p.RC, p.VT);
	kf_buf_printf(b, "#pragma unroll\n    for (int i = 0; i < %d; i++) {\n", p.NI);
	if (!p.DB)
		dwb_stage_wait(k, &p);
	if (p.rows != (p.NI == 64 ? ~0ULL : (1ULL << p.NI) - 1))
		kf_buf_printf(b, "      if (!((0x%llxULL >> i) & 1)) continue;\n", (unsigned long long)p.rows);
	char src[160];
	snprintf(src, sizeof src, "*(const %s *)(%s + (i * %d + ow0 * %lld + c) * %d + cl)", dwr_lt(&p),
		 p.DB ? "band" : "kf_band", p.LW, (long long)cv->s[2], p.CS * p.VT);
	dwr_load_row(k, mm, &p, src);
	dwr_accumulate(k, mm, &p);
	kf_buf_puts(b, "    }\n  }\n");
	/* d1: no thread refills this buffer (next round's copy) while another reads it */
	if (p.DB)
		kf_buf_puts(b, "  __syncthreads();\n  }\n");
	return 0;
}

int kx_dw_emit_rows(kx *k, kx_mm *mm, int V, const char *env, const char *knobs)
{
	dwr_plan p;
	int rc = dwr_plan_of(k, mm, V, env, knobs, &p);
	if (rc != 0)
		return rc;
	int T = p.CS * p.P;
	k->k->block = T;
	k->k->units = p.NS * ((p.Q + p.P - 1) / p.P);
	k->k->per_sm = -1;
	/* 16 warps an SM: a cap of 128 registers, which the plan stays under */
	k->k->min_blocks = p.MB ? p.MB : T <= 512 ? 512 / T : 1;
	if (k->k->units >= (1LL << 31))
		return kx_fail(k, "a conv with more than 2^31 blocks of outputs");
	int sb = kx_dw_store_kind(k, mm, p.VT);
	if (p.SB > sb) /* the widest the outputs allow, or the override's */
		p.SB = sb;
	kf_buf *b = &k->b;
	kf_buf_printf(b, "  /* depthwise rows: %d channels x %d columns x %d rows a thread, %d x %d a block */\n", p.VT, p.RC,
		      p.R, p.CS, p.P);
	kx_dw_slice_c0(k, p.CS * p.VT, p.NS);
	dwr_weights(k, mm, &p);
	dwr_strip(k, mm, &p);
	kf_buf_printf(b, "  float acc[%d][%d][%d];\n#pragma unroll\n  for (int r = 0; r < %d; r++)\n#pragma unroll\n"
		      "    for (int c = 0; c < %d; c++)\n#pragma unroll\n      for (int j = 0; j < %d; j++) acc[r][c][j] = 0;\n",
		      p.R, p.RC, p.VT, p.R, p.RC, p.VT);
	/* the raw rows in flight: a ring of PF + 1, the first PF loaded ahead */
	bool skip = p.rows != (p.NI == 64 ? ~0ULL : (1ULL << p.NI) - 1);
	kf_buf_printf(b, "  %s xr[%d][%d];\n", dwr_lt(&p), p.PF + 1, p.L);
	kf_buf_printf(b, "#pragma unroll\n  for (int i = 0; i < %d; i++) {\n", p.PF < p.NI ? p.PF : p.NI);
	if (skip)
		kf_buf_printf(b, "    if (!((0x%llxULL >> i) & 1)) continue;\n", (unsigned long long)p.rows);
	dwr_fetch(k, mm, &p, "i", "i");
	kf_buf_printf(b, "  }\n#pragma unroll\n  for (int i = 0; i < %d; i++) {\n", p.NI);
	kf_buf_printf(b, "    if (i + %d < %d", p.PF, p.NI);
	if (skip)
		kf_buf_printf(b, " && ((0x%llxULL >> (i + %d)) & 1)", (unsigned long long)p.rows, p.PF);
	kf_buf_puts(b, ") {\n");
	char ii[32], sl[32];
	snprintf(ii, sizeof ii, "(i + %d)", p.PF);
	snprintf(sl, sizeof sl, "(i + %d) %% %d", p.PF, p.PF + 1);
	dwr_fetch(k, mm, &p, ii, sl);
	kf_buf_puts(b, "    }\n");
	if (skip)
		kf_buf_printf(b, "    if (!((0x%llxULL >> i) & 1)) continue;\n", (unsigned long long)p.rows);
	snprintf(sl, sizeof sl, "xr[i %% %d][c]", p.PF + 1);
	dwr_load_row(k, mm, &p, sl);
	dwr_accumulate(k, mm, &p);
	kf_buf_puts(b, "  }\n");
	return 0;
}
