/* prom: Prometheus text exposition parser and histogram queries. */
#include "prom.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool name_char(char c, bool first)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
           (!first && c >= '0' && c <= '9');
}

/* Value of label key in raw label text (handles \" escapes); false if absent. */
static bool label_value(const char *labels, const char *key, char *out, size_t n)
{
    size_t kl = strlen(key);
    const char *p = labels;
    while (*p) {
        while (*p == ' ' || *p == ',') p++;
        const char *k = p;
        while (*p && *p != '=') p++;
        if (*p != '=' || p[1] != '"') return false;
        bool match = (size_t)(p - k) == kl && memcmp(k, key, kl) == 0;
        p += 2;
        size_t o = 0;
        while (*p && *p != '"') {
            if (*p == '\\' && p[1]) p++;
            if (match && o + 1 < n) out[o++] = *p;
            p++;
        }
        if (*p != '"') return false;
        p++;
        if (match) {
            out[o] = 0;
            return true;
        }
    }
    return false;
}

static double parse_value(const char *s, char **end)
{
    while (*s == ' ') s++;
    if (strncmp(s, "+Inf", 4) == 0) { *end = (char *)s + 4; return INFINITY; }
    if (strncmp(s, "-Inf", 4) == 0) { *end = (char *)s + 4; return -INFINITY; }
    if (strncmp(s, "NaN", 3) == 0) { *end = (char *)s + 3; return NAN; }
    return strtod(s, end);
}

static int push(struct prom_doc *d, const char *name, size_t nl, const char *lab, size_t ll,
                double v)
{
    if (d->n == d->cap) {
        int32_t cap = d->cap ? d->cap * 2 : 256;
        void *p = realloc(d->s, (size_t)cap * sizeof *d->s);
        if (!p) return -1;
        d->s = p;
        d->cap = cap;
    }
    struct prom_sample *s = &d->s[d->n];
    s->name = strndup(name, nl);
    s->labels = strndup(lab, ll);
    if (!s->name || !s->labels) {
        free(s->name);
        free(s->labels);
        return -1;
    }
    char le[64];
    s->le = NAN;
    if (label_value(s->labels, "le", le, sizeof le)) {
        char *end;
        s->le = parse_value(le, &end);
    }
    s->value = v;
    d->n++;
    return 0;
}

/* One sample line (NUL-terminated copy); 1 parsed, 0 malformed, -1 OOM. */
static int parse_line(struct prom_doc *d, const char *l)
{
    const char *p = l;
    if (!name_char(*p, true)) return 0;
    while (name_char(*p, false)) p++;
    size_t nl = (size_t)(p - l);
    const char *lab = "";
    size_t ll = 0;
    if (*p == '{') {
        lab = ++p;
        bool q = false;
        while (*p && (q || *p != '}')) {
            if (q && *p == '\\' && p[1]) p++;
            else if (*p == '"') q = !q;
            p++;
        }
        if (*p != '}') return 0;
        ll = (size_t)(p - lab);
        p++;
    }
    if (*p != ' ' && *p != '\t') return 0;
    while (*p == ' ' || *p == '\t') p++;
    char *end;
    double v = parse_value(p, &end);
    if (end == p) return 0;
    /* Then only an optional integer timestamp. */
    while (*end == ' ' || *end == '\t') end++;
    if (*end == '-') end++;
    while (*end >= '0' && *end <= '9') end++;
    if (*end) return 0;
    return push(d, l, nl, lab, ll, v) == 0 ? 1 : -1;
}

int prom_parse(const char *text, size_t len, struct prom_doc *d, char *err, size_t errlen)
{
    char line[4096];
    size_t i = 0;
    while (i < len) {
        size_t j = i;
        while (j < len && text[j] != '\n') j++;
        size_t n = j - i;
        if (n > 0 && text[i] != '#') {
            if (n >= sizeof line) {
                d->n_bad++; /* longer than any real sample line */
            } else {
                memcpy(line, text + i, n);
                line[n] = 0;
                if (n && line[n - 1] == '\r') line[n - 1] = 0;
                int rc = parse_line(d, line);
                if (rc < 0) {
                    snprintf(err, errlen, "prom: out of memory");
                    return -1;
                }
                if (rc == 0) d->n_bad++;
            }
        }
        i = j + 1;
    }
    return 0;
}

void prom_free(struct prom_doc *d)
{
    for (int32_t i = 0; i < d->n; i++) {
        free(d->s[i].name);
        free(d->s[i].labels);
    }
    free(d->s);
    memset(d, 0, sizeof *d);
}

bool prom_sum(const struct prom_doc *d, const char *name, double *out)
{
    bool found = false;
    double s = 0;
    for (int32_t i = 0; i < d->n; i++)
        if (strcmp(d->s[i].name, name) == 0 && !isnan(d->s[i].value)) {
            s += d->s[i].value;
            found = true;
        }
    if (found) *out = s;
    return found;
}

bool prom_sum_label(const struct prom_doc *d, const char *name, const char *key, const char *value,
                    double *out)
{
    bool found = false;
    double s = 0;
    char v[128];
    for (int32_t i = 0; i < d->n; i++)
        if (strcmp(d->s[i].name, name) == 0 && !isnan(d->s[i].value) &&
            label_value(d->s[i].labels, key, v, sizeof v) && strcmp(v, value) == 0) {
            s += d->s[i].value;
            found = true;
        }
    if (found) *out = s;
    return found;
}

bool prom_mean(const struct prom_doc *d, const char *name, double *out)
{
    int n = 0;
    double s = 0;
    for (int32_t i = 0; i < d->n; i++)
        if (strcmp(d->s[i].name, name) == 0 && !isnan(d->s[i].value)) {
            s += d->s[i].value;
            n++;
        }
    if (n) *out = s / n;
    return n > 0;
}

bool prom_has_prefix(const struct prom_doc *d, const char *prefix)
{
    size_t n = strlen(prefix);
    for (int32_t i = 0; i < d->n; i++)
        if (strncmp(d->s[i].name, prefix, n) == 0) return true;
    return false;
}

static void hist_add(struct prom_hist *h, double le, double v)
{
    int32_t i = 0;
    while (i < h->n && h->le[i] < le) i++;
    if (i < h->n && h->le[i] == le) {
        h->cum[i] += v;
        return;
    }
    if (h->n == PROM_MAX_BUCKETS) return;
    memmove(&h->le[i + 1], &h->le[i], (size_t)(h->n - i) * sizeof h->le[0]);
    memmove(&h->cum[i + 1], &h->cum[i], (size_t)(h->n - i) * sizeof h->cum[0]);
    h->le[i] = le;
    h->cum[i] = v;
    h->n++;
}

bool prom_hist_get(const struct prom_doc *d, const char *base, struct prom_hist *out)
{
    char bn[256], sn[256], cn[256];
    snprintf(bn, sizeof bn, "%s_bucket", base);
    snprintf(sn, sizeof sn, "%s_sum", base);
    snprintf(cn, sizeof cn, "%s_count", base);
    memset(out, 0, sizeof *out);
    for (int32_t i = 0; i < d->n; i++)
        if (strcmp(d->s[i].name, bn) == 0 && !isnan(d->s[i].le))
            hist_add(out, d->s[i].le, d->s[i].value);
    if (out->n == 0) return false;
    prom_sum(d, sn, &out->sum);
    if (!prom_sum(d, cn, &out->count)) out->count = out->cum[out->n - 1];
    return true;
}

void prom_hist_delta(const struct prom_hist *cur, const struct prom_hist *prev,
                     struct prom_hist *out)
{
    *out = *cur;
    if (!prev || prev->n != cur->n || prev->count > cur->count) return;
    for (int32_t i = 0; i < cur->n; i++) {
        if (prev->le[i] != cur->le[i] || prev->cum[i] > cur->cum[i]) {
            *out = *cur;
            return;
        }
        out->cum[i] = cur->cum[i] - prev->cum[i];
    }
    out->sum = cur->sum - prev->sum;
    out->count = cur->count - prev->count;
}

double prom_hist_quantile(const struct prom_hist *h, double q)
{
    if (h->n == 0) return NAN;
    double total = h->cum[h->n - 1];
    if (total <= 0) return NAN;
    double rank = q * total;
    double lo = 0, below = 0;
    for (int32_t i = 0; i < h->n; i++) {
        if (h->cum[i] >= rank) {
            if (isinf(h->le[i])) return i > 0 ? h->le[i - 1] : NAN;
            double in = h->cum[i] - below;
            if (in <= 0) return h->le[i];
            if (i == 0 && h->le[0] <= 0) return h->le[0];
            return lo + (h->le[i] - lo) * (rank - below) / in;
        }
        lo = isinf(h->le[i]) ? lo : h->le[i];
        below = h->cum[i];
    }
    return lo;
}
