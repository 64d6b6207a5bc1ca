/* fuzz_npy: the .npy reader on arbitrary bytes.
 *
 * kf_npy_parse either fills a tensor whose byte count matches its dtype and
 * shape, or returns -1 with an error naming the file.  The tensor it gives
 * must serialize and parse back to the same bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "kf.h"
#include "npy.h"
#include "tensor.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	kf_ctx *c = kf_ctx_new();
	kf_tensor t;
	memset(&t, 0, sizeof t);
	int rc = kf_npy_parse(c, "fuzz.npy", data, size, &t);
	if (rc < 0 && kf_nerrors(c) == 0)
		abort(); /* a failure always says why */
	if (rc == 0) {
		int64_t n = kf_tensor_numel(&t);
		if (n < 0 || (uint64_t)n * kf_dtype_size(t.dtype) != t.nbytes)
			abort();
		kf_buf img = {0};
		kf_npy_serialize(&t, &img);
		kf_tensor u;
		memset(&u, 0, sizeof u);
		if (kf_npy_parse(c, "reserialized.npy", img.p, img.n, &u) != 0 ||
		    !kf_tensor_same_shape(&t, &u) || u.nbytes != t.nbytes ||
		    (t.nbytes && memcmp(t.data, u.data, t.nbytes) != 0))
			abort(); /* what we write we must read back unchanged */
		kf_tensor_free(&u);
		kf_buf_free(&img);
	}
	kf_tensor_free(&t);
	kf_buf diag = {0};
	kf_diag_render(c, &diag);
	kf_buf_free(&diag);
	kf_ctx_free(c);
	return 0;
}
