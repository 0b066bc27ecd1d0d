/* remote_http: the remote engine's HTTP helpers: a bounded byte buffer, the
 * options every libcurl handle gets (timeouts, TLS, the Bearer key), and a
 * blocking request for the caller's thread (open, /tokenize). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "growbuf.h"
#include "remote_impl.h"

int rbuf_add(struct rbuf *b, const char *s, size_t n)
{
    if (b->max && b->len + n > b->max) return -1;
    if (growbuf_reserve(&b->p, &b->cap, b->len + n + 1, 4096)) return -1;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
    return 0;
}

void rbuf_free(struct rbuf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

void remote_easy_common(const struct remote *R, CURL *h, struct curl_slist **hdrs, bool json)
{
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)(R->connect_timeout_s * 1000));
    curl_easy_setopt(h, CURLOPT_USERAGENT, "tern/" "remote");
    curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    if (R->insecure) {
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    if (json) *hdrs = curl_slist_append(*hdrs, "Content-Type: application/json");
    if (R->api_key) {
        char auth[1100];
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", R->api_key);
        *hdrs = curl_slist_append(*hdrs, auth);
    }
}

static size_t sync_body(char *ptr, size_t size, size_t nmemb, void *ud)
{
    size_t n = size * nmemb;
    return rbuf_add(ud, ptr, n) == 0 ? n : 0;
}

long remote_http_sync(const struct remote *R, const char *url, const char *post, struct rbuf *out,
                      double timeout_s, char *err, size_t errlen)
{
    CURL *h = curl_easy_init();
    if (!h) {
        snprintf(err, errlen, "remote: curl_easy_init failed");
        return 0;
    }
    struct curl_slist *hdrs = NULL;
    char cerr[CURL_ERROR_SIZE] = "";
    remote_easy_common(R, h, &hdrs, post != NULL);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    if (post) curl_easy_setopt(h, CURLOPT_POSTFIELDS, post);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(timeout_s * 1000));
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sync_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, cerr);
    out->max = 16u << 20;
    CURLcode rc = curl_easy_perform(h);
    long code = 0;
    if (rc == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    else snprintf(err, errlen, "%s: %s", url, cerr[0] ? cerr : curl_easy_strerror(rc));
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(h);
    return code;
}

