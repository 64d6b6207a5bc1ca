/* Unit tests of the rewrite engine (patterns built in C: matching rules,
 * rollback, the driver's loop detection and caps) and of the Lua bridge
 * (tracing, per-match replacements, transforms, the sandbox's limits, how
 * often Lua is entered, examples). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "interp.h"
#include "kf.h"
#include "lua_rules.h"
#include "plugin.h"
#include "rewrite.h"
#include "rules.h"

typedef struct fx {
	kf_ctx *c;
	kf_module *m;
	kf_buf out;
	kf_pattern *pats[8];
	int npat;
} fx;

static int setup(void **st)
{
	fx *f = calloc(1, sizeof *f);
	f->c = kf_ctx_new();
	kf_rt_register(f->c);
	*st = f;
	return 0;
}

static int teardown(void **st)
{
	fx *f = *st;
	kf_module_free(f->m);
	kf_buf_free(&f->out);
	for (int i = 0; i < f->npat; i++)
		kf_pat_free(f->pats[i]);
	kf_plugin_release(f->c);
	kf_ctx_free(f->c);
	free(f);
	return 0;
}

static kf_graph *parse(fx *f, const char *text)
{
	kf_module_free(f->m);
	f->m = kf_parse(f->c, "test.kf", text, strlen(text));
	if (!f->m) {
		kf_diag_flush(f->c, stderr);
		fail_msg("parse failed");
	}
	assert_int_equal(kf_verify(f->m->graph[0]), 0);
	return f->m->graph[0];
}

static const char *print(fx *f, kf_graph *g)
{
	f->out.n = 0;
	kf_print_graph(&f->out, g);
	kf_buf_putc(&f->out, 0);
	return f->out.p;
}

static const char *diags(fx *f)
{
	f->out.n = 0;
	kf_diag_render(f->c, &f->out);
	kf_buf_putc(&f->out, 0);
	kf_diag_clear(f->c);
	return f->out.p;
}

static int count(const char *s, const char *w)
{
	int n = 0;
	for (const char *p = s; (p = strstr(p, w)); p++)
		n++;
	return n;
}

static kf_pattern *pat(fx *f)
{
	kf_pattern *p = kf_pat_new(f->c);
	f->pats[f->npat++] = p;
	return p;
}

static void outputs(kf_pattern *p, kf_pv a)
{
	char err[128];
	assert_int_equal(kf_pat_set_outputs(p, &a, 1, err, sizeof err), 0);
}

static void set_rule(kf_rule *r, const char *name, kf_pattern *p, kf_pattern *t)
{
	memset(r, 0, sizeof *r);
	r->name = name;
	r->benefit = 1;
	r->pat = p;
	r->tmpl = t;
	r->on_op = p->node[KF_PV_NODE(p->out[0])].op;
}

/* Runs rules over g; returns kf_rw_run's result. */
static int run(kf_graph *g, kf_rule **rules, int n, uint64_t cap, kf_rw_stats *st)
{
	kf_ruleset rs = {0};
	for (int i = 0; i < n; i++)
		kf_ruleset_add(&rs, rules[i]);
	kf_rw_opts o = {.max_rewrites = cap};
	kf_rw_stats_init(st, &rs);
	int rc = kf_rw_run(g, &rs, &o, st);
	kf_ruleset_free(&rs);
	if (rc == 0)
		assert_int_equal(kf_verify(g), 0);
	return rc;
}

/* x * sigmoid(x) -> silu(x), traced in C */
static void silu_rule(fx *f, kf_rule *r)
{
	kf_pattern *p = pat(f), *t = pat(f);
	kf_pv x = kf_pat_var(p, "x");
	kf_pv s = kf_pat_op(p, KF_OP_SIGMOID, &x, 1, NULL, 0, 0);
	kf_pv in[2] = {x, s};
	outputs(p, kf_pat_op(p, KF_OP_MUL, in, 2, NULL, 0, 0));
	kf_pv tx = kf_pat_var(t, "x");
	t->out[0] = kf_pat_op(t, KF_OP_SILU, &tx, 1, NULL, 0, 0);
	t->nout = 1;
	set_rule(r, "silu", p, t);
}

static void test_commutative(void **st)
{
	fx *f = *st;
	kf_graph *g = parse(f, "graph @g(%x: f32[4], %y: f32[4]) -> (f32[4], f32[4], f32[4]) {\n"
			       "  %s = sigmoid(%x) : f32[4]\n"
			       "  %a = mul(%s, %x) : f32[4]\n"
			       "  %t = sigmoid(%y) : f32[4]\n"
			       "  %b = mul(%y, %t) : f32[4]\n"
			       "  %u = sigmoid(%y) : f32[4]\n"
			       "  %c = mul(%x, %u) : f32[4]\n" /* two different values: no match */
			       "  return %a, %b, %c\n}\n");
	kf_rule r, *rp = &r;
	silu_rule(f, &r);
	kf_rw_stats s;
	assert_int_equal(run(g, &rp, 1, 0, &s), 0);
	assert_int_equal(s.rewrites, 2);
	assert_true(s.converged);
	assert_int_equal(s.callbacks, 0); /* traced: no callback entered */
	const char *txt = print(f, g);
	assert_int_equal(count(txt, "silu("), 2);
	assert_int_equal(count(txt, "sigmoid("), 1);
	kf_rw_stats_free(&s);
}

/* x * 0.5 -> x / 2 */
static void half_rule(fx *f, kf_rule *r)
{
	kf_pattern *p = pat(f), *t = pat(f);
	kf_pv in[2] = {kf_pat_var(p, "x"), kf_pat_const(p, 0.5, -1)};
	outputs(p, kf_pat_op(p, KF_OP_MUL, in, 2, NULL, 0, 0));
	kf_pv tin[2] = {kf_pat_var(t, "x"), kf_pat_const(t, 2.0, -1)};
	t->out[0] = kf_pat_op(t, KF_OP_DIV, tin, 2, NULL, 0, 0);
	t->nout = 1;
	set_rule(r, "half", p, t);
}

static void test_constants(void **st)
{
	fx *f = *st;
	kf_graph *g = parse(f, "graph @g(%x: f32[4]) -> (f32[4], f32[4], f32[4], f32[2,4]) {\n"
			       "  %c1 = const 0.50000000001 : f32[]\n"    /* within 1e-6 */
			       "  %a = mul(%x, %c1) : f32[4]\n"
			       "  %c2 = const 0.5001 : f32[]\n"           /* not */
			       "  %b = mul(%c2, %x) : f32[4]\n"
			       "  %c3 = const dense<0.5> : f32[4]\n"      /* a splat that broadcasts */
			       "  %c = mul(%x, %c3) : f32[4]\n"
			       "  %c4 = const dense<0.5> : f32[2,4]\n"    /* a splat that widens x */
			       "  %d = mul(%x, %c4) : f32[2,4]\n"
			       "  return %a, %b, %c, %d\n}\n");
	kf_rule r, *rp = &r;
	half_rule(f, &r);
	kf_rw_stats s;
	assert_int_equal(run(g, &rp, 1, 0, &s), 0);
	assert_int_equal(s.rewrites, 2);
	const char *txt = print(f, g);
	assert_int_equal(count(txt, "div("), 2);
	assert_non_null(strstr(txt, "mul(%c2, %x)"));
	assert_non_null(strstr(txt, "mul(%x, %c4)"));
	kf_rw_stats_free(&s);
	/* a tighter tolerance rejects 0.50000000001 too */
	g = parse(f, "graph @g(%x: f32[4]) -> (f32[4]) {\n  %c = const 0.50000000001 : f32[]\n"
		     "  %a = mul(%x, %c) : f32[4]\n  return %a\n}\n");
	r.rtol = 1e-12;
	assert_int_equal(run(g, &rp, 1, 0, &s), 0);
	assert_int_equal(s.rewrites, 0);
	kf_rw_stats_free(&s);
}

/* exp(x) + 1 -> x (nonsense, but it shows which nodes go) */
static void test_interior(void **st)
{
	fx *f = *st;
	static const char *src = "graph @g(%x: f32[4]) -> (f32[4], f32[4]) {\n"
				 "  %e = exp(%x) : f32[4]\n"
				 "  %one = const 1.0 : f32[]\n"
				 "  %a = add(%e, %one) : f32[4]\n"
				 "  return %a, %e\n}\n";
	kf_pattern *p = pat(f), *t = pat(f);
	kf_pv x = kf_pat_var(p, "x");
	kf_pv in[2] = {kf_pat_op(p, KF_OP_EXP, &x, 1, NULL, 0, 0), kf_pat_const(p, 1, -1)};
	outputs(p, kf_pat_op(p, KF_OP_ADD, in, 2, NULL, 0, 0));
	kf_pv tx = kf_pat_var(t, "x");
	t->out[0] = kf_pat_op(t, KF_OP_NEG, &tx, 1, NULL, 0, 0);
	t->nout = 1;
	kf_rule r, *rp = &r;
	set_rule(&r, "exp-plus-one", p, t);
	kf_rw_stats s;
	kf_graph *g = parse(f, src);
	assert_int_equal(run(g, &rp, 1, 0, &s), 0);
	assert_int_equal(s.rewrites, 0); /* %e is returned: blocked */
	kf_rw_stats_free(&s);
	r.keep_interior = true;
	g = parse(f, src);
	assert_int_equal(run(g, &rp, 1, 0, &s), 0);
	assert_int_equal(s.rewrites, 1);
	const char *txt = print(f, g);
	assert_non_null(strstr(txt, "exp(%x)")); /* kept for its other user */
	assert_non_null(strstr(txt, "neg(%x)"));
	assert_null(strstr(txt, "add("));
	kf_rw_stats_free(&s);
}

/* A replace callback that builds a node, then fails. */
static int failing_replace(kf_rewriter *rw)
{
	kf_vid x = rw->m->bind[0];
	kf_vid y = kf_rw_create(rw, KF_OP_EXP, &x, 1, NULL, 0, NULL, 0);
	assert_true(y != KF_NONE);
	kf_error(rw->g->ctx, KF_NOLOC, "replace failed on purpose");
	return -1;
}

static void test_rollback(void **st)
{
	fx *f = *st;
	kf_graph *g = parse(f, "graph @g(%x: f32[4]) -> (f32[4]) {\n  %s = sigmoid(%x) : f32[4]\n"
			       "  %a = mul(%s, %x) : f32[4]\n  return %a\n}\n");
	kf_rule r, *rp = &r;
	silu_rule(f, &r);
	r.tmpl = NULL;
	r.replace = failing_replace;
	char *before = strdup(print(f, g));
	uint32_t live = kf_graph_live_nodes(g);
	kf_rw_stats s;
	assert_int_equal(run(g, &rp, 1, 0, &s), -1);
	assert_string_equal(print(f, g), before);
	assert_int_equal(kf_graph_live_nodes(g), live);
	assert_int_equal(kf_verify(g), 0);
	assert_non_null(strstr(diags(f), "replace failed on purpose"));
	free(before);
	kf_rw_stats_free(&s);
}

/* op(a, b) -> op2(b, a) style rules from two binary ops */
static void binary_rule(fx *f, kf_rule *r, const char *name, int op, int op2, bool swap, double k)
{
	kf_pattern *p = pat(f), *t = pat(f);
	kf_pv x = kf_pat_var(p, "x");
	kf_pv in[2] = {x, k ? kf_pat_const(p, k, -1) : x};
	outputs(p, kf_pat_op(p, op, in, 2, NULL, 0, 0));
	kf_pv tx = kf_pat_var(t, "x");
	kf_pv tin[2] = {tx, tx};
	if (op2 == KF_OP_MUL)
		tin[swap] = kf_pat_const(t, 2, -1);
	t->out[0] = kf_pat_op(t, op2, tin, 2, NULL, 0, 0);
	t->nout = 1;
	set_rule(r, name, p, t);
}

static void test_loops(void **st)
{
	fx *f = *st;
	static const char *src = "graph @g(%x: f32[4]) -> (f32[4]) {\n  %two = const 2.0 : f32[]\n"
				 "  %a = mul(%x, %two) : f32[4]\n  %r = relu(%a) : f32[4]\n  return %r\n}\n";
	kf_rule a, b, *rs[2] = {&a, &b};
	binary_rule(f, &a, "mul-to-add", KF_OP_MUL, KF_OP_ADD, false, 2);
	binary_rule(f, &b, "add-to-mul", KF_OP_ADD, KF_OP_MUL, true, 0);
	kf_rw_stats s;
	kf_graph *g = parse(f, src);
	assert_int_equal(run(g, rs, 2, 0, &s), -1);
	assert_non_null(strstr(diags(f), "rules 'mul-to-add' (C) and 'add-to-mul' (C) undo each other"));
	assert_int_equal(kf_verify(g), 0);
	kf_rw_stats_free(&s);

	/* mul(x, 2) -> mul(2, x): the same graph */
	kf_rule c, *cp = &c;
	binary_rule(f, &c, "commute", KF_OP_MUL, KF_OP_MUL, false, 2);
	g = parse(f, src);
	assert_int_equal(run(g, &cp, 1, 0, &s), -1);
	assert_non_null(strstr(diags(f), "rule 'commute' (C) claims success but leaves the graph unchanged"));
	kf_rw_stats_free(&s);

	/* relu(x) -> relu(relu(x)) grows until the cap */
	kf_pattern *p = pat(f), *t = pat(f);
	kf_pv x = kf_pat_var(p, "x");
	outputs(p, kf_pat_op(p, KF_OP_RELU, &x, 1, NULL, 0, 0));
	kf_pv tx = kf_pat_var(t, "x");
	kf_pv r1 = kf_pat_op(t, KF_OP_RELU, &tx, 1, NULL, 0, 0);
	t->out[0] = kf_pat_op(t, KF_OP_RELU, &r1, 1, NULL, 0, 0);
	t->nout = 1;
	kf_rule grow, *gp = &grow;
	set_rule(&grow, "grow", p, t);
	g = parse(f, src);
	assert_int_equal(run(g, &gp, 1, 40, &s), -1);
	assert_int_equal(s.rewrites, 40);
	assert_non_null(strstr(diags(f), "40 rewrites hit the cap (max-rewrites=40); the last ones were by 'grow'"));
	kf_rw_stats_free(&s);
}

/* (neg(neg(x)), neg(x)) -> (x, neg(x)): two outputs, one the root */
static void test_multi_output(void **st)
{
	fx *f = *st;
	kf_graph *g = parse(f, "graph @g(%x: f32[4]) -> (f32[4], f32[4]) {\n  %a = neg(%x) : f32[4]\n"
			       "  %b = neg(%a) : f32[4]\n  return %b, %a\n}\n");
	kf_pattern *p = pat(f), *t = pat(f);
	kf_pv x = kf_pat_var(p, "x");
	kf_pv a = kf_pat_op(p, KF_OP_NEG, &x, 1, NULL, 0, 0);
	kf_pv out[2] = {kf_pat_op(p, KF_OP_NEG, &a, 1, NULL, 0, 0), a};
	char err[160];
	assert_int_equal(kf_pat_set_outputs(p, out, 2, err, sizeof err), 0);
	kf_pv tx = kf_pat_var(t, "x");
	t->out[0] = tx;
	t->out[1] = kf_pat_op(t, KF_OP_ABS, &tx, 1, NULL, 0, 0);
	t->nout = 2;
	kf_rule r, *rp = &r;
	set_rule(&r, "two", p, t);
	kf_rw_stats s;
	assert_int_equal(run(g, &rp, 1, 0, &s), 0);
	assert_int_equal(s.rewrites, 1);
	const char *txt = print(f, g);
	assert_null(strstr(txt, "neg("));
	assert_non_null(strstr(txt, "abs(%x)"));
	assert_non_null(strstr(txt, "return %x, "));
	kf_rw_stats_free(&s);
	/* an output that is not inside the first output's pattern is refused */
	kf_pattern *q = pat(f);
	kf_pv y = kf_pat_var(q, "y");
	kf_pv o2[2] = {kf_pat_op(q, KF_OP_NEG, &y, 1, NULL, 0, 0), kf_pat_op(q, KF_OP_ABS, &y, 1, NULL, 0, 0)};
	assert_int_equal(kf_pat_set_outputs(q, o2, 2, err, sizeof err), -1);
	assert_non_null(strstr(err, "pattern output 2 is not computed"));
}

/* reduce_sum {axes = [-1]} matches axes = [1] on rank 2 (and keepdims
 * absent matches keepdims = true) */
static void test_attrs(void **st)
{
	fx *f = *st;
	kf_graph *g = parse(f, "graph @g(%x: f32[2,3]) -> (f32[2,1], f32[1,3]) {\n"
			       "  %a = reduce_sum(%x) {axes = [1]} : f32[2,1]\n"
			       "  %b = reduce_sum(%x) {axes = [0]} : f32[1,3]\n  return %a, %b\n}\n");
	kf_pattern *p = pat(f), *t = pat(f);
	kf_pv x = kf_pat_var(p, "x");
	kf_attrval axes_l = {.kind = KF_ATTR_INT, .i = -1};
	kf_attr at[2] = {{kf_intern_cstr(f->c, "axes"), {.kind = KF_ATTR_LIST, .n = 1, .list = &axes_l}},
			 {kf_intern_cstr(f->c, "keepdims"), {.kind = KF_ATTR_BOOL, .b = true}}};
	outputs(p, kf_pat_op(p, KF_OP_REDUCE_SUM, &x, 1, at, 2, 0));
	kf_pv tx = kf_pat_var(t, "x");
	t->out[0] = kf_pat_op(t, KF_OP_REDUCE_MAX, &tx, 1, at, 2, 0);
	t->nout = 1;
	kf_rule r, *rp = &r;
	set_rule(&r, "sum-last", p, t);
	kf_rw_stats s;
	assert_int_equal(run(g, &rp, 1, 0, &s), 0);
	assert_int_equal(s.rewrites, 1);
	const char *txt = print(f, g);
	assert_non_null(strstr(txt, "reduce_max(%x) {axes = [-1], keepdims = true} : f32[2,1]"));
	assert_non_null(strstr(txt, "reduce_sum(%x) {axes = [0]}"));
	kf_rw_stats_free(&s);
}

/* ---- Lua ---------------------------------------------------------------------- */

static kf_lrules *load(fx *f, const char *rel)
{
	char path[1024];
	snprintf(path, sizeof path, "%s/%s", KF_SOURCE_DIR, rel);
	kf_lrules *r = kf_lua_rules_load(f->c, path);
	if (!r) {
		kf_diag_flush(f->c, stderr);
		fail_msg("could not load %s", path);
	}
	return r;
}

static int run_lua(kf_graph *g, kf_lrules *r, kf_rw_stats *s)
{
	kf_rw_stats_init(s, kf_lua_rules_set(r));
	int rc = kf_rw_run(g, kf_lua_rules_set(r), NULL, s);
	if (rc == 0)
		assert_int_equal(kf_verify(g), 0);
	return rc;
}

static void test_lua_entries(void **st)
{
	fx *f = *st;
	kf_lrules *r = load(f, "patterns");
	assert_ptr_equal(load(f, "patterns"), r); /* cached */
	/* the GELU rules are traced: matching and rewriting enter no Lua */
	kf_graph *g = parse(f, "graph @g(%x: f32[4,8]) -> (f32[4,8]) {\n"
			       "  %c = const 0.7071067811865476 : f32[]\n  %d = mul(%x, %c) : f32[4,8]\n"
			       "  %e = erf(%d) : f32[4,8]\n  %one = const 1.0 : f32[]\n"
			       "  %a = add(%one, %e) : f32[4,8]\n  %h = const 0.5 : f32[]\n"
			       "  %hx = mul(%h, %x) : f32[4,8]\n  %y = mul(%hx, %a) : f32[4,8]\n  return %y\n}\n");
	uint64_t e0 = kf_lua_entries(f->c);
	kf_rw_stats s;
	assert_int_equal(run_lua(g, r, &s), 0);
	assert_int_equal(s.rewrites, 1);
	assert_true(s.tried > 10); /* many candidate rules were tried ... */
	assert_int_equal(kf_lua_entries(f->c) - e0, 0); /* ... without Lua */
	assert_non_null(strstr(print(f, g), "gelu(%x)"));
	kf_rw_stats_free(&s);
	/* the layer norm has a where and a per-match replacement: two entries */
	g = parse(f, "graph @g(%x: f32[2,8]) -> (f32[2,8]) {\n"
		     "  %mu = reduce_mean(%x) {axes = [-1]} : f32[2,1]\n  %d = sub(%x, %mu) : f32[2,8]\n"
		     "  %d2 = mul(%d, %d) : f32[2,8]\n  %v = reduce_mean(%d2) {axes = [-1]} : f32[2,1]\n"
		     "  %eps = const 1e-05 : f32[]\n  %ve = add(%v, %eps) : f32[2,1]\n"
		     "  %s = sqrt(%ve) : f32[2,1]\n  %y = div(%d, %s) : f32[2,8]\n  return %y\n}\n");
	e0 = kf_lua_entries(f->c);
	assert_int_equal(run_lua(g, r, &s), 0);
	assert_int_equal(s.matched, 1);
	assert_int_equal(s.callbacks, 2);
	assert_int_equal(kf_lua_entries(f->c) - e0, 2);
	assert_non_null(strstr(print(f, g), "layer_norm(%x) {axis = -1, epsilon = 1e-05}"));
	kf_rw_stats_free(&s);
}

static void test_lua_transform(void **st)
{
	fx *f = *st;
	kf_lrules *r = load(f, "tests/rules/ok/transform.lua");
	kf_graph *g = parse(f, "graph @g(%x: f32[3,4]) -> (f32[3,1], f32[3,4], f32[3,4]) {\n"
			       "  %s = reduce_sum(%x) {axes = [-1]} : f32[3,1]\n  %four = const 4.0 : f32[]\n"
			       "  %m = div(%s, %four) : f32[3,1]\n  %h = div(%x, %four) : f32[3,4]\n"
			       "  %z = const 0.0 : f32[]\n  %k = div(%x, %z) : f32[3,4]\n"
			       "  return %m, %h, %k\n}\n");
	kf_rw_stats s;
	assert_int_equal(run_lua(g, r, &s), 0);
	const char *txt = print(f, g);
	assert_non_null(strstr(txt, "reduce_mean(%x) {axes = [1]} : f32[3,1]"));
	assert_non_null(strstr(txt, "mul(%x, %"));
	assert_non_null(strstr(txt, "const 0.25 : f32[]"));
	assert_non_null(strstr(txt, "div(%x, %z)")); /* by zero: the transform said no */
	assert_int_equal(s.rewrites, 2);
	kf_rw_stats_free(&s);
	uint32_t n;
	kf_buf log = {0};
	assert_int_equal(kf_rules_run_examples(r, &log, &n), 0);
	assert_int_equal(n, 1);
	kf_buf_free(&log);
}

static void test_lua_limits(void **st)
{
	fx *f = *st;
	kf_lua_set_limits(f->c, 100000, 1 << 20, 0);
	kf_lrules *r = load(f, "tests/rules/bad/loop.lua");
	kf_graph *g = parse(f, "graph @g(%x: f32[4]) -> (f32[4]) {\n  %t = tanh(%x) : f32[4]\n  return %t\n}\n");
	kf_rw_stats s;
	assert_int_equal(run_lua(g, r, &s), -1);
	assert_non_null(strstr(diags(f), "loop.lua:6:5: error: rule 'spin' exceeded the instruction limit (100000)"));
	kf_rw_stats_free(&s);
	r = load(f, "tests/rules/bad/memory.lua");
	assert_int_equal(run_lua(g, r, &s), -1);
	assert_non_null(strstr(diags(f), "rule 'hog' ran out of memory (over its budget of 1048576 bytes)"));
	kf_rw_stats_free(&s);
	/* the state survives both and still works */
	r = load(f, "tests/rules/sandbox");
	uint32_t n;
	kf_buf log = {0};
	assert_int_equal(kf_rules_run_examples(r, &log, &n), 0);
	assert_int_equal(n, 1);
	kf_buf_free(&log);
}

static void test_lua_bad_files(void **st)
{
	fx *f = *st;
	char path[1024];
	static const struct { const char *file, *msg; } cases[] = {
		{"syntax.lua", "syntax.lua:4:3: error: unexpected symbol near '*'"},
		{"io.lua", "io.lua:2:1: error: attempt to index a nil value (global 'io')"},
		{"require.lua", "module '..etc.passwd' is outside the rule path"},
		{"field.lua", "rule 'typo': unknown field 'wher'"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		snprintf(path, sizeof path, "%s/tests/rules/bad/%s", KF_SOURCE_DIR, cases[i].file);
		assert_null(kf_lua_rules_load(f->c, path));
		const char *d = diags(f);
		if (!strstr(d, cases[i].msg))
			fail_msg("%s: expected '%s' in:\n%s", cases[i].file, cases[i].msg, d);
	}
}

static void test_graph_same(void **st)
{
	fx *f = *st;
	static const char *a = "graph @g(%x: f32[4], %y: f32[4]) -> (f32[4]) {\n  %p = add(%x, %y) : f32[4]\n"
			       "  %dead = exp(%x) : f32[4]\n  %q = mul(%p, %x) : f32[4]\n  return %q\n}\n";
	static const char *b = "graph @h(%a: f32[4], %b: f32[4]) -> (f32[4]) {\n  %s = add(%b, %a) : f32[4]\n"
			       "  %t = mul(%a, %s) : f32[4]\n  return %t\n}\n";
	static const char *c = "graph @h(%a: f32[4], %b: f32[4]) -> (f32[4]) {\n  %s = sub(%b, %a) : f32[4]\n"
			       "  %t = mul(%a, %s) : f32[4]\n  return %t\n}\n";
	kf_module *ma = kf_parse(f->c, "a.kf", a, strlen(a));
	kf_module *mb = kf_parse(f->c, "b.kf", b, strlen(b));
	kf_module *mc = kf_parse(f->c, "c.kf", c, strlen(c));
	kf_buf why = {0};
	assert_true(kf_graph_same(ma->graph[0], mb->graph[0], &why));
	assert_false(kf_graph_same(ma->graph[0], mc->graph[0], &why));
	assert_non_null(strstr(why.p, "result 1 is computed differently"));
	kf_buf_free(&why);
	kf_module_free(ma);
	kf_module_free(mb);
	kf_module_free(mc);
}


/* The node order the driver keeps: insertions at one place use up the gap
 * between two keys (about 50 halvings of a double) and renumber the block;
 * the keys must follow the block's order throughout. */
static void test_order(void **st)
{
	fx *f = *st;
	kf_graph *g = parse(f, "graph @g(%x: f32[4]) -> (f32[4]) {\n"
			       "  %a = tanh(%x) : f32[4]\n"
			       "  %b = exp(%a) : f32[4]\n"
			       "  return %b\n}\n");
	kf_rw_order o = {0};
	kf_rw_order_graph(&o, g);
	kf_nid b = kf_def(g, kf_in(g, kf_block_terminator(g, 0), 0));
	kf_rewriter rw;
	kf_rw_begin(&rw, g, b);
	rw.ord = &o;
	kf_vid x = g->blk[0].arg[0];
	for (int i = 0; i < 300; i++) {
		/* each before the previous one: always the same gap */
		kf_vid v = kf_rw_create(&rw, KF_OP_NEG, &x, 1, NULL, 0, NULL, 0);
		assert_int_not_equal(v, KF_NONE);
		rw.root = kf_def(g, v);
	}
	kf_nid prev = KF_NONE;
	uint32_t n = 0;
	kf_foreach_node(g, 0, m) {
		if (prev != KF_NONE) {
			assert_true(kf_rw_order_before(&o, g, prev, m));
			assert_false(kf_rw_order_before(&o, g, m, prev));
		}
		prev = m;
		n++;
	}
	assert_int_equal(n, 303);
	assert_true(kf_rw_order_available(&o, g, x, b));
	assert_false(kf_rw_order_available(&o, g, kf_res(g, b, 0), rw.root));
	kf_rw_end(&rw);
	kf_rw_order_free(&o);
}

/* An AC pattern over long chains that never match costs a bounded number
 * of search steps per candidate: the work grows linearly with the graph. */
static uint64_t chain_steps(fx *f, int len)
{
	kf_buf t = {0};
	kf_buf_puts(&t, "graph @g(%x: f32[4], %y: f32[4]) -> (f32[4]) {\n  %c = const 3.0 : f32[]\n"
		    "  %s0 = add(%x, %y) : f32[4]\n");
	for (int i = 1; i < len; i++)
		kf_buf_printf(&t, "  %%s%d = add(%%s%d, %s) : f32[4]\n", i, i - 1, i % 3 ? i % 3 == 1 ? "%x" : "%y" : "%c");
	kf_buf_printf(&t, "  return %%s%d\n}\n", len - 1);
	kf_buf_putc(&t, 0);
	kf_graph *g = parse(f, t.p);
	kf_buf_free(&t);
	/* a + b + c + d + 2.0: the chains hold a constant, 3.0, so the quick
	 * check lets every root through and the search must find out */
	kf_pattern *p = pat(f);
	kf_pv v[4] = {kf_pat_var(p, "a"), kf_pat_var(p, "b"), kf_pat_var(p, "c"), kf_pat_var(p, "d")};
	kf_pv acc = v[0];
	for (int i = 1; i < 4; i++) {
		kf_pv in[2] = {acc, v[i]};
		acc = kf_pat_op(p, KF_OP_ADD, in, 2, NULL, 0, 0);
	}
	kf_pv in[2] = {acc, kf_pat_const(p, 2.0, -1)};
	outputs(p, kf_pat_op(p, KF_OP_ADD, in, 2, NULL, 0, 0));
	assert_int_equal(p->node[KF_PV_NODE(p->out[0])].nleaf, 5);
	kf_rule r, *rp = &r;
	set_rule(&r, "chain", p, NULL);
	r.replace = NULL;
	kf_rw_stats s;
	assert_int_equal(run(g, &rp, 1, 0, &s), 0);
	assert_int_equal(s.rewrites, 0);
	uint64_t steps = s.steps;
	kf_rw_stats_free(&s);
	return steps;
}

static void test_ac_linear(void **st)
{
	fx *f = *st;
	uint64_t a = chain_steps(f, 1000), b = chain_steps(f, 8000);
	/* the same steps per candidate root, a small number of them */
	assert_true(a > 1000);
	assert_true(b <= 8 * a + 8 * 64);
	assert_true(b < 8000 * 200);
}

/* accept is part of the search: declining the first binding of a
 * commutative root gives the other order. */
static int decline_first(void *ud, kf_match *m)
{
	int *calls = ud;
	if ((*calls)++ == 0) {
		m->declined = "first";
		return 0;
	}
	return 1;
}

static void test_accept_search(void **st)
{
	fx *f = *st;
	kf_graph *g = parse(f, "graph @g(%x: f32[4], %y: f32[4]) -> (f32[4]) {\n"
			       "  %a = add(%x, %y) : f32[4]\n"
			       "  return %a\n}\n");
	kf_pattern *p = pat(f);
	kf_pv in[2] = {kf_pat_var(p, "u"), kf_pat_var(p, "v")};
	outputs(p, kf_pat_op(p, KF_OP_ADD, in, 2, NULL, 0, 0));
	kf_rule r;
	set_rule(&r, "add", p, NULL);
	kf_match m;
	int calls = 0;
	kf_nid n = kf_def(g, kf_in(g, kf_block_terminator(g, 0), 0));
	assert_int_equal(kf_rw_match(g, &r, n, &m, decline_first, &calls), 1);
	assert_int_equal(calls, 2);
	kf_vid x = g->blk[0].arg[0], y = g->blk[0].arg[1];
	assert_int_equal(m.bind[0], y); /* the second order: u = %y, v = %x */
	assert_int_equal(m.bind[1], x);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_commutative, setup, teardown),
		cmocka_unit_test_setup_teardown(test_constants, setup, teardown),
		cmocka_unit_test_setup_teardown(test_interior, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rollback, setup, teardown),
		cmocka_unit_test_setup_teardown(test_loops, setup, teardown),
		cmocka_unit_test_setup_teardown(test_multi_output, setup, teardown),
		cmocka_unit_test_setup_teardown(test_attrs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lua_entries, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lua_transform, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lua_limits, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lua_bad_files, setup, teardown),
		cmocka_unit_test_setup_teardown(test_graph_same, setup, teardown),
		cmocka_unit_test_setup_teardown(test_order, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ac_linear, setup, teardown),
		cmocka_unit_test_setup_teardown(test_accept_search, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
