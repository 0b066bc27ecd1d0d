/* ctxfit: fitting a conversation into the context before it is sent. The
 * policy "truncate" drops the oldest turns (never the system prompt, never
 * the newest user turn) until the prompt plus a reply budget fits, and
 * shortens max_tokens to what remains; "reject" drops nothing and refuses
 * what cannot fit. Token counts come from a callback (the engine's chat
 * template and tokenizer), so this module has no engine of its own and the
 * unit test drives it with a plain counter. */
#ifndef TERN_UI_CTXFIT_H
#define TERN_UI_CTXFIT_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"

enum ui_ctx_policy { UI_CTX_TRUNCATE, UI_CTX_REJECT };

/* "truncate" / "reject"; parse returns -1 for anything else. */
const char *ui_ctx_policy_name(enum ui_ctx_policy p);
int ui_ctx_policy_parse(const char *s, enum ui_ctx_policy *out);

/* Tokens of the rendered conversation v[0..n), or -1 with err. */
typedef int64_t (*ui_ctxfit_count_fn)(void *ud, const struct engine_message *v, int32_t n,
                                      char *err, size_t errlen);

struct ui_ctxfit {
    int32_t first;      /* first kept turn (index into turns) */
    int32_t n_prompt;   /* tokens of the prompt that is sent */
    int32_t max_tokens; /* reply limit after fitting (<= the one asked) */
};

/* sys: the system prompt or NULL; turns[0..n) alternate user/assistant and
 * end with the newest user turn. first_hint: the first turn kept last time
 * (kept again so the prefix cache still matches; only moved forward when the
 * conversation has outgrown it). limit: tokens one sequence can hold; <= 0:
 * unknown (a remote server): nothing is dropped, n_prompt is -1.
 * Returns 0 (fits; *out filled), 1 (cannot fit under the policy; err says
 * why, with the numbers) or -1 (counting failed; err). */
int ui_ctxfit_run(const struct engine_message *sys, const struct engine_message *turns, int32_t n,
                  int32_t first_hint, int32_t limit, int32_t max_tokens,
                  enum ui_ctx_policy policy, ui_ctxfit_count_fn count, void *ud,
                  struct ui_ctxfit *out, char *err, size_t errlen);

#endif
