/* fuse_explain.c: --explain-fusion (why each producer -> consumer edge did
 * not fuse) and the topological re-sort the fuse pass ends with. */
#include <stdlib.h>
#include <string.h>
#include "fuse_int.h"

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
			uint32_t pp = z->pos[np];
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
