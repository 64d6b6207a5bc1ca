/* canonicalize.c: constant folding, algebraic identities and canonical
 * operand order, to a fixed point over a worklist.
 *
 * Rewrites (each only when the result type is unchanged: x + zeros[4,4] with
 * x: f32[4] broadcasts, so it does not become x):
 *   fold:       any op whose operands are all inline constants (fold.c)
 *   add/sub:    x + 0, 0 + x, x - 0 -> x;  x - x -> 0 for integers only
 *   mul/div:    x * 1, 1 * x, x / 1, pow(x, 1) -> x;  x * 0 -> 0 for integers only
 *   min/max/and/or(x, x) -> x;  where(c, x, x) -> x;  where(true|false, a, b)
 *   neg(neg x), not(not x) -> x;  abs(abs x), relu(relu x) -> inner;  abs(neg x) -> abs x
 *   cast to the same dtype -> x;  cast(cast(x)) -> cast(x) when the inner cast
 *     is lossless (widening), and -> x when that returns to x's dtype
 *   transpose(transpose x) -> one transpose of the composed perm; identity perm -> x
 *   reshape(reshape x) -> reshape x;  reshape/broadcast_to to the same type -> x
 *   slice of the full range (unit steps) -> x;  concat of one -> x;  split into one -> x
 *   commutative binary ops: constants last, then operands by value id
 * Floats: x - x and x * 0 are not folded (inf and NaN give NaN, not 0); x + 0
 * is folded, which turns -0.0 + 0.0 (= +0.0) into -0.0: the sign of a zero
 * is the one IEEE distinction kfuse does not keep.
 * Nodes left without uses (and without effects) are erased, as MLIR's
 * greedy driver does.  Bodies of element-wise fusions are canonicalized
 * too (not those of the other kinds: see push_block).
 * requires exact use lists; keeps the graph valid.  Each rewrite removes a
 * node or moves it toward canonical form, so the worklist empties after
 * O(nodes + rewrites) steps; a cap stops it anyway with an error. */
#include <stdlib.h>
#include <string.h>

#include "passes.h"

typedef struct canon {
	kf_graph *g;
	kf_nid *wl;
	uint32_t nwl, capwl;
	uint8_t *in;     /* per node: on the worklist */
	uint32_t capin;
	uint64_t steps, rewrites;
	int64_t fold_max;
	bool fold;
} canon;

static void push(canon *cs, kf_nid n)
{
	if (n == KF_NONE)
		return;
	if (n >= cs->capin) {
		uint32_t cap = cs->capin ? cs->capin : 64;
		while (cap <= n)
			cap *= 2;
		uint8_t *p = realloc(cs->in, cap);
		if (!p)
			kf_oom(); /* as kf_alloc does on OOM */
		memset(p + cs->capin, 0, cap - cs->capin);
		cs->in = p, cs->capin = cap;
	}
	if (cs->in[n] || (kf_N(cs->g, n)->flags & KF_NODE_DEAD))
		return;
	if (cs->nwl == cs->capwl) {
		cs->capwl = cs->capwl ? cs->capwl * 2 : 1024;
		cs->wl = realloc(cs->wl, cs->capwl * sizeof *cs->wl);
		if (!cs->wl)
			kf_oom();
	}
	cs->in[n] = 1;
	cs->wl[cs->nwl++] = n;
}

static void push_users(canon *cs, kf_nid n)
{
	kf_graph *g = cs->g;
	for (uint32_t r = 0; r < kf_N(g, n)->nres; r++)
		kf_foreach_use(g, kf_res(g, n, r), u)
			push(cs, g->use[u].user);
}

static void push_operand_defs(canon *cs, kf_nid n)
{
	for (uint32_t i = 0; i < kf_N(cs->g, n)->nin; i++)
		push(cs, kf_def(cs->g, kf_in(cs->g, n, i)));
}

/* Result r of n becomes `with` everywhere. */
static void replace_res(canon *cs, kf_nid n, uint32_t r, kf_vid with)
{
	kf_graph *g = cs->g;
	kf_vid v = kf_res(g, n, r);
	kf_foreach_use(g, v, u)
		push(cs, g->use[u].user);
	/* A fresh value (a folded constant) inherits the name the user wrote. */
	if (!kf_V(g, with)->name && kf_def(g, with) != KF_NONE && kf_N(g, kf_def(g, with))->op == KF_OP_CONST) {
		kf_V(g, with)->name = kf_V(g, v)->name;
		kf_V(g, v)->name = 0;
	}
	kf_replace_all_uses(g, v, with);
}

/* Node n's single result is x: move its uses and erase it. */
static bool replace_with(canon *cs, kf_nid n, kf_vid x)
{
	replace_res(cs, n, 0, x);
	push(cs, kf_def(cs->g, x));
	push_operand_defs(cs, n);
	kf_node_erase(cs->g, n);
	return true;
}

/* n's operand i now reads v (an in-place rewrite). */
static bool set_operand(canon *cs, kf_nid n, uint32_t i, kf_vid v)
{
	kf_vid old = kf_in(cs->g, n, i);
	kf_set_operand(cs->g, n, i, v);
	push(cs, kf_def(cs->g, old));
	push(cs, n);
	push_users(cs, n);
	return true;
}

static kf_tid rtype(const kf_graph *g, kf_nid n) { return kf_V(g, kf_res(g, n, 0))->type; }
static kf_tid vtid(const kf_graph *g, kf_vid v) { return kf_V(g, v)->type; }
static kf_dtype vdt(const kf_graph *g, kf_vid v) { return (kf_dtype)kf_vtype(g, v)->dtype; }
static int defop(const kf_graph *g, kf_vid v)
{
	kf_nid d = kf_def(g, v);
	return d == KF_NONE ? -1 : kf_N(g, d)->op;
}
static kf_vid in0_of_def(const kf_graph *g, kf_vid v) { return kf_in(g, kf_def(g, v), 0); }

/* n := x when that keeps n's result type. */
static bool to(canon *cs, kf_nid n, kf_vid x)
{
	return rtype(cs->g, n) == vtid(cs->g, x) && replace_with(cs, n, x);
}

static bool is_const(const kf_graph *g, kf_vid v) { return kf_fold_const_of(g, v) != NULL; }

/* Constants last, then by value id: one order for a + b and b + a. */
static bool order_operands(canon *cs, kf_nid n)
{
	kf_graph *g = cs->g;
	kf_vid a = kf_in(g, n, 0), b = kf_in(g, n, 1);
	bool ca = is_const(g, a), cb = is_const(g, b);
	if ((ca && !cb) || (ca == cb && a > b)) {
		kf_set_operand(g, n, 0, b);
		kf_set_operand(g, n, 1, a);
		push(cs, n);
		return true;
	}
	return false;
}

/* Can every value of dtype `from` be represented exactly in `to`? */
static bool lossless(kf_dtype from, kf_dtype to)
{
	if (from == to || from == KF_I1)
		return true;
	switch (from) {
	case KF_F16: return to == KF_F32 || to == KF_F64;
	case KF_BF16: return to == KF_F32 || to == KF_F64;
	case KF_F32: return to == KF_F64;
	case KF_I8: return to != KF_I1; /* 8 significant bits fit even bf16 */
	case KF_I32: return to == KF_I64 || to == KF_F64;
	default: return false;
	}
}

static bool simplify_cast(canon *cs, kf_nid n)
{
	kf_graph *g = cs->g;
	kf_vid x = kf_in(g, n, 0);
	if (to(cs, n, x))
		return true;
	if (defop(g, x) == KF_OP_CAST) {
		kf_vid y = in0_of_def(g, x);
		if (lossless(vdt(g, y), vdt(g, x)))
			return set_operand(cs, n, 0, y);
	}
	return false;
}

/* The perm of transpose node n (default: reversed); false if malformed. */
static bool perm_of(const kf_graph *g, kf_nid n, int64_t *p, int rank)
{
	int k = kf_attr_ints(g, n, "perm", p, KF_MAX_RANK);
	if (k < 0) {
		if (kf_attr_get(g, n, "perm"))
			return false;
		for (int i = 0; i < rank; i++)
			p[i] = rank - 1 - i;
		return true;
	}
	if (k != rank)
		return false;
	for (int i = 0; i < rank; i++)
		if (p[i] < 0 || p[i] >= rank)
			return false;
	return true;
}

static bool simplify_transpose(canon *cs, kf_nid n)
{
	kf_graph *g = cs->g;
	kf_vid x = kf_in(g, n, 0);
	int rank = kf_vtype(g, x)->rank;
	int64_t p[KF_MAX_RANK], q[KF_MAX_RANK], c[KF_MAX_RANK];
	if (!perm_of(g, n, p, rank))
		return false;
	bool ident = true;
	for (int i = 0; i < rank; i++)
		ident &= p[i] == i;
	if (ident)
		return to(cs, n, x);
	if (defop(g, x) != KF_OP_TRANSPOSE || !perm_of(g, kf_def(g, x), q, rank))
		return false;
	/* out[i] = t[p[i]] = x[q[p[i]]] */
	kf_attrval lst = {.kind = KF_ATTR_LIST, .n = (uint32_t)rank};
	kf_attrval el[KF_MAX_RANK];
	for (int i = 0; i < rank; i++) {
		c[i] = q[p[i]];
		el[i] = (kf_attrval){.kind = KF_ATTR_INT, .i = c[i]};
	}
	lst.list = el;
	kf_node_set_attr(g, n, kf_intern_cstr(g->ctx, "perm"), kf_attrval_copy(g, &lst));
	return set_operand(cs, n, 0, in0_of_def(g, x));
}

static bool simplify_reshape(canon *cs, kf_nid n)
{
	kf_graph *g = cs->g;
	kf_vid x = kf_in(g, n, 0);
	if (to(cs, n, x))
		return true;
	if (defop(g, x) != KF_OP_RESHAPE)
		return false;
	int64_t s[KF_MAX_RANK];
	int k = kf_attr_ints(g, n, "shape", s, KF_MAX_RANK);
	bool copies = k < 0;
	for (int i = 0; i < k; i++)
		copies |= s[i] == 0;
	if (copies) {
		/* A 0 copies the input dim, which changes with the input: spell the
		 * result's dims out instead, when they are static. */
		const kf_type *t = kf_type_get(g->ctx, rtype(g, n));
		if (!kf_type_is_static(t))
			return false;
		kf_attrval el[KF_MAX_RANK], lst = {.kind = KF_ATTR_LIST, .n = t->rank, .list = el};
		for (int i = 0; i < t->rank; i++)
			el[i] = (kf_attrval){.kind = KF_ATTR_INT, .i = t->dim[i]};
		kf_node_set_attr(g, n, kf_intern_cstr(g->ctx, "shape"), kf_attrval_copy(g, &lst));
	}
	return set_operand(cs, n, 0, in0_of_def(g, x));
}

static bool simplify_slice(canon *cs, kf_nid n)
{
	kf_graph *g = cs->g;
	int64_t st[KF_MAX_RANK];
	int k = kf_attr_ints(g, n, "steps", st, KF_MAX_RANK);
	if (k < 0 && kf_attr_get(g, n, "steps"))
		return false;
	for (int i = 0; i < k; i++)
		if (st[i] != 1)
			return false; /* a reversal keeps the shape but not the order */
	return to(cs, n, kf_in(g, n, 0));
}

static bool simplify_binary(canon *cs, kf_nid n, int op)
{
	kf_graph *g = cs->g;
	const kf_opinfo *oi = kf_op(g->ctx, op);
	if ((oi->flags & KF_OPF_COMMUTATIVE) && order_operands(cs, n))
		return true;
	kf_vid a = kf_in(g, n, 0), b = kf_in(g, n, 1);
	bool fl = kf_dtype_is_float(vdt(g, a));
	switch (op) {
	case KF_OP_ADD:
		return kf_fold_is(g, b, 0) && to(cs, n, a);
	case KF_OP_SUB:
		if (kf_fold_is(g, b, 0) && to(cs, n, a))
			return true;
		if (a == b && !fl)
			return replace_with(cs, n, kf_fold_splat(g, n, rtype(g, n), 0));
		return false;
	case KF_OP_MUL:
		if (kf_fold_is(g, b, 1) && to(cs, n, a))
			return true;
		if (kf_fold_is(g, b, 0) && !fl && vdt(g, b) != KF_I1)
			return replace_with(cs, n, kf_fold_splat(g, n, rtype(g, n), 0));
		return false;
	case KF_OP_DIV:
	case KF_OP_POW:
		return kf_fold_is(g, b, 1) && to(cs, n, a);
	case KF_OP_MAX: case KF_OP_MIN: case KF_OP_AND: case KF_OP_OR:
		return a == b && to(cs, n, a);
	}
	return false;
}

static bool simplify_unary(canon *cs, kf_nid n, int op)
{
	kf_graph *g = cs->g;
	kf_vid x = kf_in(g, n, 0);
	int inner = defop(g, x);
	switch (op) {
	case KF_OP_NEG:
	case KF_OP_NOT:
		return inner == op && to(cs, n, in0_of_def(g, x));
	case KF_OP_ABS:
		if (inner == KF_OP_ABS)
			return to(cs, n, x);
		return inner == KF_OP_NEG && set_operand(cs, n, 0, in0_of_def(g, x));
	case KF_OP_RELU:
		return inner == KF_OP_RELU && to(cs, n, x);
	}
	return false;
}

static bool simplify(canon *cs, kf_nid n)
{
	kf_graph *g = cs->g;
	kf_node *nd = kf_N(g, n);
	int op = nd->op;
	if (op >= KF_NBUILTIN)
		return false;
	if (nd->nin == 2 && op >= KF_OP_ADD && op <= KF_OP_OR && op != KF_OP_WHERE && op != KF_OP_CAST)
		return simplify_binary(cs, n, op);
	switch (op) {
	case KF_OP_NEG: case KF_OP_NOT: case KF_OP_ABS: case KF_OP_RELU:
		return simplify_unary(cs, n, op);
	case KF_OP_CAST:
		return simplify_cast(cs, n);
	case KF_OP_TRANSPOSE:
		return simplify_transpose(cs, n);
	case KF_OP_RESHAPE:
		return simplify_reshape(cs, n);
	case KF_OP_BROADCAST_TO:
		return to(cs, n, kf_in(g, n, 0));
	case KF_OP_SLICE:
		return simplify_slice(cs, n);
	case KF_OP_CONCAT:
		return nd->nin == 1 && to(cs, n, kf_in(g, n, 0));
	case KF_OP_SPLIT:
		return nd->nres == 1 && to(cs, n, kf_in(g, n, 0));
	case KF_OP_WHERE: {
		kf_vid c = kf_in(g, n, 0), a = kf_in(g, n, 1), b = kf_in(g, n, 2);
		double u;
		if (a == b)
			return to(cs, n, a);
		if (kf_fold_uniform(g, c, &u))
			return to(cs, n, u != 0 ? a : b);
		return false;
	}
	}
	return false;
}

static bool fold(canon *cs, kf_nid n)
{
	kf_vid out[KF_MAX_RANK];
	if (!cs->fold || !kf_fold_node(cs->g, n, cs->fold_max, out))
		return false;
	for (uint32_t r = 0; r < kf_N(cs->g, n)->nres; r++)
		replace_res(cs, n, r, out[r]);
	push_operand_defs(cs, n);
	kf_node_erase(cs->g, n);
	return true;
}

static void visit(canon *cs, kf_nid n)
{
	kf_graph *g = cs->g;
	if (kf_N(g, n)->flags & KF_NODE_DEAD)
		return;
	if (!kf_pass_node_pinned(g, n) && kf_pass_node_dead(g, n)) {
		push_operand_defs(cs, n);
		kf_node_erase(g, n);
		cs->rewrites++;
		return;
	}
	if (fold(cs, n) || simplify(cs, n))
		cs->rewrites++;
}

/* Pushes a block's nodes last to first, so that they pop in program order:
 * operands are simplified before their users look at them.  Only the
 * bodies of element-wise fusions: a reduce, colreduce, contraction or
 * persistent kernel is built around its body's reductions, contraction or
 * recurrence, which folding would remove (the fusion's kind would then
 * promise a body that is no longer there, and no kernel could run it). */
static void push_block(canon *cs, kf_bid b)
{
	kf_graph *g = cs->g;
	for (kf_nid n = g->blk[b].last; n != KF_NONE; n = kf_N(g, n)->prev) {
		if (kf_N(g, n)->body != KF_NONE &&
		    !strcmp(kf_attr_str(g, n, "kind", "elementwise"), "elementwise"))
			push_block(cs, kf_N(g, n)->body);
		push(cs, n);
	}
}

static int canon_run(kf_graph *g, const kf_passopts *o, bool *changed)
{
	canon cs = {.g = g};
	cs.fold = kf_passopt_bool(g->ctx, o, "fold", true);
	cs.fold_max = kf_passopt_int(g->ctx, o, "max-fold-elems", KF_FOLD_MAX_ELEMS);
	uint64_t cap = 16 * (uint64_t)g->nnode + 1024;
	push_block(&cs, 0);
	while (cs.nwl > 0 && cs.steps++ < cap) {
		kf_nid n = cs.wl[--cs.nwl];
		cs.in[n] = 0;
		visit(&cs, n);
	}
	int rc = 0;
	if (cs.nwl > 0) {
		kf_error(g->ctx, g->loc, "canonicalize did not converge on @%s after %llu steps",
			 kf_str(g->ctx, g->name), (unsigned long long)cs.steps);
		rc = -1;
	}
	free(cs.wl);
	free(cs.in);
	*changed = cs.rewrites > 0;
	return rc;
}

static const char *const canon_opts[] = {"fold", "max-fold-elems", NULL};

const kf_pass kf_pass_canonicalize = {
	.name = "canonicalize",
	.doc = "fold constants, apply algebraic identities, order commutative operands (options: fold=BOOL, max-fold-elems=N)",
	.opts = canon_opts,
	.run = canon_run,
};
