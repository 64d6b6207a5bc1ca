/* fuse_explain.c: what the fuse pass decides with beyond the fusion kinds
 * (core/fusion.h): the reshapes a reduction kernel leaves outside as
 * aliases and the legality of column groups; --explain-fusion (why each
 * producer -> consumer edge did not fuse); and the topological re-sort the
 * pass ends with. */
#include <stdlib.h>
#include <string.h>
#include "fuse_int.h"

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
