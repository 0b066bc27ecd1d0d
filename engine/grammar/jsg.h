/* jsg: JSON Schema -> a byte-level matcher of the JSON texts it allows.
 *
 *   jsg_compile: untrusted schema text -> struct jsg (immutable; any thread
 *     may read it). A schema using a keyword tern cannot enforce, or a
 *     malformed or unsatisfiable one, is refused with a message naming the
 *     keyword and its path ("#/properties/age: 'minimum' is not supported").
 *   jsg_start / jsg_step: a matcher state (a small set of stacks of frames,
 *     plain bytes, copied by value) advanced one byte at a time. A state
 *     with no stack left has rejected the text.
 *   jsg_complete: the bytes so far form a whole value (end of text allowed).
 *
 * What is generated is a subset of what the schema allows: compact JSON with
 * bounded whitespace runs, object properties in the schema's order (optional
 * ones may be skipped), no properties beyond those declared, numbers of at
 * most JSG_MAX_DIGITS digits per part. Every text the matcher accepts
 * validates against the schema. The vocabulary side (token masks) is
 * tmask.h. */
#ifndef TERN_JSG_H
#define TERN_JSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define JSG_DEPTH 24       /* nesting levels a generated value may reach */
#define JSG_ALTS 8         /* stacks a state may hold (anyOf alternatives alive at once) */
#define JSG_WS_MAX 12      /* longest whitespace run between tokens of the JSON */
#define JSG_MAX_DIGITS 15  /* per integer, fraction or exponent part (exponent: 3) */
#define JSG_MAX_NODES 20000 /* compiled size bound: a larger schema is refused */

struct jsg;

/* One level of a stack; every byte is significant (states are hashed and
 * compared as bytes), so frames are built zeroed. */
struct jsg_frame {
    uint16_t node;
    uint16_t a, b, c;  /* kind-specific counters (jsg.c) */
    uint8_t phase, ws;
    uint16_t pad;
};

struct jsg_state {
    uint8_t n;                 /* live stacks (0: rejected) */
    uint8_t depth[JSG_ALTS];   /* frames in each; 0: a complete value */
    struct jsg_frame f[JSG_ALTS][JSG_DEPTH];
};

/* Compiles schema[0..len) (JSON text). any_object: ignore the schema and
 * allow any JSON object ({"type":"json_object"}); schema may then be NULL.
 * Returns NULL with err filled (malformed, unsupported, unsatisfiable, too
 * large, out of memory). */
struct jsg *jsg_compile(const char *schema, size_t len, bool any_object, char *err, size_t errlen);
void jsg_free(struct jsg *g);
/* Nodes in the compiled graph (tests, sizes). */
int32_t jsg_n_nodes(const struct jsg *g);

void jsg_start(const struct jsg *g, struct jsg_state *s);
/* out = in after byte b; returns false when no stack survives. in and out
 * must not overlap. */
bool jsg_step(const struct jsg *g, const struct jsg_state *in, uint8_t b, struct jsg_state *out);
/* Feeds bytes[0..n) to s in place; false (s then undefined) when rejected. */
bool jsg_feed(const struct jsg *g, struct jsg_state *s, const char *bytes, size_t n);
/* True when the bytes so far are one whole value. */
bool jsg_complete(const struct jsg *g, const struct jsg_state *s);
/* When every stack is inside a plain string (no escape or UTF-8 sequence
 * pending), the most characters a stack may still add (INT32_MAX: no
 * bound): any string-safe token of at most that many characters keeps
 * some stack inside (tmask's fast path). -1 otherwise. */
int32_t jsg_plain_string_room(const struct jsg *g, const struct jsg_state *s);
/* Bytes of s that matter (for hashing and comparison): copies at most cap
 * into out and returns the length. */
size_t jsg_state_key(const struct jsg_state *s, uint8_t *out, size_t cap);
/* Copies only the live part of src. */
void jsg_state_copy(struct jsg_state *dst, const struct jsg_state *src);

#endif
