/* kf_emu_fma.h: the host compiler flags under which the emulations
 * (kf_emu.h, kf_test_emu.h) contract a * b + c into one fused
 * multiply-add, as NVRTC does by default (--fmad=true), so that a kernel
 * whose result hangs on the rounding of a product fails on the host as it
 * does on the GPU (session 18: the attention exponents s log2(e) -
 * m log2(e) at a mask's finfo.min gave inf - inf, NaN, on the H200 and 0
 * in an emulation without fma).  g++ contracts at -O1 only with expensive
 * optimizations on; on x86 only where the CPU has FMA (else no
 * contraction, as before). */
#ifndef KF_EMU_FMA_H
#define KF_EMU_FMA_H

static inline const char *kft_emu_fma(void)
{
#if defined(__x86_64__) || defined(__i386__)
	return __builtin_cpu_supports("fma") ? " -mfma -ffp-contract=fast -fexpensive-optimizations" : "";
#else
	return " -ffp-contract=fast -fexpensive-optimizations";
#endif
}
#endif
