/* test_logprobs_wire: engine/wire/oai_logprobs without a server: the
 * client-side reader of a prompt's log-probabilities from vLLM's
 * prompt_logprobs (fixture vllm-prompt-logprobs.json, in the response shape
 * of vLLM 0.6-0.8's OpenAI server: a list with null first, then per position
 * {"ID": {logprob, rank, decoded_token}}) and from echo's token_logprobs;
 * refusals that say what is missing; builders read back by the reader;
 * a token that is not UTF-8 alone written as "bytes:\xNN". */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "oai_logprobs.h"
#include "tap.h"

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return buf;
}

/* Token bytes for the builders: id 1..4 are words, 9 is half of "é". */
static int bytes_of(void *ud, int32_t id, char *out, size_t cap)
{
    (void)ud;
    static const char *const w[] = {"<s>", "The", " capital", " of", " France"};
    if (id == 9) {
        if (cap < 1) return -1;
        out[0] = (char)0xC3;
        return 1;
    }
    if (id < 0 || id > 4) return -1;
    size_t n = strlen(w[id]);
    if (n > cap) return -1;
    memcpy(out, w[id], n);
    return (int)n;
}

int main(void)
{
    char path[1024], err[256];
    snprintf(path, sizeof path, "%s/tests/engine/remote/fixtures/vllm-prompt-logprobs.json",
             getenv("TERN_SRC") ? getenv("TERN_SRC") : ".");
    const char *vl = slurp(path);
    tap_ok(vl != NULL, "fixture %s", path);
    if (!vl) return tap_done();
    const int32_t ids[5] = {504, 3575, 282, 4649, 314};
    double lp[5];
    int rc = oai_prompt_logprobs_parse(vl, strlen(vl), ids, 5, lp, err, sizeof err);
    tap_ok(rc == 0 && isnan(lp[0]) && fabs(lp[1] + 11.507) < 1e-9 && fabs(lp[3] + 2.452) < 1e-9 &&
               fabs(lp[4] + 0.531) < 1e-9,
           "vLLM prompt_logprobs: each prompt token's own entry, not the top one (%g %g %g)",
           lp[1], lp[3], lp[4]);
    const int32_t other[5] = {504, 3575, 282, 260, 314}; /* position 3 as ' the' */
    rc = oai_prompt_logprobs_parse(vl, strlen(vl), other, 5, lp, err, sizeof err);
    tap_ok(rc == 0 && fabs(lp[3] + 2.254) < 1e-9, "vLLM: the entry is found by the id asked (%g)",
           lp[3]);
    rc = oai_prompt_logprobs_parse(vl, strlen(vl), ids, 6, lp, err, sizeof err);
    tap_ok(rc == -1 && strstr(err, "5 entries"), "vLLM: a prompt longer than the list: %s", err);

    const char *echo = "{\"choices\":[{\"text\":\"The capital\",\"logprobs\":{\"tokens\":[\"The\","
                       "\" capital\"],\"token_logprobs\":[null,-1.5],\"top_logprobs\":[null,"
                       "{\" capital\":-1.5}],\"text_offset\":[0,3]}}]}";
    rc = oai_prompt_logprobs_parse(echo, strlen(echo), ids, 2, lp, err, sizeof err);
    tap_ok(rc == 0 && isnan(lp[0]) && lp[1] == -1.5, "echo: token_logprobs read (%g)", lp[1]);
    rc = oai_prompt_logprobs_parse(echo, strlen(echo), ids, 3, lp, err, sizeof err);
    tap_ok(rc == -1 && strstr(err, "echo"), "echo: fewer entries than the prompt: %s", err);
    const char *none = "{\"choices\":[{\"text\":\"x\",\"logprobs\":null}]}";
    rc = oai_prompt_logprobs_parse(none, strlen(none), ids, 2, lp, err, sizeof err);
    tap_ok(rc == -1 && strstr(err, "prompt_logprobs") && strstr(err, "token_logprobs"),
           "no prompt log-probabilities at all: %s", err);
    rc = oai_prompt_logprobs_parse("{nope", 5, ids, 2, lp, err, sizeof err);
    tap_ok(rc == -1 && strstr(err, "not JSON"), "not JSON: %s", err);

    /* builders -> reader */
    struct engine_logprob e[4] = {
        {.token = 1, .logprob = NAN},
        {.token = 2, .logprob = -2.0f, .rank = 3, .n_top = 2,
         .top = {{.token = 3, .logprob = -0.5f}, {.token = 4, .logprob = -1.0f}}},
        {.token = 3, .logprob = -0.25f, .rank = 1, .n_top = 1, .top = {{3, -0.25f}}},
        {.token = 9, .logprob = -3.0f, .rank = 7},
    };
    struct oai_lp_list l = {e, 4, 2, bytes_of, NULL};
    int64_t off = 0;
    cJSON *c = oai_logprobs_completion_json(&l, NULL, &off);
    cJSON *root = cJSON_CreateObject(), *chs = cJSON_AddArrayToObject(root, "choices");
    cJSON *ch = cJSON_CreateObject();
    cJSON_AddItemToArray(chs, ch);
    cJSON_AddItemToObject(ch, "logprobs", c);
    char *s = cJSON_PrintUnformatted(root);
    const int32_t bids[4] = {1, 2, 3, 9};
    double b[4];
    rc = oai_prompt_logprobs_parse(s, strlen(s), bids, 4, b, err, sizeof err);
    tap_ok(rc == 0 && isnan(b[0]) && b[1] == -2.0 && b[2] == -0.25 && b[3] == -3.0,
           "completion builder read back: null, -2, -0.25, -3");
    tap_ok(off == 3 + 8 + 3 + 1, "text_offset advanced by the token bytes (%lld)", (long long)off);
    tap_ok(strstr(s, "\"bytes:\\\\xc3\"") != NULL, "a partial UTF-8 token is written bytes:\\xc3");
    tap_ok(strstr(s, "{\" capital\":-2,\" of\":-0.5,\" France\":-1}") != NULL,
           "top_logprobs dict: the chosen token, then the alternatives (%s)", s);
    free(s);
    cJSON_Delete(root);
    cJSON *pl = oai_prompt_logprobs_json(&l);
    s = cJSON_PrintUnformatted(pl);
    tap_ok(s && !strncmp(s, "[null,{\"2\":{\"logprob\":-2,\"rank\":3,\"decoded_token\":\" capital\"},"
                            "\"3\":{\"logprob\":-0.5,\"rank\":1", 86),
           "vLLM prompt_logprobs builder: null first, the token's rank, then ranked alternatives");
    root = cJSON_CreateObject();
    chs = cJSON_AddArrayToObject(root, "choices");
    ch = cJSON_CreateObject();
    cJSON_AddItemToArray(chs, ch);
    cJSON_AddItemToObject(ch, "prompt_logprobs", pl);
    char *s2 = cJSON_PrintUnformatted(root);
    rc = oai_prompt_logprobs_parse(s2, strlen(s2), bids, 4, b, err, sizeof err);
    tap_ok(rc == 0 && b[1] == -2.0 && b[2] == -0.25 && b[3] == -3.0,
           "vLLM builder read back by the reader");
    free(s);
    free(s2);
    cJSON_Delete(root);
    cJSON *cj = oai_logprobs_chat_json(&l);
    s = cJSON_PrintUnformatted(cj);
    tap_ok(s && strstr(s, "\"token\":\" capital\",\"logprob\":-2,\"bytes\":[32,99,97,112,105,116,97,"
                          "108],\"top_logprobs\":[{\"token\":\" of\"") != NULL,
           "chat builder: token, logprob, bytes, top_logprobs");
    free(s);
    cJSON_Delete(cj);
    return tap_done();
}
