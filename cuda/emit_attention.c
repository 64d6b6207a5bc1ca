/* emit_attention.c: the attention kernels (kind = "attention", made by
 * the fuse-attention pass): the analysis of the fusion's body (the anatomy
 * of core/attention.h, found again; each of q, k, v must be a view of a
 * parameter and the output a view of the result), the helpers the kernels
 * call (the score chain, q's prologue, the output) and the choice of
 * kernel: the tensor-core flash kernel (emit_attention_mma.c) for f16 and
 * bf16 at head dims that are multiples of 16, the split-key SIMT kernel
 * (emit_attention_simt.c) for the rest and for decoding (few query rows).
 *
 * The scores are kept in f32 from the tensor cores on (the graph may round
 * them to f16 between ops; the kernel does not, as flash attention does
 * not), the score chain runs on them element by element, and the softmax is
 * online: exp2 of the scores less a running row maximum, the sum and the
 * output rescaled when the maximum grows.  A causal mask in the pass's form
 * (le(iota over columns, iota over rows + off), through where or an
 * additive where(.., 0, fill)) is not evaluated: the kernel drops the
 * columns j > i + off and skips the tiles wholly above the diagonal, which
 * computes the same when the fill is -inf, or at most -1e4 (then exp
 * underflows to 0 for scores under ~9900 in magnitude).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "emit_att_int.h"

int kx_att_decline(kx *k, const char *why)
{
	snprintf(k->k->why, sizeof k->k->why, "attention kernel: %s", why);
	return -1;
}

/* ---- analysis ------------------------------------------------------------------ */

/* Every offset a view can produce is a multiple of m elements. */
static bool aligned(const kf_view *v, int64_t m, int skip)
{
	if (v->off % m)
		return false;
	for (int d = 0; d < v->rank; d++)
		for (int f = 0; f < v->d[d].nf; f++)
			if (d != skip && v->d[d].stride[f] % m)
				return false;
	return true;
}

static int operand(kx *k, kx_att *at, int which, kx_attop *op)
{
	kf_graph *g = k->g;
	const kf_att *a = &at->a;
	const kf_att_chain *c = &a->pro[which];
	static const char *const name[] = {"q", "k", "v"};
	char buf[128];
	memset(op, 0, sizeof *op);
	op->param = kx_param(k, c->base);
	if (op->param < 0) {
		snprintf(buf, sizeof buf, "%s is not read from a parameter", name[which]);
		return kx_att_decline(k, buf);
	}
	op->st = kx_dt(k, c->base);
	op->dt = kx_dt(k, kf_att_operand(a, which));
	if (!kf_att_view(a, which, &a->B, &op->view)) {
		snprintf(buf, sizeof buf, "%s is not a strided view of its parameter", name[which]);
		return kx_att_decline(k, buf);
	}
	for (int i = c->nn - 1; i >= 0; i--) {
		if (kf_att_layout_op(kf_N(g, c->n[i])->op))
			continue;
		if (which != 0)
			return kx_att_decline(k, "k or v has an element-wise prologue");
		op->pro[op->npro++] = c->n[i];
	}
	int r = op->view.rank;
	op->rs = kf_view_stride(&op->view, r - 2);
	op->cs = kf_view_stride(&op->view, r - 1);
	if (op->rs < 0 || op->cs < 0) {
		snprintf(buf, sizeof buf, "the rows or columns of %s are not one stride", name[which]);
		return kx_att_decline(k, buf);
	}
	/* 16-byte pieces along the contiguous dim: every other offset must be
	 * a multiple of 16 bytes (the kernel checks the tile's extent) */
	int64_t e = (int64_t)kf_dtype_size(op->st), per = 16 / e;
	op->raw = op->npro == 0 && op->st == op->dt && (op->cs == 1 || op->rs == 1) &&
		  aligned(&op->view, per, op->cs == 1 ? r - 1 : r - 2);
	return 0;
}

/* v, the scores' value, is iota over the columns (col) or rows (!col) of
 * the scores, broadcast from [.., Tq, Tk] or with leading 1s. */
static bool iota_of(const kx *k, const kx_att *at, kf_vid v, bool col)
{
	kf_nid d = kf_def(k->g, v);
	if (d == KF_NONE || kf_N(k->g, d)->op != KF_OP_IOTA || !kx_computed(k, v))
		return false;
	const kf_type *t = kf_vtype(k->g, v);
	int ax = (int)kf_attr_int(k->g, d, "axis", 0);
	if (ax < 0)
		ax += t->rank;
	if (t->rank < 2 || ax != t->rank - (col ? 1 : 2) || t->dim[t->rank - 2] != at->Tq || t->dim[t->rank - 1] != at->Tk)
		return false;
	for (int i = 0; i < t->rank - 2; i++)
		if (t->dim[i] != 1)
			return false;
	return true;
}

/* A constant (in the body) of one value: *x. */
static bool const_val(const kx *k, kf_vid v, double *x)
{
	kf_nid d = kf_def(k->g, v);
	if (d == KF_NONE || kf_N(k->g, d)->op != KF_OP_CONST || !kx_computed(k, v))
		return false;
	const kf_const *c = kf_N(k->g, d)->cst;
	if (!c || c->kind == KF_CONST_FILE || c->n != 1)
		return false;
	*x = c->f ? c->f[0] : (double)c->i[0];
	return true;
}

/* m = le(col, row + off) (keep = true) or gt(col, row + off) (keep =
 * false): true, with *off. */
static bool causal_cmp(const kx *k, const kx_att *at, kf_vid m, bool keep, int64_t *off)
{
	kf_graph *g = k->g;
	kf_nid d = kf_def(g, m);
	if (d == KF_NONE || !kx_computed(k, m) || kf_N(g, d)->op != (keep ? KF_OP_LE : KF_OP_GT))
		return false;
	kf_vid c = kf_in(g, d, 0), r = kf_in(g, d, 1);
	if (!iota_of(k, at, c, true))
		return false;
	if (iota_of(k, at, r, false)) {
		*off = 0;
		return true;
	}
	kf_nid ad = kf_def(g, r);
	if (ad == KF_NONE || !kx_computed(k, r) || kf_N(g, ad)->op != KF_OP_ADD)
		return false;
	for (int i = 0; i < 2; i++) {
		double x;
		if (iota_of(k, at, kf_in(g, ad, i), false) && const_val(k, kf_in(g, ad, !i), &x) && x >= 0 &&
		    x == floor(x) && x < 1e15) {
			*off = (int64_t)x;
			return true;
		}
	}
	return false;
}

/* The causal mask of score-chain node n (chain: the value it reads from the
 * chain), in one of the pass's forms; the fill drops a column for good. */
static bool causal_node(const kx *k, kx_att *at, kf_nid n, kf_vid chain)
{
	kf_graph *g = k->g;
	const kf_node *x = kf_N(g, n);
	double fill;
	if (x->op == KF_OP_WHERE) {
		kf_vid m = kf_in(g, n, 0);
		bool keep = kf_in(g, n, 1) == chain;
		kf_vid f = kf_in(g, n, keep ? 2 : 1);
		if (m == chain || kf_in(g, n, 1) == kf_in(g, n, 2) || !const_val(k, f, &fill) || !(fill <= -1e4))
			return false;
		return causal_cmp(k, at, m, keep, &at->off);
	}
	if (x->op != KF_OP_ADD)
		return false;
	kf_vid w = kf_in(g, n, kf_in(g, n, 0) == chain);
	kf_nid wd = kf_def(g, w);
	double zero;
	if (w == chain || wd == KF_NONE || !kx_computed(k, w) || kf_N(g, wd)->op != KF_OP_WHERE)
		return false;
	/* where(keep, 0, fill) or where(cut, fill, 0) */
	for (int keep = 1; keep >= 0; keep--)
		if (const_val(k, kf_in(g, wd, keep ? 1 : 2), &zero) && zero == 0 &&
		    const_val(k, kf_in(g, wd, keep ? 2 : 1), &fill) && fill <= -1e4 &&
		    causal_cmp(k, at, kf_in(g, wd, 0), keep, &at->off))
			return true;
	return false;
}

/* The chain value score-chain node i reads. */
static kf_vid chain_in(const kx_att *at, int i)
{
	const kf_att *a = &at->a;
	return i ? kf_res(a->g, a->score.n[i - 1], 0) : kf_res(a->g, a->mm1, 0);
}

/* at->fold: the score chain, but for the causal mask the kernel applies,
 * is s * c, c * s or s / c with c a positive constant of one element:
 * the maximum of the scores is c times that of s, so the scale can wait
 * until the exponential (one multiplication an element fewer). */
static void fold_of(const kx *k, kx_att *at)
{
	kf_graph *g = k->g;
	const kf_att *a = &at->a;
	int n = -1;
	for (int i = 0; i < a->score.nn; i++) {
		if (at->causal && a->score.n[i] == at->cnode)
			continue;
		if (n >= 0)
			return;
		n = i;
	}
	if (n < 0)
		return;
	kf_nid x = a->score.n[n];
	int op = kf_N(g, x)->op;
	kf_vid chain = chain_in(at, n);
	double c;
	for (int i = 0; i < 2; i++)
		if ((op == KF_OP_MUL || (op == KF_OP_DIV && i == 1)) && kf_in(g, x, !i) == chain &&
		    kf_in(g, x, i) != chain && const_val(k, kf_in(g, x, i), &c) && c > 0 && isfinite(c)) {
			at->fold = true;
			at->fnode = x;
			at->fconst = i;
			return;
		}
}

/* Whether the score chain may give finite scores of huge magnitude (kx_att
 * huge). */
static bool huge_of(const kx *k, const kx_att *at)
{
	/* only a chain that adds or selects (a mask) in a type that reaches
	 * 1e38 (f32, bf16; f16 stops at 65504): f16 kernels keep their
	 * registers and their fused exponents */
	bool masked = false, wide = false;
	for (int i = 0; i < at->a.score.nn; i++) {
		int op = kf_N(k->g, at->a.score.n[i])->op;
		kf_dtype rt = kx_dt(k, kf_res(k->g, at->a.score.n[i], 0));
		masked |= op == KF_OP_ADD || op == KF_OP_SUB || op == KF_OP_WHERE;
		wide |= rt == KF_F32 || rt == KF_BF16 || rt == KF_F64;
	}
	return masked && wide;
}

static int analyse(kx *k, kx_att *at)
{
	kf_graph *g = k->g;
	memset(at, 0, sizeof *at);
	kf_nid sm = KF_NONE;
	for (uint32_t i = 0; i < k->nnode; i++)
		if (kf_N(g, k->node[i])->op == KF_OP_SOFTMAX) {
			if (sm != KF_NONE)
				return kx_att_decline(k, "the body holds more than one softmax");
			sm = k->node[i];
		}
	if (sm == KF_NONE)
		return kx_att_decline(k, "the body holds no softmax");
	kf_att *a = &at->a;
	if (!kf_att_recognise(g, sm, a)) {
		char buf[140];
		snprintf(buf, sizeof buf, "not attention: %s", a->why);
		return kx_att_decline(k, buf);
	}
	if (k->nout != 1 || k->out[0] != kf_att_result(a))
		return kx_att_decline(k, "the body yields something other than the attention's result");
	for (uint32_t i = 0; i < k->nnode; i++) {
		kf_nid n = k->node[i];
		int op = kf_N(g, n)->op;
		if (op == KF_OP_CONST || op == KF_OP_IOTA || kf_att_member(a, n))
			continue;
		int t = kf_op(k->c, op)->trait;
		if (t != KF_TRAIT_ELEMENTWISE && t != KF_TRAIT_BROADCAST)
			return kx_att_decline(k, "the body computes more than the attention and its masks");
	}
	const kf_type *S = kf_vtype(g, kf_res(g, a->mm1, 0)), *O = kf_vtype(g, kf_res(g, a->mm2, 0));
	at->nb = a->B.rank;
	at->NB = kf_type_numel(&a->B);
	at->Tq = S->dim[S->rank - 2];
	at->Tk = S->dim[S->rank - 1];
	at->DV = O->dim[O->rank - 1];
	const kf_type *Q = kf_vtype(g, kf_att_operand(a, 0));
	at->D = Q->dim[Q->rank - 1];
	if (operand(k, at, 0, &at->q) || operand(k, at, 1, &at->k) || operand(k, at, 2, &at->v))
		return -1;
	at->mdt = at->q.dt;
	if (at->k.dt != at->mdt || at->v.dt != at->mdt ||
	    (at->mdt != KF_F16 && at->mdt != KF_BF16 && at->mdt != KF_F32))
		return kx_att_decline(k, "q, k and v are not of one of f16, bf16, f32");
	/* the output: back through the output chain from the result */
	at->odt = kx_dt(k, k->out[0]);
	if (!kf_view_init(&at->o, kf_vtype(g, k->out[0])))
		return kx_att_decline(k, "the result's shape");
	for (int i = a->out.nn - 1; i >= 0; i--)
		if (kf_N(g, a->out.n[i])->op != KF_OP_CAST && !kf_view_back_through(g, a->out.n[i], &at->o))
			return kx_att_decline(k, "the output chain is not a view");
	if (at->o.rank != O->rank || kf_view_stride(&at->o, O->rank - 1) != 1 ||
	    (at->ors = kf_view_stride(&at->o, O->rank - 2)) < 0)
		return kx_att_decline(k, "the output's rows are not contiguous");
	for (int i = 0; i < a->score.nn && !at->causal; i++)
		if (causal_node(k, at, a->score.n[i], chain_in(at, i))) {
			at->causal = true;
			at->cnode = a->score.n[i];
		}
	at->tf32 = kf_attr_bool(g, k->at, "tf32", false);
	fold_of(k, at);
	at->huge = huge_of(k, at);
	return 0;
}

/* ---- text helpers -------------------------------------------------------------- */

void kx_att_boff(kx *k, const kx_att *at, const kf_view *v, const char *z, kf_buf *o)
{
	const kf_type *B = &at->a.B;
	/* the probe's view and batch, where they have the same structure */
	const kf_view *pv = kx_att_twin(at, v);
	const kf_type *pB = at->p ? &at->p->a.B : NULL;
	bool tw = pv && pB && pv->rank == v->rank && pB->rank == B->rank;
	for (int d = 0; tw && d < at->nb; d++)
		tw = pv->d[d].nf == v->d[d].nf;
	kf_buf_putc(o, '(');
	kx_dimll(k, o, v->off, tw ? kx_pmono(k, pv->off) : v->off);
	for (int d = 0; d < at->nb; d++) {
		const kf_view_dim *x = &v->d[d], *px = tw ? &pv->d[d] : x;
		if (x->nf == 0)
			continue;
		int64_t after = 1, pafter = 1;
		for (int e = d + 1; e < at->nb; e++) {
			after *= B->dim[e];
			pafter *= tw ? pB->dim[e] : B->dim[e];
		}
		/* the batch coordinate, then its factors */
		int64_t inner = x->size, pinner = px->size;
		for (int f = 0; f < x->nf; f++) {
			inner /= x->ext[f];
			pinner /= px->ext[f];
			if (!x->stride[f])
				continue;
			kf_buf_printf(o, " + (long long)((%s / ", z);
			kx_dim(k, o, after * inner, tw ? kx_pmono(k, pafter * pinner) : after * inner);
			kf_buf_puts(o, ") % ");
			kx_dim(k, o, x->ext[f], tw ? kx_pmono(k, px->ext[f]) : x->ext[f]);
			kf_buf_puts(o, ") * ");
			kx_dimll(k, o, x->stride[f], tw ? kx_pmono(k, px->stride[f]) : x->stride[f]);
		}
	}
	kf_buf_putc(o, ')');
}

void kx_att_helper_head(kx *k, kf_buf *h, const char *ret, const char *name, bool outs)
{
	kf_buf_printf(h, "static __device__ __forceinline__ %s KF_KERNEL_%s(", ret, name);
	for (uint32_t i = 0; i < k->nparam; i++)
		kf_buf_printf(h, "%sconst %s *__restrict__ p%u", i ? ", " : "", kx_st(kx_dt(k, k->param[i])), i);
	for (uint32_t i = 0; outs && i < k->nout; i++)
		kf_buf_printf(h, "%s%s *__restrict__ o%u", i || k->nparam ? ", " : "", kx_st(kx_dt(k, k->out[i])), i);
	/* the sizes the kernel reads (emit_int.h), right after its parameters */
	kf_buf_puts(h, KX_KD_PARAMS);
	kf_buf_puts(h, k->nparam || (outs && k->nout) ? ", " : "");
}

static void helper_call(const kx *k, kf_buf *b, const char *name, bool outs)
{
	kf_buf_printf(b, "KF_KERNEL_%s(", name);
	for (uint32_t i = 0; i < k->nparam; i++)
		kf_buf_printf(b, "p%u, ", i);
	for (uint32_t i = 0; outs && i < k->nout; i++)
		kf_buf_printf(b, "o%u, ", i);
	kf_buf_puts(b, KX_KD_ARGS);
}

void kx_att_score_call(const kx *k, kf_buf *b) { helper_call(k, b, "score", false); }
void kx_att_scoreld_call(const kx *k, kf_buf *b) { helper_call(k, b, "scoreld", false); }
void kx_att_scorep_call(const kx *k, kf_buf *b) { helper_call(k, b, "scorep", false); }
void kx_att_out_call(const kx *k, kf_buf *b, bool pair) { helper_call(k, b, pair ? "out2" : "out", true); }
void kx_att_qpro_call(const kx *k, kf_buf *b) { helper_call(k, b, "qpro", false); }

/* The text of operand `a` of a prologue op: the chain (x) or a one-element
 * parameter or constant. */
static int scalar_text(kx *k, kf_vid v, kf_vid chain, const char *x, kf_buf *o)
{
	kf_nid d = kf_def(k->g, v);
	int p = kx_param(k, v);
	if (v == chain)
		kf_buf_puts(o, x);
	else if (p >= 0 && kx_numel(k, v) == 1)
		kx_load(o, kx_dt(k, v), "p%d[0]", p);
	else if (d != KF_NONE && kf_N(k->g, d)->op == KF_OP_CONST && kx_computed(k, v))
		kx_const_elem(k, d, "0", o);
	else
		return kx_att_decline(k, "a prologue op of q reads more than a scalar");
	return 0;
}

int kx_att_qpro_helper(kx *k, const kx_att *at)
{
	kf_graph *g = k->g;
	kf_buf h = {0};
	kx_att_helper_head(k, &h, "float", "qpro", false);
	kf_buf_puts(&h, "float x)\n{\n");
	for (int i = 0; i < at->q.npro; i++) {
		kf_nid n = at->q.pro[i];
		kf_vid chain;
		kf_att_q_op(g, n, &chain); /* the matrix operand (layout ops between are views) */
		kf_buf t[3] = {{0}, {0}, {0}}, e = {0};
		const char *a[3] = {"", "", ""};
		int rc = 0;
		for (uint32_t j = 0; j < kf_N(g, n)->nin && j < 3 && rc == 0; j++) {
			rc = scalar_text(k, kf_in(g, n, j), chain, "x", &t[j]);
			kf_buf_putc(&t[j], '\0');
			a[j] = t[j].p;
		}
		if (rc == 0)
			rc = kx_op_expr(k, n, a, &e);
		if (rc == 0)
			kf_buf_printf(&h, "  x = (float)(%.*s);\n", (int)e.n, e.p);
		for (int j = 0; j < 3; j++)
			kf_buf_free(&t[j]);
		kf_buf_free(&e);
		if (rc != 0) {
			kf_buf_free(&h);
			return -1;
		}
	}
	kf_buf_puts(&h, "  return x;\n}\n");
	kf_buf_put(&k->decl, h.p, h.n);
	kf_buf_free(&h);
	return 0;
}

/* x rounded to dtype t's precision, as text. */
static void round_to(kf_buf *o, kf_dtype t, const char *x)
{
	if (t == KF_F16)
		kf_buf_printf(o, "kf_h2f(kf_f2h(%s))", x);
	else if (t == KF_BF16)
		kf_buf_printf(o, "kf_b2f(kf_f2b(%s))", x);
	else
		kf_buf_puts(o, x);
}

/* The statements that make v, the stored value of output element x (the
 * second matmul's value in f32): rounded to the matmul's dtype, then
 * through each cast of the output chain; -1 on an op without a form. */
static int out_value(kx *k, const kx_att *at, const char *v, const char *x, kf_buf *h)
{
	kf_graph *g = k->g;
	const kf_att *a = &at->a;
	kf_buf r = {0};
	round_to(&r, kx_dt(k, kf_res(g, a->mm2, 0)), x);
	kf_buf_printf(h, "  float %s = %.*s;\n", v, (int)r.n, r.p);
	kf_buf_free(&r);
	for (int i = 0; i < a->out.nn; i++) {
		kf_nid n = a->out.n[i];
		if (kf_N(g, n)->op != KF_OP_CAST)
			continue;
		kf_buf e = {0};
		const char *arg[1] = {v};
		int rc = kx_op_expr(k, n, arg, &e);
		if (rc == 0)
			kf_buf_printf(h, "  %s = (float)(%.*s);\n", v, (int)e.n, e.p);
		kf_buf_free(&e);
		if (rc != 0)
			return -1;
	}
	return 0;
}

int kx_att_out_helper(kx *k, const kx_att *at, bool pair)
{
	kf_buf h = {0}, off = {0};
	kx_att_helper_head(k, &h, "void", pair ? "out2" : "out", true);
	kf_buf_printf(&h, "int z, int row, int col, float x%s)\n{\n", pair ? ", float y" : "");
	if (out_value(k, at, "v", "x", &h) != 0 || (pair && out_value(k, at, "w", "y", &h) != 0)) {
		kf_buf_free(&h);
		return -1;
	}
	kx_att_boff(k, at, &at->o, "z", &off);
	kf_buf_printf(&h, "  const long long i = %.*s + (long long)row * ", (int)off.n, off.p);
	kx_dimll(k, &h, at->ors, KX_ATT_S(k, at, ors));
	kf_buf_puts(&h, " + col;\n");
	kf_buf_free(&off);
	/* a pair of 2-byte elements at an even index: one 4-byte store */
	bool packed = pair && kf_dtype_size(at->odt) == 2 && at->ors % 2 == 0 && aligned(&at->o, 2, at->o.rank - 1);
	if (packed) {
		kf_buf_puts(&h, "  *(unsigned *)(o0 + i) = (unsigned)");
		kx_store(&h, at->odt, "v");
		kf_buf_puts(&h, " | (unsigned)");
		kx_store(&h, at->odt, "w");
		kf_buf_puts(&h, " << 16;\n}\n");
	} else {
		kf_buf_puts(&h, "  o0[i] = ");
		kx_store(&h, at->odt, "v");
		if (pair) {
			kf_buf_puts(&h, ";\n  o0[i + 1] = ");
			kx_store(&h, at->odt, "w");
		}
		kf_buf_puts(&h, ";\n}\n");
	}
	kf_buf_put(&k->decl, h.p, h.n);
	kf_buf_free(&h);
	return 0;
}

bool kx_att_out16_fits(const kx_att *at)
{
	/* whole 16-byte runs of columns: 2-byte elements, rows 8 elements
	 * apart, every stride but the columns' and the offset of 8 */
	return kf_dtype_size(at->odt) == 2 && at->ors % 8 == 0 && at->DV % 8 == 0 && aligned(&at->o, 8, at->o.rank - 1);
}

int kx_att_out16_helper(kx *k, const kx_att *at)
{
	if (!kx_att_out16_fits(at))
		return 1;
	kf_buf h = {0}, off = {0};
	kx_att_helper_head(k, &h, "unsigned", "outv", true);
	kf_buf_puts(&h, "int z, int row, int col, float x, float y)\n{\n  (void)z, (void)row, (void)col;\n");
	if (out_value(k, at, "v", "x", &h) != 0 || out_value(k, at, "w", "y", &h) != 0) {
		kf_buf_free(&h);
		return -1;
	}
	kf_buf_puts(&h, "  return (unsigned)");
	kx_store(&h, at->odt, "v");
	kf_buf_puts(&h, " | (unsigned)");
	kx_store(&h, at->odt, "w");
	kf_buf_puts(&h, " << 16;\n}\n");
	kx_att_helper_head(k, &h, "void", "out8", true);
	kf_buf_puts(&h, "int z, int row, int col, unsigned w0, unsigned w1, unsigned w2, unsigned w3)\n{\n");
	kx_att_boff(k, at, &at->o, "z", &off);
	kf_buf_printf(&h, "  const long long i = %.*s + (long long)row * ", (int)off.n, off.p);
	kx_dimll(k, &h, at->ors, KX_ATT_S(k, at, ors));
	kf_buf_puts(&h, " + col;\n");
	kf_buf_free(&off);
	/* the address's alignment (a sized plan's strides, the buffer's) is
	 * checked at run time: 2-byte stores where it is not 16 */
	kf_buf_puts(&h, "  if (!((unsigned long long)(o0 + i) & 15)) {\n    *(uint4 *)(o0 + i) = make_uint4(w0, w1, w2, w3);\n"
		       "  } else {\n    const unsigned w[4] = {w0, w1, w2, w3};\n#pragma unroll\n    for (int e = 0; e < 8; e++)\n"
		       "      ((unsigned short *)(o0 + i))[e] = (unsigned short)(w[e >> 1] >> ((e & 1) * 16));\n  }\n}\n");
	kf_buf_put(&k->decl, h.p, h.n);
	kf_buf_free(&h);
	return 0;
}

void kx_att_outv_call(const kx *k, kf_buf *b) { helper_call(k, b, "outv", true); }
void kx_att_out8_call(const kx *k, kf_buf *b) { helper_call(k, b, "out8", true); }

/* ---- the kernel ------------------------------------------------------------------- */

int kx_emit_attention(kx *k)
{
	kx_att at, pat;
	k->k->why[0] = '\0';
	int rc = analyse(k, &at);
	/* a sized plan: the same analysis at the probe's generic sizes */
	if (rc == 0 && k->dyn && k->dyn->probe && k->dyn->probe->nval == k->g->nval) {
		kx pk = *k;
		pk.g = (kf_graph *)k->dyn->probe;
		if (analyse(&pk, &pat) == 0)
			at.p = &pat;
		k->k->why[0] = '\0';
	}
	/* the Hopper kernel declares the helpers it needs itself (none for a
	 * scale it folds) */
	if (rc == 0)
		rc = kx_emit_attention_wgmma(k, &at);
	if (rc == 1 && (kx_att_score_helper(k, &at) != 0 || (at.q.npro && kx_att_qpro_helper(k, &at) != 0)))
		rc = -1;
	if (rc == 1)
		rc = kx_emit_attention_mma(k, &at);
	if (rc == 1)
		rc = kx_emit_attention_simt(k, &at);
	/* a body the kernels do not take runs op by op (no error was made) */
	return rc != 0 && k->k->why[0] ? 2 : rc;
}
