/* instruments: the F2 panel of gauges (see instruments.h). */
#include "instruments.h"

#include <stdio.h>
#include <string.h>

#include "gauge.h"
#include "text.h"

void ui_fmt_dur(char *buf, size_t n, double s)
{
    if (s < 0)
        snprintf(buf, n, "–");
    else if (s < 1e-3)
        snprintf(buf, n, "%.0f µs", s * 1e6);
    else if (s < 0.1)
        snprintf(buf, n, "%.1f ms", s * 1e3);
    else if (s < 1.0)
        snprintf(buf, n, "%.0f ms", s * 1e3);
    else
        snprintf(buf, n, "%.2f s", s);
}

void ui_fmt_count(char *buf, size_t n, double v)
{
    if (v < 0)
        snprintf(buf, n, "–");
    else if (v < 1000)
        snprintf(buf, n, "%.0f", v);
    else if (v < 99950)
        snprintf(buf, n, "%.1fk", v / 1e3);
    else if (v < 999500)
        snprintf(buf, n, "%.0fk", v / 1e3);
    else
        snprintf(buf, n, "%.1fM", v / 1e6);
}

struct pane {
    WINDOW *w;
    struct ui_rect in;
    const struct ui_theme *t;
    int y;
};

static bool room(const struct pane *p)
{
    return p->y < p->in.y + p->in.h;
}

static bool fits(const struct pane *p, const char *s)
{
    return ui_text_width(s, strlen(s)) <= p->in.w;
}

/* One row in the first of its forms that fits the width (long labels,
 * then compact ones): a number is never cut. */
static void row_fit(struct pane *p, attr_t a, const char *const *forms, int n)
{
    if (!room(p)) return;
    int k = 0;
    while (k + 1 < n && !fits(p, forms[k])) k++;
    ui_draw_str(p->w, p->y++, p->in.x, p->in.w, a, forms[k]);
}

/* Threads and ISA of a CPU device string, "Intel Xeon (2 threads, AVX-512)"
 * or "(1 thread, avx2)" (singular with --threads 1); 0 and "" when absent. */
static void cpu_parse(const char *device, int *threads, char *isa, size_t n)
{
    const char *o = strrchr(device, '(');
    int k = 0;
    *threads = 0;
    isa[0] = 0;
    if (!o || sscanf(o, "(%d thread%n", threads, &k) != 1 || k == 0) {
        *threads = 0;
        return;
    }
    const char *c = strchr(o + k, ',');
    if (!c) return;
    c++;
    while (*c == ' ') c++;
    size_t m = strcspn(c, ")");
    if (m >= n) m = n - 1;
    memcpy(isa, c, m);
    isa[m] = 0;
}

/* "CPU · 2 threads · AVX-512; no GPU found" from a device string like
 * "Intel Xeon (2 threads, AVX-512)": the calm line of a machine without a
 * usable GPU. */
static void cpu_line(const struct ui_state *s, char *out, size_t n)
{
    int threads = 0;
    char isa[48] = "";
    cpu_parse(s->device, &threads, isa, sizeof isa);
    if (threads > 0 && isa[0])
        snprintf(out, n, "CPU · %d thread%s · %s; no GPU found", threads, threads == 1 ? "" : "s",
                 isa);
    else
        snprintf(out, n, "CPU; no GPU found");
}

/* The same in the first form that fits the pane. */
static void cpu_row(struct pane *p, const struct ui_state *s)
{
    char f[4][200], isa[48] = "";
    int threads = 0;
    cpu_parse(s->device, &threads, isa, sizeof isa);
    cpu_line(s, f[0], sizeof f[0]);
    snprintf(f[1], sizeof f[1], "CPU · %d thr · %s · no GPU", threads, isa);
    snprintf(f[2], sizeof f[2], "CPU %d thr %s, no GPU", threads, isa);
    snprintf(f[3], sizeof f[3], "CPU · %d thr · no GPU", threads);
    const char *forms[] = {f[0], f[1], f[2], f[3]};
    row_fit(p, p->t->a[UI_C_DIM], forms, threads > 0 ? 4 : 1);
}

static void section(struct pane *p, const char *name)
{
    if (!room(p)) return;
    int x = p->in.x;
    x += ui_draw_str(p->w, p->y, x, p->in.w, p->t->a[UI_C_TITLE], name);
    ui_draw_fill(p->w, p->y, x + 1, p->in.x + p->in.w - x - 1, p->t->a[UI_C_DIM], "─");
    p->y++;
}

/* "label  value" where value turns to the warning colour past limit. */
static void latency_row(struct pane *p, const char *label, double a, double b, double limit)
{
    if (!room(p)) return;
    char sa[24], sb[24] = "";
    int x = p->in.x;
    ui_fmt_dur(sa, sizeof sa, a);
    if (b > -2) ui_fmt_dur(sb, sizeof sb, b);
    /* aligned columns when they fit, else packed: never a cut number */
    bool packed = 6 + 9 + (b > -2 ? 3 + ui_text_width(sb, strlen(sb)) : 0) > p->in.w;
    x += ui_draw_fmt(p->w, p->y, x, p->in.w, p->t->a[UI_C_DIM], packed ? "%s " : "%-5s ", label);
    attr_t wa = limit > 0 && a > limit ? p->t->a[UI_C_WARN] : p->t->a[UI_C_NORMAL];
    x += ui_draw_fmt(p->w, p->y, x, p->in.x + p->in.w - x, wa, packed ? "%s" : "%9s", sa);
    if (b > -2) {
        attr_t wb = limit > 0 && b > limit ? p->t->a[UI_C_WARN] : p->t->a[UI_C_NORMAL];
        x += ui_draw_str(p->w, p->y, x, p->in.x + p->in.w - x, p->t->a[UI_C_DIM], " / ");
        ui_draw_fmt(p->w, p->y, x, p->in.x + p->in.w - x, wb, "%s", sb);
    }
    p->y++;
}

static const struct ui_msg *last_reply(const struct ui_state *s)
{
    for (size_t i = s->n_msgs; i-- > 0;)
        if (s->msgs[i].role == UI_ROLE_ASSISTANT && s->msgs[i].ph.have) return &s->msgs[i];
    return NULL;
}

/* A remote engine's device is "URL (kind)": "remote · kind" on one row and
 * the URL (without http://, which every one has) on the next, so a narrow
 * pane still shows its host and port. */
static void remote_rows(struct pane *p, const struct ui_state *s)
{
    const struct ui_theme *t = p->t;
    char url[160], kind[48] = "";
    snprintf(url, sizeof url, "%s", s->device);
    char *k = strstr(url, " (");
    size_t n = strlen(url);
    if (k && n && url[n - 1] == ')') {
        url[n - 1] = 0;
        snprintf(kind, sizeof kind, "%s", k + 2);
        *k = 0;
    }
    const char *u = strncmp(url, "http://", 7) == 0 ? url + 7 : url;
    int x = p->in.x;
    x += ui_draw_str(p->w, p->y, x, p->in.w, t->a[UI_C_TITLE], "remote");
    if (kind[0]) ui_draw_fmt(p->w, p->y, x, p->in.x + p->in.w - x, t->a[UI_C_DIM], " · %s", kind);
    p->y++;
    if (room(p)) ui_draw_mid(p->w, p->y++, p->in.x, p->in.w, t->a[UI_C_NORMAL], u);
}

static void draw_model(struct pane *p, const struct ui_state *s)
{
    const struct ui_theme *t = p->t;
    /* long names shorten in the middle: the start and the quant suffix show */
    if (room(p))
        ui_draw_mid(p->w, p->y++, p->in.x, p->in.w, t->a[UI_C_ASSIST],
                    s->model_name[0] ? s->model_name : "(no model)");
    if (room(p) && s->backend_note[0] && !strcmp(s->backend, "cpu")) {
        cpu_row(p, s); /* no usable GPU on a CPU run: one calm line, not a warning */
    } else if (room(p) && !strcmp(s->backend, "remote")) {
        remote_rows(p, s);
    } else if (room(p)) {
        int x = p->in.x;
        x += ui_draw_fmt(p->w, p->y, x, p->in.w, t->a[UI_C_TITLE], "%s ",
                         s->backend[0] ? s->backend : "–");
        ui_draw_mid(p->w, p->y++, x, p->in.x + p->in.w - x, t->a[UI_C_NORMAL], s->device);
    }
    if (s->base_model && room(p))
        ui_draw_str(p->w, p->y++, p->in.x, p->in.w, t->a[UI_C_NOTE], "base model: plain completion");
    if (s->have_stats && s->stats.backend.mem_total > 0 && room(p))
        ui_draw_fmt(p->w, p->y++, p->in.x, p->in.w, t->a[UI_C_DIM], "GPU mem %.1f / %.1f GiB",
                    (double)s->stats.backend.mem_used / 1073741824.0,
                    (double)s->stats.backend.mem_total / 1073741824.0);
}

/* Time between consecutive tokens of the recent replies (per-token TPOT),
 * newest on the right, scaled to the largest shown. */
static void spark_row(struct pane *p, const struct ui_state *s)
{
    if (!room(p)) return;
    int x = p->in.x;
    x += ui_draw_str(p->w, p->y, x, p->in.w, p->t->a[UI_C_DIM], "      ");
    double v[UI_SPARK_N];
    for (size_t i = 0; i < s->spark_n; i++)
        v[i] = s->spark[(s->spark_head + UI_SPARK_N - s->spark_n + i) % UI_SPARK_N];
    ui_gauge_spark(p->w, p->y, x, p->in.x + p->in.w - x, p->t->a[UI_C_DECODE], v, s->spark_n);
    p->y++;
}

/* "ctx 1.2k / 8.2k  15%": the next prompt against what a sequence holds. */
static void draw_context(struct pane *p, const struct ui_state *s)
{
    if (!room(p) || s->n_ctx <= 0) return;
    char a[16], b[16];
    long used = s->ctx_tokens >= 0 ? s->ctx_tokens : 0;
    double frac = (double)used / s->n_ctx;
    ui_fmt_count(a, sizeof a, (double)used);
    ui_fmt_count(b, sizeof b, (double)s->n_ctx);
    attr_t at = frac >= UI_CTX_WARN ? p->t->a[UI_C_WARN] : p->t->a[UI_C_NORMAL];
    int x = p->in.x;
    x += ui_draw_str(p->w, p->y, x, p->in.w, p->t->a[UI_C_DIM], "ctx ");
    x += ui_draw_fmt(p->w, p->y, x, p->in.x + p->in.w - x, at, "%s / %s  %.0f%%", a, b,
                     frac * 100);
    if (s->ctx_dropped > 0)
        ui_draw_fmt(p->w, p->y, x, p->in.x + p->in.w - x, p->t->a[UI_C_DIM], "  -%d turns",
                    s->ctx_dropped);
    p->y++;
}

/* "GB/s 18.8 · 97% read": the weights and the K and V the last reply's
 * decode read per second, against the machine's streaming read at the
 * engine's threads (the decode roofline; a model small enough to sit in the
 * cache can pass it). */
static void decode_roofline_row(struct pane *p, const struct ui_state *s)
{
    if (s->decode_bytes <= 0 || s->tok_s <= 0) return;
    const double gbs = (s->decode_bytes + s->decode_kv_bytes) * s->tok_s / 1e9;
    char f[3][64];
    if (s->read_limit_gbs > 0) {
        const double pct = 100.0 * gbs / s->read_limit_gbs;
        snprintf(f[0], sizeof f[0], "GB/s %10.1f · %.0f%% of read", gbs, pct);
        snprintf(f[1], sizeof f[1], "GB/s %.1f · %.0f%% read", gbs, pct);
        snprintf(f[2], sizeof f[2], "%.1f GB/s %.0f%%", gbs, pct);
    } else {
        snprintf(f[0], sizeof f[0], "GB/s %10.1f", gbs);
        snprintf(f[1], sizeof f[1], "GB/s %.1f", gbs);
        snprintf(f[2], sizeof f[2], "%.1f GB/s", gbs);
    }
    const char *forms[] = {f[0], f[1], f[2]};
    row_fit(p, p->t->a[UI_C_NORMAL], forms, 3);
}

static void draw_latency(struct pane *p, const struct ui_state *s)
{
    const struct engine_stats *st = &s->stats;
    double slo_ttft = s->have_stats ? st->slo_ttft_s : 0,
           slo_tpot = s->have_stats ? st->slo_tpot_s : 0;
    const struct ui_msg *m = last_reply(s);
    section(p, "last reply");
    latency_row(p, "TTFT", m ? m->ph.ttft_s : -1, -3, slo_ttft);
    latency_row(p, "TPOT", m && m->ph.n_generated > 1 ? m->ph.tpot_s : -1, -3, slo_tpot);
    if (room(p) && m && m->ph.n_draft > 0) { /* speculative decoding: guesses kept, tokens a step */
        int32_t steps = m->ph.n_spec_steps > 0 ? m->ph.n_spec_steps : 1;
        ui_draw_fmt(p->w, p->y++, p->in.x, p->in.w, p->t->a[UI_C_NORMAL], "%-6s %3.0f%% %.1f tok/step",
                    m->ph.spec_from_draft ? "draft" : "lookup", 100.0 * m->ph.n_accepted / m->ph.n_draft, 1.0 + (double)m->ph.n_accepted / steps);
    }
    if (room(p) && m && m->think_tokens > 0) { /* a thinking reply: its thought apart */
        char d[24];
        bool live = m->think == UI_THINK_OPEN;
        ui_fmt_dur(d, sizeof d, live ? m->ph.e2e_s - m->ph.prefill_end : m->think_s);
        ui_draw_fmt(p->w, p->y++, p->in.x, p->in.w, p->t->a[UI_C_NORMAL], "think %s %d tok%s", d,
                    m->think_tokens, live ? "…" : "");
    }
    spark_row(p, s);
    if (room(p))
        ui_draw_fmt(p->w, p->y++, p->in.x, p->in.w, p->t->a[UI_C_NORMAL], "tok/s %9.1f", s->tok_s);
    decode_roofline_row(p, s);
    /* prefill rate: prompt tokens computed per second of prefill */
    /* while it prefills, the chunks done so far */
    int32_t computed = m && m->status == UI_MSG_QUEUED ? m->ph.pf_done - m->ph.n_cached
                       : m                             ? m->ph.n_computed
                                                       : 0;
    if (room(p) && m && m->ph.prefill_s > 0 && computed > 0) {
        char r[16], a[48], b[48];
        ui_fmt_count(r, sizeof r, computed / m->ph.prefill_s);
        snprintf(a, sizeof a, "pp %9s tok/s", r);
        snprintf(b, sizeof b, "pp %s tok/s", r);
        const char *forms[] = {a, b};
        row_fit(p, p->t->a[UI_C_NORMAL], forms, 2);
    }
    section(p, "session p50 / p90");
    latency_row(p, "TTFT", ui_state_session_pct(s, 0, 50), ui_state_session_pct(s, 0, 90),
                slo_ttft);
    latency_row(p, "TPOT", ui_state_session_pct(s, 1, 50), ui_state_session_pct(s, 1, 90),
                slo_tpot);
    /* engine-wide figures give way first on a short screen (80x24): the KV
     * cache below matters more to one user */
    if (p->in.h < 20) return;
    section(p, s->have_stats && st->server.remote ? "client p50 / p90" : "engine p50 / p90");
    bool h1 = s->have_stats && st->ttft.count > 0, h2 = s->have_stats && st->tpot.count > 0;
    latency_row(p, "TTFT", h1 ? st->ttft.p50 : -1, h1 ? st->ttft.p90 : -1, slo_ttft);
    latency_row(p, "TPOT", h2 ? st->tpot.p50 : -1, h2 ? st->tpot.p90 : -1, slo_tpot);
}

/* "N" or "n/a" when the server does not export it. */
static const char *num_or_na(char *buf, size_t n, const struct engine_stats *st, unsigned bit,
                             double v, const char *fmt)
{
    if (!engine_stat_known(st, bit)) return "n/a";
    snprintf(buf, n, fmt, v);
    return buf;
}

/* A remote engine: the server's view from its /metrics beside the client's
 * own figures above; what the server does not export says n/a, never 0. */
static void draw_server(struct pane *p, const struct ui_state *s)
{
    const struct engine_stats *st = &s->stats;
    const struct ui_theme *t = p->t;
    char head[64], a[24], b[24], c[24];
    snprintf(head, sizeof head, "server %s", st->server.source[0] ? st->server.source : "");
    section(p, head);
    if (st->paused && room(p)) /* engine_pause: the client holds new requests */
        ui_draw_fmt(p->w, p->y++, p->in.x, p->in.w, t->a[UI_C_WARN],
                    "paused: %d held, none sent", st->server.held);
    if (!st->server.source[0]) {
        if (room(p))
            ui_draw_str(p->w, p->y++, p->in.x, p->in.w, t->a[UI_C_DIM],
                        st->server.scrape_error[0] ? st->server.scrape_error
                                                   : "metrics: n/a from this server");
    } else {
        if (room(p)) { /* the first form that fits: never a cut figure */
            char f[2][96];
            num_or_na(a, sizeof a, st, ENGINE_STAT_WAITING, st->waiting, "%.0f");
            num_or_na(b, sizeof b, st, ENGINE_STAT_RUNNING, st->running, "%.0f");
            num_or_na(c, sizeof c, st, ENGINE_STAT_PREEMPT, (double)st->preemptions, "%.0f");
            snprintf(f[0], sizeof f[0], "queue %s  running %s  preempt %s", a, b, c);
            snprintf(f[1], sizeof f[1], "queue %s run %s preempt %s", a, b, c);
            const char *forms[] = {f[0], f[1]};
            row_fit(p, t->a[UI_C_NORMAL], forms, 2);
        }
        if (room(p) && engine_stat_known(st, ENGINE_STAT_KV_USAGE)) {
            int x = p->in.x;
            x += ui_draw_fmt(p->w, p->y, x, p->in.w, t->a[UI_C_DIM], "KV %3.0f%% ",
                             st->kv_usage * 100);
            double val[2] = {st->kv_usage, 1 - st->kv_usage};
            attr_t at[2] = {t->a[UI_C_KV_USED], t->a[UI_C_KV_FREE]};
            static const char *const cells[2] = {"█", "·"};
            ui_gauge_bar(p->w, p->y, x, p->in.x + p->in.w - x, val, at, cells, 2);
            p->y++;
        } else if (room(p)) {
            ui_draw_str(p->w, p->y++, p->in.x, p->in.w, t->a[UI_C_DIM],
                        "KV n/a from this server");
        }
        bool h1 = engine_stat_known(st, ENGINE_STAT_SRV_TTFT) && st->server.ttft.count > 0;
        bool h2 = engine_stat_known(st, ENGINE_STAT_SRV_ITL) && st->server.itl.count > 0;
        latency_row(p, "sTTFT", h1 ? st->server.ttft.p50 : -1, h1 ? st->server.ttft.p90 : -1, 0);
        latency_row(p, "sITL", h2 ? st->server.itl.p50 : -1, h2 ? st->server.itl.p90 : -1, 0);
        if (room(p))
            ui_draw_fmt(p->w, p->y++, p->in.x, p->in.w, t->a[UI_C_DIM],
                        "prefix hit %s  gen %s tok/s",
                        num_or_na(a, sizeof a, st, ENGINE_STAT_PREFIX, st->prefix_hit_rate * 100,
                                  "%.0f%%"),
                        num_or_na(b, sizeof b, st, ENGINE_STAT_SRV_GEN, st->server.gen_tok_s,
                                  "%.1f"));
    }
    for (int32_t i = 0; i < st->server.n_endpoints && room(p); i++) {
        const struct engine_endpoint *ep = &st->server.endpoint[i];
        ui_draw_fmt(p->w, p->y++, p->in.x, p->in.w,
                    ep->healthy ? t->a[UI_C_GOOD] : t->a[UI_C_WARN], "%s %s %.0fms out %d err %llu",
                    ep->healthy ? "up" : "DOWN", ep->url, ep->health_latency_s * 1e3,
                    ep->outstanding, (unsigned long long)ep->errors);
    }
}

/* A tern server's tenants and its last requests (its /v1/tern/status): who
 * is calling and where each request's time went, newest first. */
static void draw_server_recent(struct pane *p, const struct engine_stats *st)
{
    const struct ui_theme *t = p->t;
    const struct engine_server_stats *sv = &st->server;
    if (sv->n_tenants > 0 && room(p)) section(p, "server tenants");
    for (int32_t i = 0; i < sv->n_tenants && room(p); i++) {
        const struct engine_server_tenant *tn = &sv->tenants[i];
        char tok[16];
        ui_fmt_count(tok, sizeof tok, (double)tn->tokens);
        ui_draw_fmt(p->w, p->y++, p->in.x, p->in.w, t->a[UI_C_NORMAL],
                    "%-8.8s %2d req %5.0fms %5s tok", tn->name, tn->requests,
                    tn->ttft_p50_s * 1e3, tok);
    }
    if (sv->n_recent > 0 && room(p)) section(p, "server recent");
    if (sv->n_recent > 0 && room(p))
        ui_draw_str(p->w, p->y++, p->in.x, p->in.w, t->a[UI_C_DIM],
                    "tenant  kind end  TTFT   E2E ms p/g");
    for (int32_t i = 0; i < sv->n_recent && room(p); i++) {
        const struct engine_server_req *q = &sv->recent[i];
        bool good = !strcmp(q->status, "stop") || !strcmp(q->status, "length") ||
                    !strcmp(q->status, "ok");
        const char *end = !strcmp(q->status, "length") ? "len" : q->status;
        ui_draw_fmt(p->w, p->y++, p->in.x, p->in.w, good ? t->a[UI_C_NORMAL] : t->a[UI_C_WARN],
                    "%-7.7s %-4s %-4.4s%5.0f %5.0f %d/%d", q->tenant, q->route, end,
                    q->ttft_s * 1e3, q->e2e_s * 1e3, q->n_prompt, q->n_generated);
    }
}

static void draw_kv(struct pane *p, const struct ui_state *s)
{
    const struct engine_stats *st = &s->stats;
    const struct ui_theme *t = p->t;
    char head[64];
    if (s->have_stats)
        snprintf(head, sizeof head, "KV %d blk × %d tok", st->kv_total, st->kv_block_tokens);
    else
        snprintf(head, sizeof head, "engine");
    if (s->have_stats && st->server.remote) {
        draw_server(p, s);
        draw_server_recent(p, st);
        return;
    }
    section(p, head);
    if (!s->have_stats) {
        if (room(p)) ui_draw_str(p->w, p->y++, p->in.x, p->in.w, t->a[UI_C_DIM], "not running");
        return;
    }
    char f1[64], f2[64], f3[64], reqs[16];
    ui_fmt_count(reqs, sizeof reqs, (double)st->submitted);
    snprintf(f1, sizeof f1, "queue %d  running %d  reqs %s", st->waiting, st->running, reqs);
    snprintf(f2, sizeof f2, "queue %d run %d reqs %s", st->waiting, st->running, reqs);
    snprintf(f3, sizeof f3, "q %d run %d req %s", st->waiting, st->running, reqs);
    const char *qf[] = {f1, f2, f3};
    row_fit(p, t->a[UI_C_NORMAL], qf, 3);
    if (room(p)) {
        int x = p->in.x;
        x += ui_draw_str(p->w, p->y, x, p->in.w, t->a[UI_C_DIM], "KV ");
        double val[3] = {st->kv_used, st->kv_cached, st->kv_free};
        attr_t at[3] = {t->a[UI_C_KV_USED], t->a[UI_C_KV_CACHED], t->a[UI_C_KV_FREE]};
        static const char *const cells[3] = {"█", "▒", "·"};
        ui_gauge_bar(p->w, p->y, x, p->in.x + p->in.w - x, val, at, cells, 3);
        p->y++;
    }
    if (room(p)) {
        /* the legend with its labels, or only the glyphs when narrow */
        char u[24], c[24], f[24];
        snprintf(u, sizeof u, "%d", st->kv_used);
        snprintf(c, sizeof c, "%d", st->kv_cached);
        snprintf(f, sizeof f, "%d", st->kv_free);
        bool full = ui_text_width(u, strlen(u)) + ui_text_width(c, strlen(c)) +
                        ui_text_width(f, strlen(f)) + 21 <= p->in.w;
        int x = p->in.x, end = p->in.x + p->in.w;
        x += ui_draw_fmt(p->w, p->y, x, end - x, t->a[UI_C_KV_USED], full ? "█used %s " : "█%s ", u);
        x += ui_draw_fmt(p->w, p->y, x, end - x, t->a[UI_C_KV_CACHED],
                         full ? "▒cached %s " : "▒%s ", c);
        ui_draw_fmt(p->w, p->y, x, end - x, t->a[UI_C_DIM], full ? "·free %s" : "·%s free", f);
        p->y++;
    }
    snprintf(f1, sizeof f1, "prefix hit %4.0f%%  preempt %llu", st->prefix_hit_rate * 100.0,
             (unsigned long long)st->preemptions);
    snprintf(f2, sizeof f2, "hit %.0f%% preempt %llu", st->prefix_hit_rate * 100.0,
             (unsigned long long)st->preemptions);
    const char *hf[] = {f1, f2};
    row_fit(p, t->a[UI_C_NORMAL], hf, 2);
}

void ui_instruments_draw(WINDOW *w, struct ui_rect r, const struct ui_state *s,
                         const struct ui_theme *t)
{
    ui_draw_box(w, r, t->a[UI_C_TITLE], "instruments F2");
    struct pane p = {w, {r.y + 1, r.x + 1, r.h - 2, r.w - 2}, t, r.y + 1};
    if (p.in.h <= 0 || p.in.w <= 0) return;
    draw_model(&p, s);
    draw_context(&p, s);
    draw_latency(&p, s);
    draw_kv(&p, s);
    /* another backend's fallback note (a CPU run says it on its second row) */
    if (s->backend_note[0] && strcmp(s->backend, "cpu") && room(&p))
        ui_draw_mid(w, p.y++, p.in.x, p.in.w, t->a[UI_C_DIM], s->backend_note);
}
