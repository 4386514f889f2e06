/*
 * cmd_util.c - shared pieces of the model commands: numbers, the model
 * directory and its tokenizer, the JSONL request reader and JSON output.
 *
 * The request reader stops at the first bad line (naming its number and the
 * field) rather than skipping it, since a missing result would shift every
 * later output line against its input. Token ids are checked against the
 * model's vocabulary here, so the error names the line instead of a packed
 * batch position. Decoded text that is not valid UTF-8 (a token boundary
 * inside a character) is printed with U+FFFD exactly as HF's decode does
 * (areal_utf8_replace), because JSON strings must be UTF-8; rejected: dropping
 * such text silently.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cmd_internal.h"

int cmd_num(const char *s, double lo, double hi, double *v) {
    char *end;
    errno = 0;
    *v = strtod(s, &end);
    return errno == 0 && end != s && *end == '\0' && *v >= lo && *v <= hi ? 0 : -1;
}

int cmd_code(int rc) {
    return rc == AREAL_ENOMEM ? 1 : 2;
}

int cmd_tokenizer(const char *cmd, const char *dir, int required, areal_tokenizer **tok,
                  FILE *err) {
    char path[4096];
    struct stat st;
    *tok = NULL;
    if (stat(dir, &st) != 0) {
        fprintf(err, "%s %s: --model %s: no such directory; give a HuggingFace model directory\n",
                CMD_PROG, cmd, dir);
        return 2;
    }
    if (S_ISDIR(st.st_mode))
        snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    else
        snprintf(path, sizeof path, "%s", dir);
    if (stat(path, &st) != 0) {
        if (!required)
            return 0;
        fprintf(err, "%s %s: %s is missing; this needs the model's tokenizer.json\n", CMD_PROG, cmd,
                path);
        return 2;
    }
    areal_error e;
    int rc = areal_tokenizer_load(path, tok, &e);
    if (rc != AREAL_OK) {
        fprintf(err, "%s %s: %s\n", CMD_PROG, cmd, e.msg);
        return cmd_code(rc);
    }
    return 0;
}

int cmd_model(const char *cmd, const char *dir, int threads, areal_model *m, areal_pool **pool,
              FILE *err) {
    areal_error e;
    struct stat st;
    *pool = NULL;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(err, "%s %s: --model %s: no such directory; give a HuggingFace model directory\n",
                CMD_PROG, cmd, dir);
        return 2;
    }
    int rc = threads > 1 ? areal_pool_create(threads, pool, &e) : AREAL_OK;
    if (rc == AREAL_OK) {
        rc = areal_model_load(m, dir, *pool, &e);
        if (rc != AREAL_OK) {
            areal_pool_destroy(*pool);
            *pool = NULL;
        }
    }
    if (rc != AREAL_OK) {
        fprintf(err, "%s %s: %s\n", CMD_PROG, cmd, e.msg);
        return cmd_code(rc);
    }
    return 0;
}

int cmd_chat_template(const char *cmd, const char *dir, const char *file, areal_chat_template *t,
                      FILE *err) {
    areal_error e;
    struct stat st;
    bool found = false;
    int rc = AREAL_OK;
    *t = areal_chat_chatml;
    if (file != NULL)
        rc = areal_chat_template_file(file, t, &e);
    else if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode))
        rc = areal_chat_template_load(dir, t, &found, &e);
    if (rc == AREAL_OK && file == NULL && !found)
        *t = areal_chat_chatml;
    if (rc != AREAL_OK) {
        fprintf(err, "%s %s: %s\n", CMD_PROG, cmd, e.msg);
        return cmd_code(rc);
    }
    return 0;
}

void cmd_requests_free(cmd_request *reqs, int n) {
    for (int i = 0; i < n && reqs != NULL; i++) {
        free(reqs[i].ids);
        free(reqs[i].error);
    }
    free(reqs);
}

int cmd_print_error(FILE *out, const char *msg) {
    return cmd_print(out, json_pack("{s:s}", "error", msg));
}

/* Runs parse_line with its message captured into r->error (and echoed to err). */
static int parse_line(const char *cmd, json_t *d, const areal_tokenizer *tok, int vocab, int lineno,
                      cmd_request *r, FILE *err);

static int parse_line_kept(const char *cmd, json_t *d, const areal_tokenizer *tok, int vocab,
                           int lineno, cmd_request *r, FILE *err) {
    char *msg = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&msg, &len);
    if (m == NULL)
        return fprintf(err, "%s %s: out of memory\n", CMD_PROG, cmd), 1;
    int rc = d != NULL ? parse_line(cmd, d, tok, vocab, lineno, r, m) : 2;
    fclose(m);
    if (rc == 2) {
        free(r->ids);
        r->ids = NULL;
        r->n = 0;
        if (len > 0 && msg[len - 1] == '\n')
            msg[len - 1] = '\0';
        fprintf(err, "%s\n", msg);
        r->error = msg;
        return 0;
    }
    if (rc != 0)
        fputs(msg, err);
    free(msg);
    return rc;
}

static int parse_line(const char *cmd, json_t *d, const areal_tokenizer *tok, int vocab, int lineno,
                      cmd_request *r, FILE *err) {
    json_t *ids = json_object_get(d, "input_ids");
    const char *text = json_string_value(json_object_get(d, "text"));
    if (json_is_array(ids)) {
        size_t n = json_array_size(ids);
        if (n == 0 || n > INT32_MAX / 2) {
            fprintf(err, "%s %s: line %d: input_ids is empty; give at least one token\n", CMD_PROG,
                    cmd, lineno);
            return 2;
        }
        r->ids = malloc(sizeof(int32_t) * n);
        if (r->ids == NULL)
            return fprintf(err, "%s %s: line %d: out of memory\n", CMD_PROG, cmd, lineno), 1;
        for (size_t i = 0; i < n; i++) {
            json_t *v = json_array_get(ids, i);
            if (!json_is_integer(v) || json_integer_value(v) < 0 ||
                json_integer_value(v) >= vocab) {
                fprintf(err,
                        "%s %s: line %d: input_ids[%zu] is not a token id in 0..%d (the model's "
                        "vocabulary)\n",
                        CMD_PROG, cmd, lineno, i, vocab - 1);
                return 2;
            }
            r->ids[i] = (int32_t)json_integer_value(v);
        }
        r->n = (int)n;
        return 0;
    }
    if (text != NULL) {
        if (tok == NULL) {
            fprintf(err,
                    "%s %s: line %d: \"text\" needs tokenizer.json in the model directory; give "
                    "\"input_ids\" instead\n",
                    CMD_PROG, cmd, lineno);
            return 2;
        }
        size_t n = 0;
        areal_error e;
        int rc = areal_tokenizer_encode(tok, text, strlen(text), &r->ids, &n, &e);
        if (rc != AREAL_OK) {
            fprintf(err, "%s %s: line %d: %s\n", CMD_PROG, cmd, lineno, e.msg);
            return cmd_code(rc);
        }
        r->n = (int)n;
        for (size_t i = 0; i < n; i++)
            if (r->ids[i] >= vocab) {
                fprintf(err,
                        "%s %s: line %d: the text encodes to token %d, outside the model's "
                        "vocabulary of %d\n",
                        CMD_PROG, cmd, lineno, (int)r->ids[i], vocab);
                return 2;
            }
        if (n == 0) {
            fprintf(err, "%s %s: line %d: \"text\" encodes to no tokens\n", CMD_PROG, cmd, lineno);
            return 2;
        }
        return 0;
    }
    fprintf(err, "%s %s: line %d: needs \"input_ids\" (array) or \"text\" (string)\n", CMD_PROG,
            cmd, lineno);
    return 2;
}

int cmd_read_requests_f(const char *cmd, FILE *f, const char *name, const areal_tokenizer *tok,
                        int vocab, cmd_request **reqs, int *n, FILE *err) {
    *reqs = NULL;
    *n = 0;
    char *line = NULL;
    size_t cap = 0;
    int lineno = 0, rc = 0, have = 0;
    while (rc == 0 && getline(&line, &cap, f) > 0) {
        lineno++;
        if (strspn(line, " \t\r\n") == strlen(line))
            continue;
        json_error_t je;
        json_t *d = json_loads(line, 0, &je);
        if (*n == have) {
            have = have ? 2 * have : 8;
            cmd_request *p = realloc(*reqs, sizeof **reqs * (size_t)have);
            if (p == NULL) {
                fprintf(err, "%s %s: out of memory at line %d\n", CMD_PROG, cmd, lineno);
                json_decref(d);
                rc = 1;
                break;
            }
            *reqs = p;
        }
        cmd_request *r = &(*reqs)[*n];
        memset(r, 0, sizeof *r);
        (*n)++;
        if (!json_is_object(d)) {
            char msg[400];
            snprintf(msg, sizeof msg, "%s %s: %s line %d: not a JSON object (%s)", CMD_PROG, cmd,
                     name, lineno, d == NULL ? je.text : "wrong type");
            fprintf(err, "%s\n", msg);
            r->error = strdup(msg);
            rc = r->error == NULL ? 1 : 0;
        } else {
            rc = parse_line_kept(cmd, d, tok, vocab, lineno, r, err);
        }
        json_decref(d);
    }
    free(line);
    if (rc == 0 && *n == 0) {
        fprintf(err, "%s %s: %s holds no requests; give one JSON object per line\n", CMD_PROG, cmd,
                name);
        rc = 2;
    }
    if (rc != 0) {
        cmd_requests_free(*reqs, *n);
        *reqs = NULL;
        *n = 0;
    }
    return rc;
}

int cmd_read_requests(const char *cmd, const char *path, const areal_tokenizer *tok, int vocab,
                      cmd_request **reqs, int *n, FILE *err) {
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    *reqs = NULL;
    *n = 0;
    if (f == NULL) {
        fprintf(err, "%s %s: cannot read --input %s: %s\n", CMD_PROG, cmd, path, strerror(errno));
        return 2;
    }
    int rc = cmd_read_requests_f(cmd, f, path, tok, vocab, reqs, n, err);
    if (f != stdin)
        fclose(f);
    return rc;
}

json_t *cmd_floats(const float *v, int n) {
    json_t *a = json_array();
    for (int i = 0; i < n && a != NULL; i++)
        json_array_append_new(a, json_real(v[i]));
    return a;
}

json_t *cmd_ints(const int32_t *v, int n) {
    json_t *a = json_array();
    for (int i = 0; i < n && a != NULL; i++)
        json_array_append_new(a, json_integer(v[i]));
    return a;
}

json_t *cmd_text(const char *s, size_t n) {
    size_t k;
    char *buf = areal_utf8_replace(s, n, &k);
    if (buf == NULL)
        return NULL;
    json_t *j = json_stringn(buf, k);
    free(buf);
    return j;
}

int cmd_print(FILE *out, json_t *o) {
    char *s = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (s == NULL)
        return 1;
    fprintf(out, "%s\n", s);
    free(s);
    return 0;
}
