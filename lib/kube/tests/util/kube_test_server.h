/*
 * kube_test_server.h - a scripted HTTP/1.1 server on 127.0.0.1 for the kube
 * client tests (test code, linked into test binaries only).
 *
 * What: the test queues answers in order (kts_push*); each request the server
 * reads takes the next one, whatever its path, and is recorded (method,
 * target, Authorization, Content-Type, body, connection number) for the test
 * to check. Answers are plain (Content-Length), streamed (chunked, cut into
 * pieces of a given size with a delay, then ended cleanly, dropped
 * mid-stream, or held open until the client goes), or a dropped connection
 * without any answer. Connections are keep-alive, so the number of accepted
 * TCP connections (kts_accepts) shows whether the client reuses them.
 * How: one accept thread, one thread per connection; a mutex guards the
 * script and the records; every blocking wait is a poll with a short timeout
 * that checks the stop flag, so kts_stop always returns.
 * A handler (kts_set_handler) may answer requests itself, computed from
 * their path and body, before the script is consulted.
 * Rejected: a Python or shell server (a second runtime in CI, and slower to
 * start than the tests themselves).
 */
#ifndef KUBE_TEST_SERVER_H
#define KUBE_TEST_SERVER_H

#include <stddef.h>

typedef struct kts kts;

enum { KTS_END_CLEAN, KTS_END_DROP, KTS_END_HOLD };

typedef struct kts_request {
    char method[16];
    char target[4096];
    char auth[1024];        /* Authorization value or "" */
    char content_type[128]; /* Content-Type value or "" */
    char *body;             /* NUL-terminated, owned by the server */
    size_t body_len;
    int conn; /* 1-based number of the connection it came on */
} kts_request;

/*
 * A dynamic answer, for tests that need a server which routes by path (an
 * informer per resource, reconciles writing objects): the handler runs on the
 * connection's thread, possibly on several at once, for every request before
 * the script is consulted. It returns 1 with `ans` filled (body malloc'd, the
 * server frees it) or 0 to let the script answer.
 */
typedef struct kts_answer {
    int status;   /* plain answers; a stream is always 200 */
    char *body;   /* owned by the server once returned; NULL: empty */
    size_t len;   /* bytes of body */
    int stream;   /* 1: chunked, sent in one piece, then ended as `end` */
    int end;      /* KTS_END_* for streams */
    int delay_ms; /* before a stream's body */
} kts_answer;

typedef int (*kts_handler)(void *ud, const kts_request *rq, kts_answer *ans);

/* Installs (or with NULL removes) the handler; set it before requests arrive. */
void kts_set_handler(kts *s, kts_handler fn, void *ud);

/* Starts a server on 127.0.0.1 with an ephemeral port; NULL on failure. */
kts *kts_start(void);

/* Stops the threads, closes every socket and frees everything. */
void kts_stop(kts *s);

/* "http://127.0.0.1:PORT" (owned by the server). */
const char *kts_url(kts *s);

/* Queues a plain answer. `headers` are extra header lines, each ending in
 * "\r\n", or NULL. `body` may be NULL (empty). */
void kts_push(kts *s, int status, const char *headers, const char *body);

/* Queues a 200 chunked stream of `body`, sent in pieces of `piece` bytes
 * (0: one piece) with `delay_ms` before each, ended as `end` (KTS_END_*). */
void kts_push_stream(kts *s, const char *body, size_t piece, int delay_ms, int end);

/* Queues "close the connection without answering". */
void kts_push_drop(kts *s);

/* Requests served so far. */
int kts_count(kts *s);

/* A copy of request `i` (0-based); 0 on success, -1 when there is none. The
 * body pointer stays owned by the server. */
int kts_get(kts *s, int i, kts_request *out);

/* TCP connections accepted so far. */
int kts_accepts(kts *s);

/* Answers still queued. */
int kts_pending(kts *s);

#endif
