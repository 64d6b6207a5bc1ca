/* fuse_explain.c: what the fuse pass decides with: which ops fuse, how a
 * reduction splits into rows or columns and how values index them (shared
 * with the emitter); the reshapes a reduction kernel leaves outside as
 * aliases and the legality of column groups; --explain-fusion (why each
 * producer -> consumer edge did not fuse); and the topological re-sort the
 * pass ends with. */
#include <stdlib.h>
#include <string.h>
#include "fuse_int.h"

/* ---- classification (shared with the emitter) -------------------------------- */

bool kf_fuse_op_expensive(int op)
{
	switch (op) {
	case KF_OP_EXP: case KF_OP_LOG: case KF_OP_TANH: case KF_OP_SIGMOID: case KF_OP_GELU:
	case KF_OP_ERF: case KF_OP_SILU: case KF_OP_POW: case KF_OP_SQRT: case KF_OP_RSQRT:
	case KF_OP_DIV:
		return true;
	default:
		return op >= KF_NBUILTIN;
	}
}

bool kf_fuse_const_embeddable(const kf_graph *g, kf_nid n)
{
	const kf_node *x = kf_N(g, n);
	if (x->op != KF_OP_CONST || !x->cst || x->cst->kind == KF_CONST_FILE)
		return false;
	const kf_type *t = kf_vtype(g, x->res0);
	return kf_type_is_static(t) && (x->cst->n == 1 || x->cst->n <= KF_FUSE_EMBED_MAX);
}

bool kf_fuse_node_static(const kf_graph *g, kf_nid n)
{
	const kf_node *x = kf_N(g, n);
	for (uint32_t i = 0; i < x->nin; i++)
		if (!kf_type_is_static(kf_vtype(g, kf_in(g, n, i))))
			return false;
	for (uint32_t i = 0; i < x->nres; i++)
		if (!kf_type_is_static(kf_vtype(g, x->res0 + i)))
			return false;
	return true;
}

static int norm_axis(int64_t ax, int rank)
{
	if (ax < 0)
		ax += rank;
	return ax < 0 ? 0 : ax > rank ? rank : (int)ax;
}

bool kf_fuse_row_split(const kf_graph *g, kf_nid n, int *pa, int64_t *R, int64_t *C)
{
	const kf_node *x = kf_N(g, n);
	if (x->nin < 1)
		return false;
	const kf_type *F = kf_vtype(g, kf_in(g, n, 0));
	int r = F->rank, a;
	switch (x->op) {
	case KF_OP_REDUCE_SUM: case KF_OP_REDUCE_MEAN: case KF_OP_REDUCE_MAX: case KF_OP_REDUCE_MIN: {
		int64_t ax[KF_MAX_RANK];
		int na = kf_attr_ints(g, n, "axes", ax, KF_MAX_RANK);
		bool on[KF_MAX_RANK] = {0};
		if (na <= 0) {
			for (int d = 0; d < r; d++)
				on[d] = true;
		} else {
			if (na > KF_MAX_RANK)
				return false;
			for (int i = 0; i < na; i++) {
				int64_t v = ax[i] < 0 ? ax[i] + r : ax[i];
				if (v < 0 || v >= r)
					return false;
				on[v] = true;
			}
		}
		/* trailing: once an axis is reduced, every later one is too, except
		 * dims of size 1, which do not change the layout */
		a = r;
		while (a > 0 && (on[a - 1] || F->dim[a - 1] == 1))
			a--;
		for (int d = 0; d < a; d++)
			if (on[d] && F->dim[d] != 1)
				return false;
		break;
	}
	case KF_OP_SOFTMAX: case KF_OP_LOG_SOFTMAX:
		a = norm_axis(kf_attr_int(g, n, "axis", -1), r);
		/* one axis: trailing when every dim after it is 1 */
		for (int d = a + 1; d < r; d++)
			if (F->dim[d] != 1)
				return false;
		break;
	case KF_OP_LAYER_NORM:
		a = norm_axis(kf_attr_int(g, n, "axis", -1), r);
		break;
	default:
		return false;
	}
	int64_t rr = 1, cc = 1;
	for (int d = 0; d < r; d++) {
		if (F->dim[d] < 0)
			return false;
		if (d < a)
			rr *= F->dim[d];
		else
			cc *= F->dim[d];
	}
	*pa = a;
	*R = rr;
	*C = cc;
	return true;
}

kf_fuse_kind kf_fuse_kind_of(const kf_graph *g, kf_nid n)
{
	const kf_node *x = kf_N(g, n);
	if (x->op == KF_OP_CONST)
		return KF_FK_CONST;
	if (x->op == KF_OP_FUSION || x->op == KF_OP_RETURN || x->op == KF_OP_YIELD)
		return KF_FK_NONE;
	if (!kf_fuse_node_static(g, n))
		return KF_FK_NONE;
	const kf_opinfo *oi = kf_op(g->ctx, x->op);
	switch (oi->trait) {
	case KF_TRAIT_ELEMENTWISE: case KF_TRAIT_BROADCAST: case KF_TRAIT_INJECTIVE:
		if (x->op >= KF_NBUILTIN && !oi->cuda)
			return KF_FK_NONE;
		return KF_FK_LOOP;
	case KF_TRAIT_REDUCE: {
		int a;
		if (x->op >= KF_NBUILTIN)
			return KF_FK_NONE; /* a plugin's reduction (a Lua op{}): no kernel template */
		int64_t R, C;
		return kf_fuse_row_split(g, n, &a, &R, &C) ? KF_FK_ROW : KF_FK_REDUCE;
	}
	default:
		return KF_FK_NONE;
	}
}

kf_rowclass kf_fuse_rowclass(const kf_type *F, int a, const kf_type *t, bool elem)
{
	int r = F->rank, s = t->rank;
	if (!elem && s == a) {
		bool same = true;
		for (int d = 0; d < a; d++)
			same = same && t->dim[d] == F->dim[d];
		if (same && s > 0)
			return KF_RC_ROW;
	}
	if (s > r)
		return KF_RC_BAD;
	bool full = true, scalar = true, row = true, col = true;
	for (int d = 0; d < r; d++) {
		int64_t td = d < r - s ? 1 : t->dim[d - (r - s)];
		int64_t fd = F->dim[d];
		bool eq = td == fd, one = td == 1;
		full = full && eq;
		scalar = scalar && one;
		row = row && (d < a ? eq : one);
		col = col && (d < a ? one : eq);
	}
	if (full)
		return KF_RC_FULL;
	if (scalar)
		return KF_RC_SCALAR;
	if (row)
		return KF_RC_ROW;
	if (col)
		return KF_RC_COL;
	return KF_RC_BAD;
}

/* dim d of t aligned to a rank-r shape from the right (1 where t has none) */
static int64_t aligned_dim(const kf_type *t, int r, int d)
{
	return d < r - t->rank ? 1 : t->dim[d - (r - t->rank)];
}

kf_colclass kf_fuse_colclass(const kf_type *F, unsigned S, const kf_type *t)
{
	if (t->rank > F->rank)
		return KF_CC_BAD;
	bool elem = false;
	for (int d = 0; d < F->rank; d++) {
		int64_t td = aligned_dim(t, F->rank, d);
		if (td != F->dim[d] && td != 1)
			return KF_CC_BAD;
		elem = elem || ((S >> d & 1) && td != 1);
	}
	return elem ? KF_CC_ELEM : KF_CC_OUT;
}

bool kf_fuse_col_writable(const kf_type *F, unsigned S, const kf_type *t)
{
	kf_colclass k = kf_fuse_colclass(F, S, t);
	if (k == KF_CC_BAD || t->rank > F->rank)
		return false;
	for (int d = 0; d < F->rank; d++) {
		int64_t want = k == KF_CC_ELEM || !(S >> d & 1) ? F->dim[d] : 1;
		if (aligned_dim(t, F->rank, d) != want)
			return false;
	}
	return true;
}

bool kf_fuse_col_split(const kf_graph *g, kf_nid n, unsigned *S, int64_t *M, int64_t *L)
{
	const kf_node *x = kf_N(g, n);
	if ((x->op != KF_OP_REDUCE_SUM && x->op != KF_OP_REDUCE_MEAN && x->op != KF_OP_REDUCE_MAX &&
	     x->op != KF_OP_REDUCE_MIN) || x->nin < 1 || x->nres != 1 || !kf_fuse_node_static(g, n))
		return false;
	const kf_type *F = kf_vtype(g, kf_in(g, n, 0));
	/* integer means and wrapping sums stay with the generic kernel */
	if (!kf_dtype_is_float((kf_dtype)F->dtype))
		return false;
	int64_t ax[KF_MAX_RANK];
	int na = kf_attr_ints(g, n, "axes", ax, KF_MAX_RANK);
	if (na > KF_MAX_RANK)
		return false;
	bool on[KF_MAX_RANK] = {0};
	for (int d = 0; d < F->rank; d++)
		on[d] = na <= 0;
	for (int i = 0; i < na; i++) {
		int64_t v = ax[i] < 0 ? ax[i] + F->rank : ax[i];
		if (v < 0 || v >= F->rank)
			return false;
		on[v] = true;
	}
	unsigned s = 0;
	int64_t m = 1, l = 1;
	for (int d = 0; d < F->rank; d++) {
		if (on[d] && F->dim[d] != 1) {
			s |= 1u << d;
			l *= F->dim[d];
		} else {
			m *= F->dim[d];
		}
	}
	/* the result must be the thread's own column where F-aligned values
	 * read it: keepdims, or only leading dims reduced */
	if (!kf_fuse_col_writable(F, s, kf_vtype(g, x->res0)) ||
	    kf_fuse_colclass(F, s, kf_vtype(g, x->res0)) != KF_CC_OUT)
		return false;
	*S = s;
	*M = m;
	*L = l;
	return true;
}

/* ---- boundary views, column groups (the pass's checks) ---------------------- */

/* Marks the reshapes of the merged group that sit on its boundary: those
 * whose operand comes from outside (input views) and those whose users are
 * all outside (output views).  A row or column kernel cannot index through
 * a reshape, but it need not: it reads the reshape's result, an alias of the
 * operand's buffer (the runtime launches nothing for a reshape), and writes
 * the buffer an output view aliases.  So these stay outside the fusion node;
 * a reshape inside, between two ops of the kernel, is refused. */
void kf_fuse_mark_views(fz *z, uint32_t ga, uint32_t gb)
{
	kf_graph *g = z->g;
	uint32_t lo = z->minpos[ga] < z->minpos[gb] ? z->minpos[ga] : z->minpos[gb];
	uint32_t hi = z->maxpos[ga] > z->maxpos[gb] ? z->maxpos[ga] : z->maxpos[gb];
	for (uint32_t p = lo; p <= hi; p++) {
		kf_nid n = z->order[p];
		if (fz_member(z, p, ga, gb) && kf_N(g, n)->op == KF_OP_RESHAPE &&
		    !fz_rmember(z, fz_pos_of(z, kf_in(g, n, 0)), ga, gb))
			z->vw[p] = z->vepoch;
	}
	for (uint32_t p = hi + 1; p-- > lo;) {
		kf_nid n = z->order[p];
		if (!fz_member(z, p, ga, gb) || kf_N(g, n)->op != KF_OP_RESHAPE || z->vw[p] == z->vepoch)
			continue;
		bool out = true;
		kf_foreach_use(g, kf_res(g, n, 0), u) {
			kf_nid un = g->use[u].user;
			if (kf_N(g, un)->blk == 0 && fz_rmember(z, kf_fuse_pos(z, un), ga, gb))
				out = false;
		}
		if (out)
			z->vw[p] = z->vepoch;
	}
}

/* Checks that every op of the merged group can run in a column kernel over
 * F with reduced dims S (fuse.h): reductions of F over S, element-wise ops
 * on F-aligned values, and outputs that each thread writes alone. */
kf_fuse_reason kf_fuse_check_col(fz *z, uint32_t ga, uint32_t gb, kf_tid FT, unsigned S)
{
	kf_graph *g = z->g;
	kf_type F = *kf_type_get(g->ctx, FT);
	int nred = 0;
	kf_fuse_mark_views(z, ga, gb);
	uint32_t lo = z->minpos[ga] < z->minpos[gb] ? z->minpos[ga] : z->minpos[gb];
	uint32_t hi = z->maxpos[ga] > z->maxpos[gb] ? z->maxpos[ga] : z->maxpos[gb];
	for (uint32_t p = lo; p <= hi; p++) {
		if (!fz_rmember(z, p, ga, gb))
			continue;
		kf_nid n = z->order[p];
		const kf_node *x = kf_N(g, n);
		if (z->kind[p] == FZ_COL) {
			unsigned s2 = 0;
			int64_t M, L;
			kf_fuse_col_split(g, n, &s2, &M, &L);
			if (!fz_same_dims(g, kf_V(g, kf_in(g, n, 0))->type, FT) || s2 != S)
				return KF_FR_SHAPE_MISMATCH;
			/* each dependent reduction is one more pass over the input */
			if (++nred > KF_FUSE_MAX_REDUCTIONS)
				return KF_FR_TOO_MANY_NODES;
		} else if (x->nres != 1 || x->op == KF_OP_RESHAPE ||
			   (kf_op(g->ctx, x->op)->trait == KF_TRAIT_INJECTIVE && x->op != KF_OP_BROADCAST_TO)) {
			return KF_FR_SHAPE_MISMATCH;
		}
		if (kf_fuse_colclass(&F, S, kf_vtype(g, x->res0)) == KF_CC_BAD)
			return KF_FR_SHAPE_MISMATCH;
		for (uint32_t i = 0; i < x->nin; i++) {
			kf_vid v = kf_in(g, n, i);
			if (kf_fuse_colclass(&F, S, kf_vtype(g, v)) == KF_CC_BAD)
				return fz_rmember(z, fz_pos_of(z, v), ga, gb) ? KF_FR_REDUCE_THEN_BROADCAST_MISMATCH
									 : KF_FR_SHAPE_MISMATCH;
		}
		if (fz_outside_user(z, x->res0, ga, gb) && !kf_fuse_col_writable(&F, S, kf_vtype(g, x->res0)))
			return KF_FR_SHAPE_MISMATCH;
	}
	return KF_FR_NONE;
}

/* The shape F and reduced dims S of a merge with a column group: a row
 * group does not mix with it, and two column groups must agree. */
kf_fuse_reason kf_fuse_merged_colshape(fz *z, uint32_t ga, uint32_t gb, kf_tid *F, unsigned *S)
{
	if (z->gkind[ga] == G_ROW || z->gkind[gb] == G_ROW)
		return KF_FR_SHAPE_MISMATCH;
	uint32_t c = z->gkind[ga] == G_COL ? ga : gb, o = c == ga ? gb : ga;
	*F = z->rowT[c];
	*S = z->colS[c];
	if (z->gkind[o] == G_COL && (!fz_same_dims(z->g, z->rowT[o], *F) || z->colS[o] != *S))
		return KF_FR_SHAPE_MISMATCH;
	return KF_FR_NONE;
}

/* Leaves the boundary reshapes of row and column groups outside them (see
 * kf_fuse_mark_views); a group's root may be one, so roots are found by
 * find(). */
void kf_fuse_detach_views(fz *z)
{
	for (uint32_t p = 0; p < z->n; p++) {
		if (!z->kind[p] || kf_fuse_find(z, p) != p || z->gkind[p] == G_LOOP)
			continue;
		z->vepoch++;
		kf_fuse_mark_views(z, p, p);
		for (uint32_t q = z->minpos[p]; q <= z->maxpos[p]; q++)
			if (z->vw[q] == z->vepoch) {
				z->kind[q] = 0;
				z->view[q] = 1;
				z->size[p]--;
			}
	}
	z->vepoch++;
}

static void put_value(kf_buf *b, const kf_graph *g, kf_vid v)
{
	kf_sid s = kf_V(g, v)->name;
	if (s) {
		kf_buf_printf(b, "%%%s", kf_str(g->ctx, s));
		kf_nid d = kf_def(g, v);
		if (d != KF_NONE && kf_N(g, d)->nres > 1)
			kf_buf_printf(b, "#%u", kf_V(g, v)->idx);
	} else {
		kf_buf_printf(b, "%%<value %u>", v);
	}
}

static void put_loc(kf_buf *b, const kf_graph *g, kf_loc l)
{
	if (l.src == KF_NONE) {
		kf_buf_printf(b, "@%s: ", kf_str(g->ctx, g->name));
		return;
	}
	int line, col;
	kf_source_linecol(g->ctx, l.src, l.off, &line, &col);
	kf_buf_printf(b, "%s:%d:%d: ", kf_source_name(g->ctx, l.src), line, col);
}

void kf_fuse_explain(fz *z, kf_buf *log)
{
	kf_graph *g = z->g;
	for (uint32_t pc = 0; pc < z->n; pc++) {
		kf_nid nc = z->order[pc];
		const kf_node *x = kf_N(g, nc);
		if (x->op == KF_OP_RETURN)
			continue; /* a graph output is not a kernel edge */
		for (uint32_t i = 0; i < x->nin; i++) {
			kf_uid u = x->in0 + i;
			kf_vid v = g->use[u].value;
			kf_nid np = kf_def(g, v);
			if (np == KF_NONE || kf_N(g, np)->blk != 0)
				continue;
			uint32_t pp = kf_fuse_pos(z, np);
			if (z->ckind[pp] == KF_FK_CONST)
				continue;
			if (z->kind[pp] && z->kind[pc] && kf_fuse_find(z, pp) == kf_fuse_find(z, pc))
				continue;
			/* a reshape left at a kernel's boundary is an alias, not a kernel */
			if (z->view[pp] || z->view[pc])
				continue;
			kf_fuse_reason r = (kf_fuse_reason)z->why[u];
			if (r == KF_FR_NONE)
				r = KF_FR_OPAQUE_OP;
			put_loc(log, g, x->loc);
			kf_buf_puts(log, "not fused: ");
			put_value(log, g, v);
			kf_buf_printf(log, " (%s) -> ", kf_op(g->ctx, kf_N(g, np)->op)->name);
			if (x->nres)
				put_value(log, g, x->res0);
			else
				kf_buf_puts(log, "<no result>");
			kf_buf_printf(log, " (%s): %s: %s\n", kf_op(g->ctx, x->op)->name,
				      kf_fuse_reason_code(r), kf_fuse_reason_text(r));
		}
	}
}

void kf_fuse_toposort(kf_graph *g)
{
	uint32_t n = 0;
	kf_nid term = kf_block_terminator(g, 0);
	kf_foreach_node(g, 0, m)
		n++;
	if (!n)
		return;
	kf_nid *list = malloc(n * sizeof *list), *out = malloc(n * sizeof *out);
	uint8_t *state = calloc(g->nnode, 1); /* 1: on the stack, 2: placed */
	struct fr { kf_nid n; uint32_t i; } *st = malloc(n * sizeof *st);
	uint32_t k = 0, cnt = 0;
	kf_foreach_node(g, 0, m)
		list[k++] = m;
	for (uint32_t j = 0; j < n; j++) {
		kf_nid root = list[j];
		if (state[root] || root == term)
			continue;
		uint32_t sp = 0;
		st[sp++] = (struct fr){root, 0};
		state[root] = 1;
		/* depth first: a node is placed after the nodes defining its operands */
		while (sp) {
			struct fr *f = &st[sp - 1];
			if (f->i < kf_N(g, f->n)->nin) {
				kf_nid d = kf_def(g, kf_in(g, f->n, f->i++));
				if (d != KF_NONE && kf_N(g, d)->blk == 0 && !state[d] && d != term) {
					state[d] = 1;
					st[sp++] = (struct fr){d, 0};
				}
				continue;
			}
			state[f->n] = 2;
			out[cnt++] = f->n;
			sp--;
		}
	}
	if (term != KF_NONE)
		out[cnt++] = term;
	bool same = cnt == n && memcmp(out, list, n * sizeof *out) == 0;
	for (uint32_t j = 0; j < cnt && !same; j++)
		kf_node_move(g, out[j], 0, KF_NONE);
	free(list);
	free(out);
	free(state);
	free(st);
}
