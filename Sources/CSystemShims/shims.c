/* The calls declared in include/CSystemShims.h. This file can define _GNU_SOURCE, which
 * accept4, preadv2, copy_file_range and sched_getaffinity need. */
#define _GNU_SOURCE 1
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>
#include "CSystemShims.h"

int tsys_accept(int fd) {
    return accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

ssize_t tsys_pread_nowait(int fd, void *buf, size_t len, long long offset) {
    struct iovec v = { buf, len };
    return preadv2(fd, &v, 1, (off_t)offset, RWF_NOWAIT);
}

#ifndef SYS_cachestat
#define SYS_cachestat 451  /* the same number on every architecture */
#endif

/* The kernel's struct cachestat_range and struct cachestat (linux/mman.h, 6.5). */
struct tsys_cachestat_range { unsigned long long off, len; };
struct tsys_cachestat {
    unsigned long long nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};

int tsys_cached_pages(int fd, unsigned long long offset, unsigned long long length, unsigned long long *cached) {
    struct tsys_cachestat_range range = { offset, length };
    struct tsys_cachestat stat = { 0 };
    long r = syscall(SYS_cachestat, fd, &range, &stat, 0);
    if (r == 0) *cached = stat.nr_cache;
    return (int)r;
}

ssize_t tsys_read(int fd, void *buf, size_t len) {
    return (ssize_t)syscall(SYS_read, fd, buf, len);
}

ssize_t tsys_sendmsg(int fd, const struct msghdr *msg, int flags) {
    return (ssize_t)syscall(SYS_sendmsg, fd, msg, flags);
}

ssize_t tsys_copy_file_range(int from, long long *from_offset, int to, long long *to_offset, size_t length) {
    loff_t in = (loff_t)*from_offset, out = (loff_t)*to_offset;
    ssize_t n = copy_file_range(from, &in, to, &out, length, 0);
    *from_offset = (long long)in;
    *to_offset = (long long)out;
    return n;
}

static int rename2(const char *a, const char *b, unsigned int flags) {
#if defined(SYS_renameat2)
    return (int)syscall(SYS_renameat2, AT_FDCWD, a, AT_FDCWD, b, flags);
#else
    (void)a; (void)b; (void)flags;
    errno = ENOSYS;
    return -1;
#endif
}

int tsys_rename_exchange(const char *a, const char *b) { return rename2(a, b, 2 /* RENAME_EXCHANGE */); }

int tsys_rename_noreplace(const char *from, const char *to) { return rename2(from, to, 1 /* RENAME_NOREPLACE */); }

int tsys_allowed_cpus(void) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) return -1;
    return CPU_COUNT(&set);
}

int tsys_name_thread(const char *name) {
    return prctl(PR_SET_NAME, name, 0, 0, 0);
}
