/* kfuse_int.h: the embedding API's objects (include/kfuse/kfuse.h) as the
 * tools see them: each holds the library's own structures, which a tool
 * uses for what the API does not say (random inputs, tuning, reports).
 * Not installed: a program outside kfuse uses kfuse.h alone. */
#ifndef KF_API_INT_H
#define KF_API_INT_H

#include "kfuse/kfuse.h"
#include "kf.h"
#include "pass.h"
#include "backend.h"
#include "cuda_backend.h"

struct kfuse_ctx {
	kf_ctx *c;
	kf_buf err;          /* kfuse_error's text */
};

struct kfuse_model {
	kfuse_ctx *k;
	kf_module *m;
	int ncompiled;       /* compiled graphs alive: the model may not change */
	bool broken;         /* a pipeline failed half way */
	kf_buf pipes;        /* the pipelines run on it, ','-joined: what a symbolic graph's
			      * copies get once specialised to a shape (dyn.h) */
};

struct kfuse_compiled {
	kfuse_model *m;
	kf_graph *g;
	kf_backend *be;      /* owned */
	kf_plan *plan;
};

/* The built-in passes and those of the plugins loaded into k (free with
 * kf_passreg_free). */
void kf_api_passes(kfuse_ctx *k, kf_passreg *out);
/* Runs pipeline with the tool's options (dumps, logs, timing); the public
 * kfuse_pipeline is this with verify_each. */
int kf_api_pipeline(kfuse_model *m, const char *pipeline, const kf_runopts *ro);
/* The graph called name (NULL: the first), or NULL with an error. */
kf_graph *kf_api_graph(kfuse_model *m, const char *name);
/* Plans graph name of m on backend be, which the result then owns (freed
 * with it, or here on an error).  A graph with symbolic dims on a backend
 * other than cpu (which runs them as they are) goes through the
 * shape-keyed plan cache (dyn.h), whose copies get m's pipelines, or
 * o->pipeline when o is not NULL (o's other fields as they say). */
kfuse_compiled *kf_api_compile(kfuse_model *m, const char *graph, kf_backend *be);
struct kf_dyn_opts;
kfuse_compiled *kf_api_compile_dyn(kfuse_model *m, const char *graph, kf_backend *be, const struct kf_dyn_opts *o);
/* The backend contract's run (runtime/backend.h): out[] allocated by the
 * backend, freed by the caller with kf_tensor_free. */
int kf_api_run(kfuse_compiled *x, const kf_tensor *in, int nin, kf_tensor *out, int nout);
/* The backend named "cpu", "cuda" or "auto" (cuda's options o may be
 * NULL): auto is cuda when its driver loads and a device is there, else
 * cpu, and then why (when not NULL) says why not cuda.  NULL with an
 * error for another name. */
kf_backend *kf_api_backend(kf_ctx *c, const char *name, const kf_cuda_opts *o, char *why, size_t whylen);

#endif
