/*
 * yaml_json.c - YAML to jansson through libyaml's event parser.
 *
 * Events drive a small explicit stack of open containers (no recursion, so a
 * deeply nested hostile file cannot exhaust the C stack; depth is capped).
 * A mapping frame remembers the pending key until its value arrives.
 */
#include "areal/yaml_json.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#define YAML_MAX_DEPTH 64

typedef struct frame {
    json_t *value; /* the open object or array (borrowed from its parent, or the root) */
    char *key;     /* pending key of an object frame, or NULL */
} frame;

static json_t *plain_scalar(const char *s, size_t len) {
    if (len == 0 || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 || strcmp(s, "Null") == 0 ||
        strcmp(s, "NULL") == 0)
        return json_null();
    if (strcmp(s, "true") == 0 || strcmp(s, "True") == 0 || strcmp(s, "TRUE") == 0)
        return json_true();
    if (strcmp(s, "false") == 0 || strcmp(s, "False") == 0 || strcmp(s, "FALSE") == 0)
        return json_false();
    char *end = NULL;
    errno = 0;
    long long i = strtoll(s, &end, 10);
    if (end == s + len && errno == 0 && (s[0] != '0' || len == 1) && !(s[0] == '-' && s[1] == '0'))
        return json_integer(i);
    /* Reals only in plain decimal form: "1.5", "-2.0e3" (no hex, inf or nan). */
    bool real_chars = true;
    for (size_t k = 0; k < len && real_chars; k++)
        real_chars = strchr("0123456789.-+eE", s[k]) != NULL;
    if (real_chars && strchr(s, '.') != NULL) {
        errno = 0;
        double d = strtod(s, &end);
        if (end == s + len && errno == 0)
            return json_real(d);
    }
    return json_stringn(s, len);
}

/* Attaches `v` (a new reference, stolen) to the top frame. */
static int attach(frame *top, json_t *v, const char *source, const yaml_event_t *ev,
                  areal_error *err) {
    int line = (int)ev->start_mark.line + 1, col = (int)ev->start_mark.column + 1;
    int pos = (int)ev->start_mark.index;
    if (json_is_array(top->value)) {
        json_array_append_new(top->value, v);
        return AREAL_OK;
    }
    if (top->key == NULL) {
        if (!json_is_string(v)) {
            json_decref(v);
            return areal_error_set(err, AREAL_EINVAL, pos,
                                   "%s:%d:%d: a mapping key must be a plain string", source, line,
                                   col);
        }
        top->key = strdup(json_string_value(v));
        json_decref(v);
        return top->key ? AREAL_OK : areal_error_set(err, AREAL_ENOMEM, pos, "out of memory");
    }
    if (json_object_get(top->value, top->key) != NULL) {
        int rc = areal_error_set(err, AREAL_EINVAL, pos, "%s:%d:%d: duplicate key '%s'", source,
                                 line, col, top->key);
        json_decref(v);
        return rc;
    }
    json_object_set_new(top->value, top->key, v);
    free(top->key);
    top->key = NULL;
    return AREAL_OK;
}

json_t *areal_yaml_to_json(const char *text, size_t len, const char *source, areal_error *err) {
    yaml_parser_t parser;
    frame stack[YAML_MAX_DEPTH];
    int depth = 0;
    json_t *root = NULL;
    bool done = false, failed = false;

    if (!yaml_parser_initialize(&parser)) {
        areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
        return NULL;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    while (!done && !failed) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&parser, &ev)) {
            areal_error_set(err, AREAL_EINVAL, (int)parser.problem_mark.index,
                            "%s:%d:%d: YAML syntax error: %s%s%s", source,
                            (int)parser.problem_mark.line + 1, (int)parser.problem_mark.column + 1,
                            parser.problem ? parser.problem : "malformed",
                            parser.context ? " " : "", parser.context ? parser.context : "");
            failed = true;
            break;
        }
        json_t *v = NULL;
        bool opens = false;
        switch (ev.type) {
        case YAML_SCALAR_EVENT: {
            const char *s = (const char *)ev.data.scalar.value;
            size_t n = ev.data.scalar.length;
            bool is_key =
                depth > 0 && json_is_object(stack[depth - 1].value) && stack[depth - 1].key == NULL;
            v = (ev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE && !is_key) ? plain_scalar(s, n)
                                                                             : json_stringn(s, n);
            break;
        }
        case YAML_SEQUENCE_START_EVENT:
            v = json_array();
            opens = true;
            break;
        case YAML_MAPPING_START_EVENT:
            v = json_object();
            opens = true;
            break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT:
            depth--;
            free(stack[depth].key);
            if (depth == 0)
                done = true; /* the first document's root is complete */
            break;
        case YAML_ALIAS_EVENT:
            areal_error_set(err, AREAL_EINVAL, (int)ev.start_mark.index,
                            "%s:%d:%d: YAML aliases (*name) are not supported; write the value "
                            "out",
                            source, (int)ev.start_mark.line + 1, (int)ev.start_mark.column + 1);
            failed = true;
            break;
        case YAML_STREAM_END_EVENT:
            done = true;
            break;
        default:
            break;
        }
        if (v == NULL && (ev.type == YAML_SCALAR_EVENT || opens)) {
            areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
            failed = true;
        } else if (v != NULL) {
            if (opens && depth == YAML_MAX_DEPTH) {
                areal_error_set(err, AREAL_EINVAL, (int)ev.start_mark.index,
                                "%s:%d:%d: nesting deeper than %d levels", source,
                                (int)ev.start_mark.line + 1, (int)ev.start_mark.column + 1,
                                YAML_MAX_DEPTH);
                json_decref(v);
                failed = true;
            } else if (depth == 0) {
                root = v;
                if (!opens)
                    done = true; /* a document that is one scalar */
            } else {
                json_t *borrowed = v;
                if (attach(&stack[depth - 1], v, source, &ev, err) != AREAL_OK) {
                    failed = true;
                    opens = false;
                }
                v = borrowed;
            }
            if (opens && !failed) {
                stack[depth].value = v;
                stack[depth].key = NULL;
                depth++;
            }
        }
        yaml_event_delete(&ev);
    }
    while (depth > 0)
        free(stack[--depth].key);
    yaml_parser_delete(&parser);
    if (failed) {
        json_decref(root);
        return NULL;
    }
    if (root == NULL)
        areal_error_set(err, AREAL_EINVAL, 0, "%s: the file is empty", source);
    return root;
}
