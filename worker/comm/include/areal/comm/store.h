/*
 * store.h - the rendezvous store: a TCP key-value service (like torch's
 * TCPStore) hosted by global rank 0 of the trainer, and its client.
 *
 * Ranks publish their listen addresses and NCCL unique ids in it; rollout
 * servers register their host:port. Operations: set, get (waits for the key),
 * wait, add (atomic 64-bit counter), compare-and-set, delete, check. Every
 * client call has a deadline; a wrong address, an unreachable store or a port
 * in use is an AREAL_EIO error naming host:port, never a hang.
 *
 * The server is one thread with a poll(2) loop; blocked gets and waits are
 * parked requests answered when their key appears or their timeout passes, so
 * no client can stall another. Bounds: AREAL_STORE_MAX_CLIENTS connections,
 * AREAL_STORE_MAX_KEYS keys, AREAL_STORE_MAX_BYTES of keys and values.
 */
#ifndef AREAL_COMM_STORE_H
#define AREAL_COMM_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "areal/comm/net.h"
#include "areal/error.h"

#define AREAL_STORE_MAX_CLIENTS 16384
#define AREAL_STORE_MAX_KEYS    65536
#define AREAL_STORE_MAX_BYTES   (256u << 20)

typedef struct areal_store_server areal_store_server;
typedef struct areal_store areal_store;

/*
 * Starts a server listening on host:port (host NULL = all addresses, port 0 =
 * any; the bound port goes to *port_out when not NULL). The caller owns *out
 * and frees it with areal_store_server_stop(). AREAL_EIO naming host:port when
 * the port is taken; AREAL_ENOMEM.
 */
int areal_store_server_start(const char *host, int port, areal_store_server **out, int *port_out,
                             areal_error *err);

/* Stops the thread, closes every connection and frees the server; NULL is a no-op. */
void areal_store_server_stop(areal_store_server *s);

/*
 * Connects to the store at host:port, retrying refused connections until
 * `connect_timeout_ms` has passed (the host may start later). `timeout_ms`
 * is the default deadline of every later call. The caller owns *out (free
 * with areal_store_close). A client is safe to share between threads (calls
 * are serialised). After any I/O failure the client is broken and every
 * later call fails with the same message.
 */
int areal_store_connect(const char *host, int port, int connect_timeout_ms, int timeout_ms,
                        areal_store **out, areal_error *err);
void areal_store_close(areal_store *s);

/* Stores val[0..n) under key (NUL-terminated, 1..AREAL_STORE_KEY_MAX bytes). */
int areal_store_set(areal_store *s, const char *key, const void *val, size_t n, areal_error *err);

/*
 * Waits up to timeout_ms for key, then copies its value into buf[0..cap) and
 * its length into *n. AREAL_EIO naming the key on timeout; AREAL_ERANGE when
 * the value is longer than cap (nothing copied, *n set to its length).
 */
int areal_store_get(areal_store *s, const char *key, int timeout_ms, void *buf, size_t cap,
                    size_t *n, areal_error *err);

/* Waits up to timeout_ms for key to exist; AREAL_EIO naming the key on timeout. */
int areal_store_wait(areal_store *s, const char *key, int timeout_ms, areal_error *err);

/* Adds delta to the counter at key (absent = 0); the new value goes to *out (may be NULL). */
int areal_store_add(areal_store *s, const char *key, int64_t delta, int64_t *out, areal_error *err);

/*
 * Compare-and-set: when the value at key equals expected[0..en) (an absent key
 * matches only en == 0), sets it to desired[0..dn). The value after the
 * operation (the old one when it did not match, empty when absent) goes to
 * buf[0..cap) and *n as in areal_store_get.
 */
int areal_store_cas(areal_store *s, const char *key, const void *expected, size_t en,
                    const void *desired, size_t dn, void *buf, size_t cap, size_t *n,
                    areal_error *err);

/* Deletes key; *existed (may be NULL) says whether it was there. */
int areal_store_delete(areal_store *s, const char *key, int *existed, areal_error *err);

/* Whether key exists now (*exists 0 or 1); never waits for it. */
int areal_store_check(areal_store *s, const char *key, int *exists, areal_error *err);

#endif
