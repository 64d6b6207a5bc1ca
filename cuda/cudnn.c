/* cudnn.c: cuDNN's legacy convolution API through dlopen (see cudnn.h):
 * the library's side only; which conv maps to which call is
 * cuda/emit_mm_blas.c's (kf_conv_dnn_plan). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cudnn.h"

/* the few values of cudnn_graph.h, cudnn_ops.h and cudnn_cnn.h we use */
enum { DNN_FLOAT = 0, DNN_HALF = 2, DNN_BF16 = 9 };
enum { DNN_NHWC = 1 };
enum { DNN_CROSS_CORRELATION = 1 };
enum { DNN_TENSOR_OP_MATH = 1, DNN_FMA_MATH = 3 };
/* The handle's workspace: an algorithm that needs more is passed over. */
#define WORKSPACE ((size_t)64 << 20)
/* cudnnGetConvolutionForwardAlgorithm_v7's list: every algorithm (8) */
#define MAXALGO 8

/* cudnnConvolutionFwdAlgoPerf_t */
typedef struct dnn_perf {
	int algo, status;
	float time;
	size_t memory;
	int determinism, math;
	int reserved[3];
} dnn_perf;

typedef int (*create_fn)(void **);
typedef int (*destroy_fn)(void *);
typedef int (*stream_fn)(void *, void *);
typedef const char *(*errstr_fn)(int);
typedef int (*tensor_fn)(void *, int, int, int, const int *);   /* cudnnSetTensorNdDescriptorEx */
typedef int (*filter_fn)(void *, int, int, int, const int *);   /* cudnnSetFilterNdDescriptor */
typedef int (*conv_fn)(void *, int, const int *, const int *, const int *, int, int);
typedef int (*int_fn)(void *, int);
typedef int (*algos_fn)(void *, void *, void *, void *, void *, int, int *, dnn_perf *);
typedef int (*wsize_fn)(void *, void *, void *, void *, void *, int, size_t *);
typedef int (*fwd_fn)(void *, const void *, void *, const void *, void *, const void *, void *, int, void *, size_t,
		      const void *, void *, void *);

struct kf_cudnn {
	kf_ctx *c;
	kf_cuda *cu;
	void *lib, *h;
	kf_cuptr ws;
	destroy_fn destroy, tdestroy, fdestroy, cdestroy;
	create_fn tcreate, fcreate, ccreate;
	stream_fn set_stream;
	errstr_fn errstr;
	tensor_fn tensor;
	filter_fn filter;
	conv_fn conv;
	int_fn math, groups;
	algos_fn algos, find;
	wsize_fn wsize;
	fwd_fn fwd;
};

struct kf_dnn_op {
	kf_cudnn *b;
	void *x, *w, *y, *cv; /* the descriptors */
	int algo;
	size_t ws;
};

static int type_code(int dt)
{
	switch (dt) {
	case KF_F16: return DNN_HALF;
	case KF_BF16: return DNN_BF16;
	case KF_F32: return DNN_FLOAT;
	default: return -1;
	}
}

bool kf_dnn_fits(const kf_dnn_conv *c)
{
	const int64_t lim = 1LL << 31;
	if (type_code(c->dt) < 0 || (c->tf32 && c->dt != KF_F32) || c->N < 1 || c->C < 1 || c->O < 1 || c->N >= lim ||
	    c->C >= lim || c->O >= lim || c->N * c->C >= lim || c->N * c->O >= lim)
		return false;
	for (int i = 0; i < 3; i++) {
		int64_t span = c->d[i] * (c->k[i] - 1) + 1;
		if (c->in[i] < 1 || c->k[i] < 1 || c->s[i] < 1 || c->d[i] < 1 || c->p[i] < 0 || c->in[i] >= lim ||
		    c->p[i] >= lim || c->k[i] >= lim || c->s[i] >= lim || c->d[i] >= lim ||
		    c->in[i] + 2 * c->p[i] < span || c->out[i] != (c->in[i] + 2 * c->p[i] - span) / c->s[i] + 1)
			return false;
	}
	return true;
}

void kf_cudnn_describe(const kf_dnn_conv *c, kf_dnn_desc *d)
{
	memset(d, 0, sizeof *d);
	/* a 1-D or 2-D conv is 2-D to cuDNN (its 4-D descriptors) */
	bool three = c->in[0] != 1 || c->k[0] != 1 || c->out[0] != 1;
	int ns = three ? 3 : 2, off = 3 - ns;
	d->nbdims = ns + 2;
	d->type = type_code(c->dt);
	d->format = DNN_NHWC;
	/* cuDNN's dims are N, C, spatial.. in every format; the format says
	 * how they lie: NHWC, channels innermost, as kfuse's x and y; a
	 * filter's NHWC is KRSC, kfuse's w [O, KD, KH, KW, C] */
	int xd[5] = {(int)c->N, (int)c->C}, wd[5] = {(int)c->O, (int)c->C}, yd[5] = {(int)c->N, (int)c->O};
	for (int i = 0; i < ns; i++) {
		xd[2 + i] = (int)c->in[off + i];
		wd[2 + i] = (int)c->k[off + i];
		yd[2 + i] = (int)c->out[off + i];
		d->pad[i] = (int)c->p[off + i];
		d->stride[i] = (int)c->s[off + i];
		d->dil[i] = (int)c->d[off + i];
	}
	memcpy(d->xdim, xd, sizeof xd);
	memcpy(d->wdim, wd, sizeof wd);
	memcpy(d->ydim, yd, sizeof yd);
	d->mode = DNN_CROSS_CORRELATION;
	d->compute = DNN_FLOAT;
	/* f32 stays f32 unless tf32 is allowed (CUDNN_DEFAULT_MATH would let
	 * cuDNN round it to tf32 on Ampere and later) */
	d->math = c->dt == KF_F32 && !c->tf32 ? DNN_FMA_MATH : DNN_TENSOR_OP_MATH;
}

kf_cudnn *kf_cudnn_open(kf_ctx *c, kf_cuda *cu, char *why, size_t nwhy)
{
	char loaded[512];
	const char *e = getenv("KFUSE_CUDNN_LIB");
	const char *names[] = {"libcudnn.so.9", "libcudnn.so"}, *only[] = {e};
	void *lib = e && *e ? kf_cuda_dlopen_first(only, 1, loaded, sizeof loaded, why, nwhy)
			    : kf_cuda_dlopen_first(names, 2, loaded, sizeof loaded, why, nwhy);
	if (!lib)
		return NULL;
	kf_cudnn *b = calloc(1, sizeof *b);
	*b = (kf_cudnn){.c = c, .cu = cu, .lib = lib};
	create_fn create = (create_fn)dlsym(lib, "cudnnCreate");
	b->destroy = (destroy_fn)dlsym(lib, "cudnnDestroy");
	b->set_stream = (stream_fn)dlsym(lib, "cudnnSetStream");
	b->errstr = (errstr_fn)dlsym(lib, "cudnnGetErrorString");
	b->tcreate = (create_fn)dlsym(lib, "cudnnCreateTensorDescriptor");
	b->tdestroy = (destroy_fn)dlsym(lib, "cudnnDestroyTensorDescriptor");
	b->tensor = (tensor_fn)dlsym(lib, "cudnnSetTensorNdDescriptorEx");
	b->fcreate = (create_fn)dlsym(lib, "cudnnCreateFilterDescriptor");
	b->fdestroy = (destroy_fn)dlsym(lib, "cudnnDestroyFilterDescriptor");
	b->filter = (filter_fn)dlsym(lib, "cudnnSetFilterNdDescriptor");
	b->ccreate = (create_fn)dlsym(lib, "cudnnCreateConvolutionDescriptor");
	b->cdestroy = (destroy_fn)dlsym(lib, "cudnnDestroyConvolutionDescriptor");
	b->conv = (conv_fn)dlsym(lib, "cudnnSetConvolutionNdDescriptor");
	b->math = (int_fn)dlsym(lib, "cudnnSetConvolutionMathType");
	b->groups = (int_fn)dlsym(lib, "cudnnSetConvolutionGroupCount");
	b->algos = (algos_fn)dlsym(lib, "cudnnGetConvolutionForwardAlgorithm_v7");
	b->find = (algos_fn)dlsym(lib, "cudnnFindConvolutionForwardAlgorithm");
	b->wsize = (wsize_fn)dlsym(lib, "cudnnGetConvolutionForwardWorkspaceSize");
	b->fwd = (fwd_fn)dlsym(lib, "cudnnConvolutionForward");
	int st = -1;
	if (!create || !b->destroy || !b->set_stream || !b->errstr || !b->tcreate || !b->tdestroy || !b->tensor ||
	    !b->fcreate || !b->fdestroy || !b->filter || !b->ccreate || !b->cdestroy || !b->conv || !b->math ||
	    !b->groups || !b->algos || !b->find || !b->wsize || !b->fwd)
		snprintf(why, nwhy, "%s lacks the cuDNN functions kfuse needs (the legacy convolution API of cuDNN 9)",
			 loaded);
	else if ((st = create(&b->h)) != 0)
		snprintf(why, nwhy, "cudnnCreate failed: %s", b->errstr(st));
	else if ((st = kf_cuda_malloc(cu, WORKSPACE, &b->ws)) != 0)
		snprintf(why, nwhy, "no device memory for the cuDNN workspace");
	if (st != 0) {
		kf_cudnn_close(b);
		return NULL;
	}
	return b;
}

void kf_cudnn_close(kf_cudnn *b)
{
	if (!b)
		return;
	if (b->h)
		b->destroy(b->h);
	if (b->ws)
		kf_cuda_free(b->cu, b->ws);
	dlclose(b->lib);
	free(b);
}

/* The descriptors of d on o; 0, or cuDNN's status with the call in why. */
static int make_descs(kf_cudnn *b, const kf_dnn_desc *d, kf_dnn_op *o, char *why, size_t nwhy)
{
	const char *call = "cudnnCreate*Descriptor";
	int st = b->tcreate(&o->x);
	if (st == 0 && (st = b->tcreate(&o->y)) == 0 && (st = b->fcreate(&o->w)) == 0)
		st = b->ccreate(&o->cv);
	if (st == 0 && (call = "cudnnSetTensorNdDescriptorEx (x)",
			st = b->tensor(o->x, d->format, d->type, d->nbdims, d->xdim)) == 0 &&
	    (call = "cudnnSetTensorNdDescriptorEx (y)", st = b->tensor(o->y, d->format, d->type, d->nbdims, d->ydim)) == 0 &&
	    (call = "cudnnSetFilterNdDescriptor", st = b->filter(o->w, d->type, d->format, d->nbdims, d->wdim)) == 0 &&
	    (call = "cudnnSetConvolutionNdDescriptor",
	     st = b->conv(o->cv, d->nbdims - 2, d->pad, d->stride, d->dil, d->mode, d->compute)) == 0 &&
	    (call = "cudnnSetConvolutionGroupCount", st = b->groups(o->cv, 1)) == 0)
		call = "cudnnSetConvolutionMathType", st = b->math(o->cv, d->math);
	if (st != 0)
		snprintf(why, nwhy, "%s failed: %s", call, b->errstr(st));
	return st;
}

/* The first algorithm of cuDNN's list that runs with d's math in the
 * workspace; -1 with why when none does.  The list: the heuristic's order
 * (cudnnGetConvolutionForwardAlgorithm_v7, PyTorch's without
 * cudnn.benchmark); with $KFUSE_CUDNN_ALGO=find every algorithm timed by
 * cudnnFindConvolutionForwardAlgorithm, fastest first.  On the H200 the
 * heuristic's picks replayed faster: ResNet-50's 23 layers through cuDNN
 * in one graph 0.19 / 0.75 ms at batch 1 / 32, Find's 1.01 / 1.86
 * (bench/results/2026-12-03-gpu-s16b-*, -s16c-*). */
static int pick_algo(kf_cudnn *b, const kf_dnn_desc *d, kf_dnn_op *o, char *why, size_t nwhy)
{
	dnn_perf perf[MAXALGO];
	const char *e = getenv("KFUSE_CUDNN_ALGO");
	bool heur = !e || strcmp(e, "find");
	int n = 0, st = (heur ? b->algos : b->find)(b->h, o->x, o->w, o->cv, o->y, MAXALGO, &n, perf);
	if (st != 0) {
		snprintf(why, nwhy, "%s failed: %s",
			 heur ? "cudnnGetConvolutionForwardAlgorithm_v7" : "cudnnFindConvolutionForwardAlgorithm",
			 b->errstr(st));
		return -1;
	}
	for (int i = 0; i < n && i < MAXALGO; i++) {
		size_t ws = 0;
		/* each entry names the math it was rated with, which the run
		 * must set (as PyTorch does); for an f32 conv whose user did not
		 * allow tf32 only FMA math will do */
		if (perf[i].status != 0 || (d->math == DNN_FMA_MATH && perf[i].math != DNN_FMA_MATH) ||
		    b->math(o->cv, perf[i].math) != 0 ||
		    b->wsize(b->h, o->x, o->w, o->cv, o->y, perf[i].algo, &ws) != 0 || ws > WORKSPACE)
			continue;
		o->algo = perf[i].algo;
		o->ws = ws;
		return 0;
	}
	snprintf(why, nwhy, "cuDNN has no algorithm for this conv (%d listed) in a %zu MiB workspace", n,
		 WORKSPACE >> 20);
	return -1;
}

kf_dnn_op *kf_cudnn_prepare(kf_cudnn *b, const kf_dnn_conv *c, char *why, size_t nwhy)
{
	if (!kf_dnn_fits(c)) {
		snprintf(why, nwhy, "a conv cuDNN does not take (dtype or extents)");
		return NULL;
	}
	kf_dnn_desc d;
	kf_cudnn_describe(c, &d);
	kf_dnn_op *o = calloc(1, sizeof *o);
	o->b = b;
	if (make_descs(b, &d, o, why, nwhy) != 0 || pick_algo(b, &d, o, why, nwhy) != 0) {
		kf_cudnn_op_free(o);
		return NULL;
	}
	return o;
}

void kf_cudnn_op_free(kf_dnn_op *o)
{
	if (!o)
		return;
	kf_cudnn *b = o->b;
	if (o->x)
		b->tdestroy(o->x);
	if (o->y)
		b->tdestroy(o->y);
	if (o->w)
		b->fdestroy(o->w);
	if (o->cv)
		b->cdestroy(o->cv);
	free(o);
}

int kf_cudnn_algo(const kf_dnn_op *o)
{
	return o->algo;
}

int kf_cudnn_run(kf_cudnn *b, const kf_dnn_op *o, kf_cuptr x, kf_cuptr w, kf_cuptr y, kf_custream s)
{
	/* alpha and beta are float for half, bfloat16 and float data */
	const float one = 1.0f, zero = 0.0f;
	int st = b->set_stream(b->h, s);
	if (st == 0)
		st = b->fwd(b->h, &one, o->x, (void *)(uintptr_t)x, o->w, (void *)(uintptr_t)w, o->cv, o->algo,
			    (void *)(uintptr_t)b->ws, o->ws, &zero, o->y, (void *)(uintptr_t)y);
	if (st != 0) {
		kf_error(b->c, KF_NOLOC, "cudnn: cudnnConvolutionForward failed: %s", b->errstr(st));
		return -1;
	}
	return 0;
}
