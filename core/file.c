/* file.c: reading input files that an untrusted file names, and writing
 * outputs atomically (STYLE 14).
 *
 * Reading: a path named inside a .kf, a rule directory or a module is
 * opened without blocking (O_NONBLOCK: a FIFO would otherwise wait forever
 * for a writer) and accepted only when it is a regular file; kf_path_within
 * confines a path to a directory after resolving symbolic links.
 *
 * Writing: kf_ofile writes to a temporary file beside the target (the same
 * directory, so that rename is atomic and never crosses file systems),
 * checks every write, and renames it over the target on commit; a failed
 * or abandoned write removes the temporary and leaves the target as it
 * was, so a full disk or a killed run never truncates an output or
 * destroys an input given as the output.  Every byte goes through
 * kf_write_all, the one place where fault injection makes a write fail.
 *
 * Open temporaries are listed in a small process-wide table so that the
 * fatal out-of-memory exit (kf_oom) can remove them: the one mutable global
 * of this file, as a process's temporary files are a process-wide fact.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kf_int.h"

const char *kf_file_strerror(int err)
{
	switch (err) {
	case KF_ENOTREG: return "not a regular file";
	case KF_EOUTSIDE: return "outside the directory it is confined to";
	case KF_ETOOBIG: return "file too large";
	default: return strerror(err);
	}
}

int kf_open_regular(const char *path, int *err)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		*err = errno;
		return -1;
	}
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		*err = S_ISDIR(st.st_mode) ? EISDIR : KF_ENOTREG;
		close(fd);
		return -1;
	}
	/* blocking again: reads of a regular file never wait anyway */
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	return fd;
}

int kf_read_regular(const char *path, size_t max, char **out, size_t *len)
{
	int err = 0;
	*out = NULL;
	*len = 0;
	int fd = kf_open_regular(path, &err);
	if (fd < 0)
		return err;
	struct stat st;
	if (fstat(fd, &st) != 0 || (uint64_t)st.st_size > max) {
		err = (uint64_t)st.st_size > max ? KF_ETOOBIG : errno;
		close(fd);
		return err;
	}
	size_t cap = (size_t)st.st_size + 1, n = 0;
	char *p = kf_try_malloc(cap); /* the file decides the size: may fail */
	if (!p) {
		close(fd);
		return ENOMEM;
	}
	for (;;) {
		if (n + 1 >= cap) { /* the file grew while read: follow it, up to max */
			if (cap > max) {
				err = KF_ETOOBIG;
				break;
			}
			char *q = kf_try_realloc(p, cap * 2);
			if (!q) {
				err = ENOMEM;
				break;
			}
			p = q;
			cap *= 2;
		}
		ssize_t k = read(fd, p + n, cap - 1 - n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			err = errno;
		if (k <= 0)
			break;
		n += (size_t)k;
	}
	close(fd);
	if (err || n > max) {
		free(p);
		return err ? err : KF_ETOOBIG;
	}
	p[n] = 0;
	*out = p;
	*len = n;
	return 0;
}

int kf_path_within(const char *path, const char *root, char **resolved)
{
	*resolved = NULL;
	char *rp = realpath(path, NULL);
	if (!rp)
		return errno;
	char *rr = realpath(root, NULL);
	if (!rr) {
		int e = errno;
		free(rp);
		return e;
	}
	size_t n = strlen(rr);
	/* "/" contains everything; else the root itself or below "root/" */
	bool in = !strcmp(rr, "/") || (!strncmp(rp, rr, n) && (rp[n] == 0 || rp[n] == '/'));
	free(rr);
	if (!in) {
		free(rp);
		return KF_EOUTSIDE;
	}
	*resolved = rp;
	return 0;
}

/* ---- atomic output ----------------------------------------------------------------- */

#define MAX_LIVE 16
static char *live_tmp[MAX_LIVE]; /* temporaries not yet renamed or removed */

static void live_add(char *tmp)
{
	for (int i = 0; i < MAX_LIVE; i++)
		if (!live_tmp[i]) {
			live_tmp[i] = tmp;
			return;
		}
}

static void live_drop(const char *tmp)
{
	for (int i = 0; i < MAX_LIVE; i++)
		if (live_tmp[i] == tmp)
			live_tmp[i] = NULL;
}

void kf_ofile_cleanup(void)
{
	for (int i = 0; i < MAX_LIVE; i++)
		if (live_tmp[i]) {
			unlink(live_tmp[i]); /* async-signal-safe: no free here */
			live_tmp[i] = NULL;
		}
}

/* The stdio stream's writes: every byte through kf_write_all; the first
 * error sticks and is what commit reports. */
static ssize_t cookie_write(void *cookie, const char *p, size_t n)
{
	kf_ofile *o = cookie;
	if (o->err)
		return -1;
	int e = kf_write_all(o->fd, p, n);
	if (e) {
		o->err = e;
		errno = e;
		return -1;
	}
	return (ssize_t)n;
}

/* "dir/.name.tmp.PID.N", created exclusively with the target's mode (or
 * 0666 under the umask for a new file, as a plain fopen's would be). */
static int open_temp(kf_ofile *o, const char *target, mode_t mode)
{
	const char *slash = strrchr(target, '/');
	size_t dn = slash ? (size_t)(slash - target + 1) : 0;
	size_t cap = strlen(target) + 64;
	o->tmp = malloc(cap);
	if (!o->tmp)
		return ENOMEM;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	for (unsigned k = 0; k < 100; k++) {
		snprintf(o->tmp, cap, "%.*s.%s.tmp.%ld.%lx", (int)dn, target, target + dn, (long)getpid(),
			 (unsigned long)ts.tv_nsec + k);
		o->fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
		if (o->fd >= 0) {
			live_add(o->tmp);
			return 0;
		}
		if (errno != EEXIST)
			break;
	}
	int e = errno;
	free(o->tmp);
	o->tmp = NULL;
	return e;
}

int kf_ofile_open(kf_ofile *o, const char *path)
{
	memset(o, 0, sizeof *o);
	o->fd = -1;
	if (!path || !strcmp(path, "-")) {
		o->f = stdout; /* checked at commit with fflush and ferror */
		return 0;
	}
	o->path = strdup(path);
	if (!o->path)
		return ENOMEM;
	struct stat st;
	int e = 0;
	mode_t mode = 0666;
	char *target = NULL;
	if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) {
		/* write through a link to where it points, keeping the link */
		target = realpath(path, NULL);
	}
	const char *t = target ? target : path;
	if (stat(t, &st) == 0 && !S_ISREG(st.st_mode)) {
		/* a device or a FIFO (/dev/null, /dev/stdout): written directly;
		 * renaming over it would replace it */
		o->fd = open(t, O_WRONLY | O_CLOEXEC | O_NOCTTY);
		if (o->fd < 0)
			e = errno;
	} else {
		if (stat(t, &st) == 0)
			mode = st.st_mode & 07777;
		e = open_temp(o, t, mode);
		if (!e && mode != 0666)
			fchmod(o->fd, mode); /* the umask may have narrowed it */
		if (!e) {
			free(o->path);
			o->path = strdup(t); /* where the rename goes */
			if (!o->path)
				e = ENOMEM;
		}
	}
	free(target);
	if (!e) {
		cookie_io_functions_t io = {.write = cookie_write};
		o->f = fopencookie(o, "w", io);
		if (!o->f)
			e = errno ? errno : ENOMEM;
	}
	if (e) {
		kf_ofile_abort(o);
		return e;
	}
	return 0;
}

int kf_ofile_write(kf_ofile *o, const void *p, size_t n)
{
	if (n && fwrite(p, 1, n, o->f) != n && !o->err)
		o->err = errno ? errno : EIO;
	return o->err;
}

int kf_stdout_flush(void)
{
	errno = 0;
	if (fflush(stdout) != 0 || ferror(stdout))
		return errno ? errno : EIO;
	return 0;
}

int kf_ofile_commit(kf_ofile *o)
{
	if (o->f == stdout) {
		int e = kf_stdout_flush();
		memset(o, 0, sizeof *o);
		o->fd = -1;
		return e;
	}
	int e = 0;
	if (o->f && fflush(o->f) != 0 && !o->err)
		o->err = errno ? errno : EIO;
	if (o->f && ferror(o->f) && !o->err)
		o->err = EIO;
	e = o->err;
	/* fsync: a network or delayed-allocation file system may report a
	 * full disk only here */
	if (!e && o->tmp && !o->no_sync && fsync(o->fd) != 0)
		e = errno;
	if (o->f)
		fclose(o->f); /* closes nothing of ours: the cookie has no close */
	o->f = NULL;
	if (o->fd >= 0 && close(o->fd) != 0 && !e)
		e = errno;
	o->fd = -1;
	if (!e && o->tmp && rename(o->tmp, o->path) != 0)
		e = errno;
	if (e) {
		o->err = e;
		kf_ofile_abort(o);
		return e;
	}
	if (o->tmp)
		live_drop(o->tmp);
	free(o->tmp);
	free(o->path);
	memset(o, 0, sizeof *o);
	o->fd = -1;
	return 0;
}

void kf_ofile_abort(kf_ofile *o)
{
	if (o->f && o->f != stdout)
		fclose(o->f);
	if (o->fd >= 0)
		close(o->fd);
	if (o->tmp) {
		unlink(o->tmp);
		live_drop(o->tmp);
	}
	free(o->tmp);
	free(o->path);
	memset(o, 0, sizeof *o);
	o->fd = -1;
}

int kf_write_file(const char *path, const void *p, size_t n)
{
	kf_ofile o;
	int e = kf_ofile_open(&o, path);
	if (e)
		return e;
	kf_ofile_write(&o, p, n);
	return kf_ofile_commit(&o);
}

/* ---- writes --------------------------------------------------------------------------- */

int kf_write_all(int fd, const void *p, size_t n)
{
	const char *s = p;
	while (n) {
		if (kf_fault_write())
			return ENOSPC;
		ssize_t w = write(fd, s, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? errno : EIO;
		s += w;
		n -= (size_t)w;
	}
	return 0;
}
