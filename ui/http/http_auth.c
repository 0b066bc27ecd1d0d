/* http_auth: key file, constant-time key lookup, token-bucket quotas. */
#include "http_auth.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct http_key {
    char *key;
    size_t len;
    struct http_tenant *tenant;
};

struct http_auth {
    pthread_mutex_t mu;
    struct http_key *keys;
    size_t n_keys;
    struct http_tenant **tenants;   /* one per distinct name */
    size_t n_tenants;
    struct http_tenant anon;        /* when there are no keys */
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static struct http_tenant *tenant_get(struct http_auth *a, const char *name)
{
    for (size_t i = 0; i < a->n_tenants; i++)
        if (strcmp(a->tenants[i]->name, name) == 0) return a->tenants[i];
    struct http_tenant **v = realloc(a->tenants, (a->n_tenants + 1) * sizeof *v);
    if (!v) return NULL;
    a->tenants = v;
    struct http_tenant *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    snprintf(t->name, sizeof t->name, "%s", name);
    a->tenants[a->n_tenants++] = t;
    return t;
}

static int parse_num(const char *v, long long lo, long long hi, long long *out)
{
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi) return -1;
    *out = x;
    return 0;
}

/* One "name=value" option of a key line into t. */
static int key_option(struct http_tenant *t, const char *opt, char *why, size_t n)
{
    const char *eq = strchr(opt, '=');
    if (!eq) return snprintf(why, n, "'%s' is not name=value", opt), -1;
    const char *v = eq + 1;
    size_t kl = (size_t)(eq - opt);
    long long x;
#define IS(s) (kl == strlen(s) && memcmp(opt, s, kl) == 0)
    if (IS("priority")) {
        if (strcmp(v, "interactive") == 0) t->priority = ENGINE_PRIO_INTERACTIVE;
        else if (strcmp(v, "batch") == 0) t->priority = ENGINE_PRIO_BATCH;
        else return snprintf(why, n, "priority must be interactive or batch"), -1;
        return 0;
    }
    if (IS("tenant")) return 0; /* read by the caller */
    if (parse_num(v, 0, 1000000000LL, &x) != 0)
        return snprintf(why, n, "'%s' needs a number 0..1e9", opt), -1;
    if (IS("rpm")) t->rpm = x;
    else if (IS("tpm")) t->tpm = x;
    else if (IS("max_tokens")) t->max_tokens = (int32_t)x;
    else if (IS("concurrency")) t->concurrency = (int32_t)x;
    else if (IS("burst")) t->burst = x;
    else return snprintf(why, n, "unknown option '%.*s'", (int)kl, opt), -1;
#undef IS
    return 0;
}

static int key_line(struct http_auth *a, char *line, char *why, size_t n)
{
    char *save = NULL, *key = strtok_r(line, " \t", &save);
    if (!key) return 0;
    if (strlen(key) < 8) return snprintf(why, n, "key shorter than 8 characters"), -1;
    char *opts[16];
    int n_opts = 0;
    const char *tenant = NULL;
    for (char *o; (o = strtok_r(NULL, " \t", &save));) {
        if (n_opts == 16) return snprintf(why, n, "too many options"), -1;
        opts[n_opts++] = o;
        if (strncmp(o, "tenant=", 7) == 0) tenant = o + 7;
    }
    if (!tenant || !tenant[0]) return snprintf(why, n, "missing tenant=NAME"), -1;
    struct http_tenant *t = tenant_get(a, tenant);
    struct http_key *v = realloc(a->keys, (a->n_keys + 1) * sizeof *v);
    if (!t || !v) return snprintf(why, n, "out of memory"), -1;
    a->keys = v;
    for (int i = 0; i < n_opts; i++)
        if (key_option(t, opts[i], why, n) != 0) return -1;
    a->keys[a->n_keys].key = strdup(key);
    a->keys[a->n_keys].len = strlen(key);
    a->keys[a->n_keys].tenant = t;
    if (!a->keys[a->n_keys].key) return snprintf(why, n, "out of memory"), -1;
    a->n_keys++;
    return 0;
}

static int load_keys(struct http_auth *a, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) return snprintf(err, errlen, "%s: %s", path, strerror(errno)), -1;
    char line[1024], why[256];
    int lineno = 0, rc = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        line[strcspn(line, "#\r\n")] = 0;
        if (key_line(a, line, why, sizeof why) != 0) {
            snprintf(err, errlen, "%s:%d: %s", path, lineno, why);
            rc = -1;
            break;
        }
    }
    fclose(f);
    if (rc == 0 && a->n_keys == 0)
        return snprintf(err, errlen, "%s: no keys in the file", path), -1;
    return rc;
}

int http_auth_open(struct http_auth **out, const char *path, char *err, size_t errlen)
{
    struct http_auth *a = calloc(1, sizeof *a);
    *out = NULL;
    if (!a) return snprintf(err, errlen, "out of memory"), -1;
    pthread_mutex_init(&a->mu, NULL);
    snprintf(a->anon.name, sizeof a->anon.name, "default");
    if (path && load_keys(a, path, err, errlen) != 0) {
        http_auth_close(a);
        return -1;
    }
    double now = now_s();
    for (size_t i = 0; i < a->n_tenants; i++) {
        struct http_tenant *t = a->tenants[i];
        if (!t->burst) t->burst = t->rpm;
        t->req_tokens = (double)t->burst;
        t->tok_tokens = (double)t->tpm;
        t->t_refill = now;
    }
    *out = a;
    return 0;
}

void http_auth_close(struct http_auth *a)
{
    if (!a) return;
    for (size_t i = 0; i < a->n_keys; i++) {
        /* Keys do not outlive the server in freed heap memory. */
        volatile char *k = a->keys[i].key;
        for (size_t j = 0; j < a->keys[i].len; j++) k[j] = 0;
        free(a->keys[i].key);
    }
    for (size_t i = 0; i < a->n_tenants; i++) free(a->tenants[i]);
    free(a->keys);
    free(a->tenants);
    pthread_mutex_destroy(&a->mu);
    free(a);
}

bool http_auth_has_keys(const struct http_auth *a) { return a->n_keys > 0; }

/* Constant time in the key's bytes: no early exit on the first difference. */
static bool key_equal(const char *a, size_t alen, const char *b, size_t blen)
{
    unsigned char d = (unsigned char)(alen != blen);
    size_t n = alen < blen ? alen : blen;
    for (size_t i = 0; i < n; i++) d |= (unsigned char)(a[i] ^ b[i]);
    return d == 0;
}

struct http_tenant *http_auth_check(struct http_auth *a, const char *authorization)
{
    if (a->n_keys == 0) return &a->anon;
    if (!authorization || strncasecmp(authorization, "Bearer ", 7) != 0) return NULL;
    const char *k = authorization + 7;
    while (*k == ' ') k++;
    size_t n = strlen(k);
    struct http_tenant *found = NULL;
    for (size_t i = 0; i < a->n_keys; i++) /* every key is compared: time does not say which */
        if (key_equal(a->keys[i].key, a->keys[i].len, k, n)) found = a->keys[i].tenant;
    return found;
}

static void refill(struct http_tenant *t, double now)
{
    double dt = now - t->t_refill;
    t->t_refill = now;
    if (t->rpm) {
        t->req_tokens += dt * (double)t->rpm / 60.0;
        if (t->req_tokens > (double)t->burst) t->req_tokens = (double)t->burst;
    }
    if (t->tpm) {
        t->tok_tokens += dt * (double)t->tpm / 60.0;
        if (t->tok_tokens > (double)t->tpm) t->tok_tokens = (double)t->tpm;
    }
}

int http_auth_admit(struct http_auth *a, struct http_tenant *t, int64_t prompt_tokens,
                    int64_t max_tokens, const char **limit, double *retry_after_s)
{
    int rc = -1;
    pthread_mutex_lock(&a->mu);
    refill(t, now_s());
    double need = (double)(prompt_tokens + max_tokens);
    if (t->concurrency && t->running >= t->concurrency) {
        *limit = "concurrency";
        *retry_after_s = 1;
    } else if (t->rpm && t->req_tokens < 1) {
        *limit = "rpm";
        *retry_after_s = (1 - t->req_tokens) * 60.0 / (double)t->rpm;
    } else if (t->tpm && t->tok_tokens < need) {
        *limit = "tpm";
        *retry_after_s = (need - t->tok_tokens) * 60.0 / (double)t->tpm;
    } else {
        if (t->rpm) t->req_tokens -= 1;
        if (t->tpm) t->tok_tokens -= (double)prompt_tokens;
        t->running++;
        t->n_requests++;
        t->n_prompt += (uint64_t)(prompt_tokens > 0 ? prompt_tokens : 0);
        rc = 0;
    }
    if (rc != 0) t->n_rejected++;
    pthread_mutex_unlock(&a->mu);
    return rc;
}

void http_auth_release(struct http_auth *a, struct http_tenant *t, int64_t generated)
{
    pthread_mutex_lock(&a->mu);
    if (t->running > 0) t->running--;
    if (t->tpm) t->tok_tokens -= (double)generated;
    t->n_generated += (uint64_t)(generated > 0 ? generated : 0);
    pthread_mutex_unlock(&a->mu);
}

void http_auth_count_reject(struct http_auth *a, struct http_tenant *t)
{
    pthread_mutex_lock(&a->mu);
    t->n_rejected++;
    pthread_mutex_unlock(&a->mu);
}

void http_auth_each(struct http_auth *a, void (*fn)(void *ud, const struct http_tenant *t),
                    void *ud)
{
    pthread_mutex_lock(&a->mu);
    if (a->n_keys == 0) fn(ud, &a->anon);
    for (size_t i = 0; i < a->n_tenants; i++) fn(ud, a->tenants[i]);
    pthread_mutex_unlock(&a->mu);
}
