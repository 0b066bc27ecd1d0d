/* gauge: sparkline and segmented bar (see gauge.h). */
#include "gauge.h"

int ui_gauge_spark(WINDOW *w, int y, int x, int width, attr_t attr, const double *v, size_t n)
{
    static const char *const ticks[8] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
    size_t from = n > (size_t)width ? n - (size_t)width : 0;
    double max = 0;
    for (size_t i = from; i < n; i++)
        if (v[i] > max) max = v[i];
    wattrset(w, attr);
    wmove(w, y, x);
    for (size_t i = from; i < n; i++) {
        int k = max > 0 ? (int)(v[i] / max * 7.0 + 0.5) : 0;
        waddstr(w, ticks[k < 0 ? 0 : k > 7 ? 7 : k]);
    }
    wattrset(w, A_NORMAL);
    return (int)(n - from);
}

void ui_gauge_split(int width, const double *val, int nseg, int *out)
{
    double sum = 0;
    int given = 0, biggest = 0;
    for (int i = 0; i < nseg; i++) sum += val[i] > 0 ? val[i] : 0;
    for (int i = 0; i < nseg; i++) {
        double v = val[i] > 0 ? val[i] : 0;
        out[i] = sum > 0 ? (int)(v / sum * width + 0.5) : 0;
        if (v > 0 && out[i] == 0 && width >= nseg) out[i] = 1;
        given += out[i];
        if (out[i] > out[biggest]) biggest = i;
    }
    /* rounding error goes to (or comes from) the largest segment */
    if (sum > 0)
        out[biggest] += width - given;
    else
        out[nseg - 1] = width;
}

void ui_gauge_bar(WINDOW *w, int y, int x, int width, const double *val, const attr_t *attr,
                  const char *const *cells, int nseg)
{
    int n[8];
    if (nseg > 8 || width <= 0) return;
    ui_gauge_split(width, val, nseg, n);
    for (int i = 0; i < nseg; i++) {
        ui_draw_fill(w, y, x, n[i], attr[i], cells[i]);
        x += n[i];
    }
}
