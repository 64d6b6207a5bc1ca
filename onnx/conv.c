/* conv.c: ONNX Conv, ConvTranspose, MaxPool, AveragePool, GlobalAveragePool
 * and GlobalMaxPool as kfuse's conv, conv_transpose, max_pool, avg_pool,
 * reduce_mean and reduce_max (docs/ops.md, "Convolution and pooling").
 *
 * The IR ops know only explicit pads: auto_pad (SAME_UPPER, SAME_LOWER,
 * VALID) and ConvTranspose's output_shape are resolved here, from the
 * input's static spatial dims.  Attributes at their defaults are left out,
 * so the text reads like the model. */
#include <string.h>
#include "importer.h"

typedef const Onnx__NodeProto NP;

#define MAXSP 3
#define WIN_MAX (INT64_C(1) << 31)

/* A node's window: kernel, strides, dilations, pads (begins, then ends). */
typedef struct window {
	int nsp;
	int64_t k[MAXSP], s[MAXSP], d[MAXSP], pads[2 * MAXSP];
	char auto_pad[16];
} window;

/* Reads the window attributes of np over x; kernel (the weight's, or NULL
 * for pools, which must have kernel_shape) is checked against kernel_shape. */
static int read_window(kf_imp *I, NP *np, const kf_type *x, const int64_t *kernel, window *w)
{
	if (x->rank < 3 || x->rank > 2 + MAXSP)
		return kf_imp_fail(I, "input X must have rank 3 to 5 ([N, C, spatial...]), got rank %d", x->rank);
	int nsp = w->nsp = x->rank - 2;
	int64_t ks[MAXSP];
	int nk = kf_imp_attr_ints(np, "kernel_shape", ks, MAXSP);
	if (!kernel && nk < 0)
		return kf_imp_fail(I, "attribute 'kernel_shape' is required");
	if (kf_imp_attr(np, "kernel_shape") && nk != nsp)
		return kf_imp_fail(I, "kernel_shape has the wrong length for %d spatial dims", nsp);
	for (int i = 0; i < nsp; i++) {
		w->k[i] = kernel ? kernel[i] : ks[i];
		if (nk >= 0 && ks[i] != w->k[i])
			return kf_imp_fail(I, "kernel_shape[%d] = %lld does not match the weight's %lld", i,
					   (long long)ks[i], (long long)w->k[i]);
		w->s[i] = w->d[i] = 1;
		w->pads[i] = w->pads[nsp + i] = 0;
	}
	static const char *const lists[3] = {"strides", "dilations", "pads"};
	int64_t *dst[3] = {w->s, w->d, w->pads};
	for (int l = 0; l < 3; l++) {
		int want = l == 2 ? 2 * nsp : nsp;
		if (!kf_imp_attr(np, lists[l]))
			continue;
		if (kf_imp_attr_ints(np, lists[l], dst[l], want) != want)
			return kf_imp_fail(I, "attribute '%s' must have %d entries", lists[l], want);
	}
	/* the arithmetic below (auto_pad, output_shape) needs sane values;
	 * the op's type inference says the rest */
	for (int i = 0; i < nsp; i++)
		if (w->s[i] < 1 || w->s[i] > WIN_MAX || w->d[i] < 1 || w->d[i] > WIN_MAX || w->k[i] < 1 ||
		    w->k[i] > WIN_MAX || w->pads[i] < 0 || w->pads[i] > WIN_MAX || w->pads[nsp + i] < 0 ||
		    w->pads[nsp + i] > WIN_MAX)
			return kf_imp_fail(I, "kernel, strides, dilations and pads must be positive (pads 0 or more) and "
					      "below 2^31");
	kf_imp_attr_str(np, "auto_pad", "NOTSET", w->auto_pad, sizeof w->auto_pad);
	if (strcmp(w->auto_pad, "NOTSET") && strcmp(w->auto_pad, "VALID") && strcmp(w->auto_pad, "SAME_UPPER") &&
	    strcmp(w->auto_pad, "SAME_LOWER"))
		return kf_imp_fail(I, "auto_pad \"%s\" is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER",
				   w->auto_pad);
	return 0;
}

static bool same(const window *w) { return !strncmp(w->auto_pad, "SAME", 4); }

/* floor(a / 2) for any sign (ONNX's reference pads are Python's //). */
static int64_t half_down(int64_t a) { return a >= 0 ? a / 2 : -((-a + 1) / 2); }

/* auto_pad for conv and the pools: SAME keeps ceil(in / stride) outputs,
 * the odd pad at the end (UPPER) or the beginning (LOWER); VALID pads nothing. */
static int resolve_auto_pad(kf_imp *I, window *w, const kf_type *x)
{
	if (!strcmp(w->auto_pad, "NOTSET"))
		return 0;
	for (int i = 0; i < w->nsp; i++) {
		int64_t in = x->dim[2 + i], total = 0;
		if (same(w)) {
			if (KF_IS_SYM(in) || in > WIN_MAX)
				return kf_imp_fail(I, "auto_pad %s needs static spatial dims below 2^31", w->auto_pad);
			int64_t out = (in + w->s[i] - 1) / w->s[i], keff = w->d[i] * (w->k[i] - 1) + 1;
			total = (out - 1) * w->s[i] + keff - in;
			total = total < 0 ? 0 : total;
		}
		int64_t small = total / 2;
		bool upper = !strcmp(w->auto_pad, "SAME_UPPER");
		w->pads[i] = upper ? small : total - small;
		w->pads[w->nsp + i] = total - w->pads[i];
	}
	return 0;
}

/* The window attributes as kfuse writes them, defaults left out; items
 * must hold 4 * MAXSP. */
static int window_attrs(kf_imp *I, const window *w, kf_attr *a, kf_attrval *items)
{
	int na = 0, n = w->nsp;
	bool ds = false, dd = false, dp = false;
	for (int i = 0; i < n; i++) {
		ds |= w->s[i] != 1;
		dd |= w->d[i] != 1;
		dp |= w->pads[i] != 0 || w->pads[n + i] != 0;
	}
	if (ds)
		a[na++] = kf_imp_ints_attr(I, "strides", items, w->s, n);
	if (dp)
		a[na++] = kf_imp_ints_attr(I, "pads", items + MAXSP, w->pads, 2 * n);
	if (dd)
		a[na++] = kf_imp_ints_attr(I, "dilations", items + 3 * MAXSP, w->d, n);
	return na;
}

/* X, W and B? of a Conv or ConvTranspose; the weight's kernel dims in k. */
static int conv_operands(kf_imp *I, NP *np, kf_vid *v, int *nv, int64_t *k)
{
	v[0] = kf_imp_input(I, np, 0);
	v[1] = kf_imp_input(I, np, 1);
	v[2] = kf_imp_input(I, np, 2);
	if (v[0] == KF_NONE || v[1] == KF_NONE)
		return -1;
	*nv = v[2] == KF_NONE ? 2 : 3;
	const kf_type *x = kf_vtype(I->g, v[0]), *wt = kf_vtype(I->g, v[1]);
	if (wt->rank != x->rank)
		return kf_imp_fail(I, "weight W has rank %d, but X has rank %d", wt->rank, x->rank);
	for (int i = 2; i < wt->rank && i < 2 + MAXSP; i++)
		k[i - 2] = wt->dim[i];
	return 0;
}

int kf_imp_conv(kf_imp *I, NP *np, kf_vid *out, int op)
{
	kf_vid v[3];
	int nv;
	int64_t k[MAXSP];
	window w;
	if (conv_operands(I, np, v, &nv, k) < 0)
		return -1;
	const kf_type *x = kf_vtype(I->g, v[0]);
	if (read_window(I, np, x, k, &w) < 0 || resolve_auto_pad(I, &w, x) < 0)
		return -1;
	kf_attr a[4];
	kf_attrval items[4 * MAXSP];
	int na = window_attrs(I, &w, a, items);
	int64_t group = kf_imp_attr_int(np, "group", 1);
	if (group != 1)
		a[na++] = kf_imp_int_attr(I, "group", group);
	return (out[0] = kf_imp_op(I, KF_OP_CONV, v, nv, a, na)) != KF_NONE;
}

/* ConvTranspose's output_shape (or SAME's in * stride) as pads: total
 * padding s (in - 1) + output_padding + dilated kernel - out, split as ONNX
 * says; an output longer than the pads can give (negative end pad) is
 * more output padding. */
static int transpose_pads(kf_imp *I, NP *np, window *w, const kf_type *x, int64_t *opad)
{
	int64_t oshape[2 + MAXSP];
	int no = kf_imp_attr_ints(np, "output_shape", oshape, 2 + MAXSP);
	bool given = kf_imp_attr(np, "output_shape") != NULL;
	if (given && no != w->nsp && no != w->nsp + 2)
		return kf_imp_fail(I, "output_shape must have %d (or %d) entries", w->nsp, w->nsp + 2);
	if (!given && !same(w))
		return resolve_auto_pad(I, w, x); /* VALID or NOTSET */
	for (int i = 0; i < w->nsp; i++) {
		int64_t in = x->dim[2 + i];
		if (KF_IS_SYM(in) || in > WIN_MAX)
			return kf_imp_fail(I, "output_shape or auto_pad SAME needs static spatial dims below 2^31");
		if (opad[i] < 0 || opad[i] > WIN_MAX)
			return kf_imp_fail(I, "output_padding must be 0 or more and below 2^31");
		int64_t out = given ? oshape[no - w->nsp + i] : in * w->s[i];
		if (out < 0 || out > (INT64_C(1) << 62))
			return kf_imp_fail(I, "output_shape %lld of spatial dim %d is out of range", (long long)out, i);
		int64_t total = w->s[i] * (in - 1) + opad[i] + w->d[i] * (w->k[i] - 1) + 1 - out;
		bool upper = !strcmp(w->auto_pad, "SAME_UPPER");
		int64_t pb = upper ? half_down(total) : total - half_down(total), pe = total - pb;
		if (pb < 0)
			return kf_imp_fail(I, "output_shape %lld of spatial dim %d needs a negative begin pad", (long long)out, i);
		if (pe < 0) {
			opad[i] -= pe;
			pe = 0;
		}
		w->pads[i] = pb;
		w->pads[w->nsp + i] = pe;
	}
	return 0;
}

int kf_imp_conv_transpose(kf_imp *I, NP *np, kf_vid *out, int op)
{
	kf_vid v[3];
	int nv;
	int64_t k[MAXSP], opad[MAXSP] = {0, 0, 0};
	window w;
	if (conv_operands(I, np, v, &nv, k) < 0)
		return -1;
	const kf_type *x = kf_vtype(I->g, v[0]);
	if (read_window(I, np, x, k, &w) < 0)
		return -1;
	if (kf_imp_attr(np, "output_padding") && kf_imp_attr_ints(np, "output_padding", opad, MAXSP) != w.nsp)
		return kf_imp_fail(I, "attribute 'output_padding' must have %d entries", w.nsp);
	if (transpose_pads(I, np, &w, x, opad) < 0)
		return -1;
	kf_attr a[5];
	kf_attrval items[5 * MAXSP];
	int na = window_attrs(I, &w, a, items);
	int64_t group = kf_imp_attr_int(np, "group", 1);
	if (group != 1)
		a[na++] = kf_imp_int_attr(I, "group", group);
	bool op_set = false;
	for (int i = 0; i < w.nsp; i++)
		op_set |= opad[i] != 0;
	if (op_set)
		a[na++] = kf_imp_ints_attr(I, "output_padding", items + 4 * MAXSP, opad, w.nsp);
	return (out[0] = kf_imp_op(I, KF_OP_CONV_TRANSPOSE, v, nv, a, na)) != KF_NONE;
}

int kf_imp_pool(kf_imp *I, NP *np, kf_vid *out, int op)
{
	kf_vid x = kf_imp_input(I, np, 0);
	window w;
	if (x == KF_NONE)
		return -1;
	const kf_type *t = kf_vtype(I->g, x);
	if (read_window(I, np, t, NULL, &w) < 0 || resolve_auto_pad(I, &w, t) < 0)
		return -1;
	kf_attr a[6];
	kf_attrval items[5 * MAXSP];
	a[0] = kf_imp_ints_attr(I, "kernel_shape", items + 4 * MAXSP, w.k, w.nsp);
	int na = 1 + window_attrs(I, &w, a + 1, items);
	kf_attr yes = {0, {.kind = KF_ATTR_BOOL, .b = true}};
	if (kf_imp_attr_int(np, "ceil_mode", 0))
		a[na] = yes, a[na++].key = kf_intern_cstr(I->c, "ceil_mode");
	if (op == KF_OP_AVG_POOL && kf_imp_attr_int(np, "count_include_pad", 0))
		a[na] = yes, a[na++].key = kf_intern_cstr(I->c, "count_include_pad");
	/* one output: MaxPool's Indices are refused by the caller */
	return (out[0] = kf_imp_op(I, op, &x, 1, a, na)) != KF_NONE;
}

int kf_imp_global_pool(kf_imp *I, NP *np, kf_vid *out, int op)
{
	kf_vid x = kf_imp_input(I, np, 0);
	if (x == KF_NONE)
		return -1;
	const kf_type *t = kf_vtype(I->g, x);
	if (t->rank < 3)
		return kf_imp_fail(I, "input X must have rank 3 or more ([N, C, spatial...]), got rank %d", t->rank);
	int64_t axes[KF_MAX_RANK];
	for (int i = 2; i < t->rank; i++)
		axes[i - 2] = i;
	kf_attrval items[KF_MAX_RANK];
	kf_attr a[2] = {kf_imp_ints_attr(I, "axes", items, axes, t->rank - 2),
			{kf_intern_cstr(I->c, "keepdims"), {.kind = KF_ATTR_BOOL, .b = true}}};
	return (out[0] = kf_imp_op(I, op, &x, 1, a, 2)) != KF_NONE;
}
