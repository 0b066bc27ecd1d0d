/* test_malformed: malformed variants of the mixture-of-experts and fused
 * layouts, an unknown architecture, an unsupported weight type and a bias
 * the architecture lacks (gen_models.py --malformed writes them) must each
 * fail at load with an error naming the cause. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "tap.h"

static const struct { const char *name, *want; } cases[] = {
    { "bad-missing-expert", "missing tensor 'blk.1.ffn_up_exps.weight'" },
    { "bad-expert-count", "'blk.0.ffn_gate_inp.weight' has shape [256, 8, 1], expected [256, 7, 1]" },
    { "bad-expert-used", "'llama.expert_used_count' is 9, expected in [1, 8]" },
    { "bad-moe-no-count", "belongs to a mixture of experts" },
    { "bad-fused-width", "'blk.0.attn_qkv.weight' has shape [256, 480, 1], expected [256, 512, 1]" },
    { "bad-arch", "unsupported architecture 'falcon' (supported: llama" },
    { "bad-iq2", "unsupported type IQ2_XXS in tensor 'blk.0.ffn_down.weight'" },
    { "bad-qwen3-bias", "'blk.0.attn_output.bias': this bias is not part of architecture 'qwen3'" },
};

int main(void)
{
    const char *src = getenv("TERN_SRC"), *home = getenv("HOME");
    char dir[1024], cmd[2300];
    snprintf(dir, sizeof dir, "%s/.cache/tern/conformance", home ? home : ".");
    snprintf(cmd, sizeof cmd, "python3 '%s/tests/e2e/conformance/gen_models.py' --malformed "
             "--out '%s' >/dev/null", src ? src : ".", dir);
    if (!ok(system(cmd) == 0, "gen_models.py --malformed writes the files")) return tap_done();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[1200], err[512] = "";
        snprintf(path, sizeof path, "%s/%s.gguf", dir, cases[i].name);
        struct model *m = model_open(path, err, sizeof err);
        ok(!m && strstr(err, cases[i].want), "%s: load fails naming the cause", cases[i].name);
        tap_diag("%s", err);
        model_close(m);
    }
    return tap_done();
}
