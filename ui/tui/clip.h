/* clip: copying text to the clipboard of the terminal with OSC 52
 * (ESC ] 52 ; c ; base64 BEL), which xterm, kitty, WezTerm, iTerm2 and tmux
 * (set-clipboard) honour, also over SSH: the terminal, not this machine,
 * owns the clipboard. */
#ifndef TERN_UI_CLIP_H
#define TERN_UI_CLIP_H

#include <stddef.h>
#include <stdio.h>

/* Writes the sequence for text[0..n) to out. Returns 0, or -1 when out of
 * memory or the write failed. */
int ui_clip_osc52(FILE *out, const char *text, size_t n);
/* base64 of s[0..n) into out (room for 4 * ((n + 2) / 3) + 1). */
void ui_clip_base64(const char *s, size_t n, char *out);

#endif
