/* fuse_contraction.c: the fuse-matmul pass: each matmul or gemm becomes a
 * `fusion @mN(...) {kind = "contraction"}` holding it, the element-wise
 * prologue of each operand and the element-wise epilogue of its result, so
 * that one kernel (cuda/emit_matmul.c) reads the operands once and
 * writes the final value once.
 *
 * requires: a verified graph; runs before `fuse` (which leaves fusion nodes
 * alone).  Symbolic dims (f32[B,T,768]) fuse too: every check compares
 * dims as monomials (equal for every size) or asks for one element; a
 * symbolic graph reaches the CUDA kernels specialised to each input
 * size (api/dyn.h).  keeps: values, names, attributes and locations of every op
 * (moved into bodies).  breaks: nothing; the fusion takes the place of its
 * last op, where every input is already defined.
 *
 * Prologue of an operand: walking up from it, ops whose result only this
 * chain reads: casts and other unary element-wise ops, binary element-wise
 * ops with a one-element other operand (scaling), and transposes of the
 * last two axes (folded into the loads).  Epilogue: walking down from the
 * result while every use of the value is in one element-wise or broadcast
 * op whose result has the contraction's shape and whose other operands
 * broadcast to it (bias, residual, activation, scaling, cast).  Values only
 * the chains read cannot be read from outside, so no cycle can form.
 * Options: tf32 (f32 contractions may use tf32 tensor cores; sets the
 * fusion's tf32 attribute), single (default true: a lone matmul becomes a
 * one-op fusion too, so that the tuner and the tensor-core kernels apply),
 * max-epilogue (16).
 * The epilogue walk and the making of the fusion node are shared with
 * fuse-conv (fuse_conv.c) through fuse.h.
 */
#include <stdlib.h>
#include <string.h>
#include "fuse.h"
#include "pass.h"
#include "passes.h"

#define MAXG KF_FUSE_GROUP_MAX
typedef kf_fuse_group grp;

/* Every use of v is in node u (and v has a use). */
static bool only_user(const kf_graph *g, kf_vid v, kf_nid *u)
{
	*u = KF_NONE;
	kf_foreach_use(g, v, x) {
		kf_nid y = g->use[x].user;
		if (*u != KF_NONE && *u != y)
			return false;
		*u = y;
	}
	return *u != KF_NONE;
}

static bool ew(const kf_graph *g, kf_nid n)
{
	const kf_node *x = kf_N(g, n);
	int t = kf_op(g->ctx, x->op)->trait;
	return (t == KF_TRAIT_ELEMENTWISE || t == KF_TRAIT_BROADCAST) && x->nres == 1 && x->blk == 0;
}

/* The operand of n that carries the matrix, when n is a prologue op. */
static kf_vid prologue_input(const kf_graph *g, kf_nid n)
{
	const kf_node *x = kf_N(g, n);
	if (x->blk != 0 || x->nres != 1)
		return KF_NONE;
	const kf_type *rt = kf_vtype(g, kf_res(g, n, 0));
	if (x->op == KF_OP_TRANSPOSE)
		return kf_fuse_swaps_last_two(g, n) ? kf_in(g, n, 0) : KF_NONE;
	if (!ew(g, n) || x->op == KF_OP_WHERE)
		return KF_NONE;
	if (x->nin == 1)
		return kf_type_same_shape(kf_vtype(g, kf_in(g, n, 0)), rt) ? kf_in(g, n, 0) : KF_NONE;
	if (x->nin != 2)
		return KF_NONE;
	for (uint32_t i = 0; i < 2; i++) {
		kf_vid m = kf_in(g, n, i), s = kf_in(g, n, !i);
		if (m != s && kf_type_same_shape(kf_vtype(g, m), rt) && kf_type_numel(kf_vtype(g, s)) == 1)
			return m;
	}
	return KF_NONE;
}

/* How much of an operand's prologue chain (chain[0] next to the
 * contraction, nc ops, read from value v) the contraction keeps.  Its
 * transposes cost nothing (folded into the loads); an op that computes
 * (a cast, a scaling) costs a pass over the operand on every run when the
 * contraction runs as a library GEMM (cuda/cuda_route.c: a prologue
 * kernel before cuBLAS, and no cuBLASLt), which is the cost model's floor
 * for most shapes.  So, looking through views from v:
 * - a chain over a constant (amp's cast of a weight kept in a file) stays
 *   outside whole: the backend computes it once when it plans
 *   (cuda/cuda_hoist.c), the contraction reads the operand as stored;
 * - a chain over a value an element-wise, broadcast, injective or
 *   reduction op computes keeps its leading transposes only: `fuse` puts
 *   the rest into the producer's kernel, which then writes the narrower
 *   value (amp's cast after a layer norm), instead of a kernel of its own;
 * - so does one over a graph input moved by a transpose or a slice, in
 *   the chain past its first computing op or below it (a kernel of its
 *   own in any case);
 * - a chain over a graph input (reshaped at most) or another kernel's
 *   result stays inside. */
static int prologue_cut(const kf_graph *g, kf_vid v, const kf_nid *chain, int nc)
{
	int lead = 0;
	while (lead < nc && kf_N(g, chain[lead])->op == KF_OP_TRANSPOSE)
		lead++;
	if (lead == nc)
		return nc;
	kf_nid d = kf_def(g, v);
	bool moves = false; /* a view that is a kernel of its own (not a reshape) */
	for (int j = lead; j < nc; j++)
		moves |= kf_N(g, chain[j])->op == KF_OP_TRANSPOSE;
	while (kf_fuse_is_view(g, d)) {
		moves |= kf_N(g, d)->op != KF_OP_RESHAPE;
		d = kf_def(g, kf_in(g, d, 0));
	}
	if (d == KF_NONE)
		return moves ? lead : nc;
	const kf_node *x = kf_N(g, d);
	if (x->op == KF_OP_CONST)
		return 0;
	int t = kf_op(g->ctx, x->op)->trait;
	bool fusible = x->blk == 0 && x->body == KF_NONE && x->nres == 1 &&
		       (t == KF_TRAIT_ELEMENTWISE || t == KF_TRAIT_BROADCAST || t == KF_TRAIT_INJECTIVE ||
			t == KF_TRAIT_REDUCE);
	return fusible ? lead : nc;
}

/* True when t broadcasts (numpy, right-aligned) into shape o. */
static bool bcasts_to(const kf_type *t, const kf_type *o)
{
	if (t->rank > o->rank)
		return false;
	for (int j = 0; j < t->rank; j++) {
		int64_t d = t->dim[t->rank - 1 - j], od = o->dim[o->rank - 1 - j];
		if (d != 1 && d != od)
			return false;
	}
	return true;
}

static void add(grp *gr, kf_nid n)
{
	for (uint32_t i = 0; i < gr->nn; i++)
		if (gr->n[i] == n)
			return;
	gr->n[gr->nn++] = n;
}

void kf_fuse_epilogue(kf_graph *g, kf_nid root, int max_epi, kf_fuse_group *gr)
{
	const kf_type *O = kf_vtype(g, kf_res(g, root, 0));
	kf_vid v = kf_res(g, root, 0);
	kf_nid u;
	for (int e = 0; e < max_epi && gr->nn < MAXG; e++) {
		if (!only_user(g, v, &u) || !ew(g, u) || !kf_type_same_shape(kf_vtype(g, kf_res(g, u, 0)), O))
			break;
		bool ok = true;
		for (uint32_t j = 0; j < kf_N(g, u)->nin && ok; j++) {
			kf_vid o = kf_in(g, u, j);
			ok = o == v || bcasts_to(kf_vtype(g, o), O);
		}
		if (!ok)
			break;
		add(gr, u);
		v = kf_res(g, u, 0);
	}
}

static void collect(kf_graph *g, kf_nid c, int max_epi, grp *gr)
{
	gr->nn = 0;
	add(gr, c);
	kf_nid u;
	for (uint32_t i = 0; i < 2; i++) {
		kf_vid v = kf_in(g, c, i);
		kf_nid user = c;
		/* gemm's C is read by the epilogue: a value it shares stays outside */
		if (kf_N(g, c)->nin > 2 && kf_in(g, c, 2) == v)
			continue;
		kf_nid chain[16];
		int nc = 0;
		for (int depth = 0; depth < 16 && (int)gr->nn + nc < MAXG - max_epi - 1; depth++) {
			kf_nid d = kf_def(g, v);
			if (d == KF_NONE || kf_N(g, d)->op == KF_OP_CONST || !only_user(g, v, &u) || u != user)
				break;
			kf_vid in = prologue_input(g, d);
			if (in == KF_NONE)
				break;
			chain[nc++] = d;
			user = d;
			v = in;
		}
		/* a chain from a constant the body would embed computes a
		 * constant operand (canonicalize folds it, in the body too): the
		 * kernel must load its operands, so it stays outside */
		kf_nid root = kf_def(g, v);
		if (root != KF_NONE && kf_fuse_const_embeddable(g, root))
			nc = 0;
		nc = prologue_cut(g, v, chain, nc);
		for (int j = 0; j < nc; j++)
			add(gr, chain[j]);
	}
	kf_fuse_epilogue(g, c, max_epi, gr);
}

static int cmp_nid(const void *a, const void *b)
{
	kf_nid x = *(const kf_nid *)a, y = *(const kf_nid *)b;
	return (x > y) - (x < y);
}

/* Position of each top-level node in program order (node ids are not). */
static void order_group(kf_graph *g, grp *gr)
{
	kf_nid sorted[MAXG];
	uint32_t k = 0;
	qsort(gr->n, gr->nn, sizeof *gr->n, cmp_nid);
	kf_foreach_node(g, 0, n)
		if (bsearch(&n, gr->n, gr->nn, sizeof *gr->n, cmp_nid))
			sorted[k++] = n;
	memcpy(gr->n, sorted, k * sizeof *sorted);
}

static bool member(const grp *gr, kf_nid n)
{
	for (uint32_t i = 0; i < gr->nn; i++)
		if (gr->n[i] == n)
			return true;
	return false;
}

kf_nid kf_fuse_make_group(kf_graph *g, kf_fuse_group *gr, const char *sym, const char *kind, kf_nid *copied,
			  uint32_t *ncopied)
{
	kf_ctx *c = g->ctx;
	order_group(g, gr);
	kf_nid last = gr->n[gr->nn - 1];
	kf_vid out = kf_res(g, last, 0);
	/* inputs: outside values the members read (small constants are
	 * copied in, except as a contraction operand, which the kernel loads) */
	kf_vid ins[MAXG * 3];
	uint32_t nin = 0;
	for (uint32_t i = 0; i < gr->nn; i++)
		for (uint32_t j = 0; j < kf_N(g, gr->n[i])->nin; j++) {
			kf_vid v = kf_in(g, gr->n[i], j);
			kf_nid d = kf_def(g, v);
			bool mm = kf_op(c, kf_N(g, gr->n[i])->op)->trait == KF_TRAIT_CONTRACTION;
			if (d != KF_NONE && member(gr, d))
				continue;
			if (d != KF_NONE && !mm && kf_fuse_const_embeddable(g, d))
				continue;
			bool seen = false;
			for (uint32_t k = 0; k < nin && !seen; k++)
				seen = ins[k] == v;
			if (!seen)
				ins[nin++] = v;
		}
	kf_tid rt = kf_V(g, out)->type;
	kf_nid f = kf_node_new(g, 0, last, KF_OP_FUSION, ins, nin, &rt, 1);
	kf_N(g, f)->sym = kf_intern_cstr(c, sym);
	kf_N(g, f)->loc = kf_N(g, last)->loc;
	kf_node_set_attr(g, f, kf_intern_cstr(c, "kind"), (kf_attrval){.kind = KF_ATTR_STR, .s = kf_intern_cstr(c, kind)});
	kf_bid b = kf_block_new(g, f);
	kf_N(g, f)->body = b;
	/* outer value -> body value */
	kf_vid from[MAXG * 4], to[MAXG * 4];
	uint32_t nmap = 0;
	for (uint32_t i = 0; i < nin; i++) {
		from[nmap] = ins[i];
		to[nmap++] = kf_block_add_arg(g, b, kf_V(g, ins[i])->type, 0);
	}
	for (uint32_t i = 0; i < gr->nn; i++) {
		kf_nid n = gr->n[i];
		uint32_t nn = kf_N(g, n)->nin;
		kf_vid opv[8];
		for (uint32_t j = 0; j < nn && j < 8; j++) {
			kf_vid v = kf_in(g, n, j);
			uint32_t k = 0;
			while (k < nmap && from[k] != v)
				k++;
			if (k == nmap) { /* an embedded constant */
				copied[(*ncopied)++] = kf_def(g, v);
				from[nmap] = v;
				to[nmap++] = kf_const_copy(g, b, v);
			}
			opv[j] = to[k];
		}
		kf_tid t = kf_V(g, kf_res(g, n, 0))->type;
		kf_nid m = kf_node_new(g, b, KF_NONE, kf_N(g, n)->op, opv, nn, &t, 1);
		const kf_node *x = kf_N(g, n);
		kf_node_set_attrs(g, m, x->attr, x->nattr);
		kf_N(g, m)->loc = kf_N(g, n)->loc;
		kf_V(g, kf_res(g, m, 0))->name = kf_V(g, kf_res(g, n, 0))->name;
		from[nmap] = kf_res(g, n, 0);
		to[nmap++] = kf_res(g, m, 0);
	}
	kf_vid y = to[nmap - 1];
	kf_node_new(g, b, KF_NONE, KF_OP_YIELD, &y, 1, NULL, 0);
	kf_V(g, kf_res(g, f, 0))->name = kf_V(g, out)->name;
	kf_replace_all_uses(g, out, kf_res(g, f, 0));
	for (uint32_t i = gr->nn; i-- > 0;)
		kf_node_erase(g, gr->n[i]);
	return f;
}

void kf_fuse_drop_dead_consts(kf_graph *g, const kf_nid *copied, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (!(kf_N(g, copied[i])->flags & KF_NODE_DEAD) && !kf_has_uses(g, kf_res(g, copied[i], 0)))
			kf_node_erase(g, copied[i]);
}

static const char *const opts[] = {"tf32", "single", "max-epilogue", NULL};

static int run(kf_graph *g, const kf_passopts *po, bool *changed)
{
	kf_ctx *c = g->ctx;
	int nerr = kf_nerrors(c);
	bool tf32 = kf_passopt_bool(c, po, "tf32", false), single = kf_passopt_bool(c, po, "single", true);
	int max_epi = (int)kf_passopt_int(c, po, "max-epilogue", 16);
	if (kf_nerrors(c) != nerr)
		return -1;
	if (max_epi < 0 || max_epi > 32) {
		kf_error(c, po->loc, "fuse-matmul: max-epilogue must be 0..32");
		return -1;
	}
	int made = 0, ops = 0;
	kf_nid *todo = malloc((g->nnode + 1) * sizeof *todo);
	uint32_t nt = 0;
	kf_foreach_node(g, 0, n) {
		int op = kf_N(g, n)->op;
		if (op == KF_OP_MATMUL || op == KF_OP_GEMM)
			todo[nt++] = n;
	}
	/* each contraction copies at most 3 constants per member in */
	kf_nid *copied = malloc((nt * MAXG * 3 + 1) * sizeof *copied);
	uint32_t ncopied = 0;
	for (uint32_t i = 0; i < nt; i++) {
		grp gr;
		collect(g, todo[i], max_epi, &gr);
		if (gr.nn == 1 && !single)
			continue;
		ops += (int)gr.nn;
		char sym[32];
		snprintf(sym, sizeof sym, "m%d", made++);
		kf_nid f = kf_fuse_make_group(g, &gr, sym, "contraction", copied, &ncopied);
		if (tf32)
			kf_node_set_attr(g, f, kf_intern_cstr(c, "tf32"), (kf_attrval){.kind = KF_ATTR_BOOL, .b = true});
	}
	free(todo);
	if (made) {
		kf_fuse_drop_dead_consts(g, copied, ncopied);
		*changed = true;
	}
	free(copied);
	if (po->log && made)
		kf_buf_printf(po->log, "fuse-matmul: @%s: %d contraction kernel%s from %d ops\n", kf_str(c, g->name), made,
			      made == 1 ? "" : "s", ops);
	return 0;
}

const kf_pass kf_pass_fuse_matmul = {
	.name = "fuse-matmul",
	.doc = "group each matmul/gemm with its element-wise prologue and epilogue into a contraction kernel",
	.opts = opts,
	.run = run,
};
