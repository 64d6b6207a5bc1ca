/* cuda.h: NVRTC and the CUDA driver API, loaded with dlopen.
 *
 * Nothing links against CUDA: the binary builds and runs where CUDA is
 * absent, and an open call then fails with an error that says what is
 * missing.  We declare the few driver types we use ourselves (no <cuda.h>),
 * so the build needs no toolkit either.
 *
 * Libraries tried, in order:
 *   NVRTC:  $KFUSE_NVRTC (if set, only that), libnvrtc.so, libnvrtc.so.13,
 *           libnvrtc.so.12, then the same names in $CUDA_HOME/lib64 and
 *           /usr/local/cuda/lib64.
 *   driver: $KFUSE_CUDA_DRIVER (if set, only that), libcuda.so.1, libcuda.so.
 *
 * Every failure is an error in the context that names the CUDA call and
 * carries its error name and string (cuGetErrorName/cuGetErrorString,
 * nvrtcGetErrorString); functions then return -1 (or NULL).
 */
#ifndef KF_CUDA_H
#define KF_CUDA_H

#include "kf.h"

/* ---- NVRTC (needs no GPU) ---------------------------------------------------- */

typedef struct kf_nvrtc kf_nvrtc;

kf_nvrtc *kf_nvrtc_open(kf_ctx *c);
void kf_nvrtc_close(kf_nvrtc *nv);
/* The library that was loaded (as passed to dlopen). */
const char *kf_nvrtc_path(const kf_nvrtc *nv);
int kf_nvrtc_version(kf_nvrtc *nv, int *major, int *minor);
/* Compiles CUDA C++ source src (NUL-terminated) named `name` (used in the
 * log and errors) for arch ("sm_90": real, "compute_90": virtual), with
 * extra options opts[0..nopts).  want_cubin: out receives a cubin (arch must
 * be sm_XX); otherwise PTX text (NUL-terminated in out->p, not counted in
 * out->n).  out is appended to.  log (may be NULL) receives the compiler's
 * log, also on success (warnings).  On a compile error the context gets an
 * error holding the log. */
int kf_nvrtc_compile(kf_nvrtc *nv, const char *src, const char *name, const char *arch,
		     const char *const *opts, int nopts, int want_cubin, kf_buf *out, kf_buf *log);

/* ---- the driver ------------------------------------------------------------------ */

typedef struct kf_cuda kf_cuda;
/* Opaque driver handles (CUmodule, CUfunction, CUstream, CUevent,
 * CUgraphExec) and a device address (CUdeviceptr). */
typedef struct kf_cumodule_ *kf_cumodule;
typedef struct kf_cufunc_ *kf_cufunc;
typedef struct kf_custream_ *kf_custream; /* NULL: the default stream */
typedef struct kf_cuevent_ *kf_cuevent;
typedef struct kf_cugraph_ *kf_cugraph;   /* an instantiated graph */
typedef uint64_t kf_cuptr;

typedef struct kf_cuda_info {
	char name[128];
	char arch[16];          /* "sm_90" */
	int cc_major, cc_minor;
	int sm_count;
	int max_threads_per_block;
	int warp_size;
	int smem_per_block_optin; /* bytes, with cuFuncSetAttribute */
	int smem_per_sm;
	int l2_bytes;
	int coop_launch;        /* cuLaunchCooperativeKernel supported */
	int driver_version;     /* 13000 for 13.0 */
	int tmap;               /* the driver encodes TMA tensor maps (cuTensorMapEncodeTiled) */
	size_t total_mem;
} kf_cuda_info;

typedef struct kf_cuda_funcattr {
	int regs;             /* registers per thread */
	int local_bytes;      /* local memory (spills, stack) per thread */
	int static_smem;      /* static shared memory per block */
	int max_threads;      /* most threads per block this function can launch */
	int ptx_version, binary_version; /* 90 for 9.0 */
} kf_cuda_funcattr;

/* Loads the driver, initialises it and makes device's primary context
 * current to the calling thread.  NULL with a clear error if there is no
 * driver, no GPU or no such device. */
kf_cuda *kf_cuda_open(kf_ctx *c, int device);
void kf_cuda_close(kf_cuda *cu);
const kf_cuda_info *kf_cuda_get_info(const kf_cuda *cu);

/* image: a cubin, or NUL-terminated PTX text (the driver JIT-compiles it). */
int kf_cuda_module_load(kf_cuda *cu, const void *image, kf_cumodule *out);
int kf_cuda_module_unload(kf_cuda *cu, kf_cumodule m);
int kf_cuda_function(kf_cuda *cu, kf_cumodule m, const char *name, kf_cufunc *out);
int kf_cuda_func_attrs(kf_cuda *cu, kf_cufunc f, kf_cuda_funcattr *out);
/* Allows launches of f with `bytes` of dynamic shared memory: a function
 * must ask for it where that and its static shared memory pass 48 KiB
 * (done here only then). */
int kf_cuda_func_set_max_dyn_smem(kf_cuda *cu, kf_cufunc f, int bytes);
/* A TMA tensor map (CUtensorMap: 128 bytes, 64-byte aligned), passed to a
 * kernel by value. */
typedef struct kf_cuda_tmap {
	_Alignas(64) unsigned char b[128];
} kf_cuda_tmap;
/* Encodes a map of the dense row-major buffer at base: outer rows of
 * inner elements of elem bytes (1, 2 or 4; the row length in bytes a
 * multiple of 16), or with mid > 0 outer x mid rows (a 3-D map: a box
 * stays inside one run of mid rows, rows past it read as zeros), boxes of
 * box_inner x box_outer, 128-byte swizzle, out-of-range elements read as
 * zeros.  -1 with an error when the driver lacks cuTensorMapEncodeTiled
 * (kf_cuda_info.tmap) or refuses the map. */
int kf_cuda_tmap_encode(kf_cuda *cu, kf_cuptr base, int elem, uint64_t inner, uint64_t mid, uint64_t outer, unsigned box_inner,
			unsigned box_outer, kf_cuda_tmap *out);
int kf_cuda_occupancy(kf_cuda *cu, kf_cufunc f, int block_threads, size_t dyn_smem, int *blocks_per_sm);

/* n bytes (at least 1), followed by KF_CUDA_SLACK more that may be read:
 * the emitted kernels' contract (emit_cuda.h's KF_EMIT_READ_PAST). */
#define KF_CUDA_SLACK 1024
int kf_cuda_malloc(kf_cuda *cu, size_t n, kf_cuptr *out);
int kf_cuda_free(kf_cuda *cu, kf_cuptr p);
int kf_cuda_h2d(kf_cuda *cu, kf_cuptr dst, const void *src, size_t n);
int kf_cuda_d2h(kf_cuda *cu, void *dst, kf_cuptr src, size_t n);
/* Device to device, queued on stream s. */
int kf_cuda_d2d_async(kf_cuda *cu, kf_cuptr dst, kf_cuptr src, size_t n, kf_custream s);
int kf_cuda_memset(kf_cuda *cu, kf_cuptr dst, uint8_t byte, size_t n);
/* Queued on stream s (returns at once). */
int kf_cuda_memset_async(kf_cuda *cu, kf_cuptr dst, uint8_t byte, size_t n, kf_custream s);

/* args: one pointer per kernel parameter, to its value (as cuLaunchKernel). */
int kf_cuda_launch(kf_cuda *cu, kf_cufunc f, const unsigned grid[3], const unsigned block[3],
		   unsigned dyn_smem, kf_custream s, void **args);
/* A cooperative launch (grid-wide sync); the whole grid must be resident. */
int kf_cuda_launch_coop(kf_cuda *cu, kf_cufunc f, const unsigned grid[3], const unsigned block[3],
			unsigned dyn_smem, kf_custream s, void **args);

int kf_cuda_stream_new(kf_cuda *cu, kf_custream *out);
int kf_cuda_stream_free(kf_cuda *cu, kf_custream s);
/* Waits for stream s, or for the whole context when s is NULL. */
int kf_cuda_sync(kf_cuda *cu, kf_custream s);

int kf_cuda_event_new(kf_cuda *cu, kf_cuevent *out);
int kf_cuda_event_free(kf_cuda *cu, kf_cuevent e);
int kf_cuda_event_record(kf_cuda *cu, kf_cuevent e, kf_custream s);
/* Work queued on s after this waits for e (recorded on another stream). */
int kf_cuda_stream_wait(kf_cuda *cu, kf_custream s, kf_cuevent e);
/* Waits for end, then gives the time from start to end. */
int kf_cuda_event_elapsed(kf_cuda *cu, kf_cuevent start, kf_cuevent end, float *ms);

/* Stream capture: work issued to s between begin and end (s must not be the
 * default stream) is recorded, not run; end instantiates it as a graph. */
int kf_cuda_capture_begin(kf_cuda *cu, kf_custream s);
int kf_cuda_capture_end(kf_cuda *cu, kf_custream s, kf_cugraph *out);
int kf_cuda_graph_launch(kf_cuda *cu, kf_cugraph g, kf_custream s);
int kf_cuda_graph_free(kf_cuda *cu, kf_cugraph g);

/* ---- shared by nvrtc.c and cuda.c ------------------------------------------------- */

/* dlopens the first of names[0..n) that loads; on failure writes the names
 * tried and the last dlerror to why.  Returns the handle or NULL. */
void *kf_cuda_dlopen_first(const char *const *names, int n, char *loaded, size_t loadedlen,
			   char *why, size_t whylen);

#endif
