/* emit_mma.c: the tensor-core matmul kernel (see emit_matmul.c for the
 * analysis, configs and epilogue it shares; GEMV is in emit_gemv.c).
 *
 * Tensor cores: mma.sync through inline PTX (no header), m16n8k16 for
 * f16/bf16 (fragments loaded with ldmatrix, .trans where the stored layout
 * needs it) and m16n8k8 for tf32 (f32 operands when the fusion says
 * tf32 = true).  Tiles BM x BN x BK per block, WM x WN warps, a cp.async
 * pipeline of S stages in dynamic shared memory (rows padded by 16 bytes,
 * so that ldmatrix and the fragment loads are free of bank conflicts).  An
 * operand read as stored (no prologue, contiguous dim a multiple of 16
 * bytes) is copied with 16-byte cp.async; one with a prologue (a cast, a
 * scale) or an odd row length is loaded element by element through
 * registers, the prologue applied, and stored converted.  A transposed
 * operand only swaps the shared-memory layout: the global reads stay
 * coalesced.  The epilogue runs on the accumulator fragments in registers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "emit_mm_int.h"

static const char helpers[] =
	"#ifndef KF_MM_HELPERS\n"
	"#define KF_MM_HELPERS\n"
	"__device__ __forceinline__ unsigned kf_saddr(const void *p) {\n"
	"  unsigned r; asm(\"{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }\" : \"=r\"(r) : \"l\"(p)); return r; }\n"
	"__device__ __forceinline__ void kf_cp16(void *d, const void *s, bool ok) {\n"
	"  asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16, %2;\" :: \"r\"(kf_saddr(d)), \"l\"(s), \"r\"(ok ? 16 : 0)); }\n"
	"__device__ __forceinline__ void kf_cp_commit() { asm volatile(\"cp.async.commit_group;\"); }\n"
	"template <int N> __device__ __forceinline__ void kf_cp_wait() { asm volatile(\"cp.async.wait_group %0;\" :: \"n\"(N)); }\n"
	"__device__ __forceinline__ void kf_ldsm4(unsigned *r, const void *p) {\n"
	"  asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\"\n"
	"    : \"=r\"(r[0]), \"=r\"(r[1]), \"=r\"(r[2]), \"=r\"(r[3]) : \"r\"(kf_saddr(p))); }\n"
	"__device__ __forceinline__ void kf_ldsm4t(unsigned *r, const void *p) {\n"
	"  asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\"\n"
	"    : \"=r\"(r[0]), \"=r\"(r[1]), \"=r\"(r[2]), \"=r\"(r[3]) : \"r\"(kf_saddr(p))); }\n"
	"#define KF_MMA16(name, ty) __device__ __forceinline__ void name(float *c, const unsigned *a, const unsigned *b) { \\\n"
	"  asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.\" ty \".\" ty \".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\" \\\n"
	"    : \"+f\"(c[0]), \"+f\"(c[1]), \"+f\"(c[2]), \"+f\"(c[3]) \\\n"
	"    : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b[0]), \"r\"(b[1])); }\n"
	"KF_MMA16(kf_mma_f16, \"f16\")\n"
	"KF_MMA16(kf_mma_bf16, \"bf16\")\n"
	"__device__ __forceinline__ void kf_mma_tf32(float *c, const unsigned *a, const unsigned *b) {\n"
	"  asm volatile(\"mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\"\n"
	"    : \"+f\"(c[0]), \"+f\"(c[1]), \"+f\"(c[2]), \"+f\"(c[3])\n"
	"    : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b[0]), \"r\"(b[1])); }\n"
	"__device__ __forceinline__ unsigned kf_tf32(float f) { unsigned r; asm(\"cvt.rna.tf32.f32 %0, %1;\" : \"=r\"(r) : \"f\"(f)); return r; }\n"
	"#endif\n";

const char *kx_mm_helpers(void) { return helpers; }

/* One operand tile's layout: stored as [slow][fast] in global memory (fast
 * contiguous, row length ld), and as [rows][cols + pad] in shared memory. */
typedef struct tile {
	int rows, cols;            /* tile extents along slow, fast */
	const char *sbase, *fbase; /* block origin along slow, fast */
	int64_t slim, flim, ld;    /* bounds, global row length */
	int64_t sslim, sflim, sld; /* their symbolic forms (kx_dim) */
} tile;

static tile tile_of(const kx_mm *mm, int which)
{
	const kf_mm_config *c = &mm->cfg;
	const kx_mmop *op = which ? &mm->b : &mm->a;
	if (!which && !op->trans)
		return (tile){c->bm, c->bk, "bm", "k0", mm->M, mm->K, mm->K, mm->sM, mm->sK, mm->sK};
	if (!which)
		return (tile){c->bk, c->bm, "k0", "bm", mm->K, mm->M, mm->M, mm->sK, mm->sM, mm->sM};
	if (!op->trans)
		return (tile){c->bk, c->bn, "k0", "bn", mm->K, mm->N, mm->N, mm->sK, mm->sN, mm->sN};
	return (tile){c->bn, c->bk, "bn", "k0", mm->N, mm->K, mm->K, mm->sN, mm->sK, mm->sK};
}

/* The statements that fill one stage of operand `which` (inside the load
 * lambda: `s` is the stage's shared tile, k0 the K origin). */
static void mma_load(kx *k, const kx_mm *mm, int which, int e, int threads)
{
	const kx_mmop *op = which ? &mm->b : &mm->a;
	tile t = tile_of(mm, which);
	int pad = 16 / e, ve = 16 / e;
	const char *it = kx_it(k), *off = which ? "boff" : "aoff", *sm = which ? "sb" : "sa";
	kf_buf *b = &k->b;
	bool conv = !which && mm->conv; /* A gathered: the im2col element (emit_conv.c) */
	bool raw = conv ? kx_conv_a_raw(k, mm, e)
			: kx_mm_raw(k, op) && kx_multiple(k, t.ld, t.sld, ve) && kf_dtype_size(op->st) == (size_t)e;
	int v = raw ? ve : 1, per = t.cols / v;
	if (conv && raw && kx_conv_rows_fixed(t.rows, per, threads)) { /* rows split before the K loop */
		char dst[64];
		snprintf(dst, sizeof dst, "sa + r * %d + kf_cf", t.cols + pad);
		kx_conv_rows_load(k, mm, t.rows, per, threads, dst, op->param);
		return;
	}
	kf_buf_printf(b, "#pragma unroll\n    for (int c = threadIdx.x; c < %d; c += %d) {\n", t.rows * per, threads);
	kf_buf_printf(b, "      const int r = c / %d, f = (c %% %d) * %d;\n", per, per, v);
	kf_buf_printf(b, "      const %s gs = %s + r, gf = %s + f;\n", it, t.sbase, t.fbase);
	kf_buf_puts(b, "      const bool ok = gs < ");
	kx_dim(k, b, t.slim, t.sslim);
	kf_buf_puts(b, " && gf < ");
	kx_dim(k, b, t.flim, t.sflim);
	kf_buf_puts(b, ";\n");
	if (conv) {
		const char *cv = mm->dt == KF_F16 ? "kf_f2h" : mm->dt == KF_BF16 ? "kf_f2b" : "";
		kf_buf_puts(b, "      long long cix = 0;\n      const bool in = ok && ");
		kx_conv_gather_call(mm, "gs", "gf", b);
		kf_buf_puts(b, ";\n");
		if (raw) {
			kf_buf_printf(b, "      kf_cp16(%s + r * %d + f, p%d + (in ? cix : 0), in);\n    }\n", sm, t.cols + pad,
				      op->param);
			return;
		}
		kf_buf_printf(b, "      %s[r * %d + f] = %s(in ? ", sm, t.cols + pad, cv);
		kx_load(b, op->st, "p%d[cix]", op->param);
		kf_buf_puts(b, " : 0.0f);\n    }\n");
		return;
	}
	if (raw) {
		kf_buf_printf(b, "      kf_cp16(%s + r * %d + f, p%d + (ok ? %s + gs * ", sm, t.cols + pad, op->param, off);
		kx_dimll(k, b, t.ld, t.sld);
		kf_buf_puts(b, " + gf : 0), ok);\n    }\n");
		return;
	}
	kf_buf ix = {0}, x = {0};
	kf_buf_printf(&ix, "%s + gs * ", off);
	kx_dimll(k, &ix, t.ld, t.sld);
	kf_buf_puts(&ix, " + gf");
	kf_buf_putc(&ix, '\0');
	kx_mm_operand(k, mm, which, ix.p, &x);
	const char *cv = mm->dt == KF_F16 ? "kf_f2h" : mm->dt == KF_BF16 ? "kf_f2b" : "";
	kf_buf_printf(b, "      %s[r * %d + f] = %s(ok ? %.*s : 0.0f);\n    }\n", sm, t.cols + pad, cv, (int)x.n, x.p);
	kf_buf_free(&ix);
	kf_buf_free(&x);
}

/* Fragment loads of one k-step (kk) from the stage's tiles sa, sb. */
static void mma_frags(kx *k, const kx_mm *mm, int e, int mi, int ni, int wtm, int wtn)
{
	kf_buf *b = &k->b;
	const kf_mm_config *c = &mm->cfg;
	int pad = 16 / e;
	tile ta = tile_of(mm, 0), tb = tile_of(mm, 1);
	int la = ta.cols + pad, lb = tb.cols + pad;
	kf_buf_printf(b, "      unsigned af[%d][4], bf[%d][2];\n", mi, ni);
	if (e == 2) {
		kf_buf_printf(b, "#pragma unroll\n      for (int i = 0; i < %d; i++) {\n        const int m0 = wm * %d + i * 16;\n",
			      mi, wtm);
		if (!mm->a.trans)
			kf_buf_printf(b, "        kf_ldsm4(af[i], sa + (m0 + (lane & 15)) * %d + kk + (lane >> 4) * 8);\n", la);
		else
			kf_buf_printf(b, "        kf_ldsm4t(af[i], sa + (kk + (lane & 7) + (lane >> 4) * 8) * %d + m0 + ((lane >> 3) & 1) * 8);\n",
				      la);
		kf_buf_printf(b, "      }\n#pragma unroll\n      for (int j = 0; j < %d; j += 2) {\n        unsigned t[4];\n"
			      "        const int n0 = wn * %d + j * 8;\n", ni, wtn);
		if (!mm->b.trans)
			kf_buf_printf(b, "        kf_ldsm4t(t, sb + (kk + (lane & 7) + ((lane >> 3) & 1) * 8) * %d + n0 + (lane >> 4) * 8);\n",
				      lb);
		else
			kf_buf_printf(b, "        kf_ldsm4(t, sb + (n0 + (lane & 7) + (lane >> 4) * 8) * %d + kk + ((lane >> 3) & 1) * 8);\n",
				      lb);
		kf_buf_puts(b, "        bf[j][0] = t[0]; bf[j][1] = t[1]; bf[j + 1][0] = t[2]; bf[j + 1][1] = t[3];\n      }\n");
		return;
	}
	/* tf32: scalar shared loads (ldmatrix moves 16-bit elements) */
	kf_buf_printf(b, "#pragma unroll\n      for (int i = 0; i < %d; i++) {\n        const int m0 = wm * %d + i * 16;\n", mi,
		      wtm);
	for (int r = 0; r < 4; r++) {
		const char *mo = r & 1 ? " + 8" : "", *ko = r & 2 ? " + 4" : "";
		if (!mm->a.trans)
			kf_buf_printf(b, "        af[i][%d] = kf_tf32(sa[(m0 + g%s) * %d + kk + q%s]);\n", r, mo, la, ko);
		else
			kf_buf_printf(b, "        af[i][%d] = kf_tf32(sa[(kk + q%s) * %d + m0 + g%s]);\n", r, ko, la, mo);
	}
	kf_buf_printf(b, "      }\n#pragma unroll\n      for (int j = 0; j < %d; j++) {\n        const int n0 = wn * %d + j * 8;\n",
		      ni, wtn);
	for (int r = 0; r < 2; r++) {
		const char *ko = r ? " + 4" : "";
		if (!mm->b.trans)
			kf_buf_printf(b, "        bf[j][%d] = kf_tf32(sb[(kk + q%s) * %d + n0 + g]);\n", r, ko, lb);
		else
			kf_buf_printf(b, "        bf[j][%d] = kf_tf32(sb[(n0 + g) * %d + kk + q%s]);\n", r, lb, ko);
	}
	kf_buf_puts(b, "      }\n");
	(void)c;
}

int kx_mm_emit_mma(kx *k, kx_mm *mm)
{
	const kf_mm_config *c = &mm->cfg;
	int e = mm->dt == KF_F32 ? 4 : 2, kstep = e == 4 ? 8 : 16, pad = 16 / e, S = c->stages;
	int threads = 32 * c->wm * c->wn, wtm = c->bm / c->wm, wtn = c->bn / c->wn, mi = wtm / 16, ni = wtn / 8;
	tile ta = tile_of(mm, 0), tb = tile_of(mm, 1);
	int asz = ta.rows * (ta.cols + pad), bsz = tb.rows * (tb.cols + pad);
	int64_t kt = (mm->K + c->bk - 1) / c->bk;
	const char *st = e == 4 ? "float" : "unsigned short", *it = kx_it(k);
	const char *mma = mm->dt == KF_F16 ? "kf_mma_f16" : mm->dt == KF_BF16 ? "kf_mma_bf16" : "kf_mma_tf32";
	kf_buf *b = &k->b;
	kf_buf_puts(&k->decl, helpers);
	k->k->block = threads;
	k->k->units = (mm->N + c->bn - 1) / c->bn;
	k->k->grid_y = (unsigned)((mm->M + c->bm - 1) / c->bm);
	bool split = c->sk > 1;
	k->k->grid_z = (unsigned)(mm->nb * (split ? c->sk : 1));
	k->k->smem = S * (asz + bsz) * e;
	kf_buf ao = {0}, bo = {0};
	kx_mm_batch_off(k, mm, 0, &ao);
	kx_mm_batch_off(k, mm, 1, &bo);
	kf_buf_printf(b, "  extern __shared__ __align__(16) unsigned char kf_smem[];\n");
	kf_buf_printf(b, "  %s *const kf_sa = (%s *)kf_smem, *const kf_sb = kf_sa + %d;\n", st, st, S * asz);
	kf_buf_printf(b, "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, q = lane & 3;\n");
	if (split) { /* this block's K tiles: [kt0, kt0 + nkt) */
		kx_mm_splitk_head(k, mm);
		kf_buf_printf(b, "  const int wm = warp / %d, wn = warp %% %d;\n", c->wn, c->wn);
		kf_buf_printf(b, "  const int kt0 = (int)(kbeg / %d), nkt = kend > kbeg ? (int)((kend - kbeg + %d) / %d) : 0;\n",
			      c->bk, c->bk - 1, c->bk);
	} else {
		kf_buf_printf(b, "  const int wm = warp / %d, wn = warp %% %d, z = blockIdx.z;\n", c->wn, c->wn);
	}
	kf_buf_printf(b, "  const %s bm = (%s)blockIdx.y * %d, bn = (%s)blockIdx.x * %d;\n", it, it, c->bm, it, c->bn);
	kf_buf_printf(b, "  const %s aoff = %.*s, boff = %.*s;\n", it, (int)ao.n, ao.p, (int)bo.n, bo.p);
	if (mm->conv) /* A is gathered (emit_conv.c) */
		kf_buf_puts(b, "  (void)aoff;\n");
	kf_buf_free(&ao);
	kf_buf_free(&bo);
	kf_buf_printf(b, "  float acc[%d][%d][4];\n#pragma unroll\n  for (int i = 0; i < %d; i++)\n#pragma unroll\n"
		      "    for (int j = 0; j < %d; j++) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.0f;\n",
		      mi, ni, mi, ni);
	if (mm->conv && kx_conv_a_raw(k, mm, e) && kx_conv_rows_fixed(ta.rows, ta.cols / (16 / e), threads))
		kx_conv_rows_setup(k, mm, ta.rows, ta.cols / (16 / e), 16 / e, threads);
	/* the loads of one stage, as a lambda the pipeline calls */
	kf_buf_printf(b, "  auto load = [&](int stage, int kt) {\n    %s *const sa = kf_sa + stage * %d, *const sb = kf_sb + stage * %d;\n"
		      "    const %s k0 = (%s)kt * %d;\n", st, asz, bsz, it, it, c->bk);
	mma_load(k, mm, 0, e, threads);
	mma_load(k, mm, 1, e, threads);
	kf_buf_puts(b, "  };\n");
	if (split) { /* the same pipeline over the split's tiles */
		kf_buf_printf(b, "#pragma unroll\n  for (int s = 0; s < %d; s++) {\n    if (s < nkt) load(s, kt0 + s);\n"
			      "    kf_cp_commit();\n  }\n", S - 1);
		kf_buf_printf(b, "  for (int kt = 0; kt < nkt; kt++) {\n    kf_cp_wait<%d>();\n    __syncthreads();\n", S - 2);
		kf_buf_printf(b, "    if (kt + %d < nkt) load((kt + %d) %% %d, kt0 + kt + %d);\n    kf_cp_commit();\n", S - 1,
			      S - 1, S, S - 1);
	} else {
		/* the K tiles: a number, or (K symbolic) a constant of the kernel */
		kf_buf nk = {0};
		kx_dimceil(k, &nk, mm->K, mm->sK, c->bk);
		kf_buf_putc(&nk, '\0');
		(void)kt;
		kf_buf_printf(b, "#pragma unroll\n  for (int s = 0; s < %d; s++) {\n    if (s < %s) load(s, s);\n    kf_cp_commit();\n  }\n",
			      S - 1, nk.p);
		kf_buf_printf(b, "  for (int kt = 0; kt < %s; kt++) {\n    kf_cp_wait<%d>();\n    __syncthreads();\n", nk.p,
			      S - 2);
		/* the stage refilled now was read in the previous iteration, which
		 * every warp has finished: they all passed the barrier above */
		kf_buf_printf(b, "    if (kt + %d < %s) load((kt + %d) %% %d, kt + %d);\n    kf_cp_commit();\n", S - 1,
			      nk.p, S - 1, S, S - 1);
		kf_buf_free(&nk);
	}
	kf_buf_printf(b, "    const %s *const sa = kf_sa + (kt %% %d) * %d, *const sb = kf_sb + (kt %% %d) * %d;\n", st, S,
		      asz, S, bsz);
	kf_buf_printf(b, "#pragma unroll\n    for (int kk = 0; kk < %d; kk += %d) {\n", c->bk, kstep);
	mma_frags(k, mm, e, mi, ni, wtm, wtn);
	kf_buf_printf(b, "#pragma unroll\n      for (int i = 0; i < %d; i++)\n#pragma unroll\n"
		      "        for (int j = 0; j < %d; j++) %s(acc[i][j], af[i], bf[j]);\n    }\n  }\n", mi, ni, mma);
	if (split) {
		int ext[3] = {mi, ni, 4};
		kx_mm_splitk_reduce(k, mm, threads, 3, ext);
	}
	/* accumulator fragment: c0, c1 at (g, 2q + {0,1}); c2, c3 at row g + 8 */
	kf_buf_printf(b, "#pragma unroll\n  for (int i = 0; i < %d; i++)\n#pragma unroll\n  for (int j = 0; j < %d; j++)\n"
		      "#pragma unroll\n  for (int h = 0; h < 4; h++) {\n", mi, ni);
	kf_buf_printf(b, "    const %s row = bm + wm * %d + i * 16 + g + (h >> 1) * 8, col = bn + wn * %d + j * 8 + q * 2 + (h & 1);\n",
		      it, wtm, wtn);
	kf_buf_puts(b, "    if (row < ");
	kx_mm_dim(k, b, mm, 'M');
	kf_buf_puts(b, " && col < ");
	kx_mm_dim(k, b, mm, 'N');
	kf_buf_puts(b, ") ");
	kx_mm_epi_call(k, b);
	kf_buf_puts(b, "z, row, col, acc[i][j][h]);\n  }\n");
	(void)pad;
	return 0;
}
