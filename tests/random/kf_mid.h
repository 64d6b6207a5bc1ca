/* kf_mid.h: one differential check of the middle end: a graph through a
 * pipeline, pass by pass, against the CPU interpreter.
 *
 * After each pass the graph must verify (the pass manager checks it) and
 * compute what it computed before that pass on the same random inputs:
 * bit for bit (NaN as NaN) after passes that must not change a single
 * rounding (cse, dce, fuse, fuse-matmul), within rtol/atol after those that
 * may (canonicalize folds in double, rules replace formulas).  At the end
 * the printed result must parse back and verify, and, when asked, its CUDA
 * kernels must be emitted and compile with NVRTC (sm_90, no GPU needed). */
#ifndef KF_MID_H
#define KF_MID_H

#include "kf.h"
#include "pass.h"

typedef enum {
	KF_MID_OK,
	KF_MID_PIPELINE,  /* the pipeline text or a pass failed (not a verifier error) */
	KF_MID_VERIFY,    /* the graph is broken after a pass */
	KF_MID_DIFFERS,   /* a pass changed what the graph computes */
	KF_MID_INTERP,    /* the interpreter failed on a graph it ran before */
	KF_MID_ROUNDTRIP, /* the printed result does not parse back, or not as valid */
	KF_MID_EMIT,      /* the CUDA emitter failed */
	KF_MID_NVRTC,     /* NVRTC rejected a kernel */
	KF_MID_NKIND
} kf_mid_verdict;

const char *kf_mid_verdict_name(kf_mid_verdict v); /* "differs", ... */
int kf_mid_verdict_parse(const char *s);          /* -1 when unknown */

/* Kernels compiled already (by the hash in their names), so that a run
 * over many graphs compiles each distinct kernel once. */
typedef struct kf_mid_seen kf_mid_seen;
kf_mid_seen *kf_mid_seen_new(void);
void kf_mid_seen_free(kf_mid_seen *s);

typedef struct kf_mid_opts {
	const kf_passreg *reg; /* the passes (kf_passes_builtin) */
	const char *pipeline;  /* passes separated by top-level commas */
	uint64_t seed;         /* of the random inputs */
	double rtol, atol;     /* for canonicalize and rules (0: 1e-3, 1e-4; looser with f16/bf16) */
	bool nvrtc;            /* compile the result's kernels */
	bool emit;             /* emit the result's kernels (without compiling them) */
	void *nv;              /* a kf_nvrtc opened by the caller (cuda.h), or NULL */
	kf_mid_seen *seen;     /* skip the kernels compiled before; NULL: compile all */
	uint64_t *compiled;    /* kernels compiled are added here; NULL: not counted */
} kf_mid_opts;

/* Checks the graphs of text (a .kf module of one or more graphs).  The
 * text must parse and verify (else KF_MID_PIPELINE).  report gets one line
 * saying what failed, where, and the graph before the pass that broke it. */
kf_mid_verdict kf_mid_check(kf_ctx *c, const char *name, const char *text, size_t len, const kf_mid_opts *o,
			    kf_buf *report);

/* Splits pipeline text at top-level commas into passes[0..*n) (pointers into
 * a copy the caller frees with free(*buf)).  Returns 0, or -1 on
 * unbalanced braces. */
int kf_mid_split(const char *pipeline, char **buf, char ***passes, int *n);

#endif
