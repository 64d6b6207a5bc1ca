/* tune.c: the contraction autotuner and its cache file (see tune.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "tune.h"
#include "cuda.h"
#include "kcache.h"
#include "cublas.h"
#include "cuda_backend.h"
#include "tensor.h"
#include "emit_cuda.h"
#include "emit_matmul.h"

/* ---- the table and the file ---------------------------------------------------------- */

int kf_tune_path(const char *cache_dir, kf_buf *out)
{
	const char *f = getenv("KFUSE_TUNE_FILE");
	if (f && *f) {
		kf_buf_puts(out, f);
	} else if (cache_dir && *cache_dir) {
		kf_buf_printf(out, "%s/tune.txt", cache_dir);
	} else {
		if (kf_kcache_default_dir(out) != 0)
			return -1;
		kf_buf_puts(out, "/tune.txt");
	}
	kf_buf_putc(out, '\0');
	out->n--;
	return 0;
}

const kf_tune_entry *kf_tune_find(const kf_tune_table *t, const char *key)
{
	for (uint32_t i = t->n; i-- > 0;)
		if (!strcmp(t->e[i].key, key))
			return &t->e[i];
	return NULL;
}

void kf_tune_set(kf_tune_table *t, const char *key, const char *cfg, double ms)
{
	kf_tune_entry *e = (kf_tune_entry *)kf_tune_find(t, key);
	if (!e) {
		if (t->n == t->cap) {
			t->cap = t->cap ? 2 * t->cap : 16;
			t->e = realloc(t->e, t->cap * sizeof *t->e);
		}
		e = &t->e[t->n++];
		snprintf(e->key, sizeof e->key, "%s", key);
	}
	snprintf(e->cfg, sizeof e->cfg, "%s", cfg);
	e->ms = ms;
}

void kf_tune_table_free(kf_tune_table *t)
{
	free(t->e);
	memset(t, 0, sizeof *t);
}

int kf_tune_load(kf_ctx *c, const char *path, kf_tune_table *t)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		if (errno == ENOENT)
			return 0;
		kf_error(c, KF_NOLOC, "tune: cannot read %s: %s", path, strerror(errno));
		return -1;
	}
	char line[512];
	int ln = 0;
	while (fgets(line, sizeof line, f)) {
		ln++;
		char key[160], cfg[64], rest[8];
		double ms = 0;
		if (line[0] == '#' || strspn(line, " \t\r\n") == strlen(line))
			continue;
		int n = sscanf(line, "%159s %63s %lf %7s", key, cfg, &ms, rest);
		kf_mm_config mc;
		if (n < 2 || n > 3 || strlen(key) >= sizeof t->e->key || kf_mm_config_parse(cfg, &mc) != 0) {
			kf_warning(c, KF_NOLOC, "tune: %s:%d: not 'KEY CONFIG [MS]'; line skipped", path, ln);
			continue;
		}
		kf_tune_set(t, key, cfg, ms);
	}
	fclose(f);
	return 0;
}

/* mkdir -p of path's directory */
static void make_parent(const char *path)
{
	char d[1024];
	snprintf(d, sizeof d, "%s", path);
	for (char *p = d + 1; *p; p++)
		if (*p == '/') {
			*p = 0;
			mkdir(d, 0777);
			*p = '/';
		}
}

int kf_tune_save(kf_ctx *c, const char *path, const kf_tune_table *t)
{
	make_parent(path);
	char tmp[1100];
	snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
	FILE *f = fopen(tmp, "w");
	if (!f) {
		kf_warning(c, KF_NOLOC, "tune: cannot write %s: %s", tmp, strerror(errno));
		return -1;
	}
	fprintf(f, "# kfuse tune cache v1: KEY CONFIG MS (kfuse-run --tune writes it)\n");
	for (uint32_t i = 0; i < t->n; i++)
		fprintf(f, "%s %s %.4f\n", t->e[i].key, t->e[i].cfg, t->e[i].ms);
	if (fclose(f) != 0 || rename(tmp, path) != 0) {
		kf_warning(c, KF_NOLOC, "tune: cannot write %s: %s", path, strerror(errno));
		remove(tmp);
		return -1;
	}
	return 0;
}

static bool is_contraction(kf_graph *g, kf_nid n, kf_mm_shape *sh)
{
	return kf_N(g, n)->op == KF_OP_FUSION && kf_mm_node_shape(g, n, sh);
}

static void set_tile(kf_graph *g, kf_nid n, const char *cfg)
{
	kf_ctx *c = g->ctx;
	kf_node_set_attr(g, n, kf_intern_cstr(c, "tile"), (kf_attrval){.kind = KF_ATTR_STR, .s = kf_intern_cstr(c, cfg)});
}

int kf_tune_apply(kf_graph *g, const char *arch, const char *cache_dir, kf_buf *report)
{
	kf_mm_shape sh;
	bool any = false;
	kf_foreach_node(g, 0, n)
		any |= is_contraction(g, n, &sh) && !kf_attr_get(g, n, "tile");
	kf_buf path = {0};
	kf_tune_table t = {0};
	int set = 0;
	if (!any || kf_tune_path(cache_dir, &path) != 0 || kf_tune_load(g->ctx, path.p, &t) != 0 || !t.n)
		goto done;
	kf_foreach_node(g, 0, n) {
		char key[128];
		if (!is_contraction(g, n, &sh) || kf_attr_get(g, n, "tile"))
			continue;
		kf_mm_shape_key(&sh, arch, key, sizeof key);
		const kf_tune_entry *e = kf_tune_find(&t, key);
		if (!e)
			continue;
		set_tile(g, n, e->cfg);
		set++;
		if (report)
			kf_buf_printf(report, "tune: @%s: fusion @%s: %s from %s\n", kf_str(g->ctx, g->name),
				      kf_str(g->ctx, kf_N(g, n)->sym), e->cfg, path.p);
	}
done:
	kf_buf_free(&path);
	kf_tune_table_free(&t);
	return set;
}

/* ---- timing ------------------------------------------------------------------------------ */

typedef struct bench {
	kf_ctx *c;      /* errors of the device and NVRTC: a failing candidate is skipped */
	kf_cuda *cu;
	kf_nvrtc *nv;
	kf_kcache kc;
	const char *arch;
	kf_emit_target tgt;
	int reps;
	kf_cublaslt *lt; /* opened at the first contraction cuBLASLt can run */
	bool lt_tried;
} bench;

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

/* Median ms of one launch of fn(arg) over b->reps samples (default
 * stream); negative when one fails.  A sample is B launches back to back
 * between two events, divided by B: B = 1 for long kernels, 10 for ones
 * under 50 us, whose single-launch time is mostly launch overhead (a 4 us
 * GEMV read 9 us that way, every candidate alike).  Each sample follows
 * one untimed launch, still running when the first event is queued, so
 * the host's time to submit (cuBLASLt's ~10 us of it made cuBLASLt read
 * 0.197 ms at 4096^3 where its graph replays take 0.184) is not counted:
 * the device time, as the graph replays of kfuse-run see it. */
static double time_launches(bench *b, int (*fn)(void *), void *arg)
{
	kf_cuevent e0 = NULL, e1 = NULL;
	float *t = calloc((size_t)b->reps, sizeof *t);
	double ms = -1;
	int B = 1;
	if (kf_cuda_event_new(b->cu, &e0) != 0 || kf_cuda_event_new(b->cu, &e1) != 0)
		goto out;
	for (int r = -2; r < b->reps; r++) { /* two warm-up samples, the second sets B */
		float x = 0;
		int rc = fn(arg);
		if (rc == 0)
			rc = kf_cuda_event_record(b->cu, e0, NULL);
		for (int i = 0; i < B && rc == 0; i++)
			rc = fn(arg);
		if (rc != 0 || kf_cuda_event_record(b->cu, e1, NULL) != 0 || kf_cuda_event_elapsed(b->cu, e0, e1, &x) != 0)
			goto out;
		if (r == -1 && x < 0.05f)
			B = 10;
		if (r >= 0)
			t[r] = x / (float)B;
	}
	qsort(t, (size_t)b->reps, sizeof *t, cmp_f);
	ms = t[b->reps / 2];
out:
	if (e0)
		kf_cuda_event_free(b->cu, e0);
	if (e1)
		kf_cuda_event_free(b->cu, e1);
	free(t);
	return ms;
}

typedef struct kernel_call {
	bench *b;
	kf_cufunc f;
	unsigned grid[3], block[3], smem;
	void **args;
} kernel_call;

static int kernel_launch(void *arg)
{
	kernel_call *l = arg;
	return kf_cuda_launch(l->b->cu, l->f, l->grid, l->block, l->smem, NULL, l->args);
}

/* Median ms of one kernel (time_launches); a negative value when it
 * cannot run. */
static double time_kernel(bench *b, kf_graph *g, bufset *bs, const kf_kernel *k)
{
	kf_buf src = {0}, img = {0};
	kf_buf_puts(&src, kf_emit_prelude());
	kf_buf_puts(&src, k->src);
	kf_buf_putc(&src, '\0');
	const char *opts[] = {"-std=c++17"};
	double ms = -1;
	kf_cumodule mod = NULL;
	uint32_t np = k->nin + k->nout;
	kf_cuptr *ptr = calloc(np + 1, sizeof *ptr);
	void **args = calloc(np + 3, sizeof *args);
	kf_cuda_tmap *tm = aligned_alloc(64, 2 * sizeof *tm);
	kernel_call l = {.b = b, .grid = {(unsigned)k->units, k->grid_y, k->grid_z}, .block = {(unsigned)k->block, 1, 1},
			 .smem = (unsigned)k->smem, .args = args};
	char arch[24];
	kf_cuda_kernel_arch(b->arch, k->sm90a, arch, sizeof arch);
	if (kf_kcache_compile(&b->kc, b->nv, src.p, "tune.cu", arch, opts, 1, 1, &img, NULL) != 0 ||
	    kf_cuda_module_load(b->cu, img.p, &mod) != 0 || kf_cuda_function(b->cu, mod, k->name, &l.f) != 0 ||
	    (k->smem > 48 * 1024 && kf_cuda_func_set_max_dyn_smem(b->cu, l.f, k->smem) != 0))
		goto out;
	int bps = 0; /* the grid the plan will launch (kf_cuda_fit_walk) */
	if (kf_cuda_occupancy(b->cu, l.f, k->block, (size_t)k->smem, &bps) != 0 || bps < 1)
		bps = 1;
	kf_cuda_fit_walk(k, kf_cuda_get_info(b->cu)->sm_count, bps, l.grid);
	for (uint32_t i = 0; i < np; i++)
		if (bufset_get(b, g, bs, i < k->nin ? k->in[i] : k->out[i - k->nin], &ptr[i]) != 0)
			goto out;
	if (kf_cuda_kernel_tmaps(b->cu, k, ptr, tm) != 0)
		goto out;
	for (uint32_t i = 0; i < np; i++)
		args[i] = &ptr[i];
	for (int i = 0; i < k->ntmap; i++) /* tensor maps by value after the pointers */
		args[np + (uint32_t)i] = &tm[i];
	ms = time_launches(b, kernel_launch, &l);
out:
	if (mod)
		kf_cuda_module_unload(b->cu, mod);
	free(ptr);
	free(args);
	free(tm);
	kf_buf_free(&src);
	kf_buf_free(&img);
	return ms;
}

typedef struct lt_call {
	bench *b;
	kf_lt_op *op;
	kf_cuptr p[4]; /* a, b, bias, out */
} lt_call;

static int lt_launch(void *arg)
{
	lt_call *l = arg;
	return kf_cublaslt_run(l->b->lt, l->op, l->p[0], l->p[1], l->p[2], l->p[3], NULL);
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
	kf_vid v[4] = {p->a, p->b, p->bias, p->out};
	double ms = -1;
	bool ok = l.op != NULL;
	for (int i = 0; i < 4 && ok; i++)
		ok = bufset_get(b, g, bs, v[i], &l.p[i]) == 0;
	if (ok)
		ms = time_launches(b, lt_launch, &l);
	kf_cublaslt_op_free(b->lt, l.op);
	return ms;
}

/* Times each candidate of node n; sets the winner; -1 when none ran. */
static int tune_node(bench *b, kf_graph *g, kf_nid n, const kf_mm_shape *sh, const char *key, kf_tune_table *t,
		     kf_buf *report)
{
	char cand[33][32], best[32] = "";
	double bms = -1;
	kf_mm_shape shw = *sh;
	shw.wgmma = b->tgt.wgmma;
	int nc = kf_mm_candidates(&shw, cand, 32);
	kf_lt_plan lp;
	/* cuBLASLt with the fused epilogue, where the fusion maps to it */
	if (kf_cublaslt_plan(g, n, &lp))
		snprintf(cand[nc++], 32, "cublaslt");
	const kf_attrval *old = kf_attr_get(g, n, "tile");
	char keep[64] = "";
	if (old && old->kind == KF_ATTR_STR)
		snprintf(keep, sizeof keep, "%s", kf_str(g->ctx, old->s));
	bufset bs = {0};
	for (int i = 0; i < nc; i++) {
		set_tile(g, n, cand[i]);
		kf_kernel k;
		int nerr = kf_nerrors(g->ctx);
		double ms;
		if (!strcmp(cand[i], "cublaslt")) {
			ms = time_lt(b, g, &bs, n, &lp, report);
		} else {
			if (kf_emit_node_for(g, n, &b->tgt, &k) != 0 || kf_nerrors(g->ctx) != nerr)
				continue;
			/* a wg tile the node cannot take falls back to another
			 * kernel, timed under its own name already */
			if (k.sm90a != !strncmp(cand[i], "wg", 2)) {
				kf_kernel_free(&k);
				continue;
			}
			ms = time_kernel(b, g, &bs, &k);
			kf_kernel_free(&k);
		}
		if (report) {
			kf_buf_printf(report, "tune: %s %-22s ", key, cand[i]);
			if (ms >= 0)
				kf_buf_printf(report, "%9.4f ms\n", ms);
			else
				kf_buf_puts(report, "failed\n");
		}
		kf_diag_clear(b->c); /* a candidate that fails to build or launch is skipped */
		if (ms >= 0 && (bms < 0 || ms < bms)) {
			bms = ms;
			memcpy(best, cand[i], sizeof best);
		}
	}
	bufset_free(b, &bs);
	if (bms < 0) {
		if (keep[0])
			set_tile(g, n, keep);
		return -1;
	}
	set_tile(g, n, best);
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
	b.arch = o->arch ? o->arch : kf_cuda_get_info(b.cu)->arch;
	kf_cuda_emit_target(b.cu, b.arch, &b.tgt);
	kf_kcache_init(&b.kc, b.c, o->cache_dir);
	if (kf_tune_path(o->cache_dir, &path) != 0) {
		kf_error(c, KF_NOLOC, "tune: no cache directory (set KFUSE_CACHE_DIR or KFUSE_TUNE_FILE)");
		goto done_kc;
	}
	if (kf_tune_load(c, path.p, &t) != 0)
		goto done_kc;
	kf_foreach_node(g, 0, n) {
		kf_mm_shape sh;
		char key[128];
		if (!is_contraction(g, n, &sh))
			continue;
		kf_mm_shape_key(&sh, b.arch, key, sizeof key);
		const kf_tune_entry *e = kf_tune_find(&t, key);
		if (e && !o->force) {
			set_tile(g, n, e->cfg);
			if (o->report)
				kf_buf_printf(o->report, "tune: %s -> %s (cached)\n", key, e->cfg);
			continue;
		}
		if (tune_node(&b, g, n, &sh, key, &t, o->report) == 0)
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
done_kc:
	kf_kcache_fini(&b.kc);
	kf_cublaslt_close(b.lt);
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
