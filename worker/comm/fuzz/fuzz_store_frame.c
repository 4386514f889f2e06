/*
 * fuzz_store_frame.c - libFuzzer target for the store's frame decoders.
 *
 * Invariants: decoding never reads past the input; a decoded frame's length
 * is within the input and the bounds; re-encoding a decoded frame gives back
 * exactly the bytes consumed (one encoding per frame).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "areal/comm/store_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *copy = malloc(size ? size : 1); /* exact-size copy: ASan sees any overread */
    if (copy == NULL)
        return 0;
    if (size)
        memcpy(copy, data, size);
    size_t used = 0;
    areal_store_req req;
    int rc = areal_store_decode_req(copy, size, &req, &used, NULL);
    if (rc == 1) {
        if (used > size || used > AREAL_STORE_FRAME_MAX || req.key_len == 0)
            abort();
        uint8_t *re = malloc(used);
        if (re == NULL || areal_store_encode_req(&req, re, used) != used ||
            memcmp(re, copy, used) != 0)
            abort();
        free(re);
    } else if (rc != 0 && rc != AREAL_EINVAL) {
        abort();
    }
    areal_store_resp resp;
    rc = areal_store_decode_resp(copy, size, &resp, &used, NULL);
    if (rc == 1) {
        if (used > size)
            abort();
        uint8_t *re = malloc(used);
        if (re == NULL || areal_store_encode_resp(&resp, re, used) != used ||
            memcmp(re, copy, used) != 0)
            abort();
        free(re);
    } else if (rc != 0 && rc != AREAL_EINVAL) {
        abort();
    }
    free(copy);
    return 0;
}
