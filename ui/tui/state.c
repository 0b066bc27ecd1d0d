/* state: the UI's data model (see state.h). No drawing, no I/O. */
#include "state.h"
#include "think.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ui_params_default(struct ui_params *p)
{
    memset(p, 0, sizeof *p);
    p->temp = ENGINE_DEFAULT_TEMP; /* the engine's own (engine.h), so F4 shows what runs */
    p->top_p = ENGINE_DEFAULT_TOP_P;
    p->max_tokens = 512;
    p->top_k = ENGINE_DEFAULT_TOP_K;
    p->min_p = ENGINE_DEFAULT_MIN_P;
    p->repeat_penalty = ENGINE_DEFAULT_REPEAT_PENALTY;
}

void ui_state_init(struct ui_state *s)
{
    memset(s, 0, sizeof *s);
    ui_params_default(&s->defaults);
    s->params = s->defaults;
    s->timeline_msg = (size_t)-1;
}

static void msg_free(struct ui_msg *m)
{
    free(m->text);
    free(m->note);
}

void ui_state_clear_msgs(struct ui_state *s)
{
    for (size_t i = 0; i < s->n_msgs; i++) msg_free(&s->msgs[i]);
    s->n_msgs = 0;
    s->scroll = 0;
    s->timeline_msg = (size_t)-1;
    s->n_sess_lat = 0;
    s->ctx_first = 0;
    s->tok_s = 0;
    s->ctx_dropped = 0;
    s->ctx_dirty = true;
}

void ui_state_free(struct ui_state *s)
{
    ui_state_clear_msgs(s);
    free(s->msgs);
    for (size_t i = 0; i < s->n_sessions; i++) free(s->sessions[i].title);
    free(s->sessions);
    free(s->sess_ttft);
    free(s->sess_tpot);
    memset(s, 0, sizeof *s);
}

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return 0;
    size_t nc = *cap ? *cap * 2 : 16;
    while (nc < need) nc *= 2;
    void *q = realloc(*p, nc * elem);
    if (!q) return -1;
    *p = q;
    *cap = nc;
    return 0;
}

int ui_state_add_session(struct ui_state *s, int64_t key, const char *title, double created,
                         bool front)
{
    char *t = strdup(title ? title : "");
    if (!t ||
        grow((void **)&s->sessions, &s->cap_sessions, s->n_sessions + 1, sizeof *s->sessions) < 0) {
        free(t);
        return -1;
    }
    size_t at = front ? 0 : s->n_sessions;
    memmove(s->sessions + at + 1, s->sessions + at, (s->n_sessions - at) * sizeof *s->sessions);
    s->sessions[at] = (struct ui_session){.key = key, .title = t, .created = created};
    s->n_sessions++;
    if (front && s->n_sessions > 1) s->cur++, s->sel++;
    return (int)at;
}

void ui_state_remove_session(struct ui_state *s, size_t i)
{
    if (i >= s->n_sessions) return;
    free(s->sessions[i].title);
    memmove(s->sessions + i, s->sessions + i + 1, (s->n_sessions - i - 1) * sizeof *s->sessions);
    s->n_sessions--;
    if (s->cur > i || s->cur >= s->n_sessions) s->cur = s->cur ? s->cur - 1 : 0;
    if (s->sel > i || s->sel >= s->n_sessions) s->sel = s->sel ? s->sel - 1 : 0;
}

int ui_state_rename_session(struct ui_state *s, size_t i, const char *title)
{
    if (i >= s->n_sessions) return -1;
    char *t = strdup(title);
    if (!t) return -1;
    free(s->sessions[i].title);
    s->sessions[i].title = t;
    return 0;
}

int ui_msg_append(struct ui_msg *m, const char *text, size_t len)
{
    if (grow((void **)&m->text, &m->cap, m->len + len + 1, 1) < 0) return -1;
    memcpy(m->text + m->len, text, len);
    m->len += len;
    m->text[m->len] = 0;
    return 0;
}

void ui_state_show_thinking(struct ui_state *s, bool on)
{
    s->show_thinking = on;
    for (size_t i = 0; i < s->n_msgs; i++) s->msgs[i].lay_w = 0; /* laid out anew */
}

void ui_msg_track_think(struct ui_msg *m, double t)
{
    if (m->think == UI_THINK_NONE || m->think == UI_THINK_DONE) return;
    struct ui_think th;
    if (m->think == UI_THINK_UNKNOWN) {
        if (ui_think_pending(m->text, m->len)) return;
        ui_think_split(m->text, m->len, &th);
        if (!th.has) {
            m->think = UI_THINK_NONE;
            return;
        }
        m->think = UI_THINK_OPEN;
        m->think_tokens = m->ph.n_generated; /* the tokens that spelled <think> */
        m->think_seen = th.from;
        if (th.open) {
            m->think_seen = m->len;
            return;
        }
    } else {
        /* only the new bytes, and the tag's length back, can hold </think>:
         * no rescan of the whole thought per token */
        static const char close[] = "</think>";
        const size_t cn = sizeof close - 1;
        size_t i = m->think_seen >= cn ? m->think_seen - (cn - 1) : 0;
        m->think_tokens++;
        m->think_seen = m->len;
        for (; i + cn <= m->len; i++)
            if (m->text[i] == '<' && memcmp(m->text + i, close, cn) == 0) break;
        if (i + cn > m->len) return;
    }
    m->think = UI_THINK_DONE;
    m->think_s = t - m->ph.t0 - m->ph.prefill_end;
}

int ui_msg_set_note(struct ui_msg *m, const char *note)
{
    char *n = note ? strdup(note) : NULL;
    if (note && !n) return -1;
    free(m->note);
    m->note = n;
    return 0;
}

struct ui_msg *ui_state_add_msg(struct ui_state *s, enum ui_role role, const char *text)
{
    if (grow((void **)&s->msgs, &s->cap_msgs, s->n_msgs + 1, sizeof *s->msgs) < 0) return NULL;
    struct ui_msg *m = &s->msgs[s->n_msgs];
    memset(m, 0, sizeof *m);
    m->role = role;
    if (ui_msg_append(m, text ? text : "", text ? strlen(text) : 0) < 0) return NULL;
    s->n_msgs++;
    return m;
}

struct ui_msg *ui_state_find_req(struct ui_state *s, uint64_t id)
{
    for (size_t i = s->n_msgs; i-- > 0;)
        if (s->msgs[i].req_id == id) return &s->msgs[i];
    return NULL;
}

bool ui_state_streaming(const struct ui_state *s)
{
    for (size_t i = 0; i < s->n_msgs; i++)
        if (s->msgs[i].status == UI_MSG_QUEUED || s->msgs[i].status == UI_MSG_STREAMING)
            return true;
    return false;
}

void ui_state_push_itl(struct ui_state *s, double itl_s)
{
    s->spark[s->spark_head] = itl_s;
    s->spark_head = (s->spark_head + 1) % UI_SPARK_N;
    if (s->spark_n < UI_SPARK_N) s->spark_n++;
}

void ui_state_add_latency(struct ui_state *s, double ttft_s, double tpot_s)
{
    size_t need = s->n_sess_lat + 1;
    if (need > s->cap_sess_lat) {
        size_t nc = s->cap_sess_lat ? s->cap_sess_lat * 2 : 32;
        double *a = realloc(s->sess_ttft, nc * sizeof *a);
        if (!a) return;
        s->sess_ttft = a;
        double *b = realloc(s->sess_tpot, nc * sizeof *b);
        if (!b) return;
        s->sess_tpot = b;
        s->cap_sess_lat = nc;
    }
    s->sess_ttft[s->n_sess_lat] = ttft_s;
    s->sess_tpot[s->n_sess_lat] = tpot_s;
    s->n_sess_lat++;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double ui_state_session_pct(const struct ui_state *s, int which, double pct)
{
    const double *src = which ? s->sess_tpot : s->sess_ttft;
    double v[256];
    size_t n = 0;
    /* the newest 256 replies are plenty for a gauge; values < 0 are unmeasured */
    size_t from = s->n_sess_lat > 256 ? s->n_sess_lat - 256 : 0;
    for (size_t i = from; i < s->n_sess_lat; i++)
        if (src[i] >= 0) v[n++] = src[i];
    if (n == 0) return -1;
    qsort(v, n, sizeof *v, cmp_double);
    double r = pct / 100.0 * (double)(n - 1);
    size_t lo = (size_t)r;
    if (lo + 1 >= n) return v[n - 1];
    return v[lo] + (v[lo + 1] - v[lo]) * (r - (double)lo);
}

void ui_state_set_status(struct ui_state *s, bool error, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->status, sizeof s->status, fmt, ap);
    va_end(ap);
    s->status_error = error;
}
