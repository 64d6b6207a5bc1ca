/* kcache.h: the on-disk kernel cache.
 *
 * Compiled kernels (PTX or cubin) are stored under a 128-bit key (FNV-1a
 * 128) of everything that decides the compiler's output: the kernel's
 * canonical source text, the target arch, the NVRTC version, the options
 * and whether a cubin is wanted, plus kfuse's cache format version.
 *
 * Directory: $KFUSE_CACHE_DIR, else $XDG_CACHE_HOME/kfuse, else
 * $HOME/.cache/kfuse; created on first write.  Each entry is one file
 * <32 hex digits>.kc written atomically (temporary file + rename), so
 * concurrent processes never see half an entry.  An entry whose header,
 * length or checksum does not match is ignored (a miss) and rewritten by
 * the next put.  A cache that cannot be written costs speed, never
 * correctness: put reports a warning once and compiles go on.
 */
#ifndef KF_KCACHE_H
#define KF_KCACHE_H

#include "kf.h"
#include "cuda.h"

typedef struct kf_kcache_key {
	uint64_t hi, lo;
} kf_kcache_key;

typedef struct kf_kcache {
	kf_ctx *ctx;
	char *dir;              /* NULL: caching disabled (no usable directory) */
	bool warned;            /* a write failure was reported */
	uint64_t hits, misses;  /* get */
	uint64_t corrupt;       /* entries found damaged (also counted as misses) */
	uint64_t writes;        /* successful puts */
} kf_kcache;

/* dir NULL: from the environment as above.  Never fails: without a usable
 * directory (no HOME) the cache is disabled and a get is always a miss. */
void kf_kcache_init(kf_kcache *kc, kf_ctx *c, const char *dir);
void kf_kcache_fini(kf_kcache *kc);
/* The directory the environment selects, into out; -1 if none. */
int kf_kcache_default_dir(kf_buf *out);

kf_kcache_key kf_kcache_key_of(const char *src, size_t srclen, const char *arch,
			       int nvrtc_major, int nvrtc_minor,
			       const char *const *opts, int nopts, int want_cubin);
/* "0123...": 32 hex digits and a NUL. */
void kf_kcache_key_hex(kf_kcache_key k, char out[33]);

/* 1 and the entry appended to out on a hit; 0 on a miss (absent or
 * corrupt). */
int kf_kcache_get(kf_kcache *kc, kf_kcache_key key, kf_buf *out);
/* 0, or -1 (with a warning, once) if the entry could not be written. */
int kf_kcache_put(kf_kcache *kc, kf_kcache_key key, const void *data, size_t n);

/* kf_nvrtc_compile through the cache: a hit skips NVRTC (log stays empty);
 * a miss compiles and stores.  kc may be NULL (no caching). */
int kf_kcache_compile(kf_kcache *kc, kf_nvrtc *nv, const char *src, const char *name,
		      const char *arch, const char *const *opts, int nopts, int want_cubin,
		      kf_buf *out, kf_buf *log);

#endif
