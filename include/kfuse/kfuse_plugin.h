/* kfuse_plugin.h: the public C API of kfuse plugins (.so files loaded with
 * `kfuse-opt --plugin x.so`), installed as <kfuse/kfuse_plugin.h> with the
 * two headers it includes (kf.h, pass.h); `pkg-config --cflags kfuse` or
 * CMake's find_package(kfuse) and the target kfuse::plugin find them.
 *
 * A plugin exports one function,
 *
 *     int kfuse_plugin_init(const kfuse_plugin_api *api);
 *
 * which registers ops and passes through `api` and returns 0 (or -1 after
 * api->error).  Everything a plugin calls in kfuse goes through the table,
 * so a plugin links against nothing of kfuse (build it with -shared -fPIC
 * and, to be sure, -Wl,-z,defs): the inline accessors of kf.h that only
 * read fields (kf_N, kf_V, kf_in, kf_res, kf_def) are fine, functions are
 * not.  The table only grows: a plugin built for ABI N runs on any kfuse
 * whose api->abi >= N, and checks api->size before using later fields.
 * The api pointer stays valid as long as the plugin is loaded.
 */
#ifndef KFUSE_PLUGIN_H
#define KFUSE_PLUGIN_H

#include "kf.h"
#include "pass.h"

#define KFUSE_PLUGIN_ABI 1

typedef struct kfuse_plugin_api {
	uint32_t abi;   /* KFUSE_PLUGIN_ABI of the host */
	uint32_t size;  /* sizeof(kfuse_plugin_api) of the host */
	kf_ctx *ctx;
	const char *path;
	/* registration */
	int (*register_op)(kf_ctx *c, const kf_opinfo *info);  /* op id, or -1 */
	int (*register_pass)(kf_ctx *c, const kf_pass *pass);  /* 0, or -1 */
	void (*error)(kf_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
	/* the context */
	kf_sid (*intern)(kf_ctx *c, const char *s);
	const char *(*str)(const kf_ctx *c, kf_sid s);
	kf_tid (*type_intern)(kf_ctx *c, const kf_type *t);
	const kf_type *(*type_get)(const kf_ctx *c, kf_tid t);
	int (*op_lookup)(const kf_ctx *c, const char *name, size_t n);
	const kf_opinfo *(*op)(const kf_ctx *c, int op);
	/* graphs (for passes) */
	kf_nid (*node_new)(kf_graph *g, kf_bid b, kf_nid before, int op, const kf_vid *in, uint32_t nin,
			   const kf_tid *res, uint32_t nres);
	int (*infer)(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen);
	void (*replace_all_uses)(kf_graph *g, kf_vid from, kf_vid to);
	void (*node_erase)(kf_graph *g, kf_nid n);
	const kf_attrval *(*attr_get)(const kf_graph *g, kf_nid n, const char *key);
	/* reading a constant's single value (scalar or splat); false otherwise */
	bool (*const_scalar)(const kf_graph *g, kf_vid v, double *out);
} kfuse_plugin_api;

typedef int (*kfuse_plugin_init_fn)(const kfuse_plugin_api *api);

#endif
