#ifndef CNETSHIMS_H
#define CNETSHIMS_H
/*
 * What Swift cannot reach through its Glibc module, and nothing else (with, at the end,
 * the byte scans Swift's SIMD types cannot make fast).
 *
 * The headers below are included so that Swift sees epoll, eventfd and signalfd (Glibc's
 * module map leaves them out); Swift calls those functions itself. The functions are here
 * because they need _GNU_SOURCE (accept4, preadv2), which this header cannot define
 * without clashing with the Glibc module, or are variadic (prctl; syscall, for cachestat,
 * which glibc does not wrap, and for read and sendmsg without glibc's cancellation
 * points). Each returns what the system call returns: -1
 * with errno set on failure.
 */
#include <stddef.h>
#include <sys/types.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>

/* accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC). */
int cns_accept(int fd);

/* preadv2(fd, {buf, len}, 1, offset, RWF_NOWAIT): reads only what the page cache already
 * holds; -1 with EAGAIN when the read would have to wait for the disk. */
ssize_t cns_pread_nowait(int fd, void *buf, size_t len, long offset);

/* cachestat(fd, {offset, length}, &stat, 0) (Linux 6.5): sets *cached to the pages of
 * the range in the page cache. -1 with ENOSYS on older kernels. */
int cns_cached_pages(int fd, unsigned long long offset, unsigned long long length,
                     unsigned long long *cached);

/* read(fd, buf, len) and sendmsg(fd, msg, flags) as bare system calls (syscall(2)).
 * glibc's wrappers are thread-cancellation points: around every call they switch
 * asynchronous cancellation on and off, about 90 instructions per request on the
 * serving path. The server never cancels a thread. */
ssize_t cns_read(int fd, void *buf, size_t len);
struct msghdr;
ssize_t cns_sendmsg(int fd, const struct msghdr *msg, int flags);

/* How many processors the calling thread may run on (sched_getaffinity and CPU_COUNT,
 * which are behind _GNU_SOURCE and a macro); -1 with errno set on failure. */
int cns_allowed_cpus(void);

/* prctl(PR_SET_NAME, name): names the calling thread (15 bytes are kept). */
int cns_name_thread(const char *name);

/* Byte scans for the HTTP parser and the routes (scan.c), sixteen bytes at a time: Swift's
 * SIMD types compile their comparisons lane by lane, and these runs are most of a
 * request's bytes (a browser's headers, a token of a few hundred bytes). Each returns the
 * index of the first byte that stops it, or `count`:
 * - cns_token_end: the first byte that is not an RFC 9110 tchar (a method, a header name);
 * - cns_target_end: the first that a request target cannot hold (not visible ASCII);
 * - cns_value_end: the first that ends or spoils a header value (a control but tab, DEL);
 * - cns_first_of: the first equal to a, b, c or d (repeat one to look for fewer). */
size_t cns_token_end(const unsigned char *bytes, size_t count);
size_t cns_target_end(const unsigned char *bytes, size_t count);
size_t cns_value_end(const unsigned char *bytes, size_t count);
size_t cns_first_of(const unsigned char *bytes, size_t count, unsigned char a, unsigned char b, unsigned char c,
                    unsigned char d);

#endif
