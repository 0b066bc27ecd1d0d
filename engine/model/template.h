/* template: chat templates. The family of a model's Jinja template
 * (tokenizer.chat_template) is recognised from its markers and rendered in C
 * exactly as the Jinja template renders a conversation (checked against
 * jinja2 in tests/engine/model/tok). An unrecognised template falls back to ChatML with a
 * warning flag; a --template NAME override picks a family by name.
 *
 * The rendered text contains the template's own special-token text (BOS
 * included where the template writes bos_token): tokenize it with
 * TOK_PARSE_SPECIAL and without TOK_ADD_BOS. A struct tmpl is read-only
 * after tmpl_init: renders may run from several threads at once. */
#ifndef TERN_TEMPLATE_H
#define TERN_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>

struct gguf_ctx;
struct tok;

enum tmpl_family {
    TMPL_CHATML,   /* <|im_start|>role ... <|im_end|> (SmolLM2, Qwen) */
    TMPL_LLAMA3,   /* <|start_header_id|>role<|end_header_id|> ... <|eot_id|> */
    TMPL_LLAMA2,   /* <s>[INST] <<SYS>> ... <</SYS>> ... [/INST] */
    TMPL_MISTRAL,  /* <s>[INST] ... [/INST] answer</s> (no system role) */
    TMPL_GEMMA,    /* <start_of_turn>user ... <end_of_turn> */
    TMPL_PHI3,     /* <|user|> ... <|end|> */
    TMPL_ZEPHYR,   /* <|user|> ... </s> */
    TMPL_DEEPSEEK, /* User: ... Assistant: ...<｜end▁of▁sentence｜> */
    TMPL_GEMMA4,   /* <|turn>user ... <turn|> (thinking off) */
    TMPL_DEEPSEEK_R1, /* <｜User｜>...<｜Assistant｜>...<｜end▁of▁sentence｜> (R1, V3) */
    TMPL_UNKNOWN,  /* not recognised: rendered as ChatML */
    TMPL_N_FAMILIES
};

/* One message; same layout as struct engine_message. */
struct tmpl_msg {
    const char *role;    /* "system", "user", "assistant" */
    const char *content;
};

/* Tool calling. engine/wire passes an OpenAI conversation's tools, calls
 * and results as messages with three structured roles, whose content is
 * JSON (engine/core carries role/content only):
 *   TMPL_ROLE_TOOLS       the request's "tools" array (OpenAI form), once
 *   TMPL_ROLE_TOOL_CALLS  an assistant turn that calls:
 *                         {"content": text or null, "tool_calls": [OpenAI calls]}
 *   TMPL_ROLE_TOOL        a result: {"tool_call_id": id (optional), "content": text}
 * Families with a native tool format render them as their template does
 * (Llama 3.1-3.3: tools in the first user message, "Environment: ipython",
 * calls as {"name", "parameters"} JSON, results in the ipython role;
 * Mistral v3 (7B v0.3, tekken Nemo) and v7 (Small 3.x, [SYSTEM_PROMPT]):
 * [AVAILABLE_TOOLS] before the last user message,
 * [TOOL_CALLS] with 9-character ids, [TOOL_RESULTS]; Phi-4 mini: each
 * tool's function in <|tool|>..<|/tool|> in the system message, calls in
 * <|tool_call|>..<|/tool_call|>, results in <|tool_response|>, as llama.cpp's
 * fixed Phi-4 mini template has them); every other family
 * gets the generic Hermes text (docs/SERVING.md): the tools in <tools> in
 * the system message, calls as <tool_call> blocks in the assistant text,
 * results as a user turn of <tool_response> blocks. A call's "arguments"
 * JSON string is rendered as the object it holds (as vLLM does). */
#define TMPL_ROLE_TOOLS "tools"
#define TMPL_ROLE_TOOL_CALLS "tool_calls"
#define TMPL_ROLE_TOOL "tool"
/* True for those three roles. */
bool tmpl_role_is_tool(const char *role);

/* A conversation with those roles written out in the generic format as
 * plain system/user/assistant messages: what a server that applies its own
 * template is sent (the remote engine). msgs[] points into texts; roles of
 * plain messages are the caller's. Free with tmpl_plain_free. */
struct tmpl_plain {
    struct tmpl_msg *msgs;
    size_t n;
    char **texts;
    size_t n_texts;
};
int tmpl_tools_plain(const struct tmpl_msg *msgs, size_t n, struct tmpl_plain *out, char *err,
                     size_t errlen);
void tmpl_plain_free(struct tmpl_plain *p);

/* Family of a Jinja template from its markers; TMPL_UNKNOWN when none match
 * (or jinja is NULL). */
enum tmpl_family tmpl_detect(const char *jinja);
const char *tmpl_family_name(enum tmpl_family f);
/* Family for a --template NAME ("chatml", "llama3", ...); -1 when unknown. */
int tmpl_family_from_name(const char *name);
/* The names, comma-separated, for help texts. */
const char *tmpl_family_names(void);

/* A model's template, resolved once at load. */
struct tmpl {
    enum tmpl_family family; /* never TMPL_UNKNOWN: ChatML is used then */
    bool fallback;           /* the model's template was not recognised: warn */
    bool from_vocab;         /* the file has no template; the family was chosen from
                              * marker tokens of its vocabulary (Gemma 3 GGUFs) */
    char *bos, *eos;         /* token texts the template writes (owned) */
    char *default_system;    /* system prompt a ChatML template adds when the
                              * conversation has none (SmolLM2, Qwen), or NULL */
    bool phi3_v1;            /* first Phi-3 template: BOS, no system turns, and
                              * <|assistant|> after every user turn */
    bool llama31;            /* Llama 3.1-3.3: system header with the dates, native tools */
    bool llama3_today;       /* ... whose "Today Date" is the current date (3.2) */
    bool mistral_tools;      /* Mistral v3: [AVAILABLE_TOOLS], [TOOL_CALLS], [TOOL_RESULTS] */
    bool mistral_spaced;     /* ... as v0.3 writes them ("[INST] ", "[TOOL_CALLS] ["), not
                              * as tekken (Nemo) does */
    bool phi4;               /* Phi-4 mini: no newlines after the role tags, <|tool|> */
    bool think_open;         /* the generation prompt opens the thinking ("<think>\n",
                              * DeepSeek-R1 and its distills): the reply starts
                              * inside it and has only the closing tag */
    bool mistral_v7;         /* Mistral v7 (Small 3.x): [SYSTEM_PROMPT], tools as v0.3 */
    char *v7_sys_head, *v7_sys_tail; /* its default system prompt around today's date */
    char *v7_tool_prompt, *v7_tool_sep; /* what leads the system prompt with tools */
    long long today;         /* the date templates print (seconds since the epoch, shown
                              * in local time); 0: now (tests fix it) */
};

/* Resolves jinja (may be NULL) or, when override is non-NULL, the named
 * family. bos/eos are the vocabulary's texts (NULL → ""). Returns 0, or -1
 * with err (unknown override name, out of memory). */
int tmpl_init(struct tmpl *t, const char *jinja, const char *override, const char *bos,
              const char *eos, char *err, size_t errlen);
/* Same from a model file: tokenizer.chat_template and the tokenizer's BOS/EOS.
 * A file without a template gets the family whose marker tokens its
 * vocabulary has (<start_of_turn>, <|im_start|>, ...), else the fallback. */
int tmpl_init_model(struct tmpl *t, const struct gguf_ctx *g, const struct tok *tk,
                    const char *override, char *err, size_t errlen);
void tmpl_free(struct tmpl *t);

/* Renders msgs into *out (malloc'd, NUL-terminated; the caller frees).
 * add_generation_prompt opens the assistant turn where the template does.
 * Returns 0, or -1 with err where the Jinja template would raise (roles not
 * alternating, a role the template rejects) or out of memory. */
int tmpl_apply(const struct tmpl *t, const struct tmpl_msg *msgs, size_t n,
               bool add_generation_prompt, char **out, char *err, size_t errlen);

/* Renders with a family's usual BOS/EOS texts and no default system prompt. */
int tmpl_render(enum tmpl_family f, const struct tmpl_msg *msgs, size_t n,
                bool add_generation_prompt, char **out, char *err, size_t errlen);

#endif
