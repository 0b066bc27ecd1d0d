/* gauge: the small meters the instruments panel is made of: a sparkline
 * of recent values and a segmented bar (used / cached / free). */
#ifndef TERN_UI_GAUGE_H
#define TERN_UI_GAUGE_H

#include <stddef.h>

#include "draw.h"

/* Draws the last up-to-width values of v (oldest first) as ▁..█ scaled to
 * their max. Returns the columns drawn. */
int ui_gauge_spark(WINDOW *w, int y, int x, int width, attr_t attr, const double *v, size_t n);
/* Splits width cells between segments proportionally to val[i] (each
 * nonzero segment gets at least one cell when it can); cells[i] is the
 * glyph of segment i (distinct glyphs keep it readable in monochrome). */
void ui_gauge_bar(WINDOW *w, int y, int x, int width, const double *val, const attr_t *attr,
                  const char *const *cells, int nseg);
/* Cells each segment gets (exposed for tests). */
void ui_gauge_split(int width, const double *val, int nseg, int *out);

#endif
