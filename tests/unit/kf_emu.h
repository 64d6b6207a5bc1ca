/* kf_emu.h: runs an emitted CUDA kernel on the host, for unit tests on a
 * machine without a GPU (include after cmocka.h).  The kernel's text is
 * compiled as C++ with the prelude (its inline-assembly helpers replaced)
 * and a shim that implements the CUDA it uses: a block's threads are fibers
 * (ucontext) switched at __syncthreads and at the warp's collective
 * operations, which run when all 32 lanes have arrived (shuffles, ldmatrix,
 * mma.sync m16n8k16 on f16 and bf16); cp.async copies are deferred to the
 * cp.async.wait_group that must cover them (so a read before the wait sees
 * stale data, as it may on a GPU); shared memory is filled with NaN bytes
 * before each block; blocks run one after the other, __device__ globals
 * and atomics are plain memory.  A block whose threads all wait for
 * something that never comes is a deadlock: the run fails with a message.
 *
 * kfe_run(kernel, params) writes the parameters to a temporary directory,
 * compiles the program with the host's c++, runs it and reads the outputs
 * back; false when there is no c++ (the test then says so and skips). */
#ifndef KF_EMU_H
#define KF_EMU_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "emit_cuda.h"
#include "kf.h"
#include "tensor.h"

static const char kfe_shim[] =
	"#include <cmath>\n#include <cstdint>\n#include <cstdio>\n#include <cstdlib>\n#include <cstring>\n"
	"#include <ucontext.h>\n#include <utility>\n#include <vector>\n"
	"#define __global__\n#define __device__\n#define __forceinline__ inline\n#define __launch_bounds__(...)\n"
	"#define __align__(n) __attribute__((aligned(n)))\n#define __shared__\n#define __grid_constant__\n"
	"#define KF_MM_HELPERS\n#define KF_ATT_HELPERS\n"
	"struct kf_dim3 { unsigned x, y, z; };\nstruct uint2 { unsigned x, y; };\nstruct uint4 { unsigned x, y, z, w; };\n"
	"static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }\n"
	"static inline float __uint_as_float(unsigned i) { float f; memcpy(&f, &i, 4); return f; }\n"
	"static inline unsigned __float_as_uint(float f) { unsigned i; memcpy(&i, &f, 4); return i; }\n"
	"static inline double __longlong_as_double(long long i) { double f; memcpy(&f, &i, 8); return f; }\n"
	"static inline float __fdividef(float a, float b) { return a / b; }\n"
	"static inline int min(int a, int b) { return a < b ? a : b; }\n"
	"static inline int max(int a, int b) { return a > b ? a : b; }\n"
	"static inline long long min(long long a, long long b) { return a < b ? a : b; }\n"
	"static inline long long max(long long a, long long b) { return a > b ? a : b; }\n"
	"template <typename T> static inline T __ldg(const T *p) { return *p; }\n"
	"template <typename T> static inline T __ldcs(const T *p) { return *p; }\n"
	"template <typename T> static inline T __ldcg(const T *p) { return *p; }\n"
	"template <typename T> static inline void __stcs(T *p, T v) { *p = v; }\n"
	"static inline void __threadfence(void) {}\n"
	"static void __syncthreads(void);\ntemplate <typename T> static T __shfl_xor_sync(unsigned mask, T v, int o);\n"
	"enum { KF_RUN, KF_BAR, KF_WARP, KF_DONE };\n"
	"struct kf_cp { unsigned char *d; const unsigned char *s; bool ok; };\n"
	"struct kf_fib { ucontext_t uc; kf_dim3 tid; int st; unsigned wait; std::vector<kf_cp> cur;\n"
	"  std::vector<std::vector<kf_cp>> groups; };\n"
	"static kf_dim3 gridDim, blockDim, blockIdx;\nstatic kf_fib *kf_me;\nstatic ucontext_t kf_sched;\n"
	"#define threadIdx (kf_me->tid)\n"
	"static inline unsigned atomicAdd(unsigned *p, unsigned v) { unsigned o = *p; *p = o + v; return o; }\n"
	/* f16 and bf16, rounding to nearest even as the cvt instructions do */
	"static inline float kf_h2f(unsigned short h) {\n"
	"  unsigned s = (h & 0x8000u) << 16, e = (h >> 10) & 31, m = h & 0x3ff;\n"
	"  if (e == 31) return __uint_as_float(s | 0x7f800000u | (m << 13));\n"
	"  if (e == 0) { float f = (float)m * 5.9604644775390625e-8f; return s ? -f : f; }\n"
	"  return __uint_as_float(s | ((e + 112) << 23) | (m << 13)); }\n"
	"static inline unsigned short kf_f2h(float f) {\n"
	"  unsigned u = __float_as_uint(f), s = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;\n"
	"  if (a > 0x7f800000u) return (unsigned short)(s | 0x7e00u);\n"
	"  if (a >= 0x477ff000u) return (unsigned short)(s | 0x7c00u);\n"
	"  if (a < 0x38800000u) { /* subnormal: round x * 2^24 to an integer */\n"
	"    float x = __uint_as_float(a) * 16777216.0f; float r = nearbyintf(x); return (unsigned short)(s | (unsigned)r); }\n"
	"  unsigned m = a + 0xfffu + ((a >> 13) & 1u); return (unsigned short)(s | ((m - 0x38000000u) >> 13)); }\n"
	"static inline unsigned short kf_d2h(double d) { return kf_f2h((float)d); }\n"
	"static inline unsigned short kf_f2b(float f) {\n"
	"  unsigned u = __float_as_uint(f);\n"
	"  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);\n"
	"  return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16); }\n"
	"static inline float kf_gelu_tanh_fast(float x) { return 0.5f * x * (1.0f + tanhf(0.79788456f * (x + 0.044715f * x * x * x))); }\n"
	"static inline float kf_ex2(float x) { return exp2f(x); }\n"
	"static inline unsigned kf_pack_h2(float lo, float hi) { return kf_f2h(lo) | (unsigned)kf_f2h(hi) << 16; }\n"
	"static inline unsigned kf_pack_b2(float lo, float hi) { return kf_f2b(lo) | (unsigned)kf_f2b(hi) << 16; }\n";

/* After the prelude (which defines kf_b2f): the threads, the collectives. */
static const char kfe_shim2[] =
	/* the threads of a block: fibers */
	"static unsigned kf_bn, kf_bgen, kf_wn[32], kf_wgen[32];\n"
	"static unsigned char kf_win[1024][64], kf_wout[1024][64];\n"
	"extern \"C\" { alignas(16) unsigned char kf_smem[232448]; }\n"
	"static void kf_yield(int st) { kf_me->st = st; swapcontext(&kf_me->uc, &kf_sched); }\n"
	"static void __syncthreads(void) {\n  unsigned g = kf_bgen;\n"
	"  if (++kf_bn == blockDim.x) { kf_bn = 0; kf_bgen++; return; }\n  kf_me->wait = g; kf_yield(KF_BAR); }\n"
	/* a collective: every lane leaves n bytes; the last to come runs op
	 * for the warp; each takes m bytes back */
	"template <typename F> static void kf_warp(const void *in, size_t n, void *out, size_t m, F op) {\n"
	"  unsigned t = kf_me->tid.x, w = t >> 5, g = kf_wgen[w];\n  memcpy(kf_win[t], in, n);\n"
	"  if (++kf_wn[w] == 32) { op(w << 5); kf_wn[w] = 0; kf_wgen[w]++; }\n"
	"  else { kf_me->wait = g; kf_yield(KF_WARP); }\n  memcpy(out, kf_wout[t], m); }\n"
	"template <typename T> static T __shfl_xor_sync(unsigned mask, T v, int o) {\n  T r; (void)mask;\n"
	"  kf_warp(&v, sizeof v, &r, sizeof r, [&](unsigned b) { for (unsigned l = 0; l < 32; l++)\n"
	"    memcpy(kf_wout[b + l], kf_win[b + (l ^ (unsigned)o)], sizeof(T)); });\n  return r; }\n"
	/* cp.async: copies wait in groups until a wait_group covers them */
	"static void kf_cp16(void *d, const void *s, bool ok) { kf_me->cur.push_back({(unsigned char *)d, (const unsigned char *)s, ok}); }\n"
	"static void kf_cp_commit() { kf_me->groups.push_back(kf_me->cur); kf_me->cur.clear(); }\n"
	"template <int N> static void kf_cp_wait() {\n"
	"  while (kf_me->groups.size() > (size_t)N) {\n"
	"    for (const kf_cp &c : kf_me->groups.front()) { if (c.ok) memcpy(c.d, c.s, 16); else memset(c.d, 0, 16); }\n"
	"    kf_me->groups.erase(kf_me->groups.begin()); } }\n"
	/* ldmatrix x4: lanes 8i..8i+7 address the rows of matrix i */
	"static void kf_ldsm(unsigned *r, const void *p, bool tr) {\n"
	"  kf_warp(p, 16, r, 16, [&](unsigned b) {\n    for (unsigned l = 0; l < 32; l++)\n      for (unsigned i = 0; i < 4; i++) {\n"
	"        unsigned short e[2];\n"
	"        for (unsigned h = 0; h < 2; h++) {\n"
	"          unsigned row = tr ? 2 * (l & 3) + h : l >> 2, col = tr ? l >> 2 : 2 * (l & 3) + h;\n"
	"          memcpy(&e[h], kf_win[b + 8 * i + row] + 2 * col, 2); }\n"
	"        unsigned v = e[0] | (unsigned)e[1] << 16; memcpy(kf_wout[b + l] + 4 * i, &v, 4); } });\n}\n"
	"static void kf_ldsm4(unsigned *r, const void *p) { kf_ldsm(r, p, false); }\n"
	"static void kf_ldsm4t(unsigned *r, const void *p) { kf_ldsm(r, p, true); }\n"
	/* mma.sync m16n8k16 row.col, f32 accumulators */
	"static float kf_half(unsigned v, int h, bool bf) { unsigned short x = (unsigned short)(h ? v >> 16 : v & 0xffff);\n"
	"  return bf ? kf_b2f(x) : kf_h2f(x); }\n"
	"static void kf_mma(float *c, const unsigned *a, const unsigned *bb, bool bf) {\n"
	"  unsigned in[10]; memcpy(in, c, 16); memcpy(in + 4, a, 16); memcpy(in + 8, bb, 8);\n"
	"  kf_warp(in, 40, c, 16, [&](unsigned b) {\n    float A[16][16], B[16][8], C[16][8];\n"
	"    for (unsigned l = 0; l < 32; l++) {\n      unsigned x[10]; memcpy(x, kf_win[b + l], 40);\n"
	"      unsigned g = l >> 2, q = l & 3;\n      float cf[4]; memcpy(cf, x, 16);\n"
	"      C[g][2 * q] = cf[0]; C[g][2 * q + 1] = cf[1]; C[g + 8][2 * q] = cf[2]; C[g + 8][2 * q + 1] = cf[3];\n"
	"      for (int h = 0; h < 2; h++) {\n"
	"        A[g][2 * q + h] = kf_half(x[4], h, bf); A[g + 8][2 * q + h] = kf_half(x[5], h, bf);\n"
	"        A[g][2 * q + 8 + h] = kf_half(x[6], h, bf); A[g + 8][2 * q + 8 + h] = kf_half(x[7], h, bf);\n"
	"        B[2 * q + h][g] = kf_half(x[8], h, bf); B[2 * q + 8 + h][g] = kf_half(x[9], h, bf); } }\n"
	"    for (unsigned l = 0; l < 32; l++) {\n      unsigned g = l >> 2, q = l & 3; float d[4];\n"
	"      for (int r = 0; r < 4; r++) {\n        unsigned i = g + (r >> 1) * 8, j = 2 * q + (r & 1); float s = C[i][j];\n"
	"        for (int kk = 0; kk < 16; kk++) s += A[i][kk] * B[kk][j];\n        d[r] = s; }\n"
	"      memcpy(kf_wout[b + l], d, 16); } });\n}\n"
	"static void kf_mma_f16(float *c, const unsigned *a, const unsigned *b) { kf_mma(c, a, b, false); }\n"
	"static void kf_mma_bf16(float *c, const unsigned *a, const unsigned *b) { kf_mma(c, a, b, true); }\n";

/* The launcher and main, after the kernel: the grid one block at a time. */
static const char kfe_main[] =
	"static void (*kf_entry)(void);\n"
	"static void kf_trampoline(void) { kf_entry(); }\n"
	"template <typename... A, size_t... I> static void kf_call(void (*f)(A...), unsigned char **p, std::index_sequence<I...>) {\n"
	"  f(reinterpret_cast<A>(p[I])...); }\n"
	"template <typename... A> static void kf_call(void (*f)(A...), unsigned char **p) { kf_call(f, p, std::index_sequence_for<A...>{}); }\n"
	"static int kf_run(unsigned grid, unsigned nt, void (*body)(void)) {\n"
	"  enum { STK = 1 << 17 };\n  std::vector<kf_fib> f(nt);\n  std::vector<char> stk((size_t)nt * STK);\n"
	"  gridDim = {grid, 1, 1}; blockDim = {nt, 1, 1}; kf_entry = body;\n"
	"  for (unsigned bx = 0; bx < grid; bx++) {\n    blockIdx = {bx, 0, 0};\n    memset(kf_smem, 0xff, sizeof kf_smem);\n"
	"    kf_bn = kf_bgen = 0; memset(kf_wn, 0, sizeof kf_wn); memset(kf_wgen, 0, sizeof kf_wgen);\n"
	"    for (unsigned i = 0; i < nt; i++) {\n      f[i].cur.clear(); f[i].groups.clear(); f[i].st = KF_RUN; f[i].tid = {i, 0, 0};\n"
	"      getcontext(&f[i].uc); f[i].uc.uc_stack.ss_sp = &stk[(size_t)i * STK]; f[i].uc.uc_stack.ss_size = STK;\n"
	"      f[i].uc.uc_link = &kf_sched; makecontext(&f[i].uc, kf_trampoline, 0); }\n"
	"    unsigned live = nt;\n"
	"    while (live) {\n      bool moved = false;\n"
	"      for (unsigned i = 0; i < nt; i++) {\n        kf_fib *x = &f[i];\n"
	"        if (x->st == KF_DONE || (x->st == KF_BAR && x->wait == kf_bgen) || (x->st == KF_WARP && x->wait == kf_wgen[i >> 5]))\n"
	"          continue;\n        x->st = KF_RUN; kf_me = x; swapcontext(&kf_sched, &x->uc);\n"
	"        if (x->st == KF_RUN) { x->st = KF_DONE; live--; }\n        moved = true; }\n"
	"      if (!moved) { fprintf(stderr, \"emu: block %u: deadlock (%u threads wait)\\n\", bx, live); return 3; } } }\n"
	"  return 0; }\n";

/* Writes n bytes to dir/name. */
static inline bool kfe_write(const char *dir, const char *name, const void *p, size_t n)
{
	char path[600];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	bool ok = f && fwrite(p, 1, n, f) == n;
	if (f)
		fclose(f);
	return ok;
}

/* The prelude without the chunks that hold inline assembly (the shim has
 * those functions): a chunk is a line that starts in column 0 and the
 * indented or continued lines after it. */
static inline void kfe_prelude(kf_buf *o)
{
	const char *p = kf_emit_prelude();
	while (*p) {
		const char *e = p, *asmv = NULL;
		bool cont = false;
		do {
			const char *nl = strchr(e, '\n');
			const char *end = nl ? nl + 1 : e + strlen(e);
			const char *a = strstr(e, "asm");
			if (a && a < end)
				asmv = a;
			cont = end - e >= 2 && end[-2] == '\\';
			e = end;
		} while (*e && (cont || *e == ' ' || *e == '\t'));
		if (!asmv)
			kf_buf_put(o, p, (size_t)(e - p));
		p = e;
	}
}

/* Runs kernel k on the host over params in[0..k->nin) (in the kernel's
 * parameter order, their data as stored), writing out[0..k->nout)
 * (allocated by the caller with their types).  The grid is k->units
 * blocks of k->block threads (kernels launched one block per unit, on x).
 * Returns false when there is no C++ compiler. */
static inline bool kfe_run(const kf_kernel *k, const kf_tensor *in, kf_tensor *out)
{
	char dir[] = "/tmp/kfuse-emu-XXXXXX", name[64], cmd[512];
	if (system("c++ --version > /dev/null 2>&1") != 0)
		return false;
	assert_non_null(mkdtemp(dir));
	assert_true(k->grid_y <= 1 && k->grid_z <= 1);
	kf_buf src = {0};
	kf_buf_puts(&src, kfe_shim);
	kfe_prelude(&src);
	kf_buf_puts(&src, kfe_shim2);
	kf_buf_puts(&src, k->src);
	kf_buf_puts(&src, kfe_main);
	uint32_t np = k->nin + k->nout;
	kf_buf_printf(&src, "static unsigned char *kf_p[%u];\nstatic void kf_body(void) { kf_call(%s, kf_p); }\n", np + 1,
		      k->name);
	kf_buf_puts(&src, "static unsigned char *kf_load(const char *dir, const char *n, size_t bytes, bool in) {\n"
			  "  unsigned char *p = (unsigned char *)malloc(bytes + 16); char path[4200];\n"
			  "  memset(p, 0xff, bytes + 16);\n  if (!in) return p;\n"
			  "  snprintf(path, sizeof path, \"%s/%s\", dir, n); FILE *f = fopen(path, \"rb\");\n"
			  "  if (!f || fread(p, 1, bytes, f) != bytes) { fprintf(stderr, \"emu: cannot read %s\\n\", path); exit(2); }\n"
			  "  fclose(f); return p; }\n");
	kf_buf_puts(&src, "int main(int argc, char **argv) {\n  (void)argc;\n");
	for (uint32_t j = 0; j < np; j++) {
		const kf_tensor *t = j < k->nin ? &in[j] : &out[j - k->nin];
		kf_buf_printf(&src, "  kf_p[%u] = kf_load(argv[1], \"p%u.bin\", %zu, %s);\n", j, j, t->nbytes,
			      j < k->nin ? "true" : "false");
	}
	kf_buf_printf(&src, "  int rc = kf_run(%lld, %d, kf_body);\n  if (rc) return rc;\n", (long long)k->units, k->block);
	for (uint32_t j = k->nin; j < np; j++)
		kf_buf_printf(&src, "  { char path[4200]; snprintf(path, sizeof path, \"%%s/p%u.bin\", argv[1]);\n"
				    "    FILE *f = fopen(path, \"wb\"); if (!f || fwrite(kf_p[%u], 1, %zu, f) != %zu) return 2; fclose(f); }\n",
			      j, j, out[j - k->nin].nbytes, out[j - k->nin].nbytes);
	kf_buf_puts(&src, "  return 0;\n}\n");
	assert_true(kfe_write(dir, "emu.cc", src.p, src.n));
	for (uint32_t j = 0; j < k->nin; j++) {
		snprintf(name, sizeof name, "p%u.bin", j);
		assert_true(kfe_write(dir, name, in[j].data, in[j].nbytes));
	}
	snprintf(cmd, sizeof cmd, "c++ -std=c++17 -O1 -w -o %s/emu %s/emu.cc 2> %s/cc.log || (cat %s/cc.log >&2; false)", dir, dir,
		 dir, dir);
	int rc = system(cmd);
	if (rc != 0)
		fprintf(stderr, "emu: the kernel does not compile on the host (kept in %s)\n", dir);
	assert_int_equal(rc, 0);
	snprintf(cmd, sizeof cmd, "%s/emu %s", dir, dir);
	assert_int_equal(system(cmd), 0);
	for (uint32_t j = 0; j < k->nout; j++) {
		char path[600];
		snprintf(path, sizeof path, "%s/p%u.bin", dir, k->nin + j);
		FILE *f = fopen(path, "rb");
		assert_non_null(f);
		assert_int_equal(fread(out[j].data, 1, out[j].nbytes, f), out[j].nbytes);
		fclose(f);
	}
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
	kf_buf_free(&src);
	return true;
}
#endif
