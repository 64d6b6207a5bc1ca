/* graph.c: building and mutating graphs.  Every mutation keeps use lists
 * exact; node slots are never reused (erased ones are marked DEAD), so a
 * handle held across a mutation never silently names another node. */
#include <stdlib.h>
#include <string.h>
#include "kf_int.h"

kf_graph *kf_graph_new(kf_ctx *c, const char *name)
{
	kf_graph *g = kf_xrealloc(NULL, sizeof *g);
	memset(g, 0, sizeof *g);
	g->ctx = c;
	g->name = kf_intern_cstr(c, name ? name : "");
	g->loc = KF_NOLOC;
	kf_block_new(g, KF_NONE);
	return g;
}

void kf_graph_free(kf_graph *g)
{
	if (!g)
		return;
	free(g->val);
	free(g->node);
	free(g->use);
	free(g->blk);
	kf_arena_free(&g->arena);
	free(g);
}

void kf_graph_set_results(kf_graph *g, const kf_tid *types, uint32_t n)
{
	g->res = kf_alloc(&g->arena, (n ? n : 1) * sizeof *g->res);
	if (n)
		memcpy(g->res, types, n * sizeof *types);
	g->nres = n;
}

kf_bid kf_block_new(kf_graph *g, kf_nid parent)
{
	kf_grow((void **)&g->blk, &g->capblk, g->nblk + 1, sizeof *g->blk);
	kf_block *b = &g->blk[g->nblk];
	memset(b, 0, sizeof *b);
	b->parent = parent;
	b->first = b->last = KF_NONE;
	return g->nblk++;
}

static kf_vid value_new(kf_graph *g, kf_tid type, kf_nid def, uint32_t idx, kf_bid blk)
{
	kf_grow((void **)&g->val, &g->capval, g->nval + 1, sizeof *g->val);
	g->val[g->nval] = (kf_value){type, def, idx, blk, 0, KF_NONE};
	return g->nval++;
}

kf_vid kf_block_add_arg(kf_graph *g, kf_bid b, kf_tid type, kf_sid name)
{
	kf_block *bk = &g->blk[b];
	if (bk->narg == bk->argcap) {
		uint32_t cap = bk->argcap ? bk->argcap * 2 : 4;
		kf_vid *a = kf_alloc(&g->arena, cap * sizeof *a);
		if (bk->narg)
			memcpy(a, bk->arg, bk->narg * sizeof *a);
		bk->arg = a;
		bk->argcap = cap;
	}
	kf_vid v = value_new(g, type, KF_NONE, bk->narg, b);
	g->val[v].name = name;
	bk = &g->blk[b];
	bk->arg[bk->narg++] = v;
	return v;
}

/* ---- use lists ---- */

static void use_link(kf_graph *g, kf_uid u)
{
	kf_value *v = &g->val[g->use[u].value];
	g->use[u].prev = KF_NONE;
	g->use[u].next = v->first_use;
	if (v->first_use != KF_NONE)
		g->use[v->first_use].prev = u;
	v->first_use = u;
}

static void use_unlink(kf_graph *g, kf_uid u)
{
	kf_use *s = &g->use[u];
	if (s->value == KF_NONE)
		return;
	if (s->prev != KF_NONE)
		g->use[s->prev].next = s->next;
	else
		g->val[s->value].first_use = s->next;
	if (s->next != KF_NONE)
		g->use[s->next].prev = s->prev;
	s->value = KF_NONE;
	s->next = s->prev = KF_NONE;
}

uint32_t kf_nuses(const kf_graph *g, kf_vid v)
{
	uint32_t n = 0;
	kf_foreach_use(g, v, u)
		n++;
	return n;
}

void kf_set_operand(kf_graph *g, kf_nid n, uint32_t i, kf_vid v)
{
	kf_uid u = g->node[n].in0 + i;
	use_unlink(g, u);
	g->use[u].value = v;
	use_link(g, u);
}

void kf_replace_all_uses(kf_graph *g, kf_vid from, kf_vid to)
{
	if (from == to)
		return;
	kf_uid u = g->val[from].first_use;
	while (u != KF_NONE) {
		kf_uid next = g->use[u].next;
		g->use[u].value = to;
		use_link(g, u);
		u = next;
	}
	g->val[from].first_use = KF_NONE;
}

/* ---- nodes ---- */

static void block_insert(kf_graph *g, kf_nid n, kf_bid b, kf_nid before)
{
	kf_block *bk = &g->blk[b];
	kf_node *x = &g->node[n];
	x->blk = b;
	x->next = before;
	x->prev = before == KF_NONE ? bk->last : g->node[before].prev;
	if (x->prev != KF_NONE)
		g->node[x->prev].next = n;
	else
		bk->first = n;
	if (before != KF_NONE)
		g->node[before].prev = n;
	else
		bk->last = n;
}

static void block_remove(kf_graph *g, kf_nid n)
{
	kf_node *x = &g->node[n];
	kf_block *bk = &g->blk[x->blk];
	if (x->prev != KF_NONE)
		g->node[x->prev].next = x->next;
	else
		bk->first = x->next;
	if (x->next != KF_NONE)
		g->node[x->next].prev = x->prev;
	else
		bk->last = x->prev;
	x->prev = x->next = KF_NONE;
}

/* Grows *arr to hold exactly need elements of size sz when it holds fewer. */
static void reserve(void **arr, uint32_t *cap, uint32_t have, uint32_t more, size_t sz)
{
	uint64_t need = (uint64_t)have + more;
	if (need > UINT32_MAX - 1)
		need = UINT32_MAX - 1;
	if (need <= *cap)
		return;
	*arr = kf_xrealloc(*arr, (size_t)need * sz);
	*cap = (uint32_t)need;
}

void kf_graph_reserve(kf_graph *g, uint32_t nnode, uint32_t nval, uint32_t nuse)
{
	reserve((void **)&g->node, &g->capnode, g->nnode, nnode, sizeof *g->node);
	reserve((void **)&g->val, &g->capval, g->nval, nval, sizeof *g->val);
	reserve((void **)&g->use, &g->capuse, g->nuse, nuse, sizeof *g->use);
}

kf_vid kf_const_copy(kf_graph *g, kf_bid b, kf_vid v)
{
	kf_nid d = kf_def(g, v);
	kf_tid t = kf_V(g, v)->type;
	kf_nid cn = kf_node_new(g, b, KF_NONE, KF_OP_CONST, NULL, 0, &t, 1);
	/* read d after kf_node_new, which may move the node table */
	kf_N(g, cn)->cst = kf_N(g, d)->cst;
	kf_N(g, cn)->loc = kf_N(g, d)->loc;
	kf_V(g, kf_res(g, cn, 0))->name = kf_V(g, v)->name;
	return kf_res(g, cn, 0);
}

kf_nid kf_node_new(kf_graph *g, kf_bid b, kf_nid before, int op,
		   const kf_vid *in, uint32_t nin, const kf_tid *res, uint32_t nres)
{
	if (nres > KF_MAX_RESULTS) { /* the field is 16 bits; callers check, this is the backstop */
		kf_error(g->ctx, KF_NOLOC, "a node has at most %d results, not %u", KF_MAX_RESULTS, nres);
		nres = KF_MAX_RESULTS;
	}
	if (g->nnode == g->capnode)
		kf_grow((void **)&g->node, &g->capnode, g->nnode + 1, sizeof *g->node);
	if (nin > g->capuse - g->nuse)
		kf_grow((void **)&g->use, &g->capuse, g->nuse + nin, sizeof *g->use);
	if (nres > g->capval - g->nval)
		kf_grow((void **)&g->val, &g->capval, g->nval + nres, sizeof *g->val);
	kf_nid n = g->nnode++;
	kf_uid u0 = g->nuse;
	kf_vid v0 = g->nval;
	g->node[n] = (kf_node){.op = (uint16_t)op, .nin = nin, .in0 = u0, .res0 = v0,
			       .nres = (uint16_t)nres, .body = KF_NONE, .loc = KF_NOLOC};
	/* use_link for each operand, from locals: a store through g may alias
	 * the counters, which would then be reloaded at every step */
	kf_use *use = g->use;
	kf_value *val = g->val;
	for (uint32_t i = 0; i < nin; i++) {
		kf_value *v = &val[in[i]];
		use[u0 + i] = (kf_use){in[i], n, v->first_use, KF_NONE};
		if (v->first_use != KF_NONE)
			use[v->first_use].prev = u0 + i;
		v->first_use = u0 + i;
	}
	for (uint32_t i = 0; i < nres; i++)
		val[v0 + i] = (kf_value){res[i], n, i, b, 0, KF_NONE};
	g->nuse = u0 + nin;
	g->nval = v0 + nres;
	block_insert(g, n, b, before);
	return n;
}

void kf_node_move(kf_graph *g, kf_nid n, kf_bid b, kf_nid before)
{
	block_remove(g, n);
	block_insert(g, n, b, before);
	for (uint32_t i = 0; i < g->node[n].nres; i++)
		g->val[g->node[n].res0 + i].blk = b;
}

void kf_node_erase(kf_graph *g, kf_nid n)
{
	kf_node *x = &g->node[n];
	if (x->flags & KF_NODE_DEAD)
		return;
	if (x->body != KF_NONE) {
		kf_bid body = x->body;
		/* erase back to front so that every value is unused when its node goes */
		kf_nid m = g->blk[body].last;
		while (m != KF_NONE) {
			kf_nid prev = g->node[m].prev;
			kf_node_erase(g, m);
			m = prev;
		}
		x = &g->node[n];
	}
	for (uint32_t i = 0; i < x->nin; i++)
		use_unlink(g, x->in0 + i);
	block_remove(g, n);
	g->node[n].flags |= KF_NODE_DEAD;
}

kf_nid kf_block_terminator(const kf_graph *g, kf_bid b)
{
	kf_nid n = g->blk[b].last;
	if (n != KF_NONE && (kf_op(g->ctx, g->node[n].op)->flags & KF_OPF_TERMINATOR))
		return n;
	return KF_NONE;
}

uint32_t kf_graph_live_nodes(const kf_graph *g)
{
	uint32_t k = 0;
	kf_foreach_node(g, 0, n)
		k++;
	return k;
}

/* ---- constants ---- */

uint64_t kf_const_elem_bits(const kf_const *k, uint64_t i)
{
	uint64_t bits = 0;
	if (k->f) {
		double f = k->f[i] == 0 ? 0 : k->f[i];
		memcpy(&bits, &f, sizeof bits);
	} else if (k->i) {
		bits = (uint64_t)k->i[i];
	}
	return bits;
}

bool kf_const_scalar(const kf_graph *g, kf_vid v, double *x)
{
	kf_nid n = kf_def(g, v);
	if (n == KF_NONE || kf_N(g, n)->op != KF_OP_CONST || !kf_N(g, n)->cst)
		return false;
	const kf_const *k = kf_N(g, n)->cst;
	if (k->kind == KF_CONST_FILE || k->n != 1)
		return false;
	*x = k->f ? k->f[0] : (double)k->i[0];
	return true;
}

/* ---- attributes ---- */

kf_attrval kf_attrval_copy(kf_graph *g, const kf_attrval *v)
{
	kf_attrval r = *v;
	if (v->kind == KF_ATTR_LIST) {
		r.list = kf_alloc(&g->arena, (v->n ? v->n : 1) * sizeof *r.list);
		for (uint32_t i = 0; i < v->n; i++)
			r.list[i] = kf_attrval_copy(g, &v->list[i]);
	}
	return r;
}


static void attrs_sort(const kf_ctx *c, kf_attr *a, uint32_t n)
{
	/* insertion sort: attribute lists are short, and this keeps the core free
	 * of the global that qsort would need */
	for (uint32_t i = 1; i < n; i++) {
		kf_attr t = a[i];
		uint32_t j = i;
		while (j > 0 && strcmp(kf_str(c, a[j - 1].key), kf_str(c, t.key)) > 0) {
			a[j] = a[j - 1];
			j--;
		}
		a[j] = t;
	}
}

void kf_node_set_attrs(kf_graph *g, kf_nid n, const kf_attr *a, uint32_t na)
{
	if (na > KF_MAX_ATTRS) { /* the field is 16 bits; the parser checks, this is the backstop */
		kf_error(g->ctx, KF_NOLOC, "a node has at most %d attributes, not %u", KF_MAX_ATTRS, na);
		na = KF_MAX_ATTRS;
	}
	kf_attr *copy = kf_alloc(&g->arena, (na ? na : 1) * sizeof *copy);
	for (uint32_t i = 0; i < na; i++) {
		copy[i].key = a[i].key;
		copy[i].v = kf_attrval_copy(g, &a[i].v);
	}
	attrs_sort(g->ctx, copy, na);
	g->node[n].attr = copy;
	g->node[n].nattr = na;
}

void kf_node_set_attr(kf_graph *g, kf_nid n, kf_sid key, kf_attrval v)
{
	kf_node *x = &g->node[n];
	for (uint32_t i = 0; i < x->nattr; i++)
		if (x->attr[i].key == key) {
			x->attr[i].v = kf_attrval_copy(g, &v);
			return;
		}
	if (x->nattr == KF_MAX_ATTRS) {
		kf_error(g->ctx, KF_NOLOC, "a node has at most %d attributes", KF_MAX_ATTRS);
		return;
	}
	kf_attr *a = kf_alloc(&g->arena, (x->nattr + 1) * sizeof *a);
	if (x->nattr)
		memcpy(a, x->attr, x->nattr * sizeof *a);
	a[x->nattr] = (kf_attr){key, kf_attrval_copy(g, &v)};
	x = &g->node[n];
	x->attr = a;
	x->nattr++;
	attrs_sort(g->ctx, a, x->nattr);
}

bool kf_attrval_eq(const kf_attrval *a, const kf_attrval *b)
{
	if (a->kind != b->kind)
		return false;
	switch (a->kind) {
	case KF_ATTR_INT: return a->i == b->i;
	case KF_ATTR_FLOAT: return a->f == b->f || (a->f != a->f && b->f != b->f);
	case KF_ATTR_STR: return a->s == b->s;
	case KF_ATTR_BOOL: return a->b == b->b;
	case KF_ATTR_LIST:
		if (a->n != b->n)
			return false;
		for (uint32_t i = 0; i < a->n; i++)
			if (!kf_attrval_eq(&a->list[i], &b->list[i]))
				return false;
		return true;
	}
	return false;
}

uint64_t kf_attrval_hash(const kf_attrval *a)
{
	uint64_t h = KF_HASH_SEED + a->kind;
	switch (a->kind) {
	case KF_ATTR_INT: return kf_hash_bytes(&a->i, sizeof a->i, h);
	case KF_ATTR_FLOAT: {
		double f = a->f == 0 ? 0 : a->f; /* -0.0 == 0.0 */
		return kf_hash_bytes(&f, sizeof f, h);
	}
	case KF_ATTR_STR: return kf_hash_bytes(&a->s, sizeof a->s, h);
	case KF_ATTR_BOOL: return h * 31 + a->b;
	case KF_ATTR_LIST:
		for (uint32_t i = 0; i < a->n; i++)
			h = h * 1099511628211ULL ^ kf_attrval_hash(&a->list[i]);
		return h;
	}
	return h;
}

const kf_attrval *kf_attr_get(const kf_graph *g, kf_nid n, const char *key)
{
	kf_sid k = kf_lookup_str(g->ctx, key, strlen(key));
	if (k == KF_NONE)
		return NULL;
	const kf_node *x = &g->node[n];
	for (uint32_t i = 0; i < x->nattr; i++)
		if (x->attr[i].key == k)
			return &x->attr[i].v;
	return NULL;
}

int64_t kf_attr_int(const kf_graph *g, kf_nid n, const char *key, int64_t dflt)
{
	const kf_attrval *v = kf_attr_get(g, n, key);
	if (!v)
		return dflt;
	if (v->kind == KF_ATTR_INT)
		return v->i;
	if (v->kind == KF_ATTR_BOOL)
		return v->b;
	return dflt;
}

double kf_attr_float(const kf_graph *g, kf_nid n, const char *key, double dflt)
{
	const kf_attrval *v = kf_attr_get(g, n, key);
	if (!v)
		return dflt;
	if (v->kind == KF_ATTR_FLOAT)
		return v->f;
	if (v->kind == KF_ATTR_INT)
		return (double)v->i;
	return dflt;
}

bool kf_attr_bool(const kf_graph *g, kf_nid n, const char *key, bool dflt)
{
	const kf_attrval *v = kf_attr_get(g, n, key);
	if (!v)
		return dflt;
	if (v->kind == KF_ATTR_BOOL)
		return v->b;
	if (v->kind == KF_ATTR_INT)
		return v->i != 0;
	return dflt;
}

const char *kf_attr_str(const kf_graph *g, kf_nid n, const char *key, const char *dflt)
{
	const kf_attrval *v = kf_attr_get(g, n, key);
	return v && v->kind == KF_ATTR_STR ? kf_str(g->ctx, v->s) : dflt;
}

int kf_attr_ints(const kf_graph *g, kf_nid n, const char *key, int64_t *out, int max)
{
	const kf_attrval *v = kf_attr_get(g, n, key);
	if (!v || v->kind != KF_ATTR_LIST)
		return -1;
	for (uint32_t i = 0; i < v->n; i++) {
		if (v->list[i].kind != KF_ATTR_INT)
			return -1;
		if ((int)i < max)
			out[i] = v->list[i].i;
	}
	return (int)v->n;
}

int kf_attr_dims(const kf_graph *g, kf_nid n, const char *key, int64_t *out, bool *sym, int max)
{
	const kf_attrval *v = kf_attr_get(g, n, key);
	if (!v || v->kind != KF_ATTR_LIST)
		return -1;
	for (uint32_t i = 0; i < v->n; i++) {
		int64_t d;
		bool s = v->list[i].kind == KF_ATTR_STR;
		if (s) {
			const char *t = kf_str(g->ctx, v->list[i].s);
			d = kf_dim_parse(g->ctx, t, strlen(t));
			if (d == KF_DIM_BAD)
				return -1;
			s = KF_IS_SYM(d); /* "12" names a static dim */
		} else if (v->list[i].kind == KF_ATTR_INT) {
			d = v->list[i].i;
		} else {
			return -1;
		}
		if ((int)i < max) {
			out[i] = d;
			sym[i] = s;
		}
	}
	return (int)v->n;
}

/* ---- modules ---- */

kf_module *kf_module_new(kf_ctx *c)
{
	kf_module *m = kf_xrealloc(NULL, sizeof *m);
	memset(m, 0, sizeof *m);
	m->ctx = c;
	m->src = KF_NONE;
	return m;
}

void kf_module_add(kf_module *m, kf_graph *g)
{
	m->graph = kf_xrealloc(m->graph, (m->ngraph + 1) * sizeof *m->graph);
	m->graph[m->ngraph++] = g;
}

void kf_module_free(kf_module *m)
{
	if (!m)
		return;
	for (uint32_t i = 0; i < m->ngraph; i++)
		kf_graph_free(m->graph[i]);
	free(m->graph);
	free(m->plugin);
	free(m);
}

kf_graph *kf_graph_clone(const kf_graph *g)
{
	kf_graph *r = kf_xrealloc(NULL, sizeof *r);
	*r = (kf_graph){.ctx = g->ctx, .name = g->name, .loc = g->loc, .dir = g->dir,
			.nval = g->nval, .capval = g->nval, .nnode = g->nnode, .capnode = g->nnode,
			.nuse = g->nuse, .capuse = g->nuse, .nblk = g->nblk, .capblk = g->nblk};
	/* the arrays are plain data (indices, interned ids): copied whole */
	r->val = kf_xrealloc(NULL, (g->nval + 1) * sizeof *r->val);
	r->node = kf_xrealloc(NULL, (g->nnode + 1) * sizeof *r->node);
	r->use = kf_xrealloc(NULL, (g->nuse + 1) * sizeof *r->use);
	r->blk = kf_xrealloc(NULL, (g->nblk + 1) * sizeof *r->blk);
	/* (an empty array may be NULL, which memcpy must not see even for 0 bytes) */
	if (g->nval)
		memcpy(r->val, g->val, g->nval * sizeof *r->val);
	if (g->nnode)
		memcpy(r->node, g->node, g->nnode * sizeof *r->node);
	if (g->nuse)
		memcpy(r->use, g->use, g->nuse * sizeof *r->use);
	if (g->nblk)
		memcpy(r->blk, g->blk, g->nblk * sizeof *r->blk);
	/* what lives in g's arena and may be written in place gets r's own copy */
	for (uint32_t b = 0; b < g->nblk; b++) {
		r->blk[b].argcap = g->blk[b].narg;
		r->blk[b].arg = kf_alloc(&r->arena, (g->blk[b].narg + 1) * sizeof *r->blk[b].arg);
		if (g->blk[b].narg)
			memcpy(r->blk[b].arg, g->blk[b].arg, g->blk[b].narg * sizeof *r->blk[b].arg);
	}
	for (kf_nid n = 0; n < g->nnode; n++)
		if (g->node[n].nattr)
			kf_node_set_attrs(r, n, g->node[n].attr, g->node[n].nattr);
	kf_graph_set_results(r, g->res, g->nres);
	return r;
}
