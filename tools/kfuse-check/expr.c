/* expr.c: numeric substitution blocks, [[#%fmt,VAR: == expr]].
 *
 * Grammar and error messages follow FileCheck's parseNumericSubstitutionBlock:
 * an optional format (%u %d %x %X, '#' for a 0x prefix, .N precision), an
 * optional definition `VAR:`, an optional `==` constraint, and an expression
 * of + and - over literals, variables, @LINE, parentheses and the calls
 * add sub mul div min max.  Values are 64-bit signed; FileCheck uses
 * arbitrary precision, so only values beyond int64 diverge (overflow error).
 */
#include "kfc.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

/* FileCheck reports these through logAllUnhandledErrors, which ends each
 * with a blank line. */
#define perr(c, at, ...) (kfc_msg((c), (at), NULL, "error", __VA_ARGS__), fputc('\n', stderr))

static const char *const funcs[] = {"add", "div", "max", "min", "mul", "sub"};

typedef struct ep {
	kfc_ctx *c;
	const char *s, *e;
	bool legacy;
	int line;
	int ops; /* operators, parentheses and calls so far: the tree's depth bound */
} ep;

/* Parsing and evaluating recurse once per operator or parenthesis: a bound
 * keeps a hostile check file from overflowing the stack. */
#define MAX_OPS 1000

static bool one_more_op(ep *p, const char *at);

enum { AO_LINE, AO_LEGACY_LIT, AO_ANY };

static bool is_space(int ch)
{
	return ch == ' ' || ch == '\t';
}

static void ltrim(ep *p)
{
	while (p->s < p->e && is_space(*p->s))
		p->s++;
}

static kfc_expr *node(ep *p, char op, const char *from)
{
	kfc_expr *x = kfc_alloc(&p->c->arena, sizeof *x);
	x->op = op;
	x->var = -1;
	x->text = from;
	x->textlen = (size_t)(p->s - from);
	return x;
}

/* Parses a variable name at p->s: [$@]?[A-Za-z_][A-Za-z0-9_]*.  Returns its
 * length, 0 without an error message when the text is not a name. */
static size_t var_name(const char *s, const char *e)
{
	size_t i = 0;
	if (s < e && (*s == '$' || *s == '@'))
		i++;
	if (s + i >= e || !(isalpha((unsigned char)s[i]) || s[i] == '_'))
		return 0;
	for (i++; s + i < e && (isalnum((unsigned char)s[i]) || s[i] == '_'); i++)
		;
	return i;
}

static kfc_expr *parse_expr(ep *p, int ao, bool maybe_constraint);

/* An integer with C-like radix prefixes, as StringRef::consumeInteger(0). */
static bool parse_int(ep *p, int radix, int64_t *v)
{
	const char *s = p->s;
	if (radix == 0) {
		radix = 10;
		if (p->e - s > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') && isxdigit((unsigned char)s[2]))
			radix = 16, s += 2;
		else if (p->e - s > 2 && s[0] == '0' && (s[1] == 'b' || s[1] == 'B') && (s[2] == '0' || s[2] == '1'))
			radix = 2, s += 2;
		else if (p->e - s > 2 && s[0] == '0' && (s[1] == 'o') && s[2] >= '0' && s[2] <= '7')
			radix = 8, s += 2;
		else if (p->e - s > 1 && s[0] == '0' && isdigit((unsigned char)s[1]))
			radix = 8, s += 1;
	}
	uint64_t acc = 0;
	const char *start = s;
	for (; s < p->e; s++) {
		int d = isdigit((unsigned char)*s) ? *s - '0' :
			isalpha((unsigned char)*s) ? tolower((unsigned char)*s) - 'a' + 10 : 99;
		if (d >= radix)
			break;
		if (acc > (UINT64_MAX - (uint64_t)d) / (uint64_t)radix)
			return false;
		acc = acc * (uint64_t)radix + (uint64_t)d;
	}
	if (s == start || acc > INT64_MAX)
		return false;
	*v = (int64_t)acc;
	p->s = s;
	return true;
}

static kfc_expr *var_use(ep *p, const char *name, size_t n)
{
	kfc_ctx *c = p->c;
	kfc_expr *x = node(p, 'v', name);
	x->textlen = n;
	if (name[0] == '@') {
		if (!(n == 5 && !memcmp(name, "@LINE", 5))) {
			perr(c, name, "invalid pseudo numeric variable '%.*s'", (int)n, name);
			return NULL;
		}
		x->var = -1;
		return x;
	}
	int v = kfc_var_find(c, name, n);
	if (v < 0) {
		/* A use before any definition: an error only if still undefined when
		 * matching, like FileCheck's dummy variable. */
		v = kfc_var_add(c, name, n, true);
		c->vars[v].fmt = (kfc_fmt){KFC_FMT_U, false, 0};
	}
	if (c->vars[v].numeric && c->vars[v].def_line && c->vars[v].def_line == p->line) {
		perr(c, name, "numeric variable '%.*s' defined earlier in the same CHECK directive", (int)n, name);
		return NULL;
	}
	x->var = v;
	return x;
}

static kfc_expr *parse_call(ep *p, const char *name, size_t n)
{
	if (!one_more_op(p, name))
		return NULL;
	int f = -1;
	for (int i = 0; i < 6; i++)
		if (strlen(funcs[i]) == n && !memcmp(funcs[i], name, n))
			f = i;
	ltrim(p);
	p->s++; /* '(' */
	kfc_expr *args[2] = {0};
	int nargs = 0;
	ltrim(p);
	if (p->s < p->e && *p->s != ')') {
		for (;;) {
			kfc_expr *a = parse_expr(p, AO_ANY, false);
			if (!a)
				return NULL;
			if (nargs < 2)
				args[nargs] = a;
			nargs++;
			ltrim(p);
			if (p->s < p->e && *p->s == ',') {
				p->s++;
				ltrim(p);
				continue;
			}
			break;
		}
	}
	if (!(p->s < p->e && *p->s == ')')) {
		perr(p->c, p->s, "missing ')' at end of call expression");
		return NULL;
	}
	p->s++;
	if (f < 0) {
		perr(p->c, name, "call to undefined function '%.*s'", (int)n, name);
		return NULL;
	}
	if (nargs != 2) {
		perr(p->c, name, "function '%.*s' takes 2 arguments but %d given",
			(int)n, name, nargs);
		return NULL;
	}
	kfc_expr *x = node(p, 'f', name);
	x->func = f;
	x->a = args[0];
	x->b = args[1];
	return x;
}

static kfc_expr *parse_operand(ep *p, int ao, bool maybe_constraint)
{
	kfc_ctx *c = p->c;
	if (p->s < p->e && *p->s == '(') {
		if (ao != AO_ANY) {
			perr(c, p->s, "parenthesized expression not permitted here");
			return NULL;
		}
		if (!one_more_op(p, p->s))
			return NULL;
		p->s++;
		ltrim(p);
		if (p->s == p->e) {
			perr(c, p->s, "missing operand in expression");
			return NULL;
		}
		kfc_expr *x = parse_expr(p, AO_ANY, false);
		if (!x)
			return NULL;
		ltrim(p);
		if (!(p->s < p->e && *p->s == ')')) {
			perr(c, p->s, "missing ')' at end of nested expression");
			return NULL;
		}
		p->s++;
		return x;
	}
	if (ao == AO_LINE || ao == AO_ANY) {
		size_t n = var_name(p->s, p->e);
		if (n) {
			const char *name = p->s;
			p->s += n;
			const char *save = p->s;
			ltrim(p);
			if (p->s < p->e && *p->s == '(') {
				if (ao != AO_ANY) {
					perr(c, name, "unexpected function call");
					return NULL;
				}
				return parse_call(p, name, n);
			}
			p->s = save;
			return var_use(p, name, n);
		}
		if (ao == AO_LINE) {
			perr(c, p->s, "invalid variable name");
			return NULL;
		}
	}
	const char *from = p->s;
	bool neg = p->s < p->e && *p->s == '-';
	if (neg)
		p->s++;
	int64_t v;
	if (parse_int(p, ao == AO_LEGACY_LIT ? 10 : 0, &v)) {
		kfc_expr *x = node(p, 'n', from);
		x->lit = neg ? -v : v;
		return x;
	}
	p->s = from;
	perr(c, from, "invalid %soperand format",
		maybe_constraint ? "matching constraint or " : "");
	return NULL;
}

static bool one_more_op(ep *p, const char *at)
{
	if (++p->ops <= MAX_OPS)
		return true;
	perr(p->c, at, "expression too complex (over %d operators, calls and parentheses)", MAX_OPS);
	return false;
}

static kfc_expr *parse_expr(ep *p, int ao, bool maybe_constraint)
{
	const char *from = p->s;
	kfc_expr *x = parse_operand(p, ao, maybe_constraint);
	while (x) {
		ltrim(p);
		if (p->s == p->e || *p->s == ')' || *p->s == ',')
			return x;
		const char *op = p->s;
		if (*op != '+' && *op != '-') {
			perr(p->c, op, "unsupported operation '%c'", *op);
			return NULL;
		}
		if (!one_more_op(p, op))
			return NULL;
		p->s++;
		ltrim(p);
		if (p->s == p->e) {
			perr(p->c, p->s, "missing operand in expression");
			return NULL;
		}
		kfc_expr *r = parse_operand(p, p->legacy ? AO_LEGACY_LIT : AO_ANY, false);
		if (!r)
			return NULL;
		kfc_expr *b = node(p, *op, from);
		b->a = x;
		b->b = r;
		x = b;
		if (p->legacy && (ltrim(p), p->s < p->e)) {
			perr(p->c, p->s, "unexpected characters at end of expression '%.*s'",
				(int)(p->e - p->s), p->s);
			return NULL;
		}
	}
	return NULL;
}

static const char *fmt_spec(kfc_fmt f)
{
	static const char *n[] = {"", "%u", "%d", "%x", "%X"};
	return n[f.kind];
}

/* The implicit format of an expression: that of its variables, if they agree. */
static bool implicit_fmt(kfc_ctx *c, const kfc_expr *x, kfc_fmt *out)
{
	*out = (kfc_fmt){0};
	if (!x)
		return true;
	if (x->op == 'v') {
		if (x->var < 0)
			*out = (kfc_fmt){KFC_FMT_U, false, 0};
		else
			*out = c->vars[x->var].fmt;
		return true;
	}
	if (x->op == 'n')
		return true;
	kfc_fmt l, r;
	if (!implicit_fmt(c, x->a, &l) || !implicit_fmt(c, x->b, &r))
		return false;
	if (l.kind && r.kind && memcmp(&l, &r, sizeof l)) {
		perr(c, x->text, "implicit format conflict between '%.*s' (%s) and '%.*s' (%s), need an explicit format specifier",
			(int)x->a->textlen, x->a->text, fmt_spec(l), (int)x->b->textlen, x->b->text, fmt_spec(r));
		return false;
	}
	*out = l.kind ? l : r;
	return true;
}

static bool parse_format(ep *p, const char *s, const char *e, kfc_fmt *f)
{
	kfc_ctx *c = p->c;
	while (s < e && is_space(*s))
		s++;
	while (e > s && is_space(e[-1]))
		e--;
	if (!(s < e && *s == '%')) {
		perr(c, s, "invalid matching format specification in expression");
		return false;
	}
	s++;
	const char *altloc = s;
	if (s < e && *s == '#') {
		f->alt = true;
		s++;
	}
	if (s < e && *s == '.') {
		s++;
		if (!(s < e && isdigit((unsigned char)*s))) {
			perr(c, s, "invalid precision in format specifier");
			return false;
		}
		f->prec = 0;
		while (s < e && isdigit((unsigned char)*s))
			f->prec = f->prec * 10 + (unsigned)(*s++ - '0');
	}
	if (s < e) {
		switch (*s) {
		case 'u': f->kind = KFC_FMT_U; break;
		case 'd': f->kind = KFC_FMT_D; break;
		case 'x': f->kind = KFC_FMT_LX; break;
		case 'X': f->kind = KFC_FMT_UX; break;
		default:
			perr(c, s, "invalid format specifier in expression");
			return false;
		}
		s++;
	}
	if (f->alt && f->kind != KFC_FMT_LX && f->kind != KFC_FMT_UX) {
		perr(c, altloc, "alternate form only supported for hex values");
		return false;
	}
	if (s < e) {
		perr(c, s, "invalid matching format specification in expression");
		return false;
	}
	return true;
}

static int define_var(ep *p, const char *s, const char *e, kfc_fmt fmt)
{
	kfc_ctx *c = p->c;
	while (s < e && is_space(*s))
		s++;
	size_t n = var_name(s, e);
	if (!n) {
		perr(c, s, s < e ? "invalid variable name" : "empty variable name");
		return -1;
	}
	if (s[0] == '@') {
		perr(c, s, "definition of pseudo numeric variable unsupported");
		return -1;
	}
	int v = kfc_var_find(c, s, n);
	if (v >= 0 && !c->vars[v].numeric) {
		perr(c, s, "string variable with name '%.*s' already exists", (int)n, s);
		return -1;
	}
	const char *rest = s + n;
	while (rest < e && is_space(*rest))
		rest++;
	if (rest < e) {
		perr(c, rest, "unexpected characters after numeric variable name");
		return -1;
	}
	if (v < 0)
		v = kfc_var_add(c, s, n, true);
	c->vars[v].fmt = fmt;
	c->vars[v].def_line = p->line;
	return v;
}

bool kfc_expr_block(kfc_ctx *c, const char *s, size_t n, bool legacy, int line,
	kfc_expr **expr, kfc_fmt *fmt, int *defvar, const char **defname, size_t *deflen)
{
	ep p = {.c = c, .s = s, .e = s + n, .legacy = legacy, .line = line};
	kfc_fmt explicit_fmt = {0};
	*expr = NULL;
	*defvar = -1;
	*defname = NULL;
	*deflen = 0;
	/* A ',' before any '(' ends the format (',' also separates call args). */
	const char *comma = memchr(s, ',', n), *paren = memchr(s, '(', n);
	if (comma && (!paren || comma < paren)) {
		if (!parse_format(&p, s, comma, &explicit_fmt))
			return false;
		p.s = comma + 1;
	}
	const char *defs = NULL, *defe = NULL;
	const char *colon = memchr(p.s, ':', (size_t)(p.e - p.s));
	if (colon) {
		defs = p.s;
		defe = colon;
		p.s = colon + 1;
	}
	ltrim(&p);
	bool constraint = false;
	if (p.e - p.s >= 2 && p.s[0] == '=' && p.s[1] == '=') {
		constraint = true;
		p.s += 2;
	}
	ltrim(&p);
	while (p.e > p.s && is_space(p.e[-1]))
		p.e--;
	if (p.s == p.e) {
		if (constraint) {
			perr(c, p.s, "empty numeric expression should not have a constraint");
			return false;
		}
	} else {
		*expr = parse_expr(&p, legacy ? AO_LINE : AO_ANY, !constraint);
		if (!*expr)
			return false;
		if (p.s < p.e) {
			perr(c, p.s, "unsupported operation '%c'", *p.s);
			return false;
		}
	}
	kfc_fmt f = explicit_fmt;
	if (!f.kind) {
		if (!implicit_fmt(c, *expr, &f))
			return false;
		if (!f.kind)
			f = (kfc_fmt){KFC_FMT_U, false, explicit_fmt.prec};
	}
	*fmt = f;
	if (defs) {
		*defvar = define_var(&p, defs, defe, f);
		if (*defvar < 0)
			return false;
		*defname = c->vars[*defvar].name;
		*deflen = strlen(*defname);
	}
	return true;
}

static void add_err(kfc_err *errs, int *nerrs, int maxerrs, const char *at, const char *msg, int n, const char *name)
{
	if (*nerrs >= maxerrs)
		return;
	errs[*nerrs].at = at;
	snprintf(errs[*nerrs].msg, sizeof errs[*nerrs].msg, "%s%.*s", msg, n, name);
	(*nerrs)++;
}

bool kfc_expr_eval(kfc_ctx *c, const kfc_expr *x, int line, int64_t *out,
	kfc_err *errs, int *nerrs, int maxerrs)
{
	switch (x->op) {
	case 'n':
		*out = x->lit;
		return true;
	case 'v':
		if (x->var < 0) {
			*out = line;
			return true;
		}
		if (!c->vars[x->var].has_value || !c->vars[x->var].numeric) {
			add_err(errs, nerrs, maxerrs, x->text, "undefined variable: ", (int)x->textlen, x->text);
			return false;
		}
		*out = c->vars[x->var].nval;
		return true;
	default:
		break;
	}
	int64_t a, b;
	/* Both sides are evaluated so every undefined variable is reported. */
	bool ok = kfc_expr_eval(c, x->a, line, &a, errs, nerrs, maxerrs);
	ok = kfc_expr_eval(c, x->b, line, &b, errs, nerrs, maxerrs) && ok;
	if (!ok)
		return false;
	int f = x->op == '+' ? 0 : x->op == '-' ? 5 : x->func;
	bool ovf = false;
	switch (f) {
	case 0: ovf = __builtin_add_overflow(a, b, out); break;
	case 1:
		ovf = b == 0 || (a == INT64_MIN && b == -1);
		if (!ovf)
			*out = a / b;
		break;
	case 2: *out = a > b ? a : b; break;
	case 3: *out = a < b ? a : b; break;
	case 4: ovf = __builtin_mul_overflow(a, b, out); break;
	case 5: ovf = __builtin_sub_overflow(a, b, out); break;
	}
	if (ovf) {
		add_err(errs, nerrs, maxerrs, x->text, "overflow", 0, "");
		return false;
	}
	return true;
}

bool kfc_fmt_value(kfc_fmt f, int64_t v, kfc_str *out)
{
	if (f.kind != KFC_FMT_D && v < 0)
		return false;
	char digits[32];
	uint64_t mag = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
	const char *spec = f.kind == KFC_FMT_LX ? "%llx" : f.kind == KFC_FMT_UX ? "%llX" : "%llu";
	int nd = snprintf(digits, sizeof digits, spec, (unsigned long long)mag);
	if (v < 0)
		kfc_str_putc(out, '-');
	if (f.alt)
		kfc_str_put(out, "0x", 2);
	for (int i = nd; i < (int)f.prec; i++)
		kfc_str_putc(out, '0');
	kfc_str_put(out, digits, (size_t)nd);
	return true;
}

void kfc_fmt_wildcard(kfc_fmt f, kfc_str *out)
{
	const char *alt = f.alt ? "0x" : "";
	const char *d = f.kind == KFC_FMT_LX ? "0-9a-f" : f.kind == KFC_FMT_UX ? "0-9A-F" : "0-9";
	const char *nz = f.kind == KFC_FMT_LX ? "1-9a-f" : f.kind == KFC_FMT_UX ? "1-9A-F" : "1-9";
	const char *sign = f.kind == KFC_FMT_D ? "-?" : "";
	if (f.prec)
		kfc_str_printf(out, "%s%s([%s][%s]*)?[%s]{%u}", alt, sign, nz, d, d, f.prec);
	else
		kfc_str_printf(out, "%s%s[%s]+", alt, sign, d);
}

int64_t kfc_fmt_parse(kfc_fmt f, const char *s, size_t n)
{
	bool neg = n && *s == '-';
	if (neg)
		s++, n--;
	if (f.alt && n >= 2 && s[0] == '0' && s[1] == 'x')
		s += 2, n -= 2;
	int radix = (f.kind == KFC_FMT_LX || f.kind == KFC_FMT_UX) ? 16 : 10;
	uint64_t acc = 0;
	for (size_t i = 0; i < n; i++) {
		int ch = tolower((unsigned char)s[i]);
		acc = acc * (uint64_t)radix + (uint64_t)(isdigit(ch) ? ch - '0' : ch - 'a' + 10);
	}
	return neg ? -(int64_t)acc : (int64_t)acc;
}
