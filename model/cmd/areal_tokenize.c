/*
 * areal_tokenize.c - `areal-tokenize --model DIR --text TEXT`: prints the ids
 * of TEXT under DIR/tokenizer.json as one JSON array line.
 *
 * Options: --model DIR (a HuggingFace model directory, or a tokenizer.json
 * file), --text TEXT, or --file PATH to read the text from a file ("-" for
 * stdin), --chat ROLE (wrap TEXT as one message of ROLE in the Qwen chat
 * format, with the assistant generation prompt), --decode (TEXT is a JSON
 * array of ids; prints the decoded text). Exit 0, 1 on a bad file or input,
 * 2 on bad usage. This is meant to become `areal-worker tokenize`.
 */
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "areal/model/tokenizer.h"

static int usage(void) {
    fprintf(stderr, "usage: areal-tokenize --model DIR (--text TEXT | --file PATH) [--chat ROLE]\n"
                    "       areal-tokenize --model DIR --decode --text '[ids...]'\n");
    return 2;
}

static char *read_all(const char *path, size_t *len) {
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (f == NULL)
        return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf != NULL) {
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0)
            break;
        if (n + 1 == cap) {
            char *p = realloc(buf, cap *= 2);
            if (p == NULL) {
                free(buf);
                buf = NULL;
            } else {
                buf = p;
            }
        }
    }
    if (f != stdin)
        fclose(f);
    if (buf != NULL) {
        buf[n] = '\0';
        *len = n;
    }
    return buf;
}

static int decode(const areal_tokenizer *tok, const char *text) {
    json_error_t je;
    json_t *arr = json_loads(text, 0, &je);
    size_t n = json_array_size(arr);
    int32_t *ids = calloc(n + 1, sizeof *ids);
    if (!json_is_array(arr) || ids == NULL) {
        fprintf(stderr, "areal-tokenize: --decode needs a JSON array of ids: %s\n", je.text);
        json_decref(arr);
        free(ids);
        return 1;
    }
    for (size_t i = 0; i < n; i++)
        ids[i] = (int32_t)json_integer_value(json_array_get(arr, i));
    json_decref(arr);
    areal_error err;
    char *out;
    size_t len;
    int rc = areal_tokenizer_decode(tok, ids, n, false, &out, &len, &err);
    free(ids);
    if (rc != 0) {
        fprintf(stderr, "areal-tokenize: %s\n", err.msg);
        return 1;
    }
    fwrite(out, 1, len, stdout);
    putchar('\n');
    free(out);
    return 0;
}

int main(int argc, char **argv) {
    const char *model = NULL, *text = NULL, *file = NULL, *chat = NULL;
    bool dec = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has = i + 1 < argc;
        if (strcmp(a, "--model") == 0 && has)
            model = argv[++i];
        else if (strcmp(a, "--text") == 0 && has)
            text = argv[++i];
        else if (strcmp(a, "--file") == 0 && has)
            file = argv[++i];
        else if (strcmp(a, "--chat") == 0 && has)
            chat = argv[++i];
        else if (strcmp(a, "--decode") == 0)
            dec = true;
        else
            return usage();
    }
    if (model == NULL || (text == NULL) == (file == NULL))
        return usage();
    struct stat st;
    char *path = malloc(strlen(model) + 16);
    if (path == NULL)
        return 1;
    strcpy(path, model);
    if (stat(model, &st) == 0 && S_ISDIR(st.st_mode))
        strcat(path, "/tokenizer.json");
    areal_error err;
    areal_tokenizer *tok;
    int rc = areal_tokenizer_load(path, &tok, &err);
    free(path);
    if (rc != 0) {
        fprintf(stderr, "areal-tokenize: %s\n", err.msg);
        return 1;
    }
    size_t len = 0;
    char *owned = NULL;
    if (file != NULL) {
        owned = read_all(file, &len);
        if (owned == NULL) {
            fprintf(stderr, "areal-tokenize: cannot read %s\n", file);
            areal_tokenizer_free(tok);
            return 1;
        }
        text = owned;
    } else {
        len = strlen(text);
    }
    if (dec) {
        rc = decode(tok, text);
        free(owned);
        areal_tokenizer_free(tok);
        return rc;
    }
    char *rendered = NULL;
    if (chat != NULL) {
        areal_chat_msg m = {chat, text};
        if (areal_chat_render(&m, 1, true, &rendered, &len, &err) != 0) {
            fprintf(stderr, "areal-tokenize: %s\n", err.msg);
            free(owned);
            areal_tokenizer_free(tok);
            return 1;
        }
        text = rendered;
    }
    int32_t *ids;
    size_t n;
    rc = areal_tokenizer_encode(tok, text, len, &ids, &n, &err);
    if (rc == 0) {
        putchar('[');
        for (size_t i = 0; i < n; i++)
            printf(i ? ", %d" : "%d", (int)ids[i]);
        puts("]");
        free(ids);
    } else {
        fprintf(stderr, "areal-tokenize: %s\n", err.msg);
    }
    free(rendered);
    free(owned);
    areal_tokenizer_free(tok);
    return rc == 0 ? 0 : 1;
}
