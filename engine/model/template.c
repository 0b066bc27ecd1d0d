/* template: recognises a chat template's family and renders conversations
 * the way that family's Jinja template does (see template.h). Each family
 * renderer is a transcription of one reference template, kept in
 * tests/engine/model/tok/templates/ and checked against jinja2. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "template.h"
#include "template_impl.h"
#include "tok.h"

static const char *const family_names[TMPL_N_FAMILIES] = {
    "chatml", "llama3", "llama2", "mistral", "gemma", "phi3", "zephyr", "deepseek", "gemma4",
    "deepseek-r1", "unknown",
};

/* Usual BOS/EOS texts of each family, for tmpl_render without a model. */
static const char *const family_bos[TMPL_N_FAMILIES] = {
    "", "<|begin_of_text|>", "<s>", "<s>", "<bos>", "<s>", "<s>",
    "<\xef\xbd\x9c" "begin\xe2\x96\x81" "of\xe2\x96\x81" "sentence\xef\xbd\x9c>", "<bos>",
    "<\xef\xbd\x9c" "begin\xe2\x96\x81" "of\xe2\x96\x81" "sentence\xef\xbd\x9c>", ""};
static const char *const family_eos[TMPL_N_FAMILIES] = {
    "<|im_end|>", "<|eot_id|>", "</s>", "</s>", "<eos>", "<|endoftext|>", "</s>",
    "<\xef\xbd\x9c" "end\xe2\x96\x81" "of\xe2\x96\x81" "sentence\xef\xbd\x9c>", "<eos>",
    "<\xef\xbd\x9c" "end\xe2\x96\x81" "of\xe2\x96\x81" "sentence\xef\xbd\x9c>", "<|im_end|>"};
/* DeepSeek-R1 / V3's turn markers (fullwidth vertical bars) */
#define DS_USER "<\xef\xbd\x9cUser\xef\xbd\x9c>"
#define DS_ASSISTANT "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>"

static bool has(const char *s, const char *needle)
{
    return strstr(s, needle) != NULL;
}

enum tmpl_family tmpl_detect(const char *j)
{
    if (!j || !*j) return TMPL_UNKNOWN;
    if (has(j, "<|im_start|>")) return TMPL_CHATML;
    if (has(j, "[INST]")) return has(j, "<<SYS>>") ? TMPL_LLAMA2 : TMPL_MISTRAL;
    if (has(j, "<|assistant|>") && has(j, "<|end|>")) return TMPL_PHI3;
    if (has(j, "<|user|>") && has(j, "<|assistant|>")) return TMPL_ZEPHYR;
    if (has(j, "<|turn>")) return TMPL_GEMMA4;
    if (has(j, "<start_of_turn>")) return TMPL_GEMMA;
    if (has(j, "<|start_header_id|>") && has(j, "<|end_header_id|>")) return TMPL_LLAMA3;
    if (has(j, DS_USER) && has(j, DS_ASSISTANT)) return TMPL_DEEPSEEK_R1;
    if (has(j, "'Assistant: ' + message['content'] + eos_token") ||
        (has(j, "'User: '") && has(j, "'Assistant:'")))
        return TMPL_DEEPSEEK;
    return TMPL_UNKNOWN;
}

const char *tmpl_family_name(enum tmpl_family f)
{
    return (unsigned)f < TMPL_N_FAMILIES ? family_names[f] : "?";
}

int tmpl_family_from_name(const char *name)
{
    for (int i = 0; i < TMPL_UNKNOWN; i++)
        if (name && strcmp(name, family_names[i]) == 0) return i;
    return -1;
}

const char *tmpl_family_names(void)
{
    return "chatml, llama3, llama2, mistral, gemma, phi3, zephyr, deepseek, gemma4, deepseek-r1";
}

/* --- output buffer --------------------------------------------------------------- */

void tsb_addn(struct sb *b, const char *s, size_t n)
{
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t c = b->cap ? b->cap : 256;
        while (c < b->n + n + 1) c *= 2;
        char *np = realloc(b->p, c);
        if (!np) {
            b->oom = true;
            return;
        }
        b->p = np;
        b->cap = c;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

void tsb_add(struct sb *b, const char *s)
{
    tsb_addn(b, s ? s : "", s ? strlen(s) : 0);
}

/* Python's str.strip() whitespace (what Jinja's trim filter and .strip() use). */
static size_t space_at(const char *s, size_t n)
{
    unsigned char c = (unsigned char)s[0];
    if (c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f)) return 1;
    if (n >= 2 && c == 0xc2 && ((unsigned char)s[1] == 0x85 || (unsigned char)s[1] == 0xa0)) return 2;
    if (n >= 3) {
        unsigned char c1 = (unsigned char)s[1], c2 = (unsigned char)s[2];
        if (c == 0xe1 && c1 == 0x9a && c2 == 0x80) return 3;                 /* U+1680 */
        if (c == 0xe2 && c1 == 0x80 && (c2 <= 0x8a || c2 == 0xa8 || c2 == 0xa9 || c2 == 0xaf))
            return 3;                                                         /* U+2000..200A, 2028, 2029, 202F */
        if (c == 0xe2 && c1 == 0x81 && c2 == 0x9f) return 3;                 /* U+205F */
        if (c == 0xe3 && c1 == 0x80 && c2 == 0x80) return 3;                 /* U+3000 */
    }
    return 0;
}

void tsb_add_trim(struct sb *b, const char *s)
{
    size_t n = s ? strlen(s) : 0, i = 0, k;
    while (i < n && (k = space_at(s + i, n - i)) > 0) i += k;
    size_t e = n;
    /* Bounded by the content length: step back one UTF-8 character at a time. */
    while (e > i) {
        size_t st = e - 1;
        while (st > i && ((unsigned char)s[st] & 0xc0) == 0x80) st--;
        if (space_at(s + st, e - st) != e - st) break;
        e = st;
    }
    tsb_addn(b, s + i, e - i);
}

static bool role_is(const struct tmpl_msg *m, const char *r)
{
    return m->role && strcmp(m->role, r) == 0;
}

/* (role == 'user') != (index % 2 == 0) raises in the Llama 2, Mistral and Gemma templates. */
static int check_alternation(const struct tmpl_msg *m, size_t j, const char *fam, char *err,
                             size_t errlen)
{
    if (role_is(m, "user") != (j % 2 == 0)) {
        snprintf(err, errlen,
                 "template %s: conversation roles must alternate user/assistant/user/... "
                 "(message %zu is '%s')", fam, j, m->role ? m->role : "(null)");
        return -1;
    }
    return 0;
}

/* --- family renderers --------------------------------------------------------------- */

static int r_chatml(const struct tmpl *t, const struct tmpl_msg *m, size_t n, bool agp,
                    struct sb *b, char *err, size_t errlen)
{
    (void)err, (void)errlen;
    for (size_t i = 0; i < n; i++) {
        if (i == 0 && t->default_system && !role_is(&m[0], "system")) {
            tsb_add(b, "<|im_start|>system\n");
            tsb_add(b, t->default_system);
            tsb_add(b, "<|im_end|>\n");
        }
        tsb_add(b, "<|im_start|>");
        tsb_add(b, m[i].role);
        tsb_add(b, "\n");
        tsb_add(b, m[i].content);
        tsb_add(b, "<|im_end|>\n");
    }
    if (agp) tsb_add(b, "<|im_start|>assistant\n");
    return 0;
}

static int r_llama3(const struct tmpl *t, const struct tmpl_msg *m, size_t n, bool agp,
                    struct sb *b, char *err, size_t errlen)
{
    (void)err, (void)errlen;
    for (size_t i = 0; i < n; i++) {
        if (i == 0) tsb_add(b, t->bos);
        tsb_add(b, "<|start_header_id|>");
        tsb_add(b, m[i].role);
        tsb_add(b, "<|end_header_id|>\n\n");
        tsb_add_trim(b, m[i].content);
        tsb_add(b, "<|eot_id|>");
    }
    if (agp) tsb_add(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
    return 0;
}

/* Templates that read messages[0] fail on an empty conversation. */
static int need_one(size_t n, const char *fam, char *err, size_t errlen)
{
    if (n) return 0;
    snprintf(err, errlen, "template %s: the conversation has no messages", fam);
    return -1;
}

static int r_llama2(const struct tmpl *t, const struct tmpl_msg *m, size_t n, bool agp,
                    struct sb *b, char *err, size_t errlen)
{
    (void)agp; /* the Llama 2 template has no generation prompt */
    if (need_one(n, "llama2", err, errlen)) return -1;
    const char *sys = n > 0 && role_is(&m[0], "system") ? m[0].content : NULL;
    size_t first = sys ? 1 : 0;
    for (size_t i = first; i < n; i++) {
        size_t j = i - first;
        if (check_alternation(&m[i], j, "llama2", err, errlen)) return -1;
        struct sb c = {0};
        if (j == 0 && sys) {
            tsb_add(&c, "<<SYS>>\n");
            tsb_add(&c, sys);
            tsb_add(&c, "\n<</SYS>>\n\n");
        }
        tsb_add(&c, m[i].content);
        if (c.oom) b->oom = true;
        if (role_is(&m[i], "user")) {
            tsb_add(b, t->bos);
            tsb_add(b, "[INST] ");
            tsb_add_trim(b, c.p);
            tsb_add(b, " [/INST]");
        } else if (role_is(&m[i], "assistant")) {
            tsb_add(b, " ");
            tsb_add_trim(b, c.p);
            tsb_add(b, " ");
            tsb_add(b, t->eos);
        }
        free(c.p);
    }
    return 0;
}

static int r_mistral(const struct tmpl *t, const struct tmpl_msg *m, size_t n, bool agp,
                     struct sb *b, char *err, size_t errlen)
{
    (void)agp;
    tsb_add(b, t->bos);
    for (size_t i = 0; i < n; i++) {
        if (check_alternation(&m[i], i, "mistral", err, errlen)) return -1;
        if (role_is(&m[i], "user")) {
            tsb_add(b, "[INST] ");
            tsb_add(b, m[i].content);
            tsb_add(b, " [/INST]");
        } else if (role_is(&m[i], "assistant")) {
            tsb_add(b, m[i].content);
            tsb_add(b, t->eos);
        } else {
            snprintf(err, errlen, "template mistral: only user and assistant roles are supported "
                     "(message %zu is '%s')", i, m[i].role ? m[i].role : "(null)");
            return -1;
        }
    }
    return 0;
}

static int r_gemma(const struct tmpl *t, const struct tmpl_msg *m, size_t n, bool agp,
                   struct sb *b, char *err, size_t errlen)
{
    if (need_one(n, "gemma", err, errlen)) return -1;
    tsb_add(b, t->bos);
    const char *sys = n > 0 && role_is(&m[0], "system") ? m[0].content : NULL;
    size_t first = sys ? 1 : 0;
    for (size_t i = first; i < n; i++) {
        size_t j = i - first;
        if (check_alternation(&m[i], j, "gemma", err, errlen)) return -1;
        tsb_add(b, "<start_of_turn>");
        tsb_add(b, role_is(&m[i], "assistant") ? "model" : m[i].role);
        tsb_add(b, "\n");
        if (j == 0 && sys) {
            tsb_add(b, sys);
            tsb_add(b, "\n\n");
        }
        tsb_add_trim(b, m[i].content);
        tsb_add(b, "<end_of_turn>\n");
    }
    if (agp) tsb_add(b, "<start_of_turn>model\n");
    return 0;
}

/* The first Phi-3 mini template (as in the suite's vocabulary file). */
static void r_phi3_v1(const struct tmpl *t, const struct tmpl_msg *m, size_t n, struct sb *b)
{
    tsb_add(b, t->bos);
    for (size_t i = 0; i < n; i++) {
        if (role_is(&m[i], "user")) {
            tsb_add(b, "<|user|>\n");
            tsb_add(b, m[i].content);
            tsb_add(b, "<|end|>\n<|assistant|>\n");
        } else if (role_is(&m[i], "assistant")) {
            tsb_add(b, m[i].content);
            tsb_add(b, "<|end|>\n");
        }
    }
}

static int r_phi3(const struct tmpl *t, const struct tmpl_msg *m, size_t n, bool agp,
                  struct sb *b, char *err, size_t errlen)
{
    (void)err, (void)errlen;
    if (t->phi3_v1) {
        r_phi3_v1(t, m, n, b);
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        const char *tag = role_is(&m[i], "system") ? "<|system|>\n"
                          : role_is(&m[i], "user") ? "<|user|>\n"
                          : role_is(&m[i], "assistant") ? "<|assistant|>\n" : NULL;
        if (!tag) continue;
        tsb_add(b, tag);
        tsb_add(b, m[i].content);
        tsb_add(b, "<|end|>\n");
    }
    tsb_add(b, agp ? "<|assistant|>\n" : t->eos);
    return 0;
}

static int r_zephyr(const struct tmpl *t, const struct tmpl_msg *m, size_t n, bool agp,
                    struct sb *b, char *err, size_t errlen)
{
    (void)err, (void)errlen;
    for (size_t i = 0; i < n; i++) {
        const char *tag = role_is(&m[i], "user") ? "<|user|>\n"
                          : role_is(&m[i], "system") ? "<|system|>\n"
                          : role_is(&m[i], "assistant") ? "<|assistant|>\n" : NULL;
        if (tag) {
            tsb_add(b, tag);
            tsb_add(b, m[i].content);
            tsb_add(b, t->eos);
            tsb_add(b, "\n");
        }
        if (i + 1 == n && agp) tsb_add(b, "<|assistant|>\n");
    }
    return 0;
}

static int r_deepseek(const struct tmpl *t, const struct tmpl_msg *m, size_t n, bool agp,
                      struct sb *b, char *err, size_t errlen)
{
    (void)err, (void)errlen;
    tsb_add(b, t->bos);
    for (size_t i = 0; i < n; i++) {
        if (role_is(&m[i], "user")) {
            tsb_add(b, "User: ");
            tsb_add(b, m[i].content);
            tsb_add(b, "\n\n");
        } else if (role_is(&m[i], "assistant")) {
            tsb_add(b, "Assistant: ");
            tsb_add(b, m[i].content);
            tsb_add(b, t->eos);
        } else if (role_is(&m[i], "system")) {
            tsb_add(b, m[i].content);
            tsb_add(b, "\n\n");
        }
    }
    if (agp) tsb_add(b, "Assistant:");
    return 0;
}

/* DeepSeek-R1 (and its Qwen and Llama distills, V3): BOS, the last system
 * message's text, then each turn after its marker; an assistant turn keeps
 * only what follows its last </think> (earlier thinking is not shown to the
 * model again). The generation prompt opens the thinking where the
 * template does (think_open). */
static int r_deepseek_r1(const struct tmpl *t, const struct tmpl_msg *m, size_t n, bool agp,
                         struct sb *b, char *err, size_t errlen)
{
    (void)err, (void)errlen;
    tsb_add(b, t->bos);
    for (size_t i = n; i-- > 0;)
        if (role_is(&m[i], "system")) {
            tsb_add(b, m[i].content);
            break;
        }
    for (size_t i = 0; i < n; i++) {
        if (role_is(&m[i], "user")) {
            tsb_add(b, DS_USER);
            tsb_add(b, m[i].content);
        } else if (role_is(&m[i], "assistant")) {
            const char *c = m[i].content;
            for (const char *p; (p = strstr(c, "</think>")) != NULL;) c = p + strlen("</think>");
            tsb_add(b, DS_ASSISTANT);
            tsb_add(b, c);
            tsb_add(b, t->eos);
        }
    }
    if (agp) {
        tsb_add(b, DS_ASSISTANT);
        if (t->think_open) tsb_add(b, "<think>\n");
    }
    return 0;
}

/* Gemma 4's strip_thinking: drop each "<|channel>...<channel|>" span, then trim. */
static void tsb_add_unthought(struct sb *b, const char *s)
{
    struct sb r = {0};
    tsb_add(&r, "");
    /* Bounded by the content: each step consumes up to the next "<channel|>". */
    for (const char *p = s;;) {
        const char *end = strstr(p, "<channel|>");
        size_t n = end ? (size_t)(end - p) : strlen(p);
        const char *open = strstr(p, "<|channel>");
        if (open && open < p + n) n = (size_t)(open - p);
        tsb_addn(&r, p, n);
        if (!end) break;
        p = end + strlen("<channel|>");
    }
    if (r.oom) b->oom = true;
    tsb_add_trim(b, r.p);
    free(r.p);
}

static int r_gemma4(const struct tmpl *t, const struct tmpl_msg *m, size_t n, bool agp,
                    struct sb *b, char *err, size_t errlen)
{
    if (need_one(n, "gemma4", err, errlen)) return -1;
    tsb_add(b, t->bos);
    size_t first = 0;
    if (role_is(&m[0], "system") || role_is(&m[0], "developer")) {
        tsb_add(b, "<|turn>system\n");
        tsb_add_trim(b, m[0].content);
        tsb_add(b, "<turn|>\n");
        first = 1;
    }
    for (size_t i = first; i < n; i++) {
        bool model = role_is(&m[i], "assistant");
        tsb_add(b, "<|turn>");
        tsb_add(b, model ? "model" : m[i].role);
        tsb_add(b, "\n");
        if (model) tsb_add_unthought(b, m[i].content);
        else tsb_add_trim(b, m[i].content);
        tsb_add(b, "<turn|>\n");
    }
    if (agp) tsb_add(b, "<|turn>model\n<|channel>thought\n<channel|>");
    return 0;
}

bool tmpl_role_is_tool(const char *role)
{
    return role && (strcmp(role, TMPL_ROLE_TOOLS) == 0 || strcmp(role, TMPL_ROLE_TOOL_CALLS) == 0 ||
                    strcmp(role, TMPL_ROLE_TOOL) == 0);
}

typedef int (*render_fn)(const struct tmpl *, const struct tmpl_msg *, size_t, bool, struct sb *,
                         char *, size_t);
static const render_fn renderers[TMPL_N_FAMILIES] = {
    r_chatml, r_llama3, r_llama2, r_mistral, r_gemma, r_phi3, r_zephyr, r_deepseek, r_gemma4,
    r_deepseek_r1, r_chatml,
};

int tmpl_render_family(const struct tmpl *t, const struct tmpl_msg *msgs, size_t n, bool agp,
                       struct sb *b, char *err, size_t errlen)
{
#ifdef TERN_TMPL_TOOLS
    if (t->llama31 && t->family == TMPL_LLAMA3) return tmpl_llama31(t, msgs, n, agp, b, err, errlen);
    if ((t->mistral_tools || t->mistral_v7) && t->family == TMPL_MISTRAL)
        return tmpl_mistral_v3(t, msgs, n, agp, b, err, errlen);
    if (t->phi4 && t->family == TMPL_PHI3) return tmpl_phi4(t, msgs, n, agp, b, err, errlen);
#endif
    return renderers[t->family](t, msgs, n, agp, b, err, errlen);
}

#ifndef TERN_TMPL_TOOLS
/* engine-only builds (no cJSON, no wire layer): tool roles never arrive. */
int tmpl_apply_tools(const struct tmpl *t, const struct tmpl_msg *msgs, size_t n, bool agp,
                     struct sb *b, char *err, size_t errlen)
{
    (void)t, (void)msgs, (void)n, (void)agp, (void)b;
    snprintf(err, errlen, "template: tool calling is not built in (no cJSON)");
    return -1;
}
#endif

int tmpl_apply(const struct tmpl *t, const struct tmpl_msg *msgs, size_t n,
               bool add_generation_prompt, char **out, char *err, size_t errlen)
{
    struct sb b = {0};
    *out = NULL;
    for (size_t i = 0; i < n; i++)
        if (!msgs[i].role || !msgs[i].content) {
            snprintf(err, errlen, "template: message %zu has no %s", i,
                     msgs[i].role ? "content" : "role");
            return -1;
        }
    tsb_add(&b, ""); /* an empty conversation still gives a string */
    bool tools = false;
    for (size_t i = 0; i < n && !tools; i++) tools = tmpl_role_is_tool(msgs[i].role);
    if (tools ? tmpl_apply_tools(t, msgs, n, add_generation_prompt, &b, err, errlen)
              : tmpl_render_family(t, msgs, n, add_generation_prompt, &b, err, errlen)) {
        free(b.p);
        return -1;
    }
    if (b.oom) {
        snprintf(err, errlen, "template: out of memory rendering %zu messages", n);
        free(b.p);
        return -1;
    }
    *out = b.p;
    return 0;
}

/* --- set-up ------------------------------------------------------------------------------ */

/* The system prompt a ChatML template inserts when messages[0] is not
 * 'system': a string literal "<|im_start|>system\n...<|im_end|>" holding
 * the whole turn, unescaped as Jinja unescapes string literals. */
static char *default_system(const char *j)
{
    for (const char *p = j; (p = strstr(p, "<|im_start|>system")) != NULL; p++) {
        if (p == j || (p[-1] != '\'' && p[-1] != '"')) continue;
        char quote = p[-1];
        const char *s = p + strlen("<|im_start|>system");
        if (s[0] == '\n') s += 1;
        else if (s[0] == '\\' && s[1] == 'n') s += 2;
        else continue;
        const char *e = strstr(s, "<|im_end|>");
        const char *lit_end = s;
        while (lit_end < (e ? e : s) && !(*lit_end == quote && lit_end[-1] != '\\')) lit_end++;
        if (!e || lit_end < e) continue; /* the literal ends first: built from a message */
        struct sb b = {0};
        tsb_add(&b, "");
        for (const char *q = s; q < e; q++) {
            char c = *q;
            if (c == '\\' && q + 1 < e) {
                char x = *++q;
                c = x == 'n' ? '\n' : x == 't' ? '\t' : x == 'r' ? '\r' : x;
            }
            tsb_addn(&b, &c, 1);
        }
        if (b.oom) {
            free(b.p);
            return NULL;
        }
        return b.p;
    }
    return NULL;
}

/* A Jinja string literal (double-quoted) right after the text key in j,
 * unescaped as Jinja does (Python's unicode-escape: a backslash-newline is
 * dropped); with second, the literal after it that follows the first
 * (kept in *tail). NULL when absent or out of memory. */
static char *literal_at(const char *p, const char **end)
{
    if (*p != '"') return NULL;
    struct sb b = {0};
    tsb_add(&b, "");
    for (p++; *p && *p != '"'; p++) {
        char c = *p;
        if (c == '\\' && p[1]) {
            char x = *++p;
            if (x == '\n') continue;
            c = x == 'n' ? '\n' : x == 't' ? '\t' : x == 'r' ? '\r' : x;
        }
        tsb_addn(&b, &c, 1);
    }
    if (*p != '"' || b.oom) {
        free(b.p);
        return NULL;
    }
    *end = p + 1;
    return b.p;
}

static char *jinja_literal(const char *j, const char *key, char **tail, const char *second)
{
    const char *p = strstr(j, key), *end = NULL;
    if (tail) *tail = NULL;
    if (!p) return NULL;
    char *head = literal_at(p + strlen(key), &end);
    if (!head || !tail) return head;
    if (strncmp(end, second, strlen(second)) == 0)
        *tail = literal_at(end + strlen(second), &end);
    return head;
}

static char *dup_or_empty(const char *s)
{
    return strdup(s ? s : "");
}

int tmpl_init(struct tmpl *t, const char *jinja, const char *override, const char *bos,
              const char *eos, char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    if (override) {
        int f = tmpl_family_from_name(override);
        if (f < 0) {
            snprintf(err, errlen, "--template: unknown template '%s' (known: %s)", override,
                     tmpl_family_names());
            return -1;
        }
        t->family = (enum tmpl_family)f;
    } else {
        t->family = tmpl_detect(jinja);
    }
    if (t->family == TMPL_UNKNOWN) {
        t->family = TMPL_CHATML;
        t->fallback = true;
    }
    if (t->family == TMPL_CHATML && jinja && !t->fallback) t->default_system = default_system(jinja);
    if (t->family == TMPL_LLAMA3 && jinja && !override) {
        t->llama31 = has(jinja, "Environment: ipython") && has(jinja, "Cutting Knowledge Date");
        t->llama3_today = t->llama31 && has(jinja, "strftime_now");
    }
    if (t->family == TMPL_MISTRAL && jinja && !override && has(jinja, "[SYSTEM_PROMPT]") &&
        has(jinja, "[AVAILABLE_TOOLS]")) {
        /* the default system prompt (around " + today + ") and the tool prompt
         * are the template's own string literals */
        t->v7_sys_head = jinja_literal(jinja, "set default_system_message = ", &t->v7_sys_tail,
                                       " + today + ");
        t->v7_tool_prompt = jinja_literal(jinja, "set parallel_tool_prompt = ", NULL, NULL);
        t->v7_tool_sep = jinja_literal(jinja, "set system_message = parallel_tool_prompt + ", NULL,
                                       NULL);
        t->mistral_v7 = t->v7_sys_head && t->v7_sys_tail && t->v7_tool_prompt && t->v7_tool_sep;
    }
    if (t->family == TMPL_MISTRAL && jinja && !override && !t->mistral_v7) {
        t->mistral_tools = has(jinja, "[AVAILABLE_TOOLS]") && has(jinja, "[TOOL_RESULTS]");
        t->mistral_spaced = t->mistral_tools && has(jinja, "[AVAILABLE_TOOLS] [");
    }
    /* The Jinja source writes the prompt's newline as the two characters \n. */
    if (t->family == TMPL_DEEPSEEK_R1)
        t->think_open = !jinja || override || has(jinja, DS_ASSISTANT "<think>\\n");
    if (t->family == TMPL_PHI3 && jinja && !override)
        t->phi3_v1 = !has(jinja, "<|system|>") && has(jinja, "'<|assistant|>'");
    if (t->family == TMPL_PHI3 && jinja && !override && !t->phi3_v1)
        t->phi4 = has(jinja, "<|tool|>") || has(jinja, "<|tool_call|>");
    t->bos = dup_or_empty(bos);
    t->eos = dup_or_empty(eos);
    if (!t->bos || !t->eos) {
        tmpl_free(t);
        snprintf(err, errlen, "template: out of memory");
        return -1;
    }
    return 0;
}

int tmpl_init_model(struct tmpl *t, const struct gguf_ctx *g, const struct tok *tk,
                    const char *override, char *err, size_t errlen)
{
    const char *jinja = gguf_get_str(g, "tokenizer.chat_template");
    int32_t bos = tok_bos(tk), eos = tok_eos(tk);
    static const struct { const char *marker; enum tmpl_family f; } vocab_markers[] = {
        {"<start_of_turn>", TMPL_GEMMA}, {"<|im_start|>", TMPL_CHATML},
        {"<|start_header_id|>", TMPL_LLAMA3}, {"<|end|>", TMPL_PHI3},
    };
    const char *guess = NULL;
    for (size_t i = 0; !jinja && !override && !guess && i < 4; i++)
        if (tok_find_text(tk, vocab_markers[i].marker) >= 0)
            guess = tmpl_family_name(vocab_markers[i].f);
    int rc = tmpl_init(t, jinja, override ? override : guess, bos >= 0 ? tok_piece(tk, bos) : "",
                       eos >= 0 ? tok_piece(tk, eos) : "", err, errlen);
    if (rc == 0 && guess) t->from_vocab = true;
    return rc;
}

void tmpl_free(struct tmpl *t)
{
    free(t->v7_sys_head);
    free(t->v7_sys_tail);
    free(t->v7_tool_prompt);
    free(t->v7_tool_sep);
    free(t->bos);
    free(t->eos);
    free(t->default_system);
    memset(t, 0, sizeof *t);
}

int tmpl_render(enum tmpl_family f, const struct tmpl_msg *msgs, size_t n,
                bool add_generation_prompt, char **out, char *err, size_t errlen)
{
    if ((unsigned)f >= TMPL_N_FAMILIES) {
        snprintf(err, errlen, "template: bad family %d", (int)f);
        return -1;
    }
    struct tmpl t = {0};
    t.family = f == TMPL_UNKNOWN ? TMPL_CHATML : f;
    t.fallback = f == TMPL_UNKNOWN;
    t.bos = (char *)family_bos[f];
    t.eos = (char *)family_eos[f];
    return tmpl_apply(&t, msgs, n, add_generation_prompt, out, err, errlen);
}
