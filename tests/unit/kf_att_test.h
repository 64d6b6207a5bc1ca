/* kf_att_test.h: what the attention kernels' unit tests share
 * (test_attention.c: f16, bf16, the split-key and Hopper kernels;
 * test_attention_tf32.c: tf32 and the head dims only the mma.sync kernel
 * takes): a case (graph text, what its kernel must say, tolerances), its
 * emission after fuse-attention, its emulation against the interpreter
 * (kf_emu.h) and the ptxas check of a list of cases.  Include after
 * cmocka.h, in one test file each. */
#ifndef KF_ATT_TEST_H
#define KF_ATT_TEST_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kf_test.h"
#include "kf_test_nvrtc.h"
#include "kf_emu.h"
#include "equiv.h"

/* The plain case's graph: f16, head dim 64, the transposes of k in the
 * graph, the output transposed back to [B, T, H * D] (written through its
 * view); a case without text runs it. */
#define KFT_ATT_PLAIN \
	"graph @g(%q: f16[2,2,128,64], %k: f16[2,2,128,64], %v: f16[2,2,128,64]) -> (f16[2,128,128]) {\n" \
	"  %kt = transpose(%k) {perm = [0, 1, 3, 2]} : f16[2,2,64,128]\n" \
	"  %s = matmul(%q, %kt) : f16[2,2,128,128]\n  %c = const 0.125 : f16[]\n" \
	"  %t = mul(%s, %c) : f16[2,2,128,128]\n  %p = softmax(%t) {axis = -1} : f16[2,2,128,128]\n" \
	"  %o = matmul(%p, %v) : f16[2,2,128,64]\n  %ot = transpose(%o) {perm = [0, 2, 1, 3]} : f16[2,128,2,64]\n" \
	"  %y = reshape(%ot) {shape = [2, 128, 128]} : f16[2,128,128]\n  return %y\n}\n"

/* A case: graph text; the kernel kind expected in its text ("fa", "simt")
 * and an environment tile; tolerances. */
typedef struct acase {
	const char *name, *text, *want, *tile;
	double rtol, atol;
	int maxreg;
	int wgmma; /* the target's (kf_emit_target); 0: unknown (kf_emit_node) */
	bool tf32; /* fuse-attention{tf32}: f32 on tf32 tensor cores */
} acase;

/* Parses text, runs fuse-attention and emits the attention fusion. */
static kf_module *emit_case(kf_ctx *c, const acase *a, kf_kernel *k, kf_nid *fn)
{
	kf_rt_register(c);
	kf_module *m = kft_parse(c, a->text ? a->text : KFT_ATT_PLAIN);
	kft_run_pipe(c, m, a->tf32 ? "fuse-attention{tf32}" : "fuse-attention");
	*fn = kft_first_fusion(m->graph[0]);
	assert_string_equal(kf_attr_str(m->graph[0], *fn, "kind", ""), "attention");
	if (a->tile)
		setenv("KFUSE_ATTN_TILE", a->tile, 1);
	kf_emit_target t = {.wgmma = a->wgmma};
	int rc = kf_emit_node_for(m->graph[0], *fn, &t, k);
	unsetenv("KFUSE_ATTN_TILE");
	if (rc != 0)
		kft_fail_diags(c, a->name);
	if (a->want && !strstr(k->src, a->want))
		fail_msg("%s: the kernel does not say '%s':\n%s", a->name, a->want, k->src);
	return m;
}

/* The graph's inputs as random tensors (normal, exactly representable). */
static void inputs(kf_graph *g, kf_tensor *in, uint64_t seed)
{
	uint64_t rng = seed;
	const kf_block *b = &g->blk[0];
	for (uint32_t i = 0; i < b->narg; i++) {
		const kf_type *t = kf_vtype(g, b->arg[i]);
		assert_int_equal(kf_tensor_random(&in[i], (kf_dtype)t->dtype, t->rank, t->dim, &rng), 0);
	}
}

/* Emulates the attention kernel of case a and compares it with the
 * interpreter; returns the elements out of tolerance. */
static int64_t emulate(const acase *a, const char *from, const char *to)
{
	kf_ctx *c = kf_ctx_new();
	kf_kernel k;
	kf_nid f;
	kf_module *m = emit_case(c, a, &k, &f);
	kf_graph *g = m->graph[0];
	if (from) /* a corrupted kernel must fail the comparison */
		kfe_corrupt(&k, from, to);
	uint32_t na = g->blk[0].narg;
	kf_tensor in[16], want, got[1], par[16];
	assert_true(na <= 16 && k.nin <= 16 && k.nout == 1);
	inputs(g, in, 42);
	assert_int_equal(kf_interp_run(g, in, (int)na, &want, 1), 0);
	/* the kernel's parameters are graph inputs (the tests keep them so) */
	kfe_params_from_inputs(g, &k, in, par);
	assert_int_equal(kf_tensor_alloc_type(&got[0], kf_vtype(g, k.out[0])), 0);
	int64_t bad = -1;
	if (kfe_run(&k, par, got)) {
		kf_equiv_stat st;
		kf_equiv_compare(&got[0], &want, a->rtol, a->atol, &st);
		kf_buf d = {0};
		kf_equiv_describe(&d, &st);
		fprintf(stderr, "emu %s%s: %.*s\n", a->name, from ? " (corrupted)" : "", (int)d.n, d.p);
		kf_buf_free(&d);
		bad = st.nbad;
	} else {
		fprintf(stderr, "emu: no C++ compiler, %s not emulated\n", a->name);
	}
	for (uint32_t i = 0; i < na; i++)
		kf_tensor_free(&in[i]);
	kf_tensor_free(&want);
	kf_tensor_free(&got[0]);
	kf_kernel_free(&k);
	kf_module_free(m);
	kf_ctx_free(c);
	return bad;
}

/* Each case's kernel through ptxas for sm_90(a): no spills, at most its
 * maxreg registers (skipped without NVRTC). */
static void kft_att_ptxas(const acase *const *all, size_t n)
{
	if (!kft_have_nvrtc()) {
		skip();
		return;
	}
	for (size_t i = 0; i < n; i++) {
		kf_ctx *c = kf_ctx_new();
		kf_kernel k;
		kf_nid f;
		kf_module *m = emit_case(c, all[i], &k, &f);
		int regs = kft_ptxas_checked(&k, k.sm90a ? "sm_90a" : "sm_90", all[i]->maxreg);
		fprintf(stderr, "ptxas %s: %d registers, %d threads, %d bytes of shared memory, no spills\n", all[i]->name,
			regs, k.block, k.smem);
		kf_kernel_free(&k);
		kf_module_free(m);
		kf_ctx_free(c);
	}
}

static void emu_case(const acase *a) { kfe_expect_clean(emulate(a, NULL, NULL)); }

#endif
