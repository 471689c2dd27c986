#ifndef CSYSTEMSHIMS_H
#define CSYSTEMSHIMS_H
/*
 * What TilerSystem cannot reach through Swift's Glibc module, and nothing else; each call
 * once. Glibc's module map leaves out epoll, eventfd and signalfd: the headers below are
 * included so that Swift sees them, and Swift calls those functions itself. The functions
 * declared here need _GNU_SOURCE (accept4, preadv2, copy_file_range, sched_getaffinity),
 * which this header cannot define without clashing with the Glibc module, or are variadic
 * (prctl; syscall, for the calls glibc does not wrap or wraps with cancellation points).
 * Each returns what the system call returns: -1 with errno set on failure.
 */
#include <stddef.h>
#include <sys/types.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>

/* accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC). */
int tsys_accept(int fd);

/* preadv2(fd, {buf, len}, 1, offset, RWF_NOWAIT): reads only what the page cache already
 * holds; -1 with EAGAIN when the read would have to wait for the disk, EOPNOTSUPP (or
 * EINVAL, ENOSYS) where the file system or kernel cannot tell (overlayfs, tmpfs). */
ssize_t tsys_pread_nowait(int fd, void *buf, size_t len, long long offset);

/* cachestat(fd, {offset, length}, &stat, 0) (Linux 6.5, which glibc does not wrap): sets
 * *cached to the pages of the range in the page cache. -1 with ENOSYS on older kernels. */
int tsys_cached_pages(int fd, unsigned long long offset, unsigned long long length, unsigned long long *cached);

/* read(fd, buf, len) and sendmsg(fd, msg, flags) as bare system calls (syscall(2)).
 * glibc's wrappers are thread-cancellation points: around every call they switch
 * asynchronous cancellation on and off, about 90 instructions per request on the
 * serving path. The server never cancels a thread. */
ssize_t tsys_read(int fd, void *buf, size_t len);
struct msghdr;
ssize_t tsys_sendmsg(int fd, const struct msghdr *msg, int flags);

/* copy_file_range(from, &from_offset, to, &to_offset, length, 0): copies in the kernel,
 * moving both offsets by what it copied. */
ssize_t tsys_copy_file_range(int from, long long *from_offset, int to, long long *to_offset, size_t length);

/* renameat2(AT_FDCWD, a, AT_FDCWD, b, flags) as a raw system call (older C libraries lack
 * even the wrapper): RENAME_EXCHANGE swaps two existing paths in one step; RENAME_NOREPLACE
 * renames only if `b` does not exist (EEXIST otherwise). EINVAL or ENOSYS: this file system
 * or kernel cannot, and the caller falls back. */
int tsys_rename_exchange(const char *a, const char *b);
int tsys_rename_noreplace(const char *from, const char *to);

/* How many processors the calling thread may run on (sched_getaffinity and CPU_COUNT,
 * which are behind _GNU_SOURCE and a macro). */
int tsys_allowed_cpus(void);

/* prctl(PR_SET_NAME, name): names the calling thread (15 bytes are kept). */
int tsys_name_thread(const char *name);

#endif
