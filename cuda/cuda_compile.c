/* cuda_compile.c: the CUDA backend's programs: the kernels of a plan,
 * grouped into NVRTC programs by name (so that cache keys do not depend on
 * node order), compiled in threads through the kernel cache. */
#define _GNU_SOURCE /* dladdr: where libnvrtc was loaded from */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "cuda_backend_int.h"

#define PER_PROGRAM 8
#define PER_PROGRAM_OPS 48

static bool is_file(const char *dir, const char *name)
{
	char path[600];
	struct stat st;
	snprintf(path, sizeof path, "%s/%s", dir, name);
	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int kf_cuda_include_dir(const char *nvrtc_path, char *out, size_t n)
{
	char cand[4][512];
	int nc = 0;
	const char *env[3] = {getenv("KFUSE_CUDA_INCLUDE"), getenv("CUDA_HOME"), getenv("CUDA_PATH")};
	if (env[0] && *env[0])
		snprintf(cand[nc++], 512, "%s", env[0]);
	for (int i = 1; i < 3; i++)
		if (env[i] && *env[i])
			snprintf(cand[nc++], 512, "%s/include", env[i]);
	/* beside the libnvrtc that was loaded: <root>/lib64/libnvrtc.so ->
	 * <root>/include (and <root>/targets/<arch>/lib likewise) */
	void *h = nvrtc_path ? dlopen(nvrtc_path, RTLD_NOW | RTLD_NOLOAD) : NULL;
	void *sym = h ? dlsym(h, "nvrtcVersion") : NULL;
	Dl_info di;
	if (sym && dladdr(sym, &di) && di.dli_fname) {
		snprintf(cand[nc], 512, "%s", di.dli_fname);
		char *sl = strrchr(cand[nc], '/');
		if (sl) {
			snprintf(sl, (size_t)(cand[nc] + 512 - sl), "/../include");
			nc++;
		}
	}
	if (h)
		dlclose(h);
	snprintf(cand[nc++], 512, "/usr/local/cuda/include");
	for (int i = 0; i < nc; i++)
		if (is_file(cand[i], "cooperative_groups.h")) {
			snprintf(out, n, "%s", cand[i]);
			return 0;
		}
	return -1;
}

/* A program that includes CUDA headers (the grid-sync persistent
 * kernel: cooperative_groups.h) gets the toolkit's include directory and,
 * from CUDA 13 on, its cccl/ beside it.  Returns the option count. */
static int include_opts(kf_nvrtc *nv, const char *src, char opt[2][600])
{
	char dir[512];
	if (!strstr(src, "#include <") || kf_cuda_include_dir(kf_nvrtc_path(nv), dir, sizeof dir) != 0)
		return 0;
	int n = 0;
	snprintf(opt[n++], 600, "--include-path=%s", dir);
	char cccl[540];
	snprintf(cccl, sizeof cccl, "%s/cccl", dir);
	if (is_file(cccl, "cuda/std/type_traits"))
		snprintf(opt[n++], 600, "--include-path=%s", cccl);
	return n;
}

typedef struct job {
	kf_cuda_unit **u;
	uint32_t n, next;
	const char *arch, *cache_dir;
	bool no_cache;
	pthread_mutex_t mu;
} job;

static void compile_one(const job *j, kf_cuda_unit *u)
{
	kf_ctx *c = kf_ctx_new(); /* errors of this thread; the context is not shared */
	kf_nvrtc *nv = kf_nvrtc_open(c);
	kf_kcache kc;
	kf_kcache_init(&kc, c, j->cache_dir);
	char inc[2][600];
	const char *opts[3] = {"-std=c++17"};
	int rc = -1, nopt = 1;
	if (nv) {
		int ni = include_opts(nv, u->src, inc);
		for (int i = 0; i < ni; i++)
			opts[nopt++] = inc[i];
		char arch[24];
		kf_cuda_kernel_arch(j->arch, u->sm90a, arch, sizeof arch);
		rc = kf_kcache_compile(j->no_cache ? NULL : &kc, nv, u->src, "kfuse.cu", arch, opts, nopt, 1, &u->image,
				       NULL);
		u->cached = rc == 0 && kc.hits > 0;
	}
	u->err[0] = 0;
	if (rc != 0) {
		kf_buf d = {0};
		kf_diag_render(c, &d);
		snprintf(u->err, sizeof u->err, "%.*s", (int)(d.n < 500 ? d.n : 500), d.p ? d.p : "compile failed");
		kf_buf_free(&d);
	}
	kf_kcache_fini(&kc);
	if (nv)
		kf_nvrtc_close(nv);
	kf_ctx_free(c);
}

static void *worker(void *arg)
{
	job *j = arg;
	for (;;) {
		pthread_mutex_lock(&j->mu);
		uint32_t i = j->next++;
		pthread_mutex_unlock(&j->mu);
		if (i >= j->n)
			return NULL;
		compile_one(j, j->u[i]);
	}
}

void kf_cuda_compile_units(kf_cuda_unit **u, uint32_t n, const char *arch, const char *cache_dir, bool no_cache,
			   int threads)
{
	int nt = threads;
	if (nt <= 0) {
		long nc = sysconf(_SC_NPROCESSORS_ONLN);
		nt = nc > 16 ? 16 : nc < 1 ? 1 : (int)nc;
	}
	if (nt > (int)n)
		nt = (int)n;
	job j = {.u = u, .n = n, .arch = arch, .cache_dir = cache_dir, .no_cache = no_cache};
	pthread_mutex_init(&j.mu, NULL);
	pthread_t th[16];
	int started = 0;
	for (int i = 1; i < nt; i++)
		if (pthread_create(&th[started], NULL, worker, &j) == 0)
			started++;
	worker(&j);
	for (int i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	pthread_mutex_destroy(&j.mu);
}

/* sm_90a kernels apart (their programs compile for sm_90a), then by name */
static int cmp_name(const void *a, const void *b)
{
	const kf_kernel *x = &(*(step *const *)a)->k, *y = &(*(step *const *)b)->k;
	if (x->sm90a != y->sm90a)
		return x->sm90a - y->sm90a;
	return strcmp(x->name, y->name);
}

/* Groups the distinct kernels (sorted by name, so that programs and their
 * cache keys do not depend on node order) into programs of PER_PROGRAM
 * (sized plans: of one) and compiles them in parallel. */
int kf_cb_compile(kf_cuda_session *s)
{
	uint32_t n = 0;
	step **by = malloc((s->nst + 1) * sizeof *by);
	/* a cuBLAS GEMM has no kernel of ours; a contraction cuBLASLt runs
	 * (prepared on a device: a dry run compiles its own kernel) never
	 * launches its own */
	for (uint32_t i = 0; i < s->nst; i++)
		if (s->st[i].prog < 0 && !kf_cb_lib(&s->st[i]))
			by[n++] = &s->st[i];
	qsort(by, n, sizeof *by, cmp_name);
	uint32_t first = s->npr, inprog = PER_PROGRAM;
	int ops = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (i && strcmp(by[i]->k.name, by[i - 1]->k.name) == 0) {
			by[i]->prog = by[i - 1]->prog;
			continue;
		}
		s->stats.distinct++;
		/* a program holds up to PER_PROGRAM kernels or PER_PROGRAM_OPS ops,
		 * so that big kernels compile in parallel; in a sized plan one, so
		 * that a kernel another size compiled is found alone in the cache
		 * (a program of several is found only if all its kernels are) */
		if (inprog >= PER_PROGRAM || ops + by[i]->k.nops > PER_PROGRAM_OPS || s->dyn.n ||
		    (s->npr > first && s->pr[s->npr - 1].u.sm90a != by[i]->k.sm90a)) {
			ops = 0;
			s->pr = realloc(s->pr, (s->npr + 1) * sizeof *s->pr);
			memset(&s->pr[s->npr], 0, sizeof *s->pr);
			kf_buf_puts(&s->pr[s->npr].src, kf_emit_prelude());
			s->pr[s->npr].u.sm90a = by[i]->k.sm90a;
			s->npr++;
			inprog = 0;
		}
		inprog++;
		ops += by[i]->k.nops;
		by[i]->prog = (int)s->npr - 1;
		kf_buf_puts(&s->pr[s->npr - 1].src, by[i]->k.src);
	}
	free(by);
	for (uint32_t i = first; i < s->npr; i++) {
		kf_buf_putc(&s->pr[i].src, '\0');
		s->pr[i].u.src = s->pr[i].src.p;
	}
	double t0 = kf_cb_now();
	kf_cuda_unit **us = malloc((s->npr - first + 1) * sizeof *us);
	for (uint32_t i = first; i < s->npr; i++)
		us[i - first] = &s->pr[i].u;
	kf_cuda_compile_units(us, s->npr - first, s->arch, s->o.cache_dir, s->o.no_cache, s->o.threads);
	free(us);
	s->stats.compile_s += kf_cb_now() - t0;
	int rc = 0;
	for (uint32_t i = first; i < s->npr; i++) {
		s->stats.programs++;
		if (s->pr[i].u.err[0]) {
			kf_error(s->c, s->g->loc, "cuda: compiling kernels failed: %s", s->pr[i].u.err);
			rc = -1;
		} else if (s->pr[i].u.cached) {
			s->stats.cached++;
		} else {
			s->stats.compiled++;
		}
	}
	return rc;
}
