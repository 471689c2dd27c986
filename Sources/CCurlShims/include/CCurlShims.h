#ifndef CCURLSHIMS_H
#define CCURLSHIMS_H
/* Fixed-arity wrappers for libcurl's variadic calls (curl_easy_setopt and
   curl_easy_getinfo), which Swift cannot make. One function per argument type; each
   returns libcurl's own result code. */
#include <stddef.h>
#include <curl/curl.h>

/* curl_global_init(CURL_GLOBAL_DEFAULT) once per process, from any thread (later calls
   return the first result). */
CURLcode tiler_curl_global_init(void);

CURLcode tiler_curl_set_long(CURL *handle, CURLoption option, long value);
CURLcode tiler_curl_set_offset(CURL *handle, CURLoption option, curl_off_t value);
/* Strings are copied by libcurl. */
CURLcode tiler_curl_set_string(CURL *handle, CURLoption option, const char *value);
/* A pointer libcurl keeps as it is (a header list, callback data). */
CURLcode tiler_curl_set_pointer(CURL *handle, CURLoption option, void *value);

typedef size_t (*tiler_curl_data_callback)(char *bytes, size_t size, size_t count, void *context);
typedef int (*tiler_curl_progress_callback)(void *context, curl_off_t download_total, curl_off_t downloaded,
                                            curl_off_t upload_total, curl_off_t uploaded);

/* CURLOPT_WRITEFUNCTION, CURLOPT_HEADERFUNCTION and CURLOPT_READFUNCTION. */
CURLcode tiler_curl_set_data_callback(CURL *handle, CURLoption option, tiler_curl_data_callback callback);
/* CURLOPT_XFERINFOFUNCTION. */
CURLcode tiler_curl_set_progress_callback(CURL *handle, tiler_curl_progress_callback callback);

CURLcode tiler_curl_get_long(CURL *handle, CURLINFO info, long *value);

#endif
