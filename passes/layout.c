/* layout.c: the layout pass: convolutions and pools in the channels-last
 * form (docs/ops.md) that the GPU kernels take, with the transposes that
 * form needs moved out of the way until they cancel.
 *
 * One walk in program order:
 *   - a channels-first conv, max_pool or avg_pool becomes its channels-last
 *     twin between two transposes, x -> [N, D.., C] (P) and the result back
 *     to [N, C, D..] (Q = P^-1); conv's weight [O, C/g, K..] is permuted by
 *     the same P into [O, K.., C/g];
 *   - an op reading a transpose (this pass's, or the model's own: ConvNeXt
 *     permutes to channels last around its layer norms) is rewritten to
 *     work on the transpose's input instead, and the transpose moves below
 *     it: element-wise and broadcast ops (their other operands permuted
 *     too, which for a per-channel [C, 1, 1] is a reshape), reductions and
 *     softmax (axes renumbered), concat and slice (axis renumbered), and
 *     transposes over this pass's (composed);
 *   - a transpose over a transpose composes into one, or vanishes when the
 *     two cancel; one that moves only dims of size 1 is written as a reshape.
 * What stops a transpose (a matmul, a reshape that mixes dims, a graph
 * output) keeps it, so every graph input and output keeps its layout and the
 * conversion happens once at the graph's edges.  An element-wise op is not
 * rewritten when that would permute a full-size operand that is not already
 * a transpose: it would move a transpose, not remove one.
 *
 * requires: a verified graph.  keeps: the function (every rewrite is exact:
 * a transpose moves data, nothing is computed differently), value names of
 * the values it replaces (on the transposes that stand for them).  breaks:
 * nothing; leaves dead nodes it made erased.  Run canonicalize after it to
 * fold the permuted constants (weights, per-channel vectors).  A graph
 * without a conv or pool is left alone.
 * Linear: each node is visited once and rewritten at most once.
 */
#include <stdlib.h>
#include <string.h>
#include "pass.h"
#include "passes.h"

typedef struct lay {
	kf_graph *g;
	uint8_t *mine;     /* per node: a transpose or reshape this pass made */
	uint32_t cap;
	kf_nid *made;      /* every node this pass made, for the final sweep */
	uint32_t nmade, capmade;
	int converted;
} lay;

static void note_made(lay *L, kf_nid n)
{
	if (n >= L->cap) {
		uint32_t cap = L->cap ? L->cap : 256;
		while (cap <= n)
			cap *= 2;
		L->mine = realloc(L->mine, cap);
		if (!L->mine)
			abort(); /* as kf_alloc */
		memset(L->mine + L->cap, 0, cap - L->cap);
		L->cap = cap;
	}
	L->mine[n] = 1;
	if (L->nmade == L->capmade) {
		L->capmade = L->capmade ? 2 * L->capmade : 256;
		L->made = realloc(L->made, L->capmade * sizeof *L->made);
		if (!L->made)
			abort();
	}
	L->made[L->nmade++] = n;
}

static bool is_mine(const lay *L, kf_nid n) { return n != KF_NONE && n < L->cap && L->mine[n]; }

/* ---- permutations --------------------------------------------------------- */

static bool perm_identity(int r, const int64_t *p)
{
	for (int i = 0; i < r; i++)
		if (p[i] != i)
			return false;
	return true;
}

static void perm_inverse(int r, const int64_t *p, int64_t *inv)
{
	for (int i = 0; i < r; i++)
		inv[p[i]] = i;
}

/* The perm of transpose node n over rank r (absent: reversed); false when
 * malformed. */
static bool perm_of(const kf_graph *g, kf_nid n, int r, int64_t *p)
{
	int k = kf_attr_ints(g, n, "perm", p, KF_MAX_RANK);
	if (k < 0) {
		if (kf_attr_get(g, n, "perm"))
			return false;
		for (int i = 0; i < r; i++)
			p[i] = r - 1 - i;
		return true;
	}
	return k == r;
}

/* v's defining transpose and its perm, when v is the result of one. */
static bool def_transpose(const kf_graph *g, kf_vid v, kf_nid *t, int64_t *p)
{
	kf_nid d = kf_def(g, v);
	if (d == KF_NONE || kf_N(g, d)->op != KF_OP_TRANSPOSE || kf_N(g, d)->blk != 0)
		return false;
	*t = d;
	return perm_of(g, d, kf_vtype(g, v)->rank, p);
}

/* ---- making nodes ------------------------------------------------------------- */

static kf_attr ints_attr(kf_graph *g, const char *key, const int64_t *v, int n)
{
	kf_attrval el[KF_MAX_RANK];
	kf_attrval lst = {.kind = KF_ATTR_LIST, .n = (uint32_t)n, .list = el};
	for (int i = 0; i < n; i++)
		el[i] = (kf_attrval){.kind = KF_ATTR_INT, .i = v[i]};
	return (kf_attr){kf_intern_cstr(g->ctx, key), kf_attrval_copy(g, &lst)};
}

/* A node of op over in[] with attributes a[], before `before`, typed by
 * inference.  An inference failure is a bug in this pass: reported, and the
 * node erased. */
static kf_vid make(lay *L, int op, const kf_vid *in, uint32_t nin, const kf_attr *a, uint32_t na,
		   kf_nid before, bool note)
{
	kf_graph *g = L->g;
	kf_tid t0 = kf_V(g, in[0])->type;
	kf_nid n = kf_node_new(g, 0, before, op, in, nin, &t0, 1);
	kf_node_set_attrs(g, n, a, na);
	kf_N(g, n)->loc = kf_N(g, before)->loc;
	kf_type t;
	char err[256];
	if (kf_infer(g, n, &t, 1, err, sizeof err) != 1) {
		kf_error(g->ctx, kf_N(g, before)->loc, "internal: layout made an ill-typed '%s': %s",
			 kf_op(g->ctx, op)->name, err);
		kf_node_erase(g, n);
		return KF_NONE;
	}
	kf_V(g, kf_res(g, n, 0))->type = kf_type_intern(g->ctx, &t);
	if (note)
		note_made(L, n);
	return kf_res(g, n, 0);
}

/* True when permuting t by p moves only dims of size 1: the data's order
 * is unchanged, so the permutation is a reshape. */
static bool unit_moves(const kf_type *t, const int64_t *p)
{
	int last = -1;
	for (int i = 0; i < t->rank; i++) {
		if (t->dim[p[i]] == 1)
			continue;
		if (p[i] < last)
			return false;
		last = (int)p[i];
	}
	return true;
}

/* v permuted by p (result dim i = v's dim p[i]), before `before`: v itself
 * for the identity; a transpose over a transpose composed into one (or
 * none); a reshape when only dims of size 1 move. */
static kf_vid permute(lay *L, kf_vid v, const int64_t *p, kf_nid before)
{
	kf_graph *g = L->g;
	const kf_type *t = kf_vtype(g, v);
	int r = t->rank;
	int64_t q[KF_MAX_RANK], c[KF_MAX_RANK];
	kf_nid d;
	if (perm_identity(r, p))
		return v;
	if (def_transpose(g, v, &d, q)) {
		for (int i = 0; i < r; i++)
			c[i] = q[p[i]];
		return permute(L, kf_in(g, d, 0), c, before);
	}
	if (unit_moves(t, p) && kf_type_is_static(t)) {
		int64_t s[KF_MAX_RANK];
		for (int i = 0; i < r; i++)
			s[i] = t->dim[p[i]];
		kf_attr a = ints_attr(g, "shape", s, r);
		return make(L, KF_OP_RESHAPE, &v, 1, &a, 1, before, true);
	}
	kf_attr a = ints_attr(g, "perm", p, r);
	return make(L, KF_OP_TRANSPOSE, &v, 1, &a, 1, before, true);
}

/* v, read by an op of rank r, made rank r (leading 1s, as broadcasting
 * reads it) and permuted by p; KF_NONE when that needs a reshape of a
 * symbolic dim. */
static kf_vid adapt(lay *L, kf_vid v, int r, const int64_t *p, kf_nid before)
{
	kf_graph *g = L->g;
	const kf_type *t = kf_vtype(g, v);
	if (t->rank < r) {
		if (!kf_type_is_static(t))
			return KF_NONE;
		int64_t s[KF_MAX_RANK];
		int k = r - t->rank;
		for (int i = 0; i < r; i++)
			s[i] = i < k ? 1 : t->dim[i - k];
		kf_attr a = ints_attr(g, "shape", s, r);
		if ((v = make(L, KF_OP_RESHAPE, &v, 1, &a, 1, before, true)) == KF_NONE)
			return KF_NONE;
	}
	return permute(L, v, p, before);
}

/* Makes `nv` (computed in the permuted layout) stand for node n's result:
 * every use of n now reads nv permuted by `back`; n is erased. */
static void stand_in(lay *L, kf_nid n, kf_vid nv, const int64_t *back)
{
	kf_graph *g = L->g;
	kf_vid old = kf_res(g, n, 0), y = permute(L, nv, back, n);
	kf_V(g, y)->name = kf_V(g, old)->name;
	kf_replace_all_uses(g, old, y);
	kf_node_erase(g, n);
	L->converted++;
}

/* A copy of n's attributes with `extra` added (or replacing its key). */
static uint32_t attrs_with(const kf_graph *g, kf_nid n, kf_attr *out, const kf_attr *extra, uint32_t nextra)
{
	const kf_node *x = kf_N(g, n);
	uint32_t k = 0;
	for (uint32_t i = 0; i < x->nattr && k < 16; i++) {
		bool replaced = false;
		for (uint32_t j = 0; j < nextra; j++)
			replaced |= extra[j].key == x->attr[i].key;
		if (!replaced)
			out[k++] = x->attr[i];
	}
	for (uint32_t j = 0; j < nextra; j++)
		out[k++] = extra[j];
	return k;
}

/* ---- the rewrites ------------------------------------------------------------- */

/* conv, max_pool, avg_pool over [N, C, D..] -> the channels-last twin. */
static void window_op(lay *L, kf_nid n)
{
	kf_graph *g = L->g;
	/* (node pointers die when nodes are made: keep what is needed) */
	uint32_t nin = kf_N(g, n)->nin;
	int op = kf_N(g, n)->op, r = kf_vtype(g, kf_in(g, n, 0))->rank;
	if (r < 3 || r > 5 || kf_attr_int(g, n, "channels_last", 0) || kf_N(g, n)->nres != 1)
		return;
	int64_t P[KF_MAX_RANK], Q[KF_MAX_RANK];
	P[0] = 0;
	for (int i = 1; i < r - 1; i++)
		P[i] = i + 1;
	P[r - 1] = 1;
	perm_inverse(r, P, Q);
	kf_vid in[3];
	in[0] = permute(L, kf_in(g, n, 0), P, n);
	if (nin > 1)
		in[1] = permute(L, kf_in(g, n, 1), P, n); /* weight [O, C/g, K..] -> [O, K.., C/g] */
	if (nin > 2)
		in[2] = kf_in(g, n, 2);
	if (in[0] == KF_NONE || (nin > 1 && in[1] == KF_NONE))
		return;
	kf_attr a[17], cl = {kf_intern_cstr(g->ctx, "channels_last"), {.kind = KF_ATTR_BOOL, .b = true}};
	uint32_t na = attrs_with(g, n, a, &cl, 1);
	kf_vid y = make(L, op, in, nin, a, na, n, false);
	if (y != KF_NONE)
		stand_in(L, n, y, Q);
}

/* The perm T of the first operand of n of rank r that a transpose
 * defines; the operand's index, or -1. */
static int transposed_operand(const lay *L, kf_nid n, int r, int64_t *T)
{
	const kf_graph *g = L->g;
	for (uint32_t i = 0; i < kf_N(g, n)->nin; i++) {
		kf_vid v = kf_in(g, n, i);
		kf_nid d;
		if (kf_vtype(g, v)->rank == r && def_transpose(g, v, &d, T))
			return (int)i;
	}
	return -1;
}

static void elementwise(lay *L, kf_nid n)
{
	kf_graph *g = L->g;
	const kf_node x = *kf_N(g, n); /* a copy: making nodes moves the array */
	const kf_type *rt = kf_vtype(g, kf_res(g, n, 0));
	int r = rt->rank;
	int64_t T[KF_MAX_RANK], Ti[KF_MAX_RANK], p[KF_MAX_RANK];
	if (x.nres != 1 || x.nin > 8 || r < 2 || transposed_operand(L, n, r, T) < 0)
		return;
	perm_inverse(r, T, Ti);
	/* every operand is a transpose by T, or smaller than the result */
	int64_t numel = kf_type_numel(rt);
	for (uint32_t i = 0; i < x.nin; i++) {
		kf_vid v = kf_in(g, n, i);
		kf_nid d;
		bool same = def_transpose(g, v, &d, p) && kf_vtype(g, v)->rank == r && !memcmp(p, T, r * sizeof *p);
		int64_t m = kf_type_numel(kf_vtype(g, v));
		if (!same && (numel < 0 || m < 0 || m >= numel))
			return;
	}
	kf_vid in[8];
	for (uint32_t i = 0; i < x.nin; i++)
		if ((in[i] = adapt(L, kf_in(g, n, i), r, Ti, n)) == KF_NONE)
			return;
	kf_vid y = make(L, x.op, in, x.nin, x.attr, x.nattr, n, false);
	if (y != KF_NONE)
		stand_in(L, n, y, T);
}

/* Axis a of the original (transposed) value is axis T[a] of its input. */
static bool renumber_axes(const kf_graph *g, kf_nid n, const char *key, int r, const int64_t *T, int64_t *out,
			  int *cnt)
{
	int64_t ax[KF_MAX_RANK];
	int k = kf_attr_ints(g, n, key, ax, KF_MAX_RANK);
	if (k < 0)
		return false;
	for (int i = 0; i < k; i++) {
		int64_t a = ax[i] < 0 ? ax[i] + r : ax[i];
		if (a < 0 || a >= r)
			return false;
		out[i] = T[a];
	}
	*cnt = k;
	return true;
}

static void reduction(lay *L, kf_nid n)
{
	kf_graph *g = L->g;
	kf_vid v = kf_in(g, n, 0);
	int r = kf_vtype(g, v)->rank, na;
	int64_t T[KF_MAX_RANK], ax[KF_MAX_RANK];
	kf_nid d;
	if (!def_transpose(g, v, &d, T) || kf_N(g, n)->nres != 1)
		return;
	bool keep = kf_attr_bool(g, n, "keepdims", true);
	if (!renumber_axes(g, n, "axes", r, T, ax, &na) || na == 0)
		return; /* no axes: all of them, in any layout; leave it */
	kf_attr a[17], e = ints_attr(g, "axes", ax, na);
	uint32_t nat = attrs_with(g, n, a, &e, 1);
	kf_vid src = kf_in(g, d, 0);
	kf_vid y = make(L, kf_N(g, n)->op, &src, 1, a, nat, n, false);
	if (y == KF_NONE)
		return;
	if (keep) {
		stand_in(L, n, y, T);
		return;
	}
	/* without keepdims the kept axes stay in their order in each layout:
	 * kept original axis j is input axis T[R[j]], at its rank among those */
	bool red[KF_MAX_RANK] = {false};
	for (int i = 0; i < na; i++)
		red[ax[i]] = true;
	int64_t back[KF_MAX_RANK];
	int k = 0;
	for (int i = 0; i < r; i++) {
		bool gone = false;
		for (int j = 0; j < na; j++)
			gone |= T[i] == ax[j];
		if (gone)
			continue;
		int rank = 0;
		for (int j = 0; j < (int)T[i]; j++)
			rank += !red[j];
		back[k++] = rank;
	}
	stand_in(L, n, y, back);
}

/* softmax, log_softmax: one axis. */
static void axis_op(lay *L, kf_nid n, const char *key, int64_t dflt)
{
	kf_graph *g = L->g;
	kf_vid v = kf_in(g, n, 0);
	int r = kf_vtype(g, v)->rank;
	int64_t T[KF_MAX_RANK];
	kf_nid d;
	if (!def_transpose(g, v, &d, T) || kf_N(g, n)->nres != 1)
		return;
	int64_t a = kf_attr_int(g, n, key, dflt);
	a = a < 0 ? a + r : a;
	if (a < 0 || a >= r)
		return;
	kf_attr at[17], e = {kf_intern_cstr(g->ctx, key), {.kind = KF_ATTR_INT, .i = T[a]}};
	uint32_t na = attrs_with(g, n, at, &e, 1);
	kf_vid src = kf_in(g, d, 0);
	kf_vid y = make(L, kf_N(g, n)->op, &src, 1, at, na, n, false);
	if (y != KF_NONE)
		stand_in(L, n, y, T);
}

static void concat(lay *L, kf_nid n)
{
	kf_graph *g = L->g;
	uint32_t nin = kf_N(g, n)->nin;
	int r = kf_vtype(g, kf_res(g, n, 0))->rank;
	int64_t T[KF_MAX_RANK], Ti[KF_MAX_RANK], p[KF_MAX_RANK];
	if (kf_N(g, n)->nres != 1 || nin > 64 || transposed_operand(L, n, r, T) < 0)
		return;
	for (uint32_t i = 0; i < nin; i++) { /* all transposes by T */
		kf_nid d;
		if (!def_transpose(g, kf_in(g, n, i), &d, p) || memcmp(p, T, r * sizeof *p))
			return;
	}
	perm_inverse(r, T, Ti);
	int64_t a = kf_attr_int(g, n, "axis", 0);
	a = a < 0 ? a + r : a;
	if (a < 0 || a >= r)
		return;
	kf_vid in[64];
	for (uint32_t i = 0; i < nin; i++)
		in[i] = permute(L, kf_in(g, n, i), Ti, n);
	kf_attr at[17], e = {kf_intern_cstr(g->ctx, "axis"), {.kind = KF_ATTR_INT, .i = T[a]}};
	uint32_t na = attrs_with(g, n, at, &e, 1);
	kf_vid y = make(L, KF_OP_CONCAT, in, nin, at, na, n, false);
	if (y != KF_NONE)
		stand_in(L, n, y, T);
}

static void slice(lay *L, kf_nid n)
{
	kf_graph *g = L->g;
	kf_vid v = kf_in(g, n, 0);
	int r = kf_vtype(g, v)->rank, k;
	int64_t T[KF_MAX_RANK], ax[KF_MAX_RANK], st[KF_MAX_RANK];
	kf_nid d;
	if (!def_transpose(g, v, &d, T))
		return;
	if (kf_attr_get(g, n, "axes")) {
		if (!renumber_axes(g, n, "axes", r, T, ax, &k))
			return;
	} else {
		if ((k = kf_attr_ints(g, n, "starts", st, KF_MAX_RANK)) < 0)
			return;
		for (int i = 0; i < k; i++)
			ax[i] = T[i];
	}
	kf_attr at[17], e = ints_attr(g, "axes", ax, k);
	uint32_t na = attrs_with(g, n, at, &e, 1);
	kf_vid src = kf_in(g, d, 0);
	kf_vid y = make(L, KF_OP_SLICE, &src, 1, at, na, n, false);
	if (y != KF_NONE)
		stand_in(L, n, y, T);
}

/* A transpose of a transpose this pass made: composed into one. */
static void transpose(lay *L, kf_nid n)
{
	kf_graph *g = L->g;
	kf_vid v = kf_in(g, n, 0);
	int r = kf_vtype(g, v)->rank;
	int64_t p[KF_MAX_RANK];
	if (!is_mine(L, kf_def(g, v)) || is_mine(L, n) || !perm_of(g, n, r, p))
		return;
	kf_vid y = permute(L, v, p, n);
	kf_V(g, y)->name = kf_V(g, kf_res(g, n, 0))->name;
	kf_replace_all_uses(g, kf_res(g, n, 0), y);
	kf_node_erase(g, n);
	L->converted++;
}

static void visit(lay *L, kf_nid n)
{
	kf_graph *g = L->g;
	int op = kf_N(g, n)->op;
	const kf_opinfo *oi = kf_op(g->ctx, op);
	switch (op) {
	case KF_OP_CONV: case KF_OP_MAX_POOL: case KF_OP_AVG_POOL:
		window_op(L, n);
		return;
	case KF_OP_REDUCE_SUM: case KF_OP_REDUCE_MEAN: case KF_OP_REDUCE_MAX: case KF_OP_REDUCE_MIN:
		reduction(L, n);
		return;
	case KF_OP_SOFTMAX: case KF_OP_LOG_SOFTMAX:
		axis_op(L, n, "axis", -1);
		return;
	case KF_OP_CONCAT:
		concat(L, n);
		return;
	case KF_OP_SLICE:
		slice(L, n);
		return;
	case KF_OP_TRANSPOSE:
		transpose(L, n);
		return;
	case KF_OP_BROADCAST_TO:
		return; /* its shape attribute is in the original layout */
	}
	if (op < KF_NBUILTIN && (oi->trait == KF_TRAIT_ELEMENTWISE || oi->trait == KF_TRAIT_BROADCAST))
		elementwise(L, n);
}

static int run(kf_graph *g, const kf_passopts *po, bool *changed)
{
	lay L = {.g = g};
	int nerr = kf_nerrors(g->ctx);
	bool windows = false;
	kf_foreach_node(g, 0, n) {
		int op = kf_N(g, n)->op;
		windows |= op == KF_OP_CONV || op == KF_OP_MAX_POOL || op == KF_OP_AVG_POOL;
	}
	if (!windows)
		return 0; /* moving transposes is for the convolutions' sake */
	/* nodes made during the walk go before the node being visited, so the
	 * walk meets each original node once */
	for (kf_nid n = g->blk[0].first; n != KF_NONE;) {
		kf_nid next = kf_N(g, n)->next;
		if (!is_mine(&L, n) && kf_N(g, n)->op != KF_OP_RETURN)
			visit(&L, n);
		n = next;
	}
	/* what this pass made and then bypassed */
	for (uint32_t i = L.nmade; i-- > 0;) {
		kf_nid n = L.made[i];
		if (!(kf_N(g, n)->flags & KF_NODE_DEAD) && kf_pass_node_dead(g, n))
			kf_node_erase(g, n);
	}
	if (L.converted)
		*changed = true;
	if (po->log && L.converted)
		kf_buf_printf(po->log, "layout: @%s: %d ops in the channels-last layout\n", kf_str(g->ctx, g->name),
			      L.converted);
	free(L.mine);
	free(L.made);
	return kf_nerrors(g->ctx) != nerr ? -1 : 0;
}

const kf_pass kf_pass_layout = {
	.name = "layout",
	.doc = "convs and pools channels-last, the transposes moved until they cancel at the graph's edges",
	.run = run,
};
