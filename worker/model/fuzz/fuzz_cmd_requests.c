/*
 * fuzz_cmd_requests.c - libFuzzer target for the JSONL request reader of the
 * model commands (`areal-worker score|generate --input`) and their UTF-8
 * repair of decoded text.
 *
 * The input is read as a request file (no tokenizer, vocabulary 50): it must
 * either give requests each of which holds ids in 0..49 (at least one) or the
 * error of its line - one error line printed per such request, so a bad line
 * never costs the others - or be refused whole (no requests) with exactly one
 * error line naming the command. The same
 * bytes, as decoded text, must always become a JSON string (invalid UTF-8
 * replaced), which then serialises. ASan checks the line buffer handling.
 */
#include <stdlib.h>
#include <string.h>

#include "../src/cmd_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 1 << 16)
        return 0;
    FILE *f = fmemopen((void *)data, size, "r"), *err = NULL;
    char *msg = NULL;
    size_t msg_len = 0;
    if (size == 0 || f == NULL || (err = open_memstream(&msg, &msg_len)) == NULL) {
        if (f != NULL)
            fclose(f);
        return 0;
    }
    cmd_request *reqs = NULL;
    int n = 0;
    int rc = cmd_read_requests_f("score", f, "fuzz", NULL, 50, &reqs, &n, err);
    fclose(f);
    fclose(err);
    if (rc == 0) {
        size_t lines = 0, bad = 0;
        for (size_t i = 0; i < msg_len; i++)
            lines += msg[i] == '\n';
        if (n < 1)
            abort();
        for (int i = 0; i < n; i++) {
            if (reqs[i].error != NULL) {
                if (reqs[i].ids != NULL || strstr(reqs[i].error, "score") == NULL)
                    abort();
                bad++;
                continue;
            }
            if (reqs[i].n < 1)
                abort();
            for (int k = 0; k < reqs[i].n; k++)
                if (reqs[i].ids[k] < 0 || reqs[i].ids[k] >= 50)
                    abort();
        }
        if (lines != bad)
            abort();
    } else {
        if (n != 0 || reqs != NULL || msg_len == 0 || msg[msg_len - 1] != '\n' ||
            strchr(msg, '\n') != msg + msg_len - 1 || strstr(msg, "score") == NULL)
            abort();
    }
    free(msg);
    cmd_requests_free(reqs, n);
    json_t *s = cmd_text((const char *)data, size);
    char *dump = s != NULL ? json_dumps(s, JSON_ENCODE_ANY) : NULL;
    if (s == NULL || dump == NULL)
        abort();
    free(dump);
    json_decref(s);
    return 0;
}
