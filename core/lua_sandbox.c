/* lua_sandbox.c: the Lua state of a context, and how scripts are run in it.
 *
 * The sandbox is a whitelist (STYLE 10): a script's environment is a fresh
 * table whose reads fall back to a base table holding only the safe parts of
 * the base library, string (without dump), table and math, plus the kfuse
 * declarations and op builders.  Chunks load as text only.  `require` reads
 * modules below the rule path with our own loader.  A count hook stops a
 * runaway loop and a byte-counting allocator stops runaway memory, each with
 * an error naming who was running.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <lualib.h>

#include "kf_int.h"
#include "lua_int.h"

#define KF_HOST_KEY "kf.host"
#define KF_BASE_KEY "kf.base"
#define KF_MODS_KEY "kf.modules"

/* ---- budgets ------------------------------------------------------------------ */

/* Lua's allocator: NULL over the budget makes Lua raise a memory error. */
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
	void *p = realloc(ptr, nsize);
	if (p)
		h->mem = h->mem - osize + nsize;
	return p;
}

static void l_hook(lua_State *L, lua_Debug *ar)
{
	(void)ar;
	kf_lhost *h = kf_lhost_of(L);
	h->instr += 1000;
	if (h->instr <= h->instr_limit)
		return;
	/* level 0 in a hook is the interrupted function: the loop's line */
	luaL_where(L, 0);
	lua_pushfstring(L, "%s exceeded the instruction limit (%I)", h->what, (lua_Integer)h->instr_limit);
	lua_concat(L, 2);
	lua_error(L);
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
		kf_lnewenv(kf_lhost_of(L));
	lua_setupvalue(L, -2, 1); /* the chunk's _ENV */
	return 1;
}

static char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	kf_buf b = {0};
	char tmp[8192];
	size_t n;
	while ((n = fread(tmp, 1, sizeof tmp, f)) > 0)
		kf_buf_put(&b, tmp, n);
	fclose(f);
	kf_buf_putc(&b, 0);
	*len = b.n - 1;
	return b.p;
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

/* require(name): a module below the rule path, loaded once, text only.
 * [-1, +1, e] */
static int l_require(lua_State *L)
{
	kf_lhost *h = kf_lhost_of(L);
	const char *name = luaL_checkstring(L, 1);
	for (const char *p = name; *p; p++)
		if (!isalnum((unsigned char)*p) && *p != '_' && *p != '.')
			return luaL_error(L, "module '%s': names are letters, digits, '_' and '.'", name);
	if (name[0] == '.' || strstr(name, ".."))
		return luaL_error(L, "module '%s' is outside the rule path", name);
	lua_getfield(L, LUA_REGISTRYINDEX, KF_MODS_KEY);  /* name, mods */
	if (lua_getfield(L, -1, name) != LUA_TNIL)          /* name, mods, mod */
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
	luaL_pushresult(&b);                                 /* name, mods, path */
	const char *path = lua_tostring(L, -1);
	size_t len;
	char *text = read_file(path, &len);
	if (!text)
		return luaL_error(L, "module '%s' not found in the rule path (%s: %s)", name, path,
				  strerror(errno));
	add_source(h, path, text, len);
	/* a module: its rules belong to the requiring file */
	h->file[h->nfile - 1].first = h->nrule;
	h->file[h->nfile - 1].module = true;
	lua_pushfstring(L, "@%s", path);                     /* name, mods, path, chunkname */
	int rc = luaL_loadbufferx(L, text, len, lua_tostring(L, -1), "t");
	free(text);
	if (rc != LUA_OK)
		return lua_error(L);
	kf_lnewenv(h);                                       /* ..., chunk, env */
	lua_setupvalue(L, -2, 1);
	lua_pushvalue(L, 1);
	lua_call(L, 1, 1);                                   /* name, mods, path, chunkname, result */
	if (lua_isnil(L, -1)) {
		lua_pop(L, 1);
		lua_pushboolean(L, 1);
	}
	lua_pushvalue(L, -1);
	lua_setfield(L, 2, name);                            /* mods[name] = result */
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

/* Builds the base table every environment reads through.  [-0, +0, m] */
static void open_base(kf_lhost *h)
{
	lua_State *L = h->L;
	static const char *const basefns[] = {
		"assert", "error", "ipairs", "next", "pairs", "pcall", "rawequal", "rawget", "rawlen",
		"rawset", "select", "setmetatable", "getmetatable", "tonumber", "tostring", "type",
		"xpcall", "_VERSION", NULL};
	lua_newtable(L);                       /* base */
	luaL_requiref(L, "_G", luaopen_base, 0);
	copy_fields(L, basefns);
	lua_pop(L, 1);
	lua_pushcfunction(L, l_print);
	lua_setfield(L, -2, "print");
	lua_pushcfunction(L, l_load);
	lua_setfield(L, -2, "load");
	lua_pushcfunction(L, l_require);
	lua_setfield(L, -2, "require");
	luaL_requiref(L, "string", luaopen_string, 0);
	lua_pushnil(L);
	lua_setfield(L, -2, "dump");           /* bytecode out is no use without bytecode in */
	lua_setfield(L, -2, "string");
	luaL_requiref(L, "table", luaopen_table, 0);
	lua_setfield(L, -2, "table");
	luaL_requiref(L, "math", luaopen_math, 0);
	lua_setfield(L, -2, "math");
	kf_lrules_open(L);                     /* rule, transform, op, ops into base */
	lua_newtable(L);                       /* base, mt */
	lua_pushcfunction(L, l_base_index);
	lua_setfield(L, -2, "__index");
	lua_setmetatable(L, -2);
	lua_setfield(L, LUA_REGISTRYINDEX, KF_BASE_KEY);
	lua_newtable(L);
	lua_setfield(L, LUA_REGISTRYINDEX, KF_MODS_KEY);
}

void kf_lnewenv(kf_lhost *h)
{
	lua_State *L = h->L;
	lua_newtable(L);                       /* env */
	lua_newtable(L);                       /* env, mt */
	lua_getfield(L, LUA_REGISTRYINDEX, KF_BASE_KEY);
	lua_setfield(L, -2, "__index");
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
	snprintf(h->what, sizeof h->what, "a script");
	h->L = lua_newstate(l_alloc, h);
	if (!h->L) {
		free(h);
		return NULL;
	}
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
	h->instr = 0;
	h->mem_limit = h->mem + h->call_budget < h->mem_cap ? h->mem + h->call_budget : h->mem_cap;
	h->entries++;
	int rc = lua_pcall(L, nargs, nres, 0);
	h->mem_limit = saved_limit;
	h->instr = saved_instr;
	if (rc == LUA_OK)
		return 0;
	char oom[300];
	const char *msg = lua_tostring(L, -1);
	if (rc == LUA_ERRMEM) {
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
	char *text = read_file(path, &len);
	if (!text) {
		kf_error(h->ctx, (kf_loc){kf_source_add(h->ctx, path, NULL, 0), 0}, "cannot read rule file: %s",
			 strerror(errno));
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
	kf_lnewenv(h);                                      /* chunk, env */
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

uint64_t kf_lua_entries(kf_ctx *c)
{
	kf_lhost *h = kf_lhost_get(c);
	return h ? h->entries : 0;
}
