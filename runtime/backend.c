/* backend.c: the backend seam's shared parts (backend.h) and the first
 * backend, the CPU interpreter, whose plan is the graph itself. */
#include <stdlib.h>
#include "backend.h"
#include "interp.h"

int kf_backend_run_once(kf_backend *be, kf_graph *g, const kf_tensor *in, int nin, kf_tensor *out, int nout)
{
	kf_plan *p = be->compile(be, g);
	if (!p)
		return -1;
	int rc = be->run(p, in, nin, out, nout);
	kf_plan_free(p);
	return rc;
}

void kf_plan_free(kf_plan *p)
{
	if (p)
		p->be->plan_free(p);
}

void kf_backend_free(kf_backend *be)
{
	if (be)
		be->free(be);
}

/* ---- the CPU interpreter ------------------------------------------------------ */

static kf_plan *cpu_compile(kf_backend *be, kf_graph *g)
{
	kf_plan *p = malloc(sizeof *p);
	if (!p) {
		kf_error(g->ctx, g->loc, "cpu: out of memory");
		return NULL;
	}
	kf_rt_register(g->ctx);
	*p = (kf_plan){.be = be, .g = g};
	return p;
}

static int cpu_run(kf_plan *p, const kf_tensor *in, int nin, kf_tensor *out, int nout)
{
	return kf_interp_run(p->g, in, nin, out, nout);
}

static void cpu_plan_free(kf_plan *p)
{
	free(p);
}

static void cpu_free(kf_backend *be)
{
	free(be);
}

kf_backend *kf_backend_cpu_new(kf_ctx *c)
{
	kf_backend *be = malloc(sizeof *be);
	if (!be) {
		kf_error(c, KF_NOLOC, "cpu: out of memory");
		return NULL;
	}
	*be = (kf_backend){.name = "cpu", .compile = cpu_compile, .run = cpu_run,
			   .plan_free = cpu_plan_free, .free = cpu_free};
	return be;
}
