/* The CUDA backend's side of convolutions that needs no GPU: every conv
 * and pool kernel variant compiles with NVRTC and ptxas without spills,
 * and a plan computes the nodes over constants alone (a weight transposed
 * to the channels-last order, scaled by a folded batch norm) once instead
 * of running a kernel for each.  Skipped without NVRTC. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "cuda_backend.h"
#include "kf_test.h"
#include "kf_test_nvrtc.h"

/* The kernel of each non-const top-level node of text's graph, compiled
 * and checked by ptxas. */
static void compile_all(const char *text, const char *tile)
{
	kf_ctx *c = kf_ctx_new();
	kf_module *m = kft_parse(c, text);
	kf_graph *g = m->graph[0];
	if (tile)
		setenv("KFUSE_CONV_TILE", tile, 1);
	int n = 0;
	kf_foreach_node(g, 0, x) {
		int op = kf_N(g, x)->op;
		if (op == KF_OP_CONST || op == KF_OP_RETURN)
			continue;
		kf_kernel k;
		if (kf_emit_node(g, x, &k) != 0)
			kft_fail_diags(c, "emit");
		kft_ptxas_checked(&k, "sm_90", 0);
		kf_kernel_free(&k);
		n++;
	}
	unsetenv("KFUSE_CONV_TILE");
	assert_true(n > 0);
	kf_module_free(m);
	kf_ctx_free(c);
}

static const char convs[] =
	"graph @g(%x: f16[2,28,28,64], %w: f16[128,3,3,64], %b: f16[128], %r: f16[2,14,14,128], %s: f16[1,3,224,224],\n"
	"         %ws: f16[64,7,7,3], %d: f16[2,28,28,64], %wd: f16[64,3,3,1], %t: f32[1,14,14,256], %wt: f32[256,1,1,256],\n"
	"         %gx: bf16[1,14,14,96], %gw: bf16[96,3,3,24], %f: f32[1,9,9,8], %fw: f32[16,3,3,8]) ->\n"
	"    (f16[2,14,14,128], f16[1,64,112,112], f16[2,28,28,64], f32[1,14,14,256], bf16[1,14,14,96], f32[1,9,9,16]) {\n"
	"  %y = fusion @c0(%x, %w, %b, %r) {kind = \"conv\"} : f16[2,14,14,128] {\n"
	"  ^(%0: f16[2,28,28,64], %1: f16[128,3,3,64], %2: f16[128], %3: f16[2,14,14,128]):\n"
	"    %c = conv(%0, %1, %2) {channels_last = true, pads = [1, 1, 1, 1], strides = [2, 2]} : f16[2,14,14,128]\n"
	"    %a = add(%c, %3) : f16[2,14,14,128]\n    %e = relu(%a) : f16[2,14,14,128]\n    yield %e\n  }\n"
	"  %st = transpose(%s) {perm = [0, 2, 3, 1]} : f16[1,224,224,3]\n"
	"  %sc = conv(%st, %ws) {channels_last = true, pads = [3, 3, 3, 3], strides = [2, 2]} : f16[1,112,112,64]\n"
	"  %sy = transpose(%sc) {perm = [0, 3, 1, 2]} : f16[1,64,112,112]\n"
	"  %dy = fusion @c1(%d, %wd) {kind = \"conv\"} : f16[2,28,28,64] {\n"
	"  ^(%0: f16[2,28,28,64], %1: f16[64,3,3,1]):\n"
	"    %c = conv(%0, %1) {channels_last = true, pads = [1, 1, 1, 1], group = 64} : f16[2,28,28,64]\n"
	"    %k = const 6.0 : f16[]\n    %z = const 0.0 : f16[]\n    %h = max(%c, %z) : f16[2,28,28,64]\n"
	"    %l = min(%h, %k) : f16[2,28,28,64]\n    yield %l\n  }\n"
	"  %ty = fusion @c2(%t, %wt) {kind = \"conv\", tf32 = true} : f32[1,14,14,256] {\n"
	"  ^(%0: f32[1,14,14,256], %1: f32[256,1,1,256]):\n"
	"    %c = conv(%0, %1) {channels_last = true} : f32[1,14,14,256]\n    yield %c\n  }\n"
	"  %gy = conv(%gx, %gw) {channels_last = true, pads = [1, 1, 1, 1], group = 4} : bf16[1,14,14,96]\n"
	"  %fy = conv(%f, %fw) {channels_last = true, pads = [1, 1, 1, 1]} : f32[1,9,9,16]\n"
	"  return %y, %sy, %dy, %ty, %gy, %fy\n}\n";

/* the implicit GEMMs: 16-byte rows, element gathers (3 channels), tf32 */
static const char gemms[] =
	"graph @g(%x: f16[2,28,28,64], %w: f16[128,3,3,64], %s: f16[1,224,224,3], %ws: f16[64,7,7,3], %t: f32[1,14,14,256],\n"
	"         %wt: f32[256,1,1,256]) -> (f16[2,14,14,128], f16[1,112,112,64], f32[1,14,14,256]) {\n"
	"  %y = conv(%x, %w) {channels_last = true, pads = [1, 1, 1, 1], strides = [2, 2]} : f16[2,14,14,128]\n"
	"  %sc = conv(%s, %ws) {channels_last = true, pads = [3, 3, 3, 3], strides = [2, 2]} : f16[1,112,112,64]\n"
	"  %ty = fusion @c2(%t, %wt) {kind = \"conv\", tf32 = true} : f32[1,14,14,256] {\n"
	"  ^(%0: f32[1,14,14,256], %1: f32[256,1,1,256]):\n"
	"    %c = conv(%0, %1) {channels_last = true} : f32[1,14,14,256]\n    yield %c\n  }\n"
	"  return %y, %sc, %ty\n}\n";

static const char pools[] =
	"graph @p(%x: f16[2,112,112,64], %y: f32[1,3,9,9], %z: i32[1,2,7,7], %tw: f32[3,4,3,3], %tb: f32[4]) ->\n"
	"    (f16[2,56,56,64], f16[2,56,56,64], f32[1,3,5,5], i32[1,2,3,3], f32[1,4,18,18]) {\n"
	"  %m = max_pool(%x) {channels_last = true, kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [2, 2]} : f16[2,56,56,64]\n"
	"  %a = avg_pool(%x) {channels_last = true, kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [2, 2], count_include_pad = true} : f16[2,56,56,64]\n"
	"  %b = avg_pool(%y) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [2, 2], ceil_mode = true} : f32[1,3,5,5]\n"
	"  %c = max_pool(%z) {kernel_shape = [2, 2], strides = [2, 2], dilations = [2, 2]} : i32[1,2,3,3]\n"
	"  %t = conv_transpose(%y, %tw, %tb) {strides = [2, 2], pads = [1, 1, 1, 1], output_padding = [1, 1]} : f32[1,4,18,18]\n"
	"  return %m, %a, %b, %c, %t\n}\n";

static void ptxas_convs(void **st)
{
	if (!kft_have_nvrtc())
		skip();
	compile_all(convs, NULL);
	/* every tile a conv may take */
	static const char *const tiles[] = {"mma128x128x32w2x4s3", "mma128x64x32w2x2s4", "mma64x128x32w2x2s4",
					    "mma64x64x32w2x2s4", "mma32x64x32w1x2s4", "mma32x32x32w1x1s4", "fma64x64x16t4x4",
					    "fma32x32x16t2x2"};
	for (size_t i = 0; i < sizeof tiles / sizeof *tiles; i++)
		compile_all(gemms, tiles[i]);
	compile_all(pools, NULL);
}

/* The Hopper conv kernels (sm_90a): the wgmma conv's tiles that the
 * default and the shipped table use, on a 3x3 conv with a residual
 * epilogue (staged stores) and the split one's workspace; the matmul's TMA
 * kernel on a pointwise conv.  No spills, no stack. */
static const char hopper[] =
	"graph @g(%x: f16[4,28,28,64], %w: f16[128,3,3,64], %b: f16[128], %r: f16[4,28,28,128], %v: f16[256,1,1,64],\n"
	"         %c: f16[256]) -> (f16[4,28,28,128], f16[4,28,28,256]) {\n"
	"  %y = fusion @c0(%x, %w, %b, %r) {kind = \"conv\"} : f16[4,28,28,128] {\n"
	"  ^(%0: f16[4,28,28,64], %1: f16[128,3,3,64], %2: f16[128], %3: f16[4,28,28,128]):\n"
	"    %k = conv(%0, %1, %2) {channels_last = true, pads = [1, 1, 1, 1]} : f16[4,28,28,128]\n"
	"    %a = add(%k, %3) : f16[4,28,28,128]\n    %e = relu(%a) : f16[4,28,28,128]\n    yield %e\n  }\n"
	"  %p = fusion @c1(%x, %v, %c) {kind = \"conv\"} : f16[4,28,28,256] {\n"
	"  ^(%0: f16[4,28,28,64], %1: f16[256,1,1,64], %2: f16[256]):\n"
	"    %k = conv(%0, %1, %2) {channels_last = true} : f16[4,28,28,256]\n"
	"    %e = relu(%k) : f16[4,28,28,256]\n    yield %e\n  }\n"
	"  return %y, %p\n}\n";

static void ptxas_hopper(void **st)
{
	if (!kft_have_nvrtc())
		skip();
	static const char *const tiles[] = {"wgc256x128x64s4s", "wgc128x128x64s4s", "wgc128x256x64s4s", "wgc128x64x64s6s",
					    "wgc64x128x64s6s",  "wgc64x64x64s8s",   "wgc64x64x64s6k4s", "wg128x128x64s4pvs"};
	for (size_t i = 0; i < sizeof tiles / sizeof *tiles; i++) {
		kf_ctx *c = kf_ctx_new();
		kf_module *m = kft_parse(c, hopper);
		kf_graph *g = m->graph[0];
		setenv("KFUSE_CONV_TILE", tiles[i], 1);
		kf_emit_target t = {1};
		kf_nid n = g->blk[0].first;
		if (!strncmp(tiles[i], "wg1", 3)) /* the TMA kernel: the pointwise conv */
			n = kf_N(g, n)->next;
		kf_kernel k;
		if (kf_emit_node_for(g, n, &t, &k) != 0)
			kft_fail_diags(c, "emit");
		unsetenv("KFUSE_CONV_TILE");
		assert_true(k.sm90a);
		kft_ptxas_checked(&k, "sm_90a", 0);
		kf_kernel_free(&k);
		kf_module_free(m);
		kf_ctx_free(c);
	}
}

/* The depthwise rows kernel (cuda/emit_depthwise_rows.c) on the batch-32
 * layers it takes by default, MobileNetV2's and EfficientNet-B0's 3x3 and
 * 5x5 at stride 1 and 2, conv + bias + ReLU6 (f16, 8-byte stores), and
 * its forced shapes, and the band kernel's plans for them: sm_90 without
 * spills within __launch_bounds__'s 128 registers.  Prints ptxas's
 * registers and the plan for each. */
static void ptxas_depthwise_rows(void **st)
{
	if (!kft_have_nvrtc())
		skip();
	static const struct {
		int C, H, k, s;
		const char *dw;
	} ls[] = {
		{32, 112, 3, 1, NULL}, {144, 56, 3, 1, NULL}, {144, 56, 3, 2, NULL}, {96, 112, 3, 2, NULL},
		{384, 14, 3, 1, NULL}, {960, 7, 3, 1, NULL},  {240, 28, 5, 1, NULL}, {144, 56, 5, 2, NULL},
		{672, 14, 5, 1, NULL}, {32, 112, 3, 1, "rows:v8x1h4"}, {32, 112, 3, 1, "rows:v4x3h8"},
		{144, 56, 5, 1, "rows:v2x2h8"}, {32, 112, 3, 1, "rows:v4x1h8f2"}, {96, 112, 3, 2, "rows:f2"},
		{144, 56, 3, 1, "rows:v4x1h8f3"}, {672, 14, 5, 1, "rows:f1"}, {32, 112, 3, 1, "band"},
		{96, 112, 3, 2, "band"}, {144, 56, 3, 1, "band"}, {144, 56, 5, 2, "band"}, {240, 28, 5, 1, "band"},
		{960, 7, 3, 1, "band"}, {672, 14, 5, 1, "band"}, {1152, 7, 5, 1, "band"},
		{240, 28, 5, 1, "band:x2"}, {672, 14, 5, 1, "band:x2"},
		{144, 56, 5, 2, "band:x2"}, {1152, 7, 5, 1, "band:x2"}, {144, 56, 3, 1, "band:x2"}, {32, 112, 3, 1, "band:x2"},
		{192, 28, 3, 2, "band:x2"}, {192, 28, 3, 2, "band"},
		{240, 28, 5, 1, "band:b3"}, {672, 14, 5, 1, "band:b3"}, {144, 56, 5, 2, "band:b3"}, {1152, 7, 5, 1, "band:b3"},
		{480, 14, 5, 1, "band:b3"},
		/* d1, the double-buffered walk (two bands of shared memory) */
		{240, 28, 5, 1, "band:h4d1"}, {672, 14, 5, 1, "band:d1"}, {144, 56, 5, 2, "band:h2d1"},
		{1152, 7, 5, 1, "band:d1"}, {144, 56, 3, 1, "band:d1"}, {32, 112, 3, 1, "band:h2d1"},
		/* session 20's plans ("band": the default's): four blocks an SM
		 * at 3x3 stride 2 up to 28x28 and 5x5 stride 1 (whole warps, 14+
		 * rows); MobileNetV3's; the staged copy */
		{192, 28, 3, 2, "band"}, {576, 14, 3, 2, "band"}, {240, 28, 3, 2, "band"}, {480, 14, 5, 1, "band"},
		{120, 28, 5, 1, "band"}, {72, 56, 5, 2, "band"}, {672, 14, 5, 2, "band"}, {672, 14, 5, 1, "band:s3"},
		{32, 112, 3, 1, "band:s2"},
	};
	for (size_t i = 0; i < sizeof ls / sizeof *ls; i++) {
		int C = ls[i].C, H = ls[i].H, K = ls[i].k, S = ls[i].s, p = K / 2, O = (H + 2 * p - K) / S + 1;
		char text[2048];
		snprintf(text, sizeof text,
			 "graph @d(%%x: f16[32,%d,%d,%d], %%w: f16[%d,%d,%d,1], %%b: f16[%d]) -> (f16[32,%d,%d,%d]) {\n"
			 "  %%y = fusion @c0(%%x, %%w, %%b) {kind = \"conv\"} : f16[32,%d,%d,%d] {\n"
			 "  ^(%%0: f16[32,%d,%d,%d], %%1: f16[%d,%d,%d,1], %%2: f16[%d]):\n"
			 "    %%c = conv(%%0, %%1, %%2) {channels_last = true, pads = [%d, %d, %d, %d], strides = [%d, %d], "
			 "group = %d} : f16[32,%d,%d,%d]\n"
			 "    %%k = const 6.0 : f16[]\n    %%z = const 0.0 : f16[]\n    %%h = max(%%c, %%z) : f16[32,%d,%d,%d]\n"
			 "    %%l = min(%%h, %%k) : f16[32,%d,%d,%d]\n    yield %%l\n  }\n  return %%y\n}\n",
			 H, H, C, C, K, K, C, O, O, C, O, O, C, H, H, C, C, K, K, C, p, p, p, p, S, S, C, O, O, C, O, O, C,
			 O, O, C);
		kf_ctx *c = kf_ctx_new();
		kf_module *m = kft_parse(c, text);
		kf_graph *g = m->graph[0];
		/* (the rows kernel forced: by default the larger inputs take the tiled one) */
		setenv("KFUSE_DEPTHWISE", ls[i].dw ? ls[i].dw : "rows", 1);
		kf_kernel k;
		int rc = kf_emit_node(g, g->blk[0].first, &k);
		unsetenv("KFUSE_DEPTHWISE");
		if (rc != 0)
			kft_fail_diags(c, "emit");
		if (!strstr(k.src, "float wf["))
			fail_msg("%d channels %dx%d, %dx%d /%d: not the rows kernel", C, H, H, K, K, S);
		int regs = kft_ptxas_checked(&k, "sm_90", 128);
		const char *plan = strstr(k.src, "/* depthwise ");
		fprintf(stderr, "ptxas depthwise %d ch %dx%d %dx%d/%d %s: %d registers, block %d, %.*s\n", C, H, H, K, K, S,
			ls[i].dw ? ls[i].dw : "(default)", regs, k.block, plan ? (int)strcspn(plan, "\n") : 0, plan ? plan : "");
		kf_kernel_free(&k);
		kf_module_free(m);
		kf_ctx_free(c);
	}
}

/* The weight's transpose and its scaling depend on constants alone: one
 * kernel (the conv) runs; the plan says what it computed instead. */
static void hoisting(void **st)
{
	if (!kft_have_nvrtc())
		skip();
	kf_ctx *c = kf_ctx_new();
	kf_module *m = kft_parse(c,
		"graph @h(%x: f16[1,8,8,16]) -> (f16[1,8,8,16]) {\n"
		"  %w0 = const dense<0.5> : f16[16,16,3,3]\n"
		"  %w1 = transpose(%w0) {perm = [0, 2, 3, 1]} : f16[16,3,3,16]\n"
		"  %s = const dense<2.0> : f16[16,1,1,1]\n"
		"  %w = mul(%w1, %s) : f16[16,3,3,16]\n"
		"  %y = conv(%x, %w) {channels_last = true, pads = [1, 1, 1, 1]} : f16[1,8,8,16]\n"
		"  return %y\n}\n");
	kf_buf report = {0};
	kf_cuda_opts o = {.dry_run = true, .no_cache = true, .report = &report};
	kf_cuda_session *s = kf_cuda_session_new(c, &o);
	assert_non_null(s);
	if (kf_cuda_session_plan(s, m->graph[0]) != 0)
		kft_fail_diags(c, "plan");
	kf_cuda_stats stats;
	kf_cuda_session_stats(s, &stats);
	assert_int_equal(stats.kernels, 1);
	kf_buf_putc(&report, '\0');
	if (!strstr(report.p, "cuda: @h: 2 constant-only nodes computed at plan time, or shared with another plan (0.01 MiB)"))
		fail_msg("%s", report.p);
	kf_buf_free(&report);
	kf_cuda_session_free(s);
	kf_module_free(m);
	kf_ctx_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(hoisting),
		cmocka_unit_test(ptxas_convs),
		cmocka_unit_test(ptxas_hopper),
		cmocka_unit_test(ptxas_depthwise_rows),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
