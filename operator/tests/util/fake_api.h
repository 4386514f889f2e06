/*
 * fake_api.h - a small in-memory Kubernetes API server for the operator's
 * tests and benches, on the scripted loopback server's handler hook
 * (lib/kube/tests/util/kube_test_server.h). Test code only.
 *
 * What it serves: lists (paginated with limit/continue) and watches of pods,
 * nodes and arealjobs; creates (pods, services, configmaps, events), pod
 * bindings, merge patches of arealjobs and their status, deletes. Every write
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
 * "event", "get", and "bind-missing" (a bind of a pod that does not exist). */
long fake_api_count(fake_api *f, const char *what);

/* Objects stored in `resource`. */
int fake_api_len(fake_api *f, const char *resource);

#endif
