/* emit_expr.c: one op of a fused body as a CUDA expression (kx_op_expr):
 * casts as the interpreter rounds them, integers wrapped to their type,
 * the op table's CUDA forms.  Numerics follow the interpreter
 * (docs/interpreter.md), as emit_cuda.c says. */
#include <string.h>
#include "emit_int.h"

static int cast_expr(kx *k, kf_nid n, const char *a, kf_buf *o)
{
	kf_dtype from = kx_dt(k, kf_in(k->g, n, 0)), to = kx_dt(k, kf_res(k->g, n, 0));
	bool ff = kf_dtype_is_float(from), tf = kf_dtype_is_float(to);
	if (to == KF_I1) {
		kf_buf_printf(o, "(%s != 0)", a);
	} else if (tf) {
		/* the value is rounded to the target's precision, then computed in
		 * the target's compute type */
		if (to == KF_F16)
			kf_buf_printf(o, from == KF_F64 ? "kf_h2f(kf_d2h(%s))" : "kf_h2f(kf_f2h((float)%s))", a);
		else if (to == KF_BF16)
			kf_buf_printf(o, "kf_b2f(kf_f2b((float)%s))", a);
		else
			kf_buf_printf(o, "(%s)%s", kx_ct(to), a);
	} else if (ff) {
		static const char *const lim[][2] = {
			[KF_I8] = {"-128LL", "127LL"},
			[KF_I32] = {"-2147483648LL", "2147483647LL"},
			[KF_I64] = {"(-9223372036854775807LL - 1)", "9223372036854775807LL"},
		};
		kf_buf_printf(o, "kf_f2i((double)%s, %s, %s)", a, lim[to][0], lim[to][1]);
	} else {
		/* integer to integer: computed in 64 bits, wrapped by the store;
		 * the value must wrap now, as the cast's result */
		if (to == KF_I8)
			kf_buf_printf(o, "(long long)(signed char)%s", a);
		else if (to == KF_I32)
			kf_buf_printf(o, "(long long)(int)%s", a);
		else
			kf_buf_printf(o, "(long long)%s", a);
	}
	return 0;
}

/* Integers live in long long in a kernel; an op whose result type is
 * narrower (i8, i32) wraps to it, as the interpreter's store does (and
 * numpy and PyTorch: abs(INT32_MIN) is INT32_MIN, INT32_MAX + 1 is
 * INT32_MIN), before the next op of a fused body reads it.  Comparisons,
 * where, min and max stay in range; casts convert in cast_expr. */
static int op_expr_wide(kx *k, kf_nid n, const char *const *a, kf_buf *o);

static bool wraps(int op)
{
	return op == KF_OP_ADD || op == KF_OP_SUB || op == KF_OP_MUL || op == KF_OP_DIV || op == KF_OP_POW ||
	       op == KF_OP_NEG || op == KF_OP_ABS;
}

/* Whether op n reads its f16/bf16 operands as their type holds them: a
 * comparison and a cast to an integer jump where an operand moves by an
 * ulp, and a cast (to f32 above all: what amp writes around the ops it
 * keeps in f32) says the value is one of its source type. */
static bool reads_rounded(kx *k, kf_nid n)
{
	int op = kf_N(k->g, n)->op;
	return (op >= KF_OP_EQ && op <= KF_OP_GE) || op == KF_OP_CAST;
}

int kx_op_expr(kx *k, kf_nid n, const char *const *a, kf_buf *o)
{
	kf_dtype rt = kx_dt(k, kf_res(k->g, n, 0));
	if ((rt == KF_I32 || rt == KF_I8) && wraps(kf_N(k->g, n)->op)) {
		kf_buf_printf(o, "(long long)(%s)", rt == KF_I32 ? "int" : "signed char");
	}
	if (k->keep16 || !reads_rounded(k, n))
		return op_expr_wide(k, n, a, o);
	/* A fused body keeps f16/bf16 intermediates in f32 (the more precise
	 * by up to an ulp of the 16-bit type); these ops read them rounded to
	 * their type, as the interpreter stores them (test_random_emu seed
	 * 238: cast(0.5 / x) to i32 in bf16 gave 2, the interpreter's bf16
	 * quotient 3.0 gives 3; amp f16 seeds 14 and session 5's 28:
	 * pow(negative, cast(tanh(..)) to f32) was NaN where the f16 tanh is
	 * exactly -1).  A loaded value is exact already; rounding it again
	 * changes nothing. */
	kf_buf r[2] = {{0}, {0}};
	const char *b[2] = {NULL, NULL}; /* comparisons and casts: at most two operands */
	uint32_t nin = kf_N(k->g, n)->nin;
	for (uint32_t j = 0; j < nin && j < 2; j++) {
		b[j] = a[j];
		kf_dtype t = kx_dt(k, kf_in(k->g, n, j));
		if (t != KF_F16 && t != KF_BF16)
			continue;
		kf_buf_printf(&r[j], t == KF_F16 ? "kf_h2f(kf_f2h(%s))" : "kf_b2f(kf_f2b(%s))", a[j]);
		kf_buf_putc(&r[j], '\0');
		b[j] = r[j].p;
	}
	int rc = op_expr_wide(k, n, b, o);
	kf_buf_free(&r[0]);
	kf_buf_free(&r[1]);
	return rc;
}

/* kx_op_expr in the kernel's wide types (long long, float, double). */
static int op_expr_wide(kx *k, kf_nid n, const char *const *a, kf_buf *o)
{
	kf_graph *g = k->g;
	int op = kf_N(g, n)->op;
	kf_dtype rt = kx_dt(k, kf_res(g, n, 0));
	bool fl = kf_dtype_is_float(rt);
	switch (op) {
	/* integers add, subtract and multiply unsigned: a long long that
	 * overflows is undefined in C++, and NVRTC (and the host compiler of
	 * the emulation) then folds INT64_MAX + relu(x) to INT64_MAX where
	 * the interpreter, numpy and PyTorch wrap (test_random_emu, seed 215) */
	case KF_OP_ADD:
	case KF_OP_SUB:
	case KF_OP_MUL: {
		char c = op == KF_OP_ADD ? '+' : op == KF_OP_SUB ? '-' : '*';
		if (fl)
			kf_buf_printf(o, "(%s %c %s)", a[0], c, a[1]);
		else
			kf_buf_printf(o, "(long long)((unsigned long long)(%s) %c (unsigned long long)(%s))", a[0], c, a[1]);
		return 0;
	}
	case KF_OP_DIV: kf_buf_printf(o, fl ? "(%s / %s)" : "kf_div(%s, %s)", a[0], a[1]); return 0;
	case KF_OP_POW: kf_buf_printf(o, "kf_pow(%s, %s)", a[0], a[1]); return 0;
	case KF_OP_MAX: kf_buf_printf(o, "kf_max(%s, %s)", a[0], a[1]); return 0;
	case KF_OP_MIN: kf_buf_printf(o, "kf_min(%s, %s)", a[0], a[1]); return 0;
	case KF_OP_NEG: kf_buf_printf(o, fl ? "(-%s)" : "(long long)(0ULL - (unsigned long long)%s)", a[0]); return 0;
	case KF_OP_ABS: kf_buf_printf(o, "kf_abs(%s)", a[0]); return 0;
	case KF_OP_EXP: kf_buf_printf(o, "kf_exp(%s)", a[0]); return 0;
	case KF_OP_LOG: kf_buf_printf(o, "kf_log(%s)", a[0]); return 0;
	case KF_OP_SQRT: kf_buf_printf(o, "kf_sqrt(%s)", a[0]); return 0;
	case KF_OP_RSQRT: kf_buf_printf(o, "kf_rsqrt(%s)", a[0]); return 0;
	case KF_OP_TANH: kf_buf_printf(o, "kf_tanh(%s)", a[0]); return 0;
	case KF_OP_SIGMOID: kf_buf_printf(o, "kf_sigmoid(%s)", a[0]); return 0;
	case KF_OP_RELU: kf_buf_printf(o, "kf_relu(%s)", a[0]); return 0;
	case KF_OP_ERF: kf_buf_printf(o, "kf_erf(%s)", a[0]); return 0;
	case KF_OP_SILU: kf_buf_printf(o, "kf_silu(%s)", a[0]); return 0;
	case KF_OP_SIN: kf_buf_printf(o, rt == KF_F64 ? "sin(%s)" : "sinf(%s)", a[0]); return 0;
	case KF_OP_COS: kf_buf_printf(o, rt == KF_F64 ? "cos(%s)" : "cosf(%s)", a[0]); return 0;
	case KF_OP_FLOOR: kf_buf_printf(o, rt == KF_F64 ? "floor(%s)" : "floorf(%s)", a[0]); return 0;
	case KF_OP_CEIL: kf_buf_printf(o, rt == KF_F64 ? "ceil(%s)" : "ceilf(%s)", a[0]); return 0;
	case KF_OP_ROUND: kf_buf_printf(o, rt == KF_F64 ? "rint(%s)" : "rintf(%s)", a[0]); return 0;
	case KF_OP_GELU: {
		const char *ap = kf_attr_str(g, n, "approximate", "none");
		kf_buf_printf(o, strcmp(ap, "tanh") != 0 ? "kf_gelu(%s)" : k->tune.fast_gelu ? "kf_gelu_tanh_fast(%s)"
											      : "kf_gelu_tanh(%s)", a[0]);
		return 0;
	}
	case KF_OP_WHERE: kf_buf_printf(o, "(%s ? %s : %s)", a[0], a[1], a[2]); return 0;
	case KF_OP_CAST: return cast_expr(k, n, a[0], o);
	case KF_OP_EQ: kf_buf_printf(o, "(%s == %s)", a[0], a[1]); return 0;
	case KF_OP_NE: kf_buf_printf(o, "(%s != %s)", a[0], a[1]); return 0;
	case KF_OP_LT: kf_buf_printf(o, "(%s < %s)", a[0], a[1]); return 0;
	case KF_OP_LE: kf_buf_printf(o, "(%s <= %s)", a[0], a[1]); return 0;
	case KF_OP_GT: kf_buf_printf(o, "(%s > %s)", a[0], a[1]); return 0;
	case KF_OP_GE: kf_buf_printf(o, "(%s >= %s)", a[0], a[1]); return 0;
	case KF_OP_AND: kf_buf_printf(o, "(%s && %s)", a[0], a[1]); return 0;
	case KF_OP_OR: kf_buf_printf(o, "(%s || %s)", a[0], a[1]); return 0;
	case KF_OP_NOT: kf_buf_printf(o, "(!%s)", a[0]); return 0;
	/* the caller indexes each operand at the result's element (a row
	 * kernel by the operand's class, an epilogue by broadcasting), so the
	 * broadcast is already done */
	case KF_OP_BROADCAST_TO: kf_buf_printf(o, "%s", a[0]); return 0;
	default:
		break;
	}
	const kf_opinfo *oi = kf_op(k->c, op);
	if (op >= KF_NBUILTIN && oi->cuda) {
		/* a plugin op: its expression over a, b, c, with the operands
		 * substituted (identifiers a, b, c not part of a longer name) */
		for (const char *s = oi->cuda; *s; s++) {
			bool id = (*s == 'a' || *s == 'b' || *s == 'c') &&
				  (s == oi->cuda || !(s[-1] == '_' || (s[-1] >= '0' && s[-1] <= '9') ||
						      ((s[-1] | 32) >= 'a' && (s[-1] | 32) <= 'z'))) &&
				  !(s[1] == '_' || (s[1] >= '0' && s[1] <= '9') ||
				    ((s[1] | 32) >= 'a' && (s[1] | 32) <= 'z'));
			int idx = *s - 'a';
			if (id && idx < (int)kf_N(g, n)->nin)
				kf_buf_printf(o, "(%s)", a[idx]);
			else
				kf_buf_putc(o, *s);
		}
		return 0;
	}
	return kx_fail(k, "op '%s' has no CUDA form", oi->name);
}
