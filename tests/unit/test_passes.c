/* Unit tests of the pass manager and the graph passes: pipeline text and
 * its errors, options, verify-each, dumps, timing; canonicalize, cse, dce,
 * shape-infer and the dot writer on small graphs written as .kf text.  Every
 * pipeline run verifies each graph after each pass. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "interp.h"
#include "kf.h"
#include "pass.h"
#include "passes.h"

typedef struct fx {
	kf_ctx *c;
	kf_passreg reg;
	kf_module *m;
	kf_buf out;
} fx;

static int setup(void **st)
{
	fx *f = calloc(1, sizeof *f);
	f->c = kf_ctx_new();
	kf_rt_register(f->c);
	kf_passes_builtin(&f->reg);
	*st = f;
	return 0;
}

static int teardown(void **st)
{
	fx *f = *st;
	kf_module_free(f->m);
	kf_buf_free(&f->out);
	kf_passreg_free(&f->reg);
	kf_ctx_free(f->c);
	free(f);
	return 0;
}

/* The pending diagnostics as text (and clears them). */
static char *diags(fx *f)
{
	kf_buf b = {0};
	kf_diag_render(f->c, &b);
	kf_buf_putc(&b, 0);
	kf_diag_clear(f->c);
	return b.p;
}

static void parse(fx *f, const char *text)
{
	kf_module_free(f->m);
	f->m = kf_parse(f->c, "t.kf", text, strlen(text));
	if (!f->m)
		fail_msg("parse failed:\n%s", diags(f));
	for (uint32_t i = 0; i < f->m->ngraph; i++)
		if (kf_verify(f->m->graph[i]))
			fail_msg("input does not verify:\n%s", diags(f));
}

/* Runs the pipeline with verify-each; returns the printed module (owned by f). */
static const char *run_ok(fx *f, const char *text, const char *pipeline)
{
	parse(f, text);
	kf_pipeline *p = kf_pipeline_parse(f->c, &f->reg, pipeline);
	if (!p)
		fail_msg("pipeline '%s':\n%s", pipeline, diags(f));
	kf_runopts ro = {.verify_each = true};
	if (kf_pipeline_run(p, f->m, &ro) < 0)
		fail_msg("pipeline '%s' failed:\n%s", pipeline, diags(f));
	kf_pipeline_free(p);
	f->out.n = 0;
	kf_print_module(&f->out, f->m);
	kf_buf_putc(&f->out, 0);
	return f->out.p;
}

/* Live nodes of op `name` in every block of graph 0 (bodies too). */
static int count_op(fx *f, const char *name)
{
	kf_graph *g = f->m->graph[0];
	int op = kf_op_lookup(f->c, name, strlen(name)), k = 0;
	for (kf_nid n = 0; n < g->nnode; n++)
		k += !(g->node[n].flags & KF_NODE_DEAD) && g->node[n].op == op;
	return k;
}

static int count_str(const char *s, const char *sub)
{
	int k = 0;
	for (const char *p = s; (p = strstr(p, sub)); p += strlen(sub))
		k++;
	return k;
}

/* ---- pass manager --------------------------------------------------------- */

static void test_pipeline_text(void **st)
{
	fx *f = *st;
	kf_pipeline *p = kf_pipeline_parse(f->c, &f->reg, " canonicalize{fold=false, max-fold-elems = 16} , cse,dce ");
	assert_non_null(p);
	assert_int_equal(kf_pipeline_len(p), 3);
	assert_string_equal(kf_pipeline_pass(p, 0)->name, "canonicalize");
	assert_string_equal(kf_pipeline_pass(p, 2)->name, "dce");
	kf_pipeline_free(p);
	p = kf_pipeline_parse(f->c, &f->reg, "");
	assert_non_null(p);
	assert_int_equal(kf_pipeline_len(p), 0);
	kf_pipeline_free(p);
	p = kf_pipeline_parse(f->c, &f->reg, "shape-infer{update}");
	assert_non_null(p);
	kf_pipeline_free(p);
	assert_int_equal(kf_nerrors(f->c), 0);
}

static void test_pipeline_errors(void **st)
{
	fx *f = *st;
	assert_null(kf_pipeline_parse(f->c, &f->reg, "cse,cse2"));
	char *d = diags(f);
	assert_non_null(strstr(d, "<pipeline>:1:5: error: unknown pass 'cse2' (valid: canonicalize cse dce shape-infer"));
	free(d);
	assert_null(kf_pipeline_parse(f->c, &f->reg, "canonicalize{fold=true,foo=1}"));
	d = diags(f);
	assert_non_null(strstr(d, "unknown option 'foo' for pass 'canonicalize' (valid: fold max-fold-elems)"));
	free(d);
	assert_null(kf_pipeline_parse(f->c, &f->reg, "dce{x=1}"));
	d = diags(f);
	assert_non_null(strstr(d, "unknown option 'x' for pass 'dce' (valid: none)"));
	free(d);
	assert_null(kf_pipeline_parse(f->c, &f->reg, "cse dce"));
	d = diags(f);
	assert_non_null(strstr(d, "expected ',' between passes"));
	free(d);
	assert_null(kf_pipeline_parse(f->c, &f->reg, "canonicalize{fold=true"));
	d = diags(f);
	assert_non_null(strstr(d, "expected '}'"));
	free(d);
	assert_null(kf_pipeline_parse(f->c, &f->reg, "cse,"));
	d = diags(f);
	assert_non_null(strstr(d, "expected a pass name"));
	free(d);
}

static void test_pass_options(void **st)
{
	fx *f = *st;
	kf_passopt kv[] = {{"n", "12"}, {"b", "off"}, {"bad", "x1"}, {"s", "a,b"}, {"n", "0x10"}};
	kf_passopts o = {.pass = f->reg.p[0], .n = 5, .kv = kv, .loc = KF_NOLOC};
	assert_int_equal(kf_passopt_int(f->c, &o, "n", 3), 16); /* the last one wins */
	assert_false(kf_passopt_bool(f->c, &o, "b", true));
	assert_string_equal(kf_passopt_str(&o, "s", NULL), "a,b");
	assert_int_equal(kf_passopt_int(f->c, &o, "missing", 7), 7);
	assert_int_equal(kf_nerrors(f->c), 0);
	assert_int_equal(kf_passopt_int(f->c, &o, "bad", 5), 5);
	assert_true(kf_passopt_bool(f->c, &o, "bad", true));
	char *d = diags(f);
	assert_non_null(strstr(d, "option 'bad' expects an integer, not 'x1'"));
	assert_non_null(strstr(d, "option 'bad' expects true or false, not 'x1'"));
	free(d);
}

/* A malformed option value stops the pipeline before it changes anything. */
static void test_bad_option_value(void **st)
{
	fx *f = *st;
	parse(f, "graph @g(%x: f32[4]) -> (f32[4]) {\n  %d = neg(%x) : f32[4]\n  return %x\n}\n");
	kf_pipeline *p = kf_pipeline_parse(f->c, &f->reg, "canonicalize{max-fold-elems=lots}");
	assert_non_null(p);
	assert_int_equal(kf_pipeline_run(p, f->m, NULL), -1);
	char *d = diags(f);
	assert_non_null(strstr(d, "<pipeline>:1:1: error: pass 'canonicalize': option 'max-fold-elems' expects an integer, not 'lots'"));
	free(d);
	kf_pipeline_free(p);
}

static int ndump;
static void count_dump(void *ud, kf_module *m, const kf_pass *p, kf_dump_when when)
{
	char *log = ud;
	strcat(log, when == KF_DUMP_BEFORE ? "<" : ">");
	strcat(log, p->name);
	ndump++;
}

static void test_dumps_and_timing(void **st)
{
	fx *f = *st;
	parse(f, "graph @g(%x: f32[4]) -> (f32[4]) {\n  %a = neg(%x) : f32[4]\n  %b = neg(%x) : f32[4]\n"
		 "  %c = add(%a, %b) : f32[4]\n  return %c\n}\n");
	kf_pipeline *p = kf_pipeline_parse(f->c, &f->reg, "dce,cse,dce,canonicalize");
	char log[256] = "";
	kf_timing tm = {0};
	kf_runopts ro = {.verify_each = true, .after_change = true, .before = "dce", .timing = &tm,
			 .dump = count_dump, .ud = log};
	assert_int_equal(kf_pipeline_run(p, f->m, &ro), 0);
	/* dce changes nothing; cse merges the negs; canonicalize changes nothing
	 * (the add reads one value twice, already in order). */
	assert_string_equal(log, "<dce>cse<dce");
	assert_int_equal(tm.n, 8); /* each pass, and its verification */
	assert_string_equal(tm.row[1].name, "(verify-each)");
	kf_buf b = {0};
	kf_timing_render(&tm, &b);
	kf_buf_putc(&b, 0);
	assert_non_null(strstr(b.p, "cse"));
	assert_non_null(strstr(b.p, "total"));
	kf_buf_free(&b);
	kf_timing_free(&tm);
	kf_pipeline_free(p);
	assert_int_equal(count_op(f, "neg"), 1);
}

/* A pass that breaks the graph is caught by verify-each with its name. */
static int break_run(kf_graph *g, const kf_passopts *o, bool *changed)
{
	kf_nid ret = kf_block_terminator(g, 0);
	kf_node_move(g, ret, 0, g->blk[0].first); /* return before its operands */
	*changed = true;
	return 0;
}

static void test_verify_each(void **st)
{
	fx *f = *st;
	static const kf_pass brk = {.name = "break", .doc = "breaks", .run = break_run};
	kf_passreg_add(&f->reg, &brk);
	parse(f, "graph @g(%x: f32[4]) -> (f32[4]) {\n  %a = neg(%x) : f32[4]\n  return %a\n}\n");
	kf_pipeline *p = kf_pipeline_parse(f->c, &f->reg, "cse,break,dce");
	kf_runopts ro = {.verify_each = true};
	assert_int_equal(kf_pipeline_run(p, f->m, &ro), -1);
	char *d = diags(f);
	assert_non_null(strstr(d, "the graph @g is broken after pass 'break'"));
	free(d);
	kf_pipeline_free(p);
}

/* ---- dce ------------------------------------------------------------------------ */

static void test_dce(void **st)
{
	fx *f = *st;
	const char *out = run_ok(f,
		"graph @g(%x: f32[4], %unused: f32[8]) -> (f32[4]) {\n"
		"  %a = exp(%x) : f32[4]\n  %b = neg(%a) : f32[4]\n  %c = tanh(%b) : f32[4]\n"
		"  %k = relu(%x) : f32[4]\n"
		"  %f = fusion @k0(%x) {kind = \"elementwise\"} : f32[4] {\n"
		"  ^(%p: f32[4]):\n    %d = exp(%p) : f32[4]\n    %e = neg(%p) : f32[4]\n    yield %e\n  }\n"
		"  return %k\n}\n", "dce");
	/* The dead chain and the dead fusion (with its body) are gone; the unused
	 * input stays in the signature; the returned value stays. */
	assert_int_equal(count_op(f, "exp"), 0);
	assert_int_equal(count_op(f, "tanh"), 0);
	assert_int_equal(count_op(f, "fusion"), 0);
	assert_int_equal(count_op(f, "relu"), 1);
	assert_non_null(strstr(out, "%unused: f32[8]"));
	/* Inside a live body: the dead exp goes, the yielded neg stays. */
	out = run_ok(f,
		"graph @g(%x: f32[4]) -> (f32[4]) {\n"
		"  %f = fusion @k0(%x) {kind = \"elementwise\"} : f32[4] {\n"
		"  ^(%p: f32[4]):\n    %d = exp(%p) : f32[4]\n    %e = neg(%p) : f32[4]\n    yield %e\n  }\n"
		"  return %f\n}\n", "dce");
	assert_int_equal(count_op(f, "exp"), 0);
	assert_int_equal(count_op(f, "neg"), 1);
	assert_int_equal(count_op(f, "fusion"), 1);
}

/* ---- cse ------------------------------------------------------------------------ */

static void test_cse(void **st)
{
	fx *f = *st;
	run_ok(f,
		"graph @g(%x: f32[4], %y: f32[4]) -> (f32[4], f32[4], f32[4], f32[4]) {\n"
		"  %a = add(%x, %y) : f32[4]\n  %b = add(%y, %x) : f32[4]\n"
		"  %c = sub(%x, %y) : f32[4]\n  %d = sub(%y, %x) : f32[4]\n"
		"  %e = add(%a, %c) : f32[4]\n  %h = add(%b, %c) : f32[4]\n"
		"  return %e, %h, %d, %a\n}\n", "cse");
	/* add commutes (a == b, then e == h); sub does not. */
	assert_int_equal(count_op(f, "add"), 2);
	assert_int_equal(count_op(f, "sub"), 2);
	/* Attributes, constants and types keep nodes apart. */
	run_ok(f,
		"graph @g(%x: f32[2,3]) -> (f32[3,2], f32[3,2], f32[], f32[], f32[], f32[]) {\n"
		"  %a = transpose(%x) {perm = [1, 0]} : f32[3,2]\n"
		"  %b = transpose(%x) : f32[3,2]\n"
		"  %c = const 1.0 : f32[]\n  %d = const 2.0 : f32[]\n  %e = const 1.0 : f32[]\n"
		"  %z = const 0.0 : f32[]\n  %n = const -0.0 : f32[]\n"
		"  %s1 = reduce_sum(%x) {axes = [0, 1], keepdims = false} : f32[]\n"
		"  %s2 = reduce_sum(%x) {axes = [0, 1], keepdims = false} : f32[]\n"
		"  %u = add(%c, %e) : f32[]\n  %v = add(%d, %z) : f32[]\n  %w = add(%n, %s2) : f32[]\n"
		"  return %a, %b, %u, %v, %w, %s1\n}\n", "cse");
	/* perm=[1,0] vs the default are different attributes (same meaning: that
	 * is canonicalize's business, not cse's). */
	assert_int_equal(count_op(f, "transpose"), 2);
	assert_int_equal(count_op(f, "const"), 4); /* 1.0 twice -> once; -0.0 != 0.0 */
	assert_int_equal(count_op(f, "reduce_sum"), 1);
}

static void test_cse_fusion(void **st)
{
	fx *f = *st;
	const char *body =
		"  ^(%p: f32[4], %q: f32[4]):\n    %t = mul(%p, %q) : f32[4]\n    %t2 = mul(%p, %q) : f32[4]\n"
		"    %u = add(%t, %t2) : f32[4]\n    yield %u\n  }\n";
	char text[2048];
	snprintf(text, sizeof text,
		 "graph @g(%%x: f32[4], %%y: f32[4]) -> (f32[4], f32[4], f32[4]) {\n"
		 "  %%f = fusion @k0(%%x, %%y) {kind = \"elementwise\"} : f32[4] {\n%s"
		 "  %%h = fusion @k1(%%x, %%y) {kind = \"elementwise\"} : f32[4] {\n%s"
		 "  %%i = fusion @k2(%%y, %%x) {kind = \"elementwise\"} : f32[4] {\n%s"
		 "  return %%f, %%h, %%i\n}\n", body, body, body);
	run_ok(f, text, "cse");
	/* k0 and k1 are one (names aside); k2 reads its operands in the other
	 * order, which for a fusion body is another function. */
	assert_int_equal(count_op(f, "fusion"), 2);
	assert_int_equal(count_op(f, "mul"), 2); /* one per remaining body */
}

/* ---- canonicalize ------------------------------------------------------------------ */

static void test_canon_identities(void **st)
{
	fx *f = *st;
	const char *out = run_ok(f,
		"graph @g(%x: f32[4], %i: i32[4]) -> (f32[4], f32[4,4], f32[4], i32[4], f32[4], f32[4]) {\n"
		"  %z = const 0.0 : f32[]\n  %zz = const dense<0.0> : f32[4,4]\n  %one = const dense<1.0> : f32[4]\n"
		"  %a = add(%x, %z) : f32[4]\n"
		"  %b = add(%x, %zz) : f32[4,4]\n"
		"  %c = mul(%one, %a) : f32[4]\n"
		"  %d = sub(%i, %i) : i32[4]\n"
		"  %e = sub(%x, %x) : f32[4]\n"
		"  %n1 = neg(%x) : f32[4]\n  %n2 = neg(%n1) : f32[4]\n"
		"  return %c, %b, %n2, %d, %e, %a\n}\n", "canonicalize");
	/* x + 0 and 1 * x are x; x + zeros[4,4] broadcasts and must stay; neg neg
	 * is x; i - i is zeros; f - f stays (inf - inf is NaN). */
	assert_int_equal(count_op(f, "mul"), 0);
	assert_int_equal(count_op(f, "neg"), 0);
	assert_int_equal(count_op(f, "add"), 1);
	assert_int_equal(count_op(f, "sub"), 1);
	assert_non_null(strstr(out, "return %x, %b, %x,"));
	assert_non_null(strstr(out, "const dense<0> : i32[4]"));
}

static void test_canon_fold(void **st)
{
	fx *f = *st;
	const char *out = run_ok(f,
		"graph @g(%x: f32[2]) -> (f32[2], f32[3], i1[2], f32[2]) {\n"
		"  %a = const dense<[1.0, 2.0]> : f32[2]\n  %b = const 3.0 : f32[]\n"
		"  %s = add(%a, %b) : f32[2]\n"
		"  %c = const dense<2.0> : f32[3]\n  %e = mul(%c, %c) : f32[3]\n  %l = sqrt(%e) : f32[3]\n"
		"  %lt = lt(%a, %b) : i1[2]\n"
		"  %y = mul(%x, %s) : f32[2]\n"
		"  return %y, %l, %lt, %s\n}\n", "canonicalize");
	assert_int_equal(count_op(f, "mul"), 1);
	assert_int_equal(count_op(f, "sqrt"), 0);
	assert_int_equal(count_op(f, "lt"), 0);
	/* folded values keep the names the user wrote */
	assert_non_null(strstr(out, "%s = const dense<[4.0, 5.0]> : f32[2]"));
	/* a splat stays a splat */
	assert_non_null(strstr(out, "%l = const dense<2.0> : f32[3]"));
	assert_non_null(strstr(out, "%lt = const dense<true> : i1[2]"));
	/* constants go last in commutative ops */
	assert_non_null(strstr(out, "mul(%x, %s)"));
}

static void test_canon_fold_limit(void **st)
{
	fx *f = *st;
	const char *dense = "graph @g() -> (f32[3]) {\n  %c = const dense<[1.0, 2.0, 3.0]> : f32[3]\n"
			    "  %e = neg(%c) : f32[3]\n  return %e\n}\n";
	run_ok(f, dense, "canonicalize{max-fold-elems=2}");
	assert_int_equal(count_op(f, "neg"), 1);
	run_ok(f, dense, "canonicalize{fold=false}");
	assert_int_equal(count_op(f, "neg"), 1);
	const char *out = run_ok(f, dense, "canonicalize");
	assert_int_equal(count_op(f, "neg"), 0);
	assert_non_null(strstr(out, "%e = const dense<[-1.0, -2.0, -3.0]> : f32[3]"));
	/* a splat folds at any size without being materialised */
	out = run_ok(f,
		"graph @g() -> (f32[4096,4096]) {\n  %c = const dense<0.0> : f32[4096,4096]\n"
		"  %e = exp(%c) : f32[4096,4096]\n  return %e\n}\n", "canonicalize{max-fold-elems=2}");
	assert_non_null(strstr(out, "%e = const dense<1.0> : f32[4096,4096]"));
}

static void test_canon_shapes(void **st)
{
	fx *f = *st;
	const char *out = run_ok(f,
		"graph @g(%x: f32[2,3,4]) -> (f32[2,3,4], f32[4,2,3], f32[24], f32[2,3,4], f32[2,3,4], f32[2,3,4]) {\n"
		"  %t1 = transpose(%x) {perm = [1, 0, 2]} : f32[3,2,4]\n"
		"  %t2 = transpose(%t1) {perm = [1, 0, 2]} : f32[2,3,4]\n"
		"  %u1 = transpose(%x) {perm = [2, 0, 1]} : f32[4,2,3]\n"
		"  %u2 = transpose(%u1) {perm = [1, 2, 0]} : f32[2,3,4]\n"
		"  %u3 = transpose(%u2) {perm = [2, 0, 1]} : f32[4,2,3]\n"
		"  %r1 = reshape(%x) {shape = [6, 4]} : f32[6,4]\n  %r2 = reshape(%r1) {shape = [24]} : f32[24]\n"
		"  %r3 = reshape(%x) {shape = [2, 3, 4]} : f32[2,3,4]\n"
		"  %b = broadcast_to(%x) {shape = [2, 3, 4]} : f32[2,3,4]\n"
		"  %s = slice(%x) {starts = [0], ends = [100], axes = [2]} : f32[2,3,4]\n"
		"  return %t2, %u3, %r2, %r3, %b, %s\n}\n", "canonicalize,dce");
	assert_non_null(strstr(out, "return %x, %u3, %r2, %x, %x, %x"));
	assert_int_equal(count_op(f, "transpose"), 1); /* u3 reads x directly */
	assert_int_equal(count_op(f, "reshape"), 1);
	assert_non_null(strstr(out, "%u3 = transpose(%x) {perm = [2, 0, 1]}"));
	assert_non_null(strstr(out, "%r2 = reshape(%x) {shape = [24]}"));
	/* a reversing slice keeps the shape and must stay */
	run_ok(f,
		"graph @g(%x: f32[4]) -> (f32[4]) {\n"
		"  %s = slice(%x) {starts = [-1], ends = [-100], steps = [-1]} : f32[4]\n  return %s\n}\n",
		"canonicalize");
	assert_int_equal(count_op(f, "slice"), 1);
}

static void test_canon_casts(void **st)
{
	fx *f = *st;
	const char *out = run_ok(f,
		"graph @g(%h: f16[4], %x: f32[4]) -> (f16[4], f32[4], f32[4], f32[4]) {\n"
		"  %a = cast(%h) {to = \"f32\"} : f32[4]\n  %b = cast(%a) {to = \"f16\"} : f16[4]\n"
		"  %c = cast(%x) {to = \"f32\"} : f32[4]\n"
		"  %d = cast(%x) {to = \"f16\"} : f16[4]\n  %e = cast(%d) {to = \"f32\"} : f32[4]\n"
		"  %k = cast(%h) {to = \"f64\"} : f64[4]\n  %l = cast(%k) {to = \"f32\"} : f32[4]\n"
		"  return %b, %c, %e, %l\n}\n", "canonicalize");
	/* f16 -> f32 -> f16 is the identity; f32 -> f16 -> f32 rounds and stays;
	 * f16 -> f64 -> f32 is f16 -> f32. */
	assert_non_null(strstr(out, "return %h, %x, %e, %l"));
	assert_non_null(strstr(out, "%l = cast(%h) {to = \"f32\"}"));
}

static void test_canon_fusion_body(void **st)
{
	fx *f = *st;
	const char *out = run_ok(f,
		"graph @g(%x: f32[4]) -> (f32[4]) {\n"
		"  %f = fusion @k0(%x) {kind = \"elementwise\"} : f32[4] {\n"
		"  ^(%p: f32[4]):\n    %one = const 1.0 : f32[]\n    %t = mul(%p, %one) : f32[4]\n"
		"    %u = relu(%t) : f32[4]\n    %v = relu(%u) : f32[4]\n    yield %v\n  }\n"
		"  return %f\n}\n", "canonicalize");
	assert_int_equal(count_op(f, "mul"), 0);
	assert_int_equal(count_op(f, "relu"), 1);
	assert_int_equal(count_op(f, "const"), 0); /* dead once mul is gone */
	assert_non_null(strstr(out, "relu(%p)"));
}

/* ---- shape-infer ------------------------------------------------------------------ */

static void test_shape_infer(void **st)
{
	fx *f = *st;
	parse(f, "graph @g(%x: f32[N,4]) -> (f32[N,4]) {\n  %a = exp(%x) : f32[N,4]\n"
		 "  %b = neg(%a) : f32[N,4]\n  return %b\n}\n");
	kf_graph *g = f->m->graph[0];
	/* Change the input's type as a front end would, then re-infer. */
	int64_t d[] = {KF_SYM(kf_intern_cstr(f->c, "B")), 4};
	kf_type t = kf_type_make(KF_F32, 2, d);
	kf_V(g, g->blk[0].arg[0])->type = kf_type_intern(f->c, &t);
	kf_pipeline *p = kf_pipeline_parse(f->c, &f->reg, "shape-infer");
	kf_runopts ro = {.verify_each = true};
	assert_int_equal(kf_pipeline_run(p, f->m, &ro), -1);
	char *dg = diags(f);
	assert_non_null(strstr(dg, "t.kf:2:3: error: shape-infer: 'exp' result 0 is declared f32[N,4] but infers f32[B,4]"));
	free(dg);
	kf_pipeline_free(p);
	p = kf_pipeline_parse(f->c, &f->reg, "shape-infer{update=true}");
	assert_int_equal(kf_pipeline_run(p, f->m, &ro), 0);
	kf_pipeline_free(p);
	f->out.n = 0;
	kf_print_module(&f->out, f->m);
	kf_buf_putc(&f->out, 0);
	assert_non_null(strstr(f->out.p, "-> (f32[B,4])"));
	assert_non_null(strstr(f->out.p, "%b = neg(%a) : f32[B,4]"));
}

/* ---- dot ------------------------------------------------------------------------ */

static void test_dot(void **st)
{
	fx *f = *st;
	parse(f, "graph @g(%x: f32[4]) -> (f32[4], f32[2], f32[2]) {\n"
		 "  %f = fusion @k0(%x) {kind = \"elementwise\"} : f32[4] {\n"
		 "  ^(%p: f32[4]):\n    %e = exp(%p) : f32[4]\n    yield %e\n  }\n"
		 "  %s:2 = split(%f) {axis = 0} : f32[2], f32[2]\n  return %f, %s#0, %s#1\n}\n");
	kf_buf b = {0};
	kf_dot_module(&b, f->m);
	kf_buf_putc(&b, 0);
	assert_non_null(strstr(b.p, "digraph \"g\" {"));
	assert_non_null(strstr(b.p, "subgraph cluster_"));
	assert_non_null(strstr(b.p, "label=\"fusion @k0 (elementwise)\""));
	assert_non_null(strstr(b.p, "shape=invhouse"));
	assert_non_null(strstr(b.p, "label=\"%x\\nf32[4]\""));
	assert_non_null(strstr(b.p, "[label=\"#1\"]"));
	assert_int_equal(count_str(b.p, "{"), count_str(b.p, "}"));
	kf_buf_free(&b);
}

/* ---- a larger graph: the passes stay near-linear --------------------------------- */

static void test_large_graph(void **st)
{
	fx *f = *st;
	enum { N = 60000 };
	kf_buf t = {0};
	kf_buf_puts(&t, "graph @big(%x: f32[8]) -> (f32[8]) {\n  %v0 = neg(%x) : f32[8]\n");
	for (int i = 1; i < N; i++) {
		/* each step: a duplicate, a dead node and an identity */
		kf_buf_printf(&t, "  %%w%d = exp(%%v%d) : f32[8]\n", i, i - 1);
		kf_buf_printf(&t, "  %%d%d = tanh(%%v%d) : f32[8]\n", i, i - 1);
		kf_buf_printf(&t, "  %%v%d = add(%%w%d, %%v%d) : f32[8]\n", i, i, i - 1);
		kf_buf_printf(&t, "  %%u%d = add(%%v%d, %%w%d) : f32[8]\n", i, i - 1, i);
	}
	kf_buf_printf(&t, "  %%r = add(%%v%d, %%u%d) : f32[8]\n  return %%r\n}\n", N - 1, N - 1);
	kf_buf_putc(&t, 0);
	double t0 = kf_now();
	run_ok(f, t.p, "canonicalize,cse,dce");
	double dt = kf_now() - t0;
	kf_buf_free(&t);
	assert_int_equal(count_op(f, "tanh"), 0);
	assert_int_equal(count_op(f, "exp"), N - 1);
	/* u_i == v_i by commutativity, except the last u, read by r */
	assert_int_equal(count_op(f, "add"), N);
	/* quadratic behaviour would take minutes; generous for sanitizers */
	assert_true(dt < 20.0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_pipeline_text, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pipeline_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pass_options, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_option_value, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dumps_and_timing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_verify_each, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dce, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cse, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cse_fusion, setup, teardown),
		cmocka_unit_test_setup_teardown(test_canon_identities, setup, teardown),
		cmocka_unit_test_setup_teardown(test_canon_fold, setup, teardown),
		cmocka_unit_test_setup_teardown(test_canon_fold_limit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_canon_shapes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_canon_casts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_canon_fusion_body, setup, teardown),
		cmocka_unit_test_setup_teardown(test_shape_infer, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dot, setup, teardown),
		cmocka_unit_test_setup_teardown(test_large_graph, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
