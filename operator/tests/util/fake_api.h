/*
 * fake_api.h - a small in-memory Kubernetes API server for the operator's
 * tests and benches, on the scripted loopback server's handler hook
 * (lib/kube/tests/util/kube_test_server.h). Test code only.
 *
 * What it serves: lists (paginated with limit/continue) and watches of pods,
 * nodes and arealjobs; creates (pods, services, configmaps, events), pod
 * bindings, merge patches of arealjobs and their status (409 when the patch
 * names a metadata.resourceVersion that is not the current one), deletes. A bind
 * stamps the pod with the annotation fake.areal.io/bound-rv (the resourceVersion
 * of the bind) so a test can tell when each pod was bound. Every write
 * bumps one resourceVersion counter and is appended to the resource's event
 * log, which watches read from, as the real server does. A watch with nothing
 * new waits up to 100 ms, then sends a BOOKMARK and ends (the client rewatches
 * at once); fake_api_expire makes the next watch of a resource answer with a
 * 410 ERROR event, so the informer lists again. "Generated" pods and nodes
 * (fake_api_generate) are served by lists only, built per page, so a large
 * cluster costs the server no memory. Deleting an arealjob that still has
 * finalizers sets its deletionTimestamp; it goes when a patch empties them.
 * How: one mutex; objects are jansson values keyed by namespace/name.
 * Rejected: a separate process with its own protocol for scripting - the
 * tests drive the fake through these calls; a bench that must not count the
 * server's memory runs it in a forked child (fake_api_fork).
 */
#ifndef AREAL_FAKE_API_H
#define AREAL_FAKE_API_H

#include <stdbool.h>
#include <sys/types.h>

#include <jansson.h>

typedef struct fake_api fake_api;

/* Starts the server on 127.0.0.1 (an ephemeral port). NULL on failure. */
fake_api *fake_api_start(void);
void fake_api_stop(fake_api *f);
const char *fake_api_url(fake_api *f); /* "http://127.0.0.1:PORT" */

/*
 * Starts the server in a forked child process serving `n_pods` generated pods
 * and `n_nodes` generated nodes (see fake_api_generate). Writes the URL into
 * `url` (cap bytes) and the child's pid into *pid; the child serves until it
 * is killed (SIGTERM). Call before starting threads. 0 or -1.
 */
int fake_api_fork(int n_pods, int n_nodes, char *url, size_t cap, pid_t *pid);

/* Serves `n_pods` pods (job-J-trainer-I, 8 GPUs, Running, bound round robin)
 * and `n_nodes` nodes (node-NNNN, 8 GPUs, leaf labels) from every list. */
void fake_api_generate(fake_api *f, int n_pods, int n_nodes);

/* Stores `obj` (borrowed; copied) in "pods", "nodes" or "arealjobs" as the
 * API would on a create, with the next resourceVersion and an ADDED event (or
 * MODIFIED when it exists). Returns the resourceVersion. */
long fake_api_put(fake_api *f, const char *resource, const json_t *obj);

/* Deletes ns/name ("name" for nodes) of `resource` with a DELETED event (a
 * job with finalizers gets a deletionTimestamp instead). */
void fake_api_delete(fake_api *f, const char *resource, const char *key);

/* A copy of the stored object (caller decrefs) or NULL. */
json_t *fake_api_get(fake_api *f, const char *resource, const char *key);

/* The next watch of `resource` is answered with a 410 ERROR event. */
void fake_api_expire(fake_api *f, const char *resource);

/* Requests seen, by kind: "list", "watch", "create", "bind", "patch", "delete", "gone",
 * "event", "get", "bind-missing" (a bind of a pod that does not exist),
 * "bind-conflict" (a bind of a pod already bound: 409, as the real server),
 * "failed" (answered by an injected failure, see fake_api_fail),
 * "force-delete" (a delete with gracePeriodSeconds 0) and "invalid" (a create
 * refused with 422 by fake_api_validate's rules). */
long fake_api_count(fake_api *f, const char *what);

/* Every object of `resource`, as an object keyed by ns/name (a copy; caller decrefs). */
json_t *fake_api_list(fake_api *f, const char *resource);

/*
 * The next `times` requests (-1: every one, 0: none, which clears it) of
 * `what` ("list", "create", "bind", "patch", "delete") on `resource` ("pods",
 * "nodes", "services", "configmaps", "arealjobs") are answered with a Status of HTTP
 * `code`, `reason` and `msg` instead of being served. One failure per
 * (what, resource); a new call replaces it.
 */
void fake_api_fail(fake_api *f, const char *what, const char *resource, int code,
                   const char *reason, const char *msg, int times);

/* On: a bound pod deleted through the API without gracePeriodSeconds 0 only
 * gets a deletionTimestamp (it is Terminating until its kubelet confirms: the
 * test calls fake_api_delete); a delete with grace 0 removes it at once, as
 * the real server does. Off (the default): every delete removes the pod. */
void fake_api_graceful_pods(fake_api *f, bool on);

/* The next watch of `resource` sends what it has and then breaks the
 * connection (no chunked end), as a proxy or an API server dying mid-stream. */
void fake_api_drop_watch(fake_api *f, const char *resource);

/*
 * On: pod and Service creates are checked as the real API server checks them
 * (a few rules: the Service name a DNS-1035 label; a pod's hostname - its name
 * when it has a subdomain - a DNS label of at most 63; volume names DNS
 * labels; env names printable ASCII without '=', as 1.36 checks them; every volumeMount names a
 * volume) and refused with 422 Invalid and a message naming the field, in the real server's words.
 * Off (the default): every create is stored.
 */
void fake_api_validate(fake_api *f, bool on);

/*
 * Edits the stored object ns/name of `resource` atomically: `fn` gets a copy
 * and returns 0 (store it, a MODIFIED event), 1 (delete the object, a DELETED
 * event, finalizers notwithstanding) or -1 (leave it). Returns fn's answer, or
 * -1 when there is no such object. For kubelet-like edits that must not race
 * with the operator's binds (a get-then-put would undo a bind in between).
 */
int fake_api_modify(fake_api *f, const char *resource, const char *key,
                    int (*fn)(json_t *obj, void *ud), void *ud);

/* The last writes (up to 128) with their answers, one a line, those containing
 * `grep` (NULL: all); malloc'd, the caller frees it. */
char *fake_api_trace(fake_api *f, const char *grep);

/* Connections accepted so far. */
int fake_api_connections(fake_api *f);

/* The current resourceVersion counter (every write moves it). */
long fake_api_rv(fake_api *f);

/* Objects stored in `resource`. */
int fake_api_len(fake_api *f, const char *resource);

#endif
