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
 * Programs are compiled once per pattern.  Repetition counts are expanded;
 * a program over KFC_RE_MAXPROG instructions does not compile (a regex that
 * does not compile never matches, as in FileCheck).
 */
#include "kfc.h"

#include <ctype.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

enum { I_BYTE, I_SET, I_ANY, I_SPLIT, I_JMP, I_SAVE, I_BOL, I_EOL, I_WBEG, I_WEND, I_BREF, I_MARK, I_CHECK, I_MATCH };

struct kfc_inst {
	uint8_t op, c;
	int32_t x, y; /* jump targets (x preferred), a set, a slot, a group, a register */
};

#define KFC_RE_MAXPROG (1 << 20)
#define KFC_RE_MAXDEPTH 512      /* parentheses nesting */

/* ---- parsing the canonical ERE into an AST ------------------------------------------------ */

enum { N_EMPTY, N_BYTE, N_SET, N_ANY, N_BOL, N_EOL, N_WBEG, N_WEND, N_BREF, N_CAT, N_ALT, N_REP, N_GROUP };

typedef struct node {
	int kind;
	int a, b;      /* children (CAT, ALT: a, b; REP, GROUP: a) */
	int lo, hi;    /* REP: counts, hi < 0 for no bound; GROUP: number; BYTE: byte; SET: set; BREF: group */
} node;

typedef struct parser {
	const char *s, *e;
	node *n;
	int nn, capn;
	kfc_re *re;
	int ngroup, depth;
	bool bad;
} parser;

static int mk(parser *p, int kind, int a, int b, int lo, int hi)
{
	if (p->nn == p->capn) {
		p->capn = p->capn ? 2 * p->capn : 64;
		p->n = kfc_xrealloc(p->n, (size_t)p->capn * sizeof *p->n);
	}
	p->n[p->nn] = (node){kind, a, b, lo, hi};
	return p->nn++;
}

static int add_set(kfc_re *re, const uint64_t bits[4])
{
	re->sets = kfc_xrealloc(re->sets, (size_t)(re->nsets + 1) * sizeof *re->sets);
	memcpy(re->sets[re->nsets], bits, sizeof re->sets[0]);
	return re->nsets++;
}

static void bit_set(uint64_t *b, int c) { b[c >> 6] |= (uint64_t)1 << (c & 63); }
static bool bit_has(const uint64_t *b, int c) { return (b[c >> 6] >> (c & 63)) & 1; }

/* A bracket expression as emit_set writes it: ']' first, ranges a-z, '-'
 * last or first.  With REG_NEWLINE a negated set never matches '\n'. */
static int p_set(parser *p)
{
	uint64_t bits[4] = {0};
	bool neg = false, first = true;
	if (p->s < p->e && *p->s == '^') {
		neg = true;
		p->s++;
	}
	while (p->s < p->e && (*p->s != ']' || first)) {
		int lo = (unsigned char)*p->s++, hi = lo;
		if (!first || lo != '-') {
			if (p->s + 1 < p->e && p->s[0] == '-' && p->s[1] != ']') {
				hi = (unsigned char)p->s[1];
				p->s += 2;
			}
		}
		first = false;
		for (int c = lo; c <= hi; c++) {
			bit_set(bits, c);
			if (p->re->icase && isalpha(c)) {
				bit_set(bits, tolower(c));
				bit_set(bits, toupper(c));
			}
		}
	}
	if (p->s >= p->e) {
		p->bad = true;
		return mk(p, N_EMPTY, -1, -1, 0, 0);
	}
	p->s++; /* ']' */
	if (neg) {
		for (int i = 0; i < 4; i++)
			bits[i] = ~bits[i];
		bits['\n' >> 6] &= ~((uint64_t)1 << ('\n' & 63));
	}
	return mk(p, N_SET, -1, -1, add_set(p->re, bits), 0);
}

static int byte_node(parser *p, int c)
{
	if (p->re->icase && isalpha(c)) {
		uint64_t bits[4] = {0};
		bit_set(bits, tolower(c));
		bit_set(bits, toupper(c));
		return mk(p, N_SET, -1, -1, add_set(p->re, bits), 0);
	}
	return mk(p, N_BYTE, -1, -1, c, 0);
}

static int p_alt(parser *p);

static int p_atom(parser *p)
{
	int c = (unsigned char)*p->s++;
	switch (c) {
	case '(': {
		if (++p->depth > KFC_RE_MAXDEPTH) {
			p->bad = true;
			return mk(p, N_EMPTY, -1, -1, 0, 0);
		}
		int g = ++p->ngroup;
		int a = p_alt(p);
		p->depth--;
		if (p->s >= p->e || *p->s != ')')
			p->bad = true;
		else
			p->s++;
		return mk(p, N_GROUP, a, -1, g, 0);
	}
	case '.': return mk(p, N_ANY, -1, -1, 0, 0);
	case '^': return mk(p, N_BOL, -1, -1, 0, 0);
	case '$': return mk(p, N_EOL, -1, -1, 0, 0);
	case '[': return p_set(p);
	case '\\':
		if (p->s >= p->e) {
			p->bad = true;
			return mk(p, N_EMPTY, -1, -1, 0, 0);
		}
		c = (unsigned char)*p->s++;
		if (c >= '1' && c <= '9') {
			p->re->backrefs = true;
			return mk(p, N_BREF, -1, -1, c - '0', 0);
		}
		if (c == '<')
			return mk(p, N_WBEG, -1, -1, 0, 0);
		if (c == '>')
			return mk(p, N_WEND, -1, -1, 0, 0);
		return byte_node(p, c);
	default:
		return byte_node(p, c);
	}
}

static int p_count(parser *p)
{
	int v = 0;
	while (p->s < p->e && isdigit((unsigned char)*p->s) && v < 100000)
		v = v * 10 + (*p->s++ - '0');
	return v;
}

static int p_rep(parser *p)
{
	int a = p_atom(p);
	while (p->s < p->e && !p->bad) {
		int c = *p->s, lo, hi;
		if (c == '*')
			lo = 0, hi = -1;
		else if (c == '+')
			lo = 1, hi = -1;
		else if (c == '?')
			lo = 0, hi = 1;
		else if (c == '{') {
			p->s++;
			lo = hi = p_count(p);
			if (p->s < p->e && *p->s == ',') {
				p->s++;
				hi = p->s < p->e && *p->s == '}' ? -1 : p_count(p);
			}
			if (p->s >= p->e || *p->s != '}') {
				p->bad = true;
				break;
			}
		} else
			break;
		p->s++;
		a = mk(p, N_REP, a, -1, lo, hi);
	}
	return a;
}

static int p_cat(parser *p)
{
	int a = -1;
	while (p->s < p->e && *p->s != '|' && *p->s != ')' && !p->bad) {
		int b = p_rep(p);
		a = a < 0 ? b : mk(p, N_CAT, a, b, 0, 0);
	}
	return a < 0 ? mk(p, N_EMPTY, -1, -1, 0, 0) : a;
}

static int p_alt(parser *p)
{
	int a = p_cat(p);
	while (p->s < p->e && *p->s == '|' && !p->bad) {
		p->s++;
		a = mk(p, N_ALT, a, p_cat(p), 0, 0);
	}
	return a;
}

/* ---- compiling the AST to a program ------------------------------------------------------ */

typedef struct comp {
	parser *p;
	kfc_re *re;
	int nreg;
	bool over;
} comp;

static int emit(comp *c, int op, int x, int y, int ch)
{
	kfc_re *re = c->re;
	if (re->n >= KFC_RE_MAXPROG) {
		c->over = true;
		return re->n;
	}
	if (re->n == re->cap) {
		re->cap = re->cap ? 2 * re->cap : 64;
		re->prog = kfc_xrealloc(re->prog, (size_t)re->cap * sizeof *re->prog);
	}
	re->prog[re->n] = (struct kfc_inst){(uint8_t)op, (uint8_t)ch, x, y};
	return re->n++;
}

static void gen(comp *c, int i);

/* e*: a loop that never repeats an empty iteration (MARK/CHECK, for the
 * backtracker; the Pike VM cannot loop at one position anyway). */
static void gen_star(comp *c, int body)
{
	int reg = c->nreg++;
	int split = emit(c, I_SPLIT, 0, 0, 0);
	int start = emit(c, I_MARK, reg, 0, 0);
	gen(c, body);
	emit(c, I_CHECK, reg, 0, 0);
	emit(c, I_JMP, split, 0, 0);
	if (c->over)
		return;
	c->re->prog[split].x = start;
	c->re->prog[split].y = c->re->n;
}

static void gen(comp *c, int i)
{
	if (c->over)
		return;
	node *nd = &c->p->n[i];
	switch (nd->kind) {
	case N_EMPTY: break;
	case N_BYTE: emit(c, I_BYTE, 0, 0, nd->lo); break;
	case N_SET: emit(c, I_SET, nd->lo, 0, 0); break;
	case N_ANY: emit(c, I_ANY, 0, 0, 0); break;
	case N_BOL: emit(c, I_BOL, 0, 0, 0); break;
	case N_EOL: emit(c, I_EOL, 0, 0, 0); break;
	case N_WBEG: emit(c, I_WBEG, 0, 0, 0); break;
	case N_WEND: emit(c, I_WEND, 0, 0, 0); break;
	case N_BREF: emit(c, I_BREF, nd->lo, 0, 0); break;
	case N_CAT:
		gen(c, nd->a);
		gen(c, nd->b);
		break;
	case N_ALT: {
		int split = emit(c, I_SPLIT, 0, 0, 0);
		gen(c, nd->a);
		int jmp = emit(c, I_JMP, 0, 0, 0);
		int second = c->re->n;
		gen(c, nd->b);
		if (c->over)
			return;
		c->re->prog[split].x = split + 1;
		c->re->prog[split].y = second;
		c->re->prog[jmp].x = c->re->n;
		break;
	}
	case N_GROUP:
		emit(c, I_SAVE, 2 * nd->lo, 0, 0);
		gen(c, nd->a);
		emit(c, I_SAVE, 2 * nd->lo + 1, 0, 0);
		break;
	case N_REP: {
		int body = nd->a, lo = nd->lo, hi = nd->hi;
		for (int k = 0; k < lo && !c->over; k++)
			gen(c, body);
		if (hi < 0) {
			gen_star(c, body);
			break;
		}
		/* (e(e(e)?)?)? for the hi - lo optional copies */
		int nopt = hi - lo, *splits = NULL;
		if (nopt > 0)
			splits = kfc_xrealloc(NULL, (size_t)nopt * sizeof *splits);
		for (int k = 0; k < nopt && !c->over; k++) {
			splits[k] = emit(c, I_SPLIT, 0, 0, 0);
			c->re->prog[splits[k]].x = splits[k] + 1;
			gen(c, body);
		}
		for (int k = 0; k < nopt && !c->over; k++)
			c->re->prog[splits[k]].y = c->re->n;
		free(splits);
		break;
	}
	}
}

/* The bytes a match can begin with; false when it may be empty (or begin
 * with anything), so that a search cannot skip ahead. */
static bool first_bytes(kfc_re *re, uint64_t out[4])
{
	memset(out, 0, 4 * sizeof *out);
	bool *seen = kfc_xrealloc(NULL, (size_t)re->n);
	memset(seen, 0, (size_t)re->n);
	int *stack = kfc_xrealloc(NULL, ((size_t)re->n * 2 + 2) * sizeof *stack), sp = 0;
	bool ok = true;
	stack[sp++] = 0;
	while (sp && ok) {
		int pc = stack[--sp];
		if (seen[pc])
			continue;
		seen[pc] = true;
		const struct kfc_inst *in = &re->prog[pc];
		switch (in->op) {
		case I_BYTE: bit_set(out, in->c); break;
		case I_SET: for (int k = 0; k < 4; k++) out[k] |= re->sets[in->x][k]; break;
		case I_ANY: ok = false; break;
		case I_SPLIT: stack[sp++] = in->y; stack[sp++] = in->x; break;
		case I_JMP: stack[sp++] = in->x; break;
		case I_MATCH: case I_BREF: ok = false; break;
		default: stack[sp++] = pc + 1; break; /* SAVE, assertions, MARK, CHECK */
		}
	}
	free(seen);
	free(stack);
	return ok;
}

/* The nodes a match must pass through in order: the top-level sequence,
 * through groups.  [-0, +0] */
static void mandatory(parser *p, int i, int **seq, int *nseq, int *cap)
{
	node *nd = &p->n[i];
	if (nd->kind == N_CAT) {
		mandatory(p, nd->a, seq, nseq, cap);
		mandatory(p, nd->b, seq, nseq, cap);
	} else if (nd->kind == N_GROUP) {
		mandatory(p, nd->a, seq, nseq, cap);
	} else {
		if (*nseq == *cap) {
			*cap = *cap ? 2 * *cap : 32;
			*seq = kfc_xrealloc(*seq, (size_t)*cap * sizeof **seq);
		}
		(*seq)[(*nseq)++] = i;
	}
}

/* The longest run of literal bytes every match contains (none with
 * REG_ICASE: its letters are sets). */
static void required_literal(parser *p, int root, kfc_re *re)
{
	int *seq = NULL, nseq = 0, cap = 0;
	mandatory(p, root, &seq, &nseq, &cap);
	int best = 0, bestlen = 0;
	for (int i = 0; i < nseq;) {
		int j = i;
		while (j < nseq && p->n[seq[j]].kind == N_BYTE)
			j++;
		if (j - i > bestlen) {
			best = i;
			bestlen = j - i;
		}
		i = j > i ? j : i + 1;
	}
	if (bestlen >= 2) {
		re->lit = kfc_xrealloc(NULL, (size_t)bestlen);
		for (int k = 0; k < bestlen; k++)
			re->lit[k] = (char)p->n[seq[best + k]].lo;
		re->nlit = (size_t)bestlen;
	}
	free(seq);
}

/* Can no match contain a newline?  ('.' and [^...] never match one.) */
static bool one_line(const kfc_re *re)
{
	for (int pc = 0; pc < re->n; pc++) {
		const struct kfc_inst *in = &re->prog[pc];
		if ((in->op == I_BYTE && in->c == '\n') || (in->op == I_SET && bit_has(re->sets[in->x], '\n')))
			return false;
	}
	return true;
}

int kfc_re_compile(kfc_re *re, const char *s, size_t n, bool icase)
{
	memset(re, 0, sizeof *re);
	re->icase = icase;
	parser p = {.s = s, .e = s + n, .re = re};
	int root = p_alt(&p);
	if (p.s < p.e) /* a stray ')' */
		p.bad = true;
	comp c = {&p, re, 0, false};
	if (!p.bad) {
		gen(&c, root);
		emit(&c, I_MATCH, 0, 0, 0);
	}
	if (p.bad || c.over) {
		free(p.n);
		kfc_re_free(re);
		return -1;
	}
	re->ngroups = p.ngroup;
	re->nreg = c.nreg;
	re->skip = first_bytes(re, re->first);
	required_literal(&p, root, re);
	free(p.n);
	re->oneline = one_line(re);
	if (re->ngroups && !re->backrefs && !memchr(s, 0, n)) {
		char *z = kfc_xrealloc(NULL, n + 1);
		memcpy(z, s, n);
		z[n] = 0;
		re->have_posix = !regcomp(&re->posix, z, REG_EXTENDED | REG_NEWLINE | (icase ? REG_ICASE : 0));
		free(z);
	}
	return 0;
}

void kfc_re_free(kfc_re *re)
{
	free(re->prog);
	free(re->sets);
	free(re->lit);
	if (re->have_posix)
		regfree(&re->posix);
	memset(re, 0, sizeof *re);
}

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
	case I_SET: return bit_has(re->sets[in->x], ch);
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
				while (pos < to && !bit_has(re->first, (unsigned char)m->b[pos]))
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
			while (s < n && !bit_has(re->first, (unsigned char)b[s]))
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
