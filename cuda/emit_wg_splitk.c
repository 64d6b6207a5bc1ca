/* emit_wg_splitk.c: split-K for the Hopper matmul kernel (config
 * "wgBMxBNx64sSkK[s]", emit_wgmma.c), for contractions of few output tiles
 * over a long K: a Llama MLP at 128 tokens (128 x 5632 x 2048) has 44
 * tiles of 128 x 128 for 132 SMs, and each CTA would stream 512 KiB of
 * weights alone.  With K splits, K times the CTAs stream the weight at
 * once.
 *
 * The K splits of an output tile are one thread-block cluster along y
 * (grid y = M tiles x K, __cluster_dims__(1, K, 1)): CTA rank r of the
 * cluster runs K tiles [r KT / K, (r + 1) KT / K) of the ordinary
 * producer/consumer pipeline, then
 *  1. its consumers (after a named barrier: all of them are done with the
 *     ring) write their f32 accumulators into their own shared memory, over
 *     the ring: the partial tile, row-major, 16-byte chunks XOR-swizzled by
 *     row & 7 (KF_WGK_OFF: the accumulator-layout writes and the chunk reads
 *     are both conflict-free);
 *  2. the cluster meets at a barrier (release/acquire at cluster scope:
 *     every partial is visible to every CTA of the cluster);
 *  3. CTA r takes the r-th K-th of the tile's 8-column pieces, reads the K
 *     partials of each from the K CTAs' shared memory (mapa +
 *     ld.shared::cluster) and adds them in rank order 0, 1, ..., K - 1, so
 *     the sum does not depend on timing; then the epilogue on the 8 sums
 *     (with "s" and one 2-byte output: KF_KERNEL_epis, one 16-byte store;
 *     else KF_KERNEL_epi element by element);
 *  4. a last cluster barrier: no CTA leaves while others read its partial.
 * The sum never leaves the cluster: no workspace, no counter, no second
 * kernel, and the reduction is spread over all K CTAs, not left to the
 * tile's last one (emit_mm_splitk.c's way, which would read K - 1 partials
 * of 64 KiB through one SM).
 *
 * requires: kx_mm filled, cfg.algo KF_MM_WG, cfg.sk in 2..8, fixed M
 * (kx_mm_config_fits); in scope of the reduction (the consumer's): bm, bn,
 * ks, cw, warp, lane, sbase, acc.
 */
#include <stdio.h>
#include "emit_mm_int.h"

/* The device helpers: the partial's offsets, a 2-float shared store, a
 * 16-byte load from CTA `cta`'s shared memory at a's offset (guarded). */
static const char helpers[] =
	"#ifndef KF_WGK_HELPERS\n#define KF_WGK_HELPERS\n"
	"#define KF_WGK_OFF(row, col, bn) ((row) * (bn) * 4 + ((((col) >> 2) ^ ((row) & 7)) << 4) + ((col) & 3) * 4)\n"
	"__device__ __forceinline__ void kf_sts64f(unsigned a, float x, float y) {\n"
	"  asm volatile(\"st.shared.v2.f32 [%0], {%1, %2};\" :: \"r\"(a), \"f\"(x), \"f\"(y) : \"memory\"); }\n"
	"__device__ __forceinline__ void kf_ldcl128f(unsigned a, unsigned cta, float *v) {\n"
	"  asm volatile(\"{ .reg .b32 ra; mapa.shared::cluster.u32 ra, %4, %5;\"\n"
	"               \" ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [ra]; }\"\n"
	"               : \"=f\"(v[0]), \"=f\"(v[1]), \"=f\"(v[2]), \"=f\"(v[3]) : \"r\"(a), \"r\"(cta) : \"memory\"); }\n"
	"#endif\n";

int kx_wg_splitk_vec(kx *k, const kx_mm *mm)
{
	kf_buf_puts(&k->decl, helpers);
	if (!mm->cfg.ss || !kx_mm_epis_fits(k))
		return 0; /* emit_matmul.c declared KF_KERNEL_epi */
	return kx_mm_epilogue_s(k, mm, false) == 0 ? 8 : -1;
}

void kx_wg_splitk_head(kx *k, const kx_mm *mm)
{
	const kf_mm_config *c = &mm->cfg;
	long long kt = (mm->K + 63) / 64;
	/* the cluster is (1, sk, 1): blockIdx.y % sk is %cluster_ctarank */
	kf_buf_printf(&k->b, "  const int ks = blockIdx.y %% %d, bm = blockIdx.y / %d * %d, bn = blockIdx.x * %d;\n", c->sk,
		      c->sk, c->bm, c->bn);
	kf_buf_printf(&k->b, "  const int kt0 = ks * %lld / %d, kt1 = (ks + 1) * %lld / %d;\n", kt, c->sk, kt, c->sk);
}

/* Step 1: the consumer's 64 x BN accumulators into the partial tile. */
static void partial_out(kf_buf *b, const kf_mm_config *c)
{
	kf_buf_printf(b, "  asm volatile(\"bar.sync 1, %d;\" ::: \"memory\");\n", 128 * kf_wg_consumers(c));
	kf_buf_puts(b, "  {\n  const int r0 = cw * 64 + (warp & 3) * 16 + (lane >> 2);\n");
	kf_buf_printf(b, "#pragma unroll\n  for (int i = 0; i < %d; i += 2) {\n", c->bn / 2);
	kf_buf_puts(b, "    const int rl = r0 + ((i >> 1) & 1) * 8, cc = (i >> 2) * 8 + (lane & 3) * 2;\n");
	kf_buf_printf(b, "    kf_sts64f(sbase + KF_WGK_OFF(rl, cc, %d), acc[i], acc[i + 1]);\n  }\n  }\n", c->bn);
}

/* Step 3's stores of the 8 sums v[0..8) at (row, col): vec, through
 * KF_KERNEL_epis and one 16-byte chunk; else element by element. */
static void sums_out(kx *k, const kx_mm *mm, bool vec)
{
	kf_buf *b = &k->b;
	const char *it = kx_it(k);
	if (vec) {
		kf_buf_puts(b, "    unsigned w[4];\n#pragma unroll\n    for (int e = 0; e < 4; e++)\n      w[e] = ");
		kx_mm_epis_call(k, b);
		kf_buf_puts(b, "0, row, col + 2 * e, v[2 * e], v[2 * e + 1]);\n"
			       "    const unsigned w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3];\n");
		kx_wg_chunk_store(k, mm, it, false);
		return;
	}
	kf_buf_puts(b, "#pragma unroll\n    for (int e = 0; e < 8; e++)\n      if (col + e < ");
	kx_mm_dim(k, b, mm, 'N');
	kf_buf_puts(b, ") ");
	kx_mm_epi_call(k, b);
	kf_buf_puts(b, "0, row, col + e, v[e]);\n");
}

void kx_wg_splitk_reduce(kx *k, const kx_mm *mm, bool vec)
{
	const kf_mm_config *c = &mm->cfg;
	kf_buf *b = &k->b;
	const char *it = kx_it(k);
	int n8 = c->bn / 8, units = c->bm * n8, thr = 128 * kf_wg_consumers(c);
	partial_out(b, c);
	kf_buf_puts(b, "  kf_cl_sync();\n");
	/* step 3: this CTA's pieces [ks units / sk, (ks + 1) units / sk) */
	kf_buf_printf(b, "  for (int q = ks * %d / %d + (int)threadIdx.x - 128; q < (ks + 1) * %d / %d; q += %d) {\n", units,
		      c->sk, units, c->sk, thr);
	kf_buf_printf(b, "    const int rl = q / %d, cc = q %% %d * 8;\n", n8, n8);
	kf_buf_printf(b, "    const %s row = bm + rl, col = bn + cc;\n    if (row >= ", it);
	kx_mm_dim(k, b, mm, 'M');
	kf_buf_printf(b, ") break;\n    const unsigned a0 = sbase + KF_WGK_OFF(rl, cc, %d), a1 = sbase + KF_WGK_OFF(rl, cc + 4, %d);\n",
		      c->bn, c->bn);
	kf_buf_puts(b, "    float v[8], t[8];\n    kf_ldcl128f(a0, 0, v);\n    kf_ldcl128f(a1, 0, v + 4);\n");
	kf_buf_printf(b, "#pragma unroll\n    for (int r = 1; r < %d; r++) {\n", c->sk);
	kf_buf_puts(b, "      kf_ldcl128f(a0, r, t);\n      kf_ldcl128f(a1, r, t + 4);\n"
		       "#pragma unroll\n      for (int e = 0; e < 8; e++) v[e] += t[e];\n    }\n");
	sums_out(k, mm, vec);
	kf_buf_puts(b, "  }\n");
}
