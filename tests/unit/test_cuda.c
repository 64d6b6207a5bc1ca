/* Unit tests of cuda/nvrtc.c, cuda/kcache.c and cuda/cuda.c.
 *
 * NVRTC must compile a kernel to PTX and to a cubin wherever the toolkit is
 * installed (no GPU needed); the tests that need it are skipped, saying so,
 * when libnvrtc cannot be loaded.  The kernel cache must hit on the second
 * compile and survive a damaged entry.  kf_cuda_open must fail cleanly
 * without a driver; where a GPU is present, a small end-to-end run checks
 * modules, launches, events, occupancy and graph capture. */
#define _GNU_SOURCE /* memmem */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include "kf.h"
#include "cuda.h"
#include "kcache.h"

static const char *vadd_src =
	"extern \"C\" __global__ void vadd(const float *a, const float *b, float *c, int n)\n"
	"{\n"
	"	int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
	"	if (i < n)\n"
	"		c[i] = a[i] + b[i];\n"
	"}\n";

static kf_nvrtc *open_or_skip(kf_ctx *c)
{
	kf_nvrtc *nv = kf_nvrtc_open(c);
	if (!nv) {
		kf_buf b = {0};
		kf_diag_render(c, &b);
		print_message("skipped: NVRTC is not available here: %s", b.p);
		kf_buf_free(&b);
		kf_ctx_free(c);
		skip();
	}
	return nv;
}

static char *render(kf_ctx *c)
{
	kf_buf b = {0};
	kf_diag_render(c, &b);
	kf_diag_clear(c);
	return b.p ? b.p : strdup("");
}

static void test_nvrtc_ptx_and_cubin(void **st)
{
	kf_ctx *c = kf_ctx_new();
	kf_nvrtc *nv = open_or_skip(c);
	int major = 0, minor = -1;
	assert_int_equal(kf_nvrtc_version(nv, &major, &minor), 0);
	assert_true(major >= 11 && minor >= 0);

	kf_buf ptx = {0}, cubin = {0}, log = {0};
	const char *opts[] = {"--std=c++17", "-lineinfo"};
	assert_int_equal(kf_nvrtc_compile(nv, vadd_src, "vadd.cu", "sm_90", opts, 2, 0, &ptx, &log), 0);
	assert_non_null(strstr(ptx.p, ".target sm_90"));
	assert_non_null(strstr(ptx.p, ".entry vadd("));
	assert_int_equal(strlen(ptx.p), ptx.n);

	assert_int_equal(kf_nvrtc_compile(nv, vadd_src, "vadd.cu", "sm_90", NULL, 0, 1, &cubin, NULL), 0);
	assert_true(cubin.n > 64);
	assert_memory_equal(cubin.p, "\177ELF", 4);
	assert_non_null(memmem(cubin.p, cubin.n, "vadd", 4));

	kf_buf vptx = {0};
	assert_int_equal(kf_nvrtc_compile(nv, vadd_src, "vadd.cu", "compute_90", NULL, 0, 0, &vptx, NULL), 0);
	assert_non_null(strstr(vptx.p, ".entry vadd("));
	assert_int_equal(kf_nerrors(c), 0);

	kf_buf_free(&ptx);
	kf_buf_free(&cubin);
	kf_buf_free(&vptx);
	kf_buf_free(&log);
	kf_nvrtc_close(nv);
	kf_ctx_free(c);
}

static void test_nvrtc_errors(void **st)
{
	kf_ctx *c = kf_ctx_new();
	kf_nvrtc *nv = open_or_skip(c);
	kf_buf out = {0}, log = {0};

	/* A compile error carries NVRTC's log, with the file name and line. */
	const char *bad = "extern \"C\" __global__ void k(float *x)\n{\n\tx[0] = undefined_thing;\n}\n";
	assert_int_equal(kf_nvrtc_compile(nv, bad, "bad.cu", "sm_90", NULL, 0, 0, &out, &log), -1);
	assert_int_equal(out.n, 0);
	assert_non_null(strstr(log.p, "bad.cu(3)"));
	assert_non_null(strstr(log.p, "undefined_thing"));
	char *msg = render(c);
	assert_non_null(strstr(msg, "kfuse: error: bad.cu: NVRTC compilation for sm_90 failed: NVRTC_ERROR_COMPILATION\n"));
	assert_non_null(strstr(msg, "bad.cu(3): error"));
	free(msg);

	assert_int_equal(kf_nvrtc_compile(nv, vadd_src, "v.cu", "compute_90", NULL, 0, 1, &out, NULL), -1);
	msg = render(c);
	assert_string_equal(msg, "kfuse: error: v.cu: a cubin needs a real architecture (sm_XX), not 'compute_90'\n");
	free(msg);

	const char *badopt[] = {"--no-such-option"};
	assert_int_equal(kf_nvrtc_compile(nv, vadd_src, "v.cu", "sm_90", badopt, 1, 0, &out, NULL), -1);
	msg = render(c);
	assert_non_null(strstr(msg, "NVRTC_ERROR_INVALID_OPTION"));
	free(msg);

	kf_buf_free(&out);
	kf_buf_free(&log);
	kf_nvrtc_close(nv);
	kf_ctx_free(c);
}

static void test_nvrtc_missing(void **st)
{
	kf_ctx *c = kf_ctx_new();
	setenv("KFUSE_NVRTC", "/nonexistent/libnvrtc.so.99", 1);
	kf_nvrtc *nv = kf_nvrtc_open(c);
	unsetenv("KFUSE_NVRTC");
	assert_null(nv);
	char *msg = render(c);
	assert_non_null(strstr(msg, "kfuse: error: cannot load NVRTC, the CUDA runtime compiler "
				    "(tried /nonexistent/libnvrtc.so.99; the last said: "));
	assert_non_null(strstr(msg, "install the CUDA toolkit or set CUDA_HOME or KFUSE_NVRTC\n"));
	free(msg);
	kf_ctx_free(c);
}

/* ---- kernel cache ------------------------------------------------------------------ */

static void test_kcache_dir(void **st)
{
	kf_buf b = {0};
	/* Saved and put back: later tests and NVRTC may look at them. */
	char *home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
	char *xdg = getenv("XDG_CACHE_HOME") ? strdup(getenv("XDG_CACHE_HOME")) : NULL;
	setenv("KFUSE_CACHE_DIR", "/a/b", 1);
	setenv("XDG_CACHE_HOME", "/x", 1);
	setenv("HOME", "/h", 1);
	assert_int_equal(kf_kcache_default_dir(&b), 0);
	assert_string_equal(b.p, "/a/b");
	b.n = 0;
	unsetenv("KFUSE_CACHE_DIR");
	assert_int_equal(kf_kcache_default_dir(&b), 0);
	assert_string_equal(b.p, "/x/kfuse");
	b.n = 0;
	setenv("XDG_CACHE_HOME", "relative", 1); /* invalid by the XDG spec */
	assert_int_equal(kf_kcache_default_dir(&b), 0);
	assert_string_equal(b.p, "/h/.cache/kfuse");
	b.n = 0;
	unsetenv("XDG_CACHE_HOME");
	unsetenv("HOME");
	assert_int_equal(kf_kcache_default_dir(&b), -1);
	kf_buf_free(&b);

	/* No directory: the cache is off, and says miss. */
	kf_kcache kc;
	kf_ctx *c = kf_ctx_new();
	kf_kcache_init(&kc, c, NULL);
	assert_null(kc.dir);
	kf_buf out = {0};
	kf_kcache_key k = {1, 2};
	assert_int_equal(kf_kcache_get(&kc, k, &out), 0);
	assert_int_equal(kf_kcache_put(&kc, k, "x", 1), -1);
	kf_kcache_fini(&kc);
	kf_ctx_free(c);
	if (home)
		setenv("HOME", home, 1);
	if (xdg)
		setenv("XDG_CACHE_HOME", xdg, 1);
	free(home);
	free(xdg);
}

static void test_kcache_key(void **st)
{
	const char *o1[] = {"-O3"}, *o2[] = {"-O2"}, *o12[] = {"-O3", "-lineinfo"};
	kf_kcache_key base = kf_kcache_key_of("src", 3, "sm_90", 13, 0, o1, 1, 1);
	kf_kcache_key same = kf_kcache_key_of("src", 3, "sm_90", 13, 0, o1, 1, 1);
	kf_kcache_key diff[] = {
		kf_kcache_key_of("srd", 3, "sm_90", 13, 0, o1, 1, 1),
		kf_kcache_key_of("src", 3, "sm_80", 13, 0, o1, 1, 1),
		kf_kcache_key_of("src", 3, "sm_90", 12, 0, o1, 1, 1),
		kf_kcache_key_of("src", 3, "sm_90", 13, 1, o1, 1, 1),
		kf_kcache_key_of("src", 3, "sm_90", 13, 0, o2, 1, 1),
		kf_kcache_key_of("src", 3, "sm_90", 13, 0, o12, 2, 1),
		kf_kcache_key_of("src", 3, "sm_90", 13, 0, o1, 1, 0),
		kf_kcache_key_of("src", 3, "sm_90", 13, 0, NULL, 0, 1),
	};
	assert_true(base.hi == same.hi && base.lo == same.lo);
	for (size_t i = 0; i < sizeof diff / sizeof diff[0]; i++)
		assert_false(base.hi == diff[i].hi && base.lo == diff[i].lo);
	char hex[33];
	kf_kcache_key_hex((kf_kcache_key){0x0123456789abcdefull, 0xfedcba9876543210ull}, hex);
	assert_string_equal(hex, "0123456789abcdeffedcba9876543210");
}

static void test_kcache_get_put(void **st)
{
	kf_ctx *c = kf_ctx_new();
	char dir[] = "/tmp/kf_kc_XXXXXX", sub[64], path[200], hex[33];
	assert_non_null(mkdtemp(dir));
	snprintf(sub, sizeof sub, "%s/deep/er", dir); /* created on first put */
	kf_kcache kc;
	kf_kcache_init(&kc, c, sub);
	kf_kcache_key k = kf_kcache_key_of("x", 1, "sm_90", 13, 0, NULL, 0, 0);
	kf_buf out = {0};
	assert_int_equal(kf_kcache_get(&kc, k, &out), 0);
	assert_int_equal(kf_kcache_put(&kc, k, "payload\0bytes", 13), 0);
	assert_int_equal(kf_kcache_get(&kc, k, &out), 1);
	assert_int_equal(out.n, 13);
	assert_memory_equal(out.p, "payload\0bytes", 13);
	assert_int_equal(kc.hits, 1);
	assert_int_equal(kc.misses, 1);

	/* Damage: a flipped payload byte, a short file, garbage.  Each is a
	 * miss, counted as corrupt, and a put repairs it. */
	kf_kcache_key_hex(k, hex);
	snprintf(path, sizeof path, "%s/%s.kc", sub, hex);
	for (int dmg = 0; dmg < 3; dmg++) {
		FILE *f = fopen(path, dmg == 0 ? "r+b" : "wb");
		assert_non_null(f);
		if (dmg == 0) {
			fseek(f, -1, SEEK_END);
			fputc('X', f);
		} else if (dmg == 1) {
			fwrite("KFKC", 1, 4, f);
		} else {
			fwrite("garbage garbage garbage garbage garbage garbage!!", 1, 48, f);
		}
		fclose(f);
		out.n = 0;
		assert_int_equal(kf_kcache_get(&kc, k, &out), 0);
		assert_int_equal(kc.corrupt, (uint64_t)dmg + 1);
		assert_int_equal(kf_kcache_put(&kc, k, "payload\0bytes", 13), 0);
		assert_int_equal(kf_kcache_get(&kc, k, &out), 1);
		assert_memory_equal(out.p, "payload\0bytes", 13);
	}
	/* An entry filed under another key's name is not believed. */
	kf_kcache_key k2 = kf_kcache_key_of("y", 1, "sm_90", 13, 0, NULL, 0, 0);
	char path2[200];
	kf_kcache_key_hex(k2, hex);
	snprintf(path2, sizeof path2, "%s/%s.kc", sub, hex);
	assert_int_equal(link(path, path2), 0);
	out.n = 0;
	assert_int_equal(kf_kcache_get(&kc, k2, &out), 0);
	unlink(path2);
	unlink(path);
	kf_kcache_fini(&kc);
	rmdir(sub);
	snprintf(sub, sizeof sub, "%s/deep", dir);
	rmdir(sub);
	assert_int_equal(rmdir(dir), 0); /* no stray temporaries */

	/* An unwritable directory: one warning, the put fails, nothing else. */
	kf_kcache_init(&kc, c, "/proc/kfuse-cache");
	assert_int_equal(kf_kcache_put(&kc, k, "a", 1), -1);
	assert_int_equal(kf_kcache_put(&kc, k, "a", 1), -1);
	char *msg = render(c);
	assert_non_null(strstr(msg, "kfuse: warning: kernel cache /proc/kfuse-cache: cannot create the directory: "));
	assert_null(strstr(strchr(msg, '\n') + 1, "warning")); /* only once */
	free(msg);
	kf_kcache_fini(&kc);
	kf_buf_free(&out);
	kf_ctx_free(c);
}

static void test_kcache_compile(void **st)
{
	kf_ctx *c = kf_ctx_new();
	kf_nvrtc *nv = open_or_skip(c);
	char dir[] = "/tmp/kf_kcc_XXXXXX";
	assert_non_null(mkdtemp(dir));
	setenv("KFUSE_CACHE_DIR", dir, 1);
	kf_kcache kc;
	kf_kcache_init(&kc, c, NULL);
	unsetenv("KFUSE_CACHE_DIR");
	assert_string_equal(kc.dir, dir);

	kf_buf a = {0}, b = {0}, log = {0};
	assert_int_equal(kf_kcache_compile(&kc, nv, vadd_src, "vadd.cu", "sm_90", NULL, 0, 1, &a, &log), 0);
	assert_int_equal(kc.hits, 0);
	assert_int_equal(kc.misses, 1);
	assert_int_equal(kc.writes, 1);
	assert_int_equal(kf_kcache_compile(&kc, nv, vadd_src, "vadd.cu", "sm_90", NULL, 0, 1, &b, &log), 0);
	assert_int_equal(kc.hits, 1);
	assert_int_equal(a.n, b.n);
	assert_memory_equal(a.p, b.p, a.n);

	/* PTX is a different entry; it comes back NUL-terminated. */
	kf_buf p1 = {0}, p2 = {0};
	assert_int_equal(kf_kcache_compile(&kc, nv, vadd_src, "vadd.cu", "sm_90", NULL, 0, 0, &p1, NULL), 0);
	assert_int_equal(kc.misses, 2);
	assert_int_equal(kf_kcache_compile(&kc, nv, vadd_src, "vadd.cu", "sm_90", NULL, 0, 0, &p2, NULL), 0);
	assert_int_equal(kc.hits, 2);
	assert_string_equal(p1.p, p2.p);
	assert_int_equal(strlen(p2.p), p2.n);

	/* Corrupt the cubin entry: the next compile misses, recompiles,
	 * rewrites it, and the one after hits again. */
	int maj, min;
	kf_nvrtc_version(nv, &maj, &min);
	kf_kcache_key k = kf_kcache_key_of(vadd_src, strlen(vadd_src), "sm_90", maj, min, NULL, 0, 1);
	char hex[33], path[256];
	kf_kcache_key_hex(k, hex);
	snprintf(path, sizeof path, "%s/%s.kc", dir, hex);
	FILE *f = fopen(path, "r+b");
	assert_non_null(f);
	fseek(f, 100, SEEK_SET);
	fputc(0x55 ^ 0xff, f);
	fseek(f, 101, SEEK_SET);
	fputc(0x55, f);
	fclose(f);
	b.n = 0;
	assert_int_equal(kf_kcache_compile(&kc, nv, vadd_src, "vadd.cu", "sm_90", NULL, 0, 1, &b, NULL), 0);
	assert_int_equal(kc.corrupt, 1);
	assert_int_equal(kc.hits, 2);
	assert_memory_equal(a.p, b.p, a.n);
	b.n = 0;
	assert_int_equal(kf_kcache_compile(&kc, nv, vadd_src, "vadd.cu", "sm_90", NULL, 0, 1, &b, NULL), 0);
	assert_int_equal(kc.hits, 3);
	assert_memory_equal(a.p, b.p, a.n);

	/* A compile error is not cached. */
	uint64_t w = kc.writes;
	assert_int_equal(kf_kcache_compile(&kc, nv, "nonsense", "x.cu", "sm_90", NULL, 0, 0, &b, NULL), -1);
	assert_int_equal(kc.writes, w);
	kf_diag_clear(c);

	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
	kf_buf_free(&a);
	kf_buf_free(&b);
	kf_buf_free(&p1);
	kf_buf_free(&p2);
	kf_buf_free(&log);
	kf_kcache_fini(&kc);
	kf_nvrtc_close(nv);
	kf_ctx_free(c);
}

/* ---- the driver -------------------------------------------------------------------- */

static void test_cuda_missing_driver(void **st)
{
	kf_ctx *c = kf_ctx_new();
	setenv("KFUSE_CUDA_DRIVER", "/nonexistent/libcuda.so.1", 1);
	kf_cuda *cu = kf_cuda_open(c, 0);
	unsetenv("KFUSE_CUDA_DRIVER");
	assert_null(cu);
	char *msg = render(c);
	assert_non_null(strstr(msg, "kfuse: error: cannot load the CUDA driver (tried /nonexistent/libcuda.so.1; "
				    "the last said: "));
	assert_non_null(strstr(msg, "the cuda backend needs an NVIDIA GPU and its driver (use --backend=cpu without one)\n"));
	free(msg);

	kf_ctx_free(c);
}

/* What the GPU steps share: vadd loaded from a cubin and from PTX, and
 * c = a + b over N floats. */
enum { N = 100000 };
typedef struct gpu {
	kf_ctx *c;
	kf_cuda *cu;
	const kf_cuda_info *in;
	kf_cumodule m, mp;
	kf_cufunc f, fp;
	int occ, n;
	kf_cuptr da, db, dc;
	float *ha, *hb, *hc;
	kf_custream s;
} gpu;

/* Modules from cubin and PTX, function attributes, occupancy. */
static void gpu_modules(gpu *g)
{
	kf_cuda *cu = g->cu;
	kf_nvrtc *nv = kf_nvrtc_open(g->c);
	assert_non_null(nv);
	kf_buf cubin = {0}, ptx = {0};
	assert_int_equal(kf_nvrtc_compile(nv, vadd_src, "vadd.cu", g->in->arch, NULL, 0, 1, &cubin, NULL), 0);
	assert_int_equal(kf_nvrtc_compile(nv, vadd_src, "vadd.cu", "compute_80", NULL, 0, 0, &ptx, NULL), 0);
	assert_int_equal(kf_cuda_module_load(cu, cubin.p, &g->m), 0);
	assert_int_equal(kf_cuda_module_load(cu, ptx.p, &g->mp), 0); /* JIT from PTX */
	assert_int_equal(kf_cuda_function(cu, g->m, "vadd", &g->f), 0);
	assert_int_equal(kf_cuda_function(cu, g->mp, "vadd", &g->fp), 0);
	kf_cufunc nf;
	assert_int_equal(kf_cuda_function(cu, g->m, "nope", &nf), -1);
	char *msg = render(g->c);
	assert_non_null(strstr(msg, "cuModuleGetFunction('nope') failed: CUDA_ERROR_NOT_FOUND"));
	free(msg);

	kf_cuda_funcattr fa;
	assert_int_equal(kf_cuda_func_attrs(cu, g->f, &fa), 0);
	assert_true(fa.regs > 0 && fa.max_threads >= 256 && fa.local_bytes >= 0);
	assert_int_equal(kf_cuda_func_set_max_dyn_smem(cu, g->f, g->in->smem_per_block_optin), 0);
	assert_int_equal(kf_cuda_occupancy(cu, g->f, 256, 0, &g->occ), 0);
	assert_true(g->occ >= 1);
	kf_buf_free(&cubin);
	kf_buf_free(&ptx);
	kf_nvrtc_close(nv);
}

/* Memory, launches (plain and cooperative), events. */
static void gpu_launch(gpu *g)
{
	kf_cuda *cu = g->cu;
	g->n = N;
	g->ha = malloc(N * 4), g->hb = malloc(N * 4), g->hc = malloc(N * 4);
	for (int i = 0; i < N; i++) {
		g->ha[i] = (float)i;
		g->hb[i] = 0.5f * (float)i;
	}
	assert_int_equal(kf_cuda_malloc(cu, N * 4, &g->da), 0);
	assert_int_equal(kf_cuda_malloc(cu, N * 4, &g->db), 0);
	assert_int_equal(kf_cuda_malloc(cu, N * 4, &g->dc), 0);
	assert_int_equal(kf_cuda_h2d(cu, g->da, g->ha, N * 4), 0);
	assert_int_equal(kf_cuda_h2d(cu, g->db, g->hb, N * 4), 0);
	void *args[] = {&g->da, &g->db, &g->dc, &g->n};
	unsigned grid[3] = {(N + 255) / 256, 1, 1}, block[3] = {256, 1, 1};

	kf_cuevent e0, e1;
	assert_int_equal(kf_cuda_stream_new(cu, &g->s), 0);
	assert_int_equal(kf_cuda_event_new(cu, &e0), 0);
	assert_int_equal(kf_cuda_event_new(cu, &e1), 0);
	assert_int_equal(kf_cuda_memset(cu, g->dc, 0, N * 4), 0);
	assert_int_equal(kf_cuda_event_record(cu, e0, g->s), 0);
	assert_int_equal(kf_cuda_launch(cu, g->f, grid, block, 0, g->s, args), 0);
	assert_int_equal(kf_cuda_event_record(cu, e1, g->s), 0);
	float ms = -1;
	assert_int_equal(kf_cuda_event_elapsed(cu, e0, e1, &ms), 0);
	assert_true(ms >= 0);
	assert_int_equal(kf_cuda_d2h(cu, g->hc, g->dc, N * 4), 0);
	for (int i = 0; i < N; i++)
		assert_true(g->hc[i] == 1.5f * (float)i);
	assert_int_equal(kf_cuda_event_free(cu, e0), 0);
	assert_int_equal(kf_cuda_event_free(cu, e1), 0);

	/* The PTX-loaded kernel, cooperatively where the device allows it. */
	assert_int_equal(kf_cuda_memset(cu, g->dc, 0, N * 4), 0);
	if (g->in->coop_launch && (unsigned)g->occ * (unsigned)g->in->sm_count >= grid[0])
		assert_int_equal(kf_cuda_launch_coop(cu, g->fp, grid, block, 0, g->s, args), 0);
	else
		assert_int_equal(kf_cuda_launch(cu, g->fp, grid, block, 0, g->s, args), 0);
	assert_int_equal(kf_cuda_sync(cu, g->s), 0);
	assert_int_equal(kf_cuda_d2h(cu, g->hc, g->dc, N * 4), 0);
	assert_true(g->hc[N - 1] == 1.5f * (float)(N - 1));
}

/* Capture c = a + b, then c = c + b, into a graph: nothing runs until the
 * graph is launched. */
static void gpu_graph(gpu *g)
{
	kf_cuda *cu = g->cu;
	void *args[] = {&g->da, &g->db, &g->dc, &g->n};
	void *args2[] = {&g->dc, &g->db, &g->dc, &g->n};
	unsigned grid[3] = {(N + 255) / 256, 1, 1}, block[3] = {256, 1, 1};
	kf_cugraph gr;

	assert_int_equal(kf_cuda_memset(cu, g->dc, 0, N * 4), 0);
	assert_int_equal(kf_cuda_sync(cu, NULL), 0);
	assert_int_equal(kf_cuda_capture_begin(cu, g->s), 0);
	assert_int_equal(kf_cuda_launch(cu, g->f, grid, block, 0, g->s, args), 0);
	assert_int_equal(kf_cuda_launch(cu, g->f, grid, block, 0, g->s, args2), 0);
	assert_int_equal(kf_cuda_capture_end(cu, g->s, &gr), 0);
	assert_int_equal(kf_cuda_sync(cu, g->s), 0);
	assert_int_equal(kf_cuda_d2h(cu, g->hc, g->dc, N * 4), 0);
	assert_true(g->hc[7] == 0.0f);
	assert_int_equal(kf_cuda_graph_launch(cu, gr, g->s), 0);
	assert_int_equal(kf_cuda_sync(cu, g->s), 0);
	assert_int_equal(kf_cuda_d2h(cu, g->hc, g->dc, N * 4), 0);
	for (int i = 0; i < N; i++)
		assert_true(g->hc[i] == (float)i + 0.5f * (float)i + 0.5f * (float)i);
	assert_int_equal(kf_cuda_graph_free(cu, gr), 0);
	assert_int_equal(kf_cuda_capture_begin(cu, NULL), -1);
	kf_diag_clear(g->c);
}

static void gpu_smoke(kf_ctx *c, kf_cuda *cu)
{
	gpu g = {.c = c, .cu = cu, .in = kf_cuda_get_info(cu)};
	print_message("GPU: %s, %s, %d SMs, %d B smem/block opt-in, coop %d, driver %d\n", g.in->name,
		      g.in->arch, g.in->sm_count, g.in->smem_per_block_optin, g.in->coop_launch,
		      g.in->driver_version);
	assert_true(g.in->sm_count > 0 && g.in->warp_size == 32 && g.in->total_mem > 0);
	assert_int_equal(strncmp(g.in->arch, "sm_", 3), 0);
	gpu_modules(&g);
	gpu_launch(&g);
	gpu_graph(&g);
	assert_int_equal(kf_cuda_stream_free(cu, g.s), 0);
	assert_int_equal(kf_cuda_free(cu, g.da), 0);
	assert_int_equal(kf_cuda_free(cu, g.db), 0);
	assert_int_equal(kf_cuda_free(cu, g.dc), 0);
	assert_int_equal(kf_cuda_module_unload(cu, g.m), 0);
	assert_int_equal(kf_cuda_module_unload(cu, g.mp), 0);
	free(g.ha);
	free(g.hb);
	free(g.hc);
}

/* Only where no real driver was loaded: a loaded libcuda.so.1 would be
 * returned for the stub too (they share the soname). */
static void check_stub_driver(kf_ctx *c)
{
	/* The toolkit's link stub loads, but cuInit refuses: say so. */
	const char *stub = "/usr/local/cuda/lib64/stubs/libcuda.so";
	if (access(stub, R_OK) == 0) {
		setenv("KFUSE_CUDA_DRIVER", stub, 1);
		kf_cuda *cu = kf_cuda_open(c, 0);
		unsetenv("KFUSE_CUDA_DRIVER");
		assert_null(cu);
		char *msg = render(c);
		assert_non_null(strstr(msg, "kfuse: error: cuInit failed: "));
		assert_non_null(strstr(msg, "this libcuda is the toolkit's link stub, not a driver"));
		free(msg);
	} else {
		print_message("note: no %s; the stub-driver case is not checked\n", stub);
	}
}

static void test_cuda_open(void **st)
{
	kf_ctx *c = kf_ctx_new();
	kf_cuda *cu = kf_cuda_open(c, 0);
	if (!cu) {
		/* No GPU here: the failure must be one clear error, no crash. */
		char *msg = render(c);
		print_message("no GPU: %s", msg);
		assert_int_equal(strncmp(msg, "kfuse: error: ", 14), 0);
		assert_true(strstr(msg, "CUDA driver") || strstr(msg, "cuInit failed: CUDA_ERROR_"));
		assert_int_equal(strchr(msg, '\n')[1], 0);
		free(msg);
		check_stub_driver(c);
		kf_ctx_free(c);
		return;
	}
	gpu_smoke(c, cu);
	assert_null(kf_cuda_open(c, 1000));
	char *msg = render(c);
	assert_non_null(strstr(msg, "kfuse: error: CUDA device 1000 does not exist (this machine has "));
	free(msg);
	kf_cuda_close(cu);
	kf_ctx_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_nvrtc_ptx_and_cubin),
		cmocka_unit_test(test_nvrtc_errors),
		cmocka_unit_test(test_nvrtc_missing),
		cmocka_unit_test(test_kcache_dir),
		cmocka_unit_test(test_kcache_key),
		cmocka_unit_test(test_kcache_get_put),
		cmocka_unit_test(test_kcache_compile),
		cmocka_unit_test(test_cuda_missing_driver),
		cmocka_unit_test(test_cuda_open),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
