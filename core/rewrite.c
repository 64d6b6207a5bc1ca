/* rewrite.c: pattern graphs and the matcher (rewrite_build.c builds
 * replacements, rewrite_driver.c applies rules to a graph).
 *
 * The matcher is a backtracking solver over a stack of goals (pattern value,
 * graph value): a commutative op pushes its operands in one order and, when
 * the rest of the pattern fails, in the other, so a choice deep in the
 * pattern can be revisited after a later sibling failed.  Each level undoes
 * only what it bound itself, so no trail is needed.  The recursion depth is
 * the number of goals on the success path: bounded by the pattern size.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kf_int.h"
#include "rewrite.h"

/* ---- pattern graphs ------------------------------------------------------ */

kf_pattern *kf_pat_new(kf_ctx *c)
{
	kf_pattern *p = kf_xrealloc(NULL, sizeof *p);
	memset(p, 0, sizeof *p);
	p->ctx = c;
	return p;
}

void kf_pat_free(kf_pattern *p)
{
	if (!p)
		return;
	free(p->node);
	free(p->varname);
	kf_arena_free(&p->arena);
	free(p);
}

static uint32_t pnode_new(kf_pattern *p, uint8_t kind)
{
	kf_grow((void **)&p->node, &p->capnode, p->nnode + 1, sizeof *p->node);
	kf_pnode *pn = &p->node[p->nnode];
	memset(pn, 0, sizeof *pn);
	pn->kind = kind;
	pn->cdtype = -1;
	return p->nnode++;
}

kf_pv kf_pat_var(kf_pattern *p, const char *name)
{
	uint32_t i = pnode_new(p, KF_PN_VAR);
	kf_grow((void **)&p->varname, &p->capvar, p->nvar + 1, sizeof *p->varname);
	p->varname[p->nvar] = kf_strdup_arena(&p->arena, name, strlen(name));
	p->node[i].var = p->nvar++;
	return KF_PV(i, 0);
}

kf_pv kf_pat_const(kf_pattern *p, double v, int dtype)
{
	uint32_t i = pnode_new(p, KF_PN_CONST);
	p->node[i].cval = v;
	p->node[i].cdtype = dtype;
	return KF_PV(i, 0);
}

/* Deep copy of an attribute value into the pattern's arena. */
static kf_attrval attr_copy(kf_arena *a, const kf_attrval *v)
{
	kf_attrval r = *v;
	if (v->kind == KF_ATTR_LIST && v->n) {
		r.list = kf_alloc(a, v->n * sizeof *r.list);
		for (uint32_t i = 0; i < v->n; i++)
			r.list[i] = attr_copy(a, &v->list[i]);
	}
	return r;
}

kf_pv kf_pat_op(kf_pattern *p, int op, const kf_pv *in, uint32_t nin,
		const kf_attr *attr, uint32_t nattr, uint32_t nres)
{
	uint32_t i = pnode_new(p, KF_PN_OP);
	kf_pnode *pn = &p->node[i];
	const kf_opinfo *oi = kf_op(p->ctx, op);
	pn->op = (uint16_t)op;
	pn->nres = (uint8_t)(nres ? nres : oi->nres > 0 ? (uint32_t)oi->nres : oi->nres == 0 ? 0 : 1);
	pn->nin = nin;
	pn->in = kf_alloc(&p->arena, (nin ? nin : 1) * sizeof *pn->in);
	memcpy(pn->in, in, nin * sizeof *in);
	pn->nattr = nattr;
	pn->attr = kf_alloc(&p->arena, (nattr ? nattr : 1) * sizeof *pn->attr);
	for (uint32_t k = 0; k < nattr; k++) {
		pn->attr[k].key = attr[k].key;
		pn->attr[k].v = attr_copy(&p->arena, &attr[k].v);
	}
	return KF_PV(i, 0);
}

static void mark_reach(const kf_pattern *p, uint32_t pn, uint8_t *seen)
{
	if (seen[pn])
		return;
	seen[pn] = 1;
	for (uint32_t i = 0; i < p->node[pn].nin; i++)
		mark_reach(p, KF_PV_NODE(p->node[pn].in[i]), seen);
}

int kf_pat_set_outputs(kf_pattern *p, const kf_pv *out, uint32_t n, char *err, size_t errlen)
{
	if (n == 0 || n > KF_PAT_MAXOUT) {
		snprintf(err, errlen, "a pattern needs 1 to %d outputs, not %u", KF_PAT_MAXOUT, n);
		return -1;
	}
	if (p->nnode > KF_PAT_MAXNODE || p->nvar > KF_PAT_MAXNODE) {
		snprintf(err, errlen, "the pattern is too large (%u nodes, at most %d)", p->nnode,
			 KF_PAT_MAXNODE);
		return -1;
	}
	memcpy(p->out, out, n * sizeof *out);
	p->nout = n;
	uint8_t seen[KF_PAT_MAXNODE] = {0};
	mark_reach(p, KF_PV_NODE(out[0]), seen);
	for (uint32_t k = 1; k < n; k++) {
		uint32_t pn = KF_PV_NODE(out[k]);
		if (!seen[pn] || p->node[pn].kind != KF_PN_OP) {
			snprintf(err, errlen, "pattern output %u is not computed on the way to output 1 "
				 "(the root): every output must be an op inside the first one's pattern", k + 1);
			return -1;
		}
	}
	return 0;
}

int kf_pat_depth(const kf_pattern *p)
{
	/* nodes are in trace order, so operands come first */
	int depth[KF_PAT_MAXNODE] = {0}, best = 0;
	for (uint32_t i = 0; i < p->nnode && i < KF_PAT_MAXNODE; i++) {
		const kf_pnode *pn = &p->node[i];
		if (pn->kind != KF_PN_OP)
			continue;
		int d = 0;
		for (uint32_t k = 0; k < pn->nin; k++) {
			uint32_t c = KF_PV_NODE(pn->in[k]);
			if (c < i && depth[c] > d)
				d = depth[c];
		}
		depth[i] = d + 1;
		if (depth[i] > best)
			best = depth[i];
	}
	return best;
}

static void pat_print_pv(kf_buf *out, const kf_pattern *p, kf_pv pv)
{
	const kf_pnode *pn = &p->node[KF_PV_NODE(pv)];
	switch (pn->kind) {
	case KF_PN_VAR: kf_buf_puts(out, p->varname[pn->var]); break;
	case KF_PN_CONST: kf_buf_float(out, pn->cval, KF_F64); break;
	default:
		kf_buf_puts(out, kf_op(p->ctx, pn->op)->name);
		kf_buf_putc(out, '(');
		for (uint32_t i = 0; i < pn->nin; i++) {
			if (i)
				kf_buf_puts(out, ", ");
			pat_print_pv(out, p, pn->in[i]);
		}
		kf_buf_putc(out, ')');
	}
}

void kf_pat_print(kf_buf *out, const kf_pattern *p)
{
	for (uint32_t k = 0; k < p->nout; k++) {
		if (k)
			kf_buf_puts(out, ", ");
		pat_print_pv(out, p, p->out[k]);
	}
}

/* ---- rule sets ----------------------------------------------------------- */

void kf_ruleset_add(kf_ruleset *s, kf_rule *r)
{
	kf_grow((void **)&s->rule, &s->cap, s->n + 1, sizeof *s->rule);
	s->rule[s->n++] = r;
}

void kf_ruleset_free(kf_ruleset *s)
{
	free(s->rule);
	memset(s, 0, sizeof *s);
}

/* ---- matching: attributes ---------------------------------------------------- */

/* The value an op uses when the attribute is absent (docs/ops.md), so that a
 * pattern that spells out a default matches a node that leaves it out. */
static bool attr_default(const kf_ctx *c, int op, const char *key, kf_attrval *v)
{
	memset(v, 0, sizeof *v);
	if (!strcmp(key, "keepdims")) {
		v->kind = KF_ATTR_BOOL, v->b = true;
	} else if (!strcmp(key, "axis")) {
		v->kind = KF_ATTR_INT;
		v->i = op == KF_OP_SPLIT ? 0 : -1;
		if (op != KF_OP_SPLIT && op != KF_OP_SOFTMAX && op != KF_OP_LOG_SOFTMAX && op != KF_OP_LAYER_NORM)
			return false;
	} else if (!strcmp(key, "approximate")) {
		v->kind = KF_ATTR_STR, v->s = kf_lookup_str(c, "none", 4);
		return v->s != KF_NONE;
	} else if (!strcmp(key, "epsilon")) {
		v->kind = KF_ATTR_FLOAT, v->f = 1e-5;
	} else if (!strcmp(key, "alpha") || !strcmp(key, "beta")) {
		v->kind = KF_ATTR_FLOAT, v->f = 1.0;
	} else if (!strcmp(key, "trans_a") || !strcmp(key, "trans_b")) {
		v->kind = KF_ATTR_INT, v->i = 0;
	} else {
		return false;
	}
	return true;
}

static bool num_of(const kf_attrval *v, double *x)
{
	switch (v->kind) {
	case KF_ATTR_INT: *x = (double)v->i; return true;
	case KF_ATTR_FLOAT: *x = v->f; return true;
	case KF_ATTR_BOOL: *x = v->b; return true;
	default: return false;
	}
}

static bool close_to(double a, double b, double rtol)
{
	if (a == b)
		return true;
	/* an infinity is close to nothing else: inf - 0 <= rtol * inf holds */
	if (!isfinite(a) || !isfinite(b))
		return false;
	return fabs(a - b) <= rtol * fmax(fabs(a), fabs(b));
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

/* An axis list as a sorted set with negative axes counted from the end. */
static int axes_of(const kf_attrval *v, int rank, int64_t *out)
{
	int n = 0;
	if (v->kind == KF_ATTR_INT)
		out[n++] = v->i;
	else if (v->kind == KF_ATTR_LIST && v->n <= KF_MAX_RANK)
		for (uint32_t i = 0; i < v->n; i++) {
			if (v->list[i].kind != KF_ATTR_INT)
				return -1;
			out[n++] = v->list[i].i;
		}
	else
		return -1;
	for (int i = 0; i < n; i++)
		if (out[i] < 0)
			out[i] += rank;
	qsort(out, (size_t)n, sizeof *out, cmp_i64);
	return n;
}

/* Loose equality: numbers by value (1 == 1.0 == true) within rtol, axes as
 * normalised sets, lists element-wise. */
static bool attr_match(const kf_attrval *pa, const kf_attrval *na, bool axes, int rank, double rtol)
{
	if (axes) {
		int64_t x[KF_MAX_RANK], y[KF_MAX_RANK];
		int nx = axes_of(pa, rank, x), ny = axes_of(na, rank, y);
		return nx >= 0 && nx == ny && !memcmp(x, y, (size_t)nx * sizeof *x);
	}
	double a, b;
	if (num_of(pa, &a) && num_of(na, &b))
		return close_to(a, b, rtol);
	if (pa->kind != na->kind)
		return false;
	if (pa->kind == KF_ATTR_LIST) {
		if (pa->n != na->n)
			return false;
		for (uint32_t i = 0; i < pa->n; i++)
			if (!attr_match(&pa->list[i], &na->list[i], false, rank, rtol))
				return false;
		return true;
	}
	return kf_attrval_eq(pa, na);
}

static bool attrs_ok(const kf_graph *g, const kf_pnode *pn, kf_nid n, double rtol)
{
	const kf_node *nd = kf_N(g, n);
	int rank = nd->nin ? kf_vtype(g, kf_in(g, n, 0))->rank : 0;
	for (uint32_t i = 0; i < pn->nattr; i++) {
		const char *key = kf_str(g->ctx, pn->attr[i].key);
		const kf_attrval *na = NULL;
		kf_attrval dflt;
		for (uint32_t k = 0; k < nd->nattr; k++)
			if (nd->attr[k].key == pn->attr[i].key)
				na = &nd->attr[k].v;
		if (!na) {
			if (!attr_default(g->ctx, nd->op, key, &dflt))
				return false;
			na = &dflt;
		}
		bool axes = !strcmp(key, "axes") || (!strcmp(key, "axis") && nd->op != KF_OP_CONCAT);
		if (!attr_match(&pn->attr[i].v, na, axes, rank, rtol))
			return false;
	}
	return true;
}

/* ---- matching: constants ----------------------------------------------------- */

/* The one value of a constant whose elements are all equal (a scalar, a splat
 * or a small dense literal of one repeated value). */
static bool const_scalar(const kf_graph *g, kf_nid n, double *v)
{
	const kf_node *nd = kf_N(g, n);
	const kf_const *k = nd->cst;
	if (!k || k->kind == KF_CONST_FILE || k->n == 0 || k->n > 4096)
		return false;
	bool fl = kf_dtype_is_float(kf_vtype(g, nd->res0)->dtype);
	if (fl ? !k->f : !k->i)
		return false;
	double x = fl ? k->f[0] : (double)k->i[0];
	for (uint64_t i = 1; i < k->n; i++)
		if ((fl ? k->f[i] : (double)k->i[i]) != x)
			return false;
	*v = x;
	return true;
}

/* A constant standing for a scalar must not widen its user's result: its
 * shape broadcasts into the user's result shape. */
static bool broadcasts_into(const kf_type *c, const kf_type *r)
{
	if (c->rank > r->rank)
		return false;
	for (int i = 1; i <= c->rank; i++) {
		int64_t cd = c->dim[c->rank - i], rd = r->dim[r->rank - i];
		if (cd != 1 && cd != rd)
			return false;
	}
	return true;
}

/* ---- matching: the solver ------------------------------------------------------ */

typedef struct goal {
	kf_pv pv;
	kf_vid v;
	kf_nid parent;
} goal;

typedef struct solver {
	const kf_graph *g;
	const kf_pattern *p;
	double rtol;
	kf_match *m;
	kf_nid pmap[KF_PAT_MAXNODE];
	goal goal[4 * KF_PAT_MAXNODE + 8];
	uint32_t ngoal;
} solver;

static bool solve(solver *s);

static bool fail(solver *s, uint32_t pn, const char *why)
{
	/* the last failure is the reason reported (trace level 2) */
	s->m->why = why;
	s->m->why_pn = pn;
	return false;
}

static bool push_goal(solver *s, kf_pv pv, kf_vid v, kf_nid parent)
{
	if (s->ngoal >= sizeof s->goal / sizeof s->goal[0])
		return false;
	s->goal[s->ngoal++] = (goal){pv, v, parent};
	return true;
}

static bool try_op(solver *s, const goal *gl, uint32_t pi, const kf_pnode *pn)
{
	const kf_graph *g = s->g;
	kf_nid n = kf_def(g, gl->v);
	if (n == KF_NONE)
		return fail(s, pi, "an argument of the graph, not an op");
	const kf_node *nd = kf_N(g, n);
	if (nd->op != pn->op)
		return fail(s, pi, "a different op");
	if (kf_V(g, gl->v)->idx != KF_PV_RES(gl->pv) || nd->nin != pn->nin)
		return fail(s, pi, "a different result or operand count");
	if (s->pmap[pi] != KF_NONE)
		return s->pmap[pi] == n ? solve(s) : fail(s, pi, "one pattern node, two graph nodes");
	if (!attrs_ok((kf_graph *)g, pn, n, s->rtol))
		return fail(s, pi, "attributes differ");
	s->pmap[pi] = n;
	uint32_t base = s->ngoal;
	bool comm = nd->nin == 2 && (kf_op(g->ctx, nd->op)->flags & KF_OPF_COMMUTATIVE);
	for (int order = 0; order < (comm ? 2 : 1); order++) {
		bool ok = true;
		for (uint32_t i = nd->nin; i-- > 0;) {
			uint32_t k = order ? nd->nin - 1 - i : i;
			ok = ok && push_goal(s, pn->in[i], kf_in(g, n, k), n);
		}
		if (ok && solve(s))
			return true;
		s->ngoal = base;
	}
	s->pmap[pi] = KF_NONE;
	return false;
}

static bool try_goal(solver *s, const goal *gl)
{
	uint32_t pi = KF_PV_NODE(gl->pv);
	const kf_pnode *pn = &s->p->node[pi];
	kf_vid *b;
	switch (pn->kind) {
	case KF_PN_VAR:
		b = &s->m->bind[pn->var];
		if (*b != KF_NONE)
			return *b == gl->v ? solve(s) : fail(s, pi, "a variable bound to two values");
		*b = gl->v;
		if (solve(s))
			return true;
		*b = KF_NONE;
		return false;
	case KF_PN_CONST: {
		kf_nid n = kf_def(s->g, gl->v);
		double x;
		if (n == KF_NONE || kf_N(s->g, n)->op != KF_OP_CONST || !const_scalar(s->g, n, &x))
			return fail(s, pi, "not a constant with one value");
		const kf_type *t = kf_vtype(s->g, gl->v);
		if (pn->cdtype >= 0 && t->dtype != pn->cdtype)
			return fail(s, pi, "a constant of another dtype");
		if (!close_to(x, pn->cval, s->rtol))
			return fail(s, pi, "a constant of another value");
		if (gl->parent != KF_NONE &&
		    !broadcasts_into(t, kf_vtype(s->g, kf_N(s->g, gl->parent)->res0)))
			return fail(s, pi, "a constant that widens its user's shape");
		return solve(s);
	}
	default:
		return try_op(s, gl, pi, pn);
	}
}

static bool solve(solver *s)
{
	if (s->ngoal == 0)
		return true;
	goal gl = s->goal[--s->ngoal];
	if (try_goal(s, &gl))
		return true;
	s->goal[s->ngoal++] = gl;
	return false;
}

static bool in_set(const kf_nid *set, uint32_t n, kf_nid x)
{
	for (uint32_t i = 0; i < n; i++)
		if (set[i] == x)
			return true;
	return false;
}

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

/* The op a pattern operand needs of its graph operand: -1 anything. */
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

/* Most candidates fail on the ops of the root's operands; checking those
 * first (either order for a commutative root) spares the solver's setup. */
static bool quick_reject(const kf_graph *g, const kf_pattern *p, kf_nid n)
{
	const kf_pnode *root = &p->node[KF_PV_NODE(p->out[0])];
	const kf_node *nd = kf_N(g, n);
	if (nd->op != root->op || nd->nin != root->nin)
		return true;
	if (root->nin != 2)
		return false;
	int w0 = want_op(p, root->in[0]), w1 = want_op(p, root->in[1]);
	kf_vid a = kf_in(g, n, 0), b = kf_in(g, n, 1);
	if (op_fits(w0, g, a) && op_fits(w1, g, b))
		return false;
	return !((kf_op(g->ctx, nd->op)->flags & KF_OPF_COMMUTATIVE) && op_fits(w0, g, b) && op_fits(w1, g, a));
}

bool kf_rw_match(kf_graph *g, const kf_rule *r, kf_nid n, kf_match *m)
{
	const kf_pattern *p = r->pat;
	if (quick_reject(g, p, n)) {
		m->why = "the root or its operands are other ops";
		m->why_pn = KF_PV_NODE(p->out[0]);
		return false;
	}
	solver s;
	s.g = g;
	s.p = p;
	s.rtol = r->rtol > 0 ? r->rtol : 1e-6;
	s.m = m;
	s.ngoal = 0;
	m->nbind = p->nvar;
	m->nout = p->nout;
	m->nnode = 0;
	m->why = NULL;
	m->why_pn = 0;
	for (uint32_t i = 0; i < p->nvar; i++)
		m->bind[i] = KF_NONE;
	for (uint32_t i = 0; i < p->nnode; i++)
		s.pmap[i] = KF_NONE;
	kf_pv root = p->out[0];
	if (KF_PV_RES(root) >= kf_N(g, n)->nres)
		return fail(&s, KF_PV_NODE(root), "a node with fewer results");
	push_goal(&s, root, kf_res(g, n, KF_PV_RES(root)), KF_NONE);
	if (!solve(&s))
		return false;
	for (uint32_t k = 0; k < p->nout; k++)
		m->out[k] = kf_res(g, s.pmap[KF_PV_NODE(p->out[k])], KF_PV_RES(p->out[k]));
	for (uint32_t i = 0; i < p->nnode; i++)
		if (p->node[i].kind == KF_PN_OP && !in_set(m->node, m->nnode, s.pmap[i]))
			m->node[m->nnode++] = s.pmap[i];
	if (!r->keep_interior && !interior_ok(g, m)) {
		m->why = "an interior value is used outside the match";
		return false;
	}
	return true;
}

void kf_rw_locstr(kf_buf *out, const kf_ctx *c, kf_loc loc)
{
	if (loc.src == KF_NONE) {
		kf_buf_puts(out, "?");
		return;
	}
	int line, col;
	kf_source_linecol(c, loc.src, loc.off, &line, &col);
	kf_buf_printf(out, "%s:%d:%d", kf_source_name(c, loc.src), line, col);
}

void kf_rw_type_str(kf_buf *out, const kf_ctx *c, kf_tid t)
{
	const kf_type *ty = kf_type_get(c, t);
	kf_buf_printf(out, "%s[", kf_dtype_name(ty->dtype));
	for (int i = 0; i < ty->rank; i++) {
		if (i)
			kf_buf_putc(out, ',');
		if (KF_IS_SYM(ty->dim[i]))
			kf_buf_puts(out, kf_str(c, KF_SYM_SID(ty->dim[i])));
		else
			kf_buf_printf(out, "%lld", (long long)ty->dim[i]);
	}
	kf_buf_putc(out, ']');
}
