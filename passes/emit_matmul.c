/* emit_matmul.c: matmul (numpy semantics: batch dims broadcast, 1-D
 * operands promoted) and gemm (alpha * op(A) op(B) + beta * C) as a tiled
 * kernel: 16x16 output tiles, operands staged through shared memory,
 * batches on grid z.  Contractions are never fused; this kernel lets the
 * CUDA backend run every graph, it is not a tuned GEMM.
 */
#include <stdlib.h>
#include <string.h>
#include "emit_int.h"

static kf_type sub_type(const kf_type *t, int from, int to)
{
	kf_type r = {.dtype = t->dtype, .rank = (uint8_t)(to > from ? to - from : 0)};
	for (int d = from; d < to; d++)
		r.dim[d - from] = t->dim[d];
	return r;
}

int kx_emit_matmul(kx *k)
{
	kf_graph *g = k->g;
	kf_nid n = k->node[0];
	const kf_node *x = kf_N(g, n);
	kf_vid va = kf_in(g, n, 0), vb = kf_in(g, n, 1), res = kf_res(g, n, 0);
	kf_type A = *kf_vtype(g, va), B = *kf_vtype(g, vb), O = *kf_vtype(g, res);
	bool gemm = x->op == KF_OP_GEMM;
	bool ta = gemm && kf_attr_int(g, n, "trans_a", 0), tb = gemm && kf_attr_int(g, n, "trans_b", 0);
	int64_t M, K, N;
	kf_type AB, BB, OB; /* batch shapes */
	if (A.rank == 1) {
		M = 1;
		K = A.dim[0];
		AB = sub_type(&A, 0, 0);
	} else {
		M = ta ? A.dim[A.rank - 1] : A.dim[A.rank - 2];
		K = ta ? A.dim[A.rank - 2] : A.dim[A.rank - 1];
		AB = sub_type(&A, 0, A.rank - 2);
	}
	if (B.rank == 1) {
		N = 1;
		BB = sub_type(&B, 0, 0);
	} else {
		N = tb ? B.dim[B.rank - 2] : B.dim[B.rank - 1];
		BB = sub_type(&B, 0, B.rank - 2);
	}
	int drop = (A.rank == 1 ? 0 : 1) + (B.rank == 1 ? 0 : 1);
	OB = sub_type(&O, 0, O.rank - drop);
	int64_t nb = kf_type_numel(&OB);
	if (nb > 65535)
		return kx_fail(k, "matmul with more than 65535 batches");
	kf_dtype dt = kx_dt(k, res);
	const char *ct = kx_ct(dt), *it = kx_it(k);
	kf_buf *b = &k->b;
	k->k->block = 256;
	k->k->units = (N + 15) / 16;
	k->k->grid_y = (unsigned)((M + 15) / 16);
	k->k->grid_z = (unsigned)(nb > 0 ? nb : 1);
	int pa = kx_param(k, va), pb = kx_param(k, vb);
	kf_buf_printf(b, "  __shared__ %s kf_as[16][17], kf_bs[16][17];\n", ct);
	kf_buf_printf(b, "  const int tx = threadIdx.x %% 16, ty = threadIdx.x / 16;\n  const %s z = blockIdx.z;\n", it);
	kf_buf_printf(b, "  const %s m = blockIdx.y * 16 + ty, n = blockIdx.x * 16 + tx;\n", it);
	kf_buf ia = {0}, ib = {0};
	int64_t arg;
	kx_bcast_expr(&OB, &AB, "z", &ia, &arg);
	kx_bcast_expr(&OB, &BB, "z", &ib, &arg);
	kf_buf_putc(&ia, '\0');
	kf_buf_putc(&ib, '\0');
	kf_buf_printf(b, "  const %s aoff = (%s) * %lld, boff = (%s) * %lld;\n", it, ia.p, (long long)(M * K), ib.p,
		      (long long)(K * N));
	kf_buf_free(&ia);
	kf_buf_free(&ib);
	kf_buf_printf(b, "  %s acc = 0;\n  for (%s k0 = 0; k0 < %lld; k0 += 16) {\n", ct, it, (long long)K);
	/* A tile: row m, column k0 + tx; B tile: row k0 + ty, column n */
	char lv[128];
	kf_buf_printf(b, "    kf_as[ty][tx] = (m < %lld && k0 + tx < %lld) ? ", (long long)M, (long long)K);
	if (ta)
		snprintf(lv, sizeof lv, "p%d[aoff + (k0 + tx) * %lld + m]", pa, (long long)M);
	else
		snprintf(lv, sizeof lv, "p%d[aoff + m * %lld + k0 + tx]", pa, (long long)K);
	kf_buf_printf(b, "(%s)", ct);
	kx_load(b, (kf_dtype)A.dtype, "%s", lv);
	kf_buf_printf(b, " : (%s)0;\n", ct);
	kf_buf_printf(b, "    kf_bs[ty][tx] = (k0 + ty < %lld && n < %lld) ? ", (long long)K, (long long)N);
	if (tb)
		snprintf(lv, sizeof lv, "p%d[boff + n * %lld + k0 + ty]", pb, (long long)K);
	else
		snprintf(lv, sizeof lv, "p%d[boff + (k0 + ty) * %lld + n]", pb, (long long)N);
	kf_buf_printf(b, "(%s)", ct);
	kx_load(b, (kf_dtype)B.dtype, "%s", lv);
	kf_buf_printf(b, " : (%s)0;\n", ct);
	kf_buf_puts(b, "    __syncthreads();\n#pragma unroll\n    for (int kk = 0; kk < 16; kk++) acc += kf_as[ty][kk] * kf_bs[kk][tx];\n"
		       "    __syncthreads();\n  }\n");
	kf_buf_printf(b, "  if (m < %lld && n < %lld) {\n", (long long)M, (long long)N);
	if (gemm) {
		kf_buf_printf(b, "    acc = acc * (%s)", ct);
		kx_literal(b, dt == KF_F64 ? KF_F64 : KF_F32, kf_attr_float(g, n, "alpha", 1.0), 0);
		kf_buf_puts(b, ";\n");
		if (x->nin > 2) {
			kf_vid vc = kf_in(g, n, 2);
			kf_type MN = {.dtype = O.dtype, .rank = 2, .dim = {M, N}};
			kf_buf ic = {0};
			/* C broadcast to [M, N], read at m * N + n */
			kf_buf_printf(b, "    const %s mn = m * %lld + n;\n", it, (long long)N);
			kx_bcast_expr(&MN, kf_vtype(g, vc), "mn", &ic, &arg);
			kf_buf_putc(&ic, '\0');
			kf_buf_printf(b, "    acc = acc + (%s)", ct);
			kx_literal(b, dt == KF_F64 ? KF_F64 : KF_F32, kf_attr_float(g, n, "beta", 1.0), 0);
			kf_buf_printf(b, " * (%s)", ct);
			kx_load(b, kx_dt(k, vc), "p%d[%s]", kx_param(k, vc), ic.p);
			kf_buf_puts(b, ";\n");
			kf_buf_free(&ic);
		}
	}
	kf_buf_printf(b, "    o0[z * %lld + m * %lld + n] = ", (long long)(M * N), (long long)N);
	kx_store(b, dt, "acc");
	kf_buf_puts(b, ";\n  }\n");
	return 0;
}
