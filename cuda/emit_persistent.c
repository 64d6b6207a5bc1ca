/* emit_persistent.c: a `fusion {kind = "persistent"}` node (an unrolled
 * recurrence, passes/recurrence.c) as one persistent kernel.
 *
 * The kernel runs all steps.  The state width H (the recurrent matmul's
 * inner dim) is split into groups of UPB units; a block owns a group (more
 * than one when the grid is smaller than the number of groups).  Per step
 * each block:
 *   1. reads the whole previous state vector h (K floats) into shared
 *      memory, from the init argument at step 0 and from a tagged exchange
 *      buffer afterwards;
 *   2. computes the gate rows its units need (unit j reads matmul columns
 *      j + s for each gate offset s of the cell), one row per warp, as dot
 *      products with the weight kept in registers for the whole kernel
 *      (the block's first group; other groups read it from L2);
 *   3. runs the cell's element-wise ops for its units (generated from step
 *      0 of the body), keeps each state in a per-unit scratch, writes the
 *      outputs, and publishes its h values.
 * There is one grid-wide wait per step and no barrier: h is published as
 * (value, tag) pairs in one 64-bit store and readers spin until every pair
 * carries the tag of the step they need.  Two buffers alternate: a block
 * can overwrite buffer t&1 at step t+2 only after every block has published
 * step t+1, which each did after reading buffer t&1.  Tags carry a launch
 * epoch (bumped by the last block to finish) so that a stale tag of an
 * earlier launch never matches.  Every block must be resident at once: the
 * backend launches it with cuLaunchCooperativeKernel.
 *
 * Supported: batch 1 (states [1,H]), f32, f16 and bf16 (an amp graph's:
 * loaded widened to f32, computed in f32, the outputs stored rounded; h
 * handed over and the weights held in f32), one recurrent matmul per step
 * whose weight is a body argument [K,G] or its transpose, the cell's ops
 * element-wise with slices along the last axis, per-step inputs as row
 * slices of arguments.  kf_emit_persistent_check says why a node is not.
 */
#include <stdlib.h>
#include <string.h>
#include "emit_int.h"
#include "emit_persistent.h"

static uint64_t text_hash(const char *s, size_t n, uint64_t h)
{
	for (size_t i = 0; i < n; i++) {
		h ^= (unsigned char)s[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

/* Replaces every "KFP_" in b with "kfp_<hash>_": the globals of one
 * kernel text are its own. */
static void rename_globals(kf_buf *b, const char *tag)
{
	kf_buf o = {0};
	const char *s = b->p ? b->p : "", *e = s + b->n;
	while (s < e) {
		const char *q = strstr(s, "KFP_");
		if (!q || q >= e) {
			kf_buf_put(&o, s, (size_t)(e - s));
			break;
		}
		kf_buf_put(&o, s, (size_t)(q - s));
		kf_buf_puts(&o, tag);
		s = q + 4;
	}
	kf_buf_free(b);
	*b = o;
}

void kx_pm_name_globals(kx *k)
{
	uint64_t h = text_hash(k->b.p, k->b.n, text_hash(k->decl.p, k->decl.n, 0xcbf29ce484222325ULL));
	char tag[32];
	snprintf(tag, sizeof tag, "kfp_%016llx_", (unsigned long long)h);
	rename_globals(&k->decl, tag);
	rename_globals(&k->b, tag);
}

/* The kernel's globals and step hand-off helpers.  Tags: h travels as
 * (value, tag) in one 64-bit word, written with one st.global.u64 (single-
 * copy atomic: the array is 8-byte aligned) and read with volatile loads,
 * which go to L2, where the other SMs' stores land.  Since the tag and the
 * value are one word, a reader that sees the tag sees the value: no fence
 * is needed, and none is paid for on each step's critical path.  Grid:
 * plain floats and cooperative_groups' grid.sync() after every step.  The
 * non-CUDA branches are for the host emulation of tests/unit/
 * test_persistent.c, which compiles this text as C. */
static void emit_decl(pm *p, unsigned T)
{
	kf_buf *d = &p->k->decl;
	(void)T;
	if (p->gsync) {
		kf_buf_puts(d, "#ifdef __CUDA_ARCH__\n#include <cooperative_groups.h>\n"
			    "#define KFP_GSYNC() cooperative_groups::this_grid().sync()\n"
			    "#else\n#define KFP_GSYNC() kf_host_grid_sync()\n#endif\n");
		kf_buf_printf(d, "__device__ float KFP_hf[2][%lld];\n", (long long)(p->B * p->K));
	} else {
		char hb[128];
		snprintf(hb, sizeof hb, "__device__ __align__(16) unsigned long long KFP_hb[2][%lld];\n",
			 (long long)(p->B * p->K));
		kx_pm_handoff_decl(p, d, hb);
	}
	kf_buf_printf(d, "__device__ float KFP_st[%u][%lld];\n", p->r.nslot, (long long)(p->B * p->H));
	kf_buf_printf(d, "__device__ const int KFP_S[%d] = {", p->ns);
	for (int s = 0; s < p->ns; s++)
		kf_buf_printf(d, "%s%lld", s ? ", " : "", (long long)p->S[s]);
	kf_buf_puts(d, "};\n");
}

void kx_pm_handoff_decl(pm *p, kf_buf *d, const char *hb)
{
	{
		kf_buf_puts(d, "#ifdef __CUDA_ARCH__\n#define KFP_SPIN() ((void)0)\n"
			    "#else\n#define KFP_SPIN() kf_host_spin()\n#endif\n");
		kf_buf_puts(d, hb);
		kf_buf_puts(d, "__device__ unsigned int KFP_ep, KFP_done;\n");
		kf_buf_puts(d, "__device__ __forceinline__ float KFP_wait(const unsigned long long *p, unsigned tag)\n{\n"
			    "  unsigned long long w;\n"
			    "  while ((unsigned)((w = *(const volatile unsigned long long *)p) >> 32) != tag)\n"
			    "    KFP_SPIN();\n  return __uint_as_float((unsigned)w);\n}\n");
		/* two (value, tag) words in one 16-byte load: half the loads
		 * and half the spinning threads; each 8-byte half is still
		 * single-copy atomic, which is all the protocol needs */
		if (p->hv == 2)
			kf_buf_puts(d, "__device__ __forceinline__ float2 KFP_wait2(const unsigned long long *p, unsigned tag)\n{\n"
				    "  unsigned long long a, b;\n  for (;;) {\n#ifdef __CUDA_ARCH__\n"
				    "    asm volatile(\"ld.volatile.global.v2.u64 {%0, %1}, [%2];\" : \"=l\"(a), \"=l\"(b)"
				    " : \"l\"(__cvta_generic_to_global(p)) : \"memory\");\n#else\n"
				    "    a = ((const volatile unsigned long long *)p)[0];\n"
				    "    b = ((const volatile unsigned long long *)p)[1];\n#endif\n"
				    "    if ((unsigned)(a >> 32) == tag && (unsigned)(b >> 32) == tag)\n      break;\n"
				    "    KFP_SPIN();\n  }\n"
				    "  float2 v;\n  v.x = __uint_as_float((unsigned)a);\n  v.y = __uint_as_float((unsigned)b);\n"
				    "  return v;\n}\n");
		kf_buf_puts(d, "__device__ __forceinline__ void KFP_put(unsigned long long *p, unsigned tag, float v)\n{\n"
			    "  *(volatile unsigned long long *)p = ((unsigned long long)tag << 32) | __float_as_uint(v);\n}\n");
	}
}

/* Before the steps: the gate rows of each warp, the block's weight rows
 * in registers when they fit. */
static void emit_setup(pm *p, int RPW, int KPL, bool cache)
{
	kx *k = p->k;
	kf_buf *b = &k->b;
	int NR = p->ns * p->upb;
	kf_buf_printf(b, "  __shared__ float kf_sh[%lld];\n  __shared__ float kf_sg[%lld];\n", (long long)(p->B * p->K),
		      (long long)(NR * p->B));
	kf_buf_puts(b, "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n");
	if (!p->gsync)
		kf_buf_puts(b, "  __shared__ unsigned kf_epoch;\n"
			    "  if (threadIdx.x == 0) kf_epoch = *(volatile unsigned *)&KFP_ep;\n");
	kf_buf_printf(b, "  int kf_qo[%d];\n  bool kf_qv[%d];\n", RPW, RPW);
	kf_buf_printf(b, "#pragma unroll\n  for (int i = 0; i < %d; i++) {\n"
		      "    const int q = warp + %d * i, s = q / %d;\n"
		      "    kf_qv[i] = q < %d;\n    kf_qo[i] = kf_qv[i] ? q %% %d + KFP_S[s] : 0;\n  }\n",
		      RPW, NW, p->upb, NR, p->upb);
	if (cache) {
		kf_buf_printf(b, "  float kf_w[%d][%d];\n#pragma unroll\n  for (int i = 0; i < %d; i++)\n"
			      "#pragma unroll\n    for (int c = 0; c < %d; c++) {\n"
			      "      const int kk = lane + 32 * c, j = blockIdx.x * %d + (warp + %d * i) %% %d, row = blockIdx.x * %d + kf_qo[i];\n"
			      "      kf_w[i][c] = kf_qv[i] && kk < %lld && j < %lld && blockIdx.x < %d ? ",
			      RPW, KPL, RPW, KPL, p->upb, NW, p->upb, p->upb, (long long)p->K, (long long)p->H, p->ng);
		kx_pm_wexpr(p, "row", "kk", b);
		kf_buf_puts(b, " : 0.f;\n    }\n");
	}
	kf_buf_puts(b, "  __syncthreads();\n");
}

/* The prefetch loads of pf (see prefetch()) for the block's first group. */
static void emit_prefetch(pm *p, const kf_buf *pf, const char *in)
{
	if (pf->n == 0)
		return;
	if (p->B == 1)
		kf_buf_printf(&p->k->b, "%s  if (threadIdx.x < %d && blockIdx.x < %d) {\n"
			      "%s    const int u = threadIdx.x, j = blockIdx.x * %d + u;\n%s    (void)u;\n%s    if (j < %lld) {\n",
			      in, p->upb, p->ng, in, p->upb, in, in, (long long)p->H);
	else /* the cell's threads: (unit u, sequence b) */
		kf_buf_printf(&p->k->b, "%s  if (threadIdx.x < %lld && blockIdx.x < %d) {\n"
			      "%s    const int u = threadIdx.x / %lld, b = threadIdx.x %% %lld, j = blockIdx.x * %d + u;\n"
			      "%s    (void)u;\n%s    (void)b;\n%s    if (j < %lld) {\n",
			      in, (long long)(p->upb * p->B), p->ng, in, (long long)p->B, (long long)p->B, p->upb, in, in,
			      in, (long long)p->H);
	kf_buf_put(&p->k->b, pf->p, pf->n);
	kf_buf_printf(&p->k->b, "%s    }\n%s  }\n", in, in);
}

/* Step t's h(t-1) into shared memory: at step 0 the initial state, later
 * from the exchange buffer (waiting for the tag of step t), hv words per
 * thread and load. */
void kx_pm_h0_load(pm *p, int n, const char *ind)
{
	kx *k = p->k;
	kf_vid h0 = p->r.init[p->hslot];
	kf_nid d = kf_def(k->g, h0);
	for (int i = 0; i < n; i++) {
		char ix[32];
		snprintf(ix, sizeof ix, i ? "(kk + %d)" : "kk", i);
		kf_buf_printf(&k->b, "%skf_sh[%s] = ", ind, ix);
		if (d != KF_NONE)
			kx_const_elem(k, d, ix, &k->b);
		else
			kx_load(&k->b, kx_dt(k, h0), "__ldg(p%d + %s)", kx_pm_param(p, h0), ix); /* f16/bf16 widened */
		kf_buf_puts(&k->b, ";\n");
	}
}

static void emit_hread(pm *p)
{
	kx *k = p->k;
	kf_buf *b = &k->b;
	int n = p->gsync ? 1 : p->hv;
	kf_buf_printf(b, "    for (int kk = %d * threadIdx.x; kk < %lld; kk += %d) {\n", n, (long long)(p->B * p->K), n * NT);
	kf_buf_puts(b, "      if (t == 0) {\n");
	kx_pm_h0_load(p, n, "        ");
	kf_buf_puts(b, "      }\n");
	if (p->gsync)
		kf_buf_puts(b, "      else kf_sh[kk] = ((const volatile float *)KFP_hf[(t - 1) & 1])[kk];\n");
	else if (n == 1)
		kf_buf_puts(b, "      else kf_sh[kk] = KFP_wait(&KFP_hb[(t - 1) & 1][kk], base + t);\n");
	else
		kf_buf_puts(b, "      else {\n        const float2 v = KFP_wait2(&KFP_hb[(t - 1) & 1][kk], base + t);\n"
			    "        kf_sh[kk] = v.x;\n        kf_sh[kk + 1] = v.y;\n      }\n");
	kf_buf_puts(b, "    }\n    __syncthreads();\n");
}

/* The gate rows of a batch: each warp's row against the B states, one
 * weight load (or register) per column for all of them. */
static void emit_rows_batch(pm *p, int RPW, int KPL, bool cache)
{
	kf_buf *b = &p->k->b;
	long long B = (long long)p->B, K = (long long)p->K;
	kf_buf_printf(b, "#pragma unroll\n      for (int i = 0; i < %d; i++) {\n"
		      "        const int row = grp * %d + kf_qo[i], j = grp * %d + (warp + %d * i) %% %d;\n"
		      "        float acc[%lld];\n#pragma unroll\n        for (int bb = 0; bb < %lld; bb++) acc[bb] = 0.f;\n"
		      "        if (kf_qv[i] && j < %lld) {\n#pragma unroll\n          for (int c = 0; c < %d; c++) {\n"
		      "            const int kk = lane + 32 * c;\n            if (kk < %lld) {\n              const float w = ",
		      RPW, p->upb, p->upb, NW, p->upb, B, B, (long long)p->H, KPL, K);
	if (cache)
		kf_buf_puts(b, "grp == (int)blockIdx.x ? kf_w[i][c] : ");
	kx_pm_wexpr(p, "row", "kk", b);
	kf_buf_printf(b, ";\n#pragma unroll\n              for (int bb = 0; bb < %lld; bb++) acc[bb] += w * kf_sh[bb * %lld + kk];\n"
		      "            }\n          }\n        }\n#pragma unroll\n        for (int bb = 0; bb < %lld; bb++) {\n#pragma unroll\n"
		      "          for (int o = 16; o > 0; o >>= 1) acc[bb] += __shfl_xor_sync(0xffffffffu, acc[bb], o);\n        }\n"
		      "        if (kf_qv[i] && lane == 0) {\n#pragma unroll\n"
		      "          for (int bb = 0; bb < %lld; bb++) kf_sg[(warp + %d * i) * %lld + bb] = acc[bb];\n        }\n"
		      "      }\n      __syncthreads();\n", B, K, B, B, NW, B);
}

static void emit_text(pm *p, unsigned T)
{
	kx *k = p->k;
	kf_buf *b = &k->b;
	int NR = p->ns * p->upb, RPW = (NR + NW - 1) / NW, KPL = (int)((p->K + 31) / 32);
	bool cache = RPW * KPL <= 64; /* the weight in registers, if it fits */
	kf_rec *r = &p->r;
	emit_decl(p, T);
	kf_buf_printf(b, "  /* persistent %s: %u steps, hidden %lld, %d units per block, %d groups, %d gate rows per group, %s */\n",
		      kf_attr_str(k->g, k->at, "cell", "rnn"), T, (long long)p->H, p->upb, p->ng, NR,
		      p->gsync ? "grid.sync() per step" : "tagged hand-off");
	emit_setup(p, RPW, KPL, cache);
	kf_buf_printf(b, "  float kf_rs[%u] = {0.f};\n", r->nslot);
	for (int i = 0; i < p->npf; i++)
		kf_buf_printf(b, "  float kf_pf%d = 0.f;\n", i);
	if (!p->gsync)
		kf_buf_printf(b, "  const unsigned base = kf_epoch * %uu;\n", T);
	emit_prefetch(p, &p->pf0, "");
	kf_buf_printf(b, "  for (int t = 0; t < %u; t++) {\n", T);
	emit_prefetch(p, &p->pfs, "  ");
	emit_hread(p);
	kf_buf_printf(b, "    for (int grp = blockIdx.x; grp < %d; grp += gridDim.x) {\n", p->ng);
	if (p->B > 1) {
		emit_rows_batch(p, RPW, KPL, cache);
		kf_buf_printf(b, "      if (threadIdx.x < %lld) {\n"
			      "        const int u = threadIdx.x / %lld, b = threadIdx.x %% %lld, j = grp * %d + u;\n"
			      "        if (j < %lld) {\n", (long long)(p->upb * p->B), (long long)p->B, (long long)p->B, p->upb,
			      (long long)p->H);
		goto cell;
	}
	kf_buf_printf(b, "#pragma unroll\n      for (int i = 0; i < %d; i++) {\n"
		      "        const int row = grp * %d + kf_qo[i], j = grp * %d + (warp + %d * i) %% %d;\n"
		      "        float acc = 0.f;\n        if (kf_qv[i] && j < %lld) {\n",
		      RPW, p->upb, p->upb, NW, p->upb, (long long)p->H);
	/* the block's first group from registers, a branch per row, not per
	 * element; other groups (a smaller grid) read the weight from L2 */
	if (cache)
		kf_buf_printf(b, "          if (grp == (int)blockIdx.x) {\n#pragma unroll\n"
			      "            for (int c = 0; c < %d; c++) {\n              const int kk = lane + 32 * c;\n"
			      "              if (kk < %lld) acc += kf_w[i][c] * kf_sh[kk];\n            }\n          } else {\n",
			      KPL, (long long)p->K);
	kf_buf_printf(b, "#pragma unroll\n          for (int c = 0; c < %d; c++) {\n            const int kk = lane + 32 * c;\n"
		      "            if (kk < %lld) acc += ", KPL, (long long)p->K);
	kx_pm_wexpr(p, "row", "kk", b);
	kf_buf_puts(b, cache ? " * kf_sh[kk];\n          }\n          }\n        }\n" : " * kf_sh[kk];\n          }\n        }\n");
	kf_buf_puts(b, 
		    "#pragma unroll\n        for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);\n"
		    "        if (kf_qv[i] && lane == 0) kf_sg[warp + ");
	kf_buf_printf(b, "%d * i] = acc;\n      }\n      __syncthreads();\n", NW);
	kf_buf_printf(b, "      if (threadIdx.x < %d) {\n        const int u = threadIdx.x, j = grp * %d + u;\n"
		      "        if (j < %lld) {\n", p->upb, p->upb, (long long)p->H);
cell:
	kf_buf_put(b, p->ew.p, p->ew.n);
	kf_buf_puts(b, "        }\n      }\n      __syncthreads();\n    }\n");
	/* every block's h of step t is out before any block reads it */
	kf_buf_puts(b, p->gsync ? "    KFP_GSYNC();\n  }\n" : "  }\n");
	if (p->gsync)
		return;
	/* the last block to finish moves the epoch on for the next launch */
	kf_buf_puts(b, "  if (threadIdx.x == 0) {\n    __threadfence();\n"
		    "    if (atomicAdd(&KFP_done, 1u) == gridDim.x - 1) {\n"
		    "      KFP_done = 0;\n      __threadfence();\n      atomicAdd(&KFP_ep, 1u);\n    }\n  }\n");
}

int kx_emit_persistent(kx *k)
{
	if (kf_attr_int(k->g, k->at, "layers", 1) > 1)
		return kx_emit_stack(k); /* cuda/emit_stack.c */
	pm *p = calloc(1, sizeof *p);
	p->k = k;
	kf_nid f = k->at;
	p->fn = f;
	p->lyr = -1;
	p->nl = 1;
	p->xarg = KF_NONE;
	p->yv = k->out;
	p->ny = k->nout;
	p->yo = malloc((k->nout + 1) * sizeof *p->yo);
	for (uint32_t q = 0; q < k->nout; q++)
		p->yo[q] = (int)q;
	unsigned T = 0;
	int rc = kx_pm_analyze(p);
	if (rc == 0) {
		T = p->r.T;
		rc = kx_pm_cell(p, T);
	}
	k->at = f;
	if (rc == 0 && p->ns * p->upb > 32 * NW * 8)
		rc = kx_pm_bad(p, "too many gate rows per block");
	if (rc == 0) {
		emit_text(p, T);
		kx_pm_name_globals(k);
		k->k->block = NT;
		k->k->units = p->ng;
	} else {
		kx_fail(k, "persistent kernel: %s (the interpreter runs this node; for the GPU, leave the "
			"'persistent' pass out)", p->why);
	}
	kf_buf_free(&p->ew);
	kf_buf_free(&p->pf0);
	kf_buf_free(&p->pfs);
	if (p->r.node)
		kf_rec_free(&p->r);
	free(p->yo);
	free(p);
	return rc;
}
