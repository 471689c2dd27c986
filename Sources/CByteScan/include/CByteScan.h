#ifndef CBYTESCAN_H
#define CBYTESCAN_H
/*
 * Byte scans for the HTTP parser and the routes (scan.c), sixteen bytes at a time: Swift's
 * SIMD types compile their comparisons lane by lane, and these runs are most of a
 * request's bytes (a browser's headers, a token of a few hundred bytes). Each returns the
 * index of the first byte that stops it, or `count`:
 * - tbs_token_end: the first byte that is not an RFC 9110 tchar (a method, a header name);
 * - tbs_target_end: the first that a request target cannot hold (not visible ASCII);
 * - tbs_value_end: the first that ends or spoils a header value (a control but tab, DEL);
 * - tbs_first_of: the first equal to a, b, c or d (repeat one to look for fewer).
 */
#include <stddef.h>

size_t tbs_token_end(const unsigned char *bytes, size_t count);
size_t tbs_target_end(const unsigned char *bytes, size_t count);
size_t tbs_value_end(const unsigned char *bytes, size_t count);
size_t tbs_first_of(const unsigned char *bytes, size_t count, unsigned char a, unsigned char b, unsigned char c,
                    unsigned char d);

#endif
