/* kf.h: the kfuse core, the one header every module includes.
 *
 * Contract:
 *  - A kf_ctx owns interned strings, interned types, the op registry and the
 *    diagnostics.  It is not thread-safe but holds no globals: several contexts
 *    may live side by side (Lua callbacks, host programs).
 *  - A kf_graph owns its values, nodes, operand slots and blocks in growable
 *    arrays addressed by 32-bit handles (kf_vid, kf_nid, ...), and everything
 *    else (attributes, constant payloads) in one arena.  kf_graph_free releases
 *    all of it.  Handles stay valid across growth; pointers into the arrays do
 *    not, so re-fetch after any call that creates values or nodes.
 *  - Use lists are exact at all times: every operand slot is linked into the
 *    use list of the value it reads.  The mutation API below keeps them so.
 *  - Library code never exits and never prints: errors go to the context
 *    (kf_error*) and functions return a failure value.  Tools print them.
 */
#ifndef KF_H
#define KF_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define KF_VERSION "0.1.0"
#define KF_MAX_RANK 8
#define KF_NONE UINT32_MAX

typedef uint32_t kf_vid; /* value */
typedef uint32_t kf_nid; /* node */
typedef uint32_t kf_bid; /* block */
typedef uint32_t kf_uid; /* operand slot (a use) */
typedef uint32_t kf_tid; /* interned type */
typedef uint32_t kf_sid; /* interned string; 0 is the empty string */

typedef struct kf_ctx kf_ctx;
typedef struct kf_graph kf_graph;

/* ---- dtypes -------------------------------------------------------------- */

typedef enum {
	KF_F16, KF_BF16, KF_F32, KF_F64, KF_I1, KF_I8, KF_I32, KF_I64, KF_NDTYPE
} kf_dtype;

const char *kf_dtype_name(kf_dtype t);
int kf_dtype_parse(const char *s, size_t n); /* -1 when s is not a dtype */
size_t kf_dtype_size(kf_dtype t);            /* bytes per element; i1 is 1 */
bool kf_dtype_is_float(kf_dtype t);

/* ---- types and shapes ---------------------------------------------------- */

/* A dim >= 0 is static.  A symbolic dim `N` is KF_SYM(sid of "N"). */
#define KF_SYM(sid) (-1 - (int64_t)(sid))
#define KF_IS_SYM(d) ((d) < 0)
#define KF_SYM_SID(d) ((kf_sid)(-1 - (d)))

typedef struct kf_type {
	uint8_t dtype, rank;
	int64_t dim[KF_MAX_RANK];
} kf_type;

/* Types are hash-consed in the context: equal types have equal ids, also
 * across graphs of one context.  Unused dim slots must be zero (kf_type_make
 * does it). */
kf_tid kf_type_intern(kf_ctx *c, const kf_type *t);
/* The type of id: the pointer stays valid for the context's life (interning
 * more types never moves one). */
const kf_type *kf_type_get(const kf_ctx *c, kf_tid id);
kf_type kf_type_make(kf_dtype dt, int rank, const int64_t *dims);
bool kf_type_is_static(const kf_type *t);
/* Element count of a static type; -1 if symbolic or on overflow past 2^62. */
int64_t kf_type_numel(const kf_type *t);
/* The same dims (rank and sizes, symbolic dims by id) / and dtype. */
bool kf_type_same_shape(const kf_type *a, const kf_type *b);
static inline bool kf_type_equal(const kf_type *a, const kf_type *b)
{
	return a->dtype == b->dtype && kf_type_same_shape(a, b);
}

/* ---- symbolic dims ---------------------------------------------------------
 *
 * A symbolic dim is a monomial: a coefficient >= 1 times a product of named
 * symbols.  It is one interned name in canonical form: the coefficient first
 * when it is not 1, then the symbols sorted by name, '*' between: `B`,
 * `B*T`, `8*B`, `2*T*T`.  Equal products are therefore one dim value, and the
 * text IR writes them as named (f32[B*T,768]).  Shape arithmetic on them
 * (a reshape's element count and -1, flatten, a product of dims) is exact;
 * a sum of symbols has no dim (it would need facts about their values). */
#define KF_DIM_MAXSYM 8
#define KF_DIM_BAD INT64_MIN /* not a dim: malformed, or out of range */
typedef struct kf_mono {
	int64_t coef;
	int n;
	kf_sid sym[KF_DIM_MAXSYM];
} kf_mono;

/* The parts of dim d (a static d: coef d, no symbols); false if malformed. */
bool kf_dim_split(kf_ctx *c, int64_t d, kf_mono *m);
/* The dim of a monomial (static when it has no symbols or a 0 coefficient);
 * KF_DIM_BAD when out of range. */
int64_t kf_dim_join(kf_ctx *c, const kf_mono *m);
/* "8*B", "B*T", "64": a dim from its text (any order of factors), or KF_DIM_BAD. */
int64_t kf_dim_parse(kf_ctx *c, const char *s, size_t n);
int64_t kf_dim_mul(kf_ctx *c, int64_t a, int64_t b); /* KF_DIM_BAD on overflow */
/* a / b when it is a monomial (exact for every value of the symbols). */
bool kf_dim_div(kf_ctx *c, int64_t a, int64_t b, int64_t *q);
/* The value of d given its symbols' values; false when one is unknown or on
 * overflow. */
typedef bool (*kf_sym_lookup)(void *ud, kf_sid s, int64_t *value);
bool kf_dim_eval(kf_ctx *c, int64_t d, kf_sym_lookup look, void *ud, int64_t *out);
/* Whether d is a product (not a static dim, not a plain symbol). */
bool kf_dim_is_product(const kf_ctx *c, int64_t d);

/* ---- strings --------------------------------------------------------------- */

kf_sid kf_intern(kf_ctx *c, const char *s, size_t n);
kf_sid kf_intern_cstr(kf_ctx *c, const char *s);
kf_sid kf_lookup_str(const kf_ctx *c, const char *s, size_t n); /* KF_NONE if absent */
const char *kf_str(const kf_ctx *c, kf_sid id);
size_t kf_strlen(const kf_ctx *c, kf_sid id);
/* Sizes the string table for n more strings, so that it is not rehashed
 * through a chain of growing tables (a parser that knows its text's size;
 * an overestimate costs memory: the table is touched all over). */
void kf_str_reserve(kf_ctx *c, uint32_t n);
/* The text of id and its length; the text may be read (not written) 16
 * bytes past its end, so that a short name is copied in one 16-byte move. */
const char *kf_str_padded(const kf_ctx *c, kf_sid id, size_t *len);
/* The table's hash of s, for a caller that interns or looks up one name
 * more than once, or loads its table slot early (the parser). */
uint32_t kf_str_hash(const char *s, size_t n);
kf_sid kf_intern_hashed(kf_ctx *c, const char *s, size_t n, uint32_t hash);
kf_sid kf_lookup_hashed(const kf_ctx *c, const char *s, size_t n, uint32_t hash); /* KF_NONE if absent */
void kf_str_prefetch(const kf_ctx *c, uint32_t hash);

/* ---- growable text buffer ------------------------------------------------ */

typedef struct kf_buf {
	char *p;
	size_t n, cap;
} kf_buf;

void kf_buf_put(kf_buf *b, const char *s, size_t n);
void kf_buf_puts(kf_buf *b, const char *s);
void kf_buf_putc(kf_buf *b, char ch);
void kf_buf_printf(kf_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void kf_buf_free(kf_buf *b);
/* Shortest text of a double that reads back to the same value of dtype t
 * (f16/bf16/f32 read back through rounding to that type); always contains '.',
 * 'e', "inf" or "nan" so that it lexes as a float. */
void kf_buf_float(kf_buf *b, double v, kf_dtype t);
/* v rounded to the nearest value of float type t (ties to even; subnormals
 * kept, past the largest finite value infinity), as a double: the exact
 * payload of a constant of type t.  Other types: v. */
double kf_round_to_dtype(double v, kf_dtype t);
/* The magnitude from which a value of float type t rounds to infinity. */
double kf_dtype_overflow(kf_dtype t);

/* ---- files (file.c, fault.c) ---------------------------------------------- */

/* Errors beyond errno's, for kf_file_strerror. */
#define KF_ENOTREG 0x10001  /* not a regular file (a FIFO, a device) */
#define KF_EOUTSIDE 0x10002 /* outside the directory a path is confined to */
#define KF_ETOOBIG 0x10003  /* larger than the reader's limit */
/* strerror, knowing the three above. */
const char *kf_file_strerror(int err);
/* Opens a regular file for reading, never blocking on a FIFO or device:
 * the fd, or -1 with *err (errno, EISDIR or KF_ENOTREG).  For paths that an
 * input file names; the command line may name pipes, so tools open those
 * themselves. */
int kf_open_regular(const char *path, int *err);
/* Reads a whole regular file of at most max bytes: 0 with a malloc'd,
 * NUL-terminated *out, or an error (as kf_open_regular, KF_ETOOBIG). */
int kf_read_regular(const char *path, size_t max, char **out, size_t *len);
/* 0 with *resolved (malloc'd: path with every link resolved) when path is
 * root or below it once both are resolved; else an errno or KF_EOUTSIDE. */
int kf_path_within(const char *path, const char *root, char **resolved);

/* An output written atomically: a temporary beside the target, every write
 * checked, renamed over the target by commit.  Until then, and after any
 * failure, the target is untouched (an input named as the output too).
 * A device or FIFO target (/dev/null) is written directly; path NULL or
 * "-" is stdout (commit flushes and checks it). */
typedef struct kf_ofile {
	FILE *f;          /* write here (stdio; errors are caught by commit) */
	int fd, err;      /* the temporary (or device); the first error */
	char *path, *tmp; /* the target; the temporary (NULL: direct) */
	bool no_sync;     /* set after open to skip fsync (a cache that checks
			     its entries when it reads them) */
} kf_ofile;
/* 0, or the errno why the temporary cannot be created. */
int kf_ofile_open(kf_ofile *o, const char *path);
/* 0, or the first error so far (sticky). */
int kf_ofile_write(kf_ofile *o, const void *p, size_t n);
/* Flushes, syncs and renames: 0, or the first error (the temporary is then
 * removed).  Either way o is released. */
int kf_ofile_commit(kf_ofile *o);
/* Removes the temporary; the target stays as it was. */
void kf_ofile_abort(kf_ofile *o);
/* A whole buffer, atomically: kf_ofile_open, write, commit. */
int kf_write_file(const char *path, const void *p, size_t n);
/* Flushes stdout: 0, or why what a tool printed did not all get out (a
 * full disk, a closed pipe), so that it can fail instead of exiting 0. */
int kf_stdout_flush(void);
/* Removes every temporary still open (the fatal exit's cleanup). */
void kf_ofile_cleanup(void);
/* Writes all n bytes of p to fd (retrying short writes and EINTR): 0, or
 * the errno of the failed write (EIO when write returns 0).  Every output
 * goes through here: KF_FAULT_WRITE makes one fail (fault.c). */
int kf_write_all(int fd, const void *p, size_t n);
/* fault.c: true when KF_FAULT_WRITE says this write must fail. */
bool kf_fault_write(void);
/* malloc, calloc, realloc, strdup and strndup never return NULL in kfuse
 * (a link-time wrapper: fault.c); out of memory is kf_oom.  Where an input
 * decides the size, ask with these, which may return NULL, and report it. */
void *kf_try_malloc(size_t n);
void *kf_try_calloc(size_t n, size_t sz);
void *kf_try_realloc(void *p, size_t n);
/* Out of memory where an allocation cannot fail: says so on stderr,
 * removes open output temporaries and exits with KF_EXIT_OOM (a clean
 * exit, not a crash: no output is left half-written).  kf_fatal: the
 * same for another broken invariant (a Lua panic). */
#define KF_EXIT_OOM 1
_Noreturn void kf_oom(void);
_Noreturn void kf_fatal(const char *what);

/* ---- the memory budget (budget.c) ----------------------------------------- */

/* Bytes that tensors and the importer's parsed model may hold at once in the
 * process: by default 3/4 of physical memory (or of the cgroup's limit). */
uint64_t kf_mem_budget(void);
uint64_t kf_mem_default_budget(void);
void kf_mem_set_budget(uint64_t bytes); /* 0: the default */
uint64_t kf_mem_in_use(void);
/* Takes n bytes of the budget: true, or false (nothing taken) when they
 * would exceed it.  Every reserve is paired with a release. */
bool kf_mem_reserve(uint64_t n);
void kf_mem_release(uint64_t n);
/* "4G", "512M", "1.5GiB", "1048576": 0 and the bytes, or -1. */
int kf_mem_parse(const char *s, uint64_t *bytes);
/* The message for a reservation of need bytes that failed. */
void kf_mem_why(char *buf, size_t n, uint64_t need);

/* ---- arena ----------------------------------------------------------------- */

typedef struct kf_arena {
	struct kf_chunk *head;
	size_t used, total;
} kf_arena;

void *kf_alloc(kf_arena *a, size_t n); /* zeroed, 16-byte aligned; kf_oom on OOM */
char *kf_strdup_arena(kf_arena *a, const char *s, size_t n);
void kf_arena_free(kf_arena *a);

/* ---- diagnostics ----------------------------------------------------------- */

/* A source is a named text.  Locations are (source, byte offset); line and
 * column are computed only when printing.  A source with no text names a
 * file for errors that have no position (a .npy file, a missing file). */
typedef uint32_t kf_srcid;
kf_srcid kf_source_add(kf_ctx *c, const char *name, const char *text, size_t len);
const char *kf_source_name(const kf_ctx *c, kf_srcid s);
const char *kf_source_text(const kf_ctx *c, kf_srcid s, size_t *len);
/* 1-based line and column (in bytes) of an offset. */
void kf_source_linecol(const kf_ctx *c, kf_srcid s, uint32_t off, int *line, int *col);

typedef struct kf_loc {
	kf_srcid src;  /* KF_NONE: no position */
	uint32_t off;
} kf_loc;
#define KF_NOLOC ((kf_loc){KF_NONE, 0})

typedef enum { KF_DIAG_ERROR, KF_DIAG_WARNING, KF_DIAG_NOTE } kf_severity;

void kf_error(kf_ctx *c, kf_loc at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void kf_warning(kf_ctx *c, kf_loc at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void kf_note(kf_ctx *c, kf_loc at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void kf_diag_v(kf_ctx *c, kf_severity s, kf_loc at, const char *fmt, va_list ap);
/* Prints and clears the pending diagnostics: `file:line:col: error: msg`, the
 * source line and a caret; `file: error: msg` when there is no position;
 * `kfuse: error: msg` when there is no source at all. */
void kf_diag_flush(kf_ctx *c, FILE *out);
int kf_nerrors(const kf_ctx *c); /* errors recorded since the context began */
void kf_diag_clear(kf_ctx *c);   /* drops pending diagnostics and the count */
/* A point in the pending diagnostics, for a caller that recovers from an
 * error (a backend that runs a node another way): kf_diag_rewind
 * withdraws what was reported after the mark, its text into text (when
 * not NULL, one message a line). */
typedef struct kf_diag_mark {
	uint32_t ndiag;
	int nerrors;
} kf_diag_mark;
kf_diag_mark kf_diag_mark_now(const kf_ctx *c);
void kf_diag_rewind(kf_ctx *c, kf_diag_mark m, kf_buf *text);
/* The text of pending diagnostics, for tests and Lua: as kf_diag_flush prints. */
void kf_diag_render(kf_ctx *c, kf_buf *out);

/* ---- attributes ------------------------------------------------------------ */

typedef enum { KF_ATTR_INT, KF_ATTR_FLOAT, KF_ATTR_STR, KF_ATTR_BOOL, KF_ATTR_LIST } kf_attr_kind;

typedef struct kf_attrval {
	uint8_t kind;
	uint32_t n; /* list length */
	union {
		int64_t i;
		double f;
		kf_sid s;
		bool b;
		struct kf_attrval *list;
	};
} kf_attrval;

typedef struct kf_attr {
	kf_sid key;
	kf_attrval v;
} kf_attr;

bool kf_attrval_eq(const kf_attrval *a, const kf_attrval *b);
uint64_t kf_attrval_hash(const kf_attrval *a);

/* ---- constants --------------------------------------------------------------- */

typedef enum { KF_CONST_SCALAR, KF_CONST_DENSE, KF_CONST_FILE } kf_const_kind;

/* The payload of a `const` node.  Floating dtypes keep values in f (exact for
 * every float dtype we have), integer and i1 dtypes in i.  A DENSE constant
 * with n == 1 and a result of more than one element is a splat. */
typedef struct kf_const {
	uint8_t kind;
	uint64_t n;
	double *f;
	int64_t *i;
	kf_sid path; /* KF_CONST_FILE: as written, resolved against the graph's directory */
} kf_const;

/* The bits of element i of k, for hashing: a float's (0 and -0 alike, as
 * they compare equal) or an integer's; 0 for a payload with neither. */
uint64_t kf_const_elem_bits(const kf_const *k, uint64_t i);

/* ---- the op registry --------------------------------------------------------- */

typedef enum {
	KF_TRAIT_ELEMENTWISE, /* same-shape inputs, one output element per input element */
	KF_TRAIT_BROADCAST,   /* element-wise under numpy broadcasting */
	KF_TRAIT_INJECTIVE,   /* each output element reads one input element (transpose, slice, ...) */
	KF_TRAIT_REDUCE,
	KF_TRAIT_CONTRACTION,
	KF_TRAIT_OPAQUE,
} kf_trait;
const char *kf_trait_name(kf_trait t);

enum {
	KF_OPF_COMMUTATIVE = 1 << 0,
	KF_OPF_TERMINATOR = 1 << 1, /* return, yield: last node of a block */
	KF_OPF_REGION = 1 << 2,     /* carries a body block (fusion) */
	KF_OPF_EFFECT = 1 << 3,     /* never removed as dead */
	KF_OPF_SYMBOL = 1 << 4,     /* takes `@name` after the op name */
	KF_OPF_ASSOCIATIVE = 1 << 5, /* (a op b) op c == a op (b op c): with COMMUTATIVE, rules match
	                                any grouping and order of a chain (docs/rules.md) */
};

/* The built-in ops, in registry order.  Plugins append after KF_NBUILTIN. */
#define KF_BUILTIN_OPS(X) \
	X(CONST, "const") \
	X(ADD, "add") X(SUB, "sub") X(MUL, "mul") X(DIV, "div") X(POW, "pow") \
	X(MAX, "max") X(MIN, "min") \
	X(NEG, "neg") X(ABS, "abs") X(EXP, "exp") X(LOG, "log") X(SQRT, "sqrt") \
	X(RSQRT, "rsqrt") X(TANH, "tanh") X(SIGMOID, "sigmoid") X(RELU, "relu") \
	X(GELU, "gelu") X(ERF, "erf") X(SILU, "silu") \
	X(WHERE, "where") X(CAST, "cast") \
	X(EQ, "eq") X(NE, "ne") X(LT, "lt") X(LE, "le") X(GT, "gt") X(GE, "ge") \
	X(AND, "and") X(OR, "or") X(NOT, "not") \
	X(REDUCE_SUM, "reduce_sum") X(REDUCE_MEAN, "reduce_mean") \
	X(REDUCE_MAX, "reduce_max") X(REDUCE_MIN, "reduce_min") \
	X(SOFTMAX, "softmax") X(LOG_SOFTMAX, "log_softmax") X(LAYER_NORM, "layer_norm") \
	X(MATMUL, "matmul") X(GEMM, "gemm") \
	X(TRANSPOSE, "transpose") X(RESHAPE, "reshape") X(BROADCAST_TO, "broadcast_to") \
	X(CONCAT, "concat") X(SLICE, "slice") X(SPLIT, "split") \
	X(GATHER, "gather") X(GATHER_ELEMENTS, "gather_elements") X(PAD, "pad") X(RESIZE, "resize") X(IOTA, "iota") X(SHAPE, "shape") \
	X(SIN, "sin") X(COS, "cos") X(FLOOR, "floor") X(CEIL, "ceil") X(ROUND, "round") X(OPAQUE, "opaque") \
	X(CONV, "conv") X(CONV_TRANSPOSE, "conv_transpose") X(MAX_POOL, "max_pool") X(AVG_POOL, "avg_pool") \
	X(FUSION, "fusion") X(RETURN, "return") X(YIELD, "yield")

enum {
#define KF_OP_ENUM(id, name) KF_OP_##id,
	KF_BUILTIN_OPS(KF_OP_ENUM)
#undef KF_OP_ENUM
	KF_NBUILTIN
};

/* Computes the result types of node n from its operand types and attributes.
 * Returns the number of results written to out (at most maxout), or -1 after
 * writing a message (no location, no trailing newline) to err. */
typedef int (*kf_infer_fn)(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen);

struct kf_tensor;
/* Reference CPU implementation: computes the outputs of node n from its
 * inputs.  The interpreter allocates out[i] (types from the node's results)
 * before the call.  Returns 0, or -1 after writing a message to err. */
typedef int (*kf_cpu_fn)(kf_graph *g, kf_nid n, const struct kf_tensor *in, int nin,
			 struct kf_tensor *out, int nout, char *err, size_t errlen);

typedef struct kf_opinfo {
	const char *name;
	int8_t min_in, max_in; /* max_in -1: variadic */
	int8_t nres;           /* -1: as many as the text or builder says */
	uint8_t trait;         /* kf_trait */
	uint16_t flags;        /* KF_OPF_* */
	kf_infer_fn infer;
	kf_cpu_fn cpu;         /* filled in by the runtime for built-ins */
	const char *cuda;      /* element-wise CUDA expression over a, b, c (e.g. "fmaxf(a, 0.f)"), or NULL */
	const char *attrs;     /* allowed attribute names, space-separated; NULL: any */
	const char *doc;       /* one line */
	void *user;            /* plugin data */
} kf_opinfo;

/* ONNX Shape's range [start, end) of a rank-`rank` shape: negative ends
 * count from the back, then both clamp to [0, rank], end not below start. */
void kf_shape_range(int64_t rank, int64_t *start, int64_t *end);

int kf_op_count(const kf_ctx *c);
const kf_opinfo *kf_op(const kf_ctx *c, int op);
kf_opinfo *kf_op_mut(kf_ctx *c, int op);
int kf_op_lookup(const kf_ctx *c, const char *name, size_t n); /* -1 if unknown */
/* The op that runs node n: its own, or for `opaque @Name` the op registered
 * as Name (a plugin's); -1 when there is none. */
int kf_node_impl_op(const kf_graph *g, kf_nid n);
/* Registers a new op (name copied); returns its id, or -1 with an error in
 * the context when the name is taken. */
int kf_op_register(kf_ctx *c, const kf_opinfo *info);
/* The file of the plugin (a C library or a Lua script) that registered op:
 * the path as it was loaded, NULL for a built-in op.  A module written out
 * names these files (kf_module_locate), so that it reads back. */
void kf_op_set_origin(kf_ctx *c, int op, const char *path);
const char *kf_op_origin(const kf_ctx *c, int op);

/* ---- context --------------------------------------------------------------- */

kf_ctx *kf_ctx_new(void);
/* Frees the context; an extension's release runs first. */
void kf_ctx_free(kf_ctx *c);
/* One extension a module may hang on the context (the plugin host: the Lua
 * state and loaded libraries).  kf_ctx_free calls release(c) while the
 * context is still whole; release should clear the slot (set NULL). */
void kf_ctx_set_ext(kf_ctx *c, void *ext, void (*release)(kf_ctx *c));
void *kf_ctx_ext(const kf_ctx *c);
/* The directory file("...") constants must resolve within (NULL, the
 * default: each graph's own directory); copied. */
void kf_ctx_set_data_root(kf_ctx *c, const char *dir);
const char *kf_ctx_data_root(const kf_ctx *c);

/* ---- graphs -------------------------------------------------------------- */

typedef struct kf_value {
	kf_tid type;
	kf_nid def;       /* defining node, KF_NONE for a block argument */
	uint32_t idx;     /* result index in def, or argument index in blk */
	kf_bid blk;       /* block the value is visible in */
	kf_sid name;      /* as written (without '%' and '#k'); 0 if none */
	kf_uid first_use; /* KF_NONE if unused */
} kf_value;

typedef struct kf_use {
	kf_vid value;
	kf_nid user;
	kf_uid next, prev; /* in value's use list */
} kf_use;

enum { KF_NODE_DEAD = 1 };

/* 64 bytes: the node array is the largest part of a big graph. */
typedef struct kf_node {
	uint16_t op;
	uint16_t flags;  /* KF_NODE_* */
	uint32_t nin;
	kf_uid in0;      /* operand slots in0 .. in0+nin-1 */
	kf_vid res0;     /* results res0 .. res0+nres-1 */
	uint16_t nres;   /* at most KF_MAX_RESULTS */
	uint16_t nattr;  /* at most KF_MAX_ATTRS */
	kf_bid blk;      /* containing block */
	kf_bid body;     /* region body for fusion, KF_NONE otherwise */
	kf_sid sym;      /* `@name`, 0 if none */
	kf_nid prev, next;
	kf_loc loc;
	kf_attr *attr;   /* sorted by key string */
	kf_const *cst;   /* const nodes */
} kf_node;
#define KF_MAX_RESULTS 65535
#define KF_MAX_ATTRS 65535

typedef struct kf_block {
	kf_nid parent;   /* node owning this region; KF_NONE for the graph body */
	uint32_t narg;
	kf_vid *arg;     /* arena */
	uint32_t argcap;
	kf_nid first, last;
} kf_block;

struct kf_graph {
	kf_ctx *ctx;
	kf_sid name;
	kf_loc loc;
	kf_arena arena;
	kf_value *val;  uint32_t nval, capval;
	kf_node *node;  uint32_t nnode, capnode;
	kf_use *use;    uint32_t nuse, capuse;
	kf_block *blk;  uint32_t nblk, capblk;
	uint32_t nres;  /* declared result types (`-> (...)`) */
	kf_tid *res;
	kf_sid dir;     /* directory that file("...") constants are relative to */
};

/* Block 0 is the graph body; its arguments are the graph's inputs and its
 * last node is `return`. */
kf_graph *kf_graph_new(kf_ctx *c, const char *name);
void kf_graph_free(kf_graph *g);
void kf_graph_set_results(kf_graph *g, const kf_tid *types, uint32_t n);
/* A copy of g that passes may change without touching g.  Constant
 * payloads (kf_node.cst) are shared, as passes share them between nodes:
 * they are never written in place (a pass that changes a constant makes a
 * new one), and g must outlive the copy.  Same node, value and use ids. */
kf_graph *kf_graph_clone(const kf_graph *g);

kf_bid kf_block_new(kf_graph *g, kf_nid parent);
kf_vid kf_block_add_arg(kf_graph *g, kf_bid b, kf_tid type, kf_sid name);

/* Makes room for at least n more nodes, values and operand slots (a
 * parser that knows the size of its text), so that the arrays are not
 * copied as they grow; untouched room costs address space, not memory. */
void kf_graph_reserve(kf_graph *g, uint32_t nnode, uint32_t nval, uint32_t nuse);

/* Creates a node of op with operands in[0..nin) and nres results of the given
 * types (nres at most KF_MAX_RESULTS), inserted before node `before`
 * (KF_NONE: at the end of block b).  Result values get no names.
 * Attributes are copied and sorted (at most KF_MAX_ATTRS). */
kf_nid kf_node_new(kf_graph *g, kf_bid b, kf_nid before, int op,
		   const kf_vid *in, uint32_t nin, const kf_tid *res, uint32_t nres);
void kf_node_set_attrs(kf_graph *g, kf_nid n, const kf_attr *a, uint32_t na);
/* A copy of constant value v (defined by a const node) at the end of block
 * b: same payload (shared, not copied), type, location and value name;
 * how passes embed a constant in a fusion's body.  Returns the new value. */
kf_vid kf_const_copy(kf_graph *g, kf_bid b, kf_vid v);
/* Adds or replaces one attribute. */
void kf_node_set_attr(kf_graph *g, kf_nid n, kf_sid key, kf_attrval v);
/* Deep-copies an attribute value into the graph's arena. */
kf_attrval kf_attrval_copy(kf_graph *g, const kf_attrval *v);

static inline kf_node *kf_N(const kf_graph *g, kf_nid n) { return &g->node[n]; }
static inline kf_value *kf_V(const kf_graph *g, kf_vid v) { return &g->val[v]; }
static inline kf_vid kf_in(const kf_graph *g, kf_nid n, uint32_t i) { return g->use[g->node[n].in0 + i].value; }
static inline kf_vid kf_res(const kf_graph *g, kf_nid n, uint32_t i) { return g->node[n].res0 + i; }
static inline const kf_type *kf_vtype(const kf_graph *g, kf_vid v) { return kf_type_get(g->ctx, g->val[v].type); }
static inline kf_nid kf_def(const kf_graph *g, kf_vid v) { return g->val[v].def; }
static inline bool kf_has_uses(const kf_graph *g, kf_vid v) { return g->val[v].first_use != KF_NONE; }

#define kf_foreach_node(g, b, n) \
	for (kf_nid n = (g)->blk[b].first; n != KF_NONE; n = (g)->node[n].next)
#define kf_foreach_use(g, v, u) \
	for (kf_uid u = (g)->val[v].first_use; u != KF_NONE; u = (g)->use[u].next)

uint32_t kf_nuses(const kf_graph *g, kf_vid v);
void kf_set_operand(kf_graph *g, kf_nid n, uint32_t i, kf_vid v);
/* Every use of `from` now reads `to`. */
void kf_replace_all_uses(kf_graph *g, kf_vid from, kf_vid to);
/* Unlinks n from its block and drops its operand uses; its results must be
 * unused.  A region body's nodes are erased with it.  The slot stays (DEAD). */
void kf_node_erase(kf_graph *g, kf_nid n);
/* Moves n to just before `before` (KF_NONE: end of block b). */
void kf_node_move(kf_graph *g, kf_nid n, kf_bid b, kf_nid before);
/* The terminator of block b, or KF_NONE. */
kf_nid kf_block_terminator(const kf_graph *g, kf_bid b);
uint32_t kf_graph_live_nodes(const kf_graph *g); /* not counting region bodies' nodes */

/* Attribute lookup (keys by text). */
const kf_attrval *kf_attr_get(const kf_graph *g, kf_nid n, const char *key);
int64_t kf_attr_int(const kf_graph *g, kf_nid n, const char *key, int64_t dflt);
double kf_attr_float(const kf_graph *g, kf_nid n, const char *key, double dflt);
bool kf_attr_bool(const kf_graph *g, kf_nid n, const char *key, bool dflt);
const char *kf_attr_str(const kf_graph *g, kf_nid n, const char *key, const char *dflt);
/* Copies an int list into out (at most max); returns its length, or -1 when
 * absent or not a list of ints. */
int kf_attr_ints(const kf_graph *g, kf_nid n, const char *key, int64_t *out, int max);
/* A list of dims: ints, and strings naming symbolic dims ("B", "8*B*T",
 * kf_dim_parse).  sym[i] tells a symbolic entry from a negative int (both
 * are negative in out[]).  Returns the length, or -1 when absent or when an
 * item is neither. */
int kf_attr_dims(const kf_graph *g, kf_nid n, const char *key, int64_t *out, bool *sym, int max);

/* ---- modules, text ---------------------------------------------------------- */

/* A .kf file holds one or more graphs. */
typedef struct kf_module {
	kf_ctx *ctx;
	uint32_t ngraph;
	kf_graph **graph;
	kf_srcid src;
	/* `plugin "FILE"` lines: the plugins the module's ops come from, as the
	 * text names them (relative to the graphs' dir); kf_module_locate sets
	 * them from the ops in use. */
	kf_sid *plugin;
	uint32_t nplugin;
} kf_module;

/* Parses text (which need not be NUL-terminated, and may contain NULs) named
 * `filename`.  Returns NULL when there were errors; they are in the context.
 * The module is built only if the whole file parses and resolves. */
kf_module *kf_parse(kf_ctx *c, const char *filename, const char *text, size_t len);
/* Reads a file (or "-" for stdin) and parses it; a read error is a diagnostic. */
kf_module *kf_parse_file(kf_ctx *c, const char *path);
void kf_module_free(kf_module *m);
kf_module *kf_module_new(kf_ctx *c);
void kf_module_add(kf_module *m, kf_graph *g);

/* The module is about to be written as a file in directory dir (a path
 * relative to the current directory, or absolute; "." for stdout, which
 * readers locate in the current directory as they do stdin): each relative
 * file("...") path is rewritten to name the same file from dir, the plugin
 * list becomes the files of the plugins whose ops the module uses (relative
 * to dir, kf_op_origin), and every graph's dir becomes dir.  0, or -1 with
 * an error when the current directory cannot be read. */
int kf_module_locate(kf_module *m, const char *dir);

/* ---- file paths (path.c): lexical, "a/./b/../c" folded to "a/c" ---------- */

/* dir/rel; rel alone when it is absolute or dir is empty or ".". */
void kf_path_join(kf_buf *out, const char *dir, const char *rel);
/* The directory part of path: "." when it has none, "/" for "/x". */
void kf_path_dir(kf_buf *out, const char *path);
/* path as seen from directory dir, each absolute or relative to the
 * current directory: "../w/x.npy" (relative, even for an absolute path).
 * 0, or -1 when the current directory cannot be read. */
int kf_path_rel(kf_buf *out, const char *dir, const char *path);

/* ---- kfuse's own files (install.c) -------------------------------------------- */

/* The directory of the standard rules: $KFUSE_RULES_PATH, else the one
 * installed beside this program or libkfuse (<prefix>/share/kfuse/patterns),
 * else the source tree's patterns/ (a tool run from its build tree).  0, or
 * -1 when there is none. */
int kf_std_rules(kf_buf *out);
/* The rule file or directory a rules pass names: the standard rules for
 * NULL or ""; path itself when it is absolute or exists from the current
 * directory; else the standard rules' path/ when that exists; else path
 * (whose loading then says it is missing).  0, or -1 with an error in c
 * when the standard rules are wanted and not found. */
int kf_rules_find(kf_ctx *c, const char *path, kf_buf *out);

void kf_print_graph(kf_buf *out, kf_graph *g);
void kf_print_module(kf_buf *out, kf_module *m);
/* Prints m to f as kf_print_module would, through a small buffer (a big
 * module's text is never held whole); -1 with errno on a write error. */
int kf_print_module_file(FILE *f, kf_module *m);
/* Value names as kf_print_graph would print g now (its own name, or the
 * one the printer makes up for an unnamed value, in the value's scope), for
 * messages that refer to the printed output.  Names stay those of the
 * graph as it was when the namer was made. */
typedef struct kf_namer kf_namer;
kf_namer *kf_namer_new(kf_graph *g);
void kf_namer_put(kf_namer *nm, kf_buf *out, kf_vid v); /* `%name` or `%name#k` */
void kf_namer_free(kf_namer *nm);
/* A type as written in the IR: f32[64,N]. */
void kf_print_type(kf_buf *out, const kf_ctx *c, kf_tid t);

/* ---- verification, inference ----------------------------------------------- */

/* Checks every invariant of the graph (SSA dominance within blocks, operand
 * and result counts, types agree with inference, terminators, regions
 * isolated and well formed, use lists exact).  Returns the number of errors
 * it added to the context. */
int kf_verify(kf_graph *g);
/* Result types of node n as its op infers them; -1 with err on failure. */
int kf_infer(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen);

/* ---- tensors (runtime data; defined here so that op plugins can use them) -- */

typedef struct kf_tensor {
	uint8_t dtype, rank;
	int64_t dim[KF_MAX_RANK];
	void *data;   /* C order, little endian; i1 stored as one byte 0/1 */
	size_t nbytes;
} kf_tensor;

#endif
