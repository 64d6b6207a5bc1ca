/* The kernels of sized plans (cuda/emit_cuda.h's kf_emit_dyn), which read
 * the dims that come from symbols from arguments, run on the host
 * (tests/unit/kf_emu.h) against the interpreter.  A symbolic graph whose
 * body fuses into one kernel is specialised to several sizes of one bucket:
 * each must emit the very same text (the kernel cache then compiles it
 * once), and that one text, given each size's arguments, must compute what
 * the interpreter computes at that size.  A size of another bucket may
 * emit another text, which must compute right too.  Skipped without a C++
 * compiler. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "kf_test.h"
#include "kf_emu.h"
#include "emit_matmul.h"
#include "equiv.h"
#include "interp.h"
#include "passes.h"

typedef struct dcase {
	const char *name;
	const char *text;     /* a symbolic graph */
	const char *pipe;     /* run on it once (NULL: none) */
	const char *tile;     /* the contraction fusion's tile (NULL: the default) */
	int part;             /* a contraction's kernel around cuBLAS (KF_MM_PART_EPI: its
			       * epilogue, which reads the GEMM's result; 0: the whole) */
	const char *acc;      /* part: a graph of the same inputs giving the GEMM's result */
	int nsize;
	int64_t size[4][3];   /* the symbols' sizes, in order of first appearance */
	int same[4];          /* the text of size i must be the one of size same[i] (-1: any) */
	double rtol, atol;
	int wg;               /* the device has wgmma (kf_emit_target.wgmma): the kernel must be the Hopper one */
	const char *bucket;   /* a contraction's bucket at size 0 (kf_kernel.bucket; NULL: not checked) */
	bool fixed;           /* emitted for the fixed sizes (no kf_emit_dyn), as a static plan does */
} dcase;

/* Random inputs of g's types (ids in [0, 64): the tables below have 64 rows). */
static void inputs(kf_graph *g, kf_tensor *in, uint64_t seed)
{
	for (uint32_t i = 0; i < g->blk[0].narg; i++) {
		const kf_type *t = kf_vtype(g, g->blk[0].arg[i]);
		assert_int_equal(kf_tensor_random(&in[i], (kf_dtype)t->dtype, t->rank, t->dim, &seed), 0);
		if (t->dtype == KF_I64)
			for (int64_t e = 0; e < kf_tensor_numel(&in[i]); e++)
				((int64_t *)in[i].data)[e] = (e * 37 + 11) % 64;
	}
}

/* The value of kernel parameter v: a graph input, a constant's payload, or
 * (acc given) the GEMM's result a part reads. */
static void param(kf_graph *g, kf_vid v, const kf_tensor *in, const kf_tensor *acc, kf_tensor *out, bool *own)
{
	for (uint32_t i = 0; i < g->blk[0].narg; i++)
		if (g->blk[0].arg[i] == v) {
			*out = in[i];
			*own = false;
			return;
		}
	kf_nid d = kf_def(g, v);
	if (acc && (d == KF_NONE || kf_N(g, d)->op != KF_OP_CONST)) {
		*out = *acc;
		*own = false;
		return;
	}
	assert_true(d != KF_NONE && kf_N(g, d)->op == KF_OP_CONST);
	char err[200];
	assert_int_equal(kf_tensor_alloc_type(out, kf_vtype(g, v)), 0);
	assert_int_equal(kf_op(g->ctx, KF_OP_CONST)->cpu(g, d, NULL, 0, out, 1, err, sizeof err), 0);
	*own = true;
}

/* Case c at size si of symbolic graph sym (fused, one kernel): the kernel's
 * name into name; the elements out of tolerance (-1: not emulated). */
static int64_t run_size(const dcase *c, kf_graph *sym, const kf_graph *probe, const kf_sid *psym,
			const int64_t *pval, uint32_t np, int si, char *name)
{
	kf_ctx *ctx = sym->ctx;
	kf_graph *g = kf_graph_clone(sym);
	bool changed = false;
	kf_specialize(g, psym, c->size[si], np, &changed);
	if (kf_verify(g) != 0)
		kft_fail_diags(ctx, c->name);
	/* the one node that computes (the case's graph fuses whole) */
	kf_nid f = KF_NONE;
	int nk = 0;
	kf_foreach_node(g, 0, n) {
		int op = kf_N(g, n)->op;
		if (op != KF_OP_CONST && op != KF_OP_RETURN && op != KF_OP_RESHAPE) {
			f = n;
			nk++;
		}
	}
	if (nk != 1 || kf_N(g, f)->op != KF_OP_FUSION)
		fail_msg("%s: %d kernels, not one fusion", c->name, nk);
	if (c->tile)
		kf_node_set_attr(g, f, kf_intern_cstr(ctx, "tile"),
				 (kf_attrval){.kind = KF_ATTR_STR, .s = kf_intern_cstr(ctx, c->tile)});
	/* the sized target, as the CUDA backend makes it (cuda_backend.c) */
	int64_t val[KF_PROBE_MAX], rep[KF_PROBE_MAX];
	for (uint32_t i = 0; i < np; i++) {
		val[i] = c->size[si][i];
		rep[i] = kf_emit_bucket(val[i]);
	}
	kf_emit_dyn dy = {.sym = sym, .sid = psym, .val = val, .rep = rep, .n = np, .probe = probe, .pval = pval};
	kf_emit_target t = {.wgmma = c->wg, .dyn = c->fixed ? NULL : &dy};
	kf_kernel k;
	if (kf_emit_node_part(g, f, &t, c->part, &k) != 0)
		kft_fail_diags(ctx, c->name);
	if (c->wg && !k.sm90a)
		fail_msg("%s: size %d: not the wgmma kernel", c->name, si);
	if (c->pipe && strstr(c->pipe, "{tf32}") && !strstr(k.src, " tf32: "))
		fail_msg("%s: size %d: not the flash kernel's tf32 form", c->name, si);
	assert_int_equal(k.dynbad, 0); /* every symbolic dim evaluated to its number */
	if (c->bucket && si == 0 && strcmp(k.bucket, c->bucket))
		fail_msg("%s: bucket %s, not %s", c->name, k.bucket, c->bucket);
	snprintf(name, 24, "%s", k.name);
	uint32_t na = g->blk[0].narg;
	kf_tensor in[8], want[4], got[4], par[16];
	bool own[16] = {0};
	assert_true(na <= 8 && g->nres <= 4 && k.nin <= 16 && k.nout == g->nres);
	inputs(g, in, 7 + (uint64_t)si);
	if (kf_interp_run(g, in, (int)na, want, (int)g->nres) != 0)
		kft_fail_diags(ctx, c->name);
	kf_tensor acc = {0};
	if (c->acc) { /* the GEMM's result, as cuBLAS writes it, from the same inputs */
		kf_module *am = kft_parse(ctx, c->acc);
		kf_graph *ag = am->graph[0];
		kf_specialize(ag, psym, c->size[si], np, &changed);
		if (kf_interp_run(ag, in, (int)ag->blk[0].narg, &acc, 1) != 0)
			kft_fail_diags(ctx, c->name);
		kf_module_free(am);
	}
	for (uint32_t j = 0; j < k.nin; j++)
		param(g, k.in[j], in, c->acc ? &acc : NULL, &par[j], &own[j]);
	for (uint32_t j = 0; j < k.nout; j++)
		assert_int_equal(kf_tensor_alloc_type(&got[j], kf_vtype(g, k.out[j])), 0);
	int64_t bad = -1;
	if (kfe_run_sized(&k, par, got, val, c->fixed ? 0 : (int)np)) {
		bad = 0;
		for (uint32_t j = 0; j < k.nout; j++) {
			/* the kernel's outputs are the fusion's results, in order */
			kf_equiv_stat st;
			kf_equiv_compare(&got[j], &want[j], c->rtol, c->atol, &st);
			kf_buf d = {0};
			kf_equiv_describe(&d, &st);
			fprintf(stderr, "emu %s at size %d (%s): %.*s\n", c->name, si, k.name, (int)d.n, d.p);
			kf_buf_free(&d);
			bad += st.nbad;
		}
	}
	for (uint32_t j = 0; j < k.nin; j++)
		if (own[j])
			kf_tensor_free(&par[j]);
	for (uint32_t i = 0; i < na; i++)
		kf_tensor_free(&in[i]);
	kf_tensor_free(&acc);
	for (uint32_t j = 0; j < g->nres; j++) {
		kf_tensor_free(&want[j]);
		kf_tensor_free(&got[j]);
	}
	kf_kernel_free(&k);
	kf_graph_free(g);
	return bad;
}

static void run_case(const dcase *c)
{
	if (system("c++ --version > /dev/null 2>&1") != 0) {
		fprintf(stderr, "emu: no C++ compiler, %s not emulated\n", c->name);
		return;
	}
	kf_ctx *ctx = kf_ctx_new();
	kf_rt_register(ctx);
	kf_module *m = kft_parse(ctx, c->text);
	if (c->pipe)
		kft_run_pipe(ctx, m, c->pipe);
	kf_graph *sym = m->graph[0];
	kf_sid psym[KF_PROBE_MAX];
	int64_t pval[KF_PROBE_MAX];
	uint32_t np = 0;
	kf_graph *probe = kf_graph_probe(sym, psym, pval, &np);
	assert_non_null(probe);
	char names[4][24];
	for (int si = 0; si < c->nsize; si++) {
		int64_t bad = run_size(c, sym, probe, psym, pval, np, si, names[si]);
		if (bad > 0)
			fail_msg("%s: size %d: %lld elements differ from the interpreter", c->name, si, (long long)bad);
		if (c->same[si] >= 0 && strcmp(names[si], names[c->same[si]]))
			fail_msg("%s: size %d emitted %s, not size %d's %s: one bucket, two texts", c->name, si, names[si],
				 c->same[si], names[c->same[si]]);
	}
	kf_graph_free(probe);
	kf_module_free(m);
	kf_ctx_free(ctx);
}

/* Embeddings: a gather from a table by ids [B,T], a position table's
 * first T rows broadcast over B, a bias; then a layer norm over 32 (a row
 * kernel once fused: its rows B*T).  Sizes (B, T): 3x16, 4x13, 3x9 share
 * the buckets (4, 16); 2x5 is another. */
static const dcase embed = {
	"embed",
	"graph @e(%ids: i64[B,T], %w: f32[64,32], %pos: f32[64,32], %b: f32[32]) -> (f32[B,T,32]) {\n"
	"  %x = gather(%w, %ids) {axis = 0} : f32[B,T,32]\n"
	"  %p = slice(%pos) {axes = [0], ends = [\"T\"], starts = [0], steps = [1]} : f32[T,32]\n"
	"  %y = add(%x, %p) : f32[B,T,32]\n"
	"  %z = add(%y, %b) : f32[B,T,32]\n"
	"  %t = tanh(%z) : f32[B,T,32]\n"
	"  return %t\n}\n",
	"fuse", NULL, 0, NULL, 4, {{3, 16}, {4, 13}, {3, 9}, {2, 5}}, {-1, 0, 0, -1}, 1e-5, 1e-5,
};

static const dcase layernorm = {
	"layernorm",
	"graph @l(%x: f32[B,T,48], %y: f32[B,T,48], %g: f32[48], %b: f32[48]) -> (f32[B,T,48]) {\n"
	"  %a = add(%x, %y) : f32[B,T,48]\n"
	"  %n = layer_norm(%a, %g, %b) {axis = -1, epsilon = 1e-5} : f32[B,T,48]\n"
	"  return %n\n}\n",
	"fuse", NULL, 0, NULL, 3, {{3, 16}, {4, 13}, {1, 7}}, {-1, 0, -1}, 1e-4, 1e-5,
};

/* Softmax over T keys with a mask over them (the row length symbolic):
 * the bucket's geometry, every vector masked. */
static const dcase softmax_t = {
	"softmax_t",
	"graph @s(%x: f32[B,4,T,T], %m: f32[T]) -> (f32[B,4,T,T]) {\n"
	"  %c = const 0.25 : f32[]\n"
	"  %a = mul(%x, %c) : f32[B,4,T,T]\n"
	"  %b = add(%a, %m) : f32[B,4,T,T]\n"
	"  %p = softmax(%b) {axis = -1} : f32[B,4,T,T]\n"
	"  return %p\n}\n",
	"fuse", NULL, 0, NULL, 4, {{2, 13}, {2, 16}, {1, 200}, {1, 256}}, {-1, 0, -1, 2}, 1e-4, 1e-6,
};

/* A linear layer over B*T rows (the rows symbolic, M of the kernel) with
 * bias and gelu: the SIMT kernel. */
#define LINEAR(dt)                                                                                               \
	"graph @m(%x: " dt "[B,T,64], %w: " dt "[64,48], %b: " dt "[48]) -> (" dt "[B,T,48]) {\n"                    \
	"  %y = matmul(%x, %w) : " dt "[B,T,48]\n"                                                                  \
	"  %z = add(%y, %b) : " dt "[B,T,48]\n"                                                                     \
	"  %g = gelu(%z) {approximate = \"tanh\"} : " dt "[B,T,48]\n"                                               \
	"  return %g\n}\n"
static const dcase linear_fma = {
	"linear_fma", LINEAR("f32"), "fuse-matmul", "fma32x32x16t2x2", 0, NULL, 3, {{3, 16}, {4, 13}, {2, 9}}, {-1, 0, -1},
	1e-4, 1e-5,
};

/* The same on mma.sync tiles (f16, cp.async of rows whose count varies). */
static const dcase linear_mma = {
	"linear_mma", LINEAR("f16"), "fuse-matmul", "mma64x64x32w2x2s3", 0, NULL, 3, {{3, 16}, {4, 13}, {2, 9}}, {-1, 0, 0},
	2e-2, 2e-2,
};

/* The same on the Hopper kernel (wgmma, TMA; persistent, the producer
 * running ahead, the staged 16-byte epilogue) over R rows, bias and
 * exact GELU as BERT's FFN (cuBLASLt cannot take it), then a residual of
 * R rows: rows past R in the last tile (the epilogue reads row R - 1's
 * residual for them, stores none); 300 and 400 one text. */
static const dcase linear_wg = {
	"linear_wg",
	"graph @m(%x: f16[R,128], %w: f16[128,128], %b: f16[128], %r: f16[R,128]) -> (f16[R,128]) {\n"
	"  %y = matmul(%x, %w) : f16[R,128]\n"
	"  %z = add(%y, %b) : f16[R,128]\n"
	"  %g = gelu(%z) : f16[R,128]\n"
	"  %s = add(%g, %r) : f16[R,128]\n"
	"  return %s\n}\n",
	"fuse-matmul", "wg128x128x64s4pvs", 0, NULL, 3, {{300}, {400}, {64}}, {-1, 0, -1}, 2e-2, 2e-2, 1,
};

/* A linear layer over [B,T] rows as BERT's FFN up projection (bias,
 * exact GELU, a residual of the result's shape): A's batches folded into
 * the kernel's M (one tall matrix, the bucket's B*T rows: 4 x 128); 3 x
 * 100 and 4 x 75 one text, 2 x 32 another. */
static const dcase linear_wg_bt = {
	"linear_wg_bt",
	"graph @m(%x: f16[B,T,128], %w: f16[128,128], %b: f16[128], %r: f16[B,T,128]) -> (f16[B,T,128]) {\n"
	"  %y = matmul(%x, %w) : f16[B,T,128]\n"
	"  %z = add(%y, %b) : f16[B,T,128]\n"
	"  %g = gelu(%z) : f16[B,T,128]\n"
	"  %s = add(%g, %r) : f16[B,T,128]\n"
	"  return %s\n}\n",
	"fuse-matmul", "wg128x128x64s4pvs", 0, NULL, 3, {{3, 100}, {4, 75}, {2, 32}}, {-1, 0, -1}, 2e-2, 2e-2, 1, "M<=512",
};

/* A residual broadcast over the batch ([T,48] against [B,T,48]) reads row
 * t of each batch: not one tall matrix, the batches stay in the grid. */
static const dcase linear_bcast = {
	"linear_bcast",
	"graph @m(%x: f16[B,T,64], %w: f16[64,48], %r: f16[T,48]) -> (f16[B,T,48]) {\n"
	"  %y = matmul(%x, %w) : f16[B,T,48]\n"
	"  %s = add(%y, %r) : f16[B,T,48]\n"
	"  return %s\n}\n",
	"fuse-matmul", "mma64x64x32w2x2s3", 0, NULL, 3, {{3, 16}, {4, 13}, {2, 9}}, {-1, 0, 0}, 2e-2, 2e-2, 0,
	"M<=16,batch<=4",
};

/* Scores of attention left unfused: a batched matmul whose N is T and a
 * batch of B*4 (q [B,4,T,16] by k^T [B,4,16,T]). */
static const dcase scores = {
	"scores",
	"graph @q(%q: f32[B,4,T,16], %k: f32[B,4,T,16]) -> (f32[B,4,T,T]) {\n"
	"  %kt = transpose(%k) {perm = [0, 1, 3, 2]} : f32[B,4,16,T]\n"
	"  %s = matmul(%q, %kt) : f32[B,4,T,T]\n"
	"  return %s\n}\n",
	"fuse-matmul", "fma32x32x16t2x2", 0, NULL, 3, {{3, 13}, {4, 16}, {3, 9}}, {-1, 0, 0}, 1e-4, 1e-5,
};

/* Attention of 2 heads of 32 (q, k and v [B,T,64] seen as [B,2,T,32]):
 * padding masks [B,1,1,T] added to the scaled scores (BERT), or a causal
 * mask of iotas (GPT-2); f16 runs the flash kernel on mma.sync, f32 the
 * SIMT one.  Sizes (B, T): 2x13, 2x16 share a bucket; 3x9 and 2x40 not.
 * With heads of 64 (W 128) and wgmma on the device, f16 runs the Hopper
 * kernel (q, k, v by tensor maps): 2x13 and 2x16 share a bucket, and 1x300
 * and 1x400 another (3 and 4 key tiles of 128). */
#define ATT_HEADW(dt, W, D, scale)                                                                               \
	"graph @a(%q: " dt "[B,T," W "], %k: " dt "[B,T," W "], %v: " dt "[B,T," W "], %m: " dt "[B,1,1,T]) -> (" dt  \
	"[B,T," W "]) {\n"                                                                                         \
	"  %q4 = reshape(%q) {shape = [\"B\", \"T\", 2, " D "]} : " dt "[B,T,2," D "]\n"                            \
	"  %qt = transpose(%q4) {perm = [0, 2, 1, 3]} : " dt "[B,2,T," D "]\n"                                      \
	"  %k4 = reshape(%k) {shape = [\"B\", \"T\", 2, " D "]} : " dt "[B,T,2," D "]\n"                            \
	"  %kt = transpose(%k4) {perm = [0, 2, 3, 1]} : " dt "[B,2," D ",T]\n"                                      \
	"  %v4 = reshape(%v) {shape = [\"B\", \"T\", 2, " D "]} : " dt "[B,T,2," D "]\n"                            \
	"  %vt = transpose(%v4) {perm = [0, 2, 1, 3]} : " dt "[B,2,T," D "]\n"                                      \
	"  %s = matmul(%qt, %kt) : " dt "[B,2,T,T]\n"                                                              \
	"  %c = const " scale " : " dt "[]\n"                                                                      \
	"  %t = mul(%s, %c) : " dt "[B,2,T,T]\n"
#define ATT_TAILW(dt, W, D)                                                                                      \
	"  %p = softmax(%u) {axis = -1} : " dt "[B,2,T,T]\n"                                                       \
	"  %o = matmul(%p, %vt) : " dt "[B,2,T," D "]\n"                                                            \
	"  %ot = transpose(%o) {perm = [0, 2, 1, 3]} : " dt "[B,T,2," D "]\n"                                       \
	"  %y = reshape(%ot) {shape = [\"B\", \"T\", " W "]} : " dt "[B,T," W "]\n"                                 \
	"  return %y\n}\n"
#define ATT_CAUSAL_MASK(dt)                                                                                      \
	"  %r = iota() {axis = 2, dtype = \"i64\", shape = [1, 1, \"T\", \"T\"]} : i64[1,1,T,T]\n"                      \
	"  %j = iota() {axis = 3, dtype = \"i64\", shape = [1, 1, \"T\", \"T\"]} : i64[1,1,T,T]\n"                      \
	"  %keep = le(%j, %r) : i1[1,1,T,T]\n  %f = const -10000.0 : " dt "[]\n"                                   \
	"  %w = where(%keep, %t, %f) : " dt "[B,2,T,T]\n  %u = add(%w, %m) : " dt "[B,2,T,T]\n"
#define ATT_PAD(dt) ATT_HEADW(dt, "64", "32", "0.1767767") "  %u = add(%t, %m) : " dt "[B,2,T,T]\n" ATT_TAILW(dt, "64", "32")
#define ATT_CAUSAL(dt) ATT_HEADW(dt, "64", "32", "0.1767767") ATT_CAUSAL_MASK(dt) ATT_TAILW(dt, "64", "32")
#define ATT_PAD64(dt) ATT_HEADW(dt, "128", "64", "0.125") "  %u = add(%t, %m) : " dt "[B,2,T,T]\n" ATT_TAILW(dt, "128", "64")
#define ATT_CAUSAL64(dt) ATT_HEADW(dt, "128", "64", "0.125") ATT_CAUSAL_MASK(dt) ATT_TAILW(dt, "128", "64")
static const dcase att_pad_mma = {
	"att_pad_mma", ATT_PAD("f16"), "fuse-attention", NULL, 0, NULL, 4, {{2, 13}, {2, 16}, {3, 9}, {2, 40}}, {-1, 0, -1, -1},
	2e-2, 4e-3,
};
static const dcase att_causal_mma = {
	"att_causal_mma", ATT_CAUSAL("f16"), "fuse-attention", NULL, 0, NULL, 4, {{2, 13}, {2, 16}, {2, 40}, {1, 100}},
	{-1, 0, -1, -1},
	2e-2, 4e-3,
};
static const dcase att_pad_simt = {
	"att_pad_simt", ATT_PAD("f32"), "fuse-attention", NULL, 0, NULL, 3, {{2, 13}, {2, 16}, {3, 40}}, {-1, 0, -1}, 1e-4,
	1e-5,
};

static const dcase att_pad_wga = {
	"att_pad_wga", ATT_PAD64("f16"), "fuse-attention", NULL, 0, NULL, 4, {{2, 13}, {2, 16}, {1, 300}, {1, 400}},
	{-1, 0, -1, 2}, 2e-2, 4e-3, 1,
};
static const dcase att_causal_wga = {
	"att_causal_wga", ATT_CAUSAL64("f16"), "fuse-attention", NULL, 0, NULL, 4, {{2, 13}, {2, 16}, {1, 300}, {1, 400}},
	{-1, 0, -1, 2}, 2e-2, 4e-3, 1,
};

/* The same in f32 with tf32 allowed: the mma.sync kernel's tf32 form at
 * symbolic sizes (its tile's rows from the size's bucket) */
static const dcase att_pad_tf32 = {
	"att_pad_tf32", ATT_PAD("f32"), "fuse-attention{tf32}", NULL, 0, NULL, 4, {{2, 13}, {2, 16}, {3, 9}, {2, 40}},
	{-1, 0, -1, -1}, 2e-2, 4e-3,
};
static const dcase att_causal_tf32 = {
	"att_causal_tf32", ATT_CAUSAL("f32"), "fuse-attention{tf32}", NULL, 0, NULL, 4, {{2, 13}, {2, 16}, {2, 40}, {1, 100}},
	{-1, 0, -1, -1}, 2e-2, 4e-3,
};

/* Causal attention in f32: the SIMT kernel; at 300 and 400 keys (one
 * bucket) a row's keys are split across two blocks, combined through the
 * kernel's workspace (sized for the bucket's rows). */
static const dcase att_causal_simt = {
	"att_causal_simt", ATT_CAUSAL("f32"), "fuse-attention", NULL, 0, NULL, 3, {{2, 13}, {1, 260}, {1, 300}},
	{-1, -1, 1}, 1e-4, 1e-5,
};

/* The epilogue a linear layer's GEMM runs through when cuBLAS computes the
 * product (bias and gelu on its result, read as a parameter): f16, whose
 * even rows take column pairs (KF_KERNEL_epi2), and f32. */
#define LINEAR_ACC(dt)                                                                                           \
	"graph @m(%x: " dt "[B,T,64], %w: " dt "[64,48], %b: " dt "[48]) -> (" dt "[B,T,48]) {\n"                    \
	"  %y = matmul(%x, %w) : " dt "[B,T,48]\n  return %y\n}\n"
static const dcase epi_f16 = {
	"epi_f16", LINEAR("f16"), "fuse-matmul", NULL, KF_MM_PART_EPI, LINEAR_ACC("f16"), 3,
	{{3, 16}, {4, 13}, {2, 9}}, {-1, 0, -1}, 2e-2, 2e-2,
};
static const dcase epi_f32 = {
	"epi_f32", LINEAR("f32"), "fuse-matmul", NULL, KF_MM_PART_EPI, LINEAR_ACC("f32"), 2, {{3, 16}, {4, 13}},
	{-1, 0}, 1e-5, 1e-6,
};

/* The epilogue after cuBLAS where rows have an even length but not a
 * multiple of 8 (128 x 1700 + x, cast to f32: the cublas route mismatched
 * on the H200, s15h), sized and fixed. */
#define ADDCAST                                                                                                  \
	"graph @m(%x: f16[M,64], %w: f16[N,64], %r: f16[M,N]) -> (f32[M,N]) {\n"                                   \
	"  %t = transpose(%w) {perm = [1, 0]} : f16[64,N]\n  %y = matmul(%x, %t) : f16[M,N]\n"                   \
	"  %z = add(%y, %r) : f16[M,N]\n  %c = cast(%z) {to = \"f32\"} : f32[M,N]\n  return %c\n}\n"
#define ADDCAST_ACC                                                                                              \
	"graph @m(%x: f16[M,64], %w: f16[N,64], %r: f16[M,N]) -> (f16[M,N]) {\n"                                   \
	"  %t = transpose(%w) {perm = [1, 0]} : f16[64,N]\n  %y = matmul(%x, %t) : f16[M,N]\n  return %y\n}\n"
static const dcase epi_addcast = {
	"epi_addcast", ADDCAST, "fuse-matmul", NULL, KF_MM_PART_EPI, ADDCAST_ACC, 2, {{128, 1700}, {6, 1704}}, {-1, -1},
	2e-2, 2e-2,
};
static const dcase epi_addcast_fixed = {
	"epi_addcast_fixed", ADDCAST, "fuse-matmul", NULL, KF_MM_PART_EPI, ADDCAST_ACC, 2, {{128, 1700}, {6, 1704}},
	{-1, -1}, 2e-2, 2e-2, 0, NULL, true,
};

/* The epilogue a conv runs after cuDNN (tile `cudnn`: cuda_route.c) writes
 * its result: the conv's bias, a residual and relu on it, channels last;
 * f16 with an even channel count (column pairs) and f32 with an odd one. */
#define CONV_EPI(dt, O)                                                                                          \
	"graph @c(%x: " dt "[B,9,9,16], %w: " dt "[" O ",3,3,16], %b: " dt "[" O "], %r: " dt "[B,5,5," O "]) -> (" dt \
	"[B,5,5," O "]) {\n"                                                                                           \
	"  %f = fusion @c0(%x, %w, %b, %r) {kind = \"conv\"} : " dt "[B,5,5," O "] {\n"                                \
	"  ^(%0: " dt "[B,9,9,16], %1: " dt "[" O ",3,3,16], %2: " dt "[" O "], %3: " dt "[B,5,5," O "]):\n"           \
	"    %y = conv(%0, %1, %2) {channels_last = true, pads = [1, 1, 1, 1], strides = [2, 2]} : " dt "[B,5,5," O "]\n" \
	"    %a = add(%y, %3) : " dt "[B,5,5," O "]\n    %e = relu(%a) : " dt "[B,5,5," O "]\n    yield %e\n  }\n"      \
	"  return %f\n}\n"
#define CONV_ACC(dt, O)                                                                                          \
	"graph @c(%x: " dt "[B,9,9,16], %w: " dt "[" O ",3,3,16], %b: " dt "[" O "], %r: " dt "[B,5,5," O "]) -> (" dt \
	"[B,5,5," O "]) {\n"                                                                                           \
	"  %y = conv(%x, %w) {channels_last = true, pads = [1, 1, 1, 1], strides = [2, 2]} : " dt "[B,5,5," O "]\n" \
	"  return %y\n}\n"
static const dcase epi_conv_f16 = {
	"epi_conv_f16", CONV_EPI("f16", "24"), NULL, "cudnn", KF_MM_PART_EPI, CONV_ACC("f16", "24"), 2, {{2}, {3}},
	{-1, -1}, 2e-2, 2e-2, 0, NULL, true,
};
static const dcase epi_conv_f32 = {
	"epi_conv_f32", CONV_EPI("f32", "13"), NULL, "cudnn", KF_MM_PART_EPI, CONV_ACC("f32", "13"), 2, {{2}, {1}},
	{-1, -1}, 1e-5, 1e-6, 0, NULL, true,
};

static void test_embed(void **st) { run_case(&embed); }
static void test_att_causal_simt(void **st) { run_case(&att_causal_simt); }
static void test_epi(void **st)
{
	run_case(&epi_f16);
	run_case(&epi_f32);
	run_case(&epi_addcast);
	run_case(&epi_addcast_fixed);
	run_case(&epi_conv_f16);
	run_case(&epi_conv_f32);
}
static void test_att_pad_mma(void **st) { run_case(&att_pad_mma); }
static void test_att_causal_mma(void **st) { run_case(&att_causal_mma); }
static void test_att_pad_simt(void **st) { run_case(&att_pad_simt); }
static void test_att_pad_wga(void **st) { run_case(&att_pad_wga); }
static void test_att_causal_wga(void **st) { run_case(&att_causal_wga); }
static void test_att_tf32(void **st)
{
	run_case(&att_pad_tf32);
	run_case(&att_causal_tf32);
}
static void test_layernorm(void **st) { run_case(&layernorm); }
static void test_softmax_t(void **st) { run_case(&softmax_t); }
static void test_linear_fma(void **st) { run_case(&linear_fma); }
static void test_linear_mma(void **st) { run_case(&linear_mma); }
static void test_linear_wg(void **st)
{
	run_case(&linear_wg);
	run_case(&linear_wg_bt);
	run_case(&linear_bcast);
}
static void test_scores(void **st) { run_case(&scores); }

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_embed),     cmocka_unit_test(test_layernorm), cmocka_unit_test(test_softmax_t),
		cmocka_unit_test(test_linear_fma), cmocka_unit_test(test_linear_mma), cmocka_unit_test(test_scores),
		cmocka_unit_test(test_att_pad_mma), cmocka_unit_test(test_att_causal_mma), cmocka_unit_test(test_att_pad_simt),
		cmocka_unit_test(test_att_causal_simt), cmocka_unit_test(test_att_pad_wga), cmocka_unit_test(test_att_causal_wga),
		cmocka_unit_test(test_epi),       cmocka_unit_test(test_linear_wg), cmocka_unit_test(test_att_tf32),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
