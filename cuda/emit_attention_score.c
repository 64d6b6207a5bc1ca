/* emit_attention_score.c: the attention kernels' score chain as a device
 * helper (emit_attention.c's analysis found it: the element-wise ops from
 * the first product's scores to the softmax): KF_KERNEL_score(..., z, row,
 * col, s) gives the score the softmax reads, masks and scales applied; a
 * causal mask in the pass's form is left to the kernel; finite huge
 * negatives (finfo.min masks) clamped to -1e38 (kx_att huge).  Split
 * (kx_att_score_split): the chain's values that read memory but not the
 * scores (a mask's rows) go into slots a tile loads once (scoreld), the
 * rest runs per score (scorep).
 */
#include <string.h>
#include "emit_att_int.h"

/* The score helper's working state: value -> name of its text. */
typedef struct sh {
	kx *k;
	const kx_att *at;
	kf_buf *h;
	kf_vid v[256];
	char name[256][16];
	int n, nx;
	/* split (kx_att_score_split): the values that read memory but not the
	 * scores go to the loads helper's state ld, each as a slot l<i> */
	struct sh *ld;
	kx_att_pre *pre;
} sh;

static const char *sname(sh *s, kf_vid v)
{
	for (int i = 0; i < s->n; i++)
		if (s->v[i] == v)
			return s->name[i];
	return NULL;
}

/* The coordinate iota node d (of the scores' shape S, batch dims OB, their
 * symbolic forms sOB) gives at (z, row, col). */
static void iota_at(kx *k, kf_nid d, const kf_type *S, const kf_type *OB, const kf_type *sOB, kf_buf *e)
{
	const kf_type *t = kf_vtype(k->g, kf_res(k->g, d, 0));
	int ax = (int)kf_attr_int(k->g, d, "axis", 0);
	if (ax < 0)
		ax += t->rank;
	int sd = S->rank - t->rank + ax;
	if (t->dim[ax] == 1) {
		kf_buf_puts(e, "0");
	} else if (sd == S->rank - 1) {
		kf_buf_puts(e, "col");
	} else if (sd == S->rank - 2) {
		kf_buf_puts(e, "row");
	} else {
		kx_batch_coord(k, OB, sOB, sd, e);
	}
}

/* Whether v reads the scores (dep) or a parameter (!dep): what it is made
 * of, through computed ops.  A walk past *work steps (a chain reusing its
 * values, walked as a tree) answers "yes" for the scores, "no" for a
 * parameter: no slot either way. */
static bool reads(sh *s, kf_vid v, bool dep, int *work)
{
	kx *k = s->k;
	kf_nid d = kf_def(k->g, v);
	if (--*work < 0)
		return dep;
	if (v == s->v[0] || (s->at->causal && d == s->at->cnode))
		return dep;
	if (kx_param(k, v) >= 0)
		return !dep;
	if (d == KF_NONE || !kx_computed(k, v) || kf_N(k->g, d)->op == KF_OP_CONST || kf_N(k->g, d)->op == KF_OP_IOTA)
		return false;
	for (uint32_t i = 0; i < kf_N(k->g, d)->nin; i++)
		if (reads(s, kf_in(k->g, d, i), dep, work))
			return true;
	return *work < 0 && dep;
}

/* v reads memory and not the scores: worth a slot. */
static bool slotted(sh *s, kf_vid v)
{
	int w1 = 1024, w2 = 1024;
	return reads(s, v, false, &w1) && !reads(s, v, true, &w2);
}

static const char *sval(sh *s, kf_vid v, int depth);

static const char *named(sh *s, kf_vid v, const char *fmt, int i)
{
	if (s->n == 256) {
		kx_att_decline(s->k, "the score chain is too long");
		return NULL;
	}
	int id = s->n++;
	s->v[id] = v;
	snprintf(s->name[id], sizeof s->name[id], fmt, i);
	return s->name[id];
}

/* v, which reads memory but not the scores, computed by the loads helper
 * into a slot of its own (the kernel loads it ahead of the scores); NULL
 * and nothing done when the slots are full. */
static const char *slot(sh *s, kf_vid v, int depth)
{
	kx_att_pre *pre = s->pre;
	const kf_type *t = kf_vtype(s->k->g, v);
	/* one value per row (or per head) is two loads a tile, kept in
	 * registers by the compiler: not worth a slot */
	if (pre->n == KX_ATT_MAXPRE || t->rank == 0 || t->dim[t->rank - 1] == 1)
		return NULL;
	const char *x = sval(s->ld, v, depth);
	if (!x)
		return NULL;
	int i = pre->n++;
	pre->dt[i] = kx_dt(s->k, v);
	/* a value over keys only ([.., 1, Tk]) is the same for both rows */
	pre->rowinv[i] = t->rank < 2 || t->dim[t->rank - 2] == 1;
	kf_buf_printf(s->ld->h, "  l%d = %s;\n", i, x);
	return named(s, v, "l%d", i);
}

/* Whether every value v needs that is read at a column (its last dim is
 * not 1) is a kernel input: one column read up to `past` elements after
 * its tensor's end stays within KF_EMIT_READ_PAST.  An embedded constant
 * so read is not (its array ends where it ends). */
static bool reads_past(const kx *k, const kx_att *at, kf_vid v, int past, int depth)
{
	kf_graph *g = k->g;
	kf_nid d = kf_def(g, v);
	const kf_type *t = kf_vtype(g, v);
	bool col = t->rank && t->dim[t->rank - 1] != 1;
	if (v == kf_res(g, at->a.mm1, 0) || (at->causal && d == at->cnode))
		return true;
	if (kx_param(k, v) >= 0)
		return !col || (int64_t)past * kf_dtype_size((kf_dtype)t->dtype) <= KF_EMIT_READ_PAST;
	if (d == KF_NONE || depth > 64)
		return false;
	int op = kf_N(g, d)->op;
	if (op == KF_OP_CONST)
		return !col;
	if (op == KF_OP_IOTA)
		return true;
	for (uint32_t i = 0; i < kf_N(g, d)->nin; i++)
		if (!reads_past(k, at, kf_in(g, d, i), past, depth + 1))
			return false;
	return true;
}

bool kx_att_cols_past(const kx *k, const kx_att *at, int bn)
{
	const kf_att_chain *c = &at->a.score;
	for (int i = 0; i < c->nn; i++)
		if (!reads_past(k, at, kf_res(k->g, c->n[i], 0), bn - 1, 0))
			return false;
	return true;
}

/* Emits v (and what it needs) at (z, row, col) of the scores; its name. */
static const char *sval(sh *s, kf_vid v, int depth)
{
	kx *k = s->k;
	kf_graph *g = k->g;
	const char *nm = sname(s, v);
	if (nm)
		return nm;
	if (depth > 64) {
		kx_att_decline(k, "the score chain is too deep");
		return NULL;
	}
	if (s->ld && slotted(s, v) && (nm = slot(s, v, depth)))
		return nm;
	const kf_type *S = kf_vtype(g, kf_res(g, s->at->a.mm1, 0));
	kf_type OB = s->at->a.B;
	/* the batch dims' symbolic forms, through the probe's analysis */
	kf_type sOB = s->at->p && s->at->p->a.B.rank == OB.rank ? kx_ptype(k, &s->at->p->a.B) : OB;
	kf_dtype dt = kx_dt(k, v);
	kf_nid d = kf_def(g, v);
	kf_buf e = {0};
	int p = kx_param(k, v);
	if (p >= 0 || (d != KF_NONE && kf_N(g, d)->op == KF_OP_CONST)) {
		kf_buf ix = {0};
		kx_bidx(k, &OB, &sOB, true, true, kf_vtype(g, v), kx_stype(k, v), &ix);
		kf_buf_putc(&ix, '\0');
		if (p >= 0) {
			kf_buf_printf(s->h, "  const long long x%d = %s;\n", s->nx, ix.p);
			kx_load(&e, dt, "p%d[x%d]", p, s->nx++);
		} else {
			kx_const_elem(k, d, ix.p, &e);
		}
		kf_buf_free(&ix);
	} else if (d != KF_NONE && kf_N(g, d)->op == KF_OP_IOTA) {
		iota_at(k, d, S, &OB, &sOB, &e);
	} else if (d != KF_NONE && kx_computed(k, v)) {
		const kf_node *x = kf_N(g, d);
		const char *a[3] = {"", "", ""};
		if (x->nin > 3) {
			kx_att_decline(k, "an op of the score chain has more than three operands");
			return NULL;
		}
		for (uint32_t i = 0; i < x->nin; i++)
			if (!(a[i] = sval(s, kf_in(g, d, i), depth + 1)))
				return NULL;
		if (kx_op_expr(k, d, a, &e) != 0) {
			kf_buf_free(&e);
			return NULL;
		}
	} else {
		kx_att_decline(k, "the score chain reads a value it cannot compute");
		return NULL;
	}
	/* named after its operands, which come first */
	if (!(nm = named(s, v, "e%d", s->n))) {
		kf_buf_free(&e);
		return NULL;
	}
	kf_buf_printf(s->h, "  const %s %s = %.*s;\n", kx_ct(dt), nm, (int)e.n, e.p);
	kf_buf_free(&e);
	return nm;
}

/* The score chain's text into body (s's state), its value's name; NULL
 * on failure. */
static const char *score_body(sh *s)
{
	kx *k = s->k;
	const kx_att *at = s->at;
	const kf_att *a = &at->a;
	kf_graph *g = k->g;
	s->v[0] = kf_res(g, a->mm1, 0);
	snprintf(s->name[0], sizeof s->name[0], "s");
	s->n = 1;
	const char *last = "s";
	k->keep16 = true; /* scores stay f32 through the chain's casts, as in flash attention */
	for (int i = 0; i < a->score.nn && last; i++) {
		kf_nid n = a->score.n[i];
		if (at->causal && n == at->cnode) {
			/* the kernel drops the masked columns itself */
			s->v[s->n] = kf_res(g, n, 0);
			snprintf(s->name[s->n++], sizeof s->name[0], "%s", last);
			continue;
		}
		last = sval(s, kf_res(g, n, 0), 0);
	}
	k->keep16 = false;
	if (!last)
		return NULL;
	/* A mask of finite huge negatives (finfo.min, as HF models fill) times
	 * log2(e) and the scale overflows to -inf in the exponent, where the
	 * running maximum of a slice of keys all masked then gives -inf - -inf
	 * (NaN: found by emulating BERT with padding).  Such scores become
	 * -1e38, still weightless beside any real score, and equal to each
	 * other, so that a row masked whole averages v as PyTorch's softmax
	 * does; -inf and NaN stay what they are (at->huge says where). */
	if (at->huge)
		kf_buf_printf(s->h, "  const float r = (float)%s;\n  return r < -1e38f && r > -KF_INF ? -1e38f : r;\n}\n", last);
	else
		kf_buf_printf(s->h, "  return (float)%s;\n}\n", last);
	return last;
}

int kx_att_score_helper(kx *k, const kx_att *at)
{
	kf_buf h = {0};
	sh s = {.k = k, .at = at, .h = &h};
	kx_att_helper_head(k, &h, "float", "score", false);
	kf_buf_puts(&h, "int z, int row, int col, float s)\n{\n  (void)z; (void)row; (void)col;\n");
	int rc = score_body(&s) ? 0 : -1;
	if (rc == 0)
		kf_buf_put(&k->decl, h.p, h.n);
	kf_buf_free(&h);
	return rc;
}

/* The slots' parameters: ", T0 l0, T1 l1" (ref: "T0 &l0"). */
static void slot_params(kf_buf *h, const kx_att_pre *pre, bool ref)
{
	for (int i = 0; i < pre->n; i++)
		kf_buf_printf(h, ", %s %sl%d", kx_ct(pre->dt[i]), ref ? "&" : "", i);
	kf_buf_puts(h, ")\n{\n  (void)z; (void)row; (void)col;\n");
}

int kx_att_score_split(kx *k, const kx_att *at, kx_att_pre *pre, kf_buf *out)
{
	kf_buf body = {0}, lbody = {0}, h = {0};
	*pre = (kx_att_pre){0};
	sh l = {.k = k, .at = at, .h = &lbody};
	sh s = {.k = k, .at = at, .h = &body, .ld = &l, .pre = pre};
	l.v[0] = kf_res(k->g, at->a.mm1, 0); /* never met: the loads read no scores */
	snprintf(l.name[0], sizeof l.name[0], "s");
	l.n = 1;
	int rc = score_body(&s) ? 0 : -1;
	if (rc == 0 && pre->n) {
		kx_att_helper_head(k, &h, "void", "scoreld", false);
		kf_buf_puts(&h, "int z, int row, int col");
		slot_params(&h, pre, true);
		kf_buf_put(&h, lbody.p, lbody.n);
		kf_buf_puts(&h, "}\n");
		kx_att_helper_head(k, &h, "float", "scorep", false);
		kf_buf_puts(&h, "int z, int row, int col, float s");
		slot_params(&h, pre, false);
		kf_buf_put(&h, body.p, body.n);
		kf_buf_put(out, h.p, h.n);
	}
	kf_buf_free(&body);
	kf_buf_free(&lbody);
	kf_buf_free(&h);
	return rc;
}
