/* parse_int.h: the parser's state, shared by parse.c (tokens, graphs,
 * modules), parse_stmt.c (statements, regions), parse_fast.c (the fast
 * lane), parse_names.c (names) and parse_lit.c (types, literals,
 * attributes, constants).  Private to ir-text. */
#ifndef KF_PARSE_INT_H
#define KF_PARSE_INT_H

#include "kf.h"
#include "lex.h"

#define KF_PARSE_MAX_ERRORS 20 /* then "too many errors" and stop */
#define KF_PARSE_MAX_LIST 256  /* attribute list nesting */
#define KF_PARSE_MAX_REGION 64 /* region nesting */
#define KF_POISON KF_NONE      /* a name whose definition failed: uses stay quiet */

/* The binding of a value name, by the name's sid (parse_names.c).  Valid
 * only when scope is the current scope's id, so a new scope (graph or
 * region) hides every older binding without clearing anything. */
#define KF_SCOPE_EMPTY 0
#define KF_SCOPE_DEAD 1         /* never a current scope */
#define KF_SCOPE_MULTI 0x80000000u /* in scope: the node has several results */
typedef struct kf_pbind {
	uint32_t scope; /* | KF_SCOPE_MULTI */
	kf_vid vid;     /* first result, or KF_POISON */
	uint32_t off;   /* the defining '%name' token */
} kf_pbind;

typedef struct kf_pundo {
	kf_sid sid;
	kf_pbind b;
} kf_pundo;

/* A literal scalar as written, before a type says what it must be. */
enum { KF_LIT_INT, KF_LIT_FLOAT, KF_LIT_BOOL };
typedef struct kf_lit {
	uint8_t kind;
	uint32_t off;
	int64_t i;
	double f;
} kf_lit;

/* An op name seen before: the registry's hash of each statement's op word
 * was a noticeable share of the parse, and a file uses a handful of ops. */
#define KF_PARSE_OPCACHE 64
typedef struct kf_opcache {
	const char *name; /* the registry's; NULL when empty */
	uint32_t len;
	int op;
} kf_opcache;

typedef struct kf_parser {
	kf_ctx *c;
	kf_srcid src;
	const char *text;
	size_t len;
	kf_lexer lx;
	kf_token tok;
	int nerr;
	bool stop;     /* too many errors: unwind */
	bool building; /* no error yet, so nodes are still being created */

	kf_graph *g;
	kf_pbind *bind; uint32_t capbind;        /* by sid */
	uint32_t scope, nscope;
	kf_pundo *undo; uint32_t nundo, capundo; /* bindings a region shadowed */
	uint32_t outer[KF_PARSE_MAX_REGION + 1]; /* enclosing scopes, for a hint */
	int depth;                               /* region nesting */

	kf_opcache opc[KF_PARSE_OPCACHE];
	kf_tid last_type;                   /* the last type read, and its text */
	uint32_t last_type_off, last_type_len;
	kf_arena tmp;  /* attribute lists, until kf_node_set_attrs copies them */
	kf_buf sbuf;   /* a decoded string */
	kf_lit *lit; uint32_t nlit, caplit; /* dense literal elements */
	const char *dir;                    /* the file's directory; NULL: the current one */
	kf_sid *plugin; uint32_t nplugin;   /* `plugin "FILE"` lines, as written */
	int nprovider;                      /* unknown ops looked up among the standard rules */
} kf_parser;

/* parse.c */
void kf_parse_err(kf_parser *p, uint32_t off, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void kf_parse_next(kf_parser *p);
/* Reports "expected WHAT near TOK" (silent on a lexer error, already told). */
void kf_parse_expected(kf_parser *p, const char *what);
bool kf_parse_accept(kf_parser *p, int kind);
bool kf_parse_expect(kf_parser *p, int kind, const char *what);
/* Expects the closer of an opener at open_off, naming it when lines differ. */
bool kf_parse_close(kf_parser *p, int kind, const char *what, char opench, uint32_t open_off);
bool kf_parse_is_word(const kf_parser *p, const char *w);
kf_token kf_parse_peek(const kf_parser *p); /* the token after p->tok */
int kf_parse_line(kf_parser *p, uint32_t off);

/* parse_stmt.c */
/* Statements up to the closing '}' of a graph body or region. */
bool kf_parse_block(kf_parser *p, kf_bid b, uint32_t open_off, bool region);
/* `(args) -> (types)` of graph g. */
bool kf_parse_header(kf_parser *p, kf_graph *g);
/* A token's text for messages, quoted and cut short: 'foo' or end of file. */
const char *kf_parse_near(const kf_parser *p, const kf_token *t, char *buf, size_t n);

/* parse_fast.c */
extern const bool kf_parse_namech[256];    /* [A-Za-z0-9_.$] */
extern const bool kf_parse_wordstart[256]; /* [A-Za-z_$] */
extern const bool kf_parse_blank[256];     /* the blanks within a line: ' ' '\t' '\r' */
static inline const char *kf_parse_blanks(const char *q)
{
	while (kf_parse_blank[(unsigned char)*q])
		q++;
	return q;
}
/* The op named by the n bytes at s, or -1. */
int kf_parse_op(kf_parser *p, const char *s, uint32_t n);
/* Positions the lexer at q, within a line, and reads the token there. */
void kf_parse_relex(kf_parser *p, const char *q);
/* Reads and builds the run of plain statements that starts at p->tok (a
 * `%name` first on its line, while building, in block b); true when it took
 * any, with p->tok the token after them. */
bool kf_parse_lane(kf_parser *p, kf_bid b);

/* parse_names.c */
/* The string-table hash of value token t's name; its slot is prefetched. */
uint32_t kf_parse_hash(const kf_parser *p, const kf_token *t);
/* The name of value token t, interned. */
kf_sid kf_parse_name(kf_parser *p, const kf_token *t);
kf_pbind *kf_parse_bind(kf_parser *p, kf_sid sid);
/* Binds %name (token t, interned as sid) to vid..vid+nres-1 in the current
 * scope; reports a redefinition unless `quiet`. */
void kf_parse_define(kf_parser *p, const kf_token *t, kf_sid sid, kf_vid vid, uint32_t nres, bool quiet);
void kf_parse_redefinition(kf_parser *p, const kf_token *t, uint32_t first);
/* Puts back the bindings a region shadowed since undo mark `mark`. */
void kf_parse_restore(kf_parser *p, uint32_t mark);
/* The value of a use token whose name hashes to h; KF_POISON after a
 * reported error. */
kf_vid kf_parse_resolve(kf_parser *p, const kf_token *t, uint32_t h);
/* "line:col" of an offset. */
void kf_parse_loc(kf_parser *p, uint32_t off, char *buf, size_t n);

/* parse_lit.c */
/* A type `f32[64,N]`; *tid is KF_NONE after a reported non-syntax error. */
bool kf_parse_type(kf_parser *p, kf_tid *tid);
/* Decodes the string token at p->tok (escapes; errors reported), interns
 * it and moves to the next token. */
kf_sid kf_parse_string(kf_parser *p);
/* `{k = v, ...}` at '{'; *out in p->tmp. */
bool kf_parse_attrs(kf_parser *p, kf_attr **out, uint32_t *n);
/* After `const`: the literal, optional attributes, ':' and the type; fills
 * *cst (in the graph's arena when p->building) and *tid. */
bool kf_parse_const(kf_parser *p, kf_const **cst, kf_attr **attrs, uint32_t *nattr, kf_tid *tid);

#endif
