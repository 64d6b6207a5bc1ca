/* cuda_run.c: running a planned CUDA session: upload, launch step by
 * step (timed for --profile) or replay the captured CUDA graph, download;
 * the bench's timed replays; the plan's and the profile's reports. */
#include <stdlib.h>
#include <string.h>
#include "cuda_backend_int.h"
#include "tensor.h"

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
			rc = kf_cublas_run(s->blas, t->bop, s->stream);
		else if (rc == 0 && t->dnn)
			rc = kf_cudnn_run(s->dnn, t->dop, t->ptr[0], t->ptr[1], t->ptr[2], s->stream);
		else if (rc == 0 && t->lt)
			rc = kf_cublaslt_run(s->lt, t->lt, s->vptr[kf_cb_root(s, t->lp.a)], s->vptr[kf_cb_root(s, t->lp.b)],
					     s->vptr[kf_cb_root(s, t->lp.bias)],
					     t->lp.res != KF_NONE ? s->vptr[kf_cb_root(s, t->lp.res)] : 0,
					     s->vptr[kf_cb_root(s, t->lp.out)], s->stream);
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

void kf_cb_plan_report(kf_cuda_session *s)
{
	kf_buf *r = s->o.report;
	if (!r)
		return;
	kf_cuda_stats *t = &s->stats;
	kf_buf_printf(r, "cuda: @%s for %s: %d kernels (%d distinct) in %d programs: %d compiled, %d from the cache;"
		      " emit %.1f ms, compile %.1f ms, load %.1f ms, plan %.1f ms total\n",
		      kf_str(s->c, s->g->name), s->arch, t->kernels, t->distinct, t->programs, t->compiled,
		      t->cached, t->emit_s * 1e3, t->compile_s * 1e3, t->load_s * 1e3, t->plan_s * 1e3);
	kf_buf_printf(r, "cuda: @%s: plan parts: hoist %.1f ms, libraries %.1f ms, constants %.1f ms, memory %.1f ms\n",
		      kf_str(s->c, s->g->name), t->hoist_s * 1e3, t->route_s * 1e3, t->upload_s * 1e3, t->memory_s * 1e3);
	kf_buf_printf(r, "cuda: @%s: intermediates %.2f MiB in an arena of %.2f MiB (liveness reuse)\n",
		      kf_str(s->c, s->g->name), t->naive_bytes / 1048576.0, t->arena_bytes / 1048576.0);
	if (t->file_bytes || t->shared_bytes) /* plans of other shapes share them (cuda_consts.c) */
		kf_buf_printf(r, "cuda: @%s: constants %.2f MiB read and uploaded, %.2f MiB shared with other plans\n",
			      kf_str(s->c, s->g->name), t->file_bytes / 1048576.0, t->shared_bytes / 1048576.0);
	if (!s->dyn.n)
		return;
	/* a sized plan: how many kernels read their sizes, and the buckets the
	 * size-dependent choices were made for (one line per distinct one) */
	int nkd = 0;
	for (uint32_t i = 0; i < s->nst; i++)
		nkd += s->st[i].k.kd != 0;
	kf_buf_printf(r, "cuda: @%s: sized plan: %d of %u kernels read their sizes as arguments\n", kf_str(s->c, s->g->name),
		      nkd, s->nst);
	for (uint32_t i = 0; i < s->nst; i++) {
		const kf_kernel *k = &s->st[i].k;
		bool seen = false;
		for (uint32_t j = 0; j < i && !seen; j++)
			seen = !strcmp(s->st[j].k.name, k->name);
		/* a kernel that writes its sizes as numbers compiles at each new shape */
		if (!seen && !k->kd && !kf_cb_lib(&s->st[i])) {
			const kf_node *x = kf_N(s->g, k->node);
			kf_buf_printf(r, "cuda: @%s: %s %s%s: sizes fixed (compiled per shape)\n", kf_str(s->c, s->g->name),
				      k->name, x->sym ? "@" : "", x->sym ? kf_str(s->c, x->sym) : kf_op(s->c, x->op)->name);
		}
		if (!k->bucket[0] || seen)
			continue;
		const kf_node *x = kf_N(s->g, k->node);
		kf_buf_printf(r, "cuda: @%s: %s %s%s: bucket %s\n", kf_str(s->c, s->g->name), k->name,
			      x->sym ? "@" : "", x->sym ? kf_str(s->c, x->sym) : kf_op(s->c, x->op)->name, k->bucket);
	}
}

static void profile_report(kf_cuda_session *s)
{
	kf_buf *r = s->o.report;
	if (!r)
		return;
	kf_graph *g = s->g;
	kf_buf_printf(r, "profile @%s (%u kernels, eager launches):\n", kf_str(s->c, g->name), s->nst);
	/* a sized plan's kernels: the bucket each was made for (emit_cuda.h) */
	bool buckets = false;
	for (uint32_t i = 0; i < s->nst; i++)
		buckets |= s->st[i].k.bucket[0] != 0;
	kf_buf_printf(r, "  %-20s %-28s %-7s %10s %12s %9s%s\n", "kernel", "node", "kind", "time us", "bytes", "GB/s",
		      buckets ? "  bucket" : "");
	double tot = 0;
	int64_t totb = 0;
	for (uint32_t i = 0; i < s->nst; i++) {
		const step *t = &s->st[i];
		const kf_node *x = kf_N(g, t->k.node);
		char node[64];
		snprintf(node, sizeof node, "%s%s%s (%d op%s)", kf_op(s->c, x->op)->name, x->sym ? " @" : "",
			 x->sym ? kf_str(s->c, x->sym) : "", t->k.nops, t->k.nops == 1 ? "" : "s");
		kf_buf_printf(r, "  %-20s %-28s %-7s %10.1f %12lld %9.1f%s%s\n", t->k.name, node,
			      kf_kernel_kind_name(t->k.kind), t->ms * 1e3, (long long)t->k.bytes,
			      t->ms > 0 ? t->k.bytes / (t->ms * 1e6) : 0.0, buckets ? "  " : "", t->k.bucket);
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

/* Launches the planned graph on s->stream: the first time launch by
 * launch, waited for (an error is then this run's) and captured into a
 * CUDA graph; later times a replay of it, not waited for. */
static int launch(kf_cuda_session *s)
{
	int rc;
	double t0 = kf_cb_now(), tc = t0;
	if (!s->ran || s->o.no_graph || s->o.profile) {
		/* a profile times a second run: the first pays for the modules'
		 * lazy loading and the libraries' first calls (GPT-2's matmuls
		 * summed to 4.6x its replay in it) */
		rc = s->o.profile && !s->ran ? launch_all(s, false) : 0;
		if (rc == 0 && s->o.profile)
			rc = kf_cuda_sync(s->cu, s->stream);
		if (rc == 0)
			rc = launch_all(s, s->o.profile);
		if (rc == 0)
			rc = kf_cuda_sync(s->cu, s->stream);
		if (rc == 0 && s->o.profile)
			profile_report(s);
		/* the launches worked: capture them once for replays */
		tc = kf_cb_now();
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
	}
	/* the first run's cost beside the plan's: lazy module loads, the
	 * libraries' first calls, the capture */
	if (rc == 0 && !s->ran && s->o.report)
		kf_buf_printf(s->o.report, "cuda: @%s: first run %.1f ms (launches %.1f ms, capture %.1f ms)\n",
			      kf_str(s->c, s->g->name), (kf_cb_now() - t0) * 1e3, (tc - t0) * 1e3, (kf_cb_now() - tc) * 1e3);
	if (rc == 0)
		s->ran = true;
	return rc;
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
	if (launch(s) != 0 || kf_cuda_sync(s->cu, s->stream) != 0)
		return -1;
	int rc = 0;
	kf_nid ret = kf_block_terminator(g, 0);
	for (int i = 0; i < nout; i++) {
		kf_vid v = kf_cb_root(s, kf_in(g, ret, (uint32_t)i));
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

static size_t type_bytes(const kf_type *t)
{
	return (size_t)kf_type_numel(t) * kf_dtype_size((kf_dtype)t->dtype);
}

/* The caller's device memory on the caller's stream: the session's own
 * stream waits for the caller's, copies the inputs in on the device, runs,
 * copies the results out, and the caller's stream waits for that.  The
 * kernels keep the buffers they were planned (and captured) with, so the
 * copies are what makes any caller memory work; they run at device
 * bandwidth and no host thread waits (but for the first run's check). */
int kf_cuda_session_run_device(kf_cuda_session *s, kf_graph *g, const kf_tensor *in, int nin,
			       const kf_tensor *out, int nout, kf_custream stream)
{
	if (!s->cu) {
		kf_error(s->c, g->loc, "cuda: a dry-run session cannot run graphs");
		return -1;
	}
	if (kf_cuda_session_plan(s, g) != 0 || check_inputs(s, in, nin, nout) != 0)
		return -1;
	for (int i = 0; i < nout; i++) {
		kf_type want = *kf_type_get(s->c, g->res[i]), have = kf_tensor_type(&out[i]);
		if (memcmp(&want, &have, sizeof want) != 0 || out[i].nbytes < type_bytes(&want)) {
			kf_buf a = {0};
			kf_print_type(&a, s->c, g->res[i]);
			kf_error(s->c, g->loc, "cuda: result %d of @%s is %.*s (%zu bytes)", i, kf_str(s->c, g->name),
				 (int)a.n, a.p, type_bytes(&want));
			kf_buf_free(&a);
			return -1;
		}
	}
	if ((!s->ev_in && (kf_cuda_event_new(s->cu, &s->ev_in) != 0 || kf_cuda_event_new(s->cu, &s->ev_out) != 0)) ||
	    kf_cuda_event_record(s->cu, s->ev_in, stream) != 0 || kf_cuda_stream_wait(s->cu, s->stream, s->ev_in) != 0)
		return -1;
	for (int i = 0; i < nin; i++)
		if (kf_cuda_d2d_async(s->cu, s->vptr[g->blk[0].arg[i]], (kf_cuptr)(uintptr_t)in[i].data, in[i].nbytes,
				      s->stream) != 0)
			return -1;
	if (launch(s) != 0)
		return -1;
	kf_nid ret = kf_block_terminator(g, 0);
	for (int i = 0; i < nout; i++) {
		kf_vid v = kf_cb_root(s, kf_in(g, ret, (uint32_t)i));
		if (kf_cuda_d2d_async(s->cu, (kf_cuptr)(uintptr_t)out[i].data, s->vptr[v],
				      type_bytes(kf_type_get(s->c, g->res[i])), s->stream) != 0)
			return -1;
	}
	if (kf_cuda_event_record(s->cu, s->ev_out, s->stream) != 0 || kf_cuda_stream_wait(s->cu, stream, s->ev_out) != 0)
		return -1;
	return 0;
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
