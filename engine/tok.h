/* tok: tokenizers read from GGUF metadata (SentencePiece-style "llama" and
 * byte-level BPE "gpt2" with the pre-tokenizer named by tokenizer.ggml.pre),
 * giving exactly the ids the reference engine gives, and a streaming-safe
 * incremental detokenizer.
 *
 * Ownership: tok_open copies what it needs from the GGUF context; the gguf
 * context may be closed afterwards. */
#ifndef TERN_TOK_H
#define TERN_TOK_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

struct gguf_ctx;
struct tok;

enum tok_flags {
    TOK_ADD_BOS = 1 << 0,      /* prepend BOS when the model's metadata says so */
    TOK_PARSE_SPECIAL = 1 << 1 /* special-token text becomes special tokens */
};

struct tok *tok_open(const struct gguf_ctx *g, char *err, size_t errlen);
void tok_close(struct tok *t);

/* Encodes len bytes of text (any bytes; invalid UTF-8 is handled). Writes up
 * to cap ids and returns the total count needed (call again with a larger
 * buffer when it exceeds cap), or -1 with err. */
int64_t tok_encode(const struct tok *t, const char *text, size_t len, unsigned flags,
                   int32_t *ids, int64_t cap, char *err, size_t errlen);

int32_t tok_n_vocab(const struct tok *t);
/* Raw piece text as stored in the vocabulary (NUL-terminated). */
const char *tok_piece(const struct tok *t, int32_t id);
/* Bytes the token decodes to (spaces unescaped, byte tokens resolved).
 * Returns the byte count written (may be 0), at most cap. */
size_t tok_decode_token(const struct tok *t, int32_t id, char *out, size_t cap);

int32_t tok_bos(const struct tok *t);   /* -1 when absent */
int32_t tok_eos(const struct tok *t);
int32_t tok_eot(const struct tok *t);
/* True for any end-of-generation id (EOS, EOT, <end_of_turn>, <|im_end|>, ...). */
bool tok_is_eog(const struct tok *t, int32_t id);
bool tok_is_special(const struct tok *t, int32_t id);
const char *tok_model_name(const struct tok *t);  /* "llama", "gpt2" */
const char *tok_pre_name(const struct tok *t);    /* "smollm", "default", ... */

/* Incremental detokenizer: holds back incomplete UTF-8 sequences so each
 * emitted fragment is valid UTF-8; invalid bytes become U+FFFD. */
struct tok_stream {
    unsigned char pending[8];
    size_t n_pending;
    bool first;                /* strip the leading space of SPM output */
};
void tok_stream_init(struct tok_stream *s);
/* Appends the text of token id to out (NUL-terminated); returns bytes written. */
size_t tok_stream_push(const struct tok *t, struct tok_stream *s, int32_t id,
                       char *out, size_t cap);
/* Flushes held bytes (as U+FFFD when incomplete). */
size_t tok_stream_flush(struct tok_stream *s, char *out, size_t cap);

#endif
