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
