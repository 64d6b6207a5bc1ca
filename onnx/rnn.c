/* rnn.c: ONNX LSTM, GRU and RNN as unrolled primitive ops, in the form the
 * `persistent` pass turns into one kernel (docs/persistent.md, "ONNX").
 *
 * The IR has no loop, so each step is written out.  Per direction:
 *   XW = X W^T + b               one matmul over all steps, [T*B, G] rows
 *                                 (b: Wb + Rb, or Wb alone for a GRU)
 * and per step t (in time order; reversed for direction "reverse", both
 * for "bidirectional"), xw = rows [t*B, (t+1)*B) of XW:
 *   LSTM (gates i, o, f, c):  g = xw + h R^T,
 *        i = σ(g_i + P_i c), f = σ(g_f + P_f c), c' = f c + i tanh(g_c),
 *        o = σ(g_o + P_o c'), h' = o tanh(c')
 *   GRU (gates z, r, h):  gh = h R^T + Rb,  z = σ(xw_z + gh_z), r likewise,
 *        n = tanh(xw_h + r gh_h)                    (linear_before_reset)
 *        n = tanh(xw_h + (r h) R_h^T + Rb_h)        (the default: a second
 *                                                   recurrent matmul a step)
 *        h' = (1 - z) n + z h
 *   RNN:  h' = f(xw + h R^T), f = Tanh, Relu or Sigmoid
 * with `clip` clamping every gate's pre-activation.  sequence_lens masks
 * the steps past a sequence's end (h and c keep their value, Y is 0): the
 * mask of all steps is one [T*B, 1] value, read a step's rows at a time.
 * Y of a direction is the concat of its steps' h in time order.  Only the
 * default activations (and the RNN's three); layout 0 and 1 both.
 *
 * Why this form: the input projection is computed for all steps at once
 * (one matmul instead of T), every per-step input is a block of rows that
 * moves by B rows a step, and the only matmul a step holds is the
 * recurrent one, h R^T: what the `persistent` pass recognises, for any
 * batch, direction and layer (a layer above reads this one's Y). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tensor.h"
#include "tr.h"

enum { CELL_LSTM, CELL_GRU, CELL_RNN };

typedef struct rnn {
	kf_imp *I;
	kf_np *np;
	int cell;
	bool lbr;
	int act[2];          /* RNN: each direction's activation op */
	int64_t T, B, In, H, D;
	int layout;
	double clip;         /* 0: none */
	kf_vid x, w, r, b, h0, c0, p, lens;
	kf_vid x2;           /* X as [T*B, In], time-major */
	kf_vid mask;         /* [T*B, 1] i1: step t of sequence b is within its length */
	kf_tensor cw, cr, cb, cp, ch, cc; /* W, R, B, P, initial_h, initial_c when initializers */
	bool has[6];
	char base[96];       /* the node's name, for its values' names */
} rnn;

/* Names value v after the node: messages (the `persistent` pass's, when
 * it declines) then speak of `%_rnn_LSTM_h3`, not of `%123`. */
static void name(rnn *R, kf_vid v, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void name(rnn *R, kf_vid v, const char *fmt, ...)
{
	if (v == KF_NONE || !R->base[0])
		return;
	char tail[48], full[160];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(tail, sizeof tail, fmt, ap);
	va_end(ap);
	snprintf(full, sizeof full, "%s_%s", R->base, tail);
	kf_V(R->I->g, v)->name = kf_intern_cstr(R->I->c, full);
}

static kf_vid op1(rnn *R, int op, kf_vid a) { return a == KF_NONE ? KF_NONE : kf_imp_op(R->I, op, &a, 1, NULL, 0); }

static kf_vid op2(rnn *R, int op, kf_vid a, kf_vid b)
{
	kf_vid v[2] = {a, b};
	return a == KF_NONE || b == KF_NONE ? KF_NONE : kf_imp_op(R->I, op, v, 2, NULL, 0);
}

static kf_vid sl(rnn *R, kf_vid v, int64_t axis, int64_t a, int64_t e) { return kf_tr_slice(R->I, v, axis, a, e); }
static kf_vid rs(rnn *R, kf_vid v, const int64_t *shape, int rank) { return kf_tr_reshape(R->I, v, shape, rank); }
static kf_vid cat(rnn *R, const kf_vid *v, int n, int64_t axis) { return kf_tr_concat(R->I, v, n, axis); }
static kf_dtype xdt(rnn *R) { return (kf_dtype)kf_vtype(R->I->g, R->x)->dtype; }

/* Input i of the node as a tensor, when it is an initializer: what the
 * translation computes from it alone (a direction's slice, the sum of the
 * two biases) is then folded into constants here, so that no kernel
 * slices or adds constants at run time. */
static bool init_input(rnn *R, size_t i, kf_tensor *t)
{
	kf_np *np = R->np;
	if (!kf_tr_has_in(np, i))
		return false;
	const Onnx__GraphProto *gp = R->I->gp;
	const Onnx__TensorProto *tp = NULL;
	for (size_t k = 0; gp && k < gp->n_initializer && !tp; k++)
		if (gp->initializer[k]->name && !strcmp(gp->initializer[k]->name, np->input[i]))
			tp = gp->initializer[k];
	/* or a Constant node's tensor (an exporter's folded zeros) */
	for (size_t k = 0; gp && k < gp->n_node && !tp; k++) {
		const Onnx__NodeProto *c = gp->node[k];
		const Onnx__AttributeProto *a = kf_imp_attr(c, "value");
		if (c->op_type && !strcmp(c->op_type, "Constant") && c->n_output == 1 && !strcmp(c->output[0], np->input[i]) &&
		    a && a->t)
			tp = a->t;
	}
	char err[200];
	if (!tp || kf_onnx_tensor(tp, R->I->dir[0] ? R->I->dir : NULL, t, err, sizeof err) != 0)
		return false;
	/* only the tensor the input's value holds: a graph input or a second
	 * initializer of that name can give the value another shape, and the
	 * translation indexes t by the value's dims (found by fuzzing) */
	const kf_type *vt = kf_vtype(R->I->g, kf_imp_input(R->I, np, i));
	bool same = kf_dtype_is_float((kf_dtype)t->dtype) && vt->rank == t->rank;
	for (int d = 0; same && d < t->rank; d++)
		same = vt->dim[d] == t->dim[d];
	if (!same)
		kf_tensor_free(t);
	return same;
}

/* A constant of shape[rank] from n elements of t at off (plus those at
 * off2 when off2 >= 0), named after input i and tag. */
static kf_vid fold(rnn *R, const kf_tensor *t, size_t i, const char *tag, int64_t off, int64_t off2,
		   const int64_t *shape, int rank)
{
	kf_tensor o;
	if (kf_tensor_alloc(&o, (kf_dtype)t->dtype, rank, shape) != 0)
		return KF_NONE;
	for (int64_t e = 0; e < kf_tensor_numel(&o); e++)
		kf_tensor_set(&o, e, kf_tensor_get(t, off + e) + (off2 >= 0 ? kf_tensor_get(t, off2 + e) : 0.0));
	char name[300];
	snprintf(name, sizeof name, "%s_%s", R->np->input[i], tag);
	kf_vid v = kf_imp_tensor_const(R->I, &o, name);
	kf_tensor_free(&o);
	return v;
}

/* Direction d's matrix of a [D, G, X] weight (input i), transposed to [X, G]. */
static kf_vid weight_t(rnn *R, kf_vid w, size_t i, int64_t d)
{
	const kf_type *t = kf_vtype(R->I->g, w);
	int64_t shape[2] = {t->dim[1], t->dim[2]};
	const kf_tensor *c = i == 1 ? &R->cw : &R->cr;
	char tag[32];
	snprintf(tag, sizeof tag, "d%lld", (long long)d);
	kf_vid m = R->has[i - 1] && R->D > 1 ? fold(R, c, i, tag, d * shape[0] * shape[1], -1, shape, 2)
					   : rs(R, sl(R, w, 0, d, d + 1), shape, 2);
	return kf_tr_transpose(R->I, m, (int64_t[]){1, 0}, 2);
}

/* Direction d's [B, H] slice of an initial state (zeros when absent). */
static kf_vid state0(rnn *R, kf_vid s, int64_t d)
{
	int64_t shape[2] = {R->B, R->H};
	if (s == KF_NONE)
		return kf_imp_splat(R->I, 0.0, xdt(R), 2, shape);
	size_t i = s == R->h0 ? 5 : 6;
	if (R->has[i - 1] && R->D > 1 && !R->layout) {
		char tag[32];
		snprintf(tag, sizeof tag, "d%lld", (long long)d);
		return fold(R, i == 5 ? &R->ch : &R->cc, i, tag, d * R->B * R->H, -1, shape, 2);
	}
	return rs(R, sl(R, s, R->layout ? 1 : 0, d, d + 1), shape, 2);
}

static kf_vid act(rnn *R, int op, kf_vid v)
{
	if (R->clip > 0) {
		v = op2(R, KF_OP_MAX, v, kf_imp_scalar(R->I, -R->clip, xdt(R)));
		v = op2(R, KF_OP_MIN, v, kf_imp_scalar(R->I, R->clip, xdt(R)));
	}
	return op1(R, op, v);
}

static kf_vid gate(rnn *R, kf_vid g, int k) { return sl(R, g, 1, k * R->H, (k + 1) * R->H); }

/* One LSTM step: h and c in, h' and c' out; xw holds the step's x W^T + b. */
static void lstm_step(rnn *R, kf_vid xw, kf_vid Rt, const kf_vid *P, kf_vid *h, kf_vid *c)
{
	kf_vid g = op2(R, KF_OP_ADD, xw, op2(R, KF_OP_MATMUL, *h, Rt));
	kf_vid gi = gate(R, g, 0), go = gate(R, g, 1), gf = gate(R, g, 2), gc = gate(R, g, 3);
	if (P) {
		gi = op2(R, KF_OP_ADD, gi, op2(R, KF_OP_MUL, P[0], *c));
		gf = op2(R, KF_OP_ADD, gf, op2(R, KF_OP_MUL, P[2], *c));
	}
	kf_vid i = act(R, KF_OP_SIGMOID, gi), f = act(R, KF_OP_SIGMOID, gf), cc = act(R, KF_OP_TANH, gc);
	kf_vid c2 = op2(R, KF_OP_ADD, op2(R, KF_OP_MUL, f, *c), op2(R, KF_OP_MUL, i, cc));
	if (P)
		go = op2(R, KF_OP_ADD, go, op2(R, KF_OP_MUL, P[1], c2));
	kf_vid o = act(R, KF_OP_SIGMOID, go);
	*h = op2(R, KF_OP_MUL, o, op1(R, KF_OP_TANH, c2));
	*c = c2;
}

/* One GRU step; xw holds the step's x W^T + Wb. */
static void gru_step(rnn *R, kf_vid xw, kf_vid Rt, kf_vid rb, kf_vid *h)
{
	kf_vid gh = op2(R, KF_OP_MATMUL, *h, Rt);
	if (rb != KF_NONE)
		gh = op2(R, KF_OP_ADD, gh, rb);
	kf_vid z = act(R, KF_OP_SIGMOID, op2(R, KF_OP_ADD, gate(R, xw, 0), gate(R, gh, 0)));
	kf_vid r = act(R, KF_OP_SIGMOID, op2(R, KF_OP_ADD, gate(R, xw, 1), gate(R, gh, 1)));
	kf_vid hn;
	if (R->lbr) {
		hn = op2(R, KF_OP_MUL, r, gate(R, gh, 2));
	} else {
		/* (r h) R_h^T + Rb_h: the third block of columns of R^T */
		hn = op2(R, KF_OP_MATMUL, op2(R, KF_OP_MUL, r, *h), sl(R, Rt, 1, 2 * R->H, 3 * R->H));
		if (rb != KF_NONE)
			hn = op2(R, KF_OP_ADD, hn, gate(R, rb, 2));
	}
	kf_vid n = act(R, KF_OP_TANH, op2(R, KF_OP_ADD, gate(R, xw, 2), hn));
	kf_vid omz = op2(R, KF_OP_SUB, kf_imp_scalar(R->I, 1.0, xdt(R)), z);
	*h = op2(R, KF_OP_ADD, op2(R, KF_OP_MUL, omz, n), op2(R, KF_OP_MUL, z, *h));
}

/* A bias half of a [D, 2G] B: direction d, half k, as [1, G]. */
static kf_vid bias(rnn *R, int64_t d, int k, int64_t G)
{
	if (R->b == KF_NONE)
		return KF_NONE;
	int64_t shape[2] = {1, G};
	if (R->has[2]) {
		char tag[32];
		snprintf(tag, sizeof tag, "d%lld_%c", (long long)d, k ? 'r' : 'w');
		return fold(R, &R->cb, 3, tag, (2 * d + k) * G, -1, shape, 2);
	}
	return rs(R, sl(R, sl(R, R->b, 0, d, d + 1), 1, k * G, (k + 1) * G), shape, 2);
}

/* Wb + Rb of direction d as [1, G]: one constant when B is an initializer. */
static kf_vid bias_sum(rnn *R, int64_t d, int64_t G)
{
	if (R->b == KF_NONE)
		return KF_NONE;
	if (R->has[2]) {
		char tag[32];
		snprintf(tag, sizeof tag, "d%lld_sum", (long long)d);
		return fold(R, &R->cb, 3, tag, 2 * d * G, (2 * d + 1) * G, (int64_t[]){1, G}, 2);
	}
	return op2(R, KF_OP_ADD, bias(R, d, 0, G), bias(R, d, 1, G));
}

/* Runs direction d over all steps; ys[t] gets step t's h (masked), and
 * *hT, *cT the final states. */
static int direction(rnn *R, int64_t d, bool rev, kf_vid *ys, kf_vid *hT, kf_vid *cT)
{
	int64_t G = (R->cell == CELL_LSTM ? 4 : R->cell == CELL_GRU ? 3 : 1) * R->H;
	kf_vid Wt = weight_t(R, R->w, 1, d), Rt = weight_t(R, R->r, 2, d);
	const char *dn = d ? "r" : ""; /* the reverse direction's names */
	name(R, Rt, "R%s", dn);
	bool gru = R->cell == CELL_GRU;
	kf_vid rb = gru ? bias(R, d, 1, G) : KF_NONE;
	/* the input projection of every step, with the biases that are not
	 * inside a GRU's reset product */
	kf_vid xw = op2(R, KF_OP_MATMUL, R->x2, Wt);
	if (R->b != KF_NONE)
		xw = op2(R, KF_OP_ADD, xw, gru ? bias(R, d, 0, G) : bias_sum(R, d, G));
	name(R, xw, "xw%s", dn);
	kf_vid P[3], *pp = NULL;
	if (R->cell == CELL_LSTM && R->p != KF_NONE) {
		for (int k = 0; k < 3; k++) { /* P is [D, 3H]: i, o, f */
			char tag[32];
			snprintf(tag, sizeof tag, "d%lld_%d", (long long)d, k);
			P[k] = R->has[3] ? fold(R, &R->cp, 7, tag, (3 * d + k) * R->H, -1, (int64_t[]){1, R->H}, 2)
					 : rs(R, sl(R, sl(R, R->p, 0, d, d + 1), 1, k * R->H, (k + 1) * R->H),
					      (int64_t[]){1, R->H}, 2);
		}
		pp = P;
	}
	kf_vid h = state0(R, R->h0, d), c = R->cell == CELL_LSTM ? state0(R, R->c0, d) : KF_NONE;
	for (int64_t s = 0; s < R->T; s++) {
		int64_t t = rev ? R->T - 1 - s : s;
		kf_vid x = sl(R, xw, 0, t * R->B, (t + 1) * R->B);
		kf_vid h2 = h, c2 = c;
		if (R->cell == CELL_LSTM)
			lstm_step(R, x, Rt, pp, &h2, &c2);
		else if (R->cell == CELL_GRU)
			gru_step(R, x, Rt, rb, &h2);
		else
			h2 = act(R, R->act[d], op2(R, KF_OP_ADD, x, op2(R, KF_OP_MATMUL, h, Rt)));
		name(R, h2, "%sh%lld", dn, (long long)t);
		name(R, R->cell == CELL_LSTM ? c2 : KF_NONE, "%sc%lld", dn, (long long)t);
		if (R->mask != KF_NONE) {
			/* past a sequence's end the state stays and Y is 0 */
			kf_vid m = sl(R, R->mask, 0, t * R->B, (t + 1) * R->B);
			kf_vid in3[3] = {m, h2, kf_imp_scalar(R->I, 0.0, xdt(R))};
			ys[t] = m == KF_NONE ? KF_NONE : kf_imp_op(R->I, KF_OP_WHERE, in3, 3, NULL, 0);
			in3[2] = h;
			h = m == KF_NONE ? KF_NONE : kf_imp_op(R->I, KF_OP_WHERE, in3, 3, NULL, 0);
			if (R->cell == CELL_LSTM) {
				in3[1] = c2;
				in3[2] = c;
				c = m == KF_NONE ? KF_NONE : kf_imp_op(R->I, KF_OP_WHERE, in3, 3, NULL, 0);
			}
		} else {
			ys[t] = h = h2;
			c = c2;
		}
		if (h == KF_NONE || R->I->failed)
			return -1;
	}
	*hT = h;
	*cT = c;
	return 0;
}

/* The node's attributes; 0 or -1 after an error. */
static int attrs(rnn *R, bool *rev, bool *bi)
{
	kf_imp *I = R->I;
	const Onnx__AttributeProto *a;
	R->layout = (a = kf_imp_attr(R->np, "layout")) ? (int)a->i : 0;
	R->clip = (a = kf_imp_attr(R->np, "clip")) ? a->f : 0;
	R->lbr = R->cell == CELL_GRU && (a = kf_imp_attr(R->np, "linear_before_reset")) && a->i;
	if (R->cell == CELL_LSTM && (a = kf_imp_attr(R->np, "input_forget")) && a->i)
		return kf_imp_fail(I, "input_forget = 1 is not supported");
	char dir[32] = "forward";
	if ((a = kf_imp_attr(R->np, "direction")))
		snprintf(dir, sizeof dir, "%.*s", (int)(a->s.len < 31 ? a->s.len : 31), (const char *)a->s.data);
	bool fwd = !strcmp(dir, "forward");
	*rev = !strcmp(dir, "reverse");
	*bi = !strcmp(dir, "bidirectional");
	if (!fwd && !*rev && !*bi)
		return kf_imp_fail(I, "direction '%s' is not one of forward, reverse, bidirectional", dir);
	R->act[0] = R->act[1] = KF_OP_TANH;
	if ((a = kf_imp_attr(R->np, "activations"))) {
		static const char *const dl[] = {"Sigmoid", "Tanh", "Tanh"};
		size_t per = R->cell == CELL_LSTM ? 3 : R->cell == CELL_GRU ? 2 : 1; /* f, g(, h) per direction */
		if (a->n_strings != per * (*bi ? 2 : 1))
			return kf_imp_fail(I, "activations has %zu names, not %zu", a->n_strings, per * (*bi ? 2 : 1));
		for (size_t i = 0; i < a->n_strings; i++) {
			const char *s = (const char *)a->strings[i].data;
			size_t n = a->strings[i].len;
			if (R->cell == CELL_RNN) {
				/* the plain RNN takes any of these three */
				static const struct { const char *name; int op; } ok[] = {
					{"Tanh", KF_OP_TANH}, {"Relu", KF_OP_RELU}, {"Sigmoid", KF_OP_SIGMOID}};
				int op = -1;
				for (size_t k = 0; k < 3 && op < 0; k++)
					if (n == strlen(ok[k].name) && !memcmp(s, ok[k].name, n))
						op = ok[k].op;
				if (op < 0)
					return kf_imp_fail(I, "activation '%.*s' is not supported (Tanh, Relu and Sigmoid are)",
							   (int)n, s);
				R->act[i] = op;
			} else if (n != strlen(dl[i % per]) || memcmp(s, dl[i % per], n)) {
				return kf_imp_fail(I, "only the default activations are supported");
			}
		}
	}
	return 0;
}

/* X as [T*B, In] in time order, and the sequence-length mask. */
/* "[d0, d1, ...]" into buf (96 bytes: three dims of any size). */
static const char *dims_str(char *buf, int rank, const int64_t *dim)
{
	int n = snprintf(buf, 96, "[");
	for (int d = 0; d < rank && n < 80; d++)
		n += snprintf(buf + n, (size_t)(96 - n), d ? ", %lld" : "%lld", (long long)dim[d]);
	snprintf(buf + n, (size_t)(96 - n), "]");
	return buf;
}

/* The shapes ONNX gives W, R, B, P, initial_h and initial_c for D
 * directions, G gates and H hidden units: the translation slices them by
 * those numbers (a hidden_size that disagrees with W: found by fuzzing). */
static int check_shapes(rnn *R)
{
	int64_t G = R->cell == CELL_LSTM ? 4 : R->cell == CELL_GRU ? 3 : 1, D = R->D, H = R->H;
	int64_t sb = R->layout ? R->B : D, sd = R->layout ? D : R->B; /* initial state [D,B,H] or [B,D,H] */
	const struct {
		kf_vid v;
		const char *name;
		int rank;
		int64_t dim[3];
	} want[] = {
		{R->w, "W", 3, {D, G * H, R->In}}, {R->r, "R", 3, {D, G * H, H}}, {R->b, "B", 2, {D, 2 * G * H}},
		{R->p, "P", 2, {D, 3 * H}}, {R->h0, "initial_h", 3, {sb, sd, H}}, {R->c0, "initial_c", 3, {sb, sd, H}},
		{R->lens, "sequence_lens", 1, {R->B}},
	};
	for (size_t k = 0; k < sizeof want / sizeof *want; k++) {
		if (want[k].v == KF_NONE)
			continue;
		const kf_type *t = kf_vtype(R->I->g, want[k].v);
		bool ok = t->rank == want[k].rank;
		for (int d = 0; ok && d < t->rank; d++)
			ok = t->dim[d] == want[k].dim[d];
		if (!ok) {
			char has[96], need[96];
			return kf_imp_fail(R->I, "%s has shape %s; %lld direction(s), %lld gate(s) and hidden_size %lld need %s",
					   want[k].name, dims_str(has, t->rank, t->dim), (long long)D, (long long)G,
					   (long long)H, dims_str(need, want[k].rank, want[k].dim));
		}
	}
	return 0;
}

static int inputs(rnn *R)
{
	kf_imp *I = R->I;
	const kf_type *X = kf_vtype(I->g, R->x), *W = kf_vtype(I->g, R->w);
	if (!kf_type_is_static(X) || X->rank != 3 || W->rank != 3)
		return kf_imp_fail(I, "needs a static rank-3 X and W");
	R->T = X->dim[R->layout ? 1 : 0];
	R->B = X->dim[R->layout ? 0 : 1];
	R->In = X->dim[2];
	const Onnx__AttributeProto *a = kf_imp_attr(R->np, "hidden_size");
	R->H = a ? a->i : kf_vtype(I->g, R->r)->dim[2];
	if (R->T < 1 || R->H < 1 || R->B < 1)
		return kf_imp_fail(I, "needs at least one step, one sequence and one hidden unit");
	if (check_shapes(R) < 0)
		return -1;
	kf_vid x = R->layout ? kf_tr_transpose(I, R->x, (int64_t[]){1, 0, 2}, 3) : R->x;
	R->x2 = rs(R, x, (int64_t[]){R->T * R->B, R->In}, 2);
	R->mask = KF_NONE;
	if (R->lens != KF_NONE) {
		/* mask[t * B + b] = t < lens[b] */
		kf_dtype lt = (kf_dtype)kf_vtype(I->g, R->lens)->dtype;
		kf_attrval it[2];
		kf_attr ia[3] = {kf_tr_as(I, "dtype", kf_dtype_name(lt)),
				 kf_imp_ints_attr(I, "shape", it, (int64_t[]){R->T, R->B}, 2), kf_imp_int_attr(I, "axis", 0)};
		kf_vid t = kf_imp_op(I, KF_OP_IOTA, NULL, 0, ia, 3);
		kf_vid m = op2(R, KF_OP_LT, t, rs(R, R->lens, (int64_t[]){1, R->B}, 2));
		R->mask = rs(R, m, (int64_t[]){R->T * R->B, 1}, 2);
	}
	return R->x2 == KF_NONE || I->failed ? -1 : 0;
}

/* Y [T, D, B, H] (layout 1: [B, T, D, H]), Y_h and Y_c [D, B, H] (layout 1:
 * [B, D, H]) from each direction's steps. */
static void results(rnn *R, kf_vid *ys, const kf_vid *hT, const kf_vid *cT, kf_vid *out)
{
	kf_vid ydir[2], hs[2], cs[2];
	for (int64_t d = 0; d < R->D; d++) {
		/* a direction's h of every step, in time order, as one value */
		kf_vid y = cat(R, ys + d * R->T, (int)R->T, 0);
		ydir[d] = R->layout ? kf_tr_transpose(R->I, rs(R, y, (int64_t[]){R->T, R->B, 1, R->H}, 4),
						      (int64_t[]){1, 0, 2, 3}, 4)
				    : rs(R, y, (int64_t[]){R->T, 1, R->B, R->H}, 4);
		int64_t sh[3] = {R->layout ? R->B : 1, R->layout ? 1 : R->B, R->H};
		hs[d] = rs(R, hT[d], sh, 3);
		cs[d] = R->cell == CELL_LSTM ? rs(R, cT[d], sh, 3) : KF_NONE;
	}
	out[0] = cat(R, ydir, (int)R->D, R->layout ? 2 : 1);
	out[1] = cat(R, hs, (int)R->D, R->layout ? 1 : 0);
	if (R->cell == CELL_LSTM)
		out[2] = cat(R, cs, (int)R->D, R->layout ? 1 : 0);
}

static int rnn_common(kf_imp *I, kf_np *np, kf_vid *out, int cell)
{
	rnn R = {.I = I, .np = np, .cell = cell};
	bool lstm = cell == CELL_LSTM, rev = false, bi = false;
	/* the node's name (or its first output's) as a value name */
	const char *nm = np->name && np->name[0] ? np->name : np->n_output ? np->output[0] : "";
	size_t k = 0;
	for (; nm[k] && k + 1 < sizeof R.base; k++)
		R.base[k] = (nm[k] >= 'a' && nm[k] <= 'z') || (nm[k] >= 'A' && nm[k] <= 'Z') ||
				    (nm[k] >= '0' && nm[k] <= '9') || nm[k] == '.' ? nm[k] : '_';
	R.base[k] = 0;
	R.x = kf_imp_input(I, np, 0);
	R.w = kf_imp_input(I, np, 1);
	R.r = kf_imp_input(I, np, 2);
	R.b = kf_imp_input(I, np, 3);
	R.lens = kf_imp_input(I, np, 4);
	R.h0 = kf_imp_input(I, np, 5);
	R.c0 = lstm ? kf_imp_input(I, np, 6) : KF_NONE;
	R.p = lstm ? kf_imp_input(I, np, 7) : KF_NONE;
	if (R.x == KF_NONE || R.w == KF_NONE || R.r == KF_NONE)
		return kf_imp_fail(I, "needs X, W and R");
	if (attrs(&R, &rev, &bi) < 0)
		return -1;
	R.D = bi ? 2 : 1;
	if (inputs(&R) < 0)
		return -1;
	kf_tensor *ct[6] = {&R.cw, &R.cr, &R.cb, &R.cp, &R.ch, &R.cc};
	static const size_t ix[6] = {1, 2, 3, 7, 5, 6};
	for (k = 0; k < 6; k++)
		R.has[k] = (lstm || ix[k] < 6) && init_input(&R, ix[k], ct[k]);
	kf_vid *ys = calloc((size_t)(R.T * R.D) + 1, sizeof *ys), hT[2], cT[2];
	int rc = 0;
	for (int64_t d = 0; d < R.D && rc == 0; d++)
		rc = direction(&R, d, rev || d == 1, ys + d * R.T, &hT[d], &cT[d]);
	if (rc == 0)
		results(&R, ys, hT, cT, out);
	for (k = 0; k < 6; k++)
		if (R.has[k])
			kf_tensor_free(ct[k]);
	free(ys);
	if (rc != 0 || I->failed)
		return -1;
	return lstm ? 3 : 2;
}

int kf_imp_lstm(kf_imp *I, const Onnx__NodeProto *np, kf_vid *out, int op)
{
	(void)op;
	return rnn_common(I, np, out, CELL_LSTM);
}

int kf_imp_gru(kf_imp *I, const Onnx__NodeProto *np, kf_vid *out, int op)
{
	(void)op;
	return rnn_common(I, np, out, CELL_GRU);
}

int kf_imp_rnn(kf_imp *I, const Onnx__NodeProto *np, kf_vid *out, int op)
{
	(void)op;
	return rnn_common(I, np, out, CELL_RNN);
}
