/* tune.h: the contraction autotuner and its persistent cache.
 *
 * Each contraction kernel (a `fusion {kind = "contraction"}`) has a tile
 * config (cuda/emit_matmul.h).  kf_tune_graph compiles every candidate
 * config of each contraction of a graph, times it on the device (its
 * launches captured into a CUDA graph, as the plan runs them; CUDA events,
 * median of reps replays after a warm-up, each after an L2 flush unless
 * $KFUSE_TUNE_FLUSH=0), keeps the fastest as
 * the node's `tile` attribute and records it in the cache file.
 * kf_tune_apply (called by the CUDA backend when it plans a graph) sets
 * `tile` from the cache on every contraction that has none, so a tuned
 * config is used by every later run, also of other graphs of that shape.
 *
 * The cache file: $KFUSE_TUNE_FILE if set, else <cache dir>/tune.txt (the
 * kernel cache's directory, kcache.h).  Text, one line per key:
 *
 *     # kfuse tune cache v1
 *     sm_90:f16>f16:b1:m4096:n4096:k4096:nn mma128x128x32w2x4s3 0.2132
 *
 * the key (arch, operand and result dtype, batch, M, N, K, whether A and B
 * are stored transposed), the config and its time in ms.  A user can ship
 * the file with a model; a line that does not parse is skipped with a
 * warning naming file and line.  Writes are atomic (temporary file and
 * rename); the last line of a key wins.
 *
 * A conv (kf_conv_node_shape) whose key no table has takes the line of a
 * conv of the same geometry, shape and dtypes with another epilogue (the
 * key without its tag; kf_tune_find_prefix): its mainloop decides the
 * config.
 *
 * Shipped tables: kfuse carries tables of the same format for the devices
 * it was tuned on (cuda/tune_h200.txt, built into the binary; each line
 * measured there by kfuse-run --tune: bench/gpu/shapes.sh writes it).  A
 * key the cache file lacks is looked up in the table of the device whose
 * name contains the table's device name; KFUSE_TUNE_SHIPPED=0 turns them
 * off (then the cost model, cuda/mm_cost.c, decides untuned shapes).
 */
#ifndef KF_TUNE_H
#define KF_TUNE_H

#include "kf.h"

typedef struct kf_tune_entry {
	char key[128];
	char cfg[32];
	double ms;
} kf_tune_entry;

typedef struct kf_tune_table {
	kf_tune_entry *e;
	uint32_t n, cap;
} kf_tune_table;

/* The cache file's path into out; -1 when there is no directory. */
int kf_tune_path(const char *cache_dir, kf_buf *out);
/* A missing file is an empty table (0); unreadable: -1 with an error. */
int kf_tune_load(kf_ctx *c, const char *path, kf_tune_table *t);
/* The lines of text (a file's contents, named name in warnings) into t. */
void kf_tune_parse(kf_ctx *c, const char *name, const char *text, kf_tune_table *t);
/* The shipped table for a device name (kf_cuda_info.name), as text; NULL
 * when kfuse has none, or KFUSE_TUNE_SHIPPED=0.  *which: its file name. */
const char *kf_tune_shipped(const char *device, const char **which);
int kf_tune_save(kf_ctx *c, const char *path, const kf_tune_table *t);
const kf_tune_entry *kf_tune_find(const kf_tune_table *t, const char *key);
/* The last entry whose key is prefix or prefix then ':' (a conv's key
 * without its epilogue's tag: another epilogue of the same geometry). */
const kf_tune_entry *kf_tune_find_prefix(const kf_tune_table *t, const char *prefix);
void kf_tune_set(kf_tune_table *t, const char *key, const char *cfg, double ms);
void kf_tune_table_free(kf_tune_table *t);

/* Sets `tile` from the cache on each top-level contraction fusion of g
 * without one.  Returns how many it set (a note per node into report). */
int kf_tune_apply(kf_graph *g, const char *arch, const char *cache_dir, kf_buf *report);
/* The same, then from the shipped table of device (NULL: none) for keys
 * the cache lacks; a sized plan's (t->dyn; t may be NULL) keys are of its
 * buckets' shapes (kf_mm_node_shape_sized). */
struct kf_emit_target;
int kf_tune_apply_for(kf_graph *g, const char *arch, const char *device, const char *cache_dir, kf_buf *report,
		      const struct kf_emit_target *t);

/* PyTorch's allow_tf32 for g: sets tf32 = true on every top-level
 * contraction fusion of f32 operands and every f32 attention fusion (the
 * kernels and cuBLAS may then round their inputs to tf32; docs/matmul.md
 * has the accuracy).  Returns how many. */
int kf_tune_allow_tf32(kf_graph *g);

typedef struct kf_tune_opts {
	int device;
	const char *arch;      /* NULL: the device's */
	const char *cache_dir; /* NULL: as kcache.h says */
	int reps;              /* timed replays per candidate (default 20) */
	bool force;            /* tune also shapes the cache already has */
	kf_buf *report;        /* one line per candidate and per winner; may be NULL */
} kf_tune_opts;

/* Tunes each top-level contraction fusion of g on the GPU (see above).
 * 0, or -1 with an error (no GPU, no NVRTC, a cache that cannot be
 * written is only a warning). */
int kf_tune_graph(kf_graph *g, const kf_tune_opts *o);

#endif
