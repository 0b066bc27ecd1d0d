/* template_tools: the tool roles of template.h rendered per family: the
 * native Llama 3.1-3.3 and Mistral v3 tekken templates, and the generic
 * Hermes text for the other families. JSON is written as the Hugging Face
 * chat-template environment's tojson writes it (Python's json.dumps with
 * ensure_ascii=False), so renders match jinja2 byte for byte
 * (tests/engine/model/tok/make_templates.py). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "template_impl.h"

static bool role_is(const struct tmpl_msg *m, const char *r)
{
    return m->role && strcmp(m->role, r) == 0;
}

/* --- Python's json.dumps ------------------------------------------------------------ */

static void py_str(struct sb *b, const char *s)
{
    tsb_add(b, "\"");
    for (const char *p = s; *p; p++) {
        unsigned char c = (unsigned char)*p;
        char esc[8];
        const char *e = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\n' ? "\\n"
                        : c == '\r' ? "\\r" : c == '\t' ? "\\t" : c == '\b' ? "\\b"
                        : c == '\f' ? "\\f" : NULL;
        if (!e && c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            e = esc;
        }
        if (e) tsb_add(b, e);
        else tsb_addn(b, p, 1);
    }
    tsb_add(b, "\"");
}

/* repr() of a float: the shortest digits that read back, laid out as
 * Python does (exponent form below 1e-4 and from 1e16). */
static void py_float(struct sb *b, double v)
{
    char buf[64], digits[32];
    if (!isfinite(v)) {
        tsb_add(b, isnan(v) ? "NaN" : v < 0 ? "-Infinity" : "Infinity");
        return;
    }
    int p = 1;
    for (; p < 17; p++) {
        snprintf(buf, sizeof buf, "%.*e", p - 1, v);
        if (strtod(buf, NULL) == v) break;
    }
    snprintf(buf, sizeof buf, "%.*e", p - 1, v);
    /* buf: [-]d.ddde[+-]xx */
    const char *s = buf;
    bool neg = *s == '-';
    if (neg) s++;
    size_t nd = 0;
    for (; *s && *s != 'e'; s++)
        if (*s != '.') digits[nd++] = *s;
    digits[nd] = 0;
    while (nd > 1 && digits[nd - 1] == '0') digits[--nd] = 0;
    int exp = atoi(s + 1);
    char out[96];
    size_t o = 0;
    if (neg) out[o++] = '-';
    if (exp < -4 || exp >= 16) {
        out[o++] = digits[0];
        if (nd > 1) {
            out[o++] = '.';
            for (size_t i = 1; i < nd; i++) out[o++] = digits[i];
        }
        o += (size_t)snprintf(out + o, sizeof out - o, "e%c%02d", exp < 0 ? '-' : '+', abs(exp));
    } else if (exp < 0) {
        out[o++] = '0';
        out[o++] = '.';
        for (int i = 0; i < -exp - 1; i++) out[o++] = '0';
        for (size_t i = 0; i < nd; i++) out[o++] = digits[i];
    } else {
        for (int i = 0; i <= exp; i++) out[o++] = (size_t)i < nd ? digits[i] : '0';
        out[o++] = '.';
        if ((size_t)exp + 1 < nd)
            for (size_t i = (size_t)exp + 1; i < nd; i++) out[o++] = digits[i];
        else out[o++] = '0';
    }
    tsb_addn(b, out, o);
}

/* A JSON number as Python prints what json.loads made of it. cJSON keeps
 * no literal, so integral values print as ints ("1.0" comes out "1"). */
static void py_num(struct sb *b, double v)
{
    char buf[64];
    if (v == floor(v) && fabs(v) < 9007199254740992.0) {
        snprintf(buf, sizeof buf, "%.0f", v);
        tsb_add(b, strcmp(buf, "-0") == 0 ? "0" : buf);
    } else {
        py_float(b, v);
    }
}

static void indent_to(struct sb *b, int indent, int depth)
{
    tsb_add(b, "\n");
    for (int i = 0; i < indent * depth; i++) tsb_add(b, " ");
}

/* json.dumps(j, ensure_ascii=False, indent=indent or None when 0). */
static void py_dump(struct sb *b, const cJSON *j, int indent, int depth)
{
    if (cJSON_IsString(j)) py_str(b, j->valuestring);
    else if (cJSON_IsNumber(j)) py_num(b, j->valuedouble);
    else if (cJSON_IsTrue(j)) tsb_add(b, "true");
    else if (cJSON_IsFalse(j)) tsb_add(b, "false");
    else if (cJSON_IsArray(j) || cJSON_IsObject(j)) {
        bool obj = cJSON_IsObject(j);
        if (!j->child) {
            tsb_add(b, obj ? "{}" : "[]");
            return;
        }
        tsb_add(b, obj ? "{" : "[");
        const cJSON *c;
        bool first = true;
        cJSON_ArrayForEach(c, j) {
            if (!first) tsb_add(b, indent ? "," : ", ");
            first = false;
            if (indent) indent_to(b, indent, depth + 1);
            if (obj) {
                py_str(b, c->string ? c->string : "");
                tsb_add(b, ": ");
            }
            py_dump(b, c, indent, depth + 1);
        }
        if (indent) indent_to(b, indent, depth);
        tsb_add(b, obj ? "}" : "]");
    } else tsb_add(b, "null");
}

/* --- the structured roles --------------------------------------------------------------- */

/* One message with its JSON read (root owned). */
struct xmsg {
    const char *role;     /* "system", "user", "assistant", "tool", "tool_calls" */
    const char *content;  /* text ("" for a call turn without text) */
    bool content_null;    /* a call turn's content was null */
    cJSON *calls;         /* a call turn's tool_calls (in root) */
    const char *call_id;  /* a result's tool_call_id, or NULL */
    cJSON *root;
};

struct xconv {
    struct xmsg *m;
    size_t n;
    cJSON *tools;         /* the tools array, or NULL */
};

static void xconv_free(struct xconv *x)
{
    for (size_t i = 0; i < x->n; i++) cJSON_Delete(x->m[i].root);
    free(x->m);
    cJSON_Delete(x->tools);
    memset(x, 0, sizeof *x);
}

/* A call's "arguments" as the object its JSON string holds (in place). */
static void args_as_objects(cJSON *calls)
{
    cJSON *c;
    cJSON_ArrayForEach(c, calls) {
        cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
        cJSON *a = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
        if (!cJSON_IsString(a)) continue;
        cJSON *o = cJSON_Parse(a->valuestring);
        if (o) cJSON_ReplaceItemInObjectCaseSensitive(fn, "arguments", o);
    }
}

static int xconv_read(const struct tmpl_msg *m, size_t n, struct xconv *x, char *err, size_t errlen)
{
    memset(x, 0, sizeof *x);
    x->m = calloc(n ? n : 1, sizeof *x->m);
    if (!x->m) {
        snprintf(err, errlen, "template: out of memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        if (!tmpl_role_is_tool(m[i].role)) {
            x->m[x->n++] = (struct xmsg){.role = m[i].role, .content = m[i].content};
            continue;
        }
        cJSON *j = cJSON_Parse(m[i].content);
        const char *what = NULL;
        if (role_is(&m[i], TMPL_ROLE_TOOLS)) {
            if (!cJSON_IsArray(j) || x->tools) what = "a tools array, once";
            else {
                x->tools = j;
                continue;
            }
        } else {
            struct xmsg *o = &x->m[x->n];
            *o = (struct xmsg){.role = m[i].role, .root = j};
            const cJSON *c = cJSON_GetObjectItemCaseSensitive(j, "content");
            o->content = cJSON_IsString(c) ? c->valuestring : "";
            o->content_null = !cJSON_IsString(c);
            if (role_is(&m[i], TMPL_ROLE_TOOL)) {
                const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "tool_call_id");
                o->call_id = cJSON_IsString(id) ? id->valuestring : NULL;
                if (!cJSON_IsString(c)) what = "{\"content\": text}";
            } else {
                o->calls = cJSON_GetObjectItemCaseSensitive(j, "tool_calls");
                if (!cJSON_IsArray(o->calls)) what = "{\"tool_calls\": [...]}";
                else args_as_objects(o->calls);
            }
            x->n++;
        }
        if (what) {
            snprintf(err, errlen, "template: message %zu ('%s') must hold %s", i, m[i].role, what);
            if (j != x->tools) cJSON_Delete(j);
            if (x->n && x->m[x->n - 1].root == j) x->m[x->n - 1].root = NULL;
            xconv_free(x);
            return -1;
        }
    }
    return 0;
}

/* A call's function name ("" when missing). */
static const char *call_name(const cJSON *call)
{
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(call, "function");
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(fn, "name");
    return cJSON_IsString(nm) ? nm->valuestring : "";
}

/* --- generic (Hermes) ------------------------------------------------------------------------ */

static const char hermes_head[] =
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
static const char hermes_tail[] =
    "\n</tools>\n\nFor each function call, return a json object with function name and "
    "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
    "<function-name>, \"arguments\": <args-json-object>}\n</tool_call>";

/* The tools one per line as Qwen2.5's template writes them (tool | tojson). */
static void hermes_system(struct sb *b, const cJSON *tools)
{
    tsb_add(b, hermes_head);
    const cJSON *t;
    cJSON_ArrayForEach(t, tools) {
        tsb_add(b, "\n");
        py_dump(b, t, 0, 0);
    }
    tsb_add(b, hermes_tail);
}

static void hermes_calls(struct sb *b, const cJSON *calls)
{
    const cJSON *c;
    int i = 0;
    cJSON_ArrayForEach(c, calls) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
        tsb_add(b, i++ ? "\n<tool_call>\n{\"name\": \"" : "<tool_call>\n{\"name\": \"");
        tsb_add(b, call_name(c));
        tsb_add(b, "\", \"arguments\": ");
        if (args) py_dump(b, args, 0, 0);
        else tsb_add(b, "{}");
        tsb_add(b, "}\n</tool_call>");
    }
}

static int tmpl_raise(char *err, size_t errlen, const char *fam, const char *msg)
{
    snprintf(err, errlen, "template %s: %s", fam, msg);
    return -1;
}

/* The conversation as role/content text in the generic format; the
 * default system prompt opens the system message when there is none. */
static int hermes_plain(const char *default_system, const struct xconv *x, struct tmpl_plain *out,
                        char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (x->n == 0) return tmpl_raise(err, errlen, "tools", "the conversation has no messages");
    size_t n = x->n + 1, k = 0;
    struct tmpl_msg *m = calloc(n, sizeof *m);
    struct sb *texts = calloc(n, sizeof *texts);
    if (!m || !texts) goto oom;
    bool sys0 = strcmp(x->m[0].role, "system") == 0;
    if (x->tools) {
        /* Qwen2.5 opens with its default system prompt when there is none */
        const char *sys = sys0 ? x->m[0].content : default_system ? default_system : "";
        tsb_add(&texts[k], sys);
        if (sys[0]) tsb_add(&texts[k], "\n\n");
        hermes_system(&texts[k], x->tools);
        m[k++].role = "system";
    }
    for (size_t i = x->tools && sys0 ? 1 : 0; i < x->n; i++) {
        const struct xmsg *s = &x->m[i];
        if (strcmp(s->role, TMPL_ROLE_TOOL) == 0) {
            /* results go back as a user turn; consecutive ones share it */
            bool join = i > 0 && strcmp(x->m[i - 1].role, TMPL_ROLE_TOOL) == 0 && k > 0;
            struct sb *d = join ? &texts[k - 1] : &texts[k];
            if (join) tsb_add(d, "\n");
            tsb_add(d, "<tool_response>\n");
            tsb_add(d, s->content);
            tsb_add(d, "\n</tool_response>");
            if (!join) m[k++].role = "user";
        } else if (strcmp(s->role, TMPL_ROLE_TOOL_CALLS) == 0) {
            tsb_add(&texts[k], s->content);
            if (s->content[0]) tsb_add(&texts[k], "\n");
            hermes_calls(&texts[k], s->calls);
            m[k++].role = "assistant";
        } else {
            tsb_add(&texts[k], s->content);
            m[k++].role = s->role;
        }
    }
    out->texts = calloc(n, sizeof *out->texts);
    bool bad = !out->texts;
    for (size_t i = 0; i < n; i++) {
        bad |= texts[i].oom;
        if (out->texts) out->texts[i] = texts[i].p;
        else free(texts[i].p);
        m[i].content = texts[i].p ? texts[i].p : "";
    }
    free(texts);
    out->msgs = m;
    out->n = k;
    out->n_texts = n;
    if (!bad) return 0;
    tmpl_plain_free(out);
    m = NULL;
    texts = NULL;
oom:
    free(m);
    free(texts);
    snprintf(err, errlen, "template: out of memory");
    return -1;
}

void tmpl_plain_free(struct tmpl_plain *p)
{
    for (size_t i = 0; p->texts && i < p->n_texts; i++) free(p->texts[i]);
    free(p->texts);
    free(p->msgs);
    memset(p, 0, sizeof *p);
}

/* The generic format, then the family's renderer. */
static int r_hermes(const struct tmpl *t, const struct xconv *x, bool agp, struct sb *b, char *err,
                    size_t errlen)
{
    struct tmpl_plain p;
    if (hermes_plain(t->default_system, x, &p, err, errlen)) return -1;
    /* Mistral's first templates have no system role: the tools lead the
     * first user message instead (a system message of the request's own
     * is still refused, as the template refuses it) */
    bool sys0 = strcmp(x->m[0].role, "system") == 0;
    if (t->family == TMPL_MISTRAL && x->tools && !sys0 && p.n > 1 &&
        strcmp(p.msgs[1].role, "user") == 0) {
        struct sb u = {0};
        tsb_add(&u, p.msgs[0].content);
        tsb_add(&u, "\n\n");
        tsb_add(&u, p.msgs[1].content);
        if (u.oom) {
            free(u.p);
            tmpl_plain_free(&p);
            return tmpl_raise(err, errlen, "tools", "out of memory");
        }
        free(p.texts[1]);
        p.texts[1] = u.p;
        p.msgs[1].content = u.p;
        memmove(p.msgs, p.msgs + 1, (p.n - 1) * sizeof *p.msgs);
        p.n--;
    }
    int rc = tmpl_render_family(t, p.msgs, p.n, agp, b, err, errlen);
    tmpl_plain_free(&p);
    return rc;
}

int tmpl_tools_plain(const struct tmpl_msg *msgs, size_t n, struct tmpl_plain *out, char *err,
                     size_t errlen)
{
    struct xconv x;
    memset(out, 0, sizeof *out);
    if (xconv_read(msgs, n, &x, err, errlen)) return -1;
    int rc = hermes_plain(NULL, &x, out, err, errlen);
    xconv_free(&x);
    return rc;
}

/* Today's date (t->today when set) in local time as strftime_now(fmt) writes it. */
static void today_text(const struct tmpl *t, const char *fmt, char *out, size_t cap)
{
    time_t now = t->today ? (time_t)t->today : time(NULL);
    struct tm tm;
    out[0] = 0;
    if (localtime_r(&now, &tm)) strftime(out, cap, fmt, &tm);
}

/* --- Llama 3.1-3.3 ------------------------------------------------------------------------ */

static int llama31(const struct tmpl *t, const struct xconv *x, bool agp, struct sb *b, char *err,
                   size_t errlen)
{
    if (x->n == 0) return tmpl_raise(err, errlen, "llama3", "the conversation has no messages");
    tsb_add(b, t->bos);
    size_t i = 0;
    const char *system = "";
    if (strcmp(x->m[0].role, "system") == 0) system = x->m[i++].content;
    char date[32] = "26 Jul 2024";
    if (t->llama3_today) today_text(t, "%d %b %Y", date, sizeof date);
    tsb_add(b, "<|start_header_id|>system<|end_header_id|>\n\n");
    if (x->tools) tsb_add(b, "Environment: ipython\n");
    tsb_add(b, "Cutting Knowledge Date: December 2023\nToday Date: ");
    tsb_add(b, date);
    tsb_add(b, "\n\n");
    tsb_add_trim(b, system);
    tsb_add(b, "<|eot_id|>");
    if (x->tools) {
        if (i >= x->n)
            return tmpl_raise(err, errlen, "llama3", "tools go into the first user message, and "
                         "there is none");
        tsb_add(b, "<|start_header_id|>user<|end_header_id|>\n\n"
                   "Given the following functions, please respond with a JSON for a function "
                   "call with its proper arguments that best answers the given prompt.\n\n"
                   "Respond in the format {\"name\": function name, \"parameters\": dictionary "
                   "of argument name and its value}.Do not use variables.\n\n");
        const cJSON *tl;
        cJSON_ArrayForEach(tl, x->tools) {
            py_dump(b, tl, 4, 0);
            tsb_add(b, "\n\n");
        }
        tsb_add_trim(b, x->m[i++].content);
        tsb_add(b, "<|eot_id|>");
    }
    for (; i < x->n; i++) {
        const struct xmsg *m = &x->m[i];
        if (m->calls) {
            if (cJSON_GetArraySize(m->calls) != 1)
                return tmpl_raise(err, errlen, "llama3", "this model only supports single tool-calls "
                             "at once");
            const cJSON *fn = cJSON_GetObjectItemCaseSensitive(m->calls->child, "function");
            const cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
            tsb_add(b, "<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"");
            tsb_add(b, call_name(m->calls->child));
            tsb_add(b, "\", \"parameters\": ");
            if (args) py_dump(b, args, 0, 0);
            else return tmpl_raise(err, errlen, "llama3", "a tool call has no arguments");
            tsb_add(b, "}<|eot_id|>");
        } else if (strcmp(m->role, TMPL_ROLE_TOOL) == 0) {
            /* a string is iterable in Jinja: the result goes in as a JSON string */
            tsb_add(b, "<|start_header_id|>ipython<|end_header_id|>\n\n");
            py_str(b, m->content);
            tsb_add(b, "<|eot_id|>");
        } else {
            tsb_add(b, "<|start_header_id|>");
            tsb_add(b, m->role);
            tsb_add(b, "<|end_header_id|>\n\n");
            tsb_add_trim(b, m->content);
            tsb_add(b, "<|eot_id|>");
        }
    }
    if (agp) tsb_add(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
    return 0;
}

/* --- Mistral v3: tekken (Nemo) and v0.3 (7B) --------------------------------------------------------------- */

/* The template wants alphanumeric ids of 9 characters; longer OpenAI ids
 * (call_...) keep their last 9, as vLLM does. */
static int mistral_id(const char *id, char out[10], char *err, size_t errlen)
{
    size_t n = id ? strlen(id) : 0;
    if (n < 9)
        return tmpl_raise(err, errlen, "mistral", "tool call ids must be alphanumeric strings of "
                     "length 9");
    memcpy(out, id + n - 9, 10);
    return 0;
}

static void mistral_tools(struct sb *b, const cJSON *tools, bool spaced)
{
    tsb_add(b, spaced ? "[AVAILABLE_TOOLS] [" : "[AVAILABLE_TOOLS][");
    const cJSON *tl;
    cJSON_ArrayForEach(tl, tools) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tl, "function"), *kv;
        tsb_add(b, "{\"type\": \"function\", \"function\": {");
        bool first = true;
        cJSON_ArrayForEach(kv, fn) {
            if (kv->string && strcmp(kv->string, "return") == 0) continue;
            if (!first) tsb_add(b, ", ");
            first = false;
            tsb_add(b, "\"");
            tsb_add(b, kv->string);
            tsb_add(b, "\": ");
            if (cJSON_IsString(kv)) { /* the template writes strings unescaped */
                tsb_add(b, "\"");
                tsb_add(b, kv->valuestring);
                tsb_add(b, "\"");
            } else {
                py_dump(b, kv, 0, 0);
            }
        }
        tsb_add(b, "}}");
        tsb_add(b, tl->next ? ", " : "]");
    }
    tsb_add(b, "[/AVAILABLE_TOOLS]");
}

static int mistral_v3(const struct tmpl *t, const struct xconv *x, struct sb *b, char *err,
                      size_t errlen)
{
    if (x->n == 0) return tmpl_raise(err, errlen, "mistral", "the conversation has no messages");
    size_t first = 0;
    const char *system = NULL;
    if (strcmp(x->m[0].role, "system") == 0) {
        system = x->m[0].content;
        first = 1;
    }
    const struct xmsg *last_user = NULL;
    size_t idx = 0;
    for (size_t i = first; i < x->n; i++) {
        const struct xmsg *m = &x->m[i];
        if (strcmp(m->role, "user") == 0) last_user = m;
        if (m->calls || strcmp(m->role, TMPL_ROLE_TOOL) == 0) continue;
        if ((strcmp(m->role, "user") == 0) != (idx++ % 2 == 0))
            return tmpl_raise(err, errlen, "mistral", "after the optional system message, roles must "
                         "alternate user/assistant/user/...");
    }
    bool v7 = t->mistral_v7;
    bool sp = t->mistral_spaced || v7; /* v0.3 puts spaces after the markers, v7 after some */
    tsb_add(b, t->bos);
    if (v7) {
        /* [SYSTEM_PROMPT]: the request's, else the default one with today's
         * date; the tool prompt leads it when there are tools */
        tsb_add(b, "[SYSTEM_PROMPT]");
        if (x->tools) {
            tsb_add(b, t->v7_tool_prompt);
            tsb_add(b, t->v7_tool_sep);
        }
        if (system) {
            tsb_add(b, system);
        } else {
            char date[32];
            today_text(t, "%Y-%m-%d", date, sizeof date);
            tsb_add(b, t->v7_sys_head);
            tsb_add(b, date);
            tsb_add(b, t->v7_sys_tail);
        }
        tsb_add(b, "[/SYSTEM_PROMPT]");
        system = NULL;
    }
    for (size_t i = first; i < x->n; i++) {
        const struct xmsg *m = &x->m[i];
        char id[10];
        if (strcmp(m->role, "user") == 0) {
            /* message == user_messages[-1] compares by value */
            if (x->tools && strcmp(m->content, last_user->content) == 0)
                mistral_tools(b, x->tools, sp);
            tsb_add(b, sp && !v7 ? "[INST] " : "[INST]");
            if (i + 1 == x->n && system) {
                tsb_add(b, system);
                tsb_add(b, "\n\n");
            }
            tsb_add(b, m->content);
            tsb_add(b, "[/INST]");
        } else if (m->calls) {
            tsb_add(b, sp ? "[TOOL_CALLS] [" : "[TOOL_CALLS][");
            const cJSON *c;
            cJSON_ArrayForEach(c, m->calls) {
                const cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
                const cJSON *cid = cJSON_GetObjectItemCaseSensitive(c, "id");
                struct sb f = {0};
                py_dump(&f, fn, 0, 0);
                if (f.oom || !f.p || f.n < 1) b->oom = true;
                else tsb_addn(b, f.p, f.n - 1);
                free(f.p);
                if (mistral_id(cJSON_IsString(cid) ? cid->valuestring : NULL, id, err, errlen))
                    return -1;
                tsb_add(b, ", \"id\": \"");
                tsb_add(b, id);
                tsb_add(b, "\"}");
                if (c->next) tsb_add(b, ", ");
                else {
                    tsb_add(b, "]");
                    tsb_add(b, t->eos);
                }
            }
        } else if (strcmp(m->role, "assistant") == 0) {
            if (sp && !v7) {
                tsb_add(b, " ");
                tsb_add_trim(b, m->content);
            } else {
                tsb_add(b, m->content);
            }
            tsb_add(b, t->eos);
        } else if (strcmp(m->role, TMPL_ROLE_TOOL) == 0) {
            tsb_add(b, sp ? "[TOOL_RESULTS] {\"content\": " : "[TOOL_RESULTS]{\"content\": ");
            tsb_add(b, m->content);
            tsb_add(b, ", ");
            if (mistral_id(m->call_id, id, err, errlen)) return -1;
            tsb_add(b, "\"call_id\": \"");
            tsb_add(b, id);
            tsb_add(b, "\"}[/TOOL_RESULTS]");
        } else {
            return tmpl_raise(err, errlen, "mistral", "only user and assistant roles are supported, "
                         "after an optional first system message");
        }
    }
    return 0;
}

/* --- Phi-4 mini ------------------------------------------------------------------------------ */

/* Python truthiness of a content: None and "" are false. */
static bool truthy(const struct xmsg *m)
{
    return !m->content_null && m->content[0];
}

static int phi4(const struct tmpl *t, const struct xconv *x, bool agp, struct sb *b, char *err,
                size_t errlen)
{
    if (x->n == 0) return tmpl_raise(err, errlen, "phi4", "the conversation has no messages");
    bool sys0 = strcmp(x->m[0].role, "system") == 0;
    if (sys0 || x->tools) {
        const char *sys = sys0 ? x->m[0].content : "";
        tsb_add(b, "<|system|>");
        tsb_add(b, sys);
        if (x->tools) {
            const cJSON *tl;
            cJSON_ArrayForEach(tl, x->tools) {
                tsb_add(b, "<|tool|>");
                py_dump(b, cJSON_GetObjectItemCaseSensitive(tl, "function"), 0, 0);
                tsb_add(b, "<|/tool|>");
            }
            if (!strstr(sys, "<|tool_call|>"))
                tsb_add(b, "You are a helpful assistant with some tools.\nTo use a tool, respond "
                           "in this format: <|tool_call|>{\"name\": \"foo\", \"arguments\": "
                           "{\"a\": 1}}<|/tool_call|>");
        }
        tsb_add(b, "<|end|>");
    }
    for (size_t i = 0; i < x->n; i++) {
        const struct xmsg *m = &x->m[i];
        if (strcmp(m->role, TMPL_ROLE_TOOL) == 0) {
            tsb_add(b, "<|tool_response|>");
            py_str(b, m->content);
            tsb_add(b, "<|end|>");
        } else if (strcmp(m->role, "system") != 0) {
            tsb_add(b, "<|");
            tsb_add(b, m->calls ? "assistant" : m->role);
            tsb_add(b, "|>");
            if (truthy(m)) tsb_add(b, m->content);
            const cJSON *c;
            cJSON_ArrayForEach(c, m->calls) {
                tsb_add(b, "<|tool_call|>");
                py_dump(b, cJSON_GetObjectItemCaseSensitive(c, "function"), 0, 0);
                tsb_add(b, "<|/tool_call|>");
            }
            tsb_add(b, "<|end|>");
        }
    }
    tsb_add(b, agp ? "<|assistant|>" : t->eos);
    return 0;
}

/* --- entry points ------------------------------------------------------------------------------ */

int tmpl_llama31(const struct tmpl *t, const struct tmpl_msg *m, size_t n, bool agp,
                 struct sb *b, char *err, size_t errlen)
{
    struct xconv x;
    if (xconv_read(m, n, &x, err, errlen)) return -1;
    int rc = llama31(t, &x, agp, b, err, errlen);
    xconv_free(&x);
    return rc;
}

int tmpl_mistral_v3(const struct tmpl *t, const struct tmpl_msg *m, size_t n, bool agp,
                    struct sb *b, char *err, size_t errlen)
{
    (void)agp; /* the template has no generation prompt */
    struct xconv x;
    if (xconv_read(m, n, &x, err, errlen)) return -1;
    int rc = mistral_v3(t, &x, b, err, errlen);
    xconv_free(&x);
    return rc;
}

int tmpl_phi4(const struct tmpl *t, const struct tmpl_msg *m, size_t n, bool agp, struct sb *b,
              char *err, size_t errlen)
{
    struct xconv x;
    if (xconv_read(m, n, &x, err, errlen)) return -1;
    int rc = phi4(t, &x, agp, b, err, errlen);
    xconv_free(&x);
    return rc;
}

int tmpl_apply_tools(const struct tmpl *t, const struct tmpl_msg *msgs, size_t n, bool agp,
                     struct sb *b, char *err, size_t errlen)
{
    if (t->phi4 && t->family == TMPL_PHI3) return tmpl_phi4(t, msgs, n, agp, b, err, errlen);
    if (t->llama31 && t->family == TMPL_LLAMA3) return tmpl_llama31(t, msgs, n, agp, b, err, errlen);
    if ((t->mistral_tools || t->mistral_v7) && t->family == TMPL_MISTRAL)
        return tmpl_mistral_v3(t, msgs, n, agp, b, err, errlen);
    struct xconv x;
    if (xconv_read(msgs, n, &x, err, errlen)) return -1;
    int rc = r_hermes(t, &x, agp, b, err, errlen);
    xconv_free(&x);
    return rc;
}
