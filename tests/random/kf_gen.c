/* kf_gen.c: random graphs for the middle end's differential tests (see
 * kf_gen.h).  Each op is drawn, then its operands: 3 in 4 from the 16
 * newest values (as in models, where most edges are short), 1 in 4 from
 * any value so far (residuals, shared inputs, long-range edges); a partner
 * that must have a given type (a broadcast operand, a matmul's weight, a
 * concat's other part) is looked for among the values, else made as a
 * constant or a graph input.  Shapes stay small (max_numel elements) so
 * that the interpreter runs thousands of nodes in milliseconds. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "kf_gen.h"

#define MAXIN 12 /* graph inputs at most; constants after that */

uint32_t kf_gen_pick(kf_gen_src *s, uint32_t n)
{
	if (n <= 1)
		return 0;
	uint64_t r;
	if (s->p && s->n) {
		/* one byte for small choices, two otherwise */
		r = *s->p++;
		s->n--;
		if (n > 256 && s->n) {
			r = r << 8 | *s->p++;
			s->n--;
		}
	} else if (s->bytes_only) {
		r = 0;
	} else {
		uint64_t z = (s->rng += 0x9e3779b97f4a7c15ULL);
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
		r = z ^ (z >> 31);
	}
	return (uint32_t)(r % n);
}

typedef struct gen {
	kf_ctx *c;
	kf_graph *g;
	kf_gen_src *s;
	int64_t max_numel;
	kf_vid *pool;
	uint32_t npool, cap;
	uint32_t nin;
	bool uneven;
} gen;

static uint32_t pick(gen *G, uint32_t n) { return kf_gen_pick(G->s, n); }
static bool chance(gen *G, uint32_t num, uint32_t den) { return pick(G, den) < num; }

static const kf_type *vt(gen *G, kf_vid v) { return kf_vtype(G->g, v); }

static void push(gen *G, kf_vid v)
{
	if (G->npool == G->cap) {
		G->cap = G->cap ? 2 * G->cap : 256;
		G->pool = realloc(G->pool, G->cap * sizeof *G->pool);
		if (!G->pool)
			abort();
	}
	G->pool[G->npool++] = v;
}

/* ---- attributes ------------------------------------------------------------ */

static kf_attr a_int(gen *G, const char *k, int64_t v)
{
	return (kf_attr){kf_intern_cstr(G->c, k), {.kind = KF_ATTR_INT, .i = v}};
}

static kf_attr a_float(gen *G, const char *k, double v)
{
	return (kf_attr){kf_intern_cstr(G->c, k), {.kind = KF_ATTR_FLOAT, .f = v}};
}

static kf_attr a_bool(gen *G, const char *k, bool v)
{
	return (kf_attr){kf_intern_cstr(G->c, k), {.kind = KF_ATTR_BOOL, .b = v}};
}

static kf_attr a_str(gen *G, const char *k, const char *v)
{
	return (kf_attr){kf_intern_cstr(G->c, k), {.kind = KF_ATTR_STR, .s = kf_intern_cstr(G->c, v)}};
}

/* A list attribute; items live in the graph's arena (kf_node_set_attrs copies). */
static kf_attr a_ints(gen *G, const char *k, const int64_t *v, int n)
{
	kf_attrval *items = kf_alloc(&G->g->arena, (size_t)(n + 1) * sizeof *items);
	for (int i = 0; i < n; i++)
		items[i] = (kf_attrval){.kind = KF_ATTR_INT, .i = v[i]};
	return (kf_attr){kf_intern_cstr(G->c, k), {.kind = KF_ATTR_LIST, .n = (uint32_t)n, .list = items}};
}

/* ---- nodes ------------------------------------------------------------------ */

/* A node of op over in[] with nres results typed by inference; its results
 * join the pool.  KF_NONE (and no node) when the types do not infer. */
static kf_vid add(gen *G, int op, const kf_vid *in, uint32_t nin, const kf_attr *a, uint32_t na, uint32_t nres)
{
	kf_graph *g = G->g;
	kf_tid t0[8];
	for (uint32_t i = 0; i < nres; i++)
		t0[i] = kf_V(g, in[0])->type;
	kf_nid n = kf_node_new(g, 0, KF_NONE, op, in, nin, t0, nres);
	if (na)
		kf_node_set_attrs(g, n, a, na);
	kf_type out[8];
	char err[256];
	int k = kf_infer(g, n, out, 8, err, sizeof err);
	if (k != (int)nres) {
		kf_node_erase(g, n);
		return KF_NONE;
	}
	for (uint32_t i = 0; i < nres; i++) {
		if (!kf_type_is_static(&out[i]) || kf_type_numel(&out[i]) > 4 * G->max_numel) {
			kf_node_erase(g, n);
			return KF_NONE;
		}
	}
	for (uint32_t i = 0; i < nres; i++) {
		kf_V(g, kf_res(g, n, i))->type = kf_type_intern(G->c, &out[i]);
		push(G, kf_res(g, n, i));
	}
	return kf_res(g, n, 0);
}

/* ---- constants ---------------------------------------------------------------- */

/* Values exact in each float dtype: the edges of its range first.  Not
 * -0.0: the sign of a zero is the one IEEE distinction kfuse does not keep
 * (passes/canonicalize.c), and through a division it turns inf into -inf. */
static const double sp_f32[] = {INFINITY, -INFINITY, NAN, 0x1p-149, 0x1.fffffcp-127,
				0x1.fffffep127, -0x1.fffffep127, 0x1p-126, 1e-7f, 0.5, 2.0, 1.0, -1.0, 0.0, 100.0};
static const double sp_f16[] = {INFINITY, -INFINITY, NAN, 65504.0, -65504.0, 0x1p-24, 0x1p-14,
				0.5, 2.0, 1.0, -1.0, 0.0, 0.125};
static const double sp_bf16[] = {INFINITY, -INFINITY, NAN, 0x1.fep127, -0x1.fep127, 0x1p-133,
				 0x1p-126, 0.5, 2.0, 1.0, -1.0, 0.0, 3.0};
static const double sp_f64[] = {INFINITY, -INFINITY, NAN, 0x1.fffffffffffffp1023, 0x0.0000000000001p-1022,
				0x1p-1022, 1e-300, 0.5, 2.0, 1.0, -1.0, 0.0, 1e300};
static const int64_t sp_i32[] = {INT32_MAX, INT32_MIN, -1, 0, 1, 2, 7, -8};
static const int64_t sp_i64[] = {INT64_MAX, INT64_MIN, (int64_t)INT32_MAX + 1, -1, 0, 1, 3, -5};
static const int64_t sp_i8[] = {127, -128, -1, 0, 1, 2, 5, -3};

#define NA(a) (sizeof(a) / sizeof((a)[0]))

static double special_float(gen *G, kf_dtype dt)
{
	switch (dt) {
	case KF_F16: return sp_f16[pick(G, NA(sp_f16))];
	case KF_BF16: return sp_bf16[pick(G, NA(sp_bf16))];
	case KF_F64: return sp_f64[pick(G, NA(sp_f64))];
	default: return sp_f32[pick(G, NA(sp_f32))];
	}
}

static int64_t special_int(gen *G, kf_dtype dt)
{
	switch (dt) {
	case KF_I1: return pick(G, 2);
	case KF_I8: return sp_i8[pick(G, NA(sp_i8))];
	case KF_I64: return sp_i64[pick(G, NA(sp_i64))];
	default: return sp_i32[pick(G, NA(sp_i32))];
	}
}

/* An ordinary value: a multiple of 1/8 in [-4, 4], exact in every float dtype. */
static double plain_float(gen *G) { return ((double)pick(G, 65) - 32.0) / 8.0; }

/* A constant of type t: a splat (special or plain) or a dense tensor of
 * plain values with a special one now and then. */
static kf_vid add_const(gen *G, const kf_type *t, bool special)
{
	kf_graph *g = G->g;
	kf_tid tid = kf_type_intern(G->c, t);
	kf_nid n = kf_node_new(g, 0, KF_NONE, KF_OP_CONST, NULL, 0, &tid, 1);
	kf_const *k = kf_alloc(&g->arena, sizeof *k);
	int64_t numel = kf_type_numel(t);
	bool fl = kf_dtype_is_float((kf_dtype)t->dtype);
	bool splat = numel <= 1 || special || chance(G, 1, 2);
	k->kind = splat && t->rank == 0 ? KF_CONST_SCALAR : KF_CONST_DENSE;
	k->n = splat ? 1 : (uint64_t)numel;
	if (fl)
		k->f = kf_alloc(&g->arena, k->n * sizeof *k->f);
	else
		k->i = kf_alloc(&g->arena, k->n * sizeof *k->i);
	for (uint64_t i = 0; i < k->n; i++) {
		bool sp = special || chance(G, 1, 16);
		if (fl)
			k->f[i] = sp ? special_float(G, (kf_dtype)t->dtype) : plain_float(G);
		else if (t->dtype == KF_I1)
			k->i[i] = pick(G, 2);
		else
			k->i[i] = sp ? special_int(G, (kf_dtype)t->dtype) : (int64_t)pick(G, 17) - 8;
	}
	kf_N(g, n)->cst = k;
	kf_vid v = kf_res(g, n, 0);
	push(G, v);
	return v;
}

/* A graph input of type t while there are few, else a constant. */
static kf_vid add_input(gen *G, const kf_type *t)
{
	if (G->nin >= MAXIN)
		return add_const(G, t, false);
	char name[16];
	snprintf(name, sizeof name, "in%u", G->nin++);
	kf_vid v = kf_block_add_arg(G->g, 0, kf_type_intern(G->c, t), kf_intern_cstr(G->c, name));
	push(G, v);
	return v;
}

/* A value of exactly type t: one from the pool, else a constant (small
 * ones usually), else an input. */
static kf_vid value_of(gen *G, const kf_type *t)
{
	for (int tries = 0; tries < 12 && G->npool; tries++) {
		uint32_t i = chance(G, 3, 4) ? G->npool - 1 - pick(G, G->npool < 16 ? G->npool : 16)
					     : pick(G, G->npool);
		if (kf_type_equal(vt(G, G->pool[i]), t))
			return G->pool[i];
	}
	if (kf_type_numel(t) <= 64 ? chance(G, 3, 4) : chance(G, 1, 3))
		return add_const(G, t, false);
	return add_input(G, t);
}

/* ---- operand choice ------------------------------------------------------------ */

typedef bool (*want_fn)(const kf_type *t);

static bool any_numeric(const kf_type *t) { return t->dtype != KF_I1; }
static bool any_float(const kf_type *t) { return kf_dtype_is_float((kf_dtype)t->dtype); }
static bool ranked_float(const kf_type *t) { return any_float(t) && t->rank >= 1; }
static bool float_2d(const kf_type *t) { return any_float(t) && t->rank == 2; }
static bool matrix(const kf_type *t) { return any_float(t) && t->rank >= 2; }
static bool is_bool(const kf_type *t) { return t->dtype == KF_I1; }
static bool ranked(const kf_type *t) { return t->rank >= 1; }
static bool anything(const kf_type *t) { (void)t; return true; }

/* A value of the pool that w accepts, or KF_NONE: mostly one that nothing
 * reads yet (so that most of the graph reaches a result, as in a model,
 * instead of dying off), else as value_of draws. */
static kf_vid choose(gen *G, want_fn w)
{
	if (chance(G, 4, 5))
		for (int tries = 0; tries < 16 && G->npool; tries++) {
			uint32_t i = G->npool - 1 - pick(G, G->npool < 64 ? G->npool : 64);
			kf_vid v = G->pool[i];
			if (!kf_has_uses(G->g, v) && w(vt(G, v)))
				return v;
		}
	for (int tries = 0; tries < 16 && G->npool; tries++) {
		uint32_t i = chance(G, 3, 4) ? G->npool - 1 - pick(G, G->npool < 16 ? G->npool : 16)
					     : pick(G, G->npool);
		if (w(vt(G, G->pool[i])))
			return G->pool[i];
	}
	return KF_NONE;
}

/* A random shape of at most max_numel elements. */
static kf_type rand_type(gen *G, kf_dtype dt)
{
	static const int64_t dims[] = {1, 2, 3, 4, 5, 6, 8, 16};
	kf_type t = {.dtype = (uint8_t)dt, .rank = (uint8_t)(1 + pick(G, 4))};
	int64_t n = 1;
	for (int d = 0; d < t.rank; d++) {
		int64_t x = dims[pick(G, NA(dims))];
		while (n * x > G->max_numel)
			x = 1;
		t.dim[d] = x;
		n *= x;
	}
	return t;
}

static kf_dtype rand_dtype(gen *G)
{
	static const kf_dtype d[] = {KF_F32, KF_F32, KF_F32, KF_F32, KF_F16, KF_BF16, KF_F64, KF_I32, KF_I64};
	return d[pick(G, NA(d))];
}

/* A type t broadcasts with: some dims of t set to 1, leading dims dropped. */
static kf_type bcast_partner(gen *G, const kf_type *t)
{
	kf_type p = *t;
	int drop = t->rank ? (int)pick(G, (uint32_t)t->rank + 1) : 0;
	p.rank = (uint8_t)(t->rank - drop);
	for (int d = 0; d < p.rank; d++) {
		p.dim[d] = t->dim[d + drop];
		if (chance(G, 1, 3))
			p.dim[d] = 1;
	}
	return p;
}

/* ---- ops ---------------------------------------------------------------------- */

static const int unary_f[] = {KF_OP_NEG, KF_OP_ABS, KF_OP_EXP, KF_OP_LOG, KF_OP_SQRT, KF_OP_RSQRT,
			      KF_OP_TANH, KF_OP_SIGMOID, KF_OP_RELU, KF_OP_GELU, KF_OP_ERF, KF_OP_SILU};
static const int unary_i[] = {KF_OP_NEG, KF_OP_ABS, KF_OP_RELU};
static const int binary[] = {KF_OP_ADD, KF_OP_SUB, KF_OP_MUL, KF_OP_DIV, KF_OP_POW, KF_OP_MAX, KF_OP_MIN};
static const int compare[] = {KF_OP_EQ, KF_OP_NE, KF_OP_LT, KF_OP_LE, KF_OP_GT, KF_OP_GE};
static const int reduce[] = {KF_OP_REDUCE_SUM, KF_OP_REDUCE_MEAN, KF_OP_REDUCE_MAX, KF_OP_REDUCE_MIN};

static kf_vid gen_unary(gen *G)
{
	kf_vid x = choose(G, any_numeric);
	if (x == KF_NONE)
		return KF_NONE;
	if (!any_float(vt(G, x)))
		return add(G, unary_i[pick(G, NA(unary_i))], &x, 1, NULL, 0, 1);
	int op = unary_f[pick(G, NA(unary_f))];
	kf_attr a = a_str(G, "approximate", chance(G, 1, 2) ? "tanh" : "none");
	return add(G, op, &x, 1, &a, op == KF_OP_GELU, 1);
}

/* The other operand of a binary op on x: the same type, a broadcast
 * partner, a scalar (often a special value) or a value x broadcasts into. */
static kf_vid partner(gen *G, kf_vid x)
{
	const kf_type tt = *vt(G, x), *t = &tt; /* a copy: interning moves the table */
	kf_type p = *t;
	switch (pick(G, 10)) {
	case 0: case 1: case 2: case 3:
		return value_of(G, t);
	case 4: case 5: case 6:
		p = bcast_partner(G, t);
		return value_of(G, &p);
	case 7: case 8:
		p.rank = 0;
		return add_const(G, &p, chance(G, 2, 3));
	default:
		/* x into a larger shape: a leading dim more */
		if (t->rank >= 4 || kf_type_numel(t) * 4 > G->max_numel)
			return value_of(G, t);
		p.rank = (uint8_t)(t->rank + 1);
		p.dim[0] = 2 + pick(G, 3);
		for (int d = 0; d < t->rank; d++)
			p.dim[d + 1] = t->dim[d];
		return value_of(G, &p);
	}
}

static kf_vid gen_binary(gen *G, const int *ops, uint32_t nops)
{
	kf_vid x = choose(G, any_numeric);
	if (x == KF_NONE)
		return KF_NONE;
	kf_vid y = partner(G, x), in[2] = {x, y};
	if (chance(G, 1, 2)) {
		in[0] = y;
		in[1] = x;
	}
	return add(G, ops[pick(G, nops)], in, 2, NULL, 0, 1);
}

static kf_vid gen_logic(gen *G)
{
	kf_vid x = choose(G, is_bool);
	if (x == KF_NONE)
		return KF_NONE;
	if (chance(G, 1, 3))
		return add(G, KF_OP_NOT, &x, 1, NULL, 0, 1);
	kf_vid in[2] = {x, partner(G, x)};
	return add(G, chance(G, 1, 2) ? KF_OP_AND : KF_OP_OR, in, 2, NULL, 0, 1);
}

static kf_vid gen_where(gen *G)
{
	kf_vid c = choose(G, is_bool);
	if (c == KF_NONE)
		return KF_NONE;
	kf_type t = *vt(G, c);
	t.dtype = (uint8_t)rand_dtype(G);
	kf_type ta = chance(G, 1, 2) ? t : bcast_partner(G, &t), tb = chance(G, 1, 2) ? t : bcast_partner(G, &t);
	/* a masked fill: where(mask, x, -inf) */
	kf_vid in[3] = {c, value_of(G, &ta), KF_NONE};
	if (chance(G, 1, 3)) {
		tb.rank = 0;
		in[2] = add_const(G, &tb, true);
	} else {
		in[2] = value_of(G, &tb);
	}
	return add(G, KF_OP_WHERE, in, 3, NULL, 0, 1);
}

static kf_vid gen_cast(gen *G)
{
	kf_vid x = choose(G, anything);
	if (x == KF_NONE)
		return KF_NONE;
	static const char *const to[] = {"f32", "f16", "bf16", "f64", "i32", "i64", "i8", "i1"};
	kf_attr a = a_str(G, "to", to[pick(G, NA(to))]);
	return add(G, KF_OP_CAST, &x, 1, &a, 1, 1);
}

static kf_vid gen_reduce(gen *G)
{
	kf_vid x = choose(G, any_numeric);
	if (x == KF_NONE)
		return KF_NONE;
	int r = vt(G, x)->rank;
	int64_t ax[KF_MAX_RANK];
	int na = 0;
	if (r) {
		/* a trailing run (a row), one axis, or any subset */
		int how = (int)pick(G, 3), from = r - 1 - (int)pick(G, r > 1 ? 2 : 1), one = (int)pick(G, (uint32_t)r);
		for (int d = 0; d < r; d++) {
			bool on = how == 0 ? d >= from : how == 1 ? d == one : chance(G, 1, 2);
			if (on)
				ax[na++] = chance(G, 1, 4) ? d - r : d;
		}
		if (!na)
			ax[na++] = one;
	}
	kf_attr a[2];
	uint32_t k = 0;
	if (na && chance(G, 7, 8)) /* else every axis */
		a[k++] = a_ints(G, "axes", ax, na);
	a[k++] = a_bool(G, "keepdims", chance(G, 1, 2));
	return add(G, reduce[pick(G, NA(reduce))], &x, 1, a, k, 1);
}

static kf_vid gen_softmax(gen *G)
{
	kf_vid x = choose(G, ranked_float);
	if (x == KF_NONE)
		return KF_NONE;
	int r = vt(G, x)->rank;
	kf_attr a = a_int(G, "axis", chance(G, 1, 2) ? -1 : (int64_t)pick(G, (uint32_t)r));
	return add(G, chance(G, 1, 3) ? KF_OP_LOG_SOFTMAX : KF_OP_SOFTMAX, &x, 1, &a, 1, 1);
}

static kf_vid gen_layer_norm(gen *G)
{
	kf_vid x = choose(G, ranked_float);
	if (x == KF_NONE)
		return KF_NONE;
	const kf_type tt = *vt(G, x), *t = &tt; /* a copy: interning moves the table */
	int r = t->rank, axis = chance(G, 1, 2) ? r - 1 : (int)pick(G, (uint32_t)r);
	static const double eps[] = {1e-5, 1e-12, 0.1, 0.0};
	kf_attr a[2] = {a_int(G, "axis", chance(G, 1, 3) ? axis - r : axis), a_float(G, "epsilon", eps[pick(G, 4)])};
	kf_vid in[3] = {x};
	uint32_t nin = 1 + pick(G, 3);
	kf_type st = {.dtype = t->dtype, .rank = (uint8_t)(r - axis)};
	for (int d = axis; d < r; d++)
		st.dim[d - axis] = t->dim[d];
	for (uint32_t i = 1; i < nin; i++)
		in[i] = value_of(G, &st);
	return add(G, KF_OP_LAYER_NORM, in, nin, a, 2, 1);
}

static kf_vid gen_matmul(gen *G)
{
	static const int64_t dims[] = {1, 2, 3, 4, 8, 16};
	if (chance(G, 1, 4)) { /* gemm: 2-D, transposes, a bias */
		kf_vid x = choose(G, float_2d);
		if (x == KF_NONE)
			return KF_NONE;
		const kf_type tt = *vt(G, x), *t = &tt; /* a copy: interning moves the table */
		bool ta = chance(G, 1, 3), tb = chance(G, 1, 3);
		int64_t m = t->dim[ta ? 1 : 0], k = t->dim[ta ? 0 : 1], n = dims[pick(G, NA(dims))];
		kf_type wt = {.dtype = t->dtype, .rank = 2, .dim = {tb ? n : k, tb ? k : n}};
		kf_vid in[3] = {x, value_of(G, &wt)};
		uint32_t nin = 2;
		if (chance(G, 2, 3)) {
			kf_type ct = {.dtype = t->dtype, .rank = 2, .dim = {m, n}};
			ct = chance(G, 1, 2) ? ct : bcast_partner(G, &ct);
			in[nin++] = value_of(G, &ct);
		}
		kf_attr a[4] = {a_float(G, "alpha", chance(G, 1, 2) ? 1.0 : 0.5), a_float(G, "beta", chance(G, 1, 2) ? 1.0 : -2.0),
				a_bool(G, "trans_a", ta), a_bool(G, "trans_b", tb)};
		return add(G, KF_OP_GEMM, in, nin, a, 4, 1);
	}
	kf_vid x = choose(G, matrix);
	if (x == KF_NONE)
		return KF_NONE;
	const kf_type tt = *vt(G, x), *t = &tt; /* a copy: interning moves the table */
	int64_t k = t->dim[t->rank - 1], n = dims[pick(G, NA(dims))];
	/* the weight: 2-D (a linear layer) or with x's batch dims */
	kf_type wt = {.dtype = t->dtype, .rank = 2, .dim = {k, n}};
	if (chance(G, 1, 3)) {
		wt.rank = t->rank;
		for (int d = 0; d < t->rank - 2; d++)
			wt.dim[d] = chance(G, 1, 4) ? 1 : t->dim[d];
		wt.dim[t->rank - 2] = k;
		wt.dim[t->rank - 1] = n;
	}
	kf_vid in[2] = {x, value_of(G, &wt)};
	return add(G, KF_OP_MATMUL, in, 2, NULL, 0, 1);
}

static kf_vid gen_transpose(gen *G)
{
	kf_vid x = choose(G, ranked);
	if (x == KF_NONE)
		return KF_NONE;
	int r = vt(G, x)->rank;
	int64_t perm[KF_MAX_RANK];
	for (int d = 0; d < r; d++)
		perm[d] = d;
	for (int d = r - 1; d > 0; d--) {
		int j = (int)pick(G, (uint32_t)d + 1);
		int64_t tmp = perm[d];
		perm[d] = perm[j];
		perm[j] = tmp;
	}
	kf_attr a = a_ints(G, "perm", perm, r);
	return add(G, KF_OP_TRANSPOSE, &x, 1, &a, chance(G, 7, 8), 1);
}

static kf_vid gen_reshape(gen *G)
{
	kf_vid x = choose(G, anything);
	if (x == KF_NONE)
		return KF_NONE;
	const kf_type tt = *vt(G, x), *t = &tt; /* a copy: interning moves the table */
	int64_t n = kf_type_numel(t), shape[KF_MAX_RANK];
	int r = 1 + (int)pick(G, 4);
	for (int d = 0; d < r - 1; d++) {
		/* a divisor of what is left */
		int64_t f = 1;
		for (int tries = 0; tries < 6; tries++) {
			int64_t c = 1 + pick(G, 8);
			if (n % c == 0) {
				f = c;
				break;
			}
		}
		shape[d] = f;
		n /= f;
	}
	shape[r - 1] = n;
	if (chance(G, 1, 4))
		shape[pick(G, (uint32_t)r)] = -1;
	kf_attr a = a_ints(G, "shape", shape, r);
	return add(G, KF_OP_RESHAPE, &x, 1, &a, 1, 1);
}

static kf_vid gen_broadcast_to(gen *G)
{
	kf_vid x = choose(G, anything);
	if (x == KF_NONE)
		return KF_NONE;
	const kf_type tt = *vt(G, x), *t = &tt; /* a copy: interning moves the table */
	int64_t shape[KF_MAX_RANK];
	int lead = t->rank < 4 ? (int)pick(G, 2) : 0, r = t->rank + lead;
	int64_t n = 1;
	for (int d = 0; d < r; d++) {
		int64_t td = d < lead ? 1 : t->dim[d - lead];
		shape[d] = td == 1 && chance(G, 1, 2) ? 2 + pick(G, 3) : td;
		n *= shape[d];
	}
	if (n > G->max_numel)
		return KF_NONE;
	kf_attr a = a_ints(G, "shape", shape, r);
	return add(G, KF_OP_BROADCAST_TO, &x, 1, &a, 1, 1);
}

static kf_vid gen_concat(gen *G)
{
	kf_vid x = choose(G, ranked);
	if (x == KF_NONE)
		return KF_NONE;
	const kf_type tt = *vt(G, x), *t = &tt; /* a copy: interning moves the table */
	int axis = (int)pick(G, t->rank);
	kf_vid in[3] = {x};
	uint32_t nin = 2 + pick(G, 2);
	for (uint32_t i = 1; i < nin; i++) {
		kf_type p = *t;
		p.dim[axis] = 1 + pick(G, 4);
		in[i] = chance(G, 1, 3) ? x : value_of(G, &p);
	}
	kf_attr a = a_int(G, "axis", chance(G, 1, 4) ? axis - t->rank : axis);
	return add(G, KF_OP_CONCAT, in, nin, &a, 1, 1);
}

static kf_vid gen_slice(gen *G)
{
	kf_vid x = choose(G, ranked);
	if (x == KF_NONE)
		return KF_NONE;
	const kf_type tt = *vt(G, x), *t = &tt; /* a copy: interning moves the table */
	int64_t st[KF_MAX_RANK], en[KF_MAX_RANK], ax[KF_MAX_RANK], sp[KF_MAX_RANK];
	int k = 0;
	for (int d = 0; d < t->rank; d++) {
		if (t->dim[d] < 2 || !chance(G, 1, 2))
			continue;
		int64_t n = t->dim[d], s = pick(G, (uint32_t)n - 1), e = s + 1 + pick(G, (uint32_t)(n - s));
		st[k] = chance(G, 1, 4) ? s - n : s;               /* from the end */
		en[k] = e == n && chance(G, 1, 3) ? INT64_MAX : e; /* past the end */
		ax[k] = d;
		sp[k] = chance(G, 1, 4) ? 2 : 1;
		k++;
	}
	if (!k)
		return KF_NONE;
	kf_attr a[4] = {a_ints(G, "starts", st, k), a_ints(G, "ends", en, k), a_ints(G, "axes", ax, k),
			a_ints(G, "steps", sp, k)};
	return add(G, KF_OP_SLICE, &x, 1, a, chance(G, 1, 2) ? 4 : 3, 1);
}

static kf_vid gen_split(gen *G)
{
	kf_vid x = choose(G, ranked);
	if (x == KF_NONE)
		return KF_NONE;
	const kf_type tt = *vt(G, x), *t = &tt; /* a copy: interning moves the table */
	int axis = (int)pick(G, t->rank);
	int64_t n = t->dim[axis];
	if (n < 2)
		return KF_NONE;
	uint32_t parts = 2 + (n >= 3 ? pick(G, 2) : 0);
	int64_t sizes[3], left = n;
	if (!G->uneven) { /* equal parts (no sizes): the CUDA emitter's limit, see kf_gen_opts */
		parts = n % 3 == 0 && chance(G, 1, 2) ? 3 : 2;
		if (n % parts)
			return KF_NONE;
		kf_attr a = a_int(G, "axis", axis);
		return add(G, KF_OP_SPLIT, &x, 1, &a, 1, parts);
	}
	for (uint32_t i = 0; i + 1 < parts; i++) {
		sizes[i] = 1 + pick(G, (uint32_t)(left - (parts - 1 - i)));
		left -= sizes[i];
	}
	sizes[parts - 1] = left;
	kf_attr a[2] = {a_int(G, "axis", axis), a_ints(G, "sizes", sizes, (int)parts)};
	return add(G, KF_OP_SPLIT, &x, 1, a, 2, parts);
}

static kf_vid gen_const(gen *G)
{
	kf_type t = rand_type(G, rand_dtype(G));
	if (chance(G, 1, 2))
		t.rank = 0;
	else if (chance(G, 1, 2) && kf_type_numel(&t) <= 64)
		t.dim[0] = t.dim[0] * (1 + pick(G, 4)); /* sometimes past the embedding limit */
	if (kf_type_numel(&t) > G->max_numel)
		t.rank = 0;
	return add_const(G, &t, chance(G, 1, 3));
}

/* One op, drawn by weight. */
static kf_vid gen_op(gen *G)
{
	uint32_t w = pick(G, 100);
	if (w < 16) return gen_unary(G);
	if (w < 36) return gen_binary(G, binary, NA(binary));
	if (w < 40) return gen_binary(G, compare, NA(compare));
	if (w < 43) return gen_logic(G);
	if (w < 46) return gen_where(G);
	if (w < 50) return gen_cast(G);
	if (w < 59) return gen_reduce(G);
	if (w < 62) return gen_softmax(G);
	if (w < 65) return gen_layer_norm(G);
	if (w < 70) return gen_matmul(G);
	if (w < 74) return gen_transpose(G);
	if (w < 78) return gen_reshape(G);
	if (w < 80) return gen_broadcast_to(G);
	if (w < 83) return gen_concat(G);
	if (w < 87) return gen_slice(G);
	if (w < 90) return gen_split(G);
	return gen_const(G);
}

kf_graph *kf_gen_graph(kf_ctx *c, kf_gen_src *s, const kf_gen_opts *o, const char *name)
{
	gen G = {.c = c, .s = s, .max_numel = o->max_numel > 0 ? o->max_numel : 512, .uneven = o->uneven_split};
	G.g = kf_graph_new(c, name);
	/* a few input shapes most of the graph works on */
	uint32_t nin = 2 + pick(&G, 3);
	for (uint32_t i = 0; i < nin; i++) {
		kf_type t = rand_type(&G, chance(&G, 3, 4) ? KF_F32 : rand_dtype(&G));
		add_input(&G, &t);
	}
	uint32_t made = 0;
	for (uint32_t tries = 0; made < o->nodes && tries < 8 * o->nodes + 64; tries++)
		if (gen_op(&G) != KF_NONE)
			made++;
	/* results: values nothing reads (not constants), newest first, up to
	 * max_out; what is left over is dead code, as models have too */
	uint32_t maxout = o->max_out ? o->max_out : 1024, k = 0;
	kf_vid *out = malloc((maxout + 1) * sizeof *out);
	kf_tid *rt = malloc((maxout + 1) * sizeof *rt);
	for (uint32_t i = G.npool; i-- > 0 && k < maxout;) {
		kf_vid v = G.pool[i];
		kf_nid d = kf_def(G.g, v);
		if (kf_has_uses(G.g, v) || (d != KF_NONE && kf_N(G.g, d)->op == KF_OP_CONST))
			continue;
		out[k] = v;
		rt[k++] = kf_V(G.g, v)->type;
	}
	if (!k) {
		out[k] = G.pool[G.npool - 1];
		rt[k++] = kf_V(G.g, out[0])->type;
	}
	kf_node_new(G.g, 0, KF_NONE, KF_OP_RETURN, out, k, NULL, 0);
	kf_graph_set_results(G.g, rt, k);
	free(out);
	free(rt);
	free(G.pool);
	return G.g;
}
