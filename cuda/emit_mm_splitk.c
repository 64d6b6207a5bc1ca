/* emit_mm_splitk.c: split-K for the tiled contraction kernels (the SIMT
 * kernel of emit_matmul.c, the mma.sync kernel of emit_mma.c): where M x N
 * makes few tiles and K is long (a 64-token activation times a weight:
 * 8 tiles of 64 x 64 for 132 SMs), blockIdx.z also counts sk splits of K,
 * so sk times the blocks stream the weight at once.
 *
 * Each block computes its split's partial tile into its accumulators,
 * stores them to a workspace (a __device__ array of the kernel: split-major
 * per tile, each thread's accumulators at thread-minor addresses, so the
 * stores and loads are coalesced), fences, and counts itself on the tile's
 * counter (atomicInc wrapping to 0: ready for the next CUDA-graph replay,
 * as the split GEMV does).  The tile's last block reads every split's
 * partial (.cg: from L2) and adds them in split order 0, 1, ..., sk - 1,
 * whichever block came last: the sum, and so the result, does not depend
 * on timing.  It then runs the epilogue alone.
 *
 * requires: kx_mm filled, cfg.sk > 1; keeps the graph unchanged.
 */
#include <stdio.h>
#include "emit_mm_int.h"

/* K per split: ceil(K / sk) rounded up to whole tiles of bk */
static int64_t chunk(int64_t K, int bk, int sk)
{
	int64_t c = (K + sk - 1) / sk;
	return (c + bk - 1) / bk * bk;
}

void kf_mm_splitk_range(int64_t K, int bk, int sk, int ks, int64_t *k0, int64_t *k1)
{
	int64_t c = chunk(K, bk, sk);
	*k0 = (int64_t)ks * c;
	*k1 = *k0 + c < K ? *k0 + c : K;
}

int64_t kf_mm_splitk_ws(const kf_mm_config *c, int64_t M, int64_t N, int64_t nb)
{
	int64_t tiles = ((M + c->bm - 1) / c->bm) * ((N + c->bn - 1) / c->bn);
	return nb * tiles * (c->sk > 1 ? c->sk : 1) * c->bm * c->bn;
}

void kx_mm_splitk_head(kx *k, const kx_mm *mm)
{
	const kf_mm_config *c = &mm->cfg;
	const char *it = kx_it(k);
	int64_t ch = chunk(mm->K, c->bk, c->sk);
	kf_buf_printf(&k->b, "  const int z = blockIdx.z / %d, ks = blockIdx.z %% %d;\n", c->sk, c->sk);
	kf_buf_printf(&k->b, "  const %s kbeg = (%s)ks * %lld, kend = kbeg + %lld < %lld ? kbeg + %lld : %lld;\n", it, it,
		      (long long)ch, (long long)ch, (long long)mm->K, (long long)ch, (long long)mm->K);
}

void kx_mm_splitk_reduce(kx *k, const kx_mm *mm, int threads, int nd, const int *ext)
{
	const kf_mm_config *c = &mm->cfg;
	const char *acc = kx_mm_acc_type(mm);
	int64_t tiles = ((mm->M + c->bm - 1) / c->bm) * ((mm->N + c->bn - 1) / c->bn), nacc = 1;
	for (int d = 0; d < nd; d++)
		nacc *= ext[d];
	kf_buf_printf(&k->decl, "__device__ %s KF_KERNEL_ws[%lld];\n__device__ unsigned KF_KERNEL_cnt[%lld];\n", acc,
		      (long long)(mm->nb * tiles * c->sk * nacc * threads), (long long)(mm->nb * tiles));
	/* the loops over acc's dims and the flat index of an element */
	kf_buf loops = {0}, elem = {0}, flat = {0};
	kf_buf_puts(&elem, "acc");
	for (int d = 0; d < nd; d++) {
		kf_buf_printf(&loops, "#pragma unroll\n    for (int s%d = 0; s%d < %d; s%d++)\n", d, d, ext[d], d);
		kf_buf_printf(&elem, "[s%d]", d);
		if (d == 0)
			kf_buf_puts(&flat, "s0");
		else {
			kf_buf_putc(&flat, '\0');
			kf_buf f2 = {0};
			kf_buf_printf(&f2, "(%s) * %d + s%d", flat.p, ext[d], d);
			kf_buf_free(&flat);
			flat = f2;
		}
	}
	kf_buf_putc(&loops, '\0');
	kf_buf_putc(&elem, '\0');
	kf_buf_putc(&flat, '\0');
	kf_buf *b = &k->b;
	kf_buf_printf(b, "  {\n    const int kf_slot = z * %lld + blockIdx.y * gridDim.x + blockIdx.x;\n", (long long)tiles);
	kf_buf_printf(b, "    %s *const kf_w = KF_KERNEL_ws + (long long)kf_slot * %lld;\n", acc,
		      (long long)(c->sk * nacc * threads));
	kf_buf_printf(b, "%s      kf_w[((long long)ks * %lld + %s) * %d + threadIdx.x] = %s;\n", loops.p, (long long)nacc,
		      flat.p, threads, elem.p);
	kf_buf_printf(b, "    __threadfence();\n    __syncthreads();\n    __shared__ bool kf_last;\n"
		      "    if (threadIdx.x == 0) kf_last = atomicInc(&KF_KERNEL_cnt[kf_slot], %du) == %du;\n"
		      "    __syncthreads();\n    if (!kf_last) return;\n    __threadfence();\n", c->sk - 1, c->sk - 1);
	kf_buf_printf(b, "%s    {\n      %s t = 0;\n#pragma unroll 4\n      for (int q = 0; q < %d; q++)\n"
		      "        t += __ldcg(&kf_w[((long long)q * %lld + %s) * %d + threadIdx.x]);\n      %s = t;\n    }\n  }\n",
		      loops.p, acc, c->sk, (long long)nacc, flat.p, threads, elem.p);
	kf_buf_free(&loops);
	kf_buf_free(&elem);
	kf_buf_free(&flat);
}
