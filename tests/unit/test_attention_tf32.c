/* Unit tests of the attention kernel's tf32 form and of the head dims only
 * the mma.sync kernel takes (cuda/emit_attention_mma.c): f32 asked to use
 * the tensor cores (fuse-attention{tf32}, or --allow-tf32's marking:
 * kf_tune_allow_tf32) runs mma.sync m16n8k8 with its contraction permuted,
 * each tile read both ways (k and v as stored, and stored transposed), q
 * through registers with a prologue, head dim 128's register budget;
 * head dims 80 and 96 in f16 and bf16 on a device with wgmma.  Each case
 * compiles through ptxas without spills and runs on the host emulation
 * (kf_emu.h) against the interpreter; a kernel whose P fragment misses
 * the permutation fails. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "kf_att_test.h"
#include "tune.h"

/* tf32 (f32 asked to use the tensor cores: fuse-attention{tf32}) on the
 * mma.sync kernel, m16n8k8 with the contraction permuted: the plain case
 * (k's tile read in pairs along its rows, v's down its columns) */
static const acase tf32_plain = {
	"tf32_plain", "graph @g(%q: f32[2,2,128,64], %k: f32[2,2,128,64], %v: f32[2,2,128,64]) -> (f32[2,128,128]) {\n"
	"  %kt = transpose(%k) {perm = [0, 1, 3, 2]} : f32[2,2,64,128]\n"
	"  %s = matmul(%q, %kt) : f32[2,2,128,128]\n  %c = const 0.125 : f32[]\n"
	"  %t = mul(%s, %c) : f32[2,2,128,128]\n  %p = softmax(%t) {axis = -1} : f32[2,2,128,128]\n"
	"  %o = matmul(%p, %v) : f32[2,2,128,64]\n  %ot = transpose(%o) {perm = [0, 2, 1, 3]} : f32[2,128,2,64]\n"
	"  %y = reshape(%ot) {shape = [2, 128, 128]} : f32[2,128,128]\n  return %y\n}\n",
	"fa128x64s2 tf32: q cp.async, k cp.async, v cp.async */", NULL, 2e-2, 4e-3, 255, 0, true,
};

/* k and v stored with keys as columns (the other reading of each tile), a
 * bottom-right causal mask over a cache, 3 stages of 32 keys */
static const acase tf32_kcols = {
	"tf32_kcols", "graph @g(%q: f32[2,48,64], %kt: f32[2,64,112], %vt: f32[2,64,112]) -> (f32[2,48,64]) {\n"
	"  %s = matmul(%q, %kt) : f32[2,48,112]\n  %c = const 0.125 : f32[]\n"
	"  %t = mul(%s, %c) : f32[2,48,112]\n"
	"  %r = iota() {axis = 0, dtype = \"i64\", shape = [48, 112]} : i64[48,112]\n  %cc = iota() {axis = 1, dtype = \"i64\", shape = [48, 112]} : i64[48,112]\n  %o64 = const 64 : i64[]\n"
	"  %rr = add(%r, %o64) : i64[48,112]\n  %cut = gt(%cc, %rr) : i1[48,112]\n"
	"  %ninf = const -inf : f32[]\n  %w = where(%cut, %ninf, %t) : f32[2,48,112]\n"
	"  %p = softmax(%w) {axis = -1} : f32[2,48,112]\n"
	"  %v = transpose(%vt) {perm = [0, 2, 1]} : f32[2,112,64]\n"
	"  %o = matmul(%p, %v) : f32[2,48,64]\n  return %o\n}\n",
	"fa64x32s3 tf32: q cp.async, k cp.async, keys as columns, v cp.async, keys as columns, causal */", "fa64x32s3",
	2e-2, 4e-3, 255, 0, true,
};

/* q through registers with its scale (an odd offset), k stored
 * transposed with 41 keys (rows not 16-byte aligned: element by element,
 * keys as rows), head dim 24 (k-steps of 8), a boolean mask */
static const acase tf32_regs = {
	"tf32_regs", "graph @g(%x: f32[2,33,97], %kt: f32[2,24,41], %v: f32[2,41,24], %keep: i1[2,33,41]) -> (f32[2,33,24]) {\n"
	"  %q = slice(%x) {starts = [1], ends = [25], axes = [2]} : f32[2,33,24]\n"
	"  %c = const 0.2 : f32[]\n  %qs = mul(%q, %c) : f32[2,33,24]\n"
	"  %s = matmul(%qs, %kt) : f32[2,33,41]\n  %fm = const -3.4028235e+38 : f32[]\n"
	"  %w = where(%keep, %s, %fm) : f32[2,33,41]\n"
	"  %p = softmax(%w) {axis = -1} : f32[2,33,41]\n"
	"  %o = matmul(%p, %v) : f32[2,33,24]\n  return %o\n}\n",
	"fa64x32s2 tf32: q registers + prologue, k registers, v cp.async */", "fa64x32s2", 2e-2, 4e-3, 255, 0, true,
};

/* head dim 128 (the register budget: q's fragments, 64 accumulators), 4
 * query heads over 2 k/v heads, a padding mask, 96 rows of a 128-row tile
 * (the default) */
static const acase tf32_gqa = {
	"tf32_gqa", "graph @g(%q: f32[1,4,96,128], %k: f32[1,2,96,128], %v: f32[1,2,96,128], %m: f32[1,1,1,96]) -> (f32[1,4,96,128]) {\n"
	"  %k5 = reshape(%k) {shape = [1, 2, 1, 96, 128]} : f32[1,2,1,96,128]\n"
	"  %ke = broadcast_to(%k5) {shape = [1, 2, 2, 96, 128]} : f32[1,2,2,96,128]\n"
	"  %kr = reshape(%ke) {shape = [1, 4, 96, 128]} : f32[1,4,96,128]\n"
	"  %v5 = reshape(%v) {shape = [1, 2, 1, 96, 128]} : f32[1,2,1,96,128]\n"
	"  %ve = broadcast_to(%v5) {shape = [1, 2, 2, 96, 128]} : f32[1,2,2,96,128]\n"
	"  %vr = reshape(%ve) {shape = [1, 4, 96, 128]} : f32[1,4,96,128]\n"
	"  %kt = transpose(%kr) {perm = [0, 1, 3, 2]} : f32[1,4,128,96]\n"
	"  %s = matmul(%q, %kt) : f32[1,4,96,96]\n  %c = const 0.088388 : f32[]\n"
	"  %t = mul(%s, %c) : f32[1,4,96,96]\n  %a = add(%t, %m) : f32[1,4,96,96]\n"
	"  %p = softmax(%a) {axis = -1} : f32[1,4,96,96]\n"
	"  %o = matmul(%p, %vr) : f32[1,4,96,128]\n  return %o\n}\n",
	"fa128x64s2 tf32: q cp.async, k cp.async, v cp.async */", NULL, 2e-2, 4e-3, 255, 0, true,
};

/* Head dims 80 and 96 (Phi-2's, some ViTs'): the Hopper kernel takes 64
 * and 128 only, so on any device they run the mma.sync kernel; 80 is 5
 * k-steps of 16 and 10 n-tiles of 8 (an odd number of k16 steps, pairs of
 * n-tiles), f16 causal; 96 bf16 with a padding mask */
static const acase hd80 = {
	"hd80", "graph @g(%q: f16[2,2,96,80], %k: f16[2,2,96,80], %v: f16[2,2,96,80]) -> (f16[2,2,96,80]) {\n"
	"  %kt = transpose(%k) {perm = [0, 1, 3, 2]} : f16[2,2,80,96]\n"
	"  %s = matmul(%q, %kt) : f16[2,2,96,96]\n  %c = const 0.1118 : f16[]\n"
	"  %t = mul(%s, %c) : f16[2,2,96,96]\n  %ninf = const -inf : f16[]\n"
	"  %r = iota() {axis = 0, dtype = \"i64\", shape = [96, 96]} : i64[96,96]\n  %cc = iota() {axis = 1, dtype = \"i64\", shape = [96, 96]} : i64[96,96]\n"
	"  %keep = le(%cc, %r) : i1[96,96]\n  %w = where(%keep, %t, %ninf) : f16[2,2,96,96]\n"
	"  %p = softmax(%w) {axis = -1} : f16[2,2,96,96]\n"
	"  %o = matmul(%p, %v) : f16[2,2,96,80]\n  return %o\n}\n",
	"fa128x64s2: q cp.async, k cp.async, v cp.async, causal */", NULL, 2e-2, 4e-3, 200, 1,
};
static const acase hd96 = {
	"hd96", "graph @g(%q: bf16[2,3,64,96], %k: bf16[2,3,80,96], %v: bf16[2,3,80,96], %m: bf16[2,1,1,80]) -> (bf16[2,3,64,96]) {\n"
	"  %kt = transpose(%k) {perm = [0, 1, 3, 2]} : bf16[2,3,96,80]\n"
	"  %s = matmul(%q, %kt) : bf16[2,3,64,80]\n  %c = const 0.10206 : bf16[]\n"
	"  %t = mul(%s, %c) : bf16[2,3,64,80]\n  %a = add(%t, %m) : bf16[2,3,64,80]\n"
	"  %p = softmax(%a) {axis = -1} : bf16[2,3,64,80]\n"
	"  %o = matmul(%p, %v) : bf16[2,3,64,96]\n  return %o\n}\n",
	"fa64x64s2: q cp.async, k cp.async, v cp.async */", NULL, 5e-2, 3e-2, 200, 1,
};

/* ---- the tests ------------------------------------------------------------------- */

static const acase *const all[] = {&tf32_plain, &tf32_kcols, &tf32_regs, &tf32_gqa, &hd80, &hd96};

static void test_ptxas(void **state)
{
	(void)state;
	kft_att_ptxas(all, sizeof all / sizeof all[0]);
}

static void test_emu_tf32_plain(void **s) { (void)s; emu_case(&tf32_plain); }
static void test_emu_tf32_kcols(void **s) { (void)s; emu_case(&tf32_kcols); }
static void test_emu_tf32_regs(void **s) { (void)s; emu_case(&tf32_regs); }
static void test_emu_tf32_gqa(void **s) { (void)s; emu_case(&tf32_gqa); }
static void test_emu_hd80(void **s) { (void)s; emu_case(&hd80); }
static void test_emu_hd96(void **s) { (void)s; emu_case(&hd96); }

/* The comparison can fail: P's fragment without the permutation of its
 * keys is caught. */
static void test_emu_catches(void **s)
{
	(void)s;
	int64_t bad = emulate(&tf32_plain, "kf_tf32(sc[4 * kk + 2]), kf_tf32(sc[4 * kk + 1])",
			      "kf_tf32(sc[4 * kk + 1]), kf_tf32(sc[4 * kk + 2])");
	if (bad < 0) {
		skip();
		return;
	}
	assert_true(bad > 0);
}

/* PyTorch's allow_tf32 (kfuse-run --allow-tf32, kf_cuda_opts.allow_tf32)
 * marks an f32 attention fusion, whose kernel then runs on tf32 tensor
 * cores; an f16 one is left alone (its kernel is the same either way). */
static void test_allow_tf32(void **state)
{
	(void)state;
	kf_ctx *c = kf_ctx_new();
	kf_rt_register(c);
	kf_module *m = kft_parse(c, tf32_plain.text);
	kft_run_pipe(c, m, "fuse-attention");
	kf_graph *g = m->graph[0];
	kf_nid f = kft_first_fusion(g);
	assert_false(kf_attr_bool(g, f, "tf32", false));
	assert_int_equal(kf_tune_allow_tf32(g), 1);
	assert_true(kf_attr_bool(g, f, "tf32", false));
	kf_kernel k;
	kf_emit_target t = {0};
	assert_int_equal(kf_emit_node_for(g, f, &t, &k), 0);
	assert_non_null(strstr(k.src, "fa128x64s2 tf32:"));
	kf_kernel_free(&k);
	kf_module_free(m);
	m = kft_parse(c, KFT_ATT_PLAIN);
	kft_run_pipe(c, m, "fuse-attention");
	assert_int_equal(kf_tune_allow_tf32(m->graph[0]), 0);
	kf_module_free(m);
	kf_ctx_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ptxas),
		cmocka_unit_test(test_allow_tf32),
		cmocka_unit_test(test_emu_tf32_plain),
		cmocka_unit_test(test_emu_tf32_kcols),
		cmocka_unit_test(test_emu_tf32_regs),
		cmocka_unit_test(test_emu_tf32_gqa),
		cmocka_unit_test(test_emu_hd80),
		cmocka_unit_test(test_emu_hd96),
		cmocka_unit_test(test_emu_catches),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
