#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
#include <sys/syscall.h>
#include "CTilerShims.h"

int tiler_exchange_paths(const char *a, const char *b) {
#if defined(__linux__) && defined(SYS_renameat2)
    /* The raw syscall: older C libraries lack the renameat2 wrapper. RENAME_EXCHANGE = 2. */
    return (int) syscall(SYS_renameat2, AT_FDCWD, a, AT_FDCWD, b, 2);
#else
    (void) a; (void) b;
    errno = ENOSYS;
    return -1;
#endif
}
