#ifndef CTILERSHIMS_H
#define CTILERSHIMS_H
/* Fixed-arity wrappers for libvips' variadic operations, which Swift cannot call.
   Each returns 0 on success and -1 on failure, with the reason in vips_error_buffer(). */
#include <vips/vips.h>

/* Placeholder: the cutter adds one documented function per operation it needs. */
int tiler_vips_init(const char *program);

#endif
