/* template_impl: what template.c and template_tools.c share (not an API). */
#ifndef TERN_TEMPLATE_IMPL_H
#define TERN_TEMPLATE_IMPL_H

#include <stdbool.h>
#include <stddef.h>

#include "template.h"

/* A growing NUL-terminated string; oom sticks once an allocation fails. */
struct sb {
    char *p;
    size_t n, cap;
    bool oom;
};
void tsb_addn(struct sb *b, const char *s, size_t n);
void tsb_add(struct sb *b, const char *s);
/* s with Python's str.strip() whitespace removed at both ends (Jinja's trim). */
void tsb_add_trim(struct sb *b, const char *s);

/* Renders a conversation that holds the structured tool roles (template.h)
 * for t's family; tmpl_apply hands such conversations here. */
int tmpl_apply_tools(const struct tmpl *t, const struct tmpl_msg *msgs, size_t n, bool agp,
                     struct sb *b, char *err, size_t errlen);
/* The plain renderer of t's family (no tool roles). */
int tmpl_render_family(const struct tmpl *t, const struct tmpl_msg *msgs, size_t n, bool agp,
                       struct sb *b, char *err, size_t errlen);

/* The native tool formats (template_tools.c, built with cJSON): the whole
 * Llama 3.1-3.3, Mistral v3 tekken and Phi-4 mini templates, tool roles or not. */
int tmpl_llama31(const struct tmpl *t, const struct tmpl_msg *m, size_t n, bool agp,
                 struct sb *b, char *err, size_t errlen);
int tmpl_phi4(const struct tmpl *t, const struct tmpl_msg *m, size_t n, bool agp, struct sb *b,
              char *err, size_t errlen);
int tmpl_mistral_v3(const struct tmpl *t, const struct tmpl_msg *m, size_t n, bool agp,
                    struct sb *b, char *err, size_t errlen);

#endif
