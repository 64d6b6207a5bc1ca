/* npy.h: numpy .npy files <-> kf_tensor.
 *
 * Reads format versions 1.0, 2.0 and 3.0 of little-endian C-order arrays
 * of <f2 <f4 <f8 |b1 |i1 <i4 <i8, and bf16 as 2-byte voids '|V2' (what
 * np.save writes for an ml_dtypes.bfloat16 array; '<V2' and 'bfloat16' are
 * read too).  Writes version 1.0 (2.0 when the header would not fit), bf16
 * as '|V2'.  See docs/runtime.md.
 * Every failure is an error in the context naming the file, and -1. */
#ifndef KF_NPY_H
#define KF_NPY_H

#include "kf.h"

/* Reads path into out (overwritten).  0, or -1 with an error naming the file. */
int kf_npy_read(kf_ctx *c, const char *path, kf_tensor *out);
/* The same for a path an input file names: a regular file only, never
 * blocking on a FIFO or a device. */
int kf_npy_read_regular(kf_ctx *c, const char *path, kf_tensor *out);
/* An input for a parameter of dtype want: numpy has no bfloat16, so for a
 * bf16 want a file of f32 or f64 (PyTorch's x.float().numpy()) is rounded
 * to bf16 (nearest even; *rounded set); any other file is as read. */
int kf_npy_read_input(kf_ctx *c, const char *path, kf_dtype want, kf_tensor *out, bool *rounded);
/* Parses a whole .npy image already in memory; name is used in errors. */
int kf_npy_parse(kf_ctx *c, const char *name, const void *buf, size_t len, kf_tensor *out);
/* Writes t to path atomically (a temporary file, then rename). */
int kf_npy_write(kf_ctx *c, const char *path, const kf_tensor *t);
/* Appends the .npy image of t to out (for tests and in-memory use). */
void kf_npy_serialize(const kf_tensor *t, kf_buf *out);

#endif
