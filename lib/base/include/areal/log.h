/*
 * log.h - structured logs: one record is one line, JSON for machines (the
 * default when stderr is not a terminal) or text for people, with a level, a
 * component tag, a message and key/value fields.
 *
 *   areal_log(AREAL_LOG_WARN, "controller", AREAL_FIELDS({"job", key}),
 *             "%s %s failed: %s", verb, what, msg);
 * JSON:  {"ts":"2026-12-01T10:40:00.123Z","level":"warn","component":"controller",
 *         "msg":"create pod failed: pods \"x\" already exists","job":"ns/x"}
 * text:  2026-12-01T10:40:00.123Z WARN  controller: create pod failed: ... job=ns/x
 *
 * Every string (message, keys, values) is escaped for JSON: quotes,
 * backslashes, every control byte, and bytes that are not valid UTF-8 become
 * \ufffd, so a Kubernetes message such as `pods "x" already exists` or a
 * peer's garbage can never break a line (the operator's hand-written lines
 * once could). The text form escapes control bytes (areal/escape.h). A record
 * is bounded (AREAL_LOG_LINE_MAX bytes): a longer one is cut inside its
 * strings and marked "truncated":true, still one valid JSON line. A record is
 * written with one fwrite, so lines of concurrent threads never interleave.
 *
 * Configuration is process-wide (the one piece of global state the project
 * keeps: a program has one stderr): areal_log_setup reads AREAL_LOG_FORMAT
 * (json|text) and AREAL_LOG_LEVEL (debug|info|warn|error); a record below the
 * level is dropped before it is formatted (Redis serverLog). Rejected: a
 * logger handle passed through every call (every library signature would
 * grow one, for a sink that is stderr in every program); syslog (containers
 * log to stderr).
 */
#ifndef AREAL_LOG_H
#define AREAL_LOG_H

#include <stdbool.h>
#include <stdio.h>

typedef enum areal_log_level {
    AREAL_LOG_DEBUG = 0,
    AREAL_LOG_INFO = 1,
    AREAL_LOG_WARN = 2,
    AREAL_LOG_ERROR = 3,
} areal_log_level;

typedef enum areal_log_format {
    AREAL_LOG_JSON = 0,
    AREAL_LOG_TEXT = 1,
} areal_log_format;

#define AREAL_LOG_LINE_MAX 8192

/* One key/value field; value NULL prints as JSON null (text: key=-). */
typedef struct areal_log_field {
    const char *key;
    const char *value;
} areal_log_field;

/* A NULL-terminated field list in place: AREAL_FIELDS({"job", key}, {"pod", name}). */
#define AREAL_FIELDS(...) ((const areal_log_field[]){__VA_ARGS__, {NULL, NULL}})

/*
 * Configures the process's log from the environment: AREAL_LOG_FORMAT json or
 * text (default: text when stderr is a terminal, else json), AREAL_LOG_LEVEL
 * (default info). Unknown values fall back to the defaults. Call once at the
 * start of main, before threads; without it records go to stderr as JSON at
 * info.
 */
void areal_log_setup(void);

/*
 * Sets the sink (NULL: stderr), format and minimum level explicitly (tests;
 * a program's flags). Not thread-safe against concurrent areal_log calls.
 */
void areal_log_configure(FILE *sink, areal_log_format format, areal_log_level min);

/* True when a record of `level` would be written. */
bool areal_log_enabled(areal_log_level level);

/*
 * Writes one record: `component` (a short tag: "controller", "kube",
 * "worker"; NULL for none), `fields` (NULL or a list ending with a NULL key),
 * and the message formatted from `fmt`. Never fails visibly: a record that
 * cannot be written is lost.
 */
void areal_log(areal_log_level level, const char *component, const areal_log_field *fields,
               const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/*
 * Formats one record into out[0..cap) (cap >= 512) exactly as areal_log
 * writes it, newline included, and returns its length. For tests and for
 * programs that log to somewhere other than the sink.
 */
size_t areal_log_format_record(char *out, size_t cap, areal_log_format format,
                               areal_log_level level, const char *component,
                               const areal_log_field *fields, const char *msg);

/* "debug", "info", "warn", "error". */
const char *areal_log_level_name(areal_log_level level);

#endif
