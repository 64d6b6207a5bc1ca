/* cse.c: common subexpression elimination by value numbering.
 *
 * Two nodes are one when they have the same op, block, operands (either
 * order for commutative binary ops), attributes, result types, constant
 * payload (bit for bit: -0.0 and 0.0 stay apart, NaN payloads merge) and
 * symbol.  Fusion nodes are one when their operands, attributes and result
 * types agree and their bodies are structurally identical (same nodes in the
 * same order reading the same local values); their symbols (@k0, @k1) are
 * names, not meaning, and are ignored.  Bodies are cleaned first, inner
 * before outer, so that equal bodies look equal.  Terminators and effectful
 * ops never merge.  The later node's uses move to the earlier one, which
 * dominates it (same block, earlier), and the later node is erased.
 * requires exact use lists; keeps the graph valid.  Linear expected time:
 * one hash table of node ids, one hash per node. */
#include <stdlib.h>
#include <string.h>

#include "passes.h"

typedef struct cse_state {
	kf_graph *g;
	uint64_t *hash;   /* per node id */
	uint32_t *lnum;   /* per value id: local number inside a body */
	uint32_t *slot;   /* open addressing, KF_NONE empty */
	uint32_t mask;
	uint32_t merged;
} cse_state;

static uint64_t mix(uint64_t h, uint64_t v)
{
	/* splitmix64 finaliser over the running hash: cheap and well spread. */
	h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
	h ^= h >> 30;
	h *= 0xbf58476d1ce4e5b9ULL;
	h ^= h >> 27;
	h *= 0x94d049bb133111ebULL;
	return h ^ (h >> 31);
}

static uint64_t hash_bytes(uint64_t h, const void *p, size_t n)
{
	const unsigned char *s = p;
	uint64_t f = 1469598103934665603ULL;
	for (size_t i = 0; i < n; i++)
		f = (f ^ s[i]) * 1099511628211ULL;
	return mix(h, f);
}

static uint64_t hash_const(uint64_t h, const kf_const *k)
{
	if (!k)
		return h;
	h = mix(mix(h, k->kind), k->n);
	if (k->f)
		h = hash_bytes(h, k->f, k->n * sizeof *k->f);
	if (k->i)
		h = hash_bytes(h, k->i, k->n * sizeof *k->i);
	return mix(h, k->path);
}

static bool const_eq(const kf_const *a, const kf_const *b)
{
	if (!a || !b)
		return a == b;
	if (a->kind != b->kind || a->n != b->n || a->path != b->path || !a->f != !b->f || !a->i != !b->i)
		return false;
	if (a->f && memcmp(a->f, b->f, a->n * sizeof *a->f))
		return false;
	return !a->i || !memcmp(a->i, b->i, a->n * sizeof *a->i);
}

static bool is_region(const kf_graph *g, kf_nid n)
{
	return (kf_op(g->ctx, kf_N(g, n)->op)->flags & KF_OPF_REGION) != 0;
}

/* Everything about a node but its operands and body. */
static uint64_t hash_local(const kf_graph *g, kf_nid n)
{
	const kf_node *nd = kf_N(g, n);
	uint64_t h = mix(mix(nd->op, nd->nin), nd->nres);
	for (uint32_t i = 0; i < nd->nres; i++)
		h = mix(h, kf_V(g, nd->res0 + i)->type);
	for (uint32_t i = 0; i < nd->nattr; i++)
		h = mix(mix(h, nd->attr[i].key), kf_attrval_hash(&nd->attr[i].v));
	if (!is_region(g, n))
		h = mix(h, nd->sym);
	return hash_const(h, nd->cst);
}

static bool eq_local(const kf_graph *g, kf_nid a, kf_nid b)
{
	const kf_node *x = kf_N(g, a), *y = kf_N(g, b);
	if (x->op != y->op || x->nin != y->nin || x->nres != y->nres || x->nattr != y->nattr)
		return false;
	if (!is_region(g, a) && x->sym != y->sym)
		return false;
	for (uint32_t i = 0; i < x->nres; i++)
		if (kf_V(g, x->res0 + i)->type != kf_V(g, y->res0 + i)->type)
			return false;
	for (uint32_t i = 0; i < x->nattr; i++)
		if (x->attr[i].key != y->attr[i].key || !kf_attrval_eq(&x->attr[i].v, &y->attr[i].v))
			return false;
	return const_eq(x->cst, y->cst);
}

/* Numbers a body's values locally (arguments 0.., then results in order) and
 * hashes its structure. */
static uint64_t hash_body(cse_state *s, kf_bid b)
{
	kf_graph *g = s->g;
	uint32_t k = 0;
	uint64_t h = mix(0x626f6479, g->blk[b].narg);
	for (uint32_t i = 0; i < g->blk[b].narg; i++) {
		s->lnum[g->blk[b].arg[i]] = k++;
		h = mix(h, kf_V(g, g->blk[b].arg[i])->type);
	}
	kf_foreach_node(g, b, n) {
		const kf_node *nd = kf_N(g, n);
		h = mix(h, hash_local(g, n));
		for (uint32_t i = 0; i < nd->nin; i++)
			h = mix(h, s->lnum[kf_in(g, n, i)]);
		if (nd->body != KF_NONE)
			h = mix(h, hash_body(s, nd->body));
		for (uint32_t i = 0; i < nd->nres; i++)
			s->lnum[nd->res0 + i] = k++;
	}
	return h;
}

/* Both bodies were numbered by hash_body. */
static bool eq_body(cse_state *s, kf_bid a, kf_bid b)
{
	kf_graph *g = s->g;
	if (g->blk[a].narg != g->blk[b].narg)
		return false;
	for (uint32_t i = 0; i < g->blk[a].narg; i++)
		if (kf_V(g, g->blk[a].arg[i])->type != kf_V(g, g->blk[b].arg[i])->type)
			return false;
	kf_nid x = g->blk[a].first, y = g->blk[b].first;
	for (; x != KF_NONE && y != KF_NONE; x = kf_N(g, x)->next, y = kf_N(g, y)->next) {
		if (!eq_local(g, x, y))
			return false;
		for (uint32_t i = 0; i < kf_N(g, x)->nin; i++)
			if (s->lnum[kf_in(g, x, i)] != s->lnum[kf_in(g, y, i)])
				return false;
		if ((kf_N(g, x)->body == KF_NONE) != (kf_N(g, y)->body == KF_NONE))
			return false;
		if (kf_N(g, x)->body != KF_NONE && !eq_body(s, kf_N(g, x)->body, kf_N(g, y)->body))
			return false;
	}
	return x == KF_NONE && y == KF_NONE;
}

static bool commutes(const kf_graph *g, kf_nid n)
{
	return kf_N(g, n)->nin == 2 && (kf_op(g->ctx, kf_N(g, n)->op)->flags & KF_OPF_COMMUTATIVE);
}

static uint64_t hash_node(cse_state *s, kf_nid n)
{
	kf_graph *g = s->g;
	const kf_node *nd = kf_N(g, n);
	uint64_t h = mix(hash_local(g, n), nd->blk);
	if (commutes(g, n)) {
		kf_vid a = kf_in(g, n, 0), b = kf_in(g, n, 1);
		h = mix(mix(h, a < b ? a : b), a < b ? b : a);
	} else {
		for (uint32_t i = 0; i < nd->nin; i++)
			h = mix(h, kf_in(g, n, i));
	}
	if (nd->body != KF_NONE)
		h = mix(h, hash_body(s, nd->body));
	return h;
}

static bool eq_node(cse_state *s, kf_nid a, kf_nid b)
{
	kf_graph *g = s->g;
	if (s->hash[a] != s->hash[b] || kf_N(g, a)->blk != kf_N(g, b)->blk || !eq_local(g, a, b))
		return false;
	uint32_t nin = kf_N(g, a)->nin;
	bool same = true;
	for (uint32_t i = 0; i < nin && same; i++)
		same = kf_in(g, a, i) == kf_in(g, b, i);
	if (!same && !(commutes(g, a) && kf_in(g, a, 0) == kf_in(g, b, 1) && kf_in(g, a, 1) == kf_in(g, b, 0)))
		return false;
	kf_bid ba = kf_N(g, a)->body, bb = kf_N(g, b)->body;
	if ((ba == KF_NONE) != (bb == KF_NONE))
		return false;
	return ba == KF_NONE || eq_body(s, ba, bb);
}

static void cse_block(cse_state *s, kf_bid b)
{
	kf_graph *g = s->g;
	kf_nid n = g->blk[b].first;
	while (n != KF_NONE) {
		kf_nid next = kf_N(g, n)->next;
		if (kf_N(g, n)->body != KF_NONE)
			cse_block(s, kf_N(g, n)->body);
		if (kf_pass_node_pinned(g, n)) {
			n = next;
			continue;
		}
		s->hash[n] = hash_node(s, n);
		uint32_t i = (uint32_t)s->hash[n] & s->mask;
		for (; s->slot[i] != KF_NONE; i = (i + 1) & s->mask)
			if (eq_node(s, s->slot[i], n))
				break;
		if (s->slot[i] == KF_NONE) {
			s->slot[i] = n;
		} else {
			kf_nid keep = s->slot[i];
			for (uint32_t r = 0; r < kf_N(g, n)->nres; r++)
				kf_replace_all_uses(g, kf_res(g, n, r), kf_res(g, keep, r));
			kf_node_erase(g, n);
			s->merged++;
		}
		n = next;
	}
}

static int cse_run(kf_graph *g, const kf_passopts *o, bool *changed)
{
	cse_state s = {.g = g};
	uint32_t cap = 16;
	while (cap < 2 * (uint64_t)g->nnode + 2)
		cap *= 2;
	s.mask = cap - 1;
	s.hash = malloc(((size_t)g->nnode + 1) * sizeof *s.hash);
	s.lnum = malloc(((size_t)g->nval + 1) * sizeof *s.lnum);
	s.slot = malloc((size_t)cap * sizeof *s.slot);
	if (!s.hash || !s.lnum || !s.slot) {
		free(s.hash), free(s.lnum), free(s.slot);
		kf_error(g->ctx, g->loc, "cse: out of memory");
		return -1;
	}
	memset(s.slot, 0xff, (size_t)cap * sizeof *s.slot);
	cse_block(&s, 0);
	free(s.hash), free(s.lnum), free(s.slot);
	*changed = s.merged > 0;
	return 0;
}

const kf_pass kf_pass_cse = {
	.name = "cse",
	.doc = "merge nodes that compute the same value (commutative ops in either order; identical fusion nodes)",
	.run = cse_run,
};
