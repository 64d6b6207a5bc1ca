// launch.h: the host emulation's launcher (tests/unit/kf_emu.h), after the
// kernel: the grid one block at a time, a block's threads as fibers.
static void (*kf_entry)(void);
static void kf_trampoline(void) { kf_entry(); }

// Runs the grid gx x gy x gz of nt-thread blocks, one block after the
// other (x fastest); 0, or 3 on a deadlock.
static int kf_run(unsigned gx, unsigned gy, unsigned gz, unsigned nt, void (*body)(void))
{
	enum { STK = 1 << 17 };
	std::vector<kf_fib> f(nt);
	std::vector<char> stk((size_t)nt * STK);
	gridDim = {gx, gy, gz};
	blockDim = {nt, 1, 1};
	kf_entry = body;
	for (unsigned bz = 0; bz < gz; bz++)
	for (unsigned by = 0; by < gy; by++)
		for (unsigned bx = 0; bx < gx; bx++) {
			blockIdx = {bx, by, bz};
			// shared memory starts as NaN bytes; barriers are not set up
			memset(kf_smem, 0xff, sizeof kf_smem);
			memset(kf_mb, 0, sizeof kf_mb);
			kf_bn = kf_bgen = 0;
			memset(kf_cn, 0, sizeof kf_cn);
			memset(kf_cgen, 0, sizeof kf_cgen);
			for (unsigned i = 0; i < nt; i++) {
				f[i].cur.clear();
				f[i].groups.clear();
				f[i].st = KF_RUN;
				f[i].tid = {i, 0, 0};
				getcontext(&f[i].uc);
				f[i].uc.uc_stack.ss_sp = &stk[(size_t)i * STK];
				f[i].uc.uc_stack.ss_size = STK;
				f[i].uc.uc_link = &kf_sched;
				makecontext(&f[i].uc, kf_trampoline, 0);
			}
			unsigned live = nt;
			while (live) {
				// a round where every thread only spun or waited changes
				// nothing: a deadlock
				bool moved = false;
				for (unsigned i = 0; i < nt; i++) {
					kf_fib *x = &f[i];
					if (x->st == KF_DONE || (x->st == KF_WAIT && *x->wgen == x->wait))
						continue;
					int was = x->st;
					x->st = KF_RUN;
					kf_me = x;
					swapcontext(&kf_sched, &x->uc);
					if (x->st == KF_RUN) {
						x->st = KF_DONE;
						live--;
					}
					if (!(was == KF_SPIN && x->st == KF_SPIN))
						moved = true;
				}
				if (!moved) {
					fprintf(stderr, "emu: block (%u, %u): deadlock (%u threads wait)\n", bx, by, live);
					return 3;
				}
			}
			kf_wg_reset();
			kf_nb_reset();
		}
	kf_me = nullptr;
	return 0;
}

// Reads n bytes of dir/name into a new buffer (NaN bytes past them: as
// many as a kernel may read past a buffer, emit_cuda.h's
// KF_EMIT_READ_PAST), or a NaN-filled one when !in.
static unsigned char *kf_load(const char *dir, const char *name, size_t bytes, bool in)
{
	const size_t past = 1024;
	unsigned char *p = (unsigned char *)malloc(bytes + past);
	char path[4200];
	memset(p, 0xff, bytes + past);
	if (!in)
		return p;
	snprintf(path, sizeof path, "%s/%s", dir, name);
	FILE *f = fopen(path, "rb");
	if (!f || fread(p, 1, bytes, f) != bytes) {
		fprintf(stderr, "emu: cannot read %s\n", path);
		exit(2);
	}
	fclose(f);
	return p;
}

static int kf_save(const char *dir, const char *name, const unsigned char *p, size_t bytes)
{
	char path[4200];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(p, 1, bytes, f) != bytes)
		return 2;
	fclose(f);
	return 0;
}
