/* rewrite_match.c: the matcher of the rewrite engine.
 *
 * A backtracking solver over a stack of goals (pattern value, graph value):
 * a commutative op pushes its operands in one order and, when the rest of
 * the pattern fails, in the other, so a choice deep in the pattern is
 * revisited after a later sibling failed.  Each level undoes only what it
 * bound itself, so no trail is needed.
 *
 * The head of an associative-commutative chain in the pattern (rewrite.c
 * flattens `(a*b)*c` into {a, b, c}) is matched against every way of
 * cutting the graph's chain of that op into as many operands (expanding
 * inner nodes nothing else reads), and every assignment of the pattern's
 * operands to the pieces: any grouping and order of the graph matches.
 *
 * The search ends at a complete match only when the caller's accept says
 * so: a where() or a replacement that declines sends the solver on to the
 * next binding, so a constraint that holds for one operand order only is
 * still found whichever order the graph has.  When everything fails, the
 * reason reported is the one at the deepest point the search reached (the
 * most pattern nodes matched), not the last one tried.
 */
#include <stdlib.h>
#include <string.h>

#include "kf_int.h"
#include "rewrite_int.h"

/* Bounds on one match attempt: solver steps, and complete matches offered
 * to accept (each may enter Lua).  A pattern that needs more gives up with
 * a reason rather than running away. */
#define MATCH_STEPS KF_MATCH_STEPS
#define MATCH_LEAVES 64

/* ---- the solver ---------------------------------------------------------------------- */

typedef struct goal {
	kf_pv pv;
	kf_vid v;
	kf_nid parent;
} goal;

typedef struct solver {
	const kf_graph *g;
	const kf_pattern *p;
	const kf_rule *r;
	double rtol;
	kf_match *m;
	kf_rw_accept_fn accept;
	void *ud;
	kf_nid pmap[KF_PAT_MAXNODE];
	goal goal[4 * KF_PAT_MAXNODE + 8];
	uint32_t ngoal;
	kf_nid inner[KF_PAT_MAXNODE];   /* AC chains' inner graph nodes on this path */
	uint32_t ninner;
	uint32_t depth;                 /* pattern nodes matched on this path */
	kf_rw_tvars tv;                       /* type variables bound on this path */
	uint32_t steps, leaves;
	int status;                     /* 0 searching, 1 accepted, -1 error, 2 gave up */
	const char *gave_up;            /* why, when it gave up */
	uint64_t declined[8];           /* bindings accept declined (not offered twice) */
	uint32_t ndeclined;
} solver;

static bool solve(solver *s);

/* Records why the search failed here when it got further than before. */
static bool fail(solver *s, uint32_t pn, kf_vid v, const char *why)
{
	kf_match *m = s->m;
	if (!m->why || s->depth > m->why_depth) {
		m->why = why;
		m->why_pn = pn;
		m->why_v = v;
		m->why_depth = s->depth;
	}
	return false;
}

/* fail() with a reason of its own text. */
static bool fail_text(solver *s, uint32_t pn, kf_vid v, const char *text)
{
	kf_match *m = s->m;
	if (!m->why || s->depth > m->why_depth) {
		snprintf(m->why_text, sizeof m->why_text, "%s", text);
		return fail(s, pn, v, m->why_text);
	}
	return false;
}

static bool push_goal(solver *s, kf_pv pv, kf_vid v, kf_nid parent)
{
	if (s->ngoal >= sizeof s->goal / sizeof s->goal[0])
		return false;
	s->goal[s->ngoal++] = (goal){pv, v, parent};
	return true;
}

static bool in_set(const kf_nid *set, uint32_t n, kf_nid x)
{
	for (uint32_t i = 0; i < n; i++)
		if (set[i] == x)
			return true;
	return false;
}

static bool type_fail(solver *s, uint32_t pi, kf_vid v, const kf_ptype *pt)
{
	if (s->m->why && s->depth <= s->m->why_depth)
		return false;
	kf_buf b = {0}, t = {0};
	kf_rwa_ptype_str(&b, s->p, pt);
	kf_rw_type_str(&t, s->g->ctx, kf_V(s->g, v)->type);
	char text[160];
	snprintf(text, sizeof text, "a value of type %s, not %s%s", t.p, b.p,
		 s->tv.bound ? " (with the type variables bound so far)" : "");
	kf_buf_free(&b);
	kf_buf_free(&t);
	return fail_text(s, pi, v, text);
}

/* Pattern attributes against node n's; a string attribute naming a dtype
 * type variable (`cast(x, {to = "T"})`) binds it. */
static bool attrs_ok(solver *s, const kf_pnode *pn, kf_nid n, uint32_t *newly)
{
	const kf_graph *g = s->g;
	const kf_node *nd = kf_N(g, n);
	int rank = nd->nin ? kf_vtype(g, kf_in(g, n, 0))->rank : 0;
	for (uint32_t i = 0; i < pn->nattr; i++) {
		const kf_attrval *pa = &pn->attr[i].v;
		const char *key = kf_str(g->ctx, pn->attr[i].key);
		const kf_attrval *na = NULL;
		kf_attrval dflt;
		for (uint32_t k = 0; k < nd->nattr; k++)
			if (nd->attr[k].key == pn->attr[i].key)
				na = &nd->attr[k].v;
		if (!na) {
			if (!kf_rwa_attr_default(g->ctx, nd->op, key, &dflt))
				return false;
			na = &dflt;
		}
		int tv = pa->kind == KF_ATTR_STR && s->p->ntvar ? kf_pat_tvar_find(s->p, pa->s) : -1;
		if (tv >= 0 && s->p->tvkind[tv] == KF_TV_DTYPE) {
			int dt = na->kind == KF_ATTR_STR ? kf_dtype_parse(kf_str(g->ctx, na->s), kf_strlen(g->ctx, na->s)) : -1;
			if (dt < 0 || !kf_rwa_bind_tv(&s->tv, tv, dt, newly))
				return false;
			continue;
		}
		bool axes = !strcmp(key, "axes") || (!strcmp(key, "axis") && nd->op != KF_OP_CONCAT);
		if (!kf_rwa_attr_match(pa, na, axes, rank, s->rtol))
			return false;
	}
	return true;
}

/* ---- complete matches ---- */

/* Interior values (results of matched nodes that are not pattern outputs)
 * may be read only by matched nodes. */
static bool interior_ok(const kf_graph *g, kf_match *m)
{
	for (uint32_t i = 0; i < m->nnode; i++) {
		const kf_node *nd = kf_N(g, m->node[i]);
		for (uint32_t r = 0; r < nd->nres; r++) {
			kf_vid v = nd->res0 + r;
			if (in_set(m->out, m->nout, v))
				continue;
			kf_foreach_use(g, v, u)
				if (!in_set(m->node, m->nnode, g->use[u].user))
					return false;
		}
	}
	return true;
}

static uint64_t binding_hash(const kf_match *m)
{
	uint64_t h = KF_HASH_SEED;
	h = kf_hash_bytes(m->bind, m->nbind * sizeof *m->bind, h);
	h = kf_hash_bytes(m->tval, m->ntval * sizeof *m->tval, h);
	h = kf_hash_bytes(m->seq, m->nseq * sizeof *m->seq, h);
	return kf_hash_bytes(m->node, m->nnode * sizeof *m->node, h);
}

/* Every goal is met: fill in the match, check its interior, offer it. */
static bool complete(solver *s)
{
	const kf_pattern *p = s->p;
	const kf_graph *g = s->g;
	kf_match *m = s->m;
	uint32_t root = KF_PV_NODE(p->out[0]);
	for (uint32_t k = 0; k < p->nout; k++)
		m->out[k] = kf_res(g, s->pmap[KF_PV_NODE(p->out[k])], KF_PV_RES(p->out[k]));
	m->nnode = 0;
	for (uint32_t i = 0; i < p->nnode; i++)
		if (p->node[i].kind == KF_PN_OP && s->pmap[i] != KF_NONE && !in_set(m->node, m->nnode, s->pmap[i]))
			m->node[m->nnode++] = s->pmap[i];
	for (uint32_t i = 0; i < s->ninner; i++)
		if (!in_set(m->node, m->nnode, s->inner[i]) && m->nnode < KF_PAT_MAXNODE)
			m->node[m->nnode++] = s->inner[i];
	m->ntval = p->ntvar;
	memcpy(m->tval, s->tv.val, sizeof m->tval);
	if (!s->r->keep_interior && !interior_ok(g, m))
		return fail(s, root, KF_NONE, "an interior value is used outside the match");
	if (!s->accept) {
		s->status = 1;
		return true;
	}
	/* the same binding reached by another path (x * x matched both ways)
	 * is not offered twice */
	uint64_t h = binding_hash(m);
	for (uint32_t i = 0; i < s->ndeclined; i++)
		if (s->declined[i] == h)
			return false;
	if (++s->leaves > MATCH_LEAVES) {
		s->status = 2;
		s->gave_up = "gave up: 64 complete matches were declined";
		return true;
	}
	m->declined = NULL;
	int k = s->accept(s->ud, m);
	if (k != 0) {
		s->status = k > 0 ? 1 : -1;
		return true;
	}
	if (s->ndeclined < sizeof s->declined / sizeof s->declined[0])
		s->declined[s->ndeclined++] = h;
	return fail_text(s, root, KF_NONE, m->declined ? m->declined : "declined");
}

/* ---- associative-commutative chains ---- */

/* The op a pattern value needs of its graph value: -1 anything. */
static int want_op(const kf_pattern *p, kf_pv pv)
{
	const kf_pnode *pn = &p->node[KF_PV_NODE(pv)];
	return pn->kind == KF_PN_OP ? pn->op : pn->kind == KF_PN_CONST ? KF_OP_CONST : -1;
}

static bool op_fits(int want, const kf_graph *g, kf_vid v)
{
	kf_nid d = kf_def(g, v);
	return want < 0 || (d != KF_NONE && kf_N(g, d)->op == want);
}

/* The node of v when it is an inner node of a chain of op that a cut may
 * open: same op, nothing else reads it (unless keep_interior). */
static kf_nid opens(const kf_graph *g, int op, kf_vid v, bool keep_interior)
{
	kf_nid d = kf_def(g, v);
	if (d == KF_NONE)
		return KF_NONE;
	const kf_node *nd = kf_N(g, d);
	if (nd->op != op || nd->nin != 2 || nd->nres != 1 || nd->nattr)
		return KF_NONE;
	kf_uid u = g->val[v].first_use;
	if (!keep_interior && (u == KF_NONE || g->use[u].next != KF_NONE))
		return KF_NONE;
	return d;
}

/* Assigns the pattern's leaves li.. to unused pieces, most constrained
 * leaf first, then solves.  asg[i] is the piece leaf i took: a variable
 * that occurs twice in the chain takes equal pieces, and one leaf that
 * occurs twice (a shared subpattern) takes them in order, so neither is
 * tried in every permutation. */
static bool ac_assign(solver *s, const kf_pnode *pn, kf_nid head, const kf_vid *piece, uint32_t li,
		      uint32_t used, uint8_t *asg)
{
	if (li == pn->nleaf) {
		/* solved most constrained first (the stack pops the last
		 * pushed), so that a failure is met as deep as it lies */
		goal *gl = &s->goal[s->ngoal - pn->nleaf];
		for (uint32_t i = 0, j = pn->nleaf - 1; i < j; i++, j--) {
			goal t = gl[i];
			gl[i] = gl[j];
			gl[j] = t;
		}
		if (solve(s))
			return true;
		for (uint32_t i = 0, j = pn->nleaf - 1; i < j; i++, j--) {
			goal t = gl[i];
			gl[i] = gl[j];
			gl[j] = t;
		}
		return false;
	}
	kf_pv lv = pn->leaf[li];
	const kf_pnode *leaf = &s->p->node[KF_PV_NODE(lv)];
	int want = want_op(s->p, lv);
	kf_vid bound = leaf->kind == KF_PN_VAR ? s->m->bind[leaf->var] : KF_NONE;
	uint32_t from = 0;
	for (uint32_t k = 0; k < li; k++)
		if (pn->leaf[k] == lv) {
			if (leaf->kind == KF_PN_VAR)
				bound = piece[asg[k]];
			else
				from = asg[k] + 1u;
		}
	for (uint32_t j = from; j < pn->nleaf; j++) {
		if (used & (1u << j))
			continue;
		bool dup = false; /* equal pieces are one choice */
		for (uint32_t k = 0; k < j && !dup; k++)
			dup = !(used & (1u << k)) && piece[k] == piece[j];
		if (dup || !op_fits(want, s->g, piece[j]) || (bound != KF_NONE && bound != piece[j]))
			continue;
		if (!push_goal(s, lv, piece[j], head))
			return false;
		asg[li] = (uint8_t)j;
		if (ac_assign(s, pn, head, piece, li + 1, used | (1u << j), asg))
			return true;
		s->ngoal--;
	}
	return false;
}

/* Cuts the graph chain into pn->nleaf pieces, opening inner nodes at
 * positions pos.. (each cut once: positions are opened left to right). */
static bool ac_cut(solver *s, const kf_pnode *pn, kf_nid head, const kf_vid *piece, uint32_t np,
		   uint32_t pos)
{
	if (np == pn->nleaf) {
		uint8_t asg[KF_AC_MAXLEAF];
		return ac_assign(s, pn, head, piece, 0, 0, asg);
	}
	for (; pos < np; pos++) {
		kf_nid d = opens(s->g, pn->op, piece[pos], s->r->keep_interior);
		if (d == KF_NONE)
			continue;
		if (++s->steps > MATCH_STEPS) {
			s->status = 2;
			s->gave_up = "gave up: the search took too many steps";
			return true;
		}
		kf_vid q[KF_AC_MAXLEAF];
		memcpy(q, piece, pos * sizeof *q);
		q[pos] = kf_in(s->g, d, 0);
		q[pos + 1] = kf_in(s->g, d, 1);
		memcpy(q + pos + 2, piece + pos + 1, (np - pos - 1) * sizeof *q);
		s->inner[s->ninner++] = d;
		if (ac_cut(s, pn, head, q, np + 1, pos))
			return true;
		s->ninner--;
	}
	return false;
}

/* ---- goals ---- */

static bool try_seq(solver *s, const goal *gl, uint32_t pi, const kf_pnode *pn, kf_nid n, uint32_t si);

static bool try_op(solver *s, const goal *gl, uint32_t pi, const kf_pnode *pn)
{
	const kf_graph *g = s->g;
	kf_nid n = kf_def(g, gl->v);
	if (n == KF_NONE)
		return fail(s, pi, gl->v, "an argument of the graph, not an op");
	/* copies: accept may create nodes, and the node array may move */
	uint32_t op = kf_N(g, n)->op, nin = kf_N(g, n)->nin;
	int si = -1; /* the position of `...` among the pattern's operands */
	for (uint32_t i = 0; s->p->seqvar >= 0 && i < pn->nin; i++)
		if (s->p->node[KF_PV_NODE(pn->in[i])].seq)
			si = (int)i;
	if (op != pn->op)
		return fail(s, pi, gl->v, "a different op");
	if (kf_V(g, gl->v)->idx != KF_PV_RES(gl->pv) || (si < 0 ? nin != pn->nin : nin + 1 < pn->nin))
		return fail(s, pi, gl->v, "a different result or operand count");
	if (si >= 0)
		return try_seq(s, gl, pi, pn, n, (uint32_t)si);
	if (s->pmap[pi] != KF_NONE)
		return s->pmap[pi] == n ? solve(s) : fail(s, pi, gl->v, "one pattern node, two graph nodes");
	uint32_t newly = 0;
	if (!attrs_ok(s, pn, n, &newly)) {
		kf_rwa_unbind_tv(&s->tv, newly);
		return fail(s, pi, gl->v, "attributes differ");
	}
	s->pmap[pi] = n;
	s->depth += pn->weight;
	uint32_t base = s->ngoal, ninner = s->ninner;
	bool ok = false;
	if (pn->nleaf) {
		kf_vid piece[2] = {kf_in(g, n, 0), kf_in(g, n, 1)};
		ok = ac_cut(s, pn, n, piece, 2, 0);
		if (!ok)
			fail(s, pi, gl->v, "no grouping or order of the chain's operands fits");
	} else {
		bool comm = nin == 2 && (kf_op(g->ctx, (int)op)->flags & KF_OPF_COMMUTATIVE);
		for (int order = 0; order < (comm ? 2 : 1) && !ok; order++) {
			bool pushed = true;
			for (uint32_t i = nin; i-- > 0;) {
				uint32_t k = order ? nin - 1 - i : i;
				pushed = pushed && push_goal(s, pn->in[i], kf_in(g, n, k), n);
			}
			ok = pushed && solve(s);
			if (!ok)
				s->ngoal = base;
		}
	}
	if (ok)
		return true;
	s->ninner = ninner;
	s->depth -= pn->weight;
	s->pmap[pi] = KF_NONE;
	kf_rwa_unbind_tv(&s->tv, newly);
	return false;
}

/* A node whose pattern has `...` at operand si: the operands before and
 * after it match in place, and it takes the ones between (no commutative
 * orders: the operands of a variadic op have their places). */
static bool try_seq(solver *s, const goal *gl, uint32_t pi, const kf_pnode *pn, kf_nid n, uint32_t si)
{
	const kf_graph *g = s->g;
	kf_match *m = s->m;
	uint32_t nin = kf_N(g, n)->nin, nrest = nin + 1 - pn->nin;
	if (s->pmap[pi] != KF_NONE)
		return s->pmap[pi] == n ? solve(s) : fail(s, pi, gl->v, "one pattern node, two graph nodes");
	if (nrest > sizeof m->seq / sizeof m->seq[0])
		return fail(s, pi, gl->v, "more operands than '...' holds (64)");
	uint32_t newly = 0;
	if (!attrs_ok(s, pn, n, &newly)) {
		kf_rwa_unbind_tv(&s->tv, newly);
		return fail(s, pi, gl->v, "attributes differ");
	}
	for (uint32_t i = 0; i < nrest; i++)
		m->seq[i] = kf_in(g, n, si + i);
	m->nseq = nrest;
	m->seqbound = true;
	s->pmap[pi] = n;
	s->depth += 2; /* the node and `...` */
	uint32_t base = s->ngoal;
	bool ok = true;
	for (uint32_t i = pn->nin; ok && i-- > 0;)
		if (i != si)
			ok = push_goal(s, pn->in[i], kf_in(g, n, i < si ? i : i + nrest - 1), n);
	if (ok && solve(s))
		return true;
	s->ngoal = base;
	s->depth -= 2;
	s->pmap[pi] = KF_NONE;
	m->seqbound = false;
	kf_rwa_unbind_tv(&s->tv, newly);
	return false;
}

static bool try_const(solver *s, const goal *gl, uint32_t pi, const kf_pnode *pn)
{
	const kf_graph *g = s->g;
	kf_nid n = kf_def(g, gl->v);
	double x;
	if (n == KF_NONE || kf_N(g, n)->op != KF_OP_CONST || !kf_rwa_const_scalar(g, n, &x))
		return fail(s, pi, gl->v, "not a constant with one value");
	const kf_type *t = kf_vtype(g, gl->v);
	uint32_t newly = 0;
	if (pn->cdtype >= 0 ? t->dtype != pn->cdtype
			    : pn->cdtype <= -2 && !kf_rwa_bind_tv(&s->tv, -2 - pn->cdtype, t->dtype, &newly))
		return fail(s, pi, gl->v, "a constant of another dtype");
	/* an f16/bf16 graph's constant is the pattern's when both round to
	 * the same value of its type (an f16 export's gelu writes 0.04471 for
	 * 0.044715, 1e-4 away; the literal is kept as written, its value is
	 * its rounding) */
	kf_dtype dt = (kf_dtype)t->dtype;
	bool low = dt == KF_F16 || dt == KF_BF16;
	if (!kf_rwa_close_to(x, pn->cval, s->rtol) &&
	    !(low && kf_round_to_dtype(pn->cval, dt) == kf_round_to_dtype(x, dt))) {
		kf_rwa_unbind_tv(&s->tv, newly);
		return fail(s, pi, gl->v, "a constant of another value");
	}
	if (gl->parent != KF_NONE && !kf_rwa_broadcasts_into(t, kf_vtype(g, kf_N(g, gl->parent)->res0))) {
		kf_rwa_unbind_tv(&s->tv, newly);
		return fail(s, pi, gl->v, "a constant that widens its user's shape");
	}
	s->depth++;
	if (solve(s))
		return true;
	s->depth--;
	kf_rwa_unbind_tv(&s->tv, newly);
	return false;
}

static bool try_var(solver *s, const goal *gl, uint32_t pi, const kf_pnode *pn)
{
	kf_vid *b = &s->m->bind[pn->var];
	if (*b != KF_NONE)
		return *b == gl->v ? solve(s) : fail(s, pi, gl->v, "a variable bound to two values");
	const kf_ptype *pt = s->p->vtype ? s->p->vtype[pn->var] : NULL;
	uint32_t newly = 0;
	if (pt && !kf_rwa_type_ok(&s->tv, pt, kf_vtype(s->g, gl->v), &newly))
		return type_fail(s, pi, gl->v, pt);
	*b = gl->v;
	s->depth++;
	if (solve(s))
		return true;
	s->depth--;
	*b = KF_NONE;
	kf_rwa_unbind_tv(&s->tv, newly);
	return false;
}

static bool solve(solver *s)
{
	if (s->status)
		return true; /* unwinding after an accept, an error or giving up */
	if (s->ngoal == 0)
		return complete(s);
	if (++s->steps > MATCH_STEPS) {
		s->status = 2;
		s->gave_up = "gave up: the search took too many steps";
		return true;
	}
	goal gl = s->goal[--s->ngoal];
	uint32_t pi = KF_PV_NODE(gl.pv);
	const kf_pnode *pn = &s->p->node[pi];
	bool ok = pn->kind == KF_PN_VAR ? try_var(s, &gl, pi, pn)
		: pn->kind == KF_PN_CONST ? try_const(s, &gl, pi, pn) : try_op(s, &gl, pi, pn);
	if (ok)
		return true;
	s->goal[s->ngoal++] = gl;
	return false;
}

/* ---- entry points ---- */

uint32_t kf_rw_ac_pieces(const kf_graph *g, kf_nid n, uint32_t nleaf, int *have, uint32_t *most)
{
	kf_vid stack[KF_AC_MAXPIECES];
	uint8_t lvl[KF_AC_MAXPIECES];
	uint32_t ns = 0, nh = 0;
	int op = kf_N(g, n)->op;
	*most = 0;
	stack[ns] = kf_in(g, n, 0), lvl[ns++] = 0;
	stack[ns] = kf_in(g, n, 1), lvl[ns++] = 0;
	while (ns) {
		kf_vid v = stack[--ns];
		uint8_t l = lvl[ns];
		kf_nid d = kf_def(g, v);
		have[nh++] = d == KF_NONE ? -1 : kf_N(g, d)->op;
		/* a superset of what ac_cut opens: uses are not counted */
		if ((uint32_t)l + 2 < nleaf && opens(g, op, v, true) != KF_NONE) {
			stack[ns] = kf_in(g, d, 0), lvl[ns++] = (uint8_t)(l + 1);
			stack[ns] = kf_in(g, d, 1), lvl[ns++] = (uint8_t)(l + 1);
		} else {
			++*most; /* the most pieces: every openable node opened */
		}
	}
	return nh;
}

bool kf_rw_ac_fits(const kf_pattern *p, const kf_pnode *root, const int *have, uint32_t nh, uint32_t most)
{
	if (most < root->nleaf)
		return false;
	for (uint32_t i = 0; i < root->nleaf; i++) {
		int w = want_op(p, root->leaf[i]);
		bool found = w < 0;
		for (uint32_t k = 0; k < nh && !found; k++)
			found = have[k] == w;
		if (!found)
			return false;
	}
	return true;
}

bool kf_rw_may_match(const kf_graph *g, const kf_rule *r, kf_nid n)
{
	const kf_pattern *p = r->pat;
	const kf_pnode *root = &p->node[KF_PV_NODE(p->out[0])];
	const kf_node *nd = kf_N(g, n);
	bool seq = false;
	for (uint32_t i = 0; p->seqvar >= 0 && i < root->nin; i++)
		seq |= p->node[KF_PV_NODE(root->in[i])].seq;
	if (nd->op != root->op || (seq ? nd->nin + 1 < root->nin : nd->nin != root->nin))
		return false;
	if (seq)
		return true;
	if (root->nleaf) {
		int have[KF_AC_MAXPIECES];
		uint32_t most, nh = kf_rw_ac_pieces(g, n, root->nleaf, have, &most);
		return kf_rw_ac_fits(p, root, have, nh, most);
	}
	if (root->nin != 2)
		return true;
	/* most candidates fail on the ops of the root's operands (either order
	 * for a commutative root) */
	int w0 = want_op(p, root->in[0]), w1 = want_op(p, root->in[1]);
	kf_vid a = kf_in(g, n, 0), b = kf_in(g, n, 1);
	if (op_fits(w0, g, a) && op_fits(w1, g, b))
		return true;
	return (kf_op(g->ctx, nd->op)->flags & KF_OPF_COMMUTATIVE) && op_fits(w0, g, b) && op_fits(w1, g, a);
}

int kf_rw_match(kf_graph *g, const kf_rule *r, kf_nid n, kf_match *m, kf_rw_accept_fn accept, void *ud)
{
	const kf_pattern *p = r->pat;
	kf_pv root = p->out[0];
	m->why = NULL;
	m->why_pn = KF_PV_NODE(root);
	m->why_v = KF_NONE;
	m->why_depth = 0;
	m->declined = NULL;
	m->nbind = p->nvar;
	m->nseq = 0;
	m->seqbound = false;
	m->nout = p->nout;
	m->nnode = 0;
	m->ntval = p->ntvar;
	solver s;
	s.g = g;
	s.p = p;
	s.r = r;
	s.rtol = r->rtol > 0 ? r->rtol : 1e-6;
	s.m = m;
	s.accept = accept;
	s.ud = ud;
	s.ngoal = s.ninner = s.depth = s.tv.bound = s.steps = s.leaves = s.ndeclined = 0;
	s.status = 0;
	s.gave_up = NULL;
	for (uint32_t i = 0; i < p->nvar; i++)
		m->bind[i] = KF_NONE;
	for (uint32_t i = 0; i < p->nnode; i++)
		s.pmap[i] = KF_NONE;
	m->steps = 0;
	if (KF_PV_RES(root) >= kf_N(g, n)->nres) {
		fail(&s, KF_PV_NODE(root), KF_NONE, "a node with fewer results");
		return 0;
	}
	push_goal(&s, root, kf_res(g, n, KF_PV_RES(root)), KF_NONE);
	solve(&s);
	m->steps = s.steps;
	if (s.status == 2)
		m->why = s.gave_up; /* the cause, however far the search got */
	return s.status == 1 ? 1 : s.status < 0 ? -1 : 0;
}
