/* synthetic: models with known shapes and generated weights, for capacity
 * planning and benchmarks without downloading a model
 * (`tern bench --synthetic llama3-8b --type q4_0|q8_0|f16`).
 *
 * Every weight byte is a pure function of (seed, tensor id, block index), so
 * the CUDA backend can generate the same weights on the device
 * (synth_gen_block below is shared with kernels/cuda) instead of uploading
 * gigabytes from host memory. */
#ifndef TERN_SYNTHETIC_H
#define TERN_SYNTHETIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct model;
struct wtensor;

/* name: "llama3-8b", "smollm2-135m", ...; wtype: enum qtype of the matrices.
 * Returns NULL with err for unknown names/types. Free with model_close (the
 * weights are m->owned). Shapes follow the real models; no RoPE scaling. */
struct model *model_open_synthetic(const char *name, uint32_t wtype, uint64_t seed,
                                   char *err, size_t errlen);

/* SYNTH_NO_HOST_DATA: shapes only, every wtensor.data is NULL; only the CUDA
 * backend can run such a model (it generates the weights on the device). */
enum { SYNTH_NO_HOST_DATA = 1u };
struct model *model_open_synthetic_ex(const char *name, uint32_t wtype, uint64_t seed,
                                      unsigned flags, char *err, size_t errlen);

/* Comma-separated list of known names, for help texts. */
const char *synthetic_names(void);

struct synth_info {
    uint64_t seed;
    bool host_data;   /* false: wtensor.data is NULL, generate with synth_gen_block */
    bool tied;        /* output shares token_embd */
};
/* Whether m came from model_open_synthetic*, and how. */
bool synthetic_info(const struct model *m, struct synth_info *out);

/* Tensor ids feeding the generator: global tensors, then 16 slots per layer. */
enum {
    SYNTH_T_TOK_EMBD = 0, SYNTH_T_OUTPUT_NORM = 1, SYNTH_T_OUTPUT = 2,
    SYNTH_L_ATTN_NORM = 0, SYNTH_L_WQ, SYNTH_L_WK, SYNTH_L_WV, SYNTH_L_WO,
    SYNTH_L_FFN_NORM, SYNTH_L_GATE, SYNTH_L_UP, SYNTH_L_DOWN, SYNTH_L_COUNT
};
static inline uint32_t synth_tensor_id(int32_t layer, int slot)
{
    return layer < 0 ? (uint32_t)slot : 16u + (uint32_t)layer * 16u + (uint32_t)slot;
}

/* The generator itself (synth_gen_block and its helpers) is a kernels-level
 * header, so kernels/cuda builds it for the device without reaching up into
 * the engine. */
#include "synth_gen.h"

#endif
