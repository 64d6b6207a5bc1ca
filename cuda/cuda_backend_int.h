/* cuda_backend_int.h: what the CUDA backend's files share: a session's
 * steps (one launch each), its programs (NVRTC units) and its state.
 * cuda_backend.c plans (kernels, load, split, buffers) and owns the
 * session; cuda_compile.c compiles the programs, in threads, through the
 * kernel cache; cuda_run.c launches, captures, profiles and benches. */
#ifndef KF_CUDA_BACKEND_INT_H
#define KF_CUDA_BACKEND_INT_H
#include <time.h>
#include "cuda_backend.h"
#include "cuda.h"
#include "kcache.h"
#include "cublas.h"
#include "cudnn.h"
#include "emit_cuda.h"

/* the kernels read past their buffers what the driver layer allocates */
_Static_assert(KF_CUDA_SLACK >= KF_EMIT_READ_PAST, "cuda.h's KF_CUDA_SLACK is below the kernels' KF_EMIT_READ_PAST");

typedef struct step {
	kf_kernel k;
	int prog;            /* program index */
	kf_cufunc f;
	kf_cuptr *ptr;       /* parameter values */
	kf_cuda_tmap *tm;    /* tensor maps (k.ntmap), encoded from ptr */
	int64_t kdv[KF_EMIT_MAXSYM]; /* the sizes the kernel reads (k.kd), as int or long long */
	void **args;
	unsigned grid;
	float ms;            /* profile */
	bool blas;           /* a contraction's cuBLAS GEMM (cuda_route.c): no kernel */
	kf_blas_gemm bg;
	kf_blas_op *bop;     /* bound to its buffers by bind_args */
	bool part;           /* a kernel around the GEMM (a prologue, the epilogue) */
	kf_lt_op *lt;        /* a contraction fusion run by cuBLASLt with its epilogue */
	kf_lt_plan lp;
	bool dnn;            /* a conv's cuDNN call (cuda_route.c): no kernel; its op made
			      * when routed (NULL in a dry run); k.in x, w, k.out the result */
	kf_dnn_op *dop;
} step;

/* A step that is a library's call, no kernel of ours. */
static inline bool kf_cb_lib(const step *t)
{
	return t->blas || t->lt || t->dnn;
}

typedef struct prog {
	kf_buf src;
	kf_cuda_unit u;      /* its compile: u.src is src's text */
	kf_cumodule mod;
} prog;

/* Device copies of file constants and large inline ones shared by the
 * plans of one backend (cuda_consts.c): keyed by the declared type and the
 * file's resolved path or the payload's address, counted by the sessions
 * that read them.  A table is counted too: the backend and each session
 * holding it. */
typedef struct kf_cb_consts kf_cb_consts;
kf_cb_consts *kf_cb_consts_new(void);
kf_cb_consts *kf_cb_consts_retain(kf_cb_consts *cc);
void kf_cb_consts_release(kf_cb_consts *cc);
/* const node n's key into key (NUL-terminated); -1: not shared (a small
 * inline constant, a splat, a symbolic type) */
int kf_cb_consts_key(kf_graph *g, kf_nid n, kf_buf *key);
/* type t as keys write it ("f16[64x256]"), appended to b */
void kf_cb_type_key(kf_buf *b, const kf_type *t);
/* the buffer of key, counting one more user; false: none yet */
bool kf_cb_consts_get(kf_cb_consts *cc, const char *key, kf_cuptr *p);
/* a new entry (one user) for buffer p; -1 out of memory */
int kf_cb_consts_put(kf_cb_consts *cc, const char *key, kf_cuptr p);
/* one user less; true (and *p) when it was the last: the caller frees p */
bool kf_cb_consts_drop(kf_cb_consts *cc, const char *key, kf_cuptr *p);

struct kf_cuda_session {
	kf_ctx *c;
	kf_cuda_opts o;
	kf_cuda *cu;
	kf_nvrtc *nv;
	char arch[16];
	kf_emit_target tgt;    /* what the emitter may use on this device */
	kf_emit_dyn dyn;       /* a sized plan's symbols (tgt.dyn points here); n 0: static */
	kf_sid dsid[KF_EMIT_MAXSYM];
	int64_t dval[KF_EMIT_MAXSYM], drep[KF_EMIT_MAXSYM], dpval[KF_EMIT_MAXSYM];
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
	kf_cb_consts *consts;  /* the backend's shared constants (NULL: each plan owns its own) */
	char **shared;         /* the keys of the shared ones this plan holds */
	uint32_t nshared;
	kf_custream stream;
	kf_cuevent ev_in, ev_out; /* run_device: the caller's stream and ours, ordered */
	kf_cugraph graph;
	bool ran;
	kf_cuda_stats stats;
	kf_cublas *blas;       /* contractions routed to cuBLAS (opened at the first; at once
				* with KFUSE_CUBLAS=1) */
	bool blas_tried;
	char blas_why[512];    /* why it did not open */
	kf_cublaslt *lt;       /* contractions with tile `cublaslt` (opened at the first) */
	bool lt_tried;
	kf_cudnn *dnn;         /* convs with tile `cudnn` (opened at the first) */
	bool dnn_tried;
	char dnn_why[512];     /* why it did not open */
	uint8_t *hoisted;      /* per node: computed at plan time (cuda_hoist.c) */
	struct kf_tensor *hv;  /* per value: the hoisted results and the consts they read */
};

static inline double kf_cb_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The value whose buffer v uses (reshapes alias their operand). */
static inline kf_vid kf_cb_root(const kf_cuda_session *s, kf_vid v)
{
	while (s->alias[v] != KF_NONE)
		v = s->alias[v];
	return v;
}

/* The plan notes into s's report (cuda_run.c): kernels, compiles, the
 * arena; a sized plan's kernels that read their sizes and buckets. */
void kf_cb_plan_report(kf_cuda_session *s);
/* The plan's memory (cuda_memory.c): inputs, the constants and hoisted
 * results the steps read uploaded (then the hoisted tensors freed), the
 * arena laid out, every step's arguments bound.  0, or -1 with an error. */
int kf_cb_memory(kf_cuda_session *s);
/* Compiles the programs s->pr not yet compiled (cuda_compile.c). */
int kf_cb_compile(kf_cuda_session *s);
/* Routes the contraction steps through cuBLASLt or cuBLAS where their
 * config says so (cuda_route.c): the GEMM and the kernels around it
 * replace the step.  0, or -1 with an error. */
int kf_cb_route(kf_cuda_session *s);

/* cuda_hoist.c: marks the top-level nodes that depend on constants alone
 * (s->hoisted); 0, or -1 with an error.  Whether v is such a node's
 * result; its tensor, computed on first use (NULL with an error); its key
 * for the backend's shared table (-1: not shared, key untouched); and the
 * freeing of them all. */
int kf_cb_hoist(kf_cuda_session *s);
bool kf_cb_is_hoisted(const kf_cuda_session *s, kf_vid v);
const struct kf_tensor *kf_cb_hoisted_value(kf_cuda_session *s, kf_vid v);
int kf_cb_hoist_key(kf_cuda_session *s, kf_vid v, kf_buf *key);
void kf_cb_hoist_free(kf_cuda_session *s);

#endif
