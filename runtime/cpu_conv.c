/* cpu_conv.c: conv, conv_transpose, max_pool and avg_pool (ONNX semantics,
 * docs/ops.md "Convolution and pooling"), channels-first and channels-last.
 *
 * Everything works on three spatial dims: a 1-D or 2-D op is padded at the
 * front with dims of size 1 and kernel 1, so one loop nest serves all.
 * Float operands are converted once to double, like matmul's.
 *
 * conv is im2col into the blocked matmul (cpu_matmul.c), one image at a
 * time so that the column buffer stays the size of one image's patches:
 *   channels first: Y[n, g] [Og][P] = W_g [Og][K] x col [K][P],
 *                   K = (c, kd, kh, kw), P = output positions;
 *   channels last:  Y[n] [P][O] (group g's Og columns) = col [P][K] x W_g^T,
 *                   K = (kd, kh, kw, c), the weight's own order.
 * conv_transpose is the adjoint: cols [Og*KK][Pin] = W_g^T x X[n, g], then
 * each column is scattered into the output (col2im) in double.  The bias
 * is added in double before the single rounding to the result dtype.
 * Pools are direct loops over windows, in double for floats and int64 for
 * integers (max_pool only), threaded over planes or rows.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "cpu_ops.h"

/* The build's -O2 (gcc 12) vectorises only loops whose trip count is known;
 * these kernels are all unknown-length loops over contiguous buffers. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3")
#endif

#define WIN_MAX (INT64_C(1) << 31)

/* ---- geometry ------------------------------------------------------------- */

/* An int list attribute of `want` entries in [lo, WIN_MAX] (absent: dflt). */
static int win_list(kf_graph *g, kf_nid n, const char *key, int want, int64_t lo, int64_t dflt,
		    int64_t *out, char *err, size_t errlen)
{
	int64_t v[6];
	int got = kf_attr_ints(g, n, key, v, 6);
	if (got >= 0 && got != want)
		return kf_rt_fail(err, errlen, "%s has %d entries, expected %d", key, got, want);
	for (int i = 0; i < want; i++) {
		out[i] = got < 0 ? dflt : v[i];
		if (out[i] < lo || out[i] > WIN_MAX)
			return kf_rt_fail(err, errlen, "%s[%d] = %lld is out of range", key, i, (long long)out[i]);
	}
	return 0;
}

/* Output size over input size in, as ONNX (and, for ceil_mode, PyTorch)
 * define it; -1 when the window does not fit. */
static int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe, bool ceil)
{
	int64_t span = in + pb + pe - (d * (k - 1) + 1);
	if (span < 0)
		return -1;
	int64_t o = span / s + 1;
	if (ceil && span % s && o * s < in + pb)
		o++; /* a last partial window, unless it starts in the end padding */
	return o;
}

int kf_rt_win_geom(kf_graph *g, kf_nid n, const kf_tensor *in, int nin, kf_rt_win *w,
		   int64_t *out, char *err, size_t errlen)
{
	const kf_tensor *x = &in[0];
	int op = kf_N(g, n)->op, r = x->rank;
	bool conv = op == KF_OP_CONV, convt = op == KF_OP_CONV_TRANSPOSE, pool = !conv && !convt;
	if (r < 3 || r > 5)
		return kf_rt_fail(err, errlen, "x must have rank 3 to 5, got %d", r);
	int nsp = r - 2, off = 3 - nsp;
	int64_t s[3], d[3], pads[6], k[3], opad[3] = {0, 0, 0};
	memset(w, 0, sizeof *w);
	w->nsp = nsp;
	w->cl = kf_attr_int(g, n, "channels_last", 0) != 0;
	w->group = kf_attr_int(g, n, "group", 1);
	if (win_list(g, n, "strides", nsp, 1, 1, s, err, errlen) ||
	    win_list(g, n, "dilations", nsp, 1, 1, d, err, errlen) ||
	    win_list(g, n, "pads", 2 * nsp, 0, 0, pads, err, errlen) ||
	    (convt && win_list(g, n, "output_padding", nsp, 0, 0, opad, err, errlen)) ||
	    (pool && win_list(g, n, "kernel_shape", nsp, 1, 1, k, err, errlen)))
		return -1;
	if (pool && !kf_attr_get(g, n, "kernel_shape"))
		return kf_rt_fail(err, errlen, "kernel_shape is missing");
	int cdim = w->cl ? r - 1 : 1, sp0 = w->cl ? 1 : 2;
	w->N = x->dim[0];
	w->C = x->dim[cdim];
	w->O = w->C;
	if (w->group < 1 || w->group > WIN_MAX || w->C % w->group)
		return kf_rt_fail(err, errlen, "group %lld does not divide the %lld input channels",
				  (long long)w->group, (long long)w->C);
	if (!pool) {
		const kf_tensor *wt = &in[1];
		if (nin < 2 || wt->rank != r)
			return kf_rt_fail(err, errlen, "the weight must have x's rank %d", r);
		int wc = conv ? (w->cl ? r - 1 : 1) : 0, k0 = conv && w->cl ? 1 : 2;
		int64_t cin = conv ? wt->dim[wc] * w->group : wt->dim[0];
		w->O = conv ? wt->dim[0] : wt->dim[1] * w->group;
		if (cin != w->C || (conv && w->O % w->group))
			return kf_rt_fail(err, errlen, "weight channels do not match x's %lld with group %lld",
					  (long long)w->C, (long long)w->group);
		for (int i = 0; i < nsp; i++)
			k[i] = wt->dim[k0 + i];
		if (nin > 2 && (in[2].rank != 1 || in[2].dim[0] != w->O))
			return kf_rt_fail(err, errlen, "the bias must be [%lld]", (long long)w->O);
	}
	for (int i = 0; i < 3; i++) {
		w->in[i] = w->out[i] = w->k[i] = w->s[i] = w->d[i] = 1;
		w->pb[i] = w->pe[i] = 0;
	}
	bool ceil = pool && kf_attr_int(g, n, "ceil_mode", 0) != 0;
	for (int i = 0; i < nsp; i++) {
		int j = off + i;
		int64_t in_i = x->dim[sp0 + i], o;
		if (k[i] < 1)
			return kf_rt_fail(err, errlen, "the kernel is empty");
		if (convt) {
			o = s[i] * (in_i - 1) + opad[i] + d[i] * (k[i] - 1) + 1 - pads[i] - pads[nsp + i];
			if (in_i < 1 || o < 1)
				return kf_rt_fail(err, errlen, "spatial dim %d has no output", i);
		} else if ((o = out_size(in_i, k[i], s[i], d[i], pads[i], pads[nsp + i], ceil)) < 0) {
			return kf_rt_fail(err, errlen, "the window of spatial dim %d is larger than the padded input", i);
		}
		w->in[j] = in_i;
		w->out[j] = o;
		w->k[j] = k[i];
		w->s[j] = s[i];
		w->d[j] = d[i];
		w->pb[j] = pads[i];
		w->pe[j] = pads[nsp + i];
	}
	out[0] = w->N;
	out[cdim] = w->O;
	for (int i = 0; i < nsp; i++)
		out[sp0 + i] = w->out[off + i];
	return 0;
}

/* ---- buffers --------------------------------------------------------------- */

/* x converted to kind k (8-byte elements); NULL when out of memory. */
static void *to_kind(const kf_tensor *t, rt_kind k)
{
	int64_t n = kf_tensor_numel(t);
	void *p = malloc(n ? (size_t)n * 8 : 8);
	if (p)
		kf_rt_load(t->dtype, t->data, 1, n, k, p);
	return p;
}

static int64_t kk_of(const kf_rt_win *w) { return w->k[0] * w->k[1] * w->k[2]; }
static int64_t pin_of(const kf_rt_win *w) { return w->in[0] * w->in[1] * w->in[2]; }
static int64_t pout_of(const kf_rt_win *w) { return w->out[0] * w->out[1] * w->out[2]; }

/* The input index of output o at tap j of spatial dim a (may be outside). */
static inline int64_t tap(const kf_rt_win *w, int a, int64_t o, int64_t j)
{
	return o * w->s[a] - w->pb[a] + j * w->d[a];
}

/* ---- conv, channels first --------------------------------------------------- */

struct im2col {
	const kf_rt_win *w;
	const double *x; /* one image [C][Pin] */
	double *col;     /* [C * KK][P]: row (c, kd, kh, kw) */
};

/* Rows [lo, hi) of the column matrix. */
static void im2col_rows(void *arg, int64_t lo, int64_t hi)
{
	const struct im2col *a = arg;
	const kf_rt_win *w = a->w;
	int64_t KK = kk_of(w), P = pout_of(w), OW = w->out[2], IW = w->in[2];
	for (int64_t row = lo; row < hi; row++) {
		int64_t c = row / KK, kr = row % KK;
		int64_t kd = kr / (w->k[1] * w->k[2]), kh = kr / w->k[2] % w->k[1], kw = kr % w->k[2];
		const double *xc = a->x + c * pin_of(w);
		double *dst = a->col + row * P;
		/* the ow range whose tap lies inside [0, IW) */
		int64_t base = -w->pb[2] + kw * w->d[2], s = w->s[2];
		int64_t lo_w = base >= 0 ? 0 : (-base + s - 1) / s;
		int64_t hi_w = IW - base <= 0 ? 0 : (IW - base - 1) / s + 1;
		if (hi_w > OW)
			hi_w = OW;
		if (lo_w > hi_w)
			lo_w = hi_w;
		for (int64_t od = 0; od < w->out[0]; od++) {
			int64_t id = tap(w, 0, od, kd);
			for (int64_t oh = 0; oh < w->out[1]; oh++, dst += OW) {
				int64_t ih = tap(w, 1, oh, kh);
				if (id < 0 || id >= w->in[0] || ih < 0 || ih >= w->in[1]) {
					memset(dst, 0, (size_t)OW * sizeof *dst);
					continue;
				}
				const double *src = xc + (id * w->in[1] + ih) * IW + base;
				for (int64_t ow = 0; ow < lo_w; ow++)
					dst[ow] = 0;
				if (s == 1)
					memcpy(dst + lo_w, src + lo_w, (size_t)(hi_w - lo_w) * sizeof *dst);
				else
					for (int64_t ow = lo_w; ow < hi_w; ow++)
						dst[ow] = src[ow * s];
				for (int64_t ow = hi_w; ow < OW; ow++)
					dst[ow] = 0;
			}
		}
	}
}

/* True when the column matrix is the input itself: a 1x1 window, stride 1,
 * no padding. */
static bool pointwise(const kf_rt_win *w)
{
	for (int i = 0; i < 3; i++)
		if (w->k[i] != 1 || w->s[i] != 1 || w->pb[i] != 0 || w->out[i] != w->in[i])
			return false;
	return true;
}

static int conv_first(const kf_rt_win *w, const double *X, const double *W, const double *bias,
		      kf_tensor *y)
{
	int64_t G = w->group, Cg = w->C / G, Og = w->O / G, KK = kk_of(w), K = Cg * KK;
	int64_t P = pout_of(w), Pin = pin_of(w);
	bool pw = pointwise(w);
	double *col = pw ? NULL : malloc((size_t)(G * K * P) * sizeof *col + 8);
	int64_t *off = malloc((size_t)G * 4 * sizeof *off);
	if ((!pw && !col) || !off) {
		free(col), free(off);
		return -1;
	}
	kf_rt_mm m = {.k = RT_F64, .A = W, .M = Og, .N = P, .K = K, .nbatch = G, .ldy = P, .y = y->data,
		      .ydt = y->dtype, .alpha = 1, .bias = bias, .bias_rows = true};
	for (int64_t g = 0; g < G; g++) {
		off[g] = g * Og * K;
		off[G + g] = g * K * P;
		off[3 * G + g] = g * Og;
	}
	m.aoff = off;
	m.boff = off + G;
	m.yoff = off + 2 * G;
	m.bias_off = off + 3 * G;
	for (int64_t n = 0; n < w->N; n++) {
		const double *xn = X + n * w->C * Pin;
		if (!pw) {
			struct im2col a = {w, xn, col};
			kf_rt_parallel(G * K, G * K * P, im2col_rows, &a);
		}
		m.B = pw ? xn : col;
		for (int64_t g = 0; g < G; g++)
			off[2 * G + g] = (n * w->O + g * Og) * P;
		kf_rt_mm_run(&m);
	}
	free(col), free(off);
	return 0;
}

/* ---- conv, channels last ----------------------------------------------------- */

struct im2row {
	const kf_rt_win *w;
	const double *x; /* one image [Pin][C] */
	double *col;     /* [G][P][KK * Cg]: column (kd, kh, kw, c) */
};

static void im2row_rows(void *arg, int64_t lo, int64_t hi)
{
	const struct im2row *a = arg;
	const kf_rt_win *w = a->w;
	int64_t G = w->group, Cg = w->C / G, KK = kk_of(w), K = KK * Cg, P = pout_of(w);
	for (int64_t p = lo; p < hi; p++) {
		int64_t od = p / (w->out[1] * w->out[2]), oh = p / w->out[2] % w->out[1], ow = p % w->out[2];
		for (int64_t kr = 0; kr < KK; kr++) {
			int64_t id = tap(w, 0, od, kr / (w->k[1] * w->k[2]));
			int64_t ih = tap(w, 1, oh, kr / w->k[2] % w->k[1]), iw = tap(w, 2, ow, kr % w->k[2]);
			bool inside = id >= 0 && id < w->in[0] && ih >= 0 && ih < w->in[1] && iw >= 0 && iw < w->in[2];
			const double *src = a->x + ((id * w->in[1] + ih) * w->in[2] + iw) * w->C;
			for (int64_t g = 0; g < G; g++) {
				double *dst = a->col + (g * P + p) * K + kr * Cg;
				if (inside)
					memcpy(dst, src + g * Cg, (size_t)Cg * sizeof *dst);
				else
					memset(dst, 0, (size_t)Cg * sizeof *dst);
			}
		}
	}
}

static int conv_last(const kf_rt_win *w, const double *X, const double *W, const double *bias,
		     kf_tensor *y)
{
	int64_t G = w->group, Cg = w->C / G, Og = w->O / G, K = kk_of(w) * Cg;
	int64_t P = pout_of(w), Pin = pin_of(w);
	double *col = malloc((size_t)(G * P * K) * sizeof *col + 8);
	double *Wt = malloc((size_t)(w->O * K) * sizeof *Wt + 8);
	int64_t *off = malloc((size_t)G * 4 * sizeof *off);
	if (!col || !Wt || !off) {
		free(col), free(Wt), free(off);
		return -1;
	}
	/* W is [O][K]; group g's block transposed to [K][Og] */
	for (int64_t g = 0; g < G; g++)
		for (int64_t o = 0; o < Og; o++)
			for (int64_t k = 0; k < K; k++)
				Wt[(g * K + k) * Og + o] = W[(g * Og + o) * K + k];
	kf_rt_mm m = {.k = RT_F64, .A = col, .B = Wt, .M = P, .N = Og, .K = K, .nbatch = G, .ldy = w->O,
		      .y = y->data, .ydt = y->dtype, .alpha = 1, .bias = bias};
	for (int64_t g = 0; g < G; g++) {
		off[g] = g * P * K;
		off[G + g] = g * K * Og;
		off[3 * G + g] = g * Og;
	}
	m.aoff = off;
	m.boff = off + G;
	m.yoff = off + 2 * G;
	m.bias_off = off + 3 * G;
	for (int64_t n = 0; n < w->N; n++) {
		struct im2row a = {w, X + n * Pin * w->C, col};
		kf_rt_parallel(P, G * P * K, im2row_rows, &a);
		for (int64_t g = 0; g < G; g++)
			off[2 * G + g] = n * P * w->O + g * Og;
		kf_rt_mm_run(&m);
	}
	free(col), free(Wt), free(off);
	return 0;
}

/* Operands 1 and 2 (weight, bias) in double; *bias NULL when absent. */
static int load_params(const kf_tensor *in, int nin, double **W, double **bias)
{
	*W = to_kind(&in[1], RT_F64);
	*bias = nin > 2 ? to_kind(&in[2], RT_F64) : NULL;
	return *W && (nin < 3 || *bias) ? 0 : -1;
}

int kf_cpu_conv(KF_RT_CPU_ARGS)
{
	kf_rt_win w;
	int64_t shape[KF_MAX_RANK];
	if (kf_rt_win_geom(g, n, in, nin, &w, shape, err, errlen) != 0)
		return -1;
	if (kf_tensor_numel(&out[0]) == 0)
		return 0;
	double *X = to_kind(&in[0], RT_F64), *W = NULL, *bias = NULL;
	int rc = -1;
	if (X && load_params(in, nin, &W, &bias) == 0)
		rc = w.cl ? conv_last(&w, X, W, bias, &out[0]) : conv_first(&w, X, W, bias, &out[0]);
	free(X), free(W), free(bias);
	return rc ? kf_rt_fail(err, errlen, "out of memory") : 0;
}

/* ---- conv_transpose ------------------------------------------------------------ */

struct col2im {
	const kf_rt_win *w;
	const double *cols; /* [O * KK][Pin]: row (oc, kd, kh, kw) */
	const double *bias;
	double *acc;        /* [O][Pout] */
};

/* Output channels [lo, hi): each owns its plane, so threads never collide. */
static void col2im_planes(void *arg, int64_t lo, int64_t hi)
{
	const struct col2im *a = arg;
	const kf_rt_win *w = a->w;
	int64_t KK = kk_of(w), Pin = pin_of(w), Pout = pout_of(w);
	for (int64_t oc = lo; oc < hi; oc++) {
		double *y = a->acc + oc * Pout;
		double b = a->bias ? a->bias[oc] : 0;
		for (int64_t p = 0; p < Pout; p++)
			y[p] = b;
		for (int64_t kr = 0; kr < KK; kr++) {
			int64_t kd = kr / (w->k[1] * w->k[2]), kh = kr / w->k[2] % w->k[1], kw = kr % w->k[2];
			const double *src = a->cols + (oc * KK + kr) * Pin;
			for (int64_t id = 0; id < w->in[0]; id++) {
				/* input i lands on output i * s - pb + k * d */
				int64_t od = tap(w, 0, id, kd);
				if (od < 0 || od >= w->out[0])
					continue;
				for (int64_t ih = 0; ih < w->in[1]; ih++) {
					int64_t oh = tap(w, 1, ih, kh);
					if (oh < 0 || oh >= w->out[1])
						continue;
					const double *s = src + (id * w->in[1] + ih) * w->in[2];
					double *yr = y + (od * w->out[1] + oh) * w->out[2];
					for (int64_t iw = 0; iw < w->in[2]; iw++) {
						int64_t ow = tap(w, 2, iw, kw);
						if (ow >= 0 && ow < w->out[2])
							yr[ow] += s[iw];
					}
				}
			}
		}
	}
}

int kf_cpu_conv_transpose(KF_RT_CPU_ARGS)
{
	kf_rt_win w;
	int64_t shape[KF_MAX_RANK];
	if (kf_rt_win_geom(g, n, in, nin, &w, shape, err, errlen) != 0)
		return -1;
	if (kf_tensor_numel(&out[0]) == 0)
		return 0;
	int64_t G = w.group, Cg = w.C / G, Og = w.O / G, KK = kk_of(&w), Pin = pin_of(&w), Pout = pout_of(&w);
	double *X = to_kind(&in[0], RT_F64), *W = NULL, *bias = NULL;
	double *WT = malloc((size_t)(w.O * KK * Cg) * sizeof *WT + 8);
	double *cols = malloc((size_t)(w.O * KK * Pin) * sizeof *cols + 8);
	double *acc = malloc((size_t)(w.O * Pout) * sizeof *acc + 8);
	int64_t *off = malloc((size_t)G * 3 * sizeof *off);
	int rc = -1;
	if (!X || !WT || !cols || !acc || !off || load_params(in, nin, &W, &bias) != 0)
		goto done;
	/* W is [C][Og][KK]; group g's block as [Og * KK][Cg] */
	for (int64_t gi = 0; gi < G; gi++)
		for (int64_t c = 0; c < Cg; c++)
			for (int64_t r = 0; r < Og * KK; r++)
				WT[(gi * Og * KK + r) * Cg + c] = W[(gi * Cg + c) * Og * KK + r];
	kf_rt_mm m = {.k = RT_F64, .A = WT, .B = X, .M = Og * KK, .N = Pin, .K = Cg, .nbatch = G, .ldy = Pin,
		      .y = cols, .ydt = KF_F64, .alpha = 1};
	for (int64_t gi = 0; gi < G; gi++) {
		off[gi] = gi * Og * KK * Cg;
		off[2 * G + gi] = gi * Og * KK * Pin;
	}
	m.aoff = off;
	m.boff = off + G;
	m.yoff = off + 2 * G;
	size_t osz = kf_dtype_size(out[0].dtype);
	for (int64_t ni = 0; ni < w.N; ni++) {
		for (int64_t gi = 0; gi < G; gi++)
			off[G + gi] = (ni * w.C + gi * Cg) * Pin;
		kf_rt_mm_run(&m);
		struct col2im a = {&w, cols, bias, acc};
		kf_rt_parallel(w.O, w.O * KK * Pin, col2im_planes, &a);
		kf_rt_store(out[0].dtype, (char *)out[0].data + ni * w.O * Pout * (int64_t)osz, RT_F64, acc, w.O * Pout);
	}
	rc = 0;
done:
	free(X), free(W), free(bias), free(WT), free(cols), free(acc), free(off);
	return rc ? kf_rt_fail(err, errlen, "out of memory") : 0;
}

/* ---- pools -------------------------------------------------------------------- */

struct pool {
	const kf_rt_win *w;
	bool max, include_pad;
	rt_kind k;        /* RT_F64, or RT_I64 for integer max_pool */
	const void *x;    /* [N][C][Pin] or [N][Pin][C], kind k */
	void *y;          /* likewise, Pout */
};

/* The taps of output o of spatial dim a inside the input: [*lo, *hi) of j,
 * and how many of them count_include_pad counts (those inside the pads). */
static void taps(const struct pool *p, int a, int64_t o, int64_t *lo, int64_t *hi, int64_t *padded)
{
	const kf_rt_win *w = p->w;
	*lo = *hi = 0;
	*padded = 0;
	for (int64_t j = 0; j < w->k[a]; j++) {
		int64_t i = tap(w, a, o, j);
		if (i >= -w->pb[a] && i < w->in[a] + w->pe[a])
			++*padded;
		if (i < 0)
			*lo = j + 1;
		else if (i < w->in[a])
			*hi = j + 1;
	}
	if (*hi < *lo)
		*hi = *lo;
}

/* One output element's window of plane x (element stride cs): max or mean. */
#define POOL_WINDOW(T, LOWEST)                                                                  \
	do {                                                                                    \
		const T *x_ = (const T *)p->x + base;                                           \
		T m_ = LOWEST;                                                                  \
		double s_ = 0;                                                                  \
		for (int64_t jd = lo[0]; jd < hi[0]; jd++)                                      \
			for (int64_t jh = lo[1]; jh < hi[1]; jh++)                              \
				for (int64_t jw = lo[2]; jw < hi[2]; jw++) {                    \
					int64_t id = tap(w, 0, od, jd), ih = tap(w, 1, oh, jh); \
					int64_t iw = tap(w, 2, ow, jw);                         \
					T v_ = x_[((id * w->in[1] + ih) * w->in[2] + iw) * cs]; \
					if (p->max) {                                           \
						if (v_ > m_ || v_ != v_)                        \
							m_ = v_;                                \
					} else {                                                \
						s_ += (double)v_;                               \
					}                                                       \
				}                                                               \
		if (!p->max)                                                                    \
			m_ = (T)(s_ / (double)cnt);                                             \
		((T *)p->y)[obase] = m_;                                                        \
	} while (0)

/* Units [lo, hi) of (n, c) planes (channels first) or (n, position) rows
 * (channels last). */
static void pool_units(void *arg, int64_t ulo, int64_t uhi)
{
	const struct pool *p = arg;
	const kf_rt_win *w = p->w;
	int64_t Pin = pin_of(w), Pout = pout_of(w), C = w->C;
	for (int64_t u = ulo; u < uhi; u++) {
		/* channels first: unit u is plane (n, c), every output position;
		 * channels last: unit u is (n, position), every channel */
		int64_t q0 = w->cl ? u % Pout : 0, q1 = w->cl ? q0 + 1 : Pout;
		int64_t c0 = w->cl ? 0 : u % C, c1 = w->cl ? C : c0 + 1, nimg = w->cl ? u / Pout : u / C;
		int64_t cs = w->cl ? C : 1;
		for (int64_t q = q0; q < q1; q++) {
			int64_t od = q / (w->out[1] * w->out[2]), oh = q / w->out[2] % w->out[1], ow = q % w->out[2];
			int64_t lo[3], hi[3], pad[3], inside = 1, padded = 1;
			taps(p, 0, od, &lo[0], &hi[0], &pad[0]);
			taps(p, 1, oh, &lo[1], &hi[1], &pad[1]);
			taps(p, 2, ow, &lo[2], &hi[2], &pad[2]);
			for (int a = 0; a < 3; a++) {
				inside *= hi[a] - lo[a];
				padded *= pad[a];
			}
			int64_t cnt = p->include_pad ? padded : inside;
			for (int64_t c = c0; c < c1; c++) {
				int64_t base = w->cl ? nimg * Pin * C + c : (nimg * C + c) * Pin;
				int64_t obase = w->cl ? (nimg * Pout + q) * C + c : (nimg * C + c) * Pout + q;
				if (p->k == RT_F64)
					POOL_WINDOW(double, -INFINITY);
				else
					POOL_WINDOW(int64_t, INT64_MIN);
			}
		}
	}
}

int kf_cpu_pool(KF_RT_CPU_ARGS)
{
	kf_rt_win w;
	int64_t shape[KF_MAX_RANK];
	if (kf_rt_win_geom(g, n, in, nin, &w, shape, err, errlen) != 0)
		return -1;
	int64_t total = kf_tensor_numel(&out[0]);
	if (total == 0)
		return 0;
	struct pool p = {&w, kf_N(g, n)->op == KF_OP_MAX_POOL, kf_attr_int(g, n, "count_include_pad", 0) != 0};
	p.k = kf_dtype_is_float(in[0].dtype) ? RT_F64 : RT_I64;
	void *x = to_kind(&in[0], p.k), *y = malloc((size_t)total * 8);
	if (!x || !y) {
		free(x), free(y);
		return kf_rt_fail(err, errlen, "out of memory");
	}
	p.x = x;
	p.y = y;
	int64_t units = w.cl ? w.N * pout_of(&w) : w.N * w.C;
	kf_rt_parallel(units, total * kk_of(&w), pool_units, &p);
	kf_rt_store(out[0].dtype, out[0].data, p.k, y, total);
	free(x), free(y);
	return 0;
}
