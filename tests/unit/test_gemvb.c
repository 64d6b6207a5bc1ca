/* Unit tests of the bulk-copy GEMV ("gemvb[S]", cuda/emit_gemv.c) and
 * the column-blocked one ("gemvc", test_cols): its
 * configs, when it is a candidate, a host model of its partition (every
 * weight byte copied exactly once, every bulk copy 16-byte aligned and a
 * multiple of 16 bytes, every row computed by exactly one warp, the ring
 * within shared memory), and, where NVRTC is installed, its compilation for
 * sm_90 with ptxas's report: no spills, no stack.  No GPU needed. */
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

/* relu(x @ w^T + b), w stored [N, K] (nn.Linear), dtype dt */
static char *gemv_text(const char *dt, int N, int K)
{
	static char t[1024];
	snprintf(t, sizeof t,
		 "graph @g(%%x: %s[1,%d], %%w: %s[%d,%d], %%b: %s[%d]) -> (%s[1,%d]) {\n"
		 "  %%t = transpose(%%w) {perm = [1, 0]} : %s[%d,%d]\n"
		 "  %%m = matmul(%%x, %%t) : %s[1,%d]\n"
		 "  %%a = add(%%m, %%b) : %s[1,%d]\n"
		 "  %%y = relu(%%a) : %s[1,%d]\n  return %%y\n}\n",
		 dt, K, dt, N, K, dt, N, dt, N, dt, K, N, dt, N, dt, N, dt, N);
	return t;
}

static void test_configs(void **state)
{
	(void)state;
	kf_mm_config cf;
	const char *good[] = {"gemvb", "gemvb1", "gemvb8", "gemvb32"};
	for (int i = 0; i < 4; i++) {
		kft_mm_config(good[i], &cf);
		assert_int_equal(cf.algo, KF_MM_GEMV);
		assert_int_equal(cf.bulk, 1);
	}
	const char *bad[] = {"gemvb0", "gemvb33", "gemvbx", "gemvb08", "gemvb-1", "gemvb4 ", "gemvb+4", "gemvb4u8"};
	for (int i = 0; i < 8; i++)
		assert_int_equal(kf_mm_config_parse(bad[i], &cf), -1);
	/* not a tuner candidate: slower than the plain GEMV on the H200, cold
	 * and warm (bench/results/2026-11-29-s2-gpu-gemv-ncu3.txt); a forced
	 * tile only */
	char cand[33][32];
	kf_mm_shape nk = {.in = KF_F32, .out = KF_F32, .batch = 1, .M = 1, .N = 4096, .K = 1024, .tb = true,
			  .raw = true, .wgmma = 1};
	int n = kf_mm_candidates(&nk, cand, 33), nb = 0;
	for (int i = 0; i < n; i++)
		nb += !strncmp(cand[i], "gemvb", 5);
	assert_int_equal(nb, 0);
	kf_mm_shape no[3] = {nk, nk, nk};
	no[0].wgmma = 0;  /* unknown device: not tuned */
	no[1].tb = false; /* [K, N] */
	no[2].raw = false; /* a prologue on an operand */
	for (int s = 0; s < 3; s++) {
		n = kf_mm_candidates(&no[s], cand, 33);
		for (int i = 0; i < n; i++)
			assert_int_not_equal(strncmp(cand[i], "gemvb", 5), 0);
	}
}

/* The host model of the kernel: CTA c issues chunks j = 0.. (kf_gemvb_copy,
 * the same arithmetic as the emitted code) into slot j % slots; warp w
 * computes rows first + ((w - first) & 7), + 8, ... of chunk j. */
static void check_plan(int64_t N, int64_t K, int elem, int S)
{
	kf_gemvb_plan p;
	assert_int_equal(kf_gemvb_plan_of(N, K, elem, S, &p), 0);
	int64_t pos = 0, slotb = p.crows * p.row_bytes;
	assert_true(p.grid <= KF_MM_SMS && p.grid * p.rows >= N && (p.grid - 1) * p.rows < N);
	assert_true(p.slots >= 1 && p.slots <= p.nchunk && p.slots <= KF_GEMVB_MAXSLOT);
	assert_true(p.smem <= 227 * 1024 && p.smem >= p.slots * slotb + K * 4);
	assert_int_equal(slotb % 16, 0); /* x and every slot 16-byte aligned */
	if (S > 0 && p.rows * p.row_bytes + K * 4 <= KF_GEMVB_SMEM)
		assert_true(p.nchunk <= S && p.slots == p.nchunk); /* the whole slice at once */
	char *done = calloc((size_t)N, 1);
	for (int64_t c = 0; c < p.grid; c++) {
		int64_t j = 0, off, bytes;
		for (;; j++) {
			kf_gemvb_copy(&p, N, c, j, &off, &bytes);
			if (!bytes)
				break;
			assert_int_equal(off, pos); /* contiguous, in order: each byte once */
			assert_true(off % 16 == 0 && bytes % 16 == 0 && bytes <= slotb && bytes % p.row_bytes == 0);
			pos += bytes;
			int64_t first = j * p.crows, n = bytes / p.row_bytes;
			for (int w = 0; w < 8; w++)
				for (int64_t i = first + ((w - first) & 7); i < first + n; i += 8)
					done[c * p.rows + i]++;
		}
		assert_true(j >= 1 && j <= p.nchunk);
	}
	kf_gemvb_copy(&p, N, p.grid, 0, &(int64_t){0}, &pos); /* no CTA past the grid */
	assert_int_equal(pos, 0);
	kf_gemvb_copy(&p, N, 0, 0, &(int64_t){0}, &pos);
	for (int64_t r = 0; r < N; r++)
		if (done[r] != 1)
			fail_msg("N %lld K %lld S %d: row %lld computed %d times", (long long)N, (long long)K, S,
				 (long long)r, done[r]);
	free(done);
}

static void test_plan(void **state)
{
	(void)state;
	static const int64_t ns[] = {1, 7, 131, 132, 133, 1000, 1024, 4096, 5000, 11008};
	static const int64_t ks[] = {4, 8, 1024, 4096, 12288, 16384};
	static const int es[] = {2, 4};
	static const int ss[] = {0, 1, 2, 3, 4, 8, 16, 32};
	for (size_t a = 0; a < 10; a++)
		for (size_t b = 0; b < 6; b++)
			for (size_t e = 0; e < 2; e++)
				for (size_t s = 0; s < 8; s++)
					if (ks[b] * es[e] % 16 == 0)
						check_plan(ns[a], ks[b], es[e], ss[s]);
	/* the bench shapes: 32 (8) rows of 4 (16) KiB on 128 CTAs, in 4 chunks */
	kf_gemvb_plan p;
	assert_int_equal(kf_gemvb_plan_of(4096, 1024, 4, 0, &p), 0);
	assert_true(p.grid == 128 && p.rows == 32 && p.crows == 8 && p.slots == 4 && p.smem == 132 * 1024);
	assert_int_equal(kf_gemvb_plan_of(1024, 4096, 4, 8, &p), 0);
	assert_true(p.grid == 128 && p.rows == 8 && p.crows == 1 && p.slots == 8 && p.smem == 144 * 1024);
	/* a ring: 8 rows of 64 KiB, x 64 KiB: 2 slots of one row */
	assert_int_equal(kf_gemvb_plan_of(1024, 16384, 4, 0, &p), 0);
	assert_true(p.crows == 1 && p.nchunk == 8 && p.slots == 2);
	/* rows not whole 16-byte words; a row and x over the budget */
	assert_int_equal(kf_gemvb_plan_of(4096, 1022, 4, 0, &p), -1);
	assert_int_equal(kf_gemvb_plan_of(4096, 1027, 2, 0, &p), -1);
	assert_int_equal(kf_gemvb_plan_of(64, 32768, 4, 0, &p), -1);
}

static void test_emit(void **state)
{
	(void)state;
	kf_kernel k;
	kft_emit_contraction(gemv_text("f32", 4096, 1024), 1, "gemvb", &k);
	assert_int_equal(k.units, 128);
	assert_int_equal(k.block, 256);
	assert_int_equal(k.smem, 132 * 1024);
	assert_non_null(strstr(k.src, "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"));
	assert_non_null(strstr(k.src, "fence.mbarrier_init.release.cluster"));
	assert_null(strstr(k.src, "kf_gb_arrive(empty")); /* the whole slice at once: no ring */
	kf_kernel_free(&k);
	kft_emit_contraction(gemv_text("f32", 1024, 16384), 1, "gemvb", &k);
	assert_non_null(strstr(k.src, "kf_gb_arrive(empty"));
	kf_kernel_free(&k);
	/* not on a device without sm_90 bulk copies, nor rows of 1022 floats:
	 * the plain GEMV instead */
	kft_emit_contraction(gemv_text("f32", 4096, 1024), -1, "gemvb", &k);
	assert_null(strstr(k.src, "cp.async.bulk"));
	assert_int_equal(k.smem, 0);
	kf_kernel_free(&k);
	kft_emit_contraction(gemv_text("f32", 4096, 1022), 1, "gemvb", &k);
	assert_null(strstr(k.src, "cp.async.bulk"));
	kf_kernel_free(&k);
}

/* relu(x @ w + b), w stored [K, N] */
static char *gemv_kn_text(const char *dt, int N, int K)
{
	static char t[1024];
	snprintf(t, sizeof t,
		 "graph @g(%%x: %s[1,%d], %%w: %s[%d,%d], %%b: %s[%d]) -> (%s[1,%d]) {\n"
		 "  %%m = matmul(%%x, %%w) : %s[1,%d]\n"
		 "  %%a = add(%%m, %%b) : %s[1,%d]\n"
		 "  %%y = relu(%%a) : %s[1,%d]\n  return %%y\n}\n",
		 dt, K, dt, K, N, dt, N, dt, N, dt, N, dt, N, dt, N);
	return t;
}

/* The column-blocked GEMV ("gemvc[uU]", B [K, N]): configs, candidates,
 * and a host model of its mapping (gemv_kn_cols): lane 8 r + q, warp w,
 * step u of round k0 loads chunk q of row 4 w + r + 128 (u + U round):
 * every (row, chunk) of the block's columns exactly once, whatever K. */
static void test_cols(void **state)
{
	(void)state;
	kf_mm_config cf;
	const char *good[] = {"gemvc", "gemvcu4", "gemvcu16"};
	for (int i = 0; i < 3; i++) {
		kft_mm_config(good[i], &cf);
		assert_true(cf.colb && cf.algo == KF_MM_GEMV);
	}
	const char *bad[] = {"gemvcu0", "gemvcu17", "gemvcx", "gemvcu", "gemvc4", "gemvcu04"};
	for (int i = 0; i < 6; i++)
		assert_int_equal(kf_mm_config_parse(bad[i], &cf), -1);
	char cand[64][32];
	kf_mm_shape kn = {.in = KF_F32, .out = KF_F32, .batch = 1, .M = 1, .N = 4096, .K = 1024, .raw = true};
	int n = kf_mm_candidates(&kn, cand, 64), have = 0;
	for (int i = 0; i < n; i++)
		have += !strcmp(cand[i], "gemvc");
	assert_int_equal(have, 1);
	kf_mm_shape nk = kn, odd = kn;
	nk.tb = true;  /* B [N, K]: gemv_nk's */
	odd.N = 4094; /* rows not whole 16-byte chunks */
	for (int j = 0; j < 2; j++) {
		n = kf_mm_candidates(j ? &odd : &nk, cand, 64);
		for (int i = 0; i < n; i++)
			assert_true(strncmp(cand[i], "gemvc", 5) != 0);
	}
	static const int Ks[] = {1, 127, 128, 1000, 1024, 1025, 3000};
	static const int Us[] = {1, 4, 8, 16};
	static unsigned char seen[3000][8];
	for (size_t a = 0; a < sizeof Ks / sizeof *Ks; a++)
		for (size_t b = 0; b < sizeof Us / sizeof *Us; b++) {
			int K = Ks[a], U = Us[b];
			memset(seen, 0, sizeof seen);
			for (int w = 0; w < 32; w++)
				for (int lane = 0; lane < 32; lane++)
					for (int k0 = w * 4 + (lane >> 3); k0 < K; k0 += 128 * U)
						for (int u = 0; u < U; u++)
							if (k0 + u * 128 < K)
								seen[k0 + u * 128][lane & 7]++;
			for (int r = 0; r < K; r++)
				for (int q = 0; q < 8; q++)
					assert_int_equal(seen[r][q], 1);
		}
	kf_kernel k;
	kft_emit_contraction(gemv_kn_text("f32", 4096, 1024), 1, "gemvc", &k);
	assert_int_equal(k.units, 128); /* 32 columns of 4 floats a block */
	assert_int_equal(k.block, 1024);
	assert_int_equal(k.grid_y, 1);  /* no K split */
	assert_null(strstr(k.src, "_ws["));
	assert_non_null(strstr(k.src, "for (int j = 0; j < 32; j++) s += red[j][threadIdx.x];"));
	kf_kernel_free(&k);
	kft_emit_contraction(gemv_kn_text("f16", 4096, 1024), 1, "gemvc", &k);
	assert_int_equal(k.units, 64); /* 64 columns of 8 halves */
	kf_kernel_free(&k);	/* the default: column blocks where they number 100 or more (128 of
	 * f32 at N = 4096), else the K split (8 blocks at N = 1024) */
	kft_emit_contraction(gemv_kn_text("f32", 4096, 1024), 1, NULL, &k);
	assert_int_equal(k.block, 1024);
	kf_kernel_free(&k);
	kft_emit_contraction(gemv_kn_text("f32", 1024, 4096), 1, NULL, &k);
	assert_int_equal(k.block, 256);
	assert_true(k.grid_y > 1);
	kf_kernel_free(&k);
}

static void test_compile(void **state)
{
	(void)state;
	if (!kft_have_nvrtc())
		skip();
	static const struct {
		const char *dt;
		int N, K;
		const char *tile;
	} cs[] = {
		{"f32", 4096, 1024, "gemvb"}, {"f32", 1024, 4096, "gemvb8"}, {"f32", 4096, 1024, "gemvb16"},
		{"f16", 4096, 1024, "gemvb"}, {"bf16", 1000, 4104, "gemvb2"}, {"f32", 1024, 16384, "gemvb"},
		{"f32", 7, 8, "gemvb1"},
	};
	for (size_t i = 0; i < sizeof cs / sizeof *cs; i++) {
		kf_kernel k;
		kft_emit_contraction(gemv_text(cs[i].dt, cs[i].N, cs[i].K), 1, cs[i].tile, &k);
		assert_non_null(strstr(k.src, "cp.async.bulk"));
		assert_false(k.sm90a);
		kft_ptxas_checked(&k, "sm_90", 0);
		kf_kernel_free(&k);
	}
	/* gemvc: at most 64 registers (1024 threads), all loads in flight */
	static const struct {
		const char *dt, *tile;
		int N, K;
	} cc[] = {{"f32", "gemvc", 4096, 1024}, {"f32", "gemvcu16", 4096, 1000}, {"bf16", "gemvcu4", 1000, 4104},
		  {"f16", "gemvc", 64, 3}};
	for (size_t i = 0; i < sizeof cc / sizeof *cc; i++) {
		kf_kernel k;
		kft_emit_contraction(gemv_kn_text(cc[i].dt, cc[i].N, cc[i].K), 1, cc[i].tile, &k);
		assert_non_null(strstr(k.src, "__launch_bounds__(1024, 1)"));
		kft_ptxas_checked(&k, "sm_90", 64);
		kf_kernel_free(&k);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_configs),
		cmocka_unit_test(test_plan),
		cmocka_unit_test(test_emit),
		cmocka_unit_test(test_cols),
		cmocka_unit_test(test_compile),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
