/* The calls declared in include/CNetShims.h. This file can define _GNU_SOURCE, which
 * accept4 and preadv2 need. */
#define _GNU_SOURCE 1
#include <sys/prctl.h>
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

int cns_name_thread(const char *name) {
    return prctl(PR_SET_NAME, name, 0, 0, 0);
}
