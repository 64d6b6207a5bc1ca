/* mm_cost.c: the cost model: which config a contraction runs when no
 * tuned one applies (no `tile`, no $KFUSE_MATMUL_TILE, no line of the tune
 * cache or of the shipped table: cuda/tune.h).
 *
 * The rule is a floor, not a guess: an own kernel only in a shape class
 * where it was measured on the H200 at least as fast as cuBLAS with the
 * same epilogue; everywhere else a library route (cuBLASLt with its fused
 * epilogue where the body is bias [+ relu | gelu-tanh], else a cuBLAS GEMM
 * and the fused epilogue kernel), which is that bar by construction.  A
 * class enters the own list only with a measurement, written in
 * docs/matmul.md ("The default") beside the results file it comes from.
 *
 * requires: nothing (pure); tests/unit/test_mm_cost.c checks the table.
 */
#include <stdio.h>
#include <string.h>
#include "emit_matmul.h"

/* A class where the own default kernel is measured at least as fast as
 * cuBLAS + epilogue: the own config the heuristic gives (emit_matmul.c)
 * starts with `own` and the shape matches. */
typedef struct own_class {
	const char *name;     /* shown in reports */
	const char *own;      /* the own default config ("gemv": any GEMV) */
	int64_t min_m, min_n, min_k; /* the extents around the measured shapes */
	bool nolt;            /* only where there is an epilogue and cuBLASLt cannot take it */
	bool fixed;           /* only in a plan of fixed sizes: the wgmma kernel of a
			       * sized plan (M an argument) runs 1.12x its static
			       * time at 8192 x 3072 x 768 (0.0978 against 0.0872
			       * ms, s10h; 1.58x before the epilogue's row clamp,
			       * s10e), more than the classes so marked gain on cuBLAS */
} own_class;

static const own_class owns[] = {
	/* M = 1, one batch: the weight read once at 87-94% of the copy ceiling
	 * (warm), 4.2-4.6 us at 1 x 1024 x 4096 f32 against 10-12 us for
	 * torch's cuBLAS GEMV (s3-gpu-gemv-tiles2, s2-gpu-gemv-ncu2) */
	{"gemv", "gemv", 1, 1, 1},
	/* f16/bf16 with wgmma, 128 x 256 tiles >= 120: 4096^3 + bias + gelu
	 * 0.1882 ms against 0.1919-0.1949 for cuBLAS + epilogue (1.02x;
	 * s3-gpu-matmul-final, -final2) */
	{"wgmma 128x256, M N K >= 512 2048 2048", "wg128x256x64s4c2pvs", 512, 2048, 2048, false, true},
	/* 128 x 128 tiles >= 100: 512 x 4096 x 4096 0.0280 ms against 0.0288-
	 * 0.0291 (1.03x; s3-gpu-matmul).  Smaller M or K (a row of tiles, a
	 * short K loop: GPT-2's LM head at M = 128) was not measured. */
	{"wgmma 128x128, M N K >= 512 2048 2048", "wg128x128x64s4pvs", 512, 2048, 2048, false, true},
	/* an epilogue cuBLASLt cannot take (BERT's bias + exact GELU): the
	 * library route is cuBLAS and a second kernel over the result; the
	 * own kernel fuses it.  8192 x 3072 x 768 f16: 0.0889 ms against
	 * 0.1075-0.1086 for cuBLAS + epilogue (1.21x); at M = 2048 this tile
	 * ties it (0.0331 against 0.0313-0.0334: not taken), s10d.  In a
	 * sized plan too: 0.0978 ms there (s10h), still 1.10x ahead */
	{"wgmma 128x256, an epilogue cuBLASLt cannot take, M N K >= 8192 3072 768", "wg128x256x64s4c2pvs", 8192, 3072, 768,
	 true, false},
	/* M of 65 to 128 over a large weight (the cluster at M = 128, K up
	 * to 2048), an epilogue cuBLASLt cannot take (Llama's MLP at 128
	 * tokens: silu(gate) * up, + the residual): the own kernel fuses it
	 * where cuBLAS needs a second kernel (the tiles: emit_mm_config.c
	 * mem_bound_tile).  f16, weight from HBM, replays (s15e): 128 x 5632
	 * x 2048 + silu * x 17.8 us against 18.4 for cuBLAS + epilogue, + x
	 * 17.2 against 18.4; 128 x 2048 x 5632 + x 19.0 against 22.7.  Bare,
	 * cuBLAS stays ahead (14.1 against 15.4) */
	{"wgmma 64x128 cluster 2, M 128, K <= 2048, an epilogue cuBLASLt cannot take", "wg64x128x64s8c2s", 128, 4096,
	 2048, true, true},
	{"wgmma 64x64 split 2, M 65-128, K >= 4096, an epilogue cuBLASLt cannot take", "wg64x64x64s8k2s", 65, 1600, 4096,
	 true, true},
};

/* Whether the body has ops after the contraction (sh->tag: "pre.post",
 * or a hash of a long one, which has them) */
static bool has_epilogue(const kf_mm_shape *sh)
{
	const char *d = strchr(sh->tag, '.');
	return d ? d[1] != 0 : sh->tag[0] != 0;
}

const char *kf_mm_choose(const kf_mm_shape *sh, kf_mm_libs libs, char *out, size_t n)
{
	kf_mm_config own;
	char txt[32];
	kf_mm_own_default(sh, &own);
	kf_mm_config_text(&own, txt, sizeof txt);
	for (size_t i = 0; i < sizeof owns / sizeof *owns; i++)
		if ((!strcmp(txt, owns[i].own) || (!strcmp(owns[i].own, "gemv") && own.algo == KF_MM_GEMV)) &&
		    sh->M >= owns[i].min_m && sh->N >= owns[i].min_n && sh->K >= owns[i].min_k &&
		    (!owns[i].nolt || (!libs.lt && has_epilogue(sh))) && (!owns[i].fixed || !sh->sized)) {
			snprintf(out, n, "%s", txt);
			return owns[i].name;
		}
	/* not measured as fast as cuBLAS (the f32 SIMT kernel: 1 TFLOP/s on
	 * the Llama block's 64 x 512 x 512, 42 us tuned; mma.sync: a third of
	 * cuBLAS at 4096^3 f16), or not measured at all */
	if (libs.lt) {
		/* one call with the epilogue fused: 0.1812 ms at 4096^3 against
		 * 0.1919 for cuBLAS + epilogue, 0.0273 at M = 512 against 0.0288 */
		snprintf(out, n, "cublaslt");
		return "library: cuBLASLt with its epilogue";
	}
	if (libs.blas) {
		snprintf(out, n, "cublas");
		return "library: cuBLAS";
	}
	snprintf(out, n, "%s", txt);
	return "own: no library takes it";
}
