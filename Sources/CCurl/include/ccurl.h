#ifndef CCURL_H
#define CCURL_H
// Typed wrappers for libcurl. They exist only because curl_easy_setopt and curl_easy_getinfo are variadic
// C functions, which Swift cannot call; every other libcurl function is called from Swift directly.
#include <curl/curl.h>

/// Callback type libcurl uses for CURLOPT_WRITEFUNCTION and CURLOPT_HEADERFUNCTION.
typedef size_t (*ccurl_write_callback)(char *data, size_t size, size_t count, void *userdata);

/// curl_easy_setopt for options that take a long.
CURLcode ccurl_setopt_long(CURL *handle, CURLoption option, long value);
/// curl_easy_setopt for options that take a char* (libcurl copies strings, except POSTFIELDS).
CURLcode ccurl_setopt_string(CURL *handle, CURLoption option, const char *value);
/// curl_easy_setopt for options that take a data pointer (WRITEDATA, HEADERDATA, HTTPHEADER list).
CURLcode ccurl_setopt_pointer(CURL *handle, CURLoption option, void *value);
/// curl_easy_setopt for WRITEFUNCTION / HEADERFUNCTION.
CURLcode ccurl_setopt_write_callback(CURL *handle, CURLoption option, ccurl_write_callback callback);
/// curl_easy_setopt for options that take a curl_off_t (POSTFIELDSIZE_LARGE, MAXFILESIZE_LARGE).
CURLcode ccurl_setopt_off_t(CURL *handle, CURLoption option, curl_off_t value);
/// curl_easy_getinfo for CURLINFO_RESPONSE_CODE and other long-valued infos.
CURLcode ccurl_getinfo_long(CURL *handle, CURLINFO info, long *value);
/// curl_easy_getinfo for curl_off_t-valued infos (CURLINFO_PRETRANSFER_TIME_T and the other *_T times).
CURLcode ccurl_getinfo_off_t(CURL *handle, CURLINFO info, curl_off_t *value);

/// Callback type libcurl uses for CURLOPT_XFERINFOFUNCTION; a non-zero return aborts the transfer.
typedef int (*ccurl_xferinfo_callback)(void *userdata, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                                       curl_off_t ulnow);
/// curl_easy_setopt for XFERINFOFUNCTION.
CURLcode ccurl_setopt_xferinfo_callback(CURL *handle, ccurl_xferinfo_callback callback);

#endif
