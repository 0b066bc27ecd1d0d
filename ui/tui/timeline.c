/* timeline: drawing one reply's phases (see timeline.h). */
#include "timeline.h"

#include <stdio.h>
#include <string.h>

#include "instruments.h"
#include "text.h"

static int width(const char *s)
{
    return ui_text_width(s, strlen(s));
}

/* Columns for [t0, t1) of a total on a bar of width cols. */
static int cols_of(double t0, double t1, double total, int cols)
{
    if (total <= 0) return 0;
    int a = (int)(t0 / total * cols + 0.5), b = (int)(t1 / total * cols + 0.5);
    return b - a;
}

static void draw_bar(WINDOW *w, int y, int x, int cols, const struct ui_phase *ph,
                     const struct ui_theme *t)
{
    /* a reply still prefilling ends, for now, at its last chunk */
    double end = ph->prefill_end + ph->decode_s;
    if (end < ph->pf_t) end = ph->pf_t;
    if (end <= 0) end = ph->queue_s > 0 ? ph->queue_s : 1;
    int q = cols_of(0, ph->queue_s, end, cols);
    if (ph->queue_s > 0 && q == 0) q = 1;
    int used = 0;
    ui_draw_fill(w, y, x, q, t->a[UI_C_QUEUE], "░");
    used += q;
    /* one segment per prefill chunk, alternating glyphs so chunk edges show */
    double prev = ph->queue_s;
    for (int i = 0; i < ph->n_chunks && used < cols; i++) {
        double ce = ph->chunk_end[i] < prev ? prev : ph->chunk_end[i];
        int c = cols_of(prev, ce, end, cols);
        if (c < 1) c = 1;
        if (used + c > cols) c = cols - used;
        ui_draw_fill(w, y, x + used, c, t->a[UI_C_PREFILL], i % 2 ? "▓" : "█");
        used += c;
        prev = ce;
    }
    if (ph->prefill_end > prev && used < cols) {
        int c = cols_of(prev, ph->prefill_end, end, cols);
        if (used + c > cols) c = cols - used;
        ui_draw_fill(w, y, x + used, c, t->a[UI_C_PREFILL], "▓");
        used += c;
    }
    if (used < cols && ph->decode_s > 0) {
        ui_draw_fill(w, y, x + used, cols - used, t->a[UI_C_DECODE], "━");
        used = cols;
    }
    ui_draw_fill(w, y, x + used, cols - used, t->a[UI_C_DIM], "·");
}

/* A remote reply: the client sees connect, the wait for the first token
 * (the server's queue and prefill, which only the server can split) and
 * decode; the server's own figures follow when it reported them. */
static void draw_remote_legend(WINDOW *w, struct ui_rect in, const struct ui_phase *ph,
                               const struct ui_theme *t)
{
    char c[24], wt[24], dc[24], sq[24], sp[24], sd[24];
    ui_fmt_dur(c, sizeof c, ph->connect_s > 0 ? ph->connect_s : -1);
    ui_fmt_dur(wt, sizeof wt, ph->prefill_end);
    ui_fmt_dur(dc, sizeof dc, ph->decode_s);
    /* the first form that fits: never a cut figure */
    static const char *const lc[] = {"connect", "connect", "conn"},
                             *const lw[] = {" (server-side)", "", ""},
                             *const ld[] = {"━decode", "━decode", "━dec"};
    char a[48], b[64], d[48];
    for (int f = 0; f < 3; f++) {
        snprintf(a, sizeof a, "%s %s ", lc[f], c);
        snprintf(b, sizeof b, "█wait %s%s ", wt, lw[f]);
        snprintf(d, sizeof d, "%s %s", ld[f], dc);
        if (width(a) + width(b) + width(d) <= in.w) break;
    }
    int x = in.x;
    x += ui_draw_str(w, in.y + 1, x, in.w, t->a[UI_C_QUEUE], a);
    x += ui_draw_str(w, in.y + 1, x, in.x + in.w - x, t->a[UI_C_PREFILL], b);
    ui_draw_str(w, in.y + 1, x, in.x + in.w - x, t->a[UI_C_DECODE], d);
    if (in.h < 5) return;
    if (ph->server_known) {
        ui_fmt_dur(sq, sizeof sq, ph->srv_queue_s);
        ui_fmt_dur(sp, sizeof sp, ph->srv_prefill_s);
        ui_fmt_dur(sd, sizeof sd, ph->srv_decode_s);
        ui_draw_fmt(w, in.y + 4, in.x, in.w, t->a[UI_C_DIM],
                    "server says: queue %s · prefill %s · decode %s", sq, sp, sd);
    } else {
        ui_draw_str(w, in.y + 4, in.x, in.w, t->a[UI_C_DIM],
                    "server phases: n/a from this server");
    }
}

/* "░queue 1.9 ms █prefill 42.1 ms (1 chunk) ━decode 0.2 s" in the first
 * form that fits the pane (while prefilling without the decode yet to come,
 * then short labels, then without the chunk count): never a cut figure. */
static void draw_legend(WINDOW *w, struct ui_rect in, const struct ui_phase *ph, const char *q,
                        const char *pf, const char *dc, const struct ui_theme *t)
{
    static const char *const lq[] = {"░queue", "░queue", "░q", "░q"},
                             *const lp[] = {"█prefill", "█prefill", "█pf", "█pf"},
                             *const ld[] = {"━decode", "", "━dec", "━dec"};
    char a[64], b[64], c[64], chunks[24] = "";
    if (ph->n_chunks > 0)
        snprintf(chunks, sizeof chunks, " (%d chunk%s)", ph->n_chunks, ph->n_chunks == 1 ? "" : "s");
    for (int f = 0; f < 4; f++) {
        if (f == 1 && ph->n_generated > 0) continue;
        snprintf(a, sizeof a, "%s %s ", lq[f], q);
        snprintf(b, sizeof b, "%s %s%s ", lp[f], pf, f < 3 ? chunks : "");
        snprintf(c, sizeof c, "%s%s%s", ld[f], ld[f][0] ? " " : "", ld[f][0] ? dc : "");
        if (width(a) + width(b) + width(c) <= in.w) break;
    }
    int x = in.x;
    x += ui_draw_str(w, in.y + 1, x, in.w, t->a[UI_C_QUEUE], a);
    x += ui_draw_str(w, in.y + 1, x, in.x + in.w - x, t->a[UI_C_PREFILL], b);
    ui_draw_str(w, in.y + 1, x, in.x + in.w - x, t->a[UI_C_DECODE], c);
}

void ui_timeline_draw(WINDOW *w, struct ui_rect r, const struct ui_state *s,
                      const struct ui_theme *t)
{
    const struct ui_msg *m = s->timeline_msg < s->n_msgs ? &s->msgs[s->timeline_msg] : NULL;
    char title[64];
    if (m) { /* the hint only where it fits whole (the title takes r.w - 4 with its blanks) */
        size_t nth = 0;
        for (size_t i = 0; i <= s->timeline_msg; i++) nth += s->msgs[i].role == UI_ROLE_ASSISTANT;
        snprintf(title, sizeof title, "timeline F3 · reply %zu (Alt-↑/↓ selects)", nth);
        if (width(title) + 2 > r.w - 4) snprintf(title, sizeof title, "timeline F3 · reply %zu", nth);
    } else {
        snprintf(title, sizeof title, "timeline F3");
    }
    ui_draw_box(w, r, t->a[UI_C_TITLE], title);
    struct ui_rect in = {r.y + 1, r.x + 1, r.h - 2, r.w - 2};
    if (in.h < 1 || in.w < 8) return;
    if (!m || !m->ph.have) {
        ui_draw_str(w, in.y, in.x, in.w, t->a[UI_C_DIM], "no reply with timings selected");
        return;
    }
    const struct ui_phase *ph = &m->ph;
    draw_bar(w, in.y, in.x, in.w, ph, t);
    char q[24], pf[24], dc[24], tt[24], tp[24];
    ui_fmt_dur(q, sizeof q, ph->queue_s);
    double pf_end = ph->prefill_end > 0 ? ph->prefill_end : ph->pf_t;
    ui_fmt_dur(pf, sizeof pf, pf_end > ph->queue_s ? pf_end - ph->queue_s : -1);
    ui_fmt_dur(dc, sizeof dc, ph->n_generated > 0 ? ph->decode_s : -1); /* none yet: – */
    ui_fmt_dur(tt, sizeof tt, ph->ttft_s);
    ui_fmt_dur(tp, sizeof tp, ph->n_generated > 1 ? ph->tpot_s : -1);
    if (in.h >= 2 && ph->remote) {
        draw_remote_legend(w, in, ph, t);
    } else if (in.h >= 2) {
        draw_legend(w, in, ph, q, pf, dc, t);
    }
    if (in.h >= 3) {
        /* the long form, or a compact one on a narrow pane: numbers whole */
        char f[3][128], kept[40] = "";
        /* n-gram lookup: the generated tokens that came as kept guesses */
        if (ph->n_draft > 0) snprintf(kept, sizeof kept, " (%d guessed)", ph->n_accepted);
        snprintf(f[0], sizeof f[0], "prompt %d tok: %d cached + %d computed · gen %d%s",
                 ph->n_prompt, ph->n_cached, ph->n_computed, ph->n_generated, kept);
        snprintf(f[1], sizeof f[1], "prompt %d: %d cached + %d new · gen %d%s", ph->n_prompt,
                 ph->n_cached, ph->n_computed, ph->n_generated, kept);
        snprintf(f[2], sizeof f[2], "prompt %d (%d cached) · gen %d%s", ph->n_prompt, ph->n_cached,
                 ph->n_generated, kept);
        int k = 0;
        while (k < 2 && width(f[k]) > in.w) k++;
        ui_draw_str(w, in.y + 2, in.x, in.w, t->a[UI_C_NORMAL], f[k]);
    }
    if (in.h >= 4) {
        attr_t sa = m->status == UI_MSG_ERROR || m->status == UI_MSG_CANCELLED ? t->a[UI_C_WARN]
                                                                               : t->a[UI_C_GOOD];
        const char *st = ph->status[0] ? ph->status : "–";
        char f[3][96];
        snprintf(f[0], sizeof f[0], " · TTFT %s · TPOT %s · preempt %d", tt, tp, ph->n_preempted);
        snprintf(f[1], sizeof f[1], " · TTFT %s · TPOT %s", tt, tp);
        snprintf(f[2], sizeof f[2], " TTFT %s TPOT %s", tt, tp);
        int k = 0; /* preempt only where it fits (or happened) */
        while (k < 2 && width(st) + width(f[k]) > in.w && !(k == 0 && ph->n_preempted > 0)) k++;
        int x = in.x;
        x += ui_draw_str(w, in.y + 3, x, in.w, sa, st);
        ui_draw_str(w, in.y + 3, x, in.x + in.w - x, t->a[UI_C_NORMAL], f[k]);
    }
    /* a move between route targets: below the rest, or over the token
     * counts on a short pane (where the time went matters more) */
    int fy = ph->remote ? 5 : 4;
    if (in.h <= fy) fy = 2;
    if (ph->fallback[0] && in.h > fy) {
        ui_draw_fill(w, in.y + fy, in.x, in.w, t->a[UI_C_NORMAL], " ");
        ui_draw_fmt(w, in.y + fy, in.x, in.w, t->a[UI_C_WARN], "fallback: %s", ph->fallback);
    }
}
