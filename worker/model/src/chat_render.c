/*
 * chat_render.c - the known chat templates rendered in C, statement for
 * statement as their Jinja text reads (chat.h lists them). Python string
 * methods the Qwen3 template calls are reproduced exactly: split(sep)[-1]
 * is the text after the last sep, split(sep)[0] the text before the first,
 * strip/lstrip/rstrip('\n') remove newlines only.
 */
#include <stdlib.h>
#include <string.h>

#include "areal/model/chat.h"

typedef struct sbuf {
    char *p;
    size_t n, cap;
    bool oom;
} sbuf;

static void putn(sbuf *b, const char *s, size_t n) {
    if (b->oom)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *q = realloc(b->p, cap);
        if (q == NULL) {
            b->oom = true;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void puts_(sbuf *b, const char *s) {
    putn(b, s, strlen(s));
}

static void block(sbuf *b, const char *role, const char *content) {
    puts_(b, "<|im_start|>");
    puts_(b, role);
    puts_(b, "\n");
    puts_(b, content);
    puts_(b, "<|im_end|>\n");
}

static bool is(const areal_chat_msg *m, const char *role) {
    return strcmp(m->role, role) == 0;
}

/* The tool-response group of message i (Qwen2.5 and Qwen3 spell it alike). */
static void tool(sbuf *b, const areal_chat_msg *m, size_t n, size_t i) {
    if (i == 0 || !is(&m[i - 1], "tool"))
        puts_(b, "<|im_start|>user");
    puts_(b, "\n<tool_response>\n");
    puts_(b, m[i].content);
    puts_(b, "\n</tool_response>");
    if (i + 1 == n || !is(&m[i + 1], "tool"))
        puts_(b, "<|im_end|>\n");
}

static void chatml(sbuf *b, const areal_chat_msg *m, size_t n, bool agp) {
    for (size_t i = 0; i < n; i++)
        block(b, m[i].role, m[i].content);
    if (agp)
        puts_(b, "<|im_start|>assistant\n");
}

static void qwen25(sbuf *b, const areal_chat_msg *m, size_t n, bool agp) {
    if (is(&m[0], "system"))
        block(b, "system", m[0].content);
    else
        block(b, "system", "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
    for (size_t i = 0; i < n; i++) {
        if (is(&m[i], "user") || (is(&m[i], "system") && i > 0) || is(&m[i], "assistant"))
            block(b, m[i].role, m[i].content);
        else if (is(&m[i], "tool"))
            tool(b, m, n, i);
    }
    if (agp)
        puts_(b, "<|im_start|>assistant\n");
}

/* A view of a string: [p, p + n). */
typedef struct span {
    const char *p;
    size_t n;
} span;

/* The last occurrence of needle in s, or NULL. */
static const char *last_of(span s, const char *needle) {
    size_t k = strlen(needle);
    for (size_t i = s.n >= k ? s.n - k + 1 : 0; i-- > 0;)
        if (memcmp(s.p + i, needle, k) == 0)
            return s.p + i;
    return NULL;
}

static const char *first_of(span s, const char *needle) {
    size_t k = strlen(needle);
    for (size_t i = 0; i + k <= s.n; i++)
        if (memcmp(s.p + i, needle, k) == 0)
            return s.p + i;
    return NULL;
}

static span lstrip_nl(span s) {
    while (s.n > 0 && s.p[0] == '\n')
        s.p++, s.n--;
    return s;
}

static span rstrip_nl(span s) {
    while (s.n > 0 && s.p[s.n - 1] == '\n')
        s.n--;
    return s;
}

static bool starts(const char *s, const char *p) {
    return strncmp(s, p, strlen(p)) == 0;
}

static bool ends(const char *s, const char *p) {
    size_t a = strlen(s), k = strlen(p);
    return a >= k && memcmp(s + a - k, p, k) == 0;
}

static void qwen3_assistant(sbuf *b, const areal_chat_msg *m, bool after_query, bool last) {
    span content = {m->content, strlen(m->content)}, reasoning = {"", 0};
    if (m->reasoning_content != NULL) {
        reasoning = (span){m->reasoning_content, strlen(m->reasoning_content)};
    } else if (strstr(m->content, "</think>") != NULL) {
        span all = content;
        const char *end = last_of(all, "</think>");
        content = lstrip_nl((span){end + 8, (size_t)(all.p + all.n - (end + 8))});
        const char *first = first_of(all, "</think>");
        span before = rstrip_nl((span){all.p, (size_t)(first - all.p)});
        const char *open = last_of(before, "<think>");
        if (open != NULL)
            before = (span){open + 7, (size_t)(before.p + before.n - (open + 7))};
        reasoning = lstrip_nl(before);
    }
    puts_(b, "<|im_start|>");
    puts_(b, m->role);
    if (after_query && (last || reasoning.n > 0)) {
        span r = rstrip_nl(lstrip_nl(reasoning));
        puts_(b, "\n<think>\n");
        putn(b, r.p, r.n);
        puts_(b, "\n</think>\n\n");
        span c = lstrip_nl(content);
        putn(b, c.p, c.n);
    } else {
        puts_(b, "\n");
        putn(b, content.p, content.n);
    }
    puts_(b, "<|im_end|>\n");
}

static void qwen3(sbuf *b, const areal_chat_msg *m, size_t n, bool agp, bool thinking) {
    if (is(&m[0], "system"))
        block(b, "system", m[0].content);
    size_t last_query = n - 1;
    for (size_t i = n; i-- > 0;) /* the last user turn that is not a tool response */
        if (is(&m[i], "user") &&
            !(starts(m[i].content, "<tool_response>") && ends(m[i].content, "</tool_response>"))) {
            last_query = i;
            break;
        }
    for (size_t i = 0; i < n; i++) {
        if (is(&m[i], "user") || (is(&m[i], "system") && i > 0))
            block(b, m[i].role, m[i].content);
        else if (is(&m[i], "assistant"))
            qwen3_assistant(b, &m[i], i > last_query, i + 1 == n);
        else if (is(&m[i], "tool"))
            tool(b, m, n, i);
    }
    if (agp) {
        puts_(b, "<|im_start|>assistant\n");
        if (!thinking)
            puts_(b, "<think>\n\n</think>\n\n");
    }
}

int areal_chat_render(const areal_chat_template *t, const areal_chat_msg *msgs, size_t n,
                      bool add_generation_prompt, bool enable_thinking, char **out, size_t *len,
                      areal_error *err) {
    *out = NULL;
    *len = 0;
    for (size_t i = 0; i < n; i++)
        if (msgs[i].role == NULL || msgs[i].content == NULL)
            return areal_error_set(err, AREAL_EINVAL, (int)i,
                                   "chat message %zu needs a role and a content", i);
    if (n == 0 && t->kind != AREAL_CHAT_CHATML)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "the %s chat template needs at least one message", t->name);
    sbuf b = {0};
    putn(&b, "", 0);
    switch (t->kind) {
    case AREAL_CHAT_CHATML:
        chatml(&b, msgs, n, add_generation_prompt);
        break;
    case AREAL_CHAT_QWEN25:
        qwen25(&b, msgs, n, add_generation_prompt);
        break;
    case AREAL_CHAT_QWEN3:
        qwen3(&b, msgs, n, add_generation_prompt, enable_thinking);
        break;
    }
    if (b.oom) {
        free(b.p);
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory rendering the chat");
    }
    *out = b.p;
    *len = b.n;
    return AREAL_OK;
}
