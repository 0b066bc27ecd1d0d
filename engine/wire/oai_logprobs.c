/* oai_logprobs: the logprobs fields of OpenAI (and vLLM) responses, built
 * from engine_logprob entries and read back (see oai_logprobs.h). */
#include "oai_logprobs.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oai_request.h"

#define PIECE_MAX 256

/* The token's text for JSON: its bytes when valid UTF-8, else "bytes:\xNN..". */
static int token_text(const struct oai_lp_list *l, int32_t id, char *raw, int *nraw, char *txt,
                      size_t cap)
{
    int n = l->bytes ? l->bytes(l->ud, id, raw, PIECE_MAX) : -1;
    if (n < 0) n = 0;
    *nraw = n;
    if (oai_utf8_valid(raw, (size_t)n)) {
        memcpy(txt, raw, (size_t)n);
        txt[n] = 0;
        return 0;
    }
    size_t k = (size_t)snprintf(txt, cap, "bytes:");
    for (int i = 0; i < n && k + 5 < cap; i++)
        k += (size_t)snprintf(txt + k, cap - k, "\\x%02x", (unsigned char)raw[i]);
    return 0;
}

static cJSON *chat_entry(const struct oai_lp_list *l, int32_t id, float lp)
{
    char raw[PIECE_MAX], txt[PIECE_MAX * 4 + 8];
    int nraw;
    token_text(l, id, raw, &nraw, txt, sizeof txt);
    cJSON *e = cJSON_CreateObject(), *b;
    if (!e || !cJSON_AddStringToObject(e, "token", txt) ||
        !cJSON_AddNumberToObject(e, "logprob", lp) || !(b = cJSON_AddArrayToObject(e, "bytes"))) {
        cJSON_Delete(e);
        return NULL;
    }
    for (int i = 0; i < nraw; i++) cJSON_AddItemToArray(b, cJSON_CreateNumber((unsigned char)raw[i]));
    return e;
}

static int32_t tops(const struct oai_lp_list *l, const struct engine_logprob *p)
{
    return l->n_top < p->n_top ? l->n_top : p->n_top;
}

cJSON *oai_logprobs_chat_json(const struct oai_lp_list *l)
{
    cJSON *o = cJSON_CreateObject(), *c = o ? cJSON_AddArrayToObject(o, "content") : NULL;
    if (!c || !cJSON_AddNullToObject(o, "refusal")) goto fail;
    for (int32_t i = 0; l && i < l->n; i++) {
        const struct engine_logprob *p = &l->lp[i];
        cJSON *e = chat_entry(l, p->token, p->logprob), *t;
        if (!e || !cJSON_AddItemToArray(c, e) || !(t = cJSON_AddArrayToObject(e, "top_logprobs")))
            goto fail;
        for (int32_t k = 0; k < tops(l, p); k++) {
            cJSON *a = chat_entry(l, p->top[k].token, p->top[k].logprob);
            if (!a || !cJSON_AddItemToArray(t, a)) goto fail;
        }
    }
    return o;
fail:
    cJSON_Delete(o);
    return NULL;
}

/* {text: logprob} of the entry's token and its alternatives (vLLM includes
 * the chosen token); a text already present keeps its first value. */
static cJSON *top_dict(const struct oai_lp_list *l, const struct engine_logprob *p)
{
    char raw[PIECE_MAX], txt[PIECE_MAX * 4 + 8];
    int nraw;
    cJSON *d = cJSON_CreateObject();
    if (!d) return NULL;
    for (int32_t k = -1; k < tops(l, p); k++) {
        int32_t id = k < 0 ? p->token : p->top[k].token;
        float lp = k < 0 ? p->logprob : p->top[k].logprob;
        token_text(l, id, raw, &nraw, txt, sizeof txt);
        if (!cJSON_GetObjectItemCaseSensitive(d, txt)) cJSON_AddNumberToObject(d, txt, lp);
    }
    return d;
}

static int add_completion(cJSON *toks, cJSON *lps, cJSON *top, cJSON *off,
                          const struct oai_lp_list *l, int64_t *text_offset)
{
    char raw[PIECE_MAX], txt[PIECE_MAX * 4 + 8];
    int nraw;
    for (int32_t i = 0; l && i < l->n; i++) {
        const struct engine_logprob *p = &l->lp[i];
        token_text(l, p->token, raw, &nraw, txt, sizeof txt);
        bool none = isnan(p->logprob);
        cJSON *d = none ? cJSON_CreateNull() : top_dict(l, p);
        if (!cJSON_AddItemToArray(toks, cJSON_CreateString(txt)) ||
            !cJSON_AddItemToArray(lps, none ? cJSON_CreateNull() : cJSON_CreateNumber(p->logprob)) ||
            !d || !cJSON_AddItemToArray(top, d) ||
            !cJSON_AddItemToArray(off, cJSON_CreateNumber((double)*text_offset)))
            return -1;
        *text_offset += nraw;
    }
    return 0;
}

cJSON *oai_logprobs_completion_json(const struct oai_lp_list *prompt, const struct oai_lp_list *gen,
                                    int64_t *text_offset)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *toks = o ? cJSON_AddArrayToObject(o, "tokens") : NULL;
    cJSON *lps = toks ? cJSON_AddArrayToObject(o, "token_logprobs") : NULL;
    cJSON *top = lps ? cJSON_AddArrayToObject(o, "top_logprobs") : NULL;
    cJSON *off = top ? cJSON_AddArrayToObject(o, "text_offset") : NULL;
    if (!off || add_completion(toks, lps, top, off, prompt, text_offset) != 0 ||
        add_completion(toks, lps, top, off, gen, text_offset) != 0) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static bool add_ranked(cJSON *d, const struct oai_lp_list *l, int32_t id, float lp, int32_t rank)
{
    char key[16], raw[PIECE_MAX], txt[PIECE_MAX * 4 + 8];
    int nraw;
    snprintf(key, sizeof key, "%d", id);
    if (cJSON_GetObjectItemCaseSensitive(d, key)) return true;
    token_text(l, id, raw, &nraw, txt, sizeof txt);
    cJSON *e = cJSON_AddObjectToObject(d, key);
    return e && cJSON_AddNumberToObject(e, "logprob", lp) &&
           cJSON_AddNumberToObject(e, "rank", rank) && cJSON_AddStringToObject(e, "decoded_token", txt);
}

cJSON *oai_prompt_logprobs_json(const struct oai_lp_list *l)
{
    cJSON *a = cJSON_CreateArray();
    for (int32_t i = 0; a && i < l->n; i++) {
        const struct engine_logprob *p = &l->lp[i];
        cJSON *d = isnan(p->logprob) ? cJSON_CreateNull() : cJSON_CreateObject();
        bool ok = d && cJSON_AddItemToArray(a, d);
        ok = ok && (isnan(p->logprob) || add_ranked(d, l, p->token, p->logprob, p->rank));
        for (int32_t k = 0; ok && !isnan(p->logprob) && k < tops(l, p); k++)
            ok = add_ranked(d, l, p->top[k].token, p->top[k].logprob, k + 1);
        if (!ok) {
            cJSON_Delete(a);
            return NULL;
        }
    }
    return a;
}

/* vLLM: [null, {"ID": {"logprob": x, ...}}, ...]. */
static int from_prompt_logprobs(const cJSON *pl, const int32_t *ids, int32_t n, double *out,
                                char *err, size_t errlen)
{
    if (cJSON_GetArraySize(pl) < n) {
        snprintf(err, errlen, "prompt_logprobs has %d entries for a prompt of %d tokens",
                 cJSON_GetArraySize(pl), n);
        return -1;
    }
    const cJSON *e = pl->child;
    for (int32_t i = 0; i < n; i++, e = e->next) {
        out[i] = NAN;
        if (!cJSON_IsObject(e)) continue;
        char key[16];
        snprintf(key, sizeof key, "%d", ids[i]);
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(e, key);
        const cJSON *v = cJSON_IsObject(t) ? cJSON_GetObjectItemCaseSensitive(t, "logprob") : t;
        if (cJSON_IsNumber(v)) out[i] = v->valuedouble;
    }
    return 0;
}

int oai_prompt_logprobs_parse(const char *json, size_t len, const int32_t *ids, int32_t n,
                              double *out, char *err, size_t errlen)
{
    int rc = -1;
    cJSON *j = cJSON_ParseWithLength(json, len);
    const cJSON *ch = j ? cJSON_GetObjectItemCaseSensitive(j, "choices") : NULL;
    ch = cJSON_IsArray(ch) ? ch->child : NULL;
    if (!cJSON_IsObject(ch)) {
        snprintf(err, errlen, "the response has no choices[0] object");
        goto done;
    }
    const cJSON *pl = cJSON_GetObjectItemCaseSensitive(ch, "prompt_logprobs");
    if (cJSON_IsArray(pl)) {
        rc = from_prompt_logprobs(pl, ids, n, out, err, errlen);
        goto done;
    }
    const cJSON *lp = cJSON_GetObjectItemCaseSensitive(ch, "logprobs");
    const cJSON *tl = cJSON_IsObject(lp) ? cJSON_GetObjectItemCaseSensitive(lp, "token_logprobs")
                                         : NULL;
    if (!cJSON_IsArray(tl)) {
        snprintf(err, errlen, "the response has neither prompt_logprobs nor "
                              "logprobs.token_logprobs (echo)");
        goto done;
    }
    if (cJSON_GetArraySize(tl) < n) {
        snprintf(err, errlen, "logprobs.token_logprobs has %d entries for a prompt of %d tokens "
                              "(echo not honoured?)", cJSON_GetArraySize(tl), n);
        goto done;
    }
    const cJSON *v = tl->child;
    for (int32_t i = 0; i < n; i++, v = v->next)
        out[i] = cJSON_IsNumber(v) ? v->valuedouble : NAN;
    rc = 0;
done:
    if (!j) snprintf(err, errlen, "the response is not JSON");
    cJSON_Delete(j);
    return rc;
}
