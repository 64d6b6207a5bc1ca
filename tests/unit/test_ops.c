/* Unit tests of the op registry and of each built-in op's type inference:
 * result types for good input, the exact message for bad input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "kf.h"

static kf_ctx *C;
static kf_graph *G;
static kf_type OUT[16];
static char ERR[512];

static int setup(void **st)
{
	C = kf_ctx_new();
	G = kf_graph_new(C, "t");
	return 0;
}

static int teardown(void **st)
{
	kf_graph_free(G);
	kf_ctx_free(C);
	return 0;
}

/* ---- helpers: types as text, attributes, one-node graphs ------------------ */

/* "f32[2,N,3]" -> type; symbols are interned. */
static kf_type ty(const char *s)
{
	const char *lb = strchr(s, '[');
	assert_non_null(lb);
	int dt = kf_dtype_parse(s, (size_t)(lb - s));
	assert_true(dt >= 0);
	int64_t d[KF_MAX_RANK];
	int r = 0;
	for (const char *p = lb + 1; *p != ']';) {
		size_t k = strcspn(p, ",]");
		d[r] = kf_dim_parse(C, p, k); /* 4, N, 8*B */
		assert_true(d[r++] != KF_DIM_BAD);
		p += k;
		if (*p == ',')
			p++;
	}
	return kf_type_make((kf_dtype)dt, r, d);
}

static kf_tid tid(const char *s)
{
	kf_type t = ty(s);
	return kf_type_intern(C, &t);
}

/* type -> text, in one of four rotating buffers */
static const char *ts(const kf_type *t)
{
	static char buf[4][128];
	static int k;
	char *b = buf[k++ & 3];
	int n = snprintf(b, 128, "%s[", kf_dtype_name(t->dtype));
	for (int i = 0; i < t->rank; i++)
		n += KF_IS_SYM(t->dim[i]) ? snprintf(b + n, 128 - n, "%s%s", i ? "," : "", kf_str(C, KF_SYM_SID(t->dim[i])))
					  : snprintf(b + n, 128 - n, "%s%lld", i ? "," : "", (long long)t->dim[i]);
	snprintf(b + n, 128 - n, "]");
	return b;
}

static kf_attr AI(const char *k, int64_t v) { return (kf_attr){kf_intern_cstr(C, k), {.kind = KF_ATTR_INT, .i = v}}; }
static kf_attr AF(const char *k, double v) { return (kf_attr){kf_intern_cstr(C, k), {.kind = KF_ATTR_FLOAT, .f = v}}; }
static kf_attr AB(const char *k, bool v) { return (kf_attr){kf_intern_cstr(C, k), {.kind = KF_ATTR_BOOL, .b = v}}; }
static kf_attr AS(const char *k, const char *v)
{
	return (kf_attr){kf_intern_cstr(C, k), {.kind = KF_ATTR_STR, .s = kf_intern_cstr(C, v)}};
}
/* kf_node_set_attrs deep-copies, so the list can live in a static pool */
static kf_attr AL_(const char *k, int n, const int64_t *v)
{
	static kf_attrval pool[256];
	static int used;
	if (used + n > 256)
		used = 0;
	kf_attrval *l = pool + used;
	used += n;
	for (int i = 0; i < n; i++)
		l[i] = (kf_attrval){.kind = KF_ATTR_INT, .i = v[i]};
	return (kf_attr){kf_intern_cstr(C, k), {.kind = KF_ATTR_LIST, .n = (uint32_t)n, .list = l}};
}
#define AL(k, ...) AL_(k, (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__})
#define AL0(k) AL_(k, 0, NULL)
/* A list of dims from "B,T,-1,12": ints, and strings for symbolic dims. */
static kf_attr ALD(const char *k, const char *items)
{
	static kf_attrval pool[64];
	char buf[128];
	uint32_t n = 0;
	snprintf(buf, sizeof buf, "%s", items);
	for (char *p = strtok(buf, ","); p && n < 64; p = strtok(NULL, ",")) {
		char *e;
		long long v = strtoll(p, &e, 10);
		pool[n++] = *e ? (kf_attrval){.kind = KF_ATTR_STR, .s = kf_intern_cstr(C, p)}
			       : (kf_attrval){.kind = KF_ATTR_INT, .i = v};
	}
	return (kf_attr){kf_intern_cstr(C, k), {.kind = KF_ATTR_LIST, .n = n, .list = pool}};
}

/* Appends `op(args of types ins) {attrs} : nres placeholder results` to the
 * graph and runs kf_infer on it; returns its answer, OUT and ERR hold the rest. */
static kf_nid LAST;
static int infer_node(const char *opname, const char *ins, int nres, const kf_attr *a, int na)
{
	int op = kf_op_lookup(C, opname, strlen(opname));
	assert_true(op >= 0);
	kf_vid in[16];
	int nin = 0;
	char buf[256];
	snprintf(buf, sizeof buf, "%s", ins);
	for (char *p = strtok(buf, " "); p; p = strtok(NULL, " "))
		in[nin++] = kf_block_add_arg(G, 0, tid(p), 0);
	kf_tid rt[16];
	for (int i = 0; i < nres; i++)
		rt[i] = tid("f32[]");
	LAST = kf_node_new(G, 0, KF_NONE, op, in, (uint32_t)nin, rt, (uint32_t)nres);
	if (na)
		kf_node_set_attrs(G, LAST, a, (uint32_t)na);
	ERR[0] = 0;
	return kf_infer(G, LAST, OUT, 16, ERR, sizeof ERR);
}
#define INF(op, ins, nres, ...) \
	infer_node(op, ins, nres, (kf_attr[]){{0}, __VA_ARGS__} + 1, \
		   (int)(sizeof((kf_attr[]){{0}, __VA_ARGS__}) / sizeof(kf_attr)) - 1)

#define OK(k, want) do { \
	int k_ = (k); \
	if (k_ != 1) fail_msg("inference gave %d: %s", k_, ERR); \
	assert_string_equal(ts(&OUT[0]), want); \
} while (0)
#define BAD(k, msg) do { \
	int k_ = (k); \
	if (k_ != -1) fail_msg("inference succeeded (%d) but should fail with: %s", k_, msg); \
	assert_string_equal(ERR, msg); \
} while (0)

/* ---- the registry ------------------------------------------------------------ */

static void test_registry(void **st)
{
	assert_int_equal(kf_op_count(C), KF_NBUILTIN);
#define CHECK(id, txt) \
	assert_string_equal(kf_op(C, KF_OP_##id)->name, txt); \
	assert_int_equal(kf_op_lookup(C, txt, strlen(txt)), KF_OP_##id); \
	assert_non_null(kf_op(C, KF_OP_##id)->infer); \
	assert_non_null(kf_op(C, KF_OP_##id)->doc); \
	assert_null(kf_op(C, KF_OP_##id)->cpu);
	KF_BUILTIN_OPS(CHECK)
#undef CHECK
	const int comm[] = {KF_OP_ADD, KF_OP_MUL, KF_OP_MAX, KF_OP_MIN, KF_OP_EQ, KF_OP_NE, KF_OP_AND, KF_OP_OR};
	for (size_t i = 0; i < sizeof comm / sizeof comm[0]; i++)
		assert_true(kf_op(C, comm[i])->flags & KF_OPF_COMMUTATIVE);
	assert_false(kf_op(C, KF_OP_SUB)->flags & KF_OPF_COMMUTATIVE);
	assert_false(kf_op(C, KF_OP_LT)->flags & KF_OPF_COMMUTATIVE);
	assert_int_equal(kf_op(C, KF_OP_ADD)->trait, KF_TRAIT_BROADCAST);
	assert_int_equal(kf_op(C, KF_OP_TANH)->trait, KF_TRAIT_ELEMENTWISE);
	assert_int_equal(kf_op(C, KF_OP_REDUCE_SUM)->trait, KF_TRAIT_REDUCE);
	assert_int_equal(kf_op(C, KF_OP_LAYER_NORM)->trait, KF_TRAIT_REDUCE);
	assert_int_equal(kf_op(C, KF_OP_GEMM)->trait, KF_TRAIT_CONTRACTION);
	assert_int_equal(kf_op(C, KF_OP_SLICE)->trait, KF_TRAIT_INJECTIVE);
	assert_int_equal(kf_op(C, KF_OP_BROADCAST_TO)->trait, KF_TRAIT_BROADCAST);
	assert_int_equal(kf_op(C, KF_OP_FUSION)->flags, KF_OPF_REGION | KF_OPF_SYMBOL);
	assert_int_equal(kf_op(C, KF_OP_FUSION)->nres, -1);
	assert_int_equal(kf_op(C, KF_OP_SPLIT)->nres, -1);
	assert_int_equal(kf_op(C, KF_OP_RETURN)->flags, KF_OPF_TERMINATOR | KF_OPF_EFFECT);
	assert_int_equal(kf_op(C, KF_OP_CONCAT)->max_in, -1);
	assert_string_equal(kf_op(C, KF_OP_ADD)->cuda, "(a + b)");
	assert_string_equal(kf_op(C, KF_OP_TANH)->cuda, "tanhf(a)");
	assert_non_null(strstr(kf_op(C, KF_OP_GELU)->cuda, "erff("));
	assert_null(kf_op(C, KF_OP_MATMUL)->cuda);
	assert_string_equal(kf_op(C, KF_OP_REDUCE_SUM)->attrs, "axes keepdims");
	assert_string_equal(kf_trait_name(KF_TRAIT_ELEMENTWISE), "elementwise");
	assert_string_equal(kf_trait_name(KF_TRAIT_CONTRACTION), "contraction");
	assert_string_equal(kf_trait_name(KF_TRAIT_OPAQUE), "opaque");
	/* a second "add" is refused and the registry is unchanged */
	kf_opinfo dup = *kf_op(C, KF_OP_ADD);
	assert_int_equal(kf_op_register(C, &dup), -1);
	assert_int_equal(kf_nerrors(C), 1);
	assert_int_equal(kf_op_count(C), KF_NBUILTIN);
	kf_diag_clear(C);
}

static void test_generic_checks(void **st)
{
	BAD(INF("add", "f32[4]", 1), "'add' takes 2 operands, got 1");
	BAD(INF("exp", "f32[4] f32[4]", 1), "'exp' takes 1 operand, got 2");
	BAD(INF("layer_norm", "f32[4] f32[4] f32[4] f32[4]", 1), "'layer_norm' takes 1 to 3 operands, got 4");
	BAD(INF("concat", "", 1, AI("axis", 0)), "'concat' takes at least 1 operand, got 0");
	BAD(INF("reduce_sum", "f32[4]", 1, AL("axs", 0)),
	    "unknown attribute 'axs' for 'reduce_sum' (allowed: axes keepdims)");
	BAD(INF("add", "f32[4] f32[4]", 1, AI("x", 1)), "unknown attribute 'x' for 'add' (it takes no attributes)");
	BAD(INF("softmax", "f32[4]", 1, AS("axis", "last")), "attribute 'axis' of 'softmax' must be an int, got a string");
	BAD(INF("reduce_sum", "f32[4]", 1, AI("axes", 0)),
	    "attribute 'axes' of 'reduce_sum' must be a list of ints, got an int");
	BAD(INF("gemm", "f32[2,2] f32[2,2]", 1, AS("alpha", "1")),
	    "attribute 'alpha' of 'gemm' must be a float, got a string");
	/* a plugin op with no shape function is trusted: the node's types stand */
	kf_opinfo p = {.name = "myop", .min_in = 1, .max_in = 1, .nres = 1, .trait = KF_TRAIT_OPAQUE};
	assert_int_equal(kf_op_register(C, &p), KF_NBUILTIN);
	OK(INF("myop", "f32[4]", 1, AI("anything", 3)), "f32[]");
}

/* ---- element-wise and broadcasting ---------------------------------------- */

static void test_elementwise(void **st)
{
	OK(INF("exp", "f32[2,3]", 1), "f32[2,3]");
	OK(INF("tanh", "f16[N]", 1), "f16[N]");
	OK(INF("neg", "i32[5]", 1), "i32[5]");
	OK(INF("relu", "i8[0]", 1), "i8[0]");
	OK(INF("not", "i1[3]", 1), "i1[3]");
	BAD(INF("exp", "i32[4]", 1), "'exp' takes float operands, got i32");
	BAD(INF("abs", "i1[4]", 1), "'abs' takes float or integer operands, got i1");
	BAD(INF("not", "f32[4]", 1), "'not' takes i1 operands, got f32");
	OK(INF("gelu", "f32[4]", 1, AS("approximate", "tanh")), "f32[4]");
	OK(INF("gelu", "bf16[4]", 1), "bf16[4]");
	BAD(INF("gelu", "f32[4]", 1, AS("approximate", "fast")),
	    "attribute 'approximate' of 'gelu' must be \"none\" or \"tanh\", got \"fast\"");
	OK(INF("cast", "f32[2,N]", 1, AS("to", "f16")), "f16[2,N]");
	OK(INF("cast", "i1[2]", 1, AS("to", "i64")), "i64[2]");
	BAD(INF("cast", "f32[2]", 1), "'cast' needs attribute 'to'");
	BAD(INF("cast", "f32[2]", 1, AS("to", "f17")), "attribute 'to' of 'cast' is not a dtype: \"f17\"");
	BAD(INF("cast", "f32[2]", 1, AI("to", 1)), "attribute 'to' of 'cast' must be a string, got an int");
}

static void test_broadcast(void **st)
{
	OK(INF("add", "f32[4] f32[4]", 1), "f32[4]");
	OK(INF("mul", "f32[2,1,4] f32[3,1]", 1), "f32[2,3,4]");
	OK(INF("sub", "f32[] f32[4,5]", 1), "f32[4,5]");
	OK(INF("div", "f32[4,5] f32[]", 1), "f32[4,5]");
	OK(INF("pow", "f32[1] f32[1,1,1]", 1), "f32[1,1,1]");
	/* empty dims: 0 broadcasts with 1 and with 0, not with 3 */
	OK(INF("add", "f32[0,4] f32[1,4]", 1), "f32[0,4]");
	OK(INF("add", "f32[1] f32[0]", 1), "f32[0]");
	BAD(INF("add", "f32[0] f32[3]", 1), "'add' cannot broadcast f32[0] and f32[3]: dim 0 vs 3");
	BAD(INF("add", "f32[2,4] f32[3]", 1), "'add' cannot broadcast f32[2,4] and f32[3]: dim 4 vs 3");
	BAD(INF("add", "f32[4] f16[4]", 1), "'add' operand dtypes differ: f32 and f16");
	BAD(INF("add", "i1[4] i1[4]", 1), "'add' takes float or integer operands, got i1");
	OK(INF("max", "i64[3,1] i64[1,7]", 1), "i64[3,7]");
	/* symbols: equal ones broadcast, with 1 the symbol wins, else an error */
	OK(INF("add", "f32[N,4] f32[N,4]", 1), "f32[N,4]");
	OK(INF("add", "f32[N,1] f32[1,M]", 1), "f32[N,M]");
	OK(INF("add", "f32[B,N,4] f32[4]", 1), "f32[B,N,4]");
	BAD(INF("add", "f32[N,4] f32[8,4]", 1),
	    "'add' cannot broadcast f32[N,4] and f32[8,4]: dim N vs 8 (a symbolic dim broadcasts only with itself or 1)");
	BAD(INF("min", "f32[N] f32[M]", 1),
	    "'min' cannot broadcast f32[N] and f32[M]: dim N vs M (a symbolic dim broadcasts only with itself or 1)");
	/* the result rank is the larger one, up to the maximum */
	OK(INF("add", "f32[1,1,1,1,1,1,1,2] f32[3,1]", 1), "f32[1,1,1,1,1,1,3,2]");
}

static void test_compare_logic_where(void **st)
{
	OK(INF("lt", "f32[4,1] f32[3]", 1), "i1[4,3]");
	OK(INF("eq", "i1[2] i1[2]", 1), "i1[2]");
	OK(INF("ne", "i32[N] i32[1]", 1), "i1[N]");
	BAD(INF("gt", "i1[2] i1[2]", 1), "'gt' takes float or integer operands, got i1");
	BAD(INF("ge", "f32[2] i32[2]", 1), "'ge' operand dtypes differ: f32 and i32");
	OK(INF("and", "i1[2,1] i1[5]", 1), "i1[2,5]");
	BAD(INF("or", "f32[2] f32[2]", 1), "'or' takes i1 operands, got f32");
	OK(INF("where", "i1[4,1] f32[1,3] f32[]", 1), "f32[4,3]");
	OK(INF("where", "i1[] i64[2] i64[2]", 1), "i64[2]");
	OK(INF("where", "i1[2,1,1] f16[3,1] f16[4]", 1), "f16[2,3,4]");
	BAD(INF("where", "f32[4] f32[4] f32[4]", 1), "'where' condition must be i1, got f32");
	BAD(INF("where", "i1[4] f32[4] f16[4]", 1), "'where' operand dtypes differ: f32 and f16");
	BAD(INF("where", "i1[5] f32[4] f32[4]", 1), "'where' cannot broadcast i1[5] and f32[4]: dim 5 vs 4");
}

/* ---- reductions and normalisations ---------------------------------------- */

static void test_reduce(void **st)
{
	OK(INF("reduce_sum", "f32[2,3,4]", 1), "f32[1,1,1]");
	OK(INF("reduce_sum", "f32[2,3,4]", 1, AI("keepdims", 0)), "f32[]");
	OK(INF("reduce_mean", "f32[2,3,4]", 1, AL("axes", 1)), "f32[2,1,4]");
	OK(INF("reduce_max", "f32[2,3,4]", 1, AL("axes", -1, 0), AB("keepdims", false)), "f32[3]");
	OK(INF("reduce_min", "i32[2,3]", 1, AL0("axes"), AB("keepdims", true)), "i32[1,1]");
	OK(INF("reduce_sum", "f32[N,4]", 1, AL("axes", 1), AI("keepdims", 0)), "f32[N]");
	OK(INF("reduce_sum", "f32[N,4]", 1, AL("axes", 0)), "f32[1,4]");
	OK(INF("reduce_sum", "f32[0,4]", 1, AL("axes", 0), AI("keepdims", 0)), "f32[4]");
	OK(INF("reduce_sum", "f32[]", 1), "f32[]");
	BAD(INF("reduce_sum", "f32[2,3]", 1, AL("axes", 1, -1)), "'reduce_sum' axis 1 appears twice in 'axes'");
	BAD(INF("reduce_sum", "f32[2,3]", 1, AL("axes", 2)), "'reduce_sum' axis 2 is out of range for f32[2,3] (rank 2)");
	BAD(INF("reduce_mean", "f32[2,3]", 1, AL("axes", -3)), "'reduce_mean' axis -3 is out of range for f32[2,3] (rank 2)");
	BAD(INF("reduce_sum", "i1[2]", 1), "'reduce_sum' takes float or integer operands, got i1");
	BAD(INF("reduce_sum", "f32[2]", 1, AF("keepdims", 1.0)),
	    "attribute 'keepdims' of 'reduce_sum' must be an int, got a float");
}

static void test_softmax_layer_norm(void **st)
{
	OK(INF("softmax", "f32[2,N]", 1), "f32[2,N]");
	OK(INF("log_softmax", "f16[2,3]", 1, AI("axis", 0)), "f16[2,3]");
	BAD(INF("softmax", "f32[2,3]", 1, AI("axis", 2)), "'softmax' axis 2 is out of range for f32[2,3] (rank 2)");
	BAD(INF("softmax", "f32[]", 1), "'softmax' axis -1 is out of range for f32[] (rank 0)");
	BAD(INF("softmax", "i32[4]", 1), "'softmax' takes float operands, got i32");
	OK(INF("layer_norm", "f32[2,3,4]", 1), "f32[2,3,4]");
	OK(INF("layer_norm", "f32[2,3,4] f32[4] f32[4]", 1), "f32[2,3,4]");
	OK(INF("layer_norm", "f32[2,3,4] f32[3,4]", 1, AI("axis", 1), AI("epsilon", 0)), "f32[2,3,4]");
	OK(INF("layer_norm", "f32[N,T,64] f32[64]", 1, AF("epsilon", 1e-6)), "f32[N,T,64]");
	BAD(INF("layer_norm", "f32[2,3,4] f32[3,4]", 1),
	    "'layer_norm' scale has type f32[3,4], expected f32[4] (x's dims from axis 2)");
	BAD(INF("layer_norm", "f32[2,3,4] f32[4] f16[4]", 1),
	    "'layer_norm' bias has type f16[4], expected f32[4] (x's dims from axis 2)");
	BAD(INF("layer_norm", "f32[2,3,4]", 1, AF("epsilon", -1.0)),
	    "'layer_norm' epsilon must be finite and >= 0, got -1");
	BAD(INF("layer_norm", "f32[2,3,4]", 1, AS("epsilon", "small")),
	    "attribute 'epsilon' of 'layer_norm' must be a float, got a string");
	BAD(INF("layer_norm", "i32[4]", 1), "'layer_norm' takes float operands, got i32");
}

/* ---- contractions ------------------------------------------------------------- */

static void test_matmul(void **st)
{
	OK(INF("matmul", "f32[2,3] f32[3,4]", 1), "f32[2,4]");
	OK(INF("matmul", "f32[3] f32[3,4]", 1), "f32[4]");
	OK(INF("matmul", "f32[2,3] f32[3]", 1), "f32[2]");
	OK(INF("matmul", "f32[3] f32[3]", 1), "f32[]");
	OK(INF("matmul", "f32[5,1,2,3] f32[4,3,6]", 1), "f32[5,4,2,6]");
	OK(INF("matmul", "f32[7,2,3] f32[3]", 1), "f32[7,2]");
	OK(INF("matmul", "f32[B,T,64] f32[64,V]", 1), "f32[B,T,V]");
	OK(INF("matmul", "f32[2,0] f32[0,4]", 1), "f32[2,4]");
	BAD(INF("matmul", "f32[2,3] f32[4,5]", 1), "'matmul' inner dims differ: 3 vs 4 (f32[2,3] and f32[4,5])");
	BAD(INF("matmul", "f32[2,K] f32[4,5]", 1), "'matmul' inner dims differ: K vs 4 (f32[2,K] and f32[4,5])");
	BAD(INF("matmul", "f32[2,2,3] f32[3,3,4]", 1), "'matmul' cannot broadcast f32[2] and f32[3]: dim 2 vs 3");
	BAD(INF("matmul", "f32[] f32[3]", 1), "'matmul' operands must have rank >= 1, got rank 0 and 1");
	BAD(INF("matmul", "f32[2,3] f16[3,4]", 1), "'matmul' operand dtypes differ: f32 and f16");
}

static void test_gemm(void **st)
{
	OK(INF("gemm", "f32[2,3] f32[3,4]", 1), "f32[2,4]");
	OK(INF("gemm", "f32[3,2] f32[4,3]", 1, AI("trans_a", 1), AB("trans_b", true)), "f32[2,4]");
	OK(INF("gemm", "f32[2,3] f32[3,4] f32[4]", 1, AI("alpha", 2), AF("beta", 0.5)), "f32[2,4]");
	OK(INF("gemm", "f32[2,3] f32[3,4] f32[2,1]", 1), "f32[2,4]");
	OK(INF("gemm", "f32[2,3] f32[3,4] f32[]", 1), "f32[2,4]");
	BAD(INF("gemm", "f32[2,3] f32[3,4] f32[3,4]", 1), "'gemm' cannot broadcast f32[3,4] and f32[2,4]: dim 3 vs 2");
	BAD(INF("gemm", "f32[1,3] f32[3,4] f32[5,4]", 1), "'gemm' c of type f32[5,4] does not broadcast to the result f32[1,4]");
	BAD(INF("gemm", "f32[2,3] f32[4,3]", 1), "'gemm' inner dims differ: 3 vs 4 (f32[2,3] and f32[4,3])");
	BAD(INF("gemm", "f32[2,2,3] f32[3,4]", 1), "'gemm' takes 2-D a and b, got rank 3 and 2");
}

/* ---- layout ------------------------------------------------------------------- */

static void test_transpose_reshape(void **st)
{
	OK(INF("transpose", "f32[2,3,4]", 1), "f32[4,3,2]");
	OK(INF("transpose", "f32[2,N,4]", 1, AL("perm", 0, 2, 1)), "f32[2,4,N]");
	OK(INF("transpose", "f32[]", 1), "f32[]");
	BAD(INF("transpose", "f32[2,3]", 1, AL("perm", 0, 0)), "'transpose' perm is not a permutation of 0..1");
	BAD(INF("transpose", "f32[2,3]", 1, AL("perm", 0)), "'transpose' perm has 1 entries for rank 2");
	OK(INF("reshape", "f32[2,3,4]", 1, AL("shape", 6, 4)), "f32[6,4]");
	OK(INF("reshape", "f32[2,3,4]", 1, AL("shape", 0, -1)), "f32[2,12]");
	OK(INF("reshape", "f32[2,3,4]", 1, AL("shape", -1)), "f32[24]");
	OK(INF("reshape", "f32[1]", 1, AL0("shape")), "f32[]");
	OK(INF("reshape", "f32[N,4,8]", 1, AL("shape", 0, -1)), "f32[N,32]");
	OK(INF("reshape", "f32[N,4,8]", 1, AL("shape", 0, 2, 16)), "f32[N,2,16]");
	OK(INF("reshape", "f32[0,4]", 1, AL("shape", 0, 2, 2)), "f32[0,2,2]");
	BAD(INF("reshape", "f32[2,3]", 1, AL("shape", 4, 2)),
	    "'reshape' from f32[2,3] to f32[4,2] changes the element count (6 vs 8)");
	BAD(INF("reshape", "f32[2,3]", 1, AL("shape", -1, -1)), "'reshape' shape has more than one -1");
	BAD(INF("reshape", "f32[2,3]", 1, AL("shape", 4, -1)),
	    "'reshape' cannot infer -1: f32[2,3] has 6 elements, not a multiple of 4");
	BAD(INF("reshape", "f32[0,3]", 1, AL("shape", 0, -1)),
	    "'reshape' cannot infer -1: f32[0,3] has 0 elements, not a multiple of 0");
	/* symbolic dims are monomials: counts compare exactly, -1 is the quotient */
	OK(INF("reshape", "f32[N,4]", 1, AL("shape", -1)), "f32[4*N]");
	OK(INF("reshape", "f32[B,T,768]", 1, AL("shape", -1, 768)), "f32[B*T,768]");
	OK(INF("reshape", "f32[B*T,768]", 1, ALD("shape", "B,T,12,-1")), "f32[B,T,12,64]");
	OK(INF("reshape", "f32[T,B,512]", 1, ALD("shape", "T,B*8,64")), "f32[T,8*B,64]");
	OK(INF("reshape", "f32[T,8*B,64]", 1, ALD("shape", "T,-1,8,64")), "f32[T,B,8,64]");
	OK(INF("reshape", "f32[B,2,2,S,8]", 1, ALD("shape", "B,4,S,8")), "f32[B,4,S,8]");
	OK(INF("reshape", "f32[2,N]", 1, ALD("shape", "N*2")), "f32[2*N]");
	BAD(INF("reshape", "f32[N,3]", 1, AL("shape", 2, -1)),
	    "'reshape' cannot infer -1: f32[N,3] has 3*N elements, not a multiple of 2");
	BAD(INF("reshape", "f32[B,T]", 1, ALD("shape", "T,T")),
	    "'reshape' from f32[B,T] to f32[T,T] changes the element count (B*T vs T*T)");
	BAD(INF("reshape", "f32[B]", 1, ALD("shape", "B+1")),
	    "attribute 'shape' of 'reshape' must be a list of dims (ints, or strings naming symbolic dims such as \"B\" or \"8*B*T\")");
	BAD(INF("reshape", "f32[4,N]", 1, AL("shape", 0, 0, 1, -2)), "'reshape' shape[3] = -2 is negative");
	BAD(INF("reshape", "f32[2]", 1, AL("shape", 1, 0)), "'reshape' shape[1] = 0 copies a dim f32[2] does not have");
	BAD(INF("reshape", "f32[2]", 1), "'reshape' needs attribute 'shape'");
	OK(INF("broadcast_to", "f32[3,1]", 1, AL("shape", 2, 3, 4)), "f32[2,3,4]");
	OK(INF("broadcast_to", "f32[]", 1, AL("shape", 5)), "f32[5]");
	BAD(INF("broadcast_to", "f32[3]", 1, AL("shape", 4)), "'broadcast_to' cannot broadcast f32[3] to f32[4]");
	BAD(INF("broadcast_to", "f32[2,3]", 1, AL("shape", 3)), "'broadcast_to' cannot broadcast f32[2,3] to f32[3]");
	BAD(INF("broadcast_to", "f32[N]", 1, AL("shape", 4)), "'broadcast_to' cannot broadcast f32[N] to f32[4]");
	OK(INF("broadcast_to", "f32[1,T]", 1, ALD("shape", "B,T")), "f32[B,T]");
	BAD(INF("broadcast_to", "f32[2]", 1, ALD("shape", "B,T")), "'broadcast_to' cannot broadcast f32[2] to f32[B,T]");
}

static void test_concat_slice_split(void **st)
{
	OK(INF("concat", "f32[2,3] f32[5,3]", 1, AI("axis", 0)), "f32[7,3]");
	OK(INF("concat", "f32[N,3] f32[N,1] f32[N,0]", 1, AI("axis", -1)), "f32[N,4]");
	OK(INF("concat", "f32[N,3]", 1, AI("axis", 0)), "f32[N,3]");
	BAD(INF("concat", "f32[2,3] f32[2,4]", 1, AI("axis", 0)),
	    "'concat' operand 1 has type f32[2,4], which does not match f32[2,3] outside axis 0");
	BAD(INF("concat", "f32[N,3] f32[2,3]", 1, AI("axis", 0)), "'concat' cannot join along symbolic dim N (operand 0)");
	BAD(INF("concat", "f32[2] f16[2]", 1, AI("axis", 0)), "'concat' operand dtypes differ: f32 and f16");
	BAD(INF("concat", "f32[2] f32[2]", 1), "'concat' needs attribute 'axis'");
	BAD(INF("concat", "f32[] f32[]", 1, AI("axis", 0)), "'concat' operands must have rank >= 1");

	OK(INF("slice", "f32[10,8]", 1, AL("starts", 2), AL("ends", 7)), "f32[5,8]");
	OK(INF("slice", "f32[10,8]", 1, AL("starts", 0, 1), AL("ends", -1, 1000), AL("axes", 1, 0), AL("steps", 2, 1)),
	   "f32[9,4]");
	OK(INF("slice", "f32[10]", 1, AL("starts", -3), AL("ends", INT64_MAX)), "f32[3]");
	OK(INF("slice", "f32[10]", 1, AL("starts", -1), AL("ends", INT64_MIN), AL("steps", -1)), "f32[10]");
	OK(INF("slice", "f32[10]", 1, AL("starts", 8), AL("ends", 2), AL("steps", -3)), "f32[2]");
	OK(INF("slice", "f32[10]", 1, AL("starts", 20), AL("ends", 30)), "f32[0]");
	OK(INF("slice", "f32[10]", 1, AL("starts", 1), AL("ends", INT64_MAX), AL("steps", INT64_MAX)), "f32[1]");
	OK(INF("slice", "f32[10]", 1, AL("starts", INT64_MAX), AL("ends", INT64_MIN), AL("steps", INT64_MIN)), "f32[1]");
	OK(INF("slice", "f32[0]", 1, AL("starts", 0), AL("ends", -1), AL("steps", -1)), "f32[0]");
	OK(INF("slice", "f32[10]", 1, AL("starts", 5), AL("ends", 2)), "f32[0]");
	OK(INF("slice", "f32[N,6]", 1, AL("starts", 1), AL("ends", 3), AL("axes", -1)), "f32[N,2]");
	OK(INF("slice", "f32[N,6]", 1, AL("starts", 0), AL("ends", INT64_MAX), AL("axes", 0)), "f32[N,6]");
	BAD(INF("slice", "f32[N,6]", 1, AL("starts", 1), AL("ends", INT64_MAX)),
	    "'slice' cannot slice symbolic dim N (axis 0) but whole or by a static count from one end");
	BAD(INF("slice", "f32[N,6]", 1, AL("starts", 1), AL("ends", -1)),
	    "'slice' cannot slice symbolic dim N (axis 0) but whole or by a static count from one end");
	OK(INF("slice", "f32[N,6]", 1, AL("starts", 1), AL("ends", 4)), "f32[3,6]");
	OK(INF("slice", "f32[N,6]", 1, AL("starts", -1), AL("ends", INT64_MAX)), "f32[1,6]");
	OK(INF("slice", "f32[N,6]", 1, AL("starts", -5), AL("ends", -1), AL("steps", 2)), "f32[2,6]");
	BAD(INF("slice", "f32[10]", 1, AL("starts", 1), AL("ends", 5), AL("steps", 0)), "'slice' step for axis 0 is 0");
	BAD(INF("slice", "f32[10,8]", 1, AL("starts", 1, 1), AL("ends", 5, 5), AL("axes", 0, -2)),
	    "'slice' axis 0 appears twice");
	BAD(INF("slice", "f32[10,8]", 1, AL("starts", 1, 1), AL("ends", 5)), "'slice' ends has 1 entries but starts has 2");
	BAD(INF("slice", "f32[10]", 1, AL("starts", 1)), "'slice' needs attribute 'ends'");
	/* a symbolic end (x[:, :T] of a longer buffer) from 0 with step 1 */
	OK(INF("slice", "f32[1,64,64]", 1, AL("starts", 0, 0), ALD("ends", "T,T"), AL("axes", 1, 2)), "f32[1,T,T]");
	OK(INF("slice", "f32[T,4]", 1, AL("starts", 0), ALD("ends", "T")), "f32[T,4]");
	BAD(INF("slice", "f32[64]", 1, AL("starts", 1), ALD("ends", "T")),
	    "'slice' with symbolic end T (axis 0) must start at 0 with step 1");

	int k = INF("split", "f32[6,4]", 3);
	assert_int_equal(k, 3);
	for (int i = 0; i < 3; i++)
		assert_string_equal(ts(&OUT[i]), "f32[2,4]");
	k = INF("split", "f32[N,5]", 2, AI("axis", -1), AL("sizes", 2, 3));
	assert_int_equal(k, 2);
	assert_string_equal(ts(&OUT[0]), "f32[N,2]");
	assert_string_equal(ts(&OUT[1]), "f32[N,3]");
	k = INF("split", "f32[0,4]", 2);
	assert_int_equal(k, 2);
	assert_string_equal(ts(&OUT[1]), "f32[0,4]");
	OK(INF("split", "f32[N]", 1), "f32[N]");
	BAD(INF("split", "f32[5,4]", 2), "'split' of f32[5,4] into 2 equal parts: dim 5 (axis 0) does not divide");
	BAD(INF("split", "f32[5]", 2, AL("sizes", 2, 2)), "'split' sizes sum to 4, but dim 0 of f32[5] is 5");
	BAD(INF("split", "f32[5]", 2, AL("sizes", 5)), "'split' has 2 results but 1 sizes");
	BAD(INF("split", "f32[5]", 2, AL("sizes", 6, -1)), "'split' size 1 is negative (-1)");
	BAD(INF("split", "f32[5]", 2, AL("sizes", INT64_MAX, 5)), "'split' sizes overflow");
	BAD(INF("split", "f32[N]", 2), "'split' cannot split symbolic dim N (axis 0)");
	BAD(INF("split", "f32[4]", 0), "'split' needs at least one result");
	BAD(INF("split", "f32[4]", 1, AI("axis", 1)), "'split' axis 1 is out of range for f32[4] (rank 1)");
}

/* ---- const and fusion ------------------------------------------------------- */

static int infer_const(const char *type, uint8_t kind, uint64_t n, double *f, int64_t *iv)
{
	kf_tid t = tid(type);
	LAST = kf_node_new(G, 0, KF_NONE, KF_OP_CONST, NULL, 0, &t, 1);
	kf_const *k = kf_alloc(&G->arena, sizeof *k);
	k->kind = kind;
	k->n = n;
	k->f = f;
	k->i = iv;
	if (kind == KF_CONST_FILE)
		k->path = kf_intern_cstr(C, "w.npy");
	G->node[LAST].cst = k;
	ERR[0] = 0;
	return kf_infer(G, LAST, OUT, 16, ERR, sizeof ERR);
}

/* A list of floats for resize's scales. */
static kf_attr ALF(const char *k, int n, const double *v)
{
	static kf_attrval pool[16];
	for (int i = 0; i < n; i++)
		pool[i] = (kf_attrval){.kind = KF_ATTR_FLOAT, .f = v[i]};
	return (kf_attr){kf_intern_cstr(C, k), {.kind = KF_ATTR_LIST, .n = (uint32_t)n, .list = pool}};
}

static void test_index_ops(void **st)
{
	OK(INF("gather", "f32[10,4] i64[2,3]", 1), "f32[2,3,4]");
	OK(INF("gather", "f32[B,10,4] i32[]", 1, AI("axis", 1)), "f32[B,4]");
	OK(INF("gather", "f16[5,6,7] i64[T]", 1, AI("axis", -1)), "f16[5,6,T]");
	BAD(INF("gather", "f32[10,4] f32[3]", 1), "'gather' indices must be i32 or i64, got f32");
	BAD(INF("gather", "f32[10,4] i64[3]", 1, AI("axis", 2)), "'gather' axis 2 is out of range for f32[10,4] (rank 2)");
	BAD(INF("gather", "f32[] i64[3]", 1), "'gather' data must have rank >= 1");
	BAD(INF("gather", "f32[2,2,2,2,2] i64[2,2,2,2,2]", 1), "'gather' result rank 9 is over 8");
	OK(INF("pad", "f32[4,6]", 1, AL("pads", 1, 2, 2, 1)), "f32[7,9]");
	OK(INF("pad", "f32[B,6]", 1, AL("pads", 0, -1, 0, -2), AS("mode", "edge")), "f32[B,3]");
	BAD(INF("pad", "f32[4,6]", 1, AL("pads", 1, 2)), "'pad' pads has 2 entries for f32[4,6] (rank 2: 4 wanted)");
	BAD(INF("pad", "f32[B,6]", 1, AL("pads", 1, 0, 0, 0)), "'pad' cannot pad symbolic dim B (axis 0)");
	BAD(INF("pad", "f32[4,6]", 1, AL("pads", 0, -4, 0, -3)),
	    "'pad' of f32[4,6] by -4 and -3 on axis 1 leaves -1 elements");
	BAD(INF("pad", "f32[4]", 1, AL("pads", 1, 1), AS("mode", "mirror")),
	    "'pad' mode must be \"constant\", \"reflect\", \"edge\" or \"wrap\", got \"mirror\"");
	BAD(INF("pad", "f32[0]", 1, AL("pads", 1, 1), AS("mode", "reflect")),
	    "'pad' mode \"reflect\" cannot pad the empty axis 0");
	BAD(INF("pad", "f32[4]", 1), "'pad' needs attribute 'pads'");
	OK(INF("resize", "f32[1,3,4,5]", 1, ALF("scales", 4, (double[]){1, 1, 2, 1.5})), "f32[1,3,8,7]");
	OK(INF("resize", "f32[B,3,4,5]", 1, ALF("scales", 4, (double[]){1, 1, 0.5, 2}), ALD("sizes", "B,3,2,10"),
	       AS("mode", "linear")), "f32[B,3,2,10]");
	BAD(INF("resize", "f32[B,4]", 1, ALF("scales", 2, (double[]){2, 1})),
	    "'resize' can only keep symbolic dim B (axis 0): scale 1");
	BAD(INF("resize", "i64[4]", 1, ALF("scales", 1, (double[]){2}), AS("mode", "linear")),
	    "'resize' linear mode takes a float operand, got i64");
	OK(INF("resize", "f32[4]", 1, ALF("scales", 1, (double[]){2}), AS("mode", "cubic")), "f32[8]");
	BAD(INF("resize", "i32[4]", 1, ALF("scales", 1, (double[]){2}), AS("mode", "cubic")),
	    "'resize' cubic mode takes a float operand, got i32");
	BAD(INF("resize", "f32[4]", 1, ALF("scales", 1, (double[]){2}), AS("mode", "area")),
	    "'resize' mode must be \"nearest\", \"linear\" or \"cubic\", got \"area\"");
	BAD(INF("resize", "f32[4,4]", 1, ALF("scales", 1, (double[]){2})), "'resize' scales has 1 entries for rank 2");
	BAD(INF("resize", "f32[4]", 1, ALF("scales", 1, (double[]){-2})), "'resize' scale -2 (axis 0) must be positive and finite");
	OK(INF("iota", "", 1, ALD("shape", "T,4"), AI("axis", 1)), "i64[T,4]");
	OK(INF("iota", "", 1, AL("shape", 3), AS("dtype", "f32")), "f32[3]");
	BAD(INF("iota", "", 1, AL("shape", 3), AS("dtype", "i1")), "'iota' dtype must be a numeric dtype, got \"i1\"");
	BAD(INF("iota", "", 1, AL("shape", 3), AI("axis", 1)), "'iota' axis 1 is out of range for rank 1");
	BAD(INF("iota", "", 1, AL("shape", -3)), "'iota' shape[0] = -3 is negative");
	OK(INF("shape", "f32[B,3,T]", 1), "i64[3]");
	OK(INF("shape", "f32[B,3,T]", 1, AI("start", -2)), "i64[2]");
	OK(INF("shape", "f32[B,3,T]", 1, AI("start", 2), AI("end", 1)), "i64[0]");
	OK(INF("sin", "f32[2,N]", 1), "f32[2,N]");
	BAD(INF("cos", "i32[2]", 1), "'cos' takes float operands, got i32");
}

static void test_const(void **st)
{
	double f[4] = {1, 2, 3, 4};
	int64_t iv[3] = {0, 1, 300};
	OK(infer_const("f32[]", KF_CONST_SCALAR, 1, f, NULL), "f32[]");
	OK(infer_const("f32[4]", KF_CONST_SCALAR, 1, f, NULL), "f32[4]");
	OK(infer_const("f32[N,4]", KF_CONST_DENSE, 1, f, NULL), "f32[N,4]");
	OK(infer_const("f32[2,2]", KF_CONST_DENSE, 4, f, NULL), "f32[2,2]");
	OK(infer_const("i1[2]", KF_CONST_DENSE, 2, NULL, iv), "i1[2]");
	OK(infer_const("i32[3]", KF_CONST_DENSE, 3, NULL, iv), "i32[3]");
	OK(infer_const("f32[0]", KF_CONST_DENSE, 0, NULL, NULL), "f32[0]");
	OK(infer_const("f32[784,256]", KF_CONST_FILE, 0, NULL, NULL), "f32[784,256]");
	BAD(infer_const("f32[5]", KF_CONST_DENSE, 4, f, NULL), "'const' f32[5] has 4 values, expected 5 (or 1 to splat)");
	BAD(infer_const("f32[N]", KF_CONST_DENSE, 4, f, NULL), "'const' f32[N]: a dense constant needs a static shape");
	BAD(infer_const("f32[2]", KF_CONST_DENSE, 2, NULL, iv), "'const' f32[2] holds integer values for a float dtype");
	BAD(infer_const("i64[2]", KF_CONST_DENSE, 2, f, NULL), "'const' i64[2] holds float values for an integer dtype");
	BAD(infer_const("i8[3]", KF_CONST_DENSE, 3, NULL, iv), "'const' i8[3]: value 300 does not fit i8");
	BAD(infer_const("i1[3]", KF_CONST_DENSE, 3, NULL, iv), "'const' i1[3]: value 300 does not fit i1");
	kf_tid t = tid("f32[]");
	LAST = kf_node_new(G, 0, KF_NONE, KF_OP_CONST, NULL, 0, &t, 1);
	BAD(kf_infer(G, LAST, OUT, 16, ERR, sizeof ERR), "'const' f32[] has no value");
}

/* %r:2 = fusion @k(a, b) { ^(p0, p1): t = add(p0, p1); u = neg(t); yield t, u } */
static kf_nid make_fusion(const char *ta, const char *tb, const char *targ1)
{
	kf_vid in[2] = {kf_block_add_arg(G, 0, tid(ta), 0), kf_block_add_arg(G, 0, tid(tb), 0)};
	kf_tid rt[2] = {tid("f32[]"), tid("f32[]")};
	kf_nid f = kf_node_new(G, 0, KF_NONE, KF_OP_FUSION, in, 2, rt, 2);
	kf_bid b = kf_block_new(G, f);
	G->node[f].body = b;
	kf_vid p[2] = {kf_block_add_arg(G, b, tid(ta), 0), kf_block_add_arg(G, b, tid(targ1), 0)};
	kf_tid t = tid(ta);
	kf_nid add = kf_node_new(G, b, KF_NONE, KF_OP_ADD, p, 2, &t, 1);
	kf_vid y[2] = {kf_res(G, add, 0), 0};
	kf_nid neg = kf_node_new(G, b, KF_NONE, KF_OP_NEG, y, 1, &t, 1);
	y[1] = kf_res(G, neg, 0);
	kf_node_new(G, b, KF_NONE, KF_OP_YIELD, y, 2, NULL, 0);
	return f;
}

static void test_fusion(void **st)
{
	kf_nid f = make_fusion("f32[4,N]", "f32[N]", "f32[N]");
	assert_int_equal(kf_infer(G, f, OUT, 16, ERR, sizeof ERR), 2);
	assert_string_equal(ts(&OUT[0]), "f32[4,N]");
	assert_string_equal(ts(&OUT[1]), "f32[4,N]");
	assert_int_equal(kf_infer(G, f, OUT, 1, ERR, sizeof ERR), -1);
	assert_string_equal(ERR, "'fusion' body yields 2 values, room for 1");
	f = make_fusion("f32[4]", "f32[4]", "f32[1]");
	BAD(kf_infer(G, f, OUT, 16, ERR, sizeof ERR),
	    "'fusion' body argument 1 has type f32[1], but operand 1 has type f32[4]");
	/* drop the yield: the body no longer ends properly */
	f = make_fusion("f32[4]", "f32[4]", "f32[4]");
	kf_node_erase(G, G->blk[G->node[f].body].last);
	BAD(kf_infer(G, f, OUT, 16, ERR, sizeof ERR), "'fusion' body does not end with 'yield'");
	kf_vid x = kf_block_add_arg(G, 0, tid("f32[4]"), 0);
	kf_tid rt = tid("f32[4]");
	f = kf_node_new(G, 0, KF_NONE, KF_OP_FUSION, &x, 1, &rt, 1);
	BAD(kf_infer(G, f, OUT, 16, ERR, sizeof ERR), "'fusion' has no body");
	kf_attr kind = AI("kind", 1);
	kf_node_set_attrs(G, f, &kind, 1);
	BAD(kf_infer(G, f, OUT, 16, ERR, sizeof ERR), "attribute 'kind' of 'fusion' must be a string, got an int");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_registry, setup, teardown),
		cmocka_unit_test_setup_teardown(test_generic_checks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_elementwise, setup, teardown),
		cmocka_unit_test_setup_teardown(test_broadcast, setup, teardown),
		cmocka_unit_test_setup_teardown(test_compare_logic_where, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reduce, setup, teardown),
		cmocka_unit_test_setup_teardown(test_softmax_layer_norm, setup, teardown),
		cmocka_unit_test_setup_teardown(test_matmul, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gemm, setup, teardown),
		cmocka_unit_test_setup_teardown(test_transpose_reshape, setup, teardown),
		cmocka_unit_test_setup_teardown(test_concat_slice_split, setup, teardown),
		cmocka_unit_test_setup_teardown(test_index_ops, setup, teardown),
		cmocka_unit_test_setup_teardown(test_const, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fusion, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
