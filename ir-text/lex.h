/* lex.h: tokens of the .kf text IR (lexer.re), shared by the parser.
 *
 * The lexer never reports: a bad byte, an unterminated string or a malformed
 * number becomes a KF_T_ERROR token with a reason, and the parser turns it
 * into a diagnostic at the token's offset.  Text need not be NUL-terminated
 * and may contain NULs; tokens hold byte offsets into it, never pointers. */
#ifndef KF_LEX_H
#define KF_LEX_H

#include "kf.h"

typedef enum {
	KF_T_EOF,
	KF_T_ERROR,
	KF_T_IDENT,  /* bare word: op, dtype, keyword, attribute key, symbolic dim */
	KF_T_VALUE,  /* %name, or %name#k (then idx >= 0) */
	KF_T_GLOBAL, /* @name */
	KF_T_INT,    /* digits only; the sign is a separate '-' */
	KF_T_FLOAT,  /* digits with '.' or an exponent */
	KF_T_STRING, /* "..." with the quotes; escapes decoded by the parser */
	KF_T_LPAREN, KF_T_RPAREN, KF_T_LBRACK, KF_T_RBRACK, KF_T_LBRACE, KF_T_RBRACE,
	KF_T_LT, KF_T_GT, KF_T_COMMA, KF_T_COLON, KF_T_EQ, KF_T_ARROW, KF_T_MINUS,
	KF_T_CARET,
	KF_T_STAR,   /* '*' between the factors of a symbolic dim (f32[B*T,768]) */
} kf_tokkind;

/* Why a KF_T_ERROR token is bad. */
typedef enum {
	KF_LEXERR_CHAR,        /* a stray ASCII character */
	KF_LEXERR_NUL,         /* a NUL byte */
	KF_LEXERR_UTF8,        /* a byte that starts no valid UTF-8 sequence */
	KF_LEXERR_NONASCII,    /* valid UTF-8, but outside a string or comment */
	KF_LEXERR_STR_EOL,     /* string not closed before the end of the line */
	KF_LEXERR_STR_EOF,     /* string not closed before the end of the file */
	KF_LEXERR_STR_BYTE,    /* a NUL or invalid UTF-8 inside a string */
	KF_LEXERR_NUMBER,      /* digits run into letters: 12ab, 1.2.3 */
	KF_LEXERR_SIGIL,       /* '%' or '@' without a name */
} kf_lexerr;

typedef struct kf_token {
	uint8_t kind;  /* kf_tokkind */
	uint8_t err;   /* kf_lexerr, for KF_T_ERROR */
	bool bol;      /* first token of its line */
	uint32_t off;  /* byte offset of the first byte */
	uint32_t len;  /* bytes; for KF_T_VALUE with #k, the whole "%s#k" */
	uint32_t nlen; /* KF_T_VALUE, KF_T_GLOBAL: bytes of the name (after the sigil);
			* KF_LEXERR_STR_BYTE: offset of the bad byte in the token */
	int32_t idx;   /* KF_T_VALUE: k of %name#k (saturated at INT32_MAX), -1 if none */
} kf_token;

typedef struct kf_lexer {
	const char *base, *cur, *lim;
	bool nl; /* a newline (or the start) since the last token */
} kf_lexer;

/* len must be below 4 GiB (offsets are 32-bit; the parser checks), and
 * text[len] must be a readable 0 (a sentinel; kf_source_add puts one). */
void kf_lex_init(kf_lexer *lx, const char *text, size_t len);
void kf_lex_next(kf_lexer *lx, kf_token *t);

#endif
