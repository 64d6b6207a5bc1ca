/* rnn.c: ONNX LSTM and GRU as unrolled primitive ops.
 *
 * The IR has no loop, so each step is written out: per step t (in time
 * order, or reversed for direction "reverse"; both for "bidirectional")
 *   LSTM (gates i, o, f, c):  g = x_t W^T + h R^T + Wb + Rb,
 *        i = σ(g_i + P_i c), f = σ(g_f + P_f c), c' = f c + i tanh(g_c),
 *        o = σ(g_o + P_o c'), h' = o tanh(c')
 *   GRU (gates z, r, h):  z = σ(x W_z^T + h R_z^T + b), r likewise,
 *        n = tanh(x W_h^T + Wb_h + r (h R_h^T + Rb_h))   (linear_before_reset)
 *        n = tanh(x W_h^T + Wb_h + (r h) R_h^T + Rb_h)    (default)
 *        h' = (1 - z) n + z h
 * with `clip` clamping every gate's pre-activation.  sequence_lens masks
 * the steps past a sequence's end (h and c keep their value, Y is 0).
 * Only the default activations are supported; layout 0 and 1 both are.
 * A forward LSTM with batch 1 unrolls into what the `persistent` pass
 * recognises (docs/persistent.md). */
#include <stdlib.h>
#include <string.h>
#include "tr.h"

typedef struct rnn {
	kf_imp *I;
	kf_np *np;
	bool lstm, lbr;
	int64_t T, B, In, H, D;
	int layout;
	double clip;         /* 0: none */
	kf_vid x, w, r, b, h0, c0, p, lens;
} rnn;

static kf_vid op1(rnn *R, int op, kf_vid a) { return a == KF_NONE ? KF_NONE : kf_imp_op(R->I, op, &a, 1, NULL, 0); }

static kf_vid op2(rnn *R, int op, kf_vid a, kf_vid b)
{
	kf_vid v[2] = {a, b};
	return a == KF_NONE || b == KF_NONE ? KF_NONE : kf_imp_op(R->I, op, v, 2, NULL, 0);
}

static kf_vid sl(rnn *R, kf_vid v, int64_t axis, int64_t a, int64_t e) { return kf_tr_slice(R->I, v, axis, a, e); }
static kf_vid rs(rnn *R, kf_vid v, const int64_t *shape, int rank) { return kf_tr_reshape(R->I, v, shape, rank); }
static kf_vid cat(rnn *R, const kf_vid *v, int n, int64_t axis) { return kf_tr_concat(R->I, v, n, axis); }

/* Direction d's matrix of a [D, G, X] weight, transposed to [X, G]. */
static kf_vid weight_t(rnn *R, kf_vid w, int64_t d)
{
	const kf_type *t = kf_vtype(R->I->g, w);
	int64_t shape[2] = {t->dim[1], t->dim[2]};
	return kf_tr_transpose(R->I, rs(R, sl(R, w, 0, d, d + 1), shape, 2), (int64_t[]){1, 0}, 2);
}

/* Direction d's [B, H] slice of an initial state (zeros when absent). */
static kf_vid state0(rnn *R, kf_vid s, int64_t d)
{
	int64_t shape[2] = {R->B, R->H};
	if (s == KF_NONE) {
		kf_vid z = kf_imp_scalar(R->I, 0.0, (kf_dtype)kf_vtype(R->I->g, R->x)->dtype);
		kf_attrval it[2];
		kf_attr a = kf_imp_ints_attr(R->I, "shape", it, shape, 2);
		return kf_imp_op(R->I, KF_OP_BROADCAST_TO, &z, 1, &a, 1);
	}
	return rs(R, sl(R, s, R->layout ? 1 : 0, d, d + 1), shape, 2);
}

static kf_vid act(rnn *R, int op, kf_vid v)
{
	if (R->clip > 0) {
		kf_dtype dt = (kf_dtype)kf_vtype(R->I->g, v)->dtype;
		v = op2(R, KF_OP_MAX, v, kf_imp_scalar(R->I, -R->clip, dt));
		v = op2(R, KF_OP_MIN, v, kf_imp_scalar(R->I, R->clip, dt));
	}
	return op1(R, op, v);
}

static kf_vid gate(rnn *R, kf_vid g, int k) { return sl(R, g, 1, k * R->H, (k + 1) * R->H); }

/* One LSTM step: h and c in, h' and c' out. */
static void lstm_step(rnn *R, kf_vid x, kf_vid Wt, kf_vid Rt, kf_vid b, const kf_vid *P, kf_vid *h, kf_vid *c)
{
	kf_vid g = op2(R, KF_OP_ADD, op2(R, KF_OP_MATMUL, x, Wt), op2(R, KF_OP_MATMUL, *h, Rt));
	if (b != KF_NONE)
		g = op2(R, KF_OP_ADD, g, b);
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

/* One GRU step. */
static void gru_step(rnn *R, kf_vid x, kf_vid Wt, kf_vid Rt, kf_vid wb, kf_vid rb, kf_vid *h)
{
	kf_vid gx = op2(R, KF_OP_MATMUL, x, Wt), gh = op2(R, KF_OP_MATMUL, *h, Rt);
	if (wb != KF_NONE)
		gx = op2(R, KF_OP_ADD, gx, wb);
	if (rb != KF_NONE)
		gh = op2(R, KF_OP_ADD, gh, rb);
	kf_vid z = act(R, KF_OP_SIGMOID, op2(R, KF_OP_ADD, gate(R, gx, 0), gate(R, gh, 0)));
	kf_vid r = act(R, KF_OP_SIGMOID, op2(R, KF_OP_ADD, gate(R, gx, 1), gate(R, gh, 1)));
	kf_vid hn;
	if (R->lbr) {
		hn = op2(R, KF_OP_MUL, r, gate(R, gh, 2));
	} else {
		/* (r h) R_h^T + Rb_h: the third block of columns of R^T */
		hn = op2(R, KF_OP_MATMUL, op2(R, KF_OP_MUL, r, *h), sl(R, Rt, 1, 2 * R->H, 3 * R->H));
		if (rb != KF_NONE)
			hn = op2(R, KF_OP_ADD, hn, gate(R, rb, 2));
	}
	kf_vid n = act(R, KF_OP_TANH, op2(R, KF_OP_ADD, gate(R, gx, 2), hn));
	kf_dtype dt = (kf_dtype)kf_vtype(R->I->g, n)->dtype;
	kf_vid omz = op2(R, KF_OP_SUB, kf_imp_scalar(R->I, 1.0, dt), z);
	*h = op2(R, KF_OP_ADD, op2(R, KF_OP_MUL, omz, n), op2(R, KF_OP_MUL, z, *h));
}

/* A bias half of a [D, 2G] B: direction d, half k, as [1, G]. */
static kf_vid bias(rnn *R, int64_t d, int k, int64_t G)
{
	if (R->b == KF_NONE)
		return KF_NONE;
	int64_t shape[2] = {1, G};
	return rs(R, sl(R, sl(R, R->b, 0, d, d + 1), 1, k * G, (k + 1) * G), shape, 2);
}

/* Runs direction d over all steps; ys[t] gets step t's h (masked), and
 * *hT, *cT the final states. */
static int direction(rnn *R, int64_t d, bool rev, kf_vid *ys, kf_vid *hT, kf_vid *cT)
{
	int64_t G = (R->lstm ? 4 : 3) * R->H;
	kf_vid Wt = weight_t(R, R->w, d), Rt = weight_t(R, R->r, d);
	kf_vid wb = bias(R, d, 0, G), rb = bias(R, d, 1, G), b = KF_NONE;
	if (R->lstm && wb != KF_NONE)
		b = op2(R, KF_OP_ADD, wb, rb);
	kf_vid P[3], *pp = NULL;
	if (R->lstm && R->p != KF_NONE) {
		for (int k = 0; k < 3; k++) /* P is [D, 3H]: i, o, f */
			P[k] = rs(R, sl(R, sl(R, R->p, 0, d, d + 1), 1, k * R->H, (k + 1) * R->H), (int64_t[]){1, R->H}, 2);
		pp = P;
	}
	kf_vid h = state0(R, R->h0, d), c = R->lstm ? state0(R, R->c0, d) : KF_NONE;
	kf_dtype dt = (kf_dtype)kf_vtype(R->I->g, R->x)->dtype;
	for (int64_t s = 0; s < R->T; s++) {
		int64_t t = rev ? R->T - 1 - s : s;
		kf_vid x = rs(R, sl(R, R->x, R->layout ? 1 : 0, t, t + 1), (int64_t[]){R->B, R->In}, 2);
		kf_vid h2 = h, c2 = c;
		if (R->lstm)
			lstm_step(R, x, Wt, Rt, b, pp, &h2, &c2);
		else
			gru_step(R, x, Wt, Rt, wb, rb, &h2);
		if (R->lens != KF_NONE) {
			/* past a sequence's end the state stays and Y is 0 */
			kf_vid m = op2(R, KF_OP_LT, kf_imp_scalar(R->I, (double)t, (kf_dtype)kf_vtype(R->I->g, R->lens)->dtype),
				       R->lens);
			m = rs(R, m, (int64_t[]){R->B, 1}, 2);
			kf_vid in3[3] = {m, h2, kf_imp_scalar(R->I, 0.0, dt)};
			ys[t] = m == KF_NONE ? KF_NONE : kf_imp_op(R->I, KF_OP_WHERE, in3, 3, NULL, 0);
			in3[2] = h;
			h = m == KF_NONE ? KF_NONE : kf_imp_op(R->I, KF_OP_WHERE, in3, 3, NULL, 0);
			if (R->lstm) {
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

static int rnn_common(kf_imp *I, kf_np *np, kf_vid *out, bool lstm)
{
	rnn R = {.I = I, .np = np, .lstm = lstm};
	const Onnx__AttributeProto *a;
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
	R.layout = (a = kf_imp_attr(np, "layout")) ? (int)a->i : 0;
	R.clip = (a = kf_imp_attr(np, "clip")) ? a->f : 0;
	R.lbr = !lstm && (a = kf_imp_attr(np, "linear_before_reset")) && a->i;
	if (lstm && (a = kf_imp_attr(np, "input_forget")) && a->i)
		return kf_imp_fail(I, "input_forget = 1 is not supported");
	if ((a = kf_imp_attr(np, "activations"))) {
		static const char *const dl[] = {"Sigmoid", "Tanh", "Tanh"};
		size_t per = lstm ? 3 : 2; /* f, g(, h) per direction */
		for (size_t i = 0; i < a->n_strings; i++)
			if (a->strings[i].len != strlen(dl[i % per]) ||
			    memcmp(a->strings[i].data, dl[i % per], a->strings[i].len))
				return kf_imp_fail(I, "only the default activations are supported");
	}
	char dir[32] = "forward";
	if ((a = kf_imp_attr(np, "direction")))
		snprintf(dir, sizeof dir, "%.*s", (int)(a->s.len < 31 ? a->s.len : 31), (const char *)a->s.data);
	bool fwd = !strcmp(dir, "forward"), rev = !strcmp(dir, "reverse"), bi = !strcmp(dir, "bidirectional");
	if (!fwd && !rev && !bi)
		return kf_imp_fail(I, "direction '%s' is not one of forward, reverse, bidirectional", dir);
	const kf_type *X = kf_vtype(I->g, R.x), *W = kf_vtype(I->g, R.w);
	if (!kf_type_is_static(X) || X->rank != 3 || W->rank != 3)
		return kf_imp_fail(I, "needs a static rank-3 X and W");
	R.T = X->dim[R.layout ? 1 : 0];
	R.B = X->dim[R.layout ? 0 : 1];
	R.In = X->dim[2];
	R.D = bi ? 2 : 1;
	R.H = (a = kf_imp_attr(np, "hidden_size")) ? a->i : kf_vtype(I->g, R.r)->dim[2];
	if (R.lens != KF_NONE && !fwd)
		return kf_imp_fail(I, "sequence_lens is supported with direction forward only");
	if (R.T < 1 || R.H < 1)
		return kf_imp_fail(I, "needs at least one step and one hidden unit");
	kf_vid *ys = calloc((size_t)(R.T * R.D) + 1, sizeof *ys), hT[2], cT[2];
	kf_vid *col = calloc((size_t)R.T + 1, sizeof *col), ydir[2];
	int rc = 0;
	for (int64_t d = 0; d < R.D && rc == 0; d++) {
		rc = direction(&R, d, rev || d == 1, ys + d * R.T, &hT[d], &cT[d]);
		/* Y: [T, D, B, H], or [B, T, D, H] with layout 1 */
		for (int64_t t = 0; t < R.T && rc == 0; t++)
			col[t] = R.layout ? rs(&R, ys[d * R.T + t], (int64_t[]){R.B, 1, 1, R.H}, 4)
					  : rs(&R, ys[d * R.T + t], (int64_t[]){1, 1, R.B, R.H}, 4);
		if (rc == 0)
			ydir[d] = cat(&R, col, (int)R.T, R.layout ? 1 : 0);
	}
	if (rc == 0) {
		out[0] = cat(&R, ydir, (int)R.D, R.layout ? 2 : 1);
		kf_vid hs[2], cs[2];
		for (int64_t d = 0; d < R.D; d++) {
			int64_t sh[3] = {R.layout ? R.B : 1, R.layout ? 1 : R.B, R.H};
			hs[d] = rs(&R, hT[d], sh, 3);
			cs[d] = lstm ? rs(&R, cT[d], sh, 3) : KF_NONE;
		}
		out[1] = cat(&R, hs, (int)R.D, R.layout ? 1 : 0);
		if (lstm)
			out[2] = cat(&R, cs, (int)R.D, R.layout ? 1 : 0);
	}
	free(ys);
	free(col);
	if (rc != 0 || I->failed)
		return -1;
	return lstm ? 3 : 2;
}

int kf_imp_lstm(kf_imp *I, const Onnx__NodeProto *np, kf_vid *out, int op)
{
	(void)op;
	return rnn_common(I, np, out, true);
}

int kf_imp_gru(kf_imp *I, const Onnx__NodeProto *np, kf_vid *out, int op)
{
	(void)op;
	return rnn_common(I, np, out, false);
}
