/* lua_ops.c: ops defined in Lua with op{}, registered in the context's op
 * registry like built-in ones.
 *
 *     op { name = "hardsigmoid", trait = "elementwise", arity = 1,
 *          attrs = {"alpha", "beta"},
 *          infer = function(types, attrs) return types[1] end,      -- optional
 *          cpu = function(a, attrs) return ... end,                 -- per element
 *          cuda = "fminf(fmaxf(a * 0.2f + 0.5f, 0.f), 1.f)" }
 *
 * infer gets the operand types ({dtype=, shape=, rank=} tables) and the
 * attributes, and returns a type (table or "f32[4,N]") or a list of them;
 * without it element-wise ops take their first operand's type and broadcast
 * ops the broadcast of their operands.  cpu is a scalar function applied
 * element by element (element-wise and broadcast ops only): the reference
 * the interpreter and kfuse-verify-rules run.
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kf_int.h"
#include "lua_int.h"

/* ---- shape functions ---------------------------------------------------------------- */

static int detached(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen)
{
	snprintf(err, errlen, "op '%s' was defined by a Lua script that is no longer loaded",
		 kf_op(g->ctx, kf_N(g, n)->op)->name);
	return -1;
}

/* numpy broadcasting of the operand shapes; the first operand's dtype. */
static int infer_broadcast(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen)
{
	const kf_node *nd = kf_N(g, n);
	if (nd->nin == 0 || maxout < 1) {
		snprintf(err, errlen, "'%s' needs an operand", kf_op(g->ctx, nd->op)->name);
		return -1;
	}
	kf_type r = *kf_vtype(g, kf_in(g, n, 0));
	for (uint32_t i = 1; i < nd->nin; i++) {
		const kf_type *t = kf_vtype(g, kf_in(g, n, i));
		if (t->dtype != r.dtype) {
			snprintf(err, errlen, "operand dtypes differ: %s and %s", kf_dtype_name(r.dtype),
				 kf_dtype_name(t->dtype));
			return -1;
		}
		kf_type x;
		memset(&x, 0, sizeof x);
		x.dtype = r.dtype;
		x.rank = r.rank > t->rank ? r.rank : t->rank;
		for (int k = 1; k <= x.rank; k++) {
			int64_t a = k <= r.rank ? r.dim[r.rank - k] : 1, b = k <= t->rank ? t->dim[t->rank - k] : 1;
			if (a != b && a != 1 && b != 1) {
				snprintf(err, errlen, "shapes do not broadcast (dims %lld and %lld)", (long long)a,
					 (long long)b);
				return -1;
			}
			x.dim[x.rank - k] = a == 1 ? b : a;
		}
		r = x;
	}
	out[0] = r;
	return 1;
}

typedef struct ijob {
	kf_lop *lop;
	kf_graph *g;
	kf_nid n;
	kf_type *out;
	int maxout, nout;
} ijob;

/* Pushes a node's attributes as a table.  [-0, +1, m] */
static void push_attrs(lua_State *L, kf_graph *g, kf_nid n)
{
	const kf_node *nd = kf_N(g, n);
	lua_createtable(L, 0, (int)nd->nattr);
	for (uint32_t i = 0; i < nd->nattr; i++) {
		const kf_attrval *v = &nd->attr[i].v;
		switch (v->kind) {
		case KF_ATTR_INT: lua_pushinteger(L, v->i); break;
		case KF_ATTR_FLOAT: lua_pushnumber(L, v->f); break;
		case KF_ATTR_STR: lua_pushstring(L, kf_str(g->ctx, v->s)); break;
		case KF_ATTR_BOOL: lua_pushboolean(L, v->b); break;
		default: {
			lua_createtable(L, (int)v->n, 0);
			for (uint32_t k = 0; k < v->n; k++) {
				if (v->list[k].kind == KF_ATTR_FLOAT)
					lua_pushnumber(L, v->list[k].f);
				else
					lua_pushinteger(L, v->list[k].i);
				lua_rawseti(L, -2, (int)k + 1);
			}
		}
		}
		lua_setfield(L, -2, kf_str(g->ctx, nd->attr[i].key));
	}
}

/* infer(types, attrs) -> type | {type, ...}.  [-1, +0, e] */
static int infer_body(lua_State *L)
{
	ijob *j = lua_touserdata(L, 1);
	kf_graph *g = j->g;
	const kf_node *nd = kf_N(g, j->n);
	lua_rawgeti(L, LUA_REGISTRYINDEX, j->lop->infer_ref);    /* job, infer */
	lua_createtable(L, (int)nd->nin, 0);                      /* job, infer, types */
	for (uint32_t i = 0; i < nd->nin; i++) {
		kf_lpush_type(L, g->ctx, kf_vtype(g, kf_in(g, j->n, i)));
		lua_rawseti(L, -2, (int)i + 1);
	}
	push_attrs(L, g, j->n);                                   /* job, infer, types, attrs */
	lua_call(L, 2, 1);                                        /* job, result */
	if (lua_istable(L, -1) && lua_rawgeti(L, -1, 1) != LUA_TNIL) { /* a list of types */
		lua_pop(L, 1);
		int k = (int)lua_rawlen(L, -1);
		if (k > j->maxout)
			return luaL_error(L, "infer returns %d types, room for %d", k, j->maxout);
		for (int i = 0; i < k; i++) {
			lua_rawgeti(L, -1, i + 1);
			j->out[i] = kf_ltotype(L, g->ctx, -1);
			lua_pop(L, 1);
		}
		j->nout = k;
		return 0;
	}
	if (lua_istable(L, -1))
		lua_pop(L, 1);
	if (lua_isnil(L, -1))
		return luaL_error(L, "infer returned nothing");
	j->out[0] = kf_ltotype(L, g->ctx, -1);
	j->nout = 1;
	return 0;
}

static int infer_lua(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen)
{
	kf_lop *lop = kf_op(g->ctx, kf_N(g, n)->op)->user;
	kf_lhost *h = lop->h;
	ijob j = {lop, g, n, out, maxout, 0};
	kf_lmode saved = h->mode;
	char what[sizeof h->what];
	memcpy(what, h->what, sizeof what);
	h->mode = KF_LM_OP;
	snprintf(h->what, sizeof h->what, "op '%s'", lop->name);
	lua_pushcfunction(h->L, infer_body);
	lua_pushlightuserdata(h->L, &j);
	int rc = kf_lcall(h, 1, 0, lop->loc, err, errlen);
	h->mode = saved;
	memcpy(h->what, what, sizeof what);
	return rc < 0 ? -1 : j.nout;
}

/* ---- the reference implementation ------------------------------------------------------- */

static float half_to_f(uint16_t h)
{
	uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31, m = h & 1023, bits;
	if (e == 0) {
		float f = ldexpf((float)m, -24);
		return s ? -f : f;
	}
	bits = e == 31 ? s | 0x7f800000u | (m << 13) : s | ((e + 112) << 23) | (m << 13);
	float f;
	memcpy(&f, &bits, sizeof f);
	return f;
}

static uint16_t f_to_half(float f)
{
	uint32_t x;
	memcpy(&x, &f, sizeof x);
	uint16_t s = (uint16_t)((x >> 16) & 0x8000);
	float a = fabsf(f);
	if (a != a)
		return s | 0x7e00;
	if (a >= 65520.f)
		return s | 0x7c00;
	if (a < 6.103515625e-05f) /* subnormal: round to a multiple of 2^-24 */
		return s | (uint16_t)lrintf(a * 16777216.f);
	int e;
	float m = frexpf(a, &e); /* a = m * 2^e, m in [0.5, 1) */
	uint32_t mant = (uint32_t)lrintf((m * 2.f - 1.f) * 1024.f);
	uint32_t exp = (uint32_t)(e - 1 + 15);
	if (mant == 1024)
		mant = 0, exp++;
	return exp >= 31 ? (s | 0x7c00) : (uint16_t)(s | (exp << 10) | mant);
}

static double get_elem(const kf_tensor *t, int64_t i)
{
	const uint8_t *p = t->data;
	switch (t->dtype) {
	case KF_F16: { uint16_t h; memcpy(&h, p + 2 * i, 2); return half_to_f(h); }
	case KF_BF16: { uint16_t h; memcpy(&h, p + 2 * i, 2); uint32_t b = (uint32_t)h << 16; float f;
			memcpy(&f, &b, 4); return f; }
	case KF_F32: { float f; memcpy(&f, p + 4 * i, 4); return f; }
	case KF_F64: { double d; memcpy(&d, p + 8 * i, 8); return d; }
	case KF_I1: return p[i] != 0;
	case KF_I8: return (int8_t)p[i];
	case KF_I32: { int32_t v; memcpy(&v, p + 4 * i, 4); return v; }
	default: { int64_t v; memcpy(&v, p + 8 * i, 8); return (double)v; }
	}
}

static void set_elem(kf_tensor *t, int64_t i, double v)
{
	uint8_t *p = t->data;
	switch (t->dtype) {
	case KF_F16: { uint16_t h = f_to_half((float)v); memcpy(p + 2 * i, &h, 2); break; }
	case KF_BF16: { float f = (float)v; uint32_t b; memcpy(&b, &f, 4);
			b += 0x7fff + ((b >> 16) & 1); uint16_t h = (uint16_t)(b >> 16);
			memcpy(p + 2 * i, &h, 2); break; }
	case KF_F32: { float f = (float)v; memcpy(p + 4 * i, &f, 4); break; }
	case KF_F64: memcpy(p + 8 * i, &v, 8); break;
	case KF_I1: p[i] = v != 0; break;
	case KF_I8: p[i] = (uint8_t)(int8_t)(v != v ? 0 : fmax(-128, fmin(127, v))); break;
	case KF_I32: { int32_t x = (int32_t)(v != v ? 0 : fmax(-2147483648.0, fmin(2147483647.0, v)));
		       memcpy(p + 4 * i, &x, 4); break; }
	default: { int64_t x = (int64_t)(v != v ? 0 : fmax(-9.2e18, fmin(9.2e18, v))); memcpy(p + 8 * i, &x, 8); }
	}
}

typedef struct cjob {
	kf_lop *lop;
	kf_graph *g;
	kf_nid n;
	const kf_tensor *in;
	int nin;
	kf_tensor *out;
} cjob;

/* cpu(a, b, ..., attrs) for every output element, operands broadcast.
 * [-1, +0, e] */
static int cpu_body(lua_State *L)
{
	cjob *j = lua_touserdata(L, 1);
	kf_tensor *o = j->out;
	int rank = o->rank, nin = j->nin;
	if (nin > 8)
		return luaL_error(L, "at most 8 operands");
	int64_t stride[8][KF_MAX_RANK];
	for (int k = 0; k < nin; k++) {
		const kf_tensor *t = &j->in[k];
		int64_t s = 1;
		for (int d = rank - 1; d >= 0; d--) {
			int td = d - (rank - t->rank);
			int64_t dim = td >= 0 ? t->dim[td] : 1;
			stride[k][d] = dim == 1 ? 0 : s;
			s *= td >= 0 ? t->dim[td] : 1;
		}
	}
	push_attrs(L, j->g, j->n);                            /* job, attrs */
	int attrs = lua_gettop(L);
	int64_t total = 1, idx[KF_MAX_RANK] = {0};
	for (int d = 0; d < rank; d++)
		total *= o->dim[d];
	for (int64_t e = 0; e < total; e++) {
		lua_rawgeti(L, LUA_REGISTRYINDEX, j->lop->cpu_ref); /* job, attrs, cpu */
		for (int k = 0; k < nin; k++) {
			int64_t off = 0;
			for (int d = 0; d < rank; d++)
				off += idx[d] * stride[k][d];
			lua_pushnumber(L, get_elem(&j->in[k], off));
		}
		lua_pushvalue(L, attrs);
		lua_call(L, nin + 1, 1);                       /* job, attrs, r */
		if (!lua_isnumber(L, -1))
			return luaL_error(L, "cpu must return a number, not %s", luaL_typename(L, -1));
		set_elem(o, e, lua_tonumber(L, -1));
		lua_pop(L, 1);
		for (int d = rank - 1; d >= 0 && ++idx[d] == o->dim[d]; d--)
			idx[d] = 0;
	}
	return 0;
}

static int cpu_lua(kf_graph *g, kf_nid n, const kf_tensor *in, int nin, kf_tensor *out, int nout, char *err,
		   size_t errlen)
{
	/* an `opaque @Name` node runs as the op Name */
	int op = kf_node_impl_op(g, n);
	kf_lop *lop = op >= 0 ? kf_op(g->ctx, op)->user : NULL;
	if (!lop || !lop->h) {
		snprintf(err, errlen, "op '%s' was defined by a Lua script that is no longer loaded",
			 kf_op(g->ctx, op >= 0 ? op : kf_N(g, n)->op)->name);
		return -1;
	}
	kf_lhost *h = lop->h;
	cjob j = {lop, g, n, in, nin, out};
	kf_lmode saved = h->mode;
	h->mode = KF_LM_OP;
	snprintf(h->what, sizeof h->what, "op '%s'", lop->name);
	lua_pushcfunction(h->L, cpu_body);
	lua_pushlightuserdata(h->L, &j);
	int rc = kf_lcall(h, 1, 0, lop->loc, err, errlen);
	h->mode = saved;
	return rc;
}

/* ---- op{} ------------------------------------------------------------------------------- */

static const char *const traits[] = {"elementwise", "broadcast", "injective", "reduce", "contraction",
				     "opaque", NULL};

static char *dup_field(lua_State *L, int idx, const char *key, const char *what)
{
	int t = lua_getfield(L, idx, key);
	char *s = NULL;
	if (t == LUA_TSTRING)
		s = strdup(lua_tostring(L, -1));
	else if (t != LUA_TNIL)
		luaL_error(L, "%s: '%s' must be a string", what, key);
	lua_pop(L, 1);
	return s;
}

/* arity (a count or {min, max}), nres, commutative.  [-0, +0, e] */
static void read_shape(lua_State *L, kf_opinfo *info, const char *what)
{
	info->min_in = info->max_in = 1;
	info->nres = 1;
	int t = lua_getfield(L, 1, "arity");
	if (t == LUA_TNUMBER) {
		info->min_in = info->max_in = (int8_t)luaL_checkinteger(L, -1);
	} else if (t == LUA_TTABLE) {
		lua_rawgeti(L, -1, 1);
		lua_rawgeti(L, -2, 2);
		info->min_in = (int8_t)luaL_checkinteger(L, -2);
		info->max_in = (int8_t)luaL_optinteger(L, -1, -1);
		lua_pop(L, 2);
	} else if (t != LUA_TNIL) {
		luaL_error(L, "%s: arity is a count or {min, max}", what);
	}
	lua_pop(L, 1);
	if (lua_getfield(L, 1, "nres") != LUA_TNIL)
		info->nres = (int8_t)luaL_checkinteger(L, -1);
	lua_getfield(L, 1, "commutative");
	if (lua_toboolean(L, -1))
		info->flags |= KF_OPF_COMMUTATIVE;
	lua_pop(L, 2);
}

/* attrs = {"a", "b"} as "a b".  [-0, +0, m] */
static char *read_attrs(lua_State *L)
{
	char *r = NULL;
	if (lua_getfield(L, 1, "attrs") == LUA_TTABLE) {
		kf_buf b = {0};
		for (int i = 1; lua_rawgeti(L, -1, i) == LUA_TSTRING; i++) {
			kf_buf_printf(&b, "%s%s", i > 1 ? " " : "", lua_tostring(L, -1));
			lua_pop(L, 1);
		}
		lua_pop(L, 1);
		r = b.p ? b.p : strdup("");
	}
	lua_pop(L, 1);
	return r;
}

/* Whether op was declared by the file running now (the caller's chunk),
 * loaded before under this or another name of the same file. */
static bool same_origin(kf_ctx *c, int op, lua_State *L)
{
	const char *origin = kf_op_origin(c, op);
	lua_Debug ar;
	if (!origin || !lua_getstack(L, 1, &ar) || !lua_getinfo(L, "S", &ar) || ar.source[0] != '@')
		return false;
	char a[PATH_MAX], b[PATH_MAX];
	return realpath(origin, a) && realpath(ar.source + 1, b) && !strcmp(a, b);
}

/* op { name, trait, arity?, nres?, attrs?, commutative?, infer?, cpu?, cuda?, doc? }
 * [-1, +0, e] */
int kf_lop_declare(lua_State *L)
{
	kf_lhost *h = kf_lhost_of(L);
	luaL_checktype(L, 1, LUA_TTABLE);
	lua_settop(L, 1);
	if (h->mode != KF_LM_LOAD)
		return luaL_error(L, "op{} declares an op while a file loads");
	if (lua_getfield(L, 1, "name") != LUA_TSTRING)
		return luaL_error(L, "op: 'name' is required");
	const char *name = lua_tostring(L, -1);
	char what[160];
	snprintf(what, sizeof what, "op '%s'", name);
	lua_pop(L, 1);
	int have = kf_op_lookup(h->ctx, name, strlen(name));
	if (have >= 0 && same_origin(h->ctx, have, L))
		return 0; /* this file again (a directory holding a file loaded before) */
	if (have >= 0)
		return luaL_error(L, "%s is already registered", what);
	lua_getfield(L, 1, "trait");
	int trait = luaL_checkoption(L, -1, "elementwise", traits);
	lua_pop(L, 1);
	kf_opinfo info;
	memset(&info, 0, sizeof info);
	info.trait = (uint8_t)trait;
	read_shape(L, &info, what);
	bool has_infer = lua_getfield(L, 1, "infer") == LUA_TFUNCTION;
	bool has_cpu = lua_getfield(L, 1, "cpu") == LUA_TFUNCTION;
	lua_pop(L, 2);
	if (!has_infer && trait != KF_TRAIT_ELEMENTWISE && trait != KF_TRAIT_BROADCAST)
		return luaL_error(L, "%s: a %s op needs infer", what, traits[trait]);
	if (has_cpu && trait != KF_TRAIT_ELEMENTWISE && trait != KF_TRAIT_BROADCAST)
		return luaL_error(L, "%s: cpu is a scalar function, for elementwise and broadcast ops", what);
	kf_lop *lop = calloc(1, sizeof *lop);
	if (!lop)
		return luaL_error(L, "out of memory");
	kf_grow((void **)&h->op, &h->capop, h->nop + 1, sizeof *h->op);
	h->op[h->nop++] = lop; /* owned by the host from here on, whatever fails */
	lop->h = h;
	lop->op = -1;
	lop->name = strdup(name);
	lop->infer_ref = lop->cpu_ref = LUA_NOREF;
	lop->cuda = dup_field(L, 1, "cuda", what);
	lop->doc = dup_field(L, 1, "doc", what);
	lop->attrs = read_attrs(L);
	lua_Debug ar;
	if (lua_getstack(L, 1, &ar) && lua_getinfo(L, "Sl", &ar) && ar.source[0] == '@')
		lop->loc = kf_lloc(h, ar.source + 1, ar.currentline);
	if (has_infer) {
		lua_getfield(L, 1, "infer");
		lop->infer_ref = luaL_ref(L, LUA_REGISTRYINDEX);
	}
	if (has_cpu) {
		lua_getfield(L, 1, "cpu");
		lop->cpu_ref = luaL_ref(L, LUA_REGISTRYINDEX);
	}
	info.name = lop->name;
	info.infer = has_infer ? infer_lua : infer_broadcast;
	info.cpu = has_cpu ? cpu_lua : NULL;
	info.cuda = lop->cuda;
	info.attrs = lop->attrs;
	info.doc = lop->doc ? lop->doc : "defined in Lua";
	info.user = lop;
	lop->op = kf_op_register(h->ctx, &info);
	if (lop->op < 0)
		return luaL_error(L, "%s could not be registered", what);
	return 0;
}

void kf_lop_detach(kf_lhost *h)
{
	for (uint32_t i = 0; i < h->nop; i++) {
		kf_lop *lop = h->op[i];
		if (lop->op < 0 || lop->op >= kf_op_count(h->ctx))
			continue;
		if (kf_op(h->ctx, lop->op)->user != lop)
			continue;
		/* the op stays registered (graphs may use it) but no longer
		 * points into the state or the strings about to be freed */
		kf_op_detach(h->ctx, lop->op, detached, "defined by a Lua script that is no longer loaded");
		lop->h = NULL;
	}
}
