/* Unit tests of kf_verify: a well-formed graph passes with no message; each
 * broken invariant gives its message (and the walk survives corrupted links);
 * a 200k-node graph verifies in linear time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>
#include "kf.h"

static kf_ctx *C;
static kf_graph *G;
static kf_buf MSG;

/* The values and nodes of the graph built by build(). */
static kf_vid X, B, V0, V1, V2, P, T;
static kf_nid MM, ADD, FUS, GELU, YLD, RET;

static kf_tid ty(kf_dtype dt, int r, int64_t d0, int64_t d1)
{
	int64_t d[2] = {d0, d1};
	kf_type t = kf_type_make(dt, r, d);
	return kf_type_intern(C, &t);
}

/*  graph @g(%x: f32[4,16], %w: f32[16,16], %b: f32[16]) -> (f32[4,16]) {
 *    %0 = matmul(%x, %w) : f32[4,16]
 *    %1 = add(%0, %b) : f32[4,16]
 *    %2 = fusion @k0(%1) {kind = "elementwise"} : f32[4,16] {
 *    ^(%p: f32[4,16]):
 *      %t = gelu(%p) : f32[4,16]
 *      yield %t
 *    }
 *    return %2
 *  } */
static void build(void)
{
	kf_tid t416 = ty(KF_F32, 2, 4, 16), t16 = ty(KF_F32, 1, 16, 0), t1616 = ty(KF_F32, 2, 16, 16);
	G = kf_graph_new(C, "g");
	X = kf_block_add_arg(G, 0, t416, kf_intern_cstr(C, "x"));
	kf_vid w = kf_block_add_arg(G, 0, t1616, kf_intern_cstr(C, "w"));
	B = kf_block_add_arg(G, 0, t16, kf_intern_cstr(C, "b"));
	kf_graph_set_results(G, &t416, 1);
	kf_vid in[2] = {X, w};
	MM = kf_node_new(G, 0, KF_NONE, KF_OP_MATMUL, in, 2, &t416, 1);
	V0 = kf_res(G, MM, 0);
	in[0] = V0, in[1] = B;
	ADD = kf_node_new(G, 0, KF_NONE, KF_OP_ADD, in, 2, &t416, 1);
	V1 = kf_res(G, ADD, 0);
	FUS = kf_node_new(G, 0, KF_NONE, KF_OP_FUSION, &V1, 1, &t416, 1);
	V2 = kf_res(G, FUS, 0);
	G->node[FUS].sym = kf_intern_cstr(C, "k0");
	kf_attr kind = {kf_intern_cstr(C, "kind"), {.kind = KF_ATTR_STR, .s = kf_intern_cstr(C, "elementwise")}};
	kf_node_set_attrs(G, FUS, &kind, 1);
	kf_bid body = kf_block_new(G, FUS);
	G->node[FUS].body = body;
	P = kf_block_add_arg(G, body, t416, kf_intern_cstr(C, "p"));
	GELU = kf_node_new(G, body, KF_NONE, KF_OP_GELU, &P, 1, &t416, 1);
	T = kf_res(G, GELU, 0);
	YLD = kf_node_new(G, body, KF_NONE, KF_OP_YIELD, &T, 1, NULL, 0);
	RET = kf_node_new(G, 0, KF_NONE, KF_OP_RETURN, &V2, 1, NULL, 0);
}

static int setup(void **st)
{
	C = kf_ctx_new();
	build();
	memset(&MSG, 0, sizeof MSG);
	return 0;
}

static int teardown(void **st)
{
	kf_graph_free(G);
	kf_ctx_free(C);
	kf_buf_free(&MSG);
	return 0;
}

/* Runs the verifier; MSG holds what it reported.  Also checks that the count
 * it returns is the count of errors it added. */
static int verify(void)
{
	int before = kf_nerrors(C);
	int k = kf_verify(G);
	assert_int_equal(kf_nerrors(C) - before, k);
	MSG.n = 0;
	kf_diag_render(C, &MSG);
	kf_buf_putc(&MSG, 0);
	kf_diag_clear(C);
	return k;
}

#define HAS(s) do { \
	if (!strstr(MSG.p, s)) fail_msg("expected message\n  %s\nin\n%s", s, MSG.p); \
} while (0)
#define EXPECT(nerr, s) do { \
	int k_ = verify(); \
	HAS(s); \
	if (k_ != (nerr)) fail_msg("expected %d errors, got %d:\n%s", (nerr), k_, MSG.p); \
} while (0)

static void test_valid(void **st)
{
	assert_int_equal(verify(), 0);
	assert_string_equal(MSG.p, "");
	/* a plugin op with no shape function is trusted, whatever its types */
	kf_opinfo p = {.name = "myop", .min_in = 1, .max_in = 1, .nres = 2, .trait = KF_TRAIT_OPAQUE};
	int op = kf_op_register(C, &p);
	kf_tid r[2] = {ty(KF_I8, 1, 3, 0), ty(KF_F64, 0, 0, 0)};
	kf_node_new(G, 0, RET, op, &X, 1, r, 2);
	assert_int_equal(verify(), 0);
}

static void test_types(void **st)
{
	G->val[V1].type = ty(KF_F32, 1, 8, 0);
	EXPECT(2, "kfuse: error: 'add' result type f32[8] does not match the inferred f32[4,16]\n");
	HAS("'fusion' body argument 0 has type f32[4,16], but operand 0 has type f32[8]");
	G->val[V1].type = ty(KF_F32, 2, 4, 16);
	G->val[T].type = ty(KF_F16, 2, 4, 16);
	EXPECT(2, "'gelu' result type f16[4,16] does not match the inferred f32[4,16]");
	HAS("'fusion' result type f32[4,16] does not match the type its body yields f16[4,16]");
	G->val[T].type = ty(KF_F32, 2, 4, 16);
	kf_attr a = {kf_intern_cstr(C, "approx"), {.kind = KF_ATTR_STR, .s = kf_intern_cstr(C, "tanh")}};
	kf_node_set_attrs(G, GELU, &a, 1);
	EXPECT(1, "unknown attribute 'approx' for 'gelu' (allowed: approximate)");
}

static void test_locations(void **st)
{
	const char *text = "graph @g(...) {\n  %1 = add(%0, %b) : f32[8]\n}\n";
	kf_srcid s = kf_source_add(C, "t.kf", text, strlen(text));
	G->node[ADD].loc = (kf_loc){s, (uint32_t)(strstr(text, "add") - text)};
	G->val[V1].type = ty(KF_F32, 1, 8, 0);
	EXPECT(2, "t.kf:2:8: error: 'add' result type f32[8] does not match the inferred f32[4,16]\n"
		  "  %1 = add(%0, %b) : f32[8]\n"
		  "       ^\n");
}

static void test_counts(void **st)
{
	kf_vid in[2] = {X, X};
	kf_tid t = G->val[X].type;
	kf_node_new(G, 0, RET, KF_OP_ADD, in, 1, &t, 1);
	EXPECT(1, "'add' takes 2 operands, got 1");
	kf_tid two[2] = {t, t};
	kf_nid n = kf_node_new(G, 0, RET, KF_OP_NEG, in, 1, two, 2);
	EXPECT(2, "'neg' has 2 results, expected 1");
	kf_node_erase(G, n);
	kf_node_erase(G, G->node[RET].prev);
	assert_int_equal(verify(), 0);
	/* a split with a wrong count of results infers its own count */
	n = kf_node_new(G, 0, RET, KF_OP_SPLIT, in, 1, two, 2);
	kf_attr sizes = {kf_intern_cstr(C, "sizes"), {.kind = KF_ATTR_LIST, .n = 3,
		.list = (kf_attrval[]){{.kind = KF_ATTR_INT, .i = 1}, {.kind = KF_ATTR_INT, .i = 1},
				       {.kind = KF_ATTR_INT, .i = 2}}}};
	kf_node_set_attrs(G, n, &sizes, 1);
	EXPECT(1, "'split' has 2 results but 3 sizes");
}

static void test_dominance_and_regions(void **st)
{
	kf_node_move(G, ADD, 0, MM);
	EXPECT(1, "'add' is used before its definition");
	HAS("operand 0 of 'add'");
	kf_node_move(G, ADD, 0, FUS);
	assert_int_equal(verify(), 0);
	/* the body reads %1 of the enclosing graph */
	kf_set_operand(G, GELU, 0, V1);
	EXPECT(1, "operand 0 of 'gelu' is defined outside its region (a body reads only its arguments and its own values)");
	kf_set_operand(G, GELU, 0, P);
	/* the graph reads %t of the body */
	kf_set_operand(G, RET, 0, T);
	EXPECT(1, "operand 0 of 'return' is defined inside a region");
	kf_set_operand(G, RET, 0, V2);
	/* the fusion reads its own result */
	kf_set_operand(G, FUS, 0, V2);
	EXPECT(1, "operand 0 of 'fusion' is used before its definition");
	kf_set_operand(G, FUS, 0, V1);
	assert_int_equal(verify(), 0);
}

static void test_terminators(void **st)
{
	kf_tid t = G->val[X].type;
	kf_nid extra = kf_node_new(G, 0, KF_NONE, KF_OP_NEG, &X, 1, &t, 1);
	EXPECT(2, "'return' must be the last node of its block");
	HAS("graph @g does not end with 'return'");
	kf_node_erase(G, extra);
	kf_node_erase(G, RET);
	EXPECT(1, "graph @g does not end with 'return'");
	kf_node_new(G, 0, KF_NONE, KF_OP_YIELD, &V2, 1, NULL, 0);
	EXPECT(2, "'yield' outside a region (the graph ends with 'return')");
	kf_node_erase(G, G->blk[0].last);
	RET = kf_node_new(G, 0, KF_NONE, KF_OP_RETURN, &V2, 1, NULL, 0);
	kf_node_erase(G, YLD);
	kf_node_new(G, G->node[FUS].body, KF_NONE, KF_OP_RETURN, &T, 1, NULL, 0);
	EXPECT(2, "'return' inside a region (a body ends with 'yield')");
	HAS("'fusion' body does not end with 'yield'");
}

static void test_results(void **st)
{
	kf_tid r2[2] = {ty(KF_F32, 2, 4, 16), ty(KF_F32, 0, 0, 0)};
	kf_graph_set_results(G, r2, 2);
	EXPECT(1, "graph @g returns 1 value but declares 2 results");
	kf_graph_set_results(G, r2 + 1, 1);
	EXPECT(1, "return operand 0 has type f32[4,16] but graph @g declares f32[]");
	kf_graph_set_results(G, r2, 1);
	/* the body yields two values for a one-result fusion */
	kf_vid ts[2] = {T, T};
	kf_node_erase(G, YLD);
	YLD = kf_node_new(G, G->node[FUS].body, KF_NONE, KF_OP_YIELD, ts, 2, NULL, 0);
	EXPECT(1, "'fusion' has 1 result, but its body yields 2");
}

static void test_node_shape(void **st)
{
	G->node[ADD].sym = kf_intern_cstr(C, "s");
	EXPECT(1, "'add' does not take a @symbol");
	G->node[ADD].sym = 0;
	G->node[MM].body = G->node[FUS].body;
	EXPECT(1, "'matmul' does not take a region body");
	G->node[MM].body = KF_NONE;
	kf_bid body = G->node[FUS].body;
	G->node[FUS].body = KF_NONE;
	EXPECT(3, "'fusion' has no region body");
	HAS("node 'gelu' is in no block's list but was not erased");
	HAS("node 'yield' is in no block's list but was not erased");
	G->node[FUS].body = body;
	G->node[GELU].op = 999;
	EXPECT(1, "node has unknown op id 999");
}

static void test_dead_and_links(void **st)
{
	/* marked dead but not unlinked: still listed, its slots still in use lists */
	G->node[ADD].flags |= KF_NODE_DEAD;
	EXPECT(4, "erased node 'add' is still in the list of block 0");
	HAS("operand 0 of 'fusion' reads a result of an erased node");
	HAS("use list of value 2 holds slot 3, which is not an operand of a live node");
	G->node[ADD].flags = 0;
	/* a node neither linked nor erased */
	kf_tid t = G->val[X].type;
	kf_nid n = kf_node_new(G, 0, RET, KF_OP_NEG, &X, 1, &t, 1);
	G->node[G->node[n].prev].next = RET;
	G->node[RET].prev = G->node[n].prev;
	EXPECT(1, "node 'neg' is in no block's list but was not erased");
	/* a cycle in the node list ends the walk with an error, not a hang */
	G->node[RET].next = MM;
	EXPECT(3, "node list of block 0 is cyclic");
	G->node[RET].next = KF_NONE;
	G->node[FUS].prev = MM;
	EXPECT(2, "node 'fusion' has wrong block or back links");
	HAS("node 'neg' is in no block's list but was not erased");
}

static void test_use_lists(void **st)
{
	kf_uid u = G->node[ADD].in0 + 1; /* add's read of %b */
	/* drop the slot from %b's list without telling anyone */
	G->val[B].first_use = G->use[u].next;
	EXPECT(1, "operand 1 of 'add' is missing from its value's use list");
	G->val[B].first_use = u;
	assert_int_equal(verify(), 0);
	/* the slot reads %x but is linked in %b's list */
	G->use[u].value = X;
	EXPECT(1, "use slot 3 is in the list of value 2 but reads value 0");
	G->use[u].value = B;
	/* a broken back link */
	kf_uid u2 = G->node[MM].in0; /* matmul's read of %x; link it after add's */
	G->use[u].next = u2;
	G->use[u2].prev = KF_NONE;
	G->use[u2].next = KF_NONE;
	G->val[X].first_use = KF_NONE;
	EXPECT(1, "use slot 0 is in the list of value 2 but reads value 0");
	G->use[u].next = KF_NONE;
	G->val[X].first_use = u2;
	assert_int_equal(verify(), 0);
	/* a self-loop in a list is caught once */
	G->use[u].next = u;
	EXPECT(1, "use slot 3 is linked twice (in the list of value 2)");
	G->use[u].next = KF_NONE;
	G->use[u].prev = u2;
	EXPECT(1, "use slot 3 of 'add' has a wrong back link");
}

/* A badly broken graph reports the first 100 errors, then stops. */
static void test_error_cap(void **st)
{
	kf_tid wrong = ty(KF_F16, 2, 4, 16);
	kf_vid in[2] = {X, X};
	for (int i = 0; i < 300; i++)
		kf_node_new(G, 0, RET, KF_OP_ADD, in, 2, &wrong, 1);
	assert_int_equal(verify(), 101);
	HAS("'add' result type f16[4,16] does not match the inferred f32[4,16]");
	HAS("kfuse: error: too many errors; verification stopped\n");
}

/* The verifier's memos hold only what was checked and right: a node whose
 * op and operand types were seen in good nodes before and after it is still
 * reported, inference runs again for other operand types, and every value
 * of a type too large is named. */
static void test_memo(void **st)
{
	kf_tid t = ty(KF_F32, 2, 4, 16), wrong = ty(KF_F32, 2, 4, 17);
	kf_vid xx[2] = {X, X}, bb[2] = {B, B};
	for (int i = 0; i < 10; i++)
		kf_node_new(G, 0, RET, KF_OP_ADD, xx, 2, &t, 1);
	kf_nid bad = kf_node_new(G, 0, RET, KF_OP_ADD, xx, 2, &wrong, 1);
	for (int i = 0; i < 10; i++)
		kf_node_new(G, 0, RET, KF_OP_ADD, xx, 2, &t, 1);
	EXPECT(1, "'add' result type f32[4,17] does not match the inferred f32[4,16]");
	G->val[kf_res(G, bad, 0)].type = t;
	assert_int_equal(verify(), 0);
	/* the result type of add(X, X), but of operands that infer another */
	kf_node_new(G, 0, RET, KF_OP_ADD, bb, 2, &t, 1);
	EXPECT(1, "'add' result type f32[4,16] does not match the inferred f32[16]");
	kf_node_new(G, 0, RET, KF_OP_SUB, bb, 2, &t, 1);
	EXPECT(2, "'sub' result type f32[4,16] does not match the inferred f32[16]");

	kf_graph_free(G);
	G = kf_graph_new(C, "huge");
	kf_tid h = ty(KF_F32, 2, (int64_t)1 << 31, (int64_t)1 << 31);
	kf_vid a = kf_block_add_arg(G, 0, h, kf_intern_cstr(C, "a"));
	kf_block_add_arg(G, 0, h, kf_intern_cstr(C, "b"));
	kf_graph_set_results(G, &h, 1);
	kf_nid n = kf_node_new(G, 0, KF_NONE, KF_OP_NEG, &a, 1, &h, 1);
	kf_vid r = kf_res(G, n, 0);
	kf_node_new(G, 0, KF_NONE, KF_OP_RETURN, &r, 1, NULL, 0);
	EXPECT(3, "type f32[2147483648,2147483648] of %a is too large");
	HAS("type f32[2147483648,2147483648] of %b is too large");
	HAS("type f32[2147483648,2147483648] of a value is too large");
}

/* A chain of 200k nodes (alternating add and neg) verifies in a few ms. */
static void test_linear_time(void **st)
{
	kf_graph_free(G);
	G = kf_graph_new(C, "big");
	kf_tid t = ty(KF_F32, 2, 64, 256);
	kf_vid v = kf_block_add_arg(G, 0, t, 0), x = v;
	kf_graph_set_results(G, &t, 1);
	for (int i = 0; i < 200000; i++) {
		kf_vid in[2] = {v, x};
		kf_nid n = i & 1 ? kf_node_new(G, 0, KF_NONE, KF_OP_NEG, in, 1, &t, 1)
				 : kf_node_new(G, 0, KF_NONE, KF_OP_ADD, in, 2, &t, 1);
		v = kf_res(G, n, 0);
	}
	kf_node_new(G, 0, KF_NONE, KF_OP_RETURN, &v, 1, NULL, 0);
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	assert_int_equal(verify(), 0);
	clock_gettime(CLOCK_MONOTONIC, &b);
	double ms = (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6;
	print_message("kf_verify of 200001 nodes: %.1f ms\n", ms);
	/* generous for sanitizer builds; quadratic behaviour would take minutes */
	assert_true(ms < 2000);
	/* an error far down the chain is found */
	G->val[kf_res(G, 150001, 0)].type = ty(KF_F32, 1, 7, 0);
	assert_true(verify() >= 1);
	HAS("'neg' result type f32[7] does not match the inferred f32[64,256]");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_valid, setup, teardown),
		cmocka_unit_test_setup_teardown(test_types, setup, teardown),
		cmocka_unit_test_setup_teardown(test_locations, setup, teardown),
		cmocka_unit_test_setup_teardown(test_counts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dominance_and_regions, setup, teardown),
		cmocka_unit_test_setup_teardown(test_terminators, setup, teardown),
		cmocka_unit_test_setup_teardown(test_results, setup, teardown),
		cmocka_unit_test_setup_teardown(test_node_shape, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dead_and_links, setup, teardown),
		cmocka_unit_test_setup_teardown(test_use_lists, setup, teardown),
		cmocka_unit_test_setup_teardown(test_error_cap, setup, teardown),
		cmocka_unit_test_setup_teardown(test_memo, setup, teardown),
		cmocka_unit_test_setup_teardown(test_linear_time, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
