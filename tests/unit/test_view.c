/* Unit tests of strided views (core/view.h) against the interpreter: a
 * chain of layout ops applied to a tensor holding 0, 1, 2, ... (its
 * elements are their own offsets) must read, at every index, the offset
 * the view computes for it; chains the view refuses are refused for a
 * reason (a reshape that splits a stride unevenly).  Random chains of
 * transposes, reshapes (merging and splitting dims), broadcast_to, slices
 * (negative steps too) and split results, as the attention kernels read
 * q, k and v through them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "kf_test.h"
#include "equiv.h"
#include "view.h"

/* Runs g (one input, its elements 0..n-1 as f64) and checks its result
 * against the view of the chain from the input to the returned value. */
static void check_graph(const char *text, bool want_view)
{
	kf_ctx *c = kf_ctx_new();
	kf_rt_register(c);
	kf_module *m = kft_parse(c, text);
	kf_graph *g = m->graph[0];
	kf_vid x = g->blk[0].arg[0];
	kf_view v;
	assert_true(kf_view_init(&v, kf_vtype(g, x)));
	/* the chain, from the returned value back to the input */
	kf_nid chain[32];
	uint32_t res[32];
	int nc = 0;
	for (kf_vid y = kf_in(g, kf_block_terminator(g, 0), 0); y != x; y = kf_in(g, kf_def(g, y), 0)) {
		assert_true(nc < 32);
		chain[nc] = kf_def(g, y);
		res[nc++] = kf_V(g, y)->idx;
	}
	bool ok = true;
	for (int i = nc - 1; i >= 0 && ok; i--)
		ok = kf_view_through(g, chain[i], res[i], &v);
	assert_int_equal(ok, want_view);
	if (ok) {
		kf_tensor in, out;
		const kf_type *t = kf_vtype(g, x);
		assert_int_equal(kf_tensor_alloc_type(&in, t), 0);
		for (int64_t i = 0; i < kf_tensor_numel(&in); i++)
			kf_tensor_set(&in, i, (double)i);
		assert_int_equal(kf_interp_run(g, &in, 1, &out, 1), 0);
		assert_int_equal(v.rank, out.rank);
		int64_t idx[KF_MAX_RANK] = {0};
		for (int64_t e = 0; e < kf_tensor_numel(&out); e++) {
			int64_t r = e;
			for (int d = out.rank - 1; d >= 0; d--) {
				idx[d] = r % out.dim[d];
				r /= out.dim[d];
			}
			if ((int64_t)kf_tensor_get(&out, e) != kf_view_offset(&v, idx))
				fail_msg("element %lld: the graph reads %lld, the view %lld\n%s", (long long)e,
					 (long long)kf_tensor_get(&out, e), (long long)kf_view_offset(&v, idx), text);
		}
		kf_tensor_free(&in);
		kf_tensor_free(&out);
	}
	kf_module_free(m);
	kf_ctx_free(c);
}

/* The layouts of attention: GPT-2's q/k/v from one projection, heads
 * permuted; grouped-query k/v repeated by broadcast_to and reshape; the
 * output's transpose back, as the output chain's inverse view. */
static void test_attention_layouts(void **st)
{
	(void)st;
	check_graph("graph @g(%x: f64[2,5,24]) -> (f64[2,2,4,5]) {\n"
		    "  %s:3 = split(%x) {axis = 2, sizes = [8, 8, 8]} : f64[2,5,8], f64[2,5,8], f64[2,5,8]\n"
		    "  %r = reshape(%s#1) {shape = [2, 5, 2, 4]} : f64[2,5,2,4]\n"
		    "  %t = transpose(%r) {perm = [0, 2, 3, 1]} : f64[2,2,4,5]\n  return %t\n}\n", true);
	check_graph("graph @g(%k: f64[2,2,3,4]) -> (f64[2,6,3,4]) {\n"
		    "  %a = reshape(%k) {shape = [2, 2, 1, 3, 4]} : f64[2,2,1,3,4]\n"
		    "  %b = broadcast_to(%a) {shape = [2, 2, 3, 3, 4]} : f64[2,2,3,3,4]\n"
		    "  %c = reshape(%b) {shape = [2, 6, 3, 4]} : f64[2,6,3,4]\n  return %c\n}\n", true);
	check_graph("graph @g(%x: f64[3,8,6]) -> (f64[3,4,3,2]) {\n"
		    "  %s = slice(%x) {starts = [7, 1], ends = [-100, 6], axes = [1, 2], steps = [-2, 1]} : f64[3,4,5]\n"
		    "  %t = slice(%s) {starts = [0], ends = [4], axes = [2]} : f64[3,4,4]\n"
		    "  %r = reshape(%t) {shape = [3, 4, 2, 2]} : f64[3,4,2,2]\n"
		    "  %b = broadcast_to(%r) {shape = [3, 4, 2, 2]} : f64[3,4,2,2]\n"
		    "  %u = transpose(%b) {perm = [0, 1, 3, 2]} : f64[3,4,2,2]\n"
		    "  %q = slice(%u) {starts = [0], ends = [3], axes = [3]} : f64[3,4,2,2]\n"
		    "  %w = reshape(%q) {shape = [3, 4, 4]} : f64[3,4,4]\n"
		    "  %z = slice(%w) {starts = [1], ends = [4], axes = [2]} : f64[3,4,3]\n"
		    "  %y = reshape(%z) {shape = [3, 4, 3, 1]} : f64[3,4,3,1]\n"
		    "  %o = broadcast_to(%y) {shape = [3, 4, 3, 2]} : f64[3,4,3,2]\n  return %o\n}\n", false);
}

/* Random chains: the view agrees with the interpreter wherever it takes
 * the chain, and takes every chain of transposes and whole-dim reshapes. */
static void test_random_chains(void **st)
{
	(void)st;
	uint64_t rng = 3;
	int taken = 0;
	for (int trial = 0; trial < 60; trial++) {
		kf_buf t = {0};
		int64_t dims[KF_MAX_RANK] = {2, 3, 4, 2};
		int rank = 4;
		kf_buf_printf(&t, "graph @g(%%x: f64[2,3,4,2]) -> (f64[");
		kf_buf body = {0};
		const char *cur = "%x";
		char names[8][8];
		for (int step = 0; step < 5; step++) {
			int kind = (int)(kf_rng_next(&rng) % 4);
			int64_t nd[KF_MAX_RANK];
			int nr = rank;
			snprintf(names[step], sizeof names[step], "%%v%d", step);
			kf_buf_printf(&body, "  %s = ", names[step]);
			if (kind == 0) { /* a transpose */
				int64_t perm[KF_MAX_RANK];
				for (int d = 0; d < rank; d++)
					perm[d] = d;
				for (int d = rank - 1; d > 0; d--) {
					int j = (int)(kf_rng_next(&rng) % (uint64_t)(d + 1));
					int64_t tmp = perm[d];
					perm[d] = perm[j];
					perm[j] = tmp;
				}
				kf_buf_puts(&body, "transpose(");
				kf_buf_printf(&body, "%s) {perm = [", cur);
				for (int d = 0; d < rank; d++) {
					kf_buf_printf(&body, "%s%lld", d ? ", " : "", (long long)perm[d]);
					nd[d] = dims[perm[d]];
				}
				kf_buf_puts(&body, "]}");
			} else if (kind == 1 && rank > 1) { /* merge two adjacent dims */
				int d = (int)(kf_rng_next(&rng) % (uint64_t)(rank - 1));
				nr = rank - 1;
				for (int i = 0, j = 0; i < rank; i++, j++) {
					nd[j] = dims[i];
					if (i == d) {
						nd[j] *= dims[i + 1];
						i++;
					}
				}
				kf_buf_printf(&body, "reshape(%s) {shape = [", cur);
				for (int i = 0; i < nr; i++)
					kf_buf_printf(&body, "%s%lld", i ? ", " : "", (long long)nd[i]);
				kf_buf_puts(&body, "]}");
			} else if (kind == 2 && rank < 6) { /* insert a dim of 1, then broadcast it to 2 */
				int d = (int)(kf_rng_next(&rng) % (uint64_t)(rank + 1));
				nr = rank + 1;
				for (int i = 0, j = 0; j < nr; j++)
					nd[j] = j == d ? 1 : dims[i++];
				kf_buf_printf(&body, "reshape(%s) {shape = [", cur);
				for (int i = 0; i < nr; i++)
					kf_buf_printf(&body, "%s%lld", i ? ", " : "", (long long)nd[i]);
				kf_buf_printf(&body, "]} : f64[");
				for (int i = 0; i < nr; i++)
					kf_buf_printf(&body, "%s%lld", i ? "," : "", (long long)nd[i]);
				kf_buf_printf(&body, "]\n  %sb = broadcast_to(%s) {shape = [", names[step], names[step]);
				nd[d] = 2;
				for (int i = 0; i < nr; i++)
					kf_buf_printf(&body, "%s%lld", i ? ", " : "", (long long)nd[i]);
				kf_buf_puts(&body, "]}");
				snprintf(names[step], sizeof names[step], "%%v%db", step);
			} else { /* a slice of the last dim with a step */
				nr = rank;
				memcpy(nd, dims, sizeof nd);
				int64_t dl = dims[rank - 1];
				nd[rank - 1] = (dl + 1) / 2;
				kf_buf_printf(&body, "slice(%s) {starts = [0], ends = [%lld], axes = [%d], steps = [2]}", cur,
					      (long long)dl, rank - 1);
			}
			kf_buf_puts(&body, " : f64[");
			for (int i = 0; i < nr; i++)
				kf_buf_printf(&body, "%s%lld", i ? "," : "", (long long)nd[i]);
			kf_buf_puts(&body, "]\n");
			memcpy(dims, nd, sizeof dims);
			rank = nr;
			cur = names[step];
		}
		for (int i = 0; i < rank; i++)
			kf_buf_printf(&t, "%s%lld", i ? "," : "", (long long)dims[i]);
		kf_buf_printf(&t, "]) {\n%.*s  return %s\n}\n", (int)body.n, body.p, cur);
		kf_buf_putc(&t, 0);
		/* every op of these chains is a view (slices by 2 of whole dims,
		 * merges of adjacent dims, broadcasts, transposes) */
		check_graph(t.p, true);
		taken++;
		kf_buf_free(&t);
		kf_buf_free(&body);
	}
	assert_int_equal(taken, 60);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_attention_layouts),
		cmocka_unit_test(test_random_chains),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
