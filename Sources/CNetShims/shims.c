/* The calls declared in include/CNetShims.h. This file can define _GNU_SOURCE, which
 * accept4, preadv2 and sched_getaffinity need. */
#define _GNU_SOURCE 1
#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include "CNetShims.h"

int cns_accept(int fd) {
    return accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

ssize_t cns_pread_nowait(int fd, void *buf, size_t len, long offset) {
    struct iovec v = { buf, len };
    return preadv2(fd, &v, 1, (off_t)offset, RWF_NOWAIT);
}

int cns_allowed_cpus(void) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) return -1;
    return CPU_COUNT(&set);
}

int cns_name_thread(const char *name) {
    return prctl(PR_SET_NAME, name, 0, 0, 0);
}

#ifndef SYS_cachestat
#define SYS_cachestat 451  /* the same number on every architecture */
#endif

/* The kernel's struct cachestat_range and struct cachestat (linux/mman.h, 6.5). */
struct cns_cachestat_range { unsigned long long off, len; };
struct cns_cachestat {
    unsigned long long nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};

int cns_cached_pages(int fd, unsigned long long offset, unsigned long long length,
                     unsigned long long *cached) {
    struct cns_cachestat_range range = { offset, length };
    struct cns_cachestat stat = { 0 };
    long r = syscall(SYS_cachestat, fd, &range, &stat, 0);
    if (r == 0) *cached = stat.nr_cache;
    return (int)r;
}

ssize_t cns_read(int fd, void *buf, size_t len) {
    return (ssize_t)syscall(SYS_read, fd, buf, len);
}

ssize_t cns_sendmsg(int fd, const struct msghdr *msg, int flags) {
    return (ssize_t)syscall(SYS_sendmsg, fd, msg, flags);
}
