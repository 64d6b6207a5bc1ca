/* fuse_attention.c: the fuse-attention pass: scaled dot-product attention
 * written as primitive ops, as exporters write it, becomes one
 * `fusion @aN(...) {kind = "attention"}` node whose body keeps the ops, so
 * that the interpreter and the verifier read it as ordinary IR and a
 * backend runs it as one kernel (cuda/emit_attention.c).
 *
 * Option: tf32 (f32 attention may use tf32 tensor cores: sets the
 * fusion's tf32 attribute, as fuse-matmul{tf32} does for contractions;
 * kfuse-run --allow-tf32 sets it on the fusions too).
 *
 * requires: a verified graph with softmax as an op (rules{path=patterns}
 * turns the primitive spelling into one, and patterns/attention.lua moves
 * scales written on q and k after the first matmul); runs before
 * fuse-matmul and fuse, which leave fusion nodes alone.  keeps: values,
 * names, attributes and locations of the ops it moves.  breaks: nothing;
 * the fusion takes the place of its last op.
 *
 * What it recognises, anchored on each top-level softmax over the last
 * axis (every spelling of the issue reduces to this shape once the ops
 * are primitive):
 *
 *   q, k, v   <- prologues: layout ops the kernel reads through
 *                (transpose, reshape, broadcast_to, slice, split: k
 *                transposed into the contraction, k/v heads repeated for
 *                grouped-query attention), and on q scalar scaling and
 *                casts.  Each must be a strided view (core/view.h) whose
 *                rows are contiguous; the first op that is not stays
 *                outside.
 *   s  = matmul(q, k)
 *   s' = score chain: element-wise ops from s to the softmax's input,
 *        each with the scores' shape, reading s' and values from outside
 *        that broadcast into it: scaling by a constant before or after,
 *        division by sqrt(d), additive masks of any broadcastable shape,
 *        boolean masks through where with -inf or finfo.min, casts (the
 *        softmax in f32 of an f16 model), soft-capping
 *   p  = softmax(s', axis = -1), then casts
 *   o  = matmul(p, v)
 *   y  <- output chain: transposes and reshapes (written through a view),
 *        casts
 *
 * Every value inside except y must be read only inside (dropout is absent
 * in an eval export; the attention weights as an output stop it).  The
 * anatomy is core/attention.h's.  Masks: one computed by cheap element-wise
 * ops (from iotas, constants, a padding input) is copied into each
 * attention that reads it; a causal mask that arrives as a constant (the
 * importer folds triu, tril and comparisons of ranges) -- a mask of the
 * scores' last two dims that keeps column j of row i exactly when
 * j <= i + off, for one off >= 0 -- is rewritten as comparisons of two
 * iotas (op iota), equal element for element, so the kernel reads no mask
 * and skips the tiles above the diagonal.
 *
 * Symbolic dims (f32[B,12,T,T]): the anatomy is found on a copy of the
 * graph at generic sizes (passes.h's kf_graph_probe: the views are
 * strides, numbers), where it holds for every size, and the group is built
 * on the graph itself; the CUDA kernel reads the sizes as arguments.
 *
 * Cost: each softmax looks at the chains around it (bounded lengths), so
 * the pass is linear in the graph.  With KF_PASSF_EXPLAIN it says, at each
 * softmax it leaves alone, why.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "fusion.h"
#include "interp.h"
#include "passes.h"
#include "tensor.h"
#include "attention.h"

/* ---- causal masks ------------------------------------------------------------- */

/* The values of constant node d (inline or file()) through the
 * interpreter's const kernel; false when it cannot be read here. */
static bool const_values(kf_graph *g, kf_nid d, kf_tensor *t)
{
	const kf_opinfo *oi = kf_op(g->ctx, KF_OP_CONST);
	char err[256];
	memset(t, 0, sizeof *t);
	if (!oi->cpu || kf_tensor_alloc_type(t, kf_vtype(g, kf_res(g, d, 0))) != 0)
		return false;
	if (oi->cpu(g, d, NULL, 0, t, 1, err, sizeof err) != 0) {
		kf_tensor_free(t);
		return false;
	}
	return true;
}

/* Whether mask m (a tensor [1..., Tq, Tk]) keeps column j of row i exactly
 * when j <= i + off (keep = nonzero for a boolean mask, keep = 0 for an
 * additive one, whose other elements all hold *fill); 0 <= off < Tk - 1,
 * so that every row keeps a column and one is cut.  For a boolean mask,
 * *neg says that it is true where cut. */
static bool causal_off(const kf_tensor *m, bool additive, int64_t *off, bool *neg, double *fill)
{
	int r = m->rank;
	if (r < 2)
		return false;
	for (int d = 0; d < r - 2; d++)
		if (m->dim[d] != 1)
			return false;
	int64_t Tq = m->dim[r - 2], Tk = m->dim[r - 1];
	if (Tq < 1 || Tk < 2)
		return false;
	/* row 0 decides off (and the polarity): it keeps columns 0..off */
	bool first = additive ? kf_tensor_get(m, 0) == 0 : kf_tensor_get(m, 0) != 0;
	*neg = !additive && !first;
	int64_t k = 0;
	while (k < Tk && (additive ? kf_tensor_get(m, k) == 0 : (kf_tensor_get(m, k) != 0) != *neg))
		k++;
	if (k == 0 || k == Tk)
		return false;
	*off = k - 1;
	*fill = additive ? kf_tensor_get(m, k) : 0;
	if (additive && !(*fill < 0))
		return false;
	for (int64_t i = 0; i < Tq; i++)
		for (int64_t j = 0; j < Tk; j++) {
			double x = kf_tensor_get(m, i * Tk + j);
			bool keep = j <= i + *off;
			if (additive ? (keep ? x != 0 : x != *fill) : ((x != 0) != *neg) != keep)
				return false;
		}
	return true;
}

static kf_nid new_node(kf_graph *g, kf_nid before, int op, const kf_vid *in, uint32_t nin, const kf_type *t)
{
	kf_tid tid = kf_type_intern(g->ctx, t);
	kf_nid n = kf_node_new(g, 0, before, op, in, nin, &tid, 1);
	kf_N(g, n)->loc = kf_N(g, before)->loc;
	return n;
}

/* An iota of type t (i64) along axis, before node `before`. */
static kf_nid new_iota(kf_graph *g, kf_nid before, const kf_type *t, int axis)
{
	kf_ctx *c = g->ctx;
	kf_nid n = new_node(g, before, KF_OP_IOTA, NULL, 0, t);
	kf_attrval dims[KF_MAX_RANK];
	for (int i = 0; i < t->rank; i++) /* a symbolic dim by its name ("seq", "2*seq") */
		dims[i] = KF_IS_SYM(t->dim[i]) ? (kf_attrval){.kind = KF_ATTR_STR, .s = KF_SYM_SID(t->dim[i])}
					       : (kf_attrval){.kind = KF_ATTR_INT, .i = t->dim[i]};
	kf_attrval list = {.kind = KF_ATTR_LIST, .n = t->rank, .list = dims};
	kf_node_set_attr(g, n, kf_intern_cstr(c, "shape"), kf_attrval_copy(g, &list));
	kf_node_set_attr(g, n, kf_intern_cstr(c, "axis"), (kf_attrval){.kind = KF_ATTR_INT, .i = axis});
	kf_node_set_attr(g, n, kf_intern_cstr(c, "dtype"),
			 (kf_attrval){.kind = KF_ATTR_STR, .s = kf_intern_cstr(c, kf_dtype_name((kf_dtype)t->dtype))});
	return n;
}

/* The constant whose leading block m is: m itself a constant, or slices
 * of one that all start at 0 with step 1 (GPT-2's bias[:, :, :T, :T],
 * whose T may be symbolic); KF_NONE otherwise. */
static kf_nid prefix_const(const kf_graph *g, kf_vid m)
{
	for (int depth = 0; depth < 8; depth++) {
		kf_nid d = kf_def(g, m);
		if (d == KF_NONE)
			return KF_NONE;
		if (kf_N(g, d)->op == KF_OP_CONST)
			return kf_type_is_static(kf_vtype(g, m)) ? d : KF_NONE;
		if (kf_N(g, d)->op != KF_OP_SLICE)
			return KF_NONE;
		int64_t st[KF_MAX_RANK], sp[KF_MAX_RANK];
		kf_slice_geom(g, d, st, sp);
		for (int i = 0; i < kf_vtype(g, m)->rank; i++)
			if (st[i] != 0 || sp[i] != 1)
				return KF_NONE;
		m = kf_in(g, d, 0);
	}
	return KF_NONE;
}

/* Replaces each constant causal mask the score chain reads by comparisons
 * of two iotas placed before its reader; the new nodes are added to *extra
 * and their reader to *reader (they join the group).  Equal element for element, so nothing changes
 * but where the mask comes from.  A leading block of a causal constant (a
 * slice from the origin: prefix_const) is causal with the same offset,
 * whatever its size. */
static void causal_masks(kf_att *a, kf_nid *extra, kf_nid *reader, int *nextra)
{
	kf_graph *g = a->g;
	kf_ctx *c = g->ctx;
	for (int i = 0; i < a->score.nn; i++) {
		kf_nid n = a->score.n[i];
		/* node and type pointers move as nodes and types are made: ids */
		int op = kf_N(g, n)->op;
		kf_vid chainv = i ? kf_res(g, a->score.n[i - 1], 0) : kf_res(g, a->mm1, 0);
		for (uint32_t j = 0; j < kf_N(g, n)->nin; j++) {
			kf_vid m = kf_in(g, n, j);
			kf_nid d = prefix_const(g, m);
			bool additive = op == KF_OP_ADD, cond = op == KF_OP_WHERE && j == 0;
			if (m == chainv || d == KF_NONE || (!additive && !cond))
				continue;
			const kf_type mtv = *kf_vtype(g, m), *mt = &mtv;
			if (additive != kf_dtype_is_float((kf_dtype)mt->dtype))
				continue;
			kf_tensor t;
			int64_t off;
			bool neg;
			double fill;
			if (!const_values(g, d, &t))
				continue;
			bool ok = causal_off(&t, additive, &off, &neg, &fill);
			kf_tensor_free(&t);
			if (!ok || *nextra + 8 > KF_ATT_CHAIN)
				continue;
			kf_type it = *mt;
			it.dtype = KF_I64;
			kf_nid row = new_iota(g, n, &it, it.rank - 2), col = new_iota(g, n, &it, it.rank - 1);
			extra[(*nextra)++] = row;
			extra[(*nextra)++] = col;
			kf_vid rv = kf_res(g, row, 0);
			if (off) {
				kf_type st = kf_type_make(KF_I64, 0, NULL);
				kf_vid in[2] = {rv, kf_fold_splat(g, n, kf_type_intern(c, &st), (double)off)};
				kf_nid sh = new_node(g, n, KF_OP_ADD, in, 2, &it);
				extra[(*nextra)++] = sh;
				rv = kf_res(g, sh, 0);
			}
			kf_type bt = *mt;
			bt.dtype = KF_I1;
			kf_vid cin[2] = {kf_res(g, col, 0), rv};
			kf_nid cmp = new_node(g, n, neg ? KF_OP_GT : KF_OP_LE, cin, 2, &bt);
			extra[(*nextra)++] = cmp;
			kf_vid mask = kf_res(g, cmp, 0);
			if (additive) {
				kf_type st = kf_type_make((kf_dtype)mt->dtype, 0, NULL);
				kf_tid sid = kf_type_intern(c, &st);
				kf_vid win[3] = {mask, kf_fold_splat(g, n, sid, 0.0), kf_fold_splat(g, n, sid, fill)};
				kf_nid w = new_node(g, n, KF_OP_WHERE, win, 3, mt);
				extra[(*nextra)++] = w;
				mask = kf_res(g, w, 0);
			}
			for (int e = 0; e < *nextra; e++)
				if (reader[e] == KF_NONE)
					reader[e] = n;
			kf_V(g, mask)->name = kf_V(g, m)->name;
			kf_set_operand(g, n, j, mask);
			/* the mask, and the slices it came through, nobody else reads */
			for (kf_nid e = kf_def(g, m); e != KF_NONE && !kf_has_uses(g, kf_res(g, e, 0));) {
				kf_nid up = kf_N(g, e)->op == KF_OP_SLICE ? kf_def(g, kf_in(g, e, 0)) : KF_NONE;
				kf_node_erase(g, e);
				e = up;
			}
		}
	}
}

/* ---- masks computed in the kernel ------------------------------------------------ */

#define FREE_MAX 16

/* The nodes of v's producer tree, leaves excluded: cheap element-wise ops
 * (no transcendental, no division) and iotas, at most FREE_MAX, whose
 * leaves are constants or values from elsewhere; false when v has none or
 * an op of another kind. */
static bool mask_tree(const kf_graph *g, kf_vid v, kf_nid *t, int *nt, int depth)
{
	kf_nid d = kf_def(g, v);
	if (d == KF_NONE || depth > 8)
		return depth > 0;
	const kf_node *x = kf_N(g, d);
	int tr = kf_op(g->ctx, x->op)->trait;
	bool ew = (tr == KF_TRAIT_ELEMENTWISE || tr == KF_TRAIT_BROADCAST) && x->op != KF_OP_BROADCAST_TO &&
		  x->nres == 1 && !kf_fuse_op_expensive(x->op);
	if (x->op == KF_OP_CONST || (!ew && x->op != KF_OP_IOTA))
		return depth > 0; /* a leaf, read as it is */
	for (int i = 0; i < *nt; i++)
		if (t[i] == d)
			return true;
	for (uint32_t i = 0; i < x->nin; i++)
		if (!mask_tree(g, kf_in(g, d, i), t, nt, depth + 1))
			return false;
	if (*nt == FREE_MAX)
		return false;
	t[(*nt)++] = d; /* after its operands */
	return true;
}

/* Whether mask tree t (nodes of mask_tree) reads a value other than a
 * constant (a graph input, a value computed elsewhere). */
static bool reads_data(const kf_graph *g, const kf_nid *t, int nt)
{
	for (int k = 0; k < nt; k++)
		for (uint32_t i = 0; i < kf_N(g, t[k])->nin; i++) {
			kf_nid d = kf_def(g, kf_in(g, t[k], i));
			bool inside = false;
			for (int q = 0; q < nt && !inside; q++)
				inside = t[q] == d;
			if (!inside && (d == KF_NONE || kf_N(g, d)->op != KF_OP_CONST))
				return true;
		}
	return false;
}

/* A mask the score chain reads that cheap element-wise ops compute (from
 * iotas: causal, banded, sliding windows) is copied into the group: its
 * nodes are cloned before the reader, the originals stay for other readers
 * (and go when none is left).  The kernel computes the mask where it needs
 * it instead of a kernel writing it for every attention to read, and a
 * causal mask in the form below is recognised there.  Not a mask that
 * reads data and is the same for every query row (BERT's padding, (1 - m)
 * * -10000 of an i64 input [B, 1, 1, T]): in the kernel it was a load, an
 * i64 conversion (on the exp's own unit) and two flops a score, where the
 * mask outside is one small kernel, shared by the layers, and the kernel
 * loads a value a score. */
static void clone_masks(kf_att *a, kf_nid *extra, kf_nid *reader, int *nextra)
{
	kf_graph *g = a->g;
	for (int i = 0; i < a->score.nn; i++) {
		kf_nid n = a->score.n[i];
		kf_vid chainv = i ? kf_res(g, a->score.n[i - 1], 0) : kf_res(g, a->mm1, 0);
		for (uint32_t j = 0; j < kf_N(g, n)->nin; j++) {
			kf_vid m = kf_in(g, n, j);
			kf_nid t[FREE_MAX];
			int nt = 0;
			if (m == chainv || !mask_tree(g, m, t, &nt, 0) || !nt || *nextra + nt > KF_ATT_CHAIN)
				continue;
			const kf_type *mt = kf_vtype(g, m);
			if (reads_data(g, t, nt) && (mt->rank < 2 || mt->dim[mt->rank - 2] == 1))
				continue;
			kf_vid from[FREE_MAX], to[FREE_MAX];
			for (int k = 0; k < nt; k++) {
				const kf_node *x = kf_N(g, t[k]);
				kf_vid in[3];
				for (uint32_t o = 0; o < x->nin && o < 3; o++) {
					in[o] = kf_in(g, t[k], o);
					for (int q = 0; q < k; q++)
						if (from[q] == in[o])
							in[o] = to[q];
				}
				kf_nid c = new_node(g, n, x->op, in, x->nin, kf_vtype(g, kf_res(g, t[k], 0)));
				x = kf_N(g, t[k]);
				kf_node_set_attrs(g, c, x->attr, x->nattr);
				kf_N(g, c)->loc = x->loc;
				kf_V(g, kf_res(g, c, 0))->name = kf_V(g, kf_res(g, t[k], 0))->name;
				from[k] = kf_res(g, t[k], 0);
				to[k] = kf_res(g, c, 0);
				reader[*nextra] = n;
				extra[(*nextra)++] = c;
			}
			kf_set_operand(g, n, j, to[nt - 1]);
			/* the originals nobody else reads go (users before operands) */
			for (int k = nt; k-- > 0;)
				if (!kf_has_uses(g, kf_res(g, t[k], 0)))
					kf_node_erase(g, t[k]);
		}
	}
}

/* ---- the pass ---------------------------------------------------------------------- */

static void explain(kf_buf *log, const kf_graph *g, kf_nid n, const char *why)
{
	kf_loc l = kf_N(g, n)->loc;
	if (l.src == KF_NONE) {
		kf_buf_printf(log, "@%s: ", kf_str(g->ctx, g->name));
	} else {
		int line, col;
		kf_source_linecol(g->ctx, l.src, l.off, &line, &col);
		kf_buf_printf(log, "%s:%d:%d: ", kf_source_name(g->ctx, l.src), line, col);
	}
	kf_buf_printf(log, "not attention: %s\n", why);
}

/* Sorts a group's nodes into program order (pos: positions; a group is
 * at most a few hundred nodes). */
static void sort_by_pos(kf_nid *m, int n, const int64_t *pos)
{
	for (int i = 1; i < n; i++) {
		kf_nid x = m[i];
		int j = i;
		for (; j > 0 && pos[m[j - 1]] > pos[x]; j--)
			m[j] = m[j - 1];
		m[j] = x;
	}
}

/* The next free fusion symbol a<N>. */
static int first_index(const kf_graph *g)
{
	int next = 0;
	for (uint32_t n = 0; n < g->nnode; n++) {
		const kf_node *x = kf_N(g, n);
		if (x->op != KF_OP_FUSION || (x->flags & KF_NODE_DEAD) || !x->sym)
			continue;
		const char *s = kf_str(g->ctx, x->sym);
		if (s[0] == 'a' && s[1] >= '0' && s[1] <= '9' && atoi(s + 1) >= next)
			next = atoi(s + 1) + 1;
	}
	return next;
}

/* Collects the group's nodes (and the causal masks' new ones) in program
 * order and outlines them. */
static kf_nid build(kf_att *a, int index, int64_t **pos, uint32_t *npos)
{
	kf_graph *g = a->g;
	kf_nid mem[KF_ATT_CHAIN * 8 + 8], extra[KF_ATT_CHAIN], reader[KF_ATT_CHAIN];
	int nm = 0, ne = 0;
	for (int i = 0; i < KF_ATT_CHAIN; i++)
		reader[i] = KF_NONE;
	clone_masks(a, extra, reader, &ne);
	causal_masks(a, extra, reader, &ne);
	/* node ids of new nodes lie past the positions computed at the start:
	 * each takes its reader's position, less one, which keeps them before
	 * it and, the sort being stable, in the order they were made */
	if (g->nnode > *npos) {
		*pos = realloc(*pos, (g->nnode + 1) * sizeof **pos);
		*npos = g->nnode;
	}
	for (int i = 0; i < ne; i++)
		(*pos)[extra[i]] = (*pos)[reader[i]] - 1;
	const kf_att_chain *cs[] = {&a->pro[0], &a->pro[1], &a->pro[2], &a->score, &a->prob, &a->out};
	for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++)
		for (int i = 0; i < cs[k]->nn; i++) {
			bool dup = false;
			for (int j = 0; j < nm && !dup; j++)
				dup = mem[j] == cs[k]->n[i];
			if (!dup)
				mem[nm++] = cs[k]->n[i];
		}
	mem[nm++] = a->mm1;
	mem[nm++] = a->sm;
	mem[nm++] = a->mm2;
	for (int i = 0; i < ne; i++)
		mem[nm++] = extra[i];
	sort_by_pos(mem, nm, *pos);
	char name[32];
	snprintf(name, sizeof name, "a%d", index);
	return kf_pass_outline(g, mem, (uint32_t)nm, kf_att_result(a), "attention", kf_intern_cstr(g->ctx, name));
}

/* A top-level matmul whose scores reach an exp or a reduce_max through
 * element-wise ops: a softmax written as primitive ops. */
static bool primitive_softmax(const kf_graph *g, kf_nid mm)
{
	kf_vid v = kf_res(g, mm, 0);
	for (int i = 0; i < KF_ATT_CHAIN; i++) {
		kf_nid u = KF_NONE;
		kf_foreach_use(g, v, x) {
			int op = kf_N(g, g->use[x].user)->op;
			if (op == KF_OP_EXP || op == KF_OP_REDUCE_MAX)
				return true;
			u = g->use[x].user;
		}
		int t = u == KF_NONE ? -1 : kf_op(g->ctx, kf_N(g, u)->op)->trait;
		if (t != KF_TRAIT_ELEMENTWISE && t != KF_TRAIT_BROADCAST)
			return false;
		v = kf_res(g, u, 0);
	}
	return false;
}

/* Every node of a's anatomy is still a top-level node of a->g (no
 * attention built before moved it into its body). */
static bool members_live(const kf_att *a)
{
	const kf_graph *g = a->g;
	const kf_att_chain *cs[] = {&a->pro[0], &a->pro[1], &a->pro[2], &a->score, &a->prob, &a->out};
	kf_nid one[3] = {a->mm1, a->sm, a->mm2};
	for (size_t k = 0; k < sizeof cs / sizeof cs[0] + 1; k++)
		for (int i = 0; i < (k < 6 ? cs[k]->nn : 3); i++) {
			kf_nid n = k < 6 ? cs[k]->n[i] : one[i];
			if (n >= g->nnode || (kf_N(g, n)->flags & KF_NODE_DEAD) || kf_N(g, n)->blk != 0)
				return false;
		}
	return true;
}

static const char *const opts[] = {"tf32", NULL};

static int run(kf_graph *g, const kf_passopts *po, bool *changed)
{
	bool why = po->log && (po->flags & KF_PASSF_EXPLAIN);
	int nerr = kf_nerrors(g->ctx);
	bool tf32 = kf_passopt_bool(g->ctx, po, "tf32", false);
	if (kf_nerrors(g->ctx) != nerr)
		return -1;
	uint32_t npos = g->nnode, nsm = 0;
	int64_t *pos = malloc((npos + 1) * sizeof *pos);
	kf_nid *todo = malloc((npos + 1) * sizeof *todo);
	int64_t p = 0;
	kf_foreach_node(g, 0, n) {
		pos[n] = p += 2;
		int op = kf_N(g, n)->op;
		if (op == KF_OP_SOFTMAX)
			todo[nsm++] = n;
		else if (why && op == KF_OP_MATMUL && primitive_softmax(g, n))
			explain(po->log, g, n, "the scores go into a softmax written as primitive ops (run "
					       "rules{path=patterns} before fuse-attention)");
	}
	int made = 0, index = first_index(g);
	kf_att a;
	/* symbolic dims: recognised on a copy at generic sizes (the views of
	 * q, k and v are strides, numbers: kf_graph_probe), built on g, whose
	 * nodes have the same ids as long as no attention built before took
	 * them (then it is left alone) */
	kf_graph *pg = kf_graph_probe(g, NULL, NULL, NULL);
	for (uint32_t i = 0; i < nsm; i++) {
		if (!kf_att_recognise(pg ? pg : g, todo[i], &a)) {
			if (why)
				explain(po->log, g, todo[i], a.why);
			continue;
		}
		a.g = g;
		if (pg && !members_live(&a)) {
			if (why)
				explain(po->log, g, todo[i], "it shares ops with an attention before it");
			continue;
		}
		/* f32 operands may go through tf32 tensor cores (as fuse-matmul's
		 * option says for contractions) */
		bool f32 = kf_vtype(g, kf_att_operand(&a, 0))->dtype == KF_F32;
		kf_nid f = build(&a, index++, &pos, &npos);
		if (tf32 && f32 && f != KF_NONE)
			kf_node_set_attr(g, f, kf_intern_cstr(g->ctx, "tf32"), (kf_attrval){.kind = KF_ATTR_BOOL, .b = true});
		made++;
	}
	if (pg)
		kf_graph_free(pg);
	free(pos);
	free(todo);
	if (made)
		*changed = true;
	if (po->log && made)
		kf_buf_printf(po->log, "fuse-attention: @%s: %d attention kernel%s\n", kf_str(g->ctx, g->name), made,
			      made == 1 ? "" : "s");
	return 0;
}

const kf_pass kf_pass_fuse_attention = {
	.name = "fuse-attention",
	.doc = "group scaled dot-product attention (matmul, scale, mask, softmax, matmul) into one attention kernel",
	.run = run,
	.opts = opts,
};
