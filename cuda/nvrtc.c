/* nvrtc.c: NVRTC through dlopen, so that kfuse builds and runs without the
 * CUDA toolkit and compiles kernels to PTX (and cubin) without a GPU.
 *
 * We declare NVRTC's few entry points ourselves: nvrtcResult is an int enum
 * and nvrtcProgram an opaque pointer, both stable since CUDA 7.
 */
#include "cuda.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

enum { NVRTC_SUCCESS = 0 };
typedef int nvrtcResult;
typedef struct nvrtc_prog_ *nvrtcProgram;

struct kf_nvrtc {
	kf_ctx *ctx;
	void *lib;
	char path[512];
	const char *(*GetErrorString)(nvrtcResult);
	nvrtcResult (*Version)(int *, int *);
	nvrtcResult (*CreateProgram)(nvrtcProgram *, const char *, const char *, int,
				     const char *const *, const char *const *);
	nvrtcResult (*DestroyProgram)(nvrtcProgram *);
	nvrtcResult (*CompileProgram)(nvrtcProgram, int, const char *const *);
	nvrtcResult (*GetPTXSize)(nvrtcProgram, size_t *);
	nvrtcResult (*GetPTX)(nvrtcProgram, char *);
	nvrtcResult (*GetCUBINSize)(nvrtcProgram, size_t *); /* NULL before CUDA 11.1 */
	nvrtcResult (*GetCUBIN)(nvrtcProgram, char *);
	nvrtcResult (*GetProgramLogSize)(nvrtcProgram, size_t *);
	nvrtcResult (*GetProgramLog)(nvrtcProgram, char *);
};

void *kf_cuda_dlopen_first(const char *const *names, int n, char *loaded, size_t loadedlen,
			   char *why, size_t whylen)
{
	char tried[1024] = "";
	const char *last = "";
	size_t used = 0;

	for (int i = 0; i < n; i++) {
		void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
		if (h) {
			snprintf(loaded, loadedlen, "%s", names[i]);
			return h;
		}
		const char *e = dlerror();
		last = e ? e : "";
		if (used < sizeof tried)
			used += (size_t)snprintf(tried + used, sizeof tried - used, "%s%s",
						 i ? ", " : "", names[i]);
	}
	snprintf(why, whylen, "tried %s; the last said: %s", tried, last);
	return NULL;
}

static int nv_fail(kf_nvrtc *nv, const char *what, nvrtcResult r)
{
	kf_error(nv->ctx, KF_NOLOC, "%s failed: %s", what,
		 nv->GetErrorString ? nv->GetErrorString(r) : "unknown NVRTC error");
	return -1;
}

/* The candidate library names, most specific first. */
static int nvrtc_candidates(char names[][512], int max)
{
	static const char *const base[] = {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"};
	const char *env = getenv("KFUSE_NVRTC");
	int n = 0;

	if (env && *env) {
		snprintf(names[n++], 512, "%s", env);
		return n;
	}
	for (int i = 0; i < 3 && n < max; i++)
		snprintf(names[n++], 512, "%s", base[i]);
	const char *home = getenv("CUDA_HOME");
	const char *dirs[2] = {home && *home ? home : NULL, "/usr/local/cuda"};
	for (int d = 0; d < 2; d++)
		for (int i = 0; dirs[d] && i < 3 && n < max; i++)
			snprintf(names[n++], 512, "%s/lib64/%s", dirs[d], base[i]);
	return n;
}

kf_nvrtc *kf_nvrtc_open(kf_ctx *c)
{
	char names[9][512], why[1400];
	const char *ptrs[9];
	int n = nvrtc_candidates(names, 9);
	kf_nvrtc *nv = calloc(1, sizeof *nv);

	if (!nv) {
		kf_error(c, KF_NOLOC, "out of memory");
		return NULL;
	}
	nv->ctx = c;
	for (int i = 0; i < n; i++)
		ptrs[i] = names[i];
	nv->lib = kf_cuda_dlopen_first(ptrs, n, nv->path, sizeof nv->path, why, sizeof why);
	if (!nv->lib) {
		kf_error(c, KF_NOLOC, "cannot load NVRTC, the CUDA runtime compiler (%s); "
			 "install the CUDA toolkit or set CUDA_HOME or KFUSE_NVRTC", why);
		free(nv);
		return NULL;
	}
	/* The cast through void * is how POSIX says dlsym results are used. */
#define SYM(field, req) \
	do { \
		*(void **)&nv->field = dlsym(nv->lib, "nvrtc" #field); \
		if (!nv->field && req) { \
			kf_error(c, KF_NOLOC, "%s lacks nvrtc%s; is it really NVRTC?", nv->path, #field); \
			kf_nvrtc_close(nv); \
			return NULL; \
		} \
	} while (0)
	SYM(GetErrorString, 1);
	SYM(Version, 1);
	SYM(CreateProgram, 1);
	SYM(DestroyProgram, 1);
	SYM(CompileProgram, 1);
	SYM(GetPTXSize, 1);
	SYM(GetPTX, 1);
	SYM(GetCUBINSize, 0);
	SYM(GetCUBIN, 0);
	SYM(GetProgramLogSize, 1);
	SYM(GetProgramLog, 1);
#undef SYM
	return nv;
}

void kf_nvrtc_close(kf_nvrtc *nv)
{
	/* The library stays loaded: NVRTC keeps caches in globals that it
	 * never frees, and unloading it turns them into leaks (LeakSanitizer
	 * reports them) for no gain; a later open gets the same handle. */
	free(nv);
}

const char *kf_nvrtc_path(const kf_nvrtc *nv) { return nv->path; }

int kf_nvrtc_version(kf_nvrtc *nv, int *major, int *minor)
{
	nvrtcResult r = nv->Version(major, minor);
	return r == NVRTC_SUCCESS ? 0 : nv_fail(nv, "nvrtcVersion", r);
}

/* Appends the program's log to log (if any); trailing NULs and newlines
 * are dropped. */
static void get_log(kf_nvrtc *nv, nvrtcProgram prog, kf_buf *log)
{
	size_t n = 0;
	if (nv->GetProgramLogSize(prog, &n) != NVRTC_SUCCESS || n <= 1)
		return;
	char *s = malloc(n);
	if (!s)
		return;
	if (nv->GetProgramLog(prog, s) == NVRTC_SUCCESS) {
		size_t len = strnlen(s, n);
		while (len && (s[len - 1] == '\n' || s[len - 1] == '\r'))
			len--;
		kf_buf_put(log, s, len);
	}
	free(s);
}

/* Copies the compiled image (PTX or cubin) to out. */
static int get_image(kf_nvrtc *nv, nvrtcProgram prog, int want_cubin, kf_buf *out)
{
	nvrtcResult (*size_fn)(nvrtcProgram, size_t *) = want_cubin ? nv->GetCUBINSize : nv->GetPTXSize;
	nvrtcResult (*get_fn)(nvrtcProgram, char *) = want_cubin ? nv->GetCUBIN : nv->GetPTX;
	const char *what = want_cubin ? "nvrtcGetCUBIN" : "nvrtcGetPTX";
	size_t n = 0;
	nvrtcResult r = size_fn(prog, &n);

	if (r != NVRTC_SUCCESS)
		return nv_fail(nv, what, r);
	char *img = malloc(n ? n : 1);
	if (!img) {
		kf_error(nv->ctx, KF_NOLOC, "out of memory for a %zu-byte kernel image", n);
		return -1;
	}
	r = get_fn(prog, img);
	if (r != NVRTC_SUCCESS) {
		free(img);
		return nv_fail(nv, what, r);
	}
	/* PTX's size counts its NUL; kf_buf keeps one after the data anyway. */
	if (!want_cubin && n && img[n - 1] == 0)
		n--;
	kf_buf_put(out, img, n);
	free(img);
	return 0;
}

int kf_nvrtc_compile(kf_nvrtc *nv, const char *src, const char *name, const char *arch,
		     const char *const *opts, int nopts, int want_cubin, kf_buf *out, kf_buf *log)
{
	kf_ctx *c = nv->ctx;
	const char *nm = name && *name ? name : "kernel.cu";

	if (want_cubin && strncmp(arch, "sm_", 3) != 0) {
		kf_error(c, KF_NOLOC, "%s: a cubin needs a real architecture (sm_XX), not '%s'", nm, arch);
		return -1;
	}
	if (want_cubin && !nv->GetCUBIN) {
		kf_error(c, KF_NOLOC, "%s: this NVRTC (%s) cannot produce cubins (needs CUDA 11.1 or newer)",
			 nm, nv->path);
		return -1;
	}
	if (nopts < 0 || nopts > 1000) {
		kf_error(c, KF_NOLOC, "%s: bad option count %d", nm, nopts);
		return -1;
	}
	const char **argv = malloc(sizeof *argv * (size_t)(nopts + 1));
	char archopt[64];
	if (!argv) {
		kf_error(c, KF_NOLOC, "out of memory");
		return -1;
	}
	snprintf(archopt, sizeof archopt, "--gpu-architecture=%s", arch);
	argv[0] = archopt;
	for (int i = 0; i < nopts; i++)
		argv[i + 1] = opts[i];

	nvrtcProgram prog = NULL;
	kf_buf mylog = {0};
	int rc = -1;
	nvrtcResult r = nv->CreateProgram(&prog, src, nm, 0, NULL, NULL);
	if (r != NVRTC_SUCCESS) {
		nv_fail(nv, "nvrtcCreateProgram", r);
		goto out;
	}
	r = nv->CompileProgram(prog, nopts + 1, argv);
	get_log(nv, prog, &mylog);
	if (log && mylog.n)
		kf_buf_put(log, mylog.p, mylog.n);
	if (r != NVRTC_SUCCESS) {
		/* The log is the message a user needs: it holds the line
		 * numbers and what went wrong. */
		kf_error(c, KF_NOLOC, "%s: NVRTC compilation for %s failed: %s%s%s", nm, arch,
			 nv->GetErrorString(r), mylog.n ? "\n" : "", mylog.n ? mylog.p : "");
		goto out;
	}
	rc = get_image(nv, prog, want_cubin, out);
out:
	if (prog)
		nv->DestroyProgram(&prog);
	kf_buf_free(&mylog);
	free(argv);
	return rc;
}
