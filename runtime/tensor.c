/* tensor.c: host tensors and dtype conversions.
 *
 * The small float formats (f16, bf16) have two converters: integer bit
 * manipulation for values that are floats (the common, fast case), and one
 * generic routine on doubles for the rest: rounding a double straight to
 * the target is a single rounding, so kf_tensor_set(f16, v) never
 * double-rounds through f32.  Both use only exact operations, so neither
 * depends on the FPU rounding mode.
 */
#include "tensor.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- small floats ---------------------------------------------------------- */

/* Rounds a non-negative finite x to an integer, ties to even. */
static double round_half_even(double x)
{
	double f = floor(x), r = x - f;
	if (r > 0.5 || (r == 0.5 && fmod(f, 2.0) != 0.0))
		f += 1.0;
	return f;
}

/* Encodes d as a binary float of 1 sign, ebits exponent and mbits mantissa
 * bits, rounding to nearest even.  Overflow gives inf, NaN a quiet NaN with
 * d's sign. */
static uint32_t encode_small(double d, int ebits, int mbits)
{
	uint32_t sign = signbit(d) ? 1u << (ebits + mbits) : 0;
	uint32_t expall = ((1u << ebits) - 1) << mbits;
	int bias = (1 << (ebits - 1)) - 1, emin = 1 - bias;
	double a = fabs(d);

	if (isnan(d))
		return sign | expall | (1u << (mbits - 1));
	if (isinf(a))
		return sign | expall;
	if (a < ldexp(1.0, emin)) {
		/* Subnormal: units of 2^(emin-mbits); rounding up to 2^mbits
		 * units lands exactly on the smallest normal's encoding. */
		return sign | (uint32_t)round_half_even(ldexp(a, mbits - emin));
	}
	int e;
	frexp(a, &e);
	e -= 1; /* a in [2^e, 2^(e+1)) */
	double q = round_half_even(ldexp(a, mbits - e)); /* in [2^mbits, 2^(mbits+1)] */
	if (q == ldexp(1.0, mbits + 1)) {
		q = ldexp(1.0, mbits);
		e++;
	}
	if (e > bias)
		return sign | expall;
	return sign | ((uint32_t)(e + bias) << mbits) | ((uint32_t)q - (1u << mbits));
}

/* The fast paths: integer-only conversions between f32 bits and f16/bf16,
 * exact and independent of the rounding mode.  The generic routines above
 * are the reference (the tests check both against each other and against
 * the compiler's _Float16) and serve doubles that are not floats. */
static uint32_t f32_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

static float bits_f32(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

static uint16_t f16_from_bits(uint32_t x)
{
	uint32_t sign = (x >> 16) & 0x8000, ax = x & 0x7fffffff;

	if (ax > 0x7f800000)
		return (uint16_t)(sign | 0x7e00);
	if (ax >= 0x477ff000) /* 65520 and up round to inf (as does inf) */
		return (uint16_t)(sign | 0x7c00);
	if (ax >= 0x38800000) {
		/* Normal in f16: rebias the exponent (127 -> 15), round the
		 * 13 dropped mantissa bits to even; a carry into the exponent
		 * is the right answer. */
		uint32_t r = ax - 0x38000000, q = r >> 13, rem = r & 0x1fff;
		if (rem > 0x1000 || (rem == 0x1000 && (q & 1)))
			q++;
		return (uint16_t)(sign | q);
	}
	if (ax <= 0x33000000) /* at most 2^-25, half the least subnormal: 0 */
		return (uint16_t)sign;
	/* Subnormal in f16: units of 2^-24. */
	uint32_t m = (ax & 0x7fffff) | 0x800000, shift = 126 - (ax >> 23);
	uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
	if (rem > half || (rem == half && (q & 1)))
		q++;
	return (uint16_t)(sign | q);
}

static uint32_t f16_to_bits(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff;

	if (e == 0x1f)
		return sign | 0x7f800000 | (m << 13);
	if (e)
		return sign | ((e + 112) << 23) | (m << 13);
	if (!m)
		return sign;
	e = 113;
	while (!(m & 0x400)) {
		m <<= 1;
		e--;
	}
	return sign | (e << 23) | ((m & 0x3ff) << 13);
}

static uint16_t bf16_from_bits(uint32_t x)
{
	if ((x & 0x7fffffff) > 0x7f800000) /* NaN: keep it one (quiet) */
		return (uint16_t)((x >> 16) | 0x40);
	return (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

float kf_f16_to_f32(uint16_t h) { return bits_f32(f16_to_bits(h)); }
uint16_t kf_f32_to_f16(float f) { return f16_from_bits(f32_bits(f)); }
float kf_bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }
uint16_t kf_f32_to_bf16(float f) { return bf16_from_bits(f32_bits(f)); }

/* A double that a float holds exactly takes the fast path; anything else
 * the generic one, which rounds once. */
uint16_t kf_f64_to_f16(double d)
{
	float f = (float)d;
	return f == d || isnan(d) ? f16_from_bits(f32_bits(f)) : (uint16_t)encode_small(d, 5, 10);
}

static uint16_t f64_to_bf16(double d)
{
	float f = (float)d;
	return f == d || isnan(d) ? bf16_from_bits(f32_bits(f)) : (uint16_t)encode_small(d, 8, 7);
}

/* ---- integers -------------------------------------------------------------- */

/* Truncates toward zero and saturates to [lo, hi]; NaN is 0. */
static int64_t to_int(double v, int64_t lo, int64_t hi)
{
	if (isnan(v))
		return 0;
	/* Compare in double: 2^63 is exact, INT64_MAX is not. */
	if (v >= (double)hi + 1.0 || v >= 9223372036854775808.0)
		return hi;
	if (v <= (double)lo - 1.0 || v < -9223372036854775808.0)
		return lo;
	return (int64_t)v;
}

double kf_dtype_round(kf_dtype dt, double v)
{
	switch (dt) {
	case KF_F16: return kf_f16_to_f32(kf_f64_to_f16(v));
	case KF_BF16: return kf_bf16_to_f32(f64_to_bf16(v));
	case KF_F32: return (float)v;
	case KF_F64: return v;
	case KF_I1: return v != 0;
	case KF_I8: return (double)to_int(v, INT8_MIN, INT8_MAX);
	case KF_I32: return (double)to_int(v, INT32_MIN, INT32_MAX);
	case KF_I64: return (double)to_int(v, INT64_MIN, INT64_MAX);
	default: return v;
	}
}

/* ---- tensors --------------------------------------------------------------- */

/* Element sizes here rather than through the core, so that tensors work in
 * code that has no context. */
static size_t elsize(kf_dtype dt)
{
	static const uint8_t sz[KF_NDTYPE] = {
		[KF_F16] = 2, [KF_BF16] = 2, [KF_F32] = 4, [KF_F64] = 8,
		[KF_I1] = 1, [KF_I8] = 1, [KF_I32] = 4, [KF_I64] = 8,
	};
	return (unsigned)dt < KF_NDTYPE ? sz[dt] : 0;
}

int kf_tensor_alloc(kf_tensor *t, kf_dtype dt, int rank, const int64_t *dim)
{
	/* Cap the size well below SIZE_MAX so that offsets in int64 never wrap. */
	const uint64_t maxbytes = (uint64_t)1 << 48;
	uint64_t n = 1;
	size_t es = elsize(dt);

	memset(t, 0, sizeof *t);
	if (es == 0 || rank < 0 || rank > KF_MAX_RANK)
		return -1;
	for (int i = 0; i < rank; i++) {
		if (dim[i] < 0)
			return -1;
		if (dim[i] != 0 && n > maxbytes / (uint64_t)dim[i])
			return -1;
		n *= (uint64_t)dim[i];
	}
	if (n > maxbytes / es)
		return -1;
	if (!kf_mem_reserve(n * es))
		return KF_TENSOR_OVER_BUDGET;
	/* Even an empty tensor gets a block, so data == NULL means "never
	 * allocated" and nothing else. */
	void *p = kf_try_calloc(n ? n * es : 1, 1); /* the input decides the size: may fail */
	if (!p) {
		kf_mem_release(n * es);
		return -1;
	}
	t->dtype = (uint8_t)dt;
	t->rank = (uint8_t)rank;
	for (int i = 0; i < rank; i++)
		t->dim[i] = dim[i];
	t->data = p;
	t->nbytes = n * es;
	return 0;
}

void kf_tensor_why(char *buf, size_t n, kf_dtype dt, int rank, const int64_t *dim)
{
	uint64_t bytes = elsize(dt);
	bool huge = bytes == 0 || rank < 0 || rank > KF_MAX_RANK;
	for (int i = 0; !huge && i < rank; i++) {
		if (dim[i] < 0 || (dim[i] && bytes > ((uint64_t)1 << 48) / (uint64_t)dim[i]))
			huge = true;
		else
			bytes *= (uint64_t)dim[i];
	}
	if (huge || bytes > (uint64_t)1 << 48)
		snprintf(buf, n, "its size is over the limit of 2^48 bytes");
	else if (bytes > kf_mem_budget() - (kf_mem_in_use() < kf_mem_budget() ? kf_mem_in_use() : kf_mem_budget()))
		kf_mem_why(buf, n, bytes);
	else
		snprintf(buf, n, "out of memory (%llu bytes)", (unsigned long long)bytes);
}

int kf_tensor_alloc_type(kf_tensor *t, const kf_type *ty)
{
	if (!kf_type_is_static(ty)) {
		memset(t, 0, sizeof *t);
		return -1;
	}
	return kf_tensor_alloc(t, ty->dtype, ty->rank, ty->dim);
}

void kf_tensor_free(kf_tensor *t)
{
	if (t->data)
		kf_mem_release(t->nbytes);
	free(t->data);
	memset(t, 0, sizeof *t);
}

int64_t kf_tensor_numel(const kf_tensor *t)
{
	int64_t n = 1;
	for (int i = 0; i < t->rank; i++)
		n *= t->dim[i];
	return n;
}

kf_type kf_tensor_type(const kf_tensor *t)
{
	kf_type ty;
	memset(&ty, 0, sizeof ty);
	ty.dtype = t->dtype;
	ty.rank = t->rank;
	for (int i = 0; i < t->rank && i < KF_MAX_RANK; i++)
		ty.dim[i] = t->dim[i];
	return ty;
}

bool kf_tensor_same_shape(const kf_tensor *a, const kf_tensor *b)
{
	if (a->dtype != b->dtype || a->rank != b->rank)
		return false;
	for (int i = 0; i < a->rank; i++)
		if (a->dim[i] != b->dim[i])
			return false;
	return true;
}

/* Loads and stores go through memcpy: data may be any malloc'd block, but
 * views into .npy images need not be aligned. */
#define LOAD(T, p, i) ({ T v_; memcpy(&v_, (const char *)(p) + (size_t)(i) * sizeof(T), sizeof(T)); v_; })
#define STORE(T, p, i, x) do { T v_ = (x); memcpy((char *)(p) + (size_t)(i) * sizeof(T), &v_, sizeof(T)); } while (0)

double kf_tensor_get(const kf_tensor *t, int64_t i)
{
	switch (t->dtype) {
	case KF_F16: return kf_f16_to_f32(LOAD(uint16_t, t->data, i));
	case KF_BF16: return kf_bf16_to_f32(LOAD(uint16_t, t->data, i));
	case KF_F32: return LOAD(float, t->data, i);
	case KF_F64: return LOAD(double, t->data, i);
	case KF_I1: return LOAD(uint8_t, t->data, i) != 0;
	case KF_I8: return LOAD(int8_t, t->data, i);
	case KF_I32: return LOAD(int32_t, t->data, i);
	case KF_I64: return (double)LOAD(int64_t, t->data, i);
	default: return NAN;
	}
}

void kf_tensor_set(kf_tensor *t, int64_t i, double v)
{
	switch (t->dtype) {
	case KF_F16: STORE(uint16_t, t->data, i, kf_f64_to_f16(v)); break;
	case KF_BF16: STORE(uint16_t, t->data, i, f64_to_bf16(v)); break;
	case KF_F32: STORE(float, t->data, i, (float)v); break;
	case KF_F64: STORE(double, t->data, i, v); break;
	case KF_I1: STORE(uint8_t, t->data, i, v != 0); break;
	case KF_I8: STORE(int8_t, t->data, i, (int8_t)to_int(v, INT8_MIN, INT8_MAX)); break;
	case KF_I32: STORE(int32_t, t->data, i, (int32_t)to_int(v, INT32_MIN, INT32_MAX)); break;
	case KF_I64: STORE(int64_t, t->data, i, to_int(v, INT64_MIN, INT64_MAX)); break;
	default: break;
	}
}

int64_t kf_tensor_get_i64(const kf_tensor *t, int64_t i)
{
	if (t->dtype == KF_I64)
		return LOAD(int64_t, t->data, i);
	return to_int(kf_tensor_get(t, i), INT64_MIN, INT64_MAX);
}

void kf_tensor_set_i64(kf_tensor *t, int64_t i, int64_t v)
{
	if (t->dtype == KF_I64)
		STORE(int64_t, t->data, i, v);
	else
		kf_tensor_set(t, i, (double)v);
}

int kf_tensor_copy(kf_tensor *dst, const kf_tensor *src)
{
	if (!src->data) {
		memset(dst, 0, sizeof *dst);
		return 0;
	}
	kf_tensor tmp;
	if (kf_tensor_alloc(&tmp, src->dtype, src->rank, src->dim) < 0) {
		memset(dst, 0, sizeof *dst);
		return -1;
	}
	memcpy(tmp.data, src->data, src->nbytes);
	*dst = tmp;
	return 0;
}

/* ---- summary --------------------------------------------------------------- */

/* The shortest %g text that reads back to v once rounded to dt. */
static void put_shortest(kf_buf *out, double v, kf_dtype dt)
{
	char s[40];
	if (isnan(v)) {
		kf_buf_puts(out, "nan");
		return;
	}
	if (isinf(v)) {
		kf_buf_puts(out, v < 0 ? "-inf" : "inf");
		return;
	}
	for (int p = 1; p <= 17; p++) {
		snprintf(s, sizeof s, "%.*g", p, v);
		if (kf_dtype_round(dt, strtod(s, NULL)) == v)
			break;
	}
	kf_buf_puts(out, s);
}

void kf_tensor_summary(kf_buf *out, const kf_tensor *t)
{
	static const char *const names[KF_NDTYPE] = {
		"f16", "bf16", "f32", "f64", "i1", "i8", "i32", "i64",
	};
	int64_t n = t->data ? kf_tensor_numel(t) : 0;
	double sum = 0;
	bool isf = t->dtype <= KF_F64;

	kf_buf_puts(out, t->dtype < KF_NDTYPE ? names[t->dtype] : "?");
	kf_buf_putc(out, '[');
	for (int i = 0; i < t->rank; i++)
		kf_buf_printf(out, "%s%lld", i ? "," : "", (long long)t->dim[i]);
	kf_buf_puts(out, "] [");
	for (int64_t i = 0; i < n; i++) {
		double v = kf_tensor_get(t, i);
		sum += v;
		if (i == 8) {
			kf_buf_puts(out, ", ...");
		} else if (i < 8) {
			if (i)
				kf_buf_puts(out, ", ");
			if (isf)
				put_shortest(out, v, t->dtype);
			else
				kf_buf_printf(out, "%lld", (long long)kf_tensor_get_i64(t, i));
		}
	}
	kf_buf_puts(out, "] sum=");
	put_shortest(out, sum, KF_F64);
}
