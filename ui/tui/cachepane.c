/* cachepane: the prompt cache overlay (see cachepane.h). */
#include "cachepane.h"

#include <stdio.h>
#include <string.h>

static void fmt_bytes(uint64_t b, char *out, size_t n)
{
    if (b >= (1ull << 30)) snprintf(out, n, "%.1f GiB", (double)b / (1ull << 30));
    else if (b >= (1ull << 20)) snprintf(out, n, "%.1f MiB", (double)b / (1ull << 20));
    else snprintf(out, n, "%.0f KiB", (double)b / 1024);
}

static void fmt_age(double s, char *out, size_t n)
{
    if (s < 0) s = 0;
    if (s < 120) snprintf(out, n, "%.0fs", s);
    else if (s < 7200) snprintf(out, n, "%.0fm", s / 60);
    else if (s < 172800) snprintf(out, n, "%.0fh", s / 3600);
    else snprintf(out, n, "%.0fd", s / 86400);
}

void ui_cache_draw(WINDOW *w, struct ui_rect screen, const struct ui_theme *t,
                   const struct ui_cache_view *c, struct ui_rect *box)
{
    int bw = screen.w < 78 ? screen.w : 78;
    int lines = 2 + (c->n ? c->n : 1) + 2; /* header, rule, rows, blank, totals */
    int bh = lines + 2 < screen.h ? lines + 2 : screen.h;
    struct ui_rect r = {screen.y + (screen.h - bh) / 2, screen.x + (screen.w - bw) / 2, bh, bw};
    *box = r;
    ui_draw_box(w, r, t->a[UI_C_TITLE], "prompt cache (F7) · any key closes");
    int x = r.x + 2, tw = bw - 4, y = r.y + 1, y_end = r.y + bh - 1;
    char line[256];
    snprintf(line, sizeof line, "%-6s %-16s %7s %9s %4s %5s  %s", "where", "hash", "tokens", "size",
             "hits", "age", "made by");
    if (y < y_end) ui_draw_str(w, y++, x, tw, t->a[UI_C_DIM], line);
    int n_mem = 0, n_disk = 0;
    uint64_t disk_bytes = 0;
    for (int i = 0; i < c->n; i++) {
        if (c->rows[i].disk) {
            n_disk++;
            disk_bytes += c->rows[i].bytes;
        } else n_mem++;
    }
    if (c->n == 0 && y < y_end)
        ui_draw_str(w, y++, x, tw, t->a[UI_C_NOTE],
                    c->remote ? "a server's engine: GET /v1/tern/cache on it lists its cache"
                              : "nothing cached yet: a reply's prompt shows here");
    for (int i = 0; i < c->n && y < y_end - 1; i++) {
        const struct ui_cache_row *e = &c->rows[i];
        char sz[24], age[16];
        fmt_bytes(e->bytes, sz, sizeof sz);
        fmt_age(e->age_s, age, sizeof age);
        snprintf(line, sizeof line, "%-6s %016llx %7d %9s %4u %5s  %s%s",
                 e->disk ? "disk" : "memory", (unsigned long long)e->hash, e->tokens, sz, e->hits,
                 age, e->made_by, e->disk && !e->usable ? " (other model/KV type)" : "");
        ui_draw_str(w, y++, x, tw, t->a[e->disk ? UI_C_KV_CACHED : UI_C_KV_USED], line);
    }
    if (y < y_end - 1) y++;
    char db[24];
    fmt_bytes(disk_bytes, db, sizeof db);
    snprintf(line, sizeof line, "memory: %d prefix%s · disk: %d file%s, %s", n_mem,
             n_mem == 1 ? "" : "es", n_disk, n_disk == 1 ? "" : "s", db);
    if (y < y_end) ui_draw_str(w, y, x, tw, t->a[UI_C_NORMAL], line);
}
