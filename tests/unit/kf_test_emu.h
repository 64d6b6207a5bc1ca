/* kf_test_emu.h: runs an emitted CUDA kernel on the CPU (include after
 * cmocka.h), for the kernels whose index math no GPU here can check.
 *
 * The kernel's text is compiled by the host's g++ against a shim: each
 * block runs alone, its CUDA threads are OS threads (threadIdx thread-local,
 * __shared__ memory static, __syncthreads a barrier of the block), and the
 * warp-level instructions of the tensor-core kernels are emulated with a
 * barrier per warp: ldmatrix (.x4, .trans) gathers the lanes' row
 * addresses, mma.sync m16n8k16 (f16, bf16) and m16n8k8 (tf32) assemble the
 * fragments of all 32 lanes in their PTX layouts and compute each lane's
 * accumulators, cp.async copies (or zero-fills) when a wait covers its
 * group, not before.  The prelude's
 * functions are plain C++ (f16/bf16 conversions round to nearest even).
 * The emulation is itself checked: the matmul kernels, which have run on
 * GPUs, must agree with the interpreter through it (test_conv_emu.c). */
#ifndef KF_TEST_EMU_H
#define KF_TEST_EMU_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "emit_cuda.h"
#include "kf_emu_fma.h"
#include "kf.h"
#include "tensor.h"

static const char kft_emu_shim[] =
	"#include <cmath>\n#include <cstdint>\n#include <cstdio>\n#include <cstdlib>\n#include <cstring>\n"
	"#include <pthread.h>\n"
	"#define __global__\n#define __device__\n#define __forceinline__ inline\n#define __launch_bounds__(...)\n"
	"#define __restrict__ __restrict\n#define __align__(n) __attribute__((aligned(n)))\n#define __shared__ static\n"
	"#define __ldg(p) (*(p))\n#define __ldcg(p) (*(p))\nstatic void __threadfence() {}\n"
	"static inline float __fdividef(float a, float b) { return a / b; }\n"
	/* blocks run one after another: an atomic is a plain update */
	"static unsigned atomicInc(unsigned *p, unsigned v) { unsigned o = *p; *p = o >= v ? 0 : o + 1; return o; }\n"
	"struct kf_d3 { unsigned x, y, z; };\nstruct uint4 { unsigned x, y, z, w; };\nstruct uint2 { unsigned x, y; };\n"
	"static uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }\n"
	"static uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }\n"
	"struct float2 { float x, y; };\nstatic float2 make_float2(float x, float y) { return {x, y}; }\n"
	"static kf_d3 gridDim, blockDim, blockIdx;\nstatic thread_local kf_d3 threadIdx;\n"
	"static pthread_barrier_t kf_bar, kf_wbar[32];\n"
	"static void __syncthreads() { pthread_barrier_wait(&kf_bar); }\n"
	"static void kf_wsync() { pthread_barrier_wait(&kf_wbar[threadIdx.x >> 5]); }\n"
	"static float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }\n"
	"static float __uint_as_float(unsigned i) { float f; memcpy(&f, &i, 4); return f; }\n"
	"static double __longlong_as_double(long long i) { double f; memcpy(&f, &i, 8); return f; }\n"
	"#define KF_INF __int_as_float(0x7f800000)\n#define KF_NAN __int_as_float(0x7fc00000)\n"
	"#define KF_DINF __longlong_as_double(0x7ff0000000000000LL)\n#define KF_DNAN __longlong_as_double(0x7ff8000000000000LL)\n"
	/* f16 and bf16, round to nearest even */
	"static float kf_h2f(unsigned short h) {\n"
	"  unsigned s = (h >> 15) & 1, e = (h >> 10) & 31, m = h & 1023; float v;\n"
	"  if (e == 0) v = ldexpf((float)m, -24); else if (e == 31) v = m ? NAN : INFINITY;\n"
	"  else v = ldexpf((float)(m | 1024), (int)e - 25);\n  return s ? -v : v; }\n"
	"static unsigned short kf_f2h(float f) {\n"
	"  unsigned u; memcpy(&u, &f, 4); unsigned s = (u >> 16) & 0x8000; float a = fabsf(f);\n"
	"  if (a != a) return (unsigned short)(s | 0x7e00);\n  if (a >= 65520.0f) return (unsigned short)(s | 0x7c00);\n"
	"  if (a < 6.103515625e-05f) return (unsigned short)(s | (unsigned)nearbyintf(a * 16777216.0f));\n"
	"  int e; float m = frexpf(a, &e); unsigned q = (unsigned)nearbyintf(m * 2048.0f);\n"
	"  if (q == 2048) { q = 1024; e++; }\n  return (unsigned short)(s | ((unsigned)(e + 14) << 10) | (q - 1024)); }\n"
	"static unsigned short kf_d2h(double d) { return kf_f2h((float)d); }\n"
	"static float kf_b2f(unsigned short h) { unsigned u = (unsigned)h << 16; float f; memcpy(&f, &u, 4); return f; }\n"
	"static unsigned short kf_f2b(float f) {\n"
	"  unsigned u; memcpy(&u, &f, 4); if (f != f) return (unsigned short)((u >> 16) | 64);\n"
	"  return (unsigned short)((u + 0x7fff + ((u >> 16) & 1)) >> 16); }\n"
	"#define KF_F1(name, fe, de) \\\n  static float name(float x) { return fe; } static double name(double x) { return de; }\n"
	"KF_F1(kf_exp, expf(x), exp(x))\nKF_F1(kf_log, logf(x), log(x))\nKF_F1(kf_sqrt, sqrtf(x), sqrt(x))\n"
	"KF_F1(kf_rsqrt, 1.0f / sqrtf(x), 1.0 / sqrt(x))\nKF_F1(kf_tanh, tanhf(x), tanh(x))\nKF_F1(kf_erf, erff(x), erf(x))\n"
	"KF_F1(kf_sigmoid, __fdividef(1.0f, 1.0f + expf(-x)), 1.0 / (1.0 + exp(-x)))\n"
	"KF_F1(kf_silu, __fdividef(x, 1.0f + expf(-x)), x / (1.0 + exp(-x)))\n"
	"KF_F1(kf_gelu, 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)), 0.5 * x * (1.0 + erf(x * 0.70710678118654752)))\n"
	"KF_F1(kf_gelu_tanh, 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x))), "
	"0.5 * x * (1.0 + tanh(0.79788456080286536 * (x + 0.044715 * x * x * x))))\n"
	"KF_F1(kf_abs, fabsf(x), fabs(x))\n"
	"static float kf_pow(float a, float b) { return powf(a, b); }\nstatic double kf_pow(double a, double b) { return pow(a, b); }\n"
	"static float kf_div(float a, float b) { return a / b; }\nstatic double kf_div(double a, double b) { return a / b; }\n"
	"template <typename T> static T kf_max(T a, T b) { return (a > b || a != a) ? a : b; }\n"
	"template <typename T> static T kf_min(T a, T b) { return (a < b || a != a) ? a : b; }\n"
	"template <typename T> static T kf_relu(T a) { return a < (T)0 ? (T)0 : a; }\n"
	/* the tensor-core kernels' helpers (emit_mma.c), emulated */
	"#define KF_MM_HELPERS\n"
	/* cp.async as the hardware may do it: a copy lands at the latest when
	 * kf_cp_wait<N> waits for its group (all but the newest N committed),
	 * never before the commit; a read of shared memory before then sees
	 * the old bytes, so a kernel that waits too little fails here */
	"struct kf_cpq { void *d; const void *s; bool ok; int g; };\n"
	"static thread_local kf_cpq kf_cpv[4096];\nstatic thread_local int kf_cpn, kf_cpg;\n"
	"static void kf_cp16(void *d, const void *s, bool ok) {\n"
	"  if (kf_cpn == 4096) { fprintf(stderr, \"emu: over 4096 cp.async copies in flight\\n\"); abort(); }\n"
	"  kf_cpv[kf_cpn++] = {d, s, ok, kf_cpg}; }\n"
	"static void kf_cp_commit() { kf_cpg++; }\n"
	"template <int N> static void kf_cp_wait() {\n"
	"  int k = 0;\n  for (int i = 0; i < kf_cpn; i++) {\n    kf_cpq &q = kf_cpv[i];\n"
	"    if (q.g < kf_cpg - N) { if (q.ok) memcpy(q.d, q.s, 16); else memset(q.d, 0, 16); } else kf_cpv[k++] = q;\n"
	"  }\n  kf_cpn = k; }\n"
	"struct kf_warpx { const unsigned short *addr[32]; unsigned a[32][4], b[32][2]; };\n"
	"static kf_warpx kf_wx[32];\n"
	"static void kf_ldsm(unsigned *r, const void *p, bool tr) {\n"
	"  const int l = threadIdx.x & 31; kf_warpx &x = kf_wx[threadIdx.x >> 5];\n"
	"  x.addr[l] = (const unsigned short *)p; kf_wsync();\n"
	"  for (int i = 0; i < 4; i++) {\n"
	"    if (!tr) { const unsigned short *row = x.addr[i * 8 + l / 4]; r[i] = row[2 * (l % 4)] | ((unsigned)row[2 * (l % 4) + 1] << 16); }\n"
	"    else { r[i] = x.addr[i * 8 + 2 * (l % 4)][l / 4] | ((unsigned)x.addr[i * 8 + 2 * (l % 4) + 1][l / 4] << 16); }\n"
	"  }\n  kf_wsync(); }\n"
	"static void kf_ldsm4(unsigned *r, const void *p) { kf_ldsm(r, p, false); }\n"
	"static void kf_ldsm4t(unsigned *r, const void *p) { kf_ldsm(r, p, true); }\n"
	/* A [16][K], B [K][8] assembled from the lanes' fragments; lane (g, q)
	 * owns C (g, 2q), (g, 2q+1), (g+8, 2q), (g+8, 2q+1) */
	"template <int K, int NA, int NB, typename F> static void kf_mma(float *c, const unsigned *a, const unsigned *b, F el) {\n"
	"  const int l = threadIdx.x & 31; kf_warpx &x = kf_wx[threadIdx.x >> 5];\n"
	"  for (int i = 0; i < NA; i++) x.a[l][i] = a[i];\n  for (int i = 0; i < NB; i++) x.b[l][i] = b[i];\n  kf_wsync();\n"
	"  float A[16][16], B[16][8];\n"
	"  for (int t = 0; t < 32; t++) { const int g = t / 4, q = t % 4;\n"
	"    if (K == 16) {\n"
	"      for (int h = 0; h < 2; h++) {\n"
	"        A[g][2 * q + h] = el(x.a[t][0], h); A[g + 8][2 * q + h] = el(x.a[t][1], h);\n"
	"        A[g][2 * q + 8 + h] = el(x.a[t][2], h); A[g + 8][2 * q + 8 + h] = el(x.a[t][3], h);\n"
	"        B[2 * q + h][g] = el(x.b[t][0], h); B[2 * q + 8 + h][g] = el(x.b[t][1], h); }\n"
	"    } else {\n"
	"      A[g][q] = el(x.a[t][0], 0); A[g + 8][q] = el(x.a[t][1], 0); A[g][q + 4] = el(x.a[t][2], 0);\n"
	"      A[g + 8][q + 4] = el(x.a[t][3], 0); B[q][g] = el(x.b[t][0], 0); B[q + 4][g] = el(x.b[t][1], 0);\n"
	"    } }\n"
	"  const int g = l / 4, q = l % 4;\n"
	"  for (int h = 0; h < 4; h++) { const int row = g + (h >> 1) * 8, col = 2 * q + (h & 1);\n"
	"    float s = c[h]; for (int k = 0; k < K; k++) s += A[row][k] * B[k][col]; c[h] = s; }\n"
	"  kf_wsync(); }\n"
	"static float kf_el_h(unsigned r, int h) { return kf_h2f((unsigned short)(r >> (16 * h))); }\n"
	"static float kf_el_b(unsigned r, int h) { return kf_b2f((unsigned short)(r >> (16 * h))); }\n"
	"static float kf_el_t(unsigned r, int h) { (void)h; return __uint_as_float(r); }\n"
	"static void kf_mma_f16(float *c, const unsigned *a, const unsigned *b) { kf_mma<16, 4, 2>(c, a, b, kf_el_h); }\n"
	"static void kf_mma_bf16(float *c, const unsigned *a, const unsigned *b) { kf_mma<16, 4, 2>(c, a, b, kf_el_b); }\n"
	"static void kf_mma_tf32(float *c, const unsigned *a, const unsigned *b) { kf_mma<8, 4, 2>(c, a, b, kf_el_t); }\n"
	/* cvt.rna.tf32.f32: 10 mantissa bits, ties away from zero */
	"static unsigned kf_tf32(float f) { unsigned u; memcpy(&u, &f, 4);\n"
	"  if ((u & 0x7f800000) == 0x7f800000) return u; return (u + 0x1000) & 0xffffe000; }\n";

/* Runs kernel k with the parameter values in[0..k->nin) (tensors of the
 * parameters' types) and writes its outputs (allocated here); dir is a
 * scratch directory.  Fails the test when the compile or run fails. */
static inline void kft_emu_run(kf_graph *g, const kf_kernel *k, const kf_tensor *in, kf_tensor *out, const char *dir)
{
	char path[512], cmd[2048];
	kf_buf src = {0};
	kf_buf_puts(&src, kft_emu_shim);
	/* dynamic shared memory: a static array of the kernel's size */
	const char *ext = "extern __shared__ __align__(16) unsigned char kf_smem[];";
	const char *s = k->src, *at = strstr(s, ext);
	if (at) {
		kf_buf_put(&src, s, (size_t)(at - s));
		kf_buf_printf(&src, "static unsigned char kf_smem[%d] __attribute__((aligned(16)));", k->smem > 0 ? k->smem : 16);
		kf_buf_puts(&src, at + strlen(ext));
	} else {
		kf_buf_puts(&src, s);
	}
	uint32_t np = k->nin + k->nout;
	kf_buf_printf(&src, "\nstatic void *kf_p[%u];\nstatic void *kf_thread(void *arg)\n{\n"
		      "  threadIdx.x = (unsigned)(uintptr_t)arg; threadIdx.y = threadIdx.z = 0;\n  %s(", np, k->name);
	for (uint32_t j = 0; j < np; j++) {
		kf_vid v = j < k->nin ? k->in[j] : k->out[j - k->nin];
		const char *st;
		switch (kf_vtype(g, v)->dtype) {
		case KF_F16: case KF_BF16: st = "unsigned short"; break;
		case KF_F64: st = "double"; break;
		case KF_I32: st = "int"; break;
		case KF_I64: st = "long long"; break;
		case KF_I8: st = "signed char"; break;
		case KF_I1: st = "unsigned char"; break;
		default: st = "float"; break;
		}
		kf_buf_printf(&src, "%s(%s *)kf_p[%u]", j ? ", " : "", st, j);
	}
	kf_buf_puts(&src, ");\n  return NULL;\n}\nint main(int argc, char **argv)\n{\n");
	kf_buf_printf(&src, "  static const size_t n[] = {");
	for (uint32_t j = 0; j < np; j++) {
		const kf_type *t = kf_vtype(g, j < k->nin ? k->in[j] : k->out[j - k->nin]);
		kf_buf_printf(&src, "%s%zu", j ? ", " : "", (size_t)kf_type_numel(t) * kf_dtype_size(t->dtype));
	}
	kf_buf_printf(&src, "};\n  char path[600];\n  for (unsigned j = 0; j < %u; j++) {\n"
		      "    kf_p[j] = calloc(n[j] + 64, 1);\n    if (j >= %u) { memset(kf_p[j], 0xff, n[j]); continue; }\n"
		      "    snprintf(path, sizeof path, \"%%s/in%%u.bin\", argv[1], j);\n    FILE *f = fopen(path, \"rb\");\n"
		      "    if (!f || fread(kf_p[j], 1, n[j], f) != n[j]) return 2;\n    fclose(f);\n  }\n", np, k->nin);
	int block = k->block > 0 ? k->block : 1;
	kf_buf_printf(&src, "  const unsigned T = %d;\n  blockDim.x = T; blockDim.y = blockDim.z = 1;\n"
		      "  gridDim.x = %lluu; gridDim.y = %uu; gridDim.z = %uu;\n"
		      "  pthread_barrier_init(&kf_bar, NULL, T);\n"
		      "  for (unsigned w = 0; w < (T + 31) / 32; w++) pthread_barrier_init(&kf_wbar[w], NULL, T - w * 32 < 32 ? T - w * 32 : 32);\n"
		      "  pthread_t th[1024];\n"
		      "  for (unsigned z = 0; z < gridDim.z; z++) for (unsigned y = 0; y < gridDim.y; y++)\n"
		      "  for (unsigned x = 0; x < gridDim.x; x++) {\n"
		      "    blockIdx.x = x; blockIdx.y = y; blockIdx.z = z;\n"
		      "    for (unsigned t = 0; t < T; t++) pthread_create(&th[t], NULL, kf_thread, (void *)(uintptr_t)t);\n"
		      "    for (unsigned t = 0; t < T; t++) pthread_join(th[t], NULL);\n  }\n",
		      block, (unsigned long long)(k->units > 0 ? k->units : 1), k->grid_y ? k->grid_y : 1u,
		      k->grid_z ? k->grid_z : 1u);
	kf_buf_printf(&src, "  for (unsigned j = %u; j < %u; j++) {\n"
		      "    snprintf(path, sizeof path, \"%%s/out%%u.bin\", argv[1], j - %u);\n    FILE *f = fopen(path, \"wb\");\n"
		      "    if (!f || fwrite(kf_p[j], 1, n[j], f) != n[j]) return 2;\n    fclose(f);\n  }\n  return 0;\n}\n",
		      k->nin, np, k->nin);
	snprintf(path, sizeof path, "%s/k.cc", dir);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(src.p, 1, src.n, f), src.n);
	fclose(f);
	kf_buf_free(&src);
	for (uint32_t j = 0; j < k->nin; j++) {
		snprintf(path, sizeof path, "%s/in%u.bin", dir, j);
		f = fopen(path, "wb");
		assert_non_null(f);
		assert_int_equal(fwrite(in[j].data, 1, in[j].nbytes, f), in[j].nbytes);
		fclose(f);
	}
	snprintf(cmd, sizeof cmd, "g++ -std=c++17 -O1 -w -pthread%s -o '%s/k' '%s/k.cc' 2> '%s/cc.log' && '%s/k' '%s'", kft_emu_fma(),
		 dir, dir, dir, dir, dir);
	if (system(cmd) != 0) {
		snprintf(cmd, sizeof cmd, "head -c 3000 '%s/cc.log'", dir);
		if (system(cmd)) {}
		fail_msg("the emulated kernel %s did not compile or run (%s/k.cc)", k->name, dir);
	}
	for (uint32_t j = 0; j < k->nout; j++) {
		assert_int_equal(kf_tensor_alloc_type(&out[j], kf_vtype(g, k->out[j])), 0);
		snprintf(path, sizeof path, "%s/out%u.bin", dir, j);
		f = fopen(path, "rb");
		assert_non_null(f);
		assert_int_equal(fread(out[j].data, 1, out[j].nbytes, f), out[j].nbytes);
		fclose(f);
	}
}

/* Whether the host has the g++ the emulation compiles with. */
static inline bool kft_have_gxx(void)
{
	return system("g++ --version > /dev/null 2>&1") == 0;
}
#endif
