/* dagscan.c: making FileCheck's CheckDag near-linear without changing what
 * it finds.
 *
 * CheckDag searches each DAG pattern from the group's start and, when the
 * match overlaps one already taken, again from the end of that one.  So k
 * patterns over a region of n bytes cost k searches of up to n bytes each
 * (999 CHECK-DAG lines on 50 MB took 28 s), and k identical patterns cost
 * k^2/2 searches.  Two things remove the repeated work, neither changing
 * a result:
 *
 *   kfc_dag_hints   one pass over the region finds, for every pattern of
 *       the group that has a required literal and stays on one line
 *       (kfc_pattern_literal), the first occurrence of its literal; its
 *       first search then begins at that line (no match can begin before);
 *   kfc_dag_memo    a search's answer, keyed by the pattern's text and the
 *       offset it starts at: the same search again (an identical pattern
 *       retracing the skips of the one before it) is a table lookup.
 *       Only for patterns that neither use nor define variables.
 */
#include "kfc.h"

#include <stdlib.h>
#include <string.h>

/* ---- first occurrences of many literals in one pass ------------------------------------ */

typedef struct lit {
	const char *s;
	size_t n;
	uint64_t key;   /* the first K bytes */
	int next;       /* chain in the table */
	size_t hit;     /* first occurrence, SIZE_MAX before it is found */
} lit;

static uint64_t load(const char *p, size_t k)
{
	uint64_t x = 0;
	memcpy(&x, p, k);
	return x;
}

void kfc_dag_hints(kfc_ctx *c, kfc_pattern **pats, int np, const char *buf, size_t n, size_t *hint)
{
	lit *l = kfc_xrealloc(NULL, (size_t)(np ? np : 1) * sizeof *l);
	int *of = kfc_xrealloc(NULL, (size_t)(np ? np : 1) * sizeof *of); /* pattern -> its literal */
	int nl = 0;
	size_t k = 8;
	for (int i = 0; i < np; i++) {
		hint[i] = 0;
		of[i] = -1;
		const char *s;
		size_t sn;
		if (pats[i]->kind != KFC_DAG || !kfc_pattern_literal(c, pats[i], &s, &sn))
			continue;
		int j = 0; /* identical literals share an entry */
		while (j < nl && !(l[j].n == sn && !memcmp(l[j].s, s, sn)))
			j++;
		if (j == nl)
			l[nl++] = (lit){s, sn, 0, -1, SIZE_MAX};
		of[i] = j;
		if (sn < k)
			k = sn;
	}
	if (nl) {
		int bits = 4;
		while ((1 << bits) < 2 * nl)
			bits++;
		int *head = kfc_xrealloc(NULL, ((size_t)1 << bits) * sizeof *head);
		for (int i = 0; i < 1 << bits; i++)
			head[i] = -1;
		for (int j = 0; j < nl; j++) {
			l[j].key = load(l[j].s, k);
			uint64_t h = (l[j].key * 0x9E3779B97F4A7C15ULL) >> (64 - bits);
			l[j].next = head[h];
			head[h] = j;
		}
		int left = nl;
		for (size_t i = 0; i + k <= n && left; i++) {
			uint64_t x = load(buf + i, k);
			for (int j = head[(x * 0x9E3779B97F4A7C15ULL) >> (64 - bits)]; j >= 0; j = l[j].next)
				if (l[j].hit == SIZE_MAX && l[j].key == x && i + l[j].n <= n &&
				    !memcmp(buf + i, l[j].s, l[j].n)) {
					l[j].hit = i;
					left--;
				}
		}
		free(head);
		/* the search may start at the line of the first occurrence; with
		 * none, the search from the start fails on its own */
		for (int i = 0; i < np; i++) {
			if (of[i] < 0 || l[of[i]].hit == SIZE_MAX)
				continue;
			size_t h = l[of[i]].hit;
			while (h > 0 && buf[h - 1] != '\n')
				h--;
			hint[i] = h;
		}
	}
	free(l);
	free(of);
}

/* ---- remembered searches --------------------------------------------------------------------- */

typedef struct memo_e {
	const char *text; /* the pattern's text (fixed string or regex), NULL: empty slot */
	size_t tn, from;
	bool fixed;
	int r;
	size_t pos, len;
} memo_e;

struct kfc_dag_memo {
	memo_e *e;
	size_t cap, n;
};

static uint64_t memo_hash(const char *t, size_t tn, size_t from)
{
	uint64_t h = 1469598103934665603ULL ^ from;
	for (size_t i = 0; i < tn; i++)
		h = (h ^ (unsigned char)t[i]) * 1099511628211ULL;
	return h;
}

static bool memo_key(const kfc_pattern *p, const char **t, size_t *tn)
{
	if (p->nsubs || p->ndefs || p->kind == KFC_EOF)
		return false;
	*t = p->is_fixed ? p->fixed : p->re;
	*tn = p->is_fixed ? p->fixedlen : p->relen;
	return *t != NULL;
}

static memo_e *memo_slot(kfc_dag_memo *m, const kfc_pattern *p, size_t from)
{
	const char *t;
	size_t tn;
	if (!memo_key(p, &t, &tn) || !m->cap)
		return NULL;
	for (size_t i = memo_hash(t, tn, from) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
		memo_e *e = &m->e[i];
		if (!e->text || (e->from == from && e->fixed == p->is_fixed && e->tn == tn && !memcmp(e->text, t, tn)))
			return e;
	}
}

kfc_dag_memo *kfc_dag_memo_new(void)
{
	kfc_dag_memo *m = kfc_xrealloc(NULL, sizeof *m);
	m->cap = 64;
	m->n = 0;
	m->e = kfc_xrealloc(NULL, m->cap * sizeof *m->e);
	memset(m->e, 0, m->cap * sizeof *m->e);
	return m;
}

void kfc_dag_memo_free(kfc_dag_memo *m)
{
	if (m)
		free(m->e);
	free(m);
}

bool kfc_dag_memo_get(kfc_dag_memo *m, const kfc_pattern *p, size_t from, int *r, size_t *pos, size_t *len)
{
	memo_e *e = memo_slot(m, p, from);
	if (!e || !e->text)
		return false;
	*r = e->r;
	*pos = e->pos;
	*len = e->len;
	return true;
}

void kfc_dag_memo_put(kfc_dag_memo *m, const kfc_pattern *p, size_t from, int r, size_t pos, size_t len)
{
	const char *t;
	size_t tn;
	if (!memo_key(p, &t, &tn) || r == KFC_MERROR)
		return;
	if (2 * (m->n + 1) > m->cap) { /* grow, keeping the table at most half full */
		memo_e *old = m->e;
		size_t oc = m->cap;
		m->cap *= 2;
		m->e = kfc_xrealloc(NULL, m->cap * sizeof *m->e);
		memset(m->e, 0, m->cap * sizeof *m->e);
		for (size_t i = 0; i < oc; i++)
			if (old[i].text) {
				size_t j = memo_hash(old[i].text, old[i].tn, old[i].from) & (m->cap - 1);
				while (m->e[j].text)
					j = (j + 1) & (m->cap - 1);
				m->e[j] = old[i];
			}
		free(old);
	}
	memo_e *e = memo_slot(m, p, from);
	if (!e->text)
		m->n++;
	*e = (memo_e){t, tn, from, p->is_fixed, r, pos, len};
}
