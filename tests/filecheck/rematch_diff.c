/* rematch_diff: kfuse-check's regex engine (tools/kfuse-check/rematch.c)
 * against glibc's regexec on random regexes and texts.
 *
 *   rematch_diff [CASES [SEED]]
 *
 * Each case is a random ERE in the canonical form regex.c writes (bytes a,
 * b, newline; . [ab] [^a] ^ $ \< \> groups, alternation, * + ? {m,n},
 * backreferences) and a random text.  The match span (leftmost-longest)
 * must be the one an exhaustive backtracking search finds (the engine's own
 * backreference path, forced); for regexes without anchors, word
 * boundaries or backreferences (glibc gets those wrong inside repetitions)
 * the span and the captures must be glibc's.  Also checks the budget: a
 * regex with backreferences that glibc takes minutes on (or overflows its
 * stack on) returns "over the budget" in bounded time.  Exit 0 when all
 * agree; SHOW=1 prints capture differences. */
#include "kfc.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

void *kfc_xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);
	if (!q)
		abort();
	return q;
}

static uint64_t rng;
static unsigned rnd(unsigned n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (unsigned)(rng % n);
}

typedef struct gen {
	char s[512];
	size_t n;
	int groups, closed[10];
	bool plain; /* no anchors, word boundaries or backreferences */
} gen;

static void put(gen *g, const char *t)
{
	size_t k = strlen(t);
	if (g->n + k < sizeof g->s - 1) {
		memcpy(g->s + g->n, t, k);
		g->n += k;
	}
}

static void alt(gen *g, int depth);

static void atom(gen *g, int depth)
{
	static const char *const simple[] = {"a", "b", "a", "b", ".", "[ab]", "[^a]", "\n"};
	unsigned r = rnd(20);
	if (r < 12 || depth > 3) {
		put(g, simple[rnd(8)]);
	} else if (r < 15) {
		int k = ++g->groups;
		put(g, "(");
		alt(g, depth + 1);
		put(g, ")");
		if (k < 10)
			g->closed[k] = 1;
	} else if (r < 16) {
		if (!g->plain)
			put(g, rnd(2) ? "^" : "$");
		return; /* an anchor takes no repetition */
	} else if (r < 17) {
		if (!g->plain)
			put(g, rnd(2) ? "\\<" : "\\>");
		return;
	} else if (g->plain) {
		put(g, "b");
	} else {
		int k = 1 + (int)rnd(9);
		if (k <= g->groups && k < 10 && g->closed[k]) {
			char t[4] = {'\\', (char)('0' + k), 0};
			put(g, t);
		} else {
			put(g, "a");
		}
	}
	unsigned q = rnd(12);
	static const char *const reps[] = {"*", "+", "?", "{0,2}", "{1,3}", "{2}", "{1,}"};
	if (q < 7)
		put(g, reps[q]);
}

static void cat(gen *g, int depth)
{
	int n = 1 + (int)rnd(4);
	for (int i = 0; i < n; i++)
		atom(g, depth);
}

static void alt(gen *g, int depth)
{
	cat(g, depth);
	while (rnd(5) == 0) {
		put(g, "|");
		cat(g, depth);
	}
}

static bool same(const regmatch_t *a, const regmatch_t *b, size_t nm)
{
	for (size_t k = 0; k < nm; k++)
		if (a[k].rm_so != b[k].rm_so || a[k].rm_eo != b[k].rm_eo)
			return false;
	return true;
}

static void show(const char *what, const char *re, const char *text, int ra, const regmatch_t *a, int rb,
		 const regmatch_t *b)
{
	printf("FAIL: /%s/ on \"%s\": %s %d [%d,%d), the Pike VM %d [%d,%d)\n", re, text, what, ra,
	       (int)a[0].rm_so, (int)a[0].rm_eo, rb, (int)b[0].rm_so, (int)b[0].rm_eo);
}

int main(int argc, char **argv)
{
	long cases = argc > 1 ? atol(argv[1]) : 20000;
	rng = argc > 2 ? strtoull(argv[2], NULL, 10) : 88172645463325252ULL;
	long bad = 0, ran = 0, glibc_caps = 0, budget = 0;
	for (long c = 0; c < cases; c++) {
		/* odd cases: plain regexes, checked against glibc too (whose
		 * anchors and word boundaries inside repetitions are wrong:
		 * /(\>.){0,2}a/ does not match "aaa" there) */
		gen g = {.plain = c & 1};
		alt(&g, 0);
		g.s[g.n] = 0;
		char text[64];
		size_t tn = rnd(24);
		for (size_t i = 0; i < tn; i++)
			text[i] = "aab\n"[rnd(4)];
		text[tn] = 0;
		bool icase = rnd(8) == 0;
		regex_t rx;
		if (regcomp(&rx, g.s, REG_EXTENDED | REG_NEWLINE | (icase ? REG_ICASE : 0)))
			continue;
		kfc_re re;
		if (kfc_re_compile(&re, g.s, g.n, icase)) {
			printf("FAIL: glibc compiles /%s/, kfuse-check does not\n", g.s);
			bad++;
			regfree(&rx);
			continue;
		}
		regmatch_t a[10], b[10], t[10];
		size_t nm = (size_t)(g.groups < 9 ? g.groups : 9) + 1;
		int rb = kfc_re_exec(&re, text, tn, nm, b);
		/* the exhaustive backtracker as the oracle of every regex */
		kfc_re bt = re;
		bt.backrefs = true;
		int rt = kfc_re_exec(&bt, text, tn, nm, t);
		ran++;
		if (rb < 0 || rt < 0) {
			budget++;
		} else if (rb != rt || (rb == 0 && (t[0].rm_so != b[0].rm_so || t[0].rm_eo != b[0].rm_eo))) {
			if (bad < 20)
				show("backtracking", g.s, text, rt, t, rb, b);
			bad++;
		}
		if (g.plain) {
			a[0].rm_so = 0;
			a[0].rm_eo = (regoff_t)tn;
			int ra = regexec(&rx, text, nm, a, REG_STARTEND);
			if ((ra == 0) != (rb == 0) || (ra == 0 && (a[0].rm_so != b[0].rm_so || a[0].rm_eo != b[0].rm_eo))) {
				if (bad < 20)
					show("glibc", g.s, text, ra, a, rb, b);
				bad++;
			} else if (ra == 0 && !same(a, b, nm)) {
				if (getenv("SHOW") && glibc_caps < 12) {
					printf("caps /%s/ on \"%s\":", g.s, text);
					for (size_t k = 1; k < nm; k++)
						printf(" g%zu glibc [%d,%d) ours [%d,%d) bt [%d,%d)", k, (int)a[k].rm_so, (int)a[k].rm_eo,
						       (int)b[k].rm_so, (int)b[k].rm_eo, (int)t[k].rm_so, (int)t[k].rm_eo);
					printf("\n");
				}
				glibc_caps++;
			}
		}
		regfree(&rx);
		kfc_re_free(&re);
	}
	/* the budget: glibc backtracks for minutes on this */
	const char *hard = "(a*)(a*)(a*)(a*)(a*)\\5\\4\\3\\2\\1b";
	char text[121];
	memset(text, 'a', 120);
	text[120] = 0;
	kfc_re re;
	regmatch_t m[1];
	clock_t t0 = clock();
	int r = kfc_re_compile(&re, hard, strlen(hard), false) ? 9 : kfc_re_exec(&re, text, 120, 1, m);
	double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
	kfc_re_free(&re);
	printf("%ld cases: %ld spans differ (from glibc's on plain regexes, from backtracking on all), "
	       "%ld captures from glibc's; %ld over the budget; the backreference bomb: %s in %.2f s\n", ran, bad,
	       glibc_caps, budget, r < 0 ? "over the budget" : "no error", secs);
	return bad || glibc_caps || r >= 0 || secs > 30 ? 1 : 0;
}
