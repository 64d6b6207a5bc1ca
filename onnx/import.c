/* import.c: an ONNX ModelProto to a kfuse graph.  The node translations live
 * in translate.c; this file holds the graph walk, values, constants and types.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "importer.h"
#include "interp.h"
#include "npy.h"
#include "passes.h"
#include "tensor.h"

int kf_imp_fail(kf_imp *I, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (I->node)
		kf_error(I->c, (kf_loc){I->src, 0}, "node '%s' (%s, opset %lld): %s",
			 I->node->name && *I->node->name ? I->node->name : "(unnamed)", I->node->op_type,
			 (long long)I->opset, msg);
	else
		kf_error(I->c, (kf_loc){I->src, 0}, "%s", msg);
	I->failed = true;
	return -1;
}

/* ONNX names may hold any character; kfuse value names are [A-Za-z0-9_.$]. */
static kf_sid clean_name(kf_ctx *c, const char *s)
{
	char buf[128];
	size_t n = 0;
	for (; *s && n < sizeof buf - 1; s++) {
		char ch = *s;
		bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
			  ch == '_' || ch == '.' || ch == '$';
		buf[n++] = ok ? ch : '_';
	}
	return kf_intern(c, buf, n);
}

kf_vid kf_imp_lookup(kf_imp *I, const char *name)
{
	kf_sid s = kf_lookup_str(I->c, name, strlen(name));
	if (s != KF_NONE && s < I->nmap && I->map[s])
		return I->map[s] - 1;
	kf_imp_fail(I, "input '%s' is not defined by any earlier node, input or initializer", name);
	return KF_NONE;
}

void kf_imp_bind(kf_imp *I, const char *name, kf_vid v)
{
	kf_sid s = kf_intern_cstr(I->c, name);
	if (s >= I->nmap) {
		uint32_t n = I->nmap ? I->nmap : 64;
		while (n <= s)
			n *= 2;
		I->map = realloc(I->map, n * sizeof *I->map);
		memset(I->map + I->nmap, 0, (n - I->nmap) * sizeof *I->map);
		I->nmap = n;
	}
	I->map[s] = v + 1;
	if (I->g->val[v].name == 0)
		I->g->val[v].name = clean_name(I->c, name);
}

/* Creates a node and gives its results the types the op infers; a node
 * whose operands are all small constants is folded at once, so that shape
 * arithmetic (Shape, Gather of it, Concat, ...) ends in the constants that
 * Reshape and friends need at compile time. */
int kf_imp_node(kf_imp *I, int op, const kf_vid *in, int nin, const kf_attr *a, int na, int nres, kf_vid *res)
{
	for (int i = 0; i < nin; i++)
		if (in[i] == KF_NONE)
			return -1;
	if (nres > KF_IMP_MAX_LIST)
		return kf_imp_fail(I, "more than %d results", KF_IMP_MAX_LIST);
	/* small nodes on the stack, a long Split's results on the heap */
	kf_tid dummy_s[64];
	kf_type t_s[64];
	kf_vid folded_s[64];
	kf_tid *dummy = dummy_s;
	kf_type *t = t_s;
	kf_vid *folded = folded_s;
	if (nres > 64) {
		dummy = malloc(nres * sizeof *dummy);
		t = malloc(nres * sizeof *t);
		folded = malloc(nres * sizeof *folded);
		if (!dummy || !t || !folded) {
			free(dummy), free(t), free(folded);
			return kf_imp_fail(I, "out of memory");
		}
	}
	int rc = 0;
	for (int i = 0; i < nres; i++)
		dummy[i] = I->scalar_f32;
	kf_nid n = kf_node_new(I->g, 0, KF_NONE, op, in, (uint32_t)nin, dummy, (uint32_t)nres);
	if (na)
		kf_node_set_attrs(I->g, n, a, (uint32_t)na);
	char err[256];
	int k = kf_infer(I->g, n, t, nres > 64 ? nres : 64, err, sizeof err);
	if (k != nres) {
		rc = kf_imp_fail(I, "%s", k < 0 ? err : "result count mismatch");
		goto out;
	}
	for (int i = 0; i < nres; i++) {
		I->g->val[kf_res(I->g, n, (uint32_t)i)].type = kf_type_intern(I->c, &t[i]);
		res[i] = kf_res(I->g, n, (uint32_t)i);
	}
	if (op != KF_OP_CONST && kf_fold_node(I->g, n, 4096, folded) == 1) {
		for (int i = 0; i < nres; i++)
			res[i] = folded[i];
		kf_node_erase(I->g, n);
	}
out:
	if (nres > 64)
		free(dummy), free(t), free(folded);
	return rc;
}

kf_vid kf_imp_op(kf_imp *I, int op, const kf_vid *in, int nin, const kf_attr *a, int na)
{
	kf_vid r;
	return kf_imp_node(I, op, in, nin, a, na, 1, &r) < 0 ? KF_NONE : r;
}

static kf_vid const_node(kf_imp *I, kf_const *k, const kf_type *t)
{
	kf_tid tid = kf_type_intern(I->c, t);
	kf_nid n = kf_node_new(I->g, 0, KF_NONE, KF_OP_CONST, NULL, 0, &tid, 1);
	I->g->node[n].cst = k;
	return kf_res(I->g, n, 0);
}

/* A constant of one value repeated over a shape: a splat, never materialised. */
kf_vid kf_imp_splat(kf_imp *I, double v, kf_dtype dt, int rank, const int64_t *dims)
{
	kf_type t = kf_type_make(dt, rank, dims);
	if (kf_type_is_static(&t) && kf_type_numel(&t) < 0) {
		kf_imp_fail(I, "the shape is too large");
		return KF_NONE;
	}
	/* an integer constant from a value no integer holds (a translation's
	 * infinity applied to integer input; found by fuzzing) */
	if (!kf_dtype_is_float(dt) && !(v >= -0x1p63 && v < 0x1p63)) {
		kf_imp_fail(I, "the constant %g has no value of type %s", v, kf_dtype_name(dt));
		return KF_NONE;
	}
	kf_const *k = kf_alloc(&I->g->arena, sizeof *k);
	k->kind = rank == 0 ? KF_CONST_SCALAR : KF_CONST_DENSE;
	k->n = 1;
	if (kf_dtype_is_float(dt)) {
		k->f = kf_alloc(&I->g->arena, sizeof(double));
		k->f[0] = kf_dtype_round(dt, v);
	} else {
		k->i = kf_alloc(&I->g->arena, sizeof(int64_t));
		k->i[0] = (int64_t)v;
	}
	return const_node(I, k, &t);
}

/* A rank-0 constant: the splat of no dims. */
kf_vid kf_imp_scalar(kf_imp *I, double v, kf_dtype dt) { return kf_imp_splat(I, v, dt, 0, NULL); }

/* An initializer or Constant: inline when small, else an .npy beside the
 * output, referenced as file("..."). */
kf_vid kf_imp_tensor_const(kf_imp *I, const kf_tensor *t, const char *name)
{
	kf_type ty = kf_tensor_type(t);
	int64_t n = kf_tensor_numel(t);
	kf_const *k = kf_alloc(&I->g->arena, sizeof *k);
	int64_t inline_max = I->o.inline_max > 0 ? I->o.inline_max : 64;
	/* a splat stays one value: all equal and more than one element (and
	 * then inline, whatever its size: an exporter's zeros of a state) */
	bool splat = n > 1;
	for (int64_t i = 1; splat && i < n; i++)
		splat = kf_tensor_get_i64(t, i) == kf_tensor_get_i64(t, 0) && kf_tensor_get(t, i) == kf_tensor_get(t, 0);
	if (I->o.weights_dir && n > inline_max && !splat) {
		char file[200], path[4200];
		/* Names are cleaned ("a/b" and "a:b" both become "a_b") and cut:
		 * two initializers must not share a file, or the second would
		 * silently replace the first's weights. */
		kf_sid base = clean_name(I->c, name), fs;
		for (unsigned k = 0;; k++) {
			if (k)
				snprintf(file, sizeof file, "%s.%u.npy", kf_str(I->c, base), k);
			else
				snprintf(file, sizeof file, "%s.npy", kf_str(I->c, base));
			fs = kf_intern_cstr(I->c, file);
			if (fs >= I->nwused || !I->wused[fs])
				break;
		}
		if (fs >= I->nwused) {
			uint32_t m = I->nwused ? I->nwused : 64;
			while (m <= fs)
				m *= 2;
			I->wused = realloc(I->wused, m);
			memset(I->wused + I->nwused, 0, m - I->nwused);
			I->nwused = m;
		}
		I->wused[fs] = 1;
		snprintf(path, sizeof path, "%s/%s", I->o.weights_dir, file);
		if (kf_npy_write(I->c, path, t) < 0) {
			I->failed = true;
			return KF_NONE;
		}
		char ref[4400];
		snprintf(ref, sizeof ref, "%s%s", I->o.weights_ref ? I->o.weights_ref : "", file);
		k->kind = KF_CONST_FILE;
		k->path = kf_intern_cstr(I->c, ref);
		return const_node(I, k, &ty);
	}
	k->kind = ty.rank == 0 ? KF_CONST_SCALAR : KF_CONST_DENSE;
	k->n = (uint64_t)n;
	if (splat)
		k->n = 1;
	if (kf_dtype_is_float(t->dtype)) {
		k->f = kf_alloc(&I->g->arena, (k->n ? k->n : 1) * sizeof(double));
		for (uint64_t i = 0; i < k->n; i++)
			k->f[i] = kf_tensor_get(t, (int64_t)i);
	} else {
		k->i = kf_alloc(&I->g->arena, (k->n ? k->n : 1) * sizeof(int64_t));
		for (uint64_t i = 0; i < k->n; i++)
			k->i[i] = kf_tensor_get_i64(t, (int64_t)i);
	}
	return const_node(I, k, &ty);
}

/* Values of a constant integer operand (shape, axes, starts, ...). */
int kf_imp_const_ints(kf_imp *I, kf_vid v, int64_t *out, int max)
{
	kf_nid d = I->g->val[v].def;
	if (d == KF_NONE || I->g->node[d].op != KF_OP_CONST || !I->g->node[d].cst ||
	    I->g->node[d].cst->kind == KF_CONST_FILE)
		return -1;
	const kf_const *k = I->g->node[d].cst;
	int64_t n = kf_type_numel(kf_vtype(I->g, v));
	if (n < 0 || n > max)
		return -1;
	for (int64_t i = 0; i < n; i++) {
		uint64_t j = k->n == 1 ? 0 : (uint64_t)i;
		if (k->i) {
			out[i] = k->i[j];
			continue;
		}
		/* a float payload counts only when it holds an int (NaN does not:
		 * found by fuzzing) */
		double f = k->f[j];
		if (!(f == trunc(f) && fabs(f) < 9.2e18))
			return -1;
		out[i] = (int64_t)f;
	}
	return (int)n;
}

bool kf_imp_const_scalar(kf_imp *I, kf_vid v, double *out)
{
	kf_nid d = v == KF_NONE ? KF_NONE : I->g->val[v].def;
	if (d == KF_NONE || I->g->node[d].op != KF_OP_CONST || !I->g->node[d].cst ||
	    I->g->node[d].cst->kind == KF_CONST_FILE || kf_type_numel(kf_vtype(I->g, v)) != 1)
		return false;
	const kf_const *k = I->g->node[d].cst;
	*out = k->f ? k->f[0] : (double)k->i[0];
	return true;
}

/* ---- graph inputs, outputs ---- */

int kf_imp_value_type(kf_imp *I, const Onnx__ValueInfoProto *vi, kf_type *t)
{
	const Onnx__TypeProto *tp = vi->type;
	if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
		return kf_imp_fail(I, "graph value '%s' is not a tensor (sequences, maps and optionals are not supported)",
				   vi->name);
	const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
	int dt = kf_onnx_dtype(tt->elem_type);
	if (dt < 0)
		return kf_imp_fail(I, "graph value '%s' has element type %s, which kfuse does not support", vi->name,
				   kf_onnx_dtype_name(tt->elem_type));
	if (!tt->shape)
		return kf_imp_fail(I, "graph value '%s' has no shape (kfuse needs the rank)", vi->name);
	if (tt->shape->n_dim > KF_MAX_RANK)
		return kf_imp_fail(I, "graph value '%s' has rank %zu (at most %d)", vi->name, tt->shape->n_dim,
				   KF_MAX_RANK);
	int64_t dims[KF_MAX_RANK];
	for (size_t i = 0; i < tt->shape->n_dim; i++) {
		const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[i];
		if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && d->dim_value >= 0) {
			dims[i] = d->dim_value;
			continue;
		}
		char sym[160];
		if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && d->dim_param[0])
			snprintf(sym, sizeof sym, "%s", d->dim_param);
		else
			snprintf(sym, sizeof sym, "%s_d%zu", vi->name, i);
		kf_sid s = clean_name(I->c, sym);
		if (kf_str(I->c, s)[0] >= '0' && kf_str(I->c, s)[0] <= '9') {
			snprintf(sym, sizeof sym, "d_%s", kf_str(I->c, s));
			s = kf_intern_cstr(I->c, sym);
		}
		dims[i] = KF_SYM(s);
	}
	*t = kf_type_make((kf_dtype)dt, (int)tt->shape->n_dim, dims);
	return 0;
}

static int add_initializers(kf_imp *I, const Onnx__GraphProto *gp)
{
	for (size_t i = 0; i < gp->n_initializer; i++) {
		kf_tensor t;
		char err[512];
		if (kf_onnx_tensor(gp->initializer[i], I->dir[0] ? I->dir : NULL, &t, err, sizeof err) < 0)
			return kf_imp_fail(I, "initializer: %s", err);
		kf_vid v = kf_imp_tensor_const(I, &t, gp->initializer[i]->name);
		kf_tensor_free(&t);
		if (v == KF_NONE)
			return -1;
		kf_imp_bind(I, gp->initializer[i]->name, v);
	}
	return 0;
}

static bool is_initializer(const Onnx__GraphProto *gp, const char *name)
{
	for (size_t i = 0; i < gp->n_initializer; i++)
		if (strcmp(gp->initializer[i]->name, name) == 0)
			return true;
	return false;
}

/* A --bind value for a graph input of type t: same dtype and rank, equal
 * static dims (symbolic ones take any size). */
static kf_vid bound_input(kf_imp *I, const char *name, const kf_type *t, const kf_tensor *x)
{
	kf_type xt = kf_tensor_type(x);
	bool ok = xt.dtype == t->dtype && xt.rank == t->rank;
	for (int d = 0; ok && d < t->rank; d++)
		ok = KF_IS_SYM(t->dim[d]) || t->dim[d] == xt.dim[d];
	if (!ok) {
		kf_buf a = {0}, b = {0};
		kf_print_type(&a, I->c, kf_type_intern(I->c, t));
		kf_print_type(&b, I->c, kf_type_intern(I->c, &xt));
		kf_imp_fail(I, "--bind %s: the graph input is %.*s, the value %.*s", name, (int)a.n, a.p, (int)b.n, b.p);
		kf_buf_free(&a);
		kf_buf_free(&b);
		return KF_NONE;
	}
	return kf_imp_tensor_const(I, x, name);
}

static int add_inputs(kf_imp *I, const Onnx__GraphProto *gp)
{
	for (size_t i = 0; i < gp->n_input; i++) {
		if (is_initializer(gp, gp->input[i]->name))
			continue; /* an initializer with a default: we take the initializer */
		kf_type t;
		if (kf_imp_value_type(I, gp->input[i], &t) < 0)
			return -1;
		const kf_tensor *b = NULL;
		for (int k = 0; k < I->o.nbind; k++)
			if (strcmp(I->o.bind[k].name, gp->input[i]->name) == 0)
				b = I->o.bind[k].value;
		kf_vid v = b ? bound_input(I, gp->input[i]->name, &t, b)
			     : kf_block_add_arg(I->g, 0, kf_type_intern(I->c, &t), 0);
		if (v == KF_NONE)
			return -1;
		kf_imp_bind(I, gp->input[i]->name, v);
	}
	for (int k = 0; k < I->o.nbind; k++) {
		bool found = false;
		for (size_t i = 0; i < gp->n_input && !found; i++)
			found = strcmp(I->o.bind[k].name, gp->input[i]->name) == 0 && !is_initializer(gp, gp->input[i]->name);
		if (!found)
			return kf_imp_fail(I, "--bind %s: the model has no graph input of that name", I->o.bind[k].name);
	}
	return 0;
}

static int add_outputs(kf_imp *I, const Onnx__GraphProto *gp)
{
	kf_vid *out = calloc(gp->n_output + 1, sizeof *out);
	kf_tid *types = calloc(gp->n_output + 1, sizeof *types);
	int rc = 0;
	for (size_t i = 0; i < gp->n_output && rc == 0; i++) {
		out[i] = kf_imp_lookup(I, gp->output[i]->name);
		if (out[i] == KF_NONE) {
			rc = -1;
			break;
		}
		types[i] = I->g->val[out[i]].type;
	}
	if (rc == 0) {
		kf_node_new(I->g, 0, KF_NONE, KF_OP_RETURN, out, (uint32_t)gp->n_output, NULL, 0);
		kf_graph_set_results(I->g, types, (uint32_t)gp->n_output);
	}
	free(out);
	free(types);
	return rc;
}

/* The names ONNX requires but protobuf leaves NULL when absent (proto2
 * optional strings): what lacks one, or NULL when all are there.  Checked
 * once here so that no translation meets a NULL name (found by fuzzing). */
static const char *missing_name(const Onnx__GraphProto *gp)
{
	for (size_t i = 0; i < gp->n_node; i++) {
		if (!gp->node[i]->op_type)
			return "a node has no op_type";
		for (size_t k = 0; k < gp->node[i]->n_attribute; k++)
			if (!gp->node[i]->attribute[k]->name)
				return "a node attribute has no name";
	}
	for (size_t i = 0; i < gp->n_initializer; i++)
		if (!gp->initializer[i]->name)
			return "an initializer has no name";
	for (size_t i = 0; i < gp->n_input; i++)
		if (!gp->input[i]->name)
			return "a graph input has no name";
	for (size_t i = 0; i < gp->n_output; i++)
		if (!gp->output[i]->name)
			return "a graph output has no name";
	for (size_t i = 0; i < gp->n_value_info; i++)
		if (!gp->value_info[i]->name)
			return "a value_info entry has no name";
	return NULL;
}

static int64_t default_opset(const Onnx__ModelProto *mp)
{
	for (size_t i = 0; i < mp->n_opset_import; i++) {
		const char *d = mp->opset_import[i]->domain;
		if (!d || !*d || strcmp(d, "ai.onnx") == 0)
			return mp->opset_import[i]->version;
	}
	return 1;
}

static kf_module *import(kf_ctx *c, const char *name, const char *dir, const void *buf, size_t len,
			 const kf_onnx_opts *o);

kf_module *kf_onnx_import(kf_ctx *c, const char *name, const void *buf, size_t len, const kf_onnx_opts *o)
{
	return import(c, name, NULL, buf, len, o);
}

static kf_module *import(kf_ctx *c, const char *name, const char *dir, const void *buf, size_t len,
			 const kf_onnx_opts *o)
{
	kf_srcid src = kf_source_add(c, name, NULL, 0);
	Onnx__ModelProto *mp = (Onnx__ModelProto *)kf_onnx_unpack(c, src, &onnx__model_proto__descriptor, buf, len,
								  "ONNX model");
	if (!mp)
		return NULL;
	if (!mp->graph) {
		kf_error(c, (kf_loc){src, 0}, "the model has no graph");
		kf_onnx_unpack_free(&mp->base);
		return NULL;
	}
	const char *why = missing_name(mp->graph);
	if (why) {
		kf_error(c, (kf_loc){src, 0}, "not a valid ONNX model: %s", why);
		kf_onnx_unpack_free(&mp->base);
		return NULL;
	}
	kf_rt_register(c); /* CPU kernels fold constant subgraphs at import */
	kf_imp I = {.c = c, .src = src, .opset = default_opset(mp)};
	if (o)
		I.o = *o;
	if (dir)
		snprintf(I.dir, sizeof I.dir, "%s", dir);
	const Onnx__GraphProto *gp = mp->graph;
	I.gp = gp;
	kf_sid gname = clean_name(c, gp->name && *gp->name ? gp->name : "main");
	I.g = kf_graph_new(c, kf_str(c, gname));
	kf_type f32 = kf_type_make(KF_F32, 0, NULL);
	I.scalar_f32 = kf_type_intern(c, &f32);
	int rc = add_initializers(&I, gp);
	if (rc == 0)
		rc = add_inputs(&I, gp);
	for (size_t i = 0; rc == 0 && i < gp->n_node; i++) {
		I.node = gp->node[i];
		rc = kf_imp_translate(&I, gp->node[i]);
		if (I.failed)
			rc = -1;
	}
	I.node = NULL;
	if (rc == 0)
		rc = add_outputs(&I, gp);
	/* what shape values were computed with and nobody reads (shapes.c) */
	if (rc == 0)
		kf_dce_graph(I.g);
	free(I.map);
	free(I.wused);
	free(I.sv);
	kf_onnx_unpack_free(&mp->base);
	if (rc < 0 || I.failed) {
		kf_graph_free(I.g);
		return NULL;
	}
	kf_module *m = kf_module_new(c);
	m->src = src;
	kf_module_add(m, I.g);
	return m;
}

kf_module *kf_onnx_import_file(kf_ctx *c, const char *path, const kf_onnx_opts *o)
{
	kf_srcid src;
	char *buf;
	size_t len;
	if (kf_onnx_read_file(c, path, &src, &buf, &len) < 0)
		return NULL;
	/* external data lives beside the model (a model from stdin has none) */
	char dir[4096];
	const char *slash = strrchr(path, '/');
	bool in = !strcmp(path, "-");
	if (slash)
		snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
	else
		snprintf(dir, sizeof dir, ".");
	if (!dir[0])
		snprintf(dir, sizeof dir, "/");
	kf_module *m = import(c, in ? "<stdin>" : path, in ? NULL : dir, buf, len, o);
	free(buf);
	return m;
}
