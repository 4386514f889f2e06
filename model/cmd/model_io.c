/*
 * model_io.c - the JSONL request reader of `areal-model`.
 *
 * A request is one JSON object per line, {"input_ids": [...]} or {"text":
 * "..."}; text is encoded with the model directory's tokenizer.json. Errors
 * name the line and the field, and the run stops at the first bad line rather
 * than skipping it (a missing result would shift every later line).
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "model_cmd.h"

void mc_requests_free(mc_request *reqs, int n) {
    for (int i = 0; i < n && reqs != NULL; i++)
        free(reqs[i].ids);
    free(reqs);
}

static int parse_line(json_t *d, const areal_tokenizer *tok, int lineno, mc_request *r) {
    json_t *ids = json_object_get(d, "input_ids");
    const char *text = json_string_value(json_object_get(d, "text"));
    if (json_is_array(ids)) {
        size_t n = json_array_size(ids);
        r->ids = malloc(sizeof(int32_t) * (n ? n : 1));
        if (r->ids == NULL)
            return fprintf(stderr, "areal-model: line %d: out of memory\n", lineno), 1;
        for (size_t i = 0; i < n; i++) {
            json_t *v = json_array_get(ids, i);
            if (!json_is_integer(v) || json_integer_value(v) < 0 ||
                json_integer_value(v) > INT32_MAX) {
                fprintf(stderr, "areal-model: line %d: input_ids[%zu] is not a token id\n", lineno,
                        i);
                return 1;
            }
            r->ids[i] = (int32_t)json_integer_value(v);
        }
        r->n = (int)n;
        return 0;
    }
    if (text != NULL) {
        if (tok == NULL) {
            fprintf(stderr,
                    "areal-model: line %d: \"text\" needs tokenizer.json in the model "
                    "directory; give \"input_ids\" instead\n",
                    lineno);
            return 1;
        }
        size_t n = 0;
        areal_error err;
        if (areal_tokenizer_encode(tok, text, strlen(text), &r->ids, &n, &err) != AREAL_OK) {
            fprintf(stderr, "areal-model: line %d: %s\n", lineno, err.msg);
            return 1;
        }
        r->n = (int)n;
        return 0;
    }
    fprintf(stderr, "areal-model: line %d: needs \"input_ids\" (array) or \"text\" (string)\n",
            lineno);
    return 1;
}

int mc_read_requests(const char *path, const areal_tokenizer *tok, mc_request **reqs, int *n) {
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    *reqs = NULL;
    *n = 0;
    if (f == NULL) {
        fprintf(stderr, "areal-model: cannot read --input %s\n", path);
        return 1;
    }
    char *line = NULL;
    size_t cap = 0;
    int lineno = 0, rc = 0, have = 0;
    while (rc == 0 && getline(&line, &cap, f) > 0) {
        lineno++;
        if (strspn(line, " \t\r\n") == strlen(line))
            continue;
        json_error_t je;
        json_t *d = json_loads(line, 0, &je);
        if (!json_is_object(d)) {
            fprintf(stderr, "areal-model: %s line %d: not a JSON object (%s)\n", path, lineno,
                    d == NULL ? je.text : "wrong type");
            rc = 1;
        } else {
            if (*n == have) {
                have = have ? 2 * have : 8;
                mc_request *p = realloc(*reqs, sizeof **reqs * (size_t)have);
                if (p == NULL) {
                    json_decref(d);
                    rc = 1;
                    break;
                }
                *reqs = p;
            }
            memset(&(*reqs)[*n], 0, sizeof **reqs);
            rc = parse_line(d, tok, lineno, &(*reqs)[*n]);
            (*n)++;
        }
        json_decref(d);
    }
    free(line);
    if (f != stdin)
        fclose(f);
    if (rc == 0 && *n == 0) {
        fprintf(stderr, "areal-model: %s holds no requests\n", path);
        rc = 1;
    }
    if (rc != 0) {
        mc_requests_free(*reqs, *n);
        *reqs = NULL;
        *n = 0;
    }
    return rc;
}
