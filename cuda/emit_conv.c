/* emit_conv.c: convolution and pooling kernels (emit_conv.h says how they
 * run).  The implicit GEMM is the contraction kernels' (emit_matmul.c
 * analyses a conv as it does a matmul, emit_mma.c and the SIMT kernel load
 * A through kf_conv_gather); this file has the conv's geometry, its
 * gather, the epilogue's index of a value broadcast to the conv's result,
 * the direct kernels of depthwise and grouped convs, and the pools.
 *
 * requires: static shapes, convs channels-last (pools either form).
 * Numerics: as the matmul kernels: f16/bf16/f32 accumulate in f32, f64 in
 * f64; the epilogue on the accumulator, one rounding at the store.  A pool
 * computes in f32 (f64 for f64, 64-bit integers for integer max_pool).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "conv.h"
#include "emit_conv.h"
#include "emit_mm_int.h"

bool kf_conv_gather(KF_CONV_GATHER_PARAMS)
{
	KF_CONV_GATHER_BODY
}

#define KX_CV_STR(...) #__VA_ARGS__
#define KX_CV_XSTR(...) KX_CV_STR(__VA_ARGS__)

void kx_conv_helpers(kx *k)
{
	kf_buf_puts(&k->decl, "#ifndef KF_CONV_GATHER\n#define KF_CONV_GATHER\n");
	kf_buf_puts(&k->decl, "__device__ __forceinline__ bool kf_conv_gather(" KX_CV_XSTR(KF_CONV_GATHER_PARAMS) ") {\n  ");
	kf_buf_puts(&k->decl, KX_CV_XSTR(KF_CONV_GATHER_BODY));
	kf_buf_puts(&k->decl, "\n}\n#endif\n");
}

/* ---- geometry ----------------------------------------------------------------------- */

/* w's spatial dims padded to 3 at the front. */
static void pad3(const kf_win *w, kx_conv *cv)
{
	int off = 3 - w->nsp;
	for (int i = 0; i < 3; i++) {
		int j = i - off;
		cv->in[i] = j < 0 ? 1 : w->in[j];
		cv->out[i] = j < 0 ? 1 : w->out[j];
		cv->k[i] = j < 0 ? 1 : w->k[j];
		cv->s[i] = j < 0 ? 1 : w->s[j];
		cv->d[i] = j < 0 ? 1 : w->d[j];
		cv->pb[i] = j < 0 ? 0 : w->pb[j];
		cv->pe[i] = j < 0 ? 0 : w->pe[j];
	}
	cv->N = w->N;
	cv->C = w->C;
	cv->O = w->O;
	cv->G = w->group > 0 ? w->group : 1;
	cv->Cg = w->C / cv->G;
	cv->Og = w->O / cv->G;
	cv->KK = cv->k[0] * cv->k[1] * cv->k[2];
	cv->bias = -1;
}

const char *kx_conv_setup(kf_graph *g, kf_nid c, kx_mm *mm)
{
	kf_win w;
	if (kf_win_of(g, c, &w) != 0)
		return "the conv's shapes are not static";
	kx_conv *cv = &mm->cv;
	pad3(&w, cv);
	cv->cl = w.cl;
	mm->conv = true;
	mm->O = *kf_vtype(g, kf_res(g, c, 0));
	mm->dt = (kf_dtype)kf_vtype(g, kf_in(g, c, 0))->dtype;
	mm->rt = (kf_dtype)mm->O.dtype;
	mm->M = cv->N * cv->out[0] * cv->out[1] * cv->out[2];
	mm->N = cv->O;
	mm->K = cv->KK * cv->Cg;
	mm->nb = 1;
	mm->OB = (kf_type){.dtype = mm->O.dtype};
	mm->a.trans = false;
	mm->b.trans = true; /* W [O, K] */
	if (mm->M >= (1LL << 31) || mm->K >= (1LL << 31) || cv->in[0] * cv->in[1] * cv->in[2] * cv->C >= (1LL << 31))
		return "a conv this large is not supported (2^31 output positions or input elements per image)";
	return NULL;
}

/* Product of t's dims [a, b), skipping dim `skip`. */
static int64_t dims(const kf_type *t, int a, int b, int skip)
{
	int64_t p = 1;
	for (int d = a; d < b; d++)
		if (d != skip)
			p *= t->dim[d];
	return p;
}

void kx_conv_bidx(const kx_mm *mm, const kf_type *P, kf_buf *o)
{
	const kf_type *O = &mm->O;
	int r = O->rank, off = r - P->rank, cd = mm->cv.cl ? r - 1 : 1; /* P's dim j is O's dim j + off */
	int64_t stride = 1;
	bool any = false;
	kf_buf_putc(o, '(');
	for (int d = r - 1; d >= 0 && d - off >= 0;) {
		if (P->dim[d - off] == 1) {
			d--;
			continue;
		}
		kf_buf_puts(o, any ? " + " : "");
		any = true;
		if (d == cd) {
			kf_buf_printf(o, "col * %lld", (long long)stride);
			stride *= P->dim[d - off];
			d--;
			continue;
		}
		/* a run of position dims P has whole: one division and one
		 * remainder for the run, not per dim */
		int a = d;
		while (a - 1 >= 0 && a - 1 != cd && a - 1 - off >= 0 && P->dim[a - 1 - off] != 1)
			a--;
		int64_t after = dims(O, d + 1, r, cd), run = dims(O, a, d + 1, cd);
		bool before = a > 0; /* position dims ahead of the run (the channel dim is never 0) */
		kf_buf_puts(o, "(");
		if (after == 1)
			kf_buf_puts(o, "row");
		else
			kf_buf_printf(o, "(row / %lld)", (long long)after);
		if (before)
			kf_buf_printf(o, " %% %lld", (long long)run);
		kf_buf_printf(o, ") * %lld", (long long)stride);
		stride *= dims(P, a - off, d + 1 - off, -1);
		d = a - 1;
	}
	kf_buf_puts(o, any ? ")" : "0)");
}

void kx_conv_off(const kx_mm *mm, kf_buf *o)
{
	const kx_conv *cv = &mm->cv;
	int64_t P = cv->out[0] * cv->out[1] * cv->out[2];
	kf_buf_printf(o, "(row / %lld) * %lld + col * %lld + row %% %lld", (long long)P, (long long)(cv->O * P), (long long)P,
		      (long long)P);
}

void kx_conv_gather_call(const kx_mm *mm, const char *m, const char *kk, kf_buf *o)
{
	const kx_conv *cv = &mm->cv;
	kf_buf_printf(o, "kf_conv_gather(%s, %s, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, "
		      "%lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, &cix)",
		      m, kk, (long long)cv->out[0], (long long)cv->out[1], (long long)cv->out[2], (long long)cv->in[0],
		      (long long)cv->in[1], (long long)cv->in[2], (long long)cv->C, (long long)cv->Cg, (long long)cv->k[1],
		      (long long)cv->k[2], (long long)cv->s[0], (long long)cv->s[1], (long long)cv->s[2],
		      (long long)cv->pb[0], (long long)cv->pb[1], (long long)cv->pb[2], (long long)cv->d[0],
		      (long long)cv->d[1], (long long)cv->d[2]);
}

bool kx_conv_a_raw(const kx *k, const kx_mm *mm, int e)
{
	(void)k;
	return mm->a.nchain == 0 && kf_dtype_size(mm->a.st) == (size_t)e && mm->cv.G == 1 && mm->cv.Cg % (16 / e) == 0;
}

/* dims [from, 3) of v joined by 'x' after tag */
static int geo_part(char *o, size_t n, const char *tag, const int64_t *v, int from)
{
	int w = snprintf(o, n, "%s", tag);
	for (int i = from; i < 3 && w >= 0 && (size_t)w < n; i++)
		w += snprintf(o + w, n - (size_t)w, "%s%lld", i > from ? "x" : "", (long long)v[i]);
	return w;
}

void kx_conv_shape(const kx_mm *mm, kf_mm_shape *sh)
{
	const kx_conv *cv = &mm->cv;
	int e = mm->dt == KF_F32 ? 4 : mm->dt == KF_F64 ? 8 : 2;
	sh->conv = true;
	sh->raw = mm->a.st == mm->dt && kx_conv_a_raw(NULL, mm, e);
	sh->pw = sh->raw && cv->KK == 1;
	for (int i = 0; i < 3; i++)
		sh->pw &= cv->s[i] == 1 && cv->pb[i] == 0 && cv->pe[i] == 0;
	/* the spatial dims the conv has (a 2-D conv is a 3-D one with a
	 * leading dim of 1) */
	int from = 0;
	while (from < 2 && cv->in[from] == 1 && cv->k[from] == 1 && cv->s[from] == 1 && cv->pb[from] == 0 &&
	       cv->pe[from] == 0)
		from++;
	int64_t pads[6];
	int np = 0;
	for (int i = from; i < 3; i++)
		pads[np++] = cv->pb[i];
	for (int i = from; i < 3; i++)
		pads[np++] = cv->pe[i];
	char *o = sh->geo;
	size_t n = sizeof sh->geo;
	int w = geo_part(o, n, "", cv->k, from);
	w += geo_part(o + w, n - (size_t)w, "s", cv->s, from);
	w += snprintf(o + w, n - (size_t)w, "p");
	for (int i = 0; i < np; i++)
		w += snprintf(o + w, n - (size_t)w, "%s%lld", i ? "x" : "", (long long)pads[i]);
	w += geo_part(o + w, n - (size_t)w, "d", cv->d, from);
	geo_part(o + w, n - (size_t)w, "i", cv->in, from);
}

/* Statements splitting output position `row` into n, od, oh, ow. */
static void split_row(kf_buf *b, const kx_conv *cv, const char *it, const char *row)
{
	kf_buf_printf(b, "  const %s q0 = %s / %lld, q1 = q0 / %lld;\n", it, row, (long long)cv->out[2], (long long)cv->out[1]);
	kf_buf_printf(b, "  const int ow = (int)(%s - q0 * %lld), oh = (int)(q0 - q1 * %lld), od = (int)(q1 %% %lld);\n", row,
		      (long long)cv->out[2], (long long)cv->out[1], (long long)cv->out[0]);
	kf_buf_printf(b, "  const %s n = q1 / %lld;\n", it, (long long)cv->out[0]);
}

/* ---- the implicit GEMM's A rows, precomputed -------------------------------------------- */

/* In the tensor-core kernel each thread copies the same rows of A's tile
 * and the same 16-byte column of them in every K step when the thread
 * count divides the tile's chunks: the output positions of those rows are
 * split once, before the K loop, and each step splits only its column's
 * k into (kd, kh, kw, c). */
bool kx_conv_rows_fixed(int rows, int per, int threads)
{
	return threads % per == 0 && (rows * per) % threads == 0;
}

void kx_conv_rows_setup(kx *k, const kx_mm *mm, int rows, int per, int v, int threads)
{
	const kx_conv *cv = &mm->cv;
	const char *it = kx_it(k);
	int R = rows * per / threads;
	kf_buf *b = &k->b;
	kf_buf_printf(b, "  const int kf_cf = (threadIdx.x %% %d) * %d;\n", per, v);
	kf_buf_printf(b, "  int kf_id0[%d], kf_ih0[%d], kf_iw0[%d];\n  %s kf_xb[%d];\n", R, R, R, it, R);
	kf_buf_printf(b, "#pragma unroll\n  for (int i = 0; i < %d; i++) {\n", R);
	kf_buf_printf(b, "    const %s m = bm + threadIdx.x / %d + i * %d;\n", it, per, threads / per);
	split_row(b, cv, it, "m");
	/* a row past the output lands nowhere: its first depth is far outside */
	kf_buf_printf(b, "    kf_id0[i] = m < %lld ? od * %lld - %lld : -(1 << 30);\n", (long long)mm->M, (long long)cv->s[0],
		      (long long)cv->pb[0]);
	kf_buf_printf(b, "    kf_ih0[i] = oh * %lld - %lld;\n    kf_iw0[i] = ow * %lld - %lld;\n", (long long)cv->s[1],
		      (long long)cv->pb[1], (long long)cv->s[2], (long long)cv->pb[2]);
	kf_buf_printf(b, "    kf_xb[i] = n * %lldLL;\n  }\n", (long long)(cv->in[0] * cv->in[1] * cv->in[2] * cv->C));
}

void kx_conv_rows_load(kx *k, const kx_mm *mm, int rows, int per, int threads, const char *dst, int param)
{
	const kx_conv *cv = &mm->cv;
	int R = rows * per / threads;
	kf_buf *b = &k->b;
	kf_buf_printf(b, "    {\n      const int gf = (int)k0 + kf_cf;\n");
	kf_buf_printf(b, "      const int c = gf %% %lld, r0 = gf / %lld, kw = r0 %% %lld, r1 = r0 / %lld, kh = r1 %% %lld, "
		      "kd = r1 / %lld;\n", (long long)cv->C, (long long)cv->C, (long long)cv->k[2], (long long)cv->k[2],
		      (long long)cv->k[1], (long long)cv->k[1]);
	kf_buf_printf(b, "      const bool kok = gf < %lld;\n#pragma unroll\n      for (int i = 0; i < %d; i++) {\n",
		      (long long)mm->K, R);
	kf_buf_printf(b, "        const int r = threadIdx.x / %d + i * %d;\n", per, threads / per);
	kf_buf_printf(b, "        const int id = kf_id0[i] + kd * %lld, ih = kf_ih0[i] + kh * %lld, iw = kf_iw0[i] + kw * %lld;\n",
		      (long long)cv->d[0], (long long)cv->d[1], (long long)cv->d[2]);
	kf_buf_printf(b, "        const bool in = kok && (unsigned)id < %lldu && (unsigned)ih < %lldu && (unsigned)iw < %lldu;\n",
		      (long long)cv->in[0], (long long)cv->in[1], (long long)cv->in[2]);
	kf_buf_printf(b, "        kf_cp16(%s, p%d + (in ? kf_xb[i] + ((id * %lld + ih) * %lld + iw) * %lld + c : 0), in);\n"
		      "      }\n    }\n", dst, param, (long long)cv->in[1], (long long)cv->in[2], (long long)cv->C);
}

/* ---- the direct kernels --------------------------------------------------------------- */

/* Opens the loops over the taps (kd, kh, kw) that land inside the input,
 * with id, ih, iw in scope; three closing braces end them. */
static void open_taps(kf_buf *b, const kx_conv *cv)
{
	static const char *const kn[3] = {"kd", "kh", "kw"}, *const in[3] = {"id", "ih", "iw"},
			       *const on[3] = {"od", "oh", "ow"};
	for (int a = 0; a < 3; a++) {
		kf_buf_printf(b, "#pragma unroll\n  for (int %s = 0; %s < %lld; %s++) {\n", kn[a], kn[a], (long long)cv->k[a], kn[a]);
		kf_buf_printf(b, "    const int %s = %s * %lld - %lld + %s * %lld;\n", in[a], on[a], (long long)cv->s[a],
			      (long long)cv->pb[a], kn[a], (long long)cv->d[a]);
		kf_buf_printf(b, "    if ((unsigned)%s >= %lldu) continue;\n", in[a], (long long)cv->in[a]);
	}
}

/* ---- the depthwise kernel --------------------------------------------------------------- */

/* A depthwise conv channels-last (one input channel per output channel)
 * whose channels come in whole 16-byte vectors of V.  Memory-bound at 3x3,
 * bound by its multiply-adds at 7x7.  A block owns a slice of CS channel
 * vectors and P x TR tiles of R consecutive outputs along W; a thread
 * computes one tile of one channel vector, TR times over:
 * - the slice's weights ([C, taps] in global memory, a contiguous run) are
 *   copied once per block into shared memory as [tap][channel] in the
 *   accumulator's type, so that a tap's V weights are one or two 16-byte
 *   shared loads, not V scalar global loads, and are converted only once;
 * - per input row (kd, kh) a thread loads the L input vectors its R
 *   outputs read once into registers (zeros in the padding), converts
 *   them once, and uses each for every (kw, r) that reads it: a 3x3
 *   stride-1 tile of 4 loads and converts 6 vectors a row, not 12;
 * - threads adjacent in a warp take adjacent channel vectors, then
 *   adjacent tiles: a warp's loads are whole runs of channels;
 * - every loop has compile-time bounds and is unrolled; the row's end is
 *   the only run-time guard of the outputs (a tile's outputs past OW
 *   compute on in-bounds or zero inputs and store nothing).
 * The epilogue is the matmul kernels' (pairs where the outputs are 2 bytes
 * wide), called as before with (row, channel). */
typedef struct dw_plan {
	int V, asz, R, CS, P, TR, L;
	int MB;                /* __launch_bounds__'s blocks per SM; 0: DW_WARPS' worth */
	uint64_t used;         /* bit i: a row's input vector i is read by some (kw, r) */
	int64_t G, NS, OWG, Q; /* channel vectors, slices of CS, tiles per output row, tiles per channel vector */
} dw_plan;

/* A block's weights: under the 48 KiB of static shared memory, and small
 * enough that 5 blocks fit an H200 SM's 228 KiB. */
#define DW_SMEM (40 * 1024)
/* Warps an SM should hold, through __launch_bounds__'s blocks per SM (a
 * cap of 65536 / (32 x warps) registers a thread), and the 4-byte
 * registers a tile's converted inputs and accumulators may then take (room
 * left for indices and weights: nothing spills, checked with ptxas on
 * MobileNetV2's and ConvNeXt-T's layers).  Up to 3x3 taps the kernel is
 * memory-bound (a multiply-add or two per byte moved): 24 warps, 85
 * registers, for more loads in flight; larger kernels are bound by their
 * multiply-adds: 16 warps, 128 registers, for larger tiles (fewer loads
 * and conversions an output). */
#define DW_WARPS(cv) ((cv)->KK <= 9 ? 24 : 16)
#define DW_REGS(cv) ((cv)->KK <= 9 ? 80 : 112)
/* Blocks wanted at least before a small conv's blocks are made smaller: 2
 * per SM of an H200 (132 SMs), so that a batch-1 layer spreads over the
 * GPU instead of queueing on a few SMs. */
#define DW_MIN_UNITS 264
/* Blocks per trip kept at least when blocks loop over several trips (the
 * weights' copy then amortised over them): 4 waves of 2 blocks per SM. */
#define DW_WAVE_UNITS 1056

/* The input vectors along W a tile of R outputs reads from. */
static int dw_span(const kx_conv *cv, int R)
{
	return (int)((R - 1) * cv->s[2] + (cv->k[2] - 1) * cv->d[2] + 1);
}

static uint64_t dw_used(const kx_conv *cv, int R)
{
	uint64_t m = 0;
	for (int r = 0; r < R; r++)
		for (int64_t kw = 0; kw < cv->k[2]; kw++)
			m |= 1ULL << (r * cv->s[2] + kw * cv->d[2]);
	return m;
}

/* A thread's instructions for a tile of R outputs (a load counted 2, a
 * conversion or multiply-add 1, an epilogue element 4, 40 for the tile's
 * index math), times the tiles of an output row: the R with the least
 * weighs the loads R saves (neighbouring outputs share a row's inputs)
 * against the outputs past OW of a row that R does not divide. */
static int64_t dw_cost(const kx_conv *cv, const dw_plan *p, int R)
{
	int64_t rows = cv->k[0] * cv->k[1], nused = __builtin_popcountll(dw_used(cv, R));
	int cvt = p->asz * p->V == 16 ? 0 : 1, nlds = (p->V * p->asz + 15) / 16;
	int64_t tile = rows * (nused * (2 + p->V * cvt) + cv->k[2] * (nlds + R * p->V)) + R * p->V * 4 + 40;
	return (cv->out[2] + R - 1) / R * tile;
}

/* Outputs per thread: the cheapest R up to 8 whose registers fit; 0 when
 * even one output's row spans more than 64 vectors (the used-vector mask). */
static int dw_pick_r(const kx_conv *cv, const dw_plan *p)
{
	int best = 0;
	int64_t bc = 0;
	for (int R = 1; R <= 8 && R <= cv->out[2]; R++) {
		int L = dw_span(cv, R);
		if (L > 64 || (R > 1 && (L + R) * p->V * p->asz / 4 > DW_REGS(cv)))
			continue;
		int64_t c = dw_cost(cv, p, R);
		if (!best || c < bc)
			best = R, bc = c;
	}
	return best;
}

/* The largest number of channel vectors up to `most` that divides G and
 * whose weights fit the shared memory (a slice never straddles a block's
 * channels, so its weights are one contiguous run); 0 when none does. */
static int dw_pick_cs(const kx_conv *cv, const dw_plan *p, int most)
{
	for (int cs = most; cs >= 1; cs--)
		if (p->G % cs == 0 && cv->KK * cs * p->V * p->asz <= DW_SMEM)
			return cs;
	return 0;
}

static int64_t dw_units(const dw_plan *p)
{
	return p->NS * ((p->Q + (int64_t)p->P * p->TR - 1) / ((int64_t)p->P * p->TR));
}

/* The block: the widest slice, 256 threads; a small conv's blocks take
 * fewer tiles, down to a warp, until there are DW_MIN_UNITS of them; a
 * large one's loop over up to 8 trips while DW_WAVE_UNITS blocks remain. */
static void dw_pick_block(const kx_conv *cv, dw_plan *p)
{
	p->CS = dw_pick_cs(cv, p, 32);
	p->P = p->CS >= 256 ? 1 : 256 / p->CS;
	p->TR = 1;
	p->NS = p->G / p->CS;
	while (dw_units(p) < DW_MIN_UNITS && p->CS * p->P > 32)
		p->P = (p->P + 1) / 2;
	while (p->TR < 8 && dw_units(p) / 2 >= DW_WAVE_UNITS)
		p->TR *= 2;
}

/* $KFUSE_DEPTHWISE, "r<R>c<CS>p<P>t<TR>b<MB>" (any of them: "r3c2"), over
 * the choices: for measuring others on a GPU, and for tests of uncommon
 * ones. */
static int dw_override(kx *k, const kx_conv *cv, dw_plan *p, const char *env)
{
	for (const char *s = env; *s;) {
		char c = *s++, *e;
		long v = strtol(s, &e, 10);
		if (e == s || v < 1 || v > 1024 || !strchr("rcptb", c))
			return kx_fail(k, "$KFUSE_DEPTHWISE '%s' is not r<R>c<CS>p<P>t<TR>b<MB>", env);
		s = e;
		*(c == 'r' ? &p->R : c == 'c' ? &p->CS : c == 'p' ? &p->P : c == 't' ? &p->TR : &p->MB) = (int)v;
	}
	p->NS = p->G / p->CS;
	if (p->R > 8 || dw_span(cv, p->R) > 64 || p->G % p->CS || cv->KK * p->CS * p->V * p->asz > DW_SMEM ||
	    p->CS * p->P > 1024 || p->TR > 64 || p->MB > 32)
		return kx_fail(k, "$KFUSE_DEPTHWISE '%s' does not fit this conv (R <= 8, CS dividing %lld, "
			       "its weights in %d bytes, CS x P <= 1024, TR <= 64, MB <= 32)", env, (long long)p->G, DW_SMEM);
	return 0;
}

/* The plan of mm's depthwise kernel: 0, or 1 when its weights or rows
 * cannot be held (the generic direct kernel then), -1 on an error. */
static int dw_plan_of(kx *k, const kx_mm *mm, int V, dw_plan *p)
{
	const kx_conv *cv = &mm->cv;
	const char *acc = kx_mm_acc_type(mm);
	*p = (dw_plan){.V = V, .asz = strcmp(acc, "float") ? 8 : 4, .G = cv->C / V};
	p->R = dw_pick_r(cv, p);
	if (!p->R || !dw_pick_cs(cv, p, 32))
		return 1;
	for (int pass = 0; pass < 2; pass++) { /* the choices, then those $KFUSE_DEPTHWISE changes */
		p->OWG = (cv->out[2] + p->R - 1) / p->R;
		p->Q = mm->M / cv->out[2] * p->OWG;
		if (pass == 0)
			dw_pick_block(cv, p);
		const char *env = getenv("KFUSE_DEPTHWISE");
		if (pass == 0 && env && *env && dw_override(k, cv, p, env) != 0)
			return -1;
	}
	p->L = dw_span(cv, p->R);
	p->used = dw_used(cv, p->R);
	return 0;
}

/* The block's weights into shared memory, [tap][channel]: a coalesced
 * read of the slice's run [c0 KK, (c0 + CS V) KK), a strided write that
 * each block does once.  No thread leaves before the barrier. */
static void dw_stage(kx *k, const kx_mm *mm, const dw_plan *p)
{
	const kx_conv *cv = &mm->cv;
	const char *it = kx_it(k), *acc = kx_mm_acc_type(mm);
	int CSV = p->CS * p->V, T = p->CS * p->P;
	long long KK = (long long)cv->KK;
	kf_buf *b = &k->b;
	kf_buf_printf(b, "  __shared__ __align__(16) %s kf_w[%lld];\n", acc, KK * CSV);
	if (p->NS > 1)
		kf_buf_printf(b, "  const %s c0 = (%s)(blockIdx.x %% %lldu) * %d;\n", it, it, (long long)p->NS, CSV);
	else
		kf_buf_printf(b, "  const %s c0 = 0;\n", it);
	kf_buf_printf(b, "  for (int e = threadIdx.x; e < %lld; e += %d) {\n", KK * CSV, T);
	kf_buf_printf(b, "    const int c = e / %lld;\n    kf_w[(e - c * %lld) * %d + c] = ", KK, KK, CSV);
	kx_load(b, mm->b.st, "p%d[c0 * %lld + e]", mm->b.param, KK);
	kf_buf_puts(b, ";\n  }\n  __syncthreads();\n");
}

/* The thread's tile of trip `tr`: its first output row rb (position n,
 * od, oh, ow0), ow0, and the input's first depth, row and column. */
static void dw_tile(kx *k, const kx_mm *mm, const dw_plan *p)
{
	const kx_conv *cv = &mm->cv;
	const char *it = kx_it(k);
	kf_buf *b = &k->b;
	kf_buf_printf(b, "    const %s tile = tb + tr * %d;\n    if (tile >= %lldLL) break;\n", it, p->P, (long long)p->Q);
	kf_buf_printf(b, "    const %s q0 = tile / %lld;\n", it, (long long)p->OWG);
	kf_buf_printf(b, "    const int ow0 = (int)(tile - q0 * %lld) * %d, oh = (int)(q0 %% %lld), od = (int)(q0 / %lld %% %lld);\n",
		      (long long)p->OWG, p->R, (long long)cv->out[1], (long long)cv->out[1], (long long)cv->out[0]);
	kf_buf_printf(b, "    const %s n = q0 / %lld, rb = q0 * %lld + ow0;\n", it, (long long)(cv->out[1] * cv->out[0]),
		      (long long)cv->out[2]);
	kf_buf_printf(b, "    const int id0 = od * %lld - %lld, ih0 = oh * %lld - %lld, iw0 = ow0 * %lld - %lld;\n",
		      (long long)cv->s[0], (long long)cv->pb[0], (long long)cv->s[1], (long long)cv->pb[1],
		      (long long)cv->s[2], (long long)cv->pb[2]);
}

/* The taps' rows (kd, kh) that land inside the input: the row's L input
 * vectors loaded (those some output reads) and converted once, then
 * acc[r][j] += x[r s + kw d][j] w[tap][j] over kw, r, j. */
static void dw_rows(kx *k, const kx_mm *mm, const dw_plan *p)
{
	const kx_conv *cv = &mm->cv;
	const char *it = kx_it(k), *acc = kx_mm_acc_type(mm), *st = kx_st(mm->a.st);
	int V = p->V, L = p->L, CSV = p->CS * p->V;
	kf_buf *b = &k->b;
	kf_buf_printf(b, "#pragma unroll\n    for (int kd = 0; kd < %lld; kd++) {\n      const int id = id0 + kd * %lld;\n"
		      "      if ((unsigned)id >= %lldu) continue;\n", (long long)cv->k[0], (long long)cv->d[0],
		      (long long)cv->in[0]);
	kf_buf_printf(b, "#pragma unroll\n    for (int kh = 0; kh < %lld; kh++) {\n      const int ih = ih0 + kh * %lld;\n"
		      "      if ((unsigned)ih >= %lldu) continue;\n", (long long)cv->k[1], (long long)cv->d[1],
		      (long long)cv->in[1]);
	kf_buf_printf(b, "      const %s xr = ((n * %lld + id) * %lld + ih) * %lld + col;\n      %s xf[%d][%d];\n", it,
		      (long long)cv->in[0], (long long)cv->in[1], (long long)(cv->in[2] * cv->C), acc, L, V);
	kf_buf_printf(b, "#pragma unroll\n      for (int i = 0; i < %d; i++) {\n", L);
	if (p->used != (L == 64 ? ~0ULL : (1ULL << L) - 1)) /* strides past the taps' reach skip vectors */
		kf_buf_printf(b, "        if (!((0x%llxULL >> i) & 1)) continue;\n", (unsigned long long)p->used);
	kf_buf_printf(b, "        const int iw = iw0 + i;\n        __align__(16) %s xv[%d];\n", st, V);
	kf_buf_printf(b, "        *(uint4 *)xv = (unsigned)iw < %lldu ? __ldg((const uint4 *)(p%d + xr + iw * %lld)) : "
		      "make_uint4(0, 0, 0, 0);\n", (long long)cv->in[2], mm->a.param, (long long)cv->C);
	kf_buf_printf(b, "#pragma unroll\n        for (int j = 0; j < %d; j++) xf[i][j] = ", V);
	kx_load(b, mm->a.st, "xv[j]");
	kf_buf_puts(b, ";\n      }\n");
	kf_buf_printf(b, "#pragma unroll\n      for (int kw = 0; kw < %lld; kw++) {\n        __align__(16) %s wv[%d];\n",
		      (long long)cv->k[2], acc, V);
	kf_buf_printf(b, "        const uint4 *ws = (const uint4 *)(kf_w + ((kd * %lld + kh) * %lld + kw) * %d + cl);\n",
		      (long long)cv->k[1], (long long)cv->k[2], CSV);
	kf_buf_printf(b, "#pragma unroll\n        for (int h = 0; h < %d; h++) ((uint4 *)wv)[h] = ws[h];\n",
		      V * p->asz / 16);
	kf_buf_printf(b, "#pragma unroll\n        for (int r = 0; r < %d; r++)\n#pragma unroll\n"
		      "          for (int j = 0; j < %d; j++) acc[r][j] += xf[r * %lld + kw * %lld][j] * wv[j];\n",
		      p->R, V, (long long)cv->s[2], (long long)cv->d[2]);
	kf_buf_puts(b, "      }\n    }}\n");
}

/* The tile's outputs through the epilogue, those before the row's end. */
static void dw_store(kx *k, const kx_conv *cv, const dw_plan *p, bool pair)
{
	kf_buf *b = &k->b;
	kf_buf_printf(b, "#pragma unroll\n    for (int r = 0; r < %d; r++) {\n", p->R);
	if (cv->out[2] % p->R)
		kf_buf_printf(b, "      if (ow0 + r >= %lld) break;\n", (long long)cv->out[2]);
	kf_buf_printf(b, "#pragma unroll\n      for (int j = 0; j < %d; j += %d)\n        ", p->V, pair ? 2 : 1);
	if (pair) {
		kx_mm_epi2_call(k, b);
		kf_buf_puts(b, "0, rb + r, col + j, acc[r][j], acc[r][j + 1]);\n    }\n");
	} else {
		kx_mm_epi_call(k, b);
		kf_buf_puts(b, "0, rb + r, col + j, acc[r][j]);\n    }\n");
	}
}

static int emit_depthwise(kx *k, kx_mm *mm, int V)
{
	const kx_conv *cv = &mm->cv;
	dw_plan p;
	int rc = dw_plan_of(k, mm, V, &p);
	if (rc != 0)
		return rc;
	const char *it = kx_it(k), *acc = kx_mm_acc_type(mm);
	int T = p.CS * p.P;
	kf_buf *b = &k->b;
	k->k->block = T;
	k->k->units = dw_units(&p);
	k->k->per_sm = -1;
	int warps = (T + 31) / 32;
	k->k->min_blocks = p.MB ? p.MB : warps < DW_WARPS(cv) ? DW_WARPS(cv) / warps : 1;
	if (k->k->units >= (1LL << 31))
		return kx_fail(k, "a conv with more than 2^31 blocks of outputs");
	bool pair = kx_mm_epilogue2(k, mm) == 0;
	dw_stage(k, mm, &p);
	kf_buf_printf(b, "  const int cl = threadIdx.x %% %d * %d;\n  const %s col = c0 + cl;\n", p.CS, V, it);
	kf_buf_printf(b, "  const %s tb = (%s)(blockIdx.x / %lldu) * %lld + threadIdx.x / %d;\n", it, it, (long long)p.NS,
		      (long long)p.P * p.TR, p.CS);
	kf_buf_printf(b, "  for (int tr = 0; tr < %d; tr++) {\n", p.TR);
	dw_tile(k, mm, &p);
	kf_buf_printf(b, "    %s acc[%d][%d];\n#pragma unroll\n    for (int r = 0; r < %d; r++)\n#pragma unroll\n"
		      "      for (int j = 0; j < %d; j++) acc[r][j] = 0;\n", acc, p.R, V, p.R, V);
	dw_rows(k, mm, &p);
	dw_store(k, cv, &p, pair);
	kf_buf_puts(b, "  }\n");
	return 0;
}

int kx_conv_emit_direct(kx *k, kx_mm *mm)
{
	const kx_conv *cv = &mm->cv;
	int V = 16 / (int)kf_dtype_size(mm->a.st);
	if (cv->cl && cv->Cg == 1 && cv->Og == 1 && cv->C % V == 0 && mm->a.st == mm->b.st && mm->a.nchain == 0 &&
	    mm->b.nchain == 0 && V <= 8) {
		int rc = emit_depthwise(k, mm, V);
		if (rc != 1) /* 1: its weights or rows too large; the kernel below */
			return rc;
	}
	const char *it = kx_it(k), *acc = kx_mm_acc_type(mm);
	int64_t total = mm->M * mm->N, block = 256, P = cv->out[0] * cv->out[1] * cv->out[2];
	int64_t Pin = cv->in[0] * cv->in[1] * cv->in[2];
	kf_buf *b = &k->b;
	k->k->block = (int)block;
	k->k->units = (total + block - 1) / block;
	k->k->per_sm = -1;
	if (k->k->units >= (1LL << 31))
		return kx_fail(k, "a conv with more than 2^31 blocks of outputs");
	kf_buf_printf(b, "  const %s idx = (%s)blockIdx.x * %lld + threadIdx.x;\n  if (idx >= %lldLL) return;\n", it, it,
		      (long long)block, (long long)total);
	/* consecutive threads along the layout's innermost dim: channels, or
	 * positions channels-first */
	if (cv->cl)
		kf_buf_printf(b, "  const %s col = idx %% %lld, row = idx / %lld;\n", it, (long long)cv->O, (long long)cv->O);
	else
		kf_buf_printf(b, "  const %s col = idx / %lld %% %lld, row = idx / %lld * %lld + idx %% %lld;\n", it,
			      (long long)P, (long long)cv->O, (long long)(P * cv->O), (long long)P, (long long)P);
	split_row(b, cv, it, "row");
	kf_buf_printf(b, "  const %s xg = (%s)(col / %lld) * %lld, wb = col * %lld;\n", it, it, (long long)cv->Og,
		      (long long)cv->Cg, (long long)(cv->KK * cv->Cg));
	kf_buf_printf(b, "  %s acc = 0;\n", acc);
	open_taps(b, cv);
	/* x's channel c and w's input channel c of this tap, by layout:
	 * [N, D.., C] and [O, K.., Cg], or [N, C, D..] and [O, Cg, K..] */
	if (cv->cl) {
		kf_buf_printf(b, "    const %s xb = (((n * %lld + id) * %lld + ih) * %lld + iw) * %lld + xg;\n", it,
			      (long long)cv->in[0], (long long)cv->in[1], (long long)cv->in[2], (long long)cv->C);
		kf_buf_printf(b, "    const %s wt = wb + ((kd * %lld + kh) * %lld + kw) * %lld;\n", it, (long long)cv->k[1],
			      (long long)cv->k[2], (long long)cv->Cg);
	} else {
		kf_buf_printf(b, "    const %s xb = (n * %lld + xg) * %lld + (id * %lld + ih) * %lld + iw;\n", it,
			      (long long)cv->C, (long long)Pin, (long long)cv->in[1], (long long)cv->in[2]);
		kf_buf_printf(b, "    const %s wt = wb + (kd * %lld + kh) * %lld + kw;\n", it, (long long)cv->k[1],
			      (long long)cv->k[2]);
	}
	int64_t xs = cv->cl ? 1 : Pin, ws = cv->cl ? 1 : cv->KK;
	kf_buf_printf(b, "#pragma unroll 4\n    for (int c = 0; c < %lld; c++)\n      acc += ", (long long)cv->Cg);
	kx_load(b, mm->a.st, "p%d[xb + c * %lld]", mm->a.param, (long long)xs);
	kf_buf_puts(b, " * ");
	kx_load(b, mm->b.st, "p%d[wt + c * %lld]", mm->b.param, (long long)ws);
	kf_buf_puts(b, ";\n  }}}\n  ");
	kx_mm_epi_call(k, b);
	kf_buf_puts(b, "0, row, col, acc);\n");
	return 0;
}

/* conv_transpose (channels-first, its only form): a thread per output
 * element gathers the inputs each tap scatters onto it: input position
 * (o + pad_begin - k dilation) / stride where that divides and lands. */
static int emit_conv_transpose(kx *k)
{
	kf_graph *g = k->g;
	kf_nid n = k->node[0];
	kf_win w;
	kx_conv cv;
	if (k->nnode != 1 || k->nout != 1 || k->nparam < 2 || kf_win_of(g, n, &w) != 0)
		return kx_fail(k, "a conv_transpose kernel holds one conv_transpose");
	pad3(&w, &cv);
	kf_dtype xt = kx_dt(k, k->param[0]), wt = kx_dt(k, k->param[1]);
	const char *it = kx_it(k), *acc = xt == KF_F64 ? "double" : "float";
	int64_t total = kx_numel(k, k->out[0]), block = 256, P = cv.out[0] * cv.out[1] * cv.out[2];
	int64_t Pin = cv.in[0] * cv.in[1] * cv.in[2];
	kf_buf *b = &k->b;
	k->k->block = (int)block;
	k->k->units = (total + block - 1) / block;
	k->k->per_sm = -1;
	if (k->k->units >= (1LL << 31))
		return kx_fail(k, "a conv_transpose with more than 2^31 blocks of outputs");
	kf_buf_printf(b, "  const %s idx = (%s)blockIdx.x * %lld + threadIdx.x;\n  if (idx >= %lldLL) return;\n", it, it,
		      (long long)block, (long long)total);
	kf_buf_printf(b, "  const %s p = idx %% %lld, o = idx / %lld %% %lld, n = idx / %lld;\n", it, (long long)P,
		      (long long)P, (long long)cv.O, (long long)(P * cv.O));
	kf_buf_printf(b, "  const int ow = (int)(p %% %lld), oh = (int)(p / %lld %% %lld), od = (int)(p / %lld);\n",
		      (long long)cv.out[2], (long long)cv.out[2], (long long)cv.out[1], (long long)(cv.out[2] * cv.out[1]));
	kf_buf_printf(b, "  const %s g = o / %lld, oo = o %% %lld;\n  %s acc = ", it, (long long)cv.Og, (long long)cv.Og, acc);
	if (k->nparam > 2)
		kx_load(b, kx_dt(k, k->param[2]), "p2[o]");
	else
		kf_buf_puts(b, "0");
	kf_buf_puts(b, ";\n");
	static const char *const kn[3] = {"kd", "kh", "kw"}, *const in[3] = {"id", "ih", "iw"},
			       *const on[3] = {"od", "oh", "ow"};
	for (int a = 0; a < 3; a++) {
		kf_buf_printf(b, "#pragma unroll\n  for (int %s = 0; %s < %lld; %s++) {\n", kn[a], kn[a], (long long)cv.k[a], kn[a]);
		kf_buf_printf(b, "    const int t%d = %s + %lld - %s * %lld;\n", a, on[a], (long long)cv.pb[a], kn[a],
			      (long long)cv.d[a]);
		kf_buf_printf(b, "    if (t%d < 0 || t%d %% %lld) continue;\n    const int %s = t%d / %lld;\n", a, a,
			      (long long)cv.s[a], in[a], a, (long long)cv.s[a]);
		kf_buf_printf(b, "    if (%s >= %lld) continue;\n", in[a], (long long)cv.in[a]);
	}
	/* x [N, C, D..], w [C, Og, K..] */
	kf_buf_printf(b, "    const %s xb = (n * %lld + g * %lld) * %lld + (id * %lld + ih) * %lld + iw;\n", it,
		      (long long)cv.C, (long long)cv.Cg, (long long)Pin, (long long)cv.in[1], (long long)cv.in[2]);
	kf_buf_printf(b, "    const %s wb = (g * %lld * %lld + oo) * %lld + (kd * %lld + kh) * %lld + kw;\n", it,
		      (long long)cv.Cg, (long long)cv.Og, (long long)cv.KK, (long long)cv.k[1], (long long)cv.k[2]);
	kf_buf_printf(b, "    for (int c = 0; c < %lld; c++)\n      acc += ", (long long)cv.Cg);
	kx_load(b, xt, "p0[xb + c * %lld]", (long long)Pin);
	kf_buf_puts(b, " * ");
	kx_load(b, wt, "p1[wb + c * %lld]", (long long)(cv.Og * cv.KK));
	kf_buf_puts(b, ";\n  }}}\n  o0[idx] = ");
	kx_store(b, kx_dt(k, k->out[0]), "acc");
	kf_buf_puts(b, ";\n");
	return 0;
}

/* The taps and the store of a channels-last pool of V channels a thread
 * (c the first, n/od/oh/ow the position, cnt the average's count): f32
 * accumulators, NaN winning a max (kf_max) as in the interpreter. */
static void pool_vec(kx *k, const kx_conv *cv, bool max, kf_dtype dt, int V)
{
	kf_buf *b = &k->b;
	const char *it = kx_it(k), *st = kx_st(dt);
	kf_buf_printf(b, "  float m[%d];\n#pragma unroll\n  for (int j = 0; j < %d; j++) m[j] = %s;\n", V, V,
		      max ? "-KF_INF" : "0.0f");
	open_taps(b, cv);
	kf_buf_printf(b, "    const %s xi = (((n * %lld + id) * %lld + ih) * %lld + iw) * %lld + c;\n", it,
		      (long long)cv->in[0], (long long)cv->in[1], (long long)cv->in[2], (long long)cv->C);
	kf_buf_printf(b, "    __align__(16) %s xv[%d];\n    *(uint4 *)xv = __ldg((const uint4 *)(p0 + xi));\n", st, V);
	kf_buf_printf(b, "#pragma unroll\n    for (int j = 0; j < %d; j++) {\n      const float v = ", V);
	kx_load(b, dt, "xv[j]");
	kf_buf_puts(b, max ? ";\n      m[j] = kf_max(v, m[j]);\n    }\n  }}}\n" : ";\n      m[j] += v;\n    }\n  }}}\n");
	kf_buf_printf(b, "  __align__(16) %s ov[%d];\n#pragma unroll\n  for (int j = 0; j < %d; j++) ov[j] = ", st, V, V);
	kx_store(b, dt, max ? "m[j]" : "m[j] / (float)cnt");
	kf_buf_printf(b, ";\n  *(uint4 *)(o0 + idx * %d) = *(const uint4 *)ov;\n", V);
}

int kx_emit_pool(kx *k)
{
	kf_graph *g = k->g;
	kf_nid n = k->node[0];
	kf_win w;
	kx_conv cv;
	if (k->nnode == 1 && kf_N(g, n)->op == KF_OP_CONV_TRANSPOSE)
		return emit_conv_transpose(k);
	if (k->nnode != 1 || k->nparam != 1 || k->nout != 1 || kf_win_of(g, n, &w) != 0)
		return kx_fail(k, "a pool kernel holds one max_pool or avg_pool");
	pad3(&w, &cv);
	bool max = kf_N(g, n)->op == KF_OP_MAX_POOL;
	kf_dtype dt = kx_dt(k, k->param[0]);
	const char *it = kx_it(k);
	const char *acc = dt == KF_F64 ? "double" : kf_dtype_is_float(dt) ? "float" : "long long";
	/* channels last with the channels in 16-byte runs of f16, bf16 or
	 * f32: a thread takes V channels of one position, each tap one 16-byte
	 * load, one 16-byte store (a memory-bound kernel: 2-byte accesses
	 * were an instruction each) */
	int V = 1;
	if (w.cl && (dt == KF_F16 || dt == KF_BF16 || dt == KF_F32) && kx_dt(k, k->out[0]) == dt &&
	    cv.C % (16 / (int64_t)kf_dtype_size(dt)) == 0)
		V = 16 / (int)kf_dtype_size(dt);
	int64_t total = kx_numel(k, k->out[0]) / V, block = 256;
	kf_buf *b = &k->b;
	k->k->block = (int)block;
	k->k->units = (total + block - 1) / block;
	k->k->per_sm = -1;
	if (k->k->units >= (1LL << 31))
		return kx_fail(k, "a pool with more than 2^31 blocks of outputs");
	kf_buf_printf(b, "  const %s idx = (%s)blockIdx.x * %lld + threadIdx.x;\n  if (idx >= %lldLL) return;\n", it, it,
		      (long long)block, (long long)total);
	int64_t P = cv.out[0] * cv.out[1] * cv.out[2], Pin = cv.in[0] * cv.in[1] * cv.in[2];
	if (w.cl) {
		kf_buf_printf(b, "  const %s c = idx %% %lld * %d, row = idx / %lld;\n", it, (long long)(cv.C / V), V,
			      (long long)(cv.C / V));
		split_row(b, &cv, it, "row");
	} else {
		kf_buf_printf(b, "  const %s p = idx %% %lld, nc = idx / %lld;\n", it, (long long)P, (long long)P);
		split_row(b, &cv, it, "p");
		kf_buf_puts(b, "  (void)n;\n"); /* (nc holds the image) */
	}
	/* avg: the count of the window's taps in the input, or in the padded
	 * extent with count_include_pad (a ceil_mode window's overhang never
	 * counts), per dim */
	if (!max) {
		static const char *const on[3] = {"od", "oh", "ow"};
		kf_buf_puts(b, "  int cnt = 1;\n");
		for (int a = 0; a < 3; a++) {
			if (cv.k[a] == 1 && cv.pb[a] == 0 && cv.pe[a] == 0)
				continue;
			int64_t lo = w.cip ? -cv.pb[a] : 0, hi = cv.in[a] + (w.cip ? cv.pe[a] : 0);
			kf_buf_printf(b, "  { int t = 0;\n#pragma unroll\n    for (int j = 0; j < %lld; j++) { const int i = %s * %lld - %lld + j * %lld; "
				      "t += i >= %lld && i < %lld; }\n    cnt *= t; }\n", (long long)cv.k[a], on[a],
				      (long long)cv.s[a], (long long)cv.pb[a], (long long)cv.d[a], (long long)lo, (long long)hi);
		}
	}
	if (V > 1) {
		pool_vec(k, &cv, max, dt, V);
		return 0;
	}
	if (max)
		kf_buf_printf(b, "  %s m = %s;\n", acc,
			      !strcmp(acc, "long long") ? "(-9223372036854775807LL - 1)" : !strcmp(acc, "double") ? "-KF_DINF" : "-KF_INF");
	else
		kf_buf_printf(b, "  %s m = 0;\n", acc);
	open_taps(b, &cv);
	if (w.cl)
		kf_buf_printf(b, "    const %s xi = (((n * %lld + id) * %lld + ih) * %lld + iw) * %lld + c;\n", it, (long long)cv.in[0],
			      (long long)cv.in[1], (long long)cv.in[2], (long long)cv.C);
	else
		kf_buf_printf(b, "    const %s xi = nc * %lld + (id * %lld + ih) * %lld + iw;\n", it, (long long)Pin,
			      (long long)cv.in[1], (long long)cv.in[2]);
	kf_buf_printf(b, "    const %s v = ", acc);
	kx_load(b, dt, "p0[xi]");
	/* NaN wins a max and stays (kf_max), as the interpreter's */
	kf_buf_puts(b, max ? ";\n    m = kf_max(v, m);\n  }}}\n" : ";\n    m += v;\n  }}}\n");
	kf_buf_puts(b, "  o0[idx] = ");
	kx_store(b, kx_dt(k, k->out[0]), max ? "m" : "m / (%s)cnt", acc);
	kf_buf_puts(b, ";\n");
	(void)n;
	return 0;
}
