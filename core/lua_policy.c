/* lua_policy.c: policies written as Lua tables of lists, read by passes
 * (the amp pass's `amp = {low = {"matmul", ...}, f32 = {...}}`).  A policy
 * file is a rule file like any other (sandboxed, loaded by
 * kf_lua_rules_load); this reads one global table of each of its files. */
#include <stdio.h>
#include <string.h>
#include "lua_int.h"
#include "lua_rules.h"

typedef struct ljob {
	kf_lhost *h;
	const kf_lfile *f;
	const char *global;
	kf_lua_list_fn fn;
	void *ud;
	uint32_t file;
	int rc;
} ljob;

/* [-0, +0, e]: walks env[global] = {key = {"item", ...}, ...}. */
static int lists_body(lua_State *L)
{
	ljob *j = lua_touserdata(L, 1);
	lua_rawgeti(L, LUA_REGISTRYINDEX, j->f->env_ref);          /* env */
	int t = lua_getfield(L, -1, j->global);                    /* env, tbl */
	if (t == LUA_TNIL)
		return 0;
	if (t != LUA_TTABLE)
		return luaL_error(L, "'%s' must be a table of lists of op names, not a %s", j->global,
				  lua_typename(L, t));
	lua_pushnil(L);
	while (lua_next(L, -2)) {                                  /* env, tbl, key, list */
		if (lua_type(L, -2) != LUA_TSTRING)
			return luaL_error(L, "'%s': keys must be names (low = {...})", j->global);
		const char *key = lua_tostring(L, -2);
		if (!lua_istable(L, -1))
			return luaL_error(L, "'%s.%s' must be a list of op names", j->global, key);
		lua_Integer n = luaL_len(L, -1);
		for (lua_Integer i = 1; i <= n; i++) {
			if (lua_rawgeti(L, -1, i) != LUA_TSTRING)      /* ..., list, item */
				return luaL_error(L, "'%s.%s[%d]' must be an op name", j->global, key, (int)i);
			const char *why = j->fn(j->ud, j->file, key, lua_tostring(L, -1));
			if (why)
				return luaL_error(L, "'%s.%s[%d]': %s", j->global, key, (int)i, why);
			lua_pop(L, 1);
		}
		lua_pop(L, 1);                                     /* env, tbl, key */
	}
	return 0;
}

int kf_lua_table_lists(kf_lrules *r, const char *global, kf_lua_list_fn fn, void *ud)
{
	kf_lhost *h = r->h;
	uint32_t k = 0;
	for (uint32_t i = r->first; i < r->first + r->nfile; i++) {
		const kf_lfile *f = &h->file[i];
		if (f->module)
			continue;
		ljob j = {h, f, global, fn, ud, k++, 0};
		kf_lmode saved = h->mode;
		h->mode = KF_LM_WHERE; /* read-only */
		snprintf(h->what, sizeof h->what, "'%s' of %s", global, f->path);
		lua_pushcfunction(h->L, lists_body);
		lua_pushlightuserdata(h->L, &j);
		int rc = kf_lcall(h, 1, 0, (kf_loc){f->src, 0}, NULL, 0);
		h->mode = saved;
		if (rc < 0)
			return -1;
	}
	return 0;
}
