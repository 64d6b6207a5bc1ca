/* fuse_build.c: the fuse pass's last step: each group of two or more ops
 * becomes a `fusion @kN(...) {kind = ...}` node holding its ops (names,
 * attributes and locations kept), small constants copied into the bodies
 * that read them; outside users read the fusion's results. */
#include <stdlib.h>
#include <string.h>
#include "fuse_int.h"

/* The per-value arrays cover the values made since they were sized (the
 * results of earlier fusion nodes, which later groups read). */
static void grow_values(fz *z)
{
	uint32_t nv = z->g->nval + 1;
	if (z->nvmark < nv) {
		z->vmark = realloc(z->vmark, nv * sizeof *z->vmark);
		memset(z->vmark + z->nvmark, 0, (nv - z->nvmark) * sizeof *z->vmark);
		z->nvmark = nv;
	}
	if (z->nvmap < nv) {
		z->vmap = realloc(z->vmap, nv * sizeof *z->vmap);
		for (uint32_t v = z->nvmap; v < nv; v++)
			z->vmap[v] = KF_NONE;
		z->nvmap = nv;
	}
	uint32_t need = 2 * (z->g->nuse + nv + 2);
	if (z->nvbuf < need) {
		z->nvbuf = need;
		z->vbuf = realloc(z->vbuf, need * sizeof *z->vbuf);
		z->ubuf = realloc(z->ubuf, need * sizeof *z->ubuf);
	}
}

/* The group's boundary: ins[] the values its members read from outside
 * (embeddable constants aside: the body copies them), outs[] (types rt[])
 * the results something outside reads.  z->mem[0..cnt) are the members. */
static void boundary(fz *z, uint32_t root, uint32_t cnt, kf_vid *ins, uint32_t *nin, kf_vid *outs, kf_tid *rt,
		     uint32_t *nout)
{
	kf_graph *g = z->g;
	*nin = *nout = 0;
	z->epoch++;
	for (uint32_t i = 0; i < cnt; i++) {
		kf_nid n = z->order[z->mem[i]];
		for (uint32_t k = 0; k < kf_N(g, n)->nin; k++) {
			kf_vid v = kf_in(g, n, k);
			uint32_t q = fz_pos_of(z, v);
			if (fz_member(z, q, root, root) || z->vmark[v] == z->epoch)
				continue;
			kf_nid d = kf_def(g, v);
			if (d != KF_NONE && kf_fuse_const_embeddable(g, d))
				continue;
			z->vmark[v] = z->epoch;
			ins[(*nin)++] = v;
		}
	}
	for (uint32_t i = 0; i < cnt; i++) {
		const kf_node *x = kf_N(g, z->order[z->mem[i]]);
		for (uint32_t r = 0; r < x->nres; r++)
			if (fz_outside_user(z, x->res0 + r, root, root)) {
				rt[*nout] = kf_V(g, x->res0 + r)->type;
				outs[(*nout)++] = x->res0 + r;
			}
	}
}

/* Copies the members, in order, into body b (z->vmap: outer value -> body
 * value; the block's arguments are mapped already), then the yield of
 * outs[0..nout). */
static void copy_members(fz *z, uint32_t cnt, kf_bid b, const kf_vid *outs, uint32_t nout)
{
	kf_graph *g = z->g;
	kf_vid *tmp = malloc(64 * sizeof *tmp);
	uint32_t tmpcap = 64;
	for (uint32_t i = 0; i < cnt; i++) {
		kf_nid n = z->order[z->mem[i]];
		uint32_t nn = kf_N(g, n)->nin;
		if (nn > tmpcap) {
			tmpcap = nn;
			tmp = realloc(tmp, tmpcap * sizeof *tmp);
		}
		for (uint32_t k = 0; k < nn; k++) {
			kf_vid v = kf_in(g, n, k);
			if (z->vmap[v] == KF_NONE) { /* an embedded constant: copy it in */
				z->vmap[v] = kf_const_copy(g, b, v);
			}
			tmp[k] = z->vmap[v];
		}
		const kf_node *x = kf_N(g, n);
		uint32_t nr = x->nres;
		kf_tid *rts = malloc((nr + 1) * sizeof *rts);
		for (uint32_t r = 0; r < nr; r++)
			rts[r] = kf_V(g, x->res0 + r)->type;
		kf_nid m = kf_node_new(g, b, KF_NONE, x->op, tmp, nn, rts, nr);
		free(rts);
		x = kf_N(g, n);
		kf_node_set_attrs(g, m, x->attr, x->nattr);
		kf_N(g, m)->loc = x->loc;
		kf_N(g, m)->sym = x->sym;
		for (uint32_t r = 0; r < nr; r++) {
			kf_V(g, kf_res(g, m, r))->name = kf_V(g, x->res0 + r)->name;
			z->vmap[x->res0 + r] = kf_res(g, m, r);
			if (x->res0 + r < z->nmoved) /* --explain-fusion names it there */
				z->moved[x->res0 + r] = kf_res(g, m, r);
		}
	}
	if (nout > tmpcap)
		tmp = realloc(tmp, nout * sizeof *tmp);
	for (uint32_t i = 0; i < nout; i++)
		tmp[i] = z->vmap[outs[i]];
	kf_node_new(g, b, KF_NONE, KF_OP_YIELD, tmp, nout, NULL, 0);
	free(tmp);
}

/* Outside users of outs[i] read result i of fusion f instead. */
static void redirect_users(fz *z, uint32_t root, kf_nid f, const kf_vid *outs, uint32_t nout)
{
	kf_graph *g = z->g;
	for (uint32_t i = 0; i < nout; i++) {
		kf_vid nv = kf_res(g, f, i);
		if (nout == 1)
			kf_V(g, nv)->name = kf_V(g, outs[i])->name;
		uint32_t k = 0;
		kf_foreach_use(g, outs[i], u) {
			kf_nid un = g->use[u].user;
			if (kf_N(g, un)->blk != 0 || !fz_member(z, kf_fuse_pos(z, un), root, root))
				z->ubuf[k++] = u;
		}
		for (uint32_t j = 0; j < k; j++) {
			kf_uid u = z->ubuf[j];
			kf_set_operand(g, g->use[u].user, u - kf_N(g, g->use[u].user)->in0, nv);
		}
	}
}

int kf_fuse_make_node(fz *z, uint32_t root, int index)
{
	kf_graph *g = z->g;
	kf_ctx *c = g->ctx;
	grow_values(z);
	uint32_t cnt = 0, all = kf_fuse_members(z, root, root);
	for (uint32_t i = 0; i < all; i++)
		if (z->gr[z->mem[i]].kind) /* not a view left outside */
			z->mem[cnt++] = z->mem[i];
	kf_vid *ins = z->vbuf, *outs = z->vbuf + z->nvbuf / 2;
	uint32_t nin, nout;
	kf_tid *rt = malloc((cnt * 8 + 1) * sizeof *rt);
	boundary(z, root, cnt, ins, &nin, outs, rt, &nout);
	kf_nid last = z->order[z->mem[cnt - 1]];
	kf_nid f = kf_node_new(g, 0, last, KF_OP_FUSION, ins, nin, rt, nout);
	free(rt);
	char name[32];
	snprintf(name, sizeof name, "k%d", index);
	kf_N(g, f)->sym = kf_intern_cstr(c, name);
	kf_N(g, f)->loc = kf_N(g, z->order[z->mem[0]])->loc;
	kf_sid kind = kf_intern_cstr(c, z->gr[root].gkind == G_ROW   ? "reduce"
					: z->gr[root].gkind == G_COL ? "colreduce"
								  : "elementwise");
	kf_node_set_attr(g, f, kf_intern_cstr(c, "kind"), (kf_attrval){.kind = KF_ATTR_STR, .s = kind});
	kf_bid b = kf_block_new(g, f);
	kf_N(g, f)->body = b;
	/* map: outer value -> body value, through vmap (reset below) */
	for (uint32_t i = 0; i < nin; i++)
		z->vmap[ins[i]] = kf_block_add_arg(g, b, kf_V(g, ins[i])->type, 0);
	copy_members(z, cnt, b, outs, nout);
	redirect_users(z, root, f, outs, nout);
	/* reset the map for the next group: every entry set above is an
	 * operand or a result of a member */
	for (uint32_t i = 0; i < cnt; i++) {
		const kf_node *x = kf_N(g, z->order[z->mem[i]]);
		for (uint32_t k = 0; k < x->nin; k++)
			z->vmap[kf_in(g, z->order[z->mem[i]], k)] = KF_NONE;
		for (uint32_t r = 0; r < x->nres; r++)
			z->vmap[x->res0 + r] = KF_NONE;
	}
	for (uint32_t i = cnt; i-- > 0;)
		kf_node_erase(g, z->order[z->mem[i]]);
	return 0;
}

/* Constants left without users after their copies moved into bodies. */
void kf_fuse_drop_group_consts(fz *z)
{
	for (uint32_t p = 0; p < z->n; p++) {
		kf_nid n = z->order[p];
		if (z->ckind[p] == KF_FK_CONST && !(kf_N(z->g, n)->flags & KF_NODE_DEAD) &&
		    !kf_has_uses(z->g, kf_res(z->g, n, 0)))
			kf_node_erase(z->g, n);
	}
}

