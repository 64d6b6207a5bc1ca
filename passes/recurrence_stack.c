/* recurrence_stack.c: the `persistent` pass's last step: stacked layers
 * become one node.  After the per-layer rewrite (passes/recurrence.c),
 * layer l+1 is a persistent node whose per-step input is a matmul of
 * layer l's sequence result by an invariant weight (the hoisted input
 * projection), optionally plus a bias.  A chain of such nodes moves, with
 * the projections between them, into the body of one
 * `fusion {kind = "persistent", layers = L}` node: the interpreter runs
 * the body as it is (nested persistent nodes), the CUDA emitter
 * (cuda/emit_stack.c) turns it into one wavefront kernel that computes
 * the projections inside, and the backend, when the grid cannot hold every
 * layer at once, runs the body: one kernel per layer, as before.
 * docs/persistent.md, "Stacked layers". */
#include <stdlib.h>
#include <string.h>
#include "passes.h"
#include "recurrence.h"

static bool is_layer(const kf_graph *g, kf_nid n)
{
	return n != KF_NONE && kf_N(g, n)->op == KF_OP_FUSION &&
	       !strcmp(kf_attr_str(g, n, "kind", ""), "persistent") && kf_attr_int(g, n, "layers", 1) == 1;
}

/* A value computed from arguments and constants alone, in a few ops (a
 * weight's transpose of a reshaped slice, as the importer writes it; a
 * sum of two biases): the stack may read it as an argument without
 * depending on a layer. */
static bool from_consts(const kf_graph *g, kf_vid v, int depth)
{
	kf_nid d = kf_def(g, v);
	if (d == KF_NONE || kf_N(g, d)->op == KF_OP_CONST)
		return true;
	if (depth == 0 || kf_N(g, d)->op == KF_OP_FUSION)
		return false;
	for (uint32_t i = 0; i < kf_N(g, d)->nin; i++)
		if (!from_consts(g, kf_in(g, d, i), depth - 1))
			return false;
	return true;
}

/* A weight the projection may read: an argument, a constant, the
 * transpose of one computed from those (gen_rnn.py's form, the
 * importer's), or a cast of one computed from those (amp's f16 copy of
 * the transposed weight: the stack reads it as an argument [K, G]). */
static bool plain_weight(const kf_graph *g, kf_vid w)
{
	kf_nid d = kf_def(g, w);
	if (d == KF_NONE || kf_N(g, d)->op == KF_OP_CONST)
		return true;
	return (kf_N(g, d)->op == KF_OP_TRANSPOSE || kf_N(g, d)->op == KF_OP_CAST) && from_consts(g, kf_in(g, d, 0), 6);
}

/* A projection used once: `matmul(seq, W)`, or `add(matmul(seq, W), b)`
 * with a row bias b; *mm gets the matmul. */
static kf_nid projection(const kf_graph *g, kf_vid v, kf_nid *mm)
{
	kf_nid d = kf_def(g, v);
	if (d == KF_NONE || kf_nuses(g, v) != 1)
		return KF_NONE;
	if (kf_N(g, d)->op == KF_OP_ADD) {
		/* either order: canonicalize puts a computed bias first */
		kf_vid a = kf_in(g, d, 0), b = kf_in(g, d, 1);
		if (kf_def(g, a) == KF_NONE || kf_N(g, kf_def(g, a))->op != KF_OP_MATMUL) {
			a = kf_in(g, d, 1);
			b = kf_in(g, d, 0);
		}
		const kf_type *bt = kf_vtype(g, b);
		kf_nid m = kf_def(g, a);
		if (m == KF_NONE || kf_N(g, m)->op != KF_OP_MATMUL || kf_nuses(g, a) != 1 || bt->rank > 2 ||
		    (bt->rank == 2 && bt->dim[0] != 1) || !from_consts(g, b, 6))
			return KF_NONE;
		*mm = m;
		return d;
	}
	*mm = d;
	return kf_N(g, d)->op == KF_OP_MATMUL ? d : KF_NONE;
}

/* The layer below B: the persistent node whose sequence result B's
 * per-step input projects, with the same steps and hidden size.  Reshapes
 * between them that give the sequence back its own shape (Y as [T, 1, B,
 * H], squeezed, as [T * B, H] again: the importer's layers) are skipped:
 * the projection then reads the sequence itself. */
static kf_nid below(kf_graph *g, kf_nid B)
{
	for (uint32_t j = 0; j < kf_N(g, B)->nin; j++) {
		kf_nid mm = KF_NONE;
		if (projection(g, kf_in(g, B, j), &mm) == KF_NONE)
			continue;
		kf_vid s = kf_in(g, mm, 0), o = s;
		while (kf_def(g, o) != KF_NONE && kf_N(g, kf_def(g, o))->op == KF_OP_RESHAPE)
			o = kf_in(g, kf_def(g, o), 0);
		if (o != s && kf_V(g, o)->type == kf_V(g, s)->type && is_layer(g, kf_def(g, o))) {
			kf_set_operand(g, mm, 0, o);
			s = o;
		}
		kf_vid w = kf_in(g, mm, 1);
		kf_nid A = kf_def(g, s);
		const kf_type *st = kf_vtype(g, s);
		if (!is_layer(g, A) || !plain_weight(g, w) || st->rank != 2 || kf_attr_int(g, A, "steps", -1) < 1 ||
		    st->dim[0] % kf_attr_int(g, A, "steps", -1) != 0 || /* a step's rows: its batch */
		    kf_attr_int(g, A, "steps", -1) != kf_attr_int(g, B, "steps", -2) ||
		    kf_attr_int(g, A, "hidden", -1) != kf_attr_int(g, B, "hidden", -2) ||
		    st->dim[1] != kf_attr_int(g, A, "hidden", -1))
			continue;
		return A;
	}
	return KF_NONE;
}

/* The nodes of the stack, in block order: each layer, each projection
 * (and its weight's transpose when only it reads that). */
static uint32_t members(const kf_graph *g, const kf_nid *lay, uint32_t L, kf_nid *out)
{
	uint32_t n = 0;
	for (uint32_t l = 0; l < L; l++) {
		if (l > 0) {
			kf_nid B = lay[l];
			for (uint32_t j = 0; j < kf_N(g, B)->nin; j++) {
				kf_nid mm = KF_NONE, pr = projection(g, kf_in(g, B, j), &mm);
				if (pr == KF_NONE || kf_def(g, kf_in(g, mm, 0)) != lay[l - 1])
					continue;
				kf_nid t = kf_def(g, kf_in(g, mm, 1));
				if (t != KF_NONE && kf_N(g, t)->op == KF_OP_TRANSPOSE && kf_nuses(g, kf_in(g, mm, 1)) == 1)
					out[n++] = t;
				out[n++] = mm;
				if (pr != mm)
					out[n++] = pr;
				break;
			}
		}
		out[n++] = lay[l];
	}
	return n;
}

static bool in_set(const kf_nid *s, uint32_t n, kf_nid x)
{
	for (uint32_t i = 0; i < n; i++)
		if (s[i] == x)
			return true;
	return false;
}

static void set_attr_s(kf_graph *g, kf_nid n, const char *k, kf_attrval v)
{
	kf_node_set_attr(g, n, kf_intern_cstr(g->ctx, k), v);
}

/* Outside operands of the members become body arguments. */
static uint32_t bind_args(kf_graph *g, kf_bid b, const kf_nid *mem, uint32_t nm, kf_vid *ins)
{
	uint32_t nin = 0;
	kf_vid *barg = malloc((nm * KF_REC_MAXIN * 8 + 64) * sizeof *barg);
	for (uint32_t i = 0; i < nm; i++)
		for (uint32_t j = 0; j < kf_N(g, mem[i])->nin; j++) {
			kf_vid v = kf_in(g, mem[i], j);
			if (in_set(mem, nm, kf_def(g, v)))
				continue;
			uint32_t a = 0;
			while (a < nin && ins[a] != v)
				a++;
			if (a == nin) {
				ins[nin] = v;
				barg[nin] = kf_block_add_arg(g, b, kf_V(g, v)->type, 0);
				kf_V(g, barg[nin])->name = kf_V(g, v)->name;
				nin++;
			}
			kf_set_operand(g, mem[i], j, barg[a]);
		}
	free(barg);
	return nin;
}

/* Moves the stack's nodes into one persistent node of L layers (pair: two
 * independent recurrences, a bidirectional layer's directions). */
static void merge(kf_graph *g, const kf_nid *lay, uint32_t L, int sym, bool pair, kf_buf *log)
{
	uint32_t cap = L * 4 + 4;
	kf_nid *mem = malloc(cap * sizeof *mem);
	uint32_t nm = members(g, lay, L, mem);
	/* results used outside the stack leave it */
	kf_vid *y = malloc((cap * 8 + 8) * sizeof *y);
	kf_tid *yt = malloc((cap * 8 + 8) * sizeof *yt);
	uint32_t ny = 0, nin_cap = 0;
	for (uint32_t i = 0; i < nm; i++) {
		nin_cap += kf_N(g, mem[i])->nin;
		for (uint32_t r = 0; r < kf_N(g, mem[i])->nres; r++) {
			kf_vid v = kf_res(g, mem[i], r);
			bool out = false;
			kf_foreach_use(g, v, u)
				out = out || !in_set(mem, nm, g->use[u].user);
			if (out && ny < cap * 8) {
				y[ny] = v;
				yt[ny++] = kf_V(g, v)->type;
			}
		}
	}
	kf_nid at = kf_N(g, lay[L - 1])->next;
	kf_bid b = kf_block_new(g, KF_NONE);
	kf_vid *ins = malloc((nin_cap + 1) * sizeof *ins);
	uint32_t nin = bind_args(g, b, mem, nm, ins);
	for (uint32_t i = 0; i < nm; i++)
		kf_node_move(g, mem[i], b, KF_NONE);
	kf_nid f = kf_node_new(g, 0, at, KF_OP_FUSION, ins, nin, yt, ny);
	for (uint32_t q = 0; q < ny; q++) {
		kf_vid res = kf_res(g, f, q);
		kf_V(g, res)->name = kf_V(g, y[q])->name;
		/* outside users only: the body's keep reading the value */
		uint32_t nu = 0;
		kf_uid *us = malloc((kf_nuses(g, y[q]) + 1) * sizeof *us);
		kf_foreach_use(g, y[q], u)
			if (!in_set(mem, nm, g->use[u].user))
				us[nu++] = u;
		for (uint32_t i = 0; i < nu; i++)
			kf_set_operand(g, g->use[us[i]].user, us[i] - kf_N(g, g->use[us[i]].user)->in0, res);
		free(us);
	}
	kf_node_new(g, b, KF_NONE, KF_OP_YIELD, y, ny, NULL, 0);
	kf_N(g, f)->body = b;
	g->blk[b].parent = f;
	char name[32];
	snprintf(name, sizeof name, "k%d", sym);
	kf_N(g, f)->sym = kf_intern_cstr(g->ctx, name);
	kf_N(g, f)->loc = kf_N(g, lay[0])->loc;
	kf_sid cell = kf_intern_cstr(g->ctx, kf_attr_str(g, lay[0], "cell", "rnn"));
	set_attr_s(g, f, "kind", (kf_attrval){.kind = KF_ATTR_STR, .s = kf_intern_cstr(g->ctx, "persistent")});
	set_attr_s(g, f, "cell", (kf_attrval){.kind = KF_ATTR_STR, .s = cell});
	set_attr_s(g, f, "steps", (kf_attrval){.kind = KF_ATTR_INT, .i = kf_attr_int(g, lay[0], "steps", 0)});
	set_attr_s(g, f, "hidden", (kf_attrval){.kind = KF_ATTR_INT, .i = kf_attr_int(g, lay[0], "hidden", 0)});
	set_attr_s(g, f, "layers", (kf_attrval){.kind = KF_ATTR_INT, .i = L});
	if (pair)
		set_attr_s(g, f, "bidirectional", (kf_attrval){.kind = KF_ATTR_BOOL, .b = true});
	if (log && pair)
		kf_buf_printf(log, "persistent: @%s: two directions (@%s, @%s) -> fusion @%s (one kernel)\n",
			      kf_str(g->ctx, g->name), kf_str(g->ctx, kf_N(g, lay[0])->sym),
			      kf_str(g->ctx, kf_N(g, lay[1])->sym), name);
	else if (log)
		kf_buf_printf(log, "persistent: @%s: %u stacked layers (@%s .. @%s) -> fusion @%s (one wavefront kernel)\n",
			      kf_str(g->ctx, g->name), L, kf_str(g->ctx, kf_N(g, lay[0])->sym),
			      kf_str(g->ctx, kf_N(g, lay[L - 1])->sym), name);
	free(mem);
	free(y);
	free(yt);
	free(ins);
}

int kf_rec_merge_stacks(kf_graph *g, int next_sym, kf_buf *log)
{
	uint32_t nl = 0;
	kf_foreach_node(g, 0, n)
		nl += is_layer(g, n);
	kf_nid *lay = malloc((nl + 1) * sizeof *lay), *up = malloc((nl + 1) * sizeof *up);
	kf_nid *dn = malloc((nl + 1) * sizeof *dn), *chain = malloc((nl + 1) * sizeof *chain);
	nl = 0;
	kf_foreach_node(g, 0, n)
		if (is_layer(g, n))
			lay[nl++] = n;
	for (uint32_t i = 0; i < nl; i++)
		up[i] = dn[i] = KF_NONE;
	/* one layer above each: a second reader of a sequence stays apart */
	for (uint32_t i = 0; i < nl; i++) {
		kf_nid A = below(g, lay[i]);
		for (uint32_t k = 0; k < nl && A != KF_NONE; k++)
			if (lay[k] == A && up[k] == KF_NONE) {
				up[k] = lay[i];
				dn[i] = A;
			}
	}
	int merged = 0;
	for (uint32_t i = 0; i < nl; i++) {
		if (dn[i] != KF_NONE || up[i] == KF_NONE)
			continue;
		uint32_t L = 0;
		for (kf_nid x = lay[i]; x != KF_NONE;) {
			chain[L++] = x;
			uint32_t k = 0;
			while (lay[k] != x)
				k++;
			x = up[k];
		}
		merge(g, chain, L, next_sym + merged, false, log);
		merged++;
	}
	free(lay);
	free(up);
	free(dn);
	free(chain);
	return merged;
}

/* The value a layer's per-step input projects (matmul(x, W) or
 * add(matmul(x, W), b)), or KF_NONE. */
static kf_vid projected(const kf_graph *g, kf_nid n)
{
	for (uint32_t j = 0; j < kf_N(g, n)->nin; j++) {
		kf_vid v = kf_in(g, n, j);
		kf_nid d = kf_def(g, v);
		for (int k = 0; k < 2 && d != KF_NONE && kf_N(g, d)->op == KF_OP_ADD; k++) {
			kf_nid a = kf_def(g, kf_in(g, d, 0)), b = kf_def(g, kf_in(g, d, 1));
			d = a != KF_NONE && kf_N(g, a)->op == KF_OP_MATMUL ? a : b;
		}
		if (d != KF_NONE && kf_N(g, d)->op == KF_OP_MATMUL)
			return kf_in(g, d, 0);
	}
	return KF_NONE;
}

/* Whether node b depends on node a (both in block 0, a first). */
static bool depends(const kf_graph *g, kf_nid a, kf_nid b)
{
	uint8_t *mark = calloc(g->nnode + 1, 1);
	bool dep = false;
	mark[a] = 1;
	for (kf_nid n = kf_N(g, a)->next; n != KF_NONE; n = kf_N(g, n)->next) {
		for (uint32_t i = 0; i < kf_N(g, n)->nin && !mark[n]; i++) {
			kf_nid d = kf_def(g, kf_in(g, n, i));
			mark[n] = d != KF_NONE && mark[d];
		}
		if (n == b) {
			dep = mark[n];
			break;
		}
	}
	free(mark);
	return dep;
}

int kf_rec_merge_pairs(kf_graph *g, int next_sym, kf_buf *log)
{
	uint32_t nl = 0;
	kf_foreach_node(g, 0, n)
		nl += is_layer(g, n);
	kf_nid *lay = malloc((nl + 1) * sizeof *lay);
	nl = 0;
	kf_foreach_node(g, 0, n)
		if (is_layer(g, n))
			lay[nl++] = n;
	int merged = 0;
	for (uint32_t i = 0; i < nl; i++)
		for (uint32_t k = i + 1; k < nl && lay[i] != KF_NONE; k++) {
			kf_nid A = lay[i], B = lay[k];
			if (B == KF_NONE || kf_attr_int(g, A, "steps", -1) != kf_attr_int(g, B, "steps", -2) ||
			    kf_attr_int(g, A, "hidden", -1) != kf_attr_int(g, B, "hidden", -2) ||
			    strcmp(kf_attr_str(g, A, "cell", ""), kf_attr_str(g, B, "cell", "-")) ||
			    kf_N(g, A)->nres != kf_N(g, B)->nres || projected(g, A) == KF_NONE ||
			    projected(g, A) != projected(g, B) || depends(g, A, B) || depends(g, B, A))
				continue;
			kf_nid pair[2] = {A, B};
			merge(g, pair, 2, next_sym + merged, true, log);
			merged++;
			lay[i] = lay[k] = KF_NONE;
		}
	free(lay);
	return merged;
}
