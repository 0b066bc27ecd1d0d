/* test_panes: renders the panes and whole frames into off-screen ncurses
 * windows (newterm on /dev/null) and reads the cells back: text placed and
 * wrapped with wide characters aligned to the borders, code fences, status
 * notes, the instruments' KV bar and latency figures, the timeline, help,
 * layouts from 80x24 to 200x60; plus the input editor on multi-byte text. */
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include "chat.h"
#include "ctxfit.h"
#include "dialog.h"
#include "picker.h"
#include "gauge.h"
#include "input.h"
#include "keymap.h"
#include "keys.h"
#include "layout.h"
#include "screen.h"
#include "statusline.h"
#include "tap.h"
#include "text.h"

/* Row y of w as UTF-8 (wide characters once, no continuation cells). */
static void row(WINDOW *w, int y, char *out, size_t cap)
{
    wchar_t wb[1024];
    int n = mvwinnwstr(w, y, 0, wb, 1023);
    size_t o = 0;
    for (int i = 0; i < n && o + 5 < cap; i++) o += ui_utf8_encode((uint32_t)wb[i], out + o);
    out[o] = 0;
}

static bool screen_has(WINDOW *w, int rows, const char *needle)
{
    char buf[4096];
    for (int y = 0; y < rows; y++) {
        row(w, y, buf, sizeof buf);
        if (strstr(buf, needle)) return true;
    }
    return false;
}

static void dump(WINDOW *w, int rows)
{
    char buf[4096];
    for (int y = 0; y < rows; y++) {
        row(w, y, buf, sizeof buf);
        tap_diag("|%s|", buf);
    }
}

static void fill_state(struct ui_state *s)
{
    ui_state_init(s);
    ui_state_add_session(s, 1, "Greetings 你好", 1700000000, false);
    ui_state_add_session(s, 2, "Code", 1700000100, true);
    ui_state_add_msg(s, UI_ROLE_USER,
                     "你好，世界！请用中文回答。这是一个很长的句子，需要换行显示。");
    struct ui_msg *m = ui_state_add_msg(
        s, UI_ROLE_ASSISTANT,
        "Привет! Вот пример кода:\n```c\nint main(void) { return 0; }\n```\nГотово 😀.");
    m->ph = (struct ui_phase){.have = true,
                              .queue_s = 0.002,
                              .n_chunks = 2,
                              .chunk_end = {0.020, 0.041},
                              .prefill_end = 0.045,
                              .decode_s = 0.8,
                              .ttft_s = 0.045,
                              .tpot_s = 0.0125,
                              .e2e_s = 0.845,
                              .n_prompt = 120,
                              .n_cached = 96,
                              .n_computed = 24,
                              .n_generated = 65};
    snprintf(m->ph.status, sizeof m->ph.status, "stop");
    struct ui_msg *u2 = ui_state_add_msg(s, UI_ROLE_USER, "Tell me a long story");
    (void)u2;
    struct ui_msg *c = ui_state_add_msg(s, UI_ROLE_ASSISTANT, "Once upon a time");
    c->status = UI_MSG_CANCELLED;
    s->timeline_msg = 1;
    snprintf(s->model_name, sizeof s->model_name, "SmolLM2-135M-Instruct");
    snprintf(s->backend, sizeof s->backend, "cpu");
    snprintf(s->device, sizeof s->device, "2 threads");
    s->have_stats = true;
    s->stats.kv_total = 100, s->stats.kv_used = 30, s->stats.kv_cached = 20, s->stats.kv_free = 50;
    s->stats.kv_block_tokens = 16;
    s->stats.slo_ttft_s = 1.0, s->stats.slo_tpot_s = 0.010; /* TPOT 12.5 ms breaks it */
    s->stats.ttft.count = 1, s->stats.ttft.p50 = 0.045, s->stats.ttft.p90 = 0.045;
    ui_state_add_latency(s, 0.045, 0.0125);
    for (int i = 0; i < 30; i++) ui_state_push_itl(s, 0.01 + 0.001 * (i % 7));
}

/* Every row of a bordered pane is exactly its width: wide characters took
 * two cells and nothing spilled over the right border. */
static void check_chat_alignment(const struct ui_theme *t)
{
    struct ui_state s;
    fill_state(&s);
    int W = 40, H = 30;
    WINDOW *w = newwin(H, W, 0, 0);
    ui_chat_draw(w, (struct ui_rect){0, 0, H, W}, &s, t, "chat", true);
    char buf[4096];
    int bad = 0;
    for (int y = 0; y < H; y++) {
        row(w, y, buf, sizeof buf);
        size_t n = strlen(buf);
        if (ui_text_width(buf, n) != W) bad++;
        if (y > 0 && y < H - 1 && strncmp(buf + n - 3, "│", 3) != 0) bad++;
    }
    ok(bad == 0, "chat 40 cols: every row is 40 cells and ends on the border");
    ok(screen_has(w, H, "你好，世界！"), "chinese text shown");
    ok(screen_has(w, H, "Привет! Вот пример"), "russian text shown");
    ok(screen_has(w, H, "int main(void)"), "code block shown");
    ok(screen_has(w, H, "cancelled"), "cancelled reply marked");
    ok(screen_has(w, H, "Once upon a time"), "partial reply kept");
    ok(screen_has(w, H, "😀"), "emoji shown");
    if (bad) dump(w, H);
    /* the transcript is taller than a 10-row pane: the bottom shows, and
     * scrolling up reveals the top */
    werase(w);
    ui_chat_draw(w, (struct ui_rect){0, 0, 10, W}, &s, t, "chat", false);
    ok(screen_has(w, 10, "Once upon a time") && !screen_has(w, 10, "你好，世界"),
       "short pane shows the newest lines");
    s.scroll = 1000;
    werase(w);
    ui_chat_draw(w, (struct ui_rect){0, 0, 10, W}, &s, t, "chat", false);
    ok(screen_has(w, 10, "你好") && s.scroll == ui_chat_lines(&s, W) - 8,
       "scroll clamps to the top of the transcript");
    delwin(w);
    ui_state_free(&s);
}

static void check_frames(const struct ui_theme *t)
{
    static const int sizes[][2] = {{24, 80}, {30, 100}, {60, 200}};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        int H = sizes[k][0], W = sizes[k][1];
        struct ui_state s;
        struct ui_input in;
        struct ui_dialog d;
        fill_state(&s);
        ui_input_init(&in);
        ui_dialog_init(&d);
        ui_input_set(&in, "Здравствуй, 世界");
        in.tokens = 7;
        WINDOW *w = newwin(H, W, 0, 0);
        struct ui_view v = {.st = &s, .in = &in, .dlg = &d, .theme = t, .show_sessions = true,
                            .show_instruments = true, .show_timeline = true};
        ui_screen_draw(w, H, W, &v);
        char name[64];
        snprintf(name, sizeof name, "%dx%d", W, H);
        /* at 80x24 the sessions pane narrows the instruments: compact legend */
        ok((screen_has(w, H, "█used 30") && screen_has(w, H, "·free 50")) ||
               (W == 80 && screen_has(w, H, "█30 ") && screen_has(w, H, "·50 free")),
           "%s: KV bar legend", name);
        ok(screen_has(w, H, "12.5 ms"), "%s: TPOT of the last reply", name);
        ok(screen_has(w, H, "45.0 ms"), "%s: TTFT of the last reply", name);
        ok(screen_has(w, H, "prompt 120 tok: 96 cached + 24 computed") ||
               screen_has(w, H, "prompt 120: 96 cached + 24 new") ||
               screen_has(w, H, "prompt 120 (96 cached)"),
           "%s: timeline tokens", name);
        ok(screen_has(w, H, "14 chars · 7 tokens"), "%s: input counts", name);
        ok(screen_has(w, H, "F1 help"), "%s: key hints", name);
        ok(v.cursor && v.cur_y >= v.layout.r_input.y && v.cur_y < H - 1,
           "%s: cursor in the input box", name);
        char buf[4096];
        int bad = 0;
        for (int y = 0; y < H; y++) {
            row(w, y, buf, sizeof buf);
            if (ui_text_width(buf, strlen(buf)) != W) bad++;
        }
        ok(bad == 0, "%s: every row exactly %d cells", name, W);
        if (k == 0) dump(w, H);
        v.show_help = true;
        ui_screen_draw(w, H, W, &v);
        ok(screen_has(w, H, "Esc") && screen_has(w, H, "F10") && screen_has(w, H, "Ctrl-N"),
           "%s: help lists the keys", name);
        delwin(w);
        ui_dialog_free(&d);
        ui_input_free(&in);
        ui_state_free(&s);
    }
}

/* Attribute of the first cell of needle at or right of from_col (all bits
 * set when absent, which no theme uses). */
static attr_t attr_of(WINDOW *w, int rows, const char *needle, int from_col)
{
    char buf[4096];
    for (int y = 0; y < rows; y++) {
        row(w, y, buf, sizeof buf);
        char *p = buf;
        while ((p = strstr(p, needle))) {
            int x = ui_text_width(buf, (size_t)(p - buf));
            if (x >= from_col) return (attr_t)(mvwinch(w, y, x) & A_ATTRIBUTES);
            p++;
        }
    }
    return (attr_t)-1;
}

/* TPOT 12.5 ms breaks the 10 ms SLO of fill_state and turns to the warning
 * attribute; TTFT 45 ms is inside its 1 s SLO and stays normal. */
static void check_slo_colour(const struct ui_theme *t, const char *name)
{
    struct ui_state s;
    struct ui_input in;
    fill_state(&s);
    ui_input_init(&in);
    WINDOW *w = newwin(30, 100, 0, 0);
    struct ui_view v = {.st = &s, .in = &in, .theme = t, .show_instruments = true};
    ui_screen_draw(w, 30, 100, &v);
    int ix = v.layout.r_instruments.x;
    is_int(attr_of(w, 30, "12.5 ms", ix), t->a[UI_C_WARN], name);
    ok(attr_of(w, 30, "45.0 ms", ix) == t->a[UI_C_NORMAL], "%s: TTFT within its SLO is normal",
       name);
    delwin(w);
    ui_input_free(&in);
    ui_state_free(&s);
}

/* The key bar from 40 to 200 columns: never wider than the window, F1, F6
 * and F10 always there (issue 35: at 80 it ended at F5), labels shortened
 * before any key goes; a message that leaves room keeps F1/F10 beside it,
 * one wider than the line is cut at a word with "…". Keys and slash
 * commands map to the table's commands. */
static void check_keybar(const struct ui_theme *t)
{
    struct ui_state s;
    ui_state_init(&s);
    char buf[4096];
    int bad = 0;
    for (int W = UI_MIN_COLS; W <= 200; W++) {
        WINDOW *w = newwin(1, W, 0, 0);
        ui_statusline_draw(w, (struct ui_rect){0, 0, 1, W}, &s, t, false);
        row(w, 0, buf, sizeof buf);
        if (ui_text_width(buf, strlen(buf)) > W || !strstr(buf, "F1") || !strstr(buf, "F10") ||
            !strstr(buf, "F6"))
            bad++, tap_diag("%d: |%s|", W, buf);
        if (W == 80) tap_diag("80: |%s|", buf);
        delwin(w);
    }
    ok(bad == 0, "key bar fits 40..200 columns with F1, F6 and F10");
    WINDOW *w = newwin(1, 60, 0, 0);
    ui_state_set_status(&s, false, "%s", "instruments need 66 columns (window: 60)");
    ui_statusline_draw(w, (struct ui_rect){0, 0, 1, 60}, &s, t, false);
    row(w, 0, buf, sizeof buf);
    tap_diag("60 with a message: |%s|", buf);
    ok(strstr(buf, " instruments need 66 columns (window: 60) ") && strstr(buf, "F1 help") &&
           strstr(buf, "F10"),
       "a message that leaves room keeps F1 and F10 beside it");
    ui_state_set_status(&s, false, "%s",
                        "the instruments need 66 columns; the window has 60 and more words here");
    ui_statusline_draw(w, (struct ui_rect){0, 0, 1, 60}, &s, t, false);
    row(w, 0, buf, sizeof buf);
    tap_diag("60 with a long message: |%s|", buf);
    ok(strstr(buf, " the instruments need 66 columns; the window has 60 and…") != NULL,
       "a message wider than the line is cut at a word");
    delwin(w);
    ui_state_free(&s);
    ok(ui_keymap_find(KEY_F(6), 0) == UI_CMD_MODEL && ui_keymap_find(UI_KEY_ALT_6, 0) == UI_CMD_MODEL &&
           ui_keymap_find(0, 3) == UI_CMD_QUIT && ui_keymap_find(UI_KEY_ALT_0, 0) == UI_CMD_QUIT &&
           ui_keymap_find(UI_KEY_ALT_1, 0) == UI_CMD_HELP && ui_keymap_find(0, 'x') == UI_CMD_NONE,
       "F-keys and their Alt/Ctrl twins map to one command");
    ok(ui_keymap_slash("/bye") == UI_CMD_QUIT && ui_keymap_slash("/help ") == UI_CMD_HELP &&
           ui_keymap_slash("/clear") == UI_CMD_NEW && ui_keymap_slash("/model") == UI_CMD_MODEL &&
           ui_keymap_slash("/byex") == UI_CMD_NONE && ui_keymap_slash("bye") == UI_CMD_NONE,
       "slash commands map to the same commands");
}

static bool overlap(struct ui_rect a, struct ui_rect b)
{
    if (a.w <= 0 || a.h <= 0 || b.w <= 0 || b.h <= 0) return false;
    return a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;
}

static void check_layouts(void)
{
    int bad = 0, n = 0;
    for (int rows = UI_MIN_ROWS; rows <= 70; rows += 3)
        for (int cols = UI_MIN_COLS; cols <= 260; cols += 7)
            for (int f = 0; f < 8; f++, n++) {
                struct ui_layout L;
                ui_layout_compute(&L, rows, cols, f & 1, f & 2, f & 4, 3);
                struct ui_rect r[6] = {L.sessions ? L.r_sessions : (struct ui_rect){0},
                                       L.r_chat,
                                       L.instruments ? L.r_instruments : (struct ui_rect){0},
                                       L.timeline ? L.r_timeline : (struct ui_rect){0},
                                       L.r_input,
                                       L.r_status};
                for (int i = 0; i < 6; i++) {
                    if (r[i].x < 0 || r[i].y < 0 || r[i].x + r[i].w > cols ||
                        r[i].y + r[i].h > rows)
                        bad++;
                    for (int j = i + 1; j < 6; j++) bad += overlap(r[i], r[j]);
                }
                if (L.r_chat.w < 30 || L.r_chat.h < 4) bad++;
            }
    ok(bad == 0, "layouts: %d size/pane combinations in bounds, disjoint, chat usable", n);
}

static void check_input(void)
{
    struct ui_input in;
    ui_input_init(&in);
    ui_input_set(&in, "Привет мир 你好");
    ui_input_backspace(&in);
    is_str(in.buf, "Привет мир 你", "backspace removes one ideograph (3 bytes)");
    ui_input_word_left(&in);
    ui_input_word_left(&in);
    is_int((long long)in.cur, (long long)strlen("Привет "), "word left twice lands on 'мир'");
    ui_input_delete(&in);
    is_str(in.buf, "Привет ир 你", "delete removes one Cyrillic letter (2 bytes)");
    ui_input_home(&in);
    ui_input_word_right(&in);
    is_int((long long)in.cur, (long long)strlen("Привет"), "word right ends after the word");
    ui_input_end(&in);
    ui_input_insert(&in, "\n", 1);
    ui_input_insert(&in, "e\xcc\x81", 3);
    ui_input_left(&in);
    is_int((long long)in.cur, (long long)(in.len - 3), "left steps over base + combining mark");
    ok(ui_input_line_up(&in) && in.cur == 0, "line up keeps column 0");
    ok(!ui_input_line_up(&in), "line up on the first line says so");
    is_int((long long)ui_input_chars(&in), 14, "character count in code points");
    char *t = ui_input_take(&in);
    is_str(t, "Привет ир 你\ne\xcc\x81", "take returns the text");
    free(t);
    is_int((long long)in.len, 0, "take clears the buffer");
    ui_input_set(&in, "second");
    free(ui_input_take(&in));
    ui_input_set(&in, "draft");
    ui_input_hist_prev(&in);
    is_str(in.buf, "second", "up recalls the last input");
    ui_input_hist_prev(&in);
    is_str(in.buf, "Привет ир 你\ne\xcc\x81", "up again recalls the one before");
    ui_input_hist_next(&in);
    ui_input_hist_next(&in);
    is_str(in.buf, "draft", "down past the newest restores the draft");
    ui_input_free(&in);
}

static void check_dialog(void)
{
    struct ui_dialog d;
    struct ui_params p;
    ui_dialog_init(&d);
    ui_params_default(&p);
    ui_dialog_params(&d, 1, &p);
    ui_input_set(&d.field[0], "0.3");
    ui_input_set(&d.field[2], "64");
    ui_input_set(&d.field[4], "Answer briefly.");
    ok(ui_dialog_get_params(&d, &p) == 0 && p.max_tokens == 64 && p.temp > 0.29f &&
           p.temp < 0.31f && strcmp(p.system, "Answer briefly.") == 0 &&
           p.ctx_policy == UI_CTX_TRUNCATE,
       "params form parses (context policy truncate by default)");
    ui_input_set(&d.field[3], "drop");
    ok(ui_dialog_get_params(&d, &p) < 0 && d.focus == 3, "a context policy not truncate/reject refused");
    ui_input_set(&d.field[3], "reject");
    ok(ui_dialog_get_params(&d, &p) == 0 && p.ctx_policy == UI_CTX_REJECT, "context policy reject parses");
    ui_input_set(&d.field[1], "1.5");
    ok(ui_dialog_get_params(&d, &p) < 0 && d.focus == 1,
       "top-p above 1 refused, focus moves there");
    /* a field edits with the input box's keys: Ctrl-A, a word motion, typing */
    d.focus = 4;
    struct ui_key ctrl_a = {0, 1, false}, word_r = {UI_KEY_WORD_RIGHT, 0, false},
                  bang = {0, '!', false}, ctrl_e = {0, 5, false}, bs = {KEY_BACKSPACE, 0, false};
    ui_dialog_key(&d, &ctrl_a);
    ui_dialog_key(&d, &word_r);
    ui_dialog_key(&d, &bang);
    is_str(d.field[4].buf, "Answer! briefly.", "a field: Ctrl-A, Alt-F and a typed '!'");
    ui_dialog_key(&d, &ctrl_e);
    ui_dialog_key(&d, &bs);
    is_str(d.field[4].buf, "Answer! briefly", "a field: Ctrl-E then Backspace");
    struct ui_key tab = {0, '\t', false};
    is_int(ui_dialog_key(&d, &tab), UI_DLG_OPEN, "Tab moves on, inserts nothing");
    ok(d.focus == 5 && strcmp(d.field[4].buf, "Answer! briefly") == 0, "Tab: focus on the next field");
    struct ui_key esc = {UI_KEY_ESC, 0, false};
    is_int(ui_dialog_key(&d, &esc), UI_DLG_CANCEL, "Esc cancels the form");
    ui_dialog_confirm(&d, 2, "delete", "Delete session?");
    struct ui_key y = {0, 'y', false};
    is_int(ui_dialog_key(&d, &y), UI_DLG_OK, "y confirms");
    struct ui_key enter = {0, '\r', false}, k = {0, 'k', false};
    is_int(ui_dialog_key(&d, &enter), UI_DLG_OPEN, "Enter alone does not delete");
    /* the picker's question (wall 8): Enter, k or Esc */
    struct ui_model_entry base = {.file = "gemma-3-270m-q4_k_m.gguf", .ok = true, .base = true};
    char title[96], msg[512];
    ok(ui_picker_switch_question(&base, false, title, sizeof title, msg, sizeof msg) &&
           strstr(msg, "gemma-3-270m-q4_k_m is a base model") && strstr(msg, "new session"),
       "a base model picked in a chat asks: %s", title);
    ok(!ui_picker_switch_question(&base, true, title, sizeof title, msg, sizeof msg),
       "a base model picked with a base model loaded does not ask");
    ui_dialog_ask(&d, 7, title, msg, " Enter: new session   k: keep this chat   Esc: cancel ", 'k');
    is_int(ui_dialog_key(&d, &enter), UI_DLG_OK, "the question: Enter answers yes");
    is_int(ui_dialog_key(&d, &k), UI_DLG_ALT, "k is its third answer");
    is_int(ui_dialog_key(&d, &esc), UI_DLG_CANCEL, "Esc cancels it");
    ui_dialog_free(&d);
}

/* A stand-in tokenizer for ctxfit: each message costs 4 tokens of template
 * plus one per byte of content. */
static int64_t count_bytes(void *ud, const struct engine_message *v, int32_t n, char *err,
                           size_t errlen)
{
    (void)ud, (void)err, (void)errlen;
    int64_t t = 0;
    for (int32_t i = 0; i < n; i++) t += 4 + (int64_t)strlen(v[i].content);
    return t;
}

static void check_ctxfit(void)
{
    char err[256], big[300];
    memset(big, 'x', 96);
    big[96] = 0; /* 100 tokens a turn */
    struct engine_message turns[9];
    for (int i = 0; i < 9; i++) turns[i] = (struct engine_message){i % 2 ? "assistant" : "user", big};
    struct engine_message sys = {"system", "be brief"}; /* 12 tokens */
    struct ui_ctxfit f;
    /* 912 prompt tokens + 64 fit a 1000-token context as they are */
    int rc = ui_ctxfit_run(&sys, turns, 9, 0, 1000, 64, UI_CTX_TRUNCATE, count_bytes, NULL, &f, err,
                           sizeof err);
    ok(rc == 0 && f.first == 0 && f.n_prompt == 912 && f.max_tokens == 64, "a fitting conversation is kept whole");
    /* a context the engine does not know (a remote server): nothing is dropped
     * or refused, the server answers for its own limit */
    rc = ui_ctxfit_run(&sys, turns, 9, 0, 0, 512, UI_CTX_TRUNCATE, count_bytes, NULL, &f, err,
                       sizeof err);
    ok(rc == 0 && f.first == 0 && f.max_tokens == 512, "an unknown context keeps the conversation whole");
    /* 512 tokens asked: the reply budget is a quarter of the context (250);
     * turns go until prompt + budget fit three quarters (750): 912 -> 712 ->
     * 512 -> 312, six turns dropped, the kept part starts with a user turn */
    rc = ui_ctxfit_run(&sys, turns, 9, 0, 1000, 512, UI_CTX_TRUNCATE, count_bytes, NULL, &f, err,
                       sizeof err);
    ok(rc == 0 && f.first == 6 && f.n_prompt == 312 && f.max_tokens == 512 &&
           !strcmp(turns[f.first].role, "user"),
       "truncate drops the oldest turns from a user turn (first %d, %d + %d)", f.first,
       f.n_prompt, f.max_tokens);
    rc = ui_ctxfit_run(&sys, turns, 9, 0, 1250, 512, UI_CTX_TRUNCATE, count_bytes, NULL, &f, err,
                       sizeof err);
    ok(rc == 0 && f.first == 0 && f.max_tokens == 1250 - 912,
       "max_tokens shortened to what remains rather than rejected (%d)", f.max_tokens);
    rc = ui_ctxfit_run(&sys, turns, 9, 4, 1000, 512, UI_CTX_TRUNCATE, count_bytes, NULL, &f, err,
                       sizeof err);
    ok(rc == 0 && f.first == 4 && f.max_tokens == 488,
       "the kept start is kept while it fits (its cached prefix still matches)");
    rc = ui_ctxfit_run(&sys, turns, 9, 0, 1000, 512, UI_CTX_REJECT, count_bytes, NULL, &f, err,
                       sizeof err);
    ok(rc == 1 && strstr(err, "reject"), "reject refuses, saying why: %s", err);
    rc = ui_ctxfit_run(&sys, turns, 9, 0, 100, 64, UI_CTX_TRUNCATE, count_bytes, NULL, &f, err,
                       sizeof err);
    ok(rc == 1 && strstr(err, "newest message alone"), "a newest message larger than the context is refused: %s", err);
}

static void check_gauge(void)
{
    int out[3];
    double v[3] = {30, 20, 50};
    ui_gauge_split(20, v, 3, out);
    ok(out[0] == 6 && out[1] == 4 && out[2] == 10, "bar split proportional (6/4/10)");
    double v2[3] = {1, 0, 999};
    ui_gauge_split(20, v2, 3, out);
    ok(out[0] == 1 && out[1] == 0 && out[0] + out[1] + out[2] == 20, "a tiny segment still shows");
}

static void check_no_color(void)
{
    setenv("NO_COLOR", "1", 1);
    ok(ui_theme_no_color_env(), "NO_COLOR=1 turns colour off");
    setenv("NO_COLOR", "", 1);
    ok(!ui_theme_no_color_env(), "an empty NO_COLOR does not (no-color.org)");
    unsetenv("NO_COLOR");
    ok(!ui_theme_no_color_env(), "without NO_COLOR colour stays on");
    struct ui_theme m;
    ui_theme_init(&m, false);
    int distinct = 0;
    for (int i = 0; i < UI_C_N; i++) distinct += m.a[i] != A_NORMAL;
    ok(m.a[UI_C_WARN] != A_NORMAL && m.a[UI_C_USER] != m.a[UI_C_ASSIST] && distinct >= 10,
       "monochrome theme still tells warnings and speakers apart (%d styled kinds)", distinct);
}

int main(void)
{
    if (!setlocale(LC_ALL, "C.UTF-8")) return tap_bail("no C.UTF-8 locale");
    FILE *out = fopen("/dev/null", "w"), *inp = fopen("/dev/null", "r");
    SCREEN *scr = newterm("xterm-256color", out, inp);
    if (!scr) return tap_bail("newterm xterm-256color failed");
    struct ui_theme mono;
    ui_theme_init(&mono, false);
    check_chat_alignment(&mono);
    check_frames(&mono);
    check_slo_colour(&mono, "monochrome: TPOT past its SLO drawn as a warning");
    start_color();
    use_default_colors();
    struct ui_theme col;
    ui_theme_init(&col, true);
    check_chat_alignment(&col);
    check_slo_colour(&col, "colour: TPOT past its SLO drawn as a warning");
    check_layouts();
    check_keybar(&col);
    check_input();
    check_dialog();
    check_ctxfit();
    check_gauge();
    check_no_color();
    endwin();
    delscreen(scr);
    fclose(out);
    fclose(inp);
    return tap_done();
}
