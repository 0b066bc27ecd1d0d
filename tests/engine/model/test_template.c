/* test_template: chat templates. Every case of tests/engine/model/tok/templates/golden.json
 * (jinja2 renderings made by make_templates.py) must be reproduced exactly
 * from the template text: detection of the family, then rendering (or an
 * error where the Jinja template raises). Also the fallback for unknown
 * templates, --template names, and the real models' files. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gguf.h"
#include "template.h"
#include "tok.h"
#include "tap.h"
#include "tok_testutil.h"

static void show_diff(const char *got, const char *want)
{
    size_t i = 0;
    while (got[i] && got[i] == want[i]) i++;
    tap_diag("  differs at byte %zu: got \"%.40s\" want \"%.40s\"", i, got + i, want + i);
}

static void golden_cases(const char *src)
{
    char path[1024], err[256];
    snprintf(path, sizeof path, "%s/tests/engine/model/tok/templates/golden.json", src);
    char *js = tt_slurp(path, NULL);
    cJSON *root = js ? cJSON_Parse(js) : NULL;
    free(js);
    if (!root) {
        ok(0, "read %s", path);
        return;
    }
    cJSON *convs = cJSON_GetObjectItem(root, "conversations");
    cJSON *c;
    int n_cases = 0, n_ok = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(root, "cases"))
    {
        const char *name = cJSON_GetObjectItem(c, "template")->valuestring;
        const char *family = cJSON_GetObjectItem(c, "family")->valuestring;
        int ci = cJSON_GetObjectItem(c, "conv")->valueint;
        bool agp = cJSON_IsTrue(cJSON_GetObjectItem(c, "agp"));
        cJSON *want = cJSON_GetObjectItem(c, "out");
        snprintf(path, sizeof path, "%s/tests/engine/model/tok/templates/%s.jinja", src, name);
        char *jinja = tt_slurp(path, NULL);
        struct tmpl t;
        if (!jinja || tmpl_init(&t, jinja, NULL, cJSON_GetObjectItem(c, "bos")->valuestring,
                                cJSON_GetObjectItem(c, "eos")->valuestring, err, sizeof err)) {
            ok(0, "%s: load template (%s)", name, jinja ? err : "unreadable");
            free(jinja);
            continue;
        }
        free(jinja);
        cJSON *conv = cJSON_GetArrayItem(convs, ci), *m;
        struct tmpl_msg msgs[16];
        size_t n = 0;
        cJSON_ArrayForEach(m, conv)
        {
            msgs[n].role = cJSON_GetObjectItem(m, "role")->valuestring;
            msgs[n].content = cJSON_GetObjectItem(m, "content")->valuestring;
            n++;
        }
        char *out = NULL;
        int rc = tmpl_apply(&t, msgs, n, agp, &out, err, sizeof err);
        bool fam_ok = strcmp(tmpl_family_name(t.family), family) == 0 && !t.fallback;
        bool same = cJSON_IsNull(want) ? rc != 0 : rc == 0 && strcmp(out, want->valuestring) == 0;
        n_cases++;
        n_ok += fam_ok && same;
        if (!fam_ok || !same) {
            ok(0, "%s conversation %d agp=%d: family %s (want %s), %s", name, ci, agp,
               tmpl_family_name(t.family), family,
               cJSON_IsNull(want) ? "the template raises" : "rendered as jinja2");
            if (rc) tap_diag("  error: %s", err);
            else if (!cJSON_IsNull(want)) show_diff(out, want->valuestring);
        }
        free(out);
        tmpl_free(&t);
    }
    ok(n_cases >= 100 && n_ok == n_cases, "%d/%d jinja2 renderings reproduced exactly", n_ok,
       n_cases);
    cJSON_Delete(root);
}

static char *golden_first(const char *src, const char *name);

/* An OpenAI conversation as tmpl_apply receives it from engine/wire: the
 * tools, calls and results in the structured roles (template.h). The
 * strings live in *keep (freed by the caller). */
static size_t tool_msgs(const cJSON *tools, const cJSON *conv, struct tmpl_msg *m, char **keep)
{
    size_t n = 0;
    if (tools && !cJSON_IsNull(tools)) {
        m[n].role = TMPL_ROLE_TOOLS;
        m[n].content = keep[n] = cJSON_PrintUnformatted(tools);
        n++;
    }
    const cJSON *x;
    cJSON_ArrayForEach(x, conv)
    {
        const char *role = cJSON_GetObjectItem(x, "role")->valuestring;
        const cJSON *content = cJSON_GetObjectItem(x, "content");
        const cJSON *calls = cJSON_GetObjectItem(x, "tool_calls");
        if (strcmp(role, "tool") == 0 || calls) {
            cJSON *o = cJSON_CreateObject();
            if (calls) cJSON_AddItemToObject(o, "tool_calls", cJSON_Duplicate(calls, true));
            const cJSON *id = cJSON_GetObjectItem(x, "tool_call_id");
            if (id) cJSON_AddStringToObject(o, "tool_call_id", id->valuestring);
            cJSON_AddItemToObject(o, "content", cJSON_Duplicate(content, true));
            m[n].role = calls ? TMPL_ROLE_TOOL_CALLS : TMPL_ROLE_TOOL;
            m[n].content = keep[n] = cJSON_PrintUnformatted(o);
            cJSON_Delete(o);
        } else {
            m[n].role = role;
            m[n].content = content->valuestring;
            keep[n] = NULL;
        }
        n++;
    }
    return n;
}

/* What the goldens cannot show: OpenAI's long call ids on Mistral, Llama
 * 3.2's date of today, malformed tool roles. */
static void tool_edges(void)
{
    char err[256], *out = NULL;
    struct tmpl t;
    const char *tools = "[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]";
    struct tmpl_msg m[4] = {
        {TMPL_ROLE_TOOLS, tools},
        {"user", "hi"},
        {TMPL_ROLE_TOOL_CALLS, "{\"tool_calls\":[{\"id\":\"call_abc_0123456789\",\"type\":"
                               "\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}],"
                               "\"content\":null}"},
        {TMPL_ROLE_TOOL, "{\"tool_call_id\":\"call_abc_0123456789\",\"content\":\"42\"}"},
    };
    tmpl_init(&t, "[INST] [AVAILABLE_TOOLS][ [TOOL_RESULTS]", NULL, "<s>", "</s>", err, sizeof err);
    int rc = tmpl_apply(&t, m, 4, false, &out, err, sizeof err);
    ok(rc == 0 && strstr(out, "\"id\": \"123456789\"}]</s>[TOOL_RESULTS]{\"content\": 42, "
                              "\"call_id\": \"123456789\"}"),
       "Mistral: a long OpenAI call id keeps its last 9 characters (%s)", rc ? err : out);
    free(out);
    m[3].content = "{\"tool_call_id\":\"c1\",\"content\":\"42\"}";
    ok(tmpl_apply(&t, m, 4, false, &out, err, sizeof err) == -1 && strstr(err, "length 9"),
       "Mistral: a short id is an error, as the template raises: %s", err);
    tmpl_free(&t);
    tmpl_init(&t, "<|start_header_id|><|end_header_id|> Environment: ipython Cutting Knowledge "
              "Date strftime_now", NULL, "<|begin_of_text|>", "<|eot_id|>", err, sizeof err);
    char want[64];
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(want, sizeof want, "Today Date: %d %b %Y\n", &tm);
    rc = tmpl_apply(&t, m, 2, true, &out, err, sizeof err);
    ok(rc == 0 && t.llama3_today && strstr(out, want), "Llama 3.2: %s", want);
    free(out);
    m[0].content = "{\"not\": \"an array\"}";
    ok(tmpl_apply(&t, m, 2, true, &out, err, sizeof err) == -1 && strstr(err, "tools array"),
       "a malformed tools message is an error: %s", err);
    tmpl_free(&t);
    ok(tmpl_render(TMPL_CHATML, m + 1, 3, true, &out, err, sizeof err) == 0 &&
           strstr(out, "<|im_start|>assistant\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}"
                       "\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n42\n"
                       "</tool_response><|im_end|>"),
       "no tools offered (tool_choice none): past calls and results still rendered");
    free(out);
    m[0].content = tools;
    rc = tmpl_render(TMPL_MISTRAL, m, 2, true, &out, err, sizeof err);
    ok(rc == 0 && strncmp(out, "<s>[INST] # Tools\n", 18) == 0 &&
           strstr(out, "</tool_call>\n\nhi [/INST]"),
       "Mistral before v0.3 (no system role): the generic tools lead the first user message (%s)",
       rc ? err : out);
    free(out);
}

/* golden_tools.json (make_tool_templates.py): the native tool formats. */
static void golden_tool_cases(const char *src)
{
    char path[1024], err[256];
    snprintf(path, sizeof path, "%s/tests/engine/model/tok/templates/golden_tools.json", src);
    char *js = tt_slurp(path, NULL);
    cJSON *root = js ? cJSON_Parse(js) : NULL, *c;
    free(js);
    if (!root) {
        ok(0, "read %s", path);
        return;
    }
    int n_cases = 0, n_ok = 0, n_raise = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(root, "cases"))
    {
        const char *name = cJSON_GetObjectItem(c, "template")->valuestring;
        int ci = cJSON_GetObjectItem(c, "case")->valueint;
        bool agp = cJSON_IsTrue(cJSON_GetObjectItem(c, "agp"));
        cJSON *want = cJSON_GetObjectItem(c, "out");
        struct tmpl t;
        if (tmpl_init(&t, cJSON_GetObjectItem(c, "markers")->valuestring, NULL,
                      cJSON_GetObjectItem(c, "bos")->valuestring,
                      cJSON_GetObjectItem(c, "eos")->valuestring, err, sizeof err)) {
            ok(0, "%s: load template (%s)", name, err);
            continue;
        }
        struct tm noon = {.tm_year = 2026 - 1900, .tm_mon = 0, .tm_mday = 1, .tm_hour = 12,
                          .tm_isdst = -1};
        t.today = (long long)mktime(&noon); /* the goldens' strftime_now: 2026-01-01 */
        struct tmpl_msg m[16];
        char *keep[16] = {0};
        size_t n = tool_msgs(cJSON_GetObjectItem(c, "tools"), cJSON_GetObjectItem(c, "messages"), m,
                             keep);
        char *out = NULL;
        int rc = tmpl_apply(&t, m, n, agp, &out, err, sizeof err);
        bool fam_ok = strcmp(tmpl_family_name(t.family), cJSON_GetObjectItem(c, "family")->valuestring) == 0 &&
                      (t.llama31 || t.mistral_tools || t.mistral_v7 || t.phi4 || t.default_system);
        bool same = cJSON_IsNull(want) ? rc != 0 : rc == 0 && strcmp(out, want->valuestring) == 0;
        n_cases++;
        n_raise += cJSON_IsNull(want);
        n_ok += fam_ok && same;
        if (!fam_ok || !same) {
            ok(0, "%s tool case %d agp=%d: %s", name, ci, agp,
               cJSON_IsNull(want) ? "the template raises" : "rendered as jinja2");
            if (rc) tap_diag("  error: %s", err);
            else if (!cJSON_IsNull(want)) show_diff(out, want->valuestring);
            else tap_diag("  got: %s", out);
        }
        free(out);
        for (size_t i = 0; i < n; i++) free(keep[i]);
        tmpl_free(&t);
    }
    ok(n_cases >= 96 && n_raise > 0 && n_raise < n_cases && n_ok == n_cases,
       "%d/%d jinja2 renderings with tools reproduced exactly (%d raise)", n_ok, n_cases, n_raise);
    cJSON_Delete(root);
}

static void fallback_and_names(const char *src)
{
    char err[256], *out = NULL;
    struct tmpl t;
    ok(tmpl_init(&t, "{{ messages | tojson }}", NULL, "<s>", "</s>", err, sizeof err) == 0 &&
           t.family == TMPL_CHATML && t.fallback,
       "an unknown template falls back to ChatML with the warning flag");
    tmpl_free(&t);
    ok(tmpl_init(&t, NULL, NULL, NULL, NULL, err, sizeof err) == 0 && t.fallback,
       "no template: ChatML with the warning flag");
    tmpl_free(&t);
    ok(tmpl_init(&t, "<|im_start|>", "gemma", "<bos>", "<eos>", err, sizeof err) == 0 &&
           t.family == TMPL_GEMMA && !t.fallback,
       "--template gemma overrides the detected family");
    tmpl_free(&t);
    ok(tmpl_init(&t, NULL, "nonsense", NULL, NULL, err, sizeof err) == -1 && strstr(err, "nonsense"),
       "an unknown --template name is an error naming it: %s", err);
    for (int f = 0; f < TMPL_UNKNOWN; f++)
        is_int(tmpl_family_from_name(tmpl_family_name((enum tmpl_family)f)), f, tmpl_family_name((enum tmpl_family)f));
    struct tmpl_msg m[2] = {{"user", "Hello!"}, {NULL, "x"}};
    /* golden.json renders llama3.jinja with the family's usual BOS/EOS */
    char *want = golden_first(src, "llama3");
    ok(want && tmpl_render(TMPL_LLAMA3, m, 1, true, &out, err, sizeof err) == 0 && strcmp(out, want) == 0,
       "tmpl_render uses the family's usual BOS");
    free(want);
    free(out);
    ok(tmpl_render(TMPL_CHATML, m, 2, true, &out, err, sizeof err) == -1 && strstr(err, "message 1"),
       "a message without a role is an error: %s", err);
}

/* jinja2's rendering of conversation 0 with the generation prompt for a golden template. */
static char *golden_first(const char *src, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/engine/model/tok/templates/golden.json", src);
    char *js = tt_slurp(path, NULL), *res = NULL;
    cJSON *root = js ? cJSON_Parse(js) : NULL, *c;
    free(js);
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(root, "cases"))
    {
        if (strcmp(cJSON_GetObjectItem(c, "template")->valuestring, name) == 0 &&
            cJSON_GetObjectItem(c, "conv")->valueint == 0 &&
            cJSON_IsTrue(cJSON_GetObjectItem(c, "agp")) && !res)
            res = strdup(cJSON_GetObjectItem(c, "out")->valuestring);
    }
    cJSON_Delete(root);
    return res;
}

/* The model's own file: detection (or vocabulary guess), BOS/EOS from its
 * vocabulary, and the rendering jinja2 gives with the same BOS/EOS. */
static void model_file(const char *src, const char *fetch, enum tmpl_family want, bool from_vocab,
                       const char *golden_name)
{
    char *first = golden_first(src, golden_name);
    if (!first) {
        ok(0, "%s: no golden rendering for '%s'", fetch, golden_name);
        return;
    }
    char path[1024], err[512];
    if (tt_model_path(src, fetch, path, sizeof path)) {
        ok(0, "%s: fetch-model could not provide the model", fetch);
        free(first);
        return;
    }
    struct gguf_ctx *g = gguf_open(path, err, sizeof err);
    struct tok *tk = g ? tok_open(g, err, sizeof err) : NULL;
    struct tmpl t;
    if (!tk || tmpl_init_model(&t, g, tk, NULL, err, sizeof err)) {
        ok(0, "%s: %s", fetch, err);
        tok_close(tk);
        if (g) gguf_close(g);
        free(first);
        return;
    }
    ok(t.family == want && !t.fallback && t.from_vocab == from_vocab, "%s: family %s%s", fetch,
       tmpl_family_name(t.family), from_vocab ? " (from its vocabulary)" : "");
    struct tmpl_msg m[1] = {{"user", "Hello!"}};
    char *out = NULL;
    ok(tmpl_apply(&t, m, 1, true, &out, err, sizeof err) == 0 && strcmp(out, first) == 0,
       "%s: renders as jinja2 does with the file's BOS/EOS", fetch);
    free(first);
    /* The rendered markers must be single special tokens. */
    int32_t ids[256];
    int64_t n = out ? tok_encode(tk, out, strlen(out), TOK_PARSE_SPECIAL, ids, 256, err, sizeof err) : -1;
    ok(n > 0 && tok_is_special(tk, ids[0]), "%s: the first rendered token is special (%d '%s')",
       fetch, n > 0 ? ids[0] : -1, n > 0 ? tok_piece(tk, ids[0]) : "");
    free(out);
    tmpl_free(&t);
    tok_close(tk);
    gguf_close(g);
}

int main(void)
{
    const char *src = getenv("TERN_SRC");
    if (!src) return tap_bail("TERN_SRC is not set");
    golden_cases(src);
    golden_tool_cases(src);
    tool_edges();
    fallback_and_names(src);
    model_file(src, "smollm2", TMPL_CHATML, false, "smollm2");
    model_file(src, "gemma3-270m", TMPL_GEMMA, true, "gemma");
    return tap_done();
}
