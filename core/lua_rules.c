/* lua_rules.c: rule{} and transform{} declarations, tracing, and the
 * callbacks through which the rewrite driver enters Lua.
 *
 * rule{} traces its pattern once with one symbolic value per parameter of
 * the pattern function, and its replacement once with the same variables.
 * A replacement that reads a fact of a match (x.dtype, x.shape, ...) cannot
 * be traced: it is kept as a function and called per match instead.  Every
 * entry from C into Lua goes through kf_lcall with a C body run inside the
 * protected call, so that building argument tables or converting results
 * can fail (memory, bad values) without escaping the sandbox.
 */
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kf_int.h"
#include "lua_int.h"

/* ---- declarations ---------------------------------------------------------------- */

static const char *const rule_fields =
	"name pattern replace where benefit rtol keep_interior examples verify tolerance types assoc";

/* Rejects fields not in `allowed`, naming them: a typo must not be ignored. */
void kf_lcheck_fields(lua_State *L, int idx, const char *what, const char *allowed)
{
	lua_pushnil(L);
	while (lua_next(L, idx)) {            /* key, value */
		const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
		size_t kl = k ? strlen(k) : 0;
		bool ok = false;
		for (const char *p = allowed; k && *p;) {
			size_t n = strcspn(p, " ");
			ok |= n == kl && !memcmp(p, k, n);
			p += n;
			p += strspn(p, " ");
		}
		if (!ok)
			luaL_error(L, "%s: unknown field '%s' (fields: %s)", what, k ? k : "?", allowed);
		lua_pop(L, 1);
	}
}

static const char *opt_string(lua_State *L, int idx, const char *key, const char *what)
{
	int t = lua_getfield(L, idx, key);
	const char *s = NULL;
	if (t == LUA_TSTRING)
		s = lua_tostring(L, -1);
	else if (t != LUA_TNIL)
		luaL_error(L, "%s: '%s' must be a string", what, key);
	lua_pop(L, 1);
	return s; /* the table keeps the string alive */
}

static int opt_ref(lua_State *L, int idx, const char *key, int type, const char *what, bool need)
{
	int t = lua_getfield(L, idx, key);
	if (t == LUA_TNIL && !need) {
		lua_pop(L, 1);
		return LUA_NOREF;
	}
	if (t != type)
		luaL_error(L, "%s: '%s' must be a %s", what, key, lua_typename(L, type));
	return luaL_ref(L, LUA_REGISTRYINDEX);
}

/* "file:line" of the caller of the declaration, and its location. */
static char *caller_origin(lua_State *L, kf_lhost *h, kf_loc *loc)
{
	lua_Debug ar;
	*loc = KF_NOLOC;
	if (lua_getstack(L, 1, &ar) && lua_getinfo(L, "Sl", &ar)) {
		const char *src = ar.source[0] == '@' ? ar.source + 1 : ar.short_src;
		*loc = kf_lloc(h, src, ar.currentline);
		size_t n = strlen(src) + 16;
		char *s = malloc(n);
		if (s)
			snprintf(s, n, "%s:%d", src, ar.currentline);
		return s;
	}
	return strdup("?");
}

/* The parameter names of the function at idx; *vararg: it ends in `...`.
 * [-0, +0, -] */
static int param_names(lua_State *L, int idx, const char **names, int max, bool *vararg)
{
	lua_Debug ar;
	lua_pushvalue(L, idx);
	lua_getinfo(L, ">u", &ar);
	*vararg = ar.isvararg;
	int n = ar.nparams < max ? ar.nparams : max;
	lua_pushvalue(L, idx);
	for (int i = 0; i < n; i++)
		names[i] = lua_getlocal(L, NULL, i + 1); /* interned in the prototype: stays valid */
	lua_pop(L, 1);
	return n;
}

/* Calls the function at fidx with one traced variable per pattern variable
 * into pattern t, in the given mode; leaves its results above `base` and
 * the trace's generation in *gen (its values carry it).
 * Returns the lua_pcall status.  [-0, +(results | message), -] */
static int trace_call(kf_lhost *h, int fidx, kf_pattern *t, kf_lmode mode, uint64_t *gen)
{
	lua_State *L = h->L;
	kf_lmode saved = h->mode;
	kf_pattern *saved_t = h->trace;
	uint64_t saved_gen = h->trace_gen;
	h->mode = mode;
	h->trace = t;
	h->trace_gen = *gen = ++h->ntrace;
	lua_pushvalue(L, fidx);
	for (uint32_t i = 0; i < t->nvar; i++)
		kf_lpush_sym(h, KF_PV(i, 0)); /* variables are the first nodes */
	int nargs = (int)t->nvar;
	if (mode == KF_LM_REPLACE && t->seqvar < 0) {
		/* the match, as replace's last argument (not after `...`, which
		 * would take it in): reading it makes the replacement per-match,
		 * as reading a variable's facts does */
		kf_lpush_sym(h, KF_PV(0, 0));
		nargs++;
	}
	int rc = lua_pcall(L, nargs, LUA_MULTRET, 0);
	h->mode = saved;
	h->trace = saved_t;
	h->trace_gen = saved_gen;
	return rc;
}

/* types = {x = "T[..., D]", w = "T[D]"}: constraints on the pattern's
 * variables, read before tracing (so that `{to = "T"}` and const(v, "T")
 * may name the type variables).  [-0, +0, e] */
static void read_types(lua_State *L, kf_lrule *lr, kf_pattern *p, int tbl)
{
	if (lua_getfield(L, tbl, "types") == LUA_TNIL) {
		lua_pop(L, 1);
		return;
	}
	if (!lua_istable(L, -1))
		luaL_error(L, "rule '%s': 'types' is a table of type constraints, {x = \"T[N, D]\"}", lr->r.name);
	lua_pushnil(L);
	while (lua_next(L, -2)) {                            /* types, key, value */
		const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
		uint32_t v = 0;
		while (k && v < p->nvar && strcmp(p->varname[v], k))
			v++;
		if (!k || v == p->nvar)
			luaL_error(L, "rule '%s': types: '%s' is not a parameter of the pattern", lr->r.name,
				   k ? k : luaL_typename(L, -2));
		if (lua_type(L, -1) != LUA_TSTRING)
			luaL_error(L, "rule '%s': types.%s is a string like \"T[N, D]\"", lr->r.name, k);
		kf_ptype t;
		char err[200];
		if (kf_pat_parse_type(p, lua_tostring(L, -1), &t, err, sizeof err) < 0)
			luaL_error(L, "rule '%s': types.%s: %s", lr->r.name, k, err);
		kf_pat_set_vtype(p, v, &t);
		lua_pop(L, 1);
	}
	lua_pop(L, 1);
	for (uint32_t i = 0; i < p->ntvar; i++)
		for (uint32_t v = 0; v < p->nvar; v++)
			if (!strcmp(p->varname[v], kf_str(p->ctx, p->tvname[i])))
				luaL_error(L, "rule '%s': '%s' names both a parameter and a type variable", lr->r.name,
					   p->varname[v]);
}

static int trace_pattern(lua_State *L, kf_lhost *h, kf_lrule *lr, int fidx, int tbl)
{
	const char *names[KF_PAT_MAXNODE];
	bool vararg;
	int np = param_names(L, fidx, names, KF_PAT_MAXNODE - 1, &vararg);
	kf_pattern *p = kf_pat_new(h->ctx);
	lr->r.pat = p;
	for (int i = 0; i < np; i++)
		kf_pat_var(p, names[i]);
	if (vararg)
		kf_pat_seqvar(p); /* `...`: any number of operands of one node */
	read_types(L, lr, p, tbl);
	if (lua_getfield(L, tbl, "assoc") != LUA_TNIL && !lua_toboolean(L, -1))
		p->no_assoc = true; /* assoc = false: AC chains match as written */
	lua_pop(L, 1);
	int base = lua_gettop(L);
	uint64_t gen;
	if (trace_call(h, fidx, p, KF_LM_PATTERN, &gen) != LUA_OK)
		return lua_error(L);
	int n = lua_gettop(L) - base;
	kf_pv out[KF_PAT_MAXOUT];
	if (n < 1 || n > KF_PAT_MAXOUT)
		return luaL_error(L, "rule '%s': the pattern returns %d values (1 to %d)", lr->r.name, n,
				  KF_PAT_MAXOUT);
	for (int i = 0; i < n; i++) {
		struct kf_lsym *s = kf_ltosym(L, base + 1 + i);
		if (!s || s->gen != gen)
			return luaL_error(L, "rule '%s': the pattern must return values it computed", lr->r.name);
		out[i] = s->pv;
	}
	if (p->node[KF_PV_NODE(out[0])].kind != KF_PN_OP)
		return luaL_error(L, "rule '%s': the pattern's result must be computed by an op", lr->r.name);
	char err[256];
	if (kf_pat_set_outputs(p, out, (uint32_t)n, err, sizeof err) < 0)
		return luaL_error(L, "rule '%s': %s", lr->r.name, err);
	lr->r.on_op = p->node[KF_PV_NODE(out[0])].op;
	lua_settop(L, base);
	return 0;
}

static int trace_replace(lua_State *L, kf_lhost *h, kf_lrule *lr, int fidx)
{
	kf_pattern *t = kf_pat_new(h->ctx);
	for (uint32_t i = 0; i < lr->r.pat->nvar; i++)
		if ((int)i == lr->r.pat->seqvar)
			kf_pat_seqvar(t);
		else
			kf_pat_var(t, lr->r.pat->varname[i]);
	kf_pat_copy_tvars(t, lr->r.pat);
	int base = lua_gettop(L);
	h->dynamic = false;
	uint64_t gen;
	if (trace_call(h, fidx, t, KF_LM_REPLACE, &gen) != LUA_OK) {
		kf_pat_free(t);
		if (!h->dynamic)
			return lua_error(L);
		lua_settop(L, base); /* reads facts of the match: it runs per match */
		return 0;
	}
	int n = lua_gettop(L) - base;
	if ((uint32_t)n != lr->r.pat->nout) {
		kf_pat_free(t);
		return luaL_error(L, "rule '%s': replace returns %d value%s, the pattern %d", lr->r.name, n,
				  n == 1 ? "" : "s", (int)lr->r.pat->nout);
	}
	for (int i = 0; i < n; i++) {
		int idx = base + 1 + i;
		struct kf_lsym *s = kf_ltosym(L, idx);
		if (s && s->gen == gen) {
			t->out[i] = s->pv;
		} else if (lua_type(L, idx) == LUA_TNUMBER) {
			t->out[i] = kf_pat_const(t, lua_tonumber(L, idx), -1);
		} else {
			kf_pat_free(t);
			return luaL_error(L, "rule '%s': replace must return values it built from its "
					  "arguments, or numbers", lr->r.name);
		}
	}
	t->nout = (uint32_t)n;
	lr->r.tmpl = t;
	lua_settop(L, base);
	return 0;
}

static int where_cb(kf_rewriter *rw);
static int replace_cb(kf_rewriter *rw);
static int apply_cb(kf_rewriter *rw, kf_nid n);

static kf_lrule *new_rule(lua_State *L, kf_lhost *h, const char *name)
{
	kf_lrule *lr = calloc(1, sizeof *lr);
	if (!lr)
		luaL_error(L, "out of memory");
	lr->h = h;
	lr->where_ref = lr->replace_ref = lr->apply_ref = LUA_NOREF;
	lr->verify_ref = lr->examples_ref = LUA_NOREF;
	lr->file = h->cur_file;
	lr->r.name = strdup(name);
	lr->r.user = lr;
	lr->r.benefit = 1;
	lr->r.rtol = 1e-6;
	lr->vrtol = 1e-3;
	lr->vatol = 1e-4;
	/* registered before tracing, so that the host frees it if tracing fails */
	kf_grow((void **)&h->rule, &h->caprule, h->nrule + 1, sizeof *h->rule);
	h->rule[h->nrule++] = lr;
	lr->r.origin = caller_origin(L, h, &lr->loc);
	return lr;
}

/* rule { name, pattern, replace, where?, benefit?, rtol?, keep_interior?,
 *        examples?, verify?, tolerance? }   [-1, +0, e] */
static int l_rule(lua_State *L)
{
	kf_lhost *h = kf_lhost_of(L);
	luaL_checktype(L, 1, LUA_TTABLE);
	lua_settop(L, 1);
	if (h->mode != KF_LM_LOAD)
		return luaL_error(L, "rule{} declares a rule while a file loads, not inside a rule");
	const char *name = opt_string(L, 1, "name", "rule");
	if (!name)
		return luaL_error(L, "rule: 'name' is required");
	char what[200];
	snprintf(what, sizeof what, "rule '%s'", name);
	kf_lcheck_fields(L, 1, what, rule_fields);
	if (lua_getfield(L, 1, "pattern") != LUA_TFUNCTION)      /* tbl, pattern */
		return luaL_error(L, "%s: 'pattern' must be a function", what);
	if (lua_getfield(L, 1, "replace") != LUA_TFUNCTION)      /* tbl, pattern, replace */
		return luaL_error(L, "%s: 'replace' must be a function", what);
	/* a rule whose tracing fails stays owned by the host, inert (on_op -1);
	 * its file fails to load, so it never runs */
	kf_lrule *lr = new_rule(L, h, name);
	lr->r.on_op = -1;
	if (lua_getfield(L, 1, "benefit") != LUA_TNIL)
		lr->r.benefit = (int)luaL_checkinteger(L, -1);
	if (lua_getfield(L, 1, "rtol") != LUA_TNIL)
		lr->r.rtol = luaL_checknumber(L, -1);
	lua_getfield(L, 1, "keep_interior");
	lr->r.keep_interior = lua_toboolean(L, -1);
	if (lua_getfield(L, 1, "tolerance") == LUA_TTABLE) {
		lua_getfield(L, -1, "rtol");
		lr->vrtol = luaL_optnumber(L, -1, lr->vrtol);
		lua_getfield(L, -2, "atol");
		lr->vatol = luaL_optnumber(L, -1, lr->vatol);
	}
	lua_settop(L, 3);
	if (!(lr->r.rtol > 0 && lr->r.rtol < 1))
		return luaL_error(L, "%s: rtol must be between 0 and 1", what);
	trace_pattern(L, h, lr, 2, 1);
	trace_replace(L, h, lr, 3);
	lr->where_ref = opt_ref(L, 1, "where", LUA_TFUNCTION, what, false);
	lr->examples_ref = opt_ref(L, 1, "examples", LUA_TTABLE, what, false);
	if (lua_getfield(L, 1, "verify") == LUA_TBOOLEAN && !lua_toboolean(L, -1))
		lr->no_verify = true; /* verify = false: the examples check it */
	lua_pop(L, 1);
	if (!lr->no_verify)
		lr->verify_ref = opt_ref(L, 1, "verify", LUA_TTABLE, what, false);
	if (lr->where_ref != LUA_NOREF)
		lr->r.where = where_cb;
	if (!lr->r.tmpl) {
		lua_pushvalue(L, 3);
		lr->replace_ref = luaL_ref(L, LUA_REGISTRYINDEX);
		lr->r.replace = replace_cb;
	}
	return 0;
}

/* transform { name, on, apply, benefit? }   [-1, +0, e] */
static int l_transform(lua_State *L)
{
	kf_lhost *h = kf_lhost_of(L);
	luaL_checktype(L, 1, LUA_TTABLE);
	lua_settop(L, 1);
	if (h->mode != KF_LM_LOAD)
		return luaL_error(L, "transform{} declares a transform while a file loads");
	const char *name = opt_string(L, 1, "name", "transform");
	if (!name)
		return luaL_error(L, "transform: 'name' is required");
	char what[200];
	snprintf(what, sizeof what, "transform '%s'", name);
	kf_lcheck_fields(L, 1, what, "name on apply benefit");
	const char *on = opt_string(L, 1, "on", what);
	if (!on)
		return luaL_error(L, "%s: 'on' names the op it runs on", what);
	int op = kf_op_lookup(h->ctx, on, strlen(on));
	if (op < 0)
		return luaL_error(L, "%s: unknown op '%s'", what, on);
	int ref = opt_ref(L, 1, "apply", LUA_TFUNCTION, what, true);
	kf_lrule *lr = new_rule(L, h, name);
	lr->apply_ref = ref;
	lr->r.on_op = op;
	lr->r.apply = apply_cb;
	if (lua_getfield(L, 1, "benefit") != LUA_TNIL)
		lr->r.benefit = (int)luaL_checkinteger(L, -1);
	return 0;
}

/* ops[name]: op builders by name, also for names Lua reserves (and, or, not). */
static int l_ops_index(lua_State *L)
{
	kf_lhost *h = kf_lhost_of(L);
	size_t n;
	const char *k = luaL_checklstring(L, 2, &n);
	int op = kf_op_lookup(h->ctx, k, n);
	if (op < 0)
		return luaL_error(L, "unknown op '%s'", k);
	kf_lpush_builder(L, op);
	return 1;
}

void kf_lrules_open(lua_State *L)
{
	/* stack: base */
	lua_pushcfunction(L, l_rule);
	lua_setfield(L, -2, "rule");
	lua_pushcfunction(L, l_transform);
	lua_setfield(L, -2, "transform");
	lua_pushcfunction(L, kf_lop_declare);
	lua_setfield(L, -2, "op");
	lua_newtable(L);                       /* base, ops */
	lua_newtable(L);                       /* base, ops, mt */
	lua_pushcfunction(L, l_ops_index);
	lua_setfield(L, -2, "__index");
	lua_setmetatable(L, -2);
	lua_setfield(L, -2, "ops");
}

/* ---- callbacks: the driver entering Lua -------------------------------------------- */

typedef struct job {
	kf_lrule *lr;
	kf_rewriter *rw;
	kf_nid n;
	int result;
} job;

/* Runs body(job) protected, as rule lr in the given mode; the session ends
 * with it, so handles given to the script go stale. */
static int run_job(kf_rewriter *rw, lua_CFunction body, kf_lmode mode, kf_nid n)
{
	kf_lrule *lr = rw->rule->user;
	kf_lhost *h = lr->h;
	job j = {lr, rw, n, 0};
	kf_lmode saved = h->mode;
	kf_rewriter *saved_rw = h->rw;
	h->mode = mode;
	h->rw = rw;
	snprintf(h->what, sizeof h->what, "rule '%s'", lr->r.name);
	lua_pushcfunction(h->L, body);
	lua_pushlightuserdata(h->L, &j);
	int rc = kf_lcall(h, 1, 0, lr->loc, NULL, 0);
	h->mode = saved;
	h->rw = saved_rw;
	return rc < 0 ? -1 : j.result;
}

/* The match table: {root = node, x = value, ..., T = "f32", N = 8, ...}
 * (type variables: a dtype's name, a dim's size or symbol).  [-0, +1, m] */
static void push_match(lua_State *L, job *j)
{
	kf_lhost *h = j->lr->h;
	const kf_pattern *p = j->lr->r.pat;
	const kf_match *m = j->rw->m;
	lua_createtable(L, 0, (int)(p->nvar + p->ntvar) + 1);
	kf_lpush_node(h, j->rw->g, j->rw->root);
	lua_setfield(L, -2, "root");
	for (uint32_t i = 0; i < p->nvar; i++) {
		if ((int)i == p->seqvar) {
			/* m["..."]: the values `...` stands for */
			lua_createtable(L, (int)m->nseq, 0);
			for (uint32_t k = 0; k < m->nseq; k++) {
				kf_lpush_value(h, j->rw->g, m->seq[k]);
				lua_rawseti(L, -2, (int)k + 1);
			}
		} else {
			kf_lpush_value(h, j->rw->g, m->bind[i]);
		}
		lua_setfield(L, -2, p->varname[i]);
	}
	for (uint32_t i = 0; i < p->ntvar && i < m->ntval; i++) {
		int64_t x = m->tval[i];
		if (p->tvkind[i] == KF_TV_DTYPE)
			lua_pushstring(L, kf_dtype_name((kf_dtype)x));
		else if (KF_IS_SYM(x))
			lua_pushstring(L, kf_str(h->ctx, KF_SYM_SID(x)));
		else
			lua_pushinteger(L, (lua_Integer)x);
		lua_setfield(L, -2, kf_str(h->ctx, p->tvname[i]));
	}
}

/* where(m) -> boolean.  [-1, +0, e] */
static int where_body(lua_State *L)
{
	job *j = lua_touserdata(L, 1);
	lua_rawgeti(L, LUA_REGISTRYINDEX, j->lr->where_ref);   /* job, where */
	push_match(L, j);                                        /* job, where, m */
	lua_call(L, 1, 1);                                       /* job, ok */
	j->result = lua_toboolean(L, -1);
	return 0;
}

static int where_cb(kf_rewriter *rw)
{
	return run_job(rw, where_body, KF_LM_WHERE, KF_NONE);
}

/* replace(x, ..., m) -> values or numbers; nil declines.  [-1, +0, e] */
static int replace_body(lua_State *L)
{
	job *j = lua_touserdata(L, 1);
	kf_lhost *h = j->lr->h;
	kf_rewriter *rw = j->rw;
	const kf_pattern *p = j->lr->r.pat;
	int base = lua_gettop(L);
	lua_rawgeti(L, LUA_REGISTRYINDEX, j->lr->replace_ref);
	int nargs = 0;
	for (uint32_t i = 0; i < p->nvar; i++, nargs++) {
		if ((int)i == p->seqvar) {
			/* `...`: its values, as the vararg; no match after them */
			luaL_checkstack(L, (int)rw->m->nseq + 2, "replace");
			for (uint32_t k = 0; k < rw->m->nseq; k++)
				kf_lpush_value(h, rw->g, rw->m->seq[k]);
			nargs += (int)rw->m->nseq - 1;
			continue;
		}
		kf_lpush_value(h, rw->g, rw->m->bind[i]);
	}
	if (p->seqvar < 0) {
		push_match(L, j);
		nargs++;
	}
	lua_call(L, nargs, LUA_MULTRET);                         /* job, results... */
	int n = lua_gettop(L) - base;
	if (n == 0 || lua_isnil(L, base + 1) || (lua_isboolean(L, base + 1) && !lua_toboolean(L, base + 1))) {
		snprintf(rw->err, sizeof rw->err, "replace returned nil");
		j->result = 0;
		return 0;
	}
	if (n > KF_PAT_MAXOUT)
		return luaL_error(L, "replace returns %d values", n);
	for (int i = 0; i < n; i++) {
		int idx = base + 1 + i;
		if (lua_type(L, idx) == LUA_TNUMBER && (uint32_t)i < rw->m->nout) {
			/* a number stands for a splat of the type it replaces */
			kf_vid like = rw->m->out[i];
			rw->out[i] = kf_rw_const(rw, lua_tonumber(L, idx), (kf_dtype)kf_vtype(rw->g, like)->dtype);
			kf_V(rw->g, rw->out[i])->type = kf_V(rw->g, like)->type;
			continue;
		}
		struct kf_lval *v = kf_ltoval(L, idx);
		if (!v || v->g != rw->g || v->session != h->session)
			return luaL_error(L, "replace must return values of this graph or numbers, not %s",
					  luaL_typename(L, idx));
		rw->out[i] = v->v;
	}
	rw->nout = (uint32_t)n;
	j->result = 1;
	return 0;
}

static int replace_cb(kf_rewriter *rw)
{
	return run_job(rw, replace_body, KF_LM_BUILD, KF_NONE);
}

/* apply(g, node) -> boolean.  [-1, +0, e] */
static int apply_body(lua_State *L)
{
	job *j = lua_touserdata(L, 1);
	kf_lhost *h = j->lr->h;
	lua_rawgeti(L, LUA_REGISTRYINDEX, j->lr->apply_ref);
	kf_lpush_graph(h, j->rw->g);
	kf_lpush_node(h, j->rw->g, j->n);
	lua_call(L, 2, 1);
	j->result = lua_toboolean(L, -1);
	return 0;
}

static int apply_cb(kf_rewriter *rw, kf_nid n)
{
	return run_job(rw, apply_body, KF_LM_BUILD, n);
}

/* ---- verification configs ------------------------------------------------------------- */

typedef struct vjob {
	kf_lrule *lr;
	uint32_t i;
	kf_type *types;
	bool *konst;
	double *value;
	int result;
} vjob;

/* verify[i+1] = {x = "f32[4]", ...}.  [-1, +0, e] */
static int verify_body(lua_State *L)
{
	vjob *j = lua_touserdata(L, 1);
	kf_lhost *h = j->lr->h;
	const kf_pattern *p = j->lr->r.pat;
	lua_rawgeti(L, LUA_REGISTRYINDEX, j->lr->verify_ref);   /* job, verify */
	if (lua_rawgeti(L, -1, (lua_Integer)j->i + 1) == LUA_TNIL) /* job, verify, cfg */
		return 0;
	luaL_checktype(L, -1, LUA_TTABLE);
	for (uint32_t k = 0; k < p->nvar; k++) {
		if (lua_getfield(L, -1, p->varname[k]) == LUA_TNIL)
			return luaL_error(L, "rule '%s': verify entry %d gives no type for '%s'", j->lr->r.name,
					  (int)j->i + 1, p->varname[k]);
		const char *s = lua_tostring(L, -1);
		j->konst[k] = s && !strncmp(s, "const ", 6);
		j->value[k] = NAN;
		if (j->konst[k]) {
			/* "const f32[8]" (random) or "const f32[8]=1.5" (a splat) */
			const char *eq = strchr(s, '=');
			if (eq) {
				char *end;
				j->value[k] = strtod(eq + 1, &end);
				if (*end || end == eq + 1)
					return luaL_error(L, "rule '%s': bad value in '%s'", j->lr->r.name, s);
			}
			lua_pushlstring(L, s + 6, eq ? (size_t)(eq - s - 6) : strlen(s + 6));
			lua_replace(L, -2);
		}
		j->types[k] = kf_ltotype(L, h->ctx, -1);
		lua_pop(L, 1);
	}
	j->result = 1;
	return 0;
}

int kf_lua_rule_verify_types(const kf_rule *r, uint32_t i, kf_type *types, bool *konst, double *value)
{
	kf_lrule *lr = r->user;
	if (!lr || lr->verify_ref == LUA_NOREF || !r->pat)
		return 0;
	kf_lhost *h = lr->h;
	vjob j = {lr, i, types, konst, value, 0};
	snprintf(h->what, sizeof h->what, "rule '%s'", r->name);
	lua_pushcfunction(h->L, verify_body);
	lua_pushlightuserdata(h->L, &j);
	if (kf_lcall(h, 1, 0, lr->loc, NULL, 0) < 0)
		return -1;
	return j.result;
}

bool kf_lua_rule_verify_off(const kf_rule *r)
{
	kf_lrule *lr = r->user;
	return lr && lr->no_verify;
}

void kf_lua_rule_tolerance(const kf_rule *r, double *rtol, double *atol)
{
	kf_lrule *lr = r->user;
	*rtol = lr ? lr->vrtol : 1e-3;
	*atol = lr ? lr->vatol : 1e-4;
}

/* ---- hooks for passes ------------------------------------------------------------------ */

typedef struct hjob {
	kf_lhost *h;
	int env_ref;
	const char *name;
	kf_graph *g;
	kf_nid a, b;
	int result;
} hjob;

/* env[name](a, b) -> true | false | nil.  [-1, +0, e] */
static int hook_body(lua_State *L)
{
	hjob *j = lua_touserdata(L, 1);
	lua_rawgeti(L, LUA_REGISTRYINDEX, j->env_ref);
	if (lua_getfield(L, -1, j->name) != LUA_TFUNCTION)
		return luaL_error(L, "the script defines no function '%s'", j->name);
	kf_lpush_node(j->h, j->g, j->a);
	kf_lpush_node(j->h, j->g, j->b);
	lua_call(L, 2, 1);
	j->result = lua_isnil(L, -1) ? -1 : lua_toboolean(L, -1);
	return 0;
}

int kf_lua_hook_nodes(kf_lrules *r, const char *name, kf_graph *g, kf_nid a, kf_nid b)
{
	kf_lhost *h = r->h;
	const kf_lfile *f = NULL;
	for (uint32_t i = r->first; i < r->first + r->nfile && !f; i++)
		if (!h->file[i].module)
			f = &h->file[i];
	if (!f) {
		kf_error(h->ctx, KF_NOLOC, "%s: no script to call '%s' in", r->path, name);
		return -2;
	}
	hjob j = {h, f->env_ref, name, g, a, b, -1};
	kf_lmode saved = h->mode;
	kf_rewriter *saved_rw = h->rw;
	h->mode = KF_LM_WHERE; /* read-only: a hook may look, not change */
	h->rw = NULL;
	snprintf(h->what, sizeof h->what, "'%s' of %s", name, f->path);
	lua_pushcfunction(h->L, hook_body);
	lua_pushlightuserdata(h->L, &j);
	int rc = kf_lcall(h, 1, 0, (kf_loc){f->src, 0}, NULL, 0);
	h->mode = saved;
	h->rw = saved_rw;
	return rc < 0 ? -2 : j.result;
}
