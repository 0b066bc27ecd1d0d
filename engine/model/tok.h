/* tok: tokenizers read from GGUF metadata (SentencePiece-style "llama" and
 * byte-level BPE "gpt2" with the pre-tokenizer named by tokenizer.ggml.pre),
 * giving exactly the ids the reference engine gives, and a streaming-safe
 * incremental detokenizer.
 *
 * Ownership: tok_open copies what it needs from the GGUF context; the gguf
 * context may be closed afterwards. A struct tok is read-only after
 * tok_open: several threads may encode and decode with it at once.
 *
 * Models: "llama" (SentencePiece), "gpt2" (byte-level BPE; pre-tokenizers
 * default, gpt-2, llama3/llama-bpe, qwen2, qwen35, smollm, starcoder, refact,
 * command-r, deepseek-llm, deepseek-coder, falcon, mpt, chatglm/glm4, ...),
 * "gemma4" (SentencePiece-style BPE). */
#ifndef TERN_TOK_H
#define TERN_TOK_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

struct gguf_ctx;
struct tok;

enum tok_flags {
    TOK_ADD_BOS = 1 << 0,      /* add BOS (and EOS) as the model's metadata says
                                * (tokenizer.ggml.add_bos_token / add_eos_token) */
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
/* Id of the token whose vocabulary text is exactly s, or -1. */
int32_t tok_find_text(const struct tok *t, const char *s);
/* Raw piece text as stored in the vocabulary (NUL-terminated). */
const char *tok_piece(const struct tok *t, int32_t id);
/* Bytes the token decodes to (spaces unescaped, byte tokens resolved).
 * Control and unknown tokens give no bytes (as the reference engine renders
 * them for users). Returns the byte count written (may be 0), at most cap. */
size_t tok_decode_token(const struct tok *t, int32_t id, char *out, size_t cap);
/* Same, but control/unknown tokens give their text (e.g. "<|im_end|>"). */
size_t tok_decode_token_special(const struct tok *t, int32_t id, char *out, size_t cap);
/* Decodes a whole sequence as the reference engine's detokenizer does
 * (without its clean-up of spaces): the SentencePiece leading space added by
 * add_space_prefix is removed from the first token. `special` renders
 * control tokens as text. Writes at most cap bytes plus a NUL when cap > 0;
 * returns the total byte count (call again when it is >= cap). */
size_t tok_decode(const struct tok *t, const int32_t *ids, size_t n, bool special, char *out,
                  size_t cap);
/* Longest decoded token in bytes (to size buffers). */
size_t tok_max_piece(const struct tok *t);

int32_t tok_bos(const struct tok *t);   /* -1 when absent */
int32_t tok_eos(const struct tok *t);
int32_t tok_eot(const struct tok *t);
int32_t tok_unk(const struct tok *t);
int32_t tok_pad(const struct tok *t);
bool tok_adds_bos(const struct tok *t);   /* tokenizer.ggml.add_bos_token (or its default) */
float tok_score(const struct tok *t, int32_t id);

/* Token types as tokenizer.ggml.token_type numbers them. */
enum tok_token_type {
    TOK_TYPE_UNDEFINED = 0, TOK_TYPE_NORMAL = 1, TOK_TYPE_UNKNOWN = 2, TOK_TYPE_CONTROL = 3,
    TOK_TYPE_USER_DEFINED = 4, TOK_TYPE_UNUSED = 5, TOK_TYPE_BYTE = 6
};
enum tok_token_type tok_token_type(const struct tok *t, int32_t id);
/* True for any end-of-generation id (EOS, EOT, <end_of_turn>, <|im_end|>, ...). */
bool tok_is_eog(const struct tok *t, int32_t id);
bool tok_is_special(const struct tok *t, int32_t id);
const char *tok_model_name(const struct tok *t);  /* "llama", "gpt2" */
const char *tok_pre_name(const struct tok *t);    /* "smollm", "default", ... */

/* Incremental detokenizer: holds back incomplete UTF-8 sequences so each
 * emitted fragment is valid UTF-8; invalid bytes become U+FFFD. Control
 * tokens emit nothing. */
struct tok_stream {
    unsigned char pending[8];
    size_t n_pending;
    bool first;                /* strip one leading space (the SentencePiece space
                                * prefix) from the first bytes: set it after init
                                * when decoding a whole encoded text; generation
                                * continues a prompt and leaves it false */
};
void tok_stream_init(struct tok_stream *s);
/* Bytes an out buffer needs so that tok_stream_push never truncates. */
size_t tok_stream_cap(const struct tok *t);
/* Writes the text of token id to out (NUL-terminated, cap > 0); returns bytes
 * written. With cap below tok_stream_cap the text is cut at a character. */
size_t tok_stream_push(const struct tok *t, struct tok_stream *s, int32_t id,
                       char *out, size_t cap);
/* Flushes held bytes (as U+FFFD when incomplete); cap >= 4 is enough. */
size_t tok_stream_flush(struct tok_stream *s, char *out, size_t cap);

#endif
