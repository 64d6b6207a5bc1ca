/* rewrite_order.c: where nodes stand in their blocks, for the dominance a
 * rewrite must keep (a value is defined before every use in its block).
 *
 * The driver numbers every block once per sweep; the builders give a node
 * they insert or move a key between its neighbours', and renumber the
 * block in the rare case that no double lies between them.  So "is a
 * before b" is two loads and a compare, and keeping it costs O(1) per
 * insertion: a transform that asks on every node stays linear.
 */
#include <stdlib.h>
#include <string.h>

#include "kf_int.h"
#include "rewrite.h"

static void grow(kf_rw_order *o, uint32_t n)
{
	if (n <= o->cap)
		return;
	uint32_t cap = o->cap;
	kf_grow((void **)&o->key, &cap, n, sizeof *o->key);
	o->cap = cap;
}

void kf_rw_order_block(kf_rw_order *o, const kf_graph *g, kf_bid b)
{
	grow(o, g->nnode);
	double k = 0;
	kf_foreach_node(g, b, n)
		o->key[n] = k++;
}

void kf_rw_order_graph(kf_rw_order *o, const kf_graph *g)
{
	for (kf_bid b = 0; b < g->nblk; b++)
		kf_rw_order_block(o, g, b);
}

void kf_rw_order_placed(kf_rw_order *o, const kf_graph *g, kf_nid n)
{
	grow(o, g->nnode);
	const kf_node *x = kf_N(g, n);
	double k;
	if (x->prev != KF_NONE && x->next != KF_NONE) {
		double a = o->key[x->prev], b = o->key[x->next];
		k = a + (b - a) / 2;
		if (!(k > a && k < b)) {
			kf_rw_order_block(o, g, x->blk); /* the gap is used up */
			return;
		}
	} else if (x->prev != KF_NONE) {
		k = o->key[x->prev] + 1;
	} else if (x->next != KF_NONE) {
		k = o->key[x->next] - 1;
	} else {
		k = 0;
	}
	o->key[n] = k;
}

bool kf_rw_order_before(const kf_rw_order *o, const kf_graph *g, kf_nid a, kf_nid b)
{
	return kf_N(g, a)->blk == kf_N(g, b)->blk && o->key[a] < o->key[b];
}

bool kf_rw_order_available(const kf_rw_order *o, const kf_graph *g, kf_vid v, kf_nid at)
{
	kf_nid d = kf_def(g, v);
	if (d == KF_NONE)
		return kf_V(g, v)->blk == kf_N(g, at)->blk; /* a block argument */
	return kf_rw_order_before(o, g, d, at);
}

void kf_rw_order_free(kf_rw_order *o)
{
	free(o->key);
	memset(o, 0, sizeof *o);
}
