/* plugin.h: loading plugins into a context.
 *
 * A plugin is a C shared library (see kfuse_plugin.h) or a Lua script whose
 * op{} declarations define ops (docs/rules.md).  What plugins register lives
 * as long as the context; tools call kf_plugin_release before kf_ctx_free to
 * close the libraries and the Lua state (ops they registered stay in the
 * registry, detached: they report that their plugin is gone).
 */
#ifndef KF_PLUGIN_H
#define KF_PLUGIN_H

#include "kf.h"
#include "pass.h"

/* Loads x.so (dlopen, kfuse_plugin_init) or x.lua.  0, or -1 with an error
 * naming the file in the context. */
int kf_plugin_load(kf_ctx *c, const char *path);
/* Whether the C plugin at path (the same file, under any name) is loaded. */
bool kf_plugin_loaded(kf_ctx *c, const char *path);
/* The standard rule file that declares op (op{} in a file of kf_std_rules),
 * into out: 0, or -1 when none does.  Loads the standard rules into a
 * context of its own, so it is for error messages, not for every op. */
int kf_plugin_provider(const char *op, kf_buf *out);
/* Adds the passes plugins registered to r (after kf_passes_builtin). */
void kf_plugin_passes(kf_ctx *c, kf_passreg *r);
/* Frees the Lua host and closes the plugin libraries of c. */
void kf_plugin_release(kf_ctx *c);

#endif
