/* lua_strlib.c: the parts of Lua's string and table libraries that loop in
 * C, replaced by versions that count their steps against the script's
 * instruction budget.
 *
 * Lua's count hook sees only VM instructions, so one call of a C function
 * is one instruction however long it runs: ("a"):rep(28):find(("a*"):rep(14)
 * .. "b") backtracks for minutes, string.rep("", 1e15) and table.move(t, 1,
 * 1e15, 2) loop 10^15 times, and table.insert on a table whose __len says
 * 10^15 shifts that many slots.  Here:
 *
 *   string.find, match, gmatch, gsub   a matcher for Lua 5.4's patterns (the
 *       manual's section 6.4.1: classes, sets, * + - ?, %b, %f, %1-%9, (),
 *       anchors; the same results and error messages), written for kfuse,
 *       that charges one step per match attempt and per character tried;
 *   string.rep, table.move             charge their count, then run Lua's own;
 *   table.insert, table.remove         charge the slots they shift (read once:
 *       a __len that answers differently the second time cannot escape).
 *
 * A step is charged with kf_lcharge, which raises the same "exceeded the
 * instruction limit" error as the hook.
 */
#define _GNU_SOURCE /* memmem */
#include <ctype.h>
#include <string.h>

#include "kf_int.h"
#include "lua_int.h"

#define MAXCAP 32          /* as LUA_MAXCAPTURES */
#define MAXDEPTH 200       /* recursion of one match: "pattern too complex" */
#define CAP_OPEN (-1)
#define CAP_POS (-2)
#define SPECIALS "^$*+?.([%-"

typedef struct mstate {
	const char *src, *end;   /* the subject */
	const char *pend;        /* the pattern's end (the pattern is NUL-terminated) */
	lua_State *L;
	int depth, level;
	uint32_t pending;        /* steps not yet charged */
	struct { const char *at; ptrdiff_t len; } cap[MAXCAP];
} mstate;

/* Steps are charged in batches: kf_lcharge per character would cost more
 * than the matching. */
static void step(mstate *m)
{
	if (++m->pending >= 256) {
		kf_lcharge(m->L, m->pending);
		m->pending = 0;
	}
}

static void flush_steps(mstate *m)
{
	kf_lcharge(m->L, m->pending);
	m->pending = 0;
}

/* ---- one pattern item ------------------------------------------------------------- */

static bool class_has(int c, int cl)
{
	bool r;
	switch (tolower(cl)) {
	case 'a': r = isalpha(c); break;
	case 'c': r = iscntrl(c); break;
	case 'd': r = isdigit(c); break;
	case 'g': r = isgraph(c); break;
	case 'l': r = islower(c); break;
	case 'p': r = ispunct(c); break;
	case 's': r = isspace(c); break;
	case 'u': r = isupper(c); break;
	case 'w': r = isalnum(c); break;
	case 'x': r = isxdigit(c); break;
	default: return cl == c; /* %x for a non-letter x is x itself */
	}
	return isupper(cl) ? !r : r;
}

/* The item starting at p ends where?  A set's first ']' is a member. */
static const char *item_end(mstate *m, const char *p)
{
	char c = *p++;
	if (c == '%') {
		if (p >= m->pend)
			luaL_error(m->L, "malformed pattern (ends with '%%')");
		return p + 1;
	}
	if (c == '[') {
		if (*p == '^')
			p++;
		do {
			if (p >= m->pend)
				luaL_error(m->L, "malformed pattern (missing ']')");
			c = *p++;
			if (c == '%' && p < m->pend)
				p++;
		} while (*p != ']');
		return p + 1;
	}
	return p;
}

/* c in the set [ ... ] from p ('[') to close (its ']'). */
static bool set_has(int c, const char *p, const char *close)
{
	bool in = true;
	p++;
	if (*p == '^') {
		in = false;
		p++;
	}
	for (; p < close; p++) {
		if (*p == '%') {
			p++;
			if (class_has(c, (unsigned char)*p))
				return in;
		} else if (p[1] == '-' && p + 2 < close) {
			if ((unsigned char)p[0] <= c && c <= (unsigned char)p[2])
				return in;
			p += 2;
		} else if ((unsigned char)*p == c) {
			return in;
		}
	}
	return !in;
}

static bool item_has(mstate *m, const char *s, const char *p, const char *ep)
{
	if (s >= m->end)
		return false;
	int c = (unsigned char)*s;
	switch (*p) {
	case '.': return true;
	case '%': return class_has(c, (unsigned char)p[1]);
	case '[': return set_has(c, p, ep - 1);
	default: return (unsigned char)*p == c;
	}
}

/* ---- matching ------------------------------------------------------------------------ */

static const char *match(mstate *m, const char *s, const char *p);

static const char *greedy(mstate *m, const char *s, const char *p, const char *ep)
{
	ptrdiff_t n = 0;
	while (item_has(m, s + n, p, ep)) {
		step(m);
		n++;
	}
	for (; n >= 0; n--) { /* the longest first, then shorter */
		const char *r = match(m, s + n, ep + 1);
		if (r)
			return r;
	}
	return NULL;
}

static const char *lazy(mstate *m, const char *s, const char *p, const char *ep)
{
	for (;;) {
		const char *r = match(m, s, ep + 1);
		if (r)
			return r;
		if (!item_has(m, s, p, ep))
			return NULL;
		s++;
	}
}

static const char *open_cap(mstate *m, const char *s, const char *p, ptrdiff_t what)
{
	if (m->level >= MAXCAP)
		luaL_error(m->L, "too many captures");
	m->cap[m->level].at = s;
	m->cap[m->level].len = what;
	m->level++;
	const char *r = match(m, s, p);
	if (!r)
		m->level--; /* undo */
	return r;
}

static const char *close_cap(mstate *m, const char *s, const char *p)
{
	int l = m->level - 1;
	while (l >= 0 && m->cap[l].len != CAP_OPEN)
		l--;
	if (l < 0)
		luaL_error(m->L, "invalid pattern capture");
	m->cap[l].len = s - m->cap[l].at;
	const char *r = match(m, s, p);
	if (!r)
		m->cap[l].len = CAP_OPEN;
	return r;
}

static const char *balance(mstate *m, const char *s, const char *p)
{
	if (p + 1 >= m->pend)
		luaL_error(m->L, "malformed pattern (missing arguments to '%%b')");
	if (s >= m->end || *s != *p)
		return NULL;
	char open = p[0], close = p[1];
	int depth = 1;
	while (++s < m->end) {
		step(m);
		if (*s == close) {
			if (--depth == 0)
				return s + 1;
		} else if (*s == open) {
			depth++;
		}
	}
	return NULL;
}

static int cap_index(mstate *m, int l)
{
	l -= '1';
	if (l < 0 || l >= m->level || m->cap[l].len == CAP_OPEN)
		luaL_error(m->L, "invalid capture index %%%d", l + 1);
	return l;
}

static const char *backref(mstate *m, const char *s, int l)
{
	l = cap_index(m, l);
	ptrdiff_t n = m->cap[l].len;
	if (n >= 0 && m->end - s >= n && !memcmp(m->cap[l].at, s, (size_t)n))
		return s + n;
	return NULL;
}

/* The end of the match of pattern p at s, or NULL. */
static const char *match(mstate *m, const char *s, const char *p)
{
	if (m->depth-- == 0)
		luaL_error(m->L, "pattern too complex");
	step(m);
	while (p < m->pend) {
		const char *ep;
		switch (*p) {
		case '(':
			s = p + 1 < m->pend && p[1] == ')' ? open_cap(m, s, p + 2, CAP_POS) : open_cap(m, s, p + 1, CAP_OPEN);
			goto done;
		case ')':
			s = close_cap(m, s, p + 1);
			goto done;
		case '$':
			if (p + 1 == m->pend) {
				s = s == m->end ? s : NULL;
				goto done;
			}
			break;
		case '%':
			if (p[1] == 'b') {
				s = balance(m, s, p + 2);
				if (!s)
					goto done;
				p += 4;
				continue;
			}
			if (p[1] == 'f') {
				p += 2;
				if (*p != '[')
					luaL_error(m->L, "missing '[' after '%%f' in pattern");
				ep = item_end(m, p);
				int prev = s == m->src ? 0 : (unsigned char)s[-1];
				int cur = s < m->end ? (unsigned char)*s : 0;
				if (set_has(prev, p, ep - 1) || !set_has(cur, p, ep - 1)) {
					s = NULL;
					goto done;
				}
				p = ep;
				continue;
			}
			if (isdigit((unsigned char)p[1])) {
				s = backref(m, s, (unsigned char)p[1]);
				if (!s)
					goto done;
				p += 2;
				continue;
			}
			break;
		}
		/* a single item, maybe quantified */
		ep = item_end(m, p);
		if (!item_has(m, s, p, ep)) {
			if (*ep == '*' || *ep == '?' || *ep == '-') { /* may match empty */
				p = ep + 1;
				continue;
			}
			s = NULL;
			goto done;
		}
		switch (*ep) {
		case '?': {
			const char *r = match(m, s + 1, ep + 1);
			if (r) {
				s = r;
				goto done;
			}
			p = ep + 1;
			continue;
		}
		case '+': s = greedy(m, s + 1, p, ep); goto done;
		case '*': s = greedy(m, s, p, ep); goto done;
		case '-': s = lazy(m, s, p, ep); goto done;
		default:
			s++;
			p = ep;
			step(m);
			continue;
		}
	}
done:
	m->depth++;
	return s;
}

/* ---- captures ------------------------------------------------------------------------- */

/* Pushes capture i (the whole match s..e when there are none).  [-0, +1, v] */
static void push_cap(mstate *m, int i, const char *s, const char *e)
{
	if (i >= m->level) {
		if (i != 0)
			luaL_error(m->L, "invalid capture index %%%d", i + 1);
		lua_pushlstring(m->L, s, (size_t)(e - s));
		return;
	}
	ptrdiff_t n = m->cap[i].len;
	if (n == CAP_OPEN)
		luaL_error(m->L, "unfinished capture");
	if (n == CAP_POS)
		lua_pushinteger(m->L, m->cap[i].at - m->src + 1);
	else
		lua_pushlstring(m->L, m->cap[i].at, (size_t)n);
}

/* Every capture, or the whole match when whole and there are none. */
static int push_caps(mstate *m, const char *s, const char *e, bool whole)
{
	int n = m->level == 0 && whole ? 1 : m->level;
	luaL_checkstack(m->L, n, "too many captures");
	for (int i = 0; i < n; i++)
		push_cap(m, i, s, e);
	return n;
}

static void start(mstate *m, lua_State *L, const char *s, size_t ls, const char *p, size_t lp)
{
	m->L = L;
	m->src = s;
	m->end = s + ls;
	m->pend = p + lp;
	m->pending = 0;
}

static void again(mstate *m)
{
	m->level = 0;
	m->depth = MAXDEPTH;
}

/* ---- the library functions ------------------------------------------------------------- */

static size_t start_at(lua_Integer pos, size_t len)
{
	if (pos > 0)
		return (size_t)pos;
	if (pos == 0 || pos < -(lua_Integer)len)
		return 1;
	return len + (size_t)pos + 1;
}

static bool plain_text(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] && strchr(SPECIALS, p[i]))
			return false;
	return true;
}

/* string.find(s, p [, init [, plain]]) and string.match(s, p [, init]).
 * [-(2|3|4), +(1..), v] */
static int find_or_match(lua_State *L, bool find)
{
	size_t ls, lp;
	const char *s = luaL_checklstring(L, 1, &ls);
	const char *p = luaL_checklstring(L, 2, &lp);
	size_t init = start_at(luaL_optinteger(L, 3, 1), ls) - 1;
	if (init > ls) {
		luaL_pushfail(L);
		return 1;
	}
	if (find && (lua_toboolean(L, 4) || plain_text(p, lp))) {
		const char *at = memmem(s + init, ls - init, p, lp);
		kf_lcharge(L, (ls - init) / 64); /* a linear scan, charged lightly */
		if (!at) {
			luaL_pushfail(L);
			return 1;
		}
		lua_pushinteger(L, at - s + 1);
		lua_pushinteger(L, at - s + (lua_Integer)lp);
		return 2;
	}
	mstate m;
	bool anchor = lp && *p == '^';
	if (anchor) {
		p++;
		lp--;
	}
	start(&m, L, s, ls, p, lp);
	const char *s1 = s + init;
	do {
		again(&m);
		const char *e = match(&m, s1, p);
		if (e) {
			flush_steps(&m);
			if (find) {
				lua_pushinteger(L, s1 - s + 1);
				lua_pushinteger(L, e - s);
				return push_caps(&m, NULL, NULL, false) + 2;
			}
			return push_caps(&m, s1, e, true);
		}
	} while (s1++ < m.end && !anchor);
	flush_steps(&m);
	luaL_pushfail(L);
	return 1;
}

static int l_find(lua_State *L) { return find_or_match(L, true); }
static int l_match(lua_State *L) { return find_or_match(L, false); }

typedef struct gm {
	mstate m;
	const char *at, *last; /* where the next search starts; the last match's end */
	const char *p;
} gm;

/* The gmatch iterator: upvalues are s, p and the state.  [-0, +(0..), v] */
static int gmatch_next(lua_State *L)
{
	gm *g = lua_touserdata(L, lua_upvalueindex(3));
	g->m.L = L;
	for (const char *s = g->at; s <= g->m.end; s++) {
		again(&g->m);
		const char *e = match(&g->m, s, g->p);
		if (e && e != g->last) {
			flush_steps(&g->m);
			g->at = g->last = e;
			return push_caps(&g->m, s, e, true);
		}
	}
	flush_steps(&g->m);
	return 0;
}

/* string.gmatch(s, p [, init]).  [-(2|3), +1, v] */
static int l_gmatch(lua_State *L)
{
	size_t ls, lp;
	const char *s = luaL_checklstring(L, 1, &ls);
	const char *p = luaL_checklstring(L, 2, &lp);
	size_t init = start_at(luaL_optinteger(L, 3, 1), ls) - 1;
	if (init > ls)
		init = ls + 1;
	lua_settop(L, 2);                           /* s, p: kept alive as upvalues */
	gm *g = lua_newuserdatauv(L, sizeof *g, 0); /* s, p, state */
	start(&g->m, L, s, ls, p, lp);
	g->p = p;
	g->at = s + init;
	g->last = NULL;
	lua_pushcclosure(L, gmatch_next, 3);
	return 1;
}

/* A string replacement: %0-%9 and %%.  [-0, +0, v] */
static void add_text(mstate *m, luaL_Buffer *b, const char *s, const char *e)
{
	size_t n;
	const char *r = lua_tolstring(m->L, 3, &n), *pct;
	while ((pct = memchr(r, '%', n)) != NULL) {
		luaL_addlstring(b, r, (size_t)(pct - r));
		pct++;
		if (*pct == '%') {
			luaL_addchar(b, '%');
		} else if (*pct == '0') {
			luaL_addlstring(b, s, (size_t)(e - s));
		} else if (isdigit((unsigned char)*pct)) {
			push_cap(m, *pct - '1', s, e);
			luaL_tolstring(m->L, -1, NULL); /* a position becomes its digits */
			lua_remove(m->L, -2);
			luaL_addvalue(b);
		} else {
			luaL_error(m->L, "invalid use of '%c' in replacement string", '%');
		}
		n -= (size_t)(pct + 1 - r);
		r = pct + 1;
	}
	luaL_addlstring(b, r, n);
}

/* One replacement of gsub: from a string, a table or a function. */
static void add_value(mstate *m, luaL_Buffer *b, const char *s, const char *e, int tr)
{
	lua_State *L = m->L;
	if (tr == LUA_TFUNCTION) {
		lua_pushvalue(L, 3);
		int n = push_caps(m, s, e, true);
		lua_call(L, n, 1);
	} else if (tr == LUA_TTABLE) {
		push_cap(m, 0, s, e);
		lua_gettable(L, 3);
	} else {
		add_text(m, b, s, e);
		return;
	}
	if (!lua_toboolean(L, -1)) { /* nil or false: keep the original text */
		lua_pop(L, 1);
		luaL_addlstring(b, s, (size_t)(e - s));
	} else if (!lua_isstring(L, -1)) {
		luaL_error(L, "invalid replacement value (a %s)", luaL_typename(L, -1));
	} else {
		luaL_addvalue(b);
	}
}

/* string.gsub(s, p, repl [, n]).  [-(3|4), +2, v] */
static int l_gsub(lua_State *L)
{
	size_t ls, lp;
	const char *src = luaL_checklstring(L, 1, &ls);
	const char *p = luaL_checklstring(L, 2, &lp);
	const char *last = NULL;
	int tr = lua_type(L, 3);
	lua_Integer max = luaL_optinteger(L, 4, (lua_Integer)ls + 1);
	luaL_argexpected(L, tr == LUA_TNUMBER || tr == LUA_TSTRING || tr == LUA_TFUNCTION || tr == LUA_TTABLE, 3,
			 "string/function/table");
	bool anchor = lp && *p == '^';
	if (anchor) {
		p++;
		lp--;
	}
	mstate m;
	luaL_Buffer b;
	luaL_buffinit(L, &b);
	start(&m, L, src, ls, p, lp);
	lua_Integer n = 0;
	while (n < max) {
		again(&m);
		const char *e = match(&m, src, p);
		if (e && e != last) {
			n++;
			add_value(&m, &b, src, e, tr);
			src = last = e;
		} else if (src < m.end) {
			luaL_addchar(&b, *src++);
		} else {
			break;
		}
		if (anchor)
			break;
	}
	flush_steps(&m);
	if (n == 0) {
		lua_pushvalue(L, 1); /* nothing changed: the same string */
	} else {
		luaL_addlstring(&b, src, (size_t)(m.end - src));
		luaL_pushresult(&b);
	}
	lua_pushinteger(L, n);
	return 2;
}

/* ---- counted loops --------------------------------------------------------------------- */

/* string.rep(s, n [, sep]): n copies, charged first.  [-(2|3), +1, v] */
static int l_rep(lua_State *L)
{
	lua_Integer n = luaL_checkinteger(L, 2);
	if (n > 0)
		kf_lcharge(L, (uint64_t)n);
	lua_pushvalue(L, lua_upvalueindex(1));
	lua_insert(L, 1);
	lua_call(L, lua_gettop(L) - 1, 1);
	return 1;
}

/* table.move(a1, f, e, t [, a2]): e - f + 1 moves, charged first.
 * [-(4|5), +1, v] */
static int l_move(lua_State *L)
{
	lua_Integer f = luaL_checkinteger(L, 2), e = luaL_checkinteger(L, 3);
	if (e >= f)
		kf_lcharge(L, (uint64_t)e - (uint64_t)f + 1);
	lua_pushvalue(L, lua_upvalueindex(1));
	lua_insert(L, 1);
	lua_call(L, lua_gettop(L) - 1, 1);
	return 1;
}

/* table.insert(t, [pos,] v): the length read once, each shift charged.
 * [-(2|3), +0, v] */
static int l_insert(lua_State *L)
{
	luaL_checktype(L, 1, LUA_TTABLE);
	lua_Integer e = luaL_len(L, 1) + 1, pos = e;
	switch (lua_gettop(L)) {
	case 2: break;
	case 3:
		pos = luaL_checkinteger(L, 2);
		luaL_argcheck(L, (lua_Unsigned)pos - 1u < (lua_Unsigned)e, 2, "position out of bounds");
		break;
	default: return luaL_error(L, "wrong number of arguments to 'insert'");
	}
	if (e > pos)
		kf_lcharge(L, (uint64_t)(e - pos));
	for (lua_Integer i = e; i > pos; i--) {
		lua_geti(L, 1, i - 1);
		lua_seti(L, 1, i);
	}
	lua_seti(L, 1, pos); /* the value, on top */
	return 0;
}

/* table.remove(t [, pos]): the removed value.  [-(1|2), +1, v] */
static int l_remove(lua_State *L)
{
	luaL_checktype(L, 1, LUA_TTABLE);
	lua_Integer size = luaL_len(L, 1);
	lua_Integer pos = luaL_optinteger(L, 2, size);
	if (pos != size)
		luaL_argcheck(L, (lua_Unsigned)pos - 1u <= (lua_Unsigned)size, 2, "position out of bounds");
	lua_geti(L, 1, pos);
	if (size > pos)
		kf_lcharge(L, (uint64_t)(size - pos));
	for (; pos < size; pos++) {
		lua_geti(L, 1, pos + 1);
		lua_seti(L, 1, pos);
	}
	lua_pushnil(L);
	lua_seti(L, 1, pos);
	return 1;
}

/* Replaces f in the library table at -1 by a closure over the original. */
static void wrap(lua_State *L, const char *name, lua_CFunction f)
{
	lua_getfield(L, -1, name);
	lua_pushcclosure(L, f, 1);
	lua_setfield(L, -2, name);
}

void kf_lstrlib_open(lua_State *L, int string, int table)
{
	string = lua_absindex(L, string);
	table = lua_absindex(L, table);
	static const luaL_Reg fns[] = {
		{"find", l_find}, {"match", l_match}, {"gmatch", l_gmatch}, {"gsub", l_gsub}, {NULL, NULL}};
	lua_pushvalue(L, string);
	luaL_setfuncs(L, fns, 0);
	wrap(L, "rep", l_rep);
	lua_pop(L, 1);
	lua_pushvalue(L, table);
	wrap(L, "move", l_move);
	lua_pushcfunction(L, l_insert);
	lua_setfield(L, -2, "insert");
	lua_pushcfunction(L, l_remove);
	lua_setfield(L, -2, "remove");
	lua_pop(L, 1);
}
