/* specialize.c: symbolic dims given sizes: specialize{batch=1,seq=128}.
 *
 * The given symbols are replaced by their sizes in every type (B*T with
 * B=2 becomes 2*T; a dim whose symbols are all given becomes static) and
 * in the dims that attributes name (reshape's and
 * broadcast_to's and iota's shape, slice's ends, resize's sizes), so that a
 * graph imported with dynamic axes can be compiled for one size: the CUDA
 * backend wants static shapes, and canonicalize then folds what became
 * constant (iota, shape).  Symbols not given stay.  An option that is no
 * size is an error naming it.
 * requires nothing; keeps the graph valid (every type and attribute changes
 * together, so inference agrees). */
#include <stdlib.h>
#include <string.h>

#include "passes.h"

typedef struct sz {
	const kf_sid *sym;
	const int64_t *val;
	uint32_t n;
} sz;

static bool look(void *ud, kf_sid s, int64_t *v)
{
	const sz *z = ud;
	for (uint32_t i = 0; i < z->n; i++)
		if (z->sym[i] == s) {
			*v = z->val[i];
			return true;
		}
	return false;
}

/* d with the given symbols replaced by their sizes (B*T with B=2: 2*T);
 * d itself when none is given or the product overflows. */
static int64_t spec_dim(kf_ctx *c, int64_t d, sz *z)
{
	kf_mono m, r = {.coef = 1};
	if (!KF_IS_SYM(d) || !kf_dim_split(c, d, &m))
		return d;
	r.coef = m.coef;
	for (int i = 0; i < m.n; i++) {
		int64_t v;
		if (!look(z, m.sym[i], &v))
			r.sym[r.n++] = m.sym[i];
		else if (__builtin_mul_overflow(r.coef, v, &r.coef))
			return d;
	}
	int64_t out = kf_dim_join(c, &r);
	return out == KF_DIM_BAD ? d : out;
}

static kf_tid spec_type(kf_ctx *c, kf_tid tid, sz *z, bool *changed)
{
	kf_type t = *kf_type_get(c, tid);
	bool any = false;
	for (int d = 0; d < t.rank; d++) {
		int64_t v = spec_dim(c, t.dim[d], z);
		any |= v != t.dim[d];
		t.dim[d] = v;
	}
	if (!any)
		return tid;
	*changed = true;
	return kf_type_intern(c, &t);
}

/* The string items of attribute `key` that are dims with every symbol given
 * become ints. */
static void spec_attr(kf_graph *g, kf_nid n, const char *key, sz *z, bool *changed)
{
	const kf_attrval *a = kf_attr_get(g, n, key);
	if (!a || a->kind != KF_ATTR_LIST)
		return;
	kf_attrval l = kf_attrval_copy(g, a);
	bool any = false;
	for (uint32_t i = 0; i < l.n; i++) {
		if (l.list[i].kind != KF_ATTR_STR)
			continue;
		const char *s = kf_str(g->ctx, l.list[i].s);
		int64_t d = kf_dim_parse(g->ctx, s, strlen(s)), v = d == KF_DIM_BAD ? d : spec_dim(g->ctx, d, z);
		if (v == d)
			continue;
		l.list[i] = KF_IS_SYM(v) ? (kf_attrval){.kind = KF_ATTR_STR, .s = KF_SYM_SID(v)}
					 : (kf_attrval){.kind = KF_ATTR_INT, .i = v};
		any = true;
	}
	if (any) {
		kf_node_set_attr(g, n, kf_intern_cstr(g->ctx, key), l);
		*changed = true;
	}
}

void kf_specialize(kf_graph *g, const kf_sid *sym, const int64_t *val, uint32_t n, bool *changed)
{
	sz z = {sym, val, n};
	for (kf_vid v = 0; v < g->nval; v++)
		g->val[v].type = spec_type(g->ctx, g->val[v].type, &z, changed);
	for (uint32_t i = 0; i < g->nres; i++)
		g->res[i] = spec_type(g->ctx, g->res[i], &z, changed);
	static const struct {
		int op;
		const char *key;
	} dims[] = {{KF_OP_RESHAPE, "shape"}, {KF_OP_BROADCAST_TO, "shape"}, {KF_OP_IOTA, "shape"},
		    {KF_OP_SLICE, "ends"}, {KF_OP_RESIZE, "sizes"}};
	for (kf_nid n = 0; n < g->nnode; n++) {
		if (g->node[n].flags & KF_NODE_DEAD)
			continue;
		for (size_t k = 0; k < sizeof dims / sizeof *dims; k++)
			if (g->node[n].op == dims[k].op)
				spec_attr(g, n, dims[k].key, &z, changed);
	}
}

uint32_t kf_graph_symbols(const kf_graph *g, kf_sid *out, uint32_t max)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < g->nval + g->nres; i++) {
		const kf_type *t = kf_type_get(g->ctx, i < g->nval ? g->val[i].type : g->res[i - g->nval]);
		for (int d = 0; d < t->rank; d++) {
			kf_mono m;
			if (!KF_IS_SYM(t->dim[d]) || !kf_dim_split(g->ctx, t->dim[d], &m))
				continue;
			for (int j = 0; j < m.n; j++) {
				bool seen = false;
				for (uint32_t k = 0; k < n && k < max && !seen; k++)
					seen = out[k] == m.sym[j];
				if (seen)
					continue;
				if (n < max)
					out[n] = m.sym[j];
				n++; /* past max the count may repeat a symbol: callers only compare it with max */
			}
		}
	}
	return n;
}

kf_graph *kf_graph_probe(const kf_graph *g, kf_sid *osym, int64_t *oval, uint32_t *on)
{
	/* primes: a product of static dims is never a multiple of one in any
	 * model seen (so numel comparisons mean what they mean symbolically),
	 * and a product of three stays far from overflow */
	static const int64_t primes[KF_PROBE_MAX] = {1009, 1013, 1019, 1021, 1031, 1033, 1039, 1049,
						     1051, 1061, 1063, 1069, 1087, 1091, 1093, 1097};
	kf_sid sym[KF_PROBE_MAX];
	uint32_t n = kf_graph_symbols(g, sym, KF_PROBE_MAX);
	if (n > KF_PROBE_MAX)
		n = KF_PROBE_MAX; /* the rest stay symbolic: the passes leave what they touch alone */
	if (on)
		*on = n;
	for (uint32_t i = 0; osym && i < n; i++) {
		osym[i] = sym[i];
		oval[i] = primes[i];
	}
	if (!n)
		return NULL;
	kf_graph *p = kf_graph_clone(g);
	bool changed = false;
	kf_specialize(p, sym, primes, n, &changed);
	return p;
}

static int spec_run(kf_graph *g, const kf_passopts *o, bool *changed)
{
	kf_sid *sym = calloc(o->n + 1, sizeof *sym);
	int64_t *val = calloc(o->n + 1, sizeof *val);
	for (uint32_t i = 0; i < o->n; i++) {
		const char *k = o->kv[i].key, *v = o->kv[i].val ? o->kv[i].val : "";
		char *end;
		long long x = strtoll(v, &end, 10);
		if (!*v || *end || x < 0) {
			kf_error(g->ctx, o->loc, "specialize: %s=%s is not a size (a non-negative int)", k, v);
			free(sym);
			free(val);
			return -1;
		}
		sym[i] = kf_intern_cstr(g->ctx, k);
		val[i] = x;
	}
	kf_specialize(g, sym, val, o->n, changed);
	free(sym);
	free(val);
	return 0;
}

static const char *const spec_opts[] = {"*", NULL};

const kf_pass kf_pass_specialize = {
	.name = "specialize",
	.doc = "give symbolic dims sizes: specialize{batch=1,seq=128} makes the types and dim attributes static",
	.opts = spec_opts,
	.run = spec_run,
};
