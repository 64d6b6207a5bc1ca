/* kf_mid.c: the middle end's differential check (kf_mid.h). */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "cuda.h"
#include "emit_cuda.h"
#include "equiv.h"
#include "interp.h"
#include "kf_mid.h"

static const char *const verdict_name[KF_MID_NKIND] = {
	"ok", "pipeline", "verify", "differs", "interp", "roundtrip", "emit", "nvrtc",
};

const char *kf_mid_verdict_name(kf_mid_verdict v) { return v < KF_MID_NKIND ? verdict_name[v] : "?"; }

int kf_mid_verdict_parse(const char *s)
{
	for (int i = 0; i < KF_MID_NKIND; i++)
		if (!strcmp(s, verdict_name[i]))
			return i;
	return -1;
}

int kf_mid_split(const char *pipeline, char **buf, char ***passes, int *n)
{
	size_t len = strlen(pipeline);
	char *b = malloc(len + 1), **v = malloc((len / 2 + 2) * sizeof *v);
	memcpy(b, pipeline, len + 1);
	int k = 0, depth = 0;
	char *start = b;
	for (char *p = b;; p++) {
		if (*p == '{')
			depth++;
		else if (*p == '}' && --depth < 0)
			break;
		if ((*p == ',' && depth == 0) || !*p) {
			bool end = !*p;
			*p = 0;
			while (*start == ' ')
				start++;
			if (*start)
				v[k++] = start;
			start = p + 1;
			if (end)
				break;
		}
	}
	if (depth != 0) {
		free(b);
		free(v);
		return -1;
	}
	*buf = b;
	*passes = v;
	*n = k;
	return 0;
}

/* Passes that must leave every value bit for bit as it was. */
static bool exact_pass(const char *p)
{
	static const char *const exact[] = {"cse", "dce", "fuse", "fuse-matmul"};
	size_t n = strcspn(p, "{");
	for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++)
		if (strlen(exact[i]) == n && !strncmp(p, exact[i], n))
			return true;
	return false;
}

static bool has_half(kf_graph *g)
{
	for (kf_vid v = 0; v < g->nval; v++) {
		int dt = kf_vtype(g, v)->dtype;
		if (dt == KF_F16 || dt == KF_BF16)
			return true;
	}
	return false;
}

/* Element i of a and b the same: both NaN, or equal with the same sign. */
static bool same_elem(const kf_tensor *a, const kf_tensor *b, int64_t i)
{
	if (!kf_dtype_is_float(a->dtype))
		return kf_tensor_get_i64(a, i) == kf_tensor_get_i64(b, i);
	double x = kf_tensor_get(a, i), y = kf_tensor_get(b, i);
	if (isnan(x) || isnan(y))
		return isnan(x) && isnan(y);
	return x == y && signbit(x) == signbit(y);
}

/* True when every element of got out of tolerance is finite where want
 * (the stage before) is an infinity or NaN: a rewrite that computes a
 * formula more accurately (log(softmax(x)) as log_softmax(x), softplus)
 * stays finite where the composite form overflowed or underflowed, which
 * is not a wrong answer.  A finite value where the original was finite and
 * different is still one. */
static bool finite_where_overflowed(const kf_tensor *got, const kf_tensor *want, double rtol, double atol)
{
	if (!kf_dtype_is_float(want->dtype))
		return false;
	int64_t m = kf_tensor_numel(want);
	for (int64_t i = 0; i < m; i++) {
		double g = kf_tensor_get(got, i), w = kf_tensor_get(want, i);
		if ((isnan(g) && isnan(w)) || g == w)
			continue;
		if (isfinite(g) && isfinite(w) && fabs(g - w) <= atol + rtol * fabs(w))
			continue;
		if (!(isfinite(g) && !isfinite(w)))
			return false;
	}
	return true;
}

/* Compares the outputs got[] of a stage with want[] of the one before;
 * true when they agree (exactly, or within tolerance). */
static bool agree(const kf_tensor *got, const kf_tensor *want, uint32_t n, bool exact, double rtol, double atol,
		  kf_buf *why)
{
	for (uint32_t r = 0; r < n; r++) {
		if (!kf_tensor_same_shape(&got[r], &want[r])) {
			kf_buf_printf(why, "result %u: shapes or dtypes differ", r);
			return false;
		}
		if (exact) {
			int64_t m = kf_tensor_numel(&want[r]);
			for (int64_t i = 0; i < m; i++)
				if (!same_elem(&got[r], &want[r], i)) {
					kf_buf_printf(why, "result %u, element %lld: %.17g, was %.17g (bit for bit expected)", r,
						      (long long)i, kf_tensor_get(&got[r], i), kf_tensor_get(&want[r], i));
					return false;
				}
			continue;
		}
		kf_equiv_stat st;
		kf_equiv_compare(&got[r], &want[r], rtol, atol, &st);
		if (st.nbad && !finite_where_overflowed(&got[r], &want[r], rtol, atol)) {
			kf_buf_printf(why, "result %u: ", r);
			kf_equiv_describe(why, &st);
			return false;
		}
	}
	return true;
}

static void free_tensors(kf_tensor *t, uint32_t n)
{
	for (uint32_t i = 0; t && i < n; i++)
		kf_tensor_free(&t[i]);
}

/* The module m's graph gi run on in[]; out[] allocated.  -1 on failure. */
static int run_graph(kf_graph *g, kf_tensor *in, kf_tensor *out)
{
	return kf_interp_run(g, in, (int)g->blk[0].narg, out, (int)g->nres);
}

/* The module text with every float type f64 ("f16[", "bf16[", "f32[" and
 * the quoted names attributes hold). */
static void widen_text(const kf_buf *in, kf_buf *out)
{
	static const char *const from[] = {"bf16[", "f16[", "f32[", "\"bf16\"", "\"f16\"", "\"f32\""};
	static const char *const to[] = {"f64[", "f64[", "f64[", "\"f64\"", "\"f64\"", "\"f64\""};
	out->n = 0;
	for (size_t i = 0; i < in->n;) {
		size_t k = 0;
		/* a type starts a token: not after a letter, digit or '_' (a name) */
		bool start = i == 0 || !(isalnum((unsigned char)in->p[i - 1]) || in->p[i - 1] == '_');
		for (; start && k < sizeof from / sizeof *from; k++)
			if (!strncmp(in->p + i, from[k], strlen(from[k])))
				break;
		if (start && k < sizeof from / sizeof *from) {
			kf_buf_puts(out, to[k]);
			i += strlen(from[k]);
		} else {
			kf_buf_putc(out, in->p[i++]);
		}
	}
}

/* The non-finite results the top level of graph gi of module text t (or
 * of graph g when t is NULL) computes on in[]; UINT32_MAX when it does not
 * parse or run. */
static uint32_t nonfinite_nodes(kf_ctx *c, const kf_buf *t, kf_graph *g, uint32_t gi, const kf_tensor *in)
{
	kf_module *m = t ? kf_parse(c, "before.kf", t->p ? t->p : "", t->n) : NULL;
	if (t)
		g = m && gi < m->ngraph ? m->graph[gi] : NULL;
	kf_interp_watch w = {.nonfinite_nodes = UINT32_MAX};
	kf_tensor *out = g ? calloc(g->nres + 1, sizeof *out) : NULL;
	if (g && kf_interp_run_watch(g, in, (int)g->blk[0].narg, out, (int)g->nres, &w) != 0)
		w.nonfinite_nodes = UINT32_MAX;
	if (g)
		free_tensors(out, g->nres);
	free(out);
	kf_module_free(m);
	kf_diag_clear(c);
	return w.nonfinite_nodes;
}

/* A stage whose outputs differ from the stage before may only have
 * computed with another rounding: log_softmax(x) is finite where
 * log(softmax(x)) underflowed to -inf in f16, and a comparison downstream
 * then picks the other branch.  The two modules are run again with every
 * float type widened to f64, on the same inputs: when they agree there,
 * the rewrite computes the same function.  Even f64 underflows in
 * log(softmax(exp(x))): a stage that computes fewer infinities and NaNs
 * than the one before (a composite form's -inf made finite, and what
 * followed it changed with it) is taken as a better rounding too.  False
 * otherwise, or when a module does not parse, verify or run. */
static bool rounding_only(kf_ctx *c, const kf_buf *before, kf_module *after, uint32_t gi,
			  const kf_tensor *in, double rtol, double atol)
{
	uint32_t nb = nonfinite_nodes(c, before, NULL, gi, in), na = nonfinite_nodes(c, NULL, after->graph[gi], gi, in);
	if (nb != UINT32_MAX && na != UINT32_MAX && na < nb)
		return true;
	kf_buf a = {0}, wa = {0}, wb = {0};
	kf_print_module(&a, after);
	widen_text(before, &wb);
	widen_text(&a, &wa);
	kf_module *mb = kf_parse(c, "widened-before.kf", wb.p ? wb.p : "", wb.n);
	kf_module *ma = mb ? kf_parse(c, "widened-after.kf", wa.p ? wa.p : "", wa.n) : NULL;
	bool ok = ma && gi < mb->ngraph && gi < ma->ngraph && kf_verify(mb->graph[gi]) == 0 &&
		  kf_verify(ma->graph[gi]) == 0;
	kf_graph *gb = ok ? mb->graph[gi] : NULL, *ga = ok ? ma->graph[gi] : NULL;
	uint32_t ni = ok ? gb->blk[0].narg : 0, nr = ok ? gb->nres : 0;
	kf_tensor *win = calloc(ni + 1, sizeof *win), *rb = calloc(nr + 1, sizeof *rb), *ra = calloc(nr + 1, sizeof *ra);
	for (uint32_t i = 0; ok && i < ni; i++) {
		ok = kf_tensor_alloc_type(&win[i], kf_vtype(gb, gb->blk[0].arg[i])) == 0;
		int64_t n = kf_tensor_numel(&in[i]);
		for (int64_t e = 0; ok && e < n; e++) {
			if (kf_dtype_is_float(win[i].dtype))
				kf_tensor_set(&win[i], e, kf_tensor_get(&in[i], e));
			else
				kf_tensor_set_i64(&win[i], e, kf_tensor_get_i64(&in[i], e));
		}
	}
	kf_buf why = {0};
	ok = ok && run_graph(gb, win, rb) == 0 && run_graph(ga, win, ra) == 0 && ga->nres == nr &&
	     agree(ra, rb, nr, false, rtol, atol, &why);

	free_tensors(win, ni);
	free_tensors(rb, nr);
	free_tensors(ra, nr);
	free(win);
	free(rb);
	free(ra);
	kf_buf_free(&why);
	kf_module_free(ma);
	kf_module_free(mb);
	kf_buf_free(&a);
	kf_buf_free(&wa);
	kf_buf_free(&wb);
	kf_diag_clear(c);
	return ok;
}

static kf_mid_verdict fail_with(kf_ctx *c, kf_buf *rep, kf_mid_verdict v, const char *pass, const kf_buf *before,
				const char *fmt, const char *detail)
{
	kf_buf_printf(rep, "%s", kf_mid_verdict_name(v));
	if (pass)
		kf_buf_printf(rep, " after pass '%s'", pass);
	kf_buf_puts(rep, ": ");
	kf_buf_printf(rep, fmt, detail ? detail : "");
	kf_buf_putc(rep, '\n');
	kf_buf d = {0};
	kf_diag_render(c, &d);
	if (d.n)
		kf_buf_printf(rep, "%.*s", (int)d.n, d.p);
	kf_buf_free(&d);
	kf_diag_clear(c);
	if (before && before->n)
		kf_buf_printf(rep, "--- the graph before it ---\n%.*s", (int)before->n, before->p);
	return v;
}

/* ---- kernels seen (kf_mid_seen) ------------------------------------------- */

struct kf_mid_seen {
	uint64_t *h; /* 0: empty */
	uint32_t n, cap;
};

kf_mid_seen *kf_mid_seen_new(void) { return calloc(1, sizeof(kf_mid_seen)); }

void kf_mid_seen_free(kf_mid_seen *s)
{
	if (s)
		free(s->h);
	free(s);
}

/* Adds the kernel named `name` (kf_ and 16 hex digits, a hash of its text);
 * false when it was there already. */
static bool seen_add(kf_mid_seen *s, const char *name)
{
	uint64_t h = strtoull(name + 3, NULL, 16) | 1;
	if (2 * (s->n + 1) > s->cap) {
		uint32_t cap = s->cap ? 2 * s->cap : 1024;
		uint64_t *t = calloc(cap, sizeof *t);
		for (uint32_t i = 0; i < s->cap; i++)
			if (s->h[i]) {
				uint32_t j = (uint32_t)s->h[i] & (cap - 1);
				while (t[j])
					j = (j + 1) & (cap - 1);
				t[j] = s->h[i];
			}
		free(s->h);
		s->h = t;
		s->cap = cap;
	}
	uint32_t j = (uint32_t)h & (s->cap - 1);
	for (; s->h[j]; j = (j + 1) & (s->cap - 1))
		if (s->h[j] == h)
			return false;
	s->h[j] = h;
	s->n++;
	return true;
}

/* Emits the kernels of m (those o->seen has not had) and compiles them
 * with NVRTC for sm_90 in one program. */
static kf_mid_verdict compile_kernels(kf_ctx *c, kf_module *m, const kf_mid_opts *o, kf_buf *rep)
{
	kf_buf src = {0}, ptx = {0}, log = {0};
	kf_mid_verdict v = KF_MID_OK;
	int fresh = 0;
	kf_buf_puts(&src, kf_emit_prelude());
	for (uint32_t i = 0; i < m->ngraph && v == KF_MID_OK; i++) {
		kf_kernels ks = {0};
		if (kf_emit_graph(m->graph[i], &ks) != 0)
			v = fail_with(c, rep, KF_MID_EMIT, NULL, NULL, "%s", "the emitter failed");
		for (uint32_t j = 0; j < ks.n && v == KF_MID_OK; j++)
			if (!o->seen || seen_add(o->seen, ks.k[j].name)) {
				kf_buf_puts(&src, ks.k[j].src);
				fresh++;
			}
		kf_kernels_free(&ks);
	}
	if (v != KF_MID_OK || !fresh)
		goto done;
	kf_buf_putc(&src, 0);
	const char *arch = strstr(src.p, "wgmma.mma_async") ? "sm_90a" : "sm_90";
	const char *opts[] = {"-std=c++17"};
	if (kf_nvrtc_compile(o->nv, src.p, "kfuse.cu", arch, opts, 1, 0, &ptx, &log) != 0) {
		kf_buf_putc(&log, 0);
		v = fail_with(c, rep, KF_MID_NVRTC, NULL, NULL, "NVRTC: %.2000s", log.p ? log.p : "");
	}
done:
	if (o->compiled)
		*o->compiled += fresh;
	kf_buf_free(&src);
	kf_buf_free(&ptx);
	kf_buf_free(&log);
	return v;
}

kf_mid_verdict kf_mid_check(kf_ctx *c, const char *name, const char *text, size_t len, const kf_mid_opts *o,
			    kf_buf *rep)
{
	kf_diag_clear(c);
	kf_module *m = kf_parse(c, name, text, len);
	if (!m)
		return fail_with(c, rep, KF_MID_PIPELINE, NULL, NULL, "%s", "the input does not parse");
	for (uint32_t i = 0; i < m->ngraph; i++)
		if (kf_verify(m->graph[i]) != 0) {
			kf_module_free(m);
			return fail_with(c, rep, KF_MID_PIPELINE, NULL, NULL, "%s", "the input does not verify");
		}
	char *pbuf = NULL, **passes = NULL;
	int npass = 0;
	if (kf_mid_split(o->pipeline ? o->pipeline : "", &pbuf, &passes, &npass) != 0) {
		kf_module_free(m);
		return fail_with(c, rep, KF_MID_PIPELINE, NULL, NULL, "%s", "unbalanced braces in the pipeline");
	}
	bool half = false;
	for (uint32_t i = 0; i < m->ngraph; i++)
		half = half || has_half(m->graph[i]);
	double rtol = o->rtol > 0 ? o->rtol : half ? 3e-2 : 1e-3, atol = o->atol > 0 ? o->atol : half ? 1e-2 : 1e-4;
	kf_mid_verdict v = KF_MID_OK;
	kf_buf before = {0}, why = {0};
	/* per graph: inputs, and the outputs of the last stage */
	uint32_t ng = m->ngraph;
	kf_tensor **in = calloc(ng, sizeof *in), **prev = calloc(ng, sizeof *prev);
	uint64_t rng = o->seed;
	for (uint32_t gi = 0; gi < ng && v == KF_MID_OK; gi++) {
		kf_graph *g = m->graph[gi];
		uint32_t ni = g->blk[0].narg;
		in[gi] = calloc(ni + 1, sizeof **in);
		prev[gi] = calloc(g->nres + 1, sizeof **prev);
		for (uint32_t i = 0; i < ni; i++) {
			const kf_type *t = kf_vtype(g, g->blk[0].arg[i]);
			kf_tensor_random(&in[gi][i], (kf_dtype)t->dtype, t->rank, t->dim, &rng);
		}
		if (run_graph(g, in[gi], prev[gi]) != 0)
			v = fail_with(c, rep, KF_MID_PIPELINE, NULL, NULL, "%s", "the interpreter fails on the input");
	}
	for (int pi = 0; pi < npass && v == KF_MID_OK; pi++) {
		before.n = 0;
		kf_print_module(&before, m);
		kf_pipeline *pl = kf_pipeline_parse(c, o->reg, passes[pi]);
		if (!pl) {
			v = fail_with(c, rep, KF_MID_PIPELINE, passes[pi], NULL, "%s", "the pass does not parse");
			break;
		}
		kf_runopts ro = {.verify_each = true};
		int rc = kf_pipeline_run(pl, m, &ro);
		kf_pipeline_free(pl);
		if (rc != 0) {
			kf_buf d = {0};
			kf_diag_render(c, &d);
			bool broken = d.p && strstr(d.p, "is broken after pass");
			kf_buf_free(&d);
			v = fail_with(c, rep, broken ? KF_MID_VERIFY : KF_MID_PIPELINE, passes[pi], &before, "%s",
				      "the pass failed");
			break;
		}
		bool exact = exact_pass(passes[pi]);
		for (uint32_t gi = 0; gi < ng && v == KF_MID_OK; gi++) {
			kf_graph *g = m->graph[gi];
			kf_tensor *got = calloc(g->nres + 1, sizeof *got);
			why.n = 0;
			if (run_graph(g, in[gi], got) != 0)
				v = fail_with(c, rep, KF_MID_INTERP, passes[pi], &before, "%s",
					      "the interpreter fails on the result");
			else if (!agree(got, prev[gi], g->nres, exact, rtol, atol, &why) &&
				 (exact || !rounding_only(c, &before, m, gi, in[gi], 1e-6, 1e-9)))
				v = fail_with(c, rep, KF_MID_DIFFERS, passes[pi], &before, "%s", (kf_buf_putc(&why, 0), why.p));
			free_tensors(prev[gi], g->nres);
			free(prev[gi]);
			prev[gi] = got;
		}
	}
	if (v == KF_MID_OK) {
		/* the result as a file: it parses back and verifies */
		kf_buf out = {0};
		kf_print_module(&out, m);
		kf_module *back = kf_parse(c, "result.kf", out.p ? out.p : "", out.n);
		bool ok = back != NULL;
		for (uint32_t i = 0; ok && i < back->ngraph; i++)
			ok = kf_verify(back->graph[i]) == 0;
		if (!ok)
			v = fail_with(c, rep, KF_MID_ROUNDTRIP, NULL, &out, "%s", "the printed result does not parse back valid");
		kf_module_free(back);
		kf_buf_free(&out);
	}
	if (v == KF_MID_OK && o->nvrtc && o->nv)
		v = compile_kernels(c, m, o, rep);
	for (uint32_t gi = 0; gi < m->ngraph && v == KF_MID_OK && o->emit && !(o->nvrtc && o->nv); gi++) {
		kf_kernels ks = {0};
		if (kf_emit_graph(m->graph[gi], &ks) != 0)
			v = fail_with(c, rep, KF_MID_EMIT, NULL, NULL, "%s", "the emitter failed");
		kf_kernels_free(&ks);
	}
	for (uint32_t gi = 0; gi < ng; gi++) {
		if (in[gi])
			free_tensors(in[gi], m->graph[gi]->blk[0].narg);
		free(in[gi]);
		if (prev[gi])
			free_tensors(prev[gi], m->graph[gi]->nres);
		free(prev[gi]);
	}
	free(in);
	free(prev);
	free(pbuf);
	free(passes);
	kf_buf_free(&before);
	kf_buf_free(&why);
	kf_module_free(m);
	return v;
}
