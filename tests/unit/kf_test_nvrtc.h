/* kf_test_nvrtc.h: unit-test helpers around NVRTC (include after
 * cmocka.h): whether libnvrtc loads here, and a kernel compiled to a cubin
 * with ptxas's resource report checked. */
#ifndef KF_TEST_NVRTC_H
#define KF_TEST_NVRTC_H
#include <stdlib.h>
#include <string.h>
#include "emit_cuda.h"
#include "kf.h"
#include "cuda.h"

static inline bool kft_have_nvrtc(void)
{
	kf_ctx *c = kf_ctx_new();
	kf_nvrtc *nv = kf_nvrtc_open(c);
	kf_nvrtc_close(nv);
	kf_ctx_free(c);
	return nv != NULL;
}

/* k (with the prelude) through NVRTC for arch: a cubin (cubin) or PTX
 * into out, the compiler's log (NUL-ended) into log; fails the test when
 * it does not compile. */
static inline void kft_nvrtc_build(const kf_kernel *k, const char *arch, bool cubin, kf_buf *out, kf_buf *log)
{
	kf_ctx *c = kf_ctx_new();
	kf_nvrtc *nv = kf_nvrtc_open(c);
	kf_buf src = {0};
	kf_buf_puts(&src, kf_emit_prelude());
	kf_buf_puts(&src, k->src);
	kf_buf_putc(&src, '\0');
	const char *opts[] = {"-std=c++17", "--ptxas-options=-v"};
	if (kf_nvrtc_compile(nv, src.p, "k.cu", arch, opts, cubin ? 2 : 1, cubin, out, log) != 0) {
		kf_buf d = {0};
		kf_diag_render(c, &d);
		fail_msg("%.*s", (int)d.n, d.p);
	}
	kf_buf_putc(log, '\0');
	kf_buf_free(&src);
	kf_nvrtc_close(nv);
	kf_ctx_free(c);
}

/* Compiles k (with the prelude) for arch to a cubin; fails the test unless
 * ptxas reports no stack frame, no spills and no warning, and (maxreg > 0)
 * at most maxreg registers a thread.  Returns the registers a thread. */
static inline int kft_ptxas_checked_w(const kf_kernel *k, const char *arch, int maxreg, bool warnings);
static inline int kft_ptxas_checked(const kf_kernel *k, const char *arch, int maxreg)
{
	return kft_ptxas_checked_w(k, arch, maxreg, false);
}

/* The same; `warnings`: the front end's warnings allowed (the row
 * kernels' unused shared-memory pointers) */
static inline int kft_ptxas_checked_w(const kf_kernel *k, const char *arch, int maxreg, bool warnings)
{
	kf_buf img = {0}, log = {0};
	kft_nvrtc_build(k, arch, true, &img, &log);
	if (!strstr(log.p, "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads") ||
	    (!warnings && strstr(log.p, "arning")))
		fail_msg("ptxas: %s", log.p);
	const char *u = strstr(log.p, "Used ");
	assert_non_null(u);
	int regs = atoi(u + 5);
	if (maxreg > 0 && regs > maxreg)
		fail_msg("%d registers (at most %d): %s", regs, maxreg, log.p);
	kf_buf_free(&img);
	kf_buf_free(&log);
	return regs;
}

/* k (with the prelude) compiled for arch to PTX, into ptx (NUL-ended). */
static inline void kft_ptx(const kf_kernel *k, const char *arch, kf_buf *ptx)
{
	kf_buf log = {0};
	kft_nvrtc_build(k, arch, false, ptx, &log);
	kf_buf_putc(ptx, '\0');
	kf_buf_free(&log);
}
#endif
