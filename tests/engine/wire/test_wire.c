/* test_wire: the OpenAI wire module (engine/wire) on real request shapes:
 * parse -> build -> parse round trips, every 400 naming its field, response
 * and chunk builders read back by the client-side parser, and the SSE reader
 * fed the writer's bytes in every split. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "oai_request.h"
#include "oai_response.h"
#include "oai_think.h"
#include "sse.h"
#include "template.h"
#include "tap.h"

static int parse(const char *body, enum oai_kind k, struct oai_request *r, struct oai_error *e)
{
    return oai_request_parse(body, strlen(body), k, NULL, r, e);
}

static void test_chat_roundtrip(void)
{
    const char *body =
        "{\"model\":\"smol\",\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Hello \"},"
        "{\"type\":\"text\",\"text\":\"w\\u00f6rld\"}]},{\"role\":\"assistant\",\"content\":null},"
        "{\"role\":\"developer\",\"content\":\"x\"}],"
        "\"max_tokens\":17,\"temperature\":0.25,\"top_p\":0.5,\"top_k\":7,\"min_p\":0.1,"
        "\"presence_penalty\":0.5,\"frequency_penalty\":-0.5,\"repetition_penalty\":1.1,"
        "\"seed\":42,\"stop\":[\"\\n\\n\",\"END\"],\"stream\":true,"
        "\"stream_options\":{\"include_usage\":true},\"n\":1,\"user\":\"u1\",\"logprobs\":false}";
    struct oai_request a, b;
    struct oai_error e = {{0}, {0}};
    tap_ok(parse(body, OAI_CHAT, &a, &e) == 0, "chat request parses (%s)", e.message);
    tap_ok(a.req.n_messages == 4 && strcmp(a.req.messages[1].content, "Hello w\xc3\xb6rld") == 0,
           "text parts joined, \\u escape decoded: '%s'", a.req.messages[1].content);
    tap_ok(strcmp(a.req.messages[2].content, "") == 0 &&
               strcmp(a.req.messages[3].role, "system") == 0,
           "assistant null content is empty; developer maps to system");
    tap_ok(a.req.max_tokens == 17 && a.req.sampling.temp == 0.25f && a.req.sampling.top_k == 7 &&
               a.req.sampling.seed == 42 && a.req.n_stop == 2 && a.stream && a.include_usage &&
               a.has_seed && strcmp(a.model, "smol") == 0 && strcmp(a.user, "u1") == 0,
           "fields read: max_tokens %d temp %g top_k %d seed %llu stops %d", a.req.max_tokens,
           a.req.sampling.temp, a.req.sampling.top_k, (unsigned long long)a.req.sampling.seed,
           a.req.n_stop);
    char *json = oai_request_build(OAI_CHAT, a.model, &a.req, a.stream, a.include_usage);
    tap_ok(json != NULL, "request built back to JSON");
    tap_ok(json && parse(json, OAI_CHAT, &b, &e) == 0, "built JSON parses again (%s)", e.message);
    bool same = b.req.n_messages == a.req.n_messages;
    for (int i = 0; same && i < a.req.n_messages; i++)
        same = strcmp(a.req.messages[i].role, b.req.messages[i].role) == 0 &&
               strcmp(a.req.messages[i].content, b.req.messages[i].content) == 0;
    tap_ok(same, "messages survive the round trip");
    tap_ok(memcmp(&a.req.sampling, &b.req.sampling, sizeof a.req.sampling) == 0,
           "sampling survives the round trip exactly");
    tap_ok(b.req.max_tokens == 17 && b.req.n_stop == 2 && strcmp(b.req.stop[0], "\n\n") == 0 &&
               b.stream && b.include_usage,
           "max_tokens, stop, stream options survive");
    free(json);
    oai_request_free(&a);
    oai_request_free(&b);
}

static void test_completion_roundtrip(void)
{
    struct oai_request a, b;
    struct oai_error e = {{0}, {0}};
    tap_ok(parse("{\"prompt\":[\"Once upon\"],\"max_tokens\":3,\"stop\":\"x\"}", OAI_COMPLETION,
                 &a, &e) == 0 && strcmp(a.req.prompt, "Once upon") == 0 && a.req.n_stop == 1,
           "completion prompt ['text'] parses");
    char *json = oai_request_build(OAI_COMPLETION, NULL, &a.req, false, false);
    tap_ok(json && parse(json, OAI_COMPLETION, &b, &e) == 0 &&
               strcmp(b.req.prompt, "Once upon") == 0 && !b.stream,
           "completion round trip");
    free(json);
    oai_request_free(&a);
    oai_request_free(&b);
    tap_ok(parse("{\"prompt\":[1,2,3000]}", OAI_COMPLETION, &a, &e) == 0 &&
               a.req.n_prompt_tokens == 3 && a.req.prompt_tokens[2] == 3000,
           "token-id prompt parses");
    json = oai_request_build(OAI_COMPLETION, "m", &a.req, true, false);
    tap_ok(json && parse(json, OAI_COMPLETION, &b, &e) == 0 && b.req.n_prompt_tokens == 3 &&
               b.req.prompt_tokens[1] == 2,
           "token-id prompt round trip");
    free(json);
    oai_request_free(&a);
    oai_request_free(&b);
}

/* Each bad body must fail with a message and the field named in param. */
static void test_errors(void)
{
    static const struct {
        enum oai_kind k;
        const char *body, *param, *needle;
    } cases[] = {
        {OAI_CHAT, "{\"messages\":[", "", "not valid JSON"},
        {OAI_CHAT, "[1,2]", "", "JSON object"},
        {OAI_CHAT, "{} x", "", "after the JSON"},
        {OAI_CHAT, "{}", "messages", "required"},
        {OAI_CHAT, "{\"messages\":[]}", "messages", "empty"},
        {OAI_CHAT, "{\"messages\":\"hi\"}", "messages", "array"},
        {OAI_CHAT, "{\"messages\":[{\"role\":\"function\",\"content\":\"x\"}]}", "messages[0]", "function"},
        {OAI_CHAT, "{\"messages\":[{\"role\":\"user\"}]}", "messages[0].content", "required"},
        {OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":5}]}", "messages[0].content",
         "string"},
        {OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}",
         "messages[0].content", "image_url"},
        {OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":-5}",
         "max_tokens", "at least 1"},
        {OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":\"9\"}",
         "max_tokens", "integer"},
        {OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":1.5}",
         "max_tokens", "integer"},
        {OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":1e400}",
         "max_tokens", "finite"},
        {OAI_CHAT,
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":99999999999999}",
         "max_tokens", "at most"},
        {OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"temperature\":3}",
         "temperature", "between"},
        {OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"temperature\":true}",
         "temperature", "number"},
        {OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n\":2}", "n", "1"},
        {OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":1}",
         "logprobs", "boolean"},
        {OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_logprobs\":2}",
         "top_logprobs", "needs"},
        {OAI_CHAT,
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":true,\"top_logprobs\":21}",
         "top_logprobs", "between"},
        {OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":\"yes\"}",
         "stream", "boolean"},
        {OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stop\":[1]}", "stop",
         "string"},
        {OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"seed\":1e300}", "seed",
         "between"},
        {OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{}]}",
         "tools[0]", "\"function\""},
        {OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"type\":"
         "\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\","
         "\"properties\":{\"a\":{\"type\":\"string\",\"format\":\"uri\"}}}}}]}",
         "tools[0].function.parameters", "#/properties/a: 'format' is not supported"},
        {OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"type\":"
         "\"function\",\"function\":{\"name\":\"f\"}}],\"tool_choice\":{\"type\":\"function\","
         "\"function\":{\"name\":\"g\"}}}", "tool_choice", "'g'"},
        {OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"type\":"
         "\"function\",\"function\":{\"name\":\"bad name\"}}]}", "tools[0]", "letters"},
        {OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tool_choice\":"
         "\"required\"}", "tool_choice", "empty"},
        {OAI_CHAT, "{\"messages\":[{\"role\":\"tool\"}]}", "messages[0].content", "required"},
        {OAI_CHAT,
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":"
         "\"json_schema\",\"json_schema\":{\"name\":\"a\",\"schema\":{\"type\":\"object\","
         "\"properties\":{\"s\":{\"type\":\"string\",\"pattern\":\"x\"}}}}}}",
         "response_format.json_schema.schema", "#/properties/s: 'pattern' is not supported"},
        {OAI_CHAT,
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":"
         "\"grammar\"}}", "response_format.type", "json_schema"},
        {OAI_COMPLETION,
         "{\"prompt\":\"x\",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{"
         "\"name\":\"a\",\"schema\":{\"type\":\"nope\"}}}}",
         "response_format.json_schema.schema", "'nope'"},
        {OAI_COMPLETION, "{\"prompt\":\"\"}", "prompt", "empty"},
        {OAI_COMPLETION, "{\"prompt\":[\"a\",\"b\"]}", "prompt", "one prompt"},
        {OAI_COMPLETION, "{\"prompt\":[-1]}", "prompt", "token id"},
        {OAI_COMPLETION, "{\"prompt\":\"x\",\"echo\":1}", "echo", "boolean"},
        {OAI_COMPLETION, "{\"prompt\":\"x\",\"logprobs\":-1}", "logprobs", "between"},
        {OAI_COMPLETION, "{\"prompt\":\"x\",\"max_tokens\":0}", "max_tokens", "echo"},
        {OAI_COMPLETION, "{\"prompt\":\"x\",\"prompt_logprobs\":true}", "prompt_logprobs",
         "integer"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct oai_request r;
        struct oai_error e = {{0}, {0}};
        int rc = parse(cases[i].body, cases[i].k, &r, &e);
        tap_ok(rc == -1 && strcmp(e.param, cases[i].param) == 0 &&
                   strstr(e.message, cases[i].needle) != NULL,
               "400 for %s: param '%s' message '%s'", cases[i].body, e.param, e.message);
    }
    struct oai_request r;
    struct oai_error e = {{0}, {0}};
    const char bad[] = "{\"prompt\":\"a\xff\xfe\"}";
    tap_ok(oai_request_parse(bad, sizeof bad - 1, OAI_COMPLETION, NULL, &r, &e) == -1 &&
               strstr(e.message, "UTF-8"),
           "invalid UTF-8 refused: %s", e.message);
    const char ovl[] = "{\"prompt\":\"\xc0\xaf\"}"; /* overlong '/' */
    tap_ok(oai_request_parse(ovl, sizeof ovl - 1, OAI_COMPLETION, NULL, &r, &e) == -1,
           "overlong UTF-8 refused");
    const char sur[] = "{\"prompt\":\"\xed\xa0\x80\"}"; /* a surrogate */
    tap_ok(oai_request_parse(sur, sizeof sur - 1, OAI_COMPLETION, NULL, &r, &e) == -1,
           "UTF-8 surrogate refused");
    struct oai_limits lim = {.max_messages = 3, .max_body = 100};
    const char *four = "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},"
                       "{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"user\",\"content\":\"a\"},"
                       "{\"role\":\"user\",\"content\":\"a\"}]}";
    lim.max_body = 4096;
    tap_ok(oai_request_parse(four, strlen(four), OAI_CHAT, &lim, &r, &e) == -1 &&
               strstr(e.message, "at most 3"),
           "message count bounded: %s", e.message);
    lim.max_body = 10;
    tap_ok(oai_request_parse(four, strlen(four), OAI_CHAT, &lim, &r, &e) == -1 &&
               strstr(e.message, "bytes"),
           "body size bounded: %s", e.message);
}

static void test_response_roundtrip(void)
{
    struct engine_metrics m = {.status = ENGINE_LENGTH, .queue_s = 0.001, .prefill_s = 0.02,
                               .ttft_s = 0.03, .tpot_s = 0.004, .decode_s = 0.04, .e2e_s = 0.07,
                               .n_prompt = 31, .n_cached = 16, .n_computed = 15,
                               .n_generated = 11, .n_preempted = 1};
    struct oai_resp_ctx c = {OAI_CHAT, "chatcmpl-1", "smol", 1700000000, "req-\"1\""};
    char *s = oai_response_build(&c, "Hi \"there\"\n\xff", &m);
    struct oai_parsed p;
    char err[128];
    tap_ok(s && oai_response_parse(s, strlen(s), &p, err, sizeof err) == 0, "response parses");
    tap_ok(s && oai_utf8_valid(s, strlen(s)), "invalid UTF-8 in model text is replaced");
    tap_ok(p.text && strcmp(p.text, "Hi \"there\"\n\xef\xbf\xbd") == 0 &&
               strcmp(p.role, "assistant") == 0 && strcmp(p.finish_reason, "length") == 0 &&
               strcmp(p.object, "chat.completion") == 0,
           "message, role, finish_reason 'length', object");
    tap_ok(p.has_usage && p.usage.prompt_tokens == 31 && p.usage.completion_tokens == 11 &&
               p.usage.cached_tokens == 16,
           "usage with cached tokens");
    tap_ok(p.has_tern && p.tern.n_computed == 15 && p.tern.n_preempted == 1 &&
               p.tern.ttft_s == 0.03 && p.tern.status == ENGINE_LENGTH &&
               strcmp(p.request_id, "req-\"1\"") == 0,
           "tern block round trip (ttft %g, request id %s)", p.tern.ttft_s, p.request_id);
    cJSON *j = cJSON_Parse(s);
    cJSON *u = cJSON_GetObjectItem(j, "usage");
    tap_ok(cJSON_GetObjectItem(u, "total_tokens")->valueint == 42, "total_tokens = 42");
    cJSON_Delete(j);
    free(s);
    oai_parsed_free(&p);

    c.kind = OAI_COMPLETION;
    m.status = ENGINE_STOP;
    s = oai_response_build(&c, "text", &m);
    tap_ok(s && oai_response_parse(s, strlen(s), &p, err, sizeof err) == 0 &&
               strcmp(p.text, "text") == 0 && strcmp(p.object, "text_completion") == 0 &&
               strcmp(p.finish_reason, "stop") == 0,
           "completion response round trip");
    free(s);
    oai_parsed_free(&p);

    c.kind = OAI_CHAT;
    s = oai_chunk_build(&c, true, NULL, NULL, NULL);
    tap_ok(s && oai_response_parse(s, strlen(s), &p, err, sizeof err) == 0 &&
               strcmp(p.role, "assistant") == 0 && p.text && !p.text[0] && !p.finish_reason &&
               strcmp(p.object, "chat.completion.chunk") == 0,
           "first chunk: role, empty content, no finish");
    free(s);
    oai_parsed_free(&p);
    s = oai_chunk_build(&c, false, "tok", NULL, NULL);
    tap_ok(s && oai_response_parse(s, strlen(s), &p, err, sizeof err) == 0 &&
               strcmp(p.text, "tok") == 0 && !p.role,
           "content chunk");
    free(s);
    oai_parsed_free(&p);
    s = oai_chunk_build(&c, false, NULL, "stop", &m);
    tap_ok(s && oai_response_parse(s, strlen(s), &p, err, sizeof err) == 0 && !p.text &&
               strcmp(p.finish_reason, "stop") == 0 && p.has_tern && !p.has_usage,
           "finish chunk with tern block");
    free(s);
    oai_parsed_free(&p);
    s = oai_chunk_build(&c, false, NULL, NULL, &m);
    tap_ok(s && oai_response_parse(s, strlen(s), &p, err, sizeof err) == 0 && !p.has_choice &&
               p.has_usage && p.usage.cached_tokens == 16 && p.has_tern,
           "usage chunk: choices [], usage and tern");
    free(s);
    oai_parsed_free(&p);
    s = oai_error_build("'max_tokens' must be an integer", "invalid_request_error", "max_tokens",
                        NULL);
    tap_ok(s && oai_response_parse(s, strlen(s), &p, err, sizeof err) == 0 && p.is_error &&
               strcmp(p.error_param, "max_tokens") == 0 &&
               strcmp(p.error_type, "invalid_request_error") == 0 && !p.error_code,
           "error shape round trip: %s", s);
    free(s);
    oai_parsed_free(&p);
    tap_ok(oai_response_parse("{\"choices\":5}", 13, &p, err, sizeof err) == -1,
           "wrong-typed choices refused: %s", err);
    for (int st = 0; st < ENGINE_N_STATUS; st++) {
        int back = oai_finish_status(oai_finish_reason((enum engine_status)st));
        tap_ok(back == st || (st == ENGINE_OK && back == ENGINE_STOP),
               "finish_reason %s maps back", oai_finish_reason((enum engine_status)st));
    }
}

struct collect {
    char got[4096];
    int n;
};

static int on_ev(void *ud, const char *name, const char *data, size_t len)
{
    struct collect *c = ud;
    size_t off = strlen(c->got);
    snprintf(c->got + off, sizeof c->got - off, "[%s|%.*s]", name, (int)len, data);
    c->n++;
    return 0;
}

/* response_format: parsed into the request, and parse(build(r)) gives it back. */
static void test_response_format(void)
{
    const char *body =
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":"
        "\"json_schema\",\"json_schema\":{\"name\":\"p\",\"strict\":true,\"schema\":{\"type\":"
        "\"object\",\"properties\":{\"n\":{\"type\":\"integer\"}},\"required\":[\"n\"]}}}}";
    struct oai_request a = {0}, b = {0};
    struct oai_error e = {{0}, {0}};
    tap_ok(parse(body, OAI_CHAT, &a, &e) == 0 && a.req.json_schema &&
               strstr(a.req.json_schema, "\"required\":[\"n\"]") && !a.req.json_object,
           "json_schema parsed into the request (%s)", a.req.json_schema ? a.req.json_schema : e.message);
    char *out = oai_request_build(OAI_CHAT, "m", &a.req, false, false);
    tap_ok(out && parse(out, OAI_CHAT, &b, &e) == 0 && b.req.json_schema &&
               strcmp(a.req.json_schema, b.req.json_schema) == 0,
           "json_schema survives build and parse (%s)", out ? out : "NULL");
    free(out);
    oai_request_free(&b);
    oai_request_free(&a);
    body = "{\"prompt\":\"x\",\"response_format\":{\"type\":\"json_object\"}}";
    tap_ok(parse(body, OAI_COMPLETION, &a, &e) == 0 && a.req.json_object && !a.req.json_schema,
           "json_object parsed on completions");
    out = oai_request_build(OAI_COMPLETION, "m", &a.req, false, false);
    tap_ok(out && parse(out, OAI_COMPLETION, &b, &e) == 0 && b.req.json_object,
           "json_object survives build and parse");
    free(out);
    oai_request_free(&b);
    oai_request_free(&a);
    body = "{\"prompt\":\"x\",\"response_format\":{\"type\":\"text\"}}";
    tap_ok(parse(body, OAI_COMPLETION, &a, &e) == 0 && !a.req.json_object && !a.req.json_schema,
           "response_format text: unconstrained");
    oai_request_free(&a);
}

/* chat_template_kwargs.enable_thinking: false turns thinking off (no_think),
 * survives build and parse; bad shapes are 400s naming the field. */
static void test_template_kwargs(void)
{
    struct oai_request a = {0}, b = {0};
    struct oai_error e = {{0}, {0}};
    const char *body = "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
                       "\"chat_template_kwargs\":{\"enable_thinking\":false,\"other\":1}}";
    tap_ok(parse(body, OAI_CHAT, &a, &e) == 0 && a.req.no_think, "enable_thinking false: no_think");
    char *out = oai_request_build(OAI_CHAT, "m", &a.req, false, false);
    tap_ok(out && strstr(out, "\"chat_template_kwargs\":{\"enable_thinking\":false}") &&
               parse(out, OAI_CHAT, &b, &e) == 0 && b.req.no_think,
           "no_think survives build and parse (%s)", out ? out : "NULL");
    free(out);
    oai_request_free(&b);
    oai_request_free(&a);
    body = "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
           "\"chat_template_kwargs\":{\"enable_thinking\":true}}";
    tap_ok(parse(body, OAI_CHAT, &a, &e) == 0 && !a.req.no_think, "enable_thinking true: thinking stays on");
    oai_request_free(&a);
    body = "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
           "\"chat_template_kwargs\":{\"enable_thinking\":\"no\"}}";
    tap_ok(parse(body, OAI_CHAT, &a, &e) != 0 && strcmp(e.param, "chat_template_kwargs") == 0,
           "enable_thinking not a boolean: refused naming the field (%s)", e.message);
    body = "{\"prompt\":\"x\",\"chat_template_kwargs\":{\"enable_thinking\":false}}";
    tap_ok(parse(body, OAI_COMPLETION, &a, &e) != 0 && strcmp(e.param, "chat_template_kwargs") == 0,
           "chat_template_kwargs on completions: refused (%s)", e.message);
}

/* Replies read back into tool_calls: <tool_call> blocks (Qwen, the generic
 * format), a bare JSON call (Llama 3.1, with or without <|python_tag|>), an
 * array, unknown names and broken JSON left as text, parallel off. */
static void test_tool_replies(void)
{
    char *names[] = {"get_weather", "get_time"};
    struct oai_tools t = {.choice = OAI_TOOLS_AUTO, .parallel = true, .n = 2, .names = names};
    struct {
        const char *reply;
        int calls;
        const char *first_args, *content;
    } cases[] = {
        {"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
         "</tool_call>", 1, "{\"city\":\"Paris\"}", NULL},
        {"Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>"
         "\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": \"{\\\"tz\\\": \\\"UTC\\\"}\"}"
         "\n</tool_call>", 2, "{}", "Let me check."},
        {"<|python_tag|>{\"name\": \"get_time\", \"parameters\": {\"tz\": \"CET\"}}", 1,
         "{\"tz\":\"CET\"}", NULL},
        {" [{\"name\": \"get_time\", \"arguments\": {}}, {\"name\": \"get_weather\"}]", 2, "{}",
         NULL},
        {"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Pa", 0, NULL, NULL},
        {"{\"name\": \"rm_rf\", \"arguments\": {}}", 0, NULL, NULL},
        {"The weather is fine.", 0, NULL, NULL},
        /* Mistral v3 tekken, as its template writes calls (ids included) */
        {"[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Z\u00fcrich\"}, "
         "\"id\": \"a1B2c3D4e\"}, {\"name\": \"get_time\", \"arguments\": {}, \"id\": "
         "\"xYz987Abc\"}]", 2, "{\"city\":\"Zürich\"}", NULL},
        {"Checking. [TOOL_CALLS] [{\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}}]", 1,
         "{\"tz\":\"UTC\"}", "Checking."},
        /* newer Mistral tokenizers: name[ARGS]{..} */
        {"[TOOL_CALLS]get_time[ARGS]{\"tz\": \"UTC\"}[TOOL_CALLS]get_weather[ARGS]{}", 2,
         "{\"tz\":\"UTC\"}", NULL},
        /* Phi-4 mini */
        {"<|tool_call|>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}]"
         "<|/tool_call|>", 1, "{\"city\":\"Oslo\"}", NULL},
        {"Sure.<|tool_call|>{\"name\": \"get_time\", \"arguments\": {}}<|/tool_call|>", 1, "{}",
         "Sure."},
        /* Llama 3.1-3.3, as its template writes calls */
        {"{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\", \"days\": 3}}", 1,
         "{\"city\":\"Oslo\",\"days\":3}", NULL},
        {"[TOOL_CALLS][{\"name\": \"rm_rf\", \"arguments\": {}}]", 0, NULL, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *content = NULL;
        cJSON *calls = oai_tools_parse_reply(&t, cases[i].reply, "call_x_", &content);
        int n = calls ? cJSON_GetArraySize(calls) : 0;
        const cJSON *fn = cJSON_GetObjectItem(cJSON_GetArrayItem(calls, 0), "function");
        const cJSON *args = cJSON_GetObjectItem(fn, "arguments");
        const cJSON *id = cJSON_GetObjectItem(cJSON_GetArrayItem(calls, 0), "id");
        bool ok = n == cases[i].calls;
        if (ok && n) ok = cJSON_IsString(args) && strcmp(args->valuestring, cases[i].first_args) == 0 &&
                          cJSON_IsString(id) && strcmp(id->valuestring, "call_x_0") == 0;
        if (ok && n) ok = (!content && !cases[i].content) ||
                          (content && cases[i].content && strcmp(content, cases[i].content) == 0);
        tap_ok(ok, "tool reply %zu: %d calls (want %d), args %s, content %s", i, n, cases[i].calls,
               cJSON_IsString(args) ? args->valuestring : "-", content ? content : "-");
        cJSON_Delete(calls);
        free(content);
    }
    t.parallel = false;
    char *content = NULL;
    cJSON *calls = oai_tools_parse_reply(&t, cases[3].reply, "c", &content);
    tap_ok(calls && cJSON_GetArraySize(calls) == 1, "parallel_tool_calls false keeps one call");
    cJSON_Delete(calls);
    free(content);
}

/* A forced call's progress at every cut of its text: the name once its
 * string is closed, the arguments' range growing, done at their end. */
static void test_forced_progress(void)
{
    const char *t = "{\"name\": \"get_time\", \"arguments\": {\"tz\": \"a}\\\"b\", \"n\": [1, {}]}}";
    size_t n = strlen(t), args0 = (size_t)(strstr(t, "\"arguments\": ") - t) + 13;
    size_t name_end = (size_t)(strstr(t, "\"get_time\"") - t) + 10;
    bool ok = true;
    size_t last_to = 0;
    for (size_t cut = 0; cut <= n && ok; cut++) {
        char *name = NULL;
        size_t from, to;
        bool done;
        oai_tools_forced_progress(t, cut, &name, &from, &to, &done);
        bool want_name = cut >= name_end;
        ok = (name != NULL) == want_name && (!name || strcmp(name, "get_time") == 0);
        if (ok && cut > args0) ok = from == args0 && to >= last_to && to <= cut;
        if (ok) ok = done == (cut >= n - 1);
        if (!ok) tap_diag("cut %zu: name %s from %zu to %zu done %d", cut, name ? name : "-", from,
                          to, done);
        if (cut > args0) last_to = to;
        free(name);
    }
    tap_ok(ok, "forced call progress at every cut (arguments %zu..%zu)", args0, last_to);
}

/* An auto reply's calls as they stream (oai_tools_stream_progress): at
 * every cut of two parallel <tool_call> blocks, the calls begun, their
 * arguments' ranges growing and each call's end once its tag closed; a bare
 * call after <|python_tag|>; parallel off stops at one; a name not among
 * the tools, or keys in another order, begin none. */
static void test_stream_progress(void)
{
    char *names[] = {"get_weather", "get_time"};
    struct oai_tools t = {.choice = OAI_TOOLS_AUTO, .parallel = true, .n = 2, .names = names};
    const char *two = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n"
                      "</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n"
                      "</tool_call>\nDone.";
    size_t n = strlen(two), end1 = (size_t)(strstr(two, "</tool_call>") - two) + 12;
    size_t name2 = (size_t)(strstr(two, "\"get_time\"") - two) + 10;
    size_t name1 = (size_t)(strstr(two, "\"get_weather\"") - two) + 13;
    bool ok = true;
    for (size_t cut = 0; cut <= n && ok; cut++) {
        struct oai_call_progress p[4];
        int k = oai_tools_stream_progress(&t, two, cut, p, 4);
        int want = cut >= name2 ? 2 : cut >= name1 ? 1 : 0;
        ok = k == want;
        if (ok && k >= 1) ok = !strcmp(p[0].name, "get_weather") && p[0].args_to <= cut &&
                               (p[0].end == (cut >= end1 ? end1 : 0));
        if (ok && k == 2) ok = !strcmp(p[1].name, "get_time") && (p[1].args_from == 0 || p[1].args_from > end1);
        if (!ok) tap_diag("cut %zu: %d calls (want %d)", cut, k, want);
        oai_tools_progress_free(p, k);
    }
    tap_ok(ok, "auto calls' progress at every cut of two <tool_call> blocks");
    struct oai_call_progress p[4];
    int k = oai_tools_stream_progress(&t, two, n, p, 4);
    tap_ok(k == 2 && p[1].end > 0 && !strcmp(two + p[1].end, "\nDone.") &&
               !strncmp(two + p[0].args_from, "{\"city\": \"Rome\"}", p[0].args_to - p[0].args_from),
           "two calls, their arguments' bytes, the text after them");
    oai_tools_progress_free(p, k);
    t.parallel = false;
    k = oai_tools_stream_progress(&t, two, n, p, 4);
    tap_ok(k == 1, "parallel_tool_calls false: one call streams (%d)", k);
    oai_tools_progress_free(p, k);
    t.parallel = true;
    const char *bare = "<|python_tag|>{\"name\": \"get_time\", \"arguments\": {\"tz\": \"CET\"}}";
    k = oai_tools_stream_progress(&t, bare, strlen(bare), p, 4);
    tap_ok(k == 1 && p[0].done && p[0].end == strlen(bare), "a bare call after <|python_tag|>");
    oai_tools_progress_free(p, k);
    /* Mistral's [TOOL_CALLS] array and Phi-4's <|tool_call|> blocks stream too */
    const char *other[] = {
        "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\"}}",
        "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}, "
        "{\"name\": \"get_time\", \"arguments\": {}}]",
        "<|tool_call|>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}<|/tool_call|>"
        "<|tool_call|>{\"name\": \"get_time\", \"arguments\": {}}<|/tool_call|>"};
    for (int f = 0; f < 3; f++) {
        size_t len = strlen(other[f]), a1 = (size_t)(strstr(other[f], "{\"city") - other[f]);
        size_t n1 = (size_t)(strstr(other[f], "\"get_weather\"") - other[f]) + 13;
        const char *t2 = strstr(other[f], "\"get_time\"");
        size_t n2 = t2 ? (size_t)(t2 - other[f]) + 10 : len + 1;
        bool good = true;
        for (size_t cut = 0; cut <= len && good; cut++) {
            int kk = oai_tools_stream_progress(&t, other[f], cut, p, 4);
            int want_calls = cut >= n2 ? 2 : cut >= n1 ? 1 : 0;
            good = kk == want_calls && (kk == 0 || strcmp(p[0].name, "get_weather") == 0) &&
                   (kk < 2 || strcmp(p[1].name, "get_time") == 0) &&
                   (kk == 0 || cut <= a1 || (p[0].args_from == a1 && p[0].args_to <= cut));
            if (!good) tap_diag("  cut %zu: %d calls (want %d)", cut, kk, want_calls);
            oai_tools_progress_free(p, kk);
        }
        tap_ok(good, "auto calls' progress at every cut of %s",
               f == 0 ? "Llama's {name, parameters}" : f == 1 ? "a [TOOL_CALLS] array"
                                                           : "<|tool_call|> blocks");
    }
    const char *none[] = {"<tool_call>{\"name\": \"rm_rf\", \"arguments\": {}}</tool_call>",
                          "{\"arguments\": {}, \"name\": \"get_time\"}", "Hello <tool_call>"};
    for (int i = 0; i < 3; i++) {
        k = oai_tools_stream_progress(&t, none[i], strlen(none[i]), p, 4);
        tap_ok(k == 0, "no call streams from '%s'", none[i]);
        oai_tools_progress_free(p, k);
    }
}

/* History with tools: calls and results become text the templates render,
 * the tools go into the system message, a forced call gets its grammar. */
static void test_tool_history(void)
{
    const char *body =
        "{\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"},{\"role\":\"assistant\","
        "\"content\":null,\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":"
        "{\"name\":\"w\",\"arguments\":\"{\\\"city\\\":\\\"Oslo\\\"}\"}}]},"
        "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"-3 C\"},"
        "{\"role\":\"tool\",\"tool_call_id\":\"c2\",\"content\":\"snow\"}],"
        "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"w\",\"parameters\":"
        "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},\"required\":"
        "[\"city\"]}}}],\"tool_choice\":\"required\",\"parallel_tool_calls\":false}";
    struct oai_request r;
    struct oai_error e = {{0}, {0}};
    int rc = parse(body, OAI_CHAT, &r, &e);
    tap_ok(rc == 0, "a conversation with tool calls and results parses (%s)", e.message);
    if (rc != 0) return;
    const struct engine_message *m = r.req.messages;
    tap_ok(r.req.n_messages == 5 && strcmp(m[0].role, TMPL_ROLE_TOOLS) == 0 &&
               strncmp(m[0].content, "[{\"type\":\"function\"", 19) == 0 &&
               strcmp(m[2].role, TMPL_ROLE_TOOL_CALLS) == 0 && strcmp(m[3].role, "tool") == 0 &&
               strcmp(m[3].content, "{\"tool_call_id\":\"c1\",\"content\":\"-3 C\"}") == 0,
           "tools, calls and results go to the template in its structured roles (%d messages)",
           r.req.n_messages);
    /* rendered for a family without a native format: the generic text */
    struct tmpl_msg tm[8];
    for (int32_t i = 0; i < r.req.n_messages && i < 8; i++)
        tm[i] = (struct tmpl_msg){m[i].role, m[i].content};
    char *out = NULL, err[256];
    const char *want =
        "<|im_start|>system\n# Tools\n\nYou may call one or more functions to assist with the "
        "user query.\n\nYou are provided with function signatures within <tools></tools> XML "
        "tags:\n<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"w\", \"parameters\": "
        "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": "
        "[\"city\"]}}}\n</tools>\n\nFor each function call, return a json object with function name "
        "and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
        "<function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n"
        "<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n<tool_call>\n{\"name\": "
        "\"w\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call><|im_end|>\n<|im_start|>user\n"
        "<tool_response>\n-3 C\n</tool_response>\n<tool_response>\nsnow\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n";
    int trc = tmpl_render(TMPL_CHATML, tm, (size_t)r.req.n_messages, true, &out, err, sizeof err);
    tap_ok(trc == 0 && strcmp(out, want) == 0, "generic format: tools in the system message, "
           "<tool_call> text, two results in one user turn (%s)", trc ? err : out);
    free(out);
    /* Llama 3.1: native */
    struct tmpl t;
    out = NULL;
    trc = tmpl_init(&t, "<|start_header_id|><|end_header_id|> Environment: ipython Cutting "
                    "Knowledge Date", NULL, "<|begin_of_text|>", "<|eot_id|>", err, sizeof err);
    if (trc == 0) trc = tmpl_apply(&t, tm, (size_t)r.req.n_messages, true, &out, err, sizeof err);
    tap_ok(trc == 0 && strstr(out, "Environment: ipython\nCutting Knowledge Date: December 2023\n"
                                   "Today Date: 26 Jul 2024\n\n<|eot_id|>") &&
               strstr(out, "<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"w\", "
                           "\"parameters\": {\"city\": \"Oslo\"}}<|eot_id|><|start_header_id|>"
                           "ipython<|end_header_id|>\n\n\"-3 C\"<|eot_id|><|start_header_id|>ipython"),
           "Llama 3.1: the call as {name, parameters}, results in ipython turns (%s)",
           trc ? err : out);
    free(out);
    tmpl_free(&t);
    /* the remote client sends them as plain messages in the generic format
     * (the server applies its own template; its calls come back as text) */
    char *body2 = oai_request_build(OAI_CHAT, NULL, &r.req, false, false);
    struct oai_request r2;
    int rc2 = body2 ? parse(body2, OAI_CHAT, &r2, &e) : -1;
    const struct engine_message *m2 = rc2 == 0 ? r2.req.messages : NULL;
    tap_ok(rc2 == 0 && !strstr(body2, "\"tools\"") && r2.req.n_messages == 4 &&
               strcmp(m2[0].role, "system") == 0 && strstr(m2[0].content, "<tools>\n{\"type\": ") &&
               strcmp(m2[2].role, "assistant") == 0 &&
               strcmp(m2[2].content, "<tool_call>\n{\"name\": \"w\", \"arguments\": {\"city\": "
                                     "\"Oslo\"}}\n</tool_call>") == 0 &&
               strcmp(m2[3].role, "user") == 0 && strstr(m2[3].content, "</tool_response>\n<tool_response>"),
           "the remote client sends them as plain messages in the generic format (%s)",
           body2 ? body2 : "no body");
    if (rc2 == 0) oai_request_free(&r2);
    free(body2);
    tap_ok(r.tools.choice == OAI_TOOLS_REQUIRED && !r.tools.parallel && r.req.json_schema &&
               strstr(r.req.json_schema, "\"const\":\"w\""),
           "required: the call's grammar (%s)", r.req.json_schema ? r.req.json_schema : "none");
    oai_request_free(&r);
}

/* <think> out of replies, whatever the split of the text into tokens. */
static void test_think(void)
{
    struct {
        const char *reply, *reasoning, *content;
        bool opened;             /* the prompt opened it (DeepSeek-R1's template) */
    } cases[] = {
        {"<think>Snow is white.</think>White", "Snow is white.", "White", false},
        {"\n <think>\na < b, </thin is not the end\n</think>\n\nAnswer: yes", "\na < b, </thin is not "
         "the end\n", "Answer: yes", false},
        {"No thinking here <think>x</think>", "", "No thinking here <think>x</think>", false},
        {"<thinking>x", "", "<thinking>x", false},
        {"<think>cut by max_tokens", "cut by max_tokens", "", false},
        {"<think></think>", "", "", false},
        {"Snow is white.\n</think>\n\nWhite", "Snow is white.\n", "White", true},
        {"\n<think>\nagain</think>ok", "\nagain", "ok", true},
        {"<thin air, a < b</think>", "<thin air, a < b", "", true},
        {"cut by max_tokens </thi", "cut by max_tokens </thi", "", true},
        {"</think>Only the answer", "", "Only the answer", true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *s = cases[i].reply;
        size_t n = strlen(s);
        bool all = true;
        /* every split of the reply in two, and byte by byte */
        for (size_t cut = 0; cut <= n + 1; cut++) {
            struct oai_think t;
            struct sse_buf r = {0}, a = {0};
            if (cases[i].opened) oai_think_init_open(&t);
            else oai_think_init(&t);
            if (cut <= n) {
                oai_think_push(&t, s, cut, &r, &a);
                oai_think_push(&t, s + cut, n - cut, &r, &a);
            } else {
                for (size_t k = 0; k < n; k++) oai_think_push(&t, s + k, 1, &r, &a);
            }
            oai_think_flush(&t, &r, &a);
            bool ok = strcmp(r.p ? r.p : "", cases[i].reasoning) == 0 &&
                      strcmp(a.p ? a.p : "", cases[i].content) == 0;
            if (!ok && all) tap_diag("cut %zu: reasoning '%s' content '%s'", cut, r.p ? r.p : "",
                                     a.p ? a.p : "");
            all &= ok;
            sse_buf_free(&r);
            sse_buf_free(&a);
        }
        tap_ok(all, "think split %zu%s at every cut: reasoning '%s', content '%s'", i,
               cases[i].opened ? " (opened by the prompt)" : "", cases[i].reasoning,
               cases[i].content);
    }
    char *j = oai_think_response("{\"choices\":[{\"message\":{\"role\":\"assistant\",\"content\":"
                                 "\"x\"}}]}", "why", "White");
    tap_ok(j && strstr(j, "\"reasoning_content\":\"why\"") && strstr(j, "\"content\":\"White\""),
           "response: reasoning_content beside content (%s)", j ? j : "NULL");
    free(j);
    j = oai_think_chunk("{\"choices\":[{\"delta\":{\"content\":\"\"}}]}", "hmm");
    tap_ok(j && strstr(j, "{\"delta\":{\"reasoning_content\":\"hmm\"}") != NULL,
           "chunk: delta.reasoning_content, no content (%s)", j ? j : "NULL");
    free(j);
}

static void test_sse(void)
{
    struct sse_buf b = {0};
    sse_event(&b, NULL, "{\"a\":1}", 7);
    sse_comment(&b, "keep-alive");
    sse_event(&b, "error", "line1\nline2\r\nline3\n", 19);
    sse_event(&b, NULL, "[DONE]", 6);
    const char *want = "[|{\"a\":1}][error|line1\nline2\nline3\n][|[DONE]]";
    bool all = true;
    /* every split point, and byte by byte */
    for (size_t cut = 0; cut <= b.len; cut++) {
        struct sse_reader r;
        struct collect c = {{0}, 0};
        sse_reader_init(&r, 0);
        sse_reader_feed(&r, b.p, cut, on_ev, &c);
        sse_reader_feed(&r, b.p + cut, b.len - cut, on_ev, &c);
        if (strcmp(c.got, want) != 0 || c.n != 3) {
            all = false;
            tap_diag("cut %zu: %s", cut, c.got);
        }
        sse_reader_free(&r);
    }
    tap_ok(all, "SSE writer -> reader, split at each of %zu points", b.len + 1);
    struct sse_reader r;
    struct collect c = {{0}, 0};
    sse_reader_init(&r, 0);
    for (size_t i = 0; i < b.len; i++) sse_reader_feed(&r, b.p + i, 1, on_ev, &c);
    tap_ok(strcmp(c.got, want) == 0, "SSE byte by byte: %s", c.got);
    sse_reader_free(&r);
    const char crlf[] = "\xEF\xBB\xBF" "data:x\r\n\r\ndata: y\rdata: z\r\r: c\n\nevent: e\n\n";
    memset(&c, 0, sizeof c);
    sse_reader_init(&r, 0);
    sse_reader_feed(&r, crlf, sizeof crlf - 1, on_ev, &c);
    tap_ok(strcmp(c.got, "[|x][|y\nz]") == 0, "BOM, CR and CRLF line ends, comments: %s",
           c.got);
    sse_reader_free(&r);
    sse_reader_init(&r, 16);
    memset(&c, 0, sizeof c);
    tap_ok(sse_reader_feed(&r, "data: 0123456789abcdefghij\n\n", 28, on_ev, &c) == -1,
           "event over max_event is an error");
    sse_reader_free(&r);
    sse_buf_free(&b);
}

int main(void)
{
    test_chat_roundtrip();
    test_completion_roundtrip();
    test_errors();
    test_response_roundtrip();
    test_response_format();
    test_template_kwargs();
    test_tool_replies();
    test_tool_history();
    test_forced_progress();
    test_stream_progress();
    test_think();
    test_sse();
    return tap_done();
}
