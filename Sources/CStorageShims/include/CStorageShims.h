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

#endif
