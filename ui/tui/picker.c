/* picker: the model picker's rows and questions (see picker.h). */
#include "picker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "instruments.h"

/* The name -m takes: the file name without ".gguf". */
static void stem(const char *file, char *out, size_t n)
{
    size_t l = strlen(file);
    if (l > 5 && !strcmp(file + l - 5, ".gguf")) l -= 5;
    snprintf(out, n, "%.*s", (int)l, file);
}

static void fmt_size(char *b, size_t n, uint64_t v)
{
    if (v >= 1ull << 30) snprintf(b, n, "%.1f GiB", (double)v / (1 << 30));
    else snprintf(b, n, "%.0f MiB", (double)v / (1 << 20));
}

/* "chat  Q4_1    94 MiB  8.2k": columns under PICKER_HEAD */
#define PICKER_HEAD "kind  quant     size   ctx"
static void details(const struct ui_model_entry *e, char *out, size_t n)
{
    char size[16], ctx[16] = "?";
    if (!e->ok) {
        snprintf(out, n, "unreadable");
        return;
    }
    fmt_size(size, sizeof size, e->size);
    if (e->ctx) ui_fmt_count(ctx, sizeof ctx, (double)e->ctx);
    snprintf(out, n, "%-4s  %-7s%7s %5s", e->base ? "base" : "chat", e->quant[0] ? e->quant : "?",
             size, ctx);
}

/* "267", "35k": a predicted rate in a few characters */
static void fmt_rate(char *b, size_t n, double v)
{
    if (v <= 0) snprintf(b, n, "–");
    else if (v < 10) snprintf(b, n, "%.1f", v);
    else if (v < 10000) snprintf(b, n, "%.0f", v);
    else snprintf(b, n, "%.0fk", v / 1e3);
}

/* The footer's second part: what the machine's limits allow each model
 * (prefill / decode tok/s) and which do not fit in memory. The rows have no
 * room for it at 80 columns; a handful of models are named, tern models
 * lists them all. */
enum { PICKER_PRED_MAX = 4 };
static void predictions(const struct ui_model_entry *v, int n, char *out, size_t len)
{
    size_t o = 0;
    int shown = 0;
    out[0] = 0;
    for (int k = 0; k < n && shown < PICKER_PRED_MAX && o < len; k++) {
        if (!v[k].ok || v[k].tg_tok_s <= 0) continue;
        char st[256], pp[16], tg[16];
        stem(v[k].file, st, sizeof st);
        fmt_rate(pp, sizeof pp, v[k].pp_tok_s);
        fmt_rate(tg, sizeof tg, v[k].tg_tok_s);
        o += (size_t)snprintf(out + o, len - o, "%s%s %s / %s%s", shown ? " · " : "", st, pp, tg,
                              v[k].fits ? "" : " (does not fit in memory)");
        shown++;
    }
    if (shown && o < len)
        snprintf(out + o, len - o, "%s", shown < n ? " · tern models: all" : "");
}

void ui_picker_open(struct ui_dialog *d, int action, const struct ui_model_entry *v, int n,
                    const char *loaded, const char *dir, const char *pull)
{
    size_t cap = n > 0 ? (size_t)n : 1;
    char **names = calloc(cap, sizeof *names), **det = calloc(cap, sizeof *det);
    int cur = -1, k = 0;
    for (; names && det && k < n; k++) {
        char st[256], nm[300], de[96];
        bool on = loaded && !strcmp(v[k].file, loaded);
        if (on) cur = k;
        stem(v[k].file, st, sizeof st);
        snprintf(nm, sizeof nm, "%s%s", on ? "● " : "  ", st);
        details(&v[k], de, sizeof de);
        names[k] = strdup(nm);
        det[k] = strdup(de);
        if (!names[k] || !det[k]) break;
    }
    char title[96];
    if (n)
        snprintf(title, sizeof title, "model · %d in the models directory · Enter loads", n);
    else
        snprintf(title, sizeof title, "model · the models directory is empty · Esc closes");
    ui_dialog_list(d, action, title, names, det, PICKER_HEAD, k, cur);
    if (n == 0)
        snprintf(d->message, sizeof d->message, "none in %s; %s fetches one", dir, pull);
    else {
        char pred[600];
        predictions(v, n, pred, sizeof pred);
        snprintf(d->message, sizeof d->message,
                 "● loaded. base: no chat template, it continues plain text (switching to one "
                 "mid-chat asks first)%s%s",
                 pred[0] ? ". This machine allows (prefill / decode tok/s): " : "", pred);
    }
    for (int i = 0; names && det && i < n; i++) {
        free(names[i]);
        free(det[i]);
    }
    free(names);
    free(det);
}

bool ui_picker_switch_question(const struct ui_model_entry *e, bool base_now, char *title,
                               size_t tn, char *msg, size_t mn)
{
    char nm[256];
    if (e->base == base_now) return false;
    stem(e->file, nm, sizeof nm);
    if (e->base) {
        snprintf(title, tn, "switch to a base model");
        snprintf(msg, mn,
                 "%s is a base model (no chat template): it continues plain text and does not "
                 "answer as a chat. Enter loads it in a new session (this chat stays under F5); "
                 "k keeps this chat, sent to it as plain text.",
                 nm);
    } else {
        snprintf(title, tn, "switch to a chat model");
        snprintf(msg, mn,
                 "%s is a chat model: this session's plain text would be sent to it as chat "
                 "turns. Enter loads it in a new session (this one stays under F5); k keeps "
                 "this session.",
                 nm);
    }
    return true;
}
