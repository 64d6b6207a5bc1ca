/* Unit tests of the graph core: interning, types, use lists, mutation,
 * attributes, diagnostics and float printing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <cmocka.h>
#include "kf.h"

static void test_intern(void **st)
{
	kf_ctx *c = kf_ctx_new();
	kf_sid a = kf_intern_cstr(c, "alpha"), b = kf_intern_cstr(c, "beta");
	assert_int_not_equal(a, b);
	assert_int_equal(a, kf_intern(c, "alphabet", 5));
	assert_string_equal(kf_str(c, b), "beta");
	assert_int_equal(kf_intern_cstr(c, ""), 0);
	assert_int_equal(kf_lookup_str(c, "gamma", 5), KF_NONE);
	/* many strings force rehashing; ids stay stable */
	char s[32];
	for (int i = 0; i < 20000; i++) {
		snprintf(s, sizeof s, "v%d", i);
		kf_intern_cstr(c, s);
	}
	assert_int_equal(a, kf_intern_cstr(c, "alpha"));
	assert_string_equal(kf_str(c, kf_intern_cstr(c, "v19999")), "v19999");
	kf_ctx_free(c);
}

static void test_types(void **st)
{
	kf_ctx *c = kf_ctx_new();
	int64_t d1[] = {64, 256}, d2[] = {64, 256};
	kf_type t1 = kf_type_make(KF_F32, 2, d1), t2 = kf_type_make(KF_F32, 2, d2);
	assert_int_equal(kf_type_intern(c, &t1), kf_type_intern(c, &t2));
	kf_type t3 = kf_type_make(KF_F16, 2, d1);
	assert_int_not_equal(kf_type_intern(c, &t1), kf_type_intern(c, &t3));
	assert_int_equal(kf_type_numel(&t1), 64 * 256);
	int64_t ds[] = {KF_SYM(kf_intern_cstr(c, "N")), 4};
	kf_type ts = kf_type_make(KF_F32, 2, ds);
	assert_false(kf_type_is_static(&ts));
	assert_int_equal(kf_type_numel(&ts), -1);
	assert_string_equal(kf_str(c, KF_SYM_SID(ts.dim[0])), "N");
	int64_t huge[] = {1LL << 40, 1LL << 40};
	kf_type th = kf_type_make(KF_F32, 2, huge);
	assert_int_equal(kf_type_numel(&th), -1);
	assert_int_equal(kf_dtype_parse("bf16", 4), KF_BF16);
	assert_int_equal(kf_dtype_parse("f33", 3), -1);
	assert_int_equal(kf_dtype_size(KF_I64), 8);
	kf_ctx_free(c);
}

/* x -> add(x, x) -> neg -> return */
static void test_uses_and_mutation(void **st)
{
	kf_ctx *c = kf_ctx_new();
	kf_graph *g = kf_graph_new(c, "g");
	int64_t d[] = {4};
	kf_type ty = kf_type_make(KF_F32, 1, d);
	kf_tid t = kf_type_intern(c, &ty);
	kf_vid x = kf_block_add_arg(g, 0, t, kf_intern_cstr(c, "x"));
	kf_vid in[2] = {x, x};
	kf_nid add = kf_node_new(g, 0, KF_NONE, KF_OP_ADD, in, 2, &t, 1);
	kf_vid a = kf_res(g, add, 0);
	kf_nid neg = kf_node_new(g, 0, KF_NONE, KF_OP_NEG, &a, 1, &t, 1);
	kf_vid r = kf_res(g, neg, 0);
	kf_nid ret = kf_node_new(g, 0, KF_NONE, KF_OP_RETURN, &r, 1, NULL, 0);
	assert_int_equal(kf_nuses(g, x), 2);
	assert_int_equal(kf_nuses(g, a), 1);
	assert_int_equal(kf_block_terminator(g, 0), ret);
	assert_int_equal(kf_graph_live_nodes(g), 3);

	/* insert abs before neg, reroute neg to read it */
	kf_nid ab = kf_node_new(g, 0, neg, KF_OP_ABS, &a, 1, &t, 1);
	assert_int_equal(g->node[neg].prev, ab);
	kf_set_operand(g, neg, 0, kf_res(g, ab, 0));
	assert_int_equal(kf_nuses(g, a), 1);
	assert_int_equal(kf_nuses(g, kf_res(g, ab, 0)), 1);

	/* return x directly; neg, abs, add become dead and are erased in order */
	kf_replace_all_uses(g, r, x);
	assert_int_equal(kf_nuses(g, r), 0);
	assert_int_equal(kf_in(g, ret, 0), x);
	assert_int_equal(kf_nuses(g, x), 3);
	kf_node_erase(g, neg);
	kf_node_erase(g, ab);
	kf_node_erase(g, add);
	assert_int_equal(kf_nuses(g, x), 1);
	assert_int_equal(kf_graph_live_nodes(g), 1);
	assert_true(g->node[add].flags & KF_NODE_DEAD);
	assert_int_equal(g->blk[0].first, ret);
	kf_graph_free(g);
	kf_ctx_free(c);
}

static void test_attrs(void **st)
{
	kf_ctx *c = kf_ctx_new();
	kf_graph *g = kf_graph_new(c, "g");
	kf_type ty = kf_type_make(KF_F32, 0, NULL);
	kf_tid t = kf_type_intern(c, &ty);
	kf_vid x = kf_block_add_arg(g, 0, t, 0);
	kf_nid n = kf_node_new(g, 0, KF_NONE, KF_OP_REDUCE_SUM, &x, 1, &t, 1);
	kf_attrval items[2] = {{.kind = KF_ATTR_INT, .i = 0}, {.kind = KF_ATTR_INT, .i = -1}};
	kf_attr a[2] = {
		{kf_intern_cstr(c, "keepdims"), {.kind = KF_ATTR_BOOL, .b = false}},
		{kf_intern_cstr(c, "axes"), {.kind = KF_ATTR_LIST, .n = 2, .list = items}},
	};
	kf_node_set_attrs(g, n, a, 2);
	items[0].i = 99; /* the node holds a copy */
	assert_string_equal(kf_str(c, g->node[n].attr[0].key), "axes");
	int64_t axes[4];
	assert_int_equal(kf_attr_ints(g, n, "axes", axes, 4), 2);
	assert_int_equal(axes[0], 0);
	assert_int_equal(axes[1], -1);
	assert_false(kf_attr_bool(g, n, "keepdims", true));
	assert_int_equal(kf_attr_int(g, n, "missing", 7), 7);
	kf_node_set_attr(g, n, kf_intern_cstr(c, "keepdims"), (kf_attrval){.kind = KF_ATTR_BOOL, .b = true});
	assert_true(kf_attr_bool(g, n, "keepdims", false));
	assert_int_equal(g->node[n].nattr, 2);
	kf_node_set_attr(g, n, kf_intern_cstr(c, "a"), (kf_attrval){.kind = KF_ATTR_STR, .s = kf_intern_cstr(c, "s")});
	assert_string_equal(kf_str(c, g->node[n].attr[0].key), "a");
	assert_string_equal(kf_attr_str(g, n, "a", NULL), "s");
	kf_graph_free(g);
	kf_ctx_free(c);
}

static void test_diagnostics(void **st)
{
	kf_ctx *c = kf_ctx_new();
	const char *text = "graph @g() {\n  %x = adx(%y) : f32[]\n}\n";
	kf_srcid s = kf_source_add(c, "t.kf", text, strlen(text));
	int line, col;
	kf_source_linecol(c, s, 20, &line, &col);
	assert_int_equal(line, 2);
	assert_int_equal(col, 8);
	kf_error(c, (kf_loc){s, 20}, "unknown op '%s'", "adx");
	kf_srcid f = kf_source_add(c, "w.npy", NULL, 0);
	kf_error(c, (kf_loc){f, 0}, "truncated");
	kf_warning(c, KF_NOLOC, "plain");
	kf_buf b = {0};
	kf_diag_render(c, &b);
	assert_string_equal(b.p, "t.kf:2:8: error: unknown op 'adx'\n"
				 "  %x = adx(%y) : f32[]\n"
				 "       ^\n"
				 "w.npy: error: truncated\n"
				 "kfuse: warning: plain\n");
	assert_int_equal(kf_nerrors(c), 2);
	kf_buf_free(&b);
	kf_ctx_free(c);
}

static void float_is(double v, kf_dtype t, const char *want)
{
	kf_buf b = {0};
	kf_buf_float(&b, v, t);
	assert_string_equal(b.p, want);
	kf_buf_free(&b);
}

static void test_float_text(void **st)
{
	float_is(0.5, KF_F32, "0.5");
	float_is(1, KF_F64, "1.0");
	float_is(0.1f, KF_F32, "0.1");
	float_is(0.1, KF_F64, "0.1");
	float_is(1e-5, KF_F64, "1e-05");
	float_is(0.7978845608, KF_F64, "0.7978845608");
	float_is(-1.0 / 0.0, KF_F32, "-inf");
	float_is(0.0 / 0.0, KF_F32, "nan");
	float_is(0.0999755859375, KF_F16, "0.1");
}

static void test_ops_registered(void **st)
{
	kf_ctx *c = kf_ctx_new();
	assert_int_equal(kf_op_lookup(c, "reduce_mean", 11), KF_OP_REDUCE_MEAN);
	assert_string_equal(kf_op(c, KF_OP_YIELD)->name, "yield");
	assert_int_equal(kf_op_count(c), KF_NBUILTIN);
	assert_int_equal(kf_op_lookup(c, "nope", 4), -1);
	kf_opinfo mine = {.name = "my_op", .min_in = 1, .max_in = 1, .nres = 1, .trait = KF_TRAIT_ELEMENTWISE};
	int id = kf_op_register(c, &mine);
	assert_int_equal(id, KF_NBUILTIN);
	assert_int_equal(kf_op_lookup(c, "my_op", 5), id);
	assert_int_equal(kf_op_register(c, &mine), -1);
	assert_int_equal(kf_nerrors(c), 1);
	kf_ctx_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_intern),          cmocka_unit_test(test_types),
		cmocka_unit_test(test_uses_and_mutation), cmocka_unit_test(test_attrs),
		cmocka_unit_test(test_diagnostics),     cmocka_unit_test(test_float_text),
		cmocka_unit_test(test_ops_registered),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
