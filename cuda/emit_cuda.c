/* emit_cuda.c: the CUDA emitter's common part: the prelude, dtypes,
 * constants, and turning a node into a kernel (dispatch to
 * emit_elementwise.c, emit_reduce.c, emit_reduce_generic.c,
 * emit_matmul.c); an op's expression is emit_expr.c's.
 *
 * requires: static shapes; keeps the graph unchanged (read only).
 * Numerics follow the interpreter (docs/interpreter.md): f16/bf16 stored,
 * computed in f32; integers computed in 64 bits and wrapped on store;
 * max/min propagate NaN; integer division by 0 gives 0.
 */
#include <stdarg.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "emit_int.h"
#include "fusion.h"
#include "cuda.h"

static const char prelude[] =
	"/* kfuse prelude */\n"
	/* infinities and NaN: bit patterns in code (ptxas kept 1.0f / 0.0f as
	 * a division in the attention kernel and spilled for it), constant
	 * expressions (the _C forms) in embedded constant arrays, whose
	 * initialiser may not call __int_as_float; NVRTC has no
	 * __builtin_huge_valf */
	"#define KF_INF __int_as_float(0x7f800000)\n"
	"#define KF_NAN __int_as_float(0x7fc00000)\n"
	"#define KF_DINF __longlong_as_double(0x7ff0000000000000LL)\n"
	"#define KF_DNAN __longlong_as_double(0x7ff8000000000000LL)\n"
	"#define KF_INF_C (1.0f / 0.0f)\n"
	"#define KF_NAN_C (0.0f / 0.0f)\n"
	"#define KF_DINF_C (1.0 / 0.0)\n"
	"#define KF_DNAN_C (0.0 / 0.0)\n"
	"__device__ __forceinline__ float kf_h2f(unsigned short h) { float f; asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h)); return f; }\n"
	"__device__ __forceinline__ unsigned short kf_f2h(float f) { unsigned short h; asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f)); return h; }\n"
	"__device__ __forceinline__ unsigned short kf_d2h(double f) { unsigned short h; asm(\"cvt.rn.f16.f64 %0, %1;\" : \"=h\"(h) : \"d\"(f)); return h; }\n"
	"__device__ __forceinline__ float kf_b2f(unsigned short h) { return __uint_as_float(((unsigned)h) << 16); }\n"
	"__device__ __forceinline__ unsigned short kf_f2b(float f) { unsigned short h; asm(\"cvt.rn.bf16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f)); return h; }\n"
	"#define KF_F1(name, fe, de) \\\n"
	"  __device__ __forceinline__ float name(float x) { return fe; } \\\n"
	"  __device__ __forceinline__ double name(double x) { return de; }\n"
	"KF_F1(kf_exp, expf(x), exp(x))\n"
	"KF_F1(kf_log, logf(x), log(x))\n"
	"KF_F1(kf_sqrt, sqrtf(x), sqrt(x))\n"
	"KF_F1(kf_rsqrt, 1.0f / sqrtf(x), 1.0 / sqrt(x))\n"
	"KF_F1(kf_tanh, tanhf(x), tanh(x))\n"
	"KF_F1(kf_erf, erff(x), erf(x))\n"
	"KF_F1(kf_sigmoid, __fdividef(1.0f, 1.0f + expf(-x)), 1.0 / (1.0 + exp(-x)))\n"
	"KF_F1(kf_silu, __fdividef(x, 1.0f + expf(-x)), x / (1.0 + exp(-x)))\n"
	"KF_F1(kf_gelu, 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)), 0.5 * x * (1.0 + erf(x * 0.70710678118654752)))\n"
	"KF_F1(kf_gelu_tanh, 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x))),"
	" 0.5 * x * (1.0 + tanh(0.79788456080286536 * (x + 0.044715 * x * x * x))))\n"
	"KF_F1(kf_abs, fabsf(x), fabs(x))\n"
	"__device__ __forceinline__ long long kf_abs(long long x) { return x < 0 ? (long long)(0ULL - (unsigned long long)x) : x; }\n"
	"__device__ __forceinline__ float kf_pow(float a, float b) { return powf(a, b); }\n"
	"__device__ __forceinline__ double kf_pow(double a, double b) { return pow(a, b); }\n"
	"__device__ __forceinline__ long long kf_pow(long long x, long long e) {\n"
	"  if (e < 0) return x == 1 ? 1 : x == -1 ? ((e & 1) ? -1 : 1) : 0;\n"
	"  unsigned long long r = 1, b = (unsigned long long)x;\n"
	"  for (; e; e >>= 1) { if (e & 1) r *= b; b *= b; }\n"
	"  return (long long)r; }\n"
	"__device__ __forceinline__ long long kf_div(long long a, long long b) {\n"
	"  return b == 0 ? 0 : b == -1 ? (long long)(0ULL - (unsigned long long)a) : a / b; }\n"
	"__device__ __forceinline__ float kf_div(float a, float b) { return a / b; }\n"
	"__device__ __forceinline__ double kf_div(double a, double b) { return a / b; }\n"
	"template <typename T> __device__ __forceinline__ T kf_max(T a, T b) { return (a > b || a != a) ? a : b; }\n"
	"template <typename T> __device__ __forceinline__ T kf_min(T a, T b) { return (a < b || a != a) ? a : b; }\n"
	"template <typename T> __device__ __forceinline__ T kf_relu(T a) { return a < (T)0 ? (T)0 : a; }\n"
	"__device__ __forceinline__ long long kf_f2i(double v, long long lo, long long hi) {\n"
	"  return v != v ? 0 : v <= (double)lo ? lo : v >= (double)hi ? hi : (long long)v; }\n"
	"template <int B> struct kf_vt;\n"
	"template <> struct kf_vt<1> { typedef unsigned char t; };\n"
	"template <> struct kf_vt<2> { typedef unsigned short t; };\n"
	"template <> struct kf_vt<4> { typedef unsigned int t; };\n"
	"template <> struct kf_vt<8> { typedef uint2 t; };\n"
	"template <> struct kf_vt<16> { typedef uint4 t; };\n"
	"template <typename T, int V> __device__ __forceinline__ void kf_vld(T *d, const T *s) {\n"
	"  typedef typename kf_vt<sizeof(T) * V>::t W; *reinterpret_cast<W *>(d) = __ldg(reinterpret_cast<const W *>(s)); }\n"
	"template <typename T, int V> __device__ __forceinline__ void kf_vst(T *d, const T *s) {\n"
	"  typedef typename kf_vt<sizeof(T) * V>::t W; *reinterpret_cast<W *>(d) = *reinterpret_cast<const W *>(s); }\n"
	"/* Cache hints for tensors read or written once (KFUSE_CACHE_HINTS):\n"
	"   .cs (evict first) loads and stores; nc loads that skip L1 and ask L2\n"
	"   to fetch 256 bytes. */\n"
	"template <typename T, int V> __device__ __forceinline__ void kf_vldcs(T *d, const T *s) {\n"
	"  typedef typename kf_vt<sizeof(T) * V>::t W; *reinterpret_cast<W *>(d) = __ldcs(reinterpret_cast<const W *>(s)); }\n"
	"template <typename T, int V> __device__ __forceinline__ void kf_vstcs(T *d, const T *s) {\n"
	"  typedef typename kf_vt<sizeof(T) * V>::t W; __stcs(reinterpret_cast<W *>(d), *reinterpret_cast<const W *>(s)); }\n"
	"#define KF_LDNA \"ld.global.nc.L1::no_allocate.L2::256B\"\n"
	"__device__ __forceinline__ uint4 kf_ldna(const uint4 *p) { uint4 r;\n"
	"  asm(KF_LDNA \".v4.u32 {%0,%1,%2,%3}, [%4];\" : \"=r\"(r.x), \"=r\"(r.y), \"=r\"(r.z), \"=r\"(r.w) : \"l\"(p)); return r; }\n"
	"__device__ __forceinline__ uint2 kf_ldna(const uint2 *p) { uint2 r;\n"
	"  asm(KF_LDNA \".v2.u32 {%0,%1}, [%2];\" : \"=r\"(r.x), \"=r\"(r.y) : \"l\"(p)); return r; }\n"
	"__device__ __forceinline__ unsigned int kf_ldna(const unsigned int *p) { unsigned int r;\n"
	"  asm(KF_LDNA \".u32 %0, [%1];\" : \"=r\"(r) : \"l\"(p)); return r; }\n"
	"__device__ __forceinline__ unsigned short kf_ldna(const unsigned short *p) { unsigned short r;\n"
	"  asm(KF_LDNA \".u16 %0, [%1];\" : \"=h\"(r) : \"l\"(p)); return r; }\n"
	"__device__ __forceinline__ unsigned char kf_ldna(const unsigned char *p) { unsigned short r;\n"
	"  asm(KF_LDNA \".u8 %0, [%1];\" : \"=h\"(r) : \"l\"(p)); return (unsigned char)r; }\n"
	"template <typename T, int V> __device__ __forceinline__ void kf_vldna(T *d, const T *s) {\n"
	"  typedef typename kf_vt<sizeof(T) * V>::t W; *reinterpret_cast<W *>(d) = kf_ldna(reinterpret_cast<const W *>(s)); }\n"
	"/* tanh-GELU as x * sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3), with\n"
	"   ex2.approx and a fast division: no cancellation where tanh(u) is near\n"
	"   -1, and a relative error of a few 1e-7 (1.5e-6 at most, where the\n"
	"   exponent is large); the constants are -2 log2(e) sqrt(2/pi) (1, 0.044715) */\n"
	"__device__ __forceinline__ float kf_gelu_tanh_fast(float x) {\n"
	"  float e; asm(\"ex2.approx.ftz.f32 %0, %1;\" : \"=f\"(e) : \"f\"(x * (-2.30220819f + -0.102943242f * x * x)));\n"
	"  return __fdividef(x, 1.0f + e); }\n"
	"__device__ __forceinline__ double kf_gelu_tanh_fast(double x) {\n"
	"  return 0.5 * x * (1.0 + tanh(0.79788456080286536 * (x + 0.044715 * x * x * x))); }\n"
	"struct kf_opsum { template <typename T> __device__ __forceinline__ T operator()(T a, T b) const { return a + b; } };\n"
	"struct kf_opmax { template <typename T> __device__ __forceinline__ T operator()(T a, T b) const { return kf_max(a, b); } };\n"
	"struct kf_opmin { template <typename T> __device__ __forceinline__ T operator()(T a, T b) const { return kf_min(a, b); } };\n"
	"/* Reduces v over the TPR threads of a row (TPR a power of two; rows are\n"
	"   consecutive threads): shuffles within a warp, then shared memory. */\n"
	"template <int TPR, typename T, typename Op> __device__ __forceinline__ T kf_rowred(T v, T *sm, Op op) {\n"
	"#pragma unroll\n"
	"  for (int o = (TPR < 32 ? TPR : 32) / 2; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));\n"
	"  if (TPR > 32) {\n"
	"    const int wpr = TPR / 32, base = (threadIdx.x / TPR) * wpr;\n"
	"    __syncthreads();\n"
	"    if ((threadIdx.x & 31) == 0) sm[threadIdx.x / 32] = v;\n"
	"    __syncthreads();\n"
	"    v = sm[base];\n"
	"    for (int i = 1; i < wpr; i++) v = op(v, sm[base + i]);\n"
	"  }\n"
	"  return v; }\n";

const char *kf_emit_prelude(void) { return prelude; }

const char *kf_kernel_kind_name(int kind)
{
	static const char *const n[] = {"loop", "row", "reduce", "matmul", "persistent", "colreduce", "attention", "window"};
	return kind >= 0 && kind < (int)(sizeof n / sizeof *n) ? n[kind] : "?";
}

/* ---- dtypes ----------------------------------------------------------------- */

const char *kx_st(kf_dtype t)
{
	switch (t) {
	case KF_F16: case KF_BF16: return "unsigned short";
	case KF_F32: return "float";
	case KF_F64: return "double";
	case KF_I1: return "unsigned char";
	case KF_I8: return "signed char";
	case KF_I32: return "int";
	default: return "long long";
	}
}

const char *kx_ct(kf_dtype t)
{
	switch (t) {
	case KF_F16: case KF_BF16: case KF_F32: return "float";
	case KF_F64: return "double";
	case KF_I1: return "bool";
	default: return "long long";
	}
}

const char *kx_it(const kx *k) { return k->wide ? "long long" : "int"; }

kf_dtype kx_dt(const kx *k, kf_vid v) { return (kf_dtype)kf_vtype(k->g, v)->dtype; }

int64_t kx_numel(const kx *k, kf_vid v) { return kf_type_numel(kf_vtype(k->g, v)); }

void kx_load(kf_buf *b, kf_dtype t, const char *fmt, ...)
{
	char lv[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(lv, sizeof lv, fmt, ap);
	va_end(ap);
	switch (t) {
	case KF_F16: kf_buf_printf(b, "kf_h2f(%s)", lv); break;
	case KF_BF16: kf_buf_printf(b, "kf_b2f(%s)", lv); break;
	case KF_I1: kf_buf_printf(b, "(%s != 0)", lv); break;
	case KF_I8: case KF_I32: kf_buf_printf(b, "(long long)%s", lv); break;
	default: kf_buf_puts(b, lv); break;
	}
}

void kx_store(kf_buf *b, kf_dtype t, const char *fmt, ...)
{
	char v[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(v, sizeof v, fmt, ap);
	va_end(ap);
	switch (t) {
	case KF_F16: kf_buf_printf(b, "kf_f2h(%s)", v); break;
	case KF_BF16: kf_buf_printf(b, "kf_f2b(%s)", v); break;
	case KF_I1: kf_buf_printf(b, "(unsigned char)(%s != 0)", v); break;
	default: kf_buf_printf(b, "(%s)(%s)", kx_st(t), v); break;
	}
}

/* init: the literal initialises a constant array (constant expressions only) */
static void literal(kf_buf *b, kf_dtype t, double f, int64_t i, bool init)
{
	if (!kf_dtype_is_float(t)) {
		if (t == KF_I1)
			kf_buf_puts(b, i ? "true" : "false");
		else if (i == INT64_MIN)
			kf_buf_puts(b, "(-9223372036854775807LL - 1)");
		else
			kf_buf_printf(b, "%lldLL", (long long)i);
		return;
	}
	/* f16 and bf16 compute in f32 (their values are exact there); the
	 * literal is the value as the computing type holds it, so a double too
	 * large for f32 is an infinity and one too small a zero or a denormal,
	 * never a literal out of the type's range */
	bool dbl = t == KF_F64;
	double r = dbl ? f : (double)(float)f;
	if (isnan(r)) {
		kf_buf_puts(b, dbl ? "KF_DNAN" : "KF_NAN");
		kf_buf_puts(b, init ? "_C" : "");
	} else if (isinf(r)) {
		kf_buf_puts(b, r < 0 ? "-" : "");
		kf_buf_puts(b, dbl ? "KF_DINF" : "KF_INF");
		kf_buf_puts(b, init ? "_C" : "");
	} else {
		/* the shortest text that reads back to the value in its dtype
		 * (from the value as given: the text stays what it was for every
		 * value in range; one that underflows is written as the zero) */
		kf_buf_float(b, r == 0 ? r : f, dbl ? KF_F64 : KF_F32);
		if (!dbl)
			kf_buf_putc(b, 'f');
	}
}

void kx_literal(kf_buf *b, kf_dtype t, double f, int64_t i)
{
	literal(b, t, f, i, false);
}

/* ---- helpers ----------------------------------------------------------------- */

int kx_fail(kx *k, const char *fmt, ...)
{
	char msg[300];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	kf_error(k->c, kf_N(k->g, k->at)->loc, "cuda: %s", msg);
	return -1;
}

int kx_param(const kx *k, kf_vid v)
{
	for (uint32_t i = 0; i < k->nparam; i++)
		if (k->param[i] == v)
			return (int)i;
	return -1;
}

bool kx_computed(const kx *k, kf_vid v)
{
	kf_nid d = kf_def(k->g, v);
	for (uint32_t i = 0; i < k->nnode && d != KF_NONE; i++)
		if (k->node[i] == d)
			return true;
	return false;
}

void kx_params(kx *k, kf_buf *b)
{
	kf_buf_putc(b, '(');
	for (uint32_t i = 0; i < k->nparam; i++)
		kf_buf_printf(b, "%sconst %s *__restrict__ p%u", i ? ", " : "",
			      kx_st(kx_dt(k, k->param[i])), i);
	for (uint32_t i = 0; i < k->nout; i++)
		kf_buf_printf(b, "%s%s *__restrict__ o%u", i || k->nparam ? ", " : "",
			      kx_st(kx_dt(k, k->out[i])), i);
	kf_buf_putc(b, ')');
}

void kx_bytes(kx *k)
{
	int64_t n = 0;
	for (uint32_t i = 0; i < k->nparam; i++)
		n += kx_numel(k, k->param[i]) * (int64_t)kf_dtype_size(kx_dt(k, k->param[i]));
	for (uint32_t i = 0; i < k->nout; i++)
		n += kx_numel(k, k->out[i]) * (int64_t)kf_dtype_size(kx_dt(k, k->out[i]));
	k->k->bytes = n;
}

/* ---- tuning ----------------------------------------------------------------- */

/* An integer environment variable in [lo, hi] (a power of two when pow2),
 * or `wave` (-1) where allowed; def when unset or empty. */
static int tune_var(kx *k, const char *name, int def, int lo, int hi, bool pow2, bool wave, int *out)
{
	const char *v = getenv(name);
	*out = def;
	if (!v || !*v)
		return 0;
	if (wave && strcmp(v, "wave") == 0) {
		*out = -1;
		return 0;
	}
	char *end;
	long x = strtol(v, &end, 10);
	if (*end || x < lo || x > hi || (pow2 && (x & (x - 1)))) {
		return kx_fail(k, "%s must be %s from %d to %d%s, not '%s'", name, pow2 ? "a power of two" : "an integer",
			       lo, hi, wave ? " (or 'wave')" : "", v);
	}
	*out = (int)x;
	return 0;
}

/* The defaults are the winners of the H200 sweep (bench/gpu/sweep.sh,
 * bench/results/2026-11-29-gpu-sweep1.txt): one 16-byte vector per thread
 * for loop kernels, four warps per row for row kernels of 4-byte values.
 * KFUSE_ROW_WARPS unset is 0, "by the element size": rows of 2-byte values
 * take one warp, so that each thread still has several 16-byte loads in
 * flight (softmax and layer norm over rows of 1024 f16/bf16: 20.1 / 17.4 us
 * with four warps, 16.8 / 16.4 with one, Nsight Compute on the H200,
 * bench/results/2026-12-01-gpu-s3b-rowgeom.txt). */
int kx_tuning(kx *k, kx_tune *t)
{
	int fg = 1;
	if (tune_var(k, "KFUSE_EW_VEC", 1, 1, 8, true, false, &t->ew_vec) ||
	    tune_var(k, "KFUSE_EW_BLOCK", 256, 32, 1024, true, false, &t->ew_block) ||
	    tune_var(k, "KFUSE_EW_GRID", 0, 0, 64, false, true, &t->ew_grid) ||
	    tune_var(k, "KFUSE_ROW_WARPS", 0, 1, 32, true, false, &t->row_warps) ||
	    tune_var(k, "KFUSE_ROW_BLOCK", 128, 32, 1024, true, false, &t->row_block) ||
	    tune_var(k, "KFUSE_ROW_GRID", 0, 0, 64, false, true, &t->row_grid) ||
	    tune_var(k, "KFUSE_CACHE_HINTS", 0, 0, 3, false, false, &t->hints) ||
	    tune_var(k, "KFUSE_FAST_GELU", 1, 0, 1, false, false, &fg))
		return -1;
	t->fast_gelu = fg;
	return 0;
}

const char *kx_vld_stream(const kx *k)
{
	return k->tune.hints == 2 ? "kf_vldcs" : k->tune.hints == 3 ? "kf_vldna" : "kf_vld";
}

const char *kx_vst_stream(const kx *k) { return k->tune.hints ? "kf_vstcs" : "kf_vst"; }

void kx_grid(kx *k, int grid, int64_t units)
{
	k->k->units = units < 1 ? 1 : units;
	k->k->per_sm = grid < 0 ? 0 : grid == 0 ? -1 : grid;
}

/* ---- constants ----------------------------------------------------------------- */

void kx_const_elem(kx *k, kf_nid n, const char *ix, kf_buf *o)
{
	const kf_const *c = kf_N(k->g, n)->cst;
	kf_dtype t = kx_dt(k, kf_res(k->g, n, 0));
	bool fl = kf_dtype_is_float(t);
	if (c->n == 1) {
		kx_literal(o, t, fl ? c->f[0] : 0, fl ? 0 : c->i[0]);
		return;
	}
	int id = k->nconst++;
	/* KF_KERNEL becomes the kernel's name: arrays of kernels that share a
	 * program must not clash */
	kf_buf_printf(&k->decl, "__device__ const %s KF_KERNEL_c%d[%llu] = {", kx_ct(t), id,
		      (unsigned long long)c->n);
	for (uint64_t i = 0; i < c->n; i++) {
		if (i)
			kf_buf_puts(&k->decl, ", ");
		literal(&k->decl, t, fl ? c->f[i] : 0, fl ? 0 : c->i[i], true);
	}
	kf_buf_puts(&k->decl, "};\n");
	kf_buf_printf(o, "KF_KERNEL_c%d[%s]", id, ix);
}

/* ---- kernels ------------------------------------------------------------------- */

static uint64_t fnv1a(const char *s, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	for (size_t i = 0; i < n; i++) {
		h ^= (unsigned char)s[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

/* src into out with every `a` replaced by ra and every `b` (NULL: none)
 * by rb (no terminating NUL). */
static void replace2(kf_buf *out, const char *src, const char *a, const char *ra, const char *b, const char *rb)
{
	const char *p = src;
	for (;;) {
		const char *ha = strstr(p, a), *hb = b ? strstr(p, b) : NULL;
		const char *h = ha && (!hb || ha < hb) ? ha : hb;
		if (!h)
			break;
		kf_buf_put(out, p, (size_t)(h - p));
		kf_buf_puts(out, h == ha ? ra : rb);
		p = h + strlen(h == ha ? a : b);
	}
	kf_buf_puts(out, p);
}

/* Joins decl, the signature and the body; the name is the hash of the text
 * written with a placeholder name, so that it depends on structure only. */
static void finish(kx *k, const char *bounds)
{
	kf_buf t = {0};
	kf_buf_puts(&t, k->decl.p ? k->decl.p : "");
	kf_buf_printf(&t, "extern \"C\" __global__ void %s KF_KERNEL", bounds);
	kx_params(k, &t);
	if (k->k->ntmap) { /* tensor maps by value, after the pointers */
		t.n--;
		for (int i = 0; i < k->k->ntmap; i++)
			kf_buf_printf(&t, ", const __grid_constant__ KfTmap tm%d", i);
		kf_buf_putc(&t, ')');
	}
	if (k->k->kd) { /* the sizes a sized plan's kernel reads, last */
		t.n--;
		k->k->kd64 = k->wide;
		for (int i = 0; i < 32; i++)
			if (k->k->kd >> i & 1)
				kf_buf_printf(&t, "%sconst %s kd%d", t.p[t.n - 1] == '(' ? "" : ", ", kx_it(k), i);
		kf_buf_putc(&t, ')');
	}
	kf_buf_puts(&t, "\n{\n");
	kf_buf_put(&t, k->b.p ? k->b.p : "", k->b.n);
	kf_buf_puts(&t, "}\n");
	/* the size arguments of the helpers (KX_KD_PARAMS, KX_KD_ARGS; none in
	 * a static plan, whose text and name stay what they were), then the
	 * name from the text's hash */
	kf_buf kp = {0}, ka = {0}, u = {0};
	for (int i = 0; i < 32; i++)
		if (k->k->kd >> i & 1) {
			kf_buf_printf(&kp, ", const %s kd%d", kx_it(k), i);
			kf_buf_printf(&ka, "kd%d, ", i);
		}
	kf_buf_putc(&kp, '\0');
	kf_buf_putc(&ka, '\0');
	kf_buf_putc(&t, '\0');
	replace2(&u, t.p, KX_KD_PARAMS, kp.p, KX_KD_ARGS, ka.p);
	snprintf(k->k->name, sizeof k->k->name, "kf_%016llx", (unsigned long long)fnv1a(u.p, u.n));
	kf_buf_putc(&u, '\0');
	kf_buf out = {0};
	replace2(&out, u.p, "KF_KERNEL", k->k->name, NULL, NULL);
	kf_buf_putc(&out, '\0');
	k->k->src = out.p;
	kf_buf_free(&t);
	kf_buf_free(&u);
	kf_buf_free(&kp);
	kf_buf_free(&ka);
}

static void kx_free(kx *k)
{
	kf_buf_free(&k->decl);
	kf_buf_free(&k->b);
	kf_buf_free(&k->pre);
	kf_buf_free(&k->cur);
	for (uint32_t i = 0; i < k->nix; i++)
		free(k->ix[i].expr);
	free(k->ix);
	free(k->memo);
	free(k->param);
	free(k->node);
	free(k->out);
}

void kf_kernel_free(kf_kernel *k)
{
	free(k->src);
	free(k->in);
	free(k->out);
	memset(k, 0, sizeof *k);
}

static bool all_static(kx *k)
{
	for (uint32_t i = 0; i < k->nparam; i++)
		if (kx_numel(k, k->param[i]) < 0)
			return false;
	for (uint32_t i = 0; i < k->nnode; i++) {
		const kf_node *x = kf_N(k->g, k->node[i]);
		for (uint32_t r = 0; r < x->nres; r++)
			if (kx_numel(k, x->res0 + r) < 0)
				return false;
	}
	return true;
}

/* Builds the spec of node n: a fusion's body, or n alone. */
static void spec(kx *k, kf_nid n)
{
	kf_graph *g = k->g;
	const kf_node *x = kf_N(g, n);
	kf_kernel *kk = k->k;
	if (x->op == KF_OP_FUSION) {
		const kf_block *b = &g->blk[x->body];
		k->nparam = b->narg;
		k->param = malloc((b->narg + 1) * sizeof *k->param);
		if (b->narg)
			memcpy(k->param, b->arg, b->narg * sizeof *k->param);
		kk->nin = x->nin;
		kk->in = malloc((x->nin + 1) * sizeof *kk->in);
		for (uint32_t i = 0; i < x->nin; i++)
			kk->in[i] = kf_in(g, n, i);
		uint32_t cnt = 0;
		kf_foreach_node(g, x->body, m)
			cnt++;
		k->node = malloc((cnt + 1) * sizeof *k->node);
		kf_nid y = kf_block_terminator(g, x->body);
		kf_foreach_node(g, x->body, m)
			if (m != y)
				k->node[k->nnode++] = m;
		uint32_t ny = y == KF_NONE ? 0 : kf_N(g, y)->nin;
		k->nout = ny;
		k->out = malloc((ny + 1) * sizeof *k->out);
		for (uint32_t i = 0; i < ny; i++)
			k->out[i] = kf_in(g, y, i);
	} else {
		k->param = malloc((x->nin + 1) * sizeof *k->param);
		for (uint32_t i = 0; i < x->nin; i++) {
			kf_vid v = kf_in(g, n, i);
			if (kx_param(k, v) < 0)
				k->param[k->nparam++] = v;
		}
		kk->nin = k->nparam;
		kk->in = malloc((k->nparam + 1) * sizeof *kk->in);
		memcpy(kk->in, k->param, k->nparam * sizeof *kk->in);
		k->node = malloc(sizeof *k->node);
		k->node[k->nnode++] = n;
		k->nout = x->nres;
		k->out = malloc((x->nres + 1) * sizeof *k->out);
		for (uint32_t i = 0; i < x->nres; i++)
			k->out[i] = kf_res(g, n, i);
	}
	kk->nout = x->nres;
	kk->out = malloc((x->nres + 1) * sizeof *kk->out);
	for (uint32_t i = 0; i < x->nres; i++)
		kk->out[i] = kf_res(g, n, i);
}

static int kernel_kind(kx *k, kf_nid n)
{
	const kf_node *x = kf_N(k->g, n);
	if (x->op == KF_OP_FUSION) {
		const char *kind = kf_attr_str(k->g, n, "kind", "elementwise");
		if (strcmp(kind, "persistent") == 0)
			return KF_KK_PERSISTENT;
		if (strcmp(kind, "colreduce") == 0) /* cuda/emit_colreduce.c */
			return KF_KK_COLREDUCE;
		if (strcmp(kind, "contraction") == 0 || strcmp(kind, "conv") == 0) /* cuda/emit_matmul.c */
			return KF_KK_MATMUL;
		if (strcmp(kind, "attention") == 0) /* cuda/emit_attention.c */
			return KF_KK_ATTENTION;
		return strcmp(kind, "reduce") == 0 ? KF_KK_ROW : KF_KK_LOOP;
	}
	switch (kf_fuse_kind_of(k->g, n)) {
	case KF_FK_LOOP: return KF_KK_LOOP;
	case KF_FK_ROW: {
		int a;
		int64_t R, C;
		kf_fuse_row_split(k->g, n, &a, &R, &C);
		/* a row too long for registers: the generic kernel loops over it */
		return C <= 32768 ? KF_KK_ROW : KF_KK_REDUCE;
	}
	case KF_FK_REDUCE: return KF_KK_REDUCE;
	default: break;
	}
	if (x->op == KF_OP_MATMUL || x->op == KF_OP_GEMM || x->op == KF_OP_CONV)
		return KF_KK_MATMUL;
	if (x->op == KF_OP_MAX_POOL || x->op == KF_OP_AVG_POOL || x->op == KF_OP_CONV_TRANSPOSE) /* cuda/emit_conv.c */
		return KF_KK_WINDOW;
	/* resize is not fused (linear reads 2^k elements per output), nor
	 * iota (canonicalize folds a static one), but alone each is a loop
	 * kernel (emit_elementwise.c) */
	if (x->op == KF_OP_RESIZE || x->op == KF_OP_IOTA)
		return KF_KK_LOOP;
	if (kf_op(k->c, x->op)->trait == KF_TRAIT_REDUCE)
		return KF_KK_REDUCE;
	return -1;
}

/* Whether k needs 64-bit indices.  32-bit index arithmetic is cheaper;
 * products of two indices stay below 2^31 when every tensor has fewer than
 * 2^30 elements (a sized plan: at its buckets' sizes, so that the bucket
 * shares the text). */
static bool wide_indices(kx *k)
{
	int64_t big = 0;
	for (uint32_t i = 0; i < k->nparam; i++) {
		int64_t m = kx_rep(k, kx_numel(k, k->param[i]), kx_snumel(k, k->param[i]));
		big = m > big ? m : big;
	}
	for (uint32_t i = 0; i < k->nnode; i++)
		for (uint32_t r = 0; r < kf_N(k->g, k->node[i])->nres; r++) {
			kf_vid v = kf_res(k->g, k->node[i], r);
			int64_t m = kx_rep(k, kx_numel(k, v), kx_snumel(k, v));
			big = m > big ? m : big;
		}
	return big >= (1LL << 30);
}

int kf_emit_node(kf_graph *g, kf_nid n, kf_kernel *out)
{
	return kf_emit_node_for(g, n, NULL, out);
}

int kf_emit_node_for(kf_graph *g, kf_nid n, const kf_emit_target *t, kf_kernel *out)
{
	return kf_emit_node_part(g, n, t, 0, out);
}

int kf_emit_node_part(kf_graph *g, kf_nid n, const kf_emit_target *t, int part, kf_kernel *out)
{
	const kf_node *x = kf_N(g, n);
	memset(out, 0, sizeof *out);
	/* a fusion without results (a group of dead ops) computes nothing
	 * anyone reads */
	if (x->op == KF_OP_CONST || x->op == KF_OP_RESHAPE || x->op == KF_OP_RETURN ||
	    x->op == KF_OP_YIELD || (x->op == KF_OP_FUSION && x->nres == 0))
		return 1;
	kx k = {.g = g, .c = g->ctx, .at = n, .k = out, .wg = t ? t->wgmma : 0, .part = part,
		.dyn = t && t->dyn && t->dyn->n ? t->dyn : NULL};
	out->node = n;
	out->grid_y = out->grid_z = 1;
	spec(&k, n);
	int rc = -1;
	if (!all_static(&k)) {
		kx_fail(&k, "'%s' has symbolic shapes; the CUDA backend needs static ones",
			kf_op(g->ctx, x->op)->name);
		goto done;
	}
	if (kx_tuning(&k, &k.tune) != 0)
		goto done;
	int kind = kernel_kind(&k, n);
	if (part && kind != KF_KK_MATMUL) {
		rc = kx_fail(&k, "only contraction kernels have parts");
		goto done;
	}
	out->kind = kind;
	out->nops = (int)k.nnode;
	k.wide = wide_indices(&k);
	switch (kind) {
	case KF_KK_LOOP: rc = kx_emit_loop(&k); break;
	case KF_KK_ROW: rc = kx_emit_row(&k); break;
	case KF_KK_REDUCE: rc = kx_emit_reduce(&k); break;
	case KF_KK_MATMUL: rc = kx_emit_matmul(&k); break;
	case KF_KK_PERSISTENT: rc = kx_emit_persistent(&k); break;
	case KF_KK_COLREDUCE: rc = kx_emit_colreduce(&k); break;
	case KF_KK_ATTENTION: rc = kx_emit_attention(&k); break;
	case KF_KK_WINDOW: rc = kx_emit_pool(&k); break;
	default:
		rc = kx_fail(&k, "op '%s' has no CUDA implementation", kf_op(g->ctx, x->op)->name);
	}
	if (rc == 0) {
		kx_bytes(&k);
		char bounds[96];
		/* setmaxnreg needs a register cap at entry: one block per SM */
		int bn;
		if (out->sm90a)
			bn = snprintf(bounds, sizeof bounds, "__launch_bounds__(%d, 1)", out->block);
		else if (out->min_blocks > 0)
			bn = snprintf(bounds, sizeof bounds, "__launch_bounds__(%d, %d)", out->block, out->min_blocks);
		else
			bn = snprintf(bounds, sizeof bounds, "__launch_bounds__(%d)", out->block);
		/* a compiled-in cluster shape: a plain cuLaunchKernel launches it */
		if (out->cluster > 1)
			snprintf(bounds + bn, sizeof bounds - (size_t)bn, " __cluster_dims__(1, %d, 1)", out->cluster);
		finish(&k, bounds);
	}
done:
	kx_free(&k);
	if (rc != 0) {
		char why[sizeof out->why];
		memcpy(why, out->why, sizeof why);
		kf_kernel_free(out);
		if (rc == 2)
			memcpy(out->why, why, sizeof why);
	}
	return rc;
}

void kf_kernels_free(kf_kernels *ks)
{
	for (uint32_t i = 0; i < ks->n; i++)
		kf_kernel_free(&ks->k[i]);
	free(ks->k);
	memset(ks, 0, sizeof *ks);
}

/* Appends the kernels of block b's nodes to out; a fusion whose kernel
 * cannot run its body (2) has its body's. */
static int emit_block(kf_graph *g, kf_bid b, kf_kernels *out)
{
	kf_foreach_node(g, b, n) {
		kf_kernel k;
		int rc = kf_emit_node(g, n, &k);
		if (rc < 0)
			return -1;
		if (rc == 2 && emit_block(g, kf_N(g, n)->body, out) != 0)
			return -1;
		if (rc > 0)
			continue;
		if (out->n == out->cap) {
			out->cap = out->cap ? out->cap * 2 : 16;
			out->k = realloc(out->k, out->cap * sizeof *out->k);
		}
		out->k[out->n++] = k;
	}
	return 0;
}

int kf_emit_graph(kf_graph *g, kf_kernels *out)
{
	return emit_block(g, 0, out);
}

/* ---- module-level emission ------------------------------------------------------ */

/* Appends each kernel of ks not already in `seen` (names, by the kernel's
 * canonical name), headed by a comment naming the graph and node. */
static void program(kf_buf *out, kf_kernels *ks, kf_graph *g, kf_buf *seen)
{
	for (uint32_t i = 0; i < ks->n; i++) {
		char key[32];
		snprintf(key, sizeof key, "%s;", ks->k[i].name);
		kf_buf_putc(seen, '\0');
		seen->n--;
		bool dup = strstr(seen->p, key) != NULL;
		const kf_node *x = kf_N(g, ks->k[i].node);
		kf_buf_printf(out, "\n// @%s: %s", kf_str(g->ctx, g->name), kf_op(g->ctx, x->op)->name);
		if (x->sym)
			kf_buf_printf(out, " @%s", kf_str(g->ctx, x->sym));
		kf_buf_printf(out, " -> %s (%s kernel, %d op%s, block %d)%s\n", ks->k[i].name,
			      kf_kernel_kind_name(ks->k[i].kind), ks->k[i].nops, ks->k[i].nops == 1 ? "" : "s",
			      ks->k[i].block, dup ? ", as above" : "");
		if (!dup) {
			kf_buf_puts(out, ks->k[i].src);
			kf_buf_puts(seen, key);
		}
	}
}

int kf_emit_cuda_module(kf_module *m, kf_buf *out)
{
	kf_buf seen = {0};
	kf_buf_puts(&seen, ";");
	kf_buf_puts(out, kf_emit_prelude());
	int rc = 0;
	for (uint32_t i = 0; i < m->ngraph && rc == 0; i++) {
		kf_kernels ks = {0};
		rc = kf_emit_graph(m->graph[i], &ks);
		if (rc == 0)
			program(out, &ks, m->graph[i], &seen);
		kf_kernels_free(&ks);
	}
	kf_buf_free(&seen);
	return rc;
}

int kf_emit_ptx_module(kf_module *m, kf_buf *out)
{
	kf_buf src = {0};
	if (kf_emit_cuda_module(m, &src) != 0) {
		kf_buf_free(&src);
		return -1;
	}
	kf_buf_putc(&src, '\0');
	kf_nvrtc *nv = kf_nvrtc_open(m->ctx);
	if (!nv) {
		kf_buf_free(&src);
		return -1;
	}
	const char *arch = getenv("KFUSE_ARCH");
	if (!arch || !*arch)
		arch = "sm_90";
	/* a wgmma kernel (a `wg...` tile) needs the arch-specific target */
	char archa[24];
	if (strstr(src.p, "wgmma.mma_async") && !strcmp(arch, "sm_90")) {
		snprintf(archa, sizeof archa, "%sa", arch);
		arch = archa;
	}
	const char *opts[] = {"-std=c++17"};
	kf_buf ptx = {0};
	int rc = kf_nvrtc_compile(nv, src.p, "kfuse.cu", arch, opts, 1, 0, &ptx, NULL);
	if (rc == 0)
		kf_buf_puts(out, ptx.p);
	kf_buf_free(&ptx);
	kf_buf_free(&src);
	kf_nvrtc_close(nv);
	return rc;
}
