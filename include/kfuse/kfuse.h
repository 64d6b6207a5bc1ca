/* kfuse.h: kfuse as a library (libkfuse.so or libkfuse.a; `pkg-config
 * kfuse`, or CMake's find_package(kfuse) and the target kfuse::kfuse).
 *
 * Load a model (.kf text or an ONNX file), run a pass pipeline on it,
 * compile one of its graphs for a backend (the CPU interpreter, or CUDA
 * where a GPU and its driver are), and run that as often as needed on the
 * caller's buffers:
 *
 *     kfuse_ctx *k = kfuse_new();
 *     kfuse_model *m = kfuse_load(k, "ffn.onnx");
 *     if (!m || kfuse_pipeline(m, "canonicalize,cse,rules,fuse,dce") < 0)
 *             fputs(kfuse_error(k), stderr);
 *     kfuse_compiled *x = kfuse_compile(m, NULL, "cpu", NULL);
 *     kfuse_buffer in = {.data = xs, .nbytes = sizeof xs, .dtype = KFUSE_F32,
 *                        .rank = 2, .dim = {8, 64}};
 *     kfuse_buffer out = {.data = ys, .nbytes = sizeof ys};
 *     kfuse_run(x, &in, 1, &out, 1);
 *     kfuse_compiled_free(x);
 *     kfuse_model_free(m);
 *     kfuse_free(k);
 *
 * Errors: a function that fails returns NULL or -1, and kfuse_error then
 * holds its messages (`file:line:col: error: ...`, as the tools print
 * them).  Nothing here prints or exits.
 *
 * Lifetimes: a model lives until kfuse_model_free and belongs to its
 * context; a compiled graph lives until kfuse_compiled_free, and its model
 * must outlive it and may not be changed (kfuse_pipeline refuses) while it
 * lives.  Strings returned are valid as long as what they describe.
 *
 * Threads: a context and what is made from it are used by one thread at a
 * time; different contexts are independent of each other.
 *
 * docs/embedding.md has the whole story; examples/embed/ is a program.
 */
#ifndef KFUSE_H
#define KFUSE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KFUSE_VERSION_MAJOR 0
#define KFUSE_VERSION_MINOR 1
#define KFUSE_VERSION_PATCH 0
#define KFUSE_MAX_RANK 8

/* Element types, as the text IR names them (f16 bf16 f32 f64 i1 i8 i32 i64;
 * i1 is one byte, 0 or 1). */
typedef enum kfuse_dtype {
	KFUSE_F16, KFUSE_BF16, KFUSE_F32, KFUSE_F64, KFUSE_I1, KFUSE_I8, KFUSE_I32, KFUSE_I64
} kfuse_dtype;

typedef struct kfuse_ctx kfuse_ctx;           /* errors, loaded plugins, registered ops */
typedef struct kfuse_model kfuse_model;       /* one or more graphs */
typedef struct kfuse_compiled kfuse_compiled; /* one graph, compiled for a backend */

/* "0.1.0": the library's version (the header's may differ). */
const char *kfuse_version(void);
/* The bytes of one element of t. */
size_t kfuse_dtype_size(kfuse_dtype t);
/* "f32" etc. */
const char *kfuse_dtype_name(kfuse_dtype t);

/* ---- contexts and errors ------------------------------------------------- */

kfuse_ctx *kfuse_new(void);
/* Frees the context; free its models and compiled graphs first. */
void kfuse_free(kfuse_ctx *k);
/* The messages (errors, warnings, notes) since the last call, rendered as
 * the tools print them; "" when there are none.  Valid until the next call
 * on k. */
const char *kfuse_error(kfuse_ctx *k);
/* Loads a plugin: a C library (x.so; see kfuse_plugin.h) or a Lua script of
 * op{} declarations (x.lua), so that models may use its ops and pipelines
 * its passes.  0, or -1. */
int kfuse_load_plugin(kfuse_ctx *k, const char *path);

/* ---- models -------------------------------------------------------------- */

/* Reads a model: ONNX when path ends in ".onnx" (initializers become
 * constants held in memory), else .kf text ("-": stdin), whose
 * file("...") constants and `plugin` lines are relative to its directory.
 * NULL on an error. */
kfuse_model *kfuse_load(kfuse_ctx *k, const char *path);
/* .kf text in memory; name is used in messages, and file("...") paths are
 * relative to the current directory.  NULL on an error. */
kfuse_model *kfuse_load_text(kfuse_ctx *k, const char *name, const char *text, size_t len);
void kfuse_model_free(kfuse_model *m);

/* Runs a pass pipeline, such as "canonicalize,cse,rules,fuse,dce" (the
 * passes and their options: `kfuse-opt --list-passes`, docs/passes.md;
 * `rules` alone applies the standard rules).  Every graph is verified
 * after every pass.  0, or -1 (the model is then unusable: free it). */
int kfuse_pipeline(kfuse_model *m, const char *pipeline);
/* Writes the model as .kf text to path ("-": stdout), its file("...")
 * paths and plugin lines rewritten to name the same files from there.
 * 0, or -1. */
int kfuse_save(kfuse_model *m, const char *path);

/* The model as text of kind "ir" (.kf text, file paths as they are),
 * "dot" (Graphviz), "cuda" (the kernels the cuda backend compiles, CUDA C)
 * or "ptx" (those compiled by NVRTC for sm_90 or $KFUSE_ARCH; needs
 * libnvrtc, not a GPU).  *text is malloc'd and NUL-terminated (free it);
 * *len (when len is not NULL) its length.  0, or -1. */
int kfuse_emit(kfuse_model *m, const char *kind, char **text, size_t *len);

/* ---- what a graph takes and gives ----------------------------------------- */

typedef struct kfuse_tensor_info {
	const char *name;                  /* the value's name without '%' ("" when none) */
	kfuse_dtype dtype;
	int rank;
	int64_t dim[KFUSE_MAX_RANK];       /* -1 where the dim is symbolic */
	const char *sym[KFUSE_MAX_RANK];   /* a symbolic dim's name ("N"), else NULL */
} kfuse_tensor_info;

int kfuse_graph_count(const kfuse_model *m);
/* The name of graph i (without '@'), or NULL when there is none. */
const char *kfuse_graph_name(const kfuse_model *m, int i);
/* Graph names may be NULL for the first graph.  Counts are -1 (with an
 * error) for a graph the model does not have; info functions return 0, or
 * -1 for a bad graph or index. */
int kfuse_num_inputs(kfuse_model *m, const char *graph);
int kfuse_num_outputs(kfuse_model *m, const char *graph);
int kfuse_input_info(kfuse_model *m, const char *graph, int i, kfuse_tensor_info *out);
int kfuse_output_info(kfuse_model *m, const char *graph, int i, kfuse_tensor_info *out);

/* ---- compiling and running ------------------------------------------------ */

typedef struct kfuse_compile_opts {
	int device;            /* cuda: the device ordinal (default 0) */
	const char *cache_dir; /* cuda: the kernel cache (NULL: $KFUSE_CACHE_DIR, else ~/.cache/kfuse); copied */
	int allow_tf32;        /* cuda: nonzero lets f32 contractions round their inputs to tf32 for
				* the tensor cores, as PyTorch's allow_tf32 (off by default; about
				* 3e-4 of the largest output: docs/matmul.md, "TF32") */
} kfuse_compile_opts;

/* Compiles graph (NULL: the first) of m for backend "cpu" (the
 * interpreter), "cuda" (kernels compiled by NVRTC, run through the CUDA
 * driver; needs a GPU to run) or "auto" (cuda when a GPU and its driver
 * are there, else cpu).  o may be NULL.  NULL on an error. */
kfuse_compiled *kfuse_compile(kfuse_model *m, const char *graph, const char *backend,
			      const kfuse_compile_opts *o);
void kfuse_compiled_free(kfuse_compiled *x);
/* "cpu" or "cuda": the backend it runs on (what "auto" chose). */
const char *kfuse_compiled_backend(const kfuse_compiled *x);
/* A graph with symbolic dims compiled for cuda keeps one plan per input
 * shape (specialised and planned at the first run of that shape), at most
 * n of them (default 8; the least recently used is dropped first, and at
 * once when more than n are kept).  0; -1 when n < 1.  Nothing to do for
 * a static graph or the cpu backend (0).  docs/dynamic.md. */
int kfuse_set_max_plans(kfuse_compiled *x, int n);

/* A tensor in the caller's memory: C order (row-major), dense. */
typedef struct kfuse_buffer {
	void *data;                   /* host memory (kfuse_run), or a CUdeviceptr (kfuse_run_device) */
	size_t nbytes;                /* an input's size; the room an output has */
	kfuse_dtype dtype;            /* inputs: must be the graph's; outputs: set by the run */
	int rank;                     /* inputs: the graph's; outputs: set by the run */
	int64_t dim[KFUSE_MAX_RANK];  /* inputs: the shape (it sizes symbolic dims); outputs: set */
} kfuse_buffer;

/* Runs the compiled graph on in[0..nin) (one per graph input, in order)
 * and writes its results into out[0..nout) (one per result).  Host
 * memory.  An output whose nbytes is too small is an error that names the
 * size needed; its dtype, rank and dim are set, so a caller may size it
 * and run again.  0, or -1. */
int kfuse_run(kfuse_compiled *x, const kfuse_buffer *in, int nin, kfuse_buffer *out, int nout);
/* As kfuse_run, on the cuda backend, with device memory (CUdeviceptr values
 * in data, on the compiled device) and a CUstream (NULL: the default
 * stream).  Asynchronous: the work is ordered after what the stream holds
 * when called, and what is queued on the stream after the call runs after
 * it; nothing waits on the host.  The inputs are read and the outputs
 * written on the device by that work.  One run at a time per compiled
 * graph (it keeps its intermediates): calls on different streams must be
 * ordered by the caller.  0, or -1 (the cpu backend: always -1). */
int kfuse_run_device(kfuse_compiled *x, const kfuse_buffer *in, int nin, kfuse_buffer *out, int nout,
		     void *stream);

#ifdef __cplusplus
}
#endif

#endif
