/* softplus.c: a C plugin for kfuse: the op `softplus` (log(1 + e^x)) and a
 * pass `fold-softplus` that rewrites log(1 + exp(x)) into it.
 *
 * Build against an installed kfuse (see CMakeLists.txt beside it, or by
 * hand with pkg-config):
 *
 *     cc -shared -fPIC -O2 $(pkg-config --cflags kfuse) -Wl,-z,defs \
 *        softplus.c -o libkfuse_softplus.so -lm
 *     kfuse-opt model.kf --plugin ./libkfuse_softplus.so -p fold-softplus,fuse
 *
 * Everything it calls in kfuse goes through the api table (kfuse_plugin.h):
 * the library links against nothing of kfuse, only field accessors of kf.h.
 */
#include <math.h>
#include <string.h>

#include <kfuse/kfuse_plugin.h>

static const kfuse_plugin_api *api;
static int op_softplus = -1;

static const kf_type *vtype(kf_graph *g, kf_vid v)
{
	return api->type_get(g->ctx, g->val[v].type);
}

/* Same type as the operand, which must be a float. */
static int softplus_infer(kf_graph *g, kf_nid n, kf_type *out, int maxout, char *err, size_t errlen)
{
	const kf_type *t = vtype(g, kf_in(g, n, 0));
	if (t->dtype != KF_F32 && t->dtype != KF_F64) {
		snprintf(err, errlen, "softplus takes f32 or f64");
		return -1;
	}
	out[0] = *t;
	return 1;
}

/* log1p(exp(x)), written to stay finite for large x. */
static double softplus(double x)
{
	return x > 30 ? x : log1p(exp(x));
}

static int softplus_cpu(kf_graph *g, kf_nid n, const kf_tensor *in, int nin, kf_tensor *out, int nout,
			char *err, size_t errlen)
{
	size_t count = in[0].nbytes / (in[0].dtype == KF_F64 ? 8 : 4);
	for (size_t i = 0; i < count; i++) {
		if (in[0].dtype == KF_F64)
			((double *)out[0].data)[i] = softplus(((const double *)in[0].data)[i]);
		else
			((float *)out[0].data)[i] = (float)softplus(((const float *)in[0].data)[i]);
	}
	return 0;
}

static bool is_one(kf_graph *g, kf_vid v)
{
	double x;
	return api->const_scalar(g, v, &x) && x == 1.0;
}

/* The operand of exp in 1 + exp(x) (either order), or KF_NONE. */
static kf_vid softplus_arg(kf_graph *g, kf_vid v)
{
	kf_nid add = kf_def(g, v);
	if (add == KF_NONE || kf_N(g, add)->op != KF_OP_ADD)
		return KF_NONE;
	for (int k = 0; k < 2; k++) {
		kf_nid e = kf_def(g, kf_in(g, add, (uint32_t)k));
		if (e != KF_NONE && kf_N(g, e)->op == KF_OP_EXP && is_one(g, kf_in(g, add, (uint32_t)(1 - k))))
			return kf_in(g, e, 0);
	}
	return KF_NONE;
}

/* fold-softplus: log(1 + exp(x)) -> softplus(x).  The add and exp stay
 * for a later dce when nothing else reads them. */
static int fold_softplus(kf_graph *g, const kf_passopts *o, bool *changed)
{
	kf_foreach_node(g, 0, n) {
		if (kf_N(g, n)->op != KF_OP_LOG)
			continue;
		kf_vid x = softplus_arg(g, kf_in(g, n, 0));
		if (x == KF_NONE || (vtype(g, x)->dtype != KF_F32 && vtype(g, x)->dtype != KF_F64))
			continue;
		kf_tid t = g->val[kf_res(g, n, 0)].type;
		kf_nid s = api->node_new(g, kf_N(g, n)->blk, n, op_softplus, &x, 1, &t, 1);
		kf_N(g, s)->loc = kf_N(g, n)->loc;
		api->replace_all_uses(g, kf_res(g, n, 0), kf_res(g, s, 0));
		*changed = true;
	}
	return 0;
}

static const kf_pass pass_fold_softplus = {
	.name = "fold-softplus",
	.doc = "rewrite log(1 + exp(x)) to softplus(x) (from the softplus plugin)",
	.run = fold_softplus,
};

int kfuse_plugin_init(const kfuse_plugin_api *a)
{
	api = a;
	if (a->abi < KFUSE_PLUGIN_ABI || a->size < sizeof *a) {
		a->error(a->ctx, "softplus plugin: kfuse plugin ABI %u is older than %d", a->abi, KFUSE_PLUGIN_ABI);
		return -1;
	}
	kf_opinfo info;
	memset(&info, 0, sizeof info);
	info.name = "softplus";
	info.min_in = info.max_in = 1;
	info.nres = 1;
	info.trait = KF_TRAIT_ELEMENTWISE;
	info.infer = softplus_infer;
	info.cpu = softplus_cpu;
	info.cuda = "(a > 30.f ? a : log1pf(expf(a)))";
	info.attrs = "";
	info.doc = "log(1 + e^x) (from the softplus plugin)";
	op_softplus = a->register_op(a->ctx, &info);
	if (op_softplus < 0)
		return -1;
	return a->register_pass(a->ctx, &pass_fold_softplus);
}
