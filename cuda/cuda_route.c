/* cuda_route.c: the CUDA backend's contractions through a library: which
 * contraction steps of a plan run as one cuBLASLt call with the epilogue,
 * or as a cuBLAS GEMM between the kernels of its prologue and epilogue
 * (cuda/emit_mm_blas.c), which convs as a cuDNN call before their
 * epilogue kernel, and the steps that makes.
 *
 * A contraction's route: its `tile` attribute (the tuner's pick, or the
 * cache's), else $KFUSE_MATMUL_TILE, else the cost model (cuda/mm_cost.c);
 * KFUSE_CUBLAS=1 sends every contraction cuBLAS takes through cuBLAS.  A
 * library that does not load, or has no algorithm, is never fatal: the
 * contraction's own kernel (emitted and compiled in any case) runs, and the
 * report says why.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cuda_backend_int.h"
#include "emit_matmul.h"

/* A note into the report, else (no report) a warning at the node. */
static void route_note(kf_cuda_session *s, kf_nid n, const char *fmt, const char *a, const char *b)
{
	char msg[1200];
	snprintf(msg, sizeof msg, fmt, a, b);
	if (s->o.report)
		kf_buf_printf(s->o.report, "cuda: %s\n", msg);
	else
		kf_warning(s->c, kf_N(s->g, n)->loc, "%s", msg);
}

static const char *node_sym(kf_cuda_session *s, kf_nid n)
{
	const kf_node *x = kf_N(s->g, n);
	return x->sym ? kf_str(s->c, x->sym) : kf_op(s->c, x->op)->name;
}

/* The route of contraction step t into out: "cublas", "cublaslt", or
 * another config (the own kernel, which the emitter already chose); *why
 * names what decided. */
static void route_of(kf_cuda_session *s, const step *t, bool lt_ok, bool blas_ok, char *out, size_t n,
		     const char **why)
{
	kf_graph *g = s->g;
	kf_nid f = t->k.node;
	const char *tile = kf_N(g, f)->op == KF_OP_FUSION ? kf_attr_str(g, f, "tile", NULL) : NULL;
	const char *env = getenv("KFUSE_MATMUL_TILE"), *blas = getenv("KFUSE_CUBLAS");
	if (blas && !strcmp(blas, "1") && blas_ok) {
		snprintf(out, n, "cublas");
		*why = "KFUSE_CUBLAS=1";
		return;
	}
	const char *want = tile ? tile : env && *env ? env : NULL;
	/* a library route the node cannot take (a tuned shape of another
	 * epilogue) is no choice: the cost model decides */
	if (want && !(!strcmp(want, "cublaslt") && !lt_ok) && !(!strcmp(want, "cublas") && !blas_ok)) {
		snprintf(out, n, "%s", want);
		*why = tile ? "its tile" : "KFUSE_MATMUL_TILE";
	} else {
		kf_mm_shape sh;
		kf_mm_node_shape_sized(g, f, &s->tgt, &sh); /* a sized plan: its bucket's */
		sh.wgmma = s->tgt.wgmma;
		if (s->o.allow_tf32 && sh.in == KF_F32)
			sh.tf32 = true;
		*why = kf_mm_choose(&sh, (kf_mm_libs){.blas = blas_ok, .lt = lt_ok}, out, n);
	}
}

/* cuBLASLt with the epilogue for step t; false (a note said why) when it
 * cannot run, and the own kernel stays. */
static bool route_lt(kf_cuda_session *s, step *t)
{
	char why[1024] = "";
	if (!s->lt_tried) {
		s->lt_tried = true;
		s->lt = kf_cublaslt_open(s->c, s->cu, why, sizeof why);
	}
	if (!s->lt && !why[0])
		snprintf(why, sizeof why, "the library did not load; see the first such note");
	if (s->lt && !(t->lt = kf_cublaslt_prepare(s->lt, &t->lp, why, sizeof why)) && !why[0])
		snprintf(why, sizeof why, "cublasLt failed");
	if (!t->lt)
		route_note(s, t->k.node, "fusion @%s: cuBLASLt not used (%s)", node_sym(s, t->k.node),
			   why);
	return t->lt != NULL;
}

static void push(step **v, uint32_t *n, const step *t)
{
	*v = realloc(*v, (*n + 1) * sizeof **v);
	(*v)[(*n)++] = *t;
}

/* The kernel record of a library's step for contraction f (no code: the
 * plan's buffers and reports read it): it reads p's a and b, writes acc. */
static void lib_kernel(kf_graph *g, kf_nid f, const char *name, const kf_mm_blas *p, kf_kernel *k)
{
	*k = (kf_kernel){.kind = KF_KK_MATMUL, .node = f, .nin = 2, .nout = 1, .grid_y = 1, .grid_z = 1, .nops = 1};
	snprintf(k->name, sizeof k->name, "%s", name);
	k->in = malloc(2 * sizeof *k->in);
	k->out = malloc(sizeof *k->out);
	k->in[0] = p->a, k->in[1] = p->b, k->out[0] = p->acc;
	k->bytes = (kf_type_numel(kf_vtype(g, p->a)) + kf_type_numel(kf_vtype(g, p->b)) + kf_type_numel(kf_vtype(g, p->acc))) *
		   (int64_t)kf_dtype_size(kf_vtype(g, p->acc)->dtype);
}

/* The steps of contraction node f around a cuBLAS GEMM (parts A, B, the
 * GEMM, the epilogue) appended to v; -1 when a part fails to emit. */
static int route_blas(kf_cuda_session *s, kf_nid f, const kf_mm_blas *p, step **v, uint32_t *n)
{
	kf_graph *g = s->g;
	static const int before[] = {KF_MM_PART_A, KF_MM_PART_B};
	for (int i = 0; i < 2; i++) {
		if (!p->pro[i])
			continue;
		step t = {.prog = -1, .part = true};
		if (kf_emit_node_part(g, f, &s->tgt, before[i], &t.k) != 0)
			return -1;
		push(v, n, &t);
	}
	step t = {.prog = -1, .blas = true, .bg = p->gemm};
	lib_kernel(g, f, "cublas", p, &t.k);
	push(v, n, &t);
	if (p->epi) {
		step e = {.prog = -1, .part = true};
		if (kf_emit_node_part(g, f, &s->tgt, KF_MM_PART_EPI, &e.k) != 0)
			return -1;
		push(v, n, &e);
	}
	return 0;
}

/* cuBLAS for the session, opened at the first contraction routed there;
 * false (why in s->blas_why) when it does not load.  A dry run has no
 * library but plans as if it had. */
static bool blas_ready(kf_cuda_session *s)
{
	if (!s->cu)
		return true;
	if (!s->blas && !s->blas_tried) {
		s->blas_tried = true;
		s->blas = kf_cublas_open(s->c, s->cu, s->blas_why, sizeof s->blas_why);
	}
	return s->blas != NULL;
}

/* Routes contraction step t: its steps (the step itself, or the kernels
 * and GEMM that replace it) appended to v; -1 when a part fails to emit. */
static int route_step(kf_cuda_session *s, step *t, step **v, uint32_t *nv)
{
	kf_graph *g = s->g;
	kf_mm_blas bp;
	bool blas_ok = kf_mm_blas_plan(g, t->k.node, &bp), lt_ok = kf_cublaslt_plan(g, t->k.node, &t->lp);
	char r[64] = "";
	const char *why = "", *sym = node_sym(s, t->k.node);
	if (blas_ok || lt_ok)
		route_of(s, t, lt_ok, blas_ok, r, sizeof r, &why);
	if (!strcmp(r, "cublaslt") && lt_ok) {
		if (s->o.allow_tf32 && t->lp.dt == KF_F32)
			t->lp.tf32 = true;
		if (!s->cu || route_lt(s, t)) {
			/* a dry run has no library to prepare: the own kernel compiles */
			if (s->o.report)
				kf_buf_printf(s->o.report, "cuda: @%s: cuBLASLt with the fused epilogue%s (%s%s)\n", sym,
					      t->lp.res != KF_NONE ? " and the residual as C" : "", why,
					      s->cu ? "" : "; a dry run compiles the own kernel");
			push(v, nv, t);
			return 0;
		}
		/* cuBLASLt has no algorithm here: cuBLAS is still the floor */
		snprintf(r, sizeof r, "%s", blas_ok ? "cublas" : "");
		why = "cuBLASLt failed";
	}
	if (!strcmp(r, "cublas") && blas_ok && blas_ready(s)) {
		if (s->o.allow_tf32 && bp.gemm.dt == KF_F32)
			bp.gemm.tf32 = true;
		if (route_blas(s, t->k.node, &bp, v, nv) != 0)
			return -1;
		if (s->o.report)
			kf_buf_printf(s->o.report, "cuda: @%s: cuBLAS%s%s%s (%s)\n", sym, bp.gemm.tf32 ? " (tf32)" : "",
				      bp.pro[0] || bp.pro[1] ? " after the prologue kernel" : "",
				      bp.epi ? " + the fused epilogue kernel" : "", why);
		kf_kernel_free(&t->k); /* the own kernel is not needed */
		return 0;
	}
	if (!strcmp(r, "cublas") && blas_ok)
		route_note(s, t->k.node, "@%s: cuBLAS not used (%s); its own kernel runs", sym, s->blas_why);
	else if (r[0] && strcmp(r, "cublas") && strcmp(r, "cublaslt") && s->o.report)
		kf_buf_printf(s->o.report, "cuda: @%s: own kernel %s (%s%s)\n", sym, r,
			      strcmp(why, "its tile") && strcmp(why, "KFUSE_MATMUL_TILE") ? "cost model: " : "", why);
	push(v, nv, t);
	return 0;
}

/* cuDNN for the session, opened at the first conv routed there; false
 * (why in s->dnn_why) when it does not load.  A dry run has no library
 * but plans as if it had. */
static bool dnn_ready(kf_cuda_session *s)
{
	if (!s->cu)
		return true;
	if (!s->dnn && !s->dnn_tried) {
		s->dnn_tried = true;
		s->dnn = kf_cudnn_open(s->c, s->cu, s->dnn_why, sizeof s->dnn_why);
	}
	return s->dnn != NULL;
}

/* Routes conv step t (an implicit GEMM) through cuDNN when its tile, else
 * $KFUSE_CONV_TILE, says `cudnn` (the own kernels are the default; cuDNN
 * is a candidate the tuner times): the call, then the epilogue kernel,
 * replace the step; anything that stops cuDNN leaves the own kernel and a
 * note.  -1 when the epilogue fails to emit. */
static int route_conv(kf_cuda_session *s, step *t, step **v, uint32_t *nv)
{
	kf_graph *g = s->g;
	kf_nid f = t->k.node;
	const char *tile = kf_N(g, f)->op == KF_OP_FUSION ? kf_attr_str(g, f, "tile", NULL) : NULL;
	const char *env = getenv("KFUSE_CONV_TILE"), *want = tile ? tile : env, *sym = node_sym(s, f);
	kf_mm_blas p;
	char why[1024] = "";
	if (!want || strcmp(want, "cudnn")) {
		push(v, nv, t);
		return 0;
	}
	if (!kf_conv_dnn_plan(g, f, &p))
		snprintf(why, sizeof why, "a conv it does not take: asymmetric pads, a prologue, or a dtype other than f16, bf16, f32");
	else if (!dnn_ready(s))
		snprintf(why, sizeof why, "%s", s->dnn_why);
	step d = {.prog = -1, .dnn = true};
	if (!why[0] && s->cu && !(d.dop = kf_cudnn_prepare(s->dnn, &p.conv, why, sizeof why)) && !why[0])
		snprintf(why, sizeof why, "cuDNN failed");
	if (why[0]) {
		route_note(s, f, "@%s: cuDNN not used (%s); its own kernel runs", sym, why);
		push(v, nv, t);
		return 0;
	}
	lib_kernel(g, f, "cudnn", &p, &d.k);
	push(v, nv, &d);
	if (p.epi) {
		step e = {.prog = -1, .part = true};
		if (kf_emit_node_part(g, f, &s->tgt, KF_MM_PART_EPI, &e.k) != 0)
			return -1;
		push(v, nv, &e);
	}
	if (s->o.report) {
		char how[32] = "a dry run";
		if (d.dop)
			snprintf(how, sizeof how, "algorithm %d", kf_cudnn_algo(d.dop));
		kf_buf_printf(s->o.report, "cuda: @%s: cuDNN%s (%s; %s)\n", sym, p.epi ? " + the fused epilogue kernel" : "",
			      tile ? "its tile" : "KFUSE_CONV_TILE", how);
	}
	kf_kernel_free(&t->k); /* the own kernel is not needed */
	return 0;
}

int kf_cb_route(kf_cuda_session *s)
{
	step *v = NULL;
	uint32_t nv = 0;
	int rc = 0;
	for (uint32_t i = 0; i < s->nst && rc == 0; i++) {
		step *t = &s->st[i];
		if (t->k.kind == KF_KK_MATMUL && kf_mm_node_shape(s->g, t->k.node, NULL))
			rc = route_step(s, t, &v, &nv);
		else if (t->k.kind == KF_KK_MATMUL && kf_conv_node_shape(s->g, t->k.node, NULL))
			rc = route_conv(s, t, &v, &nv);
		else
			push(&v, &nv, t);
	}
	if (rc != 0) {
		for (uint32_t i = 0; i < nv; i++)
			if (v[i].blas || v[i].part || v[i].dnn) {
				kf_kernel_free(&v[i].k);
				kf_cudnn_op_free(v[i].dop);
			}
		free(v);
		return -1;
	}
	free(s->st);
	s->st = v;
	s->nst = nv;
	return 0;
}
