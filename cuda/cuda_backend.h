/* cuda_backend.h: running a graph on the GPU; the CUDA backend's contract
 * with the rest of kfuse (it takes a fused graph, it gives a runnable plan:
 * runtime/backend.h), which the tools include and nothing else above it.
 *
 * A session plans a graph once and runs it many times:
 *   - every top-level node becomes a kernel (cuda/emit_cuda.h): a fusion
 *     node runs its body, any other op runs alone (so a graph not fused
 *     runs one kernel per op); const nodes are uploaded once, reshape is an
 *     alias of its operand;
 *   - the distinct kernels are compiled by NVRTC for the device's arch,
 *     a few per program, programs in parallel, each through the disk kernel
 *     cache (cuda/kcache.h): a second run compiles nothing;
 *   - a fused kernel that spills registers is split: its body's ops run as
 *     one kernel each (reported in the plan notes);
 *   - intermediate buffers share one device arena, placed by liveness so
 *     that buffers whose lifetimes do not overlap reuse memory;
 *   - the launch sequence is captured once into a CUDA graph and replayed.
 * Shapes must be static: a graph with symbolic dims reaches this backend
 * through the plan cache of api/dyn.h, one static copy per input shape,
 * planned as a sized plan (kf_cuda_session_plan_sized) whose kernels read
 * those sizes from arguments.
 * docs/fusion.md has the details, docs/dynamic.md the dynamic shapes.
 */
#ifndef KF_CUDA_BACKEND_H
#define KF_CUDA_BACKEND_H

#include "kf.h"
#include "backend.h"
#include "cuda.h"
#include "emit_cuda.h"

typedef struct kf_cuda_opts {
	int device;
	bool profile;        /* per-kernel table (name, time, bytes, GB/s) into report */
	bool no_graph;       /* launch kernel by kernel instead of a CUDA graph */
	bool no_cache;       /* compile everything, bypassing the disk cache */
	bool dry_run;        /* plan and compile only (no GPU needed): the plan goes to report */
	const char *arch;    /* NULL: the device's ("sm_90"); dry_run: sm_90 */
	const char *cache_dir; /* NULL: as kcache.h says; the backend copies both strings */
	int threads;         /* parallel NVRTC programs; 0: one per core, up to 16 */
	bool allow_tf32;     /* f32 contractions may round their inputs to tf32 for the tensor
			      * cores (PyTorch's allow_tf32; docs/matmul.md has the accuracy):
			      * every f32 contraction fusion gets tf32 = true at plan, and
			      * cuBLAS runs unfused f32 matmuls in tf32 */
	kf_buf *report;      /* plan notes, profile tables; NULL: none.  The tool prints it. */
} kf_cuda_opts;

typedef struct kf_cuda_session kf_cuda_session;

/* NULL with an error in c when the driver or NVRTC is missing (a dry run
 * needs only NVRTC). */
kf_cuda_session *kf_cuda_session_new(kf_ctx *c, const kf_cuda_opts *o);
void kf_cuda_session_free(kf_cuda_session *s);
/* Plans g on first use (again when g changes), then uploads in, runs, and
 * allocates and downloads out (kf_interp_run's contract). */
int kf_cuda_session_run(kf_cuda_session *s, kf_graph *g, const kf_tensor *in, int nin,
			kf_tensor *out, int nout);
/* As kf_cuda_session_run on device memory: in[i].data and out[i].data hold
 * device addresses (out[] typed and sized as g's results), queued on
 * stream (NULL: the default stream) after what it holds, and the stream
 * waits for the results; no host wait but the first run's. */
int kf_cuda_session_run_device(kf_cuda_session *s, kf_graph *g, const kf_tensor *in, int nin,
			       const kf_tensor *out, int nout, kf_custream stream);
/* Plans and compiles g without running it. */
int kf_cuda_session_plan(kf_cuda_session *s, kf_graph *g);
/* The same for g, a copy of sz->sym specialised to sz's sizes (api/dyn.h):
 * its kernels read the dims that come from symbols from arguments
 * (cuda/emit_cuda.h's kf_emit_dyn), so a plan of another size finds them
 * in the kernel cache; each distinct kernel is a program of its own, so
 * that one kernel new to a size compiles alone.  sz->sym must outlive the
 * session's plan.  More than KF_EMIT_MAXSYM symbols: a static plan. */
int kf_cuda_session_plan_sized(kf_cuda_session *s, kf_graph *g, const kf_sizes *sz);

typedef struct kf_cuda_stats {
	double plan_s, emit_s, compile_s, load_s; /* wall seconds of the last plan */
	double hoist_s, route_s, upload_s, memory_s; /* parts of plan_s: constant-only nodes, libraries
							 (open, prepare), constants' uploads, arena and arguments */
	int kernels, distinct, programs, compiled, cached, split;
	size_t arena_bytes, naive_bytes; /* planned intermediates vs one buffer each */
	int64_t graph_bytes;             /* inputs + outputs: the ideal traffic */
	int64_t kernel_bytes;            /* what the kernels read and write */
	int64_t flush_bytes;             /* the last bench's L2 flush per replay (0: none) */
	int64_t file_bytes;              /* file constants this plan read and uploaded */
	int64_t shared_bytes;            /* file constants another plan of the backend had uploaded */
} kf_cuda_stats;
void kf_cuda_session_stats(const kf_cuda_session *s, kf_cuda_stats *out);
/* The architecture s compiles for ("sm_90"). */
const char *kf_cuda_session_arch(const kf_cuda_session *s);

/* Times n replays of the last run's launches on the device (inputs stay
 * resident; CUDA events around each replay).  Median and min in ms.
 * Back to back, a replay finds in L2 what the previous one read (an H200's
 * L2 holds a 16 MiB weight).  $KFUSE_BENCH_FLUSH=1 (or a size in MiB, at
 * least 64) writes a 256 MiB (that size) scratch buffer before each replay,
 * outside its events: a cold-L2 time. */
int kf_cuda_session_bench(kf_cuda_session *s, int n, double *median_ms, double *min_ms);

/* The CUDA toolkit's include directory (holding cooperative_groups.h),
 * for NVRTC programs that include CUDA headers: $KFUSE_CUDA_INCLUDE, then
 * $CUDA_HOME/include, $CUDA_PATH/include, the include/ beside the loaded
 * libnvrtc (nvrtc_path as kf_nvrtc_path gives it; may be NULL), then
 * /usr/local/cuda/include.  0, or -1 when none has it. */
int kf_cuda_include_dir(const char *nvrtc_path, char *out, size_t n);

/* One NVRTC program (of a plan, or of the tuner's candidates): its source
 * (the prelude and kernels, NUL-terminated) and whether its kernels need
 * sm_90a; compiled, an image (cubin) or an error. */
typedef struct kf_cuda_unit {
	const char *src;
	bool sm90a;
	kf_buf image;
	bool cached;         /* the image came from the kernel cache */
	char err[512];       /* empty: compiled */
} kf_cuda_unit;
/* Compiles units *u[0..n) for arch in up to `threads` threads at once (0:
 * one per core, at most 16), each through the kernel cache of cache_dir
 * (NULL: as kcache.h says; no_cache: around it).  Each unit gets its image
 * or its err; nothing else fails. */
void kf_cuda_compile_units(kf_cuda_unit **u, uint32_t n, const char *arch, const char *cache_dir, bool no_cache,
			   int threads);

/* The tensor maps of kernel k (k->ntmap of them) for its parameter
 * values ptr (inputs, then outputs).  0, or -1 with an error. */
int kf_cuda_kernel_tmaps(kf_cuda *cu, const kf_kernel *k, const kf_cuptr *ptr, kf_cuda_tmap *out);
/* The NVRTC target of a kernel on arch: arch, or "sm_90a" for an sm_90a
 * kernel on sm_90. */
void kf_cuda_kernel_arch(const char *arch, bool sm90a, char *out, size_t n);
/* A kernel that walks its units by gridDim (kf_kernel.walk) launches at
 * most what is resident at once on sm SMs holding bps of its blocks each:
 * grid[0] blocks, or with a cluster grid[1] in whole clusters (a second
 * wave would run its CTAs' whole walks after the first: twice the time).
 * grid[] in and out; other kernels unchanged. */
void kf_cuda_fit_walk(const kf_kernel *k, int sm, int bps, unsigned grid[3]);
/* What the emitter may use on device cu (NULL: a dry run) of arch. */
void kf_cuda_emit_target(const kf_cuda *cu, const char *arch, kf_emit_target *t);

/* The backend entry: a session used once. */
int kf_cuda_run(kf_graph *g, const kf_tensor *in, int nin, kf_tensor *out, int nout,
		const kf_cuda_opts *o);

/* The CUDA backend (runtime/backend.h): each compile plans the graph in a
 * session of its own, with the options o (copied).  available() says
 * whether the driver loads and the device is there; without them a
 * dry_run backend still compiles. */
kf_backend *kf_backend_cuda_new(kf_ctx *c, const kf_cuda_opts *o);
/* The session of a plan that kf_backend_cuda_new's backend made (its
 * stats, notes and device bench); NULL for another backend's plan. */
kf_cuda_session *kf_cuda_plan_session(const kf_plan *p);

#endif
