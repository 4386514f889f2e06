/*
 * fuzz_answer.c - libFuzzer target for the math answer extractor and
 * comparer (areal/rl/reward.h): any bytes must extract without reading or
 * writing out of bounds, the answer must be NUL-terminated within its
 * buffer, a number must equal itself, and the reward must be 0 or 1. The
 * input is split at its first NUL into completion and gold answer.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "areal/rl/dataset.h"
#include "areal/rl/reward.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *text = (const char *)data;
    const uint8_t *nul = memchr(data, 0, size);
    size_t tlen = nul ? (size_t)(nul - data) : size;
    const char *gold = nul ? (const char *)nul + 1 : "";
    size_t glen = nul ? size - tlen - 1 : 0;

    /* a heap copy of exactly the input, so ASan sees any overread */
    char *t = malloc(tlen ? tlen : 1);
    if (t == NULL)
        return 0;
    memcpy(t, text, tlen);

    char small[8], big[512];
    areal_answer_source s1 = areal_math_extract(t, tlen, small, sizeof small);
    areal_answer_source s2 = areal_math_extract(t, tlen, big, sizeof big);
    if (s1 != s2 || strlen(small) >= sizeof small || strlen(big) >= sizeof big)
        abort();
    if (strncmp(small, big, strlen(small)) != 0)
        abort();
    areal_math_number n;
    if (areal_math_parse_number(big, strlen(big), &n)) {
        if (!areal_math_equal(big, strlen(big), big, strlen(big)))
            abort();
        if (n.exact && n.den <= 0)
            abort();
    }
    double r = areal_math_reward(t, tlen, gold, glen);
    if (r != 0.0 && r != 1.0)
        abort();
    char g[64];
    (void)areal_rl_gsm8k_gold(t, tlen, g, sizeof g);
    free(t);
    return 0;
}
