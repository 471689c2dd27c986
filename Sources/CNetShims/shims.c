/* Almost everything lives in include/CNetShims.h as static inline functions. accept4
 * needs _GNU_SOURCE, which the header cannot define without clashing with the Glibc
 * module Swift builds, so it lives here. */
#define _GNU_SOURCE 1
#include <sys/socket.h>
#include "CNetShims.h"

int cns_accept(int fd) {
    return accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

#include <sys/uio.h>

ssize_t cns_pread_nowait(int fd, void *buf, size_t len, long offset) {
    struct iovec v = { buf, len };
    return preadv2(fd, &v, 1, (off_t)offset, RWF_NOWAIT);
}
