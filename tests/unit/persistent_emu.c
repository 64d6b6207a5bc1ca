/* persistent_emu.c: a persistent kernel run on the host against the
 * interpreter (persistent_emu.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include "kf_test.h"

#include "emit_cuda.h"
#include "equiv.h"
#include "interp.h"
#include "persistent_emu.h"

/* The CUDA the persistent kernel uses, for gcc: a block is a thread, its
 * CUDA threads are fibers switched at barriers, shuffles and spins (so
 * __shared__ is thread-local and the blocks' hand-off through the
 * __device__ globals is real concurrency); a block that makes no progress
 * for 20 s is a deadlock. */
static const char emu_shim[] =
	"#define _GNU_SOURCE\n#include <math.h>\n#include <pthread.h>\n#include <sched.h>\n#include <stdbool.h>\n"
	"#include <stdint.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n#include <time.h>\n"
	"#include <ucontext.h>\n"
	"#define __global__\n#define __device__\n#define __forceinline__ static inline\n#define __launch_bounds__(...)\n"
	"#define __restrict__ restrict\n#define __shared__ static __thread\n#define __ldg(p) (*(p))\n#define KF_NT 256\n"
	"#define __align__(n) __attribute__((aligned(n)))\n"
	"typedef struct { unsigned x, y, z; } kf_dim3;\ntypedef struct { float x, y; } float2;\n"
	"enum { KF_RUN, KF_BAR, KF_WARP, KF_SPIN, KF_DONE };\n"
	"typedef struct { ucontext_t uc; kf_dim3 tid; int st; unsigned wait; } kf_fib;\n"
	"static kf_dim3 gridDim, blockDim;\nstatic __thread kf_dim3 blockIdx;\nstatic __thread kf_fib *kf_emu_me;\n"
	"static __thread ucontext_t kf_emu_sched;\n"
	"static __thread unsigned kf_emu_bn, kf_emu_bgen, kf_emu_wn[KF_NT / 32], kf_emu_wgen[KF_NT / 32], kf_emu_wseq[KF_NT];\n"
	"static __thread float kf_emu_wv[2][KF_NT];\nstatic pthread_barrier_t kf_emu_gbar;\n"
	"#define threadIdx (kf_emu_me->tid)\n"
	"static void kf_emu_yield(int st) { kf_emu_me->st = st; swapcontext(&kf_emu_me->uc, &kf_emu_sched); }\n"
	"static void kf_emu_bar(bool grid)\n{\n  unsigned g = kf_emu_bgen;\n"
	"  if (++kf_emu_bn == KF_NT) {\n    if (grid) pthread_barrier_wait(&kf_emu_gbar);\n"
	"    kf_emu_bn = 0; kf_emu_bgen++; return;\n  }\n  kf_emu_me->wait = g; kf_emu_yield(KF_BAR);\n}\n"
	"static void __syncthreads(void) { kf_emu_bar(false); }\n"
	"static void kf_host_grid_sync(void) { kf_emu_bar(true); }\n"
	"static void kf_host_spin(void) { kf_emu_yield(KF_SPIN); }\n"
	/* a shuffle is a warp barrier; its values alternate between two
	 * rows, as no lane can be two shuffles ahead of another */
	"static float __shfl_xor_sync(unsigned m, float v, int o)\n{\n"
	"  unsigned t = threadIdx.x, w = t >> 5, s = kf_emu_wseq[t]++ & 1, g = kf_emu_wgen[w];\n  (void)m;\n"
	"  kf_emu_wv[s][t] = v;\n  if (++kf_emu_wn[w] == 32) { kf_emu_wn[w] = 0; kf_emu_wgen[w]++; }\n"
	"  else { kf_emu_me->wait = g; kf_emu_yield(KF_WARP); }\n"
	"  return kf_emu_wv[s][(w << 5) | ((t & 31) ^ (unsigned)o)];\n}\n"
	"static unsigned atomicAdd(unsigned *p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }\n"
	"static void __threadfence(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }\n"
	"static unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }\n"
	"static float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }\n"
	/* f16 and bf16 as the device converts them (round to nearest even) */
	"static float kf_h2f(unsigned short h) { _Float16 x; memcpy(&x, &h, 2); return (float)x; }\n"
	"static unsigned short kf_f2h(float f) { _Float16 x = (_Float16)f; unsigned short h; memcpy(&h, &x, 2); return h; }\n"
	"static float kf_b2f(unsigned short h) { unsigned u = (unsigned)h << 16; float f; memcpy(&f, &u, 4); return f; }\n"
	"static unsigned short kf_f2b(float f)\n{\n  unsigned u;\n  memcpy(&u, &f, 4);\n"
	"  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40);\n"
	"  return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);\n}\n"
	"static float kf_exp(float x) { return expf(x); }\nstatic float kf_log(float x) { return logf(x); }\n"
	"static float kf_tanh(float x) { return tanhf(x); }\nstatic float kf_abs(float x) { return fabsf(x); }\n"
	"static float kf_sqrt(float x) { return sqrtf(x); }\nstatic float kf_rsqrt(float x) { return 1.0f / sqrtf(x); }\n"
	"static float kf_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }\n"
	"static float kf_relu(float x) { return x < 0 ? 0 : x; }\nstatic float kf_div(float a, float b) { return a / b; }\n"
	"static float kf_max(float a, float b) { return (a > b || a != a) ? a : b; }\n"
	"static float kf_min(float a, float b) { return (a < b || a != a) ? a : b; }\n"
	"static void kf_emu_entry(void);\n"
	"static void *kf_emu_block(void *arg)\n{\n  enum { STK = 1 << 16 };\n"
	"  blockIdx.x = (unsigned)(uintptr_t)arg;\n"
	"  kf_fib *f = calloc(KF_NT, sizeof *f);\n  char *stk = malloc((size_t)KF_NT * STK);\n"
	"  for (int i = 0; i < KF_NT; i++) {\n    getcontext(&f[i].uc);\n"
	"    f[i].uc.uc_stack.ss_sp = stk + (size_t)i * STK;\n    f[i].uc.uc_stack.ss_size = STK;\n"
	"    f[i].uc.uc_link = &kf_emu_sched;\n    makecontext(&f[i].uc, kf_emu_entry, 0);\n    f[i].tid.x = (unsigned)i;\n  }\n"
	"  int live = KF_NT;\n  time_t t0 = time(NULL);\n"
	"  while (live > 0) {\n    int moved = 0, spin = 0;\n"
	"    for (int i = 0; i < KF_NT; i++) {\n      kf_fib *x = &f[i];\n"
	"      if (x->st == KF_DONE || (x->st == KF_BAR && x->wait == kf_emu_bgen) ||\n"
	"          (x->st == KF_WARP && x->wait == kf_emu_wgen[i >> 5]))\n        continue;\n"
	"      int was = x->st;\n      x->st = KF_RUN;\n      kf_emu_me = x;\n      swapcontext(&kf_emu_sched, &x->uc);\n"
	"      if (x->st == KF_RUN) { x->st = KF_DONE; live--; }\n"
	"      if (was == KF_SPIN && x->st == KF_SPIN) spin = 1; else moved = 1;\n    }\n"
	"    if (moved) { t0 = time(NULL); continue; }\n"
	"    if (!spin || difftime(time(NULL), t0) > 20) {\n"
	"      fprintf(stderr, \"emu: block %u: deadlock (%s)\\n\", blockIdx.x, spin ? \"spinning\" : \"barrier\");\n"
	"      exit(3);\n    }\n    sched_yield();\n  }\n  free(stk);\n  free(f);\n  return NULL;\n}\n"
	"static int kf_emu_main(int argc, char **argv, int np, int nin, const long *n, void **p)\n{\n"
	"  if (argc != 4) return 2;\n  int grid = atoi(argv[2]), launches = atoi(argv[3]);\n  char path[4200];\n"
	"  for (int i = 0; i < np; i++) {\n    p[i] = calloc((size_t)n[i] + 4, 1);\n    if (i >= nin) continue;\n"
	"    snprintf(path, sizeof path, \"%s/in%d.bin\", argv[1], i);\n    FILE *f = fopen(path, \"rb\");\n"
	"    if (!f || fread(p[i], 1, (size_t)n[i], f) != (size_t)n[i]) return 2;\n    fclose(f);\n  }\n"
	"  gridDim.x = (unsigned)grid; gridDim.y = gridDim.z = 1; blockDim.x = KF_NT; blockDim.y = blockDim.z = 1;\n"
	"  pthread_barrier_init(&kf_emu_gbar, NULL, (unsigned)grid);\n"
	"  pthread_t *th = calloc((size_t)grid, sizeof *th);\n"
	"  for (int l = 0; l < launches; l++) {\n"
	"    for (int i = nin; i < np; i++) memset(p[i], 0xff, (size_t)n[i]); /* NaN */\n"
	"    for (int b = 0; b < grid; b++) pthread_create(&th[b], NULL, kf_emu_block, (void *)(uintptr_t)b);\n"
	"    for (int b = 0; b < grid; b++) pthread_join(th[b], NULL);\n"
	"    for (int i = nin; i < np; i++) {\n"
	"      snprintf(path, sizeof path, \"%s/out%d.%d.bin\", argv[1], i - nin, l);\n"
	"      FILE *f = fopen(path, \"wb\");\n      if (!f || fwrite(p[i], 1, (size_t)n[i], f) != (size_t)n[i]) return 2;\n"
	"      fclose(f);\n    }\n  }\n  return 0;\n}\n";

static bool write_bytes(const char *dir, const char *name, const void *p, size_t n)
{
	char path[600];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	bool ok = f && fwrite(p, 1, n, f) == n;
	if (f)
		fclose(f);
	return ok;
}

static bool read_bytes(const char *dir, const char *name, void *p, size_t n)
{
	char path[600];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	FILE *f = fopen(path, "rb");
	bool ok = f && fread(p, 1, n, f) == n;
	if (f)
		fclose(f);
	return ok;
}

kf_nid kft_nth_persistent(kf_graph *g, int i)
{
	kf_foreach_node(g, 0, x)
		if (kf_N(g, x)->op == KF_OP_FUSION && !strcmp(kf_attr_str(g, x, "kind", ""), "persistent") && i-- == 0)
			return x;
	return KF_NONE;
}

/* The kernel's text with the shim and a main that runs `launches`
 * launches of `grid` blocks on the parameters in dir/in<i>.bin. */
static void emu_source(const kft_emu *e, const kf_kernel *k, const kf_tensor *val, kf_buf *src)
{
	kf_buf_puts(src, emu_shim);
	const char *s = k->src, *ext = strstr(s, "extern \"C\" ");
	assert_non_null(ext);
	kf_buf body = {0};
	kf_buf_put(&body, s, (size_t)(ext - s));
	kf_buf_puts(&body, ext + strlen("extern \"C\" "));
	kf_buf_putc(&body, 0);
	const char *cut = e->from ? strstr(body.p, e->from) : NULL;
	if (e->from)
		assert_non_null(cut);
	if (cut) {
		kf_buf_put(src, body.p, (size_t)(cut - body.p));
		kf_buf_puts(src, e->to);
		kf_buf_puts(src, cut + strlen(e->from));
	} else {
		kf_buf_puts(src, body.p);
	}
	kf_buf_free(&body);
	uint32_t np = k->nin + k->nout;
	kf_buf_printf(src, "static void *kf_emu_p[%u];\nstatic void kf_emu_entry(void)\n{\n  %s(", np, k->name);
	for (uint32_t j = 0; j < np; j++)
		kf_buf_printf(src, "%skf_emu_p[%u]", j ? ", " : "", j);
	kf_buf_printf(src, ");\n}\nint main(int argc, char **argv)\n{\n  static const long n[] = {");
	for (uint32_t j = 0; j < np; j++)
		kf_buf_printf(src, "%s%lld", j ? ", " : "", (long long)val[j].nbytes);
	kf_buf_printf(src, "};\n  return kf_emu_main(argc, argv, %u, %u, n, kf_emu_p);\n}\n", np, k->nin);
	kf_buf_putc(src, 0);
}

/* g2 (a second copy of the rewritten graph) returns the parameters of
 * the kernel k of node f of g: its inputs, then what the interpreter
 * computes for its outputs. */
static void return_params(kf_graph *g, kf_nid f, kf_graph *g2, kf_nid f2, const kf_kernel *k)
{
	uint32_t np = k->nin + k->nout;
	kf_vid ret[64];
	kf_tid ty[64];
	assert_true(np <= 64);
	for (uint32_t j = 0; j < np; j++) {
		ret[j] = KF_NONE;
		for (uint32_t q = 0; j < k->nin && q < kf_N(g, f)->nin; q++)
			if (kf_in(g, f, q) == k->in[j])
				ret[j] = kf_in(g2, f2, q);
		for (uint32_t q = 0; j >= k->nin && q < kf_N(g, f)->nres; q++)
			if (kf_res(g, f, q) == k->out[j - k->nin])
				ret[j] = kf_res(g2, f2, q);
		assert_true(ret[j] != KF_NONE);
		ty[j] = kf_V(g2, ret[j])->type;
	}
	kf_node_erase(g2, kf_block_terminator(g2, 0));
	kf_node_new(g2, 0, KF_NONE, KF_OP_RETURN, ret, np, NULL, 0);
	kf_graph_set_results(g2, ty, np);
}

/* Runs the emulation in a temporary directory; the outputs of launch l
 * into got[l].  false when there is no C compiler. */
static bool emu_exec(const kft_emu *e, const kf_kernel *k, const kf_tensor *val, void **got)
{
	char dir[] = "/tmp/kfuse-emu-XXXXXX", name[64], cmd[256];
	assert_non_null(mkdtemp(dir));
	kf_buf src = {0};
	emu_source(e, k, val, &src);
	for (uint32_t j = 0; j < k->nin; j++) {
		snprintf(name, sizeof name, "in%u.bin", j);
		assert_true(write_bytes(dir, name, val[j].data, val[j].nbytes));
	}
	char path[128];
	snprintf(path, sizeof path, "%s/emu.c", dir);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(src.p, f);
	fclose(f);
	snprintf(cmd, sizeof cmd, "cc -std=gnu11 -O1 -w -pthread -o %s/emu %s/emu.c -lm", dir, dir);
	bool have_cc = system("cc --version > /dev/null 2>&1") == 0;
	if (have_cc) {
		assert_int_equal(system(cmd), 0);
		snprintf(cmd, sizeof cmd, "%s/emu %s %d 2", dir, dir, e->grid);
		assert_int_equal(system(cmd), 0);
		for (int l = 0; l < 2; l++)
			for (uint32_t q = 0; q < k->nout; q++) {
				snprintf(name, sizeof name, "out%u.%d.bin", q, l);
				assert_true(read_bytes(dir, name, got[l * k->nout + q], val[k->nin + q].nbytes));
			}
	}
	kft_rmdir(dir);
	kf_buf_free(&src);
	return have_cc;
}

int64_t kft_emu_run(kf_graph *g, kf_graph *g2, int node, const kft_emu *e, const kf_tensor *in)
{
	kf_nid f = kft_nth_persistent(g, node), f2 = kft_nth_persistent(g2, node);
	assert_true(f != KF_NONE && f2 != KF_NONE);
	if (e->upb)
		setenv("KFUSE_PERSISTENT_UPB", e->upb, 1);
	if (e->sync)
		setenv("KFUSE_PERSISTENT_SYNC", e->sync, 1);
	if (e->hv)
		setenv("KFUSE_PERSISTENT_HV", e->hv, 1);
	if (e->pf)
		setenv("KFUSE_PERSISTENT_PF", e->pf, 1);
	kf_kernel k;
	int rc = kf_emit_node(g, f, &k);
	unsetenv("KFUSE_PERSISTENT_UPB");
	unsetenv("KFUSE_PERSISTENT_SYNC");
	unsetenv("KFUSE_PERSISTENT_HV");
	unsetenv("KFUSE_PERSISTENT_PF");
	if (rc != 0)
		kf_diag_flush(g->ctx, stderr);
	assert_int_equal(rc, 0);
	uint32_t na = g2->blk[0].narg;
	return_params(g, f, g2, f2, &k);
	uint32_t np = k.nin + k.nout;
	kf_tensor val[64];
	assert_true(np <= 64);
	rc = kf_interp_run(g2, in, (int)na, val, (int)np);
	if (rc != 0)
		kf_diag_flush(g->ctx, stderr);
	assert_int_equal(rc, 0);
	void *got[2 * 16];
	assert_true(k.nout <= 16);
	for (uint32_t i = 0; i < 2 * k.nout; i++)
		got[i] = malloc(val[k.nin + i % k.nout].nbytes + 1);
	int64_t bad = -1;
	if (emu_exec(e, &k, val, got)) {
		bad = 0;
		for (uint32_t q = 0; q < k.nout; q++) {
			kf_tensor *want = &val[k.nin + q], t = *want;
			t.data = got[q];
			kf_equiv_stat st;
			kf_equiv_compare(&t, want, e->rtol > 0 ? e->rtol : 1e-4, e->atol > 0 ? e->atol : 1e-5, &st);
			kf_buf d = {0};
			kf_equiv_describe(&d, &st);
			fprintf(stderr, "emu %s upb=%s sync=%s hv=%s pf=%s grid=%d out%u: %.*s\n", e->label ? e->label : "",
				e->upb ? e->upb : "-", e->sync ? e->sync : "tags", e->hv ? e->hv : "-", e->pf ? e->pf : "-",
				e->grid, q, (int)d.n, d.p);
			kf_buf_free(&d);
			bad += st.nbad;
			/* a second launch (stale tags of the first in the buffers,
			 * the epoch moved on) computes the same, bit for bit */
			if (!e->from)
				assert_memory_equal(got[q], got[k.nout + q], want->nbytes);
		}
	} else {
		fprintf(stderr, "emu: no C compiler (cc), kernel not emulated\n");
	}
	for (uint32_t i = 0; i < 2 * k.nout; i++)
		free(got[i]);
	for (uint32_t i = 0; i < np; i++)
		kf_tensor_free(&val[i]);
	kf_kernel_free(&k);
	return bad;
}
