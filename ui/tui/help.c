/* help: the key reference overlay (see help.h). */
#include "help.h"

struct key_doc {
    const char *key, *what;
};

static const struct key_doc keys[] = {
    {"Enter", "send the message"},
    {"Alt-Enter, Ctrl-J", "new line in the message"},
    {"←/→, Ctrl-←/→", "move by character / word (Alt-B/F too)"},
    {"Home/End, ^A/^E", "start / end of line"},
    {"Backspace/Delete", "delete a character"},
    {"↑/↓", "earlier inputs (history)"},
    {"PgUp/PgDn, wheel", "scroll the chat"},
    {"Ctrl-Home/End", "top / bottom (Home/End: nothing typed)"},
    {"Esc", "cancel the reply being generated"},
    {"Ctrl-Y / Alt-Y", "copy the reply / its last code block"},
    {"Ctrl-R / Alt-E", "regenerate the reply / edit your last message"},
    {"F2", "instruments panel"},
    {"F3", "phase timeline; Alt-↑/↓ picks a reply"},
    {"F4", "generation parameters of the session"},
    {"F5", "sessions pane; Tab focuses it"},
    {"F6", "pick the model (reopens the engine on it)"},
    {"Ctrl-N", "new session"},
    {"Enter / r / Del", "sessions: open / rename / delete"},
    {"Ctrl-L", "redraw the screen"},
    {"Ctrl-C, F10", "quit (asks while a reply streams)"},
};

void ui_help_draw(WINDOW *w, struct ui_rect screen, const struct ui_theme *t)
{
    int n = (int)(sizeof keys / sizeof keys[0]);
    int bw = screen.w < 64 ? screen.w : 64, bh = n + 4 < screen.h ? n + 4 : screen.h;
    struct ui_rect r = {screen.y + (screen.h - bh) / 2, screen.x + (screen.w - bw) / 2, bh, bw};
    ui_draw_box(w, r, t->a[UI_C_TITLE], "keys · any key closes");
    for (int i = 0; i < n && i < bh - 3; i++) {
        int y = r.y + 1 + i;
        ui_draw_str(w, y, r.x + 2, 20, t->a[UI_C_USER], keys[i].key);
        ui_draw_str(w, y, r.x + 22, bw - 24, t->a[UI_C_NORMAL], keys[i].what);
    }
    ui_draw_str(w, r.y + bh - 2, r.x + 2, bw - 4, t->a[UI_C_DIM],
                "tern chat: the time of every reply, live.");
}
