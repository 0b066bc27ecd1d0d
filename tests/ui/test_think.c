/* test_think: a reply's thinking split from its answer (ui/tui/think.h), on
 * the shapes replies take: none, open (streaming), closed, blanks around the
 * tags, a tag split across tokens, a second <think> inside the answer, and a
 * streaming reply counted token by token (ui_msg_track_think). */
#include <stdlib.h>

#include "tap.h"
#include "ui/tui/state.h"
#include "ui/tui/think.h"

static void split(const char *s, struct ui_think *t)
{
    ui_think_split(s, strlen(s), t);
}

static char *slice(const char *s, size_t a, size_t b)
{
    static char buf[256];
    snprintf(buf, sizeof buf, "%.*s", (int)(b - a), s + a);
    return buf;
}

int main(void)
{
    struct ui_think t;
    const char *none = "Blue, as on a clear day.";
    split(none, &t);
    tap_ok(!t.has && t.answer == 0, "no <think>: the whole text is the answer");

    const char *closed = "\n<think>\nThe sky is blue.\n\n</think>\n\nBlue";
    split(closed, &t);
    tap_ok(t.has && !t.open, "closed thinking found");
    tap_ok(!strcmp(slice(closed, t.from, t.to), "The sky is blue."),
           "the thought trimmed of blank lines: '%s'", slice(closed, t.from, t.to));
    tap_ok(!strcmp(closed + t.answer, "Blue"), "the answer after </think> and blanks: '%s'",
           closed + t.answer);

    const char *open = "<think>Snow is white and";
    split(open, &t);
    tap_ok(t.has && t.open && t.answer == strlen(open), "open thinking: no answer yet");
    tap_ok(!strcmp(slice(open, t.from, t.to), "Snow is white and"), "open thought so far");

    const char *twice = "<think>a</think>b <think>c</think>";
    split(twice, &t);
    tap_ok(!strcmp(slice(twice, t.from, t.to), "a") && !strcmp(twice + t.answer, "b <think>c</think>"),
           "only the opening block is thinking");

    const char *late = "Sure. <think>no</think>";
    split(late, &t);
    tap_ok(!t.has, "a <think> after text is the answer's");

    tap_ok(ui_think_pending("  <thi", 6), "'  <thi' may still become a tag");
    tap_ok(ui_think_pending("", 0), "an empty reply may still think");
    tap_ok(!ui_think_pending("<tho", 4), "'<tho' cannot");
    tap_ok(!ui_think_pending("<think>", 7), "a whole tag is not pending");

    /* a reply streamed token by token, the tag split across tokens */
    const char *toks[] = {"<", "think", ">", "Snow", " is", " white", ".</", "think", ">",
                          "White"};
    struct ui_msg m;
    memset(&m, 0, sizeof m);
    m.ph.t0 = 10.0;
    m.ph.prefill_end = 0.5;
    for (int i = 0; i < 10; i++) {
        ui_msg_append(&m, toks[i], strlen(toks[i]));
        m.ph.n_generated++;
        ui_msg_track_think(&m, 10.5 + 0.1 * i);
        if (i == 1) tap_ok(m.think == UI_THINK_UNKNOWN, "undecided while the tag is spelled");
        if (i == 2) tap_ok(m.think == UI_THINK_OPEN && m.think_tokens == 3,
                           "open once the tag is whole, its 3 tokens counted (%d)", m.think_tokens);
    }
    tap_ok(m.think == UI_THINK_DONE && m.think_tokens == 9,
           "done at </think>: 9 thinking tokens (%d)", m.think_tokens);
    tap_ok(fabs(m.think_s - 0.8) < 1e-9, "thinking time from the first token to </think>: %.3f",
           m.think_s);
    free(m.text);

    memset(&m, 0, sizeof m);
    ui_msg_append(&m, "Hello", 5);
    m.ph.n_generated = 1;
    ui_msg_track_think(&m, 1);
    tap_ok(m.think == UI_THINK_NONE && m.think_tokens == 0, "a plain reply never thinks");
    free(m.text);
    return tap_done();
}
