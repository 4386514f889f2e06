/*
 * registry.h - the rollout-server registry in a job's rendezvous store
 * (store.h): rollout servers announce themselves, the trainer lists them.
 *
 * Keys (worker/rollout/README.md, "Registration"):
 *   "rollout/servers/<name>"  the server's value (JSON {"addr", "version"};
 *                             opaque here), deleted when it deregisters;
 *   "rollout/index"           a counter (store add), one per announcement;
 *   "rollout/index/<n>"       <name> of announcement n (1..counter).
 * The store has no key listing, so the index makes the set of names
 * enumerable with add/check/get alone; a reader remembers how far it read.
 * A name announced twice (a server reconnecting to a restarted store, a
 * replacement pod of the same name) has two slots and is listed once.
 * Rejected: a listing operation in the store (a protocol change every client
 * would have to follow, for one user); names derived from the pod naming
 * scheme (the trainer would have to know the operator's scheme and bound).
 */
#ifndef AREAL_COMM_REGISTRY_H
#define AREAL_COMM_REGISTRY_H

#include <stdbool.h>

#include "areal/comm/store.h"
#include "areal/error.h"

#define AREAL_REGISTRY_PREFIX   "rollout/servers/"
#define AREAL_REGISTRY_INDEX    "rollout/index"
#define AREAL_REGISTRY_NAME_MAX 256

/*
 * Sets rollout/servers/<name> = value, then takes an index slot naming it.
 * Call on every new connection (a store that restarted lost everything).
 * name: 1..255 bytes. Returns 0, AREAL_EINVAL (the name) or the store's error.
 */
int areal_registry_announce(areal_store *st, const char *name, const char *value, areal_error *err);

/* Rewrites the value of an announced name (a weight update). */
int areal_registry_update(areal_store *st, const char *name, const char *value, areal_error *err);

/* Whether rollout/servers/<name> exists (false after a store restart: announce again). */
int areal_registry_present(areal_store *st, const char *name, bool *present, areal_error *err);

/* Deletes rollout/servers/<name> (deregistration; the index slot stays). */
int areal_registry_remove(areal_store *st, const char *name, areal_error *err);

/* A reader: the names seen so far and how many index slots were read. */
typedef struct areal_registry_reader {
    long read; /* index slots consumed */
    char (*names)[AREAL_REGISTRY_NAME_MAX];
    int n, cap;
} areal_registry_reader;

/*
 * Reads the slots announced since the last call, then calls cb(name, value)
 * for every known name whose key exists now (the current registrations), in
 * order of first announcement. A slot whose name is not written yet (its
 * announcer is between add and set) ends the read; the next call resumes
 * there. Returns 0, AREAL_ENOMEM, or the store's error (the reader keeps
 * what it had).
 */
int areal_registry_list(areal_store *st, areal_registry_reader *r,
                        void (*cb)(void *ctx, const char *name, const char *value), void *ctx,
                        areal_error *err);

void areal_registry_reader_free(areal_registry_reader *r);

#endif
