/* emit_conv_wg.c: the Hopper implicit-GEMM conv (config
 * "wgcBMxBNx64sS[kK][v|s]", sm_90a): Y [M, O] = A [M, K] x W^T as in
 * emit_conv.h, with A's rows gathered from x by cp.async and the product
 * on wgmma.
 *
 * The matmul's wgmma kernel (emit_wgmma.c) loads A by TMA, which reads a
 * dense matrix; the im2col rows of a conv with a kernel larger than 1x1, a
 * stride or pads are not one (TMA's im2col mode would be, but this kernel
 * needs no tensor map and runs in the host emulation).  So every thread
 * loads: a block of BM / 64 warpgroups (2 BM threads), thread t copies the
 * 16-byte chunk t % 8 of A's rows t / 8, + BM / 4, ... (4 rows) and of B's
 * rows likewise (BN / BM x 4 rows) into a ring of S stages.  Each row is
 * 64 elements = 128 bytes stored in the 128-byte swizzle that TMA writes
 * and wgmma reads (chunk j of row r at r * 128 + ((j ^ r % 8) << 4); the
 * rows a thread copies are 8-row aligned apart, so its chunk's offset is
 * one constant).  A's rows are split into (image, first input position)
 * once, before the K loop (kx_conv_rows_setup), and each K tile only
 * decodes its column into (tap, channel): x's 16-byte runs of channels
 * (C % 8 == 0) are whole chunks, the padding is zero-filled.
 *
 * The pipeline (no producer warps: the loads are spread over all threads
 * like the mma.sync kernel's): S - 2 stages are in flight ahead of the one
 * consumed.  Step t waits for its own copies of stage t (cp.async
 * .wait_group S - 3), makes them visible to the async proxy that wgmma
 * reads through (fence.proxy.async: cp.async writes are generic-proxy
 * writes), and meets the block at a barrier; then it refills the slot of
 * stage t - 2, whose wgmma groups every warpgroup has retired
 * (wgmma.wait_group 1 before the barrier), issues the 4 wgmma m64nBNk16 of
 * its warpgroup's 64 rows on stage t and leaves them in flight.  With
 * suffix kK, blockIdx.z also counts K splits summed by the tile's last
 * block (emit_mm_splitk.c).  The epilogue is the wgmma kernel's: "v"
 * paired stores, "s" staged 16-byte stores, else per element.
 *
 * requires: an implicit-GEMM conv (channels last, one group) of f16/bf16,
 * C % 8 == 0, x and w read as stored.
 */
#include <stdio.h>
#include "emit_mm_int.h"

int kx_conv_emit_wgc(kx *k, kx_mm *mm)
{
	const kf_mm_config *c = &mm->cfg;
	int S = c->stages, BM = c->bm, BN = c->bn, T = 2 * BM, R = T / 8, asz = BM * 128, bsz = BN * 128;
	const char *ty = mm->dt == KF_BF16 ? "bf16" : "f16", *it = kx_it(k);
	kf_buf *b = &k->b;
	if (!mm->conv || (mm->dt != KF_F16 && mm->dt != KF_BF16) || mm->b.st != mm->dt || mm->b.nchain ||
	    !kx_conv_a_raw(k, mm, 2) || mm->K % 8)
		return kx_fail(k, "the wgmma conv needs f16/bf16 x and w read as stored, channels in 16-byte runs");
	kf_buf_puts(&k->decl, kx_mm_helpers());
	kf_buf_puts(&k->decl, kx_wg_helpers());
	kx_wg_mma_fn(&k->decl, ty, BN, 0, false);
	k->k->sm90a = true;
	k->k->block = T;
	k->k->units = (mm->N + BN - 1) / BN;
	k->k->grid_y = (unsigned)((mm->M + BM - 1) / BM);
	k->k->grid_z = c->sk > 1 ? (unsigned)c->sk : 1;
	/* "s": the staged epilogue where there is one 2-byte output, else
	 * "v"'s or the scalar one (as in emit_wgmma.c) */
	int sc = kx_wg_stage_pick(k, mm, c);
	if (sc < 0)
		return -1;
	int pair = c->vs && sc == 0 ? kx_mm_epilogue2(k, mm) : 1;
	if (pair < 0)
		return -1;
	/* + 1024: the window aligned up to the 1024 bytes of the swizzle */
	k->k->smem = S * (asz + bsz) + 1024 + (sc > 0 ? (BM / 64) * 64 * sc * 2 : 0);
	kf_buf_puts(b, "  extern __shared__ __align__(1024) unsigned char kf_smem[];\n"
		       "  const unsigned sbase = (kf_wg_saddr(kf_smem) + 1023u) & ~1023u;\n"
		       "  unsigned char *const kf_ring = kf_smem + (sbase - kf_wg_saddr(kf_smem));\n"
		       "  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, cw = threadIdx.x >> 7;\n");
	if (c->sk > 1) { /* this block's K tiles: [kt0, kt0 + nkt) */
		kx_mm_splitk_head(k, mm);
		kf_buf_puts(b, "  const int kt0 = (int)(kbeg / 64), nkt = kend > kbeg ? (int)((kend - kbeg + 63) / 64) : 0;\n");
	} else {
		kf_buf_printf(b, "  const int kt0 = 0, nkt = %lld;\n", (long long)((mm->K + 63) / 64));
	}
	kf_buf_printf(b, "  const %s bm = (%s)blockIdx.y * %d, bn = (%s)blockIdx.x * %d;\n", it, it, BM, it, BN);
	/* the thread's chunk's offset in every row it copies (their rows are
	 * 8-aligned apart: one swizzle) */
	kf_buf_puts(b, "  const unsigned kf_sx = ((threadIdx.x & 7) ^ ((threadIdx.x >> 3) & 7)) << 4;\n");
	kx_conv_rows_setup(k, mm, BM, 8, 8, T);
	kf_buf_printf(b, "  float acc[%d];\n#pragma unroll\n  for (int i = 0; i < %d; i++) acc[i] = 0.0f;\n", BN / 2, BN / 2);
	/* one stage's copies: A gathered, W's rows [bn, bn + BN) of K tile kt */
	kf_buf_printf(b, "  auto load = [&](int slot, int kt) {\n    unsigned char *const sa = kf_ring + slot * %d, *const sb = kf_ring + %d + slot * %d;\n"
		      "    const %s k0 = (%s)kt * 64;\n", asz, S * asz, bsz, it, it);
	kx_conv_rows_load(k, mm, BM, 8, T, "sa + r * 128 + kf_sx", mm->a.param);
	kf_buf_printf(b, "#pragma unroll\n    for (int i = 0; i < %d; i++) {\n", BN * 8 / T);
	kf_buf_printf(b, "      const int r = (threadIdx.x >> 3) + i * %d;\n      const %s n = bn + r, gk = k0 + kf_cf;\n", R, it);
	kf_buf_printf(b, "      const bool ok = n < %lld && gk < %lld;\n", (long long)mm->N, (long long)mm->K);
	kf_buf_printf(b, "      kf_cp16(sb + r * 128 + kf_sx, p%d + (ok ? n * %lldLL + gk : 0), ok);\n    }\n  };\n",
		      mm->b.param, (long long)mm->K);
	/* the pipeline: S - 2 stages ahead */
	kf_buf_printf(b, "#pragma unroll\n  for (int s = 0; s < %d; s++) {\n    if (s < nkt) load(s, kt0 + s);\n    kf_cp_commit();\n  }\n",
		      S - 2);
	kf_buf_printf(b, "  for (int t = 0; t < nkt; t++) {\n    kf_cp_wait<%d>();\n", S - 3);
	kf_buf_puts(b, "    asm volatile(\"fence.proxy.async.shared::cta;\" ::: \"memory\");\n    __syncthreads();\n");
	kf_buf_printf(b, "    if (t + %d < nkt) load((t + %d) %% %d, kt0 + t + %d);\n    kf_cp_commit();\n", S - 2, S - 2, S,
		      S - 2);
	kf_buf_printf(b, "    const unsigned sa = sbase + (t %% %d) * %d + cw * 8192, sb = sbase + %d + (t %% %d) * %d;\n", S, asz,
		      S * asz, S, bsz);
	kf_buf_printf(b, "    kf_wg_fence();\n#pragma unroll\n    for (int kk = 0; kk < 4; kk++)\n"
		      "      kf_wgmma_%s_n%d_t0(acc, kf_wg_desc(sa + kk * 32, 16, 1024), kf_wg_desc(sb + kk * 32, 16, 1024));\n"
		      "    kf_wg_commit();\n    kf_wg_wait<1>();\n  }\n  kf_wg_wait<0>();\n",
		      ty, BN);
	kf_buf_printf(b, "#pragma unroll\n  for (int i = 0; i < %d; i++) asm volatile(\"\" : \"+f\"(acc[i]) :: \"memory\");\n", BN / 2);
	if (c->sk > 1) {
		int ext[1] = {BN / 2};
		kx_mm_splitk_reduce(k, mm, T, 1, ext);
	}
	if (sc > 0)
		kx_wg_epilogue_staged(k, mm, sc, "cw * 64", "", false);
	else
		kx_wg_epilogue(k, mm, pair == 0, "cw * 64", "");
	return 0;
}
