/* The byte scans of include/CByteScan.h (the HTTP parser's runs, a query's separators),
 * sixteen bytes at a time with SSE2 where the target has it (every x86-64), a byte at a
 * time elsewhere. Each is exact: it returns the index of the first byte the scan stops
 * at, or `count` when there is none. */
#include <stdint.h>
#include "CByteScan.h"
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* RFC 9110 tchar: ! # $ % & ' * + - . ^ _ ` | ~ DIGIT ALPHA. */
static const unsigned char is_tchar[256] = {
    ['!'] = 1, ['#'] = 1, ['$'] = 1, ['%'] = 1, ['&'] = 1, ['\''] = 1, ['*'] = 1, ['+'] = 1,
    ['-'] = 1, ['.'] = 1, ['^'] = 1, ['_'] = 1, ['`'] = 1, ['|'] = 1, ['~'] = 1,
    ['0'] = 1, ['1'] = 1, ['2'] = 1, ['3'] = 1, ['4'] = 1, ['5'] = 1, ['6'] = 1, ['7'] = 1,
    ['8'] = 1, ['9'] = 1,
    ['A'] = 1, ['B'] = 1, ['C'] = 1, ['D'] = 1, ['E'] = 1, ['F'] = 1, ['G'] = 1, ['H'] = 1,
    ['I'] = 1, ['J'] = 1, ['K'] = 1, ['L'] = 1, ['M'] = 1, ['N'] = 1, ['O'] = 1, ['P'] = 1,
    ['Q'] = 1, ['R'] = 1, ['S'] = 1, ['T'] = 1, ['U'] = 1, ['V'] = 1, ['W'] = 1, ['X'] = 1,
    ['Y'] = 1, ['Z'] = 1,
    ['a'] = 1, ['b'] = 1, ['c'] = 1, ['d'] = 1, ['e'] = 1, ['f'] = 1, ['g'] = 1, ['h'] = 1,
    ['i'] = 1, ['j'] = 1, ['k'] = 1, ['l'] = 1, ['m'] = 1, ['n'] = 1, ['o'] = 1, ['p'] = 1,
    ['q'] = 1, ['r'] = 1, ['s'] = 1, ['t'] = 1, ['u'] = 1, ['v'] = 1, ['w'] = 1, ['x'] = 1,
    ['y'] = 1, ['z'] = 1,
};

size_t tbs_token_end(const unsigned char *bytes, size_t count) {
    size_t i = 0;
    /* Four bytes a step while all four are tchars (a header name is mostly letters). */
    while (count - i >= 4 && (is_tchar[bytes[i]] & is_tchar[bytes[i + 1]] & is_tchar[bytes[i + 2]] & is_tchar[bytes[i + 3]]))
        i += 4;
    while (i < count && is_tchar[bytes[i]]) i++;
    return i;
}

static inline int is_target_byte(unsigned char b) { return b > 0x20 && b < 0x7F; }
static inline int is_value_byte(unsigned char b) { return (b >= 0x20 && b != 0x7F) || b == 0x09; }

#if defined(__SSE2__)
/* The bytes of `v` a request target refuses (controls, space, DEL, obs-text), as bits. */
static inline unsigned target_refused(__m128i v) {
    __m128i low = _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x20)), v);         /* <= 0x20 */
    __m128i high = _mm_cmpeq_epi8(_mm_max_epu8(v, _mm_set1_epi8(0x7F)), v);        /* >= 0x7F */
    return (unsigned)_mm_movemask_epi8(_mm_or_si128(low, high));
}

/* The bytes of `v` a header value refuses (controls but tab, and DEL), as bits. */
static inline unsigned value_refused(__m128i v) {
    __m128i low = _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1F)), v);         /* <= 0x1F */
    __m128i tab = _mm_cmpeq_epi8(v, _mm_set1_epi8(0x09));
    __m128i del = _mm_cmpeq_epi8(v, _mm_set1_epi8(0x7F));
    return (unsigned)_mm_movemask_epi8(_mm_or_si128(_mm_andnot_si128(tab, low), del));
}

/* The bytes of `v` equal to any of a, b, c and d, as a vector and as bits. */
static inline __m128i any_of_vector(__m128i v, unsigned char a, unsigned char b, unsigned char c, unsigned char d) {
    __m128i m = _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8((char)a)), _mm_cmpeq_epi8(v, _mm_set1_epi8((char)b)));
    m = _mm_or_si128(m, _mm_cmpeq_epi8(v, _mm_set1_epi8((char)c)));
    return _mm_or_si128(m, _mm_cmpeq_epi8(v, _mm_set1_epi8((char)d)));
}

static inline unsigned any_of(__m128i v, unsigned char a, unsigned char b, unsigned char c, unsigned char d) {
    return (unsigned)_mm_movemask_epi8(any_of_vector(v, a, b, c, d));
}

/* The bytes of `v` that may end a header value: below 0x20 (a tab among them) or DEL. */
static inline __m128i value_suspect(__m128i v) {
    return _mm_or_si128(_mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1F)), v), _mm_cmpeq_epi8(v, _mm_set1_epi8(0x7F)));
}

/* The bytes of `v` a request target refuses, as a vector. */
static inline __m128i target_suspect(__m128i v) {
    return _mm_or_si128(_mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x20)), v),
                        _mm_cmpeq_epi8(_mm_max_epu8(v, _mm_set1_epi8(0x7F)), v));
}

/* A first chunk checked exactly (most runs end in it); past it, 64 bytes a step while no
 * quarter holds a suspect byte (a superset of the stops: a long token passes at under
 * half an instruction a byte). Leaves `i` where the exact scan goes on. */
#define SKIP_LONG(STOP, SUSPECT)                                                          \
    if (count >= 16) {                                                                    \
        unsigned first = STOP(_mm_loadu_si128((const __m128i *)bytes));                   \
        if (first) return (size_t)__builtin_ctz(first);                                   \
        i = 16;                                                                           \
        while (count - i >= 64) {                                                         \
            __m128i q0 = SUSPECT(_mm_loadu_si128((const __m128i *)(bytes + i)));          \
            __m128i q1 = SUSPECT(_mm_loadu_si128((const __m128i *)(bytes + i + 16)));     \
            __m128i q2 = SUSPECT(_mm_loadu_si128((const __m128i *)(bytes + i + 32)));     \
            __m128i q3 = SUSPECT(_mm_loadu_si128((const __m128i *)(bytes + i + 48)));     \
            if (_mm_movemask_epi8(_mm_or_si128(_mm_or_si128(q0, q1), _mm_or_si128(q2, q3)))) break; \
            i += 64;                                                                      \
        }                                                                                 \
    }

/* `SKIP_LONG`, then `STOP(vector)` over whole chunks, then over the last sixteen bytes (overlapping
 * what was read, those bits masked off); a run shorter than sixteen goes byte by byte. */
#define SCAN(STOP, BYTE_STOPS, SUSPECT)                                                   \
    size_t i = 0;                                                                         \
    SKIP_LONG(STOP, SUSPECT)                                                              \
    if (count >= 16) {                                                                    \
        for (; count - i >= 16; i += 16) {                                                \
            unsigned m = STOP(_mm_loadu_si128((const __m128i *)(bytes + i)));             \
            if (m) return i + (size_t)__builtin_ctz(m);                                   \
        }                                                                                 \
        if (i < count) {                                                                  \
            size_t last = count - 16;                                                     \
            unsigned m = STOP(_mm_loadu_si128((const __m128i *)(bytes + last)));          \
            m &= ~0u << (i - last);                                                       \
            if (m) return last + (size_t)__builtin_ctz(m);                                \
        }                                                                                 \
        return count;                                                                     \
    }                                                                                     \
    for (; i < count; i++) if (BYTE_STOPS(bytes[i])) return i;                            \
    return count;
#else
#define SCAN(STOP, BYTE_STOPS, SUSPECT)                                                   \
    for (size_t i = 0; i < count; i++) if (BYTE_STOPS(bytes[i])) return i;                \
    return count;
#endif

#define TARGET_STOPS(b) (!is_target_byte(b))
#define VALUE_STOPS(b) (!is_value_byte(b))
#define ANY_STOPS(x) ((x) == a || (x) == b || (x) == c || (x) == d)
#define ANY_OF(v) any_of(v, a, b, c, d)
#define ANY_OF_VECTOR(v) any_of_vector(v, a, b, c, d)

size_t tbs_target_end(const unsigned char *bytes, size_t count) { SCAN(target_refused, TARGET_STOPS, target_suspect) }

size_t tbs_value_end(const unsigned char *bytes, size_t count) { SCAN(value_refused, VALUE_STOPS, value_suspect) }

size_t tbs_first_of(const unsigned char *bytes, size_t count, unsigned char a, unsigned char b, unsigned char c,
                    unsigned char d) {
    SCAN(ANY_OF, ANY_STOPS, ANY_OF_VECTOR)
}
