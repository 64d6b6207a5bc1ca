/* emit_mm_epi.c: the epilogue helpers of the contraction kernels
 * (KF_KERNEL_epi, one element; KF_KERNEL_epi2, two adjacent columns with
 * paired stores): the gemm scaling, the fused element-wise ops and the
 * stores of every output, computed on the accumulator (f16/bf16 values in
 * f32) so the result is stored once.  Split from emit_matmul.c.
 */
#include <stdio.h>
#include <string.h>
#include "emit_mm_int.h"

void kx_batch_coord(kx *k, const kf_type *OB, const kf_type *sOB, int d, kf_buf *o)
{
	int64_t after = 1, safter = 1;
	for (int e = d + 1; e < OB->rank; e++) {
		after *= OB->dim[e];
		safter = kx_smul(k, safter, sOB->dim[e]);
	}
	kf_buf_puts(o, "((z / ");
	kx_dim(k, o, after, safter);
	kf_buf_puts(o, ") % ");
	kx_dim(k, o, OB->dim[d], sOB->dim[d]);
	kf_buf_putc(o, ')');
}

void kx_bidx(kx *k, const kf_type *OB, const kf_type *sOB, bool hasM, bool hasN, const kf_type *P,
	     const kf_type *sP, kf_buf *o)
{
	int r = OB->rank + hasM + hasN;
	int64_t stride = 1, sstride = 1;
	bool any = false;
	if (!sOB || sOB->rank != OB->rank)
		sOB = OB;
	if (!sP || sP->rank != P->rank)
		sP = P;
	kf_buf_putc(o, '(');
	for (int j = P->rank - 1; j >= 0; j--) {
		int d = r - (P->rank - j);
		if (P->dim[j] != 1 && d >= 0) {
			kf_buf_puts(o, any ? " + " : "");
			if (hasN && d == r - 1) {
				kf_buf_puts(o, "col");
			} else if (hasM && d == r - 1 - hasN) {
				kf_buf_puts(o, "row");
			} else {
				kx_batch_coord(k, OB, sOB, d, o);
			}
			kf_buf_puts(o, " * ");
			kx_dim(k, o, stride, sstride);
			any = true;
		}
		stride *= P->dim[j];
		sstride = kx_smul(k, sstride, sP->dim[j]);
	}
	kf_buf_puts(o, any ? ")" : "0)");
}

/* The index into a value of type P (broadcast to the result's shape) of
 * the element at (z, row, col). */
static void bidx(kx *k, const kx_mm *mm, kf_vid v, kf_buf *o)
{
	if (mm->conv) { /* rows are output positions (emit_conv.c) */
		kx_conv_bidx(mm, kf_vtype(k->g, v), o);
		return;
	}
	kx_bidx(k, &mm->OB, &mm->sOB, !mm->a.vec, !mm->b.vec, kf_vtype(k->g, v), kx_stype(k, v), o);
}

/* Text of value v inside the epilogue helper. */
static int epi_value(kx *k, const kx_mm *mm, kf_vid v, kf_buf *o)
{
	kf_graph *g = k->g;
	if (v == kf_res(g, mm->c, 0)) {
		kf_buf_puts(o, "tc");
		return 0;
	}
	int p = kx_param(k, v);
	kf_buf ix = {0};
	bidx(k, mm, v, &ix);
	kf_buf_putc(&ix, '\0');
	kf_nid d = kf_def(g, v);
	int rc = 0;
	if (p >= 0) {
		kx_load(o, kx_dt(k, v), "p%d[%s]", p, ix.p);
	} else if (d != KF_NONE && kf_N(g, d)->op == KF_OP_CONST && kx_computed(k, v)) {
		kx_const_elem(k, d, ix.p, o);
	} else if (d != KF_NONE && kx_computed(k, v) && !kx_mm_in_chain(mm, d)) {
		for (uint32_t i = 0; i < k->nnode; i++)
			if (k->node[i] == d)
				kf_buf_printf(o, "e%u", i);
	} else {
		rc = kx_fail(k, "the contraction kernel cannot write a value computed before the contraction");
	}
	kf_buf_free(&ix);
	return rc;
}

/* "KF_KERNEL_<name>(p0, ..., o0, ...": a helper's call up to its own
 * arguments. */
static void helper_call(kx *k, kf_buf *b, const char *name)
{
	kf_buf_printf(b, "KF_KERNEL_%s(", name);
	for (uint32_t i = 0; i < k->nparam; i++)
		kf_buf_printf(b, "p%u, ", i);
	for (uint32_t i = 0; i < k->nout; i++)
		kf_buf_printf(b, "o%u, ", i);
	kf_buf_puts(b, KX_KD_ARGS); /* the sizes the kernel reads (emit_int.h) */
}

void kx_mm_epi_call(kx *k, kf_buf *b) { helper_call(k, b, "epi"); }

/* The epilogue's body: tc from acc, the ops, then per output either the
 * store o<i>[off] = ... (pair 0) or, for the paired helper, the stored
 * value into v<i>[pair - 1].  Names in scope: z, row, col, acc. */
static int epi_body(kx *k, const kx_mm *mm, kf_buf *h, int pair)
{
	kf_graph *g = k->g;
	const char *it = kx_it(k), *rct = kx_ct(mm->rt);
	kf_buf_printf(h, "  %s tc = (%s)acc;\n", rct, rct);
	if (mm->conv && mm->cv.bias >= 0) { /* one per output channel, in either layout */
		kf_buf_printf(h, "  tc = (%s)(tc + ", rct);
		kx_load(h, kx_dt(k, k->param[mm->cv.bias]), "p%d[col]", mm->cv.bias);
		kf_buf_puts(h, ");\n");
	}
	if (mm->gemm) {
		kf_dtype lt = mm->rt == KF_F64 ? KF_F64 : KF_F32;
		double alpha = kf_attr_float(g, mm->c, "alpha", 1.0), beta = kf_attr_float(g, mm->c, "beta", 1.0);
		if (alpha != 1.0) {
			kf_buf_printf(h, "  tc = (%s)(tc * ", rct);
			kx_literal(h, lt, alpha, 0);
			kf_buf_puts(h, ");\n");
		}
		if (kf_N(g, mm->c)->nin > 2) {
			kf_vid vc = kf_in(g, mm->c, 2);
			kf_buf cv = {0};
			if (epi_value(k, mm, vc, &cv) != 0)
				return -1;
			kf_buf_putc(&cv, '\0');
			kf_buf_printf(h, "  tc = (%s)(tc + ", rct);
			kx_literal(h, lt, beta, 0);
			kf_buf_printf(h, " * %s);\n", cv.p);
			kf_buf_free(&cv);
		}
	}
	for (uint32_t i = 0; i < k->nnode; i++) {
		kf_nid n = k->node[i];
		const kf_node *x = kf_N(g, n);
		if (n == mm->c || kx_mm_in_chain(mm, n) || x->op == KF_OP_CONST)
			continue;
		kf_buf txt[3] = {{0}, {0}, {0}}, e = {0};
		const char *a[3] = {"", "", ""};
		int rc = 0;
		for (uint32_t j = 0; j < x->nin && j < 3 && rc == 0; j++) {
			rc = epi_value(k, mm, kf_in(g, n, j), &txt[j]);
			kf_buf_putc(&txt[j], '\0');
			a[j] = txt[j].p;
		}
		if (rc == 0)
			rc = kx_op_expr(k, n, a, &e);
		if (rc == 0)
			kf_buf_printf(h, "  const %s e%u = %.*s;\n", kx_ct(kx_dt(k, kf_res(g, n, 0))), i, (int)e.n, e.p);
		for (int j = 0; j < 3; j++)
			kf_buf_free(&txt[j]);
		kf_buf_free(&e);
		if (rc != 0)
			return -1;
	}
	if (!pair && mm->conv && !mm->cv.cl) { /* [N, C, D..]: emit_conv.c */
		kf_buf_printf(h, "  const %s off = ", it);
		kx_conv_off(mm, h);
		kf_buf_puts(h, ";\n");
	} else if (!pair) {
		kf_buf_printf(h, "  const %s off = (%s)z * ", it, it);
		kx_dim(k, h, mm->M * mm->N, kx_smul(k, mm->sM, mm->sN));
		kf_buf_puts(h, " + row * ");
		kx_mm_dim(k, h, mm, 'N');
		kf_buf_puts(h, " + col;\n");
	}
	for (uint32_t i = 0; i < k->nout; i++) {
		kf_buf v = {0};
		if (epi_value(k, mm, k->out[i], &v) != 0) {
			kf_buf_free(&v);
			return -1;
		}
		kf_buf_putc(&v, '\0');
		if (pair)
			kf_buf_printf(h, "  v%u[%d] = ", i, pair - 1);
		else
			kf_buf_printf(h, "  o%u[off] = ", i);
		kx_store(h, kx_dt(k, k->out[i]), "%s", v.p);
		kf_buf_puts(h, ";\n");
		kf_buf_free(&v);
	}
	return 0;
}

/* "static __device__ __forceinline__ <ret> KF_KERNEL_<name>(params..., " */
static void epi_head(kx *k, kf_buf *h, const char *ret, const char *name)
{
	kf_buf sig = {0};
	kx_params(k, &sig);
	sig.n--; /* drop ')' */
	kf_buf_printf(h, "static __device__ __forceinline__ %s KF_KERNEL_%s", ret, name);
	kf_buf_put(h, sig.p, sig.n);
	kf_buf_puts(h, KX_KD_PARAMS); /* the sizes the kernel reads (emit_int.h) */
	kf_buf_free(&sig);
}

int kx_mm_epilogue(kx *k, const kx_mm *mm)
{
	kf_buf h = {0};
	epi_head(k, &h, "void", "epi");
	kf_buf_printf(&h, ", int z, %s row, %s col, %s acc)\n{\n", kx_it(k), kx_it(k), kx_mm_acc_type(mm));
	if (epi_body(k, mm, &h, 0) != 0) {
		kf_buf_free(&h);
		return -1;
	}
	kf_buf_puts(&h, "}\n");
	kf_buf_put(&k->decl, h.p, h.n);
	kf_buf_free(&h);
	return 0;
}

int kx_mm_epilogue2(kx *k, const kx_mm *mm)
{
	const char *it = kx_it(k), *acc = kx_mm_acc_type(mm);
	for (uint32_t i = 0; i < k->nout; i++)
		if (kf_dtype_size(kx_dt(k, k->out[i])) != 2)
			return 1;
	kf_buf h = {0};
	epi_head(k, &h, "void", "epi2");
	kf_buf_printf(&h, ", int z, %s row, %s colp, %s accp0, %s accp1)\n{\n", it, it, acc, acc);
	/* one 4-byte store per output where the pair is in range and every
	 * address 4-byte aligned (checked: N may be odd, a view start anywhere);
	 * else the scalar epilogue twice */
	kf_buf_printf(&h, "  const %s off = (%s)z * ", it, it);
	kx_dim(k, &h, mm->M * mm->N, kx_smul(k, mm->sM, mm->sN));
	kf_buf_puts(&h, " + row * ");
	kx_mm_dim(k, &h, mm, 'N');
	kf_buf_puts(&h, " + colp;\n  if (colp + 1 < ");
	kx_mm_dim(k, &h, mm, 'N');
	for (uint32_t i = 0; i < k->nout; i++)
		kf_buf_printf(&h, " && !((unsigned long long)(o%u + off) & 3)", i);
	kf_buf_puts(&h, ") {\n");
	for (uint32_t i = 0; i < k->nout; i++)
		kf_buf_printf(&h, "  unsigned short v%u[2];\n", i);
	for (int p = 0; p < 2; p++) {
		kf_buf_printf(&h, "  {\n  const %s col = colp + %d;\n  const %s acc = accp%d;\n", it, p, acc, p);
		if (mm->conv) /* (an epilogue may not need the column) */
			kf_buf_puts(&h, "  (void)col;\n");
		if (epi_body(k, mm, &h, p + 1) != 0) {
			kf_buf_free(&h);
			return -1;
		}
		kf_buf_puts(&h, "  }\n");
	}
	for (uint32_t i = 0; i < k->nout; i++)
		kf_buf_printf(&h, "  *(unsigned *)(o%u + off) = (unsigned)v%u[0] | ((unsigned)v%u[1] << 16);\n", i, i, i);
	kf_buf_puts(&h, "  } else {\n    ");
	kx_mm_epi_call(k, &h);
	kf_buf_puts(&h, "z, row, colp, accp0);\n    if (colp + 1 < ");
	kx_mm_dim(k, &h, mm, 'N');
	kf_buf_puts(&h, ") ");
	kx_mm_epi_call(k, &h);
	kf_buf_puts(&h, "z, row, colp + 1, accp1);\n  }\n}\n");
	kf_buf_put(&k->decl, h.p, h.n);
	kf_buf_free(&h);
	return 0;
}

bool kx_mm_epis_fits(kx *k)
{
	return k->nout == 1 && kf_dtype_size(kx_dt(k, k->out[0])) == 2;
}

int kx_mm_epilogue_s(kx *k, const kx_mm *mm, bool whole)
{
	const char *it = kx_it(k), *acc = kx_mm_acc_type(mm);
	if (!kx_mm_epis_fits(k))
		return 1;
	kf_buf h = {0};
	epi_head(k, &h, "unsigned", "epis");
	kf_buf_printf(&h, ", int z, %s row, %s colp, %s accp0, %s accp1)\n{\n", it, it, acc, acc);
	/* an out-of-range element is not computed (its operands, a bias row,
	 * may not exist): 0, staged but never stored */
	kf_buf_puts(&h, "  unsigned short v0[2] = {0, 0};\n");
	/* a sized plan's rows, whole tiles of columns: the rows past M read
	 * row M - 1's operands instead (computed, staged, never stored: the
	 * stores check the row), so no element waits on a branch; with a
	 * branch a pair the wgmma kernel ran 37% more instructions, s10g */
	if (!whole && !mm->conv && kx_varies(k, mm->sM) && mm->N % mm->cfg.bn == 0) {
		kf_buf_puts(&h, "  if (row >= ");
		kx_mm_dim(k, &h, mm, 'M');
		kf_buf_puts(&h, ") row = ");
		kx_mm_dim(k, &h, mm, 'M');
		kf_buf_puts(&h, " - 1;\n");
		whole = true;
	}
	for (int p = 0; p < 2; p++) {
		if (whole) /* no bounds to check: loads the compiler may share */
			kf_buf_puts(&h, "  {\n");
		else {
			kf_buf_puts(&h, "  if (row < ");
			kx_mm_dim(k, &h, mm, 'M');
			kf_buf_printf(&h, " && colp + %d < ", p);
			kx_mm_dim(k, &h, mm, 'N');
			kf_buf_puts(&h, ") {\n");
		}
		kf_buf_printf(&h, "  const %s col = colp + %d;\n  const %s acc = accp%d;\n", it, p, acc, p);
		if (mm->conv) /* (an epilogue may not need the column) */
			kf_buf_puts(&h, "  (void)col;\n");
		if (epi_body(k, mm, &h, p + 1) != 0) {
			kf_buf_free(&h);
			return -1;
		}
		kf_buf_puts(&h, "  }\n");
	}
	kf_buf_puts(&h, "  return (unsigned)v0[0] | ((unsigned)v0[1] << 16);\n}\n");
	kf_buf_put(&k->decl, h.p, h.n);
	kf_buf_free(&h);
	return 0;
}

void kx_mm_epis_call(kx *k, kf_buf *b) { helper_call(k, b, "epis"); }

void kx_mm_epi2_call(kx *k, kf_buf *b) { helper_call(k, b, "epi2"); }

