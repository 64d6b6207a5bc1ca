/* emit_reduce_generic.c: the generic reduction kernel (kx_emit_reduce:
 * any axes; one thread per output element, or a block's rows splitting a
 * long reduction: kx_split_rows, kx_split_open, kx_tree_combine, which the
 * column kernels share). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "emit_int.h"
#include "fusion.h"

/* Index text of coordinate list: sum over dims in `sel` of coord(x in the
 * shape of those dims) * stride in full. */
static void sub_index(kf_buf *o, const kf_type *full, const bool *sel, bool want, const char *x)
{
	int64_t st[KF_MAX_RANK], s = 1;
	for (int d = full->rank - 1; d >= 0; d--) {
		st[d] = s;
		s *= full->dim[d];
	}
	int64_t inner = 1;
	int n = 0;
	kf_buf_putc(o, '(');
	for (int d = full->rank - 1; d >= 0; d--) {
		if (sel[d] != want || full->dim[d] == 1)
			continue;
		if (n++)
			kf_buf_puts(o, " + ");
		kf_buf_printf(o, "((%s / %lld) %% %lld) * %lld", x, (long long)inner, (long long)full->dim[d],
			      (long long)st[d]);
		inner *= full->dim[d];
	}
	if (!n)
		kf_buf_putc(o, '0');
	kf_buf_putc(o, ')');
}

/* The accumulator's C type: floats accumulate in double here, as the
 * interpreter does. */
static const char *acc_type(kf_dtype dt) { return kf_dtype_is_float(dt) ? "double" : kx_ct(dt); }

/* The reduction's loop over r < RN into acc (declared by the caller). */
static void reduce_loop(kx *k, kf_buf *b, const kf_type *X, const bool *sel, int p, const char *o, const char *acc,
			int64_t RN, const char *r0, const char *step)
{
	const char *it = kx_it(k);
	kf_buf ix = {0};
	sub_index(&ix, X, sel, true, "r");
	kf_buf_putc(&ix, '\0');
	kf_buf_printf(b, "#pragma unroll 4\n    for (%s r = %s; r < %lld; r += %s) {\n      const %s v = (%s)", it, r0,
		      (long long)RN, step, acc, acc);
	kx_load(b, (kf_dtype)X->dtype, "p%d[base + %s]", p, ix.p);
	kf_buf_free(&ix);
	if (strcmp(o, "sum") == 0)
		kf_buf_puts(b, ";\n      acc += v;\n    }\n");
	else
		kf_buf_printf(b, ";\n      acc = kf_%s(acc, v);\n    }\n", o);
}

int kx_split_rows(int64_t L, int TX)
{
	int TY = 1;
	while (TY * 2 * TX <= 1024 && TY * 2 * 16 <= L)
		TY *= 2;
	while (TY * TX < 32)
		TY *= 2;
	return TY;
}

void kx_tree_combine(kf_buf *b, const char *var, const char *arr, const char *op, int TY)
{
	kf_buf_printf(b, "    %s[ty][tx] = %s;\n    __syncthreads();\n", arr, var);
	kf_buf_printf(b, "    for (int s = %d; s > 0; s >>= 1) {\n      if (ty < s) %s[ty][tx] = ", TY / 2, arr);
	if (op)
		kf_buf_printf(b, "kf_%s(%s[ty][tx], %s[ty + s][tx]);\n", op, arr, arr);
	else
		kf_buf_printf(b, "%s[ty][tx] + %s[ty + s][tx];\n", arr, arr);
	kf_buf_printf(b, "      __syncthreads();\n    }\n    %s = %s[0][tx];\n    __syncthreads();\n", var, arr);
}

int kx_split_open(kx *k, const char *var, int64_t M, int TX, int TY)
{
	const char *it = kx_it(k);
	k->k->block = TX * TY;
	k->k->units = (M + TX - 1) / TX;
	if (k->k->units >= (1LL << 31))
		return kx_fail(k, "a split reduction with more than 2^31 blocks");
	kf_buf_printf(&k->b, "  const int tx = threadIdx.x %% %d, ty = threadIdx.x / %d;\n", TX, TX);
	/* block-uniform: every thread reaches each __syncthreads; a unit past
	 * M computes unit M - 1's values and stores nothing */
	kf_buf_printf(&k->b, "  for (%s kf_b = (%s)blockIdx.x * %d; kf_b < %lld; kf_b += (%s)gridDim.x * %d) {\n", it, it, TX,
		      (long long)M, it, TX);
	kf_buf_printf(&k->b, "    const bool kf_live = kf_b + tx < %lld;\n    const %s %s = kf_live ? kf_b + tx : %lld;\n",
		      (long long)M, it, var, (long long)(M - 1));
	return 0;
}

/* reduce_{sum,mean,max,min} over its axes.  Many outputs over short
 * ranges: a thread per output.  A long range (a global pool over 112x112
 * positions, an .any() over a whole tensor): a thread per output would
 * walk it alone (a T5 isinf().any() took 1.45 ms, an EfficientNet
 * squeeze-excite pool 0.78 ms on the H200), so a block takes TX outputs,
 * its TY thread rows (kx_split_rows: up to 1024 / TX, 16 or more elements
 * each) split the range, and a shared-memory tree combines them.  TX = 8 consecutive outputs when X's
 * last dim is kept (a channels-last pool: a thread row then reads 8
 * adjacent elements), else TX = 1 and the rows read the range itself
 * coalesced.  The sum's order differs from the interpreter's sequential
 * one only by double rounding. */
static int generic_reduce(kx *k, kf_nid n, kf_type X, kf_dtype dt, int p)
{
	kf_graph *g = k->g;
	const kf_node *x = kf_N(g, n);
	const char *it = kx_it(k), *acc = acc_type(dt);
	kf_buf *b = &k->b;
	bool sel[KF_MAX_RANK] = {0};
	int64_t M, RN = 1;
	int64_t ax[KF_MAX_RANK];
	int na = kf_attr_ints(g, n, "axes", ax, KF_MAX_RANK);
	for (int d = 0; d < X.rank; d++)
		sel[d] = na <= 0;
	for (int i = 0; i < na && i < KF_MAX_RANK; i++)
		sel[ax[i] < 0 ? ax[i] + X.rank : ax[i]] = true;
	for (int d = 0; d < X.rank; d++)
		RN *= sel[d] ? X.dim[d] : 1;
	M = kx_numel(k, kf_res(g, n, 0));
	const char *o = x->op == KF_OP_REDUCE_MAX ? "max" : x->op == KF_OP_REDUCE_MIN ? "min" : "sum";
	const char *fin = x->op == KF_OP_REDUCE_MEAN ? "    acc = acc / (%s)%lld;\n" : "";
	if (RN <= 64) {
		kf_buf_printf(b, "  for (%s o = blockIdx.x * (%s)blockDim.x + threadIdx.x; o < %lld; o += (%s)gridDim.x * blockDim.x) {\n",
			      it, it, (long long)M, it);
		kf_buf_printf(b, "    const %s base = ", it);
		sub_index(b, &X, sel, false, "o");
		kf_buf_printf(b, ";\n    %s acc = %s;\n", acc, kx_red_ident(o, acc));
		reduce_loop(k, b, &X, sel, p, o, acc, RN, "0", "1");
		kf_buf_printf(b, fin, acc, (long long)RN);
		kf_buf_puts(b, "    o0[o] = ");
		kx_store(b, dt, "acc");
		kf_buf_puts(b, ";\n  }\n");
		k->k->units = (M + 255) / 256;
		return 0;
	}
	int TX = X.rank > 0 && !sel[X.rank - 1] && X.dim[X.rank - 1] > 1 ? 8 : 1, TY = kx_split_rows(RN, TX);
	kf_buf_printf(b, "  __shared__ %s kf_red[%d][%d];\n", acc, TY, TX);
	if (kx_split_open(k, "o", M, TX, TY) != 0)
		return -1;
	kf_buf_printf(b, "    %s acc = %s;\n    const %s base = ", acc, kx_red_ident(o, acc), it);
	sub_index(b, &X, sel, false, "o");
	kf_buf_puts(b, ";\n");
	char step[16];
	snprintf(step, sizeof step, "%d", TY);
	reduce_loop(k, b, &X, sel, p, o, acc, RN, "ty", step);
	kx_tree_combine(b, "acc", "kf_red", strcmp(o, "sum") == 0 ? NULL : o, TY);
	kf_buf_puts(b, "    if (ty == 0 && kf_live) {\n");
	kf_buf_printf(b, fin, acc, (long long)RN);
	kf_buf_puts(b, "      o0[o] = ");
	kx_store(b, dt, "acc");
	kf_buf_puts(b, ";\n    }\n  }\n");
	return 0;
}

/* The rows of generic_row: M rows of A elements I apart; split mode (TY > 1)
 * as generic_reduce's: TX rows a block, TY threads along each. */
typedef struct grow {
	int64_t M, A, I;
	int TX, TY;
	const char *acc, *xv;
	kf_dtype xt;
} grow;

/* Opens a pass over a row's elements j, v the element (closed by the caller). */
static void grow_pass(kx *k, const grow *r)
{
	kf_buf *b = &k->b;
	if (r->TY == 1)
		kf_buf_printf(b, "    for (%s j = 0; j < %lld; j++) {\n      const %s v = ", kx_it(k), (long long)r->A, r->acc);
	else
		kf_buf_printf(b, "    for (%s j = ty; j < %lld; j += %d) {\n      const %s v = ", kx_it(k), (long long)r->A,
			      r->TY, r->acc);
	kx_load(b, r->xt, "%s", r->xv);
	kf_buf_puts(b, ";\n");
}

/* The third pass's body: y, the output element, from v and s1, s2 (and a
 * layer norm's scale and bias), stored; closes the pass and the rows. */
static int grow_write(kx *k, kf_nid n, const grow *r, kf_type X, int a, kf_dtype dt)
{
	kf_graph *g = k->g;
	const kf_node *x = kf_N(g, n);
	kf_buf *b = &k->b;
	kf_buf_printf(b, "      %s y = ", r->acc);
	if (x->op == KF_OP_SOFTMAX) {
		kf_buf_puts(b, "kf_exp(v - s1) / s2");
	} else if (x->op == KF_OP_LOG_SOFTMAX) {
		kf_buf_puts(b, "v - s1 - kf_log(s2)");
	} else {
		kf_buf_puts(b, "(v - s1) * s2");
		kf_type R = {.dtype = X.dtype, .rank = (uint8_t)(X.rank - a)};
		for (int d = a; d < X.rank; d++)
			R.dim[d - a] = X.dim[d];
		for (uint32_t i = 1; i < x->nin; i++) {
			kf_vid u = kf_in(g, n, i);
			kf_buf ix = {0};
			int64_t arg, sarg;
			kx_bcast_expr(k, &R, NULL, kf_vtype(g, u), NULL, "j", &ix, &arg, &sarg);
			kf_buf_putc(&ix, '\0');
			kf_buf_printf(b, " %s (%s)", i == 1 ? "*" : "+", r->acc);
			kx_load(b, kx_dt(k, u), "p%d[%s]", kx_param(k, u), ix.p);
			kf_buf_free(&ix);
		}
	}
	kf_buf_printf(b, ";\n      %so0[base + j * %lld] = ", r->TY > 1 ? "if (kf_live) " : "", (long long)r->I);
	kx_store(b, dt, "y");
	kf_buf_puts(b, ";\n    }\n  }\n");
	return 0;
}

/* softmax, log_softmax, layer_norm: three passes over each row (the max or
 * mean, the sum of exponentials or squared deviations, the outputs).  A
 * thread per row; long rows of few (a softmax over 65536 keys, a layer
 * norm over a non-last axis of a small batch) split over a block, each
 * pass's accumulator combined (kx_tree_combine) before the next reads it. */
static int generic_row(kx *k, kf_nid n, kf_type X, kf_dtype dt, int p)
{
	kf_graph *g = k->g;
	const kf_node *x = kf_N(g, n);
	const char *it = kx_it(k);
	kf_buf *b = &k->b;
	bool ln = x->op == KF_OP_LAYER_NORM;
	int a = (int)kf_attr_int(g, n, "axis", -1);
	if (a < 0)
		a += X.rank;
	grow r = {.A = 1, .I = 1, .acc = acc_type(dt), .xt = (kf_dtype)X.dtype};
	int64_t O = 1;
	for (int d = 0; d < X.rank; d++)
		*(d < a ? &O : d == a || ln ? &r.A : &r.I) *= X.dim[d];
	r.M = O * r.I;
	char xv[64];
	snprintf(xv, sizeof xv, "p%d[base + j * %lld]", p, (long long)r.I);
	r.xv = xv;
	r.TX = r.I > 1 ? 8 : 1;
	r.TY = r.A >= 64 && r.M < 65536 ? kx_split_rows(r.A, r.TX) : 1;
	if (r.TY == 1) {
		r.TX = 1;
		k->k->units = (r.M + 255) / 256;
		kf_buf_printf(b, "  for (%s m = blockIdx.x * (%s)blockDim.x + threadIdx.x; m < %lld; m += (%s)gridDim.x * blockDim.x) {\n",
			      it, it, (long long)r.M, it);
	} else {
		kf_buf_printf(b, "  __shared__ %s kf_red[%d][%d];\n", r.acc, r.TY, r.TX);
		if (kx_split_open(k, "m", r.M, r.TX, r.TY) != 0)
			return -1;
	}
	kf_buf_printf(b, "    const %s base = (m / %lld) * %lld + m %% %lld;\n", it, (long long)r.I,
		      (long long)(r.A * r.I), (long long)r.I);
	kf_buf_printf(b, "    %s s1 = %s, s2 = 0;\n", r.acc, ln ? "0" : kx_red_ident("max", r.acc));
	grow_pass(k, &r);
	kf_buf_printf(b, "      s1 = %s;\n    }\n", ln ? "s1 + v" : "kf_max(s1, v)");
	if (r.TY > 1)
		kx_tree_combine(b, "s1", "kf_red", ln ? NULL : "max", r.TY);
	if (ln)
		kf_buf_printf(b, "    s1 = s1 / %lld;\n", (long long)r.A);
	grow_pass(k, &r);
	kf_buf_printf(b, "      s2 += %s;\n    }\n", ln ? "(v - s1) * (v - s1)" : "kf_exp(v - s1)");
	if (r.TY > 1)
		kx_tree_combine(b, "s2", "kf_red", NULL, r.TY);
	if (ln) {
		kf_buf_printf(b, "    s2 = 1.0 / sqrt(s2 / %lld + ", (long long)r.A);
		kx_literal(b, KF_F64, kf_attr_float(g, n, "epsilon", 1e-5), 0);
		kf_buf_puts(b, ");\n");
	}
	grow_pass(k, &r);
	return grow_write(k, n, &r, X, a, dt);
}

int kx_emit_reduce(kx *k)
{
	if (k->nnode != 1)
		return kx_fail(k, "a generic reduction kernel runs one op");
	kf_graph *g = k->g;
	kf_nid n = k->node[0];
	int op = kf_N(g, n)->op, p = kx_param(k, kf_in(g, n, 0));
	kf_type X = *kf_vtype(g, kf_in(g, n, 0));
	kf_dtype dt = kx_dt(k, kf_res(g, n, 0));
	k->k->block = 256;
	if (op == KF_OP_REDUCE_SUM || op == KF_OP_REDUCE_MEAN || op == KF_OP_REDUCE_MAX || op == KF_OP_REDUCE_MIN)
		return generic_reduce(k, n, X, dt, p);
	if (op != KF_OP_SOFTMAX && op != KF_OP_LOG_SOFTMAX && op != KF_OP_LAYER_NORM)
		return kx_fail(k, "op '%s' has no CUDA implementation", kf_op(k->c, op)->name);
	return generic_row(k, n, X, dt, p);
}
