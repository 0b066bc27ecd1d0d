/* store_fill: writes a small, varied history through the store API (the
 * same calls as chat and run) for the 'tern history' tests. usage:
 * store_fill DB. Two sessions: English with timings, and a multilingual one
 * with a cancelled reply; 20 requests of a second model for statistics. */
#include <stdio.h>
#include <string.h>

#include "store.h"

static void reply(struct store *s, store_key ses, const char *text, const char *status,
                  const struct store_request *q)
{
    store_key r = store_reply_begin(s, ses);
    size_t n = strlen(text), half = n / 2;
    while (half < n && (text[half] & 0xC0) == 0x80) half++; /* split on a character */
    store_reply_append(s, r, text, half);
    store_reply_append(s, r, text + half, n - half);
    store_reply_finish(s, r, status, q ? q->generated_tokens : -1);
    if (q) store_request_add(s, r, q);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: store_fill DB\n");
        return 2;
    }
    struct store *s;
    char err[1024];
    if (store_open(&s, argv[1], STORE_READWRITE, err, sizeof err) != 0) {
        fprintf(stderr, "store_fill: %s\n", err);
        return 1;
    }
    store_key a = store_session_new(s, "Quokka facts", "SmolLM2-135M", "{\"temp\":0.7,\"seed\":3}");
    store_message_add(s, a, "system", "Answer briefly.", 3);
    store_message_add(s, a, "user", "Where do quokkas live?", 6);
    struct store_request q = {
        .model = "SmolLM2-135M", .model_file = "/models/smol.gguf", .model_hash = "abc123",
        .backend = "cpu", .params_json = "{\"temp\":0.7}", .status = "ok", .queue_s = 0.0005,
        .prefill_s = 0.031, .ttft_s = 0.0325, .tpot_s = 0.0125, .decode_s = 0.1, .e2e_s = 0.1331,
        .prompt_tokens = 25, .cached_tokens = 0, .generated_tokens = 9,
    };
    reply(s, a, "Quokkas live on Rottnest Island, near Perth.", "ok", &q);
    store_message_add(s, a, "user", "What do they eat?", 5);
    q.ttft_s = 0.0211;
    q.cached_tokens = 24;
    q.prompt_tokens = 44;
    reply(s, a, "Grasses, leaves and stems.", "ok", &q);

    store_key b = store_session_new(s, "多语言 тест", "gemma-3-270m", NULL);
    store_message_add(s, b, "user", "Что такое квокка? 袋鼠的亲戚吗?", -1);
    reply(s, b, "Квокка — небольшое сумчатое. 是的, a marsupial.", "cancelled", NULL);

    for (int i = 0; i < 20; i++) {
        struct store_request g = {
            .model = "gemma-3-270m", .backend = "cpu", .status = i == 7 ? "cancelled" : "ok",
            .queue_s = -1, .prefill_s = -1, .decode_s = -1, .ttft_s = 0.05 + 0.013 * ((i * 7) % 20),
            .tpot_s = 0.02 + 0.001 * i, .e2e_s = 1.0 + 0.1 * i, .prompt_tokens = 10 + i,
            .cached_tokens = 0, .generated_tokens = 16,
        };
        store_request_add(s, 0, &g);
    }
    int rc = store_flush(s, err, sizeof err);
    if (rc != 0) fprintf(stderr, "store_fill: %s\n", err);
    printf("%lld %lld\n", (long long)store_resolve(s, a), (long long)store_resolve(s, b));
    store_close(s);
    return rc ? 1 : 0;
}
