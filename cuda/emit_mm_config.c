/* emit_mm_config.c: the contraction kernels' tile configs: their text
 * (kf_mm_config_parse, kf_mm_config_text), which shapes each kernel can
 * run (kx_mm_config_fits), the emitter's own default for a shape, the
 * tuner's candidates, and the tuner's key of a shape.  Split from
 * emit_matmul.c, which analyses and emits.
 *
 * requires: nothing (pure functions of configs and shapes).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "emit_mm_int.h"

/* ---- configs ---------------------------------------------------------------------- */

/* A split count "kS" at s, S from 2 to max without leading zeros, into
 * c->sk: the chars it took, -1 when it is malformed. */
static int k_count(const char *s, int max, kf_mm_config *c)
{
	int n = 0;
	if (sscanf(s, "k%d%n", &c->sk, &n) != 1 || c->sk < 2 || c->sk > max || s[1] < '1' || s[1] > '9')
		return -1;
	return n;
}

/* The split-K suffix "kS" (S from 2 to 64) at s, or nothing: the chars it
 * took, -1 when it is malformed. */
static int splitk_suffix(const char *s, kf_mm_config *c)
{
	if (!*s)
		return 0;
	int n = k_count(s, 64, c);
	return n < 0 || s[n] ? -1 : n;
}

/* The rest of a "wgc<M>x<N>x<K>s<S>" config (the conv kernel), from
 * s + n: [k<K>] (split-K) then v or s (the epilogue); 0, or -1 for a bad
 * one. */
static int parse_wgc(const char *s, int n, kf_mm_config *c)
{
	c->algo = KF_MM_WGC;
	int m = 0;
	if (s[n] == 'k' && (m = k_count(s + n, 64, c)) < 0)
		return -1;
	n += m;
	c->vs = s[n] == 'v';
	n += c->vs;
	c->ss = !c->vs && s[n] == 's';
	n += c->ss;
	return !s[n] && c->bm >= 64 && c->bm <= 256 && c->bm % 64 == 0 && c->bn >= 64 && c->bn <= 256 &&
		       c->bn % 64 == 0 && 4 * c->bn >= c->bm && c->bk == 64 && c->stages >= 3 && c->stages <= 8 &&
		       kf_wg_stage_cols(c) >= 0
		       ? 0
		       : -1;
}

/* The rest of a "wg<M>x<N>x<K>s<S>" config, from s + n: [c<2|4>]
 * (cluster), p or pp (persistent, ping-pong), v, s, e (the epilogue's
 * stores, staging, warps); 0, or -1 for a bad one. */
static int parse_wg(const char *s, int n, kf_mm_config *c)
{
	c->algo = KF_MM_WG;
	int m = 0;
	if (s[n] == 'k') { /* split-K over a cluster (a cluster's size): only "s" may follow */
		if ((m = k_count(s + n, 8, c)) < 0)
			return -1;
		n += m;
		c->ss = s[n] == 's';
		n += c->ss;
	} else {
		if (s[n] == 'c' && (sscanf(s + n, "c%d%n", &c->cl, &m) != 1 || (c->cl != 2 && c->cl != 4)))
			return -1;
		n += m;
		c->ps = s[n] == 'p';
		n += c->ps;
		c->pp = c->ps && s[n] == 'p';
		n += c->pp;
		if (c->pp && c->cl) /* ping-pong alternates tiles, a cluster walks them in step */
			return -1;
		c->vs = s[n] == 'v';
		n += c->vs;
		c->ss = s[n] == 's';
		n += c->ss;
		c->ew = c->ss && s[n] == 'e';
		n += c->ew;
		if (c->ew && (!c->ps || c->pp || c->cl)) /* the epilogue warps walk the tiles of "p" */
			return -1;
	}
	/* (a split has no cluster, walk or epilogue warps, and no staging tile) */
	return !s[n] && (c->bm == 64 || c->bm == 128) && c->bn >= 64 && c->bn <= 256 && c->bn % 64 == 0 &&
		       c->bk == 64 && c->stages >= 2 && c->stages <= 8 &&
		       (!c->pp || c->bm * c->bn <= 128 * 128) && /* 128 accumulators a thread */
		       (!c->cl || kf_wg_bpieces(c->bn, false, c->cl, 0, &m, &m, NULL) > 0) &&
		       kf_wg_stage_cols(c) >= 0 && (!c->ew || kf_wg_stage_cols(c) == c->bn)
		       ? 0
		       : -1;
}

int kf_mm_config_parse(const char *s, kf_mm_config *c)
{
	memset(c, 0, sizeof *c);
	int n = 0;
	if (sscanf(s, "mma%dx%dx%dw%dx%ds%d%n", &c->bm, &c->bn, &c->bk, &c->wm, &c->wn, &c->stages, &n) == 6 &&
	    splitk_suffix(s + n, c) >= 0) {
		c->algo = KF_MM_MMA;
		return c->bm > 0 && c->bn > 0 && c->bk > 0 && c->wm > 0 && c->wn > 0 && c->stages >= 2 &&
			       c->stages <= 4
			       ? 0
			       : -1;
	}
	if (sscanf(s, "wgc%dx%dx%ds%d%n", &c->bm, &c->bn, &c->bk, &c->stages, &n) == 4)
		return parse_wgc(s, n, c);
	if (sscanf(s, "wg%dx%dx%ds%d%n", &c->bm, &c->bn, &c->bk, &c->stages, &n) == 4)
		return parse_wg(s, n, c);
	if (sscanf(s, "fma%dx%dx%dt%dx%d%n", &c->bm, &c->bn, &c->bk, &c->wm, &c->wn, &n) == 5 &&
	    splitk_suffix(s + n, c) >= 0) {
		c->algo = KF_MM_FMA;
		return c->bm > 0 && c->bn > 0 && c->bk > 0 && c->wm > 0 && c->wn > 0 ? 0 : -1;
	}
	if (!strcmp(s, "cublaslt")) {
		c->algo = KF_MM_LT;
		return 0;
	}
	if (!strcmp(s, "cublas")) {
		c->algo = KF_MM_BLAS;
		return 0;
	}
	if (!strcmp(s, "cudnn")) {
		c->algo = KF_MM_DNN;
		return 0;
	}
	if (!strcmp(s, "gemv")) {
		c->algo = KF_MM_GEMV;
		return 0;
	}
	if (!strncmp(s, "gemvb", 5)) {
		c->algo = KF_MM_GEMV;
		c->bulk = 1;
		if (!s[5])
			return 0;
		return sscanf(s + 5, "%d%n", &c->stages, &n) == 1 && !s[5 + n] && s[5] >= '1' && s[5] <= '9' &&
			       c->stages >= 1 && c->stages <= KF_GEMVB_MAXSLOT
			       ? 0
			       : -1;
	}
	if (!strcmp(s, "gemvc") || (sscanf(s, "gemvcu%d%n", &c->un, &n) == 1 && !s[n])) {
		c->algo = KF_MM_GEMV;
		c->colb = 1;
		return c->un >= 0 && c->un <= 16 && (s[5] == 0 || s[6] != '0') ? 0 : -1;
	}
	if (sscanf(s, "gemvk%d%n", &c->ks, &n) == 1 && !s[n]) {
		c->algo = KF_MM_GEMV;
		return c->ks >= 1 && c->ks <= 1024 ? 0 : -1;
	}
	if (sscanf(s, "gemvk%du%d%n", &c->ks, &c->un, &n) == 2 && !s[n]) {
		c->algo = KF_MM_GEMV;
		return c->ks >= 1 && c->ks <= 1024 && c->un >= 1 && c->un <= 16 ? 0 : -1;
	}
	return -1;
}

void kf_mm_config_text(const kf_mm_config *c, char *out, size_t n)
{
	switch (c->algo) {
	case KF_MM_MMA:
		if (c->sk > 1)
			snprintf(out, n, "mma%dx%dx%dw%dx%ds%dk%d", c->bm, c->bn, c->bk, c->wm, c->wn, c->stages, c->sk);
		else
			snprintf(out, n, "mma%dx%dx%dw%dx%ds%d", c->bm, c->bn, c->bk, c->wm, c->wn, c->stages);
		break;
	case KF_MM_FMA:
		if (c->sk > 1)
			snprintf(out, n, "fma%dx%dx%dt%dx%dk%d", c->bm, c->bn, c->bk, c->wm, c->wn, c->sk);
		else
			snprintf(out, n, "fma%dx%dx%dt%dx%d", c->bm, c->bn, c->bk, c->wm, c->wn);
		break;
	case KF_MM_LT:
		snprintf(out, n, "cublaslt");
		break;
	case KF_MM_BLAS:
		snprintf(out, n, "cublas");
		break;
	case KF_MM_DNN:
		snprintf(out, n, "cudnn");
		break;
	case KF_MM_WGC: {
		char k[16] = "";
		if (c->sk > 1)
			snprintf(k, sizeof k, "k%d", c->sk);
		snprintf(out, n, "wgc%dx%dx%ds%d%s%s", c->bm, c->bn, c->bk, c->stages, k, c->vs ? "v" : c->ss ? "s" : "");
		break;
	}
	case KF_MM_WG:
		if (c->sk > 1)
			snprintf(out, n, "wg%dx%dx%ds%dk%d%s", c->bm, c->bn, c->bk, c->stages, c->sk, c->ss ? "s" : "");
		else if (c->cl)
			snprintf(out, n, "wg%dx%dx%ds%dc%d%s%s%s", c->bm, c->bn, c->bk, c->stages, c->cl,
				 c->ps ? "p" : "", c->vs ? "v" : "", c->ss ? "s" : "");
		else
			snprintf(out, n, "wg%dx%dx%ds%d%s%s%s%s", c->bm, c->bn, c->bk, c->stages,
				 c->pp ? "pp" : c->ps ? "p" : "", c->vs ? "v" : "", c->ss ? "s" : "", c->ew ? "e" : "");
		break;
	default:
		if (c->bulk && c->stages)
			snprintf(out, n, "gemvb%d", c->stages);
		else if (c->bulk)
			snprintf(out, n, "gemvb");
		else if (c->colb && c->un)
			snprintf(out, n, "gemvcu%d", c->un);
		else if (c->colb)
			snprintf(out, n, "gemvc");
		else if (c->ks && c->un)
			snprintf(out, n, "gemvk%du%d", c->ks, c->un);
		else if (c->ks)
			snprintf(out, n, "gemvk%d", c->ks);
		else
			snprintf(out, n, "gemv");
	}
}

int kf_wg_stage_cols(const kf_mm_config *c)
{
	if (!c->ss || (c->algo == KF_MM_WG && c->sk > 1)) /* a split's "s" stores from the partials, not a staging tile */
		return 0;
	/* + 1024 to align the ring, + 1024 of static shared memory */
	int64_t ring = (int64_t)c->stages * (c->bm + c->bn) * 128 + 2048;
	for (int sc = c->bn; sc >= 64; sc /= 2)
		if (c->bn % sc == 0 && ring + (int64_t)kf_wg_consumers(c) * 64 * sc * 2 <= 227 * 1024)
			return sc;
	return -1;
}

int kf_wg_smem(const kf_mm_config *c)
{
	if (c->algo == KF_MM_WG && c->sk > 1) { /* the ring, then the f32 partial tile over it */
		int ring = c->stages * (c->bm + c->bn) * 128, part = c->bm * c->bn * 4;
		return (ring > part ? ring : part) + 1024;
	}
	int sc = kf_wg_stage_cols(c);
	return c->stages * (c->bm + c->bn) * 128 + (sc > 0 ? kf_wg_consumers(c) * 64 * sc * 2 : 0) + 1024;
}

int kf_wg_consumers(const kf_mm_config *c) { return c->pp ? 2 : c->bm / 64; }

bool kx_mm_mma_dtype(const kf_mm_shape *sh)
{
	return sh->in == KF_F16 || sh->in == KF_BF16 || (sh->in == KF_F32 && sh->tf32);
}

/* The wgmma kernel's limits: f16/bf16 read as stored (TMA copies bytes),
 * one batch, A [M, K], row lengths multiples of 16 bytes (TMA strides),
 * coordinates in 32 bits, the ring in 227 KiB; a device that has it. */
static bool wg_fits(const kf_mm_config *c, const kf_mm_shape *sh)
{
	if ((sh->in != KF_F16 && sh->in != KF_BF16) || !sh->raw || sh->batch != 1 || sh->ta || sh->wgmma < 0 ||
	    (sh->conv && !sh->pw))
		return false;
	if (sh->K % 8 || (!sh->tb && sh->N % 8) || sh->M >= (1LL << 31) || sh->N >= (1LL << 31) ||
	    sh->K >= (1LL << 31))
		return false;
	int bi, bo;
	if (c->cl > 1 && kf_wg_bpieces(c->bn, sh->tb, c->cl, 0, &bi, &bo, NULL) < 0)
		return false;
	/* a split: fixed sizes (the grid holds M's tiles times the splits), at
	 * least a K tile a split */
	if (c->sk > 1 && (sh->sized || (sh->K + 63) / 64 < c->sk || (sh->M + c->bm - 1) / c->bm * c->sk > 65535))
		return false;
	/* + 1024 of static shared memory (the barriers) */
	return kf_wg_stage_cols(c) >= 0 && kf_wg_smem(c) + 1024 <= 227 * 1024;
}

/* The wgmma conv (emit_conv_wg.c): an implicit-GEMM conv of f16/bf16
 * whose A rows copy 16 bytes at a time (and the weight's rows: K % 8), a
 * device that has wgmma, the ring and the staging tiles in 227 KiB (+ 1024
 * of static shared memory for the split's flag). */
static bool wgc_fits(const kf_mm_config *c, const kf_mm_shape *sh)
{
	return sh->conv && (sh->in == KF_F16 || sh->in == KF_BF16) && sh->raw && sh->batch == 1 && sh->wgmma >= 0 &&
	       sh->K % 8 == 0 && sh->M < (1LL << 31) && kf_wg_stage_cols(c) >= 0 && kf_wg_smem(c) + 1024 <= 227 * 1024;
}

/* The bulk-copy GEMV: B [N, K] of f32/f16/bf16 read as stored (bulk
 * copies move bytes), one batch, an sm_90 device (or unknown: --emit). */
static bool gemvb_fits(const kf_mm_config *c, const kf_mm_shape *sh)
{
	kf_gemvb_plan p;
	return sh->M == 1 && sh->batch == 1 && sh->tb && sh->raw && sh->wgmma >= 0 &&
	       (sh->in == KF_F32 || sh->in == KF_F16 || sh->in == KF_BF16) &&
	       kf_gemvb_plan_of(sh->N, sh->K, (int)kf_dtype_size(sh->in), c->stages, &p) == 0;
}

/* Split-K: every split at least one K tile, the workspace bounded, the
 * batch and split counts in gridDim.z. */
static bool splitk_fits(const kf_mm_config *c, const kf_mm_shape *sh)
{
	return c->sk <= 1 || ((sh->K + c->bk - 1) / c->bk >= c->sk &&
			      kf_mm_splitk_ws(c, sh->M, sh->N, sh->batch) <= KF_MM_SPLITK_WS && sh->batch * c->sk <= 65535);
}

/* Whether config c can run shape sh (the kernels' structural limits). */
bool kx_mm_config_fits(const kf_mm_config *c, const kf_mm_shape *sh)
{
	if ((c->algo == KF_MM_FMA || c->algo == KF_MM_MMA || c->algo == KF_MM_WGC) && !splitk_fits(c, sh))
		return false;
	switch (c->algo) {
	case KF_MM_WGC:
		return wgc_fits(c, sh);
	case KF_MM_WG:
		return wg_fits(c, sh);
	case KF_MM_MMA: {
		if (!kx_mm_mma_dtype(sh))
			return false;
		int e = sh->in == KF_F32 ? 4 : 2, kstep = e == 4 ? 8 : 16;
		int wtm = c->bm / c->wm, wtn = c->bn / c->wn, thr = 32 * c->wm * c->wn;
		if (c->bm % c->wm || c->bn % c->wn || wtm % 16 || wtn % 16 || c->bk % kstep || c->bk % 8 || thr > 1024)
			return false;
		/* the accumulators: MI x NI x 4 floats per thread */
		if ((wtm / 16) * (wtn / 8) * 4 > 192)
			return false;
		int pad = 16 / e;
		int64_t a = (int64_t)c->bm * (c->bk + pad), b = (int64_t)c->bk * (c->bn + pad);
		int64_t at = (int64_t)c->bk * (c->bm + pad), bt = (int64_t)c->bn * (c->bk + pad);
		int64_t sm = (int64_t)c->stages * ((a > at ? a : at) + (b > bt ? b : bt)) * e;
		return sm <= 227 * 1024;
	}
	case KF_MM_FMA: {
		int thr = (c->bm / c->wm) * (c->bn / c->wn);
		return c->bm % c->wm == 0 && c->bn % c->wn == 0 && thr >= 32 && thr <= 1024 && c->wm * c->wn <= 64 &&
		       (int64_t)c->bk * (c->bm + c->bn + 2) * 8 <= 48 * 1024;
	}
	case KF_MM_LT:
	case KF_MM_BLAS:
	case KF_MM_DNN:
		return false; /* not a kernel */
	default:
		if (c->bulk)
			return gemvb_fits(c, sh);
		if (c->colb) /* 16-byte loads along N of B read as stored */
			return sh->M == 1 && sh->batch == 1 && kf_dtype_is_float(sh->in) && !sh->tb && sh->raw &&
			       sh->N % (16 / (int64_t)kf_dtype_size(sh->in)) == 0;
		/* B [N, K]: 1, 2, 4 or 8 warps per output */
		return sh->M == 1 && sh->batch == 1 && kf_dtype_is_float(sh->in) &&
		       (!sh->tb || (c->ks <= 8 && !(c->ks & (c->ks - 1))));
	}
}

/* M of 65 to 128 (two 64-row tiles) over a large weight: the kernel
 * streams B, and the tiles that do it fastest (H200, f16, weight from HBM,
 * Nsight Compute, bench/results/2026-12-03-gpu-s15-mlp128.txt): at M =
 * 128 and K up to 2048, a cluster of the two M tiles sharing each 64 x
 * 128 B tile (multicast: B read once) where there are 66 to 132 such CTAs
 * (128 x 5632 x 2048: 12.5-13.6 us against 9.8 for cuBLAS alone and 15.5
 * with the epilogue kernel after it; 128-wide tiles alone 17-18 us, 128 x
 * 128 split 20 us; B [N, K] and [K, N] alike, replays 18.0 against 19.4,
 * s15h) - not at M = 100 (20.6 against 18.5 replayed) nor at 72 x 5632 x
 * 4096 bf16 (29.2 against 25.6); else, over a long K, 64 x 64 tiles split
 * in two along K where that gives 100 to 132 CTAs (128 x 2048 x 5632:
 * 14.6 us against 20.4 for cuBLAS's split-K + reduction + epilogue; 120
 * rows: 19.0 against 21.7 replayed).  False when neither applies. */
static bool mem_bound_tile(const kf_mm_shape *sh, kf_mm_config *c)
{
	int64_t c2 = 2 * ((sh->N + 127) / 128), k2 = 4 * ((sh->N + 63) / 64);
	const char *t = c2 >= 66 && c2 <= 132 && sh->M == 128 && sh->K <= 2048 ? "wg64x128x64s8c2s"
			: k2 >= 100 && k2 <= 132 && sh->K >= 4096 ? "wg64x64x64s8k2s"
								  : NULL;
	kf_mm_config cc;
	if (!t || kf_mm_config_parse(t, &cc) || !wg_fits(&cc, sh))
		return false;
	*c = cc;
	return true;
}

void kf_mm_own_default(const kf_mm_shape *sh, kf_mm_config *c)
{
	if (sh->M == 1 && sh->batch == 1 && kf_dtype_is_float(sh->in) && sh->N >= 32) {
		/* B [K, N] in column blocks (no K split, no second pass) where
		 * those blocks fill most of 132 SMs: 87% of the copy ceiling
		 * against 67% for the split at 1 x 1024 x 4096 f32, warm
		 * (bench/results/2026-11-29-s3-gpu-gemv-tiles2.txt) */
		kf_mm_config cc;
		kf_mm_config_parse("gemvc", &cc);
		int64_t cw = 128 / (int64_t)kf_dtype_size(sh->in);
		kf_mm_config_parse(kx_mm_config_fits(&cc, sh) && (sh->N + cw - 1) / cw >= 100 ? "gemvc" : "gemv", c);
		return;
	}
	kf_mm_config wg;
	kf_mm_config_parse("wg128x256x64s4", &wg);
	if (sh->wgmma > 0 && wg_fits(&wg, sh)) {
		/* 128 x 256 where they fill most of the 132 SMs of an H200 (one
		 * block per SM: the ring takes 193 KiB), else 128 x 128, else 64 x
		 * 128; persistent (p), the epilogue staged in shared memory and
		 * stored 16 bytes at a time (s): 5-8% faster than pv, which was
		 * 7-11% faster than neither; at 128 x 256 a cluster of 2 walking
		 * the tiles in step with B multicast (c2p) and 4 stages, half
		 * the tile staged at a time: 3% faster than s3pvs without, where
		 * c2 with 3 stages gained nothing and c4 runs a second wave
		 * (bench/results/2026-11-29-s3-gpu-wgmma-c2p.txt); at M = 512 c2
		 * is 17% slower */
		if (sh->M > 64 && sh->M <= 128 && !sh->sized && mem_bound_tile(sh, c))
			return;
		int64_t t256 = ((sh->M + 127) / 128) * ((sh->N + 255) / 256);
		int64_t t128 = ((sh->M + 127) / 128) * ((sh->N + 127) / 128);
		kf_mm_config_parse(t256 >= 120 ? "wg128x256x64s4c2pvs" : t128 >= 100 ? "wg128x128x64s4pvs" : "wg64x128x64s8v",
				   c);
		return;
	}
	if (kx_mm_mma_dtype(sh) && sh->K >= 16) {
		int64_t b128 = ((sh->M + 127) / 128) * ((sh->N + 127) / 128) * sh->batch;
		int64_t b64 = ((sh->M + 63) / 64) * ((sh->N + 127) / 128) * sh->batch;
		/* big tiles where they fill the 132 SMs of an H100/H200; smaller
		 * ones for small outputs so that every SM has a block */
		if (b128 >= 120)
			kf_mm_config_parse("mma128x128x32w2x4s3", c);
		else if (b64 >= 100)
			kf_mm_config_parse("mma64x128x32w2x2s4", c);
		else
			kf_mm_config_parse("mma64x64x32w2x2s4", c);
		return;
	}
	kf_mm_config_parse(sh->M >= 64 && sh->N >= 64 ? "fma64x64x16t4x4" : "fma32x32x16t2x2", c);
}

/* Tiles of config text t over sh's M x N. */
static int64_t tiles_of(const kf_mm_shape *sh, const char *t, kf_mm_config *c)
{
	kf_mm_config_parse(t, c);
	return ((sh->M + c->bm - 1) / c->bm) * ((sh->N + c->bn - 1) / c->bn);
}

/* The wgmma default, from ResNet-50's layers tuned on an H200 at batch 1
 * and 32 (bench/results/2026-12-01-gpu-s3-conv2-tune.txt: this rule picks
 * the measured winner, or one within 16% of it, for all 46):
 *  - a pointwise conv of 128 or more channels whose 128 x 128 tiles number
 *    52 or more: the matmul's TMA kernel, persistent, staged stores (it
 *    beat the gather by 10-30% there; at 64 channels half its tile idles);
 *  - else the first wgmma-conv tile that makes 90 or more tiles: 256 x 128
 *    (4 warpgroups; where K >= 1024, else it lost to 128 x 128), 128 x 128,
 *    128 x 64, 64 x 128, never 128 columns for fewer channels;
 *  - else 64 x 64 tiles, K split 4 ways when they number 66 or fewer over
 *    16 or more K tiles (4 splits beat 2, 8 and 16 wherever a split won:
 *    10.8 us against 22.7 for 8 at 7 x 7 x 512 -> 512). */
static void wgc_default(const kf_mm_shape *sh, kf_mm_config *c)
{
	if (sh->pw && sh->N >= 128 && tiles_of(sh, "wg128x128x64s4pvs", c) >= 52 && kx_mm_config_fits(c, sh))
		return;
	static const struct {
		const char *t;
		int64_t min_k, min_n;
	} tl[] = {{"wgc256x128x64s4s", 1024, 128}, {"wgc128x128x64s4s", 0, 128}, {"wgc128x64x64s6s", 0, 0},
		  {"wgc64x128x64s6s", 0, 128}};
	for (size_t i = 0; i < sizeof tl / sizeof *tl; i++)
		if (sh->K >= tl[i].min_k && sh->N >= tl[i].min_n && tiles_of(sh, tl[i].t, c) >= 90 &&
		    kx_mm_config_fits(c, sh))
			return;
	int64_t t64 = tiles_of(sh, "wgc64x64x64s8s", c);
	if (t64 <= 66 && (sh->K + 63) / 64 >= 16 && kf_mm_config_parse("wgc64x64x64s6k4s", c) == 0 &&
	    kx_mm_config_fits(c, sh))
		return;
	kf_mm_config_parse("wgc64x64x64s8s", c);
}

void kf_conv_own_default(const kf_mm_shape *sh, kf_mm_config *c)
{
	if (sh->wgmma > 0 && (sh->in == KF_F16 || sh->in == KF_BF16) && sh->raw) {
		wgc_default(sh, c);
		if (kx_mm_config_fits(c, sh))
			return;
	}
	if (kx_mm_mma_dtype(sh) && sh->K >= 16) {
		/* the largest tile that still gives most of the 132 SMs of an
		 * H100/H200 a block (a 7 x 7 map at batch 1 has 49 rows), never
		 * 128 columns for 64 channels; else the smallest, split along K */
		static const char *const tl[] = {"mma128x128x32w2x4s3", "mma128x64x32w2x2s4", "mma64x128x32w2x2s4",
						 "mma64x64x32w2x2s4", "mma32x64x32w1x2s4", "mma32x32x32w1x1s4"};
		kf_mm_config best;
		kf_mm_config_parse(tl[0], &best);
		for (size_t i = 0; i < sizeof tl / sizeof *tl; i++) {
			int64_t n = tiles_of(sh, tl[i], c);
			if (!kx_mm_config_fits(c, sh) || (sh->N <= 64 && c->bn > 64))
				continue;
			best = *c;
			if (n >= 120)
				break;
		}
		/* few tiles over a long K: split 4 ways, as the wgmma conv
		 * (unmeasured for mma.sync itself: an H200 runs the wgmma one) */
		if (tiles_of(sh, "mma64x64x32w2x2s4k4", c) <= 66 && sh->K >= 1024 && kx_mm_config_fits(c, sh))
			return;
		*c = best;
		return;
	}
	kf_mm_config_parse(sh->M >= 64 && sh->N >= 64 ? "fma64x64x16t4x4" : "fma32x32x16t2x2", c);
}

/* A conv's candidates: the wgmma conv (tiles by the rows and channels
 * they cover, stages, split-K for few tiles over a long K), the matmul's
 * TMA kernel where the conv is pointwise, mma.sync with and without
 * split-K. */
static int conv_candidates(const kf_mm_shape *sh, char (*out)[32], int max)
{
	static const char *const all[] = {
		"wgc128x128x64s4s", "wgc128x128x64s6s", "wgc128x64x64s6s", "wgc128x256x64s4s", "wgc256x128x64s4s",
		"wgc64x128x64s6s", "wgc64x64x64s8s", "wgc128x128x64s4v",
		/* few stages: two blocks a multiprocessor, one's epilogue under
		 * the other's K loop (for a short K: the stem, 1x1 convs) */
		"wgc128x64x64s3s", "wgc128x128x64s3s", "wgc64x64x64s4s",
		"wgc64x64x64s6k2s", "wgc64x64x64s6k4s", "wgc64x64x64s6k8s", "wgc64x128x64s6k4s", "wgc64x128x64s6k8s",
		"wgc64x64x64s6k16s", "wgc128x64x64s6k2s", "wgc128x128x64s4k2s",
		"wg128x128x64s4pvs", "wg128x256x64s4c2pvs", "wg64x128x64s8v",
		"mma128x128x32w2x4s3", "mma128x64x32w2x2s4", "mma64x128x32w2x2s4", "mma64x64x32w2x2s4",
		"mma64x64x32w2x2s4k4", "mma64x64x32w2x2s4k8", "mma32x64x32w1x2s4k8",
		"fma64x64x16t4x4", "fma32x32x16t2x2",
	};
	int n = 0;
	for (size_t i = 0; i < sizeof all / sizeof *all && n < max; i++) {
		kf_mm_config c;
		kf_mm_config_parse(all[i], &c);
		int64_t tiles = ((sh->M + c.bm - 1) / c.bm) * ((sh->N + c.bn - 1) / c.bn);
		/* tensor-core shapes try no SIMT tiles; a split only where the
		 * tiles leave most of the SMs idle */
		if (!kx_mm_config_fits(&c, sh) || (c.algo == KF_MM_FMA && kx_mm_mma_dtype(sh)) ||
		    (c.sk > 1 && tiles * c.sk > 4 * KF_MM_SMS) || (c.sk > 1 && tiles >= KF_MM_SMS) ||
		    ((c.algo == KF_MM_WG || c.algo == KF_MM_WGC) && sh->wgmma <= 0))
			continue;
		snprintf(out[n++], 32, "%s", all[i]);
	}
	return n;
}

int kf_mm_candidates(const kf_mm_shape *sh, char (*out)[32], int max)
{
	if (sh->conv)
		return conv_candidates(sh, out, max);
	static const char *const all[] = {
		/* "s" (staged epilogue) beside the default, untimed on a device yet */
		"wg128x256x64s4c2pvs", "wg128x256x64s3pvs", "wg128x256x64s4pvs", "wg128x256x64s4pv", "wg128x256x64s4v", "wg128x256x64s3v", "wg128x256x64s4",
		"wg128x128x64s4pvs", "wg128x128x64s4pv", "wg128x256x64s3pvse", "wg128x128x64s4pvse", "wg128x128x64s6ppvs",
		"wg64x256x64s4ppvs",
		"wg128x128x64s4v", "wg128x128x64s6v",
		"wg128x128x64s4", "wg64x256x64s6v", "wg64x128x64s8v", "mma128x128x32w2x4s3", "mma128x128x32w2x4s4", "mma128x256x32w2x4s3", "mma256x128x32w4x2s3",
		"mma128x128x64w2x4s3", "mma128x64x32w2x2s4", "mma64x128x32w2x2s4", "mma64x64x32w2x2s4",
		"mma64x256x32w1x4s3", "mma128x128x16w2x4s4", "fma64x64x16t4x4", "fma128x128x8t8x8",
		"fma128x64x16t8x4", "fma32x32x16t2x2", "gemv", "gemvk1", "gemvk2", "gemvk4", "gemvk8", "gemvk16",
		"gemvk32", "gemvk64", "gemvk16u8", "gemvk32u8", "gemvk64u8", "gemvk128u4", "gemvk2u8", "gemvk4u8",
		"gemvk8u8", "gemvc", "gemvcu4", "gemvcu16",
		/* split-K, for few tiles over a long K (M up to 256) */
		"fma32x32x16t2x2k4", "fma32x32x16t2x2k8", "fma64x64x16t4x4k4", "fma64x64x16t4x4k8",
		"mma64x64x32w2x2s4k4", "mma64x64x32w2x2s4k8", "mma32x64x32w1x2s4k4", "mma32x64x32w1x2s4k8",
		/* the wgmma kernel split over a cluster (emit_wg_splitk.c): level
		 * with cuBLAS + epilogue at best (a narrow N over a long K), slower
		 * elsewhere at M 64 to 512 (s12a), so only these two */
		"wg128x128x64s4k2s", "wg128x128x64s4k4s",
		/* M of 65 to 128 over a large weight (mem_bound_tile): the two M
		 * tiles sharing B, the 64 x 64 split */
		"wg64x128x64s8c2s", "wg64x64x64s8k2s",
	};
	int n = 0;
	bool gemv = sh->M == 1 && sh->batch == 1 && kf_dtype_is_float(sh->in);
	for (size_t i = 0; i < sizeof all / sizeof *all && n < max; i++) {
		kf_mm_config c;
		kf_mm_config_parse(all[i], &c);
		/* tensor-core shapes do not try SIMT tiles (a loss by 10x), and
		 * GEMV shapes try only GEMV (B [N, K]: warps per output up to 8) */
		if (!kx_mm_config_fits(&c, sh) || (c.algo == KF_MM_FMA && (kx_mm_mma_dtype(sh) || gemv)) || (c.sk > 1 && sh->M > 256) ||
		    (c.algo == KF_MM_MMA && gemv) || (c.algo == KF_MM_WG && (gemv || sh->wgmma <= 0)) ||
		    (c.bulk && sh->wgmma <= 0))
			continue;
		snprintf(out[n++], 32, "%s", all[i]);
	}
	return n;
}

void kf_mm_shape_key(const kf_mm_shape *sh, const char *arch, char *out, size_t n)
{
	snprintf(out, n, "%s:%s%s>%s:b%lld:m%lld:n%lld:k%lld:%c%c%s%s%s%s", arch, kf_dtype_name(sh->in),
		 sh->tf32 ? "+tf32" : "", kf_dtype_name(sh->out), (long long)sh->batch, (long long)sh->M,
		 (long long)sh->N, (long long)sh->K, sh->ta ? 't' : 'n', sh->tb ? 't' : 'n', sh->conv ? ":conv" : "",
		 sh->conv ? sh->geo : "", sh->tag[0] ? ":" : "", sh->tag);
}
