/* lexer.re: the .kf tokenizer, compiled by re2c at build time.
 *
 * Reads through a bounds-checked YYPEEK, so the text needs no sentinel and
 * may hold NUL bytes: past the end it reads 0, and the $ rule fires only when
 * the cursor is really at the limit (re2c's "sentinel with bounds checks").
 * Input is bytes (re2c --input-encoding ascii); UTF-8 is accepted, and
 * checked, only inside strings and comments. */
#include "lex.h"

void kf_lex_init(kf_lexer *lx, const char *text, size_t len)
{
	lx->base = lx->cur = text;
	lx->lim = text + len;
	lx->nl = true;
}

/* Saturating decimal for the k of %name#k; the parser range-checks it. */
static int64_t lex_index(const char *p, const char *end)
{
	int64_t k = 0;
	for (; p < end; p++) {
		k = k * 10 + (*p - '0');
		if (k > INT32_MAX)
			return INT32_MAX;
	}
	return k;
}

/* After an unterminated string: what stopped it decides the message. */
static kf_lexerr string_stop(const char *cur, const char *lim)
{
	if (cur >= lim)
		return KF_LEXERR_STR_EOF;
	return *cur == '\n' ? KF_LEXERR_STR_EOL : KF_LEXERR_STR_BYTE;
}

static void tok(kf_lexer *lx, kf_token *t, const char *start, int kind)
{
	t->kind = (uint8_t)kind;
	t->off = (uint32_t)(start - lx->base);
	t->len = (uint32_t)(lx->cur - start);
	t->bol = lx->nl;
	lx->nl = false;
}

void kf_lex_next(kf_lexer *lx, kf_token *t)
{
	const char *cur = lx->cur, *lim = lx->lim, *mar = cur, *start;
	t->err = 0;
	t->nlen = 0;
	t->idx = -1;
	for (;;) {
		start = cur;
#define TOK(k) do { lx->cur = cur; tok(lx, t, start, (k)); return; } while (0)
#define ERR(e) do { lx->cur = cur; tok(lx, t, start, KF_T_ERROR); t->err = (uint8_t)(e); return; } while (0)
		/*!re2c
		re2c:api = custom;
		re2c:api:style = free-form;
		re2c:define:YYCTYPE = "unsigned char";
		re2c:define:YYPEEK = "(cur < lim ? (unsigned char)*cur : 0)";
		re2c:define:YYSKIP = "++cur;";
		re2c:define:YYBACKUP = "mar = cur;";
		re2c:define:YYRESTORE = "cur = mar;";
		re2c:define:YYLESSTHAN = "(lim - cur < @@{len})";
		re2c:yyfill:enable = 0;
		re2c:eof = 0;

		u8tail = [\x80-\xbf];
		u8 = [\xc2-\xdf] u8tail
		   | "\xe0" [\xa0-\xbf] u8tail
		   | [\xe1-\xec\xee\xef] u8tail u8tail
		   | "\xed" [\x80-\x9f] u8tail
		   | "\xf0" [\x90-\xbf] u8tail u8tail
		   | [\xf1-\xf3] u8tail u8tail u8tail
		   | "\xf4" [\x80-\x8f] u8tail u8tail;
		namech = [A-Za-z0-9_.$];
		dig = [0-9];
		exp = [eE] [+-]? dig+;
		strch = [^"\\\n\x00\x80-\xff] | "\\" [^\n\x00\x80-\xff] | u8;

		$ { lx->cur = cur; t->kind = KF_T_EOF; t->off = (uint32_t)(cur - lx->base);
		    t->len = 0; t->bol = true; return; }
		[ \t\r]+ { continue; }
		"\n" { lx->nl = true; continue; }
		"#" ([^\n\x00\x80-\xff] | u8)* { continue; }

		"%" namech+ { t->nlen = (uint32_t)(cur - start - 1); TOK(KF_T_VALUE); }
		"%" namech+ "#" dig+ {
			const char *h = start + 1;
			while (*h != '#')
				h++;
			t->nlen = (uint32_t)(h - start - 1);
			t->idx = lex_index(h + 1, cur);
			TOK(KF_T_VALUE);
		}
		"@" namech+ { t->nlen = (uint32_t)(cur - start - 1); TOK(KF_T_GLOBAL); }
		[%@] { ERR(KF_LEXERR_SIGIL); }

		dig+ "." dig* exp? | dig+ exp | "." dig+ exp? { TOK(KF_T_FLOAT); }
		dig+ { TOK(KF_T_INT); }
		dig namech* { ERR(KF_LEXERR_NUMBER); }
		[A-Za-z_$] namech* { TOK(KF_T_IDENT); }

		"\"" strch* "\"" { TOK(KF_T_STRING); }
		"\"" strch* {
			kf_lexerr e = string_stop(cur, lim);
			if (e == KF_LEXERR_STR_BYTE) { /* report the byte, resume after the string */
				t->nlen = (uint32_t)(cur - start);
				while (cur < lim && *cur != '"' && *cur != '\n')
					cur++;
				cur += cur < lim && *cur == '"';
			}
			ERR(e);
		}

		"(" { TOK(KF_T_LPAREN); }
		")" { TOK(KF_T_RPAREN); }
		"[" { TOK(KF_T_LBRACK); }
		"]" { TOK(KF_T_RBRACK); }
		"{" { TOK(KF_T_LBRACE); }
		"}" { TOK(KF_T_RBRACE); }
		"<" { TOK(KF_T_LT); }
		">" { TOK(KF_T_GT); }
		"," { TOK(KF_T_COMMA); }
		":" { TOK(KF_T_COLON); }
		"=" { TOK(KF_T_EQ); }
		"->" { TOK(KF_T_ARROW); }
		"-" { TOK(KF_T_MINUS); }
		"^" { TOK(KF_T_CARET); }

		"\x00" { ERR(KF_LEXERR_NUL); }
		u8 { ERR(KF_LEXERR_NONASCII); }
		[\x80-\xff] { ERR(KF_LEXERR_UTF8); }
		* { ERR(KF_LEXERR_CHAR); }
		*/
#undef TOK
#undef ERR
	}
}
