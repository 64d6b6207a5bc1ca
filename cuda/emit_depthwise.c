/* emit_depthwise.c: channels-last depthwise convs (one input channel per
 * output channel) whose channels come in whole 16-byte vectors, four
 * kernels:
 *
 * - the tiled kernel: weights in shared memory, a thread a tile of
 *   outputs along W of one channel vector; for convs of many outputs;
 * - the vector kernel: a thread one channel vector of one output position,
 *   weights read from global memory (L1 keeps them); for small convs;
 * - the rows kernel (emit_depthwise_rows.c): a thread walks down a strip
 *   of output rows, its weights in registers, each input row loaded once;
 *   written to take the tiled kernel's place on 2-D kernels up to 5x5,
 *   which the tiled one runs bound by L1 (below 50% of copy bandwidth);
 * - the band kernel (emit_depthwise_rows.c's band mode): the rows
 *   kernel's walk over a band of input rows a block copies into shared
 *   memory with cp.async, for more bytes in flight than registers allow.
 *
 * Why, measured on the H200 (bench/results/2026-12-02-gpu-s5a-conv-layers.txt
 * and -s5d-conv-layers.txt; conv + bias + ReLU, f16): at batch 32 the tiled
 * kernel is 1.5-4x faster than the vector one (ConvNeXt-T's 7x7 of 192
 * channels at 28x28: 0.058 against 0.238 ms), at batch 1 (at most 401k
 * outputs in MobileNetV2 and ConvNeXt-T) the vector kernel is as fast or
 * up to 1.6x faster (the same layer: 0.019 against 0.030 ms): there the
 * tiled kernel's weight copy and barrier are not paid back over enough
 * outputs.  Outputs of 2^19 or more (every batch-32 layer of those models,
 * no batch-1 one) take the band kernel at stride 1 and under 5x5 kernels
 * (dw_band_default), the Toeplitz tensor-core kernel past 5x5 in f16 and
 * bf16 (dw_toep_default), the rows kernel on small inputs
 * (dw_rows_default), else the tiled one: each where it was measured
 * fastest.
 *
 * $KFUSE_DEPTHWISE forces one: "vector"; "rows" or "rows:<knobs>", "band"
 * or "band:<knobs>" (see emit_depthwise_rows.c), "toep" or "toep:<knobs>"
 * (emit_depthwise_toep.c); anything else the tiled kernel, with
 * "r<R>c<CS>p<P>t<TR>b<MB>s<SB>" overrides of its choices (emit_tiled's,
 * below; set but empty: its own).
 *
 * requires: the conv's operands read as stored (no prologue), channels a
 * multiple of V; keeps: the epilogue calls of the matmul kernels.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "emit_mm_int.h"

/* How a thread stores its V outputs of one position: 2 V bytes (one 16-
 * or 8-byte store of the epilogue's staged pairs, kx_mm_epis: the outputs
 * 2 bytes wide and V = 8 or 4), 4 (pairs, epi2) or 0 (each element
 * alone).  A warp's threads own adjacent channel vectors, so wide stores
 * are whole sectors; 4-byte pairs from V = 8 wrote each 32-byte sector in
 * four partial writes (four times the L2's store transactions). */
int kx_dw_store_kind(kx *k, const kx_mm *mm, int V)
{
	bool pair = kx_mm_epilogue2(k, mm) == 0;
	if (pair && (V == 8 || V == 4) && kx_mm_epis_fits(k) && kx_mm_epilogue_s(k, mm, true) == 0)
		return 2 * V;
	return pair ? 4 : 0;
}

void kx_dw_store_vec(kx *k, const kx_mm *mm, kf_buf *b, int sb, int V, const char *row, const char *a)
{
	bool wide = sb == 16 || sb == 8;
	if (wide) {
		const char *ty = sb == 16 ? "uint4" : "uint2";
		kf_buf_printf(b, "{\n  const %s voff = (%s) * ", kx_it(k), row);
		kx_mm_dim(k, b, mm, 'N');
		kf_buf_printf(b, " + col;\n  if (!((unsigned long long)(o0 + voff) & %d)) {\n    %s kv;\n", sb - 1, ty);
		for (int j = 0; j < V; j += 2) {
			kf_buf_printf(b, "    kv.%c = ", "xyzw"[j / 2]);
			kx_mm_epis_call(k, b);
			kf_buf_printf(b, "0, %s, col + %d, %s[%d], %s[%d]);\n", row, j, a, j, a, j + 1);
		}
		kf_buf_printf(b, "    *(%s *)(o0 + voff) = kv;\n  } else\n", ty);
	}
	kf_buf_printf(b, "#pragma unroll\n  for (int j = 0; j < %d; j += %d)\n    ", V, sb ? 2 : 1);
	if (sb) {
		kx_mm_epi2_call(k, b);
		kf_buf_printf(b, "0, %s, col + j, %s[j], %s[j + 1]);\n", row, a, a);
	} else {
		kx_mm_epi_call(k, b);
		kf_buf_printf(b, "0, %s, col + j, %s[j]);\n", row, a);
	}
	if (wide)
		kf_buf_puts(b, "}\n");
}

/* A depthwise conv channels-last (one input channel per output channel)
 * whose channels come in whole 16-byte vectors: a thread computes V
 * consecutive channels of one output position, each tap one vector load
 * (the taps' re-reads hit L1), the weights ([C, K..]) scalar loads that
 * L1 keeps; f16/bf16 results stored two at a time.  Memory-bound. */
static int emit_vector(kx *k, kx_mm *mm, int V)
{
	const kx_conv *cv = &mm->cv;
	const char *it = kx_it(k), *acc = kx_mm_acc_type(mm), *st = kx_st(mm->a.st);
	int64_t groups = cv->C / V;
	kf_buf *b = &k->b;
	int sb = kx_dw_store_kind(k, mm, V);
	if (kx_conv_thread_grid(k, mm->M * groups, "conv") != 0)
		return -1;
	kf_buf_printf(b, "  const %s col = idx %% %lld * %d, row = idx / %lld;\n", it, (long long)groups, V,
		      (long long)groups);
	kx_conv_split_row(b, cv, it, "row");
	kf_buf_printf(b, "  %s acc[%d];\n#pragma unroll\n  for (int j = 0; j < %d; j++) acc[j] = 0;\n", acc, V, V);
	kx_conv_open_taps(b, cv);
	kf_buf_printf(b, "    const %s xb = (((n * %lld + id) * %lld + ih) * %lld + iw) * %lld + col;\n", it,
		      (long long)cv->in[0], (long long)cv->in[1], (long long)cv->in[2], (long long)cv->C);
	kf_buf_printf(b, "    const int tap = (kd * %lld + kh) * %lld + kw;\n", (long long)cv->k[1], (long long)cv->k[2]);
	kf_buf_printf(b, "    __align__(16) %s xv[%d];\n    *(uint4 *)xv = __ldg((const uint4 *)(p%d + xb));\n", st, V,
		      mm->a.param);
	kf_buf_printf(b, "#pragma unroll\n    for (int j = 0; j < %d; j++)\n      acc[j] += ", V);
	kx_load(b, mm->a.st, "xv[j]");
	kf_buf_puts(b, " * ");
	kx_load(b, mm->b.st, "p%d[(col + j) * %lld + tap]", mm->b.param, (long long)cv->KK);
	kf_buf_puts(b, ";\n  }}}\n");
	kx_dw_store_vec(k, mm, b, sb, V, "row", "acc");
	return 0;
}


/* A depthwise conv channels-last (one input channel per output channel)
 * whose channels come in whole 16-byte vectors of V.  Memory-bound at 3x3,
 * bound by its multiply-adds at 7x7.  A block owns a slice of CS channel
 * vectors and P x TR tiles of R consecutive outputs along W; a thread
 * computes one tile of one channel vector, TR times over:
 * - the slice's weights ([C, taps] in global memory, a contiguous run) are
 *   copied once per block into shared memory as [tap][channel] in the
 *   accumulator's type, so that a tap's V weights are one or two 16-byte
 *   shared loads, not V scalar global loads, and are converted only once;
 * - per input row (kd, kh) a thread loads the L input vectors its R
 *   outputs read once into registers (zeros in the padding), converts
 *   them once, and uses each for every (kw, r) that reads it: a 3x3
 *   stride-1 tile of 4 loads and converts 6 vectors a row, not 12;
 * - threads adjacent in a warp take adjacent channel vectors, then
 *   adjacent tiles: a warp's loads are whole runs of channels;
 * - every loop has compile-time bounds and is unrolled; the row's end is
 *   the only run-time guard of the outputs (a tile's outputs past OW
 *   compute on in-bounds or zero inputs and store nothing).
 * The epilogue is the matmul kernels' (pairs where the outputs are 2 bytes
 * wide), called as before with (row, channel). */
typedef struct dw_plan {
	int V, asz, R, CS, P, TR, L;
	int MB;                /* __launch_bounds__'s blocks per SM; 0: DW_WARPS' worth */
	int SB;                /* bytes a thread stores at once: 16 (staged), 4 (pairs) or the element's */
	uint64_t used;         /* bit i: a row's input vector i is read by some (kw, r) */
	int64_t G, NS, OWG, Q; /* channel vectors, slices of CS, tiles per output row, tiles per channel vector */
} dw_plan;

/* A block's weights: under the 48 KiB of static shared memory, and small
 * enough that 5 blocks fit an H200 SM's 228 KiB. */
#define DW_SMEM (40 * 1024)
/* Warps an SM should hold, through __launch_bounds__'s blocks per SM (a
 * cap of 65536 / (32 x warps) registers a thread), and the 4-byte
 * registers a tile's converted inputs and accumulators may then take (room
 * left for indices and weights: nothing spills, checked with ptxas on
 * MobileNetV2's and ConvNeXt-T's layers).  Up to 3x3 taps the kernel is
 * memory-bound (a multiply-add or two per byte moved): 24 warps, 85
 * registers, for more loads in flight; larger kernels are bound by their
 * multiply-adds: 16 warps, 128 registers, for larger tiles (fewer loads
 * and conversions an output). */
#define DW_WARPS(cv) ((cv)->KK <= 9 ? 24 : 16)
#define DW_REGS(cv) ((cv)->KK <= 9 ? 80 : 112)
/* Blocks wanted at least before a small conv's blocks are made smaller: 2
 * per SM of an H200 (132 SMs), so that a batch-1 layer spreads over the
 * GPU instead of queueing on a few SMs. */
#define DW_MIN_UNITS 264
/* Blocks per trip kept at least when blocks loop over several trips (the
 * weights' copy then amortised over them): 4 waves of 2 blocks per SM. */
#define DW_WAVE_UNITS 1056

/* The input vectors along W a tile of R outputs reads from. */
static int dw_span(const kx_conv *cv, int R)
{
	return (int)((R - 1) * cv->s[2] + (cv->k[2] - 1) * cv->d[2] + 1);
}

static uint64_t dw_used(const kx_conv *cv, int R)
{
	uint64_t m = 0;
	for (int r = 0; r < R; r++)
		for (int64_t kw = 0; kw < cv->k[2]; kw++)
			m |= 1ULL << (r * cv->s[2] + kw * cv->d[2]);
	return m;
}

/* A thread's instructions for a tile of R outputs (a load counted 2, a
 * conversion or multiply-add 1, an epilogue element 4, 40 for the tile's
 * index math), times the tiles of an output row: the R with the least
 * weighs the loads R saves (neighbouring outputs share a row's inputs)
 * against the outputs past OW of a row that R does not divide. */
static int64_t dw_cost(const kx_conv *cv, const dw_plan *p, int R)
{
	int64_t rows = cv->k[0] * cv->k[1], nused = __builtin_popcountll(dw_used(cv, R));
	int cvt = p->asz * p->V == 16 ? 0 : 1, nlds = (p->V * p->asz + 15) / 16;
	int64_t tile = rows * (nused * (2 + p->V * cvt) + cv->k[2] * (nlds + R * p->V)) + R * p->V * 4 + 40;
	return (cv->out[2] + R - 1) / R * tile;
}

/* Outputs per thread: the cheapest R up to 8 whose registers fit; 0 when
 * even one output's row spans more than 64 vectors (the used-vector mask). */
static int dw_pick_r(const kx_conv *cv, const dw_plan *p)
{
	int best = 0;
	int64_t bc = 0;
	for (int R = 1; R <= 8 && R <= cv->out[2]; R++) {
		int L = dw_span(cv, R);
		if (L > 64 || (R > 1 && (L + R) * p->V * p->asz / 4 > DW_REGS(cv)))
			continue;
		int64_t c = dw_cost(cv, p, R);
		if (!best || c < bc)
			best = R, bc = c;
	}
	return best;
}

/* The largest number of channel vectors up to `most` that divides G and
 * whose weights fit the shared memory (a slice never straddles a block's
 * channels, so its weights are one contiguous run); 0 when none does. */
static int dw_pick_cs(const kx_conv *cv, const dw_plan *p, int most)
{
	for (int cs = most; cs >= 1; cs--)
		if (p->G % cs == 0 && cv->KK * cs * p->V * p->asz <= DW_SMEM)
			return cs;
	return 0;
}

static int64_t dw_units(const dw_plan *p)
{
	return p->NS * ((p->Q + (int64_t)p->P * p->TR - 1) / ((int64_t)p->P * p->TR));
}

/* The block: the widest slice, 256 threads; a small conv's blocks take
 * fewer tiles, down to a warp, until there are DW_MIN_UNITS of them; a
 * large one's loop over up to 8 trips while DW_WAVE_UNITS blocks remain. */
static void dw_pick_block(const kx_conv *cv, dw_plan *p)
{
	p->CS = dw_pick_cs(cv, p, 32);
	p->P = p->CS >= 256 ? 1 : 256 / p->CS;
	p->TR = 1;
	p->NS = p->G / p->CS;
	while (dw_units(p) < DW_MIN_UNITS && p->CS * p->P > 32)
		p->P = (p->P + 1) / 2;
	while (p->TR < 8 && dw_units(p) / 2 >= DW_WAVE_UNITS)
		p->TR *= 2;
}

/* $KFUSE_DEPTHWISE, "r<R>c<CS>p<P>t<TR>b<MB>s<SB>" (any of them: "r3c2";
 * s: 16, 4 or 1 bytes a store at most), over the choices: for measuring
 * others on a GPU, and for tests of uncommon ones. */
bool kx_dw_knobs(const char *knobs, const char *letters, const char *zero_ok, int *kv)
{
	for (const char *s = knobs; *s;) {
		char c = *s++, *e;
		long v = strtol(s, &e, 10);
		const char *f = c ? strchr(letters, c) : NULL;
		if (e == s || !f || v < (strchr(zero_ok, c) ? 0 : 1) || v > 1024)
			return false;
		s = e;
		kv[f - letters] = (int)v;
	}
	return true;
}

static int dw_override(kx *k, const kx_conv *cv, dw_plan *p, const char *env)
{
	int kv[6] = {p->R, p->CS, p->P, p->TR, p->MB, p->SB ? p->SB : 1};
	if (!kx_dw_knobs(env, "rcptbs", "", kv) || (kv[5] != 16 && kv[5] != 4 && kv[5] != 1))
		return kx_fail(k, "$KFUSE_DEPTHWISE '%s' is not r<R>c<CS>p<P>t<TR>b<MB>s<16|4|1>", env);
	p->R = kv[0], p->CS = kv[1], p->P = kv[2], p->TR = kv[3], p->MB = kv[4], p->SB = kv[5] == 1 ? 0 : kv[5];
	p->NS = p->G / p->CS;
	if (p->R > 8 || dw_span(cv, p->R) > 64 || p->G % p->CS || cv->KK * p->CS * p->V * p->asz > DW_SMEM ||
	    p->CS * p->P > 1024 || p->TR > 64 || p->MB > 32)
		return kx_fail(k, "$KFUSE_DEPTHWISE '%s' does not fit this conv (R <= 8, CS dividing %lld, "
			       "its weights in %d bytes, CS x P <= 1024, TR <= 64, MB <= 32)", env, (long long)p->G, DW_SMEM);
	return 0;
}

/* The plan of mm's depthwise kernel: 0, or 1 when its weights or rows
 * cannot be held (the generic direct kernel then), -1 on an error. */
static int dw_plan_of(kx *k, const kx_mm *mm, int V, dw_plan *p)
{
	const kx_conv *cv = &mm->cv;
	const char *acc = kx_mm_acc_type(mm);
	*p = (dw_plan){.V = V, .asz = strcmp(acc, "float") ? 8 : 4, .G = cv->C / V, .SB = 16};
	p->R = dw_pick_r(cv, p);
	if (!p->R || !dw_pick_cs(cv, p, 32))
		return 1;
	for (int pass = 0; pass < 2; pass++) { /* the choices, then those $KFUSE_DEPTHWISE changes */
		p->OWG = (cv->out[2] + p->R - 1) / p->R;
		p->Q = mm->M / cv->out[2] * p->OWG;
		if (pass == 0)
			dw_pick_block(cv, p);
		const char *env = getenv("KFUSE_DEPTHWISE");
		if (pass == 0 && env && *env && dw_override(k, cv, p, env) != 0)
			return -1;
	}
	p->L = dw_span(cv, p->R);
	p->used = dw_used(cv, p->R);
	return 0;
}

/* c0, the first channel of the block's slice (slice blockIdx.x % ns of
 * csv channels). */
void kx_dw_slice_c0(kx *k, int csv, int64_t ns)
{
	const char *it = kx_it(k);
	if (ns > 1)
		kf_buf_printf(&k->b, "  const %s c0 = (%s)(blockIdx.x %% %lldu) * %d;\n", it, it, (long long)ns, csv);
	else
		kf_buf_printf(&k->b, "  const %s c0 = 0;\n", it);
}

/* The block's weights into shared memory, [tap][channel] of type ty: a
 * coalesced read of the slice's run [c0 KK, (c0 + csv) KK) (c0 in scope:
 * kx_dw_slice_c0), a strided write that each block does once, by its
 * `threads` threads.  No thread leaves before the barrier. */
void kx_dw_stage_weights(kx *k, const kx_mm *mm, const char *ty, int csv, int threads)
{
	const kx_conv *cv = &mm->cv;
	long long KK = (long long)cv->KK;
	kf_buf *b = &k->b;
	kf_buf_printf(b, "  __shared__ __align__(16) %s kf_w[%lld];\n", ty, KK * csv);
	kf_buf_printf(b, "  for (int e = threadIdx.x; e < %lld; e += %d) {\n", KK * csv, threads);
	kf_buf_printf(b, "    const int c = e / %lld;\n    kf_w[(e - c * %lld) * %d + c] = ", KK, KK, csv);
	kx_load(b, mm->b.st, "p%d[c0 * %lld + e]", mm->b.param, KK);
	kf_buf_puts(b, ";\n  }\n  __syncthreads();\n");
}

static void dw_stage(kx *k, const kx_mm *mm, const dw_plan *p)
{
	kx_dw_slice_c0(k, p->CS * p->V, p->NS);
	kx_dw_stage_weights(k, mm, kx_mm_acc_type(mm), p->CS * p->V, p->CS * p->P);
}

/* The thread's tile of trip `tr`: its first output row rb (position n,
 * od, oh, ow0), ow0, and the input's first depth, row and column. */
static void dw_tile(kx *k, const kx_mm *mm, const dw_plan *p)
{
	const kx_conv *cv = &mm->cv;
	const char *it = kx_it(k);
	kf_buf *b = &k->b;
	kf_buf_printf(b, "    const %s tile = tb + tr * %d;\n    if (tile >= %lldLL) break;\n", it, p->P, (long long)p->Q);
	kf_buf_printf(b, "    const %s q0 = tile / %lld;\n", it, (long long)p->OWG);
	kf_buf_printf(b, "    const int ow0 = (int)(tile - q0 * %lld) * %d, oh = (int)(q0 %% %lld), od = (int)(q0 / %lld %% %lld);\n",
		      (long long)p->OWG, p->R, (long long)cv->out[1], (long long)cv->out[1], (long long)cv->out[0]);
	kf_buf_printf(b, "    const %s n = q0 / %lld, rb = q0 * %lld + ow0;\n", it, (long long)(cv->out[1] * cv->out[0]),
		      (long long)cv->out[2]);
	kf_buf_printf(b, "    const int id0 = od * %lld - %lld, ih0 = oh * %lld - %lld, iw0 = ow0 * %lld - %lld;\n",
		      (long long)cv->s[0], (long long)cv->pb[0], (long long)cv->s[1], (long long)cv->pb[1],
		      (long long)cv->s[2], (long long)cv->pb[2]);
}

/* The taps' rows (kd, kh) that land inside the input: the row's L input
 * vectors loaded (those some output reads) and converted once, then
 * acc[r][j] += x[r s + kw d][j] w[tap][j] over kw, r, j. */
static void dw_rows(kx *k, const kx_mm *mm, const dw_plan *p)
{
	const kx_conv *cv = &mm->cv;
	const char *it = kx_it(k), *acc = kx_mm_acc_type(mm), *st = kx_st(mm->a.st);
	int V = p->V, L = p->L, CSV = p->CS * p->V;
	kf_buf *b = &k->b;
	kf_buf_printf(b, "#pragma unroll\n    for (int kd = 0; kd < %lld; kd++) {\n      const int id = id0 + kd * %lld;\n"
		      "      if ((unsigned)id >= %lldu) continue;\n", (long long)cv->k[0], (long long)cv->d[0],
		      (long long)cv->in[0]);
	kf_buf_printf(b, "#pragma unroll\n    for (int kh = 0; kh < %lld; kh++) {\n      const int ih = ih0 + kh * %lld;\n"
		      "      if ((unsigned)ih >= %lldu) continue;\n", (long long)cv->k[1], (long long)cv->d[1],
		      (long long)cv->in[1]);
	kf_buf_printf(b, "      const %s xr = ((n * %lld + id) * %lld + ih) * %lld + col;\n      %s xf[%d][%d];\n", it,
		      (long long)cv->in[0], (long long)cv->in[1], (long long)(cv->in[2] * cv->C), acc, L, V);
	kf_buf_printf(b, "#pragma unroll\n      for (int i = 0; i < %d; i++) {\n", L);
	if (p->used != (L == 64 ? ~0ULL : (1ULL << L) - 1)) /* strides past the taps' reach skip vectors */
		kf_buf_printf(b, "        if (!((0x%llxULL >> i) & 1)) continue;\n", (unsigned long long)p->used);
	kf_buf_printf(b, "        const int iw = iw0 + i;\n        __align__(16) %s xv[%d];\n", st, V);
	kf_buf_printf(b, "        *(uint4 *)xv = (unsigned)iw < %lldu ? __ldg((const uint4 *)(p%d + xr + iw * %lld)) : "
		      "make_uint4(0, 0, 0, 0);\n", (long long)cv->in[2], mm->a.param, (long long)cv->C);
	kf_buf_printf(b, "#pragma unroll\n        for (int j = 0; j < %d; j++) xf[i][j] = ", V);
	kx_load(b, mm->a.st, "xv[j]");
	kf_buf_puts(b, ";\n      }\n");
	kf_buf_printf(b, "#pragma unroll\n      for (int kw = 0; kw < %lld; kw++) {\n        __align__(16) %s wv[%d];\n",
		      (long long)cv->k[2], acc, V);
	kf_buf_printf(b, "        const uint4 *ws = (const uint4 *)(kf_w + ((kd * %lld + kh) * %lld + kw) * %d + cl);\n",
		      (long long)cv->k[1], (long long)cv->k[2], CSV);
	kf_buf_printf(b, "#pragma unroll\n        for (int h = 0; h < %d; h++) ((uint4 *)wv)[h] = ws[h];\n",
		      V * p->asz / 16);
	kf_buf_printf(b, "#pragma unroll\n        for (int r = 0; r < %d; r++)\n#pragma unroll\n"
		      "          for (int j = 0; j < %d; j++) acc[r][j] += xf[r * %lld + kw * %lld][j] * wv[j];\n",
		      p->R, V, (long long)cv->s[2], (long long)cv->d[2]);
	kf_buf_puts(b, "      }\n    }}\n");
}

/* The tile's outputs through the epilogue, those before the row's end. */
static void dw_store(kx *k, const kx_mm *mm, const dw_plan *p)
{
	const kx_conv *cv = &mm->cv;
	kf_buf *b = &k->b;
	kf_buf_printf(b, "#pragma unroll\n    for (int r = 0; r < %d; r++) {\n", p->R);
	if (cv->out[2] % p->R)
		kf_buf_printf(b, "      if (ow0 + r >= %lld) break;\n", (long long)cv->out[2]);
	kx_dw_store_vec(k, mm, b, p->SB, p->V, "rb + r", "acc[r]");
	kf_buf_puts(b, "    }\n");
}

static int emit_tiled(kx *k, kx_mm *mm, int V)
{
	const kx_conv *cv = &mm->cv;
	dw_plan p;
	int rc = dw_plan_of(k, mm, V, &p);
	if (rc != 0)
		return rc;
	const char *it = kx_it(k), *acc = kx_mm_acc_type(mm);
	int T = p.CS * p.P;
	kf_buf *b = &k->b;
	k->k->block = T;
	k->k->units = dw_units(&p);
	k->k->per_sm = -1;
	int warps = (T + 31) / 32;
	k->k->min_blocks = p.MB ? p.MB : warps < DW_WARPS(cv) ? DW_WARPS(cv) / warps : 1;
	if (k->k->units >= (1LL << 31))
		return kx_fail(k, "a conv with more than 2^31 blocks of outputs");
	int sb = kx_dw_store_kind(k, mm, V);
	if (p.SB > sb) /* the widest the outputs allow, or the override's */
		p.SB = sb;
	dw_stage(k, mm, &p);
	kf_buf_printf(b, "  const int cl = threadIdx.x %% %d * %d;\n  const %s col = c0 + cl;\n", p.CS, V, it);
	kf_buf_printf(b, "  const %s tb = (%s)(blockIdx.x / %lldu) * %lld + threadIdx.x / %d;\n", it, it, (long long)p.NS,
		      (long long)p.P * p.TR, p.CS);
	kf_buf_printf(b, "  for (int tr = 0; tr < %d; tr++) {\n", p.TR);
	dw_tile(k, mm, &p);
	kf_buf_printf(b, "    %s acc[%d][%d];\n#pragma unroll\n    for (int r = 0; r < %d; r++)\n#pragma unroll\n"
		      "      for (int j = 0; j < %d; j++) acc[r][j] = 0;\n", acc, p.R, V, p.R, V);
	dw_rows(k, mm, &p);
	dw_store(k, mm, &p);
	kf_buf_puts(b, "  }\n");
	return 0;
}

/* Outputs from which the tiled and rows kernels are faster (see the top). */
#define DW_TILED_OUTPUTS (1LL << 19)
/* Whether the rows kernel runs a conv of many outputs by default.  Measured
 * on the H200 (bench/results/2026-12-03-gpu-s12b-depthwise-attention.txt, batch 32,
 * MobileNetV2's and EfficientNet-B0's 22 depthwise layers, fp16 + bias +
 * ReLU): where the input is at most 14 x 14, or 28 x 28 under a 5x5
 * kernel, it took 141.5 us over those 11 layers against 156.6 for the
 * tiled kernel (7 faster by 8-39%, 4 slower by 2-10%); on the larger
 * inputs the tiled kernel was faster at 10 of 11 (by 3-18%: 24.2 against
 * 25.7 us at 32 channels of 112 x 112).  Kernels past 5x5 (ConvNeXt's
 * 7x7, bound by its multiply-adds) keep the tiled kernel: the rows one's
 * weights live in registers (25 taps x 2-4 channels a thread).  Asked
 * after dw_band_default (session 13): it now decides 3x3 convs at stride
 * 2, and 5x5 ones only where the band kernel does not fit. */
static bool dw_rows_default(const kx_conv *cv)
{
	int64_t hw = cv->in[1] * cv->in[2];
	return cv->k[1] <= 5 && cv->k[2] <= 5 && (hw <= 14 * 14 || (cv->k[1] * cv->k[2] >= 25 && hw <= 28 * 28));
}

/* Whether the band kernel runs a conv of many outputs by default.
 * Measured on the H200 (bench/results/2026-12-03-gpu-s13a-depthwise-band.txt,
 * batch 32, MobileNetV2's and EfficientNet-B0's 22 depthwise layers, f16 +
 * bias + ReLU, replays after an L2 flush): at stride 1 and under 5x5
 * kernels it was the fastest kernel at 13 of those 15 layers (144 channels
 * of 56x56: 0.0292 against the tiled kernel's 0.0340 ms; 240 of 28x28 5x5:
 * 0.0264 against 0.0329; 960 of 7x7: 0.0087 against 0.0104), within 2%
 * of the best at the other two; 3x3 at stride 2 it lost to the tiled or
 * rows kernel at 3 of 7 (144 of 56x56: 0.0231 against 0.0196), so those
 * keep the older rule, but for inputs of at most 28 x 28, where the band
 * kernel at four blocks an SM (dwb_blocks) beat them (s20f; s20h, against
 * the build before in one call: 192 channels of 28x28 0.0106 against
 * 0.0118 ms, 576 of 14x14 0.0097 against 0.0104, 240 of 28x28 1.03x and
 * 1.0x).  Kernels past 5x5 keep the tiled kernel
 * (weights in registers, as the rows kernel's). */
static bool dw_band_default(const kx_conv *cv)
{
	bool small = cv->in[1] * cv->in[2] <= 28 * 28;
	return cv->k[1] <= 5 && cv->k[2] <= 5 && (cv->KK >= 25 || (cv->s[1] == 1 && cv->s[2] == 1) || small);
}

/* Whether the Toeplitz tensor-core kernel (emit_depthwise_toep.c) runs a
 * conv of many outputs by default: kernels past 5x5, which the tiled
 * kernel ran bound by its multiply-adds.  Measured on the H200
 * (bench/results/2026-12-04-gpu-s22b-depthwise-toep.txt, batch 32, f16 +
 * bias + ReLU, replays after an L2 flush): ConvNeXt-T's four 7x7 layers
 * 1.2-2.2x faster than the tiled kernel (96 channels of 56x56: 0.0395
 * against 0.0779 ms; 384 of 14x14: 0.0176 against 0.0382).  At 3x3 and
 * 5x5 it lost to the band, rows and tiled kernels at all 34 layers of
 * MobileNetV2, EfficientNet-B0 and MobileNetV3-Large (1.1-2.5x slower; the
 * final form 1.1-2x, -s22e-depthwise-toep-pairs.txt):
 * there the transpose through shared memory costs more than the
 * multiply-adds it saves.  It takes f16 and bf16 only (else the tiled). */
static bool dw_toep_default(const kx_conv *cv)
{
	return cv->k[1] > 5 || cv->k[2] > 5;
}

/* The knobs after "<name>" or "<name>:" of $KFUSE_DEPTHWISE `env` (""
 * for none), NULL when env does not force that kernel. */
static const char *forced(const char *env, const char *name)
{
	size_t n = strlen(name);
	if (!env || strncmp(env, name, n) || (env[n] && env[n] != ':'))
		return NULL;
	return env + n + (env[n] == ':');
}

int kx_conv_emit_depthwise(kx *k, kx_mm *mm, int V)
{
	const char *env = getenv("KFUSE_DEPTHWISE");
	if (env && !strcmp(env, "vector"))
		return emit_vector(k, mm, V);
	const char *knobs;
	if ((knobs = forced(env, "rows")))
		return kx_dw_emit_rows(k, mm, V, env, knobs);
	if ((knobs = forced(env, "band")))
		return kx_dw_emit_band(k, mm, V, env, knobs);
	if ((knobs = forced(env, "toep")))
		return kx_dw_emit_toep(k, mm, V, env, knobs);
	if (env)
		return emit_tiled(k, mm, V);
	if (mm->M * mm->cv.C < DW_TILED_OUTPUTS)
		return emit_vector(k, mm, V);
	if (dw_band_default(&mm->cv)) {
		int rc = kx_dw_emit_band(k, mm, V, NULL, NULL);
		if (rc != 1)
			return rc;
	}
	if (dw_toep_default(&mm->cv)) {
		int rc = kx_dw_emit_toep(k, mm, V, NULL, NULL);
		if (rc != 1)
			return rc;
	}
	if (dw_rows_default(&mm->cv)) {
		int rc = kx_dw_emit_rows(k, mm, V, NULL, NULL);
		if (rc != 1)
			return rc;
	}
	return emit_tiled(k, mm, V);
}
