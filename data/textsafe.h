/* textsafe: untrusted text (model output, user input, stored history) made
 * safe where it leaves: for a terminal (control characters shown as visible
 * escapes, so ESC/OSC/BEL sequences never reach it; invalid UTF-8 as
 * U+FFFD) and for JSON (valid UTF-8 that strict decoders accept; cJSON
 * escapes the control characters itself). The stored text stays as it came.
 * Both return a malloc'd copy the caller frees, or NULL when out of memory. */
#ifndef TERN_TEXTSAFE_H
#define TERN_TEXTSAFE_H

#include <stddef.h>

/* Newline and tab kept; other C0 controls, DEL and C1 controls as "\x1b",
 * "\x7f", "\u009b"; invalid bytes as U+FFFD. */
char *textsafe_term(const char *s);
/* The same, n bytes long (s may hold NULs: shown as "\x00"). */
char *textsafe_term_n(const char *s, size_t n);
/* Invalid UTF-8 replaced by U+FFFD, everything else as is. */
char *textsafe_utf8(const char *s);
/* Replaces invalid UTF-8 in every string value of a cJSON tree, so that
 * printing it gives valid UTF-8 JSON. Returns 0, or -1 when out of memory. */
struct cJSON;
int textsafe_json(struct cJSON *root);
/* Length of the valid UTF-8 sequence at s[0..n), or 0 when it is not one. */
size_t textsafe_seq(const unsigned char *s, size_t n);

#endif
