/* regex.c: LLVM-flavoured POSIX ERE -> glibc ERE.
 *
 * FileCheck compiles {{...}} with llvm::Regex, Henry Spencer's engine.  It
 * differs from glibc's regcomp in what it rejects and in escapes: `\d`, `\w`,
 * `\s`, `\n` are the letters d, w, s, n (glibc gives `\w` a meaning), `()` is
 * fine but an empty branch (`a|`, `{{}}`) is an error, `a**` is an error,
 * `{` not followed by a digit is a literal brace.  So each piece is parsed
 * here with Spencer's grammar and its error messages, and re-emitted in a
 * canonical form glibc reads the same way: escapes resolved, bracket
 * expressions rebuilt from their byte sets.  Semantics kept: leftmost-longest
 * matching, REG_NEWLINE, backreferences \1-\9.
 */
#include "kfc.h"

#include <ctype.h>
#include <string.h>

typedef struct rx {
	const char *s, *e;   /* remaining input */
	kfc_str *out;
	const char *err;
	int nsub;            /* groups opened so far (local numbering) */
	bool closed[10];     /* local group k closed */
	int first;           /* absolute number of the piece's first group */
	bool wrapped;        /* group first-1 wraps the piece and is still open */
	bool dead;           /* a backreference that can never match in context */
	int depth;           /* parentheses open: bounded, as parsing recurses */
} rx;

static const char E_EMPTY[] = "empty (sub)expression";
static const char E_BADRPT[] = "repetition-operator operand invalid";
static const char E_EPAREN[] = "parentheses not balanced";
static const char E_EBRACK[] = "brackets ([ ]) not balanced";
static const char E_EBRACE[] = "braces not balanced";
static const char E_BADBR[] = "invalid repetition count(s)";
static const char E_EESCAPE[] = "trailing backslash (\\)";
static const char E_ESUBREG[] = "invalid backreference number";
static const char E_ECTYPE[] = "invalid character class";
static const char E_ERANGE[] = "invalid character range";
static const char E_ECOLLATE[] = "invalid collating element";
/* not Spencer's: its parser recursed without bound (a stack overflow) */
static const char E_EDEPTH[] = "parentheses nested too deeply (limit 256)";

#define MORE(r) ((r)->s < (r)->e)
#define MORE2(r) ((r)->s + 1 < (r)->e)
#define PEEK(r) ((unsigned char)*(r)->s)
#define PEEK2(r) ((unsigned char)(r)->s[1])

static void fail(rx *r, const char *msg)
{
	if (!r->err)
		r->err = msg;
	r->s = r->e; /* stop parsing: the first error is the one reported */
}

static bool is_meta(int c)
{
	return c && strchr("()^$|*+?.[]\\{}", c) != NULL;
}

/* Emits byte c as a literal. */
static void literal(kfc_str *o, int c)
{
	if (is_meta(c))
		kfc_str_putc(o, '\\');
	kfc_str_putc(o, (char)c);
}

void kfc_regex_escape(kfc_str *out, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		literal(out, (unsigned char)s[i]);
}

static void p_ere(rx *r, int stop);

static bool is_rep_start(rx *r)
{
	if (!MORE(r))
		return false;
	int c = PEEK(r);
	return c == '*' || c == '+' || c == '?' ||
		(c == '{' && MORE2(r) && isdigit((unsigned char)PEEK2(r)));
}

static int p_count(rx *r)
{
	int count = 0, ndigits = 0;
	while (MORE(r) && isdigit((unsigned char)PEEK(r)) && count <= 255) {
		count = count * 10 + (*r->s++ - '0');
		ndigits++;
	}
	if (!(ndigits > 0 && count <= 255))
		fail(r, E_BADBR);
	return count;
}

static bool cclass(const char *name, size_t n, int ch)
{
	static const struct { const char *n; int (*f)(int); } tab[] = {
		{"alnum", isalnum}, {"alpha", isalpha}, {"blank", isblank},
		{"cntrl", iscntrl}, {"digit", isdigit}, {"graph", isgraph},
		{"lower", islower}, {"print", isprint}, {"punct", ispunct},
		{"space", isspace}, {"upper", isupper}, {"xdigit", isxdigit},
	};
	for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
		if (strlen(tab[i].n) == n && !memcmp(tab[i].n, name, n))
			return ch < 0 ? true : tab[i].f(ch) != 0;
	return false;
}

/* [.c.] or a plain byte */
static int p_b_symbol(rx *r)
{
	if (!(MORE2(r) && PEEK(r) == '[' && PEEK2(r) == '.'))
		return MORE(r) ? (unsigned char)*r->s++ : 0;
	r->s += 2;
	/* Only single-character collating elements: C locale. */
	if (!MORE(r)) {
		fail(r, E_EBRACK);
		return 0;
	}
	int c = (unsigned char)*r->s++;
	if (!(MORE2(r) && PEEK(r) == '.' && PEEK2(r) == ']')) {
		fail(r, E_ECOLLATE);
		return 0;
	}
	r->s += 2;
	return c;
}

static void p_b_term(rx *r, bool set[256])
{
	int c = 0;
	if (MORE(r) && PEEK(r) == '[')
		c = MORE2(r) ? PEEK2(r) : 0;
	else if (MORE(r) && PEEK(r) == '-') {
		fail(r, E_ERANGE);
		return;
	}
	if (c == ':' || c == '=') {
		r->s += 2;
		if (!MORE(r)) {
			fail(r, E_EBRACK);
			return;
		}
		if (PEEK(r) == '-' || PEEK(r) == ']') {
			fail(r, c == ':' ? E_ECTYPE : E_ECOLLATE);
			return;
		}
		const char *name = r->s;
		if (c == ':') {
			while (MORE(r) && isalpha((unsigned char)PEEK(r)))
				r->s++;
			size_t n = (size_t)(r->s - name);
			if (!cclass(name, n, -1)) {
				fail(r, E_ECTYPE);
				return;
			}
			for (int ch = 1; ch < 256; ch++)
				if (cclass(name, n, ch))
					set[ch] = true;
		} else {
			/* an equivalence class of one character in the C locale */
			set[(unsigned char)*r->s++] = true;
		}
		if (!MORE(r)) {
			fail(r, E_EBRACK);
			return;
		}
		if (!(MORE2(r) && PEEK(r) == c && PEEK2(r) == ']')) {
			fail(r, c == ':' ? E_ECTYPE : E_ECOLLATE);
			return;
		}
		r->s += 2;
		return;
	}
	int start = p_b_symbol(r), finish = start;
	if (MORE(r) && PEEK(r) == '-' && MORE2(r) && PEEK2(r) != ']') {
		r->s++;
		if (MORE(r) && PEEK(r) == '-') {
			r->s++;
			finish = '-';
		} else
			finish = p_b_symbol(r);
	}
	if (start > finish) {
		fail(r, E_ERANGE);
		return;
	}
	for (int ch = start; ch <= finish; ch++)
		set[ch] = true;
}

/* Emits a byte set as a glibc bracket expression: ']' first, '-' last. */
static void emit_set(kfc_str *o, const bool set[256], bool invert)
{
	size_t mark = o->n;
	kfc_str_putc(o, '[');
	if (invert)
		kfc_str_putc(o, '^');
	size_t first = o->n;
	if (set[']'])
		kfc_str_putc(o, ']');
	for (int ch = 1; ch < 256; ch++) {
		if (!set[ch] || strchr("]-^[", ch))
			continue;
		int end = ch;
		while (end + 1 < 256 && set[end + 1] && !strchr("]-^[", end + 1))
			end++;
		if (end - ch >= 2) {
			kfc_str_putc(o, (char)ch);
			kfc_str_putc(o, '-');
			kfc_str_putc(o, (char)end);
			ch = end;
		} else
			kfc_str_putc(o, (char)ch);
	}
	/* '[' late, so it never opens "[." "[:" "[="; '^' never first */
	if (set['['])
		kfc_str_putc(o, '[');
	if (set['^'] && o->n == first && !invert) {
		if (!set['-']) {
			o->n = mark;
			kfc_str_put(o, "\\^", 2);
			return;
		}
		kfc_str_putc(o, '-');
		kfc_str_putc(o, '^');
	} else {
		if (set['^'])
			kfc_str_putc(o, '^');
		if (set['-'])
			kfc_str_putc(o, '-');
	}
	kfc_str_putc(o, ']');
}

static void p_bracket(rx *r)
{
	/* Spencer's word-boundary kludges */
	if (r->e - r->s >= 6 && !strncmp(r->s, "[:<:]]", 6)) {
		r->s += 6;
		kfc_str_put(r->out, "\\<", 2);
		return;
	}
	if (r->e - r->s >= 6 && !strncmp(r->s, "[:>:]]", 6)) {
		r->s += 6;
		kfc_str_put(r->out, "\\>", 2);
		return;
	}
	bool set[256] = {0}, invert = false;
	if (MORE(r) && PEEK(r) == '^') {
		invert = true;
		r->s++;
	}
	if (MORE(r) && PEEK(r) == ']') {
		set[']'] = true;
		r->s++;
	} else if (MORE(r) && PEEK(r) == '-') {
		set['-'] = true;
		r->s++;
	}
	while (MORE(r) && PEEK(r) != ']' && !(PEEK(r) == '-' && MORE2(r) && PEEK2(r) == ']'))
		p_b_term(r, set);
	if (MORE(r) && PEEK(r) == '-') {
		set['-'] = true;
		r->s++;
	}
	if (!(MORE(r) && PEEK(r) == ']')) {
		fail(r, E_EBRACK);
		return;
	}
	r->s++;
	emit_set(r->out, set, invert);
}

/* A parenthesised group; the '(' read. */
static void p_group(rx *r)
{
	if (!MORE(r)) {
		fail(r, E_EPAREN);
		return;
	}
	if (r->depth >= 256) {
		fail(r, E_EDEPTH);
		return;
	}
	int sub = ++r->nsub;
	kfc_str_putc(r->out, '(');
	r->depth++;
	if (PEEK(r) != ')')
		p_ere(r, ')');
	r->depth--;
	if (r->err)
		return;
	if (!(MORE(r) && PEEK(r) == ')')) {
		fail(r, E_EPAREN);
		return;
	}
	r->s++;
	if (sub < 10)
		r->closed[sub] = true;
	kfc_str_putc(r->out, ')');
}

/* An escape; the backslash read. */
static void p_escape(rx *r)
{
	if (!MORE(r)) {
		fail(r, E_EESCAPE);
		return;
	}
	int c = (unsigned char)*r->s++;
	if (c >= '1' && c <= '9') {
		int k = c - '0';
		if (!r->closed[k]) {
			fail(r, E_ESUBREG);
			return;
		}
		/* The number is absolute in FileCheck's combined regex, where
		 * group k may be an earlier piece, this piece's own wrapper
		 * (still open: never matches) or one of its inner groups. */
		int j = k - r->first + 1;
		if ((r->wrapped && k == r->first - 1) || (j >= 1 && !(j < 10 && r->closed[j])))
			r->dead = true;
		kfc_str_putc(r->out, '\\');
		kfc_str_putc(r->out, (char)c);
	} else
		literal(r->out, c);
}

/* The repetition after an atom (is_rep_start said one follows). */
static void p_repeat(rx *r, bool wascaret)
{
	int c = (unsigned char)*r->s++;
	if (wascaret) {
		fail(r, E_BADRPT);
		return;
	}
	if (c != '{')
		kfc_str_putc(r->out, (char)c);
	else {
		int lo = p_count(r), hi = lo;
		bool inf = false;
		if (MORE(r) && PEEK(r) == ',') {
			r->s++;
			if (MORE(r) && isdigit((unsigned char)PEEK(r))) {
				hi = p_count(r);
				if (lo > hi)
					fail(r, E_BADBR);
			} else
				inf = true;
		}
		if (!(MORE(r) && PEEK(r) == '}')) {
			while (MORE(r) && PEEK(r) != '}')
				r->s++;
			fail(r, MORE(r) ? E_BADBR : E_EBRACE);
		}
		if (r->err)
			return;
		r->s++;
		if (inf)
			kfc_str_printf(r->out, "{%d,}", lo);
		else
			kfc_str_printf(r->out, "{%d,%d}", lo, hi);
	}
	if (is_rep_start(r))
		fail(r, E_BADRPT);
}

static void p_ere_exp(rx *r)
{
	int c = (unsigned char)*r->s++;
	bool wascaret = false;
	switch (c) {
	case '(':
		p_group(r);
		break;
	case ')':
		fail(r, E_EPAREN);
		return;
	case '^':
		kfc_str_putc(r->out, '^');
		wascaret = true;
		break;
	case '$':
		kfc_str_putc(r->out, '$');
		break;
	case '|':
		fail(r, E_EMPTY);
		return;
	case '*': case '+': case '?':
		fail(r, E_BADRPT);
		return;
	case '.':
		kfc_str_putc(r->out, '.');
		break;
	case '[':
		p_bracket(r);
		break;
	case '\\':
		p_escape(r);
		break;
	case '{':
		if (MORE(r) && isdigit((unsigned char)PEEK(r))) {
			fail(r, E_BADRPT);
			return;
		}
		literal(r->out, c);
		break;
	default:
		literal(r->out, c);
		break;
	}
	if (r->err || !is_rep_start(r))
		return;
	p_repeat(r, wascaret);
}

static void p_ere(rx *r, int stop)
{
	for (;;) {
		const char *conc = r->s;
		while (MORE(r) && PEEK(r) != '|' && PEEK(r) != stop && !r->err)
			p_ere_exp(r);
		if (r->err)
			return;
		if (r->s == conc) {
			fail(r, E_EMPTY);
			return;
		}
		if (!(MORE(r) && PEEK(r) == '|'))
			break;
		r->s++;
		kfc_str_putc(r->out, '|');
	}
}

bool kfc_regex_translate(const char *s, size_t n, int first, bool wrapped,
	kfc_str *out, int *ngroups, bool *dead, const char **err)
{
	rx r = {.s = s, .e = s + n, .out = out, .first = first, .wrapped = wrapped};
	p_ere(&r, -1);
	if (!r.err && MORE(&r))
		fail(&r, E_EPAREN); /* only a stray ')' stops the top level early */
	if (r.err) {
		*err = r.err;
		return false;
	}
	*ngroups = r.nsub;
	*dead = r.dead;
	*err = NULL;
	return true;
}
