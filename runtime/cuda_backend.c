/* cuda_backend.c: the CUDA backend: plan (kernels, compile, buffers), run
 * (upload, launch or replay the CUDA graph, download), profile and bench.
 * See cuda_backend.h for the shape of it. */
#define _GNU_SOURCE /* dladdr: where libnvrtc was loaded from */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "cuda_backend.h"
#include "cuda.h"
#include "kcache.h"
#include "cublas.h"
#include "tune.h"
#include "tensor.h"
#include "../passes/emit_cuda.h"

#define ALIGN 256
#define PER_PROGRAM 8
#define PER_PROGRAM_OPS 48

typedef struct step {
	kf_kernel k;
	int prog;            /* program index */
	kf_cufunc f;
	kf_cuptr *ptr;       /* parameter values */
	kf_cuda_tmap *tm;    /* tensor maps (k.ntmap), encoded from ptr */
	void **args;
	unsigned grid;
	float ms;            /* profile */
	bool blas;           /* a matmul/gemm run by cuBLAS (KFUSE_CUBLAS=1) */
	kf_lt_op *lt;        /* a contraction fusion run by cuBLASLt with its epilogue */
	kf_lt_plan lp;
} step;

typedef struct prog {
	kf_buf src;
	kf_buf image;
	kf_cumodule mod;
	bool sm90a;          /* its kernels need the arch-specific target */
	bool cached;
	char err[512];
} prog;

struct kf_cuda_session {
	kf_ctx *c;
	kf_cuda_opts o;
	kf_cuda *cu;
	kf_nvrtc *nv;
	char arch[16];
	kf_emit_target tgt;    /* what the emitter may use on this device */
	kf_graph *g;
	uint32_t gnodes;       /* g->nnode when planned, to notice a changed graph */
	step *st;
	uint32_t nst;
	prog *pr;
	uint32_t npr;
	kf_vid *alias;         /* value -> value whose buffer it uses (KF_NONE: itself) */
	kf_cuptr *vptr;        /* value -> device address */
	kf_cuptr arena, *own;  /* the arena; inputs and consts own buffers */
	uint32_t nown;
	kf_custream stream;
	kf_cugraph graph;
	bool ran;
	kf_cuda_stats stats;
	kf_cublas *blas;       /* KFUSE_CUBLAS=1: unfused matmuls through cuBLAS */
	kf_cublaslt *lt;       /* contractions with tile `cublaslt` (opened at the first) */
	bool lt_tried;
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- planning: kernels ------------------------------------------------------------ */

static void add_step(kf_cuda_session *s, const kf_kernel *k)
{
	s->st = realloc(s->st, (s->nst + 1) * sizeof *s->st);
	memset(&s->st[s->nst], 0, sizeof *s->st);
	s->st[s->nst].prog = -1;
	s->st[s->nst++].k = *k;
}

static kf_vid root(const kf_cuda_session *s, kf_vid v)
{
	while (s->alias[v] != KF_NONE)
		v = s->alias[v];
	return v;
}

/* Emits the kernels of block b's nodes (the top level, or a split fusion's
 * body) as steps; reshape becomes an alias. */
static int emit_block(kf_cuda_session *s, kf_bid b)
{
	kf_graph *g = s->g;
	kf_foreach_node(g, b, n) {
		const kf_node *x = kf_N(g, n);
		if (x->op == KF_OP_RESHAPE) {
			s->alias[kf_res(g, n, 0)] = kf_in(g, n, 0);
			continue;
		}
		kf_kernel k;
		int rc = kf_emit_node_for(g, n, &s->tgt, &k);
		if (rc < 0)
			return -1;
		if (rc == 0)
			add_step(s, &k);
	}
	return 0;
}

/* ---- planning: compile ---------------------------------------------------------- */

typedef struct job {
	kf_cuda_session *s;
	uint32_t next;
	pthread_mutex_t mu;
} job;

static bool is_file(const char *dir, const char *name)
{
	char path[600];
	struct stat st;
	snprintf(path, sizeof path, "%s/%s", dir, name);
	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int kf_cuda_include_dir(const char *nvrtc_path, char *out, size_t n)
{
	char cand[4][512];
	int nc = 0;
	const char *env[3] = {getenv("KFUSE_CUDA_INCLUDE"), getenv("CUDA_HOME"), getenv("CUDA_PATH")};
	if (env[0] && *env[0])
		snprintf(cand[nc++], 512, "%s", env[0]);
	for (int i = 1; i < 3; i++)
		if (env[i] && *env[i])
			snprintf(cand[nc++], 512, "%s/include", env[i]);
	/* beside the libnvrtc that was loaded: <root>/lib64/libnvrtc.so ->
	 * <root>/include (and <root>/targets/<arch>/lib likewise) */
	void *h = nvrtc_path ? dlopen(nvrtc_path, RTLD_NOW | RTLD_NOLOAD) : NULL;
	void *sym = h ? dlsym(h, "nvrtcVersion") : NULL;
	Dl_info di;
	if (sym && dladdr(sym, &di) && di.dli_fname) {
		snprintf(cand[nc], 512, "%s", di.dli_fname);
		char *sl = strrchr(cand[nc], '/');
		if (sl) {
			snprintf(sl, (size_t)(cand[nc] + 512 - sl), "/../include");
			nc++;
		}
	}
	if (h)
		dlclose(h);
	snprintf(cand[nc++], 512, "/usr/local/cuda/include");
	for (int i = 0; i < nc; i++)
		if (is_file(cand[i], "cooperative_groups.h")) {
			snprintf(out, n, "%s", cand[i]);
			return 0;
		}
	return -1;
}

/* A program that includes CUDA headers (the grid-sync persistent
 * kernel: cooperative_groups.h) gets the toolkit's include directory and,
 * from CUDA 13 on, its cccl/ beside it.  Returns the option count. */
static int include_opts(kf_nvrtc *nv, const char *src, char opt[2][600])
{
	char dir[512];
	if (!strstr(src, "#include <") || kf_cuda_include_dir(kf_nvrtc_path(nv), dir, sizeof dir) != 0)
		return 0;
	int n = 0;
	snprintf(opt[n++], 600, "--include-path=%s", dir);
	char cccl[540];
	snprintf(cccl, sizeof cccl, "%s/cccl", dir);
	if (is_file(cccl, "cuda/std/type_traits"))
		snprintf(opt[n++], 600, "--include-path=%s", cccl);
	return n;
}

static void compile_one(kf_cuda_session *s, prog *p)
{
	kf_ctx *c = kf_ctx_new(); /* errors of this thread; the context is not shared */
	kf_nvrtc *nv = kf_nvrtc_open(c);
	kf_kcache kc;
	kf_kcache_init(&kc, c, s->o.cache_dir);
	char inc[2][600];
	const char *opts[3] = {"-std=c++17"};
	int rc = -1, nopt = 1;
	if (nv) {
		int ni = include_opts(nv, p->src.p, inc);
		for (int i = 0; i < ni; i++)
			opts[nopt++] = inc[i];
		char arch[24];
		kf_cuda_kernel_arch(s->arch, p->sm90a, arch, sizeof arch);
		rc = kf_kcache_compile(s->o.no_cache ? NULL : &kc, nv, p->src.p, "kfuse.cu", arch, opts, nopt, 1,
				       &p->image, NULL);
		p->cached = rc == 0 && kc.hits > 0;
	}
	if (rc != 0) {
		kf_buf d = {0};
		kf_diag_render(c, &d);
		snprintf(p->err, sizeof p->err, "%.*s", (int)(d.n < 500 ? d.n : 500), d.p ? d.p : "compile failed");
		kf_buf_free(&d);
	}
	kf_kcache_fini(&kc);
	if (nv)
		kf_nvrtc_close(nv);
	kf_ctx_free(c);
}

static void *worker(void *arg)
{
	job *j = arg;
	for (;;) {
		pthread_mutex_lock(&j->mu);
		uint32_t i = j->next++;
		pthread_mutex_unlock(&j->mu);
		if (i >= j->s->npr)
			return NULL;
		compile_one(j->s, &j->s->pr[i]);
	}
}

/* sm_90a kernels apart (their programs compile for sm_90a), then by name */
static int cmp_name(const void *a, const void *b)
{
	const kf_kernel *x = &(*(step *const *)a)->k, *y = &(*(step *const *)b)->k;
	if (x->sm90a != y->sm90a)
		return x->sm90a - y->sm90a;
	return strcmp(x->name, y->name);
}

/* Groups the distinct kernels (sorted by name, so that programs and their
 * cache keys do not depend on node order) into programs of PER_PROGRAM
 * and compiles them in parallel. */
static int compile(kf_cuda_session *s)
{
	uint32_t n = 0;
	step **by = malloc((s->nst + 1) * sizeof *by);
	for (uint32_t i = 0; i < s->nst; i++)
		if (s->st[i].prog < 0)
			by[n++] = &s->st[i];
	qsort(by, n, sizeof *by, cmp_name);
	uint32_t first = s->npr, inprog = PER_PROGRAM;
	int ops = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (i && strcmp(by[i]->k.name, by[i - 1]->k.name) == 0) {
			by[i]->prog = by[i - 1]->prog;
			continue;
		}
		s->stats.distinct++;
		/* a program holds up to PER_PROGRAM kernels or PER_PROGRAM_OPS ops,
		 * so that big kernels compile in parallel */
		if (inprog >= PER_PROGRAM || ops + by[i]->k.nops > PER_PROGRAM_OPS ||
		    (s->npr > first && s->pr[s->npr - 1].sm90a != by[i]->k.sm90a)) {
			ops = 0;
			s->pr = realloc(s->pr, (s->npr + 1) * sizeof *s->pr);
			memset(&s->pr[s->npr], 0, sizeof *s->pr);
			kf_buf_puts(&s->pr[s->npr].src, kf_emit_prelude());
			s->pr[s->npr].sm90a = by[i]->k.sm90a;
			s->npr++;
			inprog = 0;
		}
		inprog++;
		ops += by[i]->k.nops;
		by[i]->prog = (int)s->npr - 1;
		kf_buf_puts(&s->pr[s->npr - 1].src, by[i]->k.src);
	}
	free(by);
	for (uint32_t i = first; i < s->npr; i++)
		kf_buf_putc(&s->pr[i].src, '\0');
	int nt = s->o.threads;
	if (nt <= 0) {
		long nc = sysconf(_SC_NPROCESSORS_ONLN);
		nt = nc > 16 ? 16 : nc < 1 ? 1 : (int)nc;
	}
	if (nt > (int)(s->npr - first))
		nt = (int)(s->npr - first);
	double t0 = now_s();
	job j = {.s = s, .next = first};
	pthread_mutex_init(&j.mu, NULL);
	pthread_t th[16];
	int started = 0;
	for (int i = 1; i < nt; i++)
		if (pthread_create(&th[started], NULL, worker, &j) == 0)
			started++;
	worker(&j);
	for (int i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	pthread_mutex_destroy(&j.mu);
	s->stats.compile_s += now_s() - t0;
	int rc = 0;
	for (uint32_t i = first; i < s->npr; i++) {
		s->stats.programs++;
		if (s->pr[i].err[0]) {
			kf_error(s->c, s->g->loc, "cuda: compiling kernels failed: %s", s->pr[i].err);
			rc = -1;
		} else if (s->pr[i].cached) {
			s->stats.cached++;
		} else {
			s->stats.compiled++;
		}
	}
	return rc;
}

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

/* Loads the programs from `from` on, finds each step's function, and marks
 * fused steps that spill. */
static int load(kf_cuda_session *s, bool *spilled)
{
	if (!s->cu)
		return 0;
	double t0 = now_s();
	for (uint32_t i = 0; i < s->npr; i++)
		if (!s->pr[i].mod && kf_cuda_module_load(s->cu, s->pr[i].image.p, &s->pr[i].mod) != 0)
			return -1;
	for (uint32_t i = 0; i < s->nst; i++) {
		step *t = &s->st[i];
		spilled[i] = false;
		if (t->f)
			continue;
		if (kf_cuda_function(s->cu, s->pr[t->prog].mod, t->k.name, &t->f) != 0)
			return -1;
		kf_cuda_funcattr fa;
		if (kf_cuda_func_attrs(s->cu, t->f, &fa) != 0)
			return -1;
		/* a stack kernel (emit_stack.c) bounded to two blocks an SM may
		 * spill a few bytes: still far better than a kernel per layer */
		spilled[i] = fa.local_bytes > 0 && kf_N(s->g, t->k.node)->op == KF_OP_FUSION && !t->lt &&
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
		/* contraction kernels keep their pipeline in dynamic shared memory */
		if (t->k.smem > 48 * 1024 && kf_cuda_func_set_max_dyn_smem(s->cu, t->f, t->k.smem) != 0)
			return -1;
		if (kf_cuda_occupancy(s->cu, t->f, t->k.block, (size_t)t->k.smem, &bps) != 0 || bps < 1)
			bps = 1;
		t->grid = grid_of(&t->k, inf->sm_count, bps);
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
	s->stats.load_s += now_s() - t0;
	return 0;
}

/* A fusion whose kernel spills runs its body op by op: the body's
 * arguments alias the fusion's operands and the yielded values its
 * results.  Returns the number of steps split. */
static int split(kf_cuda_session *s, const bool *spilled, uint32_t nst)

{
	kf_graph *g = s->g;
	int nsplit = 0;
	for (uint32_t i = 0; i < nst; i++) {
		if (!spilled[i])
			continue;
		kf_nid f = s->st[i].k.node;
		const kf_node *x = kf_N(g, f);
		kf_nid y = kf_block_terminator(g, x->body);
		bool ok = true;
		/* a yielded argument or a value yielded twice needs a copy: keep
		 * the spilling kernel then */
		for (uint32_t j = 0; j < kf_N(g, y)->nin && ok; j++) {
			kf_vid v = kf_in(g, y, j);
			ok = kf_def(g, v) != KF_NONE && kf_N(g, kf_def(g, v))->op != KF_OP_CONST &&
			     kf_N(g, kf_def(g, v))->op != KF_OP_RESHAPE;
			for (uint32_t k = 0; k < j; k++)
				ok = ok && kf_in(g, y, k) != v;
		}
		if (!ok)
			continue;
		for (uint32_t j = 0; j < x->nin; j++)
			s->alias[g->blk[x->body].arg[j]] = kf_in(g, f, j);
		for (uint32_t j = 0; j < kf_N(g, y)->nin; j++)
			s->alias[kf_in(g, y, j)] = kf_res(g, f, j);
		uint32_t before = s->nst;
		if (emit_block(s, x->body) != 0)
			return -1;
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

/* ---- planning: memory -------------------------------------------------------------- */

typedef struct iv {
	kf_vid v;
	uint32_t def, last;
	size_t size, off;
} iv;

static size_t vbytes(kf_graph *g, kf_vid v)
{
	const kf_type *t = kf_vtype(g, v);
	size_t n = (size_t)kf_type_numel(t) * kf_dtype_size((kf_dtype)t->dtype);
	return (n + ALIGN - 1) / ALIGN * ALIGN + (n == 0 ? ALIGN : 0);
}

static int cmp_off(const void *a, const void *b)
{
	const iv *x = *(iv *const *)a, *y = *(iv *const *)b;
	return (x->off > y->off) - (x->off < y->off);
}

static int own_buffer(kf_cuda_session *s, kf_vid v, size_t n)
{
	s->own = realloc(s->own, (s->nown + 1) * sizeof *s->own);
	if (s->cu && kf_cuda_malloc(s->cu, n, &s->own[s->nown]) != 0)
		return -1;
	s->vptr[v] = s->cu ? s->own[s->nown++] : 0;
	return 0;
}

/* Uploads a const node's payload (through the interpreter's const kernel). */
static int upload_const(kf_cuda_session *s, kf_nid n)
{
	kf_graph *g = s->g;
	kf_vid v = kf_res(g, n, 0);
	kf_tensor t;
	char err[256] = "";
	if (kf_tensor_alloc_type(&t, kf_vtype(g, v)) != 0 ||
	    kf_op(s->c, KF_OP_CONST)->cpu(g, n, NULL, 0, &t, 1, err, sizeof err) != 0) {
		kf_error(s->c, kf_N(g, n)->loc, "cuda: cannot materialise the constant: %s", err);
		kf_tensor_free(&t);
		return -1;
	}
	int rc = own_buffer(s, v, vbytes(g, v));
	if (rc == 0 && s->cu && t.nbytes)
		rc = kf_cuda_h2d(s->cu, s->vptr[v], t.data, t.nbytes);
	kf_tensor_free(&t);
	return rc;
}

/* Places every kernel-written buffer in one arena: a buffer may reuse the
 * space of buffers whose last reader ran before it is written. */
static int plan_memory(kf_cuda_session *s)
{
	kf_graph *g = s->g;
	uint32_t nv = g->nval;
	uint32_t *def = malloc(nv * sizeof *def), *last = malloc(nv * sizeof *last);
	for (uint32_t v = 0; v < nv; v++)
		def[v] = last[v] = KF_NONE;
	for (uint32_t i = 0; i < s->nst; i++) {
		const kf_kernel *k = &s->st[i].k;
		for (uint32_t j = 0; j < k->nin; j++)
			last[root(s, k->in[j])] = i;
		for (uint32_t j = 0; j < k->nout; j++) {
			kf_vid r = root(s, k->out[j]);
			if (def[r] == KF_NONE)
				def[r] = i;
			if (last[r] == KF_NONE || last[r] < i)
				last[r] = i;
		}
	}
	kf_nid ret = kf_block_terminator(g, 0);
	for (uint32_t j = 0; ret != KF_NONE && j < kf_N(g, ret)->nin; j++)
		last[root(s, kf_in(g, ret, j))] = s->nst; /* graph outputs live to the end */
	iv *a = malloc((nv + 1) * sizeof *a);
	iv **act = malloc((nv + 1) * sizeof *act);
	uint32_t na = 0;
	size_t top = 0, naive = 0;
	for (uint32_t i = 0; i < s->nst; i++) /* in def order */
		for (uint32_t j = 0; j < s->st[i].k.nout; j++) {
			kf_vid r = root(s, s->st[i].k.out[j]);
			if (def[r] != i || s->vptr[r])
				continue;
			bool seen = false;
			for (uint32_t q = 0; q < na && !seen; q++)
				seen = a[q].v == r;
			if (seen)
				continue;
			size_t size = vbytes(g, r);
			naive += size;
			uint32_t nact = 0;
			for (uint32_t q = 0; q < na; q++)
				if (a[q].last >= i)
					act[nact++] = &a[q];
			qsort(act, nact, sizeof *act, cmp_off);
			size_t off = 0;
			for (uint32_t q = 0; q < nact; q++) {
				if (act[q]->off >= off + size)
					break;
				if (act[q]->off + act[q]->size > off)
					off = act[q]->off + act[q]->size;
			}
			a[na++] = (iv){r, i, last[r], size, off};
			if (off + size > top)
				top = off + size;
		}
	s->stats.arena_bytes = top;
	s->stats.naive_bytes = naive;
	int rc = 0;
	if (s->cu && top && kf_cuda_malloc(s->cu, top, &s->arena) != 0)
		rc = -1;
	for (uint32_t q = 0; q < na; q++)
		s->vptr[a[q].v] = s->arena + a[q].off;
	free(a);
	free(act);
	free(def);
	free(last);
	return rc;
}

/* The parameter values of every step: buffer addresses, then the tensor
 * maps encoded from them (once per plan: the buffers stay put, and a CUDA
 * graph captures the values). */
static int bind_args(kf_cuda_session *s)
{
	for (uint32_t i = 0; i < s->nst; i++) {
		step *t = &s->st[i];
		uint32_t n = t->k.nin + t->k.nout;
		free(t->ptr);
		free(t->args);
		free(t->tm);
		t->tm = NULL;
		t->ptr = malloc((n + 1) * sizeof *t->ptr);
		t->args = malloc((n + 3) * sizeof *t->args);
		for (uint32_t j = 0; j < n; j++) {
			kf_vid v = j < t->k.nin ? t->k.in[j] : t->k.out[j - t->k.nin];
			t->ptr[j] = s->vptr[root(s, v)];
			t->args[j] = &t->ptr[j];
		}
		if (!t->k.ntmap || !s->cu || t->blas || t->lt)
			continue;
		t->tm = aligned_alloc(64, (size_t)t->k.ntmap * sizeof *t->tm);
		if (kf_cuda_kernel_tmaps(s->cu, &t->k, t->ptr, t->tm) != 0) {
			kf_note(s->c, kf_N(s->g, t->k.node)->loc, "cuda: the tensor maps of %s", t->k.name);
			return -1;
		}
		for (int j = 0; j < t->k.ntmap; j++)
			t->args[n + (uint32_t)j] = &t->tm[j];
	}
	return 0;
}

int kf_cuda_kernel_tmaps(kf_cuda *cu, const kf_kernel *k, const kf_cuptr *ptr, kf_cuda_tmap *out)
{
	for (int j = 0; j < k->ntmap; j++) {
		const kf_tmap_spec *m = &k->tmap[j];
		if (kf_cuda_tmap_2d(cu, ptr[m->param], m->elem, (uint64_t)m->inner, (uint64_t)m->outer,
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
		kf_buf_free(&s->pr[i].image);
	}
	free(s->pr);
	s->pr = NULL;
	s->npr = 0;
	for (uint32_t i = 0; s->cu && i < s->nown; i++)
		kf_cuda_free(s->cu, s->own[i]);
	free(s->own);
	s->own = NULL;
	s->nown = 0;
	if (s->cu && s->arena)
		kf_cuda_free(s->cu, s->arena);
	s->arena = 0;
	if (s->cu && s->graph)
		kf_cuda_graph_free(s->cu, s->graph);
	s->graph = NULL;
	free(s->alias);
	free(s->vptr);
	s->alias = NULL;
	s->vptr = NULL;
	s->g = NULL;
	s->ran = false;
	memset(&s->stats, 0, sizeof s->stats);
}

static void plan_report(kf_cuda_session *s)
{
	kf_buf *r = s->o.report;
	if (!r)
		return;
	kf_cuda_stats *t = &s->stats;
	kf_buf_printf(r, "cuda: @%s for %s: %d kernels (%d distinct) in %d programs: %d compiled, %d from the cache;"
		      " emit %.1f ms, compile %.1f ms, load %.1f ms, plan %.1f ms total\n",
		      kf_str(s->c, s->g->name), s->arch, t->kernels, t->distinct, t->programs, t->compiled,
		      t->cached, t->emit_s * 1e3, t->compile_s * 1e3, t->load_s * 1e3, t->plan_s * 1e3);
	kf_buf_printf(r, "cuda: @%s: intermediates %.2f MiB in an arena of %.2f MiB (liveness reuse)\n",
		      kf_str(s->c, s->g->name), t->naive_bytes / 1048576.0, t->arena_bytes / 1048576.0);
}

/* A contraction fusion runs through cuBLASLt with its fused epilogue when
 * its tile says `cublaslt` (the tuner found it fastest), or when it has no
 * tile, $KFUSE_MATMUL_TILE is unset and kf_cublaslt_default holds.  Its
 * kernel is still emitted, compiled and kept as the fallback: used when the
 * library cannot be loaded or has no algorithm (a note in the report). */
static void plan_lt(kf_cuda_session *s, step *t)
{
	kf_graph *g = s->g;
	const char *tile = kf_attr_str(g, t->k.node, "tile", NULL), *env = getenv("KFUSE_MATMUL_TILE");
	if (t->k.kind != KF_KK_MATMUL || !kf_cublaslt_plan(g, t->k.node, &t->lp))
		return;
	/* by default the wgmma kernel, where the emitter chose it, runs */
	bool want = tile ? !strcmp(tile, "cublaslt")
			 : env && *env ? !strcmp(env, "cublaslt") : kf_cublaslt_default(&t->lp) && !t->k.sm90a;
	if (!want)
		return;
	char why[1024] = "";
	if (!s->lt_tried) {
		s->lt_tried = true;
		s->lt = kf_cublaslt_open(s->c, s->cu, why, sizeof why);
	}
	if (!s->lt && !why[0])
		snprintf(why, sizeof why, "the library did not load; see the first such note");
	if (s->lt && !(t->lt = kf_cublaslt_prepare(s->lt, &t->lp, why, sizeof why)) && !why[0])
		snprintf(why, sizeof why, "cublasLt failed");
	const char *sym = kf_str(s->c, kf_N(g, t->k.node)->sym);
	/* a failure is never fatal: the fusion's own kernel runs; one line says so */
	if (s->o.report && t->lt)
		kf_buf_printf(s->o.report, "cuda: fusion @%s: cuBLASLt with the fused epilogue (tile cublaslt)\n", sym);
	else if (s->o.report && why[0])
		kf_buf_printf(s->o.report, "cuda: fusion @%s: cuBLASLt not used (%s); its own kernel runs\n", sym, why);
	else if (why[0])
		kf_warning(s->c, kf_N(g, t->k.node)->loc, "cuBLASLt not used (%s); its own kernel runs", why);
}

int kf_cuda_session_plan(kf_cuda_session *s, kf_graph *g)
{
	if (s->g == g && s->gnodes == g->nnode)
		return 0;
	unplan(s);
	double t0 = now_s();
	s->g = g;
	s->gnodes = g->nnode;
	s->alias = malloc((g->nval + 1) * sizeof *s->alias);
	s->vptr = calloc(g->nval + 1, sizeof *s->vptr);
	for (uint32_t v = 0; v < g->nval; v++)
		s->alias[v] = KF_NONE;
	/* tuned tile configs of contraction kernels (runtime/tune.h) */
	kf_tune_apply(g, s->arch, s->o.cache_dir, s->o.report);
	int rc = emit_block(s, 0);
	/* KFUSE_CUBLAS=1: matmuls no contraction kernel fused run through cuBLAS */
	for (uint32_t i = 0; rc == 0 && s->blas && i < s->nst; i++)
		s->st[i].blas = kf_cublas_supports(g, s->st[i].k.node);
	for (uint32_t i = 0; rc == 0 && s->cu && i < s->nst; i++)
		plan_lt(s, &s->st[i]);
	for (uint32_t i = 0; rc == 0 && s->o.report && i < s->nst; i++)
		if (s->st[i].k.sm90a && !s->st[i].lt)
			kf_buf_printf(s->o.report, "cuda: fusion @%s: wgmma kernel (sm_90a, %d threads, %d bytes of shared memory)\n",
				      kf_str(s->c, kf_N(g, s->st[i].k.node)->sym), s->st[i].k.block, s->st[i].k.smem);
	s->stats.emit_s = now_s() - t0;
	for (int round = 0; rc == 0; round++) {
		rc = compile(s);
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
	/* inputs and constants own their buffers; kernels' outputs share the arena */
	for (uint32_t i = 0; rc == 0 && i < g->blk[0].narg; i++)
		rc = own_buffer(s, g->blk[0].arg[i], vbytes(g, g->blk[0].arg[i]));
	/* constants some step (or the graph's return) reads; body constants
	 * are embedded in their kernel unless the body was split */
	kf_nid ret = kf_block_terminator(g, 0);
	for (uint32_t b = 0; rc == 0 && b < g->nblk; b++)
		kf_foreach_node(g, b, n) {
			if (rc != 0 || kf_N(g, n)->op != KF_OP_CONST || (kf_N(g, n)->flags & KF_NODE_DEAD))
				continue;
			kf_vid v = kf_res(g, n, 0);
			bool read = false;
			for (uint32_t i = 0; i < s->nst && !read; i++)
				for (uint32_t j = 0; j < s->st[i].k.nin && !read; j++)
					read = root(s, s->st[i].k.in[j]) == v;
			for (uint32_t j = 0; ret != KF_NONE && j < kf_N(g, ret)->nin && !read; j++)
				read = root(s, kf_in(g, ret, j)) == v;
			if (read)
				rc = upload_const(s, n);
		}
	if (rc == 0)
		rc = plan_memory(s);
	if (rc == 0)
		rc = bind_args(s);
	s->stats.kernels = (int)s->nst;
	for (uint32_t i = 0; i < g->blk[0].narg; i++)
		s->stats.graph_bytes += kf_type_numel(kf_vtype(g, g->blk[0].arg[i])) *
					(int64_t)kf_dtype_size(kf_vtype(g, g->blk[0].arg[i])->dtype);
	for (uint32_t i = 0; i < g->nres; i++)
		s->stats.graph_bytes += (int64_t)kf_type_numel(kf_type_get(s->c, g->res[i])) *
					(int64_t)kf_dtype_size((kf_dtype)kf_type_get(s->c, g->res[i])->dtype);
	for (uint32_t i = 0; i < s->nst; i++)
		s->stats.kernel_bytes += s->st[i].k.bytes;
	s->stats.plan_s = now_s() - t0;
	if (rc != 0) {
		unplan(s);
		return -1;
	}
	plan_report(s);
	return 0;
}

/* ---- running ------------------------------------------------------------------------ */

static int launch_all(kf_cuda_session *s, bool timed)
{
	kf_cuevent e0 = NULL, e1 = NULL;
	if (timed && (kf_cuda_event_new(s->cu, &e0) != 0 || kf_cuda_event_new(s->cu, &e1) != 0))
		return -1;
	int rc = 0;
	for (uint32_t i = 0; i < s->nst && rc == 0; i++) {
		step *t = &s->st[i];
		unsigned grid[3] = {t->grid ? t->grid : 1, t->k.grid_y, t->k.grid_z};
		unsigned block[3] = {(unsigned)t->k.block, 1, 1};
		if (timed)
			rc = kf_cuda_event_record(s->cu, e0, s->stream);
		if (rc == 0 && t->blas)
			rc = kf_cublas_matmul(s->blas, s->g, t->k.node, t->ptr[0], t->ptr[1], t->ptr[t->k.nin], s->stream);
		else if (rc == 0 && t->lt)
			rc = kf_cublaslt_run(s->lt, t->lt, s->vptr[root(s, t->lp.a)], s->vptr[root(s, t->lp.b)],
					     s->vptr[root(s, t->lp.bias)], s->vptr[root(s, t->lp.out)], s->stream);
		else if (rc == 0)
			rc = (t->k.kind == KF_KK_PERSISTENT ? kf_cuda_launch_coop : kf_cuda_launch)(
				s->cu, t->f, grid, block, (unsigned)t->k.smem, s->stream, t->args);
		if (rc == 0 && timed && (rc = kf_cuda_event_record(s->cu, e1, s->stream)) == 0)
			rc = kf_cuda_event_elapsed(s->cu, e0, e1, &t->ms);
		if (rc != 0)
			kf_note(s->c, kf_N(s->g, t->k.node)->loc, "cuda: while launching %s", t->k.name);
	}
	if (e0)
		kf_cuda_event_free(s->cu, e0);
	if (e1)
		kf_cuda_event_free(s->cu, e1);
	return rc;
}

static void profile_report(kf_cuda_session *s)
{
	kf_buf *r = s->o.report;
	if (!r)
		return;
	kf_graph *g = s->g;
	kf_buf_printf(r, "profile @%s (%u kernels, eager launches):\n", kf_str(s->c, g->name), s->nst);
	kf_buf_printf(r, "  %-20s %-28s %-7s %10s %12s %9s\n", "kernel", "node", "kind", "time us", "bytes", "GB/s");
	double tot = 0;
	int64_t totb = 0;
	for (uint32_t i = 0; i < s->nst; i++) {
		const step *t = &s->st[i];
		const kf_node *x = kf_N(g, t->k.node);
		char node[64];
		snprintf(node, sizeof node, "%s%s%s (%d op%s)", kf_op(s->c, x->op)->name, x->sym ? " @" : "",
			 x->sym ? kf_str(s->c, x->sym) : "", t->k.nops, t->k.nops == 1 ? "" : "s");
		kf_buf_printf(r, "  %-20s %-28s %-7s %10.1f %12lld %9.1f\n", t->k.name, node,
			      kf_kernel_kind_name(t->k.kind), t->ms * 1e3, (long long)t->k.bytes,
			      t->ms > 0 ? t->k.bytes / (t->ms * 1e6) : 0.0);
		tot += t->ms;
		totb += t->k.bytes;
	}
	kf_buf_printf(r, "  %-20s %-28s %-7s %10.1f %12lld %9.1f\n", "total", "", "", tot * 1e3, (long long)totb,
		      tot > 0 ? totb / (tot * 1e6) : 0.0);
}

static int check_inputs(kf_cuda_session *s, const kf_tensor *in, int nin, int nout)
{
	kf_graph *g = s->g;
	if (nin != (int)g->blk[0].narg || nout != (int)g->nres) {
		kf_error(s->c, g->loc, "cuda: @%s takes %u inputs and %u results, not %d and %d",
			 kf_str(s->c, g->name), g->blk[0].narg, g->nres, nin, nout);
		return -1;
	}
	for (int i = 0; i < nin; i++) {
		kf_type want = *kf_vtype(g, g->blk[0].arg[i]), have = kf_tensor_type(&in[i]);
		if (memcmp(&want, &have, sizeof want) != 0) {
			kf_buf a = {0}, b = {0};
			kf_print_type(&a, s->c, g->blk[0].arg[i]);
			kf_error(s->c, g->loc, "cuda: input %d of @%s must be %.*s", i, kf_str(s->c, g->name),
				 (int)a.n, a.p);
			kf_buf_free(&a);
			kf_buf_free(&b);
			return -1;
		}
	}
	return 0;
}

int kf_cuda_session_run(kf_cuda_session *s, kf_graph *g, const kf_tensor *in, int nin,
			kf_tensor *out, int nout)
{
	if (!s->cu) {
		kf_error(s->c, g->loc, "cuda: a dry-run session cannot run graphs");
		return -1;
	}
	if (kf_cuda_session_plan(s, g) != 0 || check_inputs(s, in, nin, nout) != 0)
		return -1;
	for (int i = 0; i < nin; i++)
		if (in[i].nbytes && kf_cuda_h2d(s->cu, s->vptr[g->blk[0].arg[i]], in[i].data, in[i].nbytes) != 0)
			return -1;
	int rc;
	if (!s->ran || s->o.no_graph || s->o.profile) {
		rc = launch_all(s, s->o.profile);
		if (rc == 0)
			rc = kf_cuda_sync(s->cu, s->stream);
		if (rc == 0 && s->o.profile)
			profile_report(s);
		/* the launches worked: capture them once for replays */
		if (rc == 0 && !s->o.no_graph && !s->graph) {
			rc = kf_cuda_capture_begin(s->cu, s->stream);
			if (rc == 0) {
				int lrc = launch_all(s, false);
				rc = kf_cuda_capture_end(s->cu, s->stream, &s->graph);
				rc = lrc ? lrc : rc;
			}
		}
	} else {
		rc = kf_cuda_graph_launch(s->cu, s->graph, s->stream);
		if (rc == 0)
			rc = kf_cuda_sync(s->cu, s->stream);
	}
	if (rc != 0)
		return -1;
	s->ran = true;
	kf_nid ret = kf_block_terminator(g, 0);
	for (int i = 0; i < nout; i++) {
		kf_vid v = root(s, kf_in(g, ret, (uint32_t)i));
		if (kf_tensor_alloc_type(&out[i], kf_type_get(s->c, g->res[i])) != 0) {
			kf_error(s->c, g->loc, "cuda: out of host memory for result %d", i);
			rc = -1;
		} else if (out[i].nbytes && kf_cuda_d2h(s->cu, out[i].data, s->vptr[v], out[i].nbytes) != 0) {
			rc = -1;
		}
	}
	if (rc != 0)
		for (int i = 0; i < nout; i++)
			kf_tensor_free(&out[i]);
	return rc;
}

static int cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Bytes of the L2 flush before each timed replay ($KFUSE_BENCH_FLUSH: 1 for
 * 256 MiB, else MiB from 64); 0: none; -1: a bad value. */
static int64_t bench_flush_bytes(kf_ctx *c)
{
	const char *e = getenv("KFUSE_BENCH_FLUSH");
	if (!e || !*e || !strcmp(e, "0"))
		return 0;
	char *end;
	long long mib = strtoll(e, &end, 10);
	if (*end || (mib != 1 && (mib < 64 || mib > (1 << 20)))) {
		kf_error(c, KF_NOLOC, "cuda: KFUSE_BENCH_FLUSH wants 1 or a size in MiB from 64, not '%s'", e);
		return -1;
	}
	return (mib == 1 ? 256 : mib) << 20;
}

/* Replay k (1..n) into ms[k - 1]: back to back (ev[k] .. ev[k + 1]), or,
 * with a flush, each after its memset, events around the replay only. */
static int bench_replays(kf_cuda_session *s, int n, kf_cuevent *ev, kf_cuptr scratch, int64_t flush, double *ms)
{
	int rc = 0;
	for (int k = 0; k <= n && rc == 0; k++) {
		if (flush)
			rc = kf_cuda_memset_async(s->cu, scratch, (uint8_t)k, (size_t)flush, s->stream);
		if (rc == 0)
			rc = kf_cuda_event_record(s->cu, ev[flush ? 2 * k : k], s->stream);
		if (rc == 0)
			rc = s->graph ? kf_cuda_graph_launch(s->cu, s->graph, s->stream) : launch_all(s, false);
		if (rc == 0 && flush)
			rc = kf_cuda_event_record(s->cu, ev[2 * k + 1], s->stream);
	}
	if (rc == 0 && !flush)
		rc = kf_cuda_event_record(s->cu, ev[n + 1], s->stream);
	for (int k = 1; k <= n && rc == 0; k++) {
		float t = 0;
		rc = flush ? kf_cuda_event_elapsed(s->cu, ev[2 * k], ev[2 * k + 1], &t)
			   : kf_cuda_event_elapsed(s->cu, ev[k], ev[k + 1], &t);
		ms[k - 1] = t;
	}
	return rc;
}

int kf_cuda_session_bench(kf_cuda_session *s, int n, double *median_ms, double *min_ms)
{
	if (!s->ran || n < 1) {
		kf_error(s->c, KF_NOLOC, "cuda: bench needs a run first");
		return -1;
	}
	/* Replays are queued back to back, an event between each two, and
	 * read after one synchronisation: replay k is timed from the end of
	 * replay k-1 to its own end, device time only.  (A synchronisation
	 * after each replay would add the host's launch latency, a few us, to
	 * every time: the first event fires at once on an idle device.)  The
	 * first replay warms caches and clocks and is not counted. */
	int64_t flush = bench_flush_bytes(s->c);
	if (flush < 0)
		return -1;
	int ne = flush ? 2 * (n + 1) : n + 2, made = 0;
	kf_cuevent *ev = calloc((size_t)ne, sizeof *ev);
	double *ms = calloc((size_t)n, sizeof *ms);
	kf_cuptr scratch = 0;
	int rc = flush ? kf_cuda_malloc(s->cu, (size_t)flush, &scratch) : 0;
	for (; made < ne && rc == 0; made++)
		rc = kf_cuda_event_new(s->cu, &ev[made]);
	if (rc == 0)
		rc = bench_replays(s, n, ev, scratch, flush, ms);
	if (rc == 0) {
		qsort(ms, (size_t)n, sizeof *ms, cmp_dbl);
		*median_ms = ms[n / 2];
		*min_ms = ms[0];
		s->stats.flush_bytes = flush;
	}
	for (int i = 0; i < made; i++)
		if (ev[i])
			kf_cuda_event_free(s->cu, ev[i]);
	if (scratch)
		kf_cuda_free(s->cu, scratch);
	free(ev);
	free(ms);
	return rc;
}

void kf_cuda_session_stats(const kf_cuda_session *s, kf_cuda_stats *out) { *out = s->stats; }

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
		if (blas && !strcmp(blas, "1") && !(s->blas = kf_cublas_open(c, s->cu)))
			goto fail;
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
	kf_cublas_close(s->blas);
	kf_cublaslt_close(s->lt);
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

/* ---- the backend seam ------------------------------------------------------------------ */

typedef struct cbe {
	kf_backend be;
	kf_ctx *c;
	kf_cuda_opts o;
	kf_cuda_session *s;
} cbe;

static int be_run(const kf_backend *be, kf_graph *g, const kf_tensor *in, int nin, kf_tensor *out, int nout)
{
	cbe *b = be->state;
	if (!b->s && !(b->s = kf_cuda_session_new(b->c, &b->o)))
		return -1;
	return kf_cuda_session_run(b->s, g, in, nin, out, nout);
}

kf_backend *kf_backend_cuda_new(kf_ctx *c, const kf_cuda_opts *o)
{
	cbe *b = calloc(1, sizeof *b);
	b->c = c;
	b->o = *o;
	b->be.name = "cuda";
	b->be.run = be_run;
	b->be.state = b;
	return &b->be;
}

kf_cuda_session *kf_backend_cuda_session(const kf_backend *be)
{
	return be && be->state ? ((cbe *)be->state)->s : NULL;
}

void kf_backend_cuda_free(kf_backend *be)
{
	if (!be)
		return;
	cbe *b = be->state;
	kf_cuda_session_free(b->s);
	free(b);
}
