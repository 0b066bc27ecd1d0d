/* synthetic: models with known shapes and generated weights, for capacity
 * planning and benchmarks without downloading a model
 * (`tern bench --synthetic llama3-8b --type q4_0|q8_0|f16`). */
#ifndef TERN_SYNTHETIC_H
#define TERN_SYNTHETIC_H

#include <stddef.h>
#include <stdint.h>

struct model;

/* name: "llama3-8b", "smollm2-135m", ...; wtype: enum qtype of the matrices.
 * Returns NULL with err for unknown names/types. Free with model_close. */
struct model *model_open_synthetic(const char *name, uint32_t wtype, uint64_t seed,
                                   char *err, size_t errlen);
/* Comma-separated list of known names, for help texts. */
const char *synthetic_names(void);

#endif
