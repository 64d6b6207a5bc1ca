/* recurrence.c: the `persistent` pass: an unrolled recurrence (an LSTM's or
 * GRU's steps written out) becomes one `fusion {kind = "persistent"}` node
 * whose body is the steps themselves, with the input projections of all
 * steps hoisted out of it into one matmul over the whole sequence.
 *
 * requires: a verified graph, exact use lists; works on the top level.
 * keeps: the values the graph computes (the body is what it replaced; the
 * hoisted projection computes the same rows); breaks nothing else, though
 * nodes are re-ordered (topologically, stable) around the new node.
 * The analysis (kf_rec_*, core/recurrence.c) is shared with
 * cuda/emit_persistent.c, which finds the same chain again in the
 * fusion body.  docs/persistent.md. */
#include <stdlib.h>
#include <string.h>
#include "recurrence_int.h"

/* ---- the rewrite ------------------------------------------------------------------ */

kf_vid kf_rw_new1(kf_graph *g, kf_bid b, kf_nid before, int op, const kf_vid *in, uint32_t nin, kf_tid t)
{
	kf_nid n = kf_node_new(g, b, before, op, in, nin, &t, 1);
	return kf_res(g, n, 0);
}

void kf_rw_set_ints(kf_graph *g, kf_nid n, const char *key, const int64_t *v, int k)
{
	kf_attrval *it = kf_alloc(&g->arena, (size_t)k * sizeof *it);
	for (int i = 0; i < k; i++)
		it[i] = (kf_attrval){.kind = KF_ATTR_INT, .i = v[i]};
	kf_node_set_attr(g, n, kf_intern_cstr(g->ctx, key), (kf_attrval){.kind = KF_ATTR_LIST, .n = (uint32_t)k, .list = it});
}

bool kf_rw_retype(kf_graph *g, kf_nid n)
{
	kf_type t;
	char err[200];
	if (kf_infer(g, n, &t, 1, err, sizeof err) != 1)
		return false;
	kf_V(g, kf_res(g, n, 0))->type = kf_type_intern(g->ctx, &t);
	return true;
}

kf_vid kf_rw_rows(kf_graph *g, kf_bid b, kf_nid before, kf_vid v, int64_t lo, int64_t n)
{
	kf_type t = *kf_vtype(g, v);
	t.dim[0] = n;
	kf_vid s = kf_rw_new1(g, b, before, KF_OP_SLICE, &v, 1, kf_type_intern(g->ctx, &t));
	int64_t a = 0, e = lo + n;
	kf_rw_set_ints(g, kf_def(g, s), "axes", &a, 1);
	kf_rw_set_ints(g, kf_def(g, s), "starts", &lo, 1);
	kf_rw_set_ints(g, kf_def(g, s), "ends", &e, 1);
	return s;
}

/* The body value that outer value v is read as: an argument (added on
 * first use), a copy of a splat constant, or the transpose of the
 * recurrent weight (so that the kernel reads the weight as it is stored). */
static kf_vid body_val(kf_rw *w, kf_bid b, kf_vid v)
{
	kf_graph *g = w->g;
	if (w->vmap[v] != KF_NONE)
		return w->vmap[v];
	kf_nid d = kf_def(g, v);
	kf_vid bv;
	if (d != KF_NONE && kf_N(g, d)->op == KF_OP_CONST && kf_N(g, d)->cst->kind != KF_CONST_FILE &&
	    kf_N(g, d)->cst->n == 1) {
		bv = kf_const_copy(g, b, v);
	} else if (v == w->r->R && d != KF_NONE && kf_N(g, d)->op == KF_OP_TRANSPOSE &&
		   kf_vtype(g, v)->rank == 2) {
		kf_vid src = body_val(w, b, kf_in(g, d, 0));
		bv = kf_rw_new1(g, b, KF_NONE, KF_OP_TRANSPOSE, &src, 1, kf_V(g, v)->type);
		d = kf_def(g, v);
		kf_node_set_attrs(g, kf_def(g, bv), kf_N(g, d)->attr, kf_N(g, d)->nattr);
	} else {
		bv = kf_block_add_arg(g, b, kf_V(g, v)->type, 0);
		w->ins[w->nin++] = v;
	}
	kf_V(g, bv)->name = kf_V(g, v)->name;
	return w->vmap[v] = bv;
}

typedef struct outv {
	uint32_t i;      /* step node index */
	bool seq;        /* the values of every step, concatenated along axis 0 */
	bool rev;        /* ... last step first (a reverse direction's time order) */
	kf_nid cat;      /* an outside concat of exactly those values, or KF_NONE */
} outv;

static bool outside_use(const kf_rec *r, kf_vid v, kf_nid skip)
{
	kf_foreach_use(r->g, v, u) {
		kf_nid un = r->g->use[u].user;
		if (un != skip && (un >= r->nnode || !r->stepof[un]))
			return true;
	}
	return false;
}

/* The concat node that reads exactly step node i's values in step order,
 * or (*rev) in reverse step order: a reverse direction's output in time
 * order. */
static kf_nid full_concat(const kf_rec *r, uint32_t i, bool *rev)
{
	kf_graph *g = r->g;
	kf_vid v0 = kf_res(g, r->node[i], 0);
	kf_foreach_use(g, v0, u) {
		kf_nid c = g->use[u].user;
		if (kf_N(g, c)->op != KF_OP_CONCAT || kf_N(g, c)->nin != r->T || kf_attr_int(g, c, "axis", -1) != 0)
			continue;
		bool fw = true, bw = true;
		for (uint32_t k = 0; k < r->T && r->node[(r->T - 1) * r->nper + i] != KF_NONE; k++) {
			fw = fw && kf_in(g, c, k) == kf_res(g, r->node[k * r->nper + i], 0);
			bw = bw && kf_in(g, c, r->T - 1 - k) == kf_res(g, r->node[k * r->nper + i], 0);
		}
		if ((fw || bw) && r->node[(r->T - 1) * r->nper + i] != KF_NONE) {
			*rev = !fw;
			return c;
		}
	}
	*rev = false;
	return KF_NONE;
}

/* Which step values leave the chain, and how. */
static uint32_t outputs(const kf_rec *r, outv *o)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < r->nper; i++) {
		bool rev;
		kf_nid cat = full_concat(r, i, &rev);
		bool mid = cat != KF_NONE;
		for (uint32_t k = 0; k + 1 < r->T; k++)
			mid = mid || outside_use(r, kf_res(r->g, r->node[k * r->nper + i], 0), cat);
		/* with a sequence, the last step's users read its last row too:
		 * a later chain then sees every step's input alike */
		if (mid)
			o[n++] = (outv){i, true, rev, cat};
		else if (r->node[(r->T - 1) * r->nper + i] != KF_NONE &&
			 outside_use(r, kf_res(r->g, r->node[(r->T - 1) * r->nper + i], 0), cat))
			o[n++] = (outv){i, false, false, KF_NONE};
	}
	return n;
}

static void set_str(kf_graph *g, kf_nid n, const char *k, const char *v)
{
	kf_node_set_attr(g, n, kf_intern_cstr(g->ctx, k), (kf_attrval){.kind = KF_ATTR_STR, .s = kf_intern_cstr(g->ctx, v)});
}

static void set_int(kf_graph *g, kf_nid n, const char *k, int64_t v)
{
	kf_node_set_attr(g, n, kf_intern_cstr(g->ctx, k), (kf_attrval){.kind = KF_ATTR_INT, .i = v});
}

/* The next free `@kN` among the graph's fusion nodes. */
static int next_sym(kf_graph *g)
{
	int next = 0;
	for (kf_nid n = 0; n < g->nnode; n++) {
		const kf_node *x = kf_N(g, n);
		const char *s = x->sym ? kf_str(g->ctx, x->sym) : "";
		if (!(x->flags & KF_NODE_DEAD) && x->op == KF_OP_FUSION && s[0] == 'k' && s[1] >= '0' && s[1] <= '9')
			next = atoi(s + 1) + 1 > next ? atoi(s + 1) + 1 : next;
	}
	return next;
}

/* What the cell is, for the node's attributes and the log: an LSTM
 * carries h and c, a GRU only h with three gates, anything else is "rnn". */
static const char *cell_name(const kf_rec *r)
{
	const kf_type *R = kf_vtype(r->g, r->R);
	if (r->nslot == 2 && R->dim[1] == 4 * R->dim[0])
		return "lstm";
	if (r->nslot == 1 && R->dim[1] == 3 * R->dim[0])
		return "gru";
	return "rnn";
}

/* Slot s's initial value in the body: a value of its own, also when
 * another slot starts from the same outside value (h0 and c0 of zeros,
 * after cse), so that the kernel tells the states apart. */
static kf_vid slot_init(kf_rw *w, kf_bid b, uint32_t s)
{
	kf_graph *g = w->g;
	kf_rec *r = w->r;
	if (w->sinit[s] != KF_NONE)
		return w->sinit[s];
	kf_vid v = r->init[s], bv = KF_NONE;
	for (uint32_t q = 0; q < s && bv == KF_NONE; q++)
		if (r->init[q] == v && w->sinit[q] != KF_NONE)
			bv = w->sinit[q];
	if (bv == KF_NONE) {
		bv = body_val(w, b, v);
	} else if (kf_def(g, v) != KF_NONE && kf_N(g, kf_def(g, v))->op == KF_OP_CONST) {
		bv = kf_const_copy(g, b, v);
	} else {
		bv = kf_block_add_arg(g, b, kf_V(g, v)->type, 0);
		w->ins[w->nin++] = v;
	}
	return w->sinit[s] = bv;
}

/* Per-step input operand j of step k's node i in the body: rows of the
 * hoisted value, under the column slices that stayed on top of it. */
static kf_vid ext_rows(kf_rw *w, kf_bid b, uint32_t k, uint32_t i, uint32_t j)
{
	kf_graph *g = w->g;
	kf_rec *r = w->r;
	uint32_t np;
	kf_vid a0 = kf_in(g, r->node[i], j), b0 = kf_rec_in(r, r->node[r->nper + i], j);
	kf_vid core = kf_rw_peel(g, a0, &b0, &np);
	const kf_hrow *h = &w->hx[kf_rw_ext_index(w, core)];
	kf_vid v = kf_rw_rows(g, b, KF_NONE, body_val(w, b, h->h), h->r0 + (int64_t)k * h->dr, h->n);
	for (uint32_t q = np; q-- > 0;) {
		/* the q-th column slice from the top */
		kf_vid t = a0;
		for (uint32_t u = 0; u < q; u++)
			t = kf_in(g, kf_def(g, t), 0);
		v = kf_rw_new1(g, b, KF_NONE, KF_OP_SLICE, &v, 1, kf_V(g, t)->type);
		kf_nid d = kf_def(g, t);
		kf_node_set_attrs(g, kf_def(g, v), kf_N(g, d)->attr, kf_N(g, d)->nattr);
	}
	return v;
}

/* Copies step k's nodes into body b (per-step inputs as row slices of the
 * hoisted values). */
static void copy_step(kf_rw *w, kf_bid b, uint32_t k)
{
	kf_graph *g = w->g;
	kf_rec *r = w->r;
	for (uint32_t i = 0; i < r->nper; i++) {
		kf_nid n = r->node[k * r->nper + i];
		kf_vid in[KF_REC_MAXIN];
		if (n == KF_NONE)
			continue; /* the last step lacks it */
		for (uint32_t j = 0; j < kf_N(g, n)->nin; j++) {
			kf_vid a = kf_rec_in(r, n, j);
			uint8_t cls = r->cls[i * KF_REC_MAXIN + j];
			if (cls == KF_REC_EXT) {
				in[j] = ext_rows(w, b, k, i, j);
			} else if (cls == KF_REC_SLOT && k == 0) {
				in[j] = slot_init(w, b, r->slot[i * KF_REC_MAXIN + j]);
			} else if (cls == KF_REC_INV) {
				in[j] = body_val(w, b, a);
			} else {
				in[j] = w->vmap[a];
			}
		}
		const kf_node *x = kf_N(g, n);
		kf_vid v = kf_rw_new1(g, b, KF_NONE, x->op, in, x->nin, kf_V(g, x->res0)->type);
		x = kf_N(g, n);
		kf_node_set_attrs(g, kf_def(g, v), x->attr, x->nattr);
		kf_N(g, kf_def(g, v))->loc = x->loc;
		kf_V(g, v)->name = kf_V(g, x->res0)->name;
		w->vmap[x->res0] = v;
	}
}

/* Erases node n if its results are unused, then the operand definitions
 * that it leaves unused (not graph inputs, not pinned nodes). */
static void erase_dead(kf_graph *g, kf_nid n)
{
	if (n == KF_NONE || (kf_N(g, n)->flags & KF_NODE_DEAD) || kf_pass_node_pinned(g, n) ||
	    !kf_pass_node_dead(g, n))
		return;
	uint32_t nin = kf_N(g, n)->nin;
	kf_nid *d = malloc((nin + 1) * sizeof *d);
	for (uint32_t j = 0; j < nin; j++)
		d[j] = kf_def(g, kf_in(g, n, j));
	kf_node_erase(g, n);
	for (uint32_t j = 0; j < nin; j++)
		erase_dead(g, d[j]);
	free(d);
}

/* Outside users of v (not chain nodes, not `skip`) now read `to`. */
static void redirect(const kf_rec *r, kf_vid v, kf_vid to, kf_nid skip)
{
	kf_graph *g = r->g;
	uint32_t n = kf_nuses(g, v), k = 0;
	kf_uid *us = malloc((n + 1) * sizeof *us);
	kf_foreach_use(g, v, u) {
		kf_nid un = g->use[u].user;
		if (un != skip && (un >= r->nnode || !r->stepof[un]))
			us[k++] = u;
	}
	for (uint32_t i = 0; i < k; i++)
		kf_set_operand(g, g->use[us[i]].user, us[i] - kf_N(g, g->use[us[i]].user)->in0, to);
	free(us);
}

/* Builds the persistent node for the chain r; the chain's nodes go. */
static kf_nid build(kf_rw *w, int sym, kf_buf *log)
{
	kf_graph *g = w->g;
	kf_rec *r = w->r;
	outv *o = malloc((r->nper * 2 + 1) * sizeof *o);
	uint32_t no = outputs(r, o);
	kf_tid *rt = malloc((no + 1) * sizeof *rt);
	for (uint32_t q = 0; q < no; q++) {
		kf_type t = *kf_vtype(g, kf_res(g, r->node[o[q].i], 0));
		if (o[q].seq)
			t.dim[0] *= r->T;
		rt[q] = kf_type_intern(g->ctx, &t);
	}
	kf_nid ret = kf_block_terminator(g, 0);
	/* the body first, since it decides the operands; the node adopts it */
	kf_bid b = kf_block_new(g, KF_NONE);
	for (uint32_t k = 0; k < r->T; k++)
		copy_step(w, b, k);
	kf_vid *y = malloc((no + r->T + 1) * sizeof *y), *cat = y + no;
	for (uint32_t q = 0; q < no; q++) {
		if (!o[q].seq) {
			y[q] = w->vmap[kf_res(g, r->node[(r->T - 1) * r->nper + o[q].i], 0)];
			continue;
		}
		for (uint32_t k = 0; k < r->T; k++)
			cat[o[q].rev ? r->T - 1 - k : k] = w->vmap[kf_res(g, r->node[k * r->nper + o[q].i], 0)];
		y[q] = kf_rw_new1(g, b, KF_NONE, KF_OP_CONCAT, cat, r->T, rt[q]);
		set_int(g, kf_def(g, y[q]), "axis", 0);
	}
	kf_node_new(g, b, KF_NONE, KF_OP_YIELD, y, no, NULL, 0);
	/* the operands, now that the body has asked for them */
	kf_nid f = kf_node_new(g, 0, ret, KF_OP_FUSION, w->ins, w->nin, rt, no);
	kf_N(g, f)->body = b;
	g->blk[b].parent = f;
	char name[32];
	snprintf(name, sizeof name, "k%d", sym);
	kf_N(g, f)->sym = kf_intern_cstr(g->ctx, name);
	kf_N(g, f)->loc = kf_N(g, r->node[0])->loc;
	const kf_type *R = kf_vtype(g, r->R);
	set_str(g, f, "kind", "persistent");
	set_str(g, f, "cell", cell_name(r));
	set_int(g, f, "steps", r->T);
	set_int(g, f, "hidden", R->dim[0]);
	set_int(g, f, "layers", 1);
	/* outside users read the node's results (or row slices of a sequence) */
	for (uint32_t q = 0; q < no; q++) {
		kf_vid res = kf_res(g, f, q);
		if (!o[q].seq) {
			kf_vid v = kf_res(g, r->node[(r->T - 1) * r->nper + o[q].i], 0);
			kf_V(g, res)->name = kf_V(g, v)->name;
			redirect(r, v, res, KF_NONE);
			continue;
		}
		if (o[q].cat != KF_NONE) {
			kf_V(g, res)->name = kf_V(g, kf_res(g, o[q].cat, 0))->name;
			kf_replace_all_uses(g, kf_res(g, o[q].cat, 0), res);
			kf_node_erase(g, o[q].cat);
		}
		int64_t d0 = kf_vtype(g, kf_res(g, r->node[o[q].i], 0))->dim[0];
		for (uint32_t k = 0; k < r->T; k++) {
			kf_vid v = kf_res(g, r->node[k * r->nper + o[q].i], 0);
			if (!outside_use(r, v, KF_NONE))
				continue;
			kf_vid s = kf_rw_rows(g, 0, ret, res, (int64_t)(o[q].rev ? r->T - 1 - k : k) * d0, d0);
			redirect(r, v, s, kf_def(g, s));
		}
	}
	if (log)
		kf_buf_printf(log, "persistent: @%s: %u steps of %s over %%%s (hidden %lld, %u per-step input%s hoisted)"
			      " -> fusion @%s\n", kf_str(g->ctx, g->name), r->T, cell_name(r),
			      kf_V(g, r->R)->name ? kf_str(g->ctx, kf_V(g, r->R)->name) : "?", (long long)R->dim[0],
			      w->next, w->next == 1 ? "" : "s", name);
	free(o);
	free(rt);
	free(y);
	return f;
}

/* Erases the chain, then what only the chain read (the per-step inputs,
 * the weight's transpose, constants). */
static void erase_chain(const kf_rec *r)
{
	kf_graph *g = r->g;
	uint32_t nd = 0, cap = r->T * r->nper * KF_REC_MAXIN + 1;
	kf_nid *d = malloc(cap * sizeof *d);
	for (uint32_t q = r->T * r->nper; q-- > 0;) {
		kf_nid n = r->node[q];
		if (n == KF_NONE)
			continue;
		for (uint32_t j = 0; j < kf_N(g, n)->nin; j++) {
			kf_nid dj = kf_def(g, kf_in(g, n, j));
			if (dj != KF_NONE && (dj >= r->nnode || !r->stepof[dj]))
				d[nd++] = dj;
		}
		kf_node_erase(g, n);
	}
	for (uint32_t i = 0; i < nd; i++)
		erase_dead(g, d[i]);
	free(d);
}

/* Re-orders block b topologically, keeping the present order where it
 * can (a node goes as early as its operands allow, ties by old position);
 * the terminator stays last. */
static void topo_sort(kf_graph *g, kf_bid b)
{
	uint32_t n = 0;
	kf_foreach_node(g, b, m)
		n++;
	kf_nid *ord = malloc((n + 1) * sizeof *ord), *heap = malloc((n + 1) * sizeof *heap);
	uint32_t *pos = malloc((g->nnode + 1) * sizeof *pos), *deg = calloc(g->nnode + 1, sizeof *deg);
	uint32_t i = 0, nh = 0, no = 0;
	kf_nid term = kf_block_terminator(g, b);
	kf_foreach_node(g, b, m) {
		pos[m] = i;
		ord[i++] = m;
	}
	for (i = 0; i < n; i++) {
		kf_nid m = ord[i];
		for (uint32_t j = 0; j < kf_N(g, m)->nin; j++) {
			kf_nid d = kf_def(g, kf_in(g, m, j));
			deg[m] += d != KF_NONE && kf_N(g, d)->blk == b;
		}
	}
	/* a binary min-heap of ready nodes by old position */
#define KF_HPUSH(x) do { uint32_t c_ = nh++; heap[c_] = (x); \
		while (c_ && pos[heap[(c_ - 1) / 2]] > pos[heap[c_]]) { \
			kf_nid t_ = heap[c_]; heap[c_] = heap[(c_ - 1) / 2]; heap[(c_ - 1) / 2] = t_; c_ = (c_ - 1) / 2; } \
	} while (0)
	for (i = 0; i < n; i++)
		if (!deg[ord[i]] && ord[i] != term)
			KF_HPUSH(ord[i]);
	kf_nid *out = malloc((n + 1) * sizeof *out);
	while (nh) {
		kf_nid m = heap[0];
		heap[0] = heap[--nh];
		for (uint32_t c = 0;;) {
			uint32_t l = 2 * c + 1, s = c;
			if (l < nh && pos[heap[l]] < pos[heap[s]])
				s = l;
			if (l + 1 < nh && pos[heap[l + 1]] < pos[heap[s]])
				s = l + 1;
			if (s == c)
				break;
			kf_nid t = heap[c];
			heap[c] = heap[s];
			heap[s] = t;
			c = s;
		}
		out[no++] = m;
		for (uint32_t q = 0; q < kf_N(g, m)->nres; q++)
			kf_foreach_use(g, kf_res(g, m, q), u) {
				kf_nid un = g->use[u].user;
				if (kf_N(g, un)->blk == b && --deg[un] == 0 && un != term)
					KF_HPUSH(un);
			}
	}
#undef KF_HPUSH
	for (i = 0; i < no; i++)
		kf_node_move(g, out[i], b, term);
	free(ord);
	free(heap);
	free(pos);
	free(deg);
	free(out);
}

/* ---- the pass ------------------------------------------------------------------------ */

static int rewrite(kf_graph *g, kf_rec *r, kf_buf *log)
{
	uint32_t nnode0 = g->nnode;
	kf_rw w = {.g = g, .r = r};
	uint32_t cap = r->nper * KF_REC_MAXIN + 1;
	w.ext0 = calloc(cap, sizeof *w.ext0);
	w.hx = calloc(cap, sizeof *w.hx);
	w.caphm = cap * 8;
	w.hm_a = calloc(w.caphm, sizeof *w.hm_a);
	w.hm_h = calloc(w.caphm, sizeof *w.hm_h);
	int rc = kf_rw_hoist_all(&w);
	if (rc != 0) {
		/* drop what hoisting made before it failed */
		for (kf_nid n = g->nnode; n-- > nnode0;)
			if (!(kf_N(g, n)->flags & KF_NODE_DEAD) && kf_pass_node_dead(g, n))
				kf_node_erase(g, n);
		if (log)
			kf_buf_printf(log, "persistent: @%s: the %u steps over %%%s stay as they are: %s\n",
				      kf_str(g->ctx, g->name), r->T,
				      kf_V(g, r->R)->name ? kf_str(g->ctx, kf_V(g, r->R)->name) : "?", w.why);
	} else {
		w.ins = malloc((r->T * r->nper * KF_REC_MAXIN + 1) * sizeof *w.ins);
		w.vmap = malloc((g->nval + 4 * (size_t)r->T * r->nper + 64) * sizeof *w.vmap);
		w.sinit = malloc((r->nslot + 1) * sizeof *w.sinit);
		/* the body adds values; vmap covers every outer value, which all exist now */
		for (uint32_t v = 0; v < g->nval; v++)
			w.vmap[v] = KF_NONE;
		for (uint32_t q = 0; q < r->nslot; q++)
			w.sinit[q] = KF_NONE;
		build(&w, next_sym(g), log);
		erase_chain(r);
		topo_sort(g, 0);
	}
	free(w.ext0);
	free(w.hx);
	free(w.hm_a);
	free(w.hm_h);
	free(w.ins);
	free(w.vmap);
	free(w.sinit);
	return rc;
}

static int persistent_run(kf_graph *g, const kf_passopts *o, bool *changed)
{
	int64_t min_steps = kf_passopt_int(g->ctx, o, "min-steps", 2);
	kf_vid done[256];
	uint32_t ndone = 0;
	/* gemm and split, as exporters write a traced cell loop */
	if (kf_rec_normalize(g) > 0)
		*changed = true;
	for (;;) {
		kf_vid cand[64];
		uint32_t nc = kf_rec_candidates(g, 0, cand, 64), i;
		for (i = 0; i < nc; i++) {
			bool seen = false;
			for (uint32_t j = 0; j < ndone && !seen; j++)
				seen = done[j] == cand[i];
			if (!seen)
				break;
		}
		if (i == nc || ndone == 256)
			break;
		done[ndone++] = cand[i];
		kf_rec r;
		const char *wname = kf_V(g, cand[i])->name ? kf_str(g->ctx, kf_V(g, cand[i])->name) : "?";
		if (kf_rec_analyze(g, 0, cand[i], &r) != 0) {
			/* a weight every step reads without a chain (the input
			 * projection's) is no news: say nothing */
			if (o->log && !strstr(r.why, "one chain"))
				kf_buf_printf(o->log, "persistent: @%s: the matmuls over %%%s are not a recurrence: %s\n",
					      kf_str(g->ctx, g->name), wname, r.why);
			continue;
		}
		if (r.T < (uint32_t)min_steps) {
			kf_rec_free(&r);
			continue;
		}
		/* a node the persistent kernels cannot take would run its body
		 * op by op on a GPU (the zoo's f16 LSTM, before they took f16:
		 * 2570 kernels, 2.3x the time of the steps left to fuse) */
		if (!kf_rec_dtype_ok(kf_vtype(g, kf_in(g, r.node[0], 0))->dtype)) {
			if (o->log)
				kf_buf_printf(o->log, "persistent: @%s: the %u steps over %%%s stay as they are: "
					      "the persistent kernels are f32, f16 or bf16\n", kf_str(g->ctx, g->name), r.T, wname);
			kf_rec_free(&r);
			continue;
		}
		if (rewrite(g, &r, o->log) == 0)
			*changed = true;
		kf_rec_free(&r);
	}
	/* stacked layers: one node, one wavefront kernel (stack=0 keeps a
	 * node per layer, the path before it, for comparison) */
	if (kf_passopt_int(g->ctx, o, "stack", 1) && kf_rec_merge_stacks(g, next_sym(g), o->log) > 0) {
		*changed = true;
		topo_sort(g, 0);
	}
	/* a bidirectional layer's two directions: one node, one kernel */
	if (kf_passopt_int(g->ctx, o, "pair", 1) && kf_rec_merge_pairs(g, next_sym(g), o->log) > 0) {
		*changed = true;
		topo_sort(g, 0);
	}
	return 0;
}

static const char *const persistent_opts[] = {"min-steps", "stack", "pair", NULL};

const kf_pass kf_pass_persistent = {
	.name = "persistent",
	.doc = "an unrolled LSTM/GRU (steps linked by their state, one recurrent weight) becomes one "
	       "persistent fusion node; input projections are hoisted into one matmul",
	.opts = persistent_opts,
	.run = persistent_run,
};
