/* oai_think: <think>...</think> out of a reply (oai_think.h). */
#include "oai_think.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <string.h>

enum {
    T_START,    /* before any visible byte: may open with <think> */
    T_OPENED,   /* the prompt opened it: inside, unless a repeated <think> comes first */
    T_THINK,    /* inside: until </think> */
    T_AFTER,    /* after </think>: its leading whitespace is dropped */
    T_ANSWER    /* everything else is content */
};

static const char open_tag[] = "<think>", close_tag[] = "</think>";

void oai_think_init(struct oai_think *t)
{
    memset(t, 0, sizeof *t);
}

void oai_think_init_open(struct oai_think *t)
{
    memset(t, 0, sizeof *t);
    t->state = T_OPENED;
}

static void add(struct sse_buf *b, const char *s, size_t n)
{
    if (n) sse_buf_add(b, s, n);
}

/* One byte at a time: the tags are short, replies are not long enough for
 * this to matter next to a decode step. */
static void push_byte(struct oai_think *t, char c, struct sse_buf *r, struct sse_buf *a)
{
    switch (t->state) {
    case T_OPENED:
        if (t->n_hold == 0 && isspace((unsigned char)c)) return; /* leading whitespace */
        t->hold[t->n_hold++] = c;
        if (memcmp(t->hold, open_tag, t->n_hold) != 0) {
            /* thinking text: the held bytes go through the thinking state,
             * where they may begin </think> */
            char held[sizeof t->hold];
            size_t n = t->n_hold;
            memcpy(held, t->hold, n);
            t->n_hold = 0;
            t->state = T_THINK;
            for (size_t i = 0; i < n; i++) push_byte(t, held[i], r, a);
        } else if (t->n_hold == sizeof open_tag - 1) {
            t->n_hold = 0;
            t->state = T_THINK;
        }
        return;
    case T_START:
        if (t->n_hold == 0 && isspace((unsigned char)c)) return; /* leading whitespace */
        t->hold[t->n_hold++] = c;
        if (memcmp(t->hold, open_tag, t->n_hold) != 0) {
            add(a, t->hold, t->n_hold);
            t->n_hold = 0;
            t->state = T_ANSWER;
        } else if (t->n_hold == sizeof open_tag - 1) {
            t->n_hold = 0;
            t->state = T_THINK;
        }
        return;
    case T_THINK:
        t->hold[t->n_hold++] = c;
        while (t->n_hold && memcmp(t->hold, close_tag, t->n_hold) != 0) {
            /* the held bytes cannot begin the tag: the first goes out */
            add(r, t->hold, 1);
            memmove(t->hold, t->hold + 1, --t->n_hold);
        }
        if (t->n_hold == sizeof close_tag - 1) {
            t->n_hold = 0;
            t->state = T_AFTER;
        }
        return;
    case T_AFTER:
        if (isspace((unsigned char)c)) return;
        t->state = T_ANSWER;
        /* fall through */
    default:
        add(a, &c, 1);
    }
}

void oai_think_push(struct oai_think *t, const char *s, size_t n, struct sse_buf *r,
                    struct sse_buf *a)
{
    for (size_t i = 0; i < n; i++) push_byte(t, s[i], r, a);
}

void oai_think_flush(struct oai_think *t, struct sse_buf *r, struct sse_buf *a)
{
    add(t->state == T_THINK || t->state == T_OPENED ? r : a, t->hold, t->n_hold);
    t->n_hold = 0;
}

char *oai_think_response(const char *json, const char *reasoning, const char *content)
{
    cJSON *j = cJSON_Parse(json);
    cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "choices"), 0);
    cJSON *m = cJSON_GetObjectItemCaseSensitive(ch, "message");
    char *out = NULL;
    if (m) {
        cJSON_ReplaceItemInObjectCaseSensitive(m, "content", cJSON_CreateString(content));
        cJSON_AddStringToObject(m, "reasoning_content", reasoning);
        out = cJSON_PrintUnformatted(j);
    }
    cJSON_Delete(j);
    return out;
}

char *oai_think_chunk(const char *json, const char *reasoning)
{
    cJSON *j = cJSON_Parse(json);
    cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "choices"), 0);
    cJSON *d = cJSON_GetObjectItemCaseSensitive(ch, "delta");
    char *out = NULL;
    if (d) {
        cJSON_DeleteItemFromObjectCaseSensitive(d, "content");
        cJSON_AddStringToObject(d, "reasoning_content", reasoning);
        out = cJSON_PrintUnformatted(j);
    }
    cJSON_Delete(j);
    return out;
}
