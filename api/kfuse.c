/* kfuse.c: the embedding API (include/kfuse/kfuse.h): contexts, models,
 * pipelines, what graphs take and give; compile.c compiles and runs.
 *
 * Every object wraps the library's own (kfuse_int.h); errors stay in the
 * context until kfuse_error renders them, as the tools print them. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "interp.h"
#include "kfuse_int.h"
#include "passes.h"
#include "plugin.h"
#include "emit_cuda.h"
#ifdef KF_HAVE_ONNX
#include "onnx_import.h"
#endif

_Static_assert(KFUSE_I64 == (int)KF_I64 && KFUSE_F16 == (int)KF_F16 && KFUSE_MAX_RANK == KF_MAX_RANK,
	       "kfuse.h's dtypes and rank are the core's");

const char *kfuse_version(void)
{
	return KF_VERSION;
}

size_t kfuse_dtype_size(kfuse_dtype t)
{
	return (unsigned)t < KF_NDTYPE ? kf_dtype_size((kf_dtype)t) : 0;
}

const char *kfuse_dtype_name(kfuse_dtype t)
{
	return (unsigned)t < KF_NDTYPE ? kf_dtype_name((kf_dtype)t) : "?";
}

/* ---- contexts ------------------------------------------------------------------ */

kfuse_ctx *kfuse_new(void)
{
	kfuse_ctx *k = calloc(1, sizeof *k);
	if (!k)
		return NULL;
	k->c = kf_ctx_new();
	/* the CPU kernels: canonicalize folds constants through them */
	kf_rt_register(k->c);
	return k;
}

void kfuse_free(kfuse_ctx *k)
{
	if (!k)
		return;
	kf_ctx_free(k->c); /* releases the plugins first */
	kf_buf_free(&k->err);
	free(k);
}

const char *kfuse_error(kfuse_ctx *k)
{
	k->err.n = 0;
	if (k->err.p)
		k->err.p[0] = 0;
	kf_diag_render(k->c, &k->err);
	kf_diag_clear(k->c);
	return k->err.p ? k->err.p : "";
}

int kfuse_load_plugin(kfuse_ctx *k, const char *path)
{
	return kf_plugin_load(k->c, path) < 0 ? -1 : 0;
}

void kf_api_passes(kfuse_ctx *k, kf_passreg *out)
{
	kf_passes_builtin(out);
	kf_plugin_passes(k->c, out);
}

/* ---- models ------------------------------------------------------------------ */

static kfuse_model *wrap(kfuse_ctx *k, kf_module *m)
{
	if (!m)
		return NULL;
	int bad = 0;
	for (uint32_t i = 0; i < m->ngraph; i++)
		bad += kf_verify(m->graph[i]);
	kfuse_model *w = bad ? NULL : calloc(1, sizeof *w);
	if (!w) {
		if (!bad)
			kf_error(k->c, KF_NOLOC, "out of memory");
		kf_module_free(m);
		return NULL;
	}
	*w = (kfuse_model){.k = k, .m = m};
	return w;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && !strcmp(s + n - k, suffix);
}

kfuse_model *kfuse_load(kfuse_ctx *k, const char *path)
{
	if (!ends_with(path, ".onnx"))
		return wrap(k, kf_parse_file(k->c, path));
#ifdef KF_HAVE_ONNX
	/* initializers stay inline, in memory: the model has no directory of
	 * its own to write them to */
	kf_onnx_opts o = {.inline_max = INT64_MAX};
	kf_module *m = kf_onnx_import_file(k->c, path, &o);
	kf_buf dir = {0};
	kf_path_dir(&dir, path);
	for (uint32_t i = 0; m && i < m->ngraph; i++)
		m->graph[i]->dir = kf_intern_cstr(k->c, dir.p);
	kf_buf_free(&dir);
	return wrap(k, m);
#else
	kf_error(k->c, (kf_loc){kf_source_add(k->c, path, NULL, 0), 0},
		 "this kfuse was built without the ONNX importer (protobuf-c and onnx.proto were missing)");
	return NULL;
#endif
}

kfuse_model *kfuse_load_text(kfuse_ctx *k, const char *name, const char *text, size_t len)
{
	return wrap(k, kf_parse(k->c, name ? name : "<text>", text, len));
}

void kfuse_model_free(kfuse_model *m)
{
	if (!m)
		return;
	kf_module_free(m->m);
	kf_buf_free(&m->pipes);
	free(m);
}

/* A model's state allows a change, or says why not. */
static bool changeable(kfuse_model *m)
{
	if (m->ncompiled) {
		kf_error(m->k->c, KF_NOLOC, "the model has %d compiled graph%s alive: free them before changing it",
			 m->ncompiled, m->ncompiled == 1 ? "" : "s");
		return false;
	}
	if (m->broken) {
		kf_error(m->k->c, KF_NOLOC, "a pipeline failed on this model before: it is not usable");
		return false;
	}
	return true;
}

int kf_api_pipeline(kfuse_model *m, const char *pipeline, const kf_runopts *ro)
{
	if (!changeable(m))
		return -1;
	kf_passreg reg = {0};
	kf_api_passes(m->k, &reg);
	kf_pipeline *pl = kf_pipeline_parse(m->k->c, &reg, pipeline ? pipeline : "");
	int rc = pl ? kf_pipeline_run(pl, m->m, ro) : -1;
	/* a parse error changed nothing; a failed pass may have */
	m->broken = pl && rc < 0;
	if (rc == 0 && pipeline && pipeline[0])
		kf_buf_printf(&m->pipes, "%s%s", m->pipes.n ? "," : "", pipeline);
	kf_pipeline_free(pl);
	kf_passreg_free(&reg);
	return rc < 0 ? -1 : 0;
}

int kfuse_pipeline(kfuse_model *m, const char *pipeline)
{
	kf_runopts ro = {.verify_each = true};
	return kf_api_pipeline(m, pipeline, &ro);
}

int kfuse_save(kfuse_model *m, const char *path)
{
	kf_ctx *c = m->k->c;
	bool out = !path || !strcmp(path, "-");
	kf_buf dir = {0};
	kf_path_dir(&dir, out ? "" : path);
	int rc = kf_module_locate(m->m, dir.p);
	kf_buf_free(&dir);
	if (rc < 0)
		return -1;
	const char *name = out ? "<stdout>" : path;
	/* atomic (kf_ofile): a full disk or a kill never leaves the file
	 * truncated, and saving over the input read cannot lose it */
	kf_ofile o;
	int e = kf_ofile_open(&o, out ? NULL : path);
	if (!e) {
		if (kf_print_module_file(o.f, m->m) != 0 && !o.err)
			o.err = errno ? errno : EIO;
		e = kf_ofile_commit(&o);
	}
	if (e) {
		kf_error(c, (kf_loc){kf_source_add(c, name, NULL, 0), 0}, "cannot write: %s", kf_file_strerror(e));
		return -1;
	}
	return 0;
}

int kfuse_emit(kfuse_model *m, const char *kind, char **text, size_t *len)
{
	kf_buf b = {0};
	int rc = 0;
	*text = NULL;
	if (!strcmp(kind, "ir"))
		kf_print_module(&b, m->m);
	else if (!strcmp(kind, "dot"))
		kf_dot_module(&b, m->m);
	else if (!strcmp(kind, "cuda"))
		rc = kf_emit_cuda_module(m->m, &b);
	else if (!strcmp(kind, "ptx"))
		rc = kf_emit_ptx_module(m->m, &b);
	else {
		kf_error(m->k->c, KF_NOLOC, "unknown kind of output '%s' (ir, dot, cuda, ptx)", kind);
		rc = -1;
	}
	if (rc < 0) {
		kf_buf_free(&b);
		return -1;
	}
	kf_buf_putc(&b, 0); /* an empty text is "" too */
	*text = b.p;
	if (len)
		*len = b.n - 1;
	return 0;
}

/* ---- what graphs take and give ------------------------------------------------- */

int kfuse_graph_count(const kfuse_model *m)
{
	return (int)m->m->ngraph;
}

const char *kfuse_graph_name(const kfuse_model *m, int i)
{
	if (i < 0 || (uint32_t)i >= m->m->ngraph)
		return NULL;
	return kf_str(m->k->c, m->m->graph[i]->name);
}

kf_graph *kf_api_graph(kfuse_model *m, const char *name)
{
	kf_ctx *c = m->k->c;
	if (name && name[0] == '@')
		name++;
	for (uint32_t i = 0; i < m->m->ngraph; i++)
		if (!name || !strcmp(kf_str(c, m->m->graph[i]->name), name))
			return m->m->graph[i];
	kf_buf have = {0};
	for (uint32_t i = 0; i < m->m->ngraph; i++)
		kf_buf_printf(&have, "%s@%s", i ? ", " : "", kf_str(c, m->m->graph[i]->name));
	if (name)
		kf_error(c, (kf_loc){m->m->src, 0}, "no graph @%s here (it has %s)", name, have.p ? have.p : "none");
	else
		kf_error(c, (kf_loc){m->m->src, 0}, "the model holds no graph");
	kf_buf_free(&have);
	return NULL;
}

int kfuse_num_inputs(kfuse_model *m, const char *graph)
{
	kf_graph *g = kf_api_graph(m, graph);
	return g ? (int)g->blk[0].narg : -1;
}

int kfuse_num_outputs(kfuse_model *m, const char *graph)
{
	kf_graph *g = kf_api_graph(m, graph);
	return g ? (int)g->nres : -1;
}

static void describe(kf_graph *g, kf_tid t, kf_sid name, kfuse_tensor_info *out)
{
	const kf_type *ty = kf_type_get(g->ctx, t);
	memset(out, 0, sizeof *out);
	out->name = kf_str(g->ctx, name);
	out->dtype = (kfuse_dtype)ty->dtype;
	out->rank = ty->rank;
	for (int d = 0; d < ty->rank; d++) {
		bool sym = KF_IS_SYM(ty->dim[d]);
		out->dim[d] = sym ? -1 : ty->dim[d];
		out->sym[d] = sym ? kf_str(g->ctx, KF_SYM_SID(ty->dim[d])) : NULL;
	}
}

int kfuse_input_info(kfuse_model *m, const char *graph, int i, kfuse_tensor_info *out)
{
	kf_graph *g = kf_api_graph(m, graph);
	if (!g)
		return -1;
	if (i < 0 || (uint32_t)i >= g->blk[0].narg) {
		kf_error(m->k->c, g->loc, "@%s has no input %d (it takes %u)", kf_str(g->ctx, g->name), i,
			 g->blk[0].narg);
		return -1;
	}
	kf_vid v = g->blk[0].arg[i];
	describe(g, kf_V(g, v)->type, kf_V(g, v)->name, out);
	return 0;
}

int kfuse_output_info(kfuse_model *m, const char *graph, int i, kfuse_tensor_info *out)
{
	kf_graph *g = kf_api_graph(m, graph);
	if (!g)
		return -1;
	if (i < 0 || (uint32_t)i >= g->nres) {
		kf_error(m->k->c, g->loc, "@%s has no output %d (it gives %u)", kf_str(g->ctx, g->name), i, g->nres);
		return -1;
	}
	/* the declared result type, named after the value returned */
	kf_nid ret = kf_block_terminator(g, 0);
	kf_sid name = ret != KF_NONE ? kf_V(g, kf_in(g, ret, (uint32_t)i))->name : 0;
	describe(g, g->res[i], name, out);
	return 0;
}
