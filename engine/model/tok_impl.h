/* tok_impl: the tokenizer's private state, shared by tok.c (vocabulary,
 * special tokens, decoding), tok_spm.c (SentencePiece merges) and tok_bpe.c
 * (byte-level BPE and its pre-tokenizer). Not part of the public API. */
#ifndef TERN_TOK_IMPL_H
#define TERN_TOK_IMPL_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

/* Token attributes as bits (the reference engine's numbering). */
enum {
    TOK_ATTR_UNDEFINED = 0,
    TOK_ATTR_UNKNOWN = 1 << 0,
    TOK_ATTR_UNUSED = 1 << 1,
    TOK_ATTR_NORMAL = 1 << 2,
    TOK_ATTR_CONTROL = 1 << 3,
    TOK_ATTR_USER_DEFINED = 1 << 4,
    TOK_ATTR_BYTE = 1 << 5,
    TOK_ATTR_LSTRIP = 1 << 7,
    TOK_ATTR_RSTRIP = 1 << 8,
    TOK_ATTR_EOG = 1 << 12, /* ends generation (tern's own bit) */
};

enum tok_type { TOK_SPM, TOK_BPE };

/* Growable output id list used by the session code. */
struct tok_ids {
    int32_t *v;
    size_t n, cap;
};
int tok_ids_push(struct tok_ids *o, int32_t id);

/* Open-addressing hash of byte strings → int32 value. Each slot keeps the
 * upper hash bits, so a failed probe (most SPM/BPE pair lookups fail) does
 * not touch the token tables. */
struct tok_slot {
    uint32_t tag;     /* hash >> 32 */
    int32_t id;       /* -1 = empty; else index into the owner's entry table */
};
struct tok_hash {
    struct tok_slot *slots;
    size_t mask;
};

struct tok_bpe; /* compiled pre-tokenizer (tok_bpe.c) */

struct tok {
    enum tok_type type;
    char model[16];
    char pre[32];
    int32_t n_vocab;
    char *pool;          /* all token texts, NUL-separated */
    uint32_t *off, *len; /* per token: text in pool */
    float *score;
    uint16_t *attr;
    char *dec_pool;      /* decoded bytes per token (non-special rendering) */
    uint32_t *dec_off, *dec_len;
    size_t max_piece;    /* longest token text in bytes */
    struct tok_hash vocab; /* text → id */

    /* merges "left right", by rank (BPE only) */
    char *mpool;
    uint32_t *moff, *mlen, *msplit; /* merge text, and the split offset (space) */
    uint32_t n_merges;
    struct tok_hash merges;

    int32_t *specials;   /* control/user-defined/unknown ids, longest text first */
    uint32_t n_specials;

    int32_t bos, eos, eot, eom, unk, pad, sep, nl;
    bool add_bos, add_eos, add_space_prefix, ignore_merges;
    bool byte_level;     /* BPE over the byte alphabet (gpt2); else raw UTF-8 with
                          * <0xNN> byte tokens and spaces escaped as U+2581 (gemma4) */
    struct tok_bpe *bpe;
};

uint64_t tok_hash_bytes(const char *s, size_t n, uint64_t h);
int tok_hash_init(struct tok_hash *h, size_t n);   /* room for n entries */
void tok_vocab_insert(struct tok *t, int32_t id);  /* t->pool/off/len of id are set */
void tok_merge_insert(struct tok *t, int32_t m);   /* t->mpool/moff/mlen/msplit of m are set */
#define TOK_HASH_SEED 1469598103934665603ull
/* Id of the token with exactly this text, or -1. */
int32_t tok_find(const struct tok *t, const char *s, size_t n);
/* Rank of merge (left, right), or -1. */
int32_t tok_merge_rank(const struct tok *t, const char *l, size_t ln, const char *r, size_t rn);

static inline bool tok_valid_id(const struct tok *t, int32_t id)
{
    return id >= 0 && id < t->n_vocab;
}

/* Byte length of a UTF-8 sequence from its first byte (reference engine's table). */
static inline size_t tok_utf8_len(unsigned char c)
{
    static const unsigned char lookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lookup[c >> 4];
}

/* Decodes one code point leniently at s[*off] (n bytes total) as the
 * reference engine does: a malformed sequence yields U+FFFD and consumes
 * one byte. */
uint32_t tok_utf8_next(const unsigned char *s, size_t n, size_t *off);
/* Encodes cp (≤ 0x10FFFF; surrogates too) into out[4]; returns the length. */
size_t tok_utf8_put(uint32_t cp, char *out);

/* SentencePiece: appends the ids of text (already space-escaped). */
int tok_spm_encode(const struct tok *t, const char *text, size_t len, struct tok_ids *out);

/* Byte-level BPE. */
int tok_bpe_init(struct tok *t, char *err, size_t errlen);
void tok_bpe_free(struct tok_bpe *b);
int tok_bpe_encode(const struct tok *t, const char *text, size_t len, struct tok_ids *out,
                   char *err, size_t errlen);
/* Byte ↔ code point map of byte-level BPE. */
uint32_t tok_byte_to_cp(unsigned char b);
int tok_cp_to_byte(uint32_t cp); /* -1 if cp is not in the map */

#endif
