/* print_names.c: the printed names of values (see print.c for the
 * naming rule, print_int.h for the marks and codes). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "print_int.h"

/* The mark of sid s; the array grows to hold it. */
static uint32_t *smark(printer *pr, kf_sid s)
{
	if (s >= pr->capsm) {
		uint32_t cap = pr->capsm ? pr->capsm : 1024;
		while (cap <= s)
			cap *= 2;
		pr->sm = realloc(pr->sm, cap * sizeof *pr->sm);
		if (!pr->sm)
			kf_oom();
		memset(pr->sm + pr->capsm, 0, (cap - pr->capsm) * sizeof *pr->sm);
		if (pr->suf) {
			pr->suf = realloc(pr->suf, cap * sizeof *pr->suf);
			if (!pr->suf)
				kf_oom();
			memset(pr->suf + pr->capsm, 0, (cap - pr->capsm) * sizeof *pr->suf);
		}
		pr->capsm = cap;
	}
	return &pr->sm[s];
}

/* Whether sid s prints as a name: not empty, namech only, and small enough
 * for a PN code; checked once per sid. */
static bool printable_slow(printer *pr, kf_sid s)
{
	uint32_t *m = smark(pr, s);
	if (!(*m & SM_KNOWN)) {
		size_t n;
		const char *t = kf_str_padded(pr->c, s, &n);
		*m |= SM_KNOWN | (kf_print_valid_name(t, n) ? SM_VALID : 0);
	}
	return *m & SM_VALID;
}

static inline bool printable_name(printer *pr, kf_sid s)
{
	if (!s || s > PN_INDEX)
		return false;
	if (s < pr->capsm && (pr->sm[s] & SM_KNOWN))
		return pr->sm[s] & SM_VALID;
	return printable_slow(pr, s);
}

static void set_mark(printer *pr, kf_sid s, uint32_t mark)
{
	pr->sm[s] = (pr->sm[s] & ~SM_MARK) | mark;
}

static uint64_t str_hash(const char *s, size_t n)
{
	uint64_t h = 1469598103934665603ULL;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
	return h ^ (h >> 29);
}

/* Adds candidate name s to this scope's generated set unless it is taken by
 * a name of the scope or an earlier generated one; true when added. */
static bool gen_claim(printer *pr, const char *s, size_t n)
{
	kf_sid sid = kf_lookup_str(pr->c, s, n);
	if (sid != KF_NONE && sid < pr->capsm && (pr->sm[sid] & SM_MARK) >= 2 * pr->stamp)
		return false;
	if ((pr->ngset + 1) * 2 > pr->capgset) {
		uint32_t cap = pr->capgset ? pr->capgset * 2 : 64, *old = pr->gset, oldcap = pr->capgset;
		pr->gset = malloc(cap * sizeof *pr->gset);
		if (!pr->gset)
			kf_oom();
		memset(pr->gset, 0xff, cap * sizeof *pr->gset);
		pr->capgset = cap;
		for (uint32_t i = 0; i < oldcap; i++)
			if (old[i] != KF_NONE) {
				pstr *e = &pr->gen[old[i]];
				uint32_t j = (uint32_t)str_hash(e->s, e->n) & (cap - 1);
				while (pr->gset[j] != KF_NONE)
					j = (j + 1) & (cap - 1);
				pr->gset[j] = old[i];
			}
		free(old);
	}
	uint32_t mask = pr->capgset - 1, j = (uint32_t)str_hash(s, n) & mask;
	for (; pr->gset[j] != KF_NONE; j = (j + 1) & mask) {
		pstr *e = &pr->gen[pr->gset[j]];
		if (e->n == n && memcmp(e->s, s, n) == 0)
			return false;
	}
	if (pr->ngen == pr->capgen) {
		pr->capgen = pr->capgen ? pr->capgen * 2 : 64;
		pr->gen = realloc(pr->gen, pr->capgen * sizeof *pr->gen);
		if (!pr->gen)
			kf_oom();
	}
	pr->gen[pr->ngen] = kf_print_keep(pr, s, n);
	pr->gset[j] = pr->ngen++;
	pr->ngset++;
	return true;
}

/* The next suffix to try for name s (`s_1`, `s_2`, ...): a counter per name
 * keeps many clashes linear. */
static uint32_t next_suffix(printer *pr, kf_sid s)
{
	if (!pr->suf) {
		pr->suf = calloc(pr->capsm, sizeof *pr->suf);
		if (!pr->suf)
			kf_oom();
	}
	return ++pr->suf[s];
}

/* Gives value v (and the other results of its node) its printed name. */
static void assign(printer *pr, kf_vid v, uint32_t nres, uint32_t *counter)
{
	kf_sid s = pr->g->val[v].name;
	uint32_t code;
	if (printable_name(pr, s) && (pr->sm[s] & SM_MARK) != 2 * pr->stamp + 1) {
		set_mark(pr, s, 2 * pr->stamp + 1);
		code = s;
	} else if (printable_name(pr, s)) {
		kf_buf b = {0};
		for (;;) {
			b.n = 0;
			kf_buf_put(&b, kf_str(pr->c, s), kf_strlen(pr->c, s));
			kf_buf_printf(&b, "_%u", next_suffix(pr, s));
			if (gen_claim(pr, b.p, b.n))
				break;
		}
		kf_buf_free(&b);
		code = PN_GEN | (pr->ngen - 1);
	} else {
		char buf[16];
		int n;
		do
			n = snprintf(buf, sizeof buf, "%u", (*counter)++);
		while (!gen_claim(pr, buf, (size_t)n));
		code = PN_GEN | (pr->ngen - 1);
	}
	if (nres > 1)
		code |= PN_MULTI;
	for (uint32_t i = 0; i < nres; i++)
		pr->pn[v + i] = code;
}

static inline void mark_name(printer *pr, kf_sid s, uint32_t mine)
{
	if (printable_name(pr, s) && (pr->sm[s] & SM_MARK) < mine) {
		set_mark(pr, s, mine);
		if (pr->suf)
			pr->suf[s] = 0;
	}
}

void kf_print_name_scope(printer *pr, kf_bid b)
{
	kf_graph *g = pr->g;
	kf_block *bk = &g->blk[b];
	uint32_t counter = 0;
	pr->stamp++;
	if (pr->ngset) {
		memset(pr->gset, 0xff, pr->capgset * sizeof *pr->gset);
		pr->ngset = 0;
	}
	/* first every name of the scope, so that generated ones avoid them all;
	 * a name new to this scope starts its suffixes again */
	uint32_t mine = 2 * pr->stamp;
	for (uint32_t i = 0; i < bk->narg; i++)
		mark_name(pr, g->val[bk->arg[i]].name, mine);
	kf_foreach_node(g, b, n)
		if (g->node[n].nres)
			mark_name(pr, g->val[g->node[n].res0].name, mine);
	for (uint32_t i = 0; i < bk->narg; i++)
		assign(pr, bk->arg[i], 1, &counter);
	kf_foreach_node(g, b, n) {
		const kf_node *x = &g->node[n];
		kf_sid s = x->nres == 1 ? g->val[x->res0].name : 0;
		if (s && printable_name(pr, s) && (pr->sm[s] & SM_MARK) != mine + 1) {
			set_mark(pr, s, mine + 1); /* the common case of assign, inline */
			pr->pn[x->res0] = s;
		} else if (x->nres) {
			assign(pr, x->res0, x->nres, &counter);
		}
	}
}

/* `%name` of value v: at a definition, or (with #k) at a use. */
void kf_print_vname(printer *pr, kf_vid v, bool use)
{
	uint32_t e = v < pr->g->nval ? pr->pn[v] : 0;
	if (!e) { /* a broken graph still prints */
		PUTS(pr, "%<bad>");
		return;
	}
	putch(pr, '%');
	if (e & PN_GEN) {
		put_padded(pr, &pr->gen[e & PN_INDEX]);
	} else {
		size_t n;
		const char *t = kf_str_padded(pr->c, e & PN_INDEX, &n);
		put_padded(pr, &(pstr){t, (uint32_t)n});
	}
	if (use && (e & PN_MULTI)) {
		putch(pr, '#');
		kf_print_u64(pr, pr->g->val[v].idx);
	}
}
