/* rewrite_hash.c: what the driver remembers of each rewrite, to catch a
 * rule that changes nothing and rules that undo each other: a hash of the
 * region a rewrite replaced and of the region it built (structure down to
 * the values it did not create; operand order aside for commutative ops),
 * and a table of the built regions with the region each started from.
 */
#include <stdlib.h>
#include <string.h>

#include "kf_int.h"
#include "rewrite_int.h"


#define MIX(h, x) ((h) = ((h) ^ (uint64_t)(x)) * 0x100000001b3ULL + 0x9e3779b97f4a7c15ULL)

typedef struct hctx {
	const kf_graph *g;
	const kf_match *m;  /* before: values of matched nodes are inside */
	kf_nid mark;        /* after: nodes >= mark are inside */
	int budget;
} hctx;

static bool inside(const hctx *h, kf_nid n)
{
	if (n == KF_NONE)
		return false;
	if (!h->m)
		return n >= h->mark;
	for (uint32_t i = 0; i < h->m->nnode; i++)
		if (h->m->node[i] == n)
			return true;
	return false;
}

static uint64_t vhash(hctx *h, kf_vid v)
{
	const kf_graph *g = h->g;
	kf_nid n = kf_def(g, v);
	uint64_t x = 0xcbf29ce484222325ULL;
	bool cst = n != KF_NONE && kf_N(g, n)->op == KF_OP_CONST;
	if (--h->budget < 0 || (!cst && !inside(h, n))) {
		MIX(x, 1);
		MIX(x, v);
		return x;
	}
	const kf_node *nd = kf_N(g, n);
	MIX(x, nd->op);
	MIX(x, g->val[v].type);
	MIX(x, g->val[v].idx);
	for (uint32_t i = 0; i < nd->nattr; i++) {
		MIX(x, nd->attr[i].key);
		MIX(x, kf_attrval_hash(&nd->attr[i].v));
	}
	if (cst && nd->cst) {
		const kf_const *k = nd->cst;
		MIX(x, k->kind);
		MIX(x, k->n);
		for (uint64_t i = 0; i < k->n && i < 16; i++) {
			uint64_t bits = 0;
			if (k->f)
				memcpy(&bits, &k->f[i], sizeof bits);
			else if (k->i)
				bits = (uint64_t)k->i[i];
			MIX(x, bits);
		}
		MIX(x, k->path);
	}
	uint64_t ch[2] = {0, 0};
	for (uint32_t i = 0; i < nd->nin; i++) {
		uint64_t c = vhash(h, kf_in(g, n, i));
		if (nd->nin == 2 && (kf_op(g->ctx, nd->op)->flags & KF_OPF_COMMUTATIVE)) {
			ch[i] = c;
			continue;
		}
		MIX(x, c);
	}
	if (nd->nin == 2 && (kf_op(g->ctx, nd->op)->flags & KF_OPF_COMMUTATIVE)) {
		/* operand order does not matter to a commutative op */
		MIX(x, ch[0] < ch[1] ? ch[0] : ch[1]);
		MIX(x, ch[0] < ch[1] ? ch[1] : ch[0]);
	}
	return x;
}

uint64_t kf_rw_region_hash(const kf_graph *g, const kf_match *m, kf_nid mark, const kf_vid *out, uint32_t nout)
{
	hctx h = {g, m, mark, 4096};
	uint64_t x = 0x84222325cbf29ce4ULL;
	for (uint32_t k = 0; k < nout; k++)
		MIX(x, vhash(&h, out[k]));
	return x;
}

const kf_rw_seen_ent *kf_rw_seen_find(const kf_rw_seen *s, uint64_t h)
{
	if (!s->cap)
		return NULL;
	for (uint32_t i = (uint32_t)h & (s->cap - 1);; i = (i + 1) & (s->cap - 1)) {
		if (!s->ent[i].rule)
			return NULL;
		if (s->ent[i].h == h)
			return &s->ent[i];
	}
}

void kf_rw_seen_add(kf_rw_seen *s, uint64_t h, uint64_t from, uint32_t rule)
{
	if ((s->n + 1) * 2 > s->cap) {
		uint32_t cap = s->cap ? s->cap * 2 : 256;
		kf_rw_seen_ent *old = s->ent;
		uint32_t oldcap = s->cap;
		s->ent = kf_xcalloc(cap, sizeof *s->ent);
		s->cap = cap;
		s->n = 0;
		for (uint32_t i = 0; i < oldcap; i++)
			if (old[i].rule)
				kf_rw_seen_add(s, old[i].h, old[i].from, old[i].rule - 1);
		free(old);
	}
	uint32_t i = (uint32_t)h & (s->cap - 1);
	while (s->ent[i].rule && s->ent[i].h != h)
		i = (i + 1) & (s->cap - 1);
	if (!s->ent[i].rule)
		s->n++;
	s->ent[i] = (kf_rw_seen_ent){h, from, rule + 1};
}
