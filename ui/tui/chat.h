/* chat: the transcript pane. User and assistant turns under distinct
 * headers, text wrapped at word boundaries (text.h), ``` code blocks in
 * their own colour, the streaming reply with a cursor, notes for cancelled
 * or failed replies; scrolled by ui_state.scroll lines from the bottom. */
#ifndef TERN_UI_CHAT_H
#define TERN_UI_CHAT_H

#include "draw.h"
#include "state.h"
#include "theme.h"

/* Display lines of the whole transcript at the pane width r.w (layout is
 * cached per message, so this is cheap once replies are finished). */
int ui_chat_lines(struct ui_state *s, int pane_w);
/* Clamps s->scroll to the transcript and draws it into r. */
void ui_chat_draw(WINDOW *w, struct ui_rect r, struct ui_state *s, const struct ui_theme *t,
                  const char *title, bool mark_selected);

#endif
