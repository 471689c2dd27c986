#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
#include <sys/syscall.h>
#include "CStorageShims.h"

static int rename2(const char *a, const char *b, unsigned int flags) {
#if defined(__linux__) && defined(SYS_renameat2)
    return (int) syscall(SYS_renameat2, AT_FDCWD, a, AT_FDCWD, b, flags);
#else
    (void) a; (void) b; (void) flags;
    errno = ENOSYS;
    return -1;
#endif
}

int tiler_exchange_paths(const char *a, const char *b) {
    return rename2(a, b, 2 /* RENAME_EXCHANGE */);
}

int tiler_rename_noreplace(const char *from, const char *to) {
    return rename2(from, to, 1 /* RENAME_NOREPLACE */);
}

#include <stdlib.h>
#include <sys/mman.h>
#include <sys/uio.h>

ssize_t tiler_pread_nowait(int fd, void *buffer, size_t length, long long offset) {
#if defined(__linux__) && defined(RWF_NOWAIT)
    struct iovec v = { buffer, length };
    return preadv2(fd, &v, 1, (off_t)offset, RWF_NOWAIT);
#else
    (void) fd; (void) buffer; (void) length; (void) offset;
    errno = EOPNOTSUPP;
    return -1;
#endif
}

int tiler_range_resident(int fd, long long offset, size_t length) {
    if (length == 0) return 1;
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0 || offset < 0) { errno = EINVAL; return -1; }
    long long start = offset - offset % page;
    size_t span = (size_t)(offset - start) + length;
    void *map = mmap(NULL, span, PROT_READ, MAP_SHARED, fd, (off_t)start);
    if (map == MAP_FAILED) return -1;
    size_t pages = (span + (size_t)page - 1) / (size_t)page;
    unsigned char small[512];
    unsigned char *vec = pages <= sizeof small ? small : malloc(pages);
    if (vec == NULL) {
        munmap(map, span);
        errno = ENOMEM;
        return -1;
    }
    int rc = mincore(map, span, vec);
    int saved = errno;
    munmap(map, span);
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

int tiler_copy_range(int from, long long from_offset, int to, long long to_offset, long long length, int *use_kernel) {
    long long done = 0;
#if defined(__linux__)
    while (*use_kernel && done < length) {
        loff_t in = (loff_t)(from_offset + done), out = (loff_t)(to_offset + done);
        long long want = length - done;
        size_t chunk = want > (1LL << 30) ? (size_t)(1LL << 30) : (size_t)want;
        ssize_t n = copy_file_range(from, &in, to, &out, chunk, 0);
        if (n > 0) { done += n; continue; }
        if (n == 0) { errno = EIO; return -1; }  /* the source ends early */
        if (errno == EINTR) continue;
        if (errno == EXDEV || errno == ENOSYS || errno == EINVAL || errno == EOPNOTSUPP || errno == EPERM) {
            *use_kernel = 0;  /* this kernel or file system cannot: copy through memory */
            break;
        }
        return -1;
    }
#else
    *use_kernel = 0;
#endif
    if (done == length) return 0;
    long long rest = length - done;
    size_t size = rest > (1LL << 20) ? (size_t)(1LL << 20) : (size_t)rest;
    char *buffer = malloc(size);
    if (buffer == NULL) { errno = ENOMEM; return -1; }
    while (done < length) {
        long long want = length - done;
        size_t n = want > (long long)size ? size : (size_t)want;
        ssize_t got = pread(from, buffer, n, (off_t)(from_offset + done));
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) {
            if (got == 0) errno = EIO;
            free(buffer);
            return -1;
        }
        ssize_t put = 0;
        while (put < got) {
            ssize_t w = pwrite(to, buffer + put, (size_t)(got - put), (off_t)(to_offset + done + put));
            if (w < 0 && errno == EINTR) continue;
            if (w < 0) { free(buffer); return -1; }
            put += w;
        }
        done += got;
    }
    free(buffer);
    return 0;
}
