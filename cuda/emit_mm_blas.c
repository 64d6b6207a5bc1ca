/* emit_mm_blas.c: a contraction around a cuBLAS GEMM: what the GEMM
 * reads and writes (kf_mm_blas_plan), when one cuBLASLt call with its
 * epilogue says the whole body (kf_cublaslt_plan), and the kernels before
 * and after the GEMM (parts KF_MM_PART_A, _B, _EPI of kf_emit_node_part);
 * the same for an implicit-GEMM conv around a cuDNN call
 * (kf_conv_dnn_plan: no prologue, the epilogue part alone).
 * The analysis is emit_matmul.c's (kx_mm_analyse_node), so a contraction
 * means the same here as in the kernels; the epilogue kernel calls the
 * same KF_KERNEL_epi helper (emit_mm_epi.c) as every contraction kernel.
 *
 * requires: static shapes; keeps the graph unchanged (read only).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "emit_mm_int.h"

/* The nodes of the epilogue (not the contraction, not a prologue op, not
 * a constant), in body order, into ep (at most max); how many. */
static int epi_nodes(kf_graph *g, kf_nid n, const kx_mm *mm, kf_nid *ep, int max)
{
	const kf_node *x = kf_N(g, n);
	int ne = 0;
	if (x->op != KF_OP_FUSION)
		return 0;
	kf_foreach_node(g, x->body, m) {
		int op = kf_N(g, m)->op;
		if (m == mm->c || op == KF_OP_CONST || op == KF_OP_YIELD || kx_mm_in_chain(mm, m))
			continue;
		if (ne < max)
			ep[ne] = m;
		ne++;
	}
	return ne;
}

/* The top-level value a fusion's body argument v stands for; KF_NONE for
 * a value that is no argument. */
static kf_vid arg_input(kf_graph *g, kf_nid f, kf_vid v)
{
	const kf_block *b = &g->blk[kf_N(g, f)->body];
	for (uint32_t i = 0; i < b->narg; i++)
		if (b->arg[i] == v)
			return kf_in(g, f, i);
	return KF_NONE;
}

/* What the library writes (p->acc) and whether the epilogue part runs
 * (p->epi): the result itself when nothing follows the product (one
 * result, yielded once, no epilogue op, nothing the product carries that
 * the library leaves out: gemm's C, the conv's bias); else the body's
 * contraction value, which the epilogue part reads. */
static void set_acc(kf_graph *g, kf_nid n, const kx_mm *mm, bool carried, kf_mm_blas *p)
{
	const kf_node *x = kf_N(g, n);
	kf_nid ep[1];
	bool fusion = x->op == KF_OP_FUSION;
	kf_nid y = fusion ? kf_block_terminator(g, x->body) : KF_NONE;
	bool direct = !fusion || (x->nres == 1 && !carried && epi_nodes(g, n, mm, ep, 1) == 0 &&
				  kf_N(g, y)->nin == 1 && kf_in(g, y, 0) == kf_res(g, mm->c, 0));
	p->epi = !direct;
	p->acc = direct ? kf_res(g, n, 0) : kf_res(g, mm->c, 0);
}

bool kf_mm_blas_plan(kf_graph *g, kf_nid n, kf_mm_blas *p)
{
	kx_mm mm;
	const kf_node *x = kf_N(g, n);
	memset(p, 0, sizeof *p);
	if (kx_mm_analyse_node(g, n, &mm) || mm.rt != mm.dt)
		return false;
	bool fusion = x->op == KF_OP_FUSION, hasc = mm.gemm && kf_N(g, mm.c)->nin > 2;
	if (!fusion && hasc) /* C would need an epilogue kernel of a node that is no fusion */
		return false;
	kf_blas_gemm *bg = &p->gemm;
	*bg = (kf_blas_gemm){.dt = mm.dt, .tf32 = mm.tf32 && mm.dt == KF_F32, .M = mm.M, .N = mm.N, .K = mm.K,
			     .ta = mm.a.trans, .tb = mm.b.trans, .ob = mm.OB, .abt = mm.a.batch, .bbt = mm.b.batch,
			     .alpha = mm.gemm ? kf_attr_float(g, mm.c, "alpha", 1.0) : 1.0};
	/* A [batch.., M, K] over a B without batches is one GEMM of batch x M
	 * rows: the batches of A and of the result lie one after the other.
	 * The analysis folded them already unless the epilogue reads a value
	 * broadcast over the batches (fold_batch); the GEMM folds them anyway,
	 * the epilogue kernel then reading its result per batch */
	if (kx_mm_rows_fold(&mm)) {
		bg->M *= mm.nb;
		bg->ob.rank = bg->abt.rank = bg->bbt.rank = 0;
	}
	if (!kf_blas_fits(bg))
		return false;
	const kx_mmop *ops[2] = {&mm.a, &mm.b};
	kf_vid *buf[2] = {&p->a, &p->b};
	for (int w = 0; w < 2; w++) {
		p->pro[w] = fusion && !kx_mm_chain_raw(g, ops[w]);
		/* as stored: the fusion's input (a transpose in the chain is the
		 * trans flag); else the body's operand, which part A / B writes
		 * in the stored layout of the parameter it reads */
		*buf[w] = !fusion ? kf_in(g, n, (uint32_t)w)
			  : p->pro[w] ? kf_in(g, mm.c, (uint32_t)w)
				      : kf_in(g, n, (uint32_t)ops[w]->param);
	}
	/* no C: alpha goes to the GEMM */
	set_acc(g, n, &mm, hasc, p);
	if (p->epi)
		bg->alpha = 1.0; /* the epilogue helper applies gemm's alpha and beta C */
	return true;
}

bool kf_conv_dnn_plan(kf_graph *g, kf_nid n, kf_mm_blas *p)
{
	kx_mm mm;
	const kf_node *x = kf_N(g, n);
	memset(p, 0, sizeof *p);
	if (!kf_conv_node_shape(g, n, NULL) || kx_mm_analyse_conv(g, n, &mm) || mm.rt != mm.dt || mm.a.nchain ||
	    mm.b.nchain)
		return false;
	const kx_conv *cv = &mm.cv;
	bool fusion = x->op == KF_OP_FUSION, bias = cv->bias >= 0;
	if (!fusion && bias)
		return false;
	kf_dnn_conv *c = &p->conv;
	*c = (kf_dnn_conv){.dt = mm.dt, .tf32 = mm.tf32 && mm.dt == KF_F32, .N = cv->N, .C = cv->C, .O = cv->O};
	for (int i = 0; i < 3; i++) {
		if (cv->pb[i] != cv->pe[i]) /* cuDNN pads both ends alike */
			return false;
		c->in[i] = cv->in[i], c->out[i] = cv->out[i], c->k[i] = cv->k[i];
		c->s[i] = cv->s[i], c->d[i] = cv->d[i], c->p[i] = cv->pb[i];
	}
	if (!kf_dnn_fits(c))
		return false;
	p->dnn = true;
	p->a = fusion ? kf_in(g, n, (uint32_t)mm.a.param) : kf_in(g, n, 0);
	p->b = fusion ? kf_in(g, n, (uint32_t)mm.b.param) : kf_in(g, n, 1);
	set_acc(g, n, &mm, bias, p);
	return true;
}

/* A bias of the result: a fusion input with N elements along the last
 * dim, of the result's dtype. */
static kf_vid bias_input(kf_graph *g, kf_nid f, kf_vid v, const kx_mm *mm)
{
	const kf_type *t = kf_vtype(g, v);
	if (t->dtype != mm->rt || t->rank < 1 || t->dim[t->rank - 1] != mm->N || kf_type_numel(t) != mm->N)
		return KF_NONE;
	return arg_input(g, f, v);
}

/* The other operand of e = add(cur, x) (either order); KF_NONE when e
 * is no such add or adds cur to itself. */
static kf_vid added_to(kf_graph *g, kf_nid e, kf_vid cur)
{
	if (kf_N(g, e)->op != KF_OP_ADD || kf_N(g, e)->nin != 2)
		return KF_NONE;
	kf_vid a = kf_in(g, e, 0), b = kf_in(g, e, 1);
	return a == b ? KF_NONE : a == cur ? b : b == cur ? a : KF_NONE;
}

/* The other operand of e = add(cur, r) where r is a fusion input of the
 * result's dtype and shape (a residual: cuBLASLt's C with beta 1, added
 * before the epilogue's activation, as the graph adds it); KF_NONE
 * otherwise. */
static kf_vid residual_input(kf_graph *g, kf_nid f, kf_nid e, kf_vid cur, const kx_mm *mm)
{
	kf_vid r = added_to(g, e, cur);
	if (r == KF_NONE || kf_vtype(g, r)->dtype != mm->rt || !kf_type_same_shape(kf_vtype(g, r), &mm->O))
		return KF_NONE;
	return arg_input(g, f, r);
}

bool kf_cublaslt_plan(kf_graph *g, kf_nid n, kf_lt_plan *lp)
{
	kf_mm_blas p;
	kx_mm mm;
	if (kf_N(g, n)->op != KF_OP_FUSION || kf_N(g, n)->nres != 1 || !kf_mm_blas_plan(g, n, &p) ||
	    kx_mm_analyse_node(g, n, &mm) || p.pro[0] || p.pro[1] || kf_blas_batch(&p.gemm) != 1 ||
	    (mm.dt != KF_F16 && mm.dt != KF_BF16 && mm.dt != KF_F32))
		return false;
	memset(lp, 0, sizeof *lp);
	kf_nid ep[3], y = kf_block_terminator(g, kf_N(g, n)->body);
	int ne = epi_nodes(g, n, &mm, ep, 3), i = 0;
	kf_vid cur = kf_res(g, mm.c, 0);
	lp->alpha = mm.gemm ? kf_attr_float(g, mm.c, "alpha", 1.0) : 1.0;
	/* the bias: gemm's C (beta 1), or add(product, bias) */
	if (mm.gemm && kf_N(g, mm.c)->nin > 2) {
		if (kf_attr_float(g, mm.c, "beta", 1.0) != 1.0)
			return false;
		lp->bias = bias_input(g, n, kf_in(g, mm.c, 2), &mm);
	} else if (ne > 0 && kf_N(g, ep[0])->op == KF_OP_ADD && kf_N(g, ep[0])->nin == 2) {
		kf_vid b = added_to(g, ep[0], cur);
		if (b == KF_NONE || !kf_type_same_shape(kf_vtype(g, kf_res(g, ep[0], 0)), &mm.O))
			return false;
		lp->bias = bias_input(g, n, b, &mm);
		cur = kf_res(g, ep[i++], 0);
	} else {
		return false;
	}
	lp->epi = KF_LT_BIAS;
	lp->res = KF_NONE;
	if (i < ne && (lp->res = residual_input(g, n, ep[i], cur, &mm)) != KF_NONE)
		cur = kf_res(g, ep[i++], 0);
	if (i < ne) {
		int op = kf_N(g, ep[i])->op;
		/* cuBLASLt's GELU is the tanh form */
		bool gelu = op == KF_OP_GELU && !strcmp(kf_attr_str(g, ep[i], "approximate", "none"), "tanh");
		if ((op != KF_OP_RELU && !gelu) || kf_in(g, ep[i], 0) != cur)
			return false;
		lp->epi = op == KF_OP_RELU ? KF_LT_RELU_BIAS : KF_LT_GELU_BIAS;
		cur = kf_res(g, ep[i++], 0);
	}
	if (i != ne || lp->bias == KF_NONE || kf_N(g, y)->nin != 1 || kf_in(g, y, 0) != cur ||
	    kf_vtype(g, cur)->dtype != mm.rt)
		return false;
	lp->a = p.a, lp->b = p.b, lp->out = kf_res(g, n, 0);
	lp->M = p.gemm.M, lp->N = p.gemm.N, lp->K = p.gemm.K;
	lp->ta = p.gemm.ta, lp->tb = p.gemm.tb;
	lp->dt = mm.dt;
	lp->tf32 = p.gemm.tf32;
	return true;
}

/* ---- the parts -------------------------------------------------------------------------- */

/* Elements per block of the part kernels: 256 threads, 4 each, the
 * block's loads of one round contiguous (coalesced) and in flight
 * together. */
#define PART_BLOCK 256
#define PART_PER 4

static void part_grid(kx *k, int64_t n)
{
	k->k->block = PART_BLOCK;
	k->k->units = (n + PART_BLOCK * PART_PER - 1) / (PART_BLOCK * PART_PER);
	k->k->per_sm = -1; /* one block per 1024 elements, no loop */
}

/* Part A / B: the operand's prologue applied to every element of the
 * parameter it reads, stored in the operand's dtype at the same index. */
static int emit_prologue(kx *k, const kx_mm *mm, int w, kf_vid v)
{
	const kx_mmop *op = w ? &mm->b : &mm->a;
	const char *it = kx_it(k);
	int64_t n = kx_numel(k, k->param[op->param]);
	kf_kernel *kk = k->k;
	/* one output: the body's operand value */
	k->out[0] = v;
	k->nout = 1;
	kk->out[0] = v;
	kk->nout = 1;
	part_grid(k, n);
	kf_buf x = {0};
	kx_mm_operand(k, mm, w, "i", &x);
	kf_buf_putc(&x, '\0');
	kf_buf_printf(&k->b, "#pragma unroll\n  for (int j = 0; j < %d; j++) {\n"
		      "    const %s i = (%s)blockIdx.x * %d + j * %d + threadIdx.x;\n    if (i < ",
		      PART_PER, it, it, PART_BLOCK * PART_PER, PART_BLOCK);
	kx_dim(k, &k->b, n, kx_snumel(k, k->param[op->param]));
	kf_buf_puts(&k->b, ") o0[i] = ");
	kx_store(&k->b, mm->dt, "%s", x.p);
	kf_buf_puts(&k->b, ";\n  }\n");
	kf_buf_free(&x);
	return 0;
}

/* Part EPI: the epilogue of every result element, its accumulator read
 * from the GEMM's output (the body's matmul value, one more parameter).
 * Where every output and the accumulator are 2 bytes wide and rows have
 * an even length, a thread takes column pairs: one 4-byte load of the
 * pair, KF_KERNEL_epi2's 4-byte stores (2-byte accesses would halve what
 * each memory instruction moves). */
static int emit_epilogue(kx *k, kx_mm *mm, kf_vid acc)
{
	kf_kernel *kk = k->k;
	k->param = realloc(k->param, (k->nparam + 2) * sizeof *k->param);
	k->param[k->nparam++] = acc;
	kk->in = realloc(kk->in, (kk->nin + 2) * sizeof *kk->in);
	kk->in[kk->nin++] = acc;
	if (kx_mm_epilogue(k, mm) != 0)
		return -1;
	const char *it = kx_it(k), *at = kx_mm_acc_type(mm);
	bool pair = kf_dtype_size(mm->rt) == 2 && kx_multiple(k, mm->N, mm->sN, 2);
	int rc = pair ? kx_mm_epilogue2(k, mm) : 1;
	if (rc < 0)
		return -1;
	pair = rc == 0;
	int64_t mn = mm->M * mm->N, n = mn * mm->nb, v = pair ? 2 : 1;
	int64_t smn = kx_smul(k, mm->sM, mm->sN), sn = kx_smul(k, smn, mm->snb);
	unsigned ap = k->nparam - 1;
	part_grid(k, n / v);
	kf_buf *b = &k->b;
	kf_buf_printf(b, "#pragma unroll\n  for (int j = 0; j < %d; j++) {\n"
		      "    const %s i = ((%s)blockIdx.x * %d + j * %d + threadIdx.x) * %lld;\n    if (i >= ",
		      PART_PER, it, it, PART_BLOCK * PART_PER, PART_BLOCK, (long long)v);
	kx_dim(k, b, n, sn);
	kf_buf_puts(b, ") break;\n    const int z = (int)(i / ");
	kx_dim(k, b, mn, smn);
	kf_buf_printf(b, ");\n    const %s r = i - (%s)z * ", it, it);
	kx_dim(k, b, mn, smn);
	kf_buf_puts(b, ", row = r / ");
	kx_mm_dim(k, b, mm, 'N');
	kf_buf_puts(b, ", col = r % ");
	kx_mm_dim(k, b, mm, 'N');
	kf_buf_puts(b, ";\n");
	kf_buf ld = {0};
	if (pair) {
		const char *cv = mm->rt == KF_F16 ? "kf_h2f" : "kf_b2f";
		kf_buf_printf(&k->b, "    const unsigned a2 = *(const unsigned *)(p%u + i);\n    ", ap);
		kx_mm_epi2_call(k, &k->b);
		kf_buf_printf(&k->b, "z, row, col, (%s)%s((unsigned short)a2), (%s)%s((unsigned short)(a2 >> 16)));\n  }\n", at,
			      cv, at, cv);
	} else {
		kx_load(&ld, mm->rt, "p%u[i]", ap);
		kf_buf_putc(&ld, '\0');
		kf_buf_puts(&k->b, "    ");
		kx_mm_epi_call(k, &k->b);
		kf_buf_printf(&k->b, "z, row, col, (%s)%s);\n  }\n", at, ld.p);
	}
	kf_buf_free(&ld);
	return 0;
}

int kx_mm_emit_part(kx *k, kx_mm *mm)
{
	kf_mm_blas p;
	if (kf_N(k->g, k->at)->op != KF_OP_FUSION ||
	    !(mm->conv ? kf_conv_dnn_plan(k->g, k->at, &p) : kf_mm_blas_plan(k->g, k->at, &p)))
		return kx_fail(k, "this contraction does not run around a cuBLAS GEMM or a cuDNN conv");
	switch (k->part) {
	case KF_MM_PART_A:
	case KF_MM_PART_B: {
		int w = k->part - KF_MM_PART_A;
		return p.pro[w] ? emit_prologue(k, mm, w, w ? p.b : p.a) : 1;
	}
	case KF_MM_PART_EPI:
		return p.epi ? emit_epilogue(k, mm, p.acc) : 1;
	default:
		return kx_fail(k, "no contraction part %d", k->part);
	}
}
