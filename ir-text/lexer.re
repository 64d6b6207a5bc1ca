/* lexer.re: the .kf tokenizer, compiled by re2c at build time.
 *
 * The text ends in a NUL sentinel (text[len] == 0; the context's copy of a
 * source has it) and may hold NUL bytes of its own: no rule matches past a
 * 0, and the rule for a 0 tells the end (the cursor past the limit) from a
 * NUL in the text, so nothing is read past the sentinel and no byte pays a
 * bounds check (re2c's sentinel method).  Bit vectors and computed gotos: a
 * name's bytes cost a table test each, not a chain of comparisons.
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
static int32_t lex_index(const char *p, const char *end)
{
	int64_t k = 0;
	for (; p < end; p++) {
		k = k * 10 + (*p - '0');
		if (k > INT32_MAX)
			return INT32_MAX;
	}
	return (int32_t)k;
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
		while (*cur == ' ') /* most blanks are single spaces: no trip through the DFA */
			cur++;
		start = cur;
#define TOK(k) do { lx->cur = cur; tok(lx, t, start, (k)); return; } while (0)
#define ERR(e) do { lx->cur = cur; tok(lx, t, start, KF_T_ERROR); t->err = (uint8_t)(e); return; } while (0)
		/*!re2c
		re2c:api = custom;
		re2c:api:style = free-form;
		re2c:define:YYCTYPE = "unsigned char";
		re2c:define:YYPEEK = "(unsigned char)*cur";
		re2c:define:YYSKIP = "++cur;";
		re2c:define:YYBACKUP = "mar = cur;";
		re2c:define:YYRESTORE = "cur = mar;";
		re2c:yyfill:enable = 0;
		re2c:flags:bit-vectors = 1;
		re2c:flags:computed-gotos = 1;

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

		[ \t\r]+ { continue; }
		"\n" { lx->nl = true; continue; }
		"#" ([^\n\x00\x80-\xff] | u8)* { continue; }

		"%" namech+ {
			/* %name#k by hand: the DFA's name loop stays a bit test
			 * (a '#' is a byte before the sentinel, so cur[1] is readable) */
			t->nlen = (uint32_t)(cur - start - 1);
			if (*cur == '#' && cur[1] >= '0' && cur[1] <= '9') {
				const char *k = ++cur;
				while (*cur >= '0' && *cur <= '9')
					cur++;
				t->idx = lex_index(k, cur);
			}
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
		"*" { TOK(KF_T_STAR); }

		"\x00" {
			if (cur > lim) { /* the sentinel */
				lx->cur = lim;
				t->kind = KF_T_EOF;
				t->off = (uint32_t)(lim - lx->base);
				t->len = 0;
				t->bol = true;
				return;
			}
			ERR(KF_LEXERR_NUL);
		}
		u8 { ERR(KF_LEXERR_NONASCII); }
		[\x80-\xff] { ERR(KF_LEXERR_UTF8); }
		* { ERR(KF_LEXERR_CHAR); }
		*/
#undef TOK
#undef ERR
	}
}
