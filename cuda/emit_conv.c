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
void kx_conv_split_row(kf_buf *b, const kx_conv *cv, const char *it, const char *row)
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
	kx_conv_split_row(b, cv, it, "m");
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

/* A thread an output unit (an element, or a vector of channels): blocks of
 * 256 over `total` units, and `idx`, the thread's unit, in scope (threads
 * past the end return).  `what` names the op in the error. */
int kx_conv_thread_grid(kx *k, int64_t total, const char *what)
{
	k->k->block = 256;
	k->k->units = (total + 255) / 256;
	k->k->per_sm = -1;
	if (k->k->units >= (1LL << 31))
		return kx_fail(k, "a %s with more than 2^31 blocks of outputs", what);
	kf_buf_printf(&k->b, "  const %s idx = (%s)blockIdx.x * 256 + threadIdx.x;\n  if (idx >= %lldLL) return;\n", kx_it(k),
		      kx_it(k), (long long)total);
	return 0;
}

/* Opens the loops over the taps (kd, kh, kw) that land inside the input,
 * with id, ih, iw in scope; three closing braces end them. */
void kx_conv_open_taps(kf_buf *b, const kx_conv *cv)
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

int kx_conv_emit_direct(kx *k, kx_mm *mm)
{
	const kx_conv *cv = &mm->cv;
	int V = 16 / (int)kf_dtype_size(mm->a.st);
	if (cv->cl && cv->Cg == 1 && cv->Og == 1 && cv->C % V == 0 && mm->a.st == mm->b.st && mm->a.nchain == 0 &&
	    mm->b.nchain == 0 && V <= 8) {
		int rc = kx_conv_emit_depthwise(k, mm, V);
		if (rc != 1) /* 1: its weights or rows too large; the kernel below */
			return rc;
	}
	const char *it = kx_it(k), *acc = kx_mm_acc_type(mm);
	int64_t P = cv->out[0] * cv->out[1] * cv->out[2];
	int64_t Pin = cv->in[0] * cv->in[1] * cv->in[2];
	kf_buf *b = &k->b;
	if (kx_conv_thread_grid(k, mm->M * mm->N, "conv") != 0)
		return -1;
	/* consecutive threads along the layout's innermost dim: channels, or
	 * positions channels-first */
	if (cv->cl)
		kf_buf_printf(b, "  const %s col = idx %% %lld, row = idx / %lld;\n", it, (long long)cv->O, (long long)cv->O);
	else
		kf_buf_printf(b, "  const %s col = idx / %lld %% %lld, row = idx / %lld * %lld + idx %% %lld;\n", it,
			      (long long)P, (long long)cv->O, (long long)(P * cv->O), (long long)P, (long long)P);
	kx_conv_split_row(b, cv, it, "row");
	kf_buf_printf(b, "  const %s xg = (%s)(col / %lld) * %lld, wb = col * %lld;\n", it, it, (long long)cv->Og,
		      (long long)cv->Cg, (long long)(cv->KK * cv->Cg));
	kf_buf_printf(b, "  %s acc = 0;\n", acc);
	kx_conv_open_taps(b, cv);
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
	int64_t P = cv.out[0] * cv.out[1] * cv.out[2];
	int64_t Pin = cv.in[0] * cv.in[1] * cv.in[2];
	kf_buf *b = &k->b;
	if (kx_conv_thread_grid(k, kx_numel(k, k->out[0]), "conv_transpose") != 0)
		return -1;
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
	kx_conv_open_taps(b, cv);
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
	kf_buf *b = &k->b;
	if (kx_conv_thread_grid(k, kx_numel(k, k->out[0]) / V, "pool") != 0)
		return -1;
	int64_t P = cv.out[0] * cv.out[1] * cv.out[2], Pin = cv.in[0] * cv.in[1] * cv.in[2];
	if (w.cl) {
		kf_buf_printf(b, "  const %s c = idx %% %lld * %d, row = idx / %lld;\n", it, (long long)(cv.C / V), V,
			      (long long)(cv.C / V));
		kx_conv_split_row(b, &cv, it, "row");
	} else {
		kf_buf_printf(b, "  const %s p = idx %% %lld, nc = idx / %lld;\n", it, (long long)P, (long long)P);
		kx_conv_split_row(b, &cv, it, "p");
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
	kx_conv_open_taps(b, &cv);
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
