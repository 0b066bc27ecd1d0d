/* layout: pane rectangles for a screen size (see layout.h). */
#include "layout.h"

static int clampi(int v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

void ui_layout_compute(struct ui_layout *L, int rows, int cols, bool sessions, bool instruments,
                       bool timeline, int input_lines)
{
    int in_h = clampi(input_lines, 1, rows / 3 > 1 ? rows / 3 : 1) + 2;
    int body_h = rows - 1 - in_h;
    int sess_w = clampi(cols / 5, 18, 30);
    int inst_w = clampi(cols / 3, 30, 44);
    int chat_min = 36;
    /* side panes give way when the chat would be narrower than chat_min */
    L->instruments = instruments && cols - inst_w >= chat_min;
    if (!L->instruments) inst_w = 0;
    /* both asked for and too wide: the instruments narrow first (their rows
     * have compact forms), then the sessions pane alone stays */
    if (sessions && L->instruments && cols - inst_w - sess_w < chat_min) {
        inst_w = cols - sess_w - chat_min;
        if (inst_w < 26) L->instruments = false, inst_w = 0;
    }
    L->sessions = sessions && cols - inst_w - sess_w >= chat_min;
    if (!L->sessions) sess_w = 0;
    int tl_h = 6;
    L->timeline = timeline && body_h - tl_h >= 6;
    if (!L->timeline) tl_h = 0;

    L->r_sessions = (struct ui_rect){0, 0, body_h + in_h, sess_w};
    L->r_instruments = (struct ui_rect){0, cols - inst_w, body_h, inst_w};
    int chat_x = sess_w, chat_w = cols - sess_w - inst_w;
    L->r_chat = (struct ui_rect){0, chat_x, body_h - tl_h, chat_w};
    L->r_timeline = (struct ui_rect){body_h - tl_h, chat_x, tl_h, chat_w};
    L->r_input = (struct ui_rect){body_h, chat_x, in_h, cols - sess_w};
    L->r_status = (struct ui_rect){rows - 1, 0, 1, cols};
}
