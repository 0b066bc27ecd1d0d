/* picker: the model picker (F6): one row per model file of the models
 * directory, the loaded one marked, with what a user picks by (chat or
 * base kind, quant, size, trained context, whether it fits in memory, the
 * prefill and decode tokens/s this machine's limits predict), and what switching to it will
 * do to the open chat. The files are described by the caller (the app's
 * model_info reads their headers); this module only words and lays them out. */
#ifndef TERN_UI_PICKER_H
#define TERN_UI_PICKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dialog.h"

struct ui_model_entry {
    char file[256]; /* the file name in the models directory */
    bool ok;        /* its header could be read (else err says why) */
    bool base;      /* no chat template: a base model, which continues plain text */
    char quant[24]; /* "Q4_1", "Q4_K_M" */
    uint64_t size;  /* bytes */
    uint32_t ctx;   /* trained context in tokens; 0 unknown */
    bool fits;      /* weights + KV cache of the full context fit in memory */
    double pp_tok_s, tg_tok_s; /* predicted by the machine limits (0: not known) */
    char err[160];
};

/* Opens d as the picker over v[0..n) with loaded (a file name, "" none)
 * marked and selected; dir names the directory in the empty list's hint,
 * pull the command that fills it. */
void ui_picker_open(struct ui_dialog *d, int action, const struct ui_model_entry *v, int n,
                    const char *loaded, const char *dir, const char *pull);

/* What switching from the loaded kind (base_now) to e means for an open
 * chat with turns: true when the kinds differ, with the question's title and
 * message written (the caller asks before switching). */
bool ui_picker_switch_question(const struct ui_model_entry *e, bool base_now, char *title,
                               size_t tn, char *msg, size_t mn);

#endif
