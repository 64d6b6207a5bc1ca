/* infer_conv.c: result types of the windowed ops: conv, conv_transpose,
 * max_pool and avg_pool, with ONNX's semantics (docs/ops.md, "Convolution
 * and pooling").
 *
 * x is [N, C, D1.., Dk] (k = 1..3 spatial dims), or [N, D1.., Dk, C] with
 * {channels_last = true} (conv and the pools; the layout pass makes those).
 * The window of spatial dim i has kernel k, stride s, dilation d and pads
 * pb (before) and pe (after), all static.  A symbolic batch dim passes
 * through; a symbolic spatial dim passes through only where the output
 * size equals the input size for every value (stride 1, pads covering the
 * dilated kernel exactly), since there is no symbol for the arithmetic. */
#include <string.h>

#include "conv.h"
#include "infer.h"

#define MAXSP 3
/* Window parameters above this are refused: every size computation below
 * then stays far inside int64 for any dim up to 2^62. */
#define WIN_MAX (INT64_C(1) << 31)

typedef struct win {
	int nsp;     /* spatial dims */
	bool cl;     /* channels_last */
	int64_t k[MAXSP], s[MAXSP], d[MAXSP], pb[MAXSP], pe[MAXSP];
} win;

/* The spatial rank of x (rank 3..5), or -1 with an error. */
static int spatial_rank(kf_ic *ic, const kf_type *x)
{
	if (x->rank < 3 || x->rank > 2 + MAXSP) {
		kf_tstr t;
		return kf_ic_fail(ic, "'%s' takes x of rank 3 to 5 ([N, C, spatial...]), got %s", ic->op,
				  kf_ops_tstr(ic->g->ctx, x, &t));
	}
	return x->rank - 2;
}

/* An int list attribute of exactly `want` entries, each in [lo, WIN_MAX];
 * absent: every entry dflt. */
static bool win_list(kf_ic *ic, const char *key, int want, int64_t lo, int64_t dflt, int64_t *out)
{
	const kf_attrval *v;
	uint32_t n;
	bool present;
	if (!kf_ic_ints(ic, key, &v, &n, &present))
		return false;
	if (present && n != (uint32_t)want) {
		kf_ic_fail(ic, "'%s' %s has %u entries, expected %d", ic->op, key, n, want);
		return false;
	}
	for (int i = 0; i < want; i++) {
		out[i] = present ? v[i].i : dflt;
		if (out[i] < lo || out[i] > WIN_MAX) {
			kf_ic_fail(ic, "'%s' %s[%d] = %lld is out of range (%lld to 2^31)", ic->op, key, i,
				   (long long)out[i], (long long)lo);
			return false;
		}
	}
	return true;
}

/* strides, dilations, pads and channels_last of node n; k is filled by the caller. */
static bool win_attrs(kf_ic *ic, int nsp, win *w)
{
	int64_t pads[2 * MAXSP], cl;
	w->nsp = nsp;
	if (!win_list(ic, "strides", nsp, 1, 1, w->s) || !win_list(ic, "dilations", nsp, 1, 1, w->d) ||
	    !win_list(ic, "pads", 2 * nsp, 0, 0, pads))
		return false;
	for (int i = 0; i < nsp; i++) {
		w->pb[i] = pads[i];
		w->pe[i] = pads[nsp + i];
	}
	if (!kf_ic_int(ic, "channels_last", 0, &cl))
		return false;
	w->cl = cl != 0;
	return true;
}

/* Output size of spatial dim i over input size in (floor or ceil mode). */
static bool win_out(kf_ic *ic, const win *w, int i, int64_t in, bool ceil, int64_t *out)
{
	int64_t keff = w->d[i] * (w->k[i] - 1) + 1, s = w->s[i];
	kf_tstr t;
	if (KF_IS_SYM(in)) {
		if (s == 1 && w->pb[i] + w->pe[i] == keff - 1) {
			*out = in;
			return true;
		}
		kf_ic_fail(ic, "'%s' cannot size spatial dim %d from symbolic %s (only stride 1 with pads "
			   "summing to the dilated kernel size - 1 keeps a symbolic dim)",
			   ic->op, i, kf_ops_dstr(ic->g->ctx, in, &t));
		return false;
	}
	int64_t span = in + w->pb[i] + w->pe[i] - keff;
	if (span < 0) {
		kf_ic_fail(ic, "'%s' window of spatial dim %d (dilated kernel %lld) is larger than the padded "
			   "input (%lld + %lld + %lld)", ic->op, i, (long long)keff, (long long)in,
			   (long long)w->pb[i], (long long)w->pe[i]);
		return false;
	}
	*out = span / s + 1;
	if (ceil && span % s) {
		/* PyTorch's rule, which its ONNX exports assume: one more window,
		 * unless it would start in the end padding */
		if (*out * s < in + w->pb[i])
			++*out;
	}
	return true;
}

static int not_float(kf_ic *ic, const kf_type *x)
{
	return kf_ic_fail(ic, "'%s' takes float operands, got %s", ic->op, kf_dtype_name(x->dtype));
}

static bool static_dim(kf_ic *ic, const char *what, const kf_type *t, int i)
{
	if (!KF_IS_SYM(t->dim[i]))
		return true;
	kf_tstr ts;
	kf_ic_fail(ic, "'%s' %s %s must have static dims", ic->op, what, kf_ops_tstr(ic->g->ctx, t, &ts));
	return false;
}

/* Optional bias operand 2: [O] of x's dtype. */
static bool bias_ok(kf_ic *ic, const kf_type *x, int64_t O)
{
	if (kf_ic_nin(ic) < 3)
		return true;
	const kf_type *b = kf_ic_in(ic, 2);
	if (b->dtype == x->dtype && b->rank == 1 && b->dim[0] == O)
		return true;
	kf_tstr tb;
	kf_ic_fail(ic, "'%s' bias has type %s, expected %s[%lld] (one per output channel)", ic->op,
		   kf_ops_tstr(ic->g->ctx, b, &tb), kf_dtype_name(x->dtype), (long long)O);
	return false;
}

int kf_infer_conv(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen)
{
	kf_ic ic = kf_ic_make(g, n, err, errlen);
	const kf_type *x = kf_ic_in(&ic, 0), *w = kf_ic_in(&ic, 1);
	int nsp = spatial_rank(&ic, x);
	int64_t group;
	win wn;
	kf_tstr tx, tw;
	if (nsp < 0 || !win_attrs(&ic, nsp, &wn) || !kf_ic_int(&ic, "group", 1, &group))
		return -1;
	if (!kf_dtype_is_float(x->dtype))
		return not_float(&ic, x);
	if (!kf_ic_same_dtype(&ic, x, w))
		return -1;
	if (w->rank != x->rank)
		return kf_ic_fail(&ic, "'conv' weight %s must have x's rank %d ([O, C/group, kernel...]%s)",
				  kf_ops_tstr(g->ctx, w, &tw), x->rank, wn.cl ? " or, channels last, [O, kernel..., C/group]" : "");
	for (int i = 0; i < w->rank; i++)
		if (!static_dim(&ic, "weight", w, i))
			return -1;
	int cdim = wn.cl ? x->rank - 1 : 1, wc = wn.cl ? w->rank - 1 : 1, k0 = wn.cl ? 1 : 2;
	if (!static_dim(&ic, "x", x, cdim))
		return -1;
	int64_t C = x->dim[cdim], O = w->dim[0];
	if (group < 1 || group > WIN_MAX || C % group || O % group)
		return kf_ic_fail(&ic, "'conv' group %lld must be >= 1 and divide the input channels (%lld) and "
				  "output channels (%lld)", (long long)group, (long long)C, (long long)O);
	if (w->dim[wc] != C / group)
		return kf_ic_fail(&ic, "'conv' weight %s has %lld input channels per group, but x %s with group "
				  "%lld has %lld", kf_ops_tstr(g->ctx, w, &tw), (long long)w->dim[wc],
				  kf_ops_tstr(g->ctx, x, &tx), (long long)group, (long long)(C / group));
	for (int i = 0; i < nsp; i++) {
		wn.k[i] = w->dim[k0 + i];
		if (wn.k[i] < 1 || wn.k[i] > WIN_MAX)
			return kf_ic_fail(&ic, "'conv' weight %s has an empty or too large kernel",
					  kf_ops_tstr(g->ctx, w, &tw));
	}
	if (!bias_ok(&ic, x, O))
		return -1;
	int xs = wn.cl ? 1 : 2;
	int64_t dim[KF_MAX_RANK];
	dim[0] = x->dim[0];
	dim[wn.cl ? x->rank - 1 : 1] = O;
	for (int i = 0; i < nsp; i++)
		if (!win_out(&ic, &wn, i, x->dim[xs + i], false, &dim[xs + i]))
			return -1;
	out[0] = kf_type_make(x->dtype, x->rank, dim);
	return 1;
}

int kf_infer_conv_transpose(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen)
{
	kf_ic ic = kf_ic_make(g, n, err, errlen);
	const kf_type *x = kf_ic_in(&ic, 0), *w = kf_ic_in(&ic, 1);
	int nsp = spatial_rank(&ic, x);
	int64_t group, opad[MAXSP];
	win wn;
	kf_tstr tx, tw;
	if (nsp < 0 || !win_attrs(&ic, nsp, &wn) || !kf_ic_int(&ic, "group", 1, &group) ||
	    !win_list(&ic, "output_padding", nsp, 0, 0, opad))
		return -1;
	if (!kf_dtype_is_float(x->dtype))
		return not_float(&ic, x);
	if (!kf_ic_same_dtype(&ic, x, w))
		return -1;
	if (w->rank != x->rank)
		return kf_ic_fail(&ic, "'conv_transpose' weight %s must have x's rank %d ([C, O/group, kernel...])",
				  kf_ops_tstr(g->ctx, w, &tw), x->rank);
	for (int i = 0; i < w->rank; i++)
		if (!static_dim(&ic, "weight", w, i))
			return -1;
	if (!static_dim(&ic, "x", x, 1))
		return -1;
	int64_t C = x->dim[1];
	if (group < 1 || group > WIN_MAX || C % group)
		return kf_ic_fail(&ic, "'conv_transpose' group %lld must be >= 1 and divide the input channels (%lld)",
				  (long long)group, (long long)C);
	if (w->dim[0] != C)
		return kf_ic_fail(&ic, "'conv_transpose' weight %s must have x's %lld input channels first (x is %s)",
				  kf_ops_tstr(g->ctx, w, &tw), (long long)C, kf_ops_tstr(g->ctx, x, &tx));
	int64_t O = w->dim[1] * group;
	if (!bias_ok(&ic, x, O))
		return -1;
	int64_t dim[KF_MAX_RANK] = {x->dim[0], O};
	for (int i = 0; i < nsp; i++) {
		int64_t k = w->dim[2 + i], in = x->dim[2 + i], s = wn.s[i], d = wn.d[i], o;
		if (k < 1 || k > WIN_MAX)
			return kf_ic_fail(&ic, "'conv_transpose' weight %s has an empty or too large kernel",
					  kf_ops_tstr(g->ctx, w, &tw));
		if (opad[i] >= s && opad[i] >= d)
			return kf_ic_fail(&ic, "'conv_transpose' output_padding[%d] = %lld must be smaller than the "
					  "stride or the dilation", i, (long long)opad[i]);
		if (!static_dim(&ic, "x", x, 2 + i))
			return -1;
		/* s (in - 1) + output_padding + d (k - 1) + 1 - pads */
		if (in < 1 || __builtin_mul_overflow(s, in - 1, &o) || o > (INT64_C(1) << 62))
			return kf_ic_fail(&ic, "'conv_transpose' spatial dim %d of x %s is empty or too large", i,
					  kf_ops_tstr(g->ctx, x, &tx));
		o += opad[i] + d * (k - 1) + 1 - wn.pb[i] - wn.pe[i];
		if (o < 1)
			return kf_ic_fail(&ic, "'conv_transpose' pads of spatial dim %d leave no output (%lld)", i,
					  (long long)o);
		dim[2 + i] = o;
	}
	out[0] = kf_type_make(x->dtype, x->rank, dim);
	return 1;
}

int kf_infer_pool(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen)
{
	kf_ic ic = kf_ic_make(g, n, err, errlen);
	const kf_type *x = kf_ic_in(&ic, 0);
	bool avg = kf_N(g, n)->op == KF_OP_AVG_POOL;
	int nsp = spatial_rank(&ic, x);
	int64_t ceil, cip;
	win wn;
	if (nsp < 0 || !kf_ic_need(&ic, "kernel_shape") || !win_list(&ic, "kernel_shape", nsp, 1, 1, wn.k) ||
	    !win_attrs(&ic, nsp, &wn) || !kf_ic_int(&ic, "ceil_mode", 0, &ceil) ||
	    !kf_ic_int(&ic, "count_include_pad", 0, &cip))
		return -1;
	if (avg ? !kf_dtype_is_float(x->dtype) : x->dtype == KF_I1)
		return avg ? not_float(&ic, x)
			   : kf_ic_fail(&ic, "'max_pool' takes float or integer operands, got i1");
	int xs = wn.cl ? 1 : 2;
	int64_t dim[KF_MAX_RANK];
	memcpy(dim, x->dim, sizeof dim);
	for (int i = 0; i < nsp; i++) {
		/* every window then reaches into the input (docs/ops.md) */
		int64_t keff = wn.d[i] * (wn.k[i] - 1) + 1;
		if (wn.pb[i] >= keff || wn.pe[i] >= keff)
			return kf_ic_fail(&ic, "'%s' pads of spatial dim %d (%lld, %lld) must be smaller than the "
					  "dilated kernel (%lld)", ic.op, i, (long long)wn.pb[i], (long long)wn.pe[i],
					  (long long)keff);
		if (!win_out(&ic, &wn, i, x->dim[xs + i], ceil != 0, &dim[xs + i]))
			return -1;
	}
	out[0] = kf_type_make(x->dtype, x->rank, dim);
	return 1;
}

/* ---- the geometry, for the backends (conv.h) ------------------------------------ */

int kf_win_of(const kf_graph *g, kf_nid n, kf_win *w)
{
	int op = kf_N(g, n)->op;
	if (op != KF_OP_CONV && op != KF_OP_CONV_TRANSPOSE && op != KF_OP_MAX_POOL && op != KF_OP_AVG_POOL)
		return -1;
	const kf_type *x = kf_vtype(g, kf_in(g, n, 0)), *y = kf_vtype(g, kf_res(g, n, 0));
	if (!kf_type_is_static(x) || !kf_type_is_static(y) || x->rank < 3 || x->rank > 2 + MAXSP)
		return -1;
	/* the attribute readers report into a message nobody reads: the node
	 * was verified, so they succeed */
	char err[8];
	kf_ic ic = kf_ic_make((kf_graph *)g, n, err, sizeof err);
	win wn;
	int64_t ceil, cip, opad[MAXSP];
	int nsp = x->rank - 2;
	memset(w, 0, sizeof *w);
	if (!win_attrs(&ic, nsp, &wn) || !kf_ic_int(&ic, "group", 1, &w->group) || !kf_ic_int(&ic, "ceil_mode", 0, &ceil) ||
	    !kf_ic_int(&ic, "count_include_pad", 0, &cip) || !win_list(&ic, "output_padding", nsp, 0, 0, opad))
		return -1;
	bool pool = op == KF_OP_MAX_POOL || op == KF_OP_AVG_POOL;
	int64_t ks[MAXSP];
	if (pool && !win_list(&ic, "kernel_shape", nsp, 1, 1, ks))
		return -1;
	const kf_type *wt = pool ? NULL : kf_vtype(g, kf_in(g, n, 1));
	int xs = wn.cl ? 1 : 2, k0 = wn.cl && op == KF_OP_CONV ? 1 : 2;
	w->nsp = nsp;
	w->cl = wn.cl;
	w->ceil = ceil != 0;
	w->cip = cip != 0;
	w->N = x->dim[0];
	w->C = x->dim[wn.cl ? x->rank - 1 : 1];
	w->O = y->dim[wn.cl ? y->rank - 1 : 1];
	for (int i = 0; i < nsp; i++) {
		w->in[i] = x->dim[xs + i];
		w->out[i] = y->dim[xs + i];
		w->k[i] = pool ? ks[i] : wt->dim[k0 + i];
		w->s[i] = wn.s[i];
		w->d[i] = wn.d[i];
		w->pb[i] = wn.pb[i];
		w->pe[i] = wn.pe[i];
		w->opad[i] = opad[i];
	}
	return 0;
}
