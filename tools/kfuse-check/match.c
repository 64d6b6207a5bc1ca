/* match.c: the check algorithm, as FileCheck's checkInput.
 *
 * The input is cut into regions at CHECK-LABEL matches (found first, in a
 * scan that ignores everything else); within a region each directive is
 * matched after the previous one: its DAG group first (matches may come in
 * any order but not overlap), then the directive itself, then its NOTs over
 * the text it skipped.  A failure ends its region, not the run, so one run
 * reports a failure per label region, as FileCheck does.
 */
#include "kfc.h"

#include <stdlib.h>
#include <string.h>

#define MAXERRS 16

static const char *desc(const kfc_pattern *p, kfc_str *tmp)
{
	return kfc_kind_name(p, tmp);
}

static size_t off(kfc_ctx *c, const char *p)
{
	return (size_t)(p - c->input.text);
}

static size_t edit_distance(const char *a, size_t na, const char *b, size_t nb)
{
	size_t *row = kfc_xrealloc(NULL, (nb + 1) * sizeof *row);
	for (size_t j = 0; j <= nb; j++)
		row[j] = j;
	for (size_t i = 1; i <= na; i++) {
		size_t prev = row[0];
		row[0] = i;
		for (size_t j = 1; j <= nb; j++) {
			size_t old = row[j];
			size_t best = prev + (a[i - 1] != b[j - 1]);
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			if (old + 1 < best)
				best = old + 1;
			row[j] = best;
			prev = old;
		}
	}
	size_t d = row[nb];
	free(row);
	return d;
}

/* FileCheck's printFuzzyMatch: the nearby position most like the pattern
 * (fixed text, or the regex text itself), within 4096 bytes. */
static void fuzzy(kfc_ctx *c, kfc_pattern *p, const char *buf, size_t n)
{
	const char *ex = p->is_fixed ? p->fixed : p->re;
	size_t exn = p->is_fixed ? p->fixedlen : p->relen;
	size_t lines = 0, best = SIZE_MAX;
	double bestq = 0;
	for (size_t i = 0, e = n < 4096 ? n : 4096; i != e; i++) {
		if (buf[i] == '\n')
			lines++;
		if (buf[i] == ' ' || buf[i] == '\t')
			continue;
		size_t m = n - i < exn ? n - i : exn;
		const char *nl = memchr(buf + i, '\n', m);
		if (nl)
			m = (size_t)(nl - (buf + i));
		double q = (double)edit_distance(buf + i, m, ex, exn) + (double)lines / 100.;
		if (q < bestq || best == SIZE_MAX) {
			best = i;
			bestq = q;
		}
	}
	if (best && best != SIZE_MAX && bestq < 50) {
		kfc_record(c, p, KFC_M_FUZZY, off(c, buf + best), off(c, buf + best), NULL);
		kfc_msg(c, buf + best, NULL, "note", "possible intended match here");
	}
}

/* FileCheck's reportMatchResult: true when an error was reported. */
static bool report(kfc_ctx *c, bool expected, kfc_pattern *p, int i, const char *buf,
	size_t n, int res, size_t pos, size_t len, kfc_err *errs, int nerrs)
{
	kfc_str d = {0};
	char cnt[48] = "";
	if (p->count > 1)
		snprintf(cnt, sizeof cnt, " (%d out of %d)", i, p->count);
	if (res == KFC_MATCH) {
		if (expected) {
			if (c->o.verbose && (p->kind != KFC_EOF || c->o.vverbose))
				kfc_record(c, p, KFC_M_FOUND, off(c, buf + pos), off(c, buf + pos + len), NULL);
			return false;
		}
		kfc_record(c, p, KFC_M_EXCLUDED_FOUND, off(c, buf + pos), off(c, buf + pos + len), NULL);
		kfc_msg(c, p->loc, NULL, "error", "%s: excluded string found in input%s", desc(p, &d), cnt);
		kfc_msg(c, buf + pos, buf + pos + len, "note", "found here");
		kfc_print_substs(c, p, buf + pos, KFC_M_EXCLUDED_FOUND);
		kfc_str_free(&d);
		return true;
	}
	bool perr = res == KFC_MERROR;
	for (int k = 0; k < nerrs; k++)
		kfc_msg(c, errs[k].at, NULL, "error", "%s", errs[k].msg);
	if (!expected && !perr)
		return false;
	int mt = perr ? KFC_M_INVALID : KFC_M_NONE;
	kfc_record(c, p, mt, off(c, buf), off(c, buf + n), NULL);
	for (int k = 0; k < nerrs; k++)
		kfc_record(c, p, mt, off(c, buf), off(c, buf), kfc_strndup(&c->arena, errs[k].msg, strlen(errs[k].msg)));
	if (!perr) {
		kfc_msg(c, p->loc, NULL, "error", "%s: %s string not found in input%s", desc(p, &d),
			expected ? "expected" : "excluded", cnt);
		kfc_msg(c, buf, NULL, "note", "scanning from here");
	}
	kfc_print_substs(c, p, buf, mt);
	if (expected)
		fuzzy(c, p, buf, n);
	kfc_str_free(&d);
	return true;
}

static int try_match(kfc_ctx *c, kfc_pattern *p, const char *buf, size_t n, size_t *pos,
	size_t *len, kfc_err *errs, int *nerrs)
{
	return kfc_pattern_match(c, p, buf, n, pos, len, errs, nerrs, MAXERRS);
}

/* FileCheck's CheckNot: every NOT is tried; true if any was found. */
static bool check_nots(kfc_ctx *c, const char *buf, size_t n, kfc_pattern **nots, int nnots)
{
	bool fail = false;
	for (int i = 0; i < nnots; i++) {
		kfc_err errs[MAXERRS];
		int nerrs;
		size_t pos = 0, len = 0;
		int r = try_match(c, nots[i], buf, n, &pos, &len, errs, &nerrs);
		fail |= report(c, false, nots[i], 1, buf, n, r, pos, len, errs, nerrs);
	}
	return fail;
}

typedef struct range {
	size_t pos, end;
} range;

/* One search of a DAG pattern from offset `from`, or its remembered
 * answer (dagscan.c). */
static int dag_find(kfc_ctx *c, kfc_pattern *p, const char *buf, size_t n, size_t from, kfc_dag_memo *memo,
	size_t *pos, size_t *len, kfc_err *errs, int *nerrs)
{
	int r;
	*nerrs = 0;
	if (kfc_dag_memo_get(memo, p, from, &r, pos, len))
		return r;
	r = try_match(c, p, buf + from, n - from, pos, len, errs, nerrs);
	kfc_dag_memo_put(memo, p, from, r, *pos, *len);
	return r;
}

/* At the first pattern k of a DAG group: where each of the group's first
 * searches from start may begin (hint, relative to start). */
static void dag_group_hints(kfc_ctx *c, kfc_check *ck, int k, const char *buf, size_t n, size_t start, size_t *hint)
{
	int e = k;
	while (e < ck->ndagnot && ck->dagnot[e]->kind != KFC_NOT)
		e++;
	if (e - k >= 4) /* a pass over the region pays for itself */
		kfc_dag_hints(c, ck->dagnot + k, e - k, buf + start, n - start, hint + k);
}

/* FileCheck's CheckDag.  Returns where the directive itself is searched
 * from, SIZE_MAX on failure; NOTs after the last DAG group go to *nots. */
static size_t check_dag(kfc_ctx *c, kfc_check *ck, const char *buf, size_t n,
	kfc_pattern ***nots, int *nnots, int *capnots)
{
	size_t start = 0;
	range *mr = NULL;
	int nmr = 0, capmr = 0;
	/* where each pattern's first search may begin, and searches done
	 * (dagscan.c: the same results, without the repeated scans) */
	size_t *hint = kfc_xrealloc(NULL, ((size_t)ck->ndagnot + 1) * sizeof *hint);
	memset(hint, 0, ((size_t)ck->ndagnot + 1) * sizeof *hint);
	kfc_dag_memo *memo = kfc_dag_memo_new();
	for (int k = 0; k < ck->ndagnot; k++) {
		kfc_pattern *p = ck->dagnot[k];
		if (p->kind == KFC_NOT) {
			KFC_PUSH(*nots, *nnots, *capnots, p);
			continue;
		}
		if (k == 0 || ck->dagnot[k - 1]->kind == KFC_NOT)
			dag_group_hints(c, ck, k, buf, n, start, hint);
		size_t mpos = start, mlen = 0, from = start + hint[k];
		int mi = 0;
		for (;;) {
			kfc_err errs[MAXERRS];
			int nerrs;
			size_t pos = 0, len = 0;
			int r = dag_find(c, p, buf, n, from, memo, &pos, &len, errs, &nerrs);
			if (r != KFC_MATCH) {
				report(c, true, p, 1, buf + mpos, n - mpos, r, 0, 0, errs, nerrs);
				free(mr);
				free(hint);
				kfc_dag_memo_free(memo);
				return SIZE_MAX;
			}
			mlen = len;
			mpos = from + pos;
			range m = {mpos, mpos + mlen};
			if (c->o.dag_overlap) {
				if (nmr == 0)
					KFC_PUSH(mr, nmr, capmr, m);
				else {
					mr[0].pos = m.pos < mr[0].pos ? m.pos : mr[0].pos;
					mr[0].end = m.end > mr[0].end ? m.end : mr[0].end;
				}
				break;
			}
			/* the first earlier match that ends after this one starts */
			bool overlap = false;
			for (; mi < nmr; mi++)
				if (m.pos < mr[mi].end) {
					overlap = mr[mi].pos < m.end;
					break;
				}
			if (!overlap) {
				KFC_PUSH(mr, nmr, capmr, m);
				memmove(mr + mi + 1, mr + mi, (size_t)(nmr - 1 - mi) * sizeof *mr);
				mr[mi] = m;
				break;
			}
			if (c->o.vverbose)
				kfc_record(c, p, KFC_M_DISCARDED, off(c, buf + m.pos), off(c, buf + m.end), NULL);
			mpos = from = mr[mi].end;
			mi++;
		}
		if (c->o.verbose)
			kfc_record(c, p, KFC_M_FOUND, off(c, buf + mpos), off(c, buf + mpos + mlen), NULL);
		/* end of a DAG group: check the NOTs before it, then move on */
		if (k + 1 == ck->ndagnot || ck->dagnot[k + 1]->kind == KFC_NOT) {
			if (*nnots) {
				if (check_nots(c, buf + start, mr[0].pos - start, *nots, *nnots)) {
					free(mr);
					free(hint);
					kfc_dag_memo_free(memo);
					return SIZE_MAX;
				}
				*nnots = 0;
			}
			start = mr[nmr - 1].end;
			nmr = 0;
		}
	}
	free(mr);
	free(hint);
	kfc_dag_memo_free(memo);
	return start;
}

static int count_newlines(const char *s, size_t n, const char **first)
{
	int count = 0;
	*first = NULL;
	for (size_t i = 0; i < n; i++) {
		if (s[i] != '\n' && s[i] != '\r')
			continue;
		count++;
		/* \n\r and \r\n are one newline */
		if (i + 1 < n && (s[i + 1] == '\n' || s[i + 1] == '\r') && s[i] != s[i + 1])
			i++;
		if (count == 1)
			*first = s + i + 1;
	}
	return count;
}

/* CHECK-NEXT/-EMPTY: exactly one newline skipped; CHECK-SAME: none. */
static bool wrong_line(kfc_ctx *c, kfc_pattern *p, const char *skip, size_t n)
{
	if (p->kind != KFC_NEXT && p->kind != KFC_EMPTY && p->kind != KFC_SAME)
		return false;
	const char *first;
	int nl = count_newlines(skip, n, &first);
	const char *name = p->kind == KFC_NEXT ? "-NEXT" : p->kind == KFC_EMPTY ? "-EMPTY" : "-SAME";
	const char *msg;
	if (p->kind == KFC_SAME) {
		if (nl == 0)
			return false;
		msg = "is not on the same line as the previous match";
	} else if (nl == 0)
		msg = "is on the same line as previous match";
	else if (nl != 1)
		msg = "is not on the line after the previous match";
	else
		return false;
	kfc_msg(c, p->loc, NULL, "error", "%.*s%s: %s", (int)p->prefixlen, p->prefix, name, msg);
	kfc_msg(c, skip + n, NULL, "note", "'next' match was here");
	kfc_msg(c, skip, NULL, "note", "previous match ended here");
	if (p->kind != KFC_SAME && nl > 1)
		kfc_msg(c, first, NULL, "note", "non-matching line after previous match is here");
	return true;
}

/* FileCheck's FileCheckString::Check: position of the match, SIZE_MAX on
 * failure; *mlen is the length from the first to the last COUNT match. */
static size_t check_one(kfc_ctx *c, kfc_check *ck, const char *buf, size_t n, bool label_scan,
	size_t *mlen)
{
	kfc_pattern *p = ck->pat;
	kfc_pattern **nots = NULL;
	int nnots = 0, capnots = 0;
	size_t last = 0;
	if (!label_scan) {
		last = check_dag(c, ck, buf, n, &nots, &nnots, &capnots);
		if (last == SIZE_MAX) {
			free(nots);
			return SIZE_MAX;
		}
	}
	size_t end = last, first = 0;
	for (int i = 1; i <= p->count; i++) {
		kfc_err errs[MAXERRS];
		int nerrs;
		size_t pos = 0, len = 0;
		int r = try_match(c, p, buf + end, n - end, &pos, &len, errs, &nerrs);
		if (report(c, true, p, i, buf + end, n - end, r, pos, len, errs, nerrs) || r != KFC_MATCH) {
			free(nots);
			return SIZE_MAX;
		}
		if (i == 1)
			first = end + pos;
		end += pos + len;
	}
	*mlen = end - first;
	if (!label_scan) {
		if (wrong_line(c, p, buf + last, first - last)) {
			if (c->o.verbose) {
				for (int k = c->ndiags - 1; k >= 0 && c->diags[k].pat == p; k--)
					c->diags[k].mtype = KFC_M_WRONG_LINE;
			} else
				kfc_record(c, p, KFC_M_WRONG_LINE, off(c, buf + first), off(c, buf + end), NULL);
			free(nots);
			return SIZE_MAX;
		}
		if (check_nots(c, buf + last, first - last, nots, nnots)) {
			free(nots);
			return SIZE_MAX;
		}
	}
	free(nots);
	return first;
}

static void clear_local_vars(kfc_ctx *c)
{
	for (int i = 0; i < c->nvars; i++)
		if (c->vars[i].name[0] != '$')
			c->vars[i].has_value = false;
}

bool kfc_check_input(kfc_ctx *c)
{
	const char *buf = c->input.text;
	size_t n = c->input.len;
	bool failed = false;
	int i = 0, j = 0, e = c->nchecks;
	for (;;) {
		const char *region = buf;
		size_t rlen = n;
		if (j != e) {
			kfc_check *lab = &c->checks[j];
			if (lab->pat->kind != KFC_LABEL) {
				j++;
				continue;
			}
			size_t len = 0, pos = check_one(c, lab, buf, n, true, &len);
			if (pos == SIZE_MAX)
				return false; /* nothing else can be checked */
			rlen = pos + len;
			buf += rlen;
			n -= rlen;
			j++;
		}
		/* The first region keeps variables: -D ones are defined before it. */
		if (i != 0 && c->o.var_scope)
			clear_local_vars(c);
		for (; i != j; i++) {
			size_t len = 0, pos = check_one(c, &c->checks[i], region, rlen, false, &len);
			if (pos == SIZE_MAX) {
				failed = true;
				i = j;
				break;
			}
			region += pos + len;
			rlen -= pos + len;
		}
		if (j == e)
			break;
	}
	return !failed;
}
