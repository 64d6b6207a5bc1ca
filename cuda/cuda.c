/* cuda.c: the CUDA driver API through dlopen.
 *
 * We use the device's primary context (cuDevicePrimaryCtxRetain), as the
 * runtime API does, so kfuse shares a context with any CUDA library in the
 * same process and avoids cuCtxCreate, whose signature changed in CUDA 13.
 * Entry points are looked up by the versioned names that <cuda.h> maps the
 * plain names to (cuMemAlloc -> cuMemAlloc_v2, ...); each table entry lists
 * the names to try, newest first, so an older driver still works.
 */
#include "cuda.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUgraph_st *CUgraph;

enum {
	CUDA_SUCCESS = 0,
	CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1,
	CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10,
	CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
	CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38,
	CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
	CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
	CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 81,
	CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH = 95,
	CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
	CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0,
	CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1,
	CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3,
	CU_FUNC_ATTRIBUTE_NUM_REGS = 4,
	CU_FUNC_ATTRIBUTE_PTX_VERSION = 5,
	CU_FUNC_ATTRIBUTE_BINARY_VERSION = 6,
	CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
	CU_STREAM_NON_BLOCKING = 1,
	CU_EVENT_DEFAULT = 0,
	CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1,
};

typedef CUresult (*launch_fn)(kf_cufunc, unsigned, unsigned, unsigned, unsigned, unsigned,
			      unsigned, unsigned, kf_custream, void **, void **);
typedef CUresult (*coop_fn)(kf_cufunc, unsigned, unsigned, unsigned, unsigned, unsigned,
			    unsigned, unsigned, kf_custream, void **);

/* One struct of function pointers, filled from the table below. */
typedef struct cu_api {
	CUresult (*GetErrorName)(CUresult, const char **);
	CUresult (*GetErrorString)(CUresult, const char **);
	CUresult (*Init)(unsigned);
	CUresult (*DriverGetVersion)(int *);
	CUresult (*DeviceGetCount)(int *);
	CUresult (*DeviceGet)(CUdevice *, int);
	CUresult (*DeviceGetName)(char *, int, CUdevice);
	CUresult (*DeviceGetAttribute)(int *, int, CUdevice);
	CUresult (*DeviceTotalMem)(size_t *, CUdevice);
	CUresult (*PrimaryCtxRetain)(CUcontext *, CUdevice);
	CUresult (*PrimaryCtxRelease)(CUdevice);
	CUresult (*CtxSetCurrent)(CUcontext);
	CUresult (*CtxSynchronize)(void);
	CUresult (*ModuleLoadData)(kf_cumodule *, const void *);
	CUresult (*ModuleUnload)(kf_cumodule);
	CUresult (*ModuleGetFunction)(kf_cufunc *, kf_cumodule, const char *);
	CUresult (*FuncGetAttribute)(int *, int, kf_cufunc);
	CUresult (*FuncSetAttribute)(kf_cufunc, int, int);
	CUresult (*OccupancyMaxActiveBlocksPerMultiprocessor)(int *, kf_cufunc, int, size_t);
	CUresult (*MemAlloc)(kf_cuptr *, size_t);
	CUresult (*MemFree)(kf_cuptr);
	CUresult (*MemcpyHtoD)(kf_cuptr, const void *, size_t);
	CUresult (*MemcpyDtoH)(void *, kf_cuptr, size_t);
	CUresult (*MemcpyDtoDAsync)(kf_cuptr, kf_cuptr, size_t, kf_custream);
	CUresult (*MemsetD8)(kf_cuptr, unsigned char, size_t);
	CUresult (*MemsetD8Async)(kf_cuptr, unsigned char, size_t, kf_custream);
	launch_fn LaunchKernel;
	coop_fn LaunchCooperativeKernel;
	CUresult (*StreamCreate)(kf_custream *, unsigned);
	CUresult (*StreamDestroy)(kf_custream);
	CUresult (*StreamSynchronize)(kf_custream);
	CUresult (*EventCreate)(kf_cuevent *, unsigned);
	CUresult (*EventDestroy)(kf_cuevent);
	CUresult (*EventRecord)(kf_cuevent, kf_custream);
	CUresult (*StreamWaitEvent)(kf_custream, kf_cuevent, unsigned);
	CUresult (*EventSynchronize)(kf_cuevent);
	CUresult (*EventElapsedTime)(float *, kf_cuevent, kf_cuevent);
	CUresult (*StreamBeginCapture)(kf_custream, int);
	CUresult (*StreamEndCapture)(kf_custream, CUgraph *);
	CUresult (*GraphInstantiateWithFlags)(kf_cugraph *, CUgraph, unsigned long long);
	CUresult (*GraphLaunch)(kf_cugraph, kf_custream);
	CUresult (*GraphExecDestroy)(kf_cugraph);
	CUresult (*GraphDestroy)(CUgraph);
} cu_api;

static const struct {
	size_t off;
	const char *names[2]; /* tried in order */
} cu_syms[] = {
#define E(field, n1, n2) {offsetof(cu_api, field), {n1, n2}}
	E(GetErrorName, "cuGetErrorName", NULL),
	E(GetErrorString, "cuGetErrorString", NULL),
	E(Init, "cuInit", NULL),
	E(DriverGetVersion, "cuDriverGetVersion", NULL),
	E(DeviceGetCount, "cuDeviceGetCount", NULL),
	E(DeviceGet, "cuDeviceGet", NULL),
	E(DeviceGetName, "cuDeviceGetName", NULL),
	E(DeviceGetAttribute, "cuDeviceGetAttribute", NULL),
	E(DeviceTotalMem, "cuDeviceTotalMem_v2", NULL),
	E(PrimaryCtxRetain, "cuDevicePrimaryCtxRetain", NULL),
	E(PrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"),
	E(CtxSetCurrent, "cuCtxSetCurrent", NULL),
	E(CtxSynchronize, "cuCtxSynchronize", NULL),
	E(ModuleLoadData, "cuModuleLoadData", NULL),
	E(ModuleUnload, "cuModuleUnload", NULL),
	E(ModuleGetFunction, "cuModuleGetFunction", NULL),
	E(FuncGetAttribute, "cuFuncGetAttribute", NULL),
	E(FuncSetAttribute, "cuFuncSetAttribute", NULL),
	E(OccupancyMaxActiveBlocksPerMultiprocessor, "cuOccupancyMaxActiveBlocksPerMultiprocessor", NULL),
	E(MemAlloc, "cuMemAlloc_v2", NULL),
	E(MemFree, "cuMemFree_v2", NULL),
	E(MemcpyHtoD, "cuMemcpyHtoD_v2", NULL),
	E(MemcpyDtoH, "cuMemcpyDtoH_v2", NULL),
	E(MemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2", NULL),
	E(MemsetD8, "cuMemsetD8_v2", NULL),
	E(MemsetD8Async, "cuMemsetD8Async", NULL),
	E(LaunchKernel, "cuLaunchKernel", NULL),
	E(LaunchCooperativeKernel, "cuLaunchCooperativeKernel", NULL),
	E(StreamCreate, "cuStreamCreate", NULL),
	E(StreamDestroy, "cuStreamDestroy_v2", "cuStreamDestroy"),
	E(StreamSynchronize, "cuStreamSynchronize", NULL),
	E(EventCreate, "cuEventCreate", NULL),
	E(EventDestroy, "cuEventDestroy_v2", "cuEventDestroy"),
	E(EventRecord, "cuEventRecord", NULL),
	E(StreamWaitEvent, "cuStreamWaitEvent", NULL),
	E(EventSynchronize, "cuEventSynchronize", NULL),
	E(EventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime"),
	E(StreamBeginCapture, "cuStreamBeginCapture_v2", NULL),
	E(StreamEndCapture, "cuStreamEndCapture", NULL),
	E(GraphInstantiateWithFlags, "cuGraphInstantiateWithFlags", NULL),
	E(GraphLaunch, "cuGraphLaunch", NULL),
	E(GraphExecDestroy, "cuGraphExecDestroy", NULL),
	E(GraphDestroy, "cuGraphDestroy", NULL),
#undef E
};

struct kf_cuda {
	kf_ctx *ctx;
	void *lib;
	char path[512];
	CUdevice dev;
	CUcontext cuctx;
	kf_cuda_info info;
	cu_api api;
	/* optional (CUDA 12+): NULL when the driver lacks it, and then no
	 * kernel that takes tensor maps is planned (kf_cuda_info.tmap = 0) */
	CUresult (*TensorMapEncodeTiled)(void *, int, unsigned, void *, const uint64_t *, const uint64_t *,
					 const unsigned *, const unsigned *, int, int, int, int);
};

/* Reports a failed driver call with its error name and text.  A stub or
 * broken driver may not even name its errors, so the number is the
 * fallback, and the errors a user can fix get a hint. */
static int cu_fail(kf_cuda *cu, const char *what, CUresult r)
{
	const char *name = NULL, *str = NULL, *hint = "";
	char num[32];
	if (cu->api.GetErrorName && cu->api.GetErrorName(r, &name) != CUDA_SUCCESS)
		name = NULL;
	if (cu->api.GetErrorString && cu->api.GetErrorString(r, &str) != CUDA_SUCCESS)
		str = NULL;
	if (!name) {
		snprintf(num, sizeof num, "CUDA error %d", r);
		name = num;
	}
	if (r == 34) /* CUDA_ERROR_STUB_LIBRARY */
		hint = "; this libcuda is the toolkit's link stub, not a driver (is the NVIDIA driver installed?)";
	else if (r == 35) /* CUDA_ERROR_INSUFFICIENT_DRIVER */
		hint = "; the NVIDIA driver is older than this CUDA needs";
	else if (r == 100) /* CUDA_ERROR_NO_DEVICE */
		hint = "; use --backend=cpu on a machine without a GPU";
	else if (r == 209) /* CUDA_ERROR_NO_BINARY_FOR_GPU */
		hint = "; the kernel was compiled for another architecture";
	else if (r == 222) /* CUDA_ERROR_UNSUPPORTED_PTX_VERSION */
		hint = "; the driver is older than the NVRTC that wrote the PTX (update the driver, "
		       "or point KFUSE_NVRTC at an older libnvrtc)";
	kf_error(cu->ctx, KF_NOLOC, "%s failed: %s (%s)%s", what, name,
		 str ? str : "no description", hint);
	return -1;
}

#define CK(call, what) \
	do { \
		CUresult r_ = (call); \
		if (r_ != CUDA_SUCCESS) \
			return cu_fail(cu, what, r_); \
	} while (0)

static int load_driver(kf_cuda *cu)
{
	const char *env = getenv("KFUSE_CUDA_DRIVER");
	const char *def[] = {"libcuda.so.1", "libcuda.so"};
	const char *one[1] = {env};
	char why[1400];

	cu->lib = env && *env ? kf_cuda_dlopen_first(one, 1, cu->path, sizeof cu->path, why, sizeof why)
			      : kf_cuda_dlopen_first(def, 2, cu->path, sizeof cu->path, why, sizeof why);
	if (!cu->lib) {
		kf_error(cu->ctx, KF_NOLOC, "cannot load the CUDA driver (%s); the cuda backend needs "
			 "an NVIDIA GPU and its driver (use --backend=cpu without one)", why);
		return -1;
	}
	for (size_t i = 0; i < sizeof cu_syms / sizeof cu_syms[0]; i++) {
		void *p = NULL;
		for (int k = 0; k < 2 && !p && cu_syms[i].names[k]; k++)
			p = dlsym(cu->lib, cu_syms[i].names[k]);
		if (!p) {
			kf_error(cu->ctx, KF_NOLOC, "the CUDA driver %s lacks %s; it is too old for kfuse "
				 "(CUDA 11.4 or newer is needed)", cu->path, cu_syms[i].names[0]);
			return -1;
		}
		memcpy((char *)&cu->api + cu_syms[i].off, &p, sizeof p);
	}
	*(void **)&cu->TensorMapEncodeTiled = getenv("KFUSE_NO_TMAP") ? NULL : dlsym(cu->lib, "cuTensorMapEncodeTiled");
	return 0;
}

static int query_info(kf_cuda *cu)
{
	kf_cuda_info *in = &cu->info;
	static const struct { int attr; size_t off; } attrs[] = {
		{CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, offsetof(kf_cuda_info, cc_major)},
		{CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, offsetof(kf_cuda_info, cc_minor)},
		{CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, offsetof(kf_cuda_info, sm_count)},
		{CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, offsetof(kf_cuda_info, max_threads_per_block)},
		{CU_DEVICE_ATTRIBUTE_WARP_SIZE, offsetof(kf_cuda_info, warp_size)},
		{CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, offsetof(kf_cuda_info, smem_per_block_optin)},
		{CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, offsetof(kf_cuda_info, smem_per_sm)},
		{CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, offsetof(kf_cuda_info, l2_bytes)},
		{CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, offsetof(kf_cuda_info, coop_launch)},
	};
	for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++)
		CK(cu->api.DeviceGetAttribute((int *)((char *)in + attrs[i].off), attrs[i].attr, cu->dev),
		   "cuDeviceGetAttribute");
	CK(cu->api.DeviceGetName(in->name, (int)sizeof in->name, cu->dev), "cuDeviceGetName");
	CK(cu->api.DeviceTotalMem(&in->total_mem, cu->dev), "cuDeviceTotalMem");
	CK(cu->api.DriverGetVersion(&in->driver_version), "cuDriverGetVersion");
	snprintf(in->arch, sizeof in->arch, "sm_%d%d", in->cc_major, in->cc_minor);
	in->tmap = cu->TensorMapEncodeTiled != NULL;
	return 0;
}

static int start(kf_cuda *cu, int device)
{
	int n = 0;
	CK(cu->api.Init(0), "cuInit");
	CK(cu->api.DeviceGetCount(&n), "cuDeviceGetCount");
	if (device < 0 || device >= n) {
		kf_error(cu->ctx, KF_NOLOC, "CUDA device %d does not exist (this machine has %d)", device, n);
		return -1;
	}
	CK(cu->api.DeviceGet(&cu->dev, device), "cuDeviceGet");
	CK(cu->api.PrimaryCtxRetain(&cu->cuctx, cu->dev), "cuDevicePrimaryCtxRetain");
	CK(cu->api.CtxSetCurrent(cu->cuctx), "cuCtxSetCurrent");
	return query_info(cu);
}

kf_cuda *kf_cuda_open(kf_ctx *c, int device)
{
	kf_cuda *cu = calloc(1, sizeof *cu);
	if (!cu) {
		kf_error(c, KF_NOLOC, "out of memory");
		return NULL;
	}
	cu->ctx = c;
	if (load_driver(cu) < 0 || start(cu, device) < 0) {
		kf_cuda_close(cu);
		return NULL;
	}
	return cu;
}

void kf_cuda_close(kf_cuda *cu)
{
	if (!cu)
		return;
	if (cu->cuctx)
		cu->api.PrimaryCtxRelease(cu->dev);
	/* The driver stays loaded, as NVRTC does (see kf_nvrtc_close): it is
	 * not meant to be unloaded while the process may still use CUDA. */
	free(cu);
}

const kf_cuda_info *kf_cuda_get_info(const kf_cuda *cu) { return &cu->info; }

int kf_cuda_module_load(kf_cuda *cu, const void *image, kf_cumodule *out)
{
	CK(cu->api.ModuleLoadData(out, image), "cuModuleLoadData");
	return 0;
}

int kf_cuda_module_unload(kf_cuda *cu, kf_cumodule m)
{
	CK(cu->api.ModuleUnload(m), "cuModuleUnload");
	return 0;
}

int kf_cuda_function(kf_cuda *cu, kf_cumodule m, const char *name, kf_cufunc *out)
{
	CUresult r = cu->api.ModuleGetFunction(out, m, name);
	if (r != CUDA_SUCCESS) {
		char what[300];
		snprintf(what, sizeof what, "cuModuleGetFunction('%s')", name);
		return cu_fail(cu, what, r);
	}
	return 0;
}

int kf_cuda_func_attrs(kf_cuda *cu, kf_cufunc f, kf_cuda_funcattr *out)
{
	static const struct { int attr; size_t off; } attrs[] = {
		{CU_FUNC_ATTRIBUTE_NUM_REGS, offsetof(kf_cuda_funcattr, regs)},
		{CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, offsetof(kf_cuda_funcattr, local_bytes)},
		{CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, offsetof(kf_cuda_funcattr, static_smem)},
		{CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, offsetof(kf_cuda_funcattr, max_threads)},
		{CU_FUNC_ATTRIBUTE_PTX_VERSION, offsetof(kf_cuda_funcattr, ptx_version)},
		{CU_FUNC_ATTRIBUTE_BINARY_VERSION, offsetof(kf_cuda_funcattr, binary_version)},
	};
	memset(out, 0, sizeof *out);
	for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++)
		CK(cu->api.FuncGetAttribute((int *)((char *)out + attrs[i].off), attrs[i].attr, f),
		   "cuFuncGetAttribute");
	return 0;
}

int kf_cuda_func_set_max_dyn_smem(kf_cuda *cu, kf_cufunc f, int bytes)
{
	int st = 0;
	CK(cu->api.FuncGetAttribute(&st, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f), "cuFuncGetAttribute");
	if (bytes + st <= 48 * 1024)
		return 0;
	CK(cu->api.FuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes),
	   "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
	return 0;
}

int kf_cuda_tmap_encode(kf_cuda *cu, kf_cuptr base, int elem, uint64_t inner, uint64_t mid, uint64_t outer, unsigned box_inner,
			unsigned box_outer, kf_cuda_tmap *out)
{
	if (!cu->TensorMapEncodeTiled) {
		kf_error(cu->ctx, KF_NOLOC, "the CUDA driver %s lacks cuTensorMapEncodeTiled (CUDA 12 or newer)",
			 cu->path);
		return -1;
	}
	/* CU_TENSOR_MAP_DATA_TYPE_UINT8 (0), UINT16 (1), UINT32 (2): a copy
	 * moves bytes, and zero bits fill out-of-range elements of any type */
	int dtype = elem == 1 ? 0 : elem == 2 ? 1 : 2;
	/* 2-D: [outer][inner]; 3-D: [outer][mid][inner], the box one deep */
	uint64_t dim2[2] = {inner, outer}, st2[1] = {inner * (uint64_t)elem};
	uint64_t dim3[3] = {inner, mid, outer}, st3[2] = {inner * (uint64_t)elem, inner * mid * (uint64_t)elem};
	unsigned box[3] = {box_inner, box_outer, 1}, estride[3] = {1, 1, 1};
	memset(out, 0, sizeof *out);
	/* interleave none (0), swizzle 128B (3), L2 promotion 256B (3), OOB fill zeros (0) */
	CK(cu->TensorMapEncodeTiled(out->b, dtype, mid ? 3 : 2, (void *)(uintptr_t)base, mid ? dim3 : dim2,
				    mid ? st3 : st2, box, estride, 0, 3, 3, 0),
	   "cuTensorMapEncodeTiled");
	return 0;
}

int kf_cuda_occupancy(kf_cuda *cu, kf_cufunc f, int block_threads, size_t dyn_smem, int *blocks_per_sm)
{
	CK(cu->api.OccupancyMaxActiveBlocksPerMultiprocessor(blocks_per_sm, f, block_threads, dyn_smem),
	   "cuOccupancyMaxActiveBlocksPerMultiprocessor");
	return 0;
}

int kf_cuda_malloc(kf_cuda *cu, size_t n, kf_cuptr *out)
{
	CUresult r = cu->api.MemAlloc(out, n + KF_CUDA_SLACK);
	if (r != CUDA_SUCCESS) {
		char what[64];
		snprintf(what, sizeof what, "cuMemAlloc(%zu bytes)", n);
		return cu_fail(cu, what, r);
	}
	return 0;
}

int kf_cuda_free(kf_cuda *cu, kf_cuptr p)
{
	if (!p)
		return 0;
	CK(cu->api.MemFree(p), "cuMemFree");
	return 0;
}

int kf_cuda_h2d(kf_cuda *cu, kf_cuptr dst, const void *src, size_t n)
{
	if (n)
		CK(cu->api.MemcpyHtoD(dst, src, n), "cuMemcpyHtoD");
	return 0;
}

int kf_cuda_d2h(kf_cuda *cu, void *dst, kf_cuptr src, size_t n)
{
	if (n)
		CK(cu->api.MemcpyDtoH(dst, src, n), "cuMemcpyDtoH");
	return 0;
}

int kf_cuda_d2d_async(kf_cuda *cu, kf_cuptr dst, kf_cuptr src, size_t n, kf_custream s)
{
	if (n)
		CK(cu->api.MemcpyDtoDAsync(dst, src, n, s), "cuMemcpyDtoDAsync");
	return 0;
}

int kf_cuda_memset(kf_cuda *cu, kf_cuptr dst, uint8_t byte, size_t n)
{
	if (n)
		CK(cu->api.MemsetD8(dst, byte, n), "cuMemsetD8");
	return 0;
}

int kf_cuda_memset_async(kf_cuda *cu, kf_cuptr dst, uint8_t byte, size_t n, kf_custream s)
{
	if (n)
		CK(cu->api.MemsetD8Async(dst, byte, n, s), "cuMemsetD8Async");
	return 0;
}

int kf_cuda_launch(kf_cuda *cu, kf_cufunc f, const unsigned grid[3], const unsigned block[3],
		   unsigned dyn_smem, kf_custream s, void **args)
{
	CK(cu->api.LaunchKernel(f, grid[0], grid[1], grid[2], block[0], block[1], block[2],
				dyn_smem, s, args, NULL), "cuLaunchKernel");
	return 0;
}

int kf_cuda_launch_coop(kf_cuda *cu, kf_cufunc f, const unsigned grid[3], const unsigned block[3],
			unsigned dyn_smem, kf_custream s, void **args)
{
	if (!cu->info.coop_launch) {
		kf_error(cu->ctx, KF_NOLOC, "%s does not support cooperative launches", cu->info.name);
		return -1;
	}
	CK(cu->api.LaunchCooperativeKernel(f, grid[0], grid[1], grid[2], block[0], block[1], block[2],
					   dyn_smem, s, args), "cuLaunchCooperativeKernel");
	return 0;
}

int kf_cuda_stream_new(kf_cuda *cu, kf_custream *out)
{
	CK(cu->api.StreamCreate(out, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
	return 0;
}

int kf_cuda_stream_free(kf_cuda *cu, kf_custream s)
{
	CK(cu->api.StreamDestroy(s), "cuStreamDestroy");
	return 0;
}

int kf_cuda_sync(kf_cuda *cu, kf_custream s)
{
	if (s)
		CK(cu->api.StreamSynchronize(s), "cuStreamSynchronize");
	else
		CK(cu->api.CtxSynchronize(), "cuCtxSynchronize");
	return 0;
}

int kf_cuda_event_new(kf_cuda *cu, kf_cuevent *out)
{
	CK(cu->api.EventCreate(out, CU_EVENT_DEFAULT), "cuEventCreate");
	return 0;
}

int kf_cuda_event_free(kf_cuda *cu, kf_cuevent e)
{
	CK(cu->api.EventDestroy(e), "cuEventDestroy");
	return 0;
}

int kf_cuda_event_record(kf_cuda *cu, kf_cuevent e, kf_custream s)
{
	CK(cu->api.EventRecord(e, s), "cuEventRecord");
	return 0;
}

int kf_cuda_stream_wait(kf_cuda *cu, kf_custream s, kf_cuevent e)
{
	CK(cu->api.StreamWaitEvent(s, e, 0), "cuStreamWaitEvent");
	return 0;
}

int kf_cuda_event_elapsed(kf_cuda *cu, kf_cuevent start, kf_cuevent end, float *ms)
{
	CK(cu->api.EventSynchronize(end), "cuEventSynchronize");
	CK(cu->api.EventElapsedTime(ms, start, end), "cuEventElapsedTime");
	return 0;
}

int kf_cuda_capture_begin(kf_cuda *cu, kf_custream s)
{
	if (!s) {
		kf_error(cu->ctx, KF_NOLOC, "cannot capture the default stream into a CUDA graph");
		return -1;
	}
	/* Thread-local: other threads' unrelated CUDA calls stay legal
	 * while we capture. */
	CK(cu->api.StreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "cuStreamBeginCapture");
	return 0;
}

int kf_cuda_capture_end(kf_cuda *cu, kf_custream s, kf_cugraph *out)
{
	CUgraph g = NULL;
	CK(cu->api.StreamEndCapture(s, &g), "cuStreamEndCapture");
	CUresult r = cu->api.GraphInstantiateWithFlags(out, g, 0);
	/* The executable graph is independent of the captured one. */
	cu->api.GraphDestroy(g);
	if (r != CUDA_SUCCESS)
		return cu_fail(cu, "cuGraphInstantiate", r);
	return 0;
}

int kf_cuda_graph_launch(kf_cuda *cu, kf_cugraph g, kf_custream s)
{
	CK(cu->api.GraphLaunch(g, s), "cuGraphLaunch");
	return 0;
}

int kf_cuda_graph_free(kf_cuda *cu, kf_cugraph g)
{
	CK(cu->api.GraphExecDestroy(g), "cuGraphExecDestroy");
	return 0;
}
