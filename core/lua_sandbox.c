/* lua_sandbox.c: the Lua state of a context, and how scripts are run in it.
 *
 * The sandbox is a whitelist (STYLE 10): each file and module runs in its
 * own environment, a fresh table holding its own copies of the safe parts
 * of the base library, string (without dump), table and math, plus the
 * kfuse declarations; op builders come from a locked metatable.  Files share
 * nothing a script can write: not the library tables (each has copies), not
 * the string metatable (locked), not modules (`require` caches per file).
 * Chunks load as text only.  `require` reads modules below the rule path
 * with our own loader, refusing a path that resolves outside it and any
 * file that is not a regular one.  A count hook stops a runaway loop, and C
 * functions that loop (pattern matching, rep, move; lua_strlib.c) charge
 * the same budget; a wall-clock limit catches what is left (a long
 * operation repeated); a byte-counting allocator stops runaway memory; each
 * with an error naming who was running.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <lualib.h>

#include "kf_int.h"
#include "lua_int.h"

#define KF_HOST_KEY "kf.host"
#define KF_BASE_KEY "kf.base"
#define KF_MAX_SCRIPT ((size_t)64 << 20) /* bytes of one rule file or module */

/* ---- budgets ------------------------------------------------------------------ */

static void l_hook(lua_State *L, lua_Debug *ar);
static double now(void);

/* Lua's allocator: NULL over the budget makes Lua raise a memory error.
 * A large block is a sign of work proportional to it (s:upper() of a long
 * string is one instruction): past the deadline, the hook is made to fire
 * at the very next instruction, as lua.c does from a signal handler. */
static void *l_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
	kf_lhost *h = ud;
	if (!ptr)
		osize = 0; /* osize is then the kind of object, not a size */
	if (nsize == 0) {
		free(ptr);
		h->mem -= osize;
		return NULL;
	}
	if (nsize > osize && h->mem + (nsize - osize) > h->mem_limit)
		return NULL;
	if (nsize >= 65536 && h->L && h->deadline > 0 && now() > h->deadline)
		lua_sethook(h->L, l_hook, LUA_MASKCOUNT, 1);
	void *p = kf_try_realloc(ptr, nsize); /* NULL: Lua raises a memory error */
	if (p)
		h->mem = h->mem - osize + nsize;
	else
		h->sys_oom = true; /* the machine's, not the budget's */
	return p;
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The error of an exhausted budget, at the script line of stack level. */
static void over_budget(lua_State *L, kf_lhost *h, int level, bool time)
{
	luaL_where(L, level);
	if (time)
		lua_pushfstring(L, "%s exceeded the time limit (%f s)", h->what, h->time_limit);
	else
		lua_pushfstring(L, "%s exceeded the instruction limit (%I)", h->what, (lua_Integer)h->instr_limit);
	lua_concat(L, 2);
	lua_error(L);
}

static void l_hook(lua_State *L, lua_Debug *ar)
{
	(void)ar;
	kf_lhost *h = kf_lhost_of(L);
	h->instr += 1000;
	/* level 0 in a hook is the interrupted function: the loop's line */
	if (h->instr > h->instr_limit)
		over_budget(L, h, 0, false);
	if (h->deadline > 0 && now() > h->deadline)
		over_budget(L, h, 0, true);
}

void kf_lcharge(lua_State *L, uint64_t steps)
{
	kf_lhost *h = kf_lhost_of(L);
	/* level 1: the script line that called the C function */
	if (steps > h->instr_limit || (h->instr += steps) > h->instr_limit)
		over_budget(L, h, 1, false);
	if (steps >= 4096 && h->deadline > 0 && now() > h->deadline)
		over_budget(L, h, 1, true);
}

/* An error outside any protected call (out of memory while the state is
 * set up, say): Lua would abort; this ends the process cleanly instead. */
static int l_panic(lua_State *L)
{
	const char *msg = lua_tostring(L, -1);
	char line[200];
	snprintf(line, sizeof line, "Lua: %s", msg ? msg : "an error outside a protected call");
	kf_fatal(line);
}

kf_lhost *kf_lhost_of(lua_State *L)
{
	void *ud;
	lua_getallocf(L, &ud);
	return ud;
}

/* ---- whitelisted functions ---------------------------------------------------------- */

/* print(...): a note in the context (library code does not print).  [-n, +0, -] */
static int l_print(lua_State *L)
{
	kf_lhost *h = kf_lhost_of(L);
	/* counted before luaL_buffinit, which may push a placeholder that is
	 * not an argument (it printed as a stray "userdata: 0x...") */
	int n = lua_gettop(L);
	luaL_Buffer b;
	luaL_buffinit(L, &b);
	for (int i = 1; i <= n; i++) {
		if (i > 1)
			luaL_addchar(&b, '\t');
		luaL_tolstring(L, i, NULL); /* stack: args, (buf), str */
		luaL_addvalue(&b);
	}
	luaL_pushresult(&b);
	lua_Debug ar;
	kf_loc at = KF_NOLOC;
	if (lua_getstack(L, 1, &ar) && lua_getinfo(L, "Sl", &ar) && ar.source[0] == '@')
		at = kf_lloc(h, ar.source + 1, ar.currentline);
	kf_note(h->ctx, at, "%s", lua_tostring(L, -1));
	return 0;
}

/* setmetatable(t, mt) without finalizers: Lua runs a __gc metamethod with
 * hooks off (so no budget could stop it), at a collection or when the state
 * closes.  Lua marks an object for finalization only if its metatable has
 * __gc when it is set, so refusing that here is enough.  [-2, +1, e] */
static int l_setmetatable(lua_State *L)
{
	if (lua_istable(L, 2) && (lua_pushliteral(L, "__gc"), lua_rawget(L, 2)) != LUA_TNIL)
		return luaL_error(L, "__gc metamethods are not allowed in scripts (a finalizer runs where no "
				  "budget can stop it)");
	lua_settop(L, 2);
	lua_pushvalue(L, lua_upvalueindex(1)); /* Lua's own */
	lua_insert(L, 1);
	lua_call(L, 2, 1);
	return 1;
}

/* load(text [, name [, mode [, env]]]): text chunks only, in the sandbox.
 * [-(1|2|3|4), +(1|2), -] */
static int l_load(lua_State *L)
{
	size_t len;
	const char *s = luaL_checklstring(L, 1, &len);
	const char *name = luaL_optstring(L, 2, "=(load)");
	int env = !lua_isnone(L, 4) ? 4 : 0;
	if (luaL_loadbufferx(L, s, len, name, "t") != LUA_OK) {
		lua_pushnil(L);
		lua_insert(L, -2); /* nil, message */
		return 2;
	}
	if (env)
		lua_pushvalue(L, env);
	else
		kf_lnewenv(kf_lhost_of(L), 0);
	lua_setupvalue(L, -2, 1); /* the chunk's _ENV */
	return 1;
}

/* Reads a script that must resolve within the rule path: 0, or an error
 * (errno, KF_EOUTSIDE, KF_ENOTREG, KF_ETOOBIG) and nothing read, so that no
 * diagnostic can echo a byte of a refused file. */
static int read_script(kf_lhost *h, const char *path, char **text, size_t *len)
{
	*text = NULL;
	char *real;
	int e = kf_path_within(path, h->realroot ? h->realroot : ".", &real);
	if (e)
		return e;
	e = kf_read_regular(real, KF_MAX_SCRIPT, text, len);
	free(real);
	return e;
}

static kf_srcid add_source(kf_lhost *h, const char *path, const char *text, size_t len)
{
	kf_srcid s = kf_source_add(h->ctx, path, text, len);
	kf_grow((void **)&h->file, &h->capfile, h->nfile + 1, sizeof *h->file);
	kf_lfile *f = &h->file[h->nfile++];
	memset(f, 0, sizeof *f);
	f->path = strdup(path);
	f->src = s;
	f->examples_ref = LUA_NOREF;
	f->env_ref = LUA_NOREF;
	return s;
}

/* require(name): a module below the rule path, loaded once per rule file
 * (upvalue 1 is the file's module cache), text only.  [-1, +1, e] */
static int l_require(lua_State *L)
{
	kf_lhost *h = kf_lhost_of(L);
	const char *name = luaL_checkstring(L, 1);
	lua_settop(L, 1);
	for (const char *p = name; *p; p++)
		if (!isalnum((unsigned char)*p) && *p != '_' && *p != '.')
			return luaL_error(L, "module '%s': names are letters, digits, '_' and '.'", name);
	if (name[0] == '.' || strstr(name, ".."))
		return luaL_error(L, "module '%s' is outside the rule path", name);
	if (lua_getfield(L, lua_upvalueindex(1), name) != LUA_TNIL) /* name, mod */
		return 1;
	lua_pop(L, 1);
	if (!h->root)
		return luaL_error(L, "module '%s': require works only in rule files", name);
	luaL_Buffer b;
	luaL_buffinit(L, &b);
	luaL_addstring(&b, h->root);
	luaL_addchar(&b, '/');
	for (const char *p = name; *p; p++)
		luaL_addchar(&b, *p == '.' ? '/' : *p);
	luaL_addstring(&b, ".lua");
	luaL_pushresult(&b);                                 /* name, path */
	const char *path = lua_tostring(L, -1);
	size_t len;
	char *text;
	int e = read_script(h, path, &text, &len);
	if (e == KF_EOUTSIDE)
		return luaL_error(L, "module '%s' is outside the rule path (%s leads out of it)", name, path);
	if (e)
		return luaL_error(L, "module '%s' not found in the rule path (%s: %s)", name, path,
				  kf_file_strerror(e));
	add_source(h, path, text, len);
	/* a module: its rules belong to the requiring file */
	h->file[h->nfile - 1].first = h->nrule;
	h->file[h->nfile - 1].module = true;
	lua_pushfstring(L, "@%s", path);                     /* name, path, chunkname */
	int rc = luaL_loadbufferx(L, text, len, lua_tostring(L, -1), "t");
	free(text);
	if (rc != LUA_OK)
		return lua_error(L);
	kf_lnewenv(h, lua_upvalueindex(1));                  /* ..., chunk, env: the same cache */
	lua_setupvalue(L, -2, 1);
	lua_pushvalue(L, 1);
	lua_call(L, 1, 1);                                   /* name, path, chunkname, result */
	if (lua_isnil(L, -1)) {
		lua_pop(L, 1);
		lua_pushboolean(L, 1);
	}
	lua_pushvalue(L, -1);
	lua_setfield(L, lua_upvalueindex(1), name);          /* cache[name] = result */
	return 1;
}

/* Copies the named fields of the table at -1 into the table at -2. */
static void copy_fields(lua_State *L, const char *const *names)
{
	for (; *names; names++) {
		lua_getfield(L, -1, *names);
		lua_setfield(L, -3, *names);
	}
}

/* base.__index for names that are not there: an op builder.  [-2, +1, m] */
static int l_base_index(lua_State *L)
{
	kf_lhost *h = kf_lhost_of(L);
	size_t n;
	const char *k = lua_tolstring(L, 2, &n);
	int op = k ? kf_op_lookup(h->ctx, k, n) : -1;
	if (op < 0 || (kf_op(h->ctx, op)->flags & (KF_OPF_TERMINATOR | KF_OPF_REGION)))
		return 0;
	kf_lpush_builder(L, op);
	return 1;
}

/* Sets __metatable on the metatable of the value at idx, if it has one, so
 * that a script cannot reach the metatable and change it.  [-0, +0, m] */
static void lock_metatable(lua_State *L, int idx)
{
	if (lua_getmetatable(L, idx)) {
		lua_pushliteral(L, "locked");
		lua_setfield(L, -2, "__metatable");
		lua_pop(L, 1);
	}
}

/* Builds the template every environment is copied from: never itself
 * visible to a script.  [-0, +0, m] */
static void open_base(kf_lhost *h)
{
	lua_State *L = h->L;
	static const char *const basefns[] = {
		"assert", "error", "ipairs", "next", "pairs", "pcall", "rawequal", "rawget", "rawlen",
		"rawset", "select", "getmetatable", "tonumber", "tostring", "type",
		"xpcall", "_VERSION", NULL};
	lua_newtable(L);                       /* base */
	luaL_requiref(L, "_G", luaopen_base, 0);
	copy_fields(L, basefns);
	lua_getfield(L, -1, "setmetatable");   /* base, _G, Lua's setmetatable */
	lua_pushcclosure(L, l_setmetatable, 1);
	lua_setfield(L, -3, "setmetatable");
	lua_pop(L, 1);
	lua_pushcfunction(L, l_print);
	lua_setfield(L, -2, "print");
	lua_pushcfunction(L, l_load);
	lua_setfield(L, -2, "load");
	luaL_requiref(L, "string", luaopen_string, 0);
	lua_pushnil(L);
	lua_setfield(L, -2, "dump");           /* bytecode out is no use without bytecode in */
	luaL_requiref(L, "table", luaopen_table, 0);
	kf_lstrlib_open(L, -2, -1);            /* matching and loops that count their steps */
	lua_setfield(L, -3, "table");
	lua_setfield(L, -2, "string");
	luaL_requiref(L, "math", luaopen_math, 0);
	lua_setfield(L, -2, "math");
	/* strings' methods come from this metatable, shared by every file:
	 * locked, and its __index (the library table above) unreachable */
	lua_pushliteral(L, "");
	lock_metatable(L, -1);
	lua_pop(L, 1);
	kf_lrules_open(L);                     /* rule, transform, op, ops into base */
	lua_getfield(L, -1, "ops");
	lock_metatable(L, -1);
	lua_pop(L, 1);
	lua_setfield(L, LUA_REGISTRYINDEX, KF_BASE_KEY);
}

void kf_lnewenv(kf_lhost *h, int cache)
{
	lua_State *L = h->L;
	if (cache)
		cache = lua_absindex(L, cache);
	lua_newtable(L);                               /* env */
	lua_getfield(L, LUA_REGISTRYINDEX, KF_BASE_KEY); /* env, base */
	lua_pushnil(L);
	while (lua_next(L, -2)) {                      /* env, base, k, v */
		if (lua_istable(L, -1)) {              /* a library: the file's own copy */
			lua_newtable(L);               /* env, base, k, lib, copy */
			if (lua_getmetatable(L, -2))   /* locked (ops): shared, unreachable */
				lua_setmetatable(L, -2);
			lua_pushnil(L);
			while (lua_next(L, -3)) {      /* ..., lib, copy, k2, v2 */
				lua_pushvalue(L, -2);
				lua_insert(L, -2);
				lua_rawset(L, -4);
			}
			lua_remove(L, -2);             /* env, base, k, copy */
		}
		lua_pushvalue(L, -2);
		lua_insert(L, -2);                     /* env, base, k, k, v */
		lua_rawset(L, -5);
	}
	lua_pop(L, 1);                                 /* env */
	if (cache)
		lua_pushvalue(L, cache);
	else
		lua_newtable(L);                       /* env, cache */
	lua_pushcclosure(L, l_require, 1);
	lua_setfield(L, -2, "require");
	lua_newtable(L);                               /* env, mt */
	lua_pushcfunction(L, l_base_index);
	lua_setfield(L, -2, "__index");
	lua_pushliteral(L, "locked");
	lua_setfield(L, -2, "__metatable");
	lua_setmetatable(L, -2);
}

/* ---- the host ------------------------------------------------------------------ */

kf_lhost *kf_lhost_new(kf_ctx *c)
{
	kf_lhost *h = calloc(1, sizeof *h);
	if (!h)
		return NULL;
	h->ctx = c;
	h->mem_cap = h->mem_limit = (size_t)512 << 20;
	h->call_budget = (size_t)64 << 20;
	h->instr_limit = 20000000;
	h->time_limit = 10;
	snprintf(h->what, sizeof h->what, "a script");
	h->L = lua_newstate(l_alloc, h);
	if (!h->L) {
		free(h);
		return NULL;
	}
	lua_atpanic(h->L, l_panic);
	lua_sethook(h->L, l_hook, LUA_MASKCOUNT, 1000);
	lua_pushlightuserdata(h->L, h);
	lua_setfield(h->L, LUA_REGISTRYINDEX, KF_HOST_KEY);
	kf_lgraph_open(h->L);
	open_base(h);
	return h;
}

void kf_lhost_free(kf_lhost *h)
{
	if (!h)
		return;
	kf_lop_detach(h);
	lua_close(h->L);
	for (uint32_t i = 0; i < h->nfile; i++)
		free(h->file[i].path);
	free(h->file);
	for (uint32_t i = 0; i < h->nrule; i++) {
		kf_pat_free(h->rule[i]->r.pat);
		kf_pat_free(h->rule[i]->r.tmpl);
		free((char *)h->rule[i]->r.name);
		free((char *)h->rule[i]->r.origin);
		free(h->rule[i]);
	}
	free(h->rule);
	for (uint32_t i = 0; i < h->nset; i++) {
		kf_ruleset_free(&h->set[i]->set);
		free(h->set[i]->path);
		free(h->set[i]->root);
		free(h->set[i]->realroot);
		free(h->set[i]);
	}
	free(h->set);
	for (uint32_t i = 0; i < h->nop; i++) {
		free(h->op[i]->name);
		free(h->op[i]->cuda);
		free(h->op[i]->attrs);
		free(h->op[i]->doc);
		free(h->op[i]);
	}
	free(h->op);
	kf_arena_free(&h->scratch);
	free(h);
}

/* ---- running scripts ---------------------------------------------------------- */

kf_loc kf_lloc(kf_lhost *h, const char *file, int line)
{
	for (uint32_t i = h->nfile; i-- > 0;) {
		if (strcmp(h->file[i].path, file))
			continue;
		size_t len;
		const char *t = kf_source_text(h->ctx, h->file[i].src, &len);
		size_t off = 0;
		for (int l = 1; l < line && off < len; off++)
			if (t[off] == '\n')
				l++;
		while (off < len && (t[off] == ' ' || t[off] == '\t'))
			off++;
		return (kf_loc){h->file[i].src, (uint32_t)off};
	}
	return KF_NOLOC;
}

/* Splits "file:line: message" when file is a loaded script.  Lua shortens
 * long chunk names to "...tail", so a tail of a path matches too. */
static kf_loc msg_loc(kf_lhost *h, const char *msg, const char **rest)
{
	bool cut = !strncmp(msg, "...", 3);
	const char *name = cut ? msg + 3 : msg;
	for (uint32_t i = h->nfile; i-- > 0;) {
		const char *path = h->file[i].path;
		size_t n = strlen(path);
		if (cut) {
			const char *colon = strchr(name, ':');
			size_t k = colon ? (size_t)(colon - name) : 0;
			if (!colon || k > n || strncmp(path + n - k, name, k))
				continue;
			n = k;
		} else if (strncmp(msg, path, n)) {
			continue;
		}
		if (name[n] != ':' || !isdigit((unsigned char)name[n + 1]))
			continue;
		char *end;
		long line = strtol(name + n + 1, &end, 10);
		if (*end != ':')
			continue;
		*rest = end + 1 + (end[1] == ' ');
		return kf_lloc(h, h->file[i].path, (int)line);
	}
	*rest = msg;
	return KF_NOLOC;
}

int kf_lcall(kf_lhost *h, int nargs, int nres, kf_loc at, char *err, size_t errlen)
{
	lua_State *L = h->L;
	size_t saved_limit = h->mem_limit;
	uint64_t saved_instr = h->instr;
	double saved_deadline = h->deadline;
	h->instr = 0;
	h->mem_limit = h->mem + h->call_budget < h->mem_cap ? h->mem + h->call_budget : h->mem_cap;
	if (h->depth == 0) {
		h->deadline = h->time_limit > 0 ? now() + h->time_limit : 0;
		lua_sethook(L, l_hook, LUA_MASKCOUNT, 1000); /* l_alloc may have made it 1 */
	}
	h->entries++;
	h->depth++;
	h->sys_oom = false;
	int rc = lua_pcall(L, nargs, nres, 0);
	h->depth--;
	h->mem_limit = saved_limit;
	h->instr = saved_instr;
	h->deadline = saved_deadline;
	/* the outermost call ends: every handle it gave out goes stale */
	if (h->depth == 0)
		h->session++;
	if (rc == LUA_OK)
		return 0;
	char oom[300];
	const char *msg = lua_tostring(L, -1);
	if (rc == LUA_ERRMEM && h->sys_oom) {
		snprintf(oom, sizeof oom, "%s ran out of memory", h->what);
		msg = oom;
	} else if (rc == LUA_ERRMEM) {
		snprintf(oom, sizeof oom, "%s ran out of memory (over its budget of %zu bytes)", h->what,
			 h->call_budget);
		msg = oom;
	} else if (!msg) {
		msg = "(error object is not a string)";
	}
	if (err) {
		snprintf(err, errlen, "%s", msg);
	} else {
		const char *rest;
		kf_loc l = rc == LUA_ERRMEM ? KF_NOLOC : msg_loc(h, msg, &rest);
		if (l.src == KF_NONE)
			rest = msg;
		bool named = strstr(rest, h->what) != NULL;
		kf_error(h->ctx, l.src != KF_NONE ? l : at, "%s%s%s%s", rest, named ? "" : " (in ",
			 named ? "" : h->what, named ? "" : ")");
	}
	lua_pop(L, 1);
	lua_gc(L, LUA_GCCOLLECT);
	return -1;
}

int kf_lrun_file(kf_lhost *h, const char *path)
{
	lua_State *L = h->L;
	int base = lua_gettop(L);
	size_t len;
	char *text;
	int e = read_script(h, path, &text, &len);
	if (e) {
		/* a name-only source: nothing of a refused file is echoed */
		kf_loc at = {kf_source_add(h->ctx, path, NULL, 0), 0};
		if (e == KF_EOUTSIDE)
			kf_error(h->ctx, at, "refused: it leads outside the rule directory '%s'", h->root);
		else
			kf_error(h->ctx, at, "cannot read rule file: %s", kf_file_strerror(e));
		return -1;
	}
	add_source(h, path, text, len);
	uint32_t fi = h->nfile - 1;
	h->file[fi].first = h->nrule;
	h->cur_file = fi;
	lua_pushfstring(L, "@%s", path);                   /* chunkname */
	int rc = luaL_loadbufferx(L, text, len, lua_tostring(L, -1), "t");
	free(text);
	lua_remove(L, -2);                                  /* chunk | message */
	if (rc != LUA_OK) {
		const char *rest;
		kf_loc l = msg_loc(h, lua_tostring(L, -1), &rest);
		kf_error(h->ctx, l, "%s", rest);
		lua_pop(L, 1);
		return -1;
	}
	kf_lnewenv(h, 0);                                   /* chunk, env */
	lua_pushvalue(L, -1);
	h->file[fi].env_ref = luaL_ref(L, LUA_REGISTRYINDEX);
	lua_pushvalue(L, -1);
	lua_insert(L, -3);                                  /* env, chunk, env */
	lua_setupvalue(L, -2, 1);                           /* env, chunk */
	snprintf(h->what, sizeof h->what, "rule file '%s'", path);
	h->mode = KF_LM_LOAD;
	rc = kf_lcall(h, 0, 0, (kf_loc){h->file[fi].src, 0}, NULL, 0); /* env */
	if (rc == 0 && lua_getfield(L, -1, "examples") != LUA_TNIL) { /* env, examples */
		if (!lua_istable(L, -1)) {
			kf_error(h->ctx, (kf_loc){h->file[fi].src, 0}, "'examples' must be a list of "
				 "{before = ..., after = ...} tables");
			rc = -1;
		} else {
			lua_pushvalue(L, -1);
			h->file[fi].examples_ref = luaL_ref(L, LUA_REGISTRYINDEX);
		}
	}
	lua_settop(L, base);
	h->file[fi].n = h->nrule - h->file[fi].first;
	return rc;
}

void kf_lua_set_limits(kf_ctx *c, uint64_t instructions, size_t call_bytes, size_t total_bytes)
{
	kf_lhost *h = kf_lhost_get(c);
	if (!h)
		return;
	if (instructions)
		h->instr_limit = instructions;
	if (call_bytes)
		h->call_budget = call_bytes;
	if (total_bytes)
		h->mem_cap = h->mem_limit = total_bytes;
}

void kf_lua_set_time_limit(kf_ctx *c, double seconds)
{
	kf_lhost *h = kf_lhost_get(c);
	if (h)
		h->time_limit = seconds > 0 ? seconds : 0;
}

uint64_t kf_lua_entries(kf_ctx *c)
{
	kf_lhost *h = kf_lhost_get(c);
	return h ? h->entries : 0;
}
