/* install.c: where kfuse finds its own files (the standard rules) and how
 * a rule path names one (docs/rules.md, "Where rules are found").
 *
 * The standard rules directory is, first found:
 *   1. $KFUSE_RULES_PATH;
 *   2. <prefix>/share/kfuse/patterns of an installed kfuse, found from the
 *      running program (a tool in <prefix>/bin) or from libkfuse.so (in
 *      <prefix>/lib...): the relative paths are fixed when CMake configures
 *      (KF_DATADIR_FROM_BIN, KF_DATADIR_FROM_LIB), so an installed tree can
 *      be moved whole (a .deb unpacked with dpkg -x into any directory);
 *   3. the source tree's patterns/, for tools run from their build tree
 *      (KF_RULES_SOURCE_DIR).
 */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kf_int.h"

#ifndef KF_DATADIR_FROM_BIN
#define KF_DATADIR_FROM_BIN "../share/kfuse"
#endif
#ifndef KF_DATADIR_FROM_LIB
#define KF_DATADIR_FROM_LIB "../share/kfuse"
#endif

static bool exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0;
}

/* dir_of(file)/rel/patterns into out when that exists. */
static bool beside(kf_buf *out, const char *file, const char *rel)
{
	kf_buf d = {0};
	kf_path_dir(&d, file);
	kf_buf_printf(&d, "/%s/patterns", rel);
	char real[PATH_MAX];
	bool ok = realpath(d.p, real) != NULL; /* "/usr/share/...", not "/usr/bin/../share/..." */
	if (ok) {
		out->n = 0;
		kf_buf_puts(out, real);
	}
	kf_buf_free(&d);
	return ok;
}

int kf_std_rules(kf_buf *out)
{
	const char *env = getenv("KFUSE_RULES_PATH");
	if (env && env[0]) {
		out->n = 0;
		kf_buf_puts(out, env);
		return 0;
	}
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (n > 0) {
		exe[n] = 0;
		if (beside(out, exe, KF_DATADIR_FROM_BIN))
			return 0;
	}
	/* inside libkfuse.so, the library's own file; in a program linked
	 * statically, the program again */
	Dl_info info;
	if (dladdr((void *)kf_std_rules, &info) && info.dli_fname && info.dli_fname[0] == '/' &&
	    beside(out, info.dli_fname, KF_DATADIR_FROM_LIB))
		return 0;
#ifdef KF_RULES_SOURCE_DIR
	if (exists(KF_RULES_SOURCE_DIR)) {
		out->n = 0;
		kf_buf_puts(out, KF_RULES_SOURCE_DIR);
		return 0;
	}
#endif
	return -1;
}

int kf_rules_find(kf_ctx *c, const char *path, kf_buf *out)
{
	kf_buf std = {0};
	bool have_std = kf_std_rules(&std) == 0;
	int rc = -1;
	out->n = 0;
	if (!path || !path[0]) {
		if (have_std) {
			kf_buf_puts(out, std.p);
			rc = 0;
		} else {
			kf_error(c, KF_NOLOC, "the standard rules are not found (not installed beside this "
					     "program): set KFUSE_RULES_PATH or name a rule file or directory");
		}
	} else if (path[0] == '/' || exists(path) || !have_std) {
		kf_buf_puts(out, path);
		rc = 0; /* a missing file is the loader's error, with the path as given */
	} else {
		kf_path_join(out, std.p, path);
		if (!exists(out->p)) {
			out->n = 0;
			kf_buf_puts(out, path);
		}
		rc = 0;
	}
	kf_buf_free(&std);
	return rc;
}
