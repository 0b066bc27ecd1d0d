/* contract: reading, planning and judging an acceptance contract (see
 * contract.h and docs/CONTRACT.md). */
#include "contract.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "route.h"

/* ---------------------------------------------------------------- values */

/* Where a value came from, for the message. */
struct at {
    const char *path;
    int line;
    const char *key;
    char *err;
    size_t errlen;
};

static int bad(const struct at *a, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(a->err, a->errlen, "%s:%d: %s: %s", a->path, a->line, a->key, msg);
    return -1;
}

static bool number(const char *s, double *out, const char **rest)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || !isfinite(v)) return false;
    while (isspace((unsigned char)*end)) end++;
    *out = v;
    *rest = end;
    return true;
}

static int duration(const struct at *a, const char *v, double *out)
{
    const char *u;
    double x;
    if (!number(v, &x, &u) || x < 0) return bad(a, "'%s' is not a duration (e.g. 250ms, 1.5s)", v);
    if (!*u || !strcmp(u, "s")) *out = x;
    else if (!strcmp(u, "ms")) *out = x / 1e3;
    else if (!strcmp(u, "us")) *out = x / 1e6;
    else return bad(a, "'%s': unit '%s' is not s, ms or us", v, u);
    return 0;
}

/* 5% or 0.05 */
static int share(const struct at *a, const char *v, double *out)
{
    const char *u;
    double x;
    if (!number(v, &x, &u)) return bad(a, "'%s' is not a share (e.g. 10%% or 0.1)", v);
    if (!strcmp(u, "%")) x /= 100;
    else if (*u) return bad(a, "'%s' is not a share (e.g. 10%% or 0.1)", v);
    if (x < 0 || x > 1) return bad(a, "'%s' is not between 0 and 100%%", v);
    *out = x;
    return 0;
}

static int count(const struct at *a, const char *v, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (end == v || *end || errno || x < lo || x > hi)
        return bad(a, "'%s' is not a whole number in %ld-%ld", v, lo, hi);
    *out = x;
    return 0;
}

/* 2, 2/s */
static int rate(const struct at *a, const char *v, double *out)
{
    const char *u;
    double x;
    if (!number(v, &x, &u) || x <= 0 || (*u && strcmp(u, "/s")))
        return bad(a, "'%s' is not a rate in requests/s (e.g. 2 or 2/s)", v);
    *out = x;
    return 0;
}

/* "32:50%, 64-128:50%": token lengths (or ranges) and their shares. */
static int buckets(const struct at *a, const char *v, struct contract_bucket *b, int *n)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", v);
    double sum = 0;
    *n = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        while (isspace((unsigned char)*t)) t++;
        if (*n == CONTRACT_MAX_BUCKETS) return bad(a, "more than %d buckets", CONTRACT_MAX_BUCKETS);
        char *colon = strchr(t, ':');
        if (!colon) return bad(a, "bucket '%s' is not TOKENS:SHARE (e.g. 128:40%%)", t);
        *colon = 0;
        long lo, hi;
        char *end;
        lo = strtol(t, &end, 10);
        hi = lo;
        if (*end == '-') hi = strtol(end + 1, &end, 10);
        while (isspace((unsigned char)*end)) end++;
        if (end == t || *end || lo < 1 || hi < lo || hi > 1 << 20)
            return bad(a, "bucket '%s' is not a token count or LO-HI range (1-1048576)", t);
        double s;
        if (share(a, colon + 1, &s) != 0) return -1;
        b[*n] = (struct contract_bucket){(int32_t)lo, (int32_t)hi, s};
        sum += s;
        (*n)++;
    }
    if (!*n) return bad(a, "no buckets");
    if (fabs(sum - 1) > 0.005) return bad(a, "the shares add up to %.1f%%, not 100%%", sum * 100);
    return 0;
}

/* "chat:interactive:70%, nightly:batch:30%" */
static int tenants(const struct at *a, const char *v, struct contract *c)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", v);
    double sum = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        while (isspace((unsigned char)*t)) t++;
        if (c->n_tenants == CONTRACT_MAX_TENANTS)
            return bad(a, "more than %d tenants", CONTRACT_MAX_TENANTS);
        char *p1 = strchr(t, ':'), *p2 = p1 ? strchr(p1 + 1, ':') : NULL;
        if (!p1 || !p2) return bad(a, "tenant '%s' is not NAME:PRIORITY:SHARE", t);
        *p1 = *p2 = 0;
        struct contract_tenant *tn = &c->tenants[c->n_tenants];
        if (!*t || strlen(t) >= sizeof tn->name) return bad(a, "tenant name '%s' is empty or long", t);
        snprintf(tn->name, sizeof tn->name, "%s", t);
        if (!strcmp(p1 + 1, "batch")) tn->batch = true;
        else if (strcmp(p1 + 1, "interactive"))
            return bad(a, "tenant %s: priority '%s' is not interactive or batch", t, p1 + 1);
        if (share(a, p2 + 1, &tn->share) != 0) return -1;
        sum += tn->share;
        c->n_tenants++;
    }
    if (fabs(sum - 1) > 0.005) return bad(a, "the tenants' shares add up to %.1f%%, not 100%%", sum * 100);
    return 0;
}

static int path_value(const struct at *a, const struct contract *c, const char *v, char **out)
{
    free(*out);
    if (v[0] == '/' || !c->dir) *out = strdup(v);
    else if (asprintf(out, "%s/%s", c->dir, v) < 0) *out = NULL;
    return *out ? 0 : bad(a, "out of memory");
}

static int text_value(const struct at *a, const char *v, char **out)
{
    free(*out);
    *out = strdup(v);
    return *out ? 0 : bad(a, "out of memory");
}

/* ------------------------------------------------------------------ keys */

static int target(const struct at *a, struct contract *c, const char *v)
{
    if (c->n_targets == CONTRACT_MAX_TARGETS) return bad(a, "more than %d targets", CONTRACT_MAX_TARGETS);
    struct contract_target *t = &c->targets[c->n_targets];
    memset(t, 0, sizeof *t);
    snprintf(t->key, sizeof t->key, "%s", a->key);
    t->line = a->line;
    const char *k = a->key + 7; /* after "target." */
    static const char *const lat[] = {"ttft", "tpot", "e2e"};
    /* target.TENANT.ttft.p99: a tenant's own latency (checked against
     * workload.tenants once the whole file is read) */
    const char *dot = strchr(k, '.');
    bool metric_first = false;
    for (int m = 0; m < 3; m++)
        metric_first |= dot && (size_t)(dot - k) == strlen(lat[m]) && !strncmp(k, lat[m], strlen(lat[m]));
    if (dot && !metric_first) {
        size_t l = (size_t)(dot - k);
        if (!l || l >= sizeof t->tenant) return bad(a, "tenant name empty or longer than 31");
        memcpy(t->tenant, k, l);
        t->tenant[l] = 0;
        k = dot + 1;
    }
    for (int m = 0; m < 3; m++) {
        size_t l = strlen(lat[m]);
        if (strncmp(k, lat[m], l) || k[l] != '.') continue;
        const char *p = k + l + 1;
        if (strcmp(p, "p50") && strcmp(p, "p90") && strcmp(p, "p99"))
            return bad(a, "unknown percentile '%s' (p50, p90 or p99)", p);
        t->metric = (enum contract_metric)m;
        t->pct = atoi(p + 1);
        if (duration(a, v, &t->limit) != 0) return -1;
        c->n_targets++;
        return 0;
    }
    if (!strcmp(k, "error-rate")) {
        t->metric = CM_ERROR_RATE;
        if (share(a, v, &t->limit) != 0) return -1;
    } else if (!strcmp(k, "availability")) {
        t->metric = CM_AVAILABILITY;
        if (share(a, v, &t->limit) != 0) return -1;
    } else if (!strcmp(k, "slo-attainment")) {
        t->metric = CM_ATTAINMENT;
        if (share(a, v, &t->limit) != 0) return -1;
    } else if (!strcmp(k, "goodput")) {
        t->metric = CM_GOODPUT;
        if (rate(a, v, &t->limit) != 0) return -1;
    } else {
        return bad(a, "unknown target (ttft|tpot|e2e.p50|p90|p99, error-rate, availability, "
                      "goodput, slo-attainment)");
    }
    c->n_targets++;
    return 0;
}

static int arrival(const struct at *a, struct contract *c, const char *v)
{
    static const char *const names[] = {"closed", "constant", "poisson", "bursts"};
    for (int i = 0; i < 4; i++)
        if (!strcmp(v, names[i])) {
            c->arrival = (enum contract_arrival)i;
            return 0;
        }
    return bad(a, "'%s' is not closed, constant, poisson or bursts", v);
}

static int hex64(const struct at *a, const char *v, char **out)
{
    size_t n = strlen(v);
    for (size_t i = 0; i < n; i++)
        if (!isxdigit((unsigned char)v[i])) n = 0;
    if (n != 64) return bad(a, "'%s' is not a SHA-256 (64 hex digits)", v);
    if (text_value(a, v, out) != 0) return -1;
    for (char *p = *out; *p; p++) *p = (char)tolower((unsigned char)*p);
    return 0;
}

static int set_key(const struct at *a, struct contract *c, const char *k, const char *v)
{
    long x = 0;
    if (!strncmp(k, "target.", 7)) return target(a, c, v);
    if (!strcmp(k, "name")) return text_value(a, v, &c->name);
    if (!strcmp(k, "model.name")) return c->model_line[0] = a->line, text_value(a, v, &c->model_name);
    if (!strcmp(k, "model.sha256")) return c->model_line[1] = a->line, hex64(a, v, &c->model_sha256);
    if (!strcmp(k, "model.revision"))
        return c->model_line[2] = a->line, text_value(a, v, &c->model_revision);
    if (!strcmp(k, "model.licence")) return text_value(a, v, &c->model_licence);
    if (!strcmp(k, "model.source")) return text_value(a, v, &c->model_source);
    if (!strcmp(k, "retention")) return text_value(a, v, &c->retention);
    if (!strcmp(k, "region")) return text_value(a, v, &c->region);
    if (!strcmp(k, "workload.modality"))
        return strcmp(v, "text") ? bad(a, "'%s': tern serves text only", v) : 0;
    if (!strcmp(k, "workload.requests")) return count(a, v, 1, 100000, &c->requests);
    if (!strcmp(k, "workload.prompt-tokens")) return buckets(a, v, c->prompt, &c->n_prompt);
    if (!strcmp(k, "workload.output-tokens")) return buckets(a, v, c->output, &c->n_output);
    if (!strcmp(k, "workload.prompts")) return path_value(a, c, v, &c->prompts);
    if (!strcmp(k, "workload.arrival")) return arrival(a, c, v);
    if (!strcmp(k, "workload.rate")) return rate(a, v, &c->rate);
    if (!strcmp(k, "workload.burst-size")) return count(a, v, 1, 4096, &c->burst);
    if (!strcmp(k, "workload.concurrency")) return count(a, v, 1, 4096, &c->concurrency);
    if (!strcmp(k, "workload.peak-concurrency")) return count(a, v, 1, 4096, &c->peak);
    if (!strcmp(k, "workload.streamed")) return share(a, v, &c->streamed);
    if (!strcmp(k, "workload.cancelled")) return share(a, v, &c->cancelled);
    if (!strcmp(k, "workload.slow-readers")) return share(a, v, &c->slow_readers);
    if (!strcmp(k, "workload.tenants")) return tenants(a, v, c);
    if (!strcmp(k, "workload.seed")) {
        if (count(a, v, 0, 0x7fffffffL, &x) != 0) return -1;
        c->seed = (uint64_t)x;
        return 0;
    }
    if (!strcmp(k, "goodput.ttft")) return duration(a, v, &c->slo_ttft);
    if (!strcmp(k, "goodput.tpot")) return duration(a, v, &c->slo_tpot);
    if (!strcmp(k, "fallback.route")) {
        struct route_spec rs;
        char why[256];
        if (route_parse(v, &rs, why, sizeof why) != 0) return bad(a, "%s", why);
        return text_value(a, v, &c->route);
    }
    if (!strcmp(k, "fallback.route-ttft")) return duration(a, v, &c->route_ttft);
    if (!strcmp(k, "quality.text")) return path_value(a, c, v, &c->quality_text);
    if (!strcmp(k, "quality.max-perplexity")) {
        const char *u;
        if (!number(v, &c->max_perplexity, &u) || *u || c->max_perplexity < 1)
            return bad(a, "'%s' is not a perplexity (a number >= 1)", v);
        return 0;
    }
    if (!strcmp(k, "quality.ctx")) return count(a, v, 16, 1 << 20, &c->ppl_ctx);
    if (!strcmp(k, "quality.chunks")) return count(a, v, 1, 1 << 20, &c->ppl_chunks);
    if (!strcmp(k, "quality.prompts")) return path_value(a, c, v, &c->quality_prompts);
    if (!strcmp(k, "quality.min-accuracy")) return share(a, v, &c->min_accuracy);
    if (!strcmp(k, "quality.max-tokens")) return count(a, v, 1, 1 << 16, &c->quality_max_tokens);
    return bad(a, "unknown key (see docs/CONTRACT.md)");
}

/* A '#' after white space starts a comment (values never need one). */
static void strip_comment(char *v)
{
    for (char *p = v; *p; p++)
        if (*p == '#' && (p == v || isspace((unsigned char)p[-1]))) {
            *p = 0;
            break;
        }
    size_t n = strlen(v);
    while (n && isspace((unsigned char)v[n - 1])) v[--n] = 0;
}

static int missing(const struct contract *c, const char *key, const char *why, char *err,
                   size_t errlen)
{
    snprintf(err, errlen, "%s: %s: missing (%s)", c->path, key, why);
    return -1;
}

static int line_of(const struct config *cfg, const char *key)
{
    for (size_t i = 0; i < cfg->n; i++)
        if (!strcmp(cfg->entries[i].key, key)) return cfg->entries[i].line;
    return 0;
}

/* What no single key can say: required keys and keys that need each other. */
static int check_whole(struct contract *c, const struct config *cfg, char *err, size_t errlen)
{
    struct at a = {c->path, 0, "", err, errlen};
    if (!c->model_name && !c->model_sha256 && !c->model_revision)
        return missing(c, "model.name", "a contract names its model: model.name, model.sha256 "
                                        "or model.revision", err, errlen);
    if (!c->requests) return missing(c, "workload.requests", "how many requests a run sends", err, errlen);
    if (c->prompts && c->n_prompt) {
        a.line = line_of(cfg, "workload.prompt-tokens");
        a.key = "workload.prompt-tokens";
        return bad(&a, "give prompt lengths or workload.prompts, not both");
    }
    if (!c->prompts && !c->n_prompt)
        return missing(c, "workload.prompt-tokens", "prompt lengths, or workload.prompts", err, errlen);
    if (!c->prompts && !c->n_output)
        return missing(c, "workload.output-tokens", "reply lengths", err, errlen);
    if (c->arrival != CA_CLOSED && c->rate <= 0) {
        a.line = line_of(cfg, "workload.arrival");
        a.key = "workload.arrival";
        return bad(&a, "an open-loop arrival needs workload.rate");
    }
    if (c->arrival == CA_CLOSED && c->peak) {
        a.line = line_of(cfg, "workload.peak-concurrency");
        a.key = "workload.peak-concurrency";
        return bad(&a, "caps an open loop (constant, poisson, bursts); a closed loop keeps "
                       "workload.concurrency in flight");
    }
    if (c->cancelled + c->slow_readers > 1) {
        a.line = line_of(cfg, "workload.slow-readers");
        a.key = "workload.slow-readers";
        return bad(&a, "cancelled and slow readers together are more than 100%%");
    }
    if (!c->n_targets) return missing(c, "target.*", "a contract has at least one target", err, errlen);
    for (int i = 0; i < c->n_targets; i++) {
        const struct contract_target *t = &c->targets[i];
        int k = 0;
        while (t->tenant[0] && k < c->n_tenants && strcmp(c->tenants[k].name, t->tenant)) k++;
        if (t->tenant[0] && k == c->n_tenants) {
            a.key = t->key;
            a.line = t->line;
            return bad(&a, "no tenant '%s' in workload.tenants", t->tenant);
        }
    }
    const char *files[3][2] = {{"workload.prompts", c->prompts}, {"quality.text", c->quality_text},
                               {"quality.prompts", c->quality_prompts}};
    for (int k = 0; k < 3; k++)
        if (files[k][1] && access(files[k][1], R_OK) != 0) {
            a.key = files[k][0];
            a.line = line_of(cfg, files[k][0]);
            return bad(&a, "%s: %s", files[k][1], strerror(errno));
        }
    /* a gate is a pair: name the half that is there, and the half missing */
    static const char *const pairs[2][2] = {{"quality.text", "quality.max-perplexity"},
                                            {"quality.prompts", "quality.min-accuracy"}};
    for (int k = 0; k < 2; k++) {
        int l0 = line_of(cfg, pairs[k][0]), l1 = line_of(cfg, pairs[k][1]);
        if (!l0 == !l1) continue;
        a.key = pairs[k][l0 ? 0 : 1];
        a.line = l0 ? l0 : l1;
        return bad(&a, "needs %s as well", pairs[k][l0 ? 1 : 0]);
    }
    return 0;
}

static void defaults(struct contract *c)
{
    c->arrival = CA_CLOSED;
    c->concurrency = 4;
    c->burst = 4;
    c->streamed = 1;
    c->seed = 1;
    c->ppl_ctx = 256;
    c->ppl_chunks = 4;
    c->quality_max_tokens = 32;
}

/* The goodput SLO: as given, else the p99 targets, else 1 s and 0.2 s. */
static void goodput_slo(struct contract *c)
{
    for (int i = 0; i < c->n_targets; i++) {
        const struct contract_target *t = &c->targets[i];
        if (t->metric == CM_TTFT && t->pct == 99 && c->slo_ttft <= 0) c->slo_ttft = t->limit;
        if (t->metric == CM_TPOT && t->pct == 99 && c->slo_tpot <= 0) c->slo_tpot = t->limit;
    }
    if (c->slo_ttft <= 0) c->slo_ttft = 1.0;
    if (c->slo_tpot <= 0) c->slo_tpot = 0.2;
}

int contract_load(struct contract *c, const char *path, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    defaults(c);
    c->path = strdup(path);
    const char *slash = strrchr(path, '/');
    c->dir = slash ? strndup(path, (size_t)(slash - path)) : strdup(".");
    if (!c->path || !c->dir) return snprintf(err, errlen, "out of memory"), -1;
    struct config cfg;
    if (config_load(&cfg, path, 1, err, errlen) != 0) return -1;
    int rc = 0;
    for (size_t i = 0; i < cfg.n && rc == 0; i++) {
        struct config_entry *e = &cfg.entries[i];
        struct at a = {path, e->line, e->key, err, errlen};
        for (size_t j = 0; j < i && rc == 0; j++)
            if (!strcmp(cfg.entries[j].key, e->key))
                rc = bad(&a, "given twice (first on line %d)", cfg.entries[j].line);
        if (rc) break;
        strip_comment(e->value);
        if (!*e->value) rc = bad(&a, "no value");
        else rc = set_key(&a, c, e->key, e->value);
    }
    if (rc == 0) rc = check_whole(c, &cfg, err, errlen);
    if (rc == 0) goodput_slo(c);
    config_free(&cfg);
    return rc;
}

void contract_free(struct contract *c)
{
    free(c->path);
    free(c->dir);
    free(c->name);
    free(c->model_name);
    free(c->model_sha256);
    free(c->model_revision);
    free(c->model_licence);
    free(c->model_source);
    free(c->retention);
    free(c->region);
    free(c->prompts);
    free(c->route);
    free(c->quality_text);
    free(c->quality_prompts);
    memset(c, 0, sizeof *c);
}

/* --------------------------------------------------------------- planning */

static uint64_t rnd(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double rnd01(uint64_t *s) { return (double)(rnd(s) >> 11) * 0x1.0p-53; }

static int32_t draw(const struct contract_bucket *b, int n, uint64_t *s)
{
    double u = rnd01(s), acc = 0;
    int k = 0;
    while (k < n - 1 && u >= acc + b[k].share) acc += b[k++].share;
    return b[k].lo + (int32_t)(rnd(s) % (uint64_t)(b[k].hi - b[k].lo + 1));
}

/* One prompt-set line: its text and reply length (0: not given). */
static int set_line(const struct contract *c, const cJSON *o, int line, char **text, int32_t *out,
                    char *err, size_t errlen)
{
    const cJSON *p = cJSON_GetObjectItem(o, "prompt"), *mt = cJSON_GetObjectItem(o, "max_tokens");
    const char *reply = NULL;
    *text = NULL;
    if (cJSON_IsString(p)) {
        *text = strdup(p->valuestring);
    } else {
        const cJSON *turn; /* ShareGPT: the first human turn, the reply after it */
        cJSON_ArrayForEach(turn, cJSON_GetObjectItem(o, "conversations")) {
            const cJSON *from = cJSON_GetObjectItem(turn, "from"), *v = cJSON_GetObjectItem(turn, "value");
            if (!cJSON_IsString(from) || !cJSON_IsString(v)) continue;
            bool human = !strcmp(from->valuestring, "human") || !strcmp(from->valuestring, "user");
            if (!*text && human) *text = strdup(v->valuestring);
            else if (*text && !human) {
                reply = v->valuestring;
                break;
            }
        }
    }
    if (!*text || !**text) {
        free(*text);
        *text = NULL;
        snprintf(err, errlen, "%s:%d: neither a \"prompt\" string nor a \"conversations\" array "
                 "with a human turn", c->prompts, line);
        return -1;
    }
    *out = 0;
    if (cJSON_IsNumber(mt) && mt->valuedouble >= 1) *out = (int32_t)mt->valuedouble;
    /* ~4 bytes a token: the reply's length without a tokenizer at hand */
    else if (reply && !c->n_output) *out = (int32_t)(strlen(reply) / 4) + 1;
    if (!*out && !c->n_output) {
        snprintf(err, errlen, "%s:%d: no \"max_tokens\" and no reply, and the contract gives no "
                 "workload.output-tokens", c->prompts, line);
        free(*text);
        *text = NULL;
        return -1;
    }
    return 0;
}

/* Reads the prompt set: texts[] and their reply lengths. */
static int read_set(const struct contract *c, char ***texts, int32_t **lens, int *n, char *err,
                    size_t errlen)
{
    FILE *f = fopen(c->prompts, "r");
    if (!f) {
        snprintf(err, errlen, "%s: workload.prompts: %s", c->prompts, strerror(errno));
        return -1;
    }
    char *buf = NULL;
    size_t cap = 0;
    int line = 0, rc = 0;
    *texts = NULL;
    *lens = NULL;
    *n = 0;
    while (rc == 0 && getline(&buf, &cap, f) > 0) {
        line++;
        const char *s = buf;
        while (isspace((unsigned char)*s)) s++;
        if (!*s) continue;
        cJSON *o = cJSON_Parse(s);
        char *t = NULL;
        int32_t len = 0;
        if (!o) {
            snprintf(err, errlen, "%s:%d: not a JSON object", c->prompts, line);
            rc = -1;
        } else if ((rc = set_line(c, o, line, &t, &len, err, errlen)) == 0) {
            char **nt = realloc(*texts, (size_t)(*n + 1) * sizeof *nt);
            int32_t *nl = realloc(*lens, (size_t)(*n + 1) * sizeof *nl);
            if (nt) *texts = nt;
            if (nl) *lens = nl;
            if (!nt || !nl) {
                free(t);
                snprintf(err, errlen, "out of memory");
                rc = -1;
            } else {
                nt[*n] = t;
                nl[(*n)++] = len;
            }
        }
        cJSON_Delete(o);
    }
    free(buf);
    fclose(f);
    if (rc == 0 && !*n) {
        snprintf(err, errlen, "%s: workload.prompts: no prompt in it", c->prompts);
        rc = -1;
    }
    return rc;
}

/* Arrival of request i at r requests/s. */
static double arrival_at(const struct contract *c, double r, int i, double *clock, uint64_t *s)
{
    switch (c->arrival) {
    case CA_CONSTANT: return i / r;
    case CA_POISSON: return *clock += -log(1.0 - rnd01(s)) / r;
    case CA_BURSTS: return (double)(i / c->burst) * (double)c->burst / r; /* same mean rate */
    case CA_CLOSED: break;
    }
    return 0;
}

int contract_plan(const struct contract *c, double r, struct contract_plan *p, char *err,
                  size_t errlen)
{
    memset(p, 0, sizeof *p);
    if (r <= 0) r = c->rate;
    int n = (int)c->requests, n_set = 0;
    int32_t *lens = NULL;
    char **set = NULL;
    if (c->prompts && read_set(c, &set, &lens, &n_set, err, errlen) != 0) {
        for (int i = 0; i < n_set; i++) free(set[i]);
        free(set);
        free(lens);
        return -1;
    }
    p->v = calloc((size_t)n, sizeof *p->v);
    p->tenant = calloc((size_t)n, sizeof *p->tenant);
    if (set) p->texts = calloc((size_t)n, sizeof *p->texts);
    if (!p->v || !p->tenant || (set && !p->texts)) goto oom;
    p->n = n;
    uint64_t s = c->seed * 0x9e3779b97f4a7c15ull + 7;
    double clock = 0;
    for (int i = 0; i < n; i++) {
        struct bench_load_req *q = &p->v[i];
        q->cancel_after = q->stall_after = -1;
        if (set) {
            if (!(p->texts[i] = strdup(set[i % n_set]))) goto oom;
            q->prompt = p->texts[i];
            q->max_tokens = lens[i % n_set] ? lens[i % n_set] : draw(c->output, c->n_output, &s);
        } else {
            q->prompt_tokens = draw(c->prompt, c->n_prompt, &s);
            q->max_tokens = draw(c->output, c->n_output, &s);
        }
        p->tenant[i] = -1;
        double u = rnd01(&s), acc = 0;
        for (int t = 0; t < c->n_tenants && p->tenant[i] < 0; t++)
            if (u < (acc += c->tenants[t].share) || t == c->n_tenants - 1) p->tenant[i] = t;
        q->batch = p->tenant[i] >= 0 && c->tenants[p->tenant[i]].batch;
        u = rnd01(&s);
        if (u < c->cancelled) {
            q->cancel_after = 1 + (int)(rnd(&s) % (uint64_t)(q->max_tokens / 2 + 1));
        } else if (u < c->cancelled + c->slow_readers) {
            /* stops reading after 4 tokens; long enough to outrun the event limit (16) */
            q->stall_after = 4;
            if (q->max_tokens < 32) q->max_tokens = 32;
        }
        q->unstreamed = rnd01(&s) >= c->streamed;
        q->arrival = arrival_at(c, r, i, &clock, &s);
    }
    for (int i = 0; i < n_set; i++) free(set[i]);
    free(set);
    free(lens);
    return 0;
oom:
    for (int i = 0; i < n_set; i++) free(set[i]);
    free(set);
    free(lens);
    contract_plan_free(p);
    snprintf(err, errlen, "out of memory");
    return -1;
}

void contract_plan_free(struct contract_plan *p)
{
    for (int i = 0; p->texts && i < p->n; i++) free(p->texts[i]);
    free(p->texts);
    free(p->v);
    free(p->tenant);
    memset(p, 0, sizeof *p);
}

/* ---------------------------------------------------------------- judging */

const char *contract_metric_name(enum contract_metric m)
{
    static const char *const n[] = {"ttft", "tpot", "e2e", "error-rate", "goodput",
                                    "slo-attainment", "availability"};
    return (unsigned)m < sizeof n / sizeof *n ? n[m] : "?";
}

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static double measured(const struct contract_target *t, const cJSON *s)
{
    char pk[8];
    /* a tenant's target: its own figures (summary.by_tenant has the same keys) */
    if (t->tenant[0]) s = cJSON_GetObjectItem(cJSON_GetObjectItem(s, "by_tenant"), t->tenant);
    double n = num(s, "requests"), planned = num(s, "planned_incomplete");
    switch (t->metric) {
    case CM_TTFT:
    case CM_TPOT:
    case CM_E2E:
        snprintf(pk, sizeof pk, "p%d", t->pct);
        return num(cJSON_GetObjectItem(s, contract_metric_name(t->metric)), pk);
    case CM_AVAILABILITY:
    case CM_ERROR_RATE: {
        const cJSON *st = cJSON_GetObjectItem(s, "statuses");
        double e = 0;
        static const char *const errs[] = {"rejected", "error", "timeout"};
        for (int k = 0; k < 3; k++) {
            double x = num(st, errs[k]);
            if (isfinite(x)) e += x;
        }
        if (n <= 0) return NAN;
        return t->metric == CM_ERROR_RATE ? e / n : 1 - e / n;
    }
    case CM_GOODPUT: return num(s, "goodput_rps");
    case CM_ATTAINMENT:
        if (!isfinite(planned)) planned = 0;
        return n - planned > 0 ? num(s, "slo_met") / (n - planned) : NAN;
    }
    return NAN;
}

cJSON *contract_judge(const struct contract *c, const cJSON *summary, bool *all_pass)
{
    cJSON *rows = cJSON_CreateArray();
    *all_pass = true;
    for (int i = 0; i < c->n_targets; i++) {
        const struct contract_target *t = &c->targets[i];
        double m = measured(t, summary);
        bool lower_bound = t->metric == CM_GOODPUT || t->metric == CM_ATTAINMENT ||
                           t->metric == CM_AVAILABILITY;
        bool pass = isfinite(m) && (lower_bound ? m >= t->limit : m <= t->limit);
        double margin = lower_bound ? m - t->limit : t->limit - m;
        cJSON *r = cJSON_CreateObject();
        cJSON_AddStringToObject(r, "target", t->key);
        cJSON_AddNumberToObject(r, "line", t->line);
        cJSON_AddStringToObject(r, "bound", lower_bound ? "min" : "max");
        cJSON_AddNumberToObject(r, "limit", t->limit);
        if (isfinite(m)) {
            cJSON_AddNumberToObject(r, "measured", m);
            cJSON_AddNumberToObject(r, "margin", margin);
            if (t->limit > 0) cJSON_AddNumberToObject(r, "margin_pct", 100 * margin / t->limit);
        } else { /* nothing measured (no request got that far) fails */
            cJSON_AddNullToObject(r, "measured");
            cJSON_AddNullToObject(r, "margin");
        }
        cJSON_AddStringToObject(r, "unit", t->metric <= CM_E2E ? "s"
                                           : t->metric == CM_GOODPUT ? "req/s" : "share");
        cJSON_AddBoolToObject(r, "pass", pass);
        cJSON_AddItemToArray(rows, r);
        *all_pass &= pass;
    }
    return rows;
}
