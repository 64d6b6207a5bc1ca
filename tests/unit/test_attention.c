/* Unit tests of the attention kernels (cuda/emit_attention*.c): each
 * variant's text compiles with NVRTC and ptxas for sm_90 without spills
 * (register counts printed; skipped without NVRTC), and runs on the host
 * emulation of tests/unit/kf_emu.h against the interpreter: the flash
 * kernel on tensor cores (f16, bf16; causal and masked; partial tiles;
 * k and v stored transposed; grouped-query heads; q through registers with
 * a prologue; the output's transpose) and the SIMT kernel (decoding with
 * the keys split across blocks and combined by the last block; f32;
 * odd head dims).  Host models check the index math the kernels rely on:
 * the fragment layouts against a plain matrix product, the online softmax
 * and the split combination against the softmax, and the causal tile
 * bounds against the mask. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "kf_att_test.h"
#include "cuda_backend.h"

/* ---- the cases ------------------------------------------------------------------- */

/* f16, head dim 64, plain (kf_att_test.h's KFT_ATT_PLAIN) */
static const acase plain = {
	"plain", KFT_ATT_PLAIN, "fa128x64s2: q cp.async, k cp.async, v cp.async */", NULL, 2e-2, 4e-3, 168,
};

/* causal (a tril constant: the pass makes it iotas), rows and keys that do
 * not fill the tiles (96 of 128, 96 of 2 x 64) */
static const acase causal = {
	"causal", "graph @g(%q: f16[3,96,64], %k: f16[3,96,64], %v: f16[3,96,64]) -> (f16[3,96,64]) {\n"
	"  %kt = transpose(%k) {perm = [0, 2, 1]} : f16[3,64,96]\n"
	"  %s = matmul(%q, %kt) : f16[3,96,96]\n  %c = const 0.125 : f16[]\n"
	"  %t = mul(%s, %c) : f16[3,96,96]\n  %ninf = const -inf : f16[]\n"
	"  %r = iota() {axis = 0, dtype = \"i64\", shape = [96, 96]} : i64[96,96]\n  %cc = iota() {axis = 1, dtype = \"i64\", shape = [96, 96]} : i64[96,96]\n"
	"  %keep = le(%cc, %r) : i1[96,96]\n  %w = where(%keep, %t, %ninf) : f16[3,96,96]\n"
	"  %p = softmax(%w) {axis = -1} : f16[3,96,96]\n"
	"  %o = matmul(%p, %v) : f16[3,96,64]\n  return %o\n}\n",
	"causal */", NULL, 2e-2, 4e-3, 168,
};

/* bf16, head dim 128, 4 query heads over 2 k/v heads (broadcast_to and
 * reshape), an additive padding mask [B, 1, 1, Tk] the score chain loads,
 * 64 query rows over 80 keys, a 64-row tile */
#define GQA_TEXT "graph @g(%q: bf16[2,4,64,128], %k: bf16[2,2,80,128], %v: bf16[2,2,80,128], %m: bf16[2,1,1,80]) -> (bf16[2,4,64,128]) {\n" \
	"  %k5 = reshape(%k) {shape = [2, 2, 1, 80, 128]} : bf16[2,2,1,80,128]\n" \
	"  %ke = broadcast_to(%k5) {shape = [2, 2, 2, 80, 128]} : bf16[2,2,2,80,128]\n" \
	"  %kr = reshape(%ke) {shape = [2, 4, 80, 128]} : bf16[2,4,80,128]\n" \
	"  %v5 = reshape(%v) {shape = [2, 2, 1, 80, 128]} : bf16[2,2,1,80,128]\n" \
	"  %ve = broadcast_to(%v5) {shape = [2, 2, 2, 80, 128]} : bf16[2,2,2,80,128]\n" \
	"  %vr = reshape(%ve) {shape = [2, 4, 80, 128]} : bf16[2,4,80,128]\n" \
	"  %kt = transpose(%kr) {perm = [0, 1, 3, 2]} : bf16[2,4,128,80]\n" \
	"  %s = matmul(%q, %kt) : bf16[2,4,64,80]\n  %c = const 0.088388 : bf16[]\n" \
	"  %t = mul(%s, %c) : bf16[2,4,64,80]\n  %a = add(%t, %m) : bf16[2,4,64,80]\n" \
	"  %p = softmax(%a) {axis = -1} : bf16[2,4,64,80]\n" \
	"  %o = matmul(%p, %vr) : bf16[2,4,64,128]\n  return %o\n}\n"
static const acase gqa = {
	"gqa_bf16", GQA_TEXT,
	"fa64x64s2", NULL, 5e-2, 3e-2, 200,
};

/* k given transposed ([B, D, Tk], keys contiguous) and v too ([B, Dv, Tk],
 * transposed in the graph): both tiles keep keys as columns; a bottom-right
 * causal mask over a cache (48 rows, 112 keys: off 64); 3 stages */
static const acase kcols = {
	"kcols", "graph @g(%q: f16[2,48,64], %kt: f16[2,64,112], %vt: f16[2,64,112]) -> (f16[2,48,64]) {\n"
	"  %s = matmul(%q, %kt) : f16[2,48,112]\n  %c = const 0.125 : f16[]\n"
	"  %t = mul(%s, %c) : f16[2,48,112]\n"
	"  %r = iota() {axis = 0, dtype = \"i64\", shape = [48, 112]} : i64[48,112]\n  %cc = iota() {axis = 1, dtype = \"i64\", shape = [48, 112]} : i64[48,112]\n  %o64 = const 64 : i64[]\n"
	"  %rr = add(%r, %o64) : i64[48,112]\n  %cut = gt(%cc, %rr) : i1[48,112]\n"
	"  %z = const 0.0 : f16[]\n  %fm = const -65504.0 : f16[]\n  %mk = where(%cut, %fm, %z) : f16[48,112]\n"
	"  %a = add(%t, %mk) : f16[2,48,112]\n"
	"  %p = softmax(%a) {axis = -1} : f16[2,48,112]\n"
	"  %v = transpose(%vt) {perm = [0, 2, 1]} : f16[2,112,64]\n"
	"  %o = matmul(%p, %v) : f16[2,48,64]\n  return %o\n}\n",
	"keys as columns, v cp.async, keys as columns, causal */", "fa64x32s3", 2e-2, 4e-3, 168,
};

/* q through registers: scaled before the matmul and read from a slice at
 * an odd offset (not 16-byte aligned: k and v go through registers too);
 * a boolean mask input through where with finfo.min of f16 */
static const acase regs = {
	"registers", "graph @g(%x: f16[2,33,96], %kt: f16[2,32,40], %v: f16[2,40,32], %keep: i1[2,33,40]) -> (f16[2,33,32]) {\n"
	"  %q = slice(%x) {starts = [1], ends = [33], axes = [2]} : f16[2,33,32]\n"
	"  %c = const 0.17677 : f16[]\n  %qs = mul(%q, %c) : f16[2,33,32]\n"
	"  %s = matmul(%qs, %kt) : f16[2,33,40]\n  %fm = const -65504.0 : f16[]\n"
	"  %w = where(%keep, %s, %fm) : f16[2,33,40]\n"
	"  %p = softmax(%w) {axis = -1} : f16[2,33,40]\n"
	"  %o = matmul(%p, %v) : f16[2,33,32]\n  return %o\n}\n",
	"q registers + prologue", "fa64x32s2", 2e-2, 4e-3, 168,
};

/* decoding: one query row, 1200 keys split across blocks (the last block
 * of a row combines), f16, head dim 128, 2 x 4 heads */
static const acase decode = {
	"decode", "graph @g(%q: f16[2,4,1,128], %k: f16[2,4,1200,128], %v: f16[2,4,1200,128]) -> (f16[2,4,1,128]) {\n"
	"  %kt = transpose(%k) {perm = [0, 1, 3, 2]} : f16[2,4,128,1200]\n"
	"  %s = matmul(%q, %kt) : f16[2,4,1,1200]\n  %c = const 0.088388 : f16[]\n"
	"  %t = mul(%s, %c) : f16[2,4,1,1200]\n  %p = softmax(%t) {axis = -1} : f16[2,4,1,1200]\n"
	"  %o = matmul(%p, %v) : f16[2,4,1,128]\n  return %o\n}\n",
	"slices of keys a row */", NULL, 2e-2, 2e-3, 96,
};

/* f32 (no tensor cores without tf32), head dim 40 (not a multiple of 32:
 * guarded lanes), a causal mask and a padding mask, 20 rows x 33 keys */
static const acase f32c = {
	"f32_causal", "graph @g(%q: f32[3,20,40], %k: f32[3,33,40], %v: f32[3,33,24], %m: f32[3,1,33]) -> (f32[3,20,24]) {\n"
	"  %kt = transpose(%k) {perm = [0, 2, 1]} : f32[3,40,33]\n"
	"  %s = matmul(%q, %kt) : f32[3,20,33]\n  %c = const 0.158 : f32[]\n"
	"  %t = div(%s, %c) : f32[3,20,33]\n  %a = add(%t, %m) : f32[3,20,33]\n"
	"  %r = iota() {axis = 0, dtype = \"i64\", shape = [20, 33]} : i64[20,33]\n  %cc = iota() {axis = 1, dtype = \"i64\", shape = [20, 33]} : i64[20,33]\n  %o13 = const 13 : i64[]\n"
	"  %rr = add(%r, %o13) : i64[20,33]\n  %keep = le(%cc, %rr) : i1[20,33]\n  %ninf = const -inf : f32[]\n"
	"  %w = where(%keep, %a, %ninf) : f32[3,20,33]\n"
	"  %p = softmax(%w) {axis = -1} : f32[3,20,33]\n"
	"  %o = matmul(%p, %v) : f32[3,20,24]\n  return %o\n}\n",
	"simt: 4 warps a row", NULL, 1e-4, 1e-5, 128,
};

/* The Hopper kernel (wgmma, TMA, a producer warpgroup), asked for by tile:
 * the plain case (the scale folded into exp2) with 2 consumer warpgroups
 * taking turns (ping-pong) and overlapping each tile's softmax with the
 * previous tile's P V, 2 key tiles of 64 */
static const acase wga_plain = {
	"wga_plain", NULL, "wga128x64s2po: q, k, v by TMA, the scale in exp2 */", "wga128x64s2po", 2e-2, 4e-3, 168,
};

/* bf16, head dim 128, causal over 192 rows (a partial 128-row tile; the
 * masked tiles' loop and the unmasked one both run), 64-key tiles, 3
 * stages, ping-pong and overlap */
static const acase wga_causal = {
	"wga_causal", "graph @g(%q: bf16[2,192,128], %k: bf16[2,192,128], %v: bf16[2,192,128]) -> (bf16[2,192,128]) {\n"
	"  %kt = transpose(%k) {perm = [0, 2, 1]} : bf16[2,128,192]\n"
	"  %s = matmul(%q, %kt) : bf16[2,192,192]\n  %c = const 0.088388 : bf16[]\n"
	"  %t = mul(%s, %c) : bf16[2,192,192]\n  %ninf = const -inf : bf16[]\n"
	"  %r = iota() {axis = 0, dtype = \"i64\", shape = [192, 192]} : i64[192,192]\n  %cc = iota() {axis = 1, dtype = \"i64\", shape = [192, 192]} : i64[192,192]\n"
	"  %keep = le(%cc, %r) : i1[192,192]\n  %w = where(%keep, %t, %ninf) : bf16[2,192,192]\n"
	"  %p = softmax(%w) {axis = -1} : bf16[2,192,192]\n"
	"  %o = matmul(%p, %v) : bf16[2,192,128]\n  return %o\n}\n",
	"wga128x64s3po: q, k, v by TMA, causal, the scale in exp2 */", "wga128x64s3po", 5e-2, 3e-2, 168,
};

/* GPT-2's layout: q, k, v split from one [B, T, 3 x H x D] projection,
 * heads side by side within a row (the tensor maps' column offsets), 80
 * rows and keys (partial tiles; TMA zero-fills past the sequence), one
 * consumer, no overlap */
static const acase wga_split = {
	"wga_split", "graph @g(%x: f16[2,80,384]) -> (f16[2,80,128]) {\n"
	"  %h:3 = split(%x) {axis = 2, sizes = [128, 128, 128]} : f16[2,80,128], f16[2,80,128], f16[2,80,128]\n"
	"  %q = reshape(%h#0) {shape = [2, 80, 2, 64]} : f16[2,80,2,64]\n"
	"  %k = reshape(%h#1) {shape = [2, 80, 2, 64]} : f16[2,80,2,64]\n"
	"  %v = reshape(%h#2) {shape = [2, 80, 2, 64]} : f16[2,80,2,64]\n"
	"  %qt = transpose(%q) {perm = [0, 2, 1, 3]} : f16[2,2,80,64]\n"
	"  %kt = transpose(%k) {perm = [0, 2, 3, 1]} : f16[2,2,64,80]\n"
	"  %vt = transpose(%v) {perm = [0, 2, 1, 3]} : f16[2,2,80,64]\n"
	"  %s = matmul(%qt, %kt) : f16[2,2,80,80]\n  %c = const 0.125 : f16[]\n"
	"  %t = mul(%s, %c) : f16[2,2,80,80]\n  %p = softmax(%t) {axis = -1} : f16[2,2,80,80]\n"
	"  %o = matmul(%p, %vt) : f16[2,2,80,64]\n  %ot = transpose(%o) {perm = [0, 2, 1, 3]} : f16[2,80,2,64]\n"
	"  %y = reshape(%ot) {shape = [2, 80, 128]} : f16[2,80,128]\n  return %y\n}\n",
	"wga64x64s2: q, k, v by TMA, the scale in exp2 */", "wga64x64s2", 2e-2, 4e-3, 240,
};

/* The gqa case (4 query heads over 2 k/v heads, an additive padding mask
 * [B, 1, 1, Tk] the score chain loads: no folding) on one consumer with
 * overlap, 32-key tiles over 80 keys (the last one cut) */
static const acase wga_gqa = {
	"wga_gqa", GQA_TEXT, "wga64x32s2o: q, k, v by TMA */", "wga64x32s2o", 5e-2, 3e-2, 240,
};

/* A boolean mask [B, 1, Tq, Tk] through where (finfo.min of f16) and a
 * division by sqrt(d); 96 query rows on 3 consumers taking turns (the
 * third's rows all past the sequence) */
static const acase wga_bool = {
	"wga_bool", "graph @g(%q: f16[2,2,96,64], %k: f16[2,2,96,64], %v: f16[2,2,96,64], %keep: i1[2,1,96,96]) -> (f16[2,2,96,64]) {\n"
	"  %kt = transpose(%k) {perm = [0, 1, 3, 2]} : f16[2,2,64,96]\n"
	"  %s = matmul(%q, %kt) : f16[2,2,96,96]\n  %c = const 8.0 : f16[]\n"
	"  %t = div(%s, %c) : f16[2,2,96,96]\n  %fm = const -65504.0 : f16[]\n"
	"  %w = where(%keep, %t, %fm) : f16[2,2,96,96]\n"
	"  %p = softmax(%w) {axis = -1} : f16[2,2,96,96]\n"
	"  %o = matmul(%p, %v) : f16[2,2,96,64]\n  return %o\n}\n",
	"wga192x32s3po: q, k, v by TMA */", "wga192x32s3po", 2e-2, 4e-3, 128,
};

/* An additive mask of the scores' last two dims [Tq, Tk] (broadcast over
 * batch and heads), head dim 128 with key tiles of 80 (not a multiple of
 * 64: v's boxes of head dims 80 x 128 bytes apart), 2 consumers taking
 * turns with overlap */
static const acase wga_mask80 = {
	"wga_mask80", "graph @g(%q: f16[1,2,160,128], %k: f16[1,2,160,128], %v: f16[1,2,160,128], %m: f16[160,160]) -> (f16[1,2,160,128]) {\n"
	"  %kt = transpose(%k) {perm = [0, 1, 3, 2]} : f16[1,2,128,160]\n"
	"  %s = matmul(%q, %kt) : f16[1,2,160,160]\n  %c = const 0.088388 : f16[]\n"
	"  %t = mul(%s, %c) : f16[1,2,160,160]\n  %a = add(%t, %m) : f16[1,2,160,160]\n"
	"  %p = softmax(%a) {axis = -1} : f16[1,2,160,160]\n"
	"  %o = matmul(%p, %v) : f16[1,2,160,128]\n  return %o\n}\n",
	"wga128x80s2po: q, k, v by TMA */", "wga128x80s2po", 2e-2, 4e-3, 168,
};

/* A bottom-right causal mask over a cache (48 queries past 64 cached
 * keys: off 64, an additive finfo.min through where), one consumer */
static const acase wga_cache = {
	"wga_cache", "graph @g(%q: f16[2,48,64], %k: f16[2,112,64], %v: f16[2,112,64]) -> (f16[2,48,64]) {\n"
	"  %kt = transpose(%k) {perm = [0, 2, 1]} : f16[2,64,112]\n"
	"  %s = matmul(%q, %kt) : f16[2,48,112]\n  %c = const 0.125 : f16[]\n"
	"  %t = mul(%s, %c) : f16[2,48,112]\n"
	"  %r = iota() {axis = 0, dtype = \"i64\", shape = [48, 112]} : i64[48,112]\n  %cc = iota() {axis = 1, dtype = \"i64\", shape = [48, 112]} : i64[48,112]\n  %o64 = const 64 : i64[]\n"
	"  %rr = add(%r, %o64) : i64[48,112]\n  %cut = gt(%cc, %rr) : i1[48,112]\n"
	"  %z = const 0.0 : f16[]\n  %fm = const -65504.0 : f16[]\n  %mk = where(%cut, %fm, %z) : f16[48,112]\n"
	"  %a = add(%t, %mk) : f16[2,48,112]\n  %p = softmax(%a) {axis = -1} : f16[2,48,112]\n"
	"  %o = matmul(%p, %v) : f16[2,48,64]\n  return %o\n}\n",
	"wga64x32s2o: q, k, v by TMA, causal, the scale in exp2 */", "wga64x32s2o", 2e-2, 4e-3, 240,
};

/* The default at head dim 128 without a mask: key tiles of 176 (the last
 * of the 192 keys cut), one consumer for this small grid, 2 stages */
static const acase wga_default128 = {
	"wga_default128", "graph @g(%q: f16[1,2,192,128], %k: f16[1,2,192,128], %v: f16[1,2,192,128]) -> (f16[1,2,192,128]) {\n"
	"  %kt = transpose(%k) {perm = [0, 1, 3, 2]} : f16[1,2,128,192]\n"
	"  %s = matmul(%q, %kt) : f16[1,2,192,192]\n  %c = const 0.088388 : f16[]\n"
	"  %t = mul(%s, %c) : f16[1,2,192,192]\n  %p = softmax(%t) {axis = -1} : f16[1,2,192,192]\n"
	"  %o = matmul(%p, %v) : f16[1,2,192,128]\n  return %o\n}\n",
	"wga64x176s2o: q, k, v by TMA, the scale in exp2 */", NULL, 2e-2, 4e-3, 240, 1,
};

/* Without a tile on a device with wgmma: the default rule's tile, one
 * consumer of 64 rows for a grid this small (8 blocks), overlap */
static const acase wga_default = {
	"wga_default", NULL, "wga64x128s3o: q, k, v by TMA, the scale in exp2 */", NULL, 2e-2, 4e-3, 240, 1,
};

/* Padding as Hugging Face models mask it: finfo(dtype).min added to the
 * scores of the keys from NKEEP on, and every key of the rows from NROW on
 * (a row masked whole: softmax averages v).  Whole key tiles (or a SIMT
 * warp's keys) are masked: their maximum times log2(e) overflowed to -inf
 * and -inf - -inf made NaN (found emulating BERT with padding). */
#define PAD_TEXT(DT, T, D, FMIN, NKEEP, NROW)                                                                         \
	"graph @g(%q: " DT "[2,2," T "," D "], %k: " DT "[2,2," T "," D "], %v: " DT "[2,2," T "," D "]) -> (" DT     \
	"[2,2," T "," D "]) {\n"                                                                                      \
	"  %kt = transpose(%k) {perm = [0, 1, 3, 2]} : " DT "[2,2," D "," T "]\n"                                     \
	"  %s = matmul(%q, %kt) : " DT "[2,2," T "," T "]\n  %c = const 0.125 : " DT "[]\n"                          \
	"  %t = mul(%s, %c) : " DT "[2,2," T "," T "]\n"                                                              \
	"  %r = iota() {axis = 0, dtype = \"i64\", shape = [" T ", " T "]} : i64[" T "," T "]\n"                     \
	"  %cc = iota() {axis = 1, dtype = \"i64\", shape = [" T ", " T "]} : i64[" T "," T "]\n"                    \
	"  %nk = const " NKEEP " : i64[]\n  %nr = const " NROW " : i64[]\n"                                          \
	"  %ck = ge(%cc, %nk) : i1[" T "," T "]\n  %cr = ge(%r, %nr) : i1[" T "," T "]\n"                            \
	"  %cut = or(%ck, %cr) : i1[" T "," T "]\n"                                                                 \
	"  %z = const 0.0 : " DT "[]\n  %fm = const " FMIN " : " DT "[]\n"                                           \
	"  %mk = where(%cut, %fm, %z) : " DT "[" T "," T "]\n  %a = add(%t, %mk) : " DT "[2,2," T "," T "]\n"         \
	"  %p = softmax(%a) {axis = -1} : " DT "[2,2," T "," T "]\n"                                                 \
	"  %o = matmul(%p, %v) : " DT "[2,2," T "," D "]\n  return %o\n}\n"

/* bf16 on the Hopper kernel's default tile: key tiles 64 to 127 masked
 * (bf16's rounding of p: a looser atol than f16's) */
static const acase wga_pad = {
	"wga_pad", PAD_TEXT("bf16", "128", "64", "-3.3895314e+38", "40", "100"), "by TMA", NULL, 2e-2, 8e-3, 240, 1,
};
/* the same on the mma.sync kernel */
static const acase fa_pad = {
	"fa_pad", PAD_TEXT("bf16", "128", "64", "-3.3895314e+38", "40", "100"), "fa128x64s2", "fa128x64s2", 2e-2, 8e-3,
	168,
};
/* f32 on the SIMT kernel: warp 3's keys (12-15, 28-31) all masked */
static const acase simt_pad = {
	"simt_pad", PAD_TEXT("f32", "40", "40", "-3.4028235e+38", "12", "30"), "simt: 4 warps a row", NULL, 1e-4, 1e-5,
	128,
};

/* bf16 decoding with the keys from 300 on masked by finfo.min: the key
 * slices of most blocks are masked whole, and the last block's combination
 * must weigh them zero */
static const acase decode_pad = {
	"decode_pad", "graph @g(%q: bf16[2,4,1,128], %k: bf16[2,4,1200,128], %v: bf16[2,4,1200,128]) -> (bf16[2,4,1,128]) {\n"
	"  %kt = transpose(%k) {perm = [0, 1, 3, 2]} : bf16[2,4,128,1200]\n"
	"  %s = matmul(%q, %kt) : bf16[2,4,1,1200]\n  %c = const 0.088388 : bf16[]\n"
	"  %t = mul(%s, %c) : bf16[2,4,1,1200]\n"
	"  %cc = iota() {axis = 1, dtype = \"i64\", shape = [1, 1200]} : i64[1,1200]\n  %nk = const 300 : i64[]\n"
	"  %cut = ge(%cc, %nk) : i1[1,1200]\n  %z = const 0.0 : bf16[]\n  %fm = const -3.3895314e+38 : bf16[]\n"
	"  %mk = where(%cut, %fm, %z) : bf16[1,1200]\n  %a = add(%t, %mk) : bf16[2,4,1,1200]\n"
	"  %p = softmax(%a) {axis = -1} : bf16[2,4,1,1200]\n"
	"  %o = matmul(%p, %v) : bf16[2,4,1,128]\n  return %o\n}\n",
	"slices of keys a row */", NULL, 2e-2, 8e-3, 96,
};

/* ---- the tests ------------------------------------------------------------------- */

static const acase *const all[] = {&plain, &causal, &gqa, &kcols, &regs, &decode, &f32c,
				   &wga_plain, &wga_causal, &wga_split, &wga_gqa, &wga_bool, &wga_mask80, &wga_cache,
				   &wga_default, &wga_default128, &wga_pad, &fa_pad, &simt_pad, &decode_pad};

static void test_ptxas(void **state)
{
	(void)state;
	kft_att_ptxas(all, sizeof all / sizeof all[0]);
}

/* Case a with a walking tile: its kernel walks (and has text `must`),
 * compiles for sm_90a without spills, and matches the interpreter
 * emulated with 3 blocks. */
static void walk_case(const acase *a, const char *must)
{
	kf_ctx *c = kf_ctx_new();
	kf_kernel k;
	kf_nid f;
	kf_module *m = emit_case(c, a, &k, &f);
	assert_true(k.walk);
	if (must && !strstr(k.src, must))
		fail_msg("%s: the kernel has no '%s':\n%s", a->name, must, k.src);
	if (kft_have_nvrtc()) {
		int regs = kft_ptxas_checked(&k, "sm_90a", a->maxreg);
		fprintf(stderr, "ptxas %s: %d registers, no spills\n", a->name, regs);
	}
	kf_kernel_free(&k);
	kf_module_free(m);
	kf_ctx_free(c);
	setenv("KFE_WALK_GRID", "3", 1);
	emu_case(a);
	unsetenv("KFE_WALK_GRID");
}

/* "w": the blocks walk the tiles, emulated with 3 blocks for 4 tiles, so
 * that one block takes two (q's buffer handed back, the stages' phases and
 * ping-pong's turns going on across tiles): plain with ping-pong and
 * overlap, causal (tiles of different lengths), and one consumer without
 * overlap; each compiled for sm_90a without spills. */
static void test_emu_wga_walk(void **state)
{
	(void)state;
	acase w[3] = {wga_plain, wga_causal, wga_plain};
	w[0].name = "wga_walk", w[0].tile = "wga128x64s2pow";
	w[0].want = "wga128x64s2pow: q, k, v by TMA, the scale in exp2 */";
	w[1].name = "wga_walk_causal", w[1].tile = "wga128x64s3pow";
	w[1].want = "wga128x64s3pow: q, k, v by TMA, causal, the scale in exp2 */";
	w[2].name = "wga_walk_plain", w[2].tile = "wga64x64s2w", w[2].maxreg = 240;
	w[2].want = "wga64x64s2w: q, k, v by TMA, the scale in exp2 */";
	for (int i = 0; i < 3; i++)
		walk_case(&w[i], NULL);
}

/* Masks read from memory load a tile ahead into registers (slots,
 * KF_KERNEL_scoreld) on walked blocks, where a block's next tile starts
 * over: a padding mask [B, 1, 1, Tk] (the same for both rows of a thread,
 * keys cut at 80), a [Tq, Tk] mask (rows cut at 160), a boolean one on 3
 * consumers, and both kinds at once (a slot of each). */
static const acase wga_two_masks = {
	"wga_two_masks", "graph @g(%q: f16[2,2,96,64], %k: f16[2,2,96,64], %v: f16[2,2,96,64], %pm: f16[2,1,1,96], %am: f16[96,96]) -> (f16[2,2,96,64]) {\n"
	"  %kt = transpose(%k) {perm = [0, 1, 3, 2]} : f16[2,2,64,96]\n"
	"  %s = matmul(%q, %kt) : f16[2,2,96,96]\n  %c = const 0.125 : f16[]\n"
	"  %t = mul(%s, %c) : f16[2,2,96,96]\n  %a = add(%t, %pm) : f16[2,2,96,96]\n"
	"  %b = add(%a, %am) : f16[2,2,96,96]\n  %p = softmax(%b) {axis = -1} : f16[2,2,96,96]\n"
	"  %o = matmul(%p, %v) : f16[2,2,96,64]\n  return %o\n}\n",
	"wga128x32s2pow: q, k, v by TMA */", "wga128x32s2pow", 2e-2, 4e-3, 168,
};

static void test_emu_wga_slots(void **state)
{
	(void)state;
	acase w[4] = {wga_gqa, wga_mask80, wga_bool, wga_two_masks};
	w[0].name = "wga_slots_pad", w[0].tile = "wga64x32s2ow", w[0].want = "wga64x32s2ow: q, k, v by TMA */";
	w[1].name = "wga_slots_mask80", w[1].tile = "wga128x80s2pow", w[1].want = "wga128x80s2pow: q, k, v by TMA */";
	w[2].name = "wga_slots_bool", w[2].tile = "wga192x32s3pow", w[2].want = "wga192x32s3pow: q, k, v by TMA */";
	for (int i = 0; i < 4; i++) /* the slots loaded ahead */
		walk_case(&w[i], "_scoreld(");
}

static void test_emu_plain(void **s) { (void)s; emu_case(&plain); }
static void test_emu_causal(void **s) { (void)s; emu_case(&causal); }
static void test_emu_gqa(void **s) { (void)s; emu_case(&gqa); }
static void test_emu_kcols(void **s) { (void)s; emu_case(&kcols); }
static void test_emu_registers(void **s) { (void)s; emu_case(&regs); }
static void test_emu_decode(void **s) { (void)s; emu_case(&decode); }
static void test_emu_f32(void **s) { (void)s; emu_case(&f32c); }
static void test_emu_wga_plain(void **s) { (void)s; emu_case(&wga_plain); }
static void test_emu_wga_causal(void **s) { (void)s; emu_case(&wga_causal); }
static void test_emu_wga_split(void **s) { (void)s; emu_case(&wga_split); }
static void test_emu_wga_gqa(void **s) { (void)s; emu_case(&wga_gqa); }
static void test_emu_wga_bool(void **s) { (void)s; emu_case(&wga_bool); }
static void test_emu_wga_mask80(void **s) { (void)s; emu_case(&wga_mask80); }
static void test_emu_wga_cache(void **s) { (void)s; emu_case(&wga_cache); }
static void test_emu_wga_default(void **s) { (void)s; emu_case(&wga_default); }
static void test_emu_wga_default128(void **s) { (void)s; emu_case(&wga_default128); }
static void test_emu_wga_pad(void **s) { (void)s; emu_case(&wga_pad); }
static void test_emu_fa_pad(void **s) { (void)s; emu_case(&fa_pad); }
static void test_emu_simt_pad(void **s) { (void)s; emu_case(&simt_pad); }
static void test_emu_decode_pad(void **s) { (void)s; emu_case(&decode_pad); }

/* The kernel and tile a fusion gets without a tile: on a device with
 * wgmma the Hopper kernel where q, k and v fit its tensor maps (the rule:
 * 2 consumers, ping-pong and overlap for a grid of a wave or more, BN 176
 * at head dim 128 without a mask, stages as fit), else the mma.sync one;
 * the mma.sync one on a device without wgmma or not known to have it. */
static void test_default_tile(void **state)
{
	(void)state;
	static const struct {
		int64_t B, H, T, D;
		bool causal;
		int wgmma;
		const char *want;
	} cases[] = {
		{4, 16, 8192, 128, false, 1, "wga128x176s2po"},  {2, 32, 8192, 64, true, 1, "wga128x128s3po"},
		{8, 16, 2048, 128, true, 1, "wga128x128s3po"},   {1, 2, 1024, 64, false, 1, "wga64x128s3o"},
		{8, 32, 2048, 64, true, 1, "wga128x128s3pow"},   {128, 16, 128, 128, true, 1, "wga128x128s2pow"}, /* 2 stages: the output staged */
		{8, 16, 2048, 128, false, 1, "wga128x176s2pow"},
		{4, 16, 8192, 128, false, 0, "fa128x64s2"},     {4, 16, 8192, 128, false, -1, "fa128x64s2"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char text[2048], sh[64];
		long long B = cases[i].B, H = cases[i].H, T = cases[i].T, D = cases[i].D;
		snprintf(sh, sizeof sh, "%lld,%lld,%lld", B, H, T);
		int n = snprintf(text, sizeof text,
				 "graph @g(%%q: f16[%s,%lld], %%k: f16[%s,%lld], %%v: f16[%s,%lld]) -> (f16[%s,%lld]) {\n"
				 "  %%kt = transpose(%%k) {perm = [0, 1, 3, 2]} : f16[%lld,%lld,%lld,%lld]\n"
				 "  %%s = matmul(%%q, %%kt) : f16[%s,%lld]\n  %%c = const 0.125 : f16[]\n"
				 "  %%t = mul(%%s, %%c) : f16[%s,%lld]\n",
				 sh, D, sh, D, sh, D, sh, D, B, H, D, T, sh, T, sh, T);
		if (cases[i].causal)
			n += snprintf(text + n, sizeof text - (size_t)n,
				      "  %%r = iota() {axis = 0, shape = [%lld, %lld]} : i64[%lld,%lld]\n"
				      "  %%cc = iota() {axis = 1, shape = [%lld, %lld]} : i64[%lld,%lld]\n"
				      "  %%keep = le(%%cc, %%r) : i1[%lld,%lld]\n  %%ninf = const -inf : f16[]\n"
				      "  %%m = where(%%keep, %%t, %%ninf) : f16[%s,%lld]\n",
				      T, T, T, T, T, T, T, T, T, T, sh, T);
		snprintf(text + n, sizeof text - (size_t)n,
			 "  %%p = softmax(%%%s) {axis = -1} : f16[%s,%lld]\n  %%o = matmul(%%p, %%v) : f16[%s,%lld]\n"
			 "  return %%o\n}\n",
			 cases[i].causal ? "m" : "t", sh, T, sh, D);
		acase a = {cases[i].want, text, cases[i].want, NULL, 0, 0, 0, cases[i].wgmma};
		kf_ctx *c = kf_ctx_new();
		kf_kernel k;
		kf_nid f;
		kf_module *m = emit_case(c, &a, &k, &f);
		kf_kernel_free(&k);
		kf_module_free(m);
		kf_ctx_free(c);
	}
	/* k stored transposed (keys contiguous) fits no tensor map: mma.sync */
	acase a = kcols;
	a.tile = NULL;
	a.want = "fa64x64s2: q cp.async, k cp.async, keys as columns";
	a.wgmma = 1;
	kf_ctx *c = kf_ctx_new();
	kf_kernel k;
	kf_nid f;
	kf_module *m = emit_case(c, &a, &k, &f);
	kf_kernel_free(&k);
	kf_module_free(m);
	kf_ctx_free(c);
}

/* The comparison can fail: a kernel that forgets to rescale its output
 * when a row's maximum grows, whose split-K combination drops a slice, or
 * that reads the scores before the tensor cores wrote them, is caught. */
static void test_emu_catches(void **s)
{
	(void)s;
	int64_t bad = emulate(&plain, "oacc[i] *= a0;", "oacc[i] *= 1.0f;");
	if (bad < 0) {
		skip();
		return;
	}
	assert_true(bad > 0);
	assert_true(emulate(&decode, "s++) O += __ldcg", "s += 2) O += __ldcg") > 0);
	/* the Hopper kernel's softmax reading S before its wgmma is done */
	assert_true(emulate(&wga_causal, "kf_wg_wait<1>();", "kf_wg_wait<2>();") > 0);
}

/* A dense f32[32,16] constant's text (more than a kernel embeds). */
#define W16 "[-3.0,-2.0,-1.0,0.0,1.0,2.0,3.0,-3.0,-2.0,-1.0,0.0,1.0,2.0,3.0,-3.0,-2.0],[-1.0,0.0,1.0,2.0,3.0,-3.0,-2.0,-1.0,0.0,1.0,2.0,3.0,-3.0,-2.0,-1.0,0.0],[1.0,2.0,3.0,-3.0,-2.0,-1.0,0.0,1.0,2.0,3.0,-3.0,-2.0,-1.0,0.0,1.0,2.0],[3.0,-3.0,-2.0,-1.0,0.0,1.0,2.0,3.0,-3.0,-2.0,-1.0,0.0,1.0,2.0,3.0,-3.0],[-2.0,-1.0,0.0,1.0,2.0,3.0,-3.0,-2.0,-1.0,0.0,1.0,2.0,3.0,-3.0,-2.0,-1.0],[0.0,1.0,2.0,3.0,-3.0,-2.0,-1.0,0.0,1.0,2.0,3.0,-3.0,-2.0,-1.0,0.0,1.0],[2.0,3.0,-3.0,-2.0,-1.0,0.0,1.0,2.0,3.0,-3.0,-2.0,-1.0,0.0,1.0,2.0,3.0],[-3.0,-2.0,-1.0,0.0,1.0,2.0,3.0,-3.0,-2.0,-1.0,0.0,1.0,2.0,3.0,-3.0,-2.0],[-1.0,0.0,1.0,2.0,3.0,-3.0,-2.0,-1.0,0.0,1.0,2.0,3.0,-3.0,-2.0,-1.0,0.0],[1.0,2.0,3.0,-3.0,-2.0,-1.0,0.0,1.0,2.0,3.0,-3.0,-2.0,-1.0,0.0,1.0,2.0],[3.0,-3.0,-2.0,-1.0,0.0,1.0,2.0,3.0,-3.0,-2.0,-1.0,0.0,1.0,2.0,3.0,-3.0],[-2.0,-1.0,0.0,1.0,2.0,3.0,-3.0,-2.0,-1.0,0.0,1.0,2.0,3.0,-3.0,-2.0,-1.0],[0.0,1.0,2.0,3.0,-3.0,-2.0,-1.0,0.0,1.0,2.0,3.0,-3.0,-2.0,-1.0,0.0,1.0],[2.0,3.0,-3.0,-2.0,-1.0,0.0,1.0,2.0,3.0,-3.0,-2.0,-1.0,0.0,1.0,2.0,3.0],[-3.0,-2.0,-1.0,0.0,1.0,2.0,3.0,-3.0,-2.0,-1.0,0.0,1.0,2.0,3.0,-3.0,-2.0],[-1.0,0.0,1.0,2.0,3.0,-3.0,-2.0,-1.0,0.0,1.0,2.0,3.0,-3.0,-2.0,-1.0,0.0],[1.0,2.0,3.0,-3.0,-2.0,-1.0,0.0,1.0,2.0,3.0,-3.0,-2.0,-1.0,0.0,1.0,2.0],[3.0,-3.0,-2.0,-1.0,0.0,1.0,2.0,3.0,-3.0,-2.0,-1.0,0.0,1.0,2.0,3.0,-3.0],[-2.0,-1.0,0.0,1.0,2.0,3.0,-3.0,-2.0,-1.0,0.0,1.0,2.0,3.0,-3.0,-2.0,-1.0],[0.0,1.0,2.0,3.0,-3.0,-2.0,-1.0,0.0,1.0,2.0,3.0,-3.0,-2.0,-1.0,0.0,1.0],[2.0,3.0,-3.0,-2.0,-1.0,0.0,1.0,2.0,3.0,-3.0,-2.0,-1.0,0.0,1.0,2.0,3.0],[-3.0,-2.0,-1.0,0.0,1.0,2.0,3.0,-3.0,-2.0,-1.0,0.0,1.0,2.0,3.0,-3.0,-2.0],[-1.0,0.0,1.0,2.0,3.0,-3.0,-2.0,-1.0,0.0,1.0,2.0,3.0,-3.0,-2.0,-1.0,0.0],[1.0,2.0,3.0,-3.0,-2.0,-1.0,0.0,1.0,2.0,3.0,-3.0,-2.0,-1.0,0.0,1.0,2.0],[3.0,-3.0,-2.0,-1.0,0.0,1.0,2.0,3.0,-3.0,-2.0,-1.0,0.0,1.0,2.0,3.0,-3.0],[-2.0,-1.0,0.0,1.0,2.0,3.0,-3.0,-2.0,-1.0,0.0,1.0,2.0,3.0,-3.0,-2.0,-1.0],[0.0,1.0,2.0,3.0,-3.0,-2.0,-1.0,0.0,1.0,2.0,3.0,-3.0,-2.0,-1.0,0.0,1.0],[2.0,3.0,-3.0,-2.0,-1.0,0.0,1.0,2.0,3.0,-3.0,-2.0,-1.0,0.0,1.0,2.0,3.0],[-3.0,-2.0,-1.0,0.0,1.0,2.0,3.0,-3.0,-2.0,-1.0,0.0,1.0,2.0,3.0,-3.0,-2.0],[-1.0,0.0,1.0,2.0,3.0,-3.0,-2.0,-1.0,0.0,1.0,2.0,3.0,-3.0,-2.0,-1.0,0.0],[1.0,2.0,3.0,-3.0,-2.0,-1.0,0.0,1.0,2.0,3.0,-3.0,-2.0,-1.0,0.0,1.0,2.0],[3.0,-3.0,-2.0,-1.0,0.0,1.0,2.0,3.0,-3.0,-2.0,-1.0,0.0,1.0,2.0,3.0,-3.0]"

/* Plans g (dry run: NVRTC, no GPU) and returns its kernels. */
static int plan_kernels(kf_ctx *c, kf_graph *g, kf_buf *report)
{
	char dir[] = "/tmp/kf-attn-planXXXXXX";
	assert_non_null(mkdtemp(dir));
	kf_cuda_opts co = {.dry_run = true, .cache_dir = dir, .report = report};
	kf_cuda_stats st;
	kf_cuda_session *s = kf_cuda_session_new(c, &co);
	assert_non_null(s);
	if (kf_cuda_session_plan(s, g) != 0)
		kft_fail_diags(c, "plan");
	kf_cuda_session_stats(s, &st);
	kf_cuda_session_free(s);
	kft_rmdir(dir);
	return (int)st.kernels;
}

/* The backend plans an attention fusion as one kernel; a fusion of kind
 * attention whose body the kernels do not take (a softmax written as
 * primitive ops) runs op by op, and the plan says why. */
static void test_plan(void **state)
{
	(void)state;
	if (!kft_have_nvrtc()) {
		skip();
		return;
	}
	kf_ctx *c = kf_ctx_new();
	kf_rt_register(c);
	kf_module *m = kft_parse(c, plain.text);
	kft_run_pipe(c, m, "fuse-attention,fuse-matmul,fuse");
	kf_buf r = {0};
	assert_int_equal(plan_kernels(c, m->graph[0], &r), 1);
	kf_module_free(m);
	m = kft_parse(c, "graph @w(%q: f32[2,16,8], %kt: f32[2,8,16], %v: f32[2,16,8]) -> (f32[2,16,8]) {\n"
			 "  %o = fusion @a0(%q, %kt, %v) {kind = \"attention\"} : f32[2,16,8] {\n"
			 "  ^(%0: f32[2,16,8], %1: f32[2,8,16], %2: f32[2,16,8]):\n"
			 "    %s = matmul(%0, %1) : f32[2,16,16]\n    %e = exp(%s) : f32[2,16,16]\n"
			 "    %z = reduce_sum(%e) {axes = [-1]} : f32[2,16,1]\n    %p = div(%e, %z) : f32[2,16,16]\n"
			 "    %o = matmul(%p, %2) : f32[2,16,8]\n    yield %o\n  }\n  return %o\n}\n");
	assert_int_equal(plan_kernels(c, m->graph[0], &r), 5);
	kf_buf_putc(&r, 0);
	assert_non_null(strstr(r.p, "fusion @a0 runs op by op: attention kernel: the body holds no softmax"));
	kf_module_free(m);
	/* merge-matmul's concatenation of constant weights is computed once at
	 * plan time (no kernel): the projection and the attention, 2 kernels */
	m = kft_parse(c, "graph @qkv(%x: f32[16,32]) -> (f32[2,16,16]) {\n"
			 "  %wq = const 0.01 : f32[32,32]\n  %wk = const dense<[" W16 "]> : f32[32,16]\n"
			 "  %wv = const dense<[" W16 "]> : f32[32,16]\n"
			 "  %q = matmul(%x, %wq) : f32[16,32]\n  %k = matmul(%x, %wk) : f32[16,16]\n  %v = matmul(%x, %wv) : f32[16,16]\n"
			 "  %q3 = reshape(%q) {shape = [16, 2, 16]} : f32[16,2,16]\n  %qh = transpose(%q3) {perm = [1, 0, 2]} : f32[2,16,16]\n"
			 "  %k3 = reshape(%k) {shape = [16, 1, 16]} : f32[16,1,16]\n  %kh = transpose(%k3) {perm = [1, 2, 0]} : f32[1,16,16]\n"
			 "  %v3 = reshape(%v) {shape = [16, 1, 16]} : f32[16,1,16]\n  %vh = transpose(%v3) {perm = [1, 0, 2]} : f32[1,16,16]\n"
			 "  %s = matmul(%qh, %kh) : f32[2,16,16]\n  %p = softmax(%s) {axis = -1} : f32[2,16,16]\n"
			 "  %o = matmul(%p, %vh) : f32[2,16,16]\n  return %o\n}\n");
	kft_run_pipe(c, m, "merge-matmul,fuse-attention,fuse-matmul,fuse,dce");
	r.n = 0;
	assert_int_equal(plan_kernels(c, m->graph[0], &r), 2);
	kf_buf_free(&r);
	kf_module_free(m);
	kf_ctx_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ptxas),
		cmocka_unit_test(test_plan),
		cmocka_unit_test(test_emu_plain),
		cmocka_unit_test(test_emu_causal),
		cmocka_unit_test(test_emu_gqa),
		cmocka_unit_test(test_emu_kcols),
		cmocka_unit_test(test_emu_registers),
		cmocka_unit_test(test_emu_decode),
		cmocka_unit_test(test_emu_f32),
		cmocka_unit_test(test_emu_wga_plain),
		cmocka_unit_test(test_emu_wga_causal),
		cmocka_unit_test(test_emu_wga_split),
		cmocka_unit_test(test_emu_wga_gqa),
		cmocka_unit_test(test_emu_wga_bool),
		cmocka_unit_test(test_emu_wga_mask80),
		cmocka_unit_test(test_emu_wga_cache),
		cmocka_unit_test(test_emu_wga_default),
		cmocka_unit_test(test_emu_wga_default128),
		cmocka_unit_test(test_emu_wga_pad),
		cmocka_unit_test(test_emu_wga_walk),
		cmocka_unit_test(test_emu_wga_slots),
		cmocka_unit_test(test_emu_fa_pad),
		cmocka_unit_test(test_emu_simt_pad),
		cmocka_unit_test(test_emu_decode_pad),
		cmocka_unit_test(test_default_tile),
		cmocka_unit_test(test_emu_catches),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
