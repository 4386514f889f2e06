/*
 * chat.h - chat templates rendered natively, without a Jinja engine: the
 * template text a model ships (chat_template.jinja, or tokenizer_config.json's
 * "chat_template") is recognised as one of the known templates and rendered
 * by C code that reproduces transformers' apply_chat_template byte for byte:
 *   "qwen2.5"  Qwen2.5-Instruct (default system prompt when none is given)
 *   "qwen3"    Qwen3 (thinking blocks of the turns after the last user
 *              query kept, earlier ones stripped; enable_thinking=false adds
 *              the empty <think></think> block to the generation prompt)
 *   "chatml"   the plain ChatML template of transformers' documentation
 * Recognition is by the exact text (leading and trailing whitespace aside,
 * which these templates' whitespace control makes inert): a template that
 * differs in one character may render differently, so it is refused with an
 * error that says so rather than rendered approximately. Tool definitions
 * and tool calls are not supported (messages of role "tool" are).
 * Rejected: a Jinja interpreter in C - large, and still only as exact as its
 * corner cases; the templates in use are few and stable.
 */
#ifndef AREAL_MODEL_CHAT_H
#define AREAL_MODEL_CHAT_H

#include <stdbool.h>
#include <stddef.h>

#include "areal/error.h"

typedef enum areal_chat_kind {
    AREAL_CHAT_CHATML,
    AREAL_CHAT_QWEN25,
    AREAL_CHAT_QWEN3,
} areal_chat_kind;

typedef struct areal_chat_template {
    areal_chat_kind kind;
    const char *name; /* "chatml", "qwen2.5", "qwen3" (static) */
} areal_chat_template;

/* One chat message; reasoning_content is NULL when the message has none. */
typedef struct areal_chat_msg {
    const char *role; /* "system", "user", "assistant", "tool" (others render nothing) */
    const char *content;
    const char *reasoning_content;
} areal_chat_msg;

/* The plain ChatML template (what a model directory without a template gets). */
extern const areal_chat_template areal_chat_chatml;

/*
 * Recognises template text (`source` names it in messages). Returns 0, or
 * AREAL_EINVAL naming the source when it is not a known template.
 */
int areal_chat_template_parse(const char *text, size_t len, const char *source,
                              areal_chat_template *t, areal_error *err);

/*
 * The template of model directory `dir`: dir/chat_template.jinja, else the
 * "chat_template" of dir/tokenizer_config.json (a string, or a list of
 * {"name", "template"} whose "default" entry is used). *found is false (and
 * 0 returned) when the directory has no template. Returns 0, AREAL_EINVAL
 * (one it cannot render, or a malformed file) or AREAL_EIO.
 */
int areal_chat_template_load(const char *dir, areal_chat_template *t, bool *found,
                             areal_error *err);

/*
 * Reads a template file (the --chat-template override): Jinja text, or a
 * JSON document with "chat_template" (a tokenizer_config.json). Returns as
 * areal_chat_template_parse, plus AREAL_EIO.
 */
int areal_chat_template_file(const char *path, areal_chat_template *t, areal_error *err);

/*
 * Renders msgs[0..n) as transformers' apply_chat_template(messages,
 * tokenize=False, add_generation_prompt=..., enable_thinking=...) does for
 * template t (enable_thinking false matters to "qwen3" only; true equals not
 * passing it). *out is a new NUL-terminated string of *len bytes (caller
 * frees). Returns 0, AREAL_EINVAL (n == 0 for a template that reads
 * messages[0], a NULL role or content) or AREAL_ENOMEM.
 */
int areal_chat_render(const areal_chat_template *t, const areal_chat_msg *msgs, size_t n,
                      bool add_generation_prompt, bool enable_thinking, char **out, size_t *len,
                      areal_error *err);

#endif
