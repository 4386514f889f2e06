/*
 * log.c - see areal/log.h.
 *
 * A record is assembled in a stack buffer of AREAL_LOG_LINE_MAX bytes and
 * written with one fwrite: no allocation (logging an out-of-memory error must
 * not need memory) and no interleaving between threads. Each string is
 * escaped into its own bounded piece first (message up to 4 KiB, a field
 * value up to 1 KiB, escaped), cut only at a whole escape; a field that no
 * longer fits is dropped with those after it, and the record says
 * "truncated":true. So the line is valid JSON whatever the input. The line
 * holds no control byte (0x7f included); well-formed UTF-8 passes as it is,
 * any other byte >= 0x80 becomes \ufffd, since a JSON parser rejects a line
 * that is not UTF-8 (rejected: \u-escaping all non-ASCII, unreadable for
 * people who grep the log).
 */
#include "areal/log.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "areal/escape.h"

#define MSG_MAX   4096 /* escaped bytes of the message */
#define VALUE_MAX 1024 /* escaped bytes of a field value */
#define KEY_MAX   128
#define RESERVE   32 /* room kept for ,"truncated":true}\n */

static struct {
    FILE *sink; /* NULL: stderr */
    areal_log_format format;
    areal_log_level min;
} cfg = {NULL, AREAL_LOG_JSON, AREAL_LOG_INFO};

const char *areal_log_level_name(areal_log_level level) {
    switch (level) {
    case AREAL_LOG_DEBUG:
        return "debug";
    case AREAL_LOG_INFO:
        return "info";
    case AREAL_LOG_WARN:
        return "warn";
    default:
        return "error";
    }
}

void areal_log_configure(FILE *sink, areal_log_format format, areal_log_level min) {
    cfg.sink = sink;
    cfg.format = format;
    cfg.min = min;
}

void areal_log_setup(void) {
    const char *f = getenv("AREAL_LOG_FORMAT"), *l = getenv("AREAL_LOG_LEVEL");
    areal_log_format format = isatty(STDERR_FILENO) ? AREAL_LOG_TEXT : AREAL_LOG_JSON;
    if (f != NULL && strcasecmp(f, "json") == 0)
        format = AREAL_LOG_JSON;
    else if (f != NULL && strcasecmp(f, "text") == 0)
        format = AREAL_LOG_TEXT;
    areal_log_level min = AREAL_LOG_INFO;
    for (int v = AREAL_LOG_DEBUG; l != NULL && v <= AREAL_LOG_ERROR; v++)
        if (strcasecmp(l, areal_log_level_name((areal_log_level)v)) == 0)
            min = (areal_log_level)v;
    areal_log_configure(NULL, format, min);
}

bool areal_log_enabled(areal_log_level level) {
    return level >= cfg.min;
}

/*
 * The JSON string content of s (no quotes) into dst, at most cap - 1 bytes,
 * cut at a whole escape or character (*cut set). Returns the length.
 */
static size_t json_escape(char *dst, size_t cap, const char *s, bool *cut) {
    static const char hex[] = "0123456789abcdef";
    size_t k = 0, n = strlen(s);
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        char e[8];
        size_t len = 0, used = 1;
        if (c == '"' || c == '\\') {
            e[0] = '\\', e[1] = (char)c, len = 2;
        } else if (c == '\n' || c == '\r' || c == '\t') {
            e[0] = '\\', e[1] = c == '\n' ? 'n' : c == '\r' ? 'r' : 't', len = 2;
        } else if (c < 0x20 || c == 0x7f) {
            memcpy(e, "\\u00", 4);
            e[4] = hex[c >> 4], e[5] = hex[c & 15], len = 6;
        } else if (c < 0x80) {
            e[0] = (char)c, len = 1;
        } else if ((used = areal_utf8_seq_len((const unsigned char *)s + i, n - i)) > 0) {
            memcpy(e, s + i, used);
            len = used;
        } else {
            memcpy(e, "\\ufffd", 6), len = 6, used = 1;
        }
        if (k + len + 1 > cap) {
            *cut = true;
            break;
        }
        memcpy(dst + k, e, len);
        k += len;
        i += used;
    }
    dst[k] = '\0';
    return k;
}

typedef struct line {
    char *b;
    size_t cap, n;
    bool full; /* a piece did not fit: nothing more is appended */
    bool cut;  /* something was cut or dropped: the record says so */
} line;

/* Appends the pieces (NULL-terminated) when all fit before the reserve; else marks the cut. */
static bool append(line *l, ...) {
    va_list ap;
    size_t total = 0;
    va_start(ap, l);
    for (const char *p; (p = va_arg(ap, const char *)) != NULL;)
        total += strlen(p);
    va_end(ap);
    if (l->full || l->n + total + RESERVE > l->cap) {
        l->full = l->cut = true;
        return false;
    }
    va_start(ap, l);
    for (const char *p; (p = va_arg(ap, const char *)) != NULL;) {
        size_t len = strlen(p);
        memcpy(l->b + l->n, p, len);
        l->n += len;
    }
    va_end(ap);
    return true;
}

static void timestamp(char *out, size_t cap) {
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(out, cap, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + n, cap - n, ".%03ldZ", ts.tv_nsec / 1000000);
}

static size_t format_json(line *l, const char *ts, areal_log_level level, const char *component,
                          const areal_log_field *fields, const char *msg) {
    char esc[MSG_MAX], key[KEY_MAX];
    bool cut = false;
    append(l, "{\"ts\":\"", ts, "\",\"level\":\"", areal_log_level_name(level), "\"", NULL);
    if (component != NULL) {
        json_escape(key, sizeof key, component, &cut);
        append(l, ",\"component\":\"", key, "\"", NULL);
    }
    size_t room = l->cap - l->n - RESERVE - 10;
    json_escape(esc, room < sizeof esc ? room : sizeof esc, msg, &cut);
    append(l, ",\"msg\":\"", esc, "\"", NULL);
    for (const areal_log_field *f = fields; f != NULL && f->key != NULL && !l->full; f++) {
        json_escape(key, sizeof key, f->key, &cut);
        if (f->value == NULL) {
            append(l, ",\"", key, "\":null", NULL);
            continue;
        }
        json_escape(esc, VALUE_MAX, f->value, &cut);
        if (!append(l, ",\"", key, "\":\"", esc, "\"", NULL))
            break;
    }
    l->cut |= cut;
    if (l->cut) {
        memcpy(l->b + l->n, ",\"truncated\":true", 17);
        l->n += 17;
    }
    memcpy(l->b + l->n, "}\n", 3);
    return l->n += 2;
}

/* A text value: as it is when plain, else in double quotes; control bytes escaped. */
static void text_value(char *out, size_t cap, const char *v) {
    char esc[VALUE_MAX];
    areal_escape(esc, sizeof esc, v, strlen(v));
    bool plain = esc[0] != '\0' && strpbrk(esc, " \"=") == NULL;
    snprintf(out, cap, plain ? "%s" : "\"%s\"", esc);
}

static size_t format_text(line *l, const char *ts, areal_log_level level, const char *component,
                          const areal_log_field *fields, const char *msg) {
    static const char *const names[] = {"DEBUG", "INFO ", "WARN ", "ERROR"};
    char esc[MSG_MAX], key[KEY_MAX], val[VALUE_MAX + 3];
    append(l, ts, " ", names[level <= AREAL_LOG_ERROR ? level : AREAL_LOG_ERROR], " ", NULL);
    if (component != NULL) {
        areal_escape(key, sizeof key, component, strlen(component));
        append(l, key, ": ", NULL);
    }
    size_t room = l->cap - l->n - RESERVE;
    areal_escape(esc, room < sizeof esc ? room : sizeof esc, msg, strlen(msg));
    append(l, esc, NULL);
    for (const areal_log_field *f = fields; f != NULL && f->key != NULL && !l->full; f++) {
        areal_escape(key, sizeof key, f->key, strlen(f->key));
        text_value(val, sizeof val, f->value != NULL ? f->value : "-");
        if (!append(l, " ", key, "=", val, NULL))
            break;
    }
    if (l->cut) {
        memcpy(l->b + l->n, " (truncated)", 12);
        l->n += 12;
    }
    memcpy(l->b + l->n, "\n", 2);
    return l->n += 1;
}

/* areal_log_format_record, with `cut` true when the message was already cut. */
static size_t format_record(char *out, size_t cap, areal_log_format format, areal_log_level level,
                            const char *component, const areal_log_field *fields, const char *msg,
                            bool cut) {
    char ts[40];
    timestamp(ts, sizeof ts);
    line l = {out, cap, 0, false, cut};
    return format == AREAL_LOG_TEXT ? format_text(&l, ts, level, component, fields, msg)
                                    : format_json(&l, ts, level, component, fields, msg);
}

size_t areal_log_format_record(char *out, size_t cap, areal_log_format format,
                               areal_log_level level, const char *component,
                               const areal_log_field *fields, const char *msg) {
    return format_record(out, cap, format, level, component, fields, msg, false);
}

void areal_log(areal_log_level level, const char *component, const areal_log_field *fields,
               const char *fmt, ...) {
    if (!areal_log_enabled(level))
        return; /* below the level: not even formatted */
    char msg[MSG_MAX], rec[AREAL_LOG_LINE_MAX];
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    size_t n = format_record(rec, sizeof rec, cfg.format, level, component, fields, msg,
                             len >= (int)sizeof msg);
    FILE *f = cfg.sink != NULL ? cfg.sink : stderr;
    fwrite(rec, 1, n, f);
    fflush(f);
}
