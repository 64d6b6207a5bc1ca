/* dyn.c: the shape-keyed plan cache (dyn.h). */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "dyn.h"
#include "interp.h"
#include "passes.h"

/* One cached plan: the sizes it was made for, sorted by symbol id so that
 * bindings found in any order compare equal. */
typedef struct entry {
	kf_sid *sym;
	int64_t *val;
	uint32_t n;
	kf_module *m;        /* holds the specialised copy */
	kf_plan *plan;       /* inner backend's, of m's graph */
	uint64_t used;       /* LRU tick */
} entry;

typedef struct dstate {
	kf_backend *inner;
	kf_pipeline *pipe;
	kf_dyn_opts o;
	kf_sid *fsym;        /* --dim sizes */
	int64_t *fval;
	uint32_t nf;
} dstate;

typedef struct dplan {
	kf_plan p;
	kf_module *fm;       /* the pipeline's result on a copy of the symbolic graph,
				which each shape specialises (NULL: the pipeline runs on
				each shape's copy instead) */
	kf_graph *probe;     /* the graph sized plans specialise, at generic sizes
				(kf_graph_probe, for the backend: runtime/backend.h) */
	kf_sid psym[KF_PROBE_MAX];
	int64_t pval[KF_PROBE_MAX];
	uint32_t np;
	entry *e;
	int cap, n;
	uint64_t tick;
	entry *last;
	kf_dyn_stats st;
} dplan;

static bool type_symbolic(const kf_ctx *c, kf_tid t)
{
	return !kf_type_is_static(kf_type_get(c, t));
}

bool kf_dyn_graph_symbolic(const kf_graph *g)
{
	for (kf_vid v = 0; v < g->nval; v++)
		if (type_symbolic(g->ctx, g->val[v].type))
			return true;
	for (uint32_t i = 0; i < g->nres; i++)
		if (type_symbolic(g->ctx, g->res[i]))
			return true;
	return false;
}

/* "{batch=2,seq=16}" */
static void key_str(kf_ctx *c, kf_buf *b, const kf_sid *sym, const int64_t *val, uint32_t n)
{
	kf_buf_printf(b, "{");
	for (uint32_t i = 0; i < n; i++)
		kf_buf_printf(b, "%s%s=%lld", i ? "," : "", kf_str(c, sym[i]), (long long)val[i]);
	kf_buf_printf(b, "}");
}

static void entry_free(entry *e)
{
	kf_plan_free(e->plan);
	kf_module_free(e->m);
	free(e->sym);
	free(e->val);
	memset(e, 0, sizeof *e);
}

/* The bound sizes as a sorted key: the inputs' bindings, then the --dim
 * sizes of symbols no input gave. */
static void make_key(const dstate *s, const kf_symbind *b, entry *k)
{
	uint32_t n = b->n;
	k->sym = malloc((b->n + s->nf + 1) * sizeof *k->sym);
	k->val = malloc((b->n + s->nf + 1) * sizeof *k->val);
	if (!k->sym || !k->val)
		kf_oom();
	memcpy(k->sym, b->sym, b->n * sizeof *k->sym);
	memcpy(k->val, b->val, b->n * sizeof *k->val);
	for (uint32_t i = 0; i < s->nf; i++) {
		bool have = false;
		for (uint32_t j = 0; j < b->n && !have; j++)
			have = b->sym[j] == s->fsym[i];
		if (!have) {
			k->sym[n] = s->fsym[i];
			k->val[n++] = s->fval[i];
		}
	}
	/* insertion sort: a graph has a handful of symbols */
	for (uint32_t i = 1; i < n; i++)
		for (uint32_t j = i; j > 0 && k->sym[j - 1] > k->sym[j]; j--) {
			kf_sid ts = k->sym[j];
			int64_t tv = k->val[j];
			k->sym[j] = k->sym[j - 1];
			k->val[j] = k->val[j - 1];
			k->sym[j - 1] = ts;
			k->val[j - 1] = tv;
		}
	k->n = n;
}

static entry *lookup(dplan *d, const entry *k)
{
	for (int i = 0; i < d->n; i++) {
		entry *e = &d->e[i];
		if (e->n == k->n && !memcmp(e->sym, k->sym, k->n * sizeof *k->sym) &&
		    !memcmp(e->val, k->val, k->n * sizeof *k->val))
			return e;
	}
	return NULL;
}

/* The first symbol left in a type of g after specialising (one no input
 * and no --dim gave), or 0. */
static kf_sid unsized_symbol(kf_graph *g)
{
	for (kf_vid v = 0; v < g->nval; v++) {
		const kf_type *t = kf_vtype(g, v);
		for (int d = 0; d < t->rank; d++) {
			kf_mono m;
			if (KF_IS_SYM(t->dim[d]) && kf_dim_split(g->ctx, t->dim[d], &m) && m.n)
				return m.sym[0];
		}
	}
	return 0;
}

/* Folds the top-level nodes of g that compute from constants alone (the
 * merged q/k/v weights of merge-matmul, larger than canonicalize folds):
 * once per model, where each plan would compute them again (every shape's
 * copy shares the payloads: kf_graph_clone).  Nodes in bodies are left. */
static void fold_consts(kf_graph *g)
{
	for (kf_nid n = g->blk[0].first, next; n != KF_NONE; n = next) {
		next = g->node[n].next; /* erasing n unlinks it */
		kf_vid out[KF_MAX_RANK];
		const kf_node *x = kf_N(g, n);
		if (x->op == KF_OP_CONST || x->nres > KF_MAX_RANK || !kf_fold_node(g, n, INT64_C(1) << 26, out))
			continue;
		for (uint32_t r = 0; r < kf_N(g, n)->nres; r++) {
			kf_V(g, out[r])->name = kf_V(g, kf_res(g, n, r))->name;
			kf_replace_all_uses(g, kf_res(g, n, r), out[r]);
		}
		kf_nid ops[16];
		uint32_t nops = 0;
		for (uint32_t i = 0; i < kf_N(g, n)->nin && nops < 16; i++)
			ops[nops++] = kf_def(g, kf_in(g, n, i));
		kf_node_erase(g, n);
		/* the constants it read that nothing else reads (the weights it
		 * concatenated) go too */
		for (uint32_t i = 0; i < nops; i++)
			if (ops[i] != KF_NONE && ops[i] != next && !(kf_N(g, ops[i])->flags & KF_NODE_DEAD) &&
			    !kf_has_uses(g, kf_res(g, ops[i], 0)))
				kf_node_erase(g, ops[i]);
	}
}

/* Runs the pipeline once, on a copy of the symbolic graph (the fuse
 * passes group symbolic dims as they would any one size: passes/fuse.c),
 * into d->fm, and folds what it left that computes from constants alone.
 * When it fails there, the errors become a report line and each shape's
 * copy runs the pipeline instead. */
static void fuse_once(dplan *d)
{
	dstate *s = d->p.be->state;
	kf_graph *g = d->p.g;
	kf_ctx *c = g->ctx;
	if (!s->pipe)
		return;
	kf_diag_mark dm = kf_diag_mark_now(c);
	d->fm = kf_module_new(c);
	kf_module_add(d->fm, kf_graph_clone(g));
	kf_runopts ro = {.verify_each = true};
	if (kf_pipeline_run(s->pipe, d->fm, &ro) == 0 && kf_nerrors(c) == dm.nerrors) {
		fold_consts(d->fm->graph[0]);
		return;
	}
	kf_buf why = {0};
	kf_diag_rewind(c, dm, &why);
	if (s->o.report)
		kf_buf_printf(s->o.report, "dyn: @%s: the pipeline does not run on the symbolic graph, so it runs on "
			      "each shape's copy:\n%.*s", kf_str(c, g->name), (int)why.n, why.p ? why.p : "");
	kf_buf_free(&why);
	kf_module_free(d->fm);
	d->fm = NULL;
}

/* Specialises a copy of the graph the pipeline made once (else of p's
 * graph, then running the pipeline on it) to key k and plans it: k's
 * module and plan.  0, or -1 with an error. */
static int plan_shape(dplan *d, entry *k)
{
	dstate *s = d->p.be->state;
	kf_graph *g = d->p.g, *src = d->fm ? d->fm->graph[0] : g;
	kf_ctx *c = g->ctx;
	kf_graph *cg = kf_graph_clone(src);
	k->m = kf_module_new(c);
	kf_module_add(k->m, cg);
	bool changed = false;
	kf_specialize(cg, k->sym, k->val, k->n, &changed);
	kf_sid left = unsized_symbol(cg);
	if (left) {
		kf_error(c, g->loc, "@%s: symbol '%s' gets no size from the inputs (kfuse-run: --dim %s=SIZE)",
			 kf_str(c, g->name), kf_str(c, left), kf_str(c, left));
		return -1;
	}
	int before = kf_nerrors(c);
	if (kf_verify(cg) != 0 || kf_nerrors(c) != before) {
		kf_note(c, g->loc, "@%s: after specialising it to the inputs' shapes", kf_str(c, g->name));
		return -1;
	}
	kf_runopts ro = {.verify_each = true};
	if (s->pipe && !d->fm && kf_pipeline_run(s->pipe, k->m, &ro) != 0)
		return -1;
	/* the copy has the ids of src when no pass ran on it since: a backend
	 * may then read its sizes at run time (runtime/backend.h) */
	bool sized = s->inner->compile_sized && (d->fm || !s->pipe);
	if (sized && !d->probe && !d->np)
		d->probe = kf_graph_probe(src, d->psym, d->pval, &d->np);
	int64_t pv[k->n + 1];
	for (uint32_t i = 0; i < k->n; i++) {
		pv[i] = 0;
		for (uint32_t j = 0; j < d->np; j++)
			if (d->psym[j] == k->sym[i])
				pv[i] = d->pval[j];
	}
	kf_sizes sz = {src, k->sym, k->val, k->n, d->probe, pv};
	k->plan = sized ? s->inner->compile_sized(s->inner, cg, &sz) : s->inner->compile(s->inner, cg);
	return k->plan ? 0 : -1;
}

/* Frees the least recently used plan (reported); its slot, now empty. */
static entry *evict(dplan *d)
{
	entry *lru = &d->e[0];
	for (int i = 1; i < d->n; i++)
		if (d->e[i].used < lru->used)
			lru = &d->e[i];
	dstate *s = d->p.be->state;
	if (s->o.report) {
		kf_buf_printf(s->o.report, "dyn: @%s: evicted the plan of ", kf_str(d->p.g->ctx, d->p.g->name));
		key_str(d->p.g->ctx, s->o.report, lru->sym, lru->val, lru->n);
		kf_buf_printf(s->o.report, "\n");
	}
	d->st.evictions++;
	if (d->last == lru)
		d->last = NULL;
	entry_free(lru);
	return lru;
}

/* The slot for a new plan: a free one, or the least recently used one's. */
static entry *slot(dplan *d)
{
	return d->n < d->cap ? &d->e[d->n++] : evict(d);
}

void kf_dyn_set_max(kf_plan *p, int n)
{
	dplan *d = (dplan *)p;
	/* the evicted slots are moved out of the live range [0, d->n) */
	while (d->n > n) {
		entry *e = evict(d);
		entry *end = &d->e[--d->n];
		if (d->last == end)
			d->last = e;
		*e = *end;
		memset(end, 0, sizeof *end);
	}
	/* last points into the array that moves */
	ptrdiff_t li = d->last ? d->last - d->e : -1;
	entry *ne = realloc(d->e, (size_t)n * sizeof *ne);
	if (!ne)
		kf_oom();
	if (n > d->cap)
		memset(ne + d->cap, 0, (size_t)(n - d->cap) * sizeof *ne);
	d->last = li >= 0 ? ne + li : NULL;
	d->e = ne;
	d->cap = n;
	d->st.plans = d->n;
}

kf_plan *kf_dyn_plan_for(kf_plan *p, const kf_tensor *in, int nin)
{
	dplan *d = (dplan *)p;
	dstate *s = p->be->state;
	kf_ctx *c = p->g->ctx;
	kf_symbind b;
	if (kf_interp_bind_inputs(p->g, in, nin, &b) != 0)
		return NULL;
	entry k = {0};
	make_key(s, &b, &k);
	kf_symbind_free(&b);
	entry *e = lookup(d, &k);
	double t0 = kf_now();
	bool hit = e != NULL;
	if (hit) {
		entry_free(&k);
	} else {
		int rc = plan_shape(d, &k);
		if (rc != 0) {
			entry_free(&k);
			return NULL;
		}
		e = slot(d);
		*e = k;
	}
	e->used = ++d->tick;
	d->last = e;
	hit ? d->st.hits++ : d->st.misses++;
	d->st.plans = d->n;
	if (s->o.report) {
		kf_buf_printf(s->o.report, "dyn: @%s ", kf_str(c, p->g->name));
		key_str(c, s->o.report, e->sym, e->val, e->n);
		if (hit)
			kf_buf_printf(s->o.report, ": hit (%d of %d plans cached)\n", d->n, d->cap);
		else
			kf_buf_printf(s->o.report, ": miss, specialised and planned in %.1f ms (%d of %d plans cached)\n",
				      (kf_now() - t0) * 1e3, d->n, d->cap);
	}
	return e->plan;
}

kf_plan *kf_dyn_last(const kf_plan *p)
{
	return kf_dyn_is(p) && ((const dplan *)p)->last ? ((const dplan *)p)->last->plan : NULL;
}

void kf_dyn_get_stats(const kf_plan *p, kf_dyn_stats *out)
{
	*out = kf_dyn_is(p) ? ((const dplan *)p)->st : (kf_dyn_stats){0};
}

/* ---- the backend (runtime/backend.h) ---------------------------------------------- */

static bool dyn_available(kf_backend *be, char *why, size_t whylen)
{
	dstate *s = be->state;
	return !s->inner->available || s->inner->available(s->inner, why, whylen);
}

/* Nothing is planned until the first run gives the shapes. */
static kf_plan *dyn_compile(kf_backend *be, kf_graph *g)
{
	dstate *s = be->state;
	dplan *d = calloc(1, sizeof *d);
	int cap = s->o.max_plans > 0 ? s->o.max_plans : KF_DYN_DEFAULT_PLANS;
	if (d)
		d->e = calloc(cap, sizeof *d->e);
	if (!d || !d->e) {
		free(d);
		kf_error(g->ctx, g->loc, "out of memory");
		return NULL;
	}
	d->p = (kf_plan){.be = be, .g = g};
	d->cap = cap;
	fuse_once(d);
	return &d->p;
}

static int dyn_run(kf_plan *p, const kf_tensor *in, int nin, kf_tensor *out, int nout)
{
	kf_plan *ip = kf_dyn_plan_for(p, in, nin);
	return ip ? ip->be->run(ip, in, nin, out, nout) : -1;
}

static int dyn_run_device(kf_plan *p, const kf_tensor *in, int nin, const kf_tensor *out, int nout, void *stream)
{
	kf_plan *ip = kf_dyn_plan_for(p, in, nin);
	if (ip && !ip->be->run_device) {
		kf_error(p->g->ctx, p->g->loc, "the %s backend runs on host memory", ip->be->name);
		return -1;
	}
	return ip ? ip->be->run_device(ip, in, nin, out, nout, stream) : -1;
}

/* The plan of the last run's shape, as the backend contract says. */
static int dyn_bench(kf_plan *p, int n, double *median_ms, double *min_ms)
{
	kf_plan *ip = kf_dyn_last(p);
	if (!ip || !ip->be->bench) {
		kf_error(p->g->ctx, p->g->loc, "@%s: nothing to bench (no run yet, or the backend has no bench)",
			 kf_str(p->g->ctx, p->g->name));
		return -1;
	}
	return ip->be->bench(ip, n, median_ms, min_ms);
}

static void dyn_plan_free(kf_plan *p)
{
	dplan *d = (dplan *)p;
	for (int i = 0; i < d->n; i++)
		entry_free(&d->e[i]);
	free(d->e);
	kf_module_free(d->fm);
	if (d->probe)
		kf_graph_free(d->probe);
	free(d);
}

static void dyn_free(kf_backend *be)
{
	dstate *s = be->state;
	kf_backend_free(s->inner);
	kf_pipeline_free(s->pipe);
	free(s->fsym);
	free(s->fval);
	free(be);
}

bool kf_dyn_is(const kf_plan *p)
{
	return p && p->be->compile == dyn_compile;
}

/* The --dim sizes into s (SYM=SIZE, SIZE a non-negative int). */
static int parse_dims(kf_ctx *c, dstate *s)
{
	s->fsym = calloc(s->o.ndim + 1, sizeof *s->fsym);
	s->fval = calloc(s->o.ndim + 1, sizeof *s->fval);
	if (!s->fsym || !s->fval)
		kf_oom();
	for (int i = 0; i < s->o.ndim; i++) {
		const char *kv = s->o.dims[i], *eq = strchr(kv, '=');
		char *end;
		long long x = eq ? strtoll(eq + 1, &end, 10) : -1;
		if (!eq || eq == kv || !eq[1] || *end || x < 0) {
			kf_error(c, KF_NOLOC, "dim '%s' is not SYM=SIZE (a non-negative int)", kv);
			return -1;
		}
		s->fsym[s->nf] = kf_intern(c, kv, (size_t)(eq - kv));
		s->fval[s->nf++] = x;
	}
	return 0;
}

kf_backend *kf_dyn_backend_new(kf_ctx *c, kf_backend *inner, const kf_passreg *reg, const kf_dyn_opts *o)
{
	if (!inner)
		return NULL;
	/* one allocation: the table, then its state */
	kf_backend *be = calloc(1, sizeof *be + sizeof(dstate));
	if (!be) {
		kf_backend_free(inner);
		kf_error(c, KF_NOLOC, "out of memory");
		return NULL;
	}
	dstate *s = (dstate *)(be + 1);
	*s = (dstate){.inner = inner, .o = *o};
	*be = (kf_backend){.name = inner->name, .available = dyn_available, .compile = dyn_compile,
			   .run = dyn_run, .run_device = inner->run_device ? dyn_run_device : NULL,
			   .bench = inner->bench ? dyn_bench : NULL, .plan_free = dyn_plan_free, .free = dyn_free,
			   .state = s};
	if (o->pipeline && o->pipeline[0] && !(s->pipe = kf_pipeline_parse(c, reg, o->pipeline))) {
		dyn_free(be);
		return NULL;
	}
	if (parse_dims(c, s) != 0) {
		dyn_free(be);
		return NULL;
	}
	return be;
}
