/* rewrite.c: pattern graphs: nodes, variables and their type constraints,
 * type variables, and the associative-commutative chains the matcher
 * flattens (rewrite_match.c matches, rewrite_build.c builds replacements,
 * rewrite_driver.c applies rules to a graph).
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
	p->seqvar = -1;
	return p;
}

void kf_pat_free(kf_pattern *p)
{
	if (!p)
		return;
	free(p->node);
	free(p->varname);
	free(p->vtype);
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
	uint32_t cap = p->capvar;
	kf_grow((void **)&p->varname, &p->capvar, p->nvar + 1, sizeof *p->varname);
	kf_grow((void **)&p->vtype, &cap, p->nvar + 1, sizeof *p->vtype);
	p->varname[p->nvar] = kf_strdup_arena(&p->arena, name, strlen(name));
	p->vtype[p->nvar] = NULL;
	p->node[i].var = p->nvar++;
	return KF_PV(i, 0);
}

kf_pv kf_pat_seqvar(kf_pattern *p)
{
	kf_pv pv = kf_pat_var(p, "...");
	p->node[KF_PV_NODE(pv)].seq = true;
	p->seqvar = (int)p->node[KF_PV_NODE(pv)].var;
	return pv;
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

/* ---- type constraints ------------------------------------------------------ */

int kf_pat_tvar(kf_pattern *p, const char *name, kf_tvkind k, char *err, size_t errlen)
{
	kf_sid sid = kf_intern_cstr(p->ctx, name);
	int i = kf_pat_tvar_find(p, sid);
	if (i >= 0) {
		if (p->tvkind[i] == k)
			return i;
		snprintf(err, errlen, "type variable '%s' stands for a dtype in one place and a dim in another",
			 name);
		return -1;
	}
	if (p->ntvar == KF_PAT_MAXTVAR) {
		snprintf(err, errlen, "too many type variables (at most %d)", KF_PAT_MAXTVAR);
		return -1;
	}
	p->tvname[p->ntvar] = sid;
	p->tvkind[p->ntvar] = (uint8_t)k;
	return (int)p->ntvar++;
}

int kf_pat_tvar_find(const kf_pattern *p, kf_sid name)
{
	for (uint32_t i = 0; i < p->ntvar; i++)
		if (p->tvname[i] == name)
			return (int)i;
	return -1;
}

void kf_pat_copy_tvars(kf_pattern *t, const kf_pattern *p)
{
	t->ntvar = p->ntvar;
	memcpy(t->tvname, p->tvname, sizeof t->tvname);
	memcpy(t->tvkind, p->tvkind, sizeof t->tvkind);
}

static const char *skip_ws(const char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	return s;
}

/* An identifier, "?" or "_" at s: its length (0 when none). */
static size_t word_len(const char *s)
{
	if (*s == '?')
		return 1;
	size_t n = 0;
	if ((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_')
		for (n = 1; (s[n] >= 'A' && s[n] <= 'Z') || (s[n] >= 'a' && s[n] <= 'z') || s[n] == '_' ||
			    (s[n] >= '0' && s[n] <= '9');)
			n++;
	return n;
}

static bool is_any(const char *s, size_t n)
{
	return n == 1 && (*s == '?' || *s == '_');
}

/* One dim of a constraint at *sp: a size, a variable, or "?".  0 or -1. */
static int parse_dim(kf_pattern *p, const char **sp, kf_ptype *t, int i, char *err, size_t errlen)
{
	const char *s = *sp;
	if (*s >= '0' && *s <= '9') {
		char *end;
		long long d = strtoll(s, &end, 10);
		t->dim[i] = d;
		t->dvar[i] = -1;
		*sp = end;
		return 0;
	}
	size_t n = word_len(s);
	if (!n) {
		snprintf(err, errlen, "a dim is a size, a name or ?, not '%.8s'", s);
		return -1;
	}
	if (is_any(s, n)) {
		t->dvar[i] = -2;
	} else {
		char name[64];
		snprintf(name, sizeof name, "%.*s", (int)(n < 63 ? n : 63), s);
		int v = kf_pat_tvar(p, name, KF_TV_DIM, err, errlen);
		if (v < 0)
			return -1;
		t->dvar[i] = (int16_t)v;
	}
	*sp = s + n;
	return 0;
}

int kf_pat_parse_type(kf_pattern *p, const char *text, kf_ptype *t, char *err, size_t errlen)
{
	memset(t, 0, sizeof *t);
	t->dtype = -1;
	t->rank = -1;
	const char *s = skip_ws(text);
	size_t n = word_len(s);
	if (n && !is_any(s, n)) {
		int dt = kf_dtype_parse(s, n);
		if (dt >= 0) {
			t->dtype = (int16_t)dt;
		} else {
			char name[64];
			snprintf(name, sizeof name, "%.*s", (int)(n < 63 ? n : 63), s);
			int v = kf_pat_tvar(p, name, KF_TV_DTYPE, err, errlen);
			if (v < 0)
				return -1;
			t->dtype = (int16_t)(-2 - v);
		}
	}
	s = skip_ws(s + n);
	if (*s == '[') {
		t->rank = 0;
		s = skip_ws(s + 1);
		if (!strncmp(s, "...", 3)) {
			t->ellipsis = true;
			s = skip_ws(s + 3);
			if (*s == ',')
				s = skip_ws(s + 1);
		}
		while (*s && *s != ']') {
			if (t->rank == KF_MAX_RANK) {
				snprintf(err, errlen, "more than %d dims", KF_MAX_RANK);
				return -1;
			}
			if (parse_dim(p, &s, t, t->rank, err, errlen) < 0)
				return -1;
			t->rank++;
			s = skip_ws(s);
			if (*s == ',')
				s = skip_ws(s + 1);
			else if (*s != ']')
				break;
		}
		if (*s != ']') {
			snprintf(err, errlen, "expected ',' or ']' at '%.8s'", s);
			return -1;
		}
		s = skip_ws(s + 1);
	}
	if (*s || s == skip_ws(text)) {
		snprintf(err, errlen, "'%s' is not a type constraint (like \"T[..., N, D]\", \"f32[4, ?]\", "
			 "\"T\")", text);
		return -1;
	}
	return 0;
}

void kf_pat_set_vtype(kf_pattern *p, uint32_t var, const kf_ptype *t)
{
	kf_ptype *c = kf_alloc(&p->arena, sizeof *c);
	*c = *t;
	p->vtype[var] = c;
}

/* ---- outputs and associative-commutative chains ----------------------------- */

static void mark_reach(const kf_pattern *p, uint32_t pn, uint8_t *seen)
{
	if (seen[pn])
		return;
	seen[pn] = 1;
	for (uint32_t i = 0; i < p->node[pn].nin; i++)
		mark_reach(p, KF_PV_NODE(p->node[pn].in[i]), seen);
}

static bool is_ac(const kf_pattern *p, const kf_pnode *pn)
{
	const int both = KF_OPF_COMMUTATIVE | KF_OPF_ASSOCIATIVE;
	return pn->kind == KF_PN_OP && pn->nin == 2 && pn->nres == 1 && pn->nattr == 0 &&
	       (kf_op(p->ctx, pn->op)->flags & both) == both;
}

/* Collects the leaves of the chain below head into leaf[]; false when
 * there are more than KF_AC_MAXLEAF. */
static bool chain_leaves(const kf_pattern *p, uint32_t pn, kf_pv *leaf, uint32_t *n)
{
	const kf_pnode *x = &p->node[pn];
	for (uint32_t i = 0; i < 2; i++) {
		uint32_t c = KF_PV_NODE(x->in[i]);
		if (p->node[c].absorbed) {
			if (!chain_leaves(p, c, leaf, n))
				return false;
		} else {
			if (*n == KF_AC_MAXLEAF)
				return false;
			leaf[(*n)++] = x->in[i];
		}
	}
	return true;
}

static void unabsorb(kf_pattern *p, uint32_t pn)
{
	for (uint32_t i = 0; i < 2; i++) {
		uint32_t c = KF_PV_NODE(p->node[pn].in[i]);
		if (p->node[c].absorbed) {
			p->node[c].absorbed = false;
			unabsorb(p, c);
		}
	}
}

/* How much a leaf constrains the match: ops first, then constants, then
 * variables, so that the matcher's assignment fails early. */
static int leaf_rank(const kf_pattern *p, kf_pv pv)
{
	uint8_t k = p->node[KF_PV_NODE(pv)].kind;
	return k == KF_PN_OP ? 0 : k == KF_PN_CONST ? 1 : 2;
}

/* A chain of one associative-commutative op (`(a*b)*c`) is matched as the
 * multiset of its operands, in any grouping and order: its inner nodes are
 * absorbed into its head when nothing else reads them. */
static void find_chains(kf_pattern *p, const uint8_t *seen)
{
	uint8_t uses[KF_PAT_MAXNODE] = {0};
	for (uint32_t i = 0; i < p->nnode; i++) {
		kf_pnode *pn = &p->node[i];
		pn->nleaf = 0;
		pn->absorbed = false;
		pn->weight = 1;
		for (uint32_t k = 0; seen[i] && k < pn->nin; k++)
			uses[KF_PV_NODE(pn->in[k])]++;
	}
	for (uint32_t k = 0; k < p->nout; k++)
		uses[KF_PV_NODE(p->out[k])]++;
	if (p->no_assoc)
		return;
	for (uint32_t i = 0; i < p->nnode; i++) {
		kf_pnode *pn = &p->node[i];
		if (!seen[i] || !is_ac(p, pn))
			continue;
		for (uint32_t k = 0; k < 2; k++) {
			uint32_t c = KF_PV_NODE(pn->in[k]);
			if (KF_PV_RES(pn->in[k]) == 0 && p->node[c].op == pn->op && is_ac(p, &p->node[c]) &&
			    uses[c] == 1)
				p->node[c].absorbed = true;
		}
	}
	for (uint32_t i = 0; i < p->nnode; i++) {
		kf_pnode *pn = &p->node[i];
		if (!seen[i] || !is_ac(p, pn) || pn->absorbed)
			continue;
		kf_pv leaf[KF_AC_MAXLEAF];
		uint32_t n = 0;
		if (!chain_leaves(p, i, leaf, &n)) {
			unabsorb(p, i); /* too long: matched as written */
			continue;
		}
		if (n <= 2)
			continue;
		/* stable: most constrained first */
		for (uint32_t a = 1; a < n; a++)
			for (uint32_t b = a; b > 0 && leaf_rank(p, leaf[b - 1]) > leaf_rank(p, leaf[b]); b--) {
				kf_pv t = leaf[b];
				leaf[b] = leaf[b - 1];
				leaf[b - 1] = t;
			}
		pn->nleaf = (uint8_t)n;
		pn->leaf = kf_alloc(&p->arena, n * sizeof *pn->leaf);
		memcpy(pn->leaf, leaf, n * sizeof *leaf);
		pn->weight = (uint8_t)(n - 1); /* the head and its n - 2 absorbed nodes */
	}
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
	if (p->seqvar >= 0) {
		/* the matcher binds it at one node: its operands there */
		uint32_t uses = 0;
		for (uint32_t i = 0; i < p->nnode; i++)
			for (uint32_t k = 0; seen[i] && k < p->node[i].nin; k++)
				uses += p->node[KF_PV_NODE(p->node[i].in[k])].seq;
		if (uses > 1) {
			snprintf(err, errlen, "'...' stands for the operands of one node of the pattern, not of %u", uses);
			return -1;
		}
	}
	find_chains(p, seen);
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
		if (pn->nleaf) {
			/* a chain of n leaves may be a graph chain n - 1 deep */
			d = 0;
			for (uint32_t k = 0; k < pn->nleaf; k++) {
				uint32_t c = KF_PV_NODE(pn->leaf[k]);
				if (c < i && depth[c] > d)
					d = depth[c];
			}
			if (d + pn->nleaf - 1 > depth[i])
				depth[i] = d + pn->nleaf - 1;
		}
		if (depth[i] > best)
			best = depth[i];
	}
	return best;
}

uint32_t kf_pat_size(const kf_pattern *p)
{
	uint8_t seen[KF_PAT_MAXNODE] = {0};
	uint32_t n = 0;
	if (p->nout)
		mark_reach(p, KF_PV_NODE(p->out[0]), seen);
	for (uint32_t i = 0; i < p->nnode && i < KF_PAT_MAXNODE; i++)
		n += seen[i];
	return n;
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

void kf_pat_print_at(kf_buf *out, const kf_pattern *p, kf_pv pv, size_t max)
{
	kf_buf b = {0};
	pat_print_pv(&b, p, pv);
	if (b.n > max && max > 3) {
		kf_buf_put(out, b.p, max - 3);
		kf_buf_puts(out, "...");
	} else {
		kf_buf_put(out, b.p ? b.p : "", b.n);
	}
	kf_buf_free(&b);
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
