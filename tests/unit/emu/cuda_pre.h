// cuda_pre.h: the host emulation of CUDA (tests/unit/kf_emu.h), the part
// before the kfuse prelude: qualifiers, built-in types and functions, the
// conversions the prelude does in inline assembly, and the guards that keep
// the emitters' assembly helpers out (cuda_post.h defines them).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ucontext.h>
#include <utility>
#include <vector>

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __grid_constant__
#define __cluster_dims__(...)
// the emitters' helpers in inline assembly: cuda_post.h has host versions
// (the wgmma helpers' chunks, guarded by KF_WGMMA_..., kf_emu.h drops)
#define KF_MM_HELPERS
#define KF_ATT_HELPERS
#define KF_WG_HELPERS
#define KF_WGA_HELPERS
// statements of inline assembly in a kernel's body (kf_emu.h rewrites
// `asm volatile(` to this): empty ones, fences and register hints mean
// nothing here; anything else stops the run
#define KF_EMU_ASM(...) kf_emu_asm(#__VA_ARGS__)
static void kf_emu_asm(const char *s)
{
	static const char *const ok[] = {"\"\"", "\"setmaxnreg.", "\"fence.", nullptr};
	for (int i = 0; ok[i]; i++)
		if (!strncmp(s, ok[i], strlen(ok[i])))
			return;
	fprintf(stderr, "emu: inline assembly it does not know: %s\n", s);
	exit(4);
}

struct kf_dim3 {
	unsigned x, y, z;
};
struct uint2 {
	unsigned x, y;
};
struct uint4 {
	unsigned x, y, z, w;
};
struct float2 {
	float x, y;
};
static inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
static inline float __uint_as_float(unsigned i) { float f; memcpy(&f, &i, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned i; memcpy(&i, &f, 4); return i; }
static inline double __longlong_as_double(long long i) { double f; memcpy(&f, &i, 8); return f; }
static inline float __fdividef(float a, float b) { return a / b; }
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
static inline long long min(long long a, long long b) { return a < b ? a : b; }
static inline long long max(long long a, long long b) { return a > b ? a : b; }
template <typename T> static inline T __ldg(const T *p) { return *p; }
template <typename T> static inline T __ldcs(const T *p) { return *p; }
template <typename T> static inline T kf_ldna(const T *p) { return *p; } /* the prelude's are inline assembly */
template <typename T> static inline T __ldcg(const T *p) { return *p; }
template <typename T> static inline void __stcs(T *p, T v) { *p = v; }
static inline void __threadfence(void) {}
// blocks run one after another: an atomic is a plain update
static inline unsigned atomicAdd(unsigned *p, unsigned v) { unsigned o = *p; *p = o + v; return o; }
static inline unsigned atomicInc(unsigned *p, unsigned v) { unsigned o = *p; *p = o >= v ? 0 : o + 1; return o; }

// f16 and bf16, rounding to nearest even as the cvt instructions do
static inline float kf_h2f(unsigned short h)
{
	unsigned s = (h & 0x8000u) << 16, e = (h >> 10) & 31, m = h & 0x3ff;
	if (e == 31)
		return __uint_as_float(s | 0x7f800000u | (m << 13));
	if (e == 0) {
		float f = (float)m * 5.9604644775390625e-8f;
		return s ? -f : f;
	}
	return __uint_as_float(s | ((e + 112) << 23) | (m << 13));
}
static inline unsigned short kf_f2h(float f)
{
	unsigned u = __float_as_uint(f), s = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
	if (a > 0x7f800000u)
		return (unsigned short)(s | 0x7e00u);
	if (a >= 0x477ff000u)
		return (unsigned short)(s | 0x7c00u);
	if (a < 0x38800000u) { // subnormal: x * 2^24 rounded to an integer
		float r = nearbyintf(__uint_as_float(a) * 16777216.0f);
		return (unsigned short)(s | (unsigned)r);
	}
	unsigned m = a + 0xfffu + ((a >> 13) & 1u);
	return (unsigned short)(s | ((m - 0x38000000u) >> 13));
}
static inline unsigned short kf_d2h(double d) { return kf_f2h((float)d); }
static inline unsigned short kf_f2b(float f)
{
	unsigned u = __float_as_uint(f);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (unsigned short)((u >> 16) | 0x40u);
	return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
static inline float kf_gelu_tanh_fast(float x) { return 0.5f * x * (1.0f + tanhf(0.79788456f * (x + 0.044715f * x * x * x))); }
static inline float kf_ex2(float x) { return exp2f(x); }
static inline unsigned kf_pack_h2(float lo, float hi) { return kf_f2h(lo) | (unsigned)kf_f2h(hi) << 16; }
static inline unsigned kf_pack_b2(float lo, float hi) { return kf_f2b(lo) | (unsigned)kf_f2b(hi) << 16; }

// the threads of a block are fibers (cuda_post.h runs them)
enum { KF_RUN, KF_WAIT, KF_SPIN, KF_DONE };
struct kf_cp {
	unsigned char *d;
	const unsigned char *s;
	bool ok;
};
struct kf_fib {
	ucontext_t uc;
	kf_dim3 tid;
	int st;
	const unsigned *wgen; // KF_WAIT: blocked while *wgen == wait
	unsigned wait;
	std::vector<kf_cp> cur;
	std::vector<std::vector<kf_cp>> groups;
};
static kf_dim3 gridDim, blockDim, blockIdx;
static kf_fib *kf_me;
static ucontext_t kf_sched;
#define threadIdx (kf_me->tid)
static void __syncthreads(void);
template <typename T> static T __shfl_xor_sync(unsigned mask, T v, int o);
