/* embed_device.c: the embedding API's device path (kfuse_run_device) on a
 * GPU, checked against the CPU interpreter and timed against kfuse_run.
 *
 *     embed_device MODEL.kf [PIPELINE [N]]
 *
 * Loads MODEL (static shapes, f32 inputs), optimises it with PIPELINE
 * (default canonicalize,cse,rules,fuse-matmul,fuse,dce), and runs it on the
 * same random inputs: on the interpreter (the reference), on the cuda
 * backend through kfuse_run (host buffers), and through kfuse_run_device
 * (device buffers, a stream of this program's own), twice, the second a
 * replay; each result is compared with the reference.  Then N runs of each
 * cuda path are timed on the host (wall time per run, the device path
 * synchronised once at the end).  The CUDA driver is loaded with dlopen,
 * as kfuse does, so this builds without the toolkit (bench/gpu/
 * embed_device.sh builds and runs it).  Exit 0 when every result matches.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <kfuse/kfuse.h>

typedef int CUresult;
static struct {
	CUresult (*Init)(unsigned);
	CUresult (*DeviceGet)(int *, int);
	CUresult (*PrimaryCtxRetain)(void **, int);
	CUresult (*CtxSetCurrent)(void *);
	CUresult (*MemAlloc)(uint64_t *, size_t);
	CUresult (*MemFree)(uint64_t);
	CUresult (*MemcpyHtoD)(uint64_t, const void *, size_t);
	CUresult (*MemcpyDtoH)(void *, uint64_t, size_t);
	CUresult (*StreamCreate)(void **, unsigned);
	CUresult (*StreamSynchronize)(void *);
} cu;

static void ck(CUresult r, const char *what)
{
	if (r) {
		fprintf(stderr, "embed_device: %s failed (CUresult %d)\n", what, r);
		exit(2);
	}
}

static void load_driver(void)
{
	void *lib = dlopen("libcuda.so.1", RTLD_NOW);
	if (!lib) {
		fprintf(stderr, "embed_device: no CUDA driver: %s\n", dlerror());
		exit(2);
	}
#define SYM(f, n) *(void **)&cu.f = dlsym(lib, n); if (!cu.f) { fprintf(stderr, "no %s\n", n); exit(2); }
	SYM(Init, "cuInit") SYM(DeviceGet, "cuDeviceGet") SYM(PrimaryCtxRetain, "cuDevicePrimaryCtxRetain")
	SYM(CtxSetCurrent, "cuCtxSetCurrent") SYM(MemAlloc, "cuMemAlloc_v2") SYM(MemFree, "cuMemFree_v2")
	SYM(MemcpyHtoD, "cuMemcpyHtoD_v2") SYM(MemcpyDtoH, "cuMemcpyDtoH_v2") SYM(StreamCreate, "cuStreamCreate")
	SYM(StreamSynchronize, "cuStreamSynchronize")
#undef SYM
	int dev;
	void *ctx;
	ck(cu.Init(0), "cuInit");
	ck(cu.DeviceGet(&dev, 0), "cuDeviceGet");
	ck(cu.PrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
	ck(cu.CtxSetCurrent(ctx), "cuCtxSetCurrent");
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static int fail(kfuse_ctx *k, const char *what)
{
	fprintf(stderr, "embed_device: %s:\n%s", what, kfuse_error(k));
	return 2;
}

/* Worst error of got against want in units of the tolerance (<= 1: ok). */
static double worst(const float *got, const float *want, size_t n)
{
	double w = 0;
	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)got[i] - want[i]) / (1e-5 + 1e-4 * fabs(want[i]));
		if (!(d <= w))
			w = d; /* NaN counts as bad */
	}
	return w;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: embed_device MODEL.kf [PIPELINE [N]]\n");
		return 2;
	}
	const char *pipeline = argc > 2 ? argv[2] : "canonicalize,cse,rules,fuse-matmul,fuse,dce";
	int n = argc > 3 ? atoi(argv[3]) : 50;
	load_driver();
	kfuse_ctx *k = kfuse_new();
	kfuse_model *m = kfuse_load(k, argv[1]);
	if (!m || kfuse_pipeline(m, pipeline) < 0)
		return fail(k, "loading and optimising");
	int nin = kfuse_num_inputs(m, NULL), nout = kfuse_num_outputs(m, NULL);
	kfuse_buffer *hin = calloc(nin, sizeof *hin), *din = calloc(nin, sizeof *din);
	kfuse_buffer *ref = calloc(nout, sizeof *ref), *hout = calloc(nout, sizeof *hout), *dout = calloc(nout, sizeof *dout);
	uint64_t seed = 1;
	for (int i = 0; i < nin; i++) {
		kfuse_tensor_info t;
		kfuse_input_info(m, NULL, i, &t);
		if (t.dtype != KFUSE_F32) {
			fprintf(stderr, "embed_device: input %d is %s; f32 only\n", i, kfuse_dtype_name(t.dtype));
			return 2;
		}
		size_t e = 1;
		hin[i] = (kfuse_buffer){.dtype = t.dtype, .rank = t.rank};
		for (int d = 0; d < t.rank; d++)
			e *= (size_t)(hin[i].dim[d] = t.dim[d]);
		float *p = malloc(e * 4 + 4);
		for (size_t q = 0; q < e; q++) {
			seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
			p[q] = (float)((double)(seed >> 11) / 9007199254740992.0 - 0.5);
		}
		hin[i].data = p;
		hin[i].nbytes = e * 4;
		din[i] = hin[i];
		uint64_t dp;
		ck(cu.MemAlloc(&dp, e * 4 + 4), "cuMemAlloc");
		ck(cu.MemcpyHtoD(dp, p, e * 4), "cuMemcpyHtoD");
		din[i].data = (void *)(uintptr_t)dp;
	}
	for (int i = 0; i < nout; i++) {
		kfuse_tensor_info t;
		kfuse_output_info(m, NULL, i, &t);
		size_t e = 1;
		for (int d = 0; d < t.rank; d++)
			e *= (size_t)t.dim[d];
		ref[i] = (kfuse_buffer){.data = malloc(e * 4 + 4), .nbytes = e * 4};
		hout[i] = (kfuse_buffer){.data = malloc(e * 4 + 4), .nbytes = e * 4};
		uint64_t dp;
		ck(cu.MemAlloc(&dp, e * 4 + 4), "cuMemAlloc");
		dout[i] = (kfuse_buffer){.data = (void *)(uintptr_t)dp, .nbytes = e * 4};
	}
	kfuse_compiled *xc = kfuse_compile(m, NULL, "cpu", NULL), *xg = kfuse_compile(m, NULL, "cuda", NULL);
	if (!xc || !xg)
		return fail(k, "compiling");
	if (kfuse_run(xc, hin, nin, ref, nout) < 0)
		return fail(k, "the interpreter");
	void *stream;
	ck(cu.StreamCreate(&stream, 1 /* non-blocking */), "cuStreamCreate");
	int bad = 0;
	for (int round = 0; round < 2; round++) {
		if (kfuse_run(xg, hin, nin, hout, nout) < 0)
			return fail(k, "kfuse_run on cuda");
		if (kfuse_run_device(xg, din, nin, dout, nout, stream) < 0)
			return fail(k, "kfuse_run_device");
		ck(cu.StreamSynchronize(stream), "cuStreamSynchronize");
		for (int i = 0; i < nout; i++) {
			float *got = malloc(dout[i].nbytes + 4);
			ck(cu.MemcpyDtoH(got, (uint64_t)(uintptr_t)dout[i].data, dout[i].nbytes), "cuMemcpyDtoH");
			double wh = worst(hout[i].data, ref[i].data, ref[i].nbytes / 4);
			double wd = worst(got, ref[i].data, ref[i].nbytes / 4);
			printf("round %d output %d: kfuse_run %s (%.3g of tolerance), kfuse_run_device %s (%.3g)\n",
			       round, i, wh <= 1 ? "ok" : "MISMATCH", wh, wd <= 1 ? "ok" : "MISMATCH", wd);
			bad |= !(wh <= 1) || !(wd <= 1);
			free(got);
		}
	}
	double t0 = now();
	for (int r = 0; r < n; r++)
		if (kfuse_run(xg, hin, nin, hout, nout) < 0)
			return fail(k, "kfuse_run on cuda");
	double th = (now() - t0) / n;
	t0 = now();
	for (int r = 0; r < n; r++)
		if (kfuse_run_device(xg, din, nin, dout, nout, stream) < 0)
			return fail(k, "kfuse_run_device");
	ck(cu.StreamSynchronize(stream), "cuStreamSynchronize");
	double td = (now() - t0) / n;
	printf("%s: %d runs each: kfuse_run %.4f ms per run (host buffers), kfuse_run_device %.4f ms per run "
	       "(device buffers, queued on one stream)\n", argv[1], n, th * 1e3, td * 1e3);
	printf("%s\n", bad ? "MISMATCH" : "all results match the interpreter");
	kfuse_compiled_free(xc);
	kfuse_compiled_free(xg);
	kfuse_model_free(m);
	kfuse_free(k);
	return bad;
}
