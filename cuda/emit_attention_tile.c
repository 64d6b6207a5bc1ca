/* emit_attention_tile.c: the flash kernels' steps on one key tile, written
 * alike for the mma.sync kernel (emit_attention_mma.c) and the wgmma one
 * (emit_attention_wgmma.c): the score chain and the masks on the scores,
 * the online softmax (row maxima, the rescaling factor, the exponentials
 * and sums), the rescaling of the output, the packing of the
 * probabilities into A fragments, and the end (the division and the
 * stores).  The scores sit in the accumulator layout of mma.sync m16n8
 * tiles and of wgmma m64 alike: element i of sc[bn / 2] is at row r0 (+ 8
 * when bit 1 of i) and column c0 + 8 (i >> 2) + 2 q4 + (i & 1); a row's
 * values are spread over the 4 lanes of a quad, so two shuffles reduce it.
 *
 * In scope of the text: z, jt, r0, r1, q4, sc[bn / 2], oacc[dv / 2], m0,
 * m1, l0, l1 (the running maxima and sums of rows r0 and r1); the steps
 * leave a0, a1 (the factor the output must be rescaled by) and pf[bn /
 * 16][4] (P as the A fragments of the second product: the accumulators of
 * n-tiles 2j and 2j + 1 are the A fragment of k-step j).
 */
#include "emit_att_int.h"

bool kx_att_fold_scale(const kx *k, const kx_att *at, kf_buf *o)
{
	if (!at->fold)
		return false;
	kf_graph *g = k->g;
	kf_nid n = at->fnode;
	kf_nid d = kf_def(g, kf_in(g, n, at->fconst));
	kf_buf e = {0};
	kx_const_elem((kx *)k, d, "0", &e);
	/* s * c or s / c: exp(c s - c m) = 2^(s c log2(e) - m c log2(e)) */
	kf_buf_printf(o, "  const float kf_sl2 = %s(float)(%.*s) * 1.44269504f;\n",
		      kf_N(g, n)->op == KF_OP_DIV ? "1.0f / " : "", (int)e.n, e.p);
	kf_buf_free(&e);
	return true;
}

/* o = "min(name, T - 1)" where `part` (the tile runs past T, and reads
 * there would pass KF_EMIT_READ_PAST: kx_att_cols_past), else name;
 * T of a sized plan as text (an int, min() takes no mix of types). */
static void clamp(kx *k, kf_buf *o, const char *name, bool part, int64_t T, int64_t sT)
{
	if (part) {
		kf_buf_printf(o, "min(%s, ", name);
		kx_dimlini(k, o, T, sT, 0, 1, -1);
		kf_buf_putc(o, ')');
	} else {
		kf_buf_puts(o, name);
	}
	kf_buf_putc(o, '\0');
}

void kx_att_tile_scores(kx *k, const kx_att *at, const kx_att_step *st)
{
	kf_buf *b = &k->b;
	int bn = st->bn;
	int64_t sTk = KX_ATT_S(k, at, Tk), sTq = KX_ATT_S(k, at, Tq);
	bool kpart = !kx_multiple(k, at->Tk, sTk, bn), masks = (at->causal || kpart) && st->mask != KX_MASK_NONE;
	/* a folded scale and no masks: the scores are used as they are */
	if (st->fold && !masks)
		return;
	kf_buf_printf(b, "    const int c0 = jt * %d;\n", bn);
	if (st->mask == KX_MASK_EDGE) {
		kf_buf edge = {0};
		if (at->causal)
			kf_buf_printf(&edge, "c0 + %d > %s + %lld", bn - 1, st->rowmin, (long long)at->off);
		if (kpart) {
			kf_buf_printf(&edge, "%sc0 + %d > ", edge.n ? " || " : "", bn);
			kx_dim(k, &edge, at->Tk, sTk);
		}
		if (edge.n)
			kf_buf_printf(b, "    const bool edge = %.*s;\n", (int)edge.n, edge.p);
		kf_buf_free(&edge);
	}
	/* rows and columns past the edges are computed, masked or never
	 * written, but read the masks in range */
	kf_buf rtxt = {0}, ctxt = {0};
	clamp(k, &rtxt, "row", st->qpart, at->Tq, sTq);
	clamp(k, &ctxt, "col", kpart && !(st->past && kx_att_cols_past(k, at, bn)), at->Tk, sTk);
	/* two nested loops (n-tiles, then the 4 of each) unroll fully where
	 * one of bn / 2 with the helper inlined in it did not (a spill) */
	kf_buf_printf(b, "#pragma unroll\n    for (int j = 0; j < %d; j++)\n#pragma unroll\n      for (int r = 0; r < 4; r++) {\n",
		      bn / 8);
	kf_buf_puts(b, "        const int row = (r & 2) ? r1 : r0, col = c0 + j * 8 + 2 * q4 + (r & 1);\n");
	if (st->fold) {
		kf_buf_puts(b, "        (void)row;\n        float x = sc[4 * j + r];\n");
	} else if (st->pre) {
		kf_buf_puts(b, "        float x = ");
		kx_att_scorep_call(k, b);
		kf_buf_printf(b, "z, %s, %s, sc[4 * j + r]", rtxt.p, ctxt.p);
		for (int i = 0; i < st->pre->n; i++)
			kf_buf_printf(b, ", ml%d[%s]", i, st->pre->rowinv[i] ? "2 * j + (r & 1)" : "4 * j + r");
		kf_buf_puts(b, ");\n");
	} else {
		kf_buf_puts(b, "        float x = ");
		kx_att_score_call(k, b);
		kf_buf_printf(b, "z, %s, %s, sc[4 * j + r]);\n", rtxt.p, ctxt.p);
	}
	kf_buf_free(&rtxt);
	kf_buf_free(&ctxt);
	if (masks) {
		kf_buf_printf(b, "        if (%s(", st->mask == KX_MASK_EDGE ? "edge && " : "");
		if (kpart) {
			kf_buf_puts(b, "col >= ");
			kx_dim(k, b, at->Tk, sTk);
		}
		if (at->causal)
			kf_buf_printf(b, "%scol > row + %lld", kpart ? " || " : "", (long long)at->off);
		kf_buf_puts(b, ")) x = -KF_INF;\n");
	}
	kf_buf_puts(b, "        sc[4 * j + r] = x;\n      }\n");
}

void kx_att_tile_slots(kx *k, const kx_att_step *st)
{
	for (int i = 0; st->pre && i < st->pre->n; i++)
		kf_buf_printf(&k->b, "  %s ml%d[%d];\n", kx_ct(st->pre->dt[i]), i, st->pre->rowinv[i] ? st->bn / 4 : st->bn / 2);
}

void kx_att_tile_preload(kx *k, const kx_att *at, const kx_att_step *st, const char *jt)
{
	kf_buf *b = &k->b;
	if (!st->pre)
		return;
	int64_t sTk = KX_ATT_S(k, at, Tk), sTq = KX_ATT_S(k, at, Tq);
	bool kpart = !kx_multiple(k, at->Tk, sTk, st->bn);
	kf_buf rtxt = {0}, ctxt = {0};
	clamp(k, &rtxt, "row", st->qpart, at->Tq, sTq);
	clamp(k, &ctxt, "col", kpart && !(st->past && kx_att_cols_past(k, at, st->bn)), at->Tk, sTk);
	/* every slot over keys only: the first row's columns do */
	bool inv = true;
	for (int i = 0; i < st->pre->n; i++)
		inv &= st->pre->rowinv[i];
	kf_buf_printf(b, "    {\n      const int c0 = (%s) * %d;\n#pragma unroll\n      for (int j = 0; j < %d; j++)\n#pragma unroll\n"
		      "        for (int r = 0; r < %d; r++) {\n",
		      jt, st->bn, st->bn / 8, inv ? 2 : 4);
	kf_buf_puts(b, "          const int row = (r & 2) ? r1 : r0, col = c0 + j * 8 + 2 * q4 + (r & 1);\n");
	for (int i = 0; i < st->pre->n; i++) /* a slot over keys only: filled by the first row's columns */
		if (st->pre->rowinv[i] && !inv)
			kf_buf_printf(b, "          %s kf_l%d;\n", kx_ct(st->pre->dt[i]), i);
	kf_buf_puts(b, "          ");
	kx_att_scoreld_call(k, b);
	kf_buf_printf(b, "z, %s, %s", rtxt.p, ctxt.p);
	for (int i = 0; i < st->pre->n; i++) {
		if (st->pre->rowinv[i] && !inv)
			kf_buf_printf(b, ", kf_l%d", i);
		else
			kf_buf_printf(b, ", ml%d[%s]", i, st->pre->rowinv[i] ? "2 * j + r" : "4 * j + r");
	}
	kf_buf_puts(b, ");\n");
	for (int i = 0; i < st->pre->n; i++)
		if (st->pre->rowinv[i] && !inv)
			kf_buf_printf(b, "          if (r < 2) ml%d[2 * j + r] = kf_l%d;\n", i, i);
	kf_buf_puts(b, "        }\n    }\n");
	kf_buf_free(&rtxt);
	kf_buf_free(&ctxt);
}

/* v = the reduction of sc[i], sc[i + 1] over the n-tiles of row h (max:
 * fmaxf, else +), over 4 partial results (2 when bn is 16: 2 n-tiles):
 * independent instructions, where one running value would be a chain of
 * bn / 4 dependent ones. */
static void tree(kf_buf *b, int bn, int h, const char *v, bool max)
{
	const char *f = max ? "fmaxf(" : "(", *sep = max ? ", " : " + ";
	int np = bn / 8 < 4 ? bn / 8 : 4;
	for (int j = 0; j < bn / 8; j++) {
		int e = 4 * j + 2 * h;
		if (j < np)
			kf_buf_printf(b, "    float %s%d = %ssc[%d]%ssc[%d]);\n", v, j, f, e, sep, e + 1);
		else
			kf_buf_printf(b, "    %s%d = %s%s%d%s%ssc[%d]%ssc[%d]));\n", v, j % np, f, v, j % np, sep, f, e, sep, e + 1);
	}
	if (np == 4)
		kf_buf_printf(b, "    const float %s = %s%s%s0%s%s1)%s%s%s2%s%s3));\n", v, f, f, v, sep, v, sep, f, v, sep, v);
	else /* bn is a multiple of 16: 2 */
		kf_buf_printf(b, "    const float %s = %s%s0%s%s1);\n", v, f, v, sep, v);
}

void kx_att_tile_max(kx *k, const kx_att *at, const kx_att_step *st)
{
	kf_buf *b = &k->b;
	const char *L = st->fold ? "kf_sl2" : "1.44269504f";
	if (st->tree) {
		tree(b, st->bn, 0, "xm0", true);
		tree(b, st->bn, 1, "xm1", true);
		kf_buf_puts(b, "    float mx0 = fmaxf(m0, xm0), mx1 = fmaxf(m1, xm1);\n");
	} else {
		kf_buf_printf(b, "    float mx0 = m0, mx1 = m1;\n#pragma unroll\n    for (int i = 0; i < %d; i += 4) {\n"
			      "      mx0 = fmaxf(mx0, fmaxf(sc[i], sc[i + 1]));\n      mx1 = fmaxf(mx1, fmaxf(sc[i + 2], sc[i + 3]));\n    }\n",
			      st->bn / 2);
	}
	kf_buf_puts(b, "    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));\n"
		       "    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));\n"
		       "    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));\n"
		       "    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));\n");
	/* exp(x - m) = 2^(x log2(e) - m log2(e)); a row with nothing but -inf so
	 * far keeps 0 as its offset, so that no -inf - -inf appears */
	kf_buf_puts(b, "    const float b0 = ");
	kx_att_exp_off(at, b, "mx0", L);
	kf_buf_puts(b, ", b1 = ");
	kx_att_exp_off(at, b, "mx1", L);
	kf_buf_printf(b, ";\n    %sa0 = ", st->persist ? "" : "const float ");
	kx_att_ex2(at, b, "m0", "b0", L);
	kf_buf_puts(b, st->persist ? ";\n    a1 = " : ", a1 = ");
	kx_att_ex2(at, b, "m1", "b1", L);
	kf_buf_puts(b, ";\n    m0 = mx0;\n    m1 = mx1;\n    l0 *= a0;\n    l1 *= a1;\n");
}

void kx_att_ex2(const kx_att *at, kf_buf *b, const char *x, const char *off, const char *L)
{
	if (at->huge)
		kf_buf_printf(b, "kf_ex2((%s - %s) * %s)", x, off, L);
	else
		kf_buf_printf(b, "kf_ex2(%s * %s - %s)", x, L, off);
}

void kx_att_exp_off(const kx_att *at, kf_buf *b, const char *m, const char *L)
{
	kf_buf_printf(b, "%s == -KF_INF ? 0.0f : %s", m, m);
	if (!at->huge)
		kf_buf_printf(b, " * %s", L);
}

void kx_att_tile_rescale(kx *k, int dv)
{
	kf_buf_printf(&k->b, "#pragma unroll\n    for (int i = 0; i < %d; i += 4) {\n      oacc[i] *= a0;\n      oacc[i + 1] *= a0;\n"
		      "      oacc[i + 2] *= a1;\n      oacc[i + 3] *= a1;\n    }\n", dv / 2);
}

void kx_att_tile_pack(kx *k, const kx_att *at, int bn)
{
	const char *pack = at->mdt == KF_BF16 ? "kf_pack_b2" : "kf_pack_h2";
	kf_buf_printf(&k->b, "#pragma unroll\n    for (int j = 0; j < %d; j++) {\n"
		      "      pf[j >> 1][(j & 1) * 2] = %s(sc[4 * j], sc[4 * j + 1]);\n"
		      "      pf[j >> 1][(j & 1) * 2 + 1] = %s(sc[4 * j + 2], sc[4 * j + 3]);\n    }\n",
		      bn / 8, pack, pack);
}

void kx_att_tile_exp(kx *k, const kx_att *at, const kx_att_step *st, bool pack)
{
	kf_buf *b = &k->b;
	const char *L = st->fold ? "kf_sl2" : "1.44269504f";
	static const char *const row[4] = {"b0", "b0", "b1", "b1"};
	if (!pack) { /* in place; the row sums over partial ones */
		kf_buf_printf(b, "#pragma unroll\n    for (int j = 0; j < %d; j++) {\n", st->bn / 8);
		for (int e = 0; e < 4; e++) {
			char x[32];
			snprintf(x, sizeof x, e ? "sc[4 * j + %d]" : "sc[4 * j]", e);
			kf_buf_printf(b, "      %s = ", x);
			kx_att_ex2(at, b, x, row[e], L);
			kf_buf_puts(b, ";\n");
		}
		kf_buf_puts(b, "    }\n");
		tree(b, st->bn, 0, "xs0", false);
		tree(b, st->bn, 1, "xs1", false);
		kf_buf_puts(b, "    l0 += xs0;\n    l1 += xs1;\n");
		return;
	}
	const char *pk = at->mdt == KF_BF16 ? "kf_pack_b2" : "kf_pack_h2";
	kf_buf_printf(b, "    unsigned pf[%d][4];\n#pragma unroll\n    for (int j = 0; j < %d; j++) {\n", st->bn / 16, st->bn / 8);
	for (int e = 0; e < 4; e++) { /* two declarations of two */
		char x[32];
		snprintf(x, sizeof x, e ? "sc[4 * j + %d]" : "sc[4 * j]", e);
		kf_buf_printf(b, e & 1 ? ", e%d = " : "      const float e%d = ", e);
		kx_att_ex2(at, b, x, row[e], L);
		kf_buf_puts(b, e & 1 ? ";\n" : "");
	}
	kf_buf_puts(b, "      l0 += e0 + e1;\n      l1 += e2 + e3;\n");
	kf_buf_printf(b, "      pf[j >> 1][(j & 1) * 2] = %s(e0, e1);\n      pf[j >> 1][(j & 1) * 2 + 1] = %s(e2, e3);\n    }\n",
		      pk, pk);
}

void kx_att_tile_softmax(kx *k, const kx_att *at, int bn, int dv)
{
	kx_att_step st = {.bn = bn, .dv = dv};
	kx_att_tile_max(k, at, &st);
	kx_att_tile_rescale(k, dv);
	kx_att_tile_exp(k, at, &st, true);
}

void kx_att_finish_sums(kx *k)
{
	kf_buf_puts(&k->b, "  l0 += __shfl_xor_sync(0xffffffffu, l0, 1);\n  l0 += __shfl_xor_sync(0xffffffffu, l0, 2);\n"
			   "  l1 += __shfl_xor_sync(0xffffffffu, l1, 1);\n  l1 += __shfl_xor_sync(0xffffffffu, l1, 2);\n"
			   "  const float i0 = 1.0f / l0, i1 = 1.0f / l1;\n");
}

int kx_att_finish(kx *k, const kx_att *at, int dv)
{
	kf_buf *b = &k->b;
	if (kx_att_out_helper(k, at, true) != 0)
		return -1;
	kx_att_finish_sums(k);
	kf_buf_printf(b, "#pragma unroll\n  for (int i = 0; i < %d; i += 4) {\n    const int col = (i >> 2) * 8 + 2 * q4;\n", dv / 2);
	for (int h = 0; h < 2; h++) {
		kf_buf_printf(b, "    if (r%d < ", h);
		kx_dim(k, b, at->Tq, KX_ATT_S(k, at, Tq));
		kf_buf_puts(b, ") ");
		kx_att_out_call(k, b, true);
		kf_buf_printf(b, "z, r%d, col, oacc[i + %d] * i%d, oacc[i + %d] * i%d);\n", h, 2 * h, h, 2 * h + 1, h);
	}
	kf_buf_puts(b, "  }\n");
	return 0;
}

/* The block's head z and first query row q0.  Heads go in groups whose
 * keys and values fit L2 together (~24 MB): within a group the query
 * tiles of all its heads, the last (under a causal mask the longest)
 * first, heads fastest; then the next group.  The blocks resident at once
 * then share their heads' k and v, read from memory once.  With one group
 * of every head, a wave of 132 blocks at 2048 keys and head dim 128
 * streamed 132 heads' k and v (132 MB, past L2's 50) in a tile's time:
 * bound by memory bandwidth (0.85x of cuDNN).  A group keeps the longest
 * tiles first for the balance of the grid's end (one head a group left
 * a causal grid's last head's longest tile running alone).  `grouped`
 * false: one group of every head (the mma.sync kernel, which spilled
 * with the group's arithmetic).  idx: the tile's index (text). */
void kx_att_block_z_q0(kx *k, const kx_att *at, int bm, bool grouped, const char *idx)
{
	kf_buf *b = &k->b;
	int64_t sTq = KX_ATT_S(k, at, Tq), sNB = KX_ATT_S(k, at, NB);
	if (!grouped) { /* heads fastest (a kernel short of registers: z and q0
			 * are recomputed from the index where they are used) */
		kf_buf_printf(b, "  const int z = %s %% ", idx);
		kx_dim(k, b, at->NB, sNB);
		kf_buf_puts(b, ", q0 = (");
		kx_dimlin(k, b, at->Tq, sTq, bm - 1, bm, -1); /* the last query tile */
		kf_buf_printf(b, " - (int)(%s / ", idx);
		kx_dim(k, b, at->NB, sNB);
		kf_buf_printf(b, ")) * %d;\n", bm);
		return;
	}
	int64_t head = kx_rep(k, at->Tk, KX_ATT_S(k, at, Tk)) * (at->D + at->DV) * 2;
	int64_t grp = head > 0 ? (24 << 20) / head : 1;
	if (grp < 1)
		grp = 1;
	if (grp > 4096)
		grp = 4096;
	kf_buf nq = {0}, nb = {0};
	kx_dimlini(k, &nq, at->Tq, sTq, bm - 1, bm, 0);
	kx_dim(k, &nb, at->NB, sNB);
	kf_buf_printf(b, "  const int kf_gq = %lld * %.*s, kf_g = %s / kf_gq, kf_r = %s %% kf_gq;\n"
		      "  const int kf_gs = min(%lld, (int)(%.*s) - kf_g * %lld);\n"
		      "  const int z = kf_g * %lld + kf_r %% kf_gs, q0 = (%.*s - 1 - kf_r / kf_gs) * %d;\n",
		      (long long)grp, (int)nq.n, nq.p, idx, idx, (long long)grp, (int)nb.n, nb.p, (long long)grp, (long long)grp,
		      (int)nq.n, nq.p, bm);
	kf_buf_free(&nq);
	kf_buf_free(&nb);
}
