/* Unit tests of runtime/tensor.c: allocation, element access, the f16 and
 * bf16 conversions (checked exhaustively, against the compiler's _Float16
 * where there is one, and at their edge cases) and the summary line. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "kf.h"
#include "tensor.h"

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

static bool f16_is_nan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff); }
static bool bf16_is_nan(uint16_t h) { return (h & 0x7f80) == 0x7f80 && (h & 0x7f); }

static void test_f16_edges(void **st)
{
	assert_int_equal(kf_f32_to_f16(0.0f), 0x0000);
	assert_int_equal(kf_f32_to_f16(-0.0f), 0x8000);
	assert_int_equal(kf_f32_to_f16(1.0f), 0x3c00);
	assert_int_equal(kf_f32_to_f16(-2.0f), 0xc000);
	assert_int_equal(kf_f32_to_f16(65504.0f), 0x7bff); /* largest finite */
	assert_int_equal(kf_f32_to_f16(65519.99f), 0x7bff);
	assert_int_equal(kf_f32_to_f16(65520.0f), 0x7c00); /* the tie rounds to even: inf */
	assert_int_equal(kf_f32_to_f16(1e10f), 0x7c00);
	assert_int_equal(kf_f32_to_f16(-INFINITY), 0xfc00);
	assert_true(f16_is_nan(kf_f32_to_f16(NAN)));
	assert_int_equal(kf_f32_to_f16(-NAN) & 0x8000, 0x8000);
	/* subnormals: units of 2^-24 */
	assert_int_equal(kf_f32_to_f16(ldexpf(1, -24)), 0x0001);
	assert_int_equal(kf_f32_to_f16(ldexpf(1, -25)), 0x0000);     /* 0.5 unit: tie to even 0 */
	assert_int_equal(kf_f32_to_f16(ldexpf(1.0001f, -25)), 0x0001);
	assert_int_equal(kf_f32_to_f16(ldexpf(3, -25)), 0x0002);     /* 1.5 units: tie to even 2 */
	assert_int_equal(kf_f32_to_f16(ldexpf(5, -25)), 0x0002);     /* 2.5 units: tie to even 2 */
	assert_int_equal(kf_f32_to_f16(ldexpf(2047, -25)), 0x0400);  /* 1023.5 units: up into normals */
	assert_int_equal(kf_f32_to_f16(ldexpf(1, -14)), 0x0400);     /* smallest normal */
	assert_true(kf_f16_to_f32(0x0001) == ldexpf(1, -24));
	assert_true(kf_f16_to_f32(0x03ff) == ldexpf(1023, -24));
	assert_true(kf_f16_to_f32(0x8001) == -ldexpf(1, -24));
	/* ties at 1.0, where the ulp is 2^-10 */
	assert_int_equal(kf_f32_to_f16(1.0f + ldexpf(1, -11)), 0x3c00);
	assert_int_equal(kf_f32_to_f16(1.0f + ldexpf(3, -11)), 0x3c02);
	assert_int_equal(kf_f32_to_f16(1.0f + ldexpf(1, -11) + ldexpf(1, -20)), 0x3c01);
	assert_true(isinf(kf_f16_to_f32(0x7c00)) && kf_f16_to_f32(0xfc00) < 0);
	assert_true(isnan(kf_f16_to_f32(0x7e00)) && isnan(kf_f16_to_f32(0xfc01)));
	assert_true(kf_f16_to_f32(0x3555) == 0.333251953125f);
}

/* Every f16 survives f16 -> f32 -> f16, and, where the compiler has
 * _Float16, both directions agree with it on every f16 and on a million
 * f32 bit patterns. */
static void test_f16_exhaustive(void **st)
{
	for (uint32_t h = 0; h < 65536; h++) {
		float f = kf_f16_to_f32((uint16_t)h);
		if (f16_is_nan((uint16_t)h)) {
			assert_true(isnan(f));
			assert_true(f16_is_nan(kf_f32_to_f16(f)));
			continue;
		}
		assert_int_equal(kf_f32_to_f16(f), h);
		assert_int_equal(kf_f64_to_f16(f), h);
#ifdef __FLT16_MAX__
		_Float16 x;
		uint16_t hb = (uint16_t)h;
		memcpy(&x, &hb, 2);
		assert_true((float)x == f);
#endif
	}
#ifdef __FLT16_MAX__
	uint32_t s = 12345;
	for (int i = 0; i < 1000000; i++) {
		s = s * 1664525u + 1013904223u;
		float f = bits_f32(s);
		if (isnan(f))
			continue;
		_Float16 x = (_Float16)f;
		uint16_t ref;
		memcpy(&ref, &x, 2);
		assert_int_equal(kf_f32_to_f16(f), ref);
	}
#else
	print_message("note: no _Float16 in this compiler; the reference comparison is skipped\n");
#endif
}

static void test_bf16(void **st)
{
	assert_int_equal(kf_f32_to_bf16(1.0f), 0x3f80);
	assert_int_equal(kf_f32_to_bf16(-2.5f), 0xc020);
	assert_int_equal(kf_f32_to_bf16(1.0f + ldexpf(1, -8)), 0x3f80);  /* tie to even */
	assert_int_equal(kf_f32_to_bf16(1.0f + ldexpf(3, -8)), 0x3f82);  /* tie to even, up */
	assert_int_equal(kf_f32_to_bf16(1.0f + ldexpf(1, -8) + ldexpf(1, -20)), 0x3f81);
	assert_int_equal(kf_f32_to_bf16(3.4028235e38f), 0x7f80);           /* FLT_MAX rounds to inf */
	assert_int_equal(kf_f32_to_bf16(bits_f32(0x7f7f7fff)), 0x7f7f);   /* just below the tie */
	assert_int_equal(kf_f32_to_bf16(INFINITY), 0x7f80);
	assert_int_equal(kf_f32_to_bf16(-0.0f), 0x8000);
	assert_int_equal(kf_f32_to_bf16(bits_f32(0x00010000)), 0x0001);   /* subnormal, exact */
	assert_int_equal(kf_f32_to_bf16(bits_f32(0x00008000)), 0x0000);   /* half the least: to even */
	assert_int_equal(kf_f32_to_bf16(bits_f32(0x00018000)), 0x0002);   /* 1.5 least: to even */
	assert_true(bf16_is_nan(kf_f32_to_bf16(NAN)));
	assert_true(bf16_is_nan(kf_f32_to_bf16(bits_f32(0x7f800001)))); /* a NaN whose payload truncates away */
	assert_true(kf_bf16_to_f32(0x0001) == bits_f32(0x00010000));
	assert_true(isnan(kf_bf16_to_f32(0x7fc0)));

	for (uint32_t h = 0; h < 65536; h++) {
		float f = kf_bf16_to_f32((uint16_t)h);
		assert_int_equal(f32_bits(f) & 0xffff, 0); /* bf16 is the top half of f32 */
		if (bf16_is_nan((uint16_t)h)) {
			assert_true(isnan(f));
			continue;
		}
		assert_int_equal(f32_bits(f) >> 16, h);
		assert_int_equal(kf_f32_to_bf16(f), h);
	}
	/* The well-known bit trick is the reference for non-NaN inputs. */
	uint32_t s = 99;
	for (int i = 0; i < 1000000; i++) {
		s = s * 1664525u + 1013904223u;
		float f = bits_f32(s);
		if (isnan(f))
			continue;
		uint16_t ref = (uint16_t)((s + 0x7fff + ((s >> 16) & 1)) >> 16);
		assert_int_equal(kf_f32_to_bf16(f), ref);
	}
}

/* Doubles that are not floats take the generic rounding path: just above
 * and just below every midpoint between neighbouring f16 (and bf16)
 * values, they must round to the nearer neighbour. */
static void test_rounding_from_double(void **st)
{
	kf_tensor t;
	int64_t d[] = {1};
	kf_tensor_alloc(&t, KF_BF16, 1, d);
	for (uint32_t h = 0; h < 0x7bff; h++) {
		double lo = kf_f16_to_f32((uint16_t)h), hi = kf_f16_to_f32((uint16_t)(h + 1));
		double mid = (lo + hi) / 2, eps = mid * 0x1p-40;
		assert_int_equal(kf_f64_to_f16(mid + eps), h + 1);
		assert_int_equal(kf_f64_to_f16(mid - eps), h);
		assert_int_equal(kf_f64_to_f16(-(mid + eps)), (h + 1) | 0x8000);
	}
	assert_int_equal(kf_f64_to_f16(65520.0 - 65520.0 * 0x1p-40), 0x7bff);
	assert_int_equal(kf_f64_to_f16(1e300), 0x7c00);
	assert_int_equal(kf_f64_to_f16(1e-300), 0x0000);
	assert_int_equal(kf_f64_to_f16(-1e-300), 0x8000);
	for (uint32_t h = 0; h < 0x7f7f; h++) {
		double lo = kf_bf16_to_f32((uint16_t)h), hi = kf_bf16_to_f32((uint16_t)(h + 1));
		double mid = (lo + hi) / 2, eps = mid * 0x1p-40;
		kf_tensor_set(&t, 0, mid + eps);
		assert_int_equal(((uint16_t *)t.data)[0], h + 1);
		kf_tensor_set(&t, 0, mid - eps);
		assert_int_equal(((uint16_t *)t.data)[0], h);
		assert_true(kf_dtype_round(KF_BF16, mid + eps) == hi);
	}
	kf_tensor_set(&t, 0, 1e300);
	assert_int_equal(((uint16_t *)t.data)[0], 0x7f80);
	kf_tensor_free(&t);
}

static void test_alloc(void **st)
{
	kf_tensor t;
	int64_t d[] = {2, 3};
	assert_int_equal(kf_tensor_alloc(&t, KF_F32, 2, d), 0);
	assert_int_equal(kf_tensor_numel(&t), 6);
	assert_int_equal(t.nbytes, 24);
	for (int i = 0; i < 6; i++)
		assert_true(kf_tensor_get(&t, i) == 0.0);
	kf_tensor_free(&t);
	assert_null(t.data);
	kf_tensor_free(&t); /* twice is fine */

	assert_int_equal(kf_tensor_alloc(&t, KF_F64, 0, NULL), 0); /* a scalar */
	assert_int_equal(kf_tensor_numel(&t), 1);
	assert_int_equal(t.nbytes, 8);
	kf_tensor_free(&t);

	int64_t e[] = {0, 5};
	assert_int_equal(kf_tensor_alloc(&t, KF_I8, 2, e), 0);
	assert_int_equal(kf_tensor_numel(&t), 0);
	assert_non_null(t.data);
	kf_tensor_free(&t);

	int64_t big[] = {INT64_C(1) << 40, INT64_C(1) << 40};
	assert_int_equal(kf_tensor_alloc(&t, KF_F32, 2, big), -1);
	assert_null(t.data);
	assert_int_equal(t.rank, 0);
	int64_t neg[] = {2, -1};
	assert_int_equal(kf_tensor_alloc(&t, KF_F32, 2, neg), -1);
	int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
	assert_int_equal(kf_tensor_alloc(&t, KF_F32, 9, nine), -1);
	assert_int_equal(kf_tensor_alloc(&t, KF_NDTYPE, 2, d), -1);

	kf_type ty = kf_type_make(KF_I32, 2, d);
	assert_int_equal(kf_tensor_alloc_type(&t, &ty), 0);
	kf_type back = kf_tensor_type(&t);
	assert_memory_equal(&back, &ty, sizeof ty);
	kf_tensor_free(&t);
	int64_t sym[] = {KF_SYM(3), 4};
	kf_type tys = kf_type_make(KF_I32, 2, sym);
	assert_int_equal(kf_tensor_alloc_type(&t, &tys), -1);
}

static void test_set_get(void **st)
{
	kf_tensor t;
	int64_t d[] = {8};
	assert_int_equal(kf_tensor_alloc(&t, KF_I8, 1, d), 0);
	double in[8] = {2.7, -2.7, 300, -300, NAN, 127.9, -128.9, -0.0};
	double want[8] = {2, -2, 127, -128, 0, 127, -128, 0};
	for (int i = 0; i < 8; i++)
		kf_tensor_set(&t, i, in[i]);
	for (int i = 0; i < 8; i++)
		assert_true(kf_tensor_get(&t, i) == want[i]);
	kf_tensor_free(&t);

	assert_int_equal(kf_tensor_alloc(&t, KF_I1, 1, d), 0);
	double b[8] = {0, -0.0, 0.5, -3, NAN, INFINITY, 1e-300, 0};
	double bw[8] = {0, 0, 1, 1, 1, 1, 1, 0};
	for (int i = 0; i < 8; i++)
		kf_tensor_set(&t, i, b[i]);
	for (int i = 0; i < 8; i++) {
		assert_true(kf_tensor_get(&t, i) == bw[i]);
		assert_true(((uint8_t *)t.data)[i] <= 1);
	}
	kf_tensor_free(&t);

	assert_int_equal(kf_tensor_alloc(&t, KF_I64, 1, d), 0);
	kf_tensor_set_i64(&t, 0, INT64_MAX);
	kf_tensor_set_i64(&t, 1, INT64_MIN);
	kf_tensor_set(&t, 2, 1e300);
	kf_tensor_set(&t, 3, -1e300);
	kf_tensor_set(&t, 4, 9223372036854775808.0); /* 2^63: one past the top */
	kf_tensor_set(&t, 5, -9223372036854775808.0);
	assert_true(kf_tensor_get_i64(&t, 0) == INT64_MAX);
	assert_true(kf_tensor_get_i64(&t, 1) == INT64_MIN);
	assert_true(kf_tensor_get_i64(&t, 2) == INT64_MAX);
	assert_true(kf_tensor_get_i64(&t, 3) == INT64_MIN);
	assert_true(kf_tensor_get_i64(&t, 4) == INT64_MAX);
	assert_true(kf_tensor_get_i64(&t, 5) == INT64_MIN);
	kf_tensor_free(&t);

	assert_int_equal(kf_tensor_alloc(&t, KF_I32, 1, d), 0);
	kf_tensor_set(&t, 0, 3e9);
	kf_tensor_set(&t, 1, -2147483648.5);
	assert_true(kf_tensor_get(&t, 0) == 2147483647);
	assert_true(kf_tensor_get(&t, 1) == -2147483648.0);
	kf_tensor_free(&t);

	/* f16 through double rounds once: 1 + 2^-11 + 2^-40 is above the tie,
	 * though via f32 it would land on the tie and round down. */
	assert_int_equal(kf_tensor_alloc(&t, KF_F16, 1, d), 0);
	kf_tensor_set(&t, 0, 1.0 + ldexp(1, -11) + ldexp(1, -40));
	assert_int_equal(((uint16_t *)t.data)[0], 0x3c01);
	kf_tensor_set(&t, 1, 0.1);
	assert_true(kf_tensor_get(&t, 1) == 0.0999755859375);
	assert_true(kf_dtype_round(KF_F16, 0.1) == 0.0999755859375);
	kf_tensor_set(&t, 2, 1e6);
	assert_true(isinf(kf_tensor_get(&t, 2)));
	kf_tensor_free(&t);

	assert_int_equal(kf_tensor_alloc(&t, KF_BF16, 1, d), 0);
	kf_tensor_set(&t, 0, 1.0 + ldexp(1, -8) + ldexp(1, -30));
	assert_int_equal(((uint16_t *)t.data)[0], 0x3f81);
	kf_tensor_set(&t, 1, -2.5);
	assert_true(kf_tensor_get(&t, 1) == -2.5);
	kf_tensor_free(&t);

	assert_int_equal(kf_tensor_alloc(&t, KF_F32, 1, d), 0);
	kf_tensor_set(&t, 0, 0.1);
	assert_true(kf_tensor_get(&t, 0) == (double)0.1f);
	kf_tensor_free(&t);
}

static void test_copy(void **st)
{
	kf_tensor a, b, z = {0}, zc;
	int64_t d[] = {3, 2};
	assert_int_equal(kf_tensor_alloc(&a, KF_F64, 2, d), 0);
	for (int i = 0; i < 6; i++)
		kf_tensor_set(&a, i, i * 1.5);
	assert_int_equal(kf_tensor_copy(&b, &a), 0);
	assert_ptr_not_equal(a.data, b.data);
	assert_true(kf_tensor_same_shape(&a, &b));
	kf_tensor_set(&a, 0, 99);
	assert_true(kf_tensor_get(&b, 0) == 0.0);
	assert_true(kf_tensor_get(&b, 5) == 7.5);
	assert_int_equal(kf_tensor_copy(&zc, &z), 0);
	assert_null(zc.data);
	b.dim[1] = 3;
	assert_false(kf_tensor_same_shape(&a, &b));
	kf_tensor_free(&a);
	kf_tensor_free(&b);
}

static void check_summary(const kf_tensor *t, const char *want)
{
	kf_buf b = {0};
	kf_tensor_summary(&b, t);
	assert_string_equal(b.p, want);
	kf_buf_free(&b);
}

static void test_summary(void **st)
{
	kf_tensor t;
	int64_t d[] = {2, 3};
	kf_tensor_alloc(&t, KF_F32, 2, d);
	for (int i = 0; i < 6; i++)
		kf_tensor_set(&t, i, i + 1);
	check_summary(&t, "f32[2,3] [1, 2, 3, 4, 5, 6] sum=21");
	kf_tensor_set(&t, 0, 0.1);
	kf_tensor_set(&t, 1, NAN);
	check_summary(&t, "f32[2,3] [0.1, nan, 3, 4, 5, 6] sum=nan");
	kf_tensor_free(&t);

	int64_t d10[] = {10};
	kf_tensor_alloc(&t, KF_I32, 1, d10);
	for (int i = 0; i < 10; i++)
		kf_tensor_set(&t, i, -i);
	check_summary(&t, "i32[10] [0, -1, -2, -3, -4, -5, -6, -7, ...] sum=-45");
	kf_tensor_free(&t);

	kf_tensor_alloc(&t, KF_F16, 0, NULL);
	kf_tensor_set(&t, 0, 0.1);
	check_summary(&t, "f16[] [0.1] sum=0.0999755859375");
	kf_tensor_free(&t);

	int64_t e[] = {0};
	kf_tensor_alloc(&t, KF_I1, 1, e);
	check_summary(&t, "i1[0] [] sum=0");
	kf_tensor_free(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_f16_edges),
		cmocka_unit_test(test_f16_exhaustive),
		cmocka_unit_test(test_bf16),
		cmocka_unit_test(test_rounding_from_double),
		cmocka_unit_test(test_alloc),
		cmocka_unit_test(test_set_get),
		cmocka_unit_test(test_copy),
		cmocka_unit_test(test_summary),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
