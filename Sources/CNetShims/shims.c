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

#include <stdlib.h>
#include <sys/mman.h>

int cns_pages_resident(int fd, size_t len) {
    if (len == 0) return 1;
    void *map = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) return -1;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t pages = (len + page - 1) / page;
    unsigned char small[512];
    unsigned char *vec = pages <= sizeof small ? small : malloc(pages);
    if (vec == NULL) {
        munmap(map, len);
        errno = ENOMEM;
        return -1;
    }
    int rc = mincore(map, len, vec);
    int saved = errno;
    munmap(map, len);
    int all = 1;
    if (rc != 0) {
        all = -1;
    } else {
        for (size_t i = 0; i < pages; i++) {
            if (!(vec[i] & 1)) { all = 0; break; }
        }
    }
    if (vec != small) free(vec);
    if (all < 0) errno = saved;
    return all;
}
