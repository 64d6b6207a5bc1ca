/* plugin.c: plugins (C shared libraries and Lua op scripts) and the Lua host
 * of a context.
 *
 * What plugins register must live as long as the context: the plugin state
 * hangs on the context's extension slot (kf_ctx_set_ext), found from the
 * context alone, which is all a pass or a callback has.  kf_plugin_release
 * frees it; kf_ctx_free calls it, so tools need not.
 */
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "kf_int.h"
#include "kfuse/kfuse_plugin.h"
#include "lua_int.h"
#include "plugin.h"

typedef struct plugin {
	void *dl;
	kfuse_plugin_api api;
	char *path;
} plugin;

typedef struct plughost {
	kf_lhost *lua;
	const char *loading;     /* the C plugin whose init runs now: its ops' origin */
	plugin **pl; uint32_t npl, cappl;
	const kf_pass **pass; uint32_t npass, cappass;
	int *ops; uint32_t nops, capops; /* registered by C plugins */
} plughost;

static plughost *host_of(kf_ctx *c, bool create)
{
	plughost *p = kf_ctx_ext(c);
	if (p || !create)
		return p;
	p = calloc(1, sizeof *p);
	if (p)
		kf_ctx_set_ext(c, p, kf_plugin_release);
	return p;
}

kf_lhost *kf_lhost_get(kf_ctx *c)
{
	plughost *p = host_of(c, true);
	if (p && !p->lua)
		p->lua = kf_lhost_new(c);
	return p ? p->lua : NULL;
}

/* ---- the table plugins call through --------------------------------------------------- */

static int plugin_gone(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen)
{
	snprintf(err, errlen, "op '%s' belongs to a plugin that was unloaded", kf_op(g->ctx, kf_N(g, n)->op)->name);
	return -1;
}

static int api_register_op(kf_ctx *c, const kf_opinfo *info)
{
	plughost *p = host_of(c, true);
	int op = kf_op_register(c, info);
	if (op >= 0 && p && p->loading)
		kf_op_set_origin(c, op, p->loading);
	if (op >= 0 && p) {
		kf_grow((void **)&p->ops, &p->capops, p->nops + 1, sizeof *p->ops);
		p->ops[p->nops++] = op;
	}
	return op;
}

static int api_register_pass(kf_ctx *c, const kf_pass *pass)
{
	plughost *p = host_of(c, true);
	if (!p || !pass || !pass->name || !pass->run) {
		kf_error(c, KF_NOLOC, "a plugin registered a pass without a name or run function");
		return -1;
	}
	kf_grow((void **)&p->pass, &p->cappass, p->npass + 1, sizeof *p->pass);
	p->pass[p->npass++] = pass;
	return 0;
}

static void api_error(kf_ctx *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	kf_diag_v(c, KF_DIAG_ERROR, KF_NOLOC, fmt, ap);
	va_end(ap);
}

static void fill_api(kfuse_plugin_api *a, kf_ctx *c, const char *path)
{
	memset(a, 0, sizeof *a);
	a->abi = KFUSE_PLUGIN_ABI;
	a->size = sizeof *a;
	a->ctx = c;
	a->path = path;
	a->register_op = api_register_op;
	a->register_pass = api_register_pass;
	a->error = api_error;
	a->intern = kf_intern_cstr;
	a->str = kf_str;
	a->type_intern = kf_type_intern;
	a->type_get = kf_type_get;
	a->op_lookup = kf_op_lookup;
	a->op = kf_op;
	a->node_new = kf_node_new;
	a->infer = kf_infer;
	a->replace_all_uses = kf_replace_all_uses;
	a->node_erase = kf_node_erase;
	a->attr_get = kf_attr_get;
	a->const_scalar = kf_const_scalar;
}

/* ---- loading --------------------------------------------------------------------------- */

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && !strcmp(s + n - k, suffix);
}

static int load_so(kf_ctx *c, plughost *p, const char *path)
{
	kf_loc at = {kf_source_add(c, path, NULL, 0), 0};
	/* dlopen searches the library path for a bare name; a plugin is a file */
	char buf[4096];
	if (!strchr(path, '/') && snprintf(buf, sizeof buf, "./%s", path) < (int)sizeof buf)
		path = buf;
	void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!dl) {
		kf_error(c, at, "cannot load plugin: %s", dlerror());
		return -1;
	}
	kfuse_plugin_init_fn init;
	*(void **)&init = dlsym(dl, "kfuse_plugin_init");
	if (!init) {
		kf_error(c, at, "not a kfuse plugin: it has no kfuse_plugin_init");
		dlclose(dl);
		return -1;
	}
	plugin *pl = calloc(1, sizeof *pl);
	pl->dl = dl;
	pl->path = strdup(path);
	fill_api(&pl->api, c, pl->path);
	/* kept loaded from here on: the ops it registers point into it */
	kf_grow((void **)&p->pl, &p->cappl, p->npl + 1, sizeof *p->pl);
	p->pl[p->npl++] = pl;
	int before = kf_nerrors(c);
	p->loading = pl->path;
	int rc = init(&pl->api);
	p->loading = NULL;
	if (rc != 0) {
		if (kf_nerrors(c) == before)
			kf_error(c, at, "plugin initialisation failed");
		else
			kf_note(c, at, "while initialising this plugin");
		return -1;
	}
	return 0;
}

int kf_plugin_load(kf_ctx *c, const char *path)
{
	plughost *p = host_of(c, true);
	if (!p) {
		kf_error(c, KF_NOLOC, "out of memory loading plugin %s", path);
		return -1;
	}
	if (ends_with(path, ".lua"))
		return kf_lua_rules_load(c, path) ? 0 : -1;
	return load_so(c, p, path);
}

bool kf_plugin_loaded(kf_ctx *c, const char *path)
{
	plughost *p = host_of(c, false);
	char a[PATH_MAX], b[PATH_MAX];
	if (!p || !realpath(path, a))
		return false;
	for (uint32_t k = 0; k < p->npl; k++)
		if (realpath(p->pl[k]->path, b) && !strcmp(a, b))
			return true;
	return false;
}

int kf_plugin_provider(const char *op, kf_buf *out)
{
	kf_buf dir = {0};
	int rc = -1;
	if (kf_std_rules(&dir) == 0) {
		/* a context of its own: the caller's keeps its ops and errors */
		kf_ctx *c = kf_ctx_new();
		kf_lua_rules_load(c, dir.p);
		const char *origin = kf_op_origin(c, kf_op_lookup(c, op, strlen(op)));
		if (origin) {
			out->n = 0;
			kf_buf_puts(out, origin);
			rc = 0;
		}
		kf_ctx_free(c);
	}
	kf_buf_free(&dir);
	return rc;
}

void kf_plugin_passes(kf_ctx *c, kf_passreg *r)
{
	plughost *p = host_of(c, false);
	for (uint32_t i = 0; p && i < p->npass; i++)
		kf_passreg_add(r, p->pass[i]);
}

void kf_plugin_release(kf_ctx *c)
{
	plughost *p = host_of(c, false);
	if (!p)
		return;
	kf_ctx_set_ext(c, NULL, NULL);
	kf_lhost_free(p->lua);
	/* ops of C plugins point into their libraries: detach them first */
	for (uint32_t i = 0; i < p->nops; i++)
		kf_op_detach(c, p->ops[i], plugin_gone, "its plugin was unloaded");
	free(p->ops);
	for (uint32_t k = 0; k < p->npl; k++) {
		dlclose(p->pl[k]->dl);
		free(p->pl[k]->path);
		free(p->pl[k]);
	}
	free(p->pl);
	free(p->pass);
	free(p);
}
