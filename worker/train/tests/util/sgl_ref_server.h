/*
 * sgl_ref_server.h - a reference rollout server for the trainer's tests
 * (test code only): SGLang's /generate, /pause_generation,
 * /continue_generation, /update_weights_from_disk and /health over the
 * model core's areal_generate, one request at a time, on the kube tests'
 * scripted HTTP server (kube_test_server.h with a handler).
 *
 * Why a stand-in: the trainer's tests must not depend on the rollout
 * component's server (areal-worker serve) being built, and the trainer
 * talks to either only over HTTP, so the same code paths run. It does what
 * the trainer relies on: seeded sampling (sampling_seed; a 1-sample request
 * equals areal_generate with that seed), logprobs of each token, stop
 * tokens, "abort" while paused, and weight loading from a HF directory.
 * It can also be told to fail (503) to exercise the retry path.
 */
#ifndef SGL_REF_SERVER_H
#define SGL_REF_SERVER_H

typedef struct sgl_ref sgl_ref;

/* Serves the HF model at dir on 127.0.0.1 (ephemeral port); NULL on failure. */
sgl_ref *sgl_ref_start(const char *dir);
void sgl_ref_stop(sgl_ref *s);

/* "127.0.0.1:PORT" */
const char *sgl_ref_addr(sgl_ref *s);

/* Requests of each kind answered so far. */
int sgl_ref_generates(sgl_ref *s);
int sgl_ref_weight_loads(sgl_ref *s);

/* 1: answer every /generate with 503 from now on. */
void sgl_ref_set_failing(sgl_ref *s, int failing);

#endif
