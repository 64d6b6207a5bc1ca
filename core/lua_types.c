/* lua_types.c: converting types and attributes between Lua and kfuse. */
#include <stdlib.h>
#include <string.h>

#include "kf_int.h"
#include "lua_int.h"

/* ---- types ---------------------------------------------------------------------- */

bool kf_parse_type_str(kf_ctx *c, const char *s, kf_type *t)
{
	memset(t, 0, sizeof *t);
	size_t n = strcspn(s, "[");
	int dt = kf_dtype_parse(s, n);
	if (dt < 0)
		return false;
	t->dtype = (uint8_t)dt;
	if (!s[n])
		return true;
	const char *p = s + n + 1;
	while (*p == ' ')
		p++;
	if (*p == ']')
		return p[1] == 0;
	for (;;) {
		if (t->rank >= KF_MAX_RANK)
			return false;
		while (*p == ' ')
			p++;
		size_t w = strcspn(p, ",] ");
		if (w == 0)
			return false;
		if (p[0] >= '0' && p[0] <= '9') {
			char *end;
			long long d = strtoll(p, &end, 10);
			if (end != p + w)
				return false;
			t->dim[t->rank++] = d;
		} else {
			t->dim[t->rank++] = KF_SYM(kf_intern(c, p, w));
		}
		p += w;
		while (*p == ' ')
			p++;
		if (*p == ']')
			return p[1] == 0;
		if (*p++ != ',')
			return false;
	}
}

/* [-0, +1, m] */
void kf_lpush_type(lua_State *L, const kf_ctx *c, const kf_type *t)
{
	lua_createtable(L, 0, 3);
	lua_pushstring(L, kf_dtype_name(t->dtype));
	lua_setfield(L, -2, "dtype");
	lua_createtable(L, t->rank, 0);
	for (int i = 0; i < t->rank; i++) {
		if (KF_IS_SYM(t->dim[i]))
			lua_pushstring(L, kf_str(c, KF_SYM_SID(t->dim[i])));
		else
			lua_pushinteger(L, t->dim[i]);
		lua_rawseti(L, -2, i + 1);
	}
	lua_setfield(L, -2, "shape");
	lua_pushinteger(L, t->rank);
	lua_setfield(L, -2, "rank");
}

/* [-0, +0, v] */
kf_type kf_ltotype(lua_State *L, kf_ctx *c, int idx)
{
	kf_type t;
	memset(&t, 0, sizeof t);
	if (lua_type(L, idx) == LUA_TSTRING) {
		if (!kf_parse_type_str(c, lua_tostring(L, idx), &t))
			luaL_error(L, "malformed type '%s' (write it like \"f32[4,N]\")", lua_tostring(L, idx));
		return t;
	}
	luaL_checktype(L, idx, LUA_TTABLE);
	lua_getfield(L, idx, "dtype");
	size_t n;
	const char *dt = lua_tolstring(L, -1, &n);
	int d = dt ? kf_dtype_parse(dt, n) : -1;
	if (d < 0)
		luaL_error(L, "a type table needs dtype = \"f32\" (or another dtype)");
	t.dtype = (uint8_t)d;
	lua_pop(L, 1);
	lua_getfield(L, idx, "shape");
	if (lua_istable(L, -1)) {
		int r = (int)lua_rawlen(L, -1);
		if (r > KF_MAX_RANK)
			luaL_error(L, "rank %d is over %d", r, KF_MAX_RANK);
		for (int i = 0; i < r; i++) {
			lua_rawgeti(L, -1, i + 1);
			if (lua_isinteger(L, -1))
				t.dim[i] = lua_tointeger(L, -1);
			else if (lua_type(L, -1) == LUA_TSTRING) {
				/* a symbol or a product of them, canonical ("T*B" is "B*T") */
				size_t n;
				const char *s = lua_tolstring(L, -1, &n);
				t.dim[i] = kf_dim_parse(c, s, n);
				if (t.dim[i] == KF_DIM_BAD)
					luaL_error(L, "shape entry '%s' is not a dim (a size, a symbol or a product of them)", s);
			} else
				luaL_error(L, "shape entries are integers or names");
			lua_pop(L, 1);
		}
		t.rank = (uint8_t)r;
	}
	lua_pop(L, 1);
	return t;
}

/* ---- attributes ---------------------------------------------------------------------- */

kf_attrval kf_ltoattrval(kf_lhost *h, lua_State *L, int idx, int depth)
{
	kf_attrval v;
	memset(&v, 0, sizeof v);
	idx = lua_absindex(L, idx);
	switch (lua_type(L, idx)) {
	case LUA_TBOOLEAN: v.kind = KF_ATTR_BOOL; v.b = lua_toboolean(L, idx); break;
	case LUA_TNUMBER:
		if (lua_isinteger(L, idx))
			v.kind = KF_ATTR_INT, v.i = lua_tointeger(L, idx);
		else
			v.kind = KF_ATTR_FLOAT, v.f = lua_tonumber(L, idx);
		break;
	case LUA_TSTRING: {
		size_t n;
		const char *s = lua_tolstring(L, idx, &n);
		v.kind = KF_ATTR_STR;
		v.s = kf_intern(h->ctx, s, n);
		break;
	}
	case LUA_TTABLE: {
		if (depth > 8)
			luaL_error(L, "attribute lists nest too deeply");
		uint32_t n = (uint32_t)lua_rawlen(L, idx);
		v.kind = KF_ATTR_LIST;
		v.n = n;
		v.list = kf_alloc(&h->scratch, (n ? n : 1) * sizeof *v.list);
		for (uint32_t i = 0; i < n; i++) {
			lua_rawgeti(L, idx, i + 1);
			v.list[i] = kf_ltoattrval(h, L, -1, depth + 1);
			lua_pop(L, 1);
		}
		break;
	}
	default:
		luaL_error(L, "an attribute is a boolean, number, string or list, not %s", luaL_typename(L, idx));
	}
	return v;
}

static bool word_in(const char *list, const char *w)
{
	size_t k = strlen(w);
	for (const char *p = list; p && *p;) {
		size_t n = strcspn(p, " ");
		if (n == k && !memcmp(p, w, k))
			return true;
		p += n;
		p += strspn(p, " ");
	}
	return false;
}

/* [-0, +0, v] */
uint32_t kf_ltoattrs(kf_lhost *h, int idx, kf_attr **out, const char *skip)
{
	lua_State *L = h->L;
	idx = lua_absindex(L, idx);
	uint32_t n = 0, cap = 0;
	kf_attr *a = NULL;
	lua_pushnil(L);                             /* key */
	while (lua_next(L, idx)) {                  /* key, value */
		if (lua_type(L, -2) != LUA_TSTRING)
			luaL_error(L, "attribute names are strings");
		const char *k = lua_tostring(L, -2);
		if (!word_in(skip, k)) {
			if (n == cap) {
				kf_attr *b = kf_alloc(&h->scratch, (cap = cap ? 2 * cap : 8) * sizeof *b);
				if (n)
					memcpy(b, a, n * sizeof *a);
				a = b;
			}
			a[n].key = kf_intern_cstr(h->ctx, k);
			a[n].v = kf_ltoattrval(h, L, -1, 0);
			n++;
		}
		lua_pop(L, 1);                      /* key */
	}
	*out = a;
	return n;
}

/* [-0, +1, m] */
void kf_lpush_attrval(lua_State *L, const kf_ctx *c, const kf_attrval *v)
{
	switch (v->kind) {
	case KF_ATTR_INT: lua_pushinteger(L, v->i); break;
	case KF_ATTR_FLOAT: lua_pushnumber(L, v->f); break;
	case KF_ATTR_STR: lua_pushstring(L, kf_str(c, v->s)); break;
	case KF_ATTR_BOOL: lua_pushboolean(L, v->b); break;
	default:
		lua_createtable(L, (int)v->n, 0);
		for (uint32_t i = 0; i < v->n; i++) {
			kf_lpush_attrval(L, c, &v->list[i]);
			lua_rawseti(L, -2, i + 1);
		}
	}
}
