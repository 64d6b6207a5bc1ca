/* recomp.c: kfuse-check's regexes, parsed and compiled (rematch.c runs
 * them; see there for the design).
 *
 * The input is the canonical ERE regex.c writes (escapes resolved, bracket
 * expressions rebuilt from byte sets), with substitution values escaped.  It
 * is parsed into an AST, then compiled to a Thompson program: SPLIT for
 * choices, SAVE for groups, MARK/CHECK around each loop body (the
 * backtracker must not repeat an empty iteration), counted repetitions
 * expanded.  A program over KFC_RE_MAXPROG instructions, or parentheses
 * nested deeper than KFC_RE_MAXDEPTH, do not compile (a regex that does not
 * compile never matches, as in FileCheck).  Compiling also finds what lets a
 * search skip ahead: the bytes a match can begin with, a literal every
 * match contains, whether a match can span lines.
 */
#include "rematch.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <regex.h>

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
			kfc_bit_set(bits, c);
			if (p->re->icase && isalpha(c)) {
				kfc_bit_set(bits, tolower(c));
				kfc_bit_set(bits, toupper(c));
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
		kfc_bit_set(bits, tolower(c));
		kfc_bit_set(bits, toupper(c));
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
		case I_BYTE: kfc_bit_set(out, in->c); break;
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
		if ((in->op == I_BYTE && in->c == '\n') || (in->op == I_SET && kfc_bit_has(re->sets[in->x], '\n')))
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
