/*
 * discover.h - the trainer finds its rollout servers as they come and go.
 *
 * In a job the trainer's master pod hosts the job's rendezvous store
 * (MASTER_ADDR:MASTER_PORT, areal/comm/store.h) and every rollout server
 * registers there (areal/comm/registry.h; worker/rollout/README.md). A
 * thread lists the registrations twice a second and makes the rollout
 * controller's server list equal to them: a server added by scaling joins
 * without a trainer restart, one that drained and deregistered leaves, a
 * replacement pod (same name, new address) takes its predecessor's place.
 *
 * Weights before requests (issue 16: "Ready means serves the current policy
 * version"): a server whose registered weight version is not the policy's
 * is added marked as needing a sync (rollout_ctl.h: it gets no request until
 * a weight update reaches it) and the discovery raises `pending`; the
 * trainer's thread takes it between steps and sends that server the current
 * weights (disk: the latest published version; xccl: a catch-up group), so
 * the thread that changes the version is the one that catches servers up
 * and no update can slip between them. One with the policy's version is
 * added at once (its first request still checks its version, rollout_ctl.c).
 *
 * Until the first registration arrives the static --servers list (if any)
 * stays in force; from then on the registrations are the list.
 */
#ifndef AREAL_TRAIN_DISCOVER_H
#define AREAL_TRAIN_DISCOVER_H

#include <stdbool.h>

#include "areal/error.h"
#include "areal/train/rollout_ctl.h"

typedef struct areal_discover areal_discover;

/*
 * Hosts the store on host:port (host NULL: every address) and connects to
 * it. The list is applied to a controller only after areal_discover_attach.
 * log (nullable) gets one line per server that joins or leaves.
 */
int areal_discover_start(const char *host, int port, void (*log)(void *ctx, const char *line),
                         void *log_ctx, areal_discover **out, areal_error *err);

/* The port the store listens on. */
int areal_discover_port(const areal_discover *d);

/* Starts applying the registrations to ctl (borrowed until detach/stop). */
int areal_discover_attach(areal_discover *d, areal_rollout_ctl *ctl, areal_error *err);
/* Stops applying them (before the controller is stopped); the store stays up. */
void areal_discover_detach(areal_discover *d);

/* Runs one listing now (the thread does it every 0.5 s); for tests and the start. */
int areal_discover_poll(areal_discover *d, areal_error *err);

/* Whether servers that need the current weights joined since the last call (clears it). */
bool areal_discover_take_pending(areal_discover *d);

/* Registered servers now. */
int areal_discover_count(areal_discover *d);

void areal_discover_stop(areal_discover *d);

#endif
