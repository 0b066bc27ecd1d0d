/* fuzz_oai: libFuzzer target for the OpenAI request parser (the trust
 * boundary of tern serve). Each input is parsed as a chat and as a
 * completion request; an accepted one is built back to JSON and parsed again,
 * and must give the same request (the round-trip property the remote client
 * relies on). The same bytes also go through the client-side response parser
 * and the SSE reader in two pieces. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oai_request.h"
#include "oai_response.h"
#include "sse.h"
#include "template.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Checked in every build type (CHECK() is gone under NDEBUG). */
#define CHECK(c)                                                              \
    do {                                                                      \
        if (!(c)) {                                                           \
            fprintf(stderr, "fuzz_oai: %s:%d: %s\n", __FILE__, __LINE__, #c); \
            abort();                                                          \
        }                                                                     \
    } while (0)

static void same(const struct oai_request *a, const struct oai_request *b)
{
    /* tools, calls and results travel as plain messages in the generic
     * format (oai_request_build): b has a's in that form */
    struct tmpl_msg *tm = calloc((size_t)a->req.n_messages + 1, sizeof *tm);
    CHECK(tm);
    bool tools = false;
    for (int32_t i = 0; i < a->req.n_messages; i++) {
        tm[i] = (struct tmpl_msg){a->req.messages[i].role, a->req.messages[i].content};
        tools |= tmpl_role_is_tool(tm[i].role);
    }
    struct tmpl_plain plain = {.msgs = tm, .n = (size_t)a->req.n_messages};
    char err[160];
    if (tools) CHECK(tmpl_tools_plain(tm, (size_t)a->req.n_messages, &plain, err, sizeof err) == 0);
    CHECK((size_t)b->req.n_messages == plain.n);
    for (size_t i = 0; i < plain.n; i++) {
        CHECK(strcmp(plain.msgs[i].role, b->req.messages[i].role) == 0);
        CHECK(strcmp(plain.msgs[i].content, b->req.messages[i].content) == 0);
    }
    if (tools) tmpl_plain_free(&plain);
    free(tm);
    CHECK(!a->req.prompt == !b->req.prompt);
    if (a->req.prompt) CHECK(strcmp(a->req.prompt, b->req.prompt) == 0);
    CHECK(a->req.n_prompt_tokens == b->req.n_prompt_tokens);
    for (int32_t i = 0; i < a->req.n_prompt_tokens; i++)
        CHECK(a->req.prompt_tokens[i] == b->req.prompt_tokens[i]);
    CHECK(a->req.n_stop == b->req.n_stop);
    for (int32_t i = 0; i < a->req.n_stop; i++) CHECK(strcmp(a->req.stop[i], b->req.stop[i]) == 0);
    CHECK(a->req.max_tokens == b->req.max_tokens && a->stream == b->stream);
    CHECK(memcmp(&a->req.sampling, &b->req.sampling, sizeof a->req.sampling) == 0 ||
           a->req.sampling.seed >= (1ull << 53)); /* seeds travel in 53 bits */
}

static int on_ev(void *ud, const char *name, const char *d, size_t n)
{
    (void)name;
    *(size_t *)ud += n + (d[n] == 0);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *body = (const char *)data;
    for (int k = 0; k < 2; k++) {
        enum oai_kind kind = k ? OAI_COMPLETION : OAI_CHAT;
        struct oai_request a, b;
        struct oai_error e;
        if (oai_request_parse(body, size, kind, NULL, &a, &e) != 0) {
            CHECK(e.message[0]);
            continue;
        }
        char *json = oai_request_build(kind, a.model, &a.req, a.stream, a.include_usage);
        if (json) {
            int rc = oai_request_parse(json, strlen(json), kind, NULL, &b, &e);
            /* messages with empty assistant content and the like may be
             * rebuilt in another accepted form; a rebuilt body never fails. */
            CHECK(rc == 0);
            same(&a, &b);
            oai_request_free(&b);
            free(json);
        }
        oai_request_free(&a);
    }
    struct oai_parsed p;
    char err[128];
    if (oai_response_parse(body, size, &p, err, sizeof err) == 0) oai_parsed_free(&p);
    struct sse_reader r;
    size_t got = 0;
    sse_reader_init(&r, 1 << 16);
    sse_reader_feed(&r, body, size / 2, on_ev, &got);
    sse_reader_feed(&r, body + size / 2, size - size / 2, on_ev, &got);
    sse_reader_free(&r);
    return 0;
}
