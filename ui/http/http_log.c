/* http_log: JSON-lines access log. */
#include "http_log.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct http_log {
    pthread_mutex_t mu;
    FILE *f;
    bool own;
};

void http_log_default_path(char *buf, size_t n)
{
    const char *x = getenv("XDG_STATE_HOME");
    const char *home = getenv("HOME");
    if (x && x[0]) snprintf(buf, n, "%s/tern/access.log", x);
    else snprintf(buf, n, "%s/.local/state/tern/access.log", home ? home : ".");
}

/* mkdir -p of path's folder, mode 0700. */
static void make_dirs(const char *path)
{
    char d[4096];
    snprintf(d, sizeof d, "%s", path);
    char *slash = strrchr(d, '/');
    if (!slash) return;
    *slash = 0;
    for (char *p = d + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            mkdir(d, 0700);
            *p = '/';
        }
    mkdir(d, 0700);
}

int http_log_open(struct http_log **out, const char *path, char *err, size_t errlen)
{
    struct http_log *l = calloc(1, sizeof *l);
    *out = NULL;
    if (!l) return snprintf(err, errlen, "out of memory"), -1;
    if (strcmp(path, "-") == 0) {
        l->f = stderr;
    } else {
        make_dirs(path);
        int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        if (fd < 0 || !(l->f = fdopen(fd, "a"))) {
            snprintf(err, errlen, "access log %s: %s", path, strerror(errno));
            if (fd >= 0) close(fd);
            free(l);
            return -1;
        }
        l->own = true;
    }
    pthread_mutex_init(&l->mu, NULL);
    *out = l;
    return 0;
}

void http_log_close(struct http_log *l)
{
    if (!l) return;
    if (l->own) fclose(l->f);
    else fflush(l->f);
    pthread_mutex_destroy(&l->mu);
    free(l);
}

static void add_str(cJSON *o, const char *k, const char *v)
{
    if (v) cJSON_AddStringToObject(o, k, v);
    else cJSON_AddNullToObject(o, k);
}

void http_log_write(struct http_log *l, const struct http_log_rec *r)
{
    if (!l) return;
    cJSON *o = cJSON_CreateObject();
    if (!o) return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char t[48];
    size_t k = strftime(t, sizeof t, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(t + k, sizeof t - k, ".%03ldZ", ts.tv_nsec / 1000000);
    add_str(o, "time", t);
    add_str(o, "request_id", r->request_id);
    add_str(o, "tenant", r->tenant);
    add_str(o, "method", r->method);
    add_str(o, "route", r->route);
    cJSON_AddNumberToObject(o, "status", r->status);
    add_str(o, "model", r->model);
    cJSON_AddBoolToObject(o, "stream", r->stream);
    const struct engine_metrics *m = r->m;
    if (m) {
        cJSON_AddNumberToObject(o, "prompt_tokens", m->n_prompt);
        cJSON_AddNumberToObject(o, "cached_tokens", m->n_cached);
        cJSON_AddNumberToObject(o, "generated_tokens", m->n_generated);
        cJSON_AddNumberToObject(o, "queue_s", m->queue_s);
        cJSON_AddNumberToObject(o, "prefill_s", m->prefill_s);
        cJSON_AddNumberToObject(o, "ttft_s", m->ttft_s);
        cJSON_AddNumberToObject(o, "decode_s", m->decode_s);
        cJSON_AddNumberToObject(o, "tpot_s", m->tpot_s);
        cJSON_AddNumberToObject(o, "e2e_s", m->e2e_s);
        cJSON_AddNumberToObject(o, "preemptions", m->n_preempted);
        add_str(o, "engine_status", engine_status_name(m->status));
    }
    cJSON_AddNumberToObject(o, "http_s", r->http_s);
    add_str(o, "finish_reason", r->finish);
    add_str(o, "error", r->error);
    cJSON_AddBoolToObject(o, "client_disconnected", r->disconnected);
    if (r->content) add_str(o, "content", r->content);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!s) return;
    pthread_mutex_lock(&l->mu);
    fputs(s, l->f);
    fputc('\n', l->f);
    fflush(l->f);
    pthread_mutex_unlock(&l->mu);
    free(s);
}
