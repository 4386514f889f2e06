/*
 * cmd_tokenize.c - `areal-worker tokenize`: text to ids (one JSON array
 * line) under a model directory's tokenizer.json, the Qwen chat wrapper, and
 * --decode (ids back to text). See areal/model/cmd.h for the options.
 *
 * The text comes from --text or --file ("-": stdin, read whole, so a
 * trailing newline is part of the text as the file holds it).
 */
#include <stdlib.h>
#include <string.h>

#include "areal/model/cmd.h"
#include "cmd_internal.h"

/* One line: what is wrong, then the usage. Returns 2. */
static int usage(FILE *err, const char *why, const char *arg) {
    fprintf(err,
            "%s tokenize: %s%s; usage: tokenize --model DIR (--text TEXT | --file PATH) "
            "[--chat ROLE [--chat-template FILE]] [--decode]\n",
            CMD_PROG, why, arg);
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
            if (p == NULL)
                free(buf);
            buf = p;
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

static int decode(const areal_tokenizer *tok, const char *text, FILE *out, FILE *err) {
    json_error_t je;
    json_t *arr = json_loads(text, 0, &je);
    size_t n = json_array_size(arr);
    int32_t *ids = calloc(n + 1, sizeof *ids);
    int rc = 2;
    if (!json_is_array(arr)) {
        fprintf(err, "%s tokenize: --decode needs --text to be a JSON array of ids (%s)\n",
                CMD_PROG, arr == NULL ? je.text : "not an array");
        goto done;
    }
    if (ids == NULL) {
        fprintf(err, "%s tokenize: out of memory for %zu ids\n", CMD_PROG, n);
        rc = 1;
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(arr, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX) {
            fprintf(err, "%s tokenize: --decode: element %zu is not a token id\n", CMD_PROG, i);
            goto done;
        }
        ids[i] = (int32_t)json_integer_value(v);
    }
    areal_error e;
    char *s;
    size_t len;
    int r = areal_tokenizer_decode(tok, ids, n, false, &s, &len, &e);
    if (r != AREAL_OK) {
        fprintf(err, "%s tokenize: %s\n", CMD_PROG, e.msg);
        rc = cmd_code(r);
        goto done;
    }
    size_t cl;
    char *clean = areal_utf8_replace(s, len, &cl); /* as HF's decode returns it */
    free(s);
    if (clean == NULL) {
        rc = 1;
        goto done;
    }
    fwrite(clean, 1, cl, out);
    fputc('\n', out);
    free(clean);
    rc = 0;
done:
    json_decref(arr);
    free(ids);
    return rc;
}

static int encode(const areal_tokenizer *tok, const char *text, size_t len, const char *chat,
                  const areal_chat_template *tmpl, FILE *out, FILE *err) {
    areal_error e;
    char *rendered = NULL;
    int r;
    if (chat != NULL) {
        areal_chat_msg msg = {chat, text, NULL};
        r = areal_chat_render(tmpl, &msg, 1, true, true, &rendered, &len, &e);
        if (r != AREAL_OK) {
            fprintf(err, "%s tokenize: --chat: %s\n", CMD_PROG, e.msg);
            return cmd_code(r);
        }
        text = rendered;
    }
    int32_t *ids;
    size_t n;
    r = areal_tokenizer_encode(tok, text, len, &ids, &n, &e);
    free(rendered);
    if (r != AREAL_OK) {
        fprintf(err, "%s tokenize: %s\n", CMD_PROG, e.msg);
        return cmd_code(r);
    }
    fputc('[', out);
    for (size_t i = 0; i < n; i++)
        fprintf(out, i ? ", %d" : "%d", (int)ids[i]);
    fputs("]\n", out);
    free(ids);
    return 0;
}

int areal_cmd_tokenize(int argc, char **argv, FILE *out, FILE *err) {
    const char *model = NULL, *text = NULL, *file = NULL, *chat = NULL, *tmpl_file = NULL;
    bool dec = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has = i + 1 < argc;
        if (strcmp(a, "--decode") == 0) {
            dec = true;
            continue;
        }
        if (strcmp(a, "--chat-template") == 0 && has) {
            tmpl_file = argv[++i];
            continue;
        }
        if (strcmp(a, "--model") != 0 && strcmp(a, "--text") != 0 && strcmp(a, "--file") != 0 &&
            strcmp(a, "--chat") != 0 && strcmp(a, "--chat-template") != 0) {
            return usage(err, "unknown option ", a);
        }
        if (!has) {
            return usage(err, "a value is missing after ", a);
        }
        const char **dst = a[2] == 'm' ? &model : a[2] == 't' ? &text : a[2] == 'f' ? &file : &chat;
        *dst = argv[++i];
    }
    if (model == NULL)
        return usage(err, "--model is required", "");
    if ((text == NULL) == (file == NULL))
        return usage(err, "give exactly one of --text and --file", "");
    areal_chat_template tmpl = areal_chat_chatml;
    int rc = chat != NULL ? cmd_chat_template("tokenize", model, tmpl_file, &tmpl, err) : 0;
    if (rc != 0)
        return rc;
    areal_tokenizer *tok;
    rc = cmd_tokenizer("tokenize", model, 1, &tok, err);
    if (rc != 0)
        return rc;
    size_t len = 0;
    char *owned = NULL;
    if (file != NULL) {
        owned = read_all(file, &len);
        if (owned == NULL) {
            fprintf(err, "%s tokenize: cannot read --file %s\n", CMD_PROG, file);
            areal_tokenizer_free(tok);
            return 2;
        }
        text = owned;
    } else {
        len = strlen(text);
    }
    rc = dec ? decode(tok, text, out, err) : encode(tok, text, len, chat, &tmpl, out, err);
    free(owned);
    areal_tokenizer_free(tok);
    return rc;
}
