/* einsum.c: ONNX Einsum as the matmuls it spells.
 *
 * Operands are contracted left to right, two at a time.  For a pair, each
 * label is a batch label (in both, and wanted later), a contracted one (in
 * both, not wanted later), or free (in one, wanted later); a label in one
 * operand only and not wanted later is summed away first.  The pair becomes
 *   A: transpose to (batch, free A, contracted), reshape to [batch, M, K]
 *   B: transpose to (batch, contracted, free B), reshape to [batch, K, N]
 *   matmul, reshape to (batch, free A, free B)
 * and the last result is transposed to the output's order.  Batch dims
 * broadcast as matmul's do.  A label repeated within one operand (a
 * diagonal, "ii->i") is not supported. */
#include <string.h>
#include "tr.h"

#define NLAB 64 /* 52 letters, then the ellipsis dims */

typedef struct term {
	kf_vid v;
	int n;                   /* rank */
	uint8_t lab[KF_MAX_RANK]; /* label of each dim */
} term;

static int label_of(char ch)
{
	if (ch >= 'a' && ch <= 'z')
		return ch - 'a';
	if (ch >= 'A' && ch <= 'Z')
		return 26 + ch - 'A';
	return -1;
}

/* Parses one operand's subscripts (up to ',' or '-' or the end) for a
 * tensor of rank `rank`; ellipsis dims get labels 52.. aligned from the
 * right over `ell` dims.  Returns the characters read, -1 on an error. */
static int parse_term(kf_imp *I, const char *s, int rank, int ell, term *t, bool *has_ell)
{
	int n = 0, i = 0, explicit = 0;
	for (int j = 0; s[j] && s[j] != ',' && s[j] != '-'; j++)
		explicit += label_of(s[j]) >= 0;
	*has_ell = false;
	for (; s[i] && s[i] != ',' && s[i] != '-'; i++) {
		if (s[i] == ' ')
			continue;
		if (s[i] == '.' && s[i + 1] == '.' && s[i + 2] == '.') {
			int e = rank - explicit;
			if (*has_ell || e < 0 || e > ell)
				return kf_imp_fail(I, "the ellipsis in the equation does not fit the operand's rank %d", rank);
			for (int k = 0; k < e; k++)
				t->lab[n++] = (uint8_t)(52 + ell - e + k);
			*has_ell = true;
			i += 2;
			continue;
		}
		int l = label_of(s[i]);
		if (l < 0)
			return kf_imp_fail(I, "'%c' is not a subscript", s[i]);
		if (n >= KF_MAX_RANK)
			return kf_imp_fail(I, "too many subscripts");
		t->lab[n++] = (uint8_t)l;
	}
	if (n != rank)
		return kf_imp_fail(I, "the equation gives %d subscripts to an operand of rank %d", n, rank);
	for (int a = 0; a < n; a++)
		for (int b = a + 1; b < n; b++)
			if (t->lab[a] == t->lab[b])
				return kf_imp_fail(I, "a subscript repeated within one operand (a diagonal) is not "
						      "supported");
	t->n = n;
	return i;
}

static int find(const term *t, int l)
{
	for (int i = 0; i < t->n; i++)
		if (t->lab[i] == l)
			return i;
	return -1;
}

/* Sums t over the labels not in keep[]. */
static int sum_away(kf_imp *I, term *t, const bool *keep)
{
	int64_t axes[KF_MAX_RANK];
	int na = 0, k = 0;
	for (int i = 0; i < t->n; i++)
		if (!keep[t->lab[i]])
			axes[na++] = i;
	if (na == 0)
		return 0;
	t->v = kf_tr_reduce(I, KF_OP_REDUCE_SUM, t->v, axes, na, false);
	for (int i = 0; i < t->n; i++)
		if (keep[t->lab[i]])
			t->lab[k++] = t->lab[i];
	t->n = k;
	return t->v == KF_NONE ? -1 : 0;
}

/* Transposes t so that its labels come in `order` (a permutation of them). */
static int permute(kf_imp *I, term *t, const uint8_t *order)
{
	int64_t perm[KF_MAX_RANK];
	bool ident = true;
	for (int i = 0; i < t->n; i++) {
		perm[i] = find(t, order[i]);
		ident = ident && perm[i] == i;
	}
	if (!ident)
		t->v = kf_tr_transpose(I, t->v, perm, t->n);
	memcpy(t->lab, order, (size_t)t->n);
	return t->v == KF_NONE ? -1 : 0;
}

static int64_t prod(kf_imp *I, const kf_type *ty, int from, int to)
{
	int64_t p = 1;
	for (int i = from; i < to; i++)
		p = kf_dim_mul(I->c, p, ty->dim[i]);
	return p;
}

/* Contracts a and b into a, keeping the labels in keep[]. */
static int contract(kf_imp *I, term *a, term *b, const bool *keep)
{
	bool ka[NLAB] = {false}, kb[NLAB] = {false};
	for (int i = 0; i < a->n; i++)
		ka[a->lab[i]] = keep[a->lab[i]] || find(b, a->lab[i]) >= 0;
	for (int i = 0; i < b->n; i++)
		kb[b->lab[i]] = keep[b->lab[i]] || find(a, b->lab[i]) >= 0;
	if (sum_away(I, a, ka) < 0 || sum_away(I, b, kb) < 0)
		return -1;
	uint8_t batch[KF_MAX_RANK], fa[KF_MAX_RANK], fb[KF_MAX_RANK], con[KF_MAX_RANK];
	int nb = 0, nfa = 0, nfb = 0, nc = 0;
	for (int i = 0; i < a->n; i++) {
		int l = a->lab[i];
		if (find(b, l) < 0)
			fa[nfa++] = (uint8_t)l;
		else if (keep[l])
			batch[nb++] = (uint8_t)l;
		else
			con[nc++] = (uint8_t)l;
	}
	for (int i = 0; i < b->n; i++)
		if (find(a, b->lab[i]) < 0)
			fb[nfb++] = b->lab[i];
	if (nb + 2 > KF_MAX_RANK || nb + nfa + nfb > KF_MAX_RANK)
		return kf_imp_fail(I, "the contraction needs more than %d dims", KF_MAX_RANK);
	uint8_t oa[KF_MAX_RANK], ob[KF_MAX_RANK];
	memcpy(oa, batch, (size_t)nb);
	memcpy(oa + nb, fa, (size_t)nfa);
	memcpy(oa + nb + nfa, con, (size_t)nc);
	memcpy(ob, batch, (size_t)nb);
	memcpy(ob + nb, con, (size_t)nc);
	memcpy(ob + nb + nc, fb, (size_t)nfb);
	if (permute(I, a, oa) < 0 || permute(I, b, ob) < 0)
		return -1;
	const kf_type *ta = kf_tr_ty(I, a->v), *tb = kf_tr_ty(I, b->v);
	int64_t sa[KF_MAX_RANK], sb[KF_MAX_RANK], so[KF_MAX_RANK];
	for (int i = 0; i < nb; i++) {
		sa[i] = ta->dim[i];
		sb[i] = tb->dim[i];
		so[i] = ta->dim[i] == 1 ? tb->dim[i] : ta->dim[i];
	}
	sa[nb] = prod(I, ta, nb, nb + nfa);
	sa[nb + 1] = prod(I, ta, nb + nfa, a->n);
	sb[nb] = prod(I, tb, nb, nb + nc);
	sb[nb + 1] = prod(I, tb, nb + nc, b->n);
	for (int i = 0; i < nfa; i++)
		so[nb + i] = ta->dim[nb + i];
	for (int i = 0; i < nfb; i++)
		so[nb + nfa + i] = tb->dim[nb + nc + i];
	kf_vid ma = kf_tr_reshape(I, a->v, sa, nb + 2), mb = kf_tr_reshape(I, b->v, sb, nb + 2);
	a->v = kf_tr_reshape(I, kf_tr_op2(I, KF_OP_MATMUL, ma, mb), so, nb + nfa + nfb);
	a->n = nb + nfa + nfb;
	memcpy(a->lab, batch, (size_t)nb);
	memcpy(a->lab + nb, fa, (size_t)nfa);
	memcpy(a->lab + nb + nfa, fb, (size_t)nfb);
	return a->v == KF_NONE ? -1 : 0;
}

int kf_tr_Einsum(kf_imp *I, kf_np *np, kf_vid *out, int op)
{
	char eq[256];
	kf_imp_attr_str(np, "equation", "", eq, sizeof eq);
	int nop = (int)np->n_input;
	if (nop < 1 || nop > 16)
		return kf_imp_fail(I, "%d operands (1 to 16 are supported)", nop);
	term t[16];
	int ell = 0;
	for (int i = 0; i < nop; i++) {
		if ((t[i].v = kf_imp_input(I, np, (size_t)i)) == KF_NONE)
			return -1;
		ell = kf_tr_ty(I, t[i].v)->rank > ell ? kf_tr_ty(I, t[i].v)->rank : ell;
	}
	/* ellipsis dims: at most as many as the largest rank */
	const char *p = eq;
	bool any_ell = false;
	int count[NLAB] = {0};
	for (int i = 0; i < nop; i++) {
		bool he;
		int k = parse_term(I, p, kf_tr_ty(I, t[i].v)->rank, ell, &t[i], &he);
		if (k < 0)
			return -1;
		any_ell |= he;
		for (int d = 0; d < t[i].n; d++)
			count[t[i].lab[d]]++;
		p += k;
		if (i + 1 < nop && *p++ != ',')
			return kf_imp_fail(I, "the equation \"%s\" names fewer operands than the node has", eq);
	}
	term o = {.n = 0};
	bool want[NLAB] = {false};
	if (p[0] == '-' && p[1] == '>') {
		bool he;
		/* the output's rank is the count of its subscripts and ellipsis dims */
		int r = 0, e = 0;
		for (const char *q = p + 2; *q; q++)
			r += label_of(*q) >= 0;
		for (int l = 52; l < NLAB; l++)
			e += count[l] > 0;
		if (parse_term(I, p + 2, r + (strstr(p + 2, "...") ? e : 0), ell, &o, &he) < 0)
			return -1;
	} else if (*p) {
		return kf_imp_fail(I, "the equation \"%s\" is malformed", eq);
	} else { /* implicit: ellipsis dims, then the labels seen once, in order */
		for (int l = 52; l < NLAB && any_ell; l++)
			if (count[l])
				o.lab[o.n++] = (uint8_t)l;
		for (int l = 0; l < 52; l++)
			if (count[l] == 1 && o.n < KF_MAX_RANK)
				o.lab[o.n++] = (uint8_t)l;
	}
	for (int i = 0; i < o.n; i++)
		want[o.lab[i]] = true;
	term acc = t[0];
	for (int i = 1; i < nop; i++) {
		bool keep[NLAB];
		memcpy(keep, want, sizeof keep);
		for (int j = i + 1; j < nop; j++)
			for (int d = 0; d < t[j].n; d++)
				keep[t[j].lab[d]] = true;
		if (contract(I, &acc, &t[i], keep) < 0)
			return -1;
	}
	if (sum_away(I, &acc, want) < 0)
		return -1;
	if (acc.n != o.n)
		return kf_imp_fail(I, "an output subscript of \"%s\" is in no operand", eq);
	if (permute(I, &acc, o.lab) < 0)
		return -1;
	return (out[0] = acc.v) != KF_NONE;
}
