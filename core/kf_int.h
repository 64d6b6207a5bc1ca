/* kf_int.h: declarations shared by the core files alone; not for other modules. */
#ifndef KF_INT_H
#define KF_INT_H
#include "kf.h"

/* Registers the built-in ops in KF_OP_* order (ops.c); called by kf_ctx_new. */
void kf_ops_builtin_init(kf_ctx *c);

/* An open-addressing table of 32-bit ids; the owner hashes and compares. */
typedef struct kf_idtab {
	uint32_t *slot; /* KF_NONE = empty */
	uint32_t cap, n; /* cap is a power of two */
} kf_idtab;

typedef struct kf_source {
	char *name;
	char *text; /* NULL for a name-only source */
	size_t len;
	uint32_t *line; /* offsets of line starts, built on first use */
	uint32_t nline;
} kf_source;

typedef struct kf_diag {
	uint8_t sev;
	kf_loc at;
	char *msg;
} kf_diag;

/* The string table: open addressing, triangular (quadratic) probing, which
 * at the 80 % load it runs at probes half as many slots as linear probing
 * would for a new string.  A slot is
 * (hash << 32 | id + 1), 0 when empty, so that a probe compares 32 bits of
 * the hash before it touches any string (most probed slots hold another
 * string, and each string is a cache miss away). */
typedef struct kf_strtab {
	uint64_t *slot;
	uint32_t cap, n; /* cap is a power of two */
} kf_strtab;

struct kf_ctx {
	kf_arena arena; /* strings, op names */
	/* str[id]: the text, NUL-terminated, packed in the arena after its
	 * 32-bit length */
	char **str; uint32_t nstr, capstr; kf_strtab strtab;
	/* interned types in chunks of KF_TYPE_CHUNK that never move: a
	 * kf_vtype pointer stays valid while more types are interned */
	kf_type **type; uint32_t ntype, captype; kf_idtab typetab;
	kf_opinfo *op; uint32_t nop, capop; kf_idtab optab;
	kf_sid *op_origin; uint32_t norigin; /* the plugin file of op i (KF_NONE: built in) */
	kf_source *src; uint32_t nsrc, capsrc;
	kf_diag *diag; uint32_t ndiag, capdiag;
	int nerrors;
	void *ext;
	void (*ext_release)(kf_ctx *c);
	char *data_root; /* kf_ctx_set_data_root */
};

uint64_t kf_hash_bytes(const void *p, size_t n, uint64_t h);
#define KF_HASH_SEED 1469598103934665603ULL
#define KF_TYPE_CHUNK 256u /* interned types a chunk (struct kf_ctx) */
void *kf_xrealloc(void *p, size_t n);
void *kf_xcalloc(size_t n, size_t sz); /* zeroed; kf_oom on OOM */
/* n bytes at the given alignment (a power of two, at most 16), not zeroed;
 * the KF_ARENA_SLACK bytes after them are readable (kf_str_padded). */
void *kf_arena_bytes(kf_arena *a, size_t n, size_t align);
#define KF_ARENA_SLACK 16

struct kf_chunk {
	struct kf_chunk *next;
	size_t cap, used; /* the data holds cap + KF_ARENA_SLACK bytes */
	_Alignas(16) unsigned char data[];
};

/* kf_arena_bytes when the current chunk has room: inline, for the string
 * table's one allocation per new string. */
static inline void *kf_arena_take(kf_arena *a, size_t n, size_t align)
{
	struct kf_chunk *c = a->head;
	if (c) {
		size_t off = (c->used + align - 1) & ~(align - 1);
		if (off <= c->cap && c->cap - off >= n) {
			c->used = off + n;
			a->used += n;
			return c->data + off;
		}
	}
	return kf_arena_bytes(a, n, align);
}
/* fault.c: does fault injection (KF_FAULT_ALLOC) fail this allocation?
 * And is the allocation being made a fallible one (kf_try_*)? */
bool kf_fault_alloc(void);
extern _Thread_local int kf_fallible;

/* Grows *arr (of elements of size sz) so that it holds at least need. */
void kf_grow(void **arr, uint32_t *cap, uint32_t need, size_t sz);

void kf_diag_free_all(kf_ctx *c);

/* Whether key is in an op's space-separated attribute list (kf_opinfo.attrs). */
bool kf_op_attr_allowed(const char *allowed, const char *key);

/* The single value of a constant (a scalar or a splat) when v is one. */
bool kf_const_scalar(const kf_graph *g, kf_vid v, double *x);
/* Cuts op loose from the plugin or Lua state that defined it, before that
 * is freed: the op stays registered (graphs may name it), every field that
 * pointed into the plugin is cleared, and its inference becomes `gone`,
 * which says why it cannot be used, as doc does. */
void kf_op_detach(kf_ctx *c, int op, kf_infer_fn gone, const char *doc);

#endif
