/* rematch.c: kfuse-check's regex matcher, in bounded time.
 *
 * glibc's regexec backtracks on backreferences ({{(a*)(a*)(a*)\3\2\1b}} ran
 * for minutes on 120 characters) and restarts at each position of a failing
 * search.  This engine reads the canonical ERE that regex.c produces and
 * matches it the way FileCheck's llvm::Regex does (POSIX: leftmost-longest,
 * REG_NEWLINE, optional REG_ICASE), in two ways:
 *
 *   no backreferences  a Thompson NFA run as a Pike VM (RE2's approach): one
 *       pass over the text, every thread advanced together, one thread per
 *       instruction, so time is O(text x program), and finds the
 *       leftmost-longest span.  When captures are wanted, glibc takes them
 *       from just that span (its POSIX submatch rules are what checks were
 *       written against; without backreferences and on a span known to
 *       match it does not backtrack or restart); where glibc cannot (its
 *       anchors in repetitions are wrong: /(\>.){0,2}a/ does not match "aaa"),
 *       a second Pike pass over the span picks them, preferring for each
 *       group in order the earlier start, then the longer end.
 *   backreferences     a backtracking search (no automaton can match them),
 *       with a step budget, as FileCheck's LLVM regex has: past it the
 *       match fails with an error instead of running for ever.
 *
 * Programs are compiled once per pattern (recomp.c).
 */
#include "rematch.h"

#include <ctype.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* ---- shared by both engines --------------------------------------------------------------- */

static bool word(int c) { return isalnum(c) || c == '_'; }

/* Does the zero-width assertion at pc hold at pos? */
static bool holds(int op, const char *b, size_t n, size_t pos)
{
	int prev = pos ? (unsigned char)b[pos - 1] : -1, next = pos < n ? (unsigned char)b[pos] : -1;
	switch (op) {
	case I_BOL: return pos == 0 || prev == '\n';
	case I_EOL: return pos == n || next == '\n';
	case I_WBEG: return next >= 0 && word(next) && (prev < 0 || !word(prev));
	case I_WEND: return prev >= 0 && word(prev) && (next < 0 || !word(next));
	default: return true;
	}
}

static bool consumes(const kfc_re *re, const struct kfc_inst *in, int ch)
{
	switch (in->op) {
	case I_BYTE: return in->c == ch;
	case I_SET: return kfc_bit_has(re->sets[in->x], ch);
	case I_ANY: return ch != '\n';
	default: return false;
	}
}

/* POSIX's preference between two capture vectors of the same overall
 * match: for each group in order, the earlier start, then the longer end
 * (a group that took part beats one that did not).  <0: a is better. */
static int prefer(const ssize_t *a, const ssize_t *b, int ngroups)
{
	for (int g = 1; g <= ngroups; g++) {
		ssize_t sa = a[2 * g] < 0 ? SSIZE_MAX : a[2 * g], sb = b[2 * g] < 0 ? SSIZE_MAX : b[2 * g];
		if (sa != sb)
			return sa < sb ? -1 : 1;
		if (a[2 * g + 1] != b[2 * g + 1])
			return a[2 * g + 1] > b[2 * g + 1] ? -1 : 1;
	}
	return 0;
}

/* ---- the Pike VM --------------------------------------------------------------------------- */

typedef struct tlist {
	int *pc;       /* threads in priority order */
	ssize_t *cap;  /* nslot per thread */
	int n;
	int *at;       /* at[pc]: index in pc[] + 1, valid when gen[pc] == cur */
	int *gen;
	int cur;
} tlist;

typedef struct vm {
	const kfc_re *re;
	const char *b;
	size_t n;
	int nslot;     /* 2 (the span) or 2 * (ngroups + 1) */
	int gens;      /* list generations handed out */
	tlist l[2];
	int *stack;    /* the closure's work: pairs (pc, index of its captures) */
	size_t nstack, capstack;
	ssize_t *scratch; /* capture vectors of the closure */
	size_t capscratch;
} vm;

static void tl_init(tlist *t, int nprog, int nslot)
{
	t->pc = kfc_xrealloc(NULL, (size_t)nprog * sizeof *t->pc);
	t->cap = kfc_xrealloc(NULL, (size_t)nprog * (size_t)nslot * sizeof *t->cap);
	t->at = kfc_xrealloc(NULL, (size_t)nprog * sizeof *t->at);
	t->gen = kfc_xrealloc(NULL, (size_t)nprog * sizeof *t->gen);
	for (int i = 0; i < nprog; i++)
		t->gen[i] = -1;
	t->n = 0;
	t->cur = 0;
}

static void tl_clear(vm *m, tlist *t)
{
	t->n = 0;
	t->cur = ++m->gens;
}

static void tl_free(tlist *t)
{
	free(t->pc);
	free(t->cap);
	free(t->at);
	free(t->gen);
}

static void push(vm *m, int pc, size_t ci)
{
	if (m->nstack + 2 > m->capstack) {
		m->capstack = m->capstack ? 2 * m->capstack : 256;
		m->stack = kfc_xrealloc(m->stack, m->capstack * sizeof *m->stack);
	}
	m->stack[m->nstack++] = pc;
	m->stack[m->nstack++] = (int)ci;
}

/* A fresh capture vector in the scratch area: its index. */
static size_t scratch(vm *m, size_t *used)
{
	size_t ns = (size_t)m->nslot;
	if ((*used + 1) * ns > m->capscratch) {
		m->capscratch = m->capscratch ? 2 * m->capscratch : 64 * ns;
		m->scratch = kfc_xrealloc(m->scratch, m->capscratch * sizeof *m->scratch);
	}
	return (*used)++;
}

/* Adds pc with captures cap0 at pos to list t, following the epsilon moves
 * depth first, the preferred branch first.  A pc already in the list keeps
 * its captures unless the new ones are preferred (full captures only); then
 * they are replaced and its moves followed again. */
static void add(vm *m, tlist *t, int pc0, const ssize_t *cap0, size_t pos)
{
	const kfc_re *re = m->re;
	size_t ns = (size_t)m->nslot, used = 0;
	size_t c0 = scratch(m, &used);
	memcpy(m->scratch + c0 * ns, cap0, ns * sizeof *cap0);
	m->nstack = 0;
	push(m, pc0, c0);
	while (m->nstack) {
		size_t ci = (size_t)m->stack[--m->nstack];
		int pc = m->stack[--m->nstack];
		ssize_t *c = m->scratch + ci * ns;
		if (t->gen[pc] == t->cur) {
			ssize_t *old = t->cap + (size_t)(t->at[pc] - 1) * ns;
			if (ns == 2 || prefer(c, old, re->ngroups) >= 0)
				continue;
			memcpy(old, c, ns * sizeof *c); /* preferred: taken, and followed again */
		} else {
			t->gen[pc] = t->cur;
			t->pc[t->n] = pc;
			memcpy(t->cap + (size_t)t->n * ns, c, ns * sizeof *c);
			t->at[pc] = ++t->n;
		}
		const struct kfc_inst *in = &re->prog[pc];
		switch (in->op) {
		case I_JMP: push(m, in->x, ci); break;
		case I_SPLIT: /* x is popped first */
			push(m, in->y, ci);
			push(m, in->x, ci);
			break;
		case I_SAVE:
			if ((size_t)in->x < ns) {
				size_t nci = scratch(m, &used); /* may move the scratch area */
				ssize_t *nc = m->scratch + nci * ns;
				memcpy(nc, m->scratch + ci * ns, ns * sizeof *nc);
				nc[in->x] = (ssize_t)pos;
				ci = nci;
			}
			push(m, pc + 1, ci);
			break;
		case I_BOL: case I_EOL: case I_WBEG: case I_WEND:
			if (holds(in->op, m->b, m->n, pos))
				push(m, pc + 1, ci);
			break;
		case I_MARK: case I_CHECK: push(m, pc + 1, ci); break;
		default: break; /* consuming, MATCH: stays in the list */
		}
	}
}

/* One pass: the leftmost-longest match within [from, to] (anchored: only
 * one that starts at from and ends at to); best gets its nslot captures.
 * false when there is none. */
static bool pike(vm *m, size_t from, size_t to, bool anchored, ssize_t *best)
{
	const kfc_re *re = m->re;
	int ns = m->nslot;
	bool found = false;
	ssize_t *seed = kfc_xrealloc(NULL, (size_t)ns * sizeof *seed);
	tlist *cl = &m->l[0], *nl = &m->l[1];
	tl_clear(m, cl);
	for (size_t pos = from;; pos++) {
		if (!found && (!anchored || pos == from)) {
			if (cl->n == 0 && re->skip && !anchored) {
				/* nothing running: on to where a match can begin */
				while (pos < to && !kfc_bit_has(re->first, (unsigned char)m->b[pos]))
					pos++;
				if (pos >= to)
					break;
			}
			for (int k = 0; k < ns; k++)
				seed[k] = -1;
			seed[0] = (ssize_t)pos;
			add(m, cl, 0, seed, pos); /* last: the lowest priority */
		}
		if (cl->n == 0)
			break;
		tl_clear(m, nl);
		for (int i = 0; i < cl->n; i++) {
			ssize_t *c = cl->cap + (size_t)i * (size_t)ns;
			if (found && c[0] > best[0])
				continue; /* starts after a match already found: cannot win */
			const struct kfc_inst *in = &re->prog[cl->pc[i]];
			if (in->op == I_MATCH) {
				if (anchored && pos != to)
					continue;
				c[1] = (ssize_t)pos;
				if (!found || c[0] < best[0] || (c[0] == best[0] && pos > (size_t)best[1]) ||
				    (c[0] == best[0] && pos == (size_t)best[1] && ns > 2 && prefer(c, best, re->ngroups) < 0)) {
					memcpy(best, c, (size_t)ns * sizeof *c);
					found = true;
				}
				continue;
			}
			if (pos < to && consumes(re, in, (unsigned char)m->b[pos]))
				add(m, nl, cl->pc[i] + 1, c, pos + 1);
		}
		tlist *tmp = cl;
		cl = nl;
		nl = tmp;
		if (pos >= to)
			break;
	}
	free(seed);
	return found;
}

/* ---- the backtracker (backreferences) ------------------------------------------------------ */

typedef struct bt {
	int pc;
	size_t pos;
	int slot;   /* >= 0: restore this slot (capture or register) to old; -1: a branch */
	ssize_t old;
} bt;

static bool same_text(const char *a, const char *b, size_t n, bool icase)
{
	if (!icase)
		return !memcmp(a, b, n);
	for (size_t i = 0; i < n; i++)
		if (tolower((unsigned char)a[i]) != tolower((unsigned char)b[i]))
			return false;
	return true;
}

/* All matches starting at s, the longest (then the preferred captures) in
 * best: 1 found, 0 none, -1 the budget ran out. */
static int backtrack(const kfc_re *re, const char *b, size_t n, size_t s, ssize_t *best, uint64_t *steps)
{
	int nslot = 2 * (re->ngroups + 1), nv = nslot + re->nreg;
	ssize_t *v = kfc_xrealloc(NULL, (size_t)nv * sizeof *v);
	for (int k = 0; k < nv; k++)
		v[k] = -1;
	v[0] = (ssize_t)s;
	bt *st = NULL;
	size_t sp = 0, cap = 0;
	int found = 0, pc = 0;
	size_t pos = s;
	for (;;) {
		if (++*steps > KFC_RE_BUDGET) {
			found = -1;
			break;
		}
		const struct kfc_inst *in = &re->prog[pc];
		bool ok = true;
		switch (in->op) {
		case I_BYTE: case I_SET: case I_ANY:
			ok = pos < n && consumes(re, in, (unsigned char)b[pos]);
			pos++;
			pc++;
			break;
		case I_JMP: pc = in->x; break;
		case I_SPLIT:
		case I_SAVE: case I_MARK:
			if (sp == cap) {
				cap = cap ? 2 * cap : 256;
				st = kfc_xrealloc(st, cap * sizeof *st);
			}
			if (in->op == I_SPLIT) {
				st[sp++] = (bt){in->y, pos, -1, 0};
				pc = in->x;
			} else {
				int slot = in->op == I_SAVE ? in->x : nslot + in->x;
				st[sp++] = (bt){0, 0, slot, v[slot]};
				v[slot] = (ssize_t)pos;
				pc++;
			}
			break;
		case I_CHECK: ok = v[nslot + in->x] != (ssize_t)pos; pc++; break;
		case I_BOL: case I_EOL: case I_WBEG: case I_WEND: ok = holds(in->op, b, n, pos); pc++; break;
		case I_BREF: {
			ssize_t gs = in->x <= re->ngroups ? v[2 * in->x] : -1;
			ssize_t ge = in->x <= re->ngroups ? v[2 * in->x + 1] : -1;
			size_t len = gs >= 0 && ge >= gs ? (size_t)(ge - gs) : 0;
			ok = gs >= 0 && ge >= gs && n - pos >= len && same_text(b + gs, b + pos, len, re->icase);
			pos += len;
			pc++;
			break;
		}
		case I_MATCH:
			v[1] = (ssize_t)pos;
			if (!found || pos > (size_t)best[1] || (pos == (size_t)best[1] && prefer(v, best, re->ngroups) < 0))
				memcpy(best, v, (size_t)nslot * sizeof *v);
			found = 1;
			ok = false; /* and look for a longer one */
			break;
		}
		if (ok)
			continue;
		/* back to the last branch, undoing what was saved since */
		for (;;) {
			if (!sp)
				goto done;
			bt *t = &st[--sp];
			if (t->slot >= 0) {
				v[t->slot] = t->old;
				continue;
			}
			pc = t->pc;
			pos = t->pos;
			break;
		}
	}
done:
	free(st);
	free(v);
	return found;
}

/* ---- the search ------------------------------------------------------------------------------ */

/* The search over [from, to] of b (the span in best): 1 found, 0 none,
 * -1 over the budget. */
static int search(vm *v, size_t from, size_t to, ssize_t *best, uint64_t *steps)
{
	const kfc_re *re = v->re;
	if (!re->backrefs)
		return pike(v, from, to, false, best);
	/* the backtracker sees the range as the whole text: at from it is the
	 * search's start or a line's, where ^ holds either way */
	const char *b = v->b + from;
	size_t n = to - from;
	int nslot = 2 * (re->ngroups + 1);
	for (size_t s = 0; s <= n; s++) {
		if (re->skip) {
			while (s < n && !kfc_bit_has(re->first, (unsigned char)b[s]))
				s++;
			if (s >= n)
				break;
		}
		int r = backtrack(re, b, n, s, best, steps);
		if (r > 0)
			for (int k = 0; k < nslot; k++)
				best[k] += best[k] >= 0 ? (ssize_t)from : 0;
		if (r)
			return r;
	}
	return 0;
}

/* Captures by glibc over the span found (see the top); false when it
 * cannot give them. */
static bool posix_captures(const kfc_re *re, const char *b, size_t nm, ssize_t *best)
{
	regmatch_t *g = kfc_xrealloc(NULL, nm * sizeof *g);
	g[0].rm_so = (regoff_t)best[0];
	g[0].rm_eo = (regoff_t)best[1];
	bool ok = regexec(&re->posix, b, nm, g, REG_STARTEND) == 0 && g[0].rm_so == (regoff_t)best[0] &&
		  g[0].rm_eo == (regoff_t)best[1];
	for (size_t k = 1; ok && k < nm && (int)k <= re->ngroups; k++) {
		best[2 * k] = g[k].rm_so;
		best[2 * k + 1] = g[k].rm_eo;
	}
	free(g);
	return ok;
}

int kfc_re_exec(const kfc_re *re, const char *b, size_t n, size_t nm, regmatch_t *m)
{
	int nslot = 2 * (re->ngroups + 1);
	ssize_t *best = kfc_xrealloc(NULL, (size_t)nslot * sizeof *best);
	for (int k = 0; k < nslot; k++)
		best[k] = -1;
	vm v = {.re = re, .b = b, .n = n, .nslot = 2};
	if (!re->backrefs) {
		tl_init(&v.l[0], re->n, nslot);
		tl_init(&v.l[1], re->n, nslot);
	}
	uint64_t steps = 0;
	int r = 0;
	if (re->nlit && re->oneline) {
		/* A match lies within one line and holds the literal: only lines
		 * with it are searched, from where the search starts or the line
		 * does, so the first one with a match has the leftmost match. */
		size_t pos = 0;
		while (!r && pos < n) {
			const char *hit = memmem(b + pos, n - pos, re->lit, re->nlit);
			if (!hit)
				break;
			size_t ls = (size_t)(hit - b), le;
			while (ls > pos && b[ls - 1] != '\n')
				ls--;
			const char *nl = memchr(hit, '\n', n - (size_t)(hit - b));
			le = nl ? (size_t)(nl - b) : n;
			r = search(&v, ls, le, best, &steps);
			pos = le + 1;
		}
	} else {
		r = search(&v, 0, n, best, &steps);
	}
	if (r > 0 && nm > 1 && re->ngroups > 0 && !re->backrefs &&
	    !(re->have_posix && posix_captures(re, b, nm, best))) {
		/* the captures: a second pass over just the span */
		v.nslot = nslot;
		v.capscratch = 0; /* sized for the span's vectors: grown afresh */
		free(v.scratch);
		v.scratch = NULL;
		pike(&v, (size_t)best[0], (size_t)best[1], true, best);
	}
	if (!re->backrefs) {
		tl_free(&v.l[0]);
		tl_free(&v.l[1]);
	}
	free(v.stack);
	free(v.scratch);
	if (r > 0)
		for (size_t k = 0; k < nm; k++) {
			bool have = (int)k <= re->ngroups && best[2 * k] >= 0 && best[2 * k + 1] >= 0;
			m[k].rm_so = have ? (regoff_t)best[2 * k] : -1;
			m[k].rm_eo = have ? (regoff_t)best[2 * k + 1] : -1;
		}
	free(best);
	return r > 0 ? 0 : r < 0 ? -1 : 1;
}
