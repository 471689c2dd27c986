#include "CCurlShims.h"
#include <pthread.h>

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_result = CURLE_FAILED_INIT;

static void global_init(void) { global_result = curl_global_init(CURL_GLOBAL_DEFAULT); }

CURLcode tiler_curl_global_init(void) {
    pthread_once(&global_once, global_init);
    return global_result;
}

CURLcode tiler_curl_set_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

CURLcode tiler_curl_set_offset(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}

CURLcode tiler_curl_set_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}

CURLcode tiler_curl_set_pointer(CURL *handle, CURLoption option, void *value) {
    return curl_easy_setopt(handle, option, value);
}

CURLcode tiler_curl_set_data_callback(CURL *handle, CURLoption option, tiler_curl_data_callback callback) {
    return curl_easy_setopt(handle, option, callback);
}

CURLcode tiler_curl_set_progress_callback(CURL *handle, tiler_curl_progress_callback callback) {
    return curl_easy_setopt(handle, CURLOPT_XFERINFOFUNCTION, callback);
}

CURLcode tiler_curl_get_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}
