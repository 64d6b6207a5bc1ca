/* lua_graph.c: what scripts hold: symbolic values (while tracing), graph
 * values, nodes and the graph (in where, replace and transforms), and the op
 * builders that work on all of them.
 *
 * Every handle is a full userdata with a registry metatable, checked with
 * luaL_checkudata.  Graph handles carry {graph, index, session}: the host's
 * session number changes when a rewrite ends, so a handle kept past its
 * rewrite raises "stale handle" instead of touching a freed or reused slot.
 * Metatables are locked (__metatable) so scripts cannot swap them.
 */
#include <stdlib.h>
#include <string.h>

#include "kf_int.h"
#include "lua_int.h"

#define SYM_MT "kf.sym"
#define VAL_MT "kf.value"
#define NODE_MT "kf.node"
#define GRAPH_MT "kf.graph"
#define BUILDERS_KEY "kf.builders"

struct kf_lnode { uint64_t session; kf_graph *g; kf_nid n; };
struct kf_lgraph { uint64_t session; kf_graph *g; };

/* ---- handles ----------------------------------------------------------------------- */

void kf_lpush_sym(kf_lhost *h, kf_pv pv)
{
	struct kf_lsym *s = lua_newuserdatauv(h->L, sizeof *s, 0);
	s->gen = h->trace_gen;
	s->pv = pv;
	luaL_setmetatable(h->L, SYM_MT);
}

void kf_lpush_value(kf_lhost *h, kf_graph *g, kf_vid v)
{
	struct kf_lval *x = lua_newuserdatauv(h->L, sizeof *x, 0);
	*x = (struct kf_lval){h->session, g, v};
	luaL_setmetatable(h->L, VAL_MT);
}

void kf_lpush_node(kf_lhost *h, kf_graph *g, kf_nid n)
{
	struct kf_lnode *x = lua_newuserdatauv(h->L, sizeof *x, 0);
	*x = (struct kf_lnode){h->session, g, n};
	luaL_setmetatable(h->L, NODE_MT);
}

void kf_lpush_graph(kf_lhost *h, kf_graph *g)
{
	struct kf_lgraph *x = lua_newuserdatauv(h->L, sizeof *x, 0);
	*x = (struct kf_lgraph){h->session, g};
	luaL_setmetatable(h->L, GRAPH_MT);
}

struct kf_lsym *kf_ltosym(lua_State *L, int idx) { return luaL_testudata(L, idx, SYM_MT); }
struct kf_lval *kf_ltoval(lua_State *L, int idx) { return luaL_testudata(L, idx, VAL_MT); }

static void check_session(lua_State *L, uint64_t session, const char *what)
{
	if (session != kf_lhost_of(L)->session)
		luaL_error(L, "stale %s handle: it belongs to a rewrite that has ended", what);
}

static struct kf_lval *check_val(lua_State *L, int idx)
{
	struct kf_lval *v = luaL_checkudata(L, idx, VAL_MT);
	check_session(L, v->session, "value");
	kf_lhost *h = kf_lhost_of(L);
	kf_nid d = kf_def(v->g, v->v);
	if (d != KF_NONE && (h->rw ? kf_rw_erased(h->rw, d) : (kf_N(v->g, d)->flags & KF_NODE_DEAD)))
		luaL_error(L, "stale value handle: its node was erased");
	return v;
}

static struct kf_lnode *check_node(lua_State *L, int idx)
{
	struct kf_lnode *n = luaL_checkudata(L, idx, NODE_MT);
	check_session(L, n->session, "node");
	kf_lhost *h = kf_lhost_of(L);
	if (h->rw ? kf_rw_erased(h->rw, n->n) : (kf_N(n->g, n->n)->flags & KF_NODE_DEAD) != 0)
		luaL_error(L, "stale node handle: the node was erased");
	return n;
}

static struct kf_lgraph *check_graph(lua_State *L, int idx)
{
	struct kf_lgraph *g = luaL_checkudata(L, idx, GRAPH_MT);
	check_session(L, g->session, "graph");
	return g;
}

static kf_rewriter *builder(lua_State *L)
{
	kf_lhost *h = kf_lhost_of(L);
	if (h->mode != KF_LM_BUILD || !h->rw)
		luaL_error(L, "the graph can be changed only in replace or a transform's apply");
	return h->rw;
}

/* ---- the op builders ----------------------------------------------------------------- */

/* The dtype for a number operand: the first value operand's that is not i1. */
static kf_dtype number_dtype(lua_State *L, int first, int last)
{
	int pick = -1;
	for (int i = first; i <= last; i++) {
		if (!kf_ltoval(L, i))
			continue;
		struct kf_lval *v = check_val(L, i); /* a stale one must not be read */
		int dt = kf_vtype(v->g, v->v)->dtype;
		if (dt != KF_I1)
			return (kf_dtype)dt;
		if (pick < 0)
			pick = dt;
	}
	return pick >= 0 ? (kf_dtype)pick : KF_F32;
}

/* A dtype argument: a name, or while tracing a type variable of the rule
 * (-2 - its index).  -1 when absent.  [-0, +0, v] */
static int const_dtype_arg(lua_State *L, kf_lhost *h, int idx)
{
	if (lua_isnoneornil(L, idx))
		return -1;
	size_t n;
	const char *s = luaL_checklstring(L, idx, &n);
	int dt = kf_dtype_parse(s, n);
	if (dt >= 0)
		return dt;
	if ((h->mode == KF_LM_PATTERN || h->mode == KF_LM_REPLACE) && h->trace) {
		kf_sid sid = kf_lookup_str(h->ctx, s, n);
		int tv = sid == KF_NONE ? -1 : kf_pat_tvar_find(h->trace, sid);
		if (tv >= 0 && h->trace->tvkind[tv] == KF_TV_DTYPE)
			return -2 - tv;
	}
	return luaL_error(L, "unknown dtype '%s'", s);
}

/* Attribute names op does not take are refused when the rule is traced (a
 * misspelt one would make a pattern that never matches), and a dtype
 * attribute must name a dtype or one of the rule's type variables.
 * [-0, +0, v] */
static void check_attrs(lua_State *L, kf_lhost *h, const kf_opinfo *oi, const kf_attr *a, uint32_t na)
{
	for (uint32_t i = 0; i < na; i++) {
		const char *key = kf_str(h->ctx, a[i].key);
		if (oi->attrs && !kf_op_attr_allowed(oi->attrs, key))
			luaL_error(L, "'%s' has no attribute '%s' (%s%s)", oi->name, key,
				   *oi->attrs ? "its attributes: " : "it takes none", oi->attrs);
		if (strcmp(key, "to") || a[i].v.kind != KF_ATTR_STR)
			continue;
		const char *s = kf_str(h->ctx, a[i].v.s);
		bool tv = (h->mode == KF_LM_PATTERN || h->mode == KF_LM_REPLACE) && h->trace &&
			  kf_pat_tvar_find(h->trace, a[i].v.s) >= 0;
		if (kf_dtype_parse(s, strlen(s)) < 0 && !tv)
			luaL_error(L, "'%s': '%s' is not a dtype%s", oi->name, s,
				   h->mode == KF_LM_PATTERN || h->mode == KF_LM_REPLACE
					   ? " nor a type variable of the rule (types = {x = \"T[...]\"})" : "");
	}
}

/* const(v [, type]): a constant; while tracing a scalar (type: a dtype or a
 * type variable).  [-(1|2), +1, v] */
static int build_const(lua_State *L, kf_lhost *h)
{
	if (h->mode == KF_LM_PATTERN || h->mode == KF_LM_REPLACE) {
		if (lua_istable(L, 1) || (lua_type(L, 2) == LUA_TSTRING && strchr(lua_tostring(L, 2), '['))) {
			if (h->mode == KF_LM_REPLACE) {
				/* a tensor is built per match, as replacements that
				 * read facts of the match are */
				h->dynamic = true;
				return luaL_error(L, "(replacement builds a tensor constant: it runs per match)");
			}
			return luaL_error(L, "a pattern matches scalar constants; match a tensor with a variable and "
					  "test it in where(m)");
		}
		double v = luaL_checknumber(L, 1);
		int dt = const_dtype_arg(L, h, 2);
		kf_lpush_sym(h, kf_pat_const(h->trace, v, dt));
		return 1;
	}
	kf_rewriter *rw = builder(L);
	kf_lpush_value(h, rw->g, kf_ltodense(L, h, rw, 1, 2));
	return 1;
}

static uint32_t result_count(lua_State *L, kf_lhost *h, int op, int attrs)
{
	const kf_opinfo *oi = kf_op(h->ctx, op);
	if (attrs && lua_getfield(L, attrs, "nres") != LUA_TNIL) {
		lua_Integer n = luaL_checkinteger(L, -1);
		lua_pop(L, 1);
		if (n < 1 || n > KF_PAT_MAXOUT)
			luaL_error(L, "nres must be 1 to %d", KF_PAT_MAXOUT);
		return (uint32_t)n;
	}
	if (attrs)
		lua_pop(L, 1);
	if (oi->nres >= 0)
		return (uint32_t)oi->nres;
	if (attrs && lua_getfield(L, attrs, "sizes") == LUA_TTABLE) {
		uint32_t n = (uint32_t)lua_rawlen(L, -1);
		lua_pop(L, 1);
		return n;
	}
	if (attrs)
		lua_pop(L, 1);
	luaL_error(L, "'%s' needs nres = N (or sizes) to say how many results", oi->name);
	return 0;
}

/* Builds op over the arguments first..top: a trailing plain table holds the
 * attributes.  [-n, +nres, v] */
static int build(lua_State *L, int op, int first)
{
	kf_lhost *h = kf_lhost_of(L);
	kf_arena_free(&h->scratch); /* the previous call's attributes: copied by now */
	if (op == KF_OP_CONST)
		return build_const(L, h);
	const kf_opinfo *oi = kf_op(h->ctx, op);
	int last = lua_gettop(L), attrs = 0;
	if (last >= first && lua_type(L, last) == LUA_TTABLE) {
		attrs = last--;
	}
	int nin = last - first + 1, nseq = 0;
	for (int i = first; i <= last; i++) {
		struct kf_lsym *s = kf_ltosym(L, i);
		nseq += s && h->trace_gen && s->gen == h->trace_gen && h->trace->node[KF_PV_NODE(s->pv)].seq;
	}
	if (nseq > 1)
		return luaL_error(L, "'%s': '...' twice among the operands", oi->name);
	/* `...` may stand for none or many: only the fixed operands count */
	if ((nseq ? nin - 1 > oi->max_in && oi->max_in >= 0
		  : nin < oi->min_in || (oi->max_in >= 0 && nin > oi->max_in)) || nin > KF_PAT_MAXNODE) {
		if (oi->min_in == oi->max_in)
			return luaL_error(L, "'%s' takes %d operand%s, not %d", oi->name, oi->min_in,
					  oi->min_in == 1 ? "" : "s", nin);
		return luaL_error(L, "'%s' takes %d to %d operands, not %d", oi->name, oi->min_in, oi->max_in, nin);
	}
	kf_attr *a = NULL;
	uint32_t na = attrs ? kf_ltoattrs(h, attrs, &a, "nres") : 0;
	check_attrs(L, h, oi, a, na);
	uint32_t nres = result_count(L, h, op, attrs);
	bool traced = false, real = false;
	for (int i = first; i <= last; i++) {
		struct kf_lsym *s = kf_ltosym(L, i);
		if (s && (s->gen != h->trace_gen || !h->trace_gen))
			return luaL_error(L, "'%s': a traced value from another pattern", oi->name);
		if (s && h->trace->node[KF_PV_NODE(s->pv)].seq && oi->max_in >= 0 && oi->max_in == oi->min_in)
			return luaL_error(L, "'%s': '...' stands for any number of operands, and '%s' takes %d",
					  oi->name, oi->name, oi->min_in);
		traced |= s != NULL;
		real |= kf_ltoval(L, i) != NULL;
		if (!s && !kf_ltoval(L, i) && lua_type(L, i) != LUA_TNUMBER)
			return luaL_error(L, "'%s': operand %d is a %s, not a value or number", oi->name,
					  i - first + 1, luaL_typename(L, i));
	}
	if (traced && real)
		return luaL_error(L, "'%s': traced and graph values do not mix", oi->name);
	if (traced || (!real && (h->mode == KF_LM_PATTERN || h->mode == KF_LM_REPLACE))) {
		if (h->mode != KF_LM_PATTERN && h->mode != KF_LM_REPLACE)
			return luaL_error(L, "'%s': traced values are used only while tracing", oi->name);
		kf_pv in[KF_PAT_MAXNODE];
		for (int i = first; i <= last; i++) {
			struct kf_lsym *s = kf_ltosym(L, i);
			in[i - first] = s ? s->pv : kf_pat_const(h->trace, lua_tonumber(L, i), -1);
		}
		kf_pv r = kf_pat_op(h->trace, op, in, (uint32_t)nin, a, na, nres);
		if (h->trace->nnode > KF_PAT_MAXNODE)
			return luaL_error(L, "the pattern is too large (over %d nodes)", KF_PAT_MAXNODE);
		for (uint32_t k = 0; k < nres; k++)
			kf_lpush_sym(h, r + k);
		return (int)nres;
	}
	kf_rewriter *rw = builder(L);
	kf_dtype cdt = number_dtype(L, first, last);
	kf_vid in[KF_PAT_MAXNODE];
	for (int i = first; i <= last; i++) {
		if (lua_type(L, i) == LUA_TNUMBER)
			in[i - first] = kf_rw_const(rw, lua_tonumber(L, i), cdt);
		else
			in[i - first] = check_val(L, i)->v;
	}
	kf_vid r = kf_rw_create(rw, op, in, (uint32_t)nin, a, na, NULL, nres);
	if (r == KF_NONE)
		return luaL_error(L, "%s", rw->err);
	for (uint32_t k = 0; k < nres; k++)
		kf_lpush_value(h, rw->g, r + k);
	return (int)nres;
}

/* An op builder: upvalue 1 is the op id.  [-n, +nres, v] */
static int l_builder(lua_State *L)
{
	return build(L, (int)lua_tointeger(L, lua_upvalueindex(1)), 1);
}

void kf_lpush_builder(lua_State *L, int op)
{
	lua_getfield(L, LUA_REGISTRYINDEX, BUILDERS_KEY); /* builders */
	if (lua_rawgeti(L, -1, op) == LUA_TNIL) {         /* builders, f|nil */
		lua_pop(L, 1);
		lua_pushinteger(L, op);
		lua_pushcclosure(L, l_builder, 1);
		lua_pushvalue(L, -1);
		lua_rawseti(L, -3, op);
	}
	lua_remove(L, -2);                                 /* f */
}

/* Arithmetic metamethods: the operand order is kept (2 - x is sub(2, x)). */
static int arith(lua_State *L, int op)
{
	lua_settop(L, 2);
	return build(L, op, 1);
}
static int l_add(lua_State *L) { return arith(L, KF_OP_ADD); }
static int l_sub(lua_State *L) { return arith(L, KF_OP_SUB); }
static int l_mul(lua_State *L) { return arith(L, KF_OP_MUL); }
static int l_div(lua_State *L) { return arith(L, KF_OP_DIV); }
static int l_pow(lua_State *L) { return arith(L, KF_OP_POW); }
static int l_unm(lua_State *L)
{
	lua_settop(L, 1); /* Lua passes the operand twice */
	return build(L, KF_OP_NEG, 1);
}

/* ---- symbolic values ------------------------------------------------------------------ */

/* sym.field: nothing is known of a traced value.  In a replacement it makes
 * the rule dynamic (replace runs per match); in a pattern it is an error. */
static int l_sym_index(lua_State *L)
{
	kf_lhost *h = kf_lhost_of(L);
	const char *k = luaL_checkstring(L, 2);
	if (h->mode == KF_LM_REPLACE) {
		h->dynamic = true;
		return luaL_error(L, "(replacement reads '%s': it runs per match)", k);
	}
	return luaL_error(L, "a pattern value has no '%s' while tracing; test facts in where(m)", k);
}

static int l_sym_tostring(lua_State *L)
{
	struct kf_lsym *s = luaL_checkudata(L, 1, SYM_MT);
	lua_pushfstring(L, "traced value %d", (int)KF_PV_NODE(s->pv));
	return 1;
}

/* ---- graph values ---------------------------------------------------------------------- */

static void push_users(kf_lhost *h, kf_graph *g, const kf_vid *v, uint32_t nv)
{
	lua_State *L = h->L;
	lua_newtable(L);
	int k = 0;
	kf_nid seen[64];
	int nseen = 0;
	for (uint32_t i = 0; i < nv; i++)
		kf_foreach_use(g, v[i], u) {
			kf_nid user = g->use[u].user;
			bool dup = false;
			for (int j = 0; j < nseen; j++)
				dup |= seen[j] == user;
			if (dup)
				continue;
			if (nseen < 64)
				seen[nseen++] = user;
			kf_lpush_node(h, g, user);
			lua_rawseti(L, -2, ++k);
		}
}

/* value.dtype .shape .rank .type .numel .is_const .value .def .users .index
 * [-2, +1, v] */
static int l_val_index(lua_State *L)
{
	kf_lhost *h = kf_lhost_of(L);
	struct kf_lval *v = check_val(L, 1);
	const char *k = luaL_checkstring(L, 2);
	const kf_graph *g = v->g;
	const kf_type *t = kf_vtype(g, v->v);
	double x;
	if (!strcmp(k, "dtype")) {
		lua_pushstring(L, kf_dtype_name(t->dtype));
	} else if (!strcmp(k, "shape")) {
		kf_lpush_type(L, g->ctx, t);
		lua_getfield(L, -1, "shape");
	} else if (!strcmp(k, "rank")) {
		lua_pushinteger(L, t->rank);
	} else if (!strcmp(k, "type")) {
		kf_buf b = {0};
		kf_rw_type_str(&b, g->ctx, kf_V(g, v->v)->type);
		lua_pushlstring(L, b.p, b.n);
		kf_buf_free(&b);
	} else if (!strcmp(k, "numel")) {
		int64_t n = kf_type_numel(t);
		if (n < 0)
			lua_pushnil(L);
		else
			lua_pushinteger(L, n);
	} else if (!strcmp(k, "is_const")) {
		kf_nid d = kf_def(g, v->v);
		lua_pushboolean(L, d != KF_NONE && kf_N(g, d)->op == KF_OP_CONST);
	} else if (!strcmp(k, "value")) {
		if (kf_const_scalar(g, v->v, &x))
			lua_pushnumber(L, x);
		else
			lua_pushnil(L);
	} else if (!strcmp(k, "def")) {
		if (kf_def(g, v->v) == KF_NONE)
			lua_pushnil(L);
		else
			kf_lpush_node(h, v->g, kf_def(g, v->v));
	} else if (!strcmp(k, "users")) {
		push_users(h, v->g, &v->v, 1);
	} else if (!strcmp(k, "index")) {
		lua_pushinteger(L, kf_V(g, v->v)->idx + 1);
	} else {
		return luaL_error(L, "a value has no field '%s' (dtype shape rank type numel is_const value "
				  "def users index)", k);
	}
	return 1;
}

static int l_val_eq(lua_State *L)
{
	struct kf_lval *a = kf_ltoval(L, 1), *b = kf_ltoval(L, 2);
	lua_pushboolean(L, a && b && a->g == b->g && a->v == b->v);
	return 1;
}

static int l_val_tostring(lua_State *L)
{
	struct kf_lval *v = luaL_checkudata(L, 1, VAL_MT);
	lua_pushfstring(L, "value %d", (int)v->v);
	return 1;
}

/* ---- nodes ----------------------------------------------------------------------------- */

static void push_values(kf_lhost *h, kf_graph *g, kf_nid n, bool outputs)
{
	const kf_node *nd = kf_N(g, n);
	uint32_t cnt = outputs ? nd->nres : nd->nin;
	lua_createtable(h->L, (int)cnt, 0);
	for (uint32_t i = 0; i < cnt; i++) {
		kf_lpush_value(h, g, outputs ? kf_res(g, n, i) : kf_in(g, n, i));
		lua_rawseti(h->L, -2, (int)i + 1);
	}
}

/* node:attr(key) -> value or nil.  [-2, +1, v] */
static int l_node_attr(lua_State *L)
{
	struct kf_lnode *n = check_node(L, 1);
	const char *key = luaL_checkstring(L, 2);
	const kf_opinfo *oi = kf_op(n->g->ctx, kf_N(n->g, n->n)->op);
	if (oi->attrs && !kf_op_attr_allowed(oi->attrs, key))
		return luaL_error(L, "a '%s' node has no attribute '%s' (%s%s)", oi->name, key,
				  *oi->attrs ? "its attributes: " : "it takes none", oi->attrs);
	const kf_attrval *a = kf_attr_get(n->g, n->n, key);
	if (a)
		kf_lpush_attrval(L, n->g->ctx, a);
	else
		lua_pushnil(L);
	return 1;
}

/* node:input(i) / node:output(i), 1-based.  [-2, +1, v] */
static int node_slot(lua_State *L, bool out)
{
	kf_lhost *h = kf_lhost_of(L);
	struct kf_lnode *n = check_node(L, 1);
	lua_Integer i = luaL_checkinteger(L, 2);
	const kf_node *nd = kf_N(n->g, n->n);
	uint32_t cnt = out ? nd->nres : nd->nin;
	if (i < 1 || i > cnt)
		return luaL_error(L, "%s %d out of range (the node has %d)", out ? "output" : "input", (int)i,
				  (int)cnt);
	kf_lpush_value(h, n->g, out ? kf_res(n->g, n->n, (uint32_t)i - 1) : kf_in(n->g, n->n, (uint32_t)i - 1));
	return 1;
}
static int l_node_input(lua_State *L) { return node_slot(L, false); }
static int l_node_output(lua_State *L) { return node_slot(L, true); }

/* node.op .inputs .outputs .users .attrs .types .loc, node:attr, :input, :output
 * [-2, +1, v] */
static int l_node_index(lua_State *L)
{
	kf_lhost *h = kf_lhost_of(L);
	struct kf_lnode *n = check_node(L, 1);
	const char *k = luaL_checkstring(L, 2);
	kf_graph *g = n->g;
	const kf_node *nd = kf_N(g, n->n);
	if (!strcmp(k, "op")) {
		lua_pushstring(L, kf_op(g->ctx, nd->op)->name);
	} else if (!strcmp(k, "inputs")) {
		push_values(h, g, n->n, false);
	} else if (!strcmp(k, "outputs")) {
		push_values(h, g, n->n, true);
	} else if (!strcmp(k, "users")) {
		kf_vid v[KF_PAT_MAXOUT];
		uint32_t nv = nd->nres < KF_PAT_MAXOUT ? nd->nres : KF_PAT_MAXOUT;
		for (uint32_t i = 0; i < nv; i++)
			v[i] = kf_res(g, n->n, i);
		push_users(h, g, v, nv);
	} else if (!strcmp(k, "attrs")) {
		lua_createtable(L, 0, (int)nd->nattr);
		for (uint32_t i = 0; i < nd->nattr; i++) {
			kf_lpush_attrval(L, g->ctx, &nd->attr[i].v);
			lua_setfield(L, -2, kf_str(g->ctx, nd->attr[i].key));
		}
	} else if (!strcmp(k, "types")) {
		lua_createtable(L, (int)nd->nres, 0);
		for (uint32_t i = 0; i < nd->nres; i++) {
			kf_buf b = {0};
			kf_rw_type_str(&b, g->ctx, kf_V(g, kf_res(g, n->n, i))->type);
			lua_pushlstring(L, b.p, b.n);
			kf_buf_free(&b);
			lua_rawseti(L, -2, (int)i + 1);
		}
	} else if (!strcmp(k, "loc")) {
		kf_buf b = {0};
		kf_rw_locstr(&b, g->ctx, nd->loc);
		lua_pushlstring(L, b.p, b.n);
		kf_buf_free(&b);
	} else if (!strcmp(k, "attr")) {
		lua_pushcfunction(L, l_node_attr);
	} else if (!strcmp(k, "input")) {
		lua_pushcfunction(L, l_node_input);
	} else if (!strcmp(k, "output")) {
		lua_pushcfunction(L, l_node_output);
	} else {
		return luaL_error(L, "a node has no field '%s' (op inputs outputs users attrs types loc "
				  "attr input output)", k);
	}
	return 1;
}

static int l_node_eq(lua_State *L)
{
	struct kf_lnode *a = luaL_testudata(L, 1, NODE_MT), *b = luaL_testudata(L, 2, NODE_MT);
	lua_pushboolean(L, a && b && a->g == b->g && a->n == b->n);
	return 1;
}

static int l_node_tostring(lua_State *L)
{
	struct kf_lnode *n = luaL_checkudata(L, 1, NODE_MT);
	if (n->session != kf_lhost_of(L)->session) { /* its graph may be gone */
		lua_pushfstring(L, "node %d (stale)", (int)n->n);
		return 1;
	}
	lua_pushfstring(L, "node %d (%s)", (int)n->n, kf_op(n->g->ctx, kf_N(n->g, n->n)->op)->name);
	return 1;
}

/* ---- the graph API of transforms ------------------------------------------------------- */

/* g:create(op, inputs, attrs?, types?) -> node, or g:create{op = , inputs
 * = , attrs = , types = , before = node | after = node}.  The node goes
 * where it is told, else where its operands are (see kf_rw_create).
 * [-(2|3|4|5), +1, v] */
static int l_g_create(lua_State *L)
{
	kf_lhost *h = kf_lhost_of(L);
	check_graph(L, 1);
	kf_rewriter *rw = builder(L);
	kf_nid at = KF_NONE;
	bool after = false;
	if (lua_istable(L, 2)) {
		/* the table form: unpack it into the positional one */
		lua_settop(L, 2);
		kf_lcheck_fields(L, 2, "create", "op inputs attrs types before after");
		lua_getfield(L, 2, "op");
		lua_getfield(L, 2, "inputs");
		lua_getfield(L, 2, "attrs");
		lua_getfield(L, 2, "types");
		int b = lua_getfield(L, 2, "before"), a = lua_getfield(L, 2, "after");
		if (b != LUA_TNIL && a != LUA_TNIL)
			return luaL_error(L, "create: before or after, not both");
		if (b != LUA_TNIL || a != LUA_TNIL) {
			at = check_node(L, b != LUA_TNIL ? -2 : -1)->n;
			after = a != LUA_TNIL;
		}
		lua_settop(L, 6);          /* g, tbl, op, inputs, attrs, types */
		lua_remove(L, 2);          /* g, op, inputs, attrs, types */
	}
	size_t n;
	const char *name = luaL_checklstring(L, 2, &n);
	int op = kf_op_lookup(h->ctx, name, n);
	if (op < 0)
		return luaL_error(L, "unknown op '%s'", name);
	luaL_checktype(L, 3, LUA_TTABLE);
	kf_arena_free(&h->scratch);
	uint32_t nin = (uint32_t)lua_rawlen(L, 3);
	if (nin > KF_PAT_MAXNODE)
		return luaL_error(L, "too many inputs (%d)", (int)nin);
	kf_vid in[KF_PAT_MAXNODE];
	for (uint32_t i = 0; i < nin; i++) {
		lua_rawgeti(L, 3, (int)i + 1);
		in[i] = check_val(L, -1)->v;
		lua_pop(L, 1);
	}
	kf_attr *a = NULL;
	uint32_t na = lua_istable(L, 4) ? kf_ltoattrs(h, 4, &a, "") : 0;
	kf_tid types[KF_PAT_MAXOUT];
	uint32_t nt = 0;
	if (lua_istable(L, 5)) {
		nt = (uint32_t)lua_rawlen(L, 5);
		if (nt == 0 || nt > KF_PAT_MAXOUT)
			return luaL_error(L, "types: 1 to %d result types", KF_PAT_MAXOUT);
		for (uint32_t i = 0; i < nt; i++) {
			lua_rawgeti(L, 5, (int)i + 1);
			kf_type t = kf_ltotype(L, h->ctx, -1);
			types[i] = kf_type_intern(h->ctx, &t);
			lua_pop(L, 1);
		}
	}
	rw->at = at;
	rw->at_after = after;
	kf_vid r = kf_rw_create(rw, op, in, nin, a, na, nt ? types : NULL, nt);
	if (r == KF_NONE)
		return luaL_error(L, "create '%s': %s", name, rw->err);
	kf_lpush_node(h, rw->g, kf_def(rw->g, r));
	return 1;
}

/* g:dominates(value, node): the value may be read at the node (defined
 * before it, or an argument of its block).  [-3, +1, v] */
static int l_g_dominates(lua_State *L)
{
	check_graph(L, 1);
	kf_rewriter *rw = builder(L);
	struct kf_lval *v = check_val(L, 2);
	struct kf_lnode *n = check_node(L, 3);
	if (!rw->ord)
		return luaL_error(L, "dominates: the node order is kept only while the rules pass runs");
	lua_pushboolean(L, kf_rw_order_available(rw->ord, rw->g, v->v, n->n));
	return 1;
}

/* g:before(a, b): node a comes before node b in one block.  [-3, +1, v] */
static int l_g_before(lua_State *L)
{
	check_graph(L, 1);
	kf_rewriter *rw = builder(L);
	struct kf_lnode *a = check_node(L, 2), *b = check_node(L, 3);
	if (!rw->ord)
		return luaL_error(L, "before: the node order is kept only while the rules pass runs");
	lua_pushboolean(L, kf_rw_order_before(rw->ord, rw->g, a->n, b->n));
	return 1;
}

/* g:const(v, type?) -> value: a number (a scalar, or a splat of a shaped
 * type), or a nested list of numbers.  [-(2|3), +1, v] */
static int l_g_const(lua_State *L)
{
	kf_lhost *h = kf_lhost_of(L);
	check_graph(L, 1);
	kf_rewriter *rw = builder(L);
	kf_lpush_value(h, rw->g, kf_ltodense(L, h, rw, 2, 3));
	return 1;
}

/* g:replace_all_uses(from, to): values, or nodes (result by result).
 * [-3, +0, v] */
static int l_g_replace(lua_State *L)
{
	check_graph(L, 1);
	kf_rewriter *rw = builder(L);
	if (luaL_testudata(L, 2, NODE_MT)) {
		struct kf_lnode *a = check_node(L, 2), *b = check_node(L, 3);
		const kf_node *x = kf_N(a->g, a->n), *y = kf_N(b->g, b->n);
		if (x->nres != y->nres)
			return luaL_error(L, "replace_all_uses: %d results replaced by %d", (int)x->nres,
					  (int)y->nres);
		for (uint32_t i = 0; i < x->nres; i++)
			kf_rw_replace_uses(rw, kf_res(a->g, a->n, i), kf_res(b->g, b->n, i));
		return 0;
	}
	struct kf_lval *a = check_val(L, 2), *b = check_val(L, 3);
	if (kf_V(a->g, a->v)->type != kf_V(b->g, b->v)->type)
		return luaL_error(L, "replace_all_uses: the types differ");
	kf_rw_replace_uses(rw, a->v, b->v);
	return 0;
}

/* g:erase(node): when the transform ends, the node must be unused.  [-2, +0, v] */
static int l_g_erase(lua_State *L)
{
	check_graph(L, 1);
	kf_rewriter *rw = builder(L);
	struct kf_lnode *n = check_node(L, 2);
	if (kf_op(n->g->ctx, kf_N(n->g, n->n)->op)->flags & (KF_OPF_TERMINATOR | KF_OPF_EFFECT))
		return luaL_error(L, "erase: '%s' cannot be erased", kf_op(n->g->ctx, kf_N(n->g, n->n)->op)->name);
	kf_rw_erase(rw, n->n);
	return 0;
}

/* g:set_attr(node, key, value).  [-4, +0, v] */
static int l_g_set_attr(lua_State *L)
{
	kf_lhost *h = kf_lhost_of(L);
	check_graph(L, 1);
	kf_rewriter *rw = builder(L);
	struct kf_lnode *n = check_node(L, 2);
	const char *k = luaL_checkstring(L, 3);
	luaL_checkany(L, 4);
	kf_arena_free(&h->scratch);
	kf_attrval v = kf_ltoattrval(h, L, 4, 0);
	kf_attr a = {kf_intern_cstr(h->ctx, k), v};
	check_attrs(L, h, kf_op(h->ctx, kf_N(n->g, n->n)->op), &a, 1);
	kf_rw_set_attr(rw, n->n, a.key, v);
	return 0;
}

/* g.inputs, g.name, and the methods.  [-2, +1, v] */
static int l_g_index(lua_State *L)
{
	kf_lhost *h = kf_lhost_of(L);
	struct kf_lgraph *g = check_graph(L, 1);
	const char *k = luaL_checkstring(L, 2);
	static const luaL_Reg methods[] = {
		{"create", l_g_create}, {"const", l_g_const}, {"replace_all_uses", l_g_replace},
		{"erase", l_g_erase}, {"set_attr", l_g_set_attr}, {"dominates", l_g_dominates},
		{"before", l_g_before}, {NULL, NULL}};
	for (const luaL_Reg *m = methods; m->name; m++)
		if (!strcmp(k, m->name)) {
			lua_pushcfunction(L, m->func);
			return 1;
		}
	if (!strcmp(k, "name")) {
		lua_pushstring(L, kf_str(g->g->ctx, g->g->name));
	} else if (!strcmp(k, "inputs")) {
		const kf_block *b = &g->g->blk[0];
		lua_createtable(L, (int)b->narg, 0);
		for (uint32_t i = 0; i < b->narg; i++) {
			kf_lpush_value(h, g->g, b->arg[i]);
			lua_rawseti(L, -2, (int)i + 1);
		}
	} else {
		return luaL_error(L, "a graph has no field '%s' (name inputs create const replace_all_uses "
				  "erase set_attr dominates before)", k);
	}
	return 1;
}

/* ---- registration ------------------------------------------------------------------------ */

static void new_mt(lua_State *L, const char *name, const luaL_Reg *fns)
{
	luaL_newmetatable(L, name);
	luaL_setfuncs(L, fns, 0);
	lua_pushliteral(L, "locked");
	lua_setfield(L, -2, "__metatable");
	lua_pop(L, 1);
}

void kf_lgraph_open(lua_State *L)
{
	static const luaL_Reg sym[] = {
		{"__index", l_sym_index}, {"__tostring", l_sym_tostring}, {"__add", l_add}, {"__sub", l_sub},
		{"__mul", l_mul}, {"__div", l_div}, {"__pow", l_pow}, {"__unm", l_unm}, {NULL, NULL}};
	static const luaL_Reg val[] = {
		{"__index", l_val_index}, {"__tostring", l_val_tostring}, {"__eq", l_val_eq}, {"__add", l_add},
		{"__sub", l_sub}, {"__mul", l_mul}, {"__div", l_div}, {"__pow", l_pow}, {"__unm", l_unm},
		{NULL, NULL}};
	static const luaL_Reg node[] = {
		{"__index", l_node_index}, {"__tostring", l_node_tostring}, {"__eq", l_node_eq}, {NULL, NULL}};
	static const luaL_Reg graph[] = {{"__index", l_g_index}, {NULL, NULL}};
	new_mt(L, SYM_MT, sym);
	new_mt(L, VAL_MT, val);
	new_mt(L, NODE_MT, node);
	new_mt(L, GRAPH_MT, graph);
	lua_newtable(L);
	lua_setfield(L, LUA_REGISTRYINDEX, BUILDERS_KEY);
}
