/* amp.c: the `amp` pass: an f32 graph to mixed precision (bf16 or f16), by a
 * policy written in Lua (docs/amp.md; the standard one,
 * patterns/amp/autocast.lua, has PyTorch autocast's lists).
 *
 * requires: a verified graph, before fusion; keeps: the graph's signature
 * (inputs and results keep their declared types), every op and value name;
 * breaks: nothing (casts are new nodes before their first user).
 *
 * Each op has a class:
 *   low     contractions and convolutions: float operands cast to the low
 *           type, results in it (f32 accumulation is the kernels' business);
 *   f32     reductions, softmax, norms, exp/log/pow: operands cast up to
 *           f32, results f32, as autocast runs them;
 *   follow  everything else (element-wise, injective, comparisons): runs in
 *           the low type when one of its float operands already is, else in
 *           f32; the other float operands are cast to match.  This is how
 *           autocast's untouched ops run in the type their inputs arrive in,
 *           except that an f32 weight meeting a low activation is cast down
 *           (autocast would promote to f32), so that a bias add stays in the
 *           matmul's epilogue type.
 * Built-in ops not named by the policy follow; plugin ops not named are f32
 * (their CPU and CUDA forms may know only f32).  A fusion node's operands
 * are cast to its body's argument types (run amp before fuse).
 *
 * One walk in block order, which is topological: when a node is reached its
 * operands are final, so its class decides their casts and type inference
 * retypes its results in place.  One cast per value and type, shared by its
 * users; a cast of an inline constant folds at once (no kernel); the graph's
 * results are cast back to their declared types.  Linear in nodes + uses.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fusion.h"
#include "lua_rules.h"
#include "passes.h"

enum { AMP_FOLLOW, AMP_LOW, AMP_F32 };

typedef struct amp_state {
	kf_dtype low;
	uint8_t *cls; /* [op count]: AMP_* */
	int nop;
	uint32_t file; /* policies read so far: an op named twice in one file is an error */
	uint32_t *seen; /* [op count]: 1 + the file that named the op, 0: none */
	kf_ctx *c;
} amp_state;

typedef struct amp_run {
	kf_graph *g;
	const amp_state *s;
	kf_vid *cast_low, *cast_f32; /* [nval at start]: the cast of a value, or KF_NONE */
	uint32_t nval;
	uint32_t ncast, nretyped;
} amp_run;

static const char *const class_name[] = {"follow", "low", "f32"};

/* ---- the policy ------------------------------------------------------------------ */

static const char *policy_item(void *ud, uint32_t file, const char *key, const char *item)
{
	amp_state *s = ud;
	int k = -1;
	for (int i = 0; i < 3; i++)
		if (!strcmp(key, class_name[i]))
			k = i;
	if (k < 0)
		return "the classes are low, f32 and follow";
	int op = kf_op_lookup(s->c, item, strlen(item));
	if (op < 0)
		return "no such op (a plugin op needs its plugin loaded first)";
	/* files numbered across the policies read: the standard's, the user's */
	uint32_t id = (s->file << 16 | file) + 1;
	if (s->seen[op] == id)
		return "the op is named twice in this file";
	s->seen[op] = id;
	s->cls[op] = (uint8_t)k;
	return NULL;
}

static int read_policy(kf_ctx *c, amp_state *s, const char *path, kf_loc at)
{
	kf_lrules *r = kf_lua_rules_load(c, path);
	if (!r) {
		kf_note(c, at, "amp: while loading the policy %s", path);
		return -1;
	}
	s->file++;
	return kf_lua_table_lists(r, "amp", policy_item, s);
}

static void amp_end(kf_ctx *c, kf_passopts *o)
{
	(void)c;
	amp_state *s = o->state;
	if (!s)
		return;
	free(s->cls);
	free(s->seen);
	free(s);
	o->state = NULL;
}

static int amp_begin(kf_ctx *c, kf_passopts *o)
{
	const char *dt = kf_passopt_str(o, "dtype", "bf16");
	int low = kf_dtype_parse(dt, strlen(dt));
	if (low != KF_BF16 && low != KF_F16) {
		kf_error(c, o->loc, "amp: dtype=%s: the low type is bf16 or f16", dt);
		return -1;
	}
	amp_state *s = calloc(1, sizeof *s);
	s->low = (kf_dtype)low;
	s->nop = kf_op_count(c);
	s->cls = calloc((size_t)s->nop, 1);
	s->seen = calloc((size_t)s->nop, sizeof *s->seen);
	s->c = c;
	for (int op = KF_NBUILTIN; op < s->nop; op++)
		s->cls[op] = AMP_F32;
	o->state = s;
	const char *user = kf_passopt_str(o, "policy", NULL);
	bool standard = kf_passopt_bool(c, o, "standard", true);
	/* the standard policy is amp/autocast.lua among the standard rules */
	kf_buf std = {0};
	int rc = standard ? kf_rules_find(c, "amp/autocast.lua", &std) : 0;
	if (rc == 0 && standard)
		rc = read_policy(c, s, std.p, o->loc);
	if (rc == 0 && user)
		rc = read_policy(c, s, user, o->loc);
	kf_buf_free(&std);
	if (rc != 0)
		amp_end(c, o); /* the pass manager calls end only after a begin that succeeded */
	return rc;
}

/* ---- the rewrite ------------------------------------------------------------------ */

static kf_dtype vdt(const kf_graph *g, kf_vid v) { return (kf_dtype)kf_vtype(g, v)->dtype; }

/* A data movement of one operand and one result (reshape, transpose,
 * slice, ...), which a cast commutes with. */
static bool is_view(const kf_graph *g, kf_nid d) { return kf_fuse_is_view(g, d) && kf_N(g, d)->nres == 1; }

/* v is a constant seen through views. */
static bool const_rooted(const kf_graph *g, kf_vid v)
{
	kf_nid d = kf_def(g, v);
	while (is_view(g, d))
		d = kf_def(g, kf_in(g, d, 0));
	return d != KF_NONE && kf_N(g, d)->op == KF_OP_CONST;
}

/* The value v as type dt, by a cast before node `before` (shared by every
 * later user; folded when v is an inline constant).  A view of a constant
 * (a weight's transpose) is cast below the view: the cast of the constant
 * is then computed once when a backend plans (cuda/cuda_hoist.c), and the
 * view stays where passes look for it (a recurrence stack takes a
 * weight's transpose in, a contraction folds it into its loads) instead
 * of being materialised with the cast. */
static kf_vid cast_of(amp_run *a, kf_vid v, kf_dtype dt, kf_nid before)
{
	kf_graph *g = a->g;
	kf_vid *slot = v < a->nval ? (dt == KF_F32 ? &a->cast_f32[v] : &a->cast_low[v]) : NULL;
	if (slot && *slot != KF_NONE)
		return *slot;
	kf_type t = *kf_vtype(g, v);
	t.dtype = (uint8_t)dt;
	kf_tid tid = kf_type_intern(g->ctx, &t);
	kf_nid d = kf_def(g, v);
	if (is_view(g, d) && const_rooted(g, v)) {
		kf_vid in = cast_of(a, kf_in(g, d, 0), dt, before);
		kf_nid w = kf_node_new(g, kf_N(g, before)->blk, before, kf_N(g, d)->op, &in, 1, &tid, 1);
		kf_N(g, w)->loc = kf_N(g, d)->loc;
		kf_node_set_attrs(g, w, kf_N(g, d)->attr, kf_N(g, d)->nattr);
		if (slot)
			*slot = kf_res(g, w, 0);
		return kf_res(g, w, 0);
	}
	kf_nid c = kf_node_new(g, kf_N(g, before)->blk, before, KF_OP_CAST, &v, 1, &tid, 1);
	kf_N(g, c)->loc = kf_N(g, before)->loc;
	kf_node_set_attr(g, c, kf_intern_cstr(g->ctx, "to"),
			 (kf_attrval){.kind = KF_ATTR_STR, .s = kf_intern_cstr(g->ctx, kf_dtype_name(dt))});
	kf_vid out = kf_res(g, c, 0);
	kf_vid folded;
	if (kf_fold_const_of(g, v) && kf_fold_node(g, c, KF_FOLD_MAX_ELEMS, &folded) == 1) {
		kf_replace_all_uses(g, out, folded);
		kf_node_erase(g, c);
		out = folded;
	} else {
		a->ncast++;
	}
	if (slot)
		*slot = out;
	return out;
}

static bool is_float(kf_dtype dt, kf_dtype low) { return dt == KF_F32 || dt == low; }

/* Retypes n's results from its operands (type inference). */
static int retype(amp_run *a, kf_nid n)
{
	kf_graph *g = a->g;
	kf_node *x = kf_N(g, n);
	kf_type t[8];
	char err[256];
	if (x->nres > 8)
		return 0;
	int k = kf_infer(g, n, t, 8, err, sizeof err);
	if (k != (int)x->nres) {
		kf_error(g->ctx, x->loc, "amp: cannot retype '%s' in the low type: %s",
			 kf_op(g->ctx, x->op)->name, k < 0 ? err : "result count");
		return -1;
	}
	for (int i = 0; i < k; i++) {
		kf_tid tid = kf_type_intern(g->ctx, &t[i]);
		if (kf_V(g, x->res0 + i)->type != tid) {
			kf_V(g, x->res0 + i)->type = tid;
			a->nretyped++;
		}
	}
	return 0;
}

/* A node with a body (a fusion): each operand as its body argument is typed. */
static int amp_region(amp_run *a, kf_nid n)
{
	kf_graph *g = a->g;
	const kf_block *body = &g->blk[kf_N(g, n)->body];
	for (uint32_t i = 0; i < kf_N(g, n)->nin && i < body->narg; i++) {
		kf_vid v = kf_in(g, n, i);
		kf_dtype want = (kf_dtype)kf_vtype(g, body->arg[i])->dtype;
		if (vdt(g, v) != want)
			kf_set_operand(g, n, i, cast_of(a, v, want, n));
	}
	return 0;
}

static int amp_node(amp_run *a, kf_nid n)
{
	kf_graph *g = a->g;
	kf_node *x = kf_N(g, n);
	kf_dtype low = a->s->low;
	if (x->op == KF_OP_CONST || x->op == KF_OP_CAST || x->op == KF_OP_RETURN)
		return 0;
	if (x->body != KF_NONE)
		return amp_region(a, n);
	int cls = a->s->cls[x->op];
	bool any = false, any_low = false;
	for (uint32_t i = 0; i < x->nin; i++) {
		kf_dtype dt = vdt(g, kf_in(g, n, i));
		any |= is_float(dt, low);
		any_low |= dt == low;
	}
	if (!any)
		return 0;
	kf_dtype want = cls == AMP_LOW ? low : cls == AMP_F32 ? KF_F32 : any_low ? low : KF_F32;
	/* cast_of adds nodes (the node array may move): n by its id from here */
	for (uint32_t i = 0; i < kf_N(g, n)->nin; i++) {
		kf_vid v = kf_in(g, n, i);
		kf_dtype dt = vdt(g, v);
		if (is_float(dt, low) && dt != want)
			kf_set_operand(g, n, i, cast_of(a, v, want, n));
	}
	/* results follow the operands, as type inference says (also where the
	 * operands did not change: an operand's own type may have) */
	return retype(a, n);
}

static int amp_run_graph(kf_graph *g, const kf_passopts *o, bool *changed)
{
	amp_run a = {.g = g, .s = o->state, .nval = g->nval};
	a.cast_low = malloc(sizeof *a.cast_low * (g->nval + 1));
	a.cast_f32 = malloc(sizeof *a.cast_f32 * (g->nval + 1));
	if (!a.cast_low || !a.cast_f32) {
		free(a.cast_low);
		free(a.cast_f32);
		kf_error(g->ctx, g->loc, "amp: out of memory");
		return -1;
	}
	for (uint32_t v = 0; v < g->nval; v++)
		a.cast_low[v] = a.cast_f32[v] = KF_NONE;
	int rc = 0;
	kf_nid next;
	for (kf_nid n = g->blk[0].first; n != KF_NONE && rc == 0; n = next) {
		next = kf_N(g, n)->next;
		if (!(kf_N(g, n)->flags & KF_NODE_DEAD))
			rc = amp_node(&a, n);
	}
	/* the graph's results keep their declared types */
	kf_nid ret = kf_block_terminator(g, 0);
	for (uint32_t i = 0; rc == 0 && ret != KF_NONE && i < kf_N(g, ret)->nin; i++) {
		kf_vid v = kf_in(g, ret, i);
		kf_dtype want = (kf_dtype)kf_type_get(g->ctx, g->res[i])->dtype;
		if (vdt(g, v) != want)
			kf_set_operand(g, ret, i, cast_of(&a, v, want, ret));
	}
	if (o->log && (a.ncast || a.nretyped))
		kf_buf_printf(o->log, "amp @%s: %u values in %s, %u casts\n", kf_str(g->ctx, g->name),
			      a.nretyped, kf_dtype_name(a.s->low), a.ncast);
	*changed = a.ncast || a.nretyped;
	free(a.cast_low);
	free(a.cast_f32);
	return rc;
}

static const char *const amp_opts[] = {"dtype", "policy", "standard", NULL};

const kf_pass kf_pass_amp = {
	.name = "amp",
	.doc = "mixed precision: dtype=bf16|f16 by the Lua policy (standard: autocast's; policy=FILE overrides ops)",
	.opts = amp_opts,
	.run = amp_run_graph,
	.begin = amp_begin,
	.end = amp_end,
};
