/* orders.c: a rule's pattern written every way an exporter could: both
 * operand orders of each commutative op, and every grouping and order of
 * each chain of an associative-commutative op ((a*b)*c, a*(c*b), ...).
 * The rule must rewrite every one of them; a sample is also run on the
 * interpreter against the rewritten graph.
 *
 * A variant is numbered in a mixed radix: one digit per commutative node
 * (2) and per chain of k operands (k! orders times Catalan(k-1) groupings).
 * Up to MAX_ORDERS variants are checked; past that, an even stride of them.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "verify.h"

#define MAX_ORDERS 65536
#define COMPARE_EVERY 16

static uint64_t fact(uint32_t n)
{
	uint64_t f = 1;
	while (n > 1)
		f *= n--;
	return f;
}

/* Full binary trees with n + 1 leaves. */
static uint64_t catalan(uint32_t n)
{
	uint64_t c = 1;
	for (uint32_t i = 0; i < n; i++)
		c = c * 2 * (2 * i + 1) / (i + 2);
	return c;
}

typedef struct digit {
	uint32_t pn;
	uint64_t radix;
} digit;

typedef struct variant {
	const kf_pattern *p;
	kf_pattern *q;
	kf_pv map[KF_PAT_MAXNODE];
	uint64_t val[KF_PAT_MAXNODE]; /* the digit of each pattern node */
} variant;

/* The nodes whose operands can be written another way, reachable from the
 * root, and how many ways each. */
static uint32_t digits(const kf_pattern *p, digit *d)
{
	uint8_t seen[KF_PAT_MAXNODE] = {0};
	uint32_t stack[KF_PAT_MAXNODE], ns = 0, nd = 0;
	stack[ns++] = KF_PV_NODE(p->out[0]);
	seen[stack[0]] = 1;
	while (ns) {
		const kf_pnode *pn = &p->node[stack[--ns]];
		uint32_t i = (uint32_t)(pn - p->node);
		if (pn->kind != KF_PN_OP)
			continue;
		const kf_pv *in = pn->nleaf ? pn->leaf : pn->in;
		uint32_t nin = pn->nleaf ? pn->nleaf : pn->nin;
		if (pn->nleaf)
			d[nd++] = (digit){i, fact(pn->nleaf) * catalan(pn->nleaf - 1)};
		else if (pn->nin == 2 && (kf_op(p->ctx, pn->op)->flags & KF_OPF_COMMUTATIVE))
			d[nd++] = (digit){i, 2};
		for (uint32_t k = 0; k < nin; k++) {
			uint32_t c = KF_PV_NODE(in[k]);
			if (!seen[c]) {
				seen[c] = 1;
				stack[ns++] = c;
			}
		}
	}
	return nd;
}

static kf_pv copy(variant *v, kf_pv pv);

/* A tree of op over leaves[0..n) of the given shape (< catalan(n - 1)). */
static kf_pv tree(variant *v, int op, const kf_pv *leaf, uint32_t n, uint64_t shape)
{
	if (n == 1)
		return leaf[0];
	for (uint32_t l = 1; l < n; l++) {
		uint64_t cl = catalan(l - 1), cr = catalan(n - l - 1);
		if (shape >= cl * cr) {
			shape -= cl * cr;
			continue;
		}
		kf_pv in[2] = {tree(v, op, leaf, l, shape % cl), tree(v, op, leaf + l, n - l, shape / cl)};
		return kf_pat_op(v->q, op, in, 2, NULL, 0, 1);
	}
	return leaf[0]; /* not reached: shape < catalan(n - 1) */
}

/* The AC chain at pn, its leaves in the order and grouping of its digit. */
static kf_pv chain(variant *v, const kf_pnode *pn, uint64_t x)
{
	uint32_t k = pn->nleaf;
	uint64_t perm = x % fact(k), shape = x / fact(k);
	kf_pv pool[KF_AC_MAXLEAF], leaf[KF_AC_MAXLEAF];
	for (uint32_t i = 0; i < k; i++)
		pool[i] = copy(v, pn->leaf[i]);
	/* the permutation's Lehmer code */
	for (uint32_t i = 0, left = k; i < k; i++, left--) {
		uint64_t f = fact(left - 1), j = perm / f;
		perm %= f;
		leaf[i] = pool[j];
		memmove(pool + j, pool + j + 1, (left - j - 1) * sizeof *pool);
	}
	return tree(v, pn->op, leaf, k, shape);
}

static kf_pv copy(variant *v, kf_pv pv)
{
	uint32_t i = KF_PV_NODE(pv);
	if (v->map[i] != KF_NONE)
		return v->map[i] + KF_PV_RES(pv);
	const kf_pnode *pn = &v->p->node[i];
	kf_pv r;
	if (pn->kind == KF_PN_VAR) {
		r = KF_PV(pn->var, 0); /* q's variables are its first nodes, in order */
	} else if (pn->kind == KF_PN_CONST) {
		r = kf_pat_const(v->q, pn->cval, pn->cdtype);
	} else if (pn->nleaf) {
		r = chain(v, pn, v->val[i]);
	} else {
		kf_pv in[KF_PAT_MAXNODE];
		for (uint32_t k = 0; k < pn->nin && k < KF_PAT_MAXNODE; k++)
			in[k] = copy(v, pn->in[k]);
		if (pn->nin == 2 && v->val[i]) {
			kf_pv t = in[0];
			in[0] = in[1];
			in[1] = t;
		}
		r = kf_pat_op(v->q, pn->op, in, pn->nin, pn->attr, pn->nattr, pn->nres);
	}
	v->map[i] = r;
	return r + KF_PV_RES(pv);
}

/* Variant x of p (digits d[0..nd)), or NULL. */
static kf_pattern *build(const kf_pattern *p, const digit *d, uint32_t nd, uint64_t x)
{
	variant v;
	v.p = p;
	v.q = kf_pat_new(p->ctx);
	for (uint32_t i = 0; i < KF_PAT_MAXNODE; i++) {
		v.map[i] = KF_NONE;
		v.val[i] = 0;
	}
	for (uint32_t k = 0; k < nd; k++) {
		v.val[d[k].pn] = x % d[k].radix;
		x /= d[k].radix;
	}
	for (uint32_t i = 0; i < p->nvar; i++)
		if ((int)i == p->seqvar)
			kf_pat_seqvar(v.q);
		else
			kf_pat_var(v.q, p->varname[i]);
	kf_pat_copy_tvars(v.q, p);
	kf_pv out[KF_PAT_MAXOUT];
	for (uint32_t k = 0; k < p->nout; k++)
		out[k] = copy(&v, p->out[k]);
	char err[200];
	if (kf_pat_set_outputs(v.q, out, p->nout, err, sizeof err) < 0) {
		kf_pat_free(v.q);
		return NULL;
	}
	return v.q;
}

/* The first type set with which r rewrites its own pattern: 1, 0 none. */
static int fitting_config(kf_ctx *c, const kf_rule *r, uint64_t seed, vspec *vs)
{
	kf_ruleset rs = {0};
	kf_ruleset_add(&rs, (kf_rule *)r);
	int found = 0;
	char why[256];
	for (uint32_t i = 0; !found && kfv_config(r, i, vs) > 0; i++) {
		kf_graph *g = kfv_pattern_graph(c, r, r->pat, vs, seed, why, sizeof why);
		found = g && kfv_apply(&rs, g) > 0;
		kf_graph_free(g);
		kf_diag_clear(c);
	}
	kf_ruleset_free(&rs);
	return found;
}

/* One variant: 0 rewritten (and the same numbers, when compared), 1 not
 * (reported), -1 error. */
static int check(kf_ctx *c, const kf_rule *r, const kf_pattern *q, const vspec *vs, bool cmp, uint64_t seed,
		 kf_buf *out)
{
	char why[256];
	kf_graph *a = kfv_pattern_graph(c, r, q, vs, seed, why, sizeof why);
	kf_graph *b = kfv_pattern_graph(c, r, q, vs, seed, why, sizeof why);
	int rc = 0;
	if (!a || !b) {
		rc = 1;
		kf_buf_printf(out, "%s: rule '%s': its pattern written as ", r->origin, r->name);
		kf_pat_print(out, q);
		kf_buf_printf(out, " does not build (%s)\n", why);
	} else {
		kf_ruleset rs = {0};
		kf_ruleset_add(&rs, (kf_rule *)r);
		int n = kfv_apply(&rs, b);
		kf_ruleset_free(&rs);
		if (n < 0) {
			rc = -1;
		} else if (n == 0) {
			rc = 1;
			kf_buf_printf(out, "%s: rule '%s' does not match its pattern written as ", r->origin, r->name);
			kf_pat_print(out, q);
			kf_buf_puts(out, ", for ");
			kfv_describe(out, c, r->pat, vs);
			kf_buf_putc(out, '\n');
		} else if (cmp) {
			kf_buf rep = {0};
			int d = kfv_compare(c, r, a, b, seed, NULL, &rep);
			if (d > 0) {
				kf_buf_printf(out, "%s: rule '%s' does not compute what its pattern does, written as ",
					      r->origin, r->name);
				kf_pat_print(out, q);
				kf_buf_printf(out, ":\n%s", rep.p);
			}
			rc = d;
			kf_buf_free(&rep);
		}
	}
	kf_graph_free(a);
	kf_graph_free(b);
	return rc;
}

int kfv_orders(kf_ctx *c, const kf_rule *r, const vopts *o, kf_buf *out, uint64_t *norders)
{
	digit d[KF_PAT_MAXNODE];
	*norders = 0;
	/* a copy that finds the AC chains even when the rule says assoc =
	 * false: the ways to write the formula do not depend on the rule */
	kf_pattern *p = build(r->pat, NULL, 0, 0);
	if (!p)
		return -1;
	uint32_t nd = digits(p, d);
	if (nd == 0) {
		kf_pat_free(p);
		return 0; /* one way to write it: checked already */
	}
	uint64_t total = 1;
	for (uint32_t k = 0; k < nd; k++)
		total = total > UINT64_MAX / d[k].radix ? UINT64_MAX : total * d[k].radix;
	vspec vs[KF_PAT_MAXNODE];
	if (!fitting_config(c, r, o->seed, vs)) {
		kf_pat_free(p);
		return 0; /* verify_rule reported it */
	}
	uint64_t stride = total > MAX_ORDERS ? total / MAX_ORDERS : 1;
	int bad = 0;
	for (uint64_t x = 0, i = 0; x < total && bad < 3; x += stride, i++) {
		kf_pattern *q = build(p, d, nd, x);
		int k = q ? check(c, r, q, vs, i % COMPARE_EVERY == 0, o->seed + x, out) : -1;
		kf_pat_free(q);
		if (k < 0) {
			kf_pat_free(p);
			return -1;
		}
		bad += k;
		++*norders;
	}
	kf_pat_free(p);
	if (o->verbose && !bad)
		kf_buf_printf(out, "%s: rule '%s': rewrites its pattern in all %llu operand orders%s\n", r->origin,
			      r->name, (unsigned long long)*norders, stride > 1 ? " checked (an even sample)" : "");
	return bad ? 1 : 0;
}
