#ifndef CNETSHIMS_H
#define CNETSHIMS_H
/*
 * epoll, accept4, eventfd, signalfd, socket options and a few atomics for Swift.
 *
 * Swift's Glibc module cannot see macros such as EPOLLIN or SOCK_NONBLOCK, and
 * `struct epoll_event` is packed with a union that Swift imports awkwardly, so each
 * call the server needs is one static inline function with plain integer arguments.
 * Every function returns what the system call returns (-1 with errno set on failure).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>

/* Event bits, as plain constants. */
static const uint32_t CNS_EPOLLIN = EPOLLIN;
static const uint32_t CNS_EPOLLOUT = EPOLLOUT;
static const uint32_t CNS_EPOLLERR = EPOLLERR;
static const uint32_t CNS_EPOLLHUP = EPOLLHUP;
static const uint32_t CNS_EPOLLRDHUP = EPOLLRDHUP;

/* One readiness report: the file descriptor and its event bits. */
typedef struct {
    int32_t fd;
    uint32_t events;
} cns_event;

static inline int cns_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

static inline int cns_epoll_add(int epfd, int fd, uint32_t events) {
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = events;
    ev.data.fd = fd;
    return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
}

static inline int cns_epoll_modify(int epfd, int fd, uint32_t events) {
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = events;
    ev.data.fd = fd;
    return epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &ev);
}

static inline int cns_epoll_remove(int epfd, int fd) {
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    return epoll_ctl(epfd, EPOLL_CTL_DEL, fd, &ev);
}

/* Waits up to `timeout_ms` (-1 forever) and copies at most `max` (<= 1024) reports out. */
static inline int cns_epoll_wait(int epfd, cns_event *out, int max, int timeout_ms) {
    struct epoll_event evs[1024];
    if (max > 1024) max = 1024;
    int n = epoll_wait(epfd, evs, max, timeout_ms);
    for (int i = 0; i < n; i++) {
        out[i].fd = evs[i].data.fd;
        out[i].events = evs[i].events;
    }
    return n;
}

/* A non-blocking, close-on-exec TCP socket for `family` (AF_INET or AF_INET6). */
static inline int cns_tcp_socket(int family) {
    return socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
}

static inline int cns_set_int_option(int fd, int level, int name, int value) {
    return setsockopt(fd, level, name, &value, sizeof value);
}
static inline int cns_set_reuse_address(int fd) { return cns_set_int_option(fd, SOL_SOCKET, SO_REUSEADDR, 1); }
static inline int cns_set_reuse_port(int fd) { return cns_set_int_option(fd, SOL_SOCKET, SO_REUSEPORT, 1); }
static inline int cns_set_no_delay(int fd) { return cns_set_int_option(fd, IPPROTO_TCP, TCP_NODELAY, 1); }
static inline int cns_set_v6_only(int fd, int on) { return cns_set_int_option(fd, IPPROTO_IPV6, IPV6_V6ONLY, on); }

/* Parses `host` as an IPv4 or IPv6 literal: 4 or 6 on success, 0 if it is neither. */
static inline int cns_address_family(const char *host) {
    unsigned char buf[sizeof(struct in6_addr)];
    if (inet_pton(AF_INET, host, buf) == 1) return 4;
    if (inet_pton(AF_INET6, host, buf) == 1) return 6;
    return 0;
}

/* Binds to the literal address `host` and `port`; `family` is AF_INET or AF_INET6. */
static inline int cns_bind(int fd, int family, const char *host, uint16_t port) {
    if (family == AF_INET) {
        struct sockaddr_in a;
        memset(&a, 0, sizeof a);
        a.sin_family = AF_INET;
        a.sin_port = htons(port);
        if (inet_pton(AF_INET, host, &a.sin_addr) != 1) { errno = EINVAL; return -1; }
        return bind(fd, (struct sockaddr *)&a, sizeof a);
    } else {
        struct sockaddr_in6 a;
        memset(&a, 0, sizeof a);
        a.sin6_family = AF_INET6;
        a.sin6_port = htons(port);
        if (inet_pton(AF_INET6, host, &a.sin6_addr) != 1) { errno = EINVAL; return -1; }
        return bind(fd, (struct sockaddr *)&a, sizeof a);
    }
}

/* The port a socket is bound to, or -1. */
static inline int cns_local_port(int fd) {
    struct sockaddr_storage a;
    socklen_t len = sizeof a;
    if (getsockname(fd, (struct sockaddr *)&a, &len) != 0) return -1;
    if (a.ss_family == AF_INET) return ntohs(((struct sockaddr_in *)&a)->sin_port);
    if (a.ss_family == AF_INET6) return ntohs(((struct sockaddr_in6 *)&a)->sin6_port);
    return -1;
}

/* Accepts one connection as a non-blocking, close-on-exec socket. */
int cns_accept(int fd); /* in shims.c, which can define _GNU_SOURCE for accept4 */
/* preadv2(RWF_NOWAIT): reads only what the page cache already holds; -1 with EAGAIN when
 * the read would have to wait for the disk (in shims.c, for _GNU_SOURCE). */
ssize_t cns_pread_nowait(int fd, void *buf, size_t len, long offset);
/* Whether the first `len` bytes of the file are all in the page cache, learnt with
 * mincore(2) on a read-only mapping that is never touched (so a file truncated meanwhile
 * cannot raise SIGBUS): 1 yes, 0 no, -1 with errno if the file cannot be mapped. For file
 * systems without RWF_NOWAIT (overlayfs, tmpfs). In shims.c. */
int cns_pages_resident(int fd, size_t len);

/* Sends without raising SIGPIPE on a closed peer. */
static inline ssize_t cns_send(int fd, const void *buf, size_t len) {
    return send(fd, buf, len, MSG_NOSIGNAL);
}

/* The two-buffer form of cns_send. */
static inline ssize_t cns_send2(int fd, const void *a, size_t alen, const void *b, size_t blen) {
    struct iovec iov[2] = {{(void *)a, alen}, {(void *)b, blen}};
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_iov = iov;
    msg.msg_iovlen = 2;
    return sendmsg(fd, &msg, MSG_NOSIGNAL);
}

/* Bytes received on a socket and not yet read (FIONREAD), or -1. */
static inline int cns_readable_bytes(int fd) {
    int n = 0;
    return ioctl(fd, FIONREAD, &n) == 0 ? n : -1;
}

/* Names the calling thread (at most 15 bytes are kept), as top -H and
 * /proc/PID/task/TID/comm show it. */
static inline void cns_name_thread(const char *name) { (void)prctl(PR_SET_NAME, name, 0, 0, 0); }

/* A non-blocking eventfd, used to wake event loops. */
static inline int cns_eventfd(void) { return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }
static inline int cns_eventfd_signal(int fd) { uint64_t one = 1; return (int)write(fd, &one, sizeof one); }
/* Resets an eventfd's counter after a wake-up. */
static inline void cns_eventfd_drain(int fd) { uint64_t n; (void)!read(fd, &n, sizeof n); }

/* Blocks SIGTERM and SIGINT in the calling thread (and threads it starts later) and
 * returns a signalfd that becomes readable when either arrives. */
static inline int cns_termination_signalfd(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    if (pthread_sigmask(SIG_BLOCK, &set, NULL) != 0) return -1;
    return signalfd(-1, &set, SFD_CLOEXEC);
}

/* Reads one signal from a signalfd (blocking): the signal number, or -1. */
static inline int cns_read_signal(int fd) {
    struct signalfd_siginfo info;
    ssize_t n = read(fd, &info, sizeof info);
    if (n != (ssize_t)sizeof info) return -1;
    return (int)info.ssi_signo;
}

/* Raises the soft RLIMIT_NOFILE to the hard limit; returns the new soft limit or -1. */
static inline long cns_raise_file_limit(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return -1;
    if (rl.rlim_cur < rl.rlim_max) {
        rlim_t want = rl.rlim_max;
        if (want == RLIM_INFINITY || want > (1u << 20)) want = 1u << 20;
        rl.rlim_cur = want;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) getrlimit(RLIMIT_NOFILE, &rl);
    }
    return rl.rlim_cur == RLIM_INFINITY ? (1L << 20) : (long)rl.rlim_cur;
}

/* Monotonic milliseconds from a cheap clock (CLOCK_MONOTONIC_COARSE, ~4 ms resolution). */
static inline int64_t cns_monotonic_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wall-clock seconds since 1970 (coarse). */
static inline int64_t cns_wall_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME_COARSE, &ts);
    return (int64_t)ts.tv_sec;
}

/* File identity for validators: returns 0 and fills the fields, or -1 with errno. */
typedef struct {
    int64_t size;
    int64_t mtime_sec;
    int64_t mtime_nsec;
    uint64_t inode;
    uint64_t device;
    int is_regular;
    int is_directory;
} cns_file_info;

static inline int cns_fill_info(const struct stat *st, cns_file_info *out) {
    out->size = (int64_t)st->st_size;
    out->mtime_sec = (int64_t)st->st_mtim.tv_sec;
    out->mtime_nsec = (int64_t)st->st_mtim.tv_nsec;
    out->inode = (uint64_t)st->st_ino;
    out->device = (uint64_t)st->st_dev;
    out->is_regular = S_ISREG(st->st_mode) ? 1 : 0;
    out->is_directory = S_ISDIR(st->st_mode) ? 1 : 0;
    return 0;
}
static inline int cns_fstat(int fd, cns_file_info *out) {
    struct stat st;
    if (fstat(fd, &st) != 0) return -1;
    return cns_fill_info(&st, out);
}

/* Sequentially consistent atomics on a plain `long`, for counters shared by loops. */
static inline long cns_atomic_add(long *p, long v) { return __atomic_add_fetch(p, v, __ATOMIC_SEQ_CST); }
static inline long cns_atomic_load(long *p) { return __atomic_load_n(p, __ATOMIC_SEQ_CST); }
static inline void cns_atomic_store(long *p, long v) { __atomic_store_n(p, v, __ATOMIC_SEQ_CST); }

#endif
