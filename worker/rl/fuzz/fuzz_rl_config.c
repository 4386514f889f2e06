/*
 * fuzz_rl_config.c - libFuzzer target for the RL job config reader
 * (areal/rl/config.h): any bytes, read as YAML, must either parse or fail
 * with a message, never crash or leak; a parsed config must write out as
 * JSON and read back.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "areal/rl/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    areal_rl_config c;
    areal_error err;
    int rc = areal_rl_config_parse((const char *)data, size, "fuzz", &c, &err);
    if (rc == AREAL_OK) {
        json_t *j = areal_rl_config_to_json(&c);
        if (j == NULL)
            abort();
        areal_rl_config d;
        if (areal_rl_config_from_json(j, "roundtrip", &d, &err) != AREAL_OK)
            abort();
        areal_rl_config_free(&d);
        json_decref(j);
    } else if (err.msg[0] == '\0') {
        abort();
    }
    areal_rl_config_free(&c);
    return 0;
}
