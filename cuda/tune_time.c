/* tune_time.c: the autotuner's device half (see tune.h): each candidate
 * config of a contraction compiled, timed on the device, the fastest kept
 * in the node's `tile` and the cache file (tune.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tune.h"
#include "tune_int.h"
#include "cuda.h"
#include "cublas.h"
#include "cudnn.h"
#include "cuda_backend.h"
#include "tensor.h"
#include "emit_cuda.h"
#include "emit_matmul.h"

/* ---- timing ------------------------------------------------------------------------------ */

typedef struct bench {
	kf_ctx *c;      /* errors of the device and NVRTC: a failing candidate is skipped */
	kf_cuda *cu;
	kf_nvrtc *nv;
	const char *arch;
	kf_emit_target tgt;
	int reps;
	kf_cublaslt *lt; /* opened at the first contraction cuBLASLt can run */
	bool lt_tried;
	kf_cublas *blas; /* opened at the first cublas candidate */
	bool blas_tried;
	kf_cudnn *dnn;   /* opened at the first cudnn candidate */
	bool dnn_tried;
	kf_cuptr flush;  /* TUNE_FLUSH bytes overwritten before each sample (0: not made yet) */
	kf_custream s;   /* the candidates' stream, captured into a graph per candidate */
	bool warm;       /* no flush: warm replays, back to back ($KFUSE_TUNE_FLUSH=0) */
} bench;

/* Bytes written over the L2 before each timed sample: 256 MiB, five
 * times an H200's 50 MiB L2.  A model reads each weight once a forward
 * pass, from memory; a candidate timed back to back with its operands
 * in L2 is timed at L2 speed instead.  Without the flush the tuner chose
 * wgmma tiles over cuBLAS for Llama's M=128 contractions that were
 * 1.1-1.4x slower than cuBLAS when timed as kfuse-run --bench times
 * them (bench/results/2026-12-02-gpu-s6a-shapes.txt). */
#define TUNE_FLUSH ((size_t)256 << 20)

/* How much faster than the library routes an own kernel must time to be
 * picked (tune_node). */
#define TUNE_MARGIN 0.05

static int cmp_f(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return (x > y) - (x < y);
}

/* A device buffer of value v's type holding uniform random values in
 * [-1, 1) (a fixed seed): tensor cores draw less power, and may clock
 * higher, on constant data, so timing on a byte pattern ranked cuBLASLt
 * below a wgmma tile that it beats on real data
 * (bench/results/2026-11-29-s2-gpu-matmul-final.txt). */
static int random_buffer(bench *b, kf_graph *g, kf_vid v, uint64_t seed, kf_cuptr *out)
{
	const kf_type *t = kf_vtype(g, v);
	kf_tensor h = {0};
	if (kf_tensor_alloc_type(&h, t) != 0)
		return -1;
	int64_t n = kf_tensor_numel(&h);
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
	for (int64_t i = 0; i < n; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift64 */
		kf_tensor_set(&h, i, (double)(x >> 11) / 4503599627370496.0 - 1.0);
	}
	int rc = kf_cuda_malloc(b->cu, h.nbytes ? h.nbytes : 16, out);
	if (rc == 0 && h.nbytes)
		rc = kf_cuda_h2d(b->cu, *out, h.data, h.nbytes);
	kf_tensor_free(&h);
	return rc;
}

/* The device buffers of one node's tuning, made at the first candidate
 * that reads or writes a value and shared by the rest: every candidate
 * runs on the same data, and the random fill is done once. */
typedef struct bufset {
	kf_vid *v;
	kf_cuptr *p;
	int n;
} bufset;

static int bufset_get(bench *b, kf_graph *g, bufset *s, kf_vid v, kf_cuptr *out)
{
	for (int i = 0; i < s->n; i++)
		if (s->v[i] == v) {
			*out = s->p[i];
			return 0;
		}
	if (random_buffer(b, g, v, (uint64_t)s->n + 1, out) != 0)
		return -1;
	s->v = realloc(s->v, (size_t)(s->n + 1) * sizeof *s->v);
	s->p = realloc(s->p, (size_t)(s->n + 1) * sizeof *s->p);
	s->v[s->n] = v;
	s->p[s->n++] = *out;
	return 0;
}

static void bufset_free(bench *b, bufset *s)
{
	for (int i = 0; i < s->n; i++)
		kf_cuda_free(b->cu, s->p[i]);
	free(s->v);
	free(s->p);
}

/* fn(arg)'s launches on b->s captured into a CUDA graph after one run
 * that is waited for (a launch error is then the candidate's, not the
 * capture's); NULL, with the error in b->c, when either fails. */
static kf_cugraph capture(bench *b, int (*fn)(void *), void *arg)
{
	kf_cugraph gr = NULL;
	if (fn(arg) != 0 || kf_cuda_sync(b->cu, b->s) != 0 || kf_cuda_capture_begin(b->cu, b->s) != 0)
		return NULL;
	int lrc = fn(arg), rc = kf_cuda_capture_end(b->cu, b->s, &gr);
	if ((lrc || rc) && gr) {
		kf_cuda_graph_free(b->cu, gr);
		gr = NULL;
	}
	return gr;
}

/* Median ms of one replay of fn(arg)'s launches over b->reps samples;
 * negative when one fails.  The launches are timed as the plan runs them:
 * captured into a CUDA graph and replayed.  Launched one by one instead,
 * each kernel of a library route (the GEMM, then the epilogue kernel) paid
 * a launch gap that a replay does not have, and own single-kernel tiles
 * that timed ahead here replayed up to 10% behind cuBLAS + epilogue
 * (Llama's scores, bench/results/2026-12-03-gpu-s16d-shapes-f16-transformers.txt).
 * A sample is one replay between two events, after an untimed memset of
 * TUNE_FLUSH bytes: the operands come from memory, as in a model's
 * forward pass and in kfuse-run --bench with KFUSE_BENCH_FLUSH (triton's
 * do_bench does the same). */
static double time_launches(bench *b, int (*fn)(void *), void *arg)
{
	int n = b->reps + 2;                /* two warm-up samples */
	int ne = b->warm ? n + 1 : 2 * n;  /* events: between replays, or around each */
	kf_cuevent *ev = calloc((size_t)ne, sizeof *ev);
	float *t = calloc((size_t)n, sizeof *t);
	double ms = -1;
	kf_cugraph gr = NULL;
	int made = 0, rc = 0;
	if (!b->warm && !b->flush && kf_cuda_malloc(b->cu, TUNE_FLUSH, &b->flush) != 0)
		goto out;
	for (; made < ne; made++)
		if (kf_cuda_event_new(b->cu, &ev[made]) != 0)
			goto out;
	if (!(gr = capture(b, fn, arg)))
		goto out;
	/* flushed: replay r between ev[2r] and ev[2r + 1], its memset before
	 * them; warm: all queued back to back, replay r timed from the end of
	 * replay r - 1 (ev[r]) to its own (ev[r + 1]) so the host's time to
	 * submit is not counted */
	for (int r = 0; r < n && rc == 0; r++) {
		if (!b->warm)
			rc = kf_cuda_memset_async(b->cu, b->flush, (uint8_t)r, TUNE_FLUSH, b->s);
		if (rc == 0 && (!b->warm || r == 0))
			rc = kf_cuda_event_record(b->cu, ev[b->warm ? 0 : 2 * r], b->s);
		if (rc == 0)
			rc = kf_cuda_graph_launch(b->cu, gr, b->s);
		if (rc == 0)
			rc = kf_cuda_event_record(b->cu, ev[b->warm ? r + 1 : 2 * r + 1], b->s);
	}
	for (int r = 2; r < n && rc == 0; r++)
		rc = b->warm ? kf_cuda_event_elapsed(b->cu, ev[r], ev[r + 1], &t[r - 2])
			     : kf_cuda_event_elapsed(b->cu, ev[2 * r], ev[2 * r + 1], &t[r - 2]);
	if (rc == 0) {
		qsort(t, (size_t)b->reps, sizeof *t, cmp_f);
		ms = t[b->reps / 2];
	}
out:
	if (gr)
		kf_cuda_graph_free(b->cu, gr);
	for (int i = 0; i < made; i++)
		kf_cuda_event_free(b->cu, ev[i]);
	free(ev);
	free(t);
	return ms;
}

/* A kernel ready to launch on the node's buffers: its module loaded from
 * the compiled image, its arguments bound (tensor maps encoded). */
typedef struct kernel_call {
	bench *b;
	kf_cumodule mod;
	kf_cufunc f;
	unsigned grid[3], block[3], smem;
	kf_cuptr *ptr;
	void **args;
	kf_cuda_tmap *tm;
} kernel_call;

static int kernel_launch(void *arg)
{
	kernel_call *l = arg;
	return kf_cuda_launch(l->b->cu, l->f, l->grid, l->block, l->smem, l->b->s, l->args);
}

static void kernel_unbind(kernel_call *l)
{
	if (l->mod)
		kf_cuda_module_unload(l->b->cu, l->mod);
	free(l->ptr);
	free(l->args);
	free(l->tm);
	memset(l, 0, sizeof *l);
}

/* Loads kernel k from its image and binds it to the node's buffers as the
 * plan would (grid fitted by kf_cuda_fit_walk); 0, or -1 (unbound). */
static int kernel_bind(bench *b, kf_graph *g, bufset *bs, const kf_kernel *k, const kf_buf *img, kernel_call *l)
{
	uint32_t np = k->nin + k->nout;
	*l = (kernel_call){.b = b, .grid = {(unsigned)k->units, k->grid_y, k->grid_z}, .block = {(unsigned)k->block, 1, 1},
			   .smem = (unsigned)k->smem, .ptr = calloc(np + 1, sizeof *l->ptr),
			   .args = calloc(np + 3, sizeof *l->args), .tm = aligned_alloc(64, 2 * sizeof *l->tm)};
	if (kf_cuda_module_load(b->cu, img->p, &l->mod) != 0 || kf_cuda_function(b->cu, l->mod, k->name, &l->f) != 0 ||
	    (k->smem > 0 && kf_cuda_func_set_max_dyn_smem(b->cu, l->f, k->smem) != 0))
		goto fail;
	int bps = 0; /* the grid the plan will launch (kf_cuda_fit_walk) */
	if (kf_cuda_occupancy(b->cu, l->f, k->block, (size_t)k->smem, &bps) != 0 || bps < 1)
		bps = 1;
	kf_cuda_fit_walk(k, kf_cuda_get_info(b->cu)->sm_count, bps, l->grid);
	for (uint32_t i = 0; i < np; i++)
		if (bufset_get(b, g, bs, i < k->nin ? k->in[i] : k->out[i - k->nin], &l->ptr[i]) != 0)
			goto fail;
	if (kf_cuda_kernel_tmaps(b->cu, k, l->ptr, l->tm) != 0)
		goto fail;
	for (uint32_t i = 0; i < np; i++)
		l->args[i] = &l->ptr[i];
	for (int i = 0; i < k->ntmap; i++) /* tensor maps by value after the pointers */
		l->args[np + (uint32_t)i] = &l->tm[i];
	return 0;
fail:
	kernel_unbind(l);
	return -1;
}

typedef struct lt_call {
	bench *b;
	kf_lt_op *op;
	kf_cuptr p[5]; /* a, b, bias, out, the residual (0: none) */
} lt_call;

static int lt_launch(void *arg)
{
	lt_call *l = arg;
	return kf_cublaslt_run(l->b->lt, l->op, l->p[0], l->p[1], l->p[2], l->p[4], l->p[3], l->b->s);
}

/* Median ms of cuBLASLt with the epilogue for fusion n; negative when it
 * cannot run (no library: said once in the report). */
static double time_lt(bench *b, kf_graph *g, bufset *bs, kf_nid n, const kf_lt_plan *p, kf_buf *report)
{
	if (!b->lt_tried) {
		char why[1024] = "";
		b->lt_tried = true;
		b->lt = kf_cublaslt_open(b->c, b->cu, why, sizeof why);
		if (!b->lt && report)
			kf_buf_printf(report, "tune: cublaslt is no candidate: %s\n", why);
	}
	if (!b->lt)
		return -1;
	char why[256] = "";
	lt_call l = {.b = b, .op = kf_cublaslt_prepare(b->lt, p, why, sizeof why)};
	if (!l.op && report)
		kf_buf_printf(report, "tune: @%s: %s\n", kf_str(g->ctx, kf_N(g, n)->sym), why);
	kf_vid v[5] = {p->a, p->b, p->bias, p->out, p->res};
	double ms = -1;
	bool ok = l.op != NULL;
	for (int i = 0; i < 5 && ok; i++)
		ok = v[i] == KF_NONE || bufset_get(b, g, bs, v[i], &l.p[i]) == 0;
	if (ok)
		ms = time_launches(b, lt_launch, &l);
	kf_cublaslt_op_free(b->lt, l.op);
	return ms;
}

/* One candidate config of a node: an own kernel, or a library route
 * (cublas: the kernels around the GEMM, cublaslt: none, cudnn: the
 * epilogue kernel after the conv), with its compiled programs. */
enum { C_OWN, C_BLAS, C_LT, C_DNN };
typedef struct cand {
	char cfg[32];
	int kind;
	kf_kernel k[3];      /* own: k[0]; cublas: the parts, the prologues first (npre) */
	int nk, npre;
	kf_cuda_unit u[3];
	kf_buf src[3];
} cand;

/* cublas: the parts, the GEMM between them; cudnn: the conv (dop, on
 * buffers x, w, y), then the epilogue part */
typedef struct blas_call {
	bench *b;
	kernel_call part[3];
	int nk, npre;
	kf_blas_op *op;
	kf_dnn_op *dop;
	kf_cuptr x, w, y;
} blas_call;

static int blas_launch(void *arg)
{
	blas_call *l = arg;
	int rc = 0;
	for (int i = 0; i < l->npre && rc == 0; i++)
		rc = kernel_launch(&l->part[i]);
	if (rc == 0)
		rc = l->dop ? kf_cudnn_run(l->b->dnn, l->dop, l->x, l->w, l->y, l->b->s)
			    : kf_cublas_run(l->b->blas, l->op, l->b->s);
	for (int i = l->npre; i < l->nk && rc == 0; i++)
		rc = kernel_launch(&l->part[i]);
	return rc;
}

/* Median ms of cudnn candidate c: the conv, then its epilogue kernel (if
 * any); negative when it cannot run. */
static double time_dnn(bench *b, kf_graph *g, bufset *bs, cand *c, const kf_mm_blas *bp, kf_buf *report)
{
	char why[1024] = "";
	if (!b->dnn_tried) {
		b->dnn_tried = true;
		if (!(b->dnn = kf_cudnn_open(b->c, b->cu, why, sizeof why)) && report)
			kf_buf_printf(report, "tune: cudnn is no candidate: %s\n", why);
	}
	if (!b->dnn)
		return -1;
	blas_call l = {.b = b, .nk = c->nk};
	double ms = -1;
	if (!(l.dop = kf_cudnn_prepare(b->dnn, &bp->conv, why, sizeof why))) {
		if (report)
			kf_buf_printf(report, "tune: cudnn: %s\n", why);
		return -1;
	}
	if ((c->nk == 0 || kernel_bind(b, g, bs, &c->k[0], &c->u[0].image, &l.part[0]) == 0)) {
		if (bufset_get(b, g, bs, bp->a, &l.x) == 0 && bufset_get(b, g, bs, bp->b, &l.w) == 0 &&
		    bufset_get(b, g, bs, bp->acc, &l.y) == 0)
			ms = time_launches(b, blas_launch, &l);
		if (c->nk)
			kernel_unbind(&l.part[0]);
	}
	kf_cudnn_op_free(l.dop);
	return ms;
}

/* Median ms of candidate c (its programs compiled); negative when it
 * cannot run. */
static double time_cand(bench *b, kf_graph *g, bufset *bs, kf_nid n, cand *c, const kf_mm_blas *bp,
			const kf_lt_plan *lp, kf_buf *report)
{
	for (int i = 0; i < c->nk; i++)
		if (c->u[i].err[0])
			return -1;
	if (c->kind == C_LT)
		return time_lt(b, g, bs, n, lp, report);
	if (c->kind == C_OWN) {
		kernel_call l;
		if (kernel_bind(b, g, bs, &c->k[0], &c->u[0].image, &l) != 0)
			return -1;
		double ms = time_launches(b, kernel_launch, &l);
		kernel_unbind(&l);
		return ms;
	}
	if (c->kind == C_DNN)
		return time_dnn(b, g, bs, c, bp, report);
	if (!b->blas_tried) {
		char why[1024] = "";
		b->blas_tried = true;
		if (!(b->blas = kf_cublas_open(b->c, b->cu, why, sizeof why)) && report)
			kf_buf_printf(report, "tune: cublas is no candidate: %s\n", why);
	}
	if (!b->blas)
		return -1;
	blas_call l = {.b = b, .nk = c->nk, .npre = c->npre};
	double ms = -1;
	kf_cuptr pa, pb, pc;
	int bound = 0;
	for (; bound < c->nk; bound++)
		if (kernel_bind(b, g, bs, &c->k[bound], &c->u[bound].image, &l.part[bound]) != 0)
			goto out;
	if (bufset_get(b, g, bs, bp->a, &pa) == 0 && bufset_get(b, g, bs, bp->b, &pb) == 0 &&
	    bufset_get(b, g, bs, bp->acc, &pc) == 0 && (l.op = kf_cublas_prepare(b->blas, &bp->gemm, pa, pb, pc)))
		ms = time_launches(b, blas_launch, &l);
out:
	for (int i = 0; i < bound; i++)
		kernel_unbind(&l.part[i]);
	kf_cublas_op_free(b->blas, l.op);
	return ms;
}

/* The candidates of node n into c (at most max): every own config that
 * emits as asked (a wg tile the node cannot take falls back to another
 * kernel, a candidate already), then cublas and cublaslt where the node
 * takes them. */
static int make_cands(bench *b, kf_graph *g, kf_nid n, const kf_mm_shape *sh, cand *c, int max, kf_mm_blas *bp,
		      kf_lt_plan *lp)
{
	char cfg[64][32];
	kf_mm_shape shw = *sh;
	shw.wgmma = b->tgt.wgmma;
	int ncfg = kf_mm_candidates(&shw, cfg, 62), nc = 0;
	/* $KFUSE_TUNE_CANDIDATES (a comma list of configs): only those of the
	 * node's candidates, for a sweep that must fit a time budget */
	const char *only = getenv("KFUSE_TUNE_CANDIDATES");
	if (only && *only) {
		int k = 0;
		for (int i = 0; i < ncfg; i++) {
			size_t l = strlen(cfg[i]);
			for (const char *p = only; (p = strstr(p, cfg[i])); p += l)
				if ((p == only || p[-1] == ',') && (p[l] == ',' || !p[l])) {
					memmove(cfg[k++], cfg[i], 32);
					break;
				}
		}
		ncfg = k;
	}
	if (sh->conv) { /* a conv: cuDNN is the library */
		if (kf_conv_dnn_plan(g, n, bp))
			snprintf(cfg[ncfg++], 32, "cudnn");
	} else {
		if (kf_mm_blas_plan(g, n, bp))
			snprintf(cfg[ncfg++], 32, "cublas");
		if (kf_cublaslt_plan(g, n, lp))
			snprintf(cfg[ncfg++], 32, "cublaslt");
	}
	for (int i = 0; i < ncfg && nc < max; i++) {
		cand *x = &c[nc];
		memset(x, 0, sizeof *x);
		snprintf(x->cfg, sizeof x->cfg, "%s", cfg[i]);
		x->kind = !strcmp(cfg[i], "cublas")     ? C_BLAS
			  : !strcmp(cfg[i], "cublaslt") ? C_LT
			  : !strcmp(cfg[i], "cudnn")    ? C_DNN
							: C_OWN;
		int nerr = kf_nerrors(g->ctx);
		if (x->kind == C_OWN) {
			kf_tune_set_tile(g, n, cfg[i]);
			if (kf_emit_node_for(g, n, &b->tgt, &x->k[0]) != 0 || kf_nerrors(g->ctx) != nerr)
				continue;
			if (x->k[0].sm90a != !strncmp(cfg[i], "wg", 2)) {
				kf_kernel_free(&x->k[0]);
				continue;
			}
			x->nk = 1;
		} else if (x->kind == C_BLAS || x->kind == C_DNN) {
			static const int parts[3] = {KF_MM_PART_A, KF_MM_PART_B, KF_MM_PART_EPI};
			bool ok = true;
			for (int p = 0; p < 3 && ok; p++) {
				int rc = kf_emit_node_part(g, n, &b->tgt, parts[p], &x->k[x->nk]);
				ok = rc >= 0;
				if (rc == 0) {
					x->npre += parts[p] != KF_MM_PART_EPI;
					x->nk++;
				}
			}
			if (!ok || kf_nerrors(g->ctx) != nerr) {
				for (int k = 0; k < x->nk; k++)
					kf_kernel_free(&x->k[k]);
				continue;
			}
		}
		for (int k = 0; k < x->nk; k++) {
			kf_buf_puts(&x->src[k], kf_emit_prelude());
			kf_buf_puts(&x->src[k], x->k[k].src);
			kf_buf_putc(&x->src[k], '\0');
			x->u[k] = (kf_cuda_unit){.src = x->src[k].p, .sm90a = x->k[k].sm90a};
		}
		nc++;
	}
	return nc;
}

static void cand_free(cand *c)
{
	for (int k = 0; k < c->nk; k++) {
		kf_kernel_free(&c->k[k]);
		kf_buf_free(&c->src[k]);
		kf_buf_free(&c->u[k].image);
	}
}

/* Times each candidate of node n; sets the winner; -1 when none ran.  The
 * candidates' programs compile first, all at once in threads (through the
 * kernel cache), then run one after the other. */
static int tune_node(bench *b, kf_graph *g, kf_nid n, const kf_mm_shape *sh, const char *key, kf_tune_table *t,
		     const kf_tune_opts *o)
{
	kf_buf *report = o->report;
	enum { MAXC = 64 };
	cand *c = calloc(MAXC, sizeof *c);
	char lbest[2][32] = {"", ""}; /* the fastest own config, library route */
	double lms[2] = {-1, -1};
	const kf_attrval *old = kf_attr_get(g, n, "tile");
	char keep[64] = "";
	if (old && old->kind == KF_ATTR_STR)
		snprintf(keep, sizeof keep, "%s", kf_str(g->ctx, old->s));
	kf_mm_blas bp;
	kf_lt_plan lp;
	int nc = make_cands(b, g, n, sh, c, MAXC, &bp, &lp);
	kf_cuda_unit *us[3 * MAXC];
	uint32_t nu = 0;
	for (int i = 0; i < nc; i++)
		for (int k = 0; k < c[i].nk; k++)
			us[nu++] = &c[i].u[k];
	kf_cuda_compile_units(us, nu, b->arch, o->cache_dir, false, 0);
	bufset bs = {0};
	for (int i = 0; i < nc; i++) {
		double ms = time_cand(b, g, &bs, n, &c[i], &bp, &lp, report);
		if (report) {
			kf_buf_printf(report, "tune: %s %-22s ", key, c[i].cfg);
			if (ms >= 0)
				kf_buf_printf(report, "%9.4f ms\n", ms);
			else
				kf_buf_puts(report, "failed\n");
		}
		kf_diag_clear(b->c); /* a candidate that fails to build or launch is skipped */
		bool lib = c[i].kind != C_OWN;
		if (ms >= 0 && (lms[lib] < 0 || ms < lms[lib])) {
			lms[lib] = ms;
			memcpy(lbest[lib], c[i].cfg, sizeof lbest[lib]);
		}
	}
	/* cuBLAS(Lt) is the floor: an own kernel wins only by more than
	 * TUNE_MARGIN, the spread of one route's replays between processes
	 * (up to 4% at 6-30 us: -s17a-shapes-f16-llama-block.txt); before
	 * candidates were timed as replays, an own tile 4% ahead here ran 11%
	 * behind cuBLAS in replays (-s6b-shapes.txt) */
	int w = lms[0] >= 0 && (lms[1] < 0 || lms[0] < lms[1] * (1.0 - TUNE_MARGIN)) ? 0 : 1;
	const char *best = lbest[w];
	double bms = lms[w];
	bufset_free(b, &bs);
	for (int i = 0; i < nc; i++)
		cand_free(&c[i]);
	free(c);
	if (bms < 0) {
		if (keep[0]) {
			kf_tune_set_tile(g, n, keep);
		} else { /* as it was: no tile (the candidates set one each) */
			const kf_node *x = kf_N(g, n);
			kf_attr a[KF_MAX_ATTRS];
			uint32_t na = 0;
			kf_sid tile = kf_intern_cstr(g->ctx, "tile");
			for (uint32_t i = 0; i < x->nattr; i++)
				if (x->attr[i].key != tile)
					a[na++] = x->attr[i];
			kf_node_set_attrs(g, n, a, na);
		}
		return -1;
	}
	kf_tune_set_tile(g, n, best);
	kf_tune_set(t, key, best, bms);
	if (report)
		kf_buf_printf(report, "tune: %s -> %s (%.4f ms)\n", key, best, bms);
	return 0;
}

int kf_tune_graph(kf_graph *g, const kf_tune_opts *o)
{
	kf_ctx *c = g->ctx;
	bench b = {.c = kf_ctx_new(), .reps = o->reps > 0 ? o->reps : 20};
	kf_buf path = {0};
	kf_tune_table t = {0};
	int rc = -1, tuned = 0;
	const char *fl = getenv("KFUSE_TUNE_FLUSH");
	if (fl && *fl && strcmp(fl, "0") && strcmp(fl, "1")) {
		kf_error(c, KF_NOLOC, "tune: KFUSE_TUNE_FLUSH wants 0 (warm replays) or 1 (the L2 flushed, the default), not '%s'",
			 fl);
		goto done;
	}
	b.warm = fl && !strcmp(fl, "0");
	b.cu = kf_cuda_open(b.c, o->device);
	b.nv = b.cu ? kf_nvrtc_open(b.c) : NULL;
	if (!b.cu || !b.nv) {
		kf_buf d = {0};
		kf_diag_render(b.c, &d);
		kf_error(c, KF_NOLOC, "tune: needs a GPU and NVRTC: %.*s", (int)(d.n && d.p[d.n - 1] == '\n' ? d.n - 1 : d.n),
			 d.p ? d.p : "");
		kf_buf_free(&d);
		goto done;
	}
	if (kf_cuda_stream_new(b.cu, &b.s) != 0) {
		kf_error(c, KF_NOLOC, "tune: cannot make a CUDA stream");
		goto done;
	}
	b.arch = o->arch ? o->arch : kf_cuda_get_info(b.cu)->arch;
	kf_cuda_emit_target(b.cu, b.arch, &b.tgt);
	if (kf_tune_path(o->cache_dir, &path) != 0) {
		kf_error(c, KF_NOLOC, "tune: no cache directory (set KFUSE_CACHE_DIR or KFUSE_TUNE_FILE)");
		goto done_libs;
	}
	if (kf_tune_load(c, path.p, &t) != 0)
		goto done_libs;
	kf_foreach_node(g, 0, n) {
		kf_mm_shape sh;
		char key[128];
		if (!kf_tune_is_contraction(g, n, &sh))
			continue;
		kf_mm_shape_key(&sh, b.arch, key, sizeof key);
		const kf_tune_entry *e = kf_tune_find(&t, key);
		if (e && !o->force) {
			kf_tune_set_tile(g, n, e->cfg);
			if (o->report)
				kf_buf_printf(o->report, "tune: %s -> %s (cached)\n", key, e->cfg);
			continue;
		}
		if (tune_node(&b, g, n, &sh, key, &t, o) == 0)
			tuned++;
		else
			kf_warning(c, kf_N(g, n)->loc, "tune: no candidate of %s ran; the default config stays", key);
	}
	if (tuned)
		kf_tune_save(c, path.p, &t);
	if (o->report)
		kf_buf_printf(o->report, "tune: @%s: %d contraction%s tuned, cache %s\n", kf_str(c, g->name), tuned,
			      tuned == 1 ? "" : "s", path.p);
	rc = 0;
done_libs:
	if (b.flush)
		kf_cuda_free(b.cu, b.flush);
	kf_cublaslt_close(b.lt);
	kf_cublas_close(b.blas);
	kf_cudnn_close(b.dnn);
	kf_cuda_stream_free(b.cu, b.s);
done:
	if (b.nv)
		kf_nvrtc_close(b.nv);
	if (b.cu)
		kf_cuda_close(b.cu);
	kf_ctx_free(b.c);
	kf_buf_free(&path);
	kf_tune_table_free(&t);
	return rc;
}
