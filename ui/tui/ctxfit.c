/* ctxfit: fitting a conversation into the context (see ctxfit.h). */
#include "ctxfit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *ui_ctx_policy_name(enum ui_ctx_policy p)
{
    return p == UI_CTX_REJECT ? "reject" : "truncate";
}

int ui_ctx_policy_parse(const char *s, enum ui_ctx_policy *out)
{
    if (!strcmp(s, "truncate")) *out = UI_CTX_TRUNCATE;
    else if (!strcmp(s, "reject")) *out = UI_CTX_REJECT;
    else return -1;
    return 0;
}

/* Tokens of sys + turns[first..n), using tmp (room for n + 1). */
static int64_t count_from(const struct engine_message *sys, const struct engine_message *turns,
                          int32_t n, int32_t first, struct engine_message *tmp,
                          ui_ctxfit_count_fn count, void *ud, char *err, size_t errlen)
{
    int32_t k = 0;
    if (sys) tmp[k++] = *sys;
    for (int32_t i = first; i < n; i++) tmp[k++] = turns[i];
    return count(ud, tmp, k, err, errlen);
}

/* The next user turn after first (so a kept conversation starts with the
 * user), or first itself when none is left before the newest turn. */
static int32_t next_user(const struct engine_message *turns, int32_t n, int32_t first)
{
    for (int32_t i = first + 1; i < n; i++)
        if (!strcmp(turns[i].role, "user")) return i;
    return first;
}

int ui_ctxfit_run(const struct engine_message *sys, const struct engine_message *turns, int32_t n,
                  int32_t first_hint, int32_t limit, int32_t max_tokens,
                  enum ui_ctx_policy policy, ui_ctxfit_count_fn count, void *ud,
                  struct ui_ctxfit *out, char *err, size_t errlen)
{
    if (limit <= 0) {
        /* context unknown (a remote server that does not say): send it all
         * and let the server answer for its own limit */
        out->first = 0;
        out->n_prompt = -1;
        out->max_tokens = max_tokens;
        return 0;
    }
    struct engine_message *tmp = malloc(((size_t)n + 1) * sizeof *tmp);
    if (!tmp) {
        snprintf(err, errlen, "out of memory fitting the conversation");
        return -1;
    }
    /* the reply budget a truncation makes room for: the asked limit, but no
     * more than a quarter of the context (what is left is still used) */
    int32_t budget = max_tokens < limit / 4 ? max_tokens : limit / 4;
    if (budget < 1) budget = 1;
    int32_t first = policy == UI_CTX_TRUNCATE && first_hint > 0 && first_hint < n ? first_hint : 0;
    int rc = -1;
    int64_t p = count_from(sys, turns, n, first, tmp, count, ud, err, errlen);
    if (p < 0) goto done;
    if (policy == UI_CTX_TRUNCATE && p + budget > limit) {
        /* Drop past the point that fits, to three quarters of the context:
         * the following turns then keep this start (and reuse its cached
         * prefix) until they have filled the headroom. */
        int32_t target = limit - limit / 4;
        while (p + budget > target) {
            int32_t nf = next_user(turns, n, first);
            if (nf == first) break;
            first = nf;
            p = count_from(sys, turns, n, first, tmp, count, ud, err, errlen);
            if (p < 0) goto done;
        }
    }
    rc = 1;
    if (p + 1 > limit) {
        if (policy == UI_CTX_TRUNCATE)
            snprintf(err, errlen, "the newest message alone is %lld tokens%s; the context holds %d",
                     (long long)p, sys ? " with the system prompt" : "", limit);
        else
            snprintf(err, errlen,
                     "the conversation is %lld tokens; the context holds %d (context policy "
                     "reject: Ctrl-N starts a new session, F4 sets truncate)",
                     (long long)p, limit);
        goto done;
    }
    if (policy == UI_CTX_REJECT && p + budget > limit) {
        snprintf(err, errlen,
                 "the conversation is %lld tokens and a reply needs %d more; the context holds "
                 "%d (context policy reject: Ctrl-N starts a new session, F4 sets truncate)",
                 (long long)p, budget, limit);
        goto done;
    }
    out->first = first;
    out->n_prompt = (int32_t)p;
    out->max_tokens = limit - (int32_t)p < max_tokens ? limit - (int32_t)p : max_tokens;
    rc = 0;
done:
    free(tmp);
    return rc;
}
