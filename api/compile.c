/* compile.c: the embedding API's backends, compiled graphs and runs
 * (include/kfuse/kfuse.h), through the backend interface (runtime/backend.h).
 *
 * The caller's host buffers are wrapped as kf_tensors (no copy in); the
 * backend allocates the results, which are copied into the caller's
 * buffers (one copy out: the backend contract allocates its results). */
#include <stdlib.h>
#include <string.h>

#include "dyn.h"
#include "kfuse_int.h"
#include "tensor.h"

kf_backend *kf_api_backend(kf_ctx *c, const char *name, const kf_cuda_opts *o, char *why, size_t whylen)
{
	kf_cuda_opts none = {0};
	if (!o)
		o = &none;
	if (!strcmp(name, "cpu"))
		return kf_backend_cpu_new(c);
	if (!strcmp(name, "cuda"))
		return kf_backend_cuda_new(c, o);
	if (strcmp(name, "auto")) {
		kf_error(c, KF_NOLOC, "unknown backend '%s' (cpu, cuda, auto)", name);
		return NULL;
	}
	kf_backend *be = kf_backend_cuda_new(c, o);
	char buf[512];
	if (!be || be->available(be, buf, sizeof buf))
		return be;
	kf_backend_free(be);
	if (why)
		snprintf(why, whylen, "%s", buf);
	return kf_backend_cpu_new(c);
}

/* be, or the plan cache over it for a symbolic g on a backend that wants
 * static shapes (NULL with an error; be is freed then). */
static kf_backend *dyn_wrap(kfuse_model *m, kf_graph *g, kf_backend *be, const kf_dyn_opts *o)
{
	if (!strcmp(be->name, "cpu") || !kf_dyn_graph_symbolic(g))
		return be;
	kf_dyn_opts d = o ? *o : (kf_dyn_opts){0};
	if (!o)
		d.pipeline = m->pipes.p;
	kf_passreg reg = {0};
	kf_api_passes(m->k, &reg);
	be = kf_dyn_backend_new(m->k->c, be, &reg, &d);
	kf_passreg_free(&reg);
	return be;
}

kfuse_compiled *kf_api_compile(kfuse_model *m, const char *graph, kf_backend *be)
{
	return kf_api_compile_dyn(m, graph, be, NULL);
}

kfuse_compiled *kf_api_compile_dyn(kfuse_model *m, const char *graph, kf_backend *be, const kf_dyn_opts *o)
{
	kf_graph *g = be ? kf_api_graph(m, graph) : NULL;
	if (g)
		be = dyn_wrap(m, g, be, o);
	g = be ? g : NULL;
	kfuse_compiled *x = g ? calloc(1, sizeof *x) : NULL;
	if (g && !x)
		kf_error(m->k->c, KF_NOLOC, "out of memory");
	if (x && !(x->plan = be->compile(be, g))) {
		free(x);
		x = NULL;
	}
	if (!x) {
		kf_backend_free(be);
		return NULL;
	}
	x->m = m;
	x->g = g;
	x->be = be;
	m->ncompiled++;
	return x;
}

kfuse_compiled *kfuse_compile(kfuse_model *m, const char *graph, const char *backend,
			      const kfuse_compile_opts *o)
{
	if (m->broken) {
		kf_error(m->k->c, KF_NOLOC, "a pipeline failed on this model before: it is not usable");
		return NULL;
	}
	kf_cuda_opts co = {0};
	if (o) {
		co.device = o->device;
		co.cache_dir = o->cache_dir;
		co.allow_tf32 = o->allow_tf32 != 0;
	}
	return kf_api_compile(m, graph, kf_api_backend(m->k->c, backend ? backend : "auto", &co, NULL, 0));
}

void kfuse_compiled_free(kfuse_compiled *x)
{
	if (!x)
		return;
	kf_plan_free(x->plan);
	kf_backend_free(x->be);
	x->m->ncompiled--;
	free(x);
}

const char *kfuse_compiled_backend(const kfuse_compiled *x)
{
	return x->be->name;
}

int kfuse_set_max_plans(kfuse_compiled *x, int n)
{
	if (n < 1) {
		kf_error(x->m->k->c, KF_NOLOC, "kfuse_set_max_plans: %d is not a number of plans (at least 1)", n);
		return -1;
	}
	if (kf_dyn_is(x->plan))
		kf_dyn_set_max(x->plan, n);
	return 0;
}

int kf_api_run(kfuse_compiled *x, const kf_tensor *in, int nin, kf_tensor *out, int nout)
{
	return x->be->run(x->plan, in, nin, out, nout);
}

/* The caller's buffer as a tensor (borrowed data; never freed here). */
static int as_tensor(kf_graph *g, const kfuse_buffer *b, int i, kf_tensor *t)
{
	memset(t, 0, sizeof *t);
	if ((unsigned)b->dtype >= KF_NDTYPE || b->rank < 0 || b->rank > KF_MAX_RANK) {
		kf_error(g->ctx, g->loc, "@%s: input %d has no valid dtype and rank", kf_str(g->ctx, g->name), i);
		return -1;
	}
	t->dtype = (uint8_t)b->dtype;
	t->rank = (uint8_t)b->rank;
	memcpy(t->dim, b->dim, sizeof t->dim);
	int64_t n = 1;
	for (int d = 0; d < b->rank; d++) {
		if (b->dim[d] < 0) {
			kf_error(g->ctx, g->loc, "@%s: input %d has a negative dim", kf_str(g->ctx, g->name), i);
			return -1;
		}
		n *= b->dim[d];
	}
	size_t need = (size_t)n * kf_dtype_size((kf_dtype)b->dtype);
	if (b->nbytes != need || (need && !b->data)) {
		kf_error(g->ctx, g->loc, "@%s: input %d is %zu bytes, its shape needs %zu", kf_str(g->ctx, g->name), i,
			 b->nbytes, need);
		return -1;
	}
	t->data = b->data;
	t->nbytes = need;
	return 0;
}

static int check_counts(kfuse_compiled *x, int nin, int nout)
{
	kf_graph *g = x->g;
	if (nin == (int)g->blk[0].narg && nout == (int)g->nres)
		return 0;
	kf_error(g->ctx, g->loc, "@%s takes %u inputs and gives %u results, not %d and %d", kf_str(g->ctx, g->name),
		 g->blk[0].narg, g->nres, nin, nout);
	return -1;
}

/* The outputs' types and sizes into the caller's descriptions; -1 with an
 * error naming the first output without room. */
static int describe_out(kf_graph *g, const kf_tensor *r, kfuse_buffer *out, int nout)
{
	int bad = -1;
	for (int i = 0; i < nout; i++) {
		out[i].dtype = (kfuse_dtype)r[i].dtype;
		out[i].rank = r[i].rank;
		memset(out[i].dim, 0, sizeof out[i].dim);
		memcpy(out[i].dim, r[i].dim, (size_t)r[i].rank * sizeof *r[i].dim);
		if (bad < 0 && (out[i].nbytes < r[i].nbytes || (r[i].nbytes && !out[i].data)))
			bad = i;
	}
	if (bad < 0)
		return 0;
	kf_error(g->ctx, g->loc, "@%s: output %d needs %zu bytes, its buffer has %zu", kf_str(g->ctx, g->name), bad,
		 r[bad].nbytes, out[bad].nbytes);
	return -1;
}

int kfuse_run(kfuse_compiled *x, const kfuse_buffer *in, int nin, kfuse_buffer *out, int nout)
{
	kf_graph *g = x->g;
	if (check_counts(x, nin, nout) < 0)
		return -1;
	kf_tensor *t = calloc((size_t)(nin + nout) + 1, sizeof *t), *r = t + nin;
	int rc = t ? 0 : -1;
	if (!t)
		kf_error(g->ctx, g->loc, "out of memory");
	for (int i = 0; rc == 0 && i < nin; i++)
		rc = as_tensor(g, &in[i], i, &t[i]);
	if (rc == 0)
		rc = x->be->run(x->plan, t, nin, r, nout);
	if (rc == 0)
		rc = describe_out(g, r, out, nout);
	for (int i = 0; rc == 0 && i < nout; i++)
		if (r[i].nbytes)
			memcpy(out[i].data, r[i].data, r[i].nbytes);
	for (int i = 0; t && i < nout; i++)
		kf_tensor_free(&r[i]);
	free(t);
	return rc;
}

int kfuse_run_device(kfuse_compiled *x, const kfuse_buffer *in, int nin, kfuse_buffer *out, int nout,
		     void *stream)
{
	kf_graph *g = x->g;
	if (!x->be->run_device) {
		kf_error(g->ctx, g->loc, "the %s backend runs on host memory: use kfuse_run", x->be->name);
		return -1;
	}
	if (check_counts(x, nin, nout) < 0)
		return -1;
	kf_tensor *t = calloc((size_t)(nin + nout) + 1, sizeof *t), *r = t + nin;
	int rc = t ? 0 : -1;
	if (!t)
		kf_error(g->ctx, g->loc, "out of memory");
	for (int i = 0; rc == 0 && i < nin; i++)
		rc = as_tensor(g, &in[i], i, &t[i]);
	/* the results are the graph's static types (the cuda backend plans
	 * static shapes; a symbolic graph's are those of its copy planned for
	 * these inputs, dyn.h); their room is the caller's */
	kf_plan *ip = rc == 0 && kf_dyn_is(x->plan) ? kf_dyn_plan_for(x->plan, t, nin) : x->plan;
	kf_graph *rg = ip ? ip->g : NULL;
	rc = rg ? rc : -1;
	for (int i = 0; rc == 0 && i < nout; i++) {
		const kf_type *ty = kf_type_get(g->ctx, rg->res[i]);
		r[i] = (kf_tensor){.dtype = ty->dtype, .rank = ty->rank, .data = out[i].data,
				   .nbytes = out[i].nbytes};
		memcpy(r[i].dim, ty->dim, sizeof r[i].dim);
		out[i].dtype = (kfuse_dtype)ty->dtype;
		out[i].rank = ty->rank;
		memcpy(out[i].dim, ty->dim, sizeof out[i].dim);
	}
	if (rc == 0)
		rc = x->be->run_device(x->plan, t, nin, r, nout, stream);
	free(t);
	return rc;
}
