/* emit_cuda.h: the CUDA emitter: one `extern "C" __global__` kernel per
 * fusion node, and per unfused op (wrapped as a one-node kernel at emit time,
 * so that a graph without `fuse` in its pipeline runs one kernel per op).
 *
 * The text of a kernel is canonical: names inside come from its structure
 * (p0.. inputs, o0.. outputs, t0.. temporaries in emission order), constants
 * and shapes are written into it, and the kernel's name is kf_ + 16 hex
 * digits of a hash of the text.  Equal kernels have equal names and text, so
 * the runtime compiles each once and the disk cache key is stable.
 * docs/fusion.md describes the kernel shapes.
 */
#ifndef KF_EMIT_CUDA_H
#define KF_EMIT_CUDA_H

#include "kf.h"

typedef enum {
	KF_KK_LOOP,    /* grid-stride element-wise loop, vectorised where it can be */
	KF_KK_ROW,     /* rows in registers: warp shuffles and a block reduce */
	KF_KK_REDUCE,  /* a generic reduction: one thread per output element */
	KF_KK_MATMUL,  /* tiled matmul / gemm */
	KF_KK_PERSISTENT, /* a whole recurrence, cooperative launch (emit_persistent.c) */
	KF_KK_COLREDUCE, /* reductions over other axes: a thread per column (emit_colreduce.c) */
	KF_KK_ATTENTION, /* scaled dot-product attention, one kernel (emit_attention.c) */
	KF_KK_WINDOW,  /* max_pool, avg_pool, conv_transpose: a thread per output (emit_conv.c) */
} kf_kernel_kind;

const char *kf_kernel_kind_name(int kind);

/* A TMA tensor map the kernel takes by value (after its pointers, as
 * `const __grid_constant__ KfTmap tmI`): the buffer of input `param` seen
 * as `outer` rows of `inner` elements of `elem` bytes (dense), or, with
 * mid > 0, as outer x mid x inner (dense: copies stay inside one `mid`
 * run, rows past it are zeros), copied in boxes of box_inner x box_outer
 * (x 1) with 128-byte swizzle.  The runtime encodes it from the buffer's
 * address (cuTensorMapEncodeTiled). */
typedef struct kf_tmap_spec {
	int param, elem;
	int64_t inner, outer, mid;
	int box_inner, box_outer;
} kf_tmap_spec;

typedef struct kf_kernel {
	char name[24];      /* kf_0123456789abcdef */
	char *src;          /* the kernel (without the prelude), NUL-terminated */
	int kind;           /* kf_kernel_kind */
	kf_nid node;        /* the node it runs: a top-level node, or a body node
			       when a fusion was split */
	uint32_t nin, nout;
	kf_vid *in, *out;   /* parameters in order: inputs, then outputs */
	int block;          /* threads per block */
	int64_t units;      /* blocks that give every work unit its own block;
			       the kernels loop (grid-stride), so fewer is fine */
	int per_sm;         /* grid-stride kernels: blocks per SM to launch (the
			       grid is then balanced, every block making the
			       same number of trips); 0: as many as fit; -1:
			       exactly `units` (the kernel does not loop) */
	unsigned grid_y, grid_z; /* matmul tiles; 1 otherwise */
	int smem;           /* dynamic shared memory bytes per block (contraction kernels); 0 otherwise */
	int64_t bytes;      /* bytes the kernel reads and writes, once each */
	int nops;           /* ops it computes */
	bool sm90a;         /* uses wgmma/setmaxnreg: compile for sm_90a, not sm_90 */
	int cluster;        /* CTAs per thread-block cluster along y, compiled in
			       (__cluster_dims__; grid_y is a multiple); 0: none */
	int ntmap;          /* tensor maps after the pointer parameters */
	kf_tmap_spec tmap[3];
	int layers;         /* a persistent stack (cuda/emit_stack.c): its layers, whose
			       groups (`units`) must all be resident at once; 0 otherwise */
	int min_blocks;     /* __launch_bounds__'s blocks per SM to fit (0: not given) */
	bool walk;          /* it walks its units by gridDim (the persistent wgmma): the
			       runtime may launch fewer blocks than emitted, and launches
			       at most what is resident at once (kf_cuda_fit_walk) */
	char why[160];      /* kf_emit_node_for returned 2: why the fusion's kernel cannot run it */
	uint32_t kd;        /* sized plans: the sizes it reads (bit i: kf_emit_dyn's symbol i),
			       parameters after the tensor maps, in increasing i */
	bool kd64;          /* those parameters are long long (else int) */
	int dynbad;         /* sized plans: symbolic forms written as numbers because they did
			       not evaluate to them (kx_dim; the tests want none) */
	char bucket[48];    /* sized plans: the buckets its choices were made for
			       ("M<=4096"; empty: none), for reports */
} kf_kernel;

/* What the emitter may assume of the device.  wgmma: 1 when it is an
 * sm_90 GPU whose driver encodes tensor maps (the wgmma contraction kernel
 * runs there and is the default for f16/bf16), -1 when not (a `wg...` tile
 * is passed over), 0 when unknown (kfuse-opt --emit: a `wg...` tile asked
 * for is emitted, the default stays mma.sync). */
/* A sized plan (api/dyn.h): the graph being emitted is a copy of `sym`
 * (same node and value ids) specialised to size val[i] of symbol sid[i].
 * A kernel then reads the dims that come from symbols from arguments of
 * its own (kf_kernel.kd) instead of writing the numbers into its text, so
 * that every size whose choices agree runs the same text (the kernel
 * cache finds it).  The choices that shape a text (tile configs, vector
 * widths, 32- or 64-bit indices) are made for rep[i], the bucket of val[i]
 * (the next power of two, kf_emit_bucket), where they depend on sizes;
 * divisibility is what the symbolic dim states (768*T is a multiple of
 * 256, T is not).  Every dim written as an expression is checked to
 * evaluate to the number it replaces (else the number is written), so a
 * text is right for each size that emits it. */
typedef struct kf_emit_dyn {
	const kf_graph *sym;
	const kf_sid *sid;
	const int64_t *val, *rep;
	uint32_t n;            /* at most KF_EMIT_MAXSYM */
	/* NULL, or sym at generic sizes (runtime/backend.h's kf_sizes.probe):
	 * symbol i of size pval[i] (a prime; 0: none).  An emitter that
	 * computes a quantity from views (attention) computes it there too;
	 * the primes it is a multiple of say which symbols it is made of. */
	const kf_graph *probe;
	const int64_t *pval;
} kf_emit_dyn;
#define KF_EMIT_MAXSYM 16

/* What a kernel may assume of the buffers it is given: at least this
 * many bytes past each one's end can be read (never written; what is read
 * there is never used).  The attention kernels' last key tile then reads
 * a mask's columns past the keys at constant offsets from one base, where
 * clamping each column to the last key computed an address per read (18%
 * more instructions in the sized kernel, s10g).  The backend allocates so
 * (cuda/cuda.h's KF_CUDA_SLACK); the host emulation of the tests too. */
#define KF_EMIT_READ_PAST 1024

/* The bucket of a size: the next power of two (0 and 1 are their own). */
int64_t kf_emit_bucket(int64_t v);

typedef struct kf_emit_target {
	int wgmma;
	const kf_emit_dyn *dyn; /* NULL: a static plan, every dim a number */
} kf_emit_target;

typedef struct kf_kernels {
	kf_kernel *k;
	uint32_t n, cap;
} kf_kernels;

/* The helpers every kernel uses; a program is the prelude and kernels. */
const char *kf_emit_prelude(void);

/* Emits the kernel of node n (top-level or in a fusion body): a fusion node
 * runs its body; another op is wrapped as a one-node kernel.  Returns 0; 1
 * when n needs no kernel (const: the runtime uploads it; reshape: an alias
 * of its operand; return); 2 when n is a fusion whose kind's kernel cannot
 * run this body (an attention fusion written by hand in another form): the
 * caller runs the body op by op, k->why says why (k holds nothing else);
 * -1 with an error at the node. */
int kf_emit_node(kf_graph *g, kf_nid n, kf_kernel *k);
/* The same for a target (NULL: unknown). */
int kf_emit_node_for(kf_graph *g, kf_nid n, const kf_emit_target *t, kf_kernel *k);
/* One part of node n's kernel: 0 the whole (kf_emit_node_for); a
 * contraction's kernels around a cuBLAS GEMM are parts KF_MM_PART_A, _B
 * (an operand's prologue) and _EPI (the epilogue): cuda/emit_matmul.h.
 * 1 when n has no such part (an operand read as stored, no epilogue). */
int kf_emit_node_part(kf_graph *g, kf_nid n, const kf_emit_target *t, int part, kf_kernel *k);
void kf_kernel_free(kf_kernel *k);

/* Every kernel of g's top level, in program order. */
int kf_emit_graph(kf_graph *g, kf_kernels *out);
void kf_kernels_free(kf_kernels *ks);

/* kfuse-opt --emit=cuda: the prelude, then each distinct kernel of every
 * graph once, each headed by a comment naming the graph and the node. */
int kf_emit_cuda_module(kf_module *m, kf_buf *out);
/* kfuse-opt --emit=ptx: the same program compiled by NVRTC for sm_90 (or
 * $KFUSE_ARCH) to PTX.  -1 with an error when NVRTC is missing or fails. */
int kf_emit_ptx_module(kf_module *m, kf_buf *out);

#endif
