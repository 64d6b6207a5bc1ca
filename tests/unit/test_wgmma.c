/* Unit tests of the Hopper wgmma contraction kernel (cuda/emit_wgmma.c):
 * its configs, when it is chosen and when the mma.sync kernel runs instead,
 * the tensor maps it asks for, a host model of its shared-memory layouts
 * (what TMA writes with 128-byte swizzle against what the wgmma matrix
 * descriptors read) and of the accumulator fragment, and, where NVRTC is
 * installed, its compilation for sm_90a with ptxas's report: no spills, no
 * stack, registers within the cap.  No GPU needed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "kf_test.h"
#include "kf_test_nvrtc.h"

#include "cuda.h"
#include "cuda_backend.h"
#include "interp.h"
#include "emit_cuda.h"
#include "emit_matmul.h"
#include "kf.h"
#include "pass.h"
#include "passes.h"

/* gelu_tanh(x @ w + b), f16, M x N x K; w stored [K, N], or [N, K] when wt */
static char *mm_text(int M, int N, int K, bool wt)
{
	static char t[1024];
	if (wt)
		snprintf(t, sizeof t,
			 "graph @g(%%x: f16[%d,%d], %%w: f16[%d,%d], %%b: f16[%d]) -> (f16[%d,%d]) {\n"
			 "  %%t = transpose(%%w) {perm = [1, 0]} : f16[%d,%d]\n"
			 "  %%m = matmul(%%x, %%t) : f16[%d,%d]\n"
			 "  %%a = add(%%m, %%b) : f16[%d,%d]\n"
			 "  %%y = gelu(%%a) {approximate = \"tanh\"} : f16[%d,%d]\n  return %%y\n}\n",
			 M, K, N, K, N, M, N, K, N, M, N, M, N, M, N);
	else
		snprintf(t, sizeof t,
			 "graph @g(%%x: f16[%d,%d], %%w: f16[%d,%d], %%b: f16[%d]) -> (f16[%d,%d]) {\n"
			 "  %%m = matmul(%%x, %%w) : f16[%d,%d]\n"
			 "  %%a = add(%%m, %%b) : f16[%d,%d]\n"
			 "  %%y = gelu(%%a) {approximate = \"tanh\"} : f16[%d,%d]\n  return %%y\n}\n",
			 M, K, K, N, N, M, N, M, N, M, N, M, N);
	return t;
}

static void test_configs(void **state)
{
	(void)state;
	kf_mm_config cf;
	const char *good[] = {"wg128x256x64s4", "wg64x128x64s8", "wg128x128x64s2"};
	for (int i = 0; i < 3; i++) {
		kft_mm_config(good[i], &cf);
		assert_int_equal(cf.algo, KF_MM_WG);
	}
	const char *bad[] = {"wg128x256x32s4", "wg96x256x64s4", "wg128x320x64s4", "wg128x96x64s4", "wg128x256x64s9",
			     "wg128x256x64s1", "wg128x256x64", "wg128x256x64s4c3", "wg128x256x64s4c8",
			     "wg128x256x64s4c", "wg128x256x64s4c2x", "wg128x192x64s4c2", "wg128x128x64s4c1"};
	for (int i = 0; i < 13; i++)
		assert_int_equal(kf_mm_config_parse(bad[i], &cf), -1);
	assert_int_equal(kf_mm_config_parse("wg128x256x64s4vc2", &cf), -1);
	assert_int_equal(kf_mm_config_parse("wg128x256x64s4vv", &cf), -1);
	const char *cgood[] = {"wg128x256x64s4c2", "wg128x128x64s4c4", "wg64x64x64s8c4", "wg128x128x64s4c2v", "wg128x128x64s4v"};
	for (int i = 0; i < 5; i++) {
		kft_mm_config(cgood[i], &cf);
		assert_int_equal(cf.vs, strchr(cgood[i], 'v') != NULL);
		assert_int_equal(cf.cl, strchr(cgood[i], 'c') ? strchr(cgood[i], 'c')[1] - '0' : 0);
	}
	/* "p" (persistent): after c (never with it), before v */
	const char *pgood[] = {"wg128x256x64s4p", "wg128x256x64s4pv", "wg128x128x64s4pv", "wg64x128x64s8pv"};
	for (int i = 0; i < 4; i++) {
		kft_mm_config(pgood[i], &cf);
		assert_true(cf.ps == 1 && cf.cl == 0 && cf.vs == (strchr(pgood[i], 'v') != NULL));
	}
	const char *pbad[] = {"wg128x256x64s4vp", "wg128x256x64s4pp", "wg128x256x64s4c2pp", "wg128x256x64s4pc2",
			      "wg128x256x64s4p2", "wg128x256x64s4pvx"};
	for (int i = 0; i < 6; i++)
		assert_int_equal(kf_mm_config_parse(pbad[i], &cf), -1);
	assert_int_equal(kf_mm_config_parse("wg128x256x64s4v", &cf), 0);
	assert_int_equal(cf.ps, 0);
	/* clusters walking tiles in step: "cNp" */
	const char *cpgood[] = {"wg128x256x64s3c2pvs", "wg128x128x64s4c4pv", "wg64x128x64s8c2p"};
	for (int i = 0; i < 3; i++) {
		kft_mm_config(cpgood[i], &cf);
		assert_true(cf.ps && cf.cl > 1 && !cf.pp);
	}
	assert_int_equal(kf_mm_config_parse("wg128x256x64s3c2pvse", &cf), -1);
	/* "s" (staged epilogue): last; the staging columns what fits 227 KiB */
	const struct {
		const char *t;
		int sc;
	} sg[] = {{"wg128x256x64s4pvs", 128}, {"wg128x128x64s4pvs", 128}, {"wg128x256x64s3pvs", 256},
		  {"wg128x256x64s4s", 128}, {"wg128x128x64s4c2vs", 128}, {"wg64x128x64s8pvs", 128},
		  {"wg128x64x64s8pvs", 64}};
	for (int i = 0; i < 7; i++) {
		kft_mm_config(sg[i].t, &cf);
		assert_int_equal(cf.ss, 1);
		assert_int_equal(kf_wg_stage_cols(&cf), sg[i].sc);
		assert_true(kf_wg_smem(&cf) + 1024 <= 227 * 1024);
	}
	const char *sbad[] = {"wg128x256x64s4sv", "wg128x256x64s4pvss", "wg128x256x64s4sp", "wg128x256x64s6pvs"};
	for (int i = 0; i < 4; i++)
		assert_int_equal(kf_mm_config_parse(sbad[i], &cf), -1);
	assert_int_equal(kf_mm_config_parse("wg128x256x64s4pv", &cf), 0);
	assert_int_equal(kf_wg_stage_cols(&cf), 0);
	/* "pp" (ping-pong): two consumers of whole tiles, at most 128 x 128
	 * (128 accumulators a thread); staging for both */
	const struct {
		const char *t;
		int sc, smem;
	} pp[] = {{"wg128x128x64s5ppvs", 128, 5 * 32768 + 2 * 64 * 128 * 2 + 1024},
		  {"wg128x128x64s6ppvs", 128, 6 * 32768 + 2 * 64 * 128 * 2 + 1024},
		  {"wg64x256x64s4ppv", 0, 4 * 40960 + 1024},
		  {"wg128x64x64s8pp", 0, 8 * 24576 + 1024}};
	for (int i = 0; i < 4; i++) {
		kft_mm_config(pp[i].t, &cf);
		assert_true(cf.ps && cf.pp && !cf.cl);
		assert_int_equal(kf_wg_consumers(&cf), 2);
		assert_int_equal(kf_wg_stage_cols(&cf), pp[i].sc);
		assert_int_equal(kf_wg_smem(&cf), pp[i].smem);
	}
	const char *ppbad[] = {"wg128x256x64s3ppvs", "wg128x128x64s4ppp", "wg128x128x64s4c2pp", "wg128x128x64s7ppvs",
			       "wg128x128x64s4pvp"};
	for (int i = 0; i < 5; i++)
		assert_int_equal(kf_mm_config_parse(ppbad[i], &cf), -1);
	assert_int_equal(kf_mm_config_parse("wg128x256x64s3pvs", &cf), 0);
	assert_int_equal(kf_wg_consumers(&cf), 2);
	/* "e" (epilogue warps): after s, with p, the whole tile staged */
	const char *egood[] = {"wg128x256x64s3pvse", "wg128x128x64s4pvse", "wg128x128x64s4pse"};
	for (int i = 0; i < 3; i++) {
		kft_mm_config(egood[i], &cf);
		assert_true(cf.ew && cf.ss && cf.ps && !cf.pp);
		assert_int_equal(kf_wg_stage_cols(&cf), cf.bn);
	}
	const char *ebad[] = {"wg128x256x64s4pvse", "wg128x256x64s3vse", "wg128x128x64s4ppvse", "wg128x128x64s4pve",
			      "wg128x128x64s4pvsee", "wg128x128x64s4pves"};
	for (int i = 0; i < 6; i++)
		assert_int_equal(kf_mm_config_parse(ebad[i], &cf), -1);
	assert_int_equal(kf_mm_config_parse("wg64x128x64s8pv", &cf), 0);
	assert_int_equal(kf_wg_consumers(&cf), 1);
	/* wg tiles are candidates only where the device has them; first */
	char cand[32][32];
	kf_mm_shape sh = {.in = KF_F16, .out = KF_F16, .batch = 1, .M = 512, .N = 4096, .K = 4096, .raw = true};
	int n = kf_mm_candidates(&sh, cand, 32), wg = 0;
	for (int i = 0; i < n; i++)
		wg += !strncmp(cand[i], "wg", 2);
	assert_int_equal(wg, 0);
	sh.wgmma = 1;
	n = kf_mm_candidates(&sh, cand, 32);
	assert_string_equal(cand[0], "wg128x256x64s4c2pvs");
	for (int i = 0; i < n; i++)
		if (!strncmp(cand[i], "wg", 2)) {
			kf_mm_config_parse(cand[i], &cf); /* every one fits 227 KiB */
			assert_true(kf_wg_smem(&cf) + 1024 <= 227 * 1024);
			wg++;
		}
	assert_true(wg >= 4);
	/* the persistent tiles are candidates, before their one-shot twins */
	assert_string_equal(cand[1], "wg128x256x64s3pvs");
	assert_string_equal(cand[2], "wg128x256x64s4pvs");
	assert_string_equal(cand[3], "wg128x256x64s4pv");
	int pv = 0;
	for (int i = 0; i < n; i++)
		pv += !strcmp(cand[i], "wg128x128x64s4pv");
	assert_int_equal(pv, 1);
	/* not for batches, a prologue, f32, or rows that are not 16-byte multiples */
	kf_mm_shape no[4] = {sh, sh, sh, sh};
	no[0].batch = 2;
	no[1].raw = false;
	no[2].in = KF_F32, no[2].tf32 = true;
	no[3].N = 4100;
	for (int j = 0; j < 4; j++) {
		n = kf_mm_candidates(&no[j], cand, 32);
		for (int i = 0; i < n; i++)
			assert_true(strncmp(cand[i], "wg", 2) != 0);
	}
}

/* The default on an sm_90 target: 128 x 256 at 4096^3 in clusters of 2
 * (B multicast), 128 x 128 at M = 512, both persistent (one CTA per SM of
 * an H200, at most one per tile), the epilogue staged in shared memory
 * (the ring of 4 stages, then half the tile at a time). */
static void test_choice(void **state)
{
	(void)state;
	kf_kernel k;
	kft_emit_contraction(mm_text(4096, 4096, 4096, false), 1, NULL, &k);
	assert_true(k.sm90a);
	assert_int_equal(k.block, 384);
	assert_int_equal(k.units * k.grid_y, 132);
	kf_mm_config cf;
	kf_mm_config_parse("wg128x256x64s4c2pvs", &cf);
	assert_int_equal(k.smem, kf_wg_smem(&cf));
	assert_int_equal(k.cluster, 2);
	assert_true(k.smem >= 4 * 384 * 128 + 2 * 64 * 128 * 2 && k.smem <= 227 * 1024);
	assert_non_null(strstr(k.src, "m64n256k16.f32.f16.f16"));
	assert_non_null(strstr(k.src, "__launch_bounds__(384, 1)"));
	assert_non_null(strstr(k.src, "const __grid_constant__ KfTmap tm0, const __grid_constant__ KfTmap tm1)"));
	/* A [M, K]: box 64 x 128; B [K, N]: boxes of 64 x 64 (N-major) */
	assert_int_equal(k.ntmap, 2);
	assert_int_equal(k.tmap[0].param, 0);
	assert_true(k.tmap[0].inner == 4096 && k.tmap[0].outer == 4096);
	assert_true(k.tmap[0].box_inner == 64 && k.tmap[0].box_outer == 128);
	assert_true(k.tmap[1].param == 1 && k.tmap[1].box_inner == 64 && k.tmap[1].box_outer == 64);
	kf_kernel_free(&k);
	kft_emit_contraction(mm_text(512, 4096, 4096, false), 1, NULL, &k);
	assert_true(k.sm90a);
	assert_int_equal(k.units * k.grid_y, 128);
	assert_non_null(strstr(k.src, "m64n128k16"));
	kf_kernel_free(&k);
	/* unknown target: the mma.sync default, a wg tile asked for is emitted */
	kft_emit_contraction(mm_text(512, 4096, 4096, false), 0, NULL, &k);
	assert_false(k.sm90a);
	assert_int_equal(k.ntmap, 0);
	kf_kernel_free(&k);
	kft_emit_contraction(mm_text(512, 4096, 4096, false), 0, "wg64x128x64s8", &k);
	assert_true(k.sm90a);
	assert_int_equal(k.block, 256);
	kf_kernel_free(&k);
	/* a device without wgmma: the tile is passed over */
	kft_emit_contraction(mm_text(512, 4096, 4096, false), -1, "wg128x128x64s6", &k);
	assert_false(k.sm90a);
	assert_non_null(strstr(k.src, "mma.sync"));
	kf_kernel_free(&k);
	/* a prologue (cast) and odd row lengths fall back to mma.sync */
	kft_emit_contraction("graph @g(%x: f32[512,256], %w: f16[256,512]) -> (f16[512,512]) {\n"
	     "  %h = cast(%x) {to = \"f16\"} : f16[512,256]\n"
	     "  %m = matmul(%h, %w) : f16[512,512]\n  return %m\n}\n",
	     1, "wg128x128x64s6", &k);
	assert_false(k.sm90a);
	kf_kernel_free(&k);
	kft_emit_contraction(mm_text(512, 4092, 256, false), 1, "wg128x128x64s6", &k);
	assert_false(k.sm90a);
	kf_kernel_free(&k);
	/* B stored [N, K]: K-major B, one box of 64 x BN */
	kft_emit_contraction(mm_text(512, 4096, 4096, true), 1, "wg128x128x64s6", &k);
	assert_true(k.sm90a);
	assert_true(k.tmap[1].inner == 4096 && k.tmap[1].box_outer == 128);
	assert_non_null(strstr(k.src, "_t0(acc, da, db)"));
	assert_non_null(strstr(k.src, "kf_wg_desc(sb + kk * 32, 16, 1024)"));
	kf_kernel_free(&k);
}

/* ---- a host model of the layouts ------------------------------------------------- */

/* The 128-byte swizzle (CUTLASS Swizzle<3,4,3>) on a shared address: the
 * 16-byte chunk index (bits 4-6) XOR the 128-byte row index (bits 7-9). */
static unsigned swz(unsigned a) { return a ^ (((a >> 7) & 7) << 4); }

/* Where TMA puts element (row, e) of a box with 64-element (128-byte)
 * rows at base (1024-aligned): row-major, then swizzled. */
static unsigned tma_at(unsigned base, int row, int e) { return swz(base + (unsigned)row * 128 + (unsigned)e * 2); }

/* Where wgmma reads element (mn, k) of one m64nNk16 operand, from the
 * canonical SW128 layouts of the descriptor (start, LBO, SBO):
 * K-major ((8,m),(8,2)) : ((128B, SBO), (16B... in 2-byte elements));
 * MN-major ((64,m),(8,k)) : ((2B, LBO), (128B, SBO)). */
static unsigned wg_kmajor(unsigned start, unsigned sbo, int mn, int k)
{
	return swz(start + (unsigned)(mn % 8) * 128 + (unsigned)(mn / 8) * sbo + (unsigned)k * 2);
}
static unsigned wg_mnmajor(unsigned start, unsigned lbo, unsigned sbo, int mn, int k)
{
	return swz(start + (unsigned)(mn % 64) * 2 + (unsigned)(mn / 64) * lbo + (unsigned)(k % 8) * 128 +
		   (unsigned)(k / 8) * sbo);
}

/* The descriptor steps the emitter uses, against the TMA placement, for
 * every element of every k-step: A (K-major, 128 rows, consumer cw at
 * +8 KiB), B stored [N, K] (K-major, BN rows), B stored [K, N] (BN / 64
 * boxes of 64 k-rows x 64 n, 8 KiB apart). */
static void test_layout_model(void **state)
{
	(void)state;
	const unsigned base = 3 * 1024 + 65536;
	for (int kk = 0; kk < 4; kk++)
		for (int cw = 0; cw < 2; cw++)
			for (int m = 0; m < 64; m++)
				for (int k = 0; k < 16; k++)
					assert_int_equal(wg_kmajor(base + (unsigned)cw * 8192 + (unsigned)kk * 32, 1024, m, k),
							 tma_at(base, cw * 64 + m, kk * 16 + k));
	for (int kk = 0; kk < 4; kk++)
		for (int n = 0; n < 256; n++)
			for (int k = 0; k < 16; k++) {
				assert_int_equal(wg_kmajor(base + (unsigned)kk * 32, 1024, n, k), tma_at(base, n, kk * 16 + k));
				/* [K, N]: element (k, n) in box n / 64, row k, column n % 64 */
				assert_int_equal(wg_mnmajor(base + (unsigned)kk * 2048, 8192, 1024, n, k),
						 tma_at(base + (unsigned)(n / 64) * 8192, kk * 16 + k, n % 64));
			}
	/* the accumulator fragment of m64nNk16 (PTX ISA): every (row, col) of
	 * the 64 x 256 tile once over the 128 threads x 128 registers, and
	 * each thread's pairs (i, i + 1) adjacent columns of one row */
	static unsigned char seen[64][256];
	memset(seen, 0, sizeof seen);
	for (int t = 0; t < 128; t++)
		for (int i = 0; i < 128; i++) {
			int warp = t / 32, lane = t % 32;
			int row = warp * 16 + lane / 4 + ((i >> 1) & 1) * 8, col = (i >> 2) * 8 + (lane & 3) * 2 + (i & 1);
			assert_true(row < 64 && col < 256);
			seen[row][col]++;
		}
	for (int r = 0; r < 64; r++)
		for (int c = 0; c < 256; c++)
			assert_int_equal(seen[r][c], 1);
}

/* The cluster's share of B (kf_wg_bpieces): for every tile width, layout
 * and cluster size, the pieces of all ranks cover the stage's B tile once,
 * each element where the unsplit load (one CTA, no cluster) puts it, and
 * every CTA loads the same number of bytes. */
static void test_cluster_model(void **state)
{
	(void)state;
	const unsigned base = 5 * 1024 + 65536;
	static unsigned char seen[256][64];
	for (int bn = 64; bn <= 256; bn += 64)
		for (int km = 0; km < 2; km++)
			for (int cl = 1; cl <= 4; cl *= 2) {
				int bi, bo;
				kf_wg_piece pc[8];
				if (kf_wg_bpieces(bn, km, cl, 0, &bi, &bo, pc) < 0) {
					assert_true(bn == 192 && cl > 1 && !km); /* 3 boxes do not split in 2 or 4 */
					continue;
				}
				memset(seen, 0, sizeof seen);
				int bytes0 = -1;
				for (int r = 0; r < cl; r++) {
					int np = kf_wg_bpieces(bn, km, cl, r, &bi, &bo, pc), bytes = 0;
					assert_true(np >= 1 && np <= 4 && bi == 64);
					for (int p = 0; p < np; p++) {
						assert_int_equal(pc[p].off % 1024, 0); /* whole swizzle atoms */
						for (int row = 0; row < bo; row++)
							for (int e = 0; e < bi; e++) {
								int n = km ? pc[p].n0 + row : pc[p].n0 + e;
								int k = km ? pc[p].k0 + e : pc[p].k0 + row;
								assert_true(n < bn && k < 64);
								unsigned whole = km ? tma_at(base, n, k)
										    : tma_at(base + (unsigned)(n / 64) * 8192, k, n % 64);
								assert_int_equal(tma_at(base + (unsigned)pc[p].off, row, e), whole);
								seen[n][k]++;
								bytes += 2;
							}
					}
					assert_true(bytes0 < 0 || bytes == bytes0);
					bytes0 = bytes;
				}
				for (int n = 0; n < bn; n++)
					for (int k = 0; k < 64; k++)
						assert_int_equal(seen[n][k], 1);
			}
	assert_int_equal(kf_wg_bpieces(128, false, 2, 2, &(int){0}, &(int){0}, NULL), -1); /* rank out of range */
	/* the kernel: M tiles rounded up to whole clusters, the cluster
	 * compiled in, B's box the share of one CTA, the release on every
	 * CTA's barrier (one arrival per consumer warp per CTA) */
	kf_kernel k;
	kft_emit_contraction(mm_text(300, 200, 72, false), 1, "wg128x128x64s4c4", &k);
	assert_int_equal(k.grid_y, 4);
	assert_int_equal(k.cluster, 4);
	assert_non_null(strstr(k.src, "__launch_bounds__(384, 1) __cluster_dims__(1, 4, 1)"));
	assert_true(k.tmap[1].box_inner == 64 && k.tmap[1].box_outer == 32);
	assert_non_null(strstr(k.src, "kf_mbar_init(bar_empty + s * 8, 32)"));
	assert_non_null(strstr(k.src, "lane < 4) kf_mbar_arrive_cl("));
	/* the remote release without a cluster-scope fence in the k-loop */
	assert_non_null(strstr(k.src, "mbarrier.arrive.shared::cluster.b64 _, [ra];"));
	assert_null(strstr(k.src, "release.cluster.shared::cluster"));
	assert_non_null(strstr(k.src, "kf_tma2d_mc(sb + 12288, &tm1, bn + 64, kt * 64 + 32"));
	kf_kernel_free(&k);
	kft_emit_contraction(mm_text(300, 200, 72, true), 1, "wg128x256x64s4c2", &k);
	assert_int_equal(k.grid_y, 4);
	assert_true(k.tmap[1].box_outer == 128);
	assert_non_null(strstr(k.src, "kf_tma2d_mc(sb + 16384, &tm1, kt * 64 + 0, bn + 128"));
	kf_kernel_free(&k);
	/* "v": the paired epilogue, a 4-byte store where aligned, 2-byte ones
	 * otherwise (N odd: every other row starts at an odd column) */
	kft_emit_contraction(mm_text(300, 201, 72, true), 1, "wg128x128x64s4c2v", &k);
	assert_non_null(strstr(k.src, "for (int i = 0; i < 64; i += 2)"));
	assert_non_null(strstr(k.src, "_epi2(p0, p1, p2, o0, 0, row, col, acc[i], acc[i + 1]);"));
	assert_non_null(strstr(k.src, "if (colp + 1 < 201 && !((unsigned long long)(o0 + off) & 3))"));
	assert_non_null(strstr(k.src, "if (colp + 1 < 201) kf_"));
	assert_non_null(strstr(k.src, "_epi(p0, p1, p2, o0, z, row, colp + 1, accp1);"));
	kf_kernel_free(&k);
	kft_emit_contraction(mm_text(300, 200, 72, true), 1, "wg128x256x64s4", &k);
	assert_int_equal(k.grid_y, 3);
	assert_int_equal(k.cluster, 0);
	assert_null(strstr(k.src, "__cluster_dims__"));
	kf_kernel_free(&k);
}

/* "kK": split-K over a cluster along y.  Configs: only "s" after kK, K in
 * 2..8; the kernel: M tiles times K CTAs along y, the cluster compiled in,
 * every split a balanced range of K tiles, the partial written and read
 * at the same swizzled offsets (each 4-byte slot of the tile once, each
 * 16-byte read inside one row's chunk), the ranks summed in order, and
 * only the CTA's share of pieces stored; the sums' stores 16 bytes at a
 * time with "s", else element by element. */
static void test_splitk(void **state)
{
	(void)state;
	kf_mm_config cf;
	const char *bad[] = {"wg128x128x64s4k1", "wg128x128x64s4k9", "wg128x128x64s4k4p", "wg128x128x64s4k4v",
			     "wg128x128x64s4k4c2", "wg128x128x64s4c2k4", "wg128x128x64s4k04", "wg128x128x64s4k4se"};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
		assert_int_equal(kf_mm_config_parse(bad[i], &cf), -1);
	const char *good[] = {"wg128x128x64s4k4s", "wg64x128x64s8k2", "wg128x256x64s3k8s", "wg128x64x64s6k3"};
	for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
		char t[32];
		assert_int_equal(kf_mm_config_parse(good[i], &cf), 0);
		kf_mm_config_text(&cf, t, sizeof t);
		assert_string_equal(t, good[i]);
	}
	/* smem: the larger of the ring and the f32 partial tile */
	kf_mm_config_parse("wg128x256x64s2k4", &cf);
	assert_int_equal(kf_wg_smem(&cf), 128 * 256 * 4 + 1024);
	/* the partial's layout: every slot of a 128 x 128 tile written once by
	 * the accumulator pairs, found again by the chunk reads */
#define KF_WGK_OFF(row, col, bn) ((row) * (bn) * 4 + ((((col) >> 2) ^ ((row) & 7)) << 4) + ((col) & 3) * 4)
	static unsigned char seen[128 * 128];
	memset(seen, 0, sizeof seen);
	for (int row = 0; row < 128; row++)
		for (int col = 0; col < 128; col += 2) {
			unsigned o = KF_WGK_OFF(row, col, 128);
			assert_int_equal(o % 8, 0);
			assert_int_equal(KF_WGK_OFF(row, col + 1, 128), o + 4);
			assert_true(o / 512 == (unsigned)row);
			seen[o / 4]++, seen[o / 4 + 1]++;
		}
	for (int i = 0; i < 128 * 128; i++)
		assert_int_equal(seen[i], 1);
	for (int row = 0; row < 128; row++)
		for (int cc = 0; cc < 128; cc += 4)
			for (int e = 0; e < 4; e++)
				assert_int_equal(KF_WGK_OFF(row, cc, 128) + 4 * e, KF_WGK_OFF(row, cc + e, 128));
#undef KF_WGK_OFF
	kf_kernel k;
	kft_emit_contraction(mm_text(128, 5632, 2048, false), 1, "wg128x128x64s4k4s", &k);
	assert_int_equal(k.grid_y, 4);
	assert_int_equal(k.units, 44);
	assert_int_equal(k.cluster, 4);
	assert_int_equal(k.smem, 4 * 256 * 128 + 1024);
	assert_non_null(strstr(k.src, "__cluster_dims__(1, 4, 1)"));
	assert_non_null(strstr(k.src, "const int kt0 = ks * 32 / 4, kt1 = (ks + 1) * 32 / 4;"));
	assert_non_null(strstr(k.src, "for (int kt = kt0; kt < kt1; kt++)"));
	assert_non_null(strstr(k.src, "if (kt > kt0 && lane == 0) kf_mbar_arrive("));
	assert_non_null(strstr(k.src, "for (int q = ks * 2048 / 4 + (int)threadIdx.x - 128; q < (ks + 1) * 2048 / 4; q += 256)"));
	assert_non_null(strstr(k.src, "for (int r = 1; r < 4; r++)"));
	assert_non_null(strstr(k.src, "*(uint4 *)(o0 + off)"));
	assert_null(strstr(k.src, "KF_KERNEL_epi("));
	kf_kernel_free(&k);
	/* M not a tile's multiple, N odd, no "s": element by element */
	kft_emit_contraction(mm_text(100, 201, 1000, true), 1, "wg64x128x64s8k3", &k);
	assert_int_equal(k.grid_y, 2 * 3);
	assert_int_equal(k.cluster, 3);
	assert_non_null(strstr(k.src, "const int kt0 = ks * 16 / 3, kt1 = (ks + 1) * 16 / 3;"));
	assert_non_null(strstr(k.src, "if (row >= 100) break;"));
	assert_non_null(strstr(k.src, "if (col + e < 201) "));
	kf_kernel_free(&k);
	/* more splits than K tiles: not this config (another kernel runs) */
	kft_emit_contraction(mm_text(128, 512, 192, false), 1, "wg128x128x64s4k4", &k);
	assert_int_equal(k.cluster, 0);
	kf_kernel_free(&k);
	kft_emit_contraction(mm_text(128, 512, 256, false), 1, "wg128x128x64s4k4", &k);
	assert_int_equal(k.cluster, 4);
	kf_kernel_free(&k);
}

/* The persistent schedule: CTA b of g takes tiles b, b + g, ... placed by
 * kf_wg_raster; across the CTAs every (M tile, N tile) comes exactly once,
 * and inside a group of 8 M tiles the order sweeps N with M fastest. */
/* "s": the staging tile's index math (emit_matmul.h, the device's text):
 * the accumulator writes cover every 4-byte slot once, a warp's write
 * instruction hits 32 distinct banks, each thread's chunk reads cover
 * every 16-byte chunk once and find element (r, c) where it was written,
 * and 8 consecutive threads read one row's 128 contiguous bytes (global)
 * from one 128-byte shared-memory line (no bank conflict). */
static void test_staging_model(void **state)
{
	(void)state;
	for (int sc = 64; sc <= 256; sc *= 2) {
		int bytes = 64 * sc * 2;
		unsigned char *w = calloc((size_t)bytes / 4, 1), *r = calloc((size_t)bytes / 16, 1);
		for (int warp = 0; warp < 4; warp++)
			for (int j = 0; j < sc / 2; j += 2) {
				unsigned bank = 0;
				for (int lane = 0; lane < 32; lane++) {
					int rl = (warp & 3) * 16 + (lane >> 2) + ((j >> 1) & 1) * 8, cc = (j >> 2) * 8 + (lane & 3) * 2;
					int off = KF_WG_STG_OFF(rl, cc, sc);
					assert_true(off >= 0 && off < bytes && off % 4 == 0);
					assert_int_equal(w[off / 4]++, 0);
					assert_int_equal(bank & (1u << (off / 4 % 32)), 0);
					bank |= 1u << (off / 4 % 32);
				}
			}
		for (int i = 0; i < bytes / 4; i++)
			assert_int_equal(w[i], 1);
		for (int j = 0; j < 64 * sc / 8 / 128; j++)
			for (int tid = 0; tid < 128; tid++) {
				int row, col, row0, col0;
				KF_WG_STG_CHUNK(tid, j, sc, row, col);
				KF_WG_STG_CHUNK(tid & ~7, j, sc, row0, col0);
				assert_true(row >= 0 && row < 64 && col % 8 == 0 && col < sc);
				int off = KF_WG_STG_OFF(row, col, sc);
				assert_int_equal(off % 16, 0);
				assert_int_equal(r[off / 16]++, 0);
				for (int e = 0; e < 8; e++)
					assert_int_equal(KF_WG_STG_OFF(row, col + e, sc), off + 2 * e);
				assert_true(row == row0 && col == col0 + (tid & 7) * 8);
				assert_int_equal(off / 128, KF_WG_STG_OFF(row0, col0, sc) / 128);
			}
		for (int i = 0; i < bytes / 16; i++)
			assert_int_equal(r[i], 1);
		free(w);
		free(r);
	}
	/* the emitted kernel: the staging tiles after the ring, both barriers */
	kf_kernel k;
	kft_emit_contraction(mm_text(4096, 4096, 4096, false), 1, "wg128x256x64s4pvs", &k);
	assert_int_equal(k.smem, 4 * (128 + 256) * 128 + 2 * 64 * 128 * 2 + 1024);
	assert_non_null(strstr(k.src, "const unsigned stg = sbase + 196608 + cw * 16384;"));
	assert_non_null(strstr(k.src, "for (int h = 0; h < 2; h++)"));
	assert_non_null(strstr(k.src, "_epis("));
	const char *bs = strstr(k.src, "kf_bar_wg(1 + cw);");
	assert_non_null(bs);
	assert_non_null(strstr(bs + 1, "kf_bar_wg(1 + cw);"));
	assert_non_null(strstr(k.src, "asm volatile(\"bar.sync %0, 128;\""));
	kf_kernel_free(&k);
}

static void test_raster_model(void **state)
{
	(void)state;
	static const int shapes[][2] = {{1, 1}, {3, 2}, {4, 32}, {32, 16}, {32, 32}, {9, 7}, {17, 3}, {8, 1}, {1, 40}};
	static const int grids[] = {1, 2, 7, 64, 128, 132, 200};
	static unsigned char seen[64][64];
	for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
		for (size_t j = 0; j < sizeof grids / sizeof *grids; j++) {
			int ntm = shapes[i][0], ntn = shapes[i][1], nt = ntm * ntn, g = grids[j];
			int grid = nt < g ? nt : g, count = 0;
			memset(seen, 0, sizeof seen);
			for (int b = 0; b < grid; b++)
				for (int t = b; t < nt; t += grid, count++) {
					int m, n;
					kf_wg_raster(t, ntm, ntn, &m, &n);
					assert_true(m >= 0 && m < ntm && n >= 0 && n < ntn);
					assert_int_equal(seen[m][n]++, 0);
				}
			assert_int_equal(count, nt);
		}
	int m, n; /* 32 x 16 tiles: tile 9 is M tile 1 of N column 1; 128 starts group 2 */
	kf_wg_raster(9, 32, 16, &m, &n);
	assert_true(m == 1 && n == 1);
	kf_wg_raster(128, 32, 16, &m, &n);
	assert_true(m == 8 && n == 0);
	kf_wg_raster(5, 3, 4, &m, &n); /* a last group of 3 M tiles */
	assert_true(m == 2 && n == 1);
}

/* ---- a host model of the mbarrier ring across tiles ------------------------------------ */

/* An mbarrier: `done` phases completed; try_wait.parity(P) succeeds when
 * the current phase's parity is not P (the hardware's test, which cannot
 * tell phase n from n + 2: the model catches a producer lapping). */
typedef struct ring_bar {
	int pending, count, done;
} ring_bar;

static void bar_arrive(ring_bar *b)
{
	if (--b->pending == 0)
		b->done++, b->pending = b->count;
}

static bool bar_ok(const ring_bar *b, int parity) { return (b->done & 1) != parity; }

typedef struct ring {
	int S, KT, nt, nc;       /* stages, K steps per tile, tiles, consumers */
	bool pp;                 /* "pp": consumer c takes tiles c, c + 2, ... */
	ring_bar turn[2];        /* "pp": the other consumer's K loop of tile ti - 1 is done */
	ring_bar full[8], empty[8];
	int tag[8];              /* what the stage holds: tile * KT + kt */
	int pit, cit[2];         /* the producer's and consumers' `it` */
	int sum[2];              /* what each consumer read, checked in order */
} ring;

/* One step of the producer as emitted (tile_open, kloop_open, producer). */
static bool ring_produce(ring *r)
{
	int it = r->pit, s = it % r->S;
	if (it >= r->nt * r->KT || (it >= r->S && !bar_ok(&r->empty[s], ((it / r->S) - 1) & 1)))
		return false;
	r->tag[s] = it; /* the TMA writes the stage, then completes `full` */
	bar_arrive(&r->full[s]);
	r->pit++;
	return true;
}

/* One K step of consumer c: wait full, read (wgmma), wait<1> and release
 * the previous stage, still unchanged; at a tile's end wait<0> and release
 * the last one too (the "p" release before the epilogue). */
static bool ring_consume(ring *r, int c)
{
	int it = r->cit[c], s = it % r->S, kt = it % r->KT, ti = it / r->KT;
	if (it >= r->nt * r->KT)
		return false;
	/* "pp": a K loop starts after the other consumer's previous one */
	if (r->pp && kt == 0 && ti > 0 && !bar_ok(&r->turn[c], ((ti - 1) >> 1) & 1))
		return false;
	if (!bar_ok(&r->full[s], (it / r->S) & 1))
		return false;
	assert_int_equal(r->tag[s], it); /* the stage holds this step's data */
	r->sum[c] += r->tag[s];
	if (kt > 0) {
		int p = (it + r->S - 1) % r->S;
		assert_int_equal(r->tag[p], it - 1); /* not overwritten while read */
		bar_arrive(&r->empty[p]);
	}
	if (kt == r->KT - 1)
		bar_arrive(&r->empty[s]);
	if (r->pp && kt == r->KT - 1)
		bar_arrive(&r->turn[c ^ 1]);
	r->cit[c]++;
	if (r->pp && kt == r->KT - 1) /* the other consumer's tile: tile_open_pp's it = ti * KT */
		r->cit[c] += r->KT;
	return true;
}

static void ring_run(int S, int KT, int nt, int nc, bool pp, unsigned seed)
{
	ring r = {.S = S, .KT = KT, .nt = nt, .nc = nc, .pp = pp};
	int ne = pp ? 1 : nc; /* the empty barrier's count: the stage's readers */
	for (int s = 0; s < S; s++) {
		r.full[s] = (ring_bar){1, 1, 0};
		r.empty[s] = (ring_bar){ne, ne, 0};
		r.tag[s] = -1;
	}
	for (int c = 0; pp && c < nc; c++) {
		r.cit[c] = c * KT;
		r.turn[c] = (ring_bar){1, 1, 0};
	}
	for (;;) {
		int who = (int)(rand_r(&seed) % (unsigned)(nc + 1)), moved = 0;
		/* the chosen agent first; if it is blocked, anyone (no deadlock) */
		for (int a = 0; a <= nc && !moved; a++) {
			int x = (who + a) % (nc + 1);
			moved = x == nc ? ring_produce(&r) : ring_consume(&r, x);
		}
		if (!moved)
			break;
	}
	int n = nt * KT, total = 0;
	assert_int_equal(r.pit, n);
	for (int c = 0; c < nc; c++) {
		assert_true(r.cit[c] >= n); /* all its steps, none left waiting */
		if (!pp)
			assert_int_equal(r.sum[c], n * (n - 1) / 2);
		total += r.sum[c];
	}
	if (pp) /* every step read by exactly one consumer: its own tiles' */
		assert_int_equal(total, n * (n - 1) / 2);
}

/* "e": the staging tile between the consumers (stage_out: tile n after
 * the empty barrier's phase n - 1, then full) and the epilogue warps
 * (tiles 0 .. T - 2: full's phase n, read, then empty); the consumers
 * store the last tile themselves after empty's phase T - 2.  Random
 * interleavings: the epilogue reads each tile's data, never overwritten
 * before it is read, and nobody waits forever. */
static void stage_run(int T, unsigned seed)
{
	ring_bar full = {1, 1, 0}, empty = {1, 1, 0};
	int held = -1, cn = 0, en = 0, read = 0;
	for (;;) {
		bool moved = false;
		for (int a = 0, who = (int)(rand_r(&seed) % 2); a < 2 && !moved; a++) {
			if ((who + a) % 2 == 0 && cn < T && (cn == 0 || bar_ok(&empty, (cn - 1) & 1))) {
				if (cn < T - 1) { /* stage_out: the previous tile was read */
					assert_true(cn == 0 || read == cn);
					held = cn;
					bar_arrive(&full);
				}
				cn++, moved = true;
			} else if ((who + a) % 2 == 1 && en < T - 1 && bar_ok(&full, en & 1)) {
				assert_int_equal(held, en);
				read = en + 1;
				bar_arrive(&empty);
				en++, moved = true;
			}
		}
		if (!moved)
			break;
	}
	assert_int_equal(cn, T);
	assert_int_equal(en, T > 0 ? T - 1 : 0);
}

static void test_ring_model(void **state)
{
	(void)state;
	for (int S = 2; S <= 8; S++)
		for (int KT = 1; KT <= 5; KT++)
			for (int nt = 1; nt <= 4; nt++)
				for (int nc = 1; nc <= 3; nc++) /* 3: the ping-pong pair */
					for (unsigned seed = 1; seed <= 20; seed++)
						ring_run(S, KT, nt, nc < 3 ? nc : 2, nc == 3,
							 seed * 7919u + (unsigned)(S * 131 + KT * 17 + nt));
	for (int T = 1; T <= 6; T++)
		for (unsigned seed = 1; seed <= 50; seed++)
			stage_run(T, seed * 2654435761u + (unsigned)T);
	/* the emitted persistent kernel: one row of CTAs, the raster, it carried */
	kf_kernel k;
	kft_emit_contraction(mm_text(4096, 4096, 4096, false), 1, "wg128x256x64s4pv", &k);
	assert_int_equal(k.units, 132);
	assert_int_equal(k.grid_y, 1);
	assert_int_equal(k.cluster, 0);
	assert_non_null(strstr(k.src, "for (int t = blockIdx.x; t < 512; t += gridDim.x)"));
	assert_non_null(strstr(k.src, "kf_wg_raster(t, 32, 16, &mt, &nt);"));
	assert_non_null(strstr(k.src, "for (int kt = 0; kt < 64; kt++, it++)"));
	assert_non_null(strstr(k.src, "if (lane == 0) kf_mbar_arrive(bar_empty + ((it + 3) % 4) * 8);\n  {\n  const int r0"));
	kf_kernel_free(&k);
	/* on a part with fewer SMs the plan launches what is resident
	 * (kf_cuda_fit_walk), not a second wave: 114 SMs (H100 PCIe) */
	kft_emit_contraction(mm_text(4096, 4096, 4096, false), 1, "wg128x256x64s4pvs", &k);
	assert_true(k.walk);
	unsigned gr[3] = {(unsigned)k.units, k.grid_y, k.grid_z};
	kf_cuda_fit_walk(&k, 114, 1, gr);
	assert_true(gr[0] == 114 && gr[1] == 1);
	gr[0] = (unsigned)k.units;
	kf_cuda_fit_walk(&k, 132, 1, gr); /* the H200: as emitted */
	assert_int_equal(gr[0], 132);
	kf_kernel_free(&k);
	kft_emit_contraction(mm_text(4096, 4096, 4096, false), 1, "wg128x256x64s4c2pvs", &k);
	gr[0] = (unsigned)k.units, gr[1] = k.grid_y;
	kf_cuda_fit_walk(&k, 113, 1, gr); /* whole clusters along y */
	assert_true(gr[0] == 1 && gr[1] == 112);
	kf_kernel_free(&k);
	kft_emit_contraction(mm_text(4096, 4096, 4096, false), 1, "wg128x256x64s4", &k);
	assert_false(k.walk); /* one CTA per tile: every block needed */
	gr[0] = (unsigned)k.units, gr[1] = k.grid_y;
	kf_cuda_fit_walk(&k, 114, 1, gr);
	assert_true(gr[0] == 16 && gr[1] == 32);
	kf_kernel_free(&k);
	/* "c2p": 66 clusters of 2 along y walking 16 x 16 cluster tiles */
	kft_emit_contraction(mm_text(4096, 4096, 4096, false), 1, "wg128x256x64s3c2pvs", &k);
	assert_int_equal(k.units, 1);
	assert_int_equal(k.grid_y, 132);
	assert_int_equal(k.cluster, 2);
	assert_non_null(strstr(k.src, "for (int t = blockIdx.y / 2; t < 256; t += gridDim.y / 2)"));
	kf_kernel_free(&k);
	/* 3 M tiles: 2 cluster rows (the 4th M tile loads zeros, stores nothing) x 2 N tiles */
	kft_emit_contraction(mm_text(300, 201, 72, true), 1, "wg128x128x64s4c2pvs", &k);
	assert_int_equal(k.grid_y, 8);
	assert_non_null(strstr(k.src, "if (row >= 300)"));
	kf_kernel_free(&k);
	kft_emit_contraction(mm_text(300, 201, 72, true), 1, "wg128x128x64s4p", &k);
	assert_int_equal(k.units, 3 * 2); /* fewer tiles than SMs: one each */
	assert_int_equal(k.grid_y, 1);
	kf_kernel_free(&k);
}

/* ---- NVRTC + ptxas -------------------------------------------------------------------- */

static void test_compile(void **state)
{
	(void)state;
	if (!kft_have_nvrtc())
		skip();
	static const struct {
		int M, N, K;
		bool wt;
		const char *tile;
		int maxreg;
	} cs[] = {
		{4096, 4096, 4096, false, NULL, 168},           /* 384 threads: 65536 / 384 */
		{512, 4096, 4096, false, NULL, 168},
		{512, 4096, 4096, true, "wg128x256x64s4", 168}, /* B [N, K] */
		{300, 200, 72, false, "wg64x128x64s8", 255},    /* partial tiles, 256 threads */
		/* clusters with B multicast: whole boxes, split boxes, K-major slices */
		{4096, 4096, 4096, false, "wg128x256x64s4c2", 168},
		{512, 4096, 4096, false, "wg128x128x64s4c2", 168},
		{512, 4096, 4096, false, "wg128x128x64s6c4", 168},
		{512, 4096, 4096, true, "wg128x256x64s4c4", 168},
		{300, 200, 72, true, "wg64x128x64s8c2", 255},
		{300, 200, 72, false, "wg64x64x64s8c4", 255},
		/* paired epilogue stores */
		{4096, 4096, 4096, false, "wg128x256x64s4c2v", 168},
		{512, 4096, 4096, false, "wg128x128x64s4v", 168},
		{300, 201, 72, true, "wg128x128x64s4c2v", 168},
		/* persistent */
		{4096, 4096, 4096, false, "wg128x256x64s4pv", 168},
		{512, 4096, 4096, false, "wg128x128x64s4pv", 168},
		{300, 201, 72, true, "wg128x128x64s4pv", 168},
		{300, 200, 72, false, "wg64x128x64s8p", 255},
		/* staged epilogue: halves at BN 256, whole tiles, partial tiles */
		{4096, 4096, 4096, false, "wg128x256x64s4pvs", 168},
		{512, 4096, 4096, false, "wg128x128x64s4pvs", 168},
		{300, 201, 72, true, "wg128x128x64s4pvs", 168},
		{300, 200, 72, false, "wg64x128x64s8vs", 255},
		{4096, 4096, 4096, false, "wg128x256x64s3pvs", 168},
		/* ping-pong: two row blocks a consumer, staged or not, partial tiles */
		{4096, 4096, 4096, false, "wg128x128x64s5ppvs", 168},
		{300, 201, 72, true, "wg128x128x64s4ppvs", 168},
		{512, 4096, 4096, false, "wg64x256x64s4ppv", 168},
		{300, 200, 72, false, "wg128x64x64s6pp", 168},
		/* epilogue warps: whole tiles, partial tiles, odd N */
		{4096, 4096, 4096, false, "wg128x256x64s3pvse", 168},
		{512, 4096, 4096, true, "wg128x128x64s4pvse", 168},
		{300, 201, 72, true, "wg128x128x64s4pvse", 168},
		/* clusters + persistent: B multicast, the cluster tiles walked in step */
		{4096, 4096, 4096, false, "wg128x256x64s3c2pvs", 168},
		{300, 201, 72, true, "wg128x128x64s4c2pvs", 168},
		{512, 4096, 4096, true, "wg128x128x64s4c4pv", 168},
		/* split-K over a cluster: 16-byte or element stores, partial tiles */
		{128, 5632, 2048, false, "wg128x128x64s4k4s", 168},
		{128, 2048, 5632, true, "wg128x256x64s3k8s", 168},
		{100, 201, 1000, true, "wg64x128x64s8k3", 255},
	};
	for (size_t i = 0; i < sizeof cs / sizeof *cs; i++) {
		kf_kernel k;
		kft_emit_contraction(mm_text(cs[i].M, cs[i].N, cs[i].K, cs[i].wt), 1, cs[i].tile, &k);
		assert_true(k.sm90a);
		assert_true(k.sm90a);
		kft_ptxas_checked(&k, "sm_90a", cs[i].maxreg);
		kf_kernel_free(&k);
	}
	/* two wgmma kernels of one program (two matmuls of a graph, same
	 * wgmma shape): their shared helpers are guarded, no redefinition */
	kf_kernel k1, k2;
	kft_emit_contraction(mm_text(512, 4096, 4096, false), 1, "wg128x128x64s4pv", &k1);
	kft_emit_contraction(mm_text(300, 200, 72, false), 1, "wg128x128x64s6p", &k2);
	kf_buf both = {0};
	kf_buf_puts(&both, k1.src);
	kf_buf_puts(&both, k2.src);
	kf_buf_putc(&both, '\0');
	kf_kernel kb = k1;
	kb.src = both.p;
	assert_true(kb.sm90a);
	kft_ptxas_checked(&kb, "sm_90a", 168);
	kf_buf_free(&both);
	kf_kernel_free(&k1);
	kf_kernel_free(&k2);
	/* a dry-run plan for sm_90 takes the wgmma kernel (a shape where the
	 * cost model keeps it: 128 tiles of 128 x 128) and compiles its
	 * program for sm_90a; the element-wise kernel beside it for sm_90 */
	kf_ctx *c = kf_ctx_new();
	kf_module *m = kft_parse_fused(c, "graph @g(%x: f16[512,4096], %w: f16[4096,4096], %v: f32[64]) -> (f16[512,4096], f32[64]) {\n"
				      "  %m = matmul(%x, %w) : f16[512,4096]\n  %e = exp(%v) : f32[64]\n  return %m, %e\n}\n");
	char dir[] = "/tmp/kf-wgmma-XXXXXX";
	assert_non_null(mkdtemp(dir));
	kf_buf rep = {0};
	kf_cuda_opts co = {.dry_run = true, .cache_dir = dir, .report = &rep};
	kf_cuda_session *s = kf_cuda_session_new(c, &co);
	assert_non_null(s);
	if (kf_cuda_session_plan(s, m->graph[0]) != 0) {
		kf_buf d = {0};
		kf_diag_render(c, &d);
		fail_msg("%.*s", (int)d.n, d.p);
	}
	kf_cuda_stats st;
	kf_cuda_session_stats(s, &st);
	assert_int_equal(st.kernels, 2);
	assert_int_equal(st.programs, 2);
	assert_int_equal(st.compiled, 2);
	kf_cuda_session_free(s);
	kf_buf_free(&rep);
	kf_module_free(m);
	kf_ctx_free(c);
	kft_rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_configs),
		cmocka_unit_test(test_choice),
		cmocka_unit_test(test_layout_model),
		cmocka_unit_test(test_cluster_model),
		cmocka_unit_test(test_splitk),
		cmocka_unit_test(test_staging_model),
		cmocka_unit_test(test_raster_model),
		cmocka_unit_test(test_ring_model),
		cmocka_unit_test(test_compile),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
