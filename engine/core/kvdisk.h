/* kvdisk (prefix kvd_): the disk prefix cache. A long conversation reopened
 * later (tern chat -c, a client resending its history to tern serve) would
 * pay its whole prefill again; instead the engine saves the KV blocks of its
 * recent prefixes to files when it closes, and a later request whose prompt
 * begins with a saved prefix loads those blocks instead of computing them.
 *
 * One file per saved prefix, "<prefix hash>.tkv" in the cache directory, in
 * this format (little-endian, version 1):
 *
 *   offset size  field
 *        0    8  magic "TERNKV01"
 *        8    4  version (1)
 *       12    4  header bytes (128)
 *       16    8  model identity (kvd_file_identity of the GGUF file)
 *       24    8  tokenizer + chat template identity
 *       32    8  layout identity (backend, layers, KV row shape)
 *       40    4  KV type (enum kv_type)
 *       44    4  tokens per block
 *       48    8  bytes per block (every layer's K rows then V rows)
 *       56    4  blocks
 *       60    4  reserved (0)
 *       64    8  prefix hash (of the tokens)
 *       72    8  created, Unix seconds
 *       80    8  payload checksum (tokens, then blocks)
 *       88   32  tag: who made it (a session or request tag; NUL-padded)
 *      120    8  header checksum (bytes 0..119)
 *      128       tokens: int32 [blocks * tokens per block]
 *          ...   blocks: [blocks][bytes per block]
 *
 * An entry is used only when every identity field equals the engine's and
 * both checksums hold, so a truncated or corrupt file, another model, a
 * different tokenizer or template, or another KV type never gives a wrong
 * answer: the entry is ignored with one line (kvd.note) and the prompt is
 * prefilled. The directory holds at most cap bytes of entries: a save evicts
 * the least recently used files (their modification time, refreshed on each
 * hit) until it fits. Not thread-safe: the engine thread owns it. */
#ifndef TERN_KVDISK_H
#define TERN_KVDISK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define KVD_MAGIC "TERNKV01"
#define KVD_VERSION 1
#define KVD_HEADER_BYTES 128
#define KVD_TAG_BYTES 32

/* What an entry must match to be used. */
struct kvd_ident {
    uint64_t model, tok, layout;
    uint32_t kv_type, block_tokens;
    uint64_t block_bytes;
};

struct kvd_header {
    struct kvd_ident id;
    uint32_t n_blocks;
    uint64_t prefix_hash;
    uint64_t created;
    uint64_t payload_sum;
    char tag[KVD_TAG_BYTES + 1];
};

struct kvd_entry {
    char name[40];             /* file name in the directory */
    struct kvd_header h;
    int32_t *tokens;           /* [n_tokens] */
    int32_t n_tokens;
    uint64_t bytes;            /* file size */
    double used;               /* last use (file mtime), Unix seconds */
    uint32_t hits;             /* restores by this process */
    bool noted;                /* its mismatch was reported once */
};

struct kvd {
    char *dir;
    uint64_t cap;              /* bytes; entries beyond are evicted, LRU first */
    struct kvd_ident id;
    struct kvd_entry *e;       /* the directory's valid entries, any identity */
    int32_t n, cap_e;
    FILE *log;                 /* notes go here too when set */
    char note[320];            /* the latest note ("" none) */
    uint64_t n_notes, restores, saves, evictions;
};

/* A cheap stable identity of a file's content: its size and hashes of its
 * first and last MiB and of 64 KiB every 64 MiB between (a whole-file hash
 * would cost a second per GB at every open). 0 when it cannot be read. */
uint64_t kvd_file_identity(const char *path);
/* A fast 64-bit checksum (four lanes of multiply-xorshift). */
uint64_t kvd_hash(const void *p, size_t n, uint64_t seed);
/* Hash of a token prefix (the entry's name and prefix hash). */
uint64_t kvd_tokens_hash(const int32_t *tokens, int32_t n);

/* Opens (creating) dir and indexes its entries' headers and tokens; broken
 * files are noted and skipped. Returns 0 or -1 with err. */
int kvd_open(struct kvd *d, const char *dir, uint64_t cap, const struct kvd_ident *id, FILE *log,
             char *err, size_t errlen);
void kvd_close(struct kvd *d);

/* The entry made under this identity sharing the longest run of whole
 * leading blocks with tokens[0 .. max_tokens) (at least min_match tokens),
 * or -1; *n_match gets the shared tokens (an entry may go on past the
 * prompt: a saved reply the next turn re-tokenizes). An entry that would
 * match but whose identity differs is noted (once) and skipped. */
int32_t kvd_find(struct kvd *d, const int32_t *tokens, int32_t max_tokens, int32_t min_match,
                 int32_t *n_match);

/* Reads entry i's blocks (malloc'd into *blocks, n_blocks * block_bytes)
 * after checking the file against its header and checksum. On failure the
 * entry is noted, dropped from the index and its file removed; returns -1. */
int kvd_load(struct kvd *d, int32_t i, void **blocks);

/* Saves a prefix of n_blocks whole blocks (tokens[0 .. n_blocks *
 * block_tokens)): get(ud, k, buf) fills block k's bytes. An equal entry
 * only has its use time refreshed. Then evicts to the cap. Returns 0 or -1
 * with err. */
int kvd_save(struct kvd *d, const int32_t *tokens, int32_t n_blocks, const char *tag,
             int (*get)(void *ud, int32_t k, void *buf), void *ud, char *err, size_t errlen);

/* Marks entry i used now (hit count, file time). */
void kvd_touch(struct kvd *d, int32_t i);

/* Removes least recently used entries until the directory's entries fit
 * in cap bytes. */
void kvd_evict(struct kvd *d);

/* Total bytes of the indexed entries. */
uint64_t kvd_bytes(const struct kvd *d);

#endif
