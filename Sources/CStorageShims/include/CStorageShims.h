#ifndef CSTORAGESHIMS_H
#define CSTORAGESHIMS_H
/* The renameat2 calls that make a pyramid appear in one step; Glibc's Swift module does
   not expose renameat2 (older C libraries lack even the wrapper, so these make the raw
   system call). Both return 0, or -1 with errno set; EINVAL or ENOSYS mean this file
   system or kernel cannot do it, and the caller falls back. */

/* Swaps two existing paths in one step (RENAME_EXCHANGE), so a reader sees either the
   old or the new pyramid and never neither. */
int tiler_exchange_paths(const char *a, const char *b);

/* Renames `from` to `to` only if `to` does not exist (RENAME_NOREPLACE): EEXIST
   otherwise. */
int tiler_rename_noreplace(const char *from, const char *to);

#include <stddef.h>
#include <sys/types.h>

/* preadv2(RWF_NOWAIT): reads only what the page cache holds; -1 with EAGAIN when any of
   the range would wait for the disk, EOPNOTSUPP (or EINVAL, ENOSYS) where the file system
   or kernel cannot tell (overlayfs, tmpfs). */
ssize_t tiler_pread_nowait(int fd, void *buffer, size_t length, long long offset);

/* Whether every page of bytes [offset, offset + length) of `fd` is in the page cache:
   1 yes, 0 no, -1 (errno set) when it cannot be told. Maps the range read-only and never
   touches it (mincore), so a file truncated meanwhile cannot raise SIGBUS. */
int tiler_range_resident(int fd, long long offset, size_t length);

/* Copies `length` bytes at `from_offset` of `from` to `to_offset` of `to`: with
   copy_file_range(2) (in the kernel, no user-space buffer) while *use_kernel is non-zero,
   else, or once the kernel or file system refuses it (EXDEV, ENOSYS, EINVAL, EOPNOTSUPP,
   EPERM: overlayfs, older kernels; *use_kernel is then set to 0), with pread and pwrite
   through a buffer of at most 1 MiB. Returns 0, or -1 with errno set (EIO when `from`
   ends early). */
int tiler_copy_range(int from, long long from_offset, int to, long long to_offset, long long length, int *use_kernel);

#endif
