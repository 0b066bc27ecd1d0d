/* think: a reply's thinking (<think>…</think>, as Qwen3 and the DeepSeek-R1
 * distills write it) apart from its answer, so the chat pane can fold it
 * under a one-line summary and the instruments can time it apart. */
#ifndef TERN_UI_THINK_H
#define TERN_UI_THINK_H

#include <stdbool.h>
#include <stddef.h>

struct ui_think {
    bool has;      /* the reply opens (after blanks) with <think> */
    bool open;     /* no </think> yet: every byte so far is thinking */
    size_t from;   /* the thought: text[from..to), blank lines trimmed */
    size_t to;
    size_t answer; /* where the answer starts (after </think> and blanks); len when open */
};

/* Splits text[0..len). A reply that does not open with <think> (or a
 * prefix of it, still streaming) has none: its whole text is the answer. */
void ui_think_split(const char *text, size_t len, struct ui_think *t);

/* True while text[0..len) could still become "<think>…" (blanks, then a
 * prefix of the tag): the caller waits for more tokens before deciding. */
bool ui_think_pending(const char *text, size_t len);

#endif
