/* parse_lit.c: the parser's leaves: types, numbers, strings, attributes and
 * the literal of a `const` (scalar, dense<...> nested by shape, file(...)).
 *
 * A literal is read before its type (the type comes after ':'), so scalars
 * are kept as written (kf_lit) and checked against the dtype afterwards. */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "parse_int.h"

/* ---- numbers ---- */

/* Digits of token t; false on overflow of 64 bits. */
static bool tok_u64(const kf_parser *p, const kf_token *t, uint64_t *out)
{
	uint64_t v = 0;
	for (uint32_t i = 0; i < t->len; i++) {
		unsigned d = (unsigned)(p->text[t->off + i] - '0');
		if (v > (UINT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	*out = v;
	return true;
}

static double tok_double(kf_parser *p, const kf_token *t)
{
	char small[64], *s = t->len < sizeof small ? small : malloc(t->len + 1);
	if (!s)
		abort();
	memcpy(s, p->text + t->off, t->len);
	s[t->len] = 0;
	errno = 0;
	double v = strtod(s, NULL);
	if (errno == ERANGE && isinf(v))
		kf_parse_err(p, t->off, "float literal out of range");
	if (s != small)
		free(s);
	return v;
}

/* A number, inf, nan (each with an optional '-'), true or false. */
static bool parse_scalar(kf_parser *p, kf_lit *l)
{
	bool neg = false;
	*l = (kf_lit){.kind = KF_LIT_INT, .off = p->tok.off};
	if (kf_parse_accept(p, KF_T_MINUS))
		neg = true;
	kf_token t = p->tok;
	if (t.kind == KF_T_INT) {
		uint64_t m = 0;
		if (!tok_u64(p, &t, &m) || m > (uint64_t)INT64_MAX + neg) {
			kf_parse_err(p, l->off, "integer literal out of range");
			m = 0;
		}
		l->i = !neg ? (int64_t)m : m == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)m;
	} else if (t.kind == KF_T_FLOAT) {
		l->kind = KF_LIT_FLOAT;
		l->f = neg ? -tok_double(p, &t) : tok_double(p, &t);
	} else if (kf_parse_is_word(p, "inf") || kf_parse_is_word(p, "nan")) {
		l->kind = KF_LIT_FLOAT;
		l->f = p->text[t.off] == 'i' ? INFINITY : NAN;
		l->f = neg ? -l->f : l->f;
	} else if (!neg && (kf_parse_is_word(p, "true") || kf_parse_is_word(p, "false"))) {
		l->kind = KF_LIT_BOOL;
		l->i = p->text[t.off] == 't';
	} else {
		kf_parse_expected(p, neg ? "a number after '-'" : "a number");
		return false;
	}
	kf_parse_next(p);
	return true;
}

/* ---- strings ---- */

static int hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/* Decodes the string token at p->tok into p->sbuf (reported errors leave
 * the rest decoded) and interns it. */
kf_sid kf_parse_string(kf_parser *p)
{
	const char *s = p->text + p->tok.off + 1, *end = p->text + p->tok.off + p->tok.len - 1;
	p->sbuf.n = 0;
	while (s < end) {
		const char *run = s;
		while (s < end && *s != '\\')
			s++;
		kf_buf_put(&p->sbuf, run, (size_t)(s - run));
		if (s == end)
			break;
		uint32_t at = (uint32_t)(s - p->text);
		char e = s[1], ch = 0;
		s += 2;
		switch (e) {
		case '"': ch = '"'; break;
		case '\\': ch = '\\'; break;
		case 'n': ch = '\n'; break;
		case 't': ch = '\t'; break;
		case 'x': {
			int hi = s < end ? hexval(s[0]) : -1, lo = s + 1 < end ? hexval(s[1]) : -1;
			if (hi < 0 || lo < 0) {
				kf_parse_err(p, at, "'\\x' needs two hex digits");
				continue;
			}
			s += 2;
			ch = (char)(hi * 16 + lo);
			if (!ch) {
				kf_parse_err(p, at, "'\\x00' is not allowed in a string");
				continue;
			}
			break;
		}
		default:
			if (e >= 32 && e < 127)
				kf_parse_err(p, at, "invalid escape '\\%c' in string (use \\\" \\\\ \\n \\t or \\xHH)", e);
			else
				kf_parse_err(p, at, "invalid escape in string (use \\\" \\\\ \\n \\t or \\xHH)");
			continue;
		}
		kf_buf_putc(&p->sbuf, ch);
	}
	kf_parse_next(p);
	return kf_intern(p->c, p->sbuf.n ? p->sbuf.p : "", p->sbuf.n);
}

/* ---- types ---- */

bool kf_parse_type(kf_parser *p, kf_tid *tid)
{
	kf_token t = p->tok;
	char near[48];
	*tid = KF_NONE;
	if (t.kind != KF_T_IDENT) {
		kf_parse_expected(p, "a type (such as f32[4,N])");
		return false;
	}
	/* most types repeat the one before, byte for byte: reuse its id and
	 * skip its tokens (the same bytes lex the same way, up to its ']') */
	if (p->last_type_len && p->len - t.off >= p->last_type_len &&
	    !memcmp(p->text + t.off, p->text + p->last_type_off, p->last_type_len)) {
		p->lx.cur = p->text + t.off + p->last_type_len;
		p->lx.nl = false;
		kf_parse_next(p);
		*tid = p->last_type;
		return true;
	}
	int dt = kf_dtype_parse(p->text + t.off, t.len);
	bool bad = dt < 0;
	if (bad)
		kf_parse_err(p, t.off, "unknown dtype %s (expected f16, bf16, f32, f64, i1, i8, i32 or i64)",
			     kf_parse_near(p, &t, near, sizeof near));
	kf_parse_next(p);
	uint32_t lb = p->tok.off;
	if (!kf_parse_expect(p, KF_T_LBRACK, "'[' after the dtype"))
		return false;
	int64_t dims[KF_MAX_RANK];
	int rank = 0;
	if (p->tok.kind != KF_T_RBRACK) {
		do {
			int64_t d = 0;
			uint64_t u = 0;
			if (p->tok.kind == KF_T_INT) {
				if (!tok_u64(p, &p->tok, &u) || u > (uint64_t)INT64_MAX) {
					kf_parse_err(p, p->tok.off, "dimension out of range");
					bad = true;
				}
				d = (int64_t)u;
			} else if (p->tok.kind == KF_T_IDENT) {
				d = KF_SYM(kf_intern(p->c, p->text + p->tok.off, p->tok.len));
			} else {
				kf_parse_expected(p, "a dimension (a size or a symbol)");
				return false;
			}
			uint32_t off = p->tok.off;
			kf_parse_next(p);
			if (p->tok.kind == KF_T_STAR) {
				/* a product of sizes and symbols, as one canonical dim */
				kf_mono m;
				bool ok = !bad && kf_dim_split(p->c, d, &m);
				while (kf_parse_accept(p, KF_T_STAR)) {
					int64_t f = 0;
					if (p->tok.kind == KF_T_INT) {
						ok = ok && tok_u64(p, &p->tok, &u) && u <= (uint64_t)INT64_MAX;
						f = (int64_t)u;
					} else if (p->tok.kind == KF_T_IDENT) {
						f = KF_SYM(kf_intern(p->c, p->text + p->tok.off, p->tok.len));
					} else {
						kf_parse_expected(p, "a size or a symbol after '*'");
						return false;
					}
					kf_mono fm;
					ok = ok && kf_dim_split(p->c, f, &fm) && m.n + fm.n <= KF_DIM_MAXSYM &&
					     !__builtin_mul_overflow(m.coef, fm.coef, &m.coef);
					for (int i = 0; ok && i < fm.n; i++)
						m.sym[m.n++] = fm.sym[i];
					kf_parse_next(p);
				}
				d = ok ? kf_dim_join(p->c, &m) : KF_DIM_BAD;
				if (d == KF_DIM_BAD && !bad) {
					kf_parse_err(p, off, "dimension out of range (a product of at most %d symbols "
							     "and a size below 2^62)", KF_DIM_MAXSYM);
					bad = true;
				}
			}
			if (rank == KF_MAX_RANK && !bad) {
				kf_parse_err(p, off, "rank exceeds %d", KF_MAX_RANK);
				bad = true;
			} else if (rank < KF_MAX_RANK)
				dims[rank++] = d;
		} while (kf_parse_accept(p, KF_T_COMMA));
	}
	uint32_t rboff = p->tok.off;
	if (!kf_parse_close(p, KF_T_RBRACK, "']'", '[', lb))
		return false;
	if (!bad) {
		kf_type ty = kf_type_make((kf_dtype)dt, rank, dims);
		*tid = kf_type_intern(p->c, &ty);
		p->last_type = *tid;
		p->last_type_off = t.off;
		p->last_type_len = rboff + 1 - t.off;
	}
	return true;
}

/* ---- attributes ---- */

static bool parse_attrval(kf_parser *p, kf_attrval *v, int depth)
{
	memset(v, 0, sizeof *v);
	if (p->tok.kind == KF_T_STRING) {
		v->kind = KF_ATTR_STR;
		v->s = kf_parse_string(p);
		return true;
	}
	if (p->tok.kind == KF_T_LBRACK) {
		uint32_t lb = p->tok.off;
		if (depth >= KF_PARSE_MAX_LIST) {
			kf_parse_err(p, lb, "attribute list nested too deeply (limit %d)", KF_PARSE_MAX_LIST);
			return false;
		}
		kf_parse_next(p);
		kf_attrval *items = NULL;
		uint32_t n = 0, cap = 0;
		bool ok = true;
		if (p->tok.kind != KF_T_RBRACK) {
			do {
				if (n == cap) {
					cap = cap ? cap * 2 : 8;
					items = realloc(items, cap * sizeof *items);
					if (!items)
						abort();
				}
				ok = parse_attrval(p, &items[n++], depth + 1);
			} while (ok && kf_parse_accept(p, KF_T_COMMA));
		}
		ok = ok && kf_parse_close(p, KF_T_RBRACK, "']'", '[', lb);
		v->kind = KF_ATTR_LIST;
		v->n = n;
		v->list = kf_alloc(&p->tmp, (n ? n : 1) * sizeof *v->list);
		if (n)
			memcpy(v->list, items, n * sizeof *items);
		free(items);
		return ok;
	}
	kf_lit l;
	if (!parse_scalar(p, &l))
		return false;
	v->kind = l.kind == KF_LIT_INT ? KF_ATTR_INT : l.kind == KF_LIT_FLOAT ? KF_ATTR_FLOAT : KF_ATTR_BOOL;
	if (l.kind == KF_LIT_FLOAT)
		v->f = l.f;
	else if (l.kind == KF_LIT_BOOL)
		v->b = l.i != 0;
	else
		v->i = l.i;
	return true;
}

bool kf_parse_attrs(kf_parser *p, kf_attr **out, uint32_t *nout)
{
	uint32_t lb = p->tok.off, n = 0, cap = 0;
	kf_attr *a = NULL;
	bool ok = kf_parse_expect(p, KF_T_LBRACE, "'{'");
	if (ok && p->tok.kind != KF_T_RBRACE) {
		do {
			kf_token k = p->tok;
			kf_sid key;
			char near[48];
			if (k.kind == KF_T_IDENT) {
				key = kf_intern(p->c, p->text + k.off, k.len);
				kf_parse_next(p);
			} else if (k.kind == KF_T_STRING) {
				key = kf_parse_string(p);
			} else {
				kf_parse_expected(p, "an attribute name");
				ok = false;
				break;
			}
			for (uint32_t i = 0; i < n; i++)
				if (a[i].key == key)
					kf_parse_err(p, k.off, "duplicate attribute %s", kf_parse_near(p, &k, near, sizeof near));
			if (!kf_parse_expect(p, KF_T_EQ, "'=' after the attribute name")) {
				ok = false;
				break;
			}
			if (n == KF_MAX_ATTRS) {
				kf_parse_err(p, k.off, "too many attributes (limit %d)", KF_MAX_ATTRS);
				ok = false;
				break;
			}
			if (n == cap) {
				cap = cap ? cap * 2 : 8;
				a = realloc(a, cap * sizeof *a);
				if (!a)
					abort();
			}
			a[n].key = key;
			ok = parse_attrval(p, &a[n++].v, 0);
		} while (ok && kf_parse_accept(p, KF_T_COMMA));
	}
	ok = ok && kf_parse_close(p, KF_T_RBRACE, "'}'", '{', lb);
	*out = kf_alloc(&p->tmp, (n ? n : 1) * sizeof **out);
	if (n)
		memcpy(*out, a, n * sizeof *a);
	*nout = n;
	free(a);
	return ok;
}

/* ---- constants ---- */

static void push_lit(kf_parser *p, const kf_lit *l)
{
	if (p->nlit == p->caplit) {
		p->caplit = p->caplit ? p->caplit * 2 : 64;
		p->lit = realloc(p->lit, p->caplit * sizeof *p->lit);
		if (!p->lit)
			abort();
	}
	p->lit[p->nlit++] = *l;
}

/* The shape of a dense literal as it is read. */
typedef struct dshape {
	int rank; /* -1 until the first scalar or empty list says */
	bool seen[KF_MAX_RANK];
	int64_t dim[KF_MAX_RANK];
} dshape;

/* A scalar or a '[...]' at nesting `level`. */
static bool parse_dense(kf_parser *p, int level, dshape *sh)
{
	if (p->tok.kind != KF_T_LBRACK) {
		kf_lit l;
		if (!parse_scalar(p, &l))
			return false;
		if (sh->rank < 0)
			sh->rank = level;
		else if (sh->rank != level)
			kf_parse_err(p, l.off, "dense literal mixes scalars and lists at one depth");
		push_lit(p, &l);
		return true;
	}
	uint32_t lb = p->tok.off;
	if (level >= KF_MAX_RANK) {
		kf_parse_err(p, lb, "dense literal nested deeper than the largest rank (%d)", KF_MAX_RANK);
		return false;
	}
	if (sh->rank >= 0 && level >= sh->rank) {
		kf_parse_err(p, lb, "dense literal mixes scalars and lists at one depth");
		return false;
	}
	kf_parse_next(p);
	int64_t count = 0;
	if (p->tok.kind != KF_T_RBRACK) {
		do {
			if (!parse_dense(p, level + 1, sh))
				return false;
			count++;
		} while (kf_parse_accept(p, KF_T_COMMA));
	}
	if (!kf_parse_close(p, KF_T_RBRACK, "']'", '[', lb))
		return false;
	if (!sh->seen[level]) {
		sh->seen[level] = true;
		sh->dim[level] = count;
		if (count == 0 && sh->rank < 0)
			sh->rank = level + 1;
	} else if (sh->dim[level] != count)
		kf_parse_err(p, lb, "dense literal is not rectangular: this list has %lld element%s, an earlier one %lld",
			     (long long)count, count == 1 ? "" : "s", (long long)sh->dim[level]);
	return true;
}

static void shape_text(kf_buf *b, const int64_t *dim, int rank)
{
	kf_buf_putc(b, '[');
	for (int i = 0; i < rank; i++)
		kf_buf_printf(b, i ? ",%lld" : "%lld", (long long)dim[i]);
	kf_buf_putc(b, ']');
}

/* Checks literal l against dtype dt and stores it as element k. */
static void store_lit(kf_parser *p, const kf_lit *l, kf_dtype dt, kf_const *cst, uint64_t k)
{
	const char *dn = kf_dtype_name(dt);
	if (kf_dtype_is_float(dt)) {
		double v = l->kind == KF_LIT_FLOAT ? l->f : (double)l->i;
		/* out of range: a finite literal that would round to infinity
		 * (one that rounds to the largest finite value is fine: the
		 * printer may write the largest value so) */
		if (l->kind == KF_LIT_BOOL)
			kf_parse_err(p, l->off, "boolean literal for float type %s", dn);
		else if (isfinite(v) && fabs(v) >= kf_dtype_overflow(dt))
			kf_parse_err(p, l->off, "float literal out of range for %s", dn);
		/* the payload is the literal; its value is the type's rounding
		 * of it, which the printer prints (kf_buf_float) */
		if (cst)
			cst->f[k] = v;
		return;
	}
	int64_t lo = dt == KF_I1 ? 0 : dt == KF_I8 ? INT8_MIN : dt == KF_I32 ? INT32_MIN : INT64_MIN;
	int64_t hi = dt == KF_I1 ? 1 : dt == KF_I8 ? INT8_MAX : dt == KF_I32 ? INT32_MAX : INT64_MAX;
	if (l->kind == KF_LIT_FLOAT)
		kf_parse_err(p, l->off, "float literal for integer type %s", dn);
	else if (l->kind == KF_LIT_BOOL && dt != KF_I1)
		kf_parse_err(p, l->off, "boolean literal for type %s (only i1 takes true and false)", dn);
	else if (l->i < lo || l->i > hi)
		kf_parse_err(p, l->off, "integer literal out of range for %s", dn);
	if (cst)
		cst->i[k] = l->i;
}

/* Checks the literal's shape against the type and builds the payload. */
static void build_const(kf_parser *p, int kind, const dshape *sh, kf_sid path, kf_tid tid,
			uint32_t toff, kf_const **out)
{
	/* a scalar (or a one-element dense<v>) of a larger or symbolic type is a
	 * splat; a nested literal must have the type's static shape exactly */
	const kf_type *t = kf_type_get(p->c, tid);
	if (kind == KF_CONST_DENSE && sh->rank != 0) {
		bool same = sh->rank == t->rank;
		for (int i = 0; same && i < t->rank; i++)
			same = sh->dim[i] == t->dim[i];
		if (!same) {
			kf_buf b = {0}, ty = {0};
			shape_text(&b, sh->dim, sh->rank);
			kf_print_type(&ty, p->c, tid);
			kf_parse_err(p, toff, "dense literal has shape %s, but the type is %s", b.p, ty.p);
			kf_buf_free(&b);
			kf_buf_free(&ty);
			return;
		}
	}
	kf_const *cst = NULL;
	if (p->building) {
		cst = kf_alloc(&p->g->arena, sizeof *cst);
		cst->kind = (uint8_t)kind;
		cst->path = path;
		cst->n = kind == KF_CONST_FILE ? 0 : p->nlit;
		if (kind != KF_CONST_FILE && kf_dtype_is_float((kf_dtype)t->dtype))
			cst->f = kf_alloc(&p->g->arena, (p->nlit ? p->nlit : 1) * sizeof *cst->f);
		else if (kind != KF_CONST_FILE)
			cst->i = kf_alloc(&p->g->arena, (p->nlit ? p->nlit : 1) * sizeof *cst->i);
	}
	for (uint32_t k = 0; k < p->nlit && !p->stop; k++)
		store_lit(p, &p->lit[k], (kf_dtype)t->dtype, p->building ? cst : NULL, k);
	*out = p->building ? cst : NULL;
}

bool kf_parse_const(kf_parser *p, kf_const **cst, kf_attr **attrs, uint32_t *nattr, kf_tid *tid)
{
	dshape sh = {.rank = -1};
	kf_sid path = 0;
	int kind;
	*cst = NULL;
	*tid = KF_NONE;
	p->nlit = 0;
	if (kf_parse_is_word(p, "dense")) {
		kind = KF_CONST_DENSE;
		kf_parse_next(p);
		uint32_t lt = p->tok.off;
		if (!kf_parse_expect(p, KF_T_LT, "'<' after 'dense'") || !parse_dense(p, 0, &sh) ||
		    !kf_parse_close(p, KF_T_GT, "'>'", '<', lt))
			return false;
	} else if (kf_parse_is_word(p, "file")) {
		kind = KF_CONST_FILE;
		kf_parse_next(p);
		uint32_t lp = p->tok.off;
		if (!kf_parse_expect(p, KF_T_LPAREN, "'(' after 'file'"))
			return false;
		if (p->tok.kind != KF_T_STRING) {
			kf_parse_expected(p, "a file name in quotes");
			return false;
		}
		path = kf_parse_string(p);
		if (!kf_parse_close(p, KF_T_RPAREN, "')'", '(', lp))
			return false;
	} else {
		kf_lit l;
		kind = KF_CONST_SCALAR;
		int k = p->tok.kind;
		if (k != KF_T_INT && k != KF_T_FLOAT && k != KF_T_MINUS && k != KF_T_IDENT) {
			kf_parse_expected(p, "a constant (a number, true, false, dense<...> or file(\"...\"))");
			return false;
		}
		if (!parse_scalar(p, &l))
			return false;
		push_lit(p, &l);
	}
	*nattr = 0;
	if (p->tok.kind == KF_T_LBRACE && !kf_parse_attrs(p, attrs, nattr))
		return false;
	if (!kf_parse_expect(p, KF_T_COLON, "':' and the constant's type"))
		return false;
	uint32_t toff = p->tok.off;
	if (!kf_parse_type(p, tid))
		return false;
	if (*tid != KF_NONE)
		build_const(p, kind, &sh, path, *tid, toff, cst);
	return true;
}
