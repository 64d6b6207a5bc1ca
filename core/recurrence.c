/* recurrence.c: finding an unrolled recurrence (the analysis behind
 * the `persistent` pass, passes/recurrence.c, and the persistent kernel,
 * cuda/emit_persistent.c): the chain of matmuls over one weight, step 0's
 * cell, and each step as the image of the one before.  recurrence.h says
 * what a recurrence is.  Read only.  Mapping a step to the next follows
 * uses (linear); checking that the matmuls form a chain walks the block
 * once per step, O(steps x nodes): 16 ms for the 80-step LSTM example. */
#include <stdlib.h>
#include <string.h>
#include "recurrence.h"

/* ---- the analysis -------------------------------------------------------------- */

static bool is_mm(const kf_graph *g, kf_nid n)
{
	return n != KF_NONE && kf_N(g, n)->op == KF_OP_MATMUL && kf_vtype(g, kf_in(g, n, 0))->rank == 2 &&
	       kf_vtype(g, kf_in(g, n, 1))->rank == 2;
}

uint32_t kf_rec_candidates(kf_graph *g, kf_bid b, kf_vid *out, uint32_t max)
{
	uint32_t n = 0;
	kf_foreach_node(g, b, m) {
		if (!is_mm(g, m))
			continue;
		kf_vid R = kf_in(g, m, 1);
		uint32_t cnt = 0;
		kf_foreach_use(g, R, u) {
			kf_nid un = g->use[u].user;
			cnt += is_mm(g, un) && kf_N(g, un)->blk == b && u == kf_N(g, un)->in0 + 1;
		}
		bool seen = false;
		for (uint32_t i = 0; i < n && !seen; i++)
			seen = out[i] == R;
		if (cnt >= 2 && !seen && n < max)
			out[n++] = R;
	}
	return n;
}

void kf_rec_free(kf_rec *r)
{
	free(r->node);
	free(r->stepof);
	free(r->idx);
	free(r->sw);
	free(r->cls);
	free(r->esign);
	free(r->slot);
	free(r->init);
	free(r->sval);
	char why[sizeof r->why];
	memcpy(why, r->why, sizeof why);
	memset(r, 0, sizeof *r);
	memcpy(r->why, why, sizeof why);
}

void kf_rec_describe(const kf_graph *g, kf_nid n, char *out, size_t cap)
{
	const kf_node *x = kf_N(g, n);
	kf_sid nm = x->nres ? kf_V(g, x->res0)->name : 0;
	int line = 0, col = 0;
	if (x->loc.src != KF_NONE)
		kf_source_linecol(g->ctx, x->loc.src, x->loc.off, &line, &col);
	char at[300] = "";
	if (line > 0)
		snprintf(at, sizeof at, " (%s:%d:%d)", kf_source_name(g->ctx, x->loc.src), line, col);
	snprintf(out, cap, "'%s'%s%s%s", kf_op(g->ctx, x->op)->name, nm ? " %" : "", nm ? kf_str(g->ctx, nm) : "", at);
}

static int refuse(kf_rec *r, const char *fmt, const char *arg)
{
	snprintf(r->why, sizeof r->why, fmt, arg);
	kf_rec_free(r);
	return -1;
}

static uint32_t stepof_v(const kf_rec *r, kf_vid v)
{
	kf_nid d = kf_def(r->g, v);
	return d == KF_NONE || d >= r->nnode ? 0 : r->stepof[d];
}

bool kf_rec_attrs_eq(const kf_graph *g, kf_nid a, kf_nid b)
{
	const kf_node *x = kf_N(g, a), *y = kf_N(g, b);
	if (x->nattr != y->nattr)
		return false;
	for (uint32_t i = 0; i < x->nattr; i++)
		if (x->attr[i].key != y->attr[i].key || !kf_attrval_eq(&x->attr[i].v, &y->attr[i].v))
			return false;
	return true;
}

/* Two values every step may read as "the same": one value, or two
 * constants with one type and payload (an exporter's per-step copies). */
bool kf_rec_same_inv(const kf_graph *g, kf_vid a, kf_vid b)
{
	if (a == b)
		return true;
	kf_nid x = kf_def(g, a), y = kf_def(g, b);
	if (x == KF_NONE || y == KF_NONE || kf_N(g, x)->op != KF_OP_CONST || kf_N(g, y)->op != KF_OP_CONST ||
	    kf_V(g, a)->type != kf_V(g, b)->type)
		return false;
	const kf_const *p = kf_N(g, x)->cst, *q = kf_N(g, y)->cst;
	if (p->kind != q->kind || p->n != q->n || p->kind == KF_CONST_FILE)
		return p->kind == KF_CONST_FILE && q->kind == KF_CONST_FILE && p->path == q->path;
	bool fl = kf_dtype_is_float((kf_dtype)kf_vtype(g, a)->dtype);
	return fl ? memcmp(p->f, q->f, p->n * sizeof *p->f) == 0 : memcmp(p->i, q->i, p->n * sizeof *p->i) == 0;
}

int64_t kf_rec_first_int(const kf_graph *g, kf_nid n, const char *key, int64_t dflt)
{
	int64_t v[KF_MAX_RANK];
	int k = kf_attr_ints(g, n, key, v, KF_MAX_RANK);
	return k == 1 ? v[0] : k < 0 ? dflt : INT64_MIN;
}

bool kf_rec_axis_slice(const kf_graph *g, kf_nid n, int64_t *axis, int64_t *start, int64_t *len)
{
	if (n == KF_NONE || kf_N(g, n)->op != KF_OP_SLICE)
		return false;
	const kf_type *t = kf_vtype(g, kf_in(g, n, 0));
	int64_t ax = kf_rec_first_int(g, n, "axes", 0), s = kf_rec_first_int(g, n, "starts", -1);
	int64_t e = kf_rec_first_int(g, n, "ends", -1);
	if (ax < 0 && ax != INT64_MIN)
		ax += t->rank;
	if (ax < 0 || ax >= t->rank || kf_rec_first_int(g, n, "steps", 1) != 1 || s < 0 || t->dim[ax] < 0)
		return false;
	if (e > t->dim[ax])
		e = t->dim[ax];
	if (e <= s)
		return false;
	*axis = ax;
	*start = s;
	*len = e - s;
	return true;
}

bool kf_rec_same_ext(const kf_graph *g, const kf_rec *r, kf_vid a, kf_vid b, int64_t d, int *sign)
{
	kf_nid x = kf_def(g, a), y = kf_def(g, b);
	if (a == b || x == KF_NONE || y == KF_NONE || stepof_v(r, a) || stepof_v(r, b))
		return false;
	const kf_node *p = kf_N(g, x), *q = kf_N(g, y);
	if (p->op != q->op || p->nin != q->nin || p->nres != q->nres || kf_V(g, a)->idx != kf_V(g, b)->idx ||
	    kf_V(g, a)->type != kf_V(g, b)->type)
		return false;
	int64_t ax, s, n, ax2, s2, n2;
	if (kf_in(g, x, 0) == kf_in(g, y, 0) && kf_rec_axis_slice(g, x, &ax, &s, &n) &&
	    kf_rec_axis_slice(g, y, &ax2, &s2, &n2) && ax == ax2 && n == n2 && s != s2) {
		/* the base: the same slice d of its lengths on, in one direction */
		int sg = s2 == s + d * n ? 1 : s2 == s - d * n ? -1 : 0;
		if (sg == 0 || (*sign && *sign != sg))
			return false;
		*sign = sg;
		return true;
	}
	if (!kf_rec_attrs_eq(g, x, y) || p->op == KF_OP_CONST || p->op == KF_OP_FUSION)
		return false;
	bool varies = false;
	for (uint32_t i = 0; i < p->nin; i++) {
		kf_vid u = kf_in(g, x, i), v = kf_in(g, y, i);
		if (kf_rec_same_inv(g, u, v))
			continue;
		if (!kf_rec_same_ext(g, r, u, v, d, sign))
			return false;
		varies = true;
	}
	return varies;
}

/* Marks the nodes of block b that depend on node `from` (fwd), or that
 * `from` depends on (back); block order is topological. */
static void reach(const kf_graph *g, kf_bid b, kf_nid from, uint8_t *mark, bool fwd)
{
	mark[from] = 1;
	if (fwd) {
		for (kf_nid n = kf_N(g, from)->next; n != KF_NONE; n = kf_N(g, n)->next)
			for (uint32_t i = 0; i < kf_N(g, n)->nin && !mark[n]; i++) {
				kf_nid d = kf_def(g, kf_in(g, n, i));
				mark[n] = d != KF_NONE && mark[d];
			}
		return;
	}
	for (kf_nid n = from; n != KF_NONE; n = kf_N(g, n)->prev)
		if (mark[n])
			for (uint32_t i = 0; i < kf_N(g, n)->nin; i++) {
				kf_nid d = kf_def(g, kf_in(g, n, i));
				if (d != KF_NONE && kf_N(g, d)->blk == b)
					mark[d] = 1;
			}
}

/* Checks operand j of step k's node n (step 0's node n0) against operand j
 * of its candidate image m in step k+1; map gives step k's images. */
static bool operand_ok(kf_rec *r, uint32_t k, kf_nid n, kf_nid m, uint32_t msw, uint32_t j, const kf_nid *img)
{
	kf_graph *g = r->g;
	kf_vid a = kf_rec_in(r, n, j), b = kf_in(g, m, j ^ msw);
	uint32_t i0 = r->idx[n], at = i0 * KF_REC_MAXIN + j;
	uint32_t sa = stepof_v(r, a);
	if (k == 0 && r->cls[at] == 0xff) { /* step 0 sets the class */
		if (sa == 1) {
			r->cls[at] = KF_REC_INTERNAL;
		} else if (kf_rec_same_inv(g, a, b)) {
			r->cls[at] = KF_REC_INV;
		} else if (stepof_v(r, b) == 1) {
			/* a slot is its (before, after) pair: one initial value may
			 * start two states (zeros for h and c, after cse) */
			uint32_t s = 0;
			while (s < r->nslot && !(r->init[s] == a && r->sval[s] == b))
				s++;
			if (s == r->nslot) {
				r->init[s] = a;
				r->sval[s] = b;
				r->nslot++;
			}
			r->cls[at] = KF_REC_SLOT;
			r->slot[at] = (uint16_t)s;
		} else {
			r->cls[at] = KF_REC_EXT;
		}
	}
	bool ok;
	const char *how = "";
	switch (r->cls[at]) {
	case KF_REC_INTERNAL:
		ok = sa == k + 1 && img[kf_def(g, a)] != KF_NONE && b == kf_res(g, img[kf_def(g, a)], kf_V(g, a)->idx);
		how = "a value of its own step";
		break;
	case KF_REC_INV:
		ok = kf_rec_same_inv(g, a, b);
		how = "the value every step reads";
		break;
	case KF_REC_SLOT: {
		uint32_t s = r->slot[at];
		kf_vid want_a = k == 0 ? r->init[s] : r->sval[(k - 1) * r->nslot + s];
		ok = a == want_a && b == r->sval[k * r->nslot + s];
		how = "the state the step before left";
		break;
	}
	default: {
		/* every step moves in the direction step 0 did */
		int sg = r->esign[at];
		ok = kf_rec_same_ext(g, r, a, b, 1, &sg);
		if (ok)
			r->esign[at] = (int8_t)sg;
		how = "the step before's input moved by its length (one way for every step)";
		break;
	}
	}
	if (!ok) {
		/* for the message when no candidate matches */
		char what[200] = "";
		kf_nid d = kf_def(g, b);
		int o = 0;
		if (kf_V(g, b)->name)
			o = snprintf(what, sizeof what, " %%%s", kf_str(g->ctx, kf_V(g, b)->name));
		if (d != KF_NONE && o >= 0 && (size_t)o < sizeof what)
			snprintf(what + o, sizeof what - (size_t)o, " (a '%s')", kf_op(g->ctx, kf_N(g, d)->op)->name);
		snprintf(r->miss, sizeof r->miss, "its operand %u%s is not %s", j ^ msw, what, how);
	}
	return ok;
}

/* Operands of m in step 0's order: swapped (msw 1) for a commutative op
 * of two when that is how m matches (canonicalize orders them by value
 * id, so a step may read h first where step 0 read its constant h0 last). */
static bool node_ok1(kf_rec *r, uint32_t k, kf_nid n, kf_nid m, uint32_t msw, const kf_nid *img)
{
	kf_graph *g = r->g;
	const kf_node *x = kf_N(g, n);
	/* step 0 classifies operands while it matches: a candidate that fails
	 * must leave no classes (or slots) behind */
	uint32_t at = r->idx[n] * KF_REC_MAXIN, nslot = r->nslot;
	uint8_t cls[KF_REC_MAXIN];
	int8_t sg[KF_REC_MAXIN];
	memcpy(cls, r->cls + at, sizeof cls);
	memcpy(sg, r->esign + at, sizeof sg);
	for (uint32_t j = 0; j < x->nin; j++)
		if (!operand_ok(r, k, n, m, msw, j, img)) {
			memcpy(r->cls + at, cls, sizeof cls);
			memcpy(r->esign + at, sg, sizeof sg);
			r->nslot = nslot;
			return false;
		}
	r->sw[m] = (uint8_t)msw;
	return true;
}

static bool node_ok(kf_rec *r, uint32_t k, kf_nid n, kf_nid m, const kf_nid *img)
{
	kf_graph *g = r->g;
	const kf_node *x = kf_N(g, n), *y = kf_N(g, m);
	if (m >= r->nnode || r->stepof[m] || y->blk != r->blk)
		return false;
	const char *diff = x->op != y->op ? "another op" : x->nin != y->nin || x->nres != y->nres ? "other operands"
			   : !kf_rec_attrs_eq(g, n, m)				       ? "other attributes"
										       : NULL;
	for (uint32_t i = 0; i < x->nres && !diff; i++)
		if (kf_V(g, x->res0 + i)->type != kf_V(g, y->res0 + i)->type)
			diff = "another type";
	if (diff) {
		snprintf(r->miss, sizeof r->miss, "%s", diff);
		return false;
	}
	if (node_ok1(r, k, n, m, 0, img))
		return true;
	/* the reason of the operands in their order is the one to tell */
	char miss[sizeof r->miss];
	memcpy(miss, r->miss, sizeof miss);
	if (x->nin == 2 && (kf_op(g->ctx, x->op)->flags & KF_OPF_COMMUTATIVE) && node_ok1(r, k, n, m, 1, img))
		return true;
	memcpy(r->miss, miss, sizeof miss);
	return false;
}

/* Finds step k+1 as the image of step k. */
static int map_step(kf_rec *r, uint32_t k, kf_nid *img)
{
	kf_graph *g = r->g;
	for (uint32_t i = 0; i < r->nper; i++) {
		kf_nid n = r->node[k * r->nper + i], m = KF_NONE;
		if (i == 0) {
			m = KF_NONE; /* the matmul: its image is known */
			for (kf_nid q = kf_N(g, n)->next; q != KF_NONE && m == KF_NONE; q = kf_N(g, q)->next)
				if (is_mm(g, q) && kf_in(g, q, 1) == r->R)
					m = q;
			if (m == KF_NONE || !node_ok(r, k, n, m, img)) {
				char d[320];
				kf_rec_describe(g, m == KF_NONE ? n : m, d, sizeof d);
				snprintf(r->why, sizeof r->why, "step %u's matmul %s does not read step %u's state as step %u's "
					 "read the one before", k + 2, d, k + 1, k + 1);
				kf_rec_free(r);
				return -1;
			}
		} else {
			/* candidates: users of an internal operand's image */
			r->miss[0] = 0;
			for (uint32_t j = 0; j < kf_N(g, n)->nin && m == KF_NONE; j++) {
				kf_vid a = kf_in(g, n, j);
				if (stepof_v(r, a) != k + 1 || img[kf_def(g, a)] == KF_NONE)
					continue;
				kf_vid ia = kf_res(g, img[kf_def(g, a)], kf_V(g, a)->idx);
				kf_foreach_use(g, ia, u)
					if (node_ok(r, k, n, g->use[u].user, img)) {
						m = g->use[u].user;
						break;
					}
			}
			if (m == KF_NONE && k + 2 == r->T && k > 0) {
				/* the last step may lack what only a next step
				 * would read (a masked state nobody outputs: dead
				 * code); checked once the step is mapped */
				r->node[(k + 1) * r->nper + i] = KF_NONE;
				continue;
			}
			if (m == KF_NONE) {
				/* what the next step has where the counterpart would be:
				 * a user of an operand's image */
				char d[320], e[700] = "";
				kf_rec_describe(g, n, d, sizeof d);
				for (uint32_t j = 0; j < kf_N(g, n)->nin && !e[0]; j++) {
					kf_vid a = kf_in(g, n, j);
					if (stepof_v(r, a) != k + 1 || img[kf_def(g, a)] == KF_NONE)
						continue;
					kf_foreach_use(g, kf_res(g, img[kf_def(g, a)], kf_V(g, a)->idx), u) {
						kf_nid un = g->use[u].user;
						if (!r->stepof[un] && kf_N(g, un)->blk == r->blk) {
							char x[300];
							kf_rec_describe(g, un, x, sizeof x);
							snprintf(e, sizeof e, " (it has %s there%s%s)", x, r->miss[0] ? ": " : "",
								 r->miss);
							break;
						}
					}
				}
				snprintf(r->why, sizeof r->why, "step %u has no counterpart of step %u's %s%s", k + 2, k + 1, d, e);
				kf_rec_free(r);
				return -1;
			}
		}
		img[n] = m;
		r->stepof[m] = k + 2;
		r->idx[m] = i;
		r->node[(k + 1) * r->nper + i] = m;
	}
	for (uint32_t s = 0; s < r->nslot; s++) {
		kf_vid v = r->sval[k * r->nslot + s];
		kf_nid d = img[kf_def(g, v)];
		r->sval[(k + 1) * r->nslot + s] = d == KF_NONE ? KF_NONE : kf_res(g, d, kf_V(g, v)->idx);
	}
	/* a node the last step lacks may be read only by the steps */
	for (uint32_t i = 0; k + 2 == r->T && i < r->nper; i++)
		for (uint32_t q = 0; q <= k && r->node[(k + 1) * r->nper + i] == KF_NONE; q++)
			kf_foreach_use(g, kf_res(g, r->node[q * r->nper + i], 0), u) {
				kf_nid un = g->use[u].user;
				if (un >= r->nnode || !r->stepof[un]) {
					char d[320];
					kf_rec_describe(g, r->node[k * r->nper + i], d, sizeof d);
					snprintf(r->why, sizeof r->why, "step %u has no counterpart of step %u's %s, whose value "
						 "is read after the steps", k + 2, k + 1, d);
					kf_rec_free(r);
					return -1;
				}
			}
	return 0;
}

/* The matmuls over R in block order, each step's depending on the one
 * before. */
static int chain(kf_rec *r, uint8_t *mark)
{
	kf_graph *g = r->g;
	uint32_t n = 0;
	kf_foreach_node(g, r->blk, m)
		n += is_mm(g, m) && kf_in(g, m, 1) == r->R;
	kf_nid *mm = malloc((n + 1) * sizeof *mm);
	n = 0;
	kf_foreach_node(g, r->blk, m)
		if (is_mm(g, m) && kf_in(g, m, 1) == r->R)
			mm[n++] = m;
	r->T = n;
	for (uint32_t k = 0; k + 1 < n; k++) {
		memset(mark, 0, r->nnode);
		reach(g, r->blk, mm[k], mark, true);
		if (!mark[mm[k + 1]]) {
			free(mm);
			return refuse(r, "the matmuls over %s do not form one chain (a step does not read the one before)",
				      "the weight");
		}
	}
	r->node = calloc(3, sizeof *r->node); /* m0, m1, m2; step0() replaces it */
	r->node[0] = mm[0];
	r->node[1] = n > 1 ? mm[1] : KF_NONE;
	r->node[2] = n > 2 ? mm[2] : KF_NONE;
	free(mm);
	return 0;
}

/* Step 0: depends on mm[0], not on mm[1], and mm[1] or mm[2] depends on
 * it (a state only the next step's cell reads, not its matmul: a masked
 * LSTM's c). */
static int step0(kf_rec *r, uint8_t *fwd0, uint8_t *fwd1, uint8_t *back1)
{
	kf_graph *g = r->g;
	kf_nid m0 = r->node[0], m1 = r->node[1], m2 = r->node[2];
	memset(fwd0, 0, r->nnode);
	memset(fwd1, 0, r->nnode);
	memset(back1, 0, r->nnode);
	reach(g, r->blk, m0, fwd0, true);
	reach(g, r->blk, m1, fwd1, true);
	reach(g, r->blk, m1, back1, false);
	if (m2 != KF_NONE)
		reach(g, r->blk, m2, back1, false);
	uint32_t cnt = 0;
	for (kf_nid n = m0; n != KF_NONE; n = kf_N(g, n)->next)
		cnt += fwd0[n] && !fwd1[n] && back1[n];
	free(r->node);
	r->nper = cnt;
	r->node = malloc((size_t)r->T * cnt * sizeof *r->node);
	cnt = 0;
	for (kf_nid n = m0; n != KF_NONE; n = kf_N(g, n)->next)
		if (fwd0[n] && !fwd1[n] && back1[n]) {
			const kf_opinfo *oi = kf_op(g->ctx, kf_N(g, n)->op);
			bool ok = n == m0 || oi->trait == KF_TRAIT_ELEMENTWISE || oi->trait == KF_TRAIT_BROADCAST ||
				  kf_N(g, n)->op == KF_OP_SLICE || kf_N(g, n)->op == KF_OP_RESHAPE;
			if (!ok || kf_N(g, n)->nin > KF_REC_MAXIN || kf_N(g, n)->nres != 1) {
				char d[320];
				kf_rec_describe(g, n, d, sizeof d);
				if (kf_N(g, n)->op == KF_OP_MATMUL)
					return refuse(r, "step 1 holds a second matmul, %s: a persistent kernel takes one "
						      "recurrent matmul a step (an ONNX GRU with linear_before_reset = 0 "
						      "has two; PyTorch's GRU exports the other form)", d);
				return refuse(r, "step 1 holds %s; a step may hold one matmul and element-wise ops, slices "
					      "and reshapes", d);
			}
			r->stepof[n] = 1;
			r->idx[n] = cnt;
			r->node[cnt++] = n;
		}
	/* outside operands of the steps must not depend on the chain, or the
	 * fused node would close a cycle through them */
	for (uint32_t i = 0; i < cnt; i++)
		for (uint32_t j = 0; j < kf_N(g, r->node[i])->nin; j++) {
			kf_nid d = kf_def(g, kf_in(g, r->node[i], j));
			if (d != KF_NONE && kf_N(g, d)->blk == r->blk && !r->stepof[d] && fwd0[d] && d != m0) {
				char dd[320];
				kf_rec_describe(g, d, dd, sizeof dd);
				return refuse(r, "step 1 reads %s, which is computed outside the steps from them", dd);
			}
		}
	return 0;
}

int kf_rec_analyze(kf_graph *g, kf_bid b, kf_vid R, kf_rec *r)
{
	memset(r, 0, sizeof *r);
	r->g = g;
	r->blk = b;
	r->R = R;
	r->nnode = g->nnode;
	r->stepof = calloc(r->nnode + 1, sizeof *r->stepof);
	r->idx = calloc(r->nnode + 1, sizeof *r->idx);
	r->sw = calloc(r->nnode + 1, 1);
	uint8_t *m = calloc(3 * (size_t)r->nnode + 1, 1);
	int rc = chain(r, m);
	if (rc == 0 && r->T < 2)
		rc = refuse(r, "%s", "fewer than 2 steps");
	if (rc == 0)
		rc = step0(r, m, m + r->nnode, m + 2 * r->nnode);
	free(m);
	if (rc != 0)
		return -1;
	r->cls = malloc((size_t)r->nper * KF_REC_MAXIN);
	memset(r->cls, 0xff, (size_t)r->nper * KF_REC_MAXIN);
	r->esign = calloc((size_t)r->nper * KF_REC_MAXIN, 1);
	r->slot = calloc((size_t)r->nper * KF_REC_MAXIN, sizeof *r->slot);
	r->init = calloc((size_t)r->nper * KF_REC_MAXIN + 1, sizeof *r->init);
	r->sval = calloc((size_t)r->T * r->nper * KF_REC_MAXIN + 1, sizeof *r->sval);
	kf_nid *img = malloc((r->nnode + 1) * sizeof *img);
	for (uint32_t k = 0; k + 1 < r->T; k++) {
		for (uint32_t i = 0; i < r->nnode; i++)
			img[i] = KF_NONE;
		if (map_step(r, k, img) != 0) {
			free(img);
			return -1;
		}
	}
	free(img);
	if (r->nslot == 0)
		return refuse(r, "%s", "the steps carry no state");
	/* the state the matmul reads must be a slot: else it is not a recurrence */
	if (r->cls[0] != KF_REC_SLOT)
		return refuse(r, "%s", "the matmul does not read the step before's state");
	return 0;
}

