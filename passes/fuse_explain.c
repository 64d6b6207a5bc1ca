/* fuse_explain.c: what the fuse pass decides with: which ops fuse, how a
 * reduction splits into rows and how values index them (shared with the
 * emitter); --explain-fusion (why each producer -> consumer edge did not
 * fuse); and the topological re-sort the pass ends with. */
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
