/* verify.c: kf_verify, every structural and type invariant of a graph.
 *
 * requires nothing; changes nothing (types it checks are not interned).
 * One walk over the blocks in program order (a fusion's body when its node
 * is reached) with a mark per value, node, block and use slot, so the cost is
 * linear in the graph: defined-before-use is "marked when its definition was
 * walked", and isolation of regions is "the value's block is this block".
 * Every link is range-checked before it is followed, and each node, block and
 * use slot is entered at most once, so a corrupted graph gives errors, never
 * a crash or a loop.
 *
 * Two memos keep the per-node cost down, each holding only what has been
 * checked and found right in this call, so a wrong node always takes the
 * full check and gets its error: the types whose byte size fits, by tid,
 * and the result type inferred for (op, operand types) where the op's
 * inference depends on nothing else (kf_infer_types_only, no attributes).
 * Graphs repeat a few such combinations many times: on a 200k-node
 * element-wise graph (bench/gen_graph.py, -p canonicalize,cse,dce) they took
 * its three verifications from 242M to 145M instructions. */
#include <stdlib.h>
#include <string.h>

#include "infer.h"

/* Past this many errors the graph is too broken for more to help. */
#define MAX_ERRORS 100

typedef struct vst {
	kf_graph *g;
	kf_ctx *c;
	uint8_t *vdef;  /* value's definition walked */
	uint8_t *nseen; /* node walked */
	uint8_t *bseen; /* block walked */
	uint8_t *useen; /* use slot found in a value's list (LISTED, ASTRAY) */
	uint32_t nlisted; /* slots LISTED */
	uint32_t nowned;  /* LISTED slots owned by a walked live node */
	kf_type *tmp;   /* inference output */
	uint32_t tmpcap;
	uint8_t *size_ok; /* per tid: check_size passed */
	uint32_t nsize_ok;
	uint8_t *pure; /* per op: kf_infer_types_only */
	uint32_t npure;
	struct vmemo *memo; /* inferences that matched, open addressing */
	uint32_t memocap, nmemo;
	int nerr;
} vst;

/* A node of a types-only op, no attributes, one result, at most
 * MEMO_MAXIN operands: op, operand types and the result type they infer. */
#define MEMO_MAXIN 3
typedef struct vmemo {
	uint32_t opnin; /* (op + 1) << 2 | nin; 0: an empty slot */
	kf_tid in[MEMO_MAXIN];
	kf_tid res;
} vmemo;

static void verr(vst *s, kf_loc at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void verr(vst *s, kf_loc at, const char *fmt, ...)
{
	if (s->nerr > MAX_ERRORS)
		return;
	va_list ap;
	va_start(ap, fmt);
	if (s->nerr == MAX_ERRORS)
		kf_error(s->c, at, "too many errors; verification stopped");
	else
		kf_diag_v(s->c, KF_DIAG_ERROR, at, fmt, ap);
	va_end(ap);
	s->nerr++;
}

static const char *opname(vst *s, kf_nid n)
{
	uint16_t op = s->g->node[n].op;
	return op < kf_op_count(s->c) ? kf_op(s->c, op)->name : "?";
}

/* ---- use lists ------------------------------------------------------------- */

/* useen[u]: 0 not in any list, LISTED in the list of the value it reads,
 * ASTRAY in another value's list; STRAY_DONE is or-ed in by find_stray. */
enum { LISTED = 1, ASTRAY = 2, STRAY_DONE = 0x80 };

/* Every slot in a value's list reads that value, is linked back to its
 * predecessor and appears once.  The rest is counted rather than looked up,
 * to keep this walk off the node array: each live operand slot must be
 * LISTED (checked per node), and when the LISTED count exceeds the count of
 * live operand slots, find_stray names the extra ones. */
static void check_use_lists(vst *s)
{
	kf_graph *g = s->g;
	for (kf_vid v = 0; v < g->nval; v++) {
		kf_uid prev = KF_NONE;
		for (kf_uid u = g->val[v].first_use; u != KF_NONE; u = g->use[u].next) {
			if (u >= g->nuse) {
				verr(s, g->loc, "use list of value %u links to slot %u, past the end", v, u);
				break;
			}
			if (s->useen[u]) {
				verr(s, g->loc, "use slot %u is linked twice (in the list of value %u)", u, v);
				break;
			}
			const kf_use *us = &g->use[u];
			s->useen[u] = us->value == v ? LISTED : ASTRAY;
			s->nlisted += us->value == v;
			if (us->value != v || us->prev != prev) {
				kf_nid n = us->user;
				kf_loc at = n < g->nnode ? g->node[n].loc : g->loc;
				if (us->value != v)
					verr(s, at, "use slot %u is in the list of value %u but reads value %u", u, v,
					     us->value);
				else
					verr(s, at, "use slot %u of '%s' has a wrong back link", u,
					     n < g->nnode ? opname(s, n) : "?");
			}
			prev = u;
		}
	}
}

/* Slots in use lists that no walked live node owns: those of erased nodes
 * and of nodes whose operand range does not hold them.  (Nodes that are
 * live but unreached get their own error.) */
static void find_stray(vst *s)
{
	kf_graph *g = s->g;
	for (kf_vid v = 0; v < g->nval; v++) {
		for (kf_uid u = g->val[v].first_use; u < g->nuse; u = g->use[u].next) {
			if (!s->useen[u] || (s->useen[u] & STRAY_DONE))
				break; /* where check_use_lists stopped */
			s->useen[u] |= STRAY_DONE;
			kf_nid n = g->use[u].user;
			bool owned = n < g->nnode && !(g->node[n].flags & KF_NODE_DEAD) &&
				     u >= g->node[n].in0 && u - g->node[n].in0 < g->node[n].nin;
			if (!owned)
				verr(s, n < g->nnode ? g->node[n].loc : g->loc,
				     "use list of value %u holds slot %u, which is not an operand of a live node", v, u);
		}
	}
}

/* ---- nodes ------------------------------------------------------------------- */

static bool verify_block(vst *s, kf_bid b, kf_nid parent);

/* Operand i of n: in range, defined earlier in this block. */
static bool check_operand(vst *s, kf_bid b, kf_nid n, uint32_t i)
{
	kf_graph *g = s->g;
	const kf_node *nd = &g->node[n];
	kf_uid u = nd->in0 + i;
	if (u >= g->nuse) {
		verr(s, nd->loc, "operand %u of '%s' has no use slot", i, opname(s, n));
		return false;
	}
	kf_vid v = g->use[u].value;
	bool ok = true;
	if (g->use[u].user != n) {
		verr(s, nd->loc, "operand %u of '%s' names another node as its user", i, opname(s, n));
		ok = false;
	}
	if (s->useen[u] == LISTED)
		s->nowned++;
	else if (!s->useen[u]) {
		verr(s, nd->loc, "operand %u of '%s' is missing from its value's use list", i, opname(s, n));
		ok = false;
	}
	if (v >= g->nval) {
		verr(s, nd->loc, "operand %u of '%s' is not a value", i, opname(s, n));
		return false;
	}
	const kf_value *val = &g->val[v];
	if (s->vdef[v] && val->blk == b)
		return ok; /* the common case, without touching the defining node */
	if (val->def != KF_NONE && val->def < g->nnode && (g->node[val->def].flags & KF_NODE_DEAD)) {
		verr(s, nd->loc, "operand %u of '%s' reads a result of an erased node", i, opname(s, n));
		return false;
	}
	if (val->blk != b) {
		if (b != 0)
			verr(s, nd->loc, "operand %u of '%s' is defined outside its region "
			     "(a body reads only its arguments and its own values)", i, opname(s, n));
		else
			verr(s, nd->loc, "operand %u of '%s' is defined inside a region", i, opname(s, n));
		return false;
	}
	verr(s, nd->loc, "operand %u of '%s' is used before its definition", i, opname(s, n));
	return false;
}

/* A static type whose byte count does not fit in int64 can be neither
 * allocated nor indexed by any backend: refused here, where every graph
 * passes (parsed, imported or rewritten), rather than wrapping later. */
static bool check_size(vst *s, kf_vid v, kf_loc at)
{
	const kf_type *t = kf_vtype(s->g, v);
	size_t es = kf_dtype_size((kf_dtype)t->dtype);
	int64_t n = kf_type_numel(t);
	if (!kf_type_is_static(t) || es == 0 || (n >= 0 && n <= INT64_MAX / (int64_t)es))
		return true;
	kf_tstr ts;
	kf_sid name = s->g->val[v].name;
	verr(s, at, "type %s of %s%s is too large: its size in bytes overflows int64", kf_ops_tstr(s->c, t, &ts),
	     name ? "%" : "a value", name ? kf_str(s->c, name) : "");
	return false;
}

/* check_size once per type: its verdict depends on the type alone. */
static void check_size_once(vst *s, kf_vid v, kf_loc at)
{
	kf_tid t = s->g->val[v].type;
	if (t < s->nsize_ok && s->size_ok[t])
		return;
	if (check_size(s, v, at) && t < s->nsize_ok)
		s->size_ok[t] = 1;
}

/* Results of n: theirs, in range; marks them defined. */
static bool define_results(vst *s, kf_bid b, kf_nid n)
{
	kf_graph *g = s->g;
	const kf_node *nd = &g->node[n];
	if (nd->res0 > g->nval || nd->nres > g->nval - nd->res0) {
		verr(s, nd->loc, "results of '%s' are not values", opname(s, n));
		return false;
	}
	bool ok = true;
	for (uint32_t i = 0; i < nd->nres; i++) {
		kf_value *v = &g->val[nd->res0 + i];
		if (v->def != n || v->idx != i || v->blk != b) {
			verr(s, nd->loc, "result %u of '%s' does not point back to its node and block", i, opname(s, n));
			ok = false;
		} else
			check_size_once(s, nd->res0 + i, nd->loc);
		s->vdef[nd->res0 + i] = 1;
	}
	return ok;
}

static bool grow_tmp(vst *s, uint32_t need)
{
	if (need <= s->tmpcap)
		return true;
	kf_type *t = realloc(s->tmp, sizeof(kf_type) * need);
	if (!t)
		return false;
	s->tmp = t;
	s->tmpcap = need;
	return true;
}

/* ---- the inference memo ------------------------------------------------------ */

static uint32_t memo_hash(const vmemo *k)
{
	uint32_t h = k->opnin * 0x9e3779b1u;
	for (int i = 0; i < MEMO_MAXIN; i++)
		h = (h ^ k->in[i]) * 0x85ebca6bu;
	return h ^ (h >> 15);
}

/* The key of node n; false when its inference may depend on more than its
 * op and its operands' types. */
static bool memo_key(vst *s, kf_nid n, vmemo *k)
{
	const kf_graph *g = s->g;
	const kf_node *nd = &g->node[n];
	if (!s->memocap || nd->nattr || nd->nres != 1 || nd->nin > MEMO_MAXIN || nd->body != KF_NONE ||
	    nd->op >= s->npure || !s->pure[nd->op])
		return false;
	*k = (vmemo){.opnin = (uint32_t)(nd->op + 1) << 2 | nd->nin};
	for (uint32_t i = 0; i < nd->nin; i++)
		k->in[i] = g->val[kf_in(g, n, i)].type;
	return true;
}

/* The entry of key k, or the empty slot where it would go. */
static vmemo *memo_slot(vmemo *tab, uint32_t cap, const vmemo *k)
{
	uint32_t mask = cap - 1;
	for (uint32_t j = memo_hash(k) & mask;; j = (j + 1) & mask) {
		vmemo *e = &tab[j];
		if (!e->opnin || (e->opnin == k->opnin && !memcmp(e->in, k->in, sizeof e->in)))
			return e;
	}
}

/* Records a key whose inference matched; without memory it records
 * nothing, which costs only time. */
static void memo_add(vst *s, const vmemo *k)
{
	if (2 * (s->nmemo + 1) > s->memocap) {
		uint32_t cap = s->memocap * 2;
		vmemo *tab = calloc(cap, sizeof *tab);
		if (!tab)
			return;
		for (uint32_t i = 0; i < s->memocap; i++)
			if (s->memo[i].opnin)
				*memo_slot(tab, cap, &s->memo[i]) = s->memo[i];
		free(s->memo);
		s->memo = tab;
		s->memocap = cap;
	}
	*memo_slot(s->memo, s->memocap, k) = *k;
	s->nmemo++;
}

/* The node's result types against its op's inference. */
static void check_types(vst *s, kf_nid n)
{
	kf_graph *g = s->g;
	const kf_node *nd = &g->node[n];
	vmemo key;
	bool memo = memo_key(s, n, &key);
	if (memo) {
		const vmemo *e = memo_slot(s->memo, s->memocap, &key);
		if (e->opnin && e->res == g->val[nd->res0].type)
			return; /* equal types are equal tids: what inference gave before */
	}
	char err[512];
	uint32_t cap = nd->nres + 1;
	if (nd->body != KF_NONE && g->blk[nd->body].last != KF_NONE)
		cap += g->node[g->blk[nd->body].last].nin;
	if (!grow_tmp(s, cap)) {
		verr(s, nd->loc, "out of memory");
		return;
	}
	int k = kf_infer(g, n, s->tmp, (int)cap, err, sizeof err);
	if (k < 0) {
		verr(s, nd->loc, "%s", err);
		return;
	}
	g = s->g;
	nd = &g->node[n];
	if ((uint32_t)k != nd->nres) {
		const char *pl = nd->nres == 1 ? "" : "s";
		if (nd->op == KF_OP_FUSION)
			verr(s, nd->loc, "'fusion' has %u result%s, but its body yields %d", nd->nres, pl, k);
		else
			verr(s, nd->loc, "'%s' has %u result%s, but its op infers %d", opname(s, n), nd->nres, pl, k);
		return;
	}
	for (uint32_t i = 0; i < nd->nres; i++) {
		const kf_type *have = kf_vtype(g, nd->res0 + i);
		kf_tstr th, tw;
		char which[24] = "";
		if (kf_type_equal(have, &s->tmp[i])) {
			if (memo) { /* one result */
				key.res = g->val[nd->res0].type;
				memo_add(s, &key);
			}
			continue;
		}
		if (nd->nres > 1)
			snprintf(which, sizeof which, " %u", i);
		verr(s, nd->loc, "'%s' result%s type %s does not match the %s %s", opname(s, n), which,
		     kf_ops_tstr(s->c, have, &th), nd->op == KF_OP_FUSION ? "type its body yields" : "inferred",
		     kf_ops_tstr(s->c, &s->tmp[i], &tw));
	}
}

/* Flags that depend on the op: terminators, region bodies, symbols. */
static bool check_shape_of_node(vst *s, kf_bid b, kf_nid n, const kf_opinfo *op)
{
	kf_graph *g = s->g;
	const kf_node *nd = &g->node[n];
	bool ok = true;
	if (op->flags & KF_OPF_TERMINATOR) {
		if (nd->next != KF_NONE) {
			verr(s, nd->loc, "'%s' must be the last node of its block", op->name);
			ok = false;
		}
		if (nd->op == KF_OP_RETURN && b != 0)
			verr(s, nd->loc, "'return' inside a region (a body ends with 'yield')");
		if (nd->op == KF_OP_YIELD && b == 0)
			verr(s, nd->loc, "'yield' outside a region (the graph ends with 'return')");
	}
	if (!(op->flags & KF_OPF_SYMBOL) && nd->sym)
		verr(s, nd->loc, "'%s' does not take a @symbol", op->name);
	if (!(op->flags & KF_OPF_REGION) && nd->body != KF_NONE) {
		verr(s, nd->loc, "'%s' does not take a region body", op->name);
		ok = false;
	}
	if (op->nres >= 0 && nd->nres != (uint32_t)op->nres) {
		verr(s, nd->loc, "'%s' has %u result%s, expected %d", op->name, nd->nres, nd->nres == 1 ? "" : "s",
		     op->nres);
		ok = false;
	}
	return ok;
}

static void verify_node(vst *s, kf_bid b, kf_nid n)
{
	kf_graph *g = s->g;
	const kf_node *nd = &g->node[n];
	if (nd->op >= kf_op_count(s->c)) {
		verr(s, nd->loc, "node has unknown op id %u", nd->op);
		define_results(s, b, n); /* spares its users a second error */
		return;
	}
	const kf_opinfo *op = kf_op(s->c, nd->op);
	bool ok = check_shape_of_node(s, b, n, op);
	for (uint32_t i = 0; i < nd->nin; i++)
		ok &= check_operand(s, b, n, i);
	/* a body sees none of the enclosing block, so it is walked before the
	 * node's results become visible */
	if (op->flags & KF_OPF_REGION) {
		if (nd->body == KF_NONE || nd->body >= g->nblk) {
			verr(s, nd->loc, "'%s' has no region body", op->name);
			ok = false;
		} else
			ok &= verify_block(s, nd->body, n);
	}
	ok &= define_results(s, b, n);
	if (ok)
		check_types(s, n);
}

/* ---- blocks and the graph ------------------------------------------------- */

static void check_return(vst *s, kf_nid r)
{
	kf_graph *g = s->g;
	const kf_node *nd = &g->node[r];
	const char *gname = kf_str(s->c, g->name);
	if (nd->nin != g->nres) {
		verr(s, nd->loc, "graph @%s returns %u value%s but declares %u result%s", gname, nd->nin,
		     nd->nin == 1 ? "" : "s", g->nres, g->nres == 1 ? "" : "s");
		return;
	}
	for (uint32_t i = 0; i < nd->nin; i++) {
		kf_uid u = nd->in0 + i;
		if (u >= g->nuse || g->use[u].value >= g->nval)
			continue; /* reported with the operands */
		kf_tid t = g->val[g->use[u].value].type;
		if (t != g->res[i]) {
			kf_tstr ta, tb;
			verr(s, nd->loc, "return operand %u has type %s but graph @%s declares %s", i,
			     kf_ops_tstr(s->c, kf_type_get(s->c, t), &ta), gname,
			     kf_ops_tstr(s->c, kf_type_get(s->c, g->res[i]), &tb));
		}
	}
}

static bool block_args(vst *s, kf_bid b, kf_loc at)
{
	kf_graph *g = s->g;
	const kf_block *bk = &g->blk[b];
	bool ok = true;
	for (uint32_t i = 0; i < bk->narg; i++) {
		kf_vid v = bk->arg[i];
		if (v >= g->nval || g->val[v].def != KF_NONE || g->val[v].idx != i || g->val[v].blk != b) {
			verr(s, at, "argument %u of block %u does not point back to its block", i, b);
			ok = false;
			continue;
		}
		check_size_once(s, v, at);
		s->vdef[v] = 1;
	}
	return ok;
}

/* Walks block b (whose owner is parent); returns false when it is malformed
 * enough that its owner's inference would only repeat the errors. */
static bool verify_block(vst *s, kf_bid b, kf_nid parent)
{
	kf_graph *g = s->g;
	kf_loc at = parent == KF_NONE ? g->loc : g->node[parent].loc;
	if (s->bseen[b]) {
		verr(s, at, "block %u is the body of more than one node", b);
		return false;
	}
	s->bseen[b] = 1;
	bool ok = block_args(s, b, at);
	if (g->blk[b].parent != parent) {
		verr(s, at, "block %u does not point back to its owner", b);
		ok = false;
	}
	kf_nid prev = KF_NONE;
	for (kf_nid n = g->blk[b].first; n != KF_NONE; n = g->node[n].next) {
		if (n >= g->nnode || s->nseen[n]) {
			verr(s, at, "node list of block %u is %s", b, n >= g->nnode ? "broken" : "cyclic");
			return false;
		}
		s->nseen[n] = 1;
		const kf_node *nd = &g->node[n];
		if (nd->flags & KF_NODE_DEAD) {
			verr(s, nd->loc, "erased node '%s' is still in the list of block %u", opname(s, n), b);
		} else {
			/* the walk follows next links; wrong back links are
			 * reported, and the node is still checked */
			if (nd->blk != b || nd->prev != prev)
				verr(s, nd->loc, "node '%s' has wrong block or back links", opname(s, n));
			verify_node(s, b, n);
		}
		prev = n;
	}
	if (g->blk[b].last != prev) {
		verr(s, at, "block %u's last node is not the end of its list", b);
		return false;
	}
	bool top = parent == KF_NONE;
	int want = top ? KF_OP_RETURN : KF_OP_YIELD;
	if (prev == KF_NONE || g->node[prev].op != want) {
		if (top)
			verr(s, at, "graph @%s does not end with 'return'", kf_str(s->c, g->name));
		else
			verr(s, at, "'%s' body does not end with 'yield'", opname(s, parent));
		return false;
	}
	if (top)
		check_return(s, prev);
	return ok;
}

/* Live nodes the walk did not reach are neither in a list nor erased. */
static void check_unreached(vst *s)
{
	kf_graph *g = s->g;
	for (kf_nid n = 0; n < g->nnode; n++)
		if (!s->nseen[n] && !(g->node[n].flags & KF_NODE_DEAD))
			verr(s, g->node[n].loc, "node '%s' is in no block's list but was not erased", opname(s, n));
}

/* The memos; where memory is short they stay empty and every check runs. */
static void memo_init(vst *s)
{
	uint32_t nops = kf_op_count(s->c);
	s->size_ok = calloc(s->c->ntype + 1, 1);
	s->nsize_ok = s->size_ok ? s->c->ntype : 0;
	s->pure = calloc(nops + 1, 1);
	s->memo = calloc(64, sizeof *s->memo);
	if (!s->pure || !s->memo)
		return;
	s->npure = nops;
	s->memocap = 64;
	for (uint32_t op = 0; op < nops; op++)
		s->pure[op] = kf_infer_types_only(kf_op(s->c, (int)op));
}

int kf_verify(kf_graph *g)
{
	vst s = {.g = g, .c = g->ctx};
	s.vdef = calloc(g->nval + 1, 1);
	s.nseen = calloc(g->nnode + 1, 1);
	s.bseen = calloc(g->nblk + 1, 1);
	s.useen = calloc(g->nuse + 1, 1);
	if (!s.vdef || !s.nseen || !s.bseen || !s.useen)
		verr(&s, g->loc, "out of memory verifying graph @%s", kf_str(g->ctx, g->name));
	else if (g->nblk == 0)
		verr(&s, g->loc, "graph @%s has no body", kf_str(g->ctx, g->name));
	else {
		memo_init(&s);
		check_use_lists(&s);
		verify_block(&s, 0, KF_NONE);
		check_unreached(&s);
		if (s.nowned != s.nlisted)
			find_stray(&s);
	}
	free(s.vdef);
	free(s.nseen);
	free(s.bseen);
	free(s.useen);
	free(s.tmp);
	free(s.size_ok);
	free(s.pure);
	free(s.memo);
	return s.nerr > MAX_ERRORS ? MAX_ERRORS + 1 : s.nerr;
}
