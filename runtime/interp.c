/* interp.c: the CPU reference interpreter.
 *
 * requires a verified graph; keeps it unchanged.
 *
 * A block runs in order.  Each value's tensor lives in a table indexed by
 * value id; a value's remaining use count is decremented per operand slot
 * and its tensor freed when it reaches zero, so intermediates die after
 * their last use.  Inputs are borrowed, never freed.  Symbolic dims are
 * bound per block run (graph inputs, then every result as it is computed)
 * and checked wherever the same symbol appears again.  A fusion node runs
 * its body block with the operands bound to the body's arguments.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "cpu_ops.h"
#include "interp.h"

/* symbol -> size bindings of one block run (interp.h's kf_symbind) */
typedef kf_symbind env;

typedef struct frame {
	kf_graph *g;
	kf_tensor *t;     /* by value id */
	bool *owned;      /* t[v] is ours to free (not a borrowed input) */
	uint32_t *left;   /* remaining uses */
	env env;
	kf_interp_watch *watch; /* the top level's, or NULL */
} frame;

static int64_t *env_find(env *e, kf_sid s)
{
	for (uint32_t i = 0; i < e->n; i++)
		if (e->sym[i] == s)
			return &e->val[i];
	return NULL;
}

static void env_bind(env *e, kf_sid s, int64_t v)
{
	if (e->n == e->cap) {
		e->cap = e->cap ? 2 * e->cap : 8;
		e->sym = realloc(e->sym, e->cap * sizeof *e->sym);
		e->val = realloc(e->val, e->cap * sizeof *e->val);
		if (!e->sym || !e->val)
			kf_oom(); /* as kf_alloc */
	}
	e->sym[e->n] = s;
	e->val[e->n++] = v;
}

static void env_free(env *e)
{
	free(e->sym);
	free(e->val);
	*e = (env){0};
}

void kf_symbind_free(kf_symbind *b)
{
	env_free(b);
}

static bool env_look(void *ud, kf_sid s, int64_t *v)
{
	int64_t *p = env_find(ud, s);
	if (p)
		*v = *p;
	return p != NULL;
}

/* Replaces the symbolic dims of t whose symbols are bound by their sizes
 * (a product by the product of its factors). */
static void subst(kf_ctx *c, env *e, kf_type *t)
{
	for (int d = 0; d < t->rank; d++) {
		int64_t v;
		if (KF_IS_SYM(t->dim[d]) && kf_dim_eval(c, t->dim[d], env_look, e, &v))
			t->dim[d] = v;
	}
}

/* Binds the symbols of product w to make it `size`: when one factor is not
 * yet bound and appears once, it gets size / (the rest); otherwise the
 * product is bound by its own name (its factors stay free).  -1 when size
 * does not divide. */
static int bind_product(kf_ctx *c, env *e, int64_t w, int64_t size)
{
	kf_mono m;
	if (!kf_dim_split(c, w, &m))
		return -1;
	int64_t known = m.coef;
	int free_at = -1, nfree = 0;
	for (int i = 0; i < m.n; i++) {
		int64_t *v = env_find(e, m.sym[i]);
		if (!v) {
			nfree++;
			free_at = i;
		} else if (__builtin_mul_overflow(known, *v, &known))
			return -1;
	}
	if (nfree != 1) {
		env_bind(e, KF_SYM_SID(w), size);
		return 0;
	}
	if (known == 0 || size % known)
		return -1;
	env_bind(e, m.sym[free_at], size / known);
	return 0;
}

/* Matches concrete dims against declared type `want`: static dims must be
 * equal, a symbol is bound on first sight and checked after.  On mismatch
 * writes why into err and returns -1. */
static int unify(kf_ctx *c, env *e, const kf_type *want, int rank, const int64_t *dim, char *err,
		 size_t errlen)
{
	if (want->rank != rank)
		return kf_rt_fail(err, errlen, "rank %d, expected %d", rank, want->rank);
	for (int d = 0; d < rank; d++) {
		int64_t w = want->dim[d], v;
		if (!KF_IS_SYM(w)) {
			if (w != dim[d])
				return kf_rt_fail(err, errlen, "dim %d is %lld, expected %lld", d,
						  (long long)dim[d], (long long)w);
			continue;
		}
		int64_t *own = env_find(e, KF_SYM_SID(w));
		if (own)
			v = *own;
		else if (!kf_dim_eval(c, w, env_look, e, &v)) {
			if (!kf_dim_is_product(c, w))
				env_bind(e, KF_SYM_SID(w), dim[d]);
			else if (bind_product(c, e, w, dim[d]) != 0)
				return kf_rt_fail(err, errlen, "dim %d is %lld, which is not a value of %s", d,
						  (long long)dim[d], kf_str(c, KF_SYM_SID(w)));
			continue;
		}
		if (v != dim[d])
			return kf_rt_fail(err, errlen, "dim %d is %lld, but %s is already %lld", d,
					  (long long)dim[d], kf_str(c, KF_SYM_SID(w)), (long long)v);
	}
	return 0;
}

/* "f32[2,3]" for a tensor, into buf. */
static const char *tensor_type_str(char *buf, size_t len, const kf_tensor *t)
{
	char s[160];
	snprintf(buf, len, "%s%s", kf_dtype_name(t->dtype), kf_rt_shape_str(s, sizeof s, t->rank, t->dim));
	return buf;
}

static void frame_release(frame *f, kf_vid v)
{
	if (f->owned[v])
		kf_tensor_free(&f->t[v]);
	f->owned[v] = false;
	memset(&f->t[v], 0, sizeof f->t[v]);
}

static void frame_use_done(frame *f, kf_vid v)
{
	if (f->left[v] > 0 && --f->left[v] == 0)
		frame_release(f, v);
}

static int run_block(kf_graph *g, kf_bid b, const kf_tensor *args, int nargs, kf_tensor *res,
		     int nres, char *err, size_t errlen, kf_interp_watch *w, const env *outer);

/* Runs a fusion node's body on its operands; res[i] receives the yields. */
/* outer: the sizes of the symbols bound where the fusion runs (NULL: none),
 * which the body starts from: a symbol the body's arguments cannot size
 * (`batch` of a reshape to [batch,seq,96] inside a body that reads
 * [batch*seq,96]) is the same symbol as outside. */
static int fusion_eval(kf_graph *g, kf_nid n, const kf_tensor *in, int nin, kf_tensor *res, int nres,
		       char *err, size_t errlen, const env *outer)
{
	kf_bid body = kf_N(g, n)->body;
	if (body == KF_NONE)
		return kf_rt_fail(err, errlen, "fusion node has no body");
	return run_block(g, body, in, nin, res, nres, err, errlen, NULL, outer);
}

/* The registry's entry for fusion (for callers other than the interpreter,
 * which allocate the results first): runs the body and moves its yields
 * into out[] after checking they have the shapes allocated. */
int kf_cpu_fusion(KF_RT_CPU_ARGS)
{
	kf_tensor *res = calloc(nout ? nout : 1, sizeof *res);
	if (!res)
		return kf_rt_fail(err, errlen, "out of memory");
	int rc = fusion_eval(g, n, in, nin, res, nout, err, errlen, NULL);
	for (int i = 0; rc == 0 && i < nout; i++)
		if (!kf_tensor_same_shape(&res[i], &out[i])) {
			char a[200], b2[200];
			rc = kf_rt_fail(err, errlen, "result %d is %s, expected %s", i,
					tensor_type_str(a, sizeof a, &res[i]), tensor_type_str(b2, sizeof b2, &out[i]));
		}
	for (int i = 0; i < nout; i++) {
		if (rc == 0) {
			kf_tensor_free(&out[i]);
			out[i] = res[i];
		} else {
			kf_tensor_free(&res[i]);
		}
	}
	free(res);
	return rc;
}

/* Computes node n's result shapes, checks them against the declared types
 * (binding new symbols) and allocates res[]. */
static int alloc_results(frame *f, kf_nid n, const kf_tensor *in, int nin, kf_tensor *res,
			 char *err, size_t errlen)
{
	kf_graph *g = f->g;
	const kf_node *nd = kf_N(g, n);
	int nres = (int)nd->nres;
	kf_type ty[nres ? nres : 1];
	for (int i = 0; i < nres; i++) {
		ty[i] = *kf_vtype(g, kf_res(g, n, i));
		subst(g->ctx, &f->env, &ty[i]);
	}
	if (kf_rt_shape(g, n, in, nin, ty, nres, err, errlen) != 0)
		return -1;
	for (int i = 0; i < nres; i++) {
		const kf_type *want = kf_vtype(g, kf_res(g, n, i));
		for (int d = 0; d < ty[i].rank; d++)
			if (KF_IS_SYM(ty[i].dim[d]))
				return kf_rt_fail(err, errlen, "cannot tell the size of %s in result %d",
						  kf_str(g->ctx, KF_SYM_SID(ty[i].dim[d])), i);
		char why[200];
		if (unify(g->ctx, &f->env, want, ty[i].rank, ty[i].dim, why, sizeof why) != 0) {
			kf_buf tb = {0};
			kf_print_type(&tb, g->ctx, kf_V(g, kf_res(g, n, i))->type);
			kf_rt_fail(err, errlen, "result %d is declared %.*s but computes to %s: %s", i,
				   (int)tb.n, tb.p, kf_rt_shape_str((char[160]){0}, 160, ty[i].rank, ty[i].dim), why);
			kf_buf_free(&tb);
			return -1;
		}
		if (kf_tensor_alloc(&res[i], (kf_dtype)want->dtype, ty[i].rank, ty[i].dim) != 0) {
			char why[200];
			kf_tensor_why(why, sizeof why, (kf_dtype)want->dtype, ty[i].rank, ty[i].dim);
			return kf_rt_fail(err, errlen, "cannot allocate result %d (%s %s): %s", i,
					  kf_dtype_name(want->dtype),
					  kf_rt_shape_str((char[160]){0}, 160, ty[i].rank, ty[i].dim), why);
		}
	}
	return 0;
}

/* Runs one non-terminator node: gather operands, allocate results, call the
 * op's cpu function (or the body for a fusion), retire operand uses. */
/* Counts node n when a float result holds an infinity or a NaN. */
static void watch_results(kf_interp_watch *w, kf_nid n, const kf_tensor *res, int nres)
{
	for (int i = 0; i < nres; i++) {
		if (!kf_dtype_is_float(res[i].dtype))
			continue;
		int64_t m = kf_tensor_numel(&res[i]);
		for (int64_t e = 0; e < m; e++)
			if (!isfinite(kf_tensor_get(&res[i], e))) {
				if (w->nonfinite_nodes++ == 0)
					w->first_nonfinite = n;
				return;
			}
	}
}

static int run_node(frame *f, kf_nid n, char *err, size_t errlen)
{
	kf_graph *g = f->g;
	const kf_node *nd = kf_N(g, n);
	const kf_opinfo *info = kf_op(g->ctx, nd->op);
	int nin = (int)nd->nin, nres = (int)nd->nres;
	kf_tensor *in = calloc(nin + nres + 1, sizeof *in), *res = in + nin;
	if (!in)
		return kf_rt_fail(err, errlen, "out of memory");
	for (int i = 0; i < nin; i++)
		in[i] = f->t[kf_in(g, n, i)];
	int rc;
	if (nd->op == KF_OP_FUSION && info->cpu == kf_cpu_fusion) {
		/* run the body directly: its yields are the results, whatever
		 * symbols only the body can size */
		rc = fusion_eval(g, n, in, nin, res, nres, err, errlen, &f->env);
		for (int i = 0; rc == 0 && i < nres; i++) {
			char why[200];
			if (unify(g->ctx, &f->env, kf_vtype(g, kf_res(g, n, i)), res[i].rank, res[i].dim, why,
				  sizeof why) != 0)
				rc = kf_rt_fail(err, errlen, "result %d: %s", i, why);
		}
	} else if (!info->cpu) {
		rc = kf_rt_fail(err, errlen, "op has no CPU implementation");
	} else {
		rc = alloc_results(f, n, in, nin, res, err, errlen);
		if (rc == 0)
			rc = info->cpu(g, n, in, nin, res, nres, err, errlen);
	}
	if (rc == 0 && f->watch)
		watch_results(f->watch, n, res, nres);
	for (int i = 0; i < nres; i++) {
		kf_vid v = kf_res(g, n, i);
		if (rc != 0 || f->left[v] == 0) {
			kf_tensor_free(&res[i]);
			continue;
		}
		f->t[v] = res[i];
		f->owned[v] = true;
	}
	for (int i = 0; i < nin; i++)
		frame_use_done(f, kf_in(g, n, i));
	free(in);
	return rc;
}

/* The terminator: results move out of the frame on their last use and are
 * copied otherwise (an input, or a value returned twice). */
static int run_term(frame *f, kf_nid n, kf_tensor *res, int nres, char *err, size_t errlen)
{
	kf_graph *g = f->g;
	if ((int)kf_N(g, n)->nin != nres)
		return kf_rt_fail(err, errlen, "%u values returned, %d expected", kf_N(g, n)->nin, nres);
	for (int i = 0; i < nres; i++) {
		kf_vid v = kf_in(g, n, i);
		if (f->owned[v] && f->left[v] == 1) {
			res[i] = f->t[v];
			f->owned[v] = false;
		} else if (kf_tensor_copy(&res[i], &f->t[v]) != 0) {
			return kf_rt_fail(err, errlen, "out of memory");
		}
		frame_use_done(f, v);
	}
	return 0;
}

static int run_block(kf_graph *g, kf_bid b, const kf_tensor *args, int nargs, kf_tensor *res,
		     int nres, char *err, size_t errlen, kf_interp_watch *w, const env *outer)
{
	kf_ctx *c = g->ctx;
	const kf_block *blk = &g->blk[b];
	if ((int)blk->narg != nargs)
		return kf_rt_fail(err, errlen, "%d operands for a body of %u arguments", nargs, blk->narg);
	frame f = {.g = g, .watch = w};
	for (uint32_t i = 0; outer && i < outer->n; i++)
		env_bind(&f.env, outer->sym[i], outer->val[i]);
	f.t = calloc(g->nval ? g->nval : 1, sizeof *f.t);
	f.owned = calloc(g->nval ? g->nval : 1, sizeof *f.owned);
	f.left = calloc(g->nval ? g->nval : 1, sizeof *f.left);
	int rc = 0;
	if (!f.t || !f.owned || !f.left) {
		rc = kf_rt_fail(err, errlen, "out of memory");
		goto done;
	}
	for (int i = 0; i < nargs && rc == 0; i++) {
		kf_vid v = blk->arg[i];
		char why[200];
		f.t[v] = args[i];
		f.left[v] = kf_nuses(g, v);
		if (unify(c, &f.env, kf_vtype(g, v), args[i].rank, args[i].dim, why, sizeof why) != 0)
			rc = kf_rt_fail(err, errlen, "argument %d: %s", i, why);
	}
	for (kf_nid n = blk->first; n != KF_NONE && rc == 0; n = g->node[n].next) {
		const kf_node *nd = kf_N(g, n);
		if (nd->op == KF_OP_RETURN || nd->op == KF_OP_YIELD) {
			rc = run_term(&f, n, res, nres, err, errlen);
			break;
		}
		for (uint32_t i = 0; i < nd->nres; i++)
			f.left[kf_res(g, n, i)] = kf_nuses(g, kf_res(g, n, i));
		char nerr[512] = "";
		if (run_node(&f, n, nerr, sizeof nerr) != 0) {
			/* the error is the node's, at its location; the caller
			 * (a fusion, or kf_interp_run) only adds context */
			kf_error(c, nd->loc, "%s: %s", kf_op(c, nd->op)->name, nerr);
			rc = kf_rt_fail(err, errlen, "failed at '%s'", kf_op(c, nd->op)->name);
		}
	}
done:
	for (uint32_t v = 0; f.owned && v < g->nval; v++)
		if (f.owned[v])
			kf_tensor_free(&f.t[v]);
	if (rc != 0)
		for (int i = 0; i < nres; i++)
			kf_tensor_free(&res[i]);
	free(f.t);
	free(f.owned);
	free(f.left);
	env_free(&f.env);
	return rc;
}

/* Checks the inputs against the graph's parameters, naming the one at fault;
 * the symbols they bind into *e (the caller frees it, also on an error). */
static int check_inputs(kf_graph *g, const kf_tensor *in, int nin, env *e)
{
	kf_ctx *c = g->ctx;
	const kf_block *b0 = &g->blk[0];
	const char *gname = kf_str(c, g->name);
	if ((uint32_t)nin != b0->narg) {
		kf_error(c, g->loc, "@%s takes %u inputs, %d given", gname, b0->narg, nin);
		return -1;
	}
	int rc = 0;
	for (int i = 0; i < nin && rc == 0; i++) {
		kf_vid v = b0->arg[i];
		const kf_type *want = kf_vtype(g, v);
		char why[200] = "", have[200];
		if (in[i].dtype != want->dtype)
			snprintf(why, sizeof why, "dtype %s, expected %s", kf_dtype_name(in[i].dtype),
				 kf_dtype_name(want->dtype));
		else if (unify(c, e, want, in[i].rank, in[i].dim, why, sizeof why) == 0 &&
			 kf_tensor_numel(&in[i]) > 0 &&
			 (!in[i].data || in[i].nbytes < kf_tensor_numel(&in[i]) * kf_dtype_size(in[i].dtype)))
			snprintf(why, sizeof why, "its data is missing or short");
		if (why[0]) {
			kf_buf tb = {0};
			kf_print_type(&tb, c, kf_V(g, v)->type);
			kf_error(c, g->loc, "@%s: input %d (%%%s) is %s but the graph takes %.*s: %s", gname, i,
				 kf_str(c, kf_V(g, v)->name), tensor_type_str(have, sizeof have, &in[i]),
				 (int)tb.n, tb.p, why);
			kf_buf_free(&tb);
			rc = -1;
		}
	}
	return rc;
}

int kf_interp_bind_inputs(kf_graph *g, const kf_tensor *in, int nin, kf_symbind *b)
{
	*b = (kf_symbind){0};
	if (check_inputs(g, in, nin, b) == 0)
		return 0;
	env_free(b);
	return -1;
}

int kf_interp_run(kf_graph *g, const kf_tensor *in, int nin, kf_tensor *out, int nout)
{
	return kf_interp_run_watch(g, in, nin, out, nout, NULL);
}

int kf_interp_run_watch(kf_graph *g, const kf_tensor *in, int nin, kf_tensor *out, int nout, kf_interp_watch *w)
{
	if (w)
		*w = (kf_interp_watch){.first_nonfinite = KF_NONE};
	kf_ctx *c = g->ctx;
	kf_rt_register(c);
	if (out && nout > 0)
		memset(out, 0, nout * sizeof *out);
	if ((uint32_t)nout != g->nres) {
		kf_error(c, g->loc, "@%s has %u results, %d asked for", kf_str(c, g->name), g->nres, nout);
		return -1;
	}
	env e = {0};
	int bad = check_inputs(g, in, nin, &e);
	env_free(&e);
	if (bad)
		return -1;
	char err[512] = "";
	if (run_block(g, 0, in, nin, out, nout, err, sizeof err, w, NULL) != 0) {
		/* a node failure is already reported at the node */
		if (strncmp(err, "failed at", 9) != 0)
			kf_error(c, g->loc, "@%s: %s", kf_str(c, g->name), err);
		return -1;
	}
	return 0;
}
