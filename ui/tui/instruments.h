/* instruments: the F2 panel. Model and backend, TTFT/TPOT of the last
 * reply with p50/p90 over the session and engine-wide, tokens/s, a TPOT
 * sparkline, queue and running counts, the KV-cache occupancy bar (used /
 * reusable prefix / free blocks), prefix hit rate and preemptions. Values
 * past the engine's SLO are drawn in the warning colour. */
#ifndef TERN_UI_INSTRUMENTS_H
#define TERN_UI_INSTRUMENTS_H

#include "draw.h"
#include "state.h"
#include "theme.h"

void ui_instruments_draw(WINDOW *w, struct ui_rect r, const struct ui_state *s,
                         const struct ui_theme *t);
/* "850 µs", "12.3 ms", "345 ms", "1.24 s", or "–" for a negative (unmeasured) value. */
void ui_fmt_dur(char *buf, size_t n, double s);
/* Compact counts: "999", "12.3k", "345k", "1.2M". */
void ui_fmt_count(char *buf, size_t n, double v);
/* The context gauge's warning point: next prompt at 80% of the context. */
#define UI_CTX_WARN 0.8

#endif
