/* cuda_backend.c: the CUDA backend: plan (kernels, load, split spilling
 * kernels) and the session's life; cuda_compile.c compiles, cuda_memory.c
 * lays out the buffers, cuda_run.c runs, profiles and benches.  See
 * cuda_backend.h for the shape of it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cuda_backend_int.h"
#include "tune.h"
#include "interp.h"

/* ---- planning: kernels ------------------------------------------------------------ */

static void add_step(kf_cuda_session *s, const kf_kernel *k)
{
	s->st = realloc(s->st, (s->nst + 1) * sizeof *s->st);
	memset(&s->st[s->nst], 0, sizeof *s->st);
	s->st[s->nst].prog = -1;
	s->st[s->nst++].k = *k;
}

static int body_steps(kf_cuda_session *s, kf_nid f);
static bool body_aliasable(const kf_graph *g, kf_nid f);

/* A persistent node whose kernel the emitter refuses (a batch above what
 * it takes, ...) runs its body op by op, as without cooperative launch;
 * the refusal goes to the report instead of failing the plan. */
static int fallback(kf_cuda_session *s, kf_nid f, kf_diag_mark dm)
{
	kf_graph *g = s->g;
	if (kf_N(g, f)->op != KF_OP_FUSION || strcmp(kf_attr_str(g, f, "kind", ""), "persistent") ||
	    !body_aliasable(g, f))
		return -1;
	kf_buf why = {0};
	kf_diag_rewind(g->ctx, dm, &why);
	if (s->o.report)
		kf_buf_printf(s->o.report, "cuda: @%s: fusion @%s runs as ordinary kernels: %s", kf_str(g->ctx, g->name),
			      kf_str(g->ctx, kf_N(g, f)->sym), why.n ? why.p : "(no reason given)\n");
	kf_buf_free(&why);
	return body_steps(s, f);
}

/* Emits the kernels of block b's nodes (the top level, or a split fusion's
 * body) as steps; reshape becomes an alias; a fusion whose kernel cannot
 * run its body (kf_emit_node_for's 2) runs the body op by op. */
static int emit_block(kf_cuda_session *s, kf_bid b)
{
	kf_graph *g = s->g;
	kf_foreach_node(g, b, n) {
		const kf_node *x = kf_N(g, n);
		if (b == 0 && s->hoisted && s->hoisted[n])
			continue; /* computed at plan time (cuda_hoist.c) */
		if (x->op == KF_OP_RESHAPE) {
			s->alias[kf_res(g, n, 0)] = kf_in(g, n, 0);
			continue;
		}
		kf_kernel k;
		kf_diag_mark dm = kf_diag_mark_now(g->ctx);
		int rc = kf_emit_node_for(g, n, &s->tgt, &k);
		if (rc < 0 && fallback(s, n, dm) == 0)
			continue;
		if (rc < 0)
			return -1;
		if (rc == 2) {
			int br = body_steps(s, n);
			if (br < 0)
				return -1;
			if (br > 0) {
				kf_error(g->ctx, x->loc, "cuda: %s; and its body cannot run op by op (it yields a view)", k.why);
				return -1;
			}
			if (s->o.report)
				kf_buf_printf(s->o.report, "cuda: @%s: fusion @%s runs op by op: %s\n", kf_str(g->ctx, g->name),
					      kf_str(g->ctx, x->sym), k.why);
			continue;
		}
		if (rc == 0)
			add_step(s, &k);
	}
	return 0;
}

/* ---- planning: compile ---------------------------------------------------------- */

/* ---- planning: load, split spilling kernels -------------------------------------- */

/* The launch grid of kernel k on sm SMs fitting bps of its blocks each:
 * matmul tiles and one-shot kernels (per_sm < 0) get one block per unit;
 * a grid-stride kernel at most per_sm blocks per SM (0: bps, one full
 * wave), balanced so that every block makes the same number of trips (with
 * 15.5 trips per block, half the blocks would run the last one alone). */
static unsigned grid_of(const kf_kernel *k, int sm, int bps)
{
	if (k->kind == KF_KK_MATMUL || k->per_sm < 0)
		return (unsigned)k->units;
	int64_t cap = (int64_t)sm * (k->per_sm > 0 ? k->per_sm : bps);
	if (k->units <= cap)
		return (unsigned)k->units;
	if (k->per_sm == 0)
		return (unsigned)cap;
	int64_t trips = (k->units + cap - 1) / cap;
	return (unsigned)((k->units + trips - 1) / trips);
}

void kf_cuda_fit_walk(const kf_kernel *k, int sm, int bps, unsigned grid[3])
{
	if (!k->walk || sm < 1 || bps < 1)
		return;
	int64_t fit = (int64_t)sm * bps;
	int cl = k->cluster > 1 ? k->cluster : 1;
	int ax = cl > 1 ? 1 : 0; /* clusters run along y, x along the tiles */
	fit = fit / cl * cl;
	if (fit >= cl && grid[ax] > fit)
		grid[ax] = (unsigned)fit;
}

/* Loads the programs from `from` on, finds each step's function, and marks
 * fused steps that spill. */
static int load(kf_cuda_session *s, bool *spilled)
{
	if (!s->cu)
		return 0;
	double t0 = kf_cb_now();
	for (uint32_t i = 0; i < s->npr; i++)
		if (!s->pr[i].mod && kf_cuda_module_load(s->cu, s->pr[i].u.image.p, &s->pr[i].mod) != 0)
			return -1;
	for (uint32_t i = 0; i < s->nst; i++) {
		step *t = &s->st[i];
		spilled[i] = false;
		if (t->f || kf_cb_lib(t)) /* the libraries' steps: no kernel of ours */
			continue;
		if (kf_cuda_function(s->cu, s->pr[t->prog].mod, t->k.name, &t->f) != 0)
			return -1;
		kf_cuda_funcattr fa;
		if (kf_cuda_func_attrs(s->cu, t->f, &fa) != 0)
			return -1;
		/* a stack kernel (emit_stack.c) bounded to two blocks an SM may
		 * spill a few bytes: still far better than a kernel per layer */
		spilled[i] = fa.local_bytes > 0 && kf_N(s->g, t->k.node)->op == KF_OP_FUSION && !t->lt && !t->part &&
			     t->k.layers == 0;
		/* a persistent kernel needs a cooperative launch; without one its
		 * body runs op by op (the split below), which computes the same.
		 * KFUSE_PERSISTENT=0 asks for that path: the graph around the node
		 * (the hoisted projections) is then checked without the kernel. */
		const char *pe = getenv("KFUSE_PERSISTENT");
		bool off = pe && !strcmp(pe, "0");
		if (t->k.kind == KF_KK_PERSISTENT && (off || !kf_cuda_get_info(s->cu)->coop_launch)) {
			spilled[i] = true;
			if (s->o.report)
				kf_buf_printf(s->o.report, "cuda: %s: the persistent node runs as ordinary kernels\n",
					      off ? "KFUSE_PERSISTENT=0" : "no cooperative launch on this device");
		}
		int bps = 0;
		const kf_cuda_info *inf = kf_cuda_get_info(s->cu);
		/* contraction kernels keep their pipeline in dynamic shared memory
		 * (past 48 KiB with the static part, a function must ask: a
		 * depthwise band's 47 KiB beside 2 KiB of weights failed to launch) */
		if (t->k.smem > 0 && kf_cuda_func_set_max_dyn_smem(s->cu, t->f, t->k.smem) != 0)
			return -1;
		if (kf_cuda_occupancy(s->cu, t->f, t->k.block, (size_t)t->k.smem, &bps) != 0 || bps < 1)
			bps = 1;
		t->grid = grid_of(&t->k, inf->sm_count, bps);
		unsigned gr[3] = {t->grid, t->k.grid_y, t->k.grid_z};
		kf_cuda_fit_walk(&t->k, inf->sm_count, bps, gr);
		t->grid = gr[0];
		t->k.grid_y = gr[1];
		/* a stack of layers as one wavefront kernel needs every group
		 * resident: looping groups would run the layers one after the
		 * other.  Else (or KFUSE_PERSISTENT_STACK=0) its body runs: a
		 * kernel per layer and the projections between them. */
		const char *ps = getenv("KFUSE_PERSISTENT_STACK");
		bool nostack = ps && !strcmp(ps, "0");
		if (t->k.layers > 1 && !spilled[i] && (nostack || t->grid < t->k.units)) {
			spilled[i] = true;
			if (s->o.report && nostack)
				kf_buf_printf(s->o.report, "cuda: KFUSE_PERSISTENT_STACK=0: the stack of %d layers runs a "
					      "kernel per layer\n", t->k.layers);
			else if (s->o.report)
				kf_buf_printf(s->o.report, "cuda: the stack of %d layers needs %lld resident blocks, the "
					      "device holds %u (%d SMs x %d): a kernel per layer\n", t->k.layers,
					      (long long)t->k.units, t->grid, inf->sm_count, bps);
		}
	}
	s->stats.load_s += kf_cb_now() - t0;
	return 0;
}

/* The value whose bytes v views: v itself, or the first operand down a
 * chain of reshapes (a reshape is an alias, emit_block). */
static kf_vid view_base(const kf_graph *g, kf_vid v)
{
	while (kf_def(g, v) != KF_NONE && kf_N(g, kf_def(g, v))->op == KF_OP_RESHAPE)
		v = kf_in(g, kf_def(g, v), 0);
	return v;
}

/* Each value fusion f's body yields can live in the fusion's result: it
 * is computed by a step of the body (not a block argument or a constant),
 * directly or viewed through reshapes (an attention that ends in
 * reshape(transpose(...)): its base is written into the result, which the
 * reshape then views), and no two yields share those bytes; else (an
 * argument or a constant yielded, one value yielded twice) a copy would
 * be needed. */
static bool body_aliasable(const kf_graph *g, kf_nid f)
{
	kf_nid y = kf_block_terminator(g, kf_N(g, f)->body);
	for (uint32_t j = 0; j < kf_N(g, y)->nin; j++) {
		kf_vid v = view_base(g, kf_in(g, y, j));
		if (kf_def(g, v) == KF_NONE || kf_N(g, kf_def(g, v))->op == KF_OP_CONST)
			return false;
		for (uint32_t k = 0; k < j; k++)
			if (view_base(g, kf_in(g, y, k)) == v)
				return false;
	}
	return true;
}

/* Fusion f's body as steps (appended): its arguments alias the fusion's
 * operands, and the values its yields view (themselves, or the bases of
 * their reshapes, which emit_block aliases to those) its results.  1
 * (nothing done) when they cannot (body_aliasable). */
static int body_steps(kf_cuda_session *s, kf_nid f)
{
	kf_graph *g = s->g;
	const kf_node *x = kf_N(g, f);
	if (!body_aliasable(g, f))
		return 1;
	kf_nid y = kf_block_terminator(g, x->body);
	for (uint32_t j = 0; j < x->nin; j++)
		s->alias[g->blk[x->body].arg[j]] = kf_in(g, f, j);
	for (uint32_t j = 0; j < kf_N(g, y)->nin; j++)
		s->alias[view_base(g, kf_in(g, y, j))] = kf_res(g, f, j);
	return emit_block(s, x->body);
}

/* A fusion whose kernel spills runs its body op by op (body_steps); the
 * spilling kernel stays when the body cannot.  Returns the number of
 * steps split. */
static int split(kf_cuda_session *s, const bool *spilled, uint32_t nst)

{
	kf_graph *g = s->g;
	int nsplit = 0;
	for (uint32_t i = 0; i < nst; i++) {
		if (!spilled[i])
			continue;
		kf_nid f = s->st[i].k.node;
		const kf_node *x = kf_N(g, f);
		uint32_t before = s->nst;
		int rc = body_steps(s, f);
		if (rc < 0)
			return -1;
		if (rc > 0)
			continue;
		/* the body's steps (appended) take the fusion's place */
		uint32_t nb = s->nst - before;
		step *ns = malloc((s->nst + 1) * sizeof *ns);
		memcpy(ns, s->st, i * sizeof *ns);
		memcpy(ns + i, s->st + before, nb * sizeof *ns);
		memcpy(ns + i + nb, s->st + i + 1, (before - i - 1) * sizeof *ns);
		kf_kernel_free(&s->st[i].k);
		free(s->st);
		s->st = ns;
		s->nst = before - 1 + nb;
		if (s->o.report)
			kf_buf_printf(s->o.report, "cuda: @%s: kernel of fusion @%s spills registers; split into %u kernels\n",
				      kf_str(g->ctx, g->name), kf_str(g->ctx, x->sym), nb);
		return 1; /* indices moved: the caller compiles, loads and checks again */
	}
	return nsplit;
}

int kf_cuda_kernel_tmaps(kf_cuda *cu, const kf_kernel *k, const kf_cuptr *ptr, kf_cuda_tmap *out)
{
	for (int j = 0; j < k->ntmap; j++) {
		const kf_tmap_spec *m = &k->tmap[j];
		if (kf_cuda_tmap_encode(cu, ptr[m->param], m->elem, (uint64_t)m->inner, (uint64_t)m->mid, (uint64_t)m->outer,
				    (unsigned)m->box_inner, (unsigned)m->box_outer, &out[j]) != 0)
			return -1;
	}
	return 0;
}

void kf_cuda_kernel_arch(const char *arch, bool sm90a, char *out, size_t n)
{
	snprintf(out, n, "%s%s", arch, sm90a && !strcmp(arch, "sm_90") ? "a" : "");
}

void kf_cuda_emit_target(const kf_cuda *cu, const char *arch, kf_emit_target *t)
{
	/* wgmma and setmaxnreg exist on sm_90 alone (sm_90a code runs nowhere
	 * else); the kernel also needs the driver to encode its tensor maps */
	bool ok = !strcmp(arch, "sm_90") && (!cu || kf_cuda_get_info(cu)->tmap);
	t->wgmma = ok ? 1 : -1;
}

static void unplan(kf_cuda_session *s)
{
	for (uint32_t i = 0; i < s->nst; i++) {
		kf_cublaslt_op_free(s->lt, s->st[i].lt);
		kf_cudnn_op_free(s->st[i].dop);
		kf_cublas_op_free(s->blas, s->st[i].bop);
		kf_kernel_free(&s->st[i].k);
		free(s->st[i].ptr);
		free(s->st[i].args);
		free(s->st[i].tm);
	}
	free(s->st);
	s->st = NULL;
	s->nst = 0;
	for (uint32_t i = 0; i < s->npr; i++) {
		if (s->cu && s->pr[i].mod)
			kf_cuda_module_unload(s->cu, s->pr[i].mod);
		kf_buf_free(&s->pr[i].src);
		kf_buf_free(&s->pr[i].u.image);
	}
	free(s->pr);
	s->pr = NULL;
	s->npr = 0;
	for (uint32_t i = 0; s->cu && i < s->nown; i++)
		kf_cuda_free(s->cu, s->own[i]);
	free(s->own);
	s->own = NULL;
	s->nown = 0;
	for (uint32_t i = 0; i < s->nshared; i++) {
		kf_cuptr p = 0;
		if (kf_cb_consts_drop(s->consts, s->shared[i], &p) && s->cu && p)
			kf_cuda_free(s->cu, p);
		free(s->shared[i]);
	}
	free(s->shared);
	s->shared = NULL;
	s->nshared = 0;
	if (s->cu && s->arena)
		kf_cuda_free(s->cu, s->arena);
	s->arena = 0;
	if (s->cu && s->graph)
		kf_cuda_graph_free(s->cu, s->graph);
	s->graph = NULL;
	kf_cb_hoist_free(s);
	free(s->alias);
	free(s->vptr);
	s->alias = NULL;
	s->vptr = NULL;
	s->g = NULL;
	s->ran = false;
	memset(&s->stats, 0, sizeof s->stats);
}

int kf_cuda_session_plan_sized(kf_cuda_session *s, kf_graph *g, const kf_sizes *sz)
{
	if (s->g == g && s->gnodes == g->nnode)
		return 0;
	unplan(s);
	s->dyn = (kf_emit_dyn){0};
	s->tgt.dyn = NULL;
	if (sz && sz->n && sz->n <= KF_EMIT_MAXSYM) {
		for (uint32_t i = 0; i < sz->n; i++) {
			s->dsid[i] = sz->sid[i];
			s->dval[i] = sz->val[i];
			s->drep[i] = kf_emit_bucket(sz->val[i]);
			s->dpval[i] = sz->pval ? sz->pval[i] : 0;
		}
		s->dyn = (kf_emit_dyn){.sym = sz->sym, .sid = s->dsid, .val = s->dval, .rep = s->drep, .n = sz->n,
				       .probe = sz->pval ? sz->probe : NULL, .pval = s->dpval};
		s->tgt.dyn = &s->dyn;
	}
	return kf_cuda_session_plan(s, g);
}

int kf_cuda_session_plan(kf_cuda_session *s, kf_graph *g)
{
	if (s->g == g && s->gnodes == g->nnode)
		return 0;
	unplan(s);
	double t0 = kf_cb_now();
	s->g = g;
	s->gnodes = g->nnode;
	s->alias = malloc((g->nval + 1) * sizeof *s->alias);
	s->vptr = calloc(g->nval + 1, sizeof *s->vptr);
	for (uint32_t v = 0; v < g->nval; v++)
		s->alias[v] = KF_NONE;
	if (s->o.allow_tf32)
		kf_tune_allow_tf32(g);
	/* tuned tile configs of contraction kernels (cuda/tune.h) */
	kf_tune_apply_for(g, s->arch, s->cu ? kf_cuda_get_info(s->cu)->name : NULL, s->o.cache_dir, s->o.report, &s->tgt);
	double tp = kf_cb_now();
	int rc = kf_cb_hoist(s);
	s->stats.hoist_s = kf_cb_now() - tp;
	if (rc == 0)
		rc = emit_block(s, 0);
	/* contractions through cuBLASLt or cuBLAS (cuda_route.c) */
	tp = kf_cb_now();
	if (rc == 0)
		rc = kf_cb_route(s);
	s->stats.route_s = kf_cb_now() - tp;
	for (uint32_t i = 0; rc == 0 && s->o.report && i < s->nst; i++)
		if (s->st[i].k.sm90a && !s->st[i].lt)
			kf_buf_printf(s->o.report, "cuda: fusion @%s: wgmma kernel (sm_90a, %d threads, %d bytes of shared memory)\n",
				      kf_str(s->c, kf_N(g, s->st[i].k.node)->sym), s->st[i].k.block, s->st[i].k.smem);
	s->stats.emit_s = kf_cb_now() - t0;
	for (int round = 0; rc == 0; round++) {
		rc = kf_cb_compile(s);
		bool *spilled = calloc(s->nst + 1, 1);
		if (rc == 0)
			rc = load(s, spilled);
		int ns = rc == 0 && round < 64 ? split(s, spilled, s->nst) : 0;
		free(spilled);
		if (ns < 0)
			rc = -1;
		if (ns <= 0)
			break;
		s->stats.split += ns;
	}
	if (rc == 0)
		rc = kf_cb_memory(s);
	s->stats.kernels = (int)s->nst;
	for (uint32_t i = 0; i < g->blk[0].narg; i++)
		s->stats.graph_bytes += kf_type_numel(kf_vtype(g, g->blk[0].arg[i])) *
					(int64_t)kf_dtype_size(kf_vtype(g, g->blk[0].arg[i])->dtype);
	for (uint32_t i = 0; i < g->nres; i++)
		s->stats.graph_bytes += (int64_t)kf_type_numel(kf_type_get(s->c, g->res[i])) *
					(int64_t)kf_dtype_size((kf_dtype)kf_type_get(s->c, g->res[i])->dtype);
	for (uint32_t i = 0; i < s->nst; i++)
		s->stats.kernel_bytes += s->st[i].k.bytes;
	s->stats.plan_s = kf_cb_now() - t0;
	if (rc != 0) {
		unplan(s);
		return -1;
	}
	kf_cb_plan_report(s);
	return 0;
}

void kf_cuda_session_stats(const kf_cuda_session *s, kf_cuda_stats *out) { *out = s->stats; }
const char *kf_cuda_session_arch(const kf_cuda_session *s) { return s->arch; }

kf_cuda_session *kf_cuda_session_new(kf_ctx *c, const kf_cuda_opts *o)
{
	kf_cuda_session *s = calloc(1, sizeof *s);
	s->c = c;
	s->o = *o;
	kf_rt_register(c);
	/* NVRTC is opened here only to fail early and clearly; each compile
	 * thread opens its own */
	s->nv = kf_nvrtc_open(c);
	if (!s->nv)
		goto fail;
	if (!o->dry_run) {
		s->cu = kf_cuda_open(c, o->device);
		if (!s->cu)
			goto fail;
		if (kf_cuda_stream_new(s->cu, &s->stream) != 0)
			goto fail;
		const char *blas = getenv("KFUSE_CUBLAS");
		if (blas && !strcmp(blas, "1")) {
			s->blas_tried = true;
			if (!(s->blas = kf_cublas_open(c, s->cu, s->blas_why, sizeof s->blas_why))) {
				kf_error(c, KF_NOLOC, "cublas: KFUSE_CUBLAS=1 but cuBLAS is not there: %s", s->blas_why);
				goto fail;
			}
		}
	}
	snprintf(s->arch, sizeof s->arch, "%s",
		 o->arch ? o->arch : s->cu ? kf_cuda_get_info(s->cu)->arch : "sm_90");
	kf_cuda_emit_target(s->cu, s->arch, &s->tgt);
	return s;
fail:
	kf_cuda_session_free(s);
	return NULL;
}

void kf_cuda_session_free(kf_cuda_session *s)
{
	if (!s)
		return;
	unplan(s);
	kf_cb_consts_release(s->consts);
	kf_cublas_close(s->blas);
	kf_cublaslt_close(s->lt);
	kf_cudnn_close(s->dnn);
	if (s->cu && s->ev_in)
		kf_cuda_event_free(s->cu, s->ev_in);
	if (s->cu && s->ev_out)
		kf_cuda_event_free(s->cu, s->ev_out);
	if (s->cu && s->stream)
		kf_cuda_stream_free(s->cu, s->stream);
	if (s->cu)
		kf_cuda_close(s->cu);
	if (s->nv)
		kf_nvrtc_close(s->nv);
	free(s);
}

int kf_cuda_run(kf_graph *g, const kf_tensor *in, int nin, kf_tensor *out, int nout,
		const kf_cuda_opts *o)
{
	kf_cuda_session *s = kf_cuda_session_new(g->ctx, o);
	if (!s)
		return -1;
	int rc = o->dry_run ? kf_cuda_session_plan(s, g) : kf_cuda_session_run(s, g, in, nin, out, nout);
	kf_cuda_session_free(s);
	return rc;
}

/* ---- the backend (runtime/backend.h) ------------------------------------------------------ */

/* A plan is a session that planned the graph: one per compile, so plans of
 * different graphs live side by side. */
typedef struct cplan {
	kf_plan p;
	kf_cuda_session *s;
} cplan;

/* The backend's state: the options every plan takes, the constants its
 * plans share. */
typedef struct cstate {
	kf_cuda_opts o;
	kf_cb_consts *consts;
	/* the option strings, copied: a caller's may not outlive kfuse_compile,
	 * and a symbolic graph plans (and compiles) at later runs */
	char *arch, *cache_dir;
} cstate;

static bool be_available(kf_backend *be, char *why, size_t whylen)
{
	kf_cuda_opts *o = &((cstate *)be->state)->o;
	kf_ctx *c = kf_ctx_new();
	kf_cuda *cu = kf_cuda_open(c, o->device);
	if (cu) {
		kf_cuda_close(cu);
	} else if (why && whylen) {
		kf_buf b = {0};
		kf_diag_render(c, &b);
		const char *msg = b.p ? b.p : "no CUDA driver or device", *e = strstr(msg, "error: ");
		snprintf(why, whylen, "%s", e ? e + 7 : msg);
		size_t n = strlen(why);
		if (n && why[n - 1] == '\n')
			why[n - 1] = 0;
		kf_buf_free(&b);
	}
	kf_ctx_free(c);
	return cu != NULL;
}

static kf_plan *be_compile_sized(kf_backend *be, kf_graph *g, const kf_sizes *sz)
{
	cplan *p = calloc(1, sizeof *p);
	if (!p) {
		kf_error(g->ctx, g->loc, "cuda: out of memory");
		return NULL;
	}
	p->p = (kf_plan){.be = be, .g = g};
	cstate *st = be->state;
	double t0 = kf_cb_now();
	p->s = kf_cuda_session_new(g->ctx, &st->o);
	double open_s = kf_cb_now() - t0;
	if (p->s)
		p->s->consts = kf_cb_consts_retain(st->consts);
	if (!p->s || kf_cuda_session_plan_sized(p->s, g, sz) != 0) {
		kf_cuda_session_free(p->s);
		free(p);
		return NULL;
	}
	if (st->o.report) /* a new shape's plan opens its own session */
		kf_buf_printf(st->o.report, "cuda: @%s: session opened in %.1f ms\n", kf_str(g->ctx, g->name), open_s * 1e3);
	return &p->p;
}

static kf_plan *be_compile(kf_backend *be, kf_graph *g)
{
	return be_compile_sized(be, g, NULL);
}

static int be_run(kf_plan *p, const kf_tensor *in, int nin, kf_tensor *out, int nout)
{
	return kf_cuda_session_run(((cplan *)p)->s, p->g, in, nin, out, nout);
}

static int be_run_device(kf_plan *p, const kf_tensor *in, int nin, const kf_tensor *out, int nout, void *stream)
{
	return kf_cuda_session_run_device(((cplan *)p)->s, p->g, in, nin, out, nout, (kf_custream)stream);
}

static int be_bench(kf_plan *p, int n, double *median_ms, double *min_ms)
{
	return kf_cuda_session_bench(((cplan *)p)->s, n, median_ms, min_ms);
}

static void be_plan_free(kf_plan *p)
{
	kf_cuda_session_free(((cplan *)p)->s);
	free(p);
}

static void be_free(kf_backend *be)
{
	cstate *st = be->state;
	kf_cb_consts_release(st->consts);
	free(st->arch);
	free(st->cache_dir);
	free(be);
}

kf_backend *kf_backend_cuda_new(kf_ctx *c, const kf_cuda_opts *o)
{
	/* one allocation: the table, then the state it reads */
	kf_backend *be = calloc(1, sizeof *be + sizeof(cstate));
	kf_cb_consts *cc = kf_cb_consts_new();
	if (!be || !cc) {
		free(be);
		free(cc);
		kf_error(c, KF_NOLOC, "cuda: out of memory");
		return NULL;
	}
	cstate *st = (cstate *)(be + 1);
	*st = (cstate){.o = *o, .consts = cc, .arch = o->arch ? strdup(o->arch) : NULL,
		       .cache_dir = o->cache_dir ? strdup(o->cache_dir) : NULL};
	if ((o->arch && !st->arch) || (o->cache_dir && !st->cache_dir)) {
		free(st->arch);
		free(st->cache_dir);
		kf_cb_consts_release(cc);
		free(be);
		kf_error(c, KF_NOLOC, "cuda: out of memory");
		return NULL;
	}
	st->o.arch = st->arch;
	st->o.cache_dir = st->cache_dir;
	*be = (kf_backend){.name = "cuda", .available = be_available, .compile = be_compile,
			   .compile_sized = be_compile_sized, .run = be_run,
			   .run_device = be_run_device, .bench = be_bench, .plan_free = be_plan_free, .free = be_free, .state = st};
	return be;
}

kf_cuda_session *kf_cuda_plan_session(const kf_plan *p)
{
	return p && p->be->compile == be_compile ? ((const cplan *)p)->s : NULL;
}
