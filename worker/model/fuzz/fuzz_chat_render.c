/*
 * fuzz_chat_render.c - libFuzzer target for the native chat templates: the
 * input is split at NUL bytes into (role, content) pairs, rendered by every
 * template kind with every flag; each rendering must succeed, be NUL
 * terminated at its length and contain every content's bytes that survive
 * the Qwen3 think-stripping (checked for ChatML, which copies them verbatim).
 * ASan checks the string scanning (split / strip at the edges of contents).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "areal/model/chat.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 1 << 14)
        return 0;
    char *buf = malloc(size + 1);
    if (buf == NULL)
        return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    areal_chat_msg m[16];
    size_t n = 0;
    const char *roles[] = {"system", "user", "assistant", "tool", "other"};
    for (char *p = buf; p <= buf + size && n < 16; p += strlen(p) + 1) {
        m[n].role = roles[(uint8_t)p[0] % 5];
        m[n].content = p[0] != '\0' ? p + 1 : p;
        m[n].reasoning_content = (p[0] & 0x40) ? m[n].content : NULL;
        n++;
    }
    static const areal_chat_kind kinds[] = {AREAL_CHAT_CHATML, AREAL_CHAT_QWEN25, AREAL_CHAT_QWEN3};
    for (int k = 0; k < 3; k++)
        for (int flags = 0; flags < 4; flags++) {
            areal_chat_template t = {kinds[k], "fuzz"};
            char *out;
            size_t len;
            areal_error err;
            if (areal_chat_render(&t, m, n, flags & 1, flags & 2, &out, &len, &err) != AREAL_OK)
                abort();
            if (out[len] != '\0')
                abort();
            if (kinds[k] == AREAL_CHAT_CHATML)
                for (size_t i = 0; i < n; i++)
                    if (strstr(out, m[i].content) == NULL)
                        abort();
            free(out);
        }
    free(buf);
    return 0;
}
