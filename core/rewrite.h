/* rewrite.h: the rewrite engine: pattern graphs, the matcher and the
 * greedy worklist driver (MLIR-shaped: rules indexed by root op, tried by
 * benefit, a de-duplicated worklist, dead nodes removed, bounded iterations,
 * a converged / not-converged result).
 *
 * A rule is a pattern graph (variables, constants, ops) plus either a
 * replacement template (a second pattern graph whose variables are the
 * pattern's, instantiated in C) or a replace callback.  The Lua bridge
 * (core/lua_rules.c) traces `rule { ... }` scripts into these structures;
 * C code can build them directly with kf_pat_*.  A transform is a rule with
 * no pattern: an apply callback run on every node of one op.
 *
 * Callbacks build replacements through a kf_rewriter, which journals every
 * mutation so that a rule failing half way is rolled back and the graph is
 * never left half rewritten.
 */
#ifndef KF_REWRITE_H
#define KF_REWRITE_H

#include "kf.h"

/* ---- pattern graphs ------------------------------------------------------ */

/* A pattern value: a pattern node and one of its results. */
typedef uint32_t kf_pv;
#define KF_PV(node, res) (((uint32_t)(node) << 8) | (uint32_t)(res))
#define KF_PV_NODE(pv) ((pv) >> 8)
#define KF_PV_RES(pv) ((pv) & 0xffu)
#define KF_PAT_MAXOUT 16

typedef enum { KF_PN_VAR, KF_PN_CONST, KF_PN_OP } kf_pnkind;

#define KF_PAT_MAXTVAR 16
#define KF_AC_MAXLEAF 8

typedef struct kf_pnode {
	uint8_t kind;     /* kf_pnkind */
	uint8_t nres;     /* OP: result count */
	uint16_t op;      /* OP */
	uint32_t nin;
	kf_pv *in;        /* OP: operands */
	uint32_t nattr;
	kf_attr *attr;    /* OP: attributes that must match; unnamed ones match anything */
	uint32_t var;     /* VAR: variable index */
	bool seq;         /* VAR: the sequence variable (`...`): any number of operands */
	double cval;      /* CONST: value */
	int cdtype;       /* CONST: kf_dtype; -1: any (matching) / from the context (replacing);
	                   * <= -2: the dtype of type variable -2 - cdtype */
	/* set by kf_pat_set_outputs (matching an associative-commutative chain) */
	uint8_t nleaf;    /* OP: > 2 on the head of a chain of one AC op: its operands, flattened */
	bool absorbed;    /* OP: inside such a chain (matched with its head, never alone) */
	uint8_t weight;   /* pattern nodes this one stands for when matched (1 + absorbed below) */
	kf_pv *leaf;      /* [nleaf]: most constrained first */
} kf_pnode;

/* A pattern variable's type constraint, `types = {x = "T[..., N, 4]"}`:
 * dtype and dims fixed, free, or a type variable that must bind one value
 * wherever it appears (docs/rules.md, "Type and shape variables"). */
typedef struct kf_ptype {
	int16_t dtype;              /* >= 0 a kf_dtype; -1 any; <= -2 type variable -2 - dtype */
	int8_t rank;                /* -1: any shape (none written) */
	bool ellipsis;              /* "...": any leading dims, the listed ones match from the end */
	int64_t dim[KF_MAX_RANK];   /* where dvar is -1 */
	int16_t dvar[KF_MAX_RANK];  /* -1 fixed (dim), -2 any ("?"), >= 0 type variable */
} kf_ptype;

typedef enum { KF_TV_DTYPE, KF_TV_DIM } kf_tvkind;

typedef struct kf_pattern {
	kf_ctx *ctx;
	kf_arena arena;
	kf_pnode *node;
	uint32_t nnode, capnode;
	uint32_t nvar;
	const char **varname;  /* [nvar] */
	kf_ptype **vtype;      /* [nvar]: constraints, NULL for none */
	uint32_t capvar;
	uint32_t nout;
	kf_pv out[KF_PAT_MAXOUT];
	uint32_t ntvar;        /* type variables */
	kf_sid tvname[KF_PAT_MAXTVAR];
	uint8_t tvkind[KF_PAT_MAXTVAR]; /* kf_tvkind */
	bool no_assoc;         /* match AC chains only as written (rule field assoc = false) */
	int seqvar;            /* the sequence variable's index, or -1 */
} kf_pattern;

kf_pattern *kf_pat_new(kf_ctx *c);
void kf_pat_free(kf_pattern *p);
/* Adds pattern variable `name` (copied); variables are numbered in order. */
kf_pv kf_pat_var(kf_pattern *p, const char *name);
kf_pv kf_pat_const(kf_pattern *p, double v, int dtype);
/* The sequence variable `...` (one per pattern; added after the others): an
 * operand of a node of an op of variable arity, it stands for any number of
 * its operands there (none too); in a replacement, for those values. */
kf_pv kf_pat_seqvar(kf_pattern *p);
/* An op node with nres results (nres 0: the op's declared count, or 1);
 * attributes are deep-copied.  Returns its result 0. */
kf_pv kf_pat_op(kf_pattern *p, int op, const kf_pv *in, uint32_t nin,
		const kf_attr *attr, uint32_t nattr, uint32_t nres);
/* The type variable `name` of kind k, added on first use: its index, or -1
 * (reason in err) when there are too many or it is used as both kinds. */
int kf_pat_tvar(kf_pattern *p, const char *name, kf_tvkind k, char *err, size_t errlen);
/* The type variable named by sid, or -1. */
int kf_pat_tvar_find(const kf_pattern *p, kf_sid name);
/* Parses a constraint ("T[..., N, D]", "f32[4, ?]", "T", "?[N]") into t,
 * adding its type variables to p.  0, or -1 with the reason in err. */
int kf_pat_parse_type(kf_pattern *p, const char *text, kf_ptype *t, char *err, size_t errlen);
/* Constrains variable var (the constraint is copied). */
void kf_pat_set_vtype(kf_pattern *p, uint32_t var, const kf_ptype *t);
/* Binds p's type variables from its variables' types (types[nvar]) as a
 * match would: false when the types do not satisfy the constraints.
 * tval[KF_PAT_MAXTVAR] gets the values, *bound a bit per bound variable. */
bool kf_pat_bind_types(const kf_pattern *p, const kf_type *types, int64_t *tval, uint32_t *bound);
/* Copies p's type variables into t (a replacement traced over p's variables). */
void kf_pat_copy_tvars(kf_pattern *t, const kf_pattern *p);
/* Sets the outputs; out[0] is the root and must be an op result.  Returns
 * -1 with a message in err when an output is not reachable from the root.
 * Also finds the associative-commutative chains (unless p->no_assoc). */
int kf_pat_set_outputs(kf_pattern *p, const kf_pv *out, uint32_t n, char *err, size_t errlen);
/* Longest operand chain from the root, in graph nodes a match may span (1
 * for a single op; a chain of k AC leaves counts k - 1). */
int kf_pat_depth(const kf_pattern *p);
/* Pattern nodes a full match covers (constants and variables included). */
uint32_t kf_pat_size(const kf_pattern *p);
/* The ops of the pattern's op nodes, root first: "mul(add, tanh)" style. */
void kf_pat_print(kf_buf *out, const kf_pattern *p);
/* The subexpression at pattern value pv, at most max bytes (then "..."). */
void kf_pat_print_at(kf_buf *out, const kf_pattern *p, kf_pv pv, size_t max);

/* ---- rules ------------------------------------------------------------- */

typedef struct kf_rewriter kf_rewriter;
typedef struct kf_rule kf_rule;

/* ---- node order (rewrite_order.c) ------------------------------------------------ */

/* Positions of nodes in their blocks, kept while rewriting, so that a
 * rewrite can place nodes after their operands and check dominance in O(1).
 * Keys are by node id; only nodes of one block compare. */
typedef struct kf_rw_order {
	double *key;
	uint32_t cap;
} kf_rw_order;

/* Numbers block b (or every block) afresh. */
void kf_rw_order_block(kf_rw_order *o, const kf_graph *g, kf_bid b);
void kf_rw_order_graph(kf_rw_order *o, const kf_graph *g);
/* Node n was inserted or moved: gives it a key between its neighbours'. */
void kf_rw_order_placed(kf_rw_order *o, const kf_graph *g, kf_nid n);
/* a comes before b in the same block. */
bool kf_rw_order_before(const kf_rw_order *o, const kf_graph *g, kf_nid a, kf_nid b);
/* v may be read at node at: a block argument of at's block, or defined
 * before it in that block (regions read only their own values). */
bool kf_rw_order_available(const kf_rw_order *o, const kf_graph *g, kf_vid v, kf_nid at);
void kf_rw_order_free(kf_rw_order *o);

struct kf_rule {
	const char *name;
	const char *origin;     /* "file.lua:12", for messages */
	int benefit;            /* higher first */
	double rtol;            /* constants match within this relative tolerance */
	bool keep_interior;     /* matched interior values used outside are kept */
	kf_pattern *pat;        /* NULL: a transform */
	kf_pattern *tmpl;       /* replacement traced once; NULL: replace() */
	int on_op;              /* the root op (rules: from pat; transforms: given) */
	/* Callbacks; each returns 1 (yes / changed), 0 (no) or -1 (error, in the
	 * context).  where and replace see the match in rw->bind; replace sets
	 * rw->out.  apply is a transform's: it runs on node n and says whether
	 * it changed the graph. */
	int (*where)(kf_rewriter *rw);
	int (*replace)(kf_rewriter *rw);
	int (*apply)(kf_rewriter *rw, kf_nid n);
	void *user;
	uint32_t index;         /* set by the driver: position in the rule set */
};

/* A rule set is a view: an ordered list of rules owned elsewhere. */
typedef struct kf_ruleset {
	kf_rule **rule;
	uint32_t n, cap;
} kf_ruleset;

void kf_ruleset_add(kf_ruleset *s, kf_rule *r);
void kf_ruleset_free(kf_ruleset *s);

/* ---- matching -------------------------------------------------------------- */

typedef struct kf_match {
	kf_vid bind[64];          /* pattern variables, by index */
	uint32_t nbind;
	kf_vid seq[64];           /* the sequence variable's values */
	uint32_t nseq;
	bool seqbound;
	kf_vid out[KF_PAT_MAXOUT]; /* the graph values of the pattern outputs */
	uint32_t nout;
	kf_nid node[64];          /* matched op nodes, AC chains' inner nodes too (not constants) */
	uint32_t nnode;
	int64_t tval[KF_PAT_MAXTVAR]; /* type variables: a kf_dtype, or a dim */
	uint32_t ntval;
	/* when it fails: the reason at the deepest point the search reached */
	const char *why;
	uint32_t why_pn;          /* ... at this pattern node */
	kf_vid why_v;             /* ... facing this graph value (KF_NONE: none) */
	uint32_t why_depth;       /* pattern nodes matched on the way there */
	char why_text[160];       /* a reason with details (why then points here) */
	const char *declined;     /* set by an accept callback that declines: why */
	uint32_t steps;           /* the search's steps (for the driver's budget) */
} kf_match;

/* A match attempt gives up after this many search steps. */
#define KF_MATCH_STEPS 200000

#define KF_PAT_MAXNODE 64

/* Called on each complete match (every pattern node matched, the interior
 * checked): 1 accepts it, 0 declines it and the search goes on (setting
 * m->why), -1 stops with an error (in the context). */
typedef int (*kf_rw_accept_fn)(void *ud, kf_match *m);

/* Matches rule r's pattern with its root at node n (call kf_rw_may_match
 * first: most candidates fail there, cheaply).  Commutative ops match
 * either operand order and chains of an associative-commutative op any
 * grouping and order of their operands (unless the pattern says no_assoc);
 * constants match within r->rtol (scalars match splats that broadcast into
 * their user); a variable bound twice binds one value and satisfies its
 * type constraint; a matched interior value used outside the match blocks
 * it (unless r->keep_interior).  accept (may be NULL: the first match
 * wins) is part of the search: a declined match makes the matcher try the
 * next binding, so an asymmetric where() sees every operand order.
 * 1 when a match was accepted, 0 when none, -1 when accept failed. */
int kf_rw_match(kf_graph *g, const kf_rule *r, kf_nid n, kf_match *m, kf_rw_accept_fn accept, void *ud);
/* Cheap necessary condition for a match at n (the ops around the root);
 * false when no match is possible. */
bool kf_rw_may_match(const kf_graph *g, const kf_rule *r, kf_nid n);
/* The ops of the values a cut of the AC chain at n into nleaf pieces could
 * offer (-1 for a graph argument), into have[KF_AC_MAXPIECES], and in *most
 * the most pieces a cut can make; returns their count.  kf_rw_ac_fits:
 * whether they can make root's leaves (enough pieces, every op and
 * constant leaf among them). */
#define KF_AC_MAXPIECES (2 << (KF_AC_MAXLEAF - 1))
uint32_t kf_rw_ac_pieces(const kf_graph *g, kf_nid n, uint32_t nleaf, int *have, uint32_t *most);
bool kf_rw_ac_fits(const kf_pattern *p, const kf_pnode *root, const int *have, uint32_t nh, uint32_t most);

/* ---- building replacements ------------------------------------------------ */

struct kf_rewriter {
	kf_graph *g;
	const kf_rule *rule;
	kf_nid root;            /* new nodes go before it (see kf_rw_create) */
	kf_rw_order *ord;       /* the node order, when kept (the driver's); NULL: none */
	kf_nid at;              /* an explicit place for the next kf_rw_create (KF_NONE: none): */
	bool at_after;          /* ... just after node `at` rather than just before it */
	const kf_match *m;      /* the match (NULL for transforms) */
	const int64_t *tval;    /* type variables' values for templates (NULL: none) */
	const kf_vid *seq;      /* the sequence variable's values for templates */
	uint32_t nseq;
	kf_vid out[KF_PAT_MAXOUT];
	uint32_t nout;
	uint32_t nmut;          /* mutations so far */
	char err[256];          /* why the last builder call failed */
	/* the journal, for rollback */
	kf_nid *created; uint32_t ncreated, capcreated;
	struct kf_rw_moved { kf_nid user; uint32_t slot; kf_vid old; } *moved;
	uint32_t nmoved, capmoved;
	struct kf_rw_attrs { kf_nid n; kf_attr *attr; uint32_t nattr; } *attrs;
	uint32_t nattrs, capattrs;
	kf_nid *erase; uint32_t nerase, caperase;
	kf_nid mark;            /* nodes >= mark were created by this rewrite */
};

/* Starts a rewrite whose new nodes go before root; kf_rw_end frees the
 * journal (keeping the changes), kf_rw_rollback undoes them first. */
void kf_rw_begin(kf_rewriter *rw, kf_graph *g, kf_nid root);
void kf_rw_end(kf_rewriter *rw);
void kf_rw_rollback(kf_rewriter *rw);
/* Builds traced graph t with its variables bound to bind[]: sets rw->out
 * and returns 1, or 0 with the reason in rw->err.  Constants take the dtype
 * of a sibling operand, else `fallback`; a constant output becomes a splat
 * of the type of like[k] (when like is given). */
int kf_rw_instantiate(kf_rewriter *rw, const kf_pattern *t, const kf_vid *bind, kf_dtype fallback,
		      const kf_vid *like);

/* Creates a node with result types from kf_infer (or from types[] when
 * given: ops without a shape function).  nres 0: the op's count (split: the
 * length of `sizes`).  It goes where rw->at says (then reset), else before
 * rw->root; with an order kept, after its last operand when that is at or
 * after rw->root.  Constants this rewrite made move up before their first
 * user.  Returns result 0, or KF_NONE with the reason in rw->err (the node
 * is not left behind; an operand defined after an explicit place is one). */
kf_vid kf_rw_create(kf_rewriter *rw, int op, const kf_vid *in, uint32_t nin,
		    const kf_attr *attr, uint32_t nattr, const kf_tid *types, uint32_t nres);
/* A scalar constant `const v : dt[]`. */
kf_vid kf_rw_const(kf_rewriter *rw, double v, kf_dtype dt);
/* A constant of static type t: n values in C order (n = its element
 * count), or one (a splat). */
kf_vid kf_rw_const_dense(kf_rewriter *rw, const kf_type *t, const double *v, uint64_t n);
/* Every use of from reads to (journaled). */
void kf_rw_replace_uses(kf_rewriter *rw, kf_vid from, kf_vid to);
/* Erases n when the rewrite commits; it must be unused by then. */
void kf_rw_erase(kf_rewriter *rw, kf_nid n);
/* Adds or replaces an attribute (journaled). */
void kf_rw_set_attr(kf_rewriter *rw, kf_nid n, kf_sid key, kf_attrval v);
/* True when node n was created by this rewrite or is scheduled for erasure. */
bool kf_rw_erased(const kf_rewriter *rw, kf_nid n);

/* ---- the driver ---------------------------------------------------------- */

typedef struct kf_rw_opts {
	int max_iter;            /* sweeps over the graph; 0: 10 */
	uint64_t max_rewrites;   /* 0: 100000 + 8 * nodes */
	uint64_t max_steps;      /* matcher search steps; 0: 50M + 200 * nodes */
	int trace;               /* 1: a line per rewrite; 2: also failed matches */
	const char *trace_rule;  /* a line per candidate root of the rules so named
	                          * ("name", or "prefix*"): how far the match got */
	kf_buf *log;             /* trace lines go here; NULL: none */
} kf_rw_opts;

/* What became of one rule's candidates: nodes of its root op it was tried
 * at; of those, where its pattern matched; of those, where where() said no
 * to every match, where the replacement was declined (a type that differs,
 * replace returning nil), and where it rewrote. */
typedef struct kf_rw_rulestat {
	uint64_t attempted, matched, where_no, declined, rewritten;
} kf_rw_rulestat;

typedef struct kf_rw_stats {
	uint64_t visited;        /* nodes popped from the worklist */
	uint64_t tried;          /* match attempts (rule x node of its root op) */
	uint64_t matched;        /* structural matches */
	uint64_t callbacks;      /* where/replace/apply entries (Lua entries) */
	uint64_t rewrites;
	uint64_t rejected;       /* matches a where, a type or a replace declined */
	uint64_t dead;           /* dead nodes removed */
	uint64_t steps;          /* matcher search steps */
	uint32_t iterations;
	bool converged;
	kf_rw_rulestat *rule;    /* per rule of the set */
	uint32_t nrule;
} kf_rw_stats;

void kf_rw_stats_init(kf_rw_stats *st, const kf_ruleset *rs);
void kf_rw_stats_free(kf_rw_stats *st);

/* Applies the rules to g until nothing matches.  Returns 0 when it
 * converged; -1 with an error in the context when a callback failed (the
 * graph keeps every rewrite before it, and none of the failing one), when
 * the caps were hit, when a rule claimed success and changed nothing, or
 * when rules undo each other (a rewritten region hashes like one an earlier
 * rewrite started from). */
int kf_rw_run(kf_graph *g, const kf_ruleset *rs, const kf_rw_opts *o, kf_rw_stats *st);

/* Whether trace_rule spec selects rule `name`: the name itself, or a
 * prefix followed by '*'. */
bool kf_rw_selects(const char *spec, const char *name);

/* The counters, then the rules that fired and how often. */
void kf_rw_summary(kf_buf *out, const kf_ruleset *rs, const kf_rw_stats *st);
/* The counters, then a row of kf_rw_rulestat per rule, those at 0 too: a
 * rule set's coverage. */
void kf_rw_coverage(kf_buf *out, const kf_ruleset *rs, const kf_rw_stats *st);

/* A type as the IR writes it, f32[4,N] (the core cannot call ir-text's
 * printer: kfcore links before kftext). */
void kf_rw_type_str(kf_buf *out, const kf_ctx *c, kf_tid t);
/* "file:line:col" of a location, or "?" (for messages). */
void kf_rw_locstr(kf_buf *out, const kf_ctx *c, kf_loc loc);

#endif
