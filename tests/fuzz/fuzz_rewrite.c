/* fuzz_rewrite: the rewrite driver with the standard rules (patterns/) on
 * random graphs.
 *
 * The bytes are a program that builds an f32 graph over %x: f32[4,8],
 * %y: f32[8] and %s: f32[]: each step is four bytes, a kind, a selector and
 * two operands (indices into the values built so far).  Kinds: a constant
 * (from a table that holds the constants of the standard patterns, so that
 * the fuzzer can assemble GELU, SiLU and the like from pieces), a unary op,
 * a binary op, a cast, a reduction (op, axis, keepdims from the selector),
 * a layout op or softmax or matmul.  A node whose types do not infer is
 * dropped.  The graph returns its last value and one other.
 *
 * Then the rules run to a fixed point.  The driver must converge, the
 * result must verify, and on the interpreter it must compute what the input
 * computed (kf_equiv_check on random inputs); anything else aborts with
 * both graphs printed.  KF_FUZZ_VERBOSE=1 prints each graph before and
 * after, and which rules fired. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kf.h"
#include "equiv.h"
#include "lua_rules.h"
#include "rewrite.h"

#ifndef KF_SOURCE_DIR
#define KF_SOURCE_DIR "."
#endif

#define MAXSTEP 24
#define MAXVAL (3 + MAXSTEP)

static kf_ctx *ctx;        /* one context: the rules load once */
static const kf_ruleset *rules;

static const double consts[] = {
	0.5, 1.0, 2.0, 3.0, 0.7978845608028654, 0.044715, 0.7071067811865476,
	1.4142135623730951, -1.0, 0.0, 1e-5, 0.1,
};
static const int unary[] = {
	KF_OP_NEG, KF_OP_ABS, KF_OP_EXP, KF_OP_TANH, KF_OP_SIGMOID, KF_OP_RELU,
	KF_OP_GELU, KF_OP_ERF, KF_OP_SILU, KF_OP_SQRT, KF_OP_LOG, KF_OP_RSQRT,
};
static const int binary[] = {
	KF_OP_ADD, KF_OP_SUB, KF_OP_MUL, KF_OP_DIV, KF_OP_POW, KF_OP_MAX, KF_OP_MIN,
};
static const char *const cast_to[] = {"f16", "bf16", "f32"};
static const int reduce[] = {KF_OP_REDUCE_SUM, KF_OP_REDUCE_MEAN, KF_OP_REDUCE_MAX, KF_OP_REDUCE_MIN};
static const int64_t axes[] = {-1, 0, 1};

#define N(a) (sizeof(a) / sizeof((a)[0]))

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	ctx = kf_ctx_new();
	kf_rt_register(ctx);
	kf_lrules *r = kf_lua_rules_load(ctx, KF_SOURCE_DIR "/patterns");
	if (!r) {
		kf_diag_flush(ctx, stderr);
		abort();
	}
	rules = kf_lua_rules_set(r);
	return 0;
}

typedef struct reader {
	const uint8_t *p;
	size_t n;
} reader;

static unsigned next(reader *r)
{
	if (!r->n)
		return 0;
	r->n--;
	return *r->p++;
}

static kf_vid add_const(kf_graph *g, double v)
{
	kf_tid t = kf_type_intern(ctx, &(kf_type){KF_F32, 0, {0}});
	kf_nid n = kf_node_new(g, 0, KF_NONE, KF_OP_CONST, NULL, 0, &t, 1);
	kf_const *k = kf_alloc(&g->arena, sizeof *k);
	k->kind = KF_CONST_SCALAR;
	k->n = 1;
	k->f = kf_alloc(&g->arena, sizeof *k->f);
	k->f[0] = v;
	kf_N(g, n)->cst = k;
	return kf_res(g, n, 0);
}

/* A node of op over in[], typed by inference; KF_NONE when it does not infer. */
static kf_vid add_op(kf_graph *g, int op, const kf_vid *in, uint32_t nin, const kf_attr *a, uint32_t na)
{
	kf_tid t0 = kf_V(g, in[0])->type;
	kf_nid n = kf_node_new(g, 0, KF_NONE, op, in, nin, &t0, 1);
	if (na)
		kf_node_set_attrs(g, n, a, na);
	kf_type out[2];
	char err[200];
	if (kf_infer(g, n, out, 2, err, sizeof err) != 1) {
		kf_node_erase(g, n);
		return KF_NONE;
	}
	kf_tid t = kf_type_intern(ctx, &out[0]);
	kf_V(g, kf_res(g, n, 0))->type = t;
	return kf_res(g, n, 0);
}

static kf_attr attr_ints(const char *key, const int64_t *v, uint32_t n, kf_attrval *items)
{
	for (uint32_t i = 0; i < n; i++)
		items[i] = (kf_attrval){.kind = KF_ATTR_INT, .i = v[i]};
	return (kf_attr){kf_intern_cstr(ctx, key), {.kind = KF_ATTR_LIST, .n = n, .list = items}};
}

/* reduce_* over one axis, keepdims or not. */
static kf_vid add_reduce(kf_graph *g, unsigned k, kf_vid x)
{
	kf_attrval item[1];
	kf_attr a[2] = {attr_ints("axes", &axes[(k / 4) % N(axes)], 1, item),
			{kf_intern_cstr(ctx, "keepdims"), {.kind = KF_ATTR_BOOL, .b = (k / 12) % 2 == 0}}};
	return add_op(g, reduce[k % N(reduce)], &x, 1, a, 2);
}

/* transpose, reshape, softmax or matmul. */
static kf_vid add_layout(kf_graph *g, unsigned k, const kf_vid *in)
{
	static const int64_t perm[] = {1, 0}, s84[] = {8, 4}, s32[] = {32}, s48[] = {4, 8};
	kf_attrval items[2];
	kf_attr a;
	switch (k % 6) {
	case 0: a = attr_ints("perm", perm, 2, items); return add_op(g, KF_OP_TRANSPOSE, in, 1, &a, 1);
	case 1: a = attr_ints("shape", s84, 2, items); return add_op(g, KF_OP_RESHAPE, in, 1, &a, 1);
	case 2: a = attr_ints("shape", s32, 1, items); return add_op(g, KF_OP_RESHAPE, in, 1, &a, 1);
	case 3: a = attr_ints("shape", s48, 2, items); return add_op(g, KF_OP_RESHAPE, in, 1, &a, 1);
	case 4:
		a = (kf_attr){kf_intern_cstr(ctx, "axis"), {.kind = KF_ATTR_INT, .i = -1}};
		return add_op(g, KF_OP_SOFTMAX, in, 1, &a, 1);
	default: return add_op(g, KF_OP_MATMUL, in, 2, NULL, 0);
	}
}

static kf_graph *build(reader *r)
{
	kf_graph *g = kf_graph_new(ctx, "fuzz");
	kf_vid v[MAXVAL];
	uint32_t nv = 0;
	kf_tid tx = kf_type_intern(ctx, &(kf_type){KF_F32, 2, {4, 8}});
	kf_tid ty = kf_type_intern(ctx, &(kf_type){KF_F32, 1, {8}});
	kf_tid ts = kf_type_intern(ctx, &(kf_type){KF_F32, 0, {0}});
	v[nv++] = kf_block_add_arg(g, 0, tx, kf_intern_cstr(ctx, "x"));
	v[nv++] = kf_block_add_arg(g, 0, ty, kf_intern_cstr(ctx, "y"));
	v[nv++] = kf_block_add_arg(g, 0, ts, kf_intern_cstr(ctx, "s"));
	for (int step = 0; step < MAXSTEP && r->n >= 2; step++) {
		unsigned sel = next(r) % 6, k = next(r);
		kf_vid in[2] = {v[next(r) % nv], v[next(r) % nv]}, got = KF_NONE;
		if (sel == 0)
			got = add_const(g, consts[k % N(consts)]);
		else if (sel == 1)
			got = add_op(g, unary[k % N(unary)], in, 1, NULL, 0);
		else if (sel == 2)
			got = add_op(g, binary[k % N(binary)], in, 2, NULL, 0);
		else if (sel == 4)
			got = add_reduce(g, k, in[0]);
		else if (sel == 5)
			got = add_layout(g, k, in);
		else {
			kf_attr a = {kf_intern_cstr(ctx, "to"),
				     {.kind = KF_ATTR_STR, .s = kf_intern_cstr(ctx, cast_to[k % N(cast_to)])}};
			got = add_op(g, KF_OP_CAST, in, 1, &a, 1);
		}
		if (got != KF_NONE)
			v[nv++] = got;
	}
	kf_vid ret[2] = {v[nv - 1], v[next(r) % nv]};
	kf_tid rt[2] = {kf_V(g, ret[0])->type, kf_V(g, ret[1])->type};
	kf_node_new(g, 0, KF_NONE, KF_OP_RETURN, ret, 2, NULL, 0);
	kf_graph_set_results(g, rt, 2);
	return g;
}

static void fail(const char *why, kf_graph *before, kf_graph *after, const kf_buf *report)
{
	kf_buf t = {0};
	kf_print_graph(&t, before);
	fprintf(stderr, "fuzz_rewrite: %s\n--- before ---\n%.*s", why, (int)t.n, t.p);
	t.n = 0;
	kf_print_graph(&t, after);
	fprintf(stderr, "--- after ---\n%.*s", (int)t.n, t.p);
	if (report)
		fprintf(stderr, "--- equivalence ---\n%.*s", (int)report->n, report->p);
	kf_diag_flush(ctx, stderr);
	abort();
}

/* Any half-precision cast: the rewritten graph then rounds once where the
 * original rounded after every op (the gelu rules' own tolerance). */
static bool has_half(kf_graph *g)
{
	for (kf_nid n = 0; n < g->nnode; n++)
		if (!(kf_N(g, n)->flags & KF_NODE_DEAD) && kf_N(g, n)->op == KF_OP_CAST &&
		    strcmp(kf_attr_str(g, n, "to", ""), "f32") != 0)
			return true;
	return false;
}

/* Whether a rule that replaces a softmax written plainly, exp(x) /
 * reduce_sum(exp(x)), by the stable op fired: softmax.lua's documented
 * refinement ("the replacement is the stable form even where the pattern
 * was not"), which is finite where the plain form overflows to inf / inf. */
static bool stabilised(const kf_rw_stats *st)
{
	for (uint32_t i = 0; i < st->nrule && i < rules->n; i++)
		if (st->rule[i].rewritten && strstr(rules->rule[i]->name, "softmax/plain"))
			return true;
	return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	reader r = {data, size};
	kf_graph *g = build(&r);
	kf_diag_clear(ctx);
	if (kf_verify(g) != 0)
		fail("the generated graph does not verify", g, g, NULL);
	/* the reference: the same graph through print and parse */
	kf_buf text = {0};
	kf_print_graph(&text, g);
	kf_module *ref = kf_parse(ctx, "before.kf", text.p, text.n);
	kf_buf_free(&text);
	if (!ref)
		fail("the generated graph does not print and parse", g, g, NULL);
	kf_rw_opts o = {0};
	kf_rw_stats st;
	kf_rw_stats_init(&st, rules);
	if (kf_rw_run(g, rules, &o, &st) != 0)
		fail("the rewrite driver failed", ref->graph[0], g, NULL);
	if (getenv("KF_FUZZ_VERBOSE")) { /* to read what a reproducer does */
		kf_buf t = {0};
		kf_print_graph(&t, ref->graph[0]);
		kf_buf_puts(&t, "--- rewritten to ---\n");
		kf_print_graph(&t, g);
		kf_rw_summary(&t, rules, &st);
		fprintf(stderr, "%.*s", (int)t.n, t.p);
		kf_buf_free(&t);
	}
	bool stable = stabilised(&st);
	kf_rw_stats_free(&st);
	if (kf_verify(g) != 0)
		fail("the rewritten graph does not verify", ref->graph[0], g, NULL);
	bool half = has_half(ref->graph[0]);
	kf_buf rep = {0};
	/* after a stabilising rule the plain softmax's overflow (NaN, inf) may
	 * become finite, and nothing else may change */
	kf_equiv_tol tol = {half ? 3e-2 : 1e-3, half ? 1e-2 : 1e-4, 0, stable && !half};
	int rc = kf_equiv_check_tol(ref->graph[0], g, 7, 2, &tol, &rep);
	if (rc != 0)
		fail(rc < 0 ? "the interpreter failed" : "the rewrite changed what the graph computes",
		     ref->graph[0], g, &rep);
	kf_buf_free(&rep);
	kf_module_free(ref);
	kf_graph_free(g);
	return 0;
}
