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

struct kf_ctx {
	kf_arena arena; /* strings, op names */
	char **str; uint32_t *strlen_; uint32_t nstr, capstr; kf_idtab strtab;
	kf_type *type; uint32_t ntype, captype; kf_idtab typetab;
	kf_opinfo *op; uint32_t nop, capop; kf_idtab optab;
	kf_source *src; uint32_t nsrc, capsrc;
	kf_diag *diag; uint32_t ndiag, capdiag;
	int nerrors;
};

uint64_t kf_hash_bytes(const void *p, size_t n, uint64_t h);
#define KF_HASH_SEED 1469598103934665603ULL
void *kf_xrealloc(void *p, size_t n);
/* Grows *arr (of elements of size sz) so that it holds at least need. */
void kf_grow(void **arr, uint32_t *cap, uint32_t need, size_t sz);

void kf_diag_free_all(kf_ctx *c);

#endif
