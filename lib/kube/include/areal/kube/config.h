/*
 * config.h - where the API server is, how to trust it, who we are, and the
 * client's limits.
 *
 * What: a kube_config is a plain struct of owned strings and numbers, filled
 * from a kubeconfig file (kube_config_load_kubeconfig), from the in-cluster
 * service account (kube_config_in_cluster), or by hand. kube_client_new copies
 * it, so the caller frees its own with kube_config_free at any time.
 * How: kubeconfig is YAML; it is read with the project's YAML-to-JSON reader
 * and walked as JSON (current-context or a named one -> cluster + user).
 * Inline `*-data` fields are base64-decoded into memory and handed to libcurl
 * as blobs - never written to temporary files. A token file (kubeconfig
 * `tokenFile` or the service account's) is kept as a path: the client re-reads
 * it whenever the file changes, because projected service-account tokens
 * rotate (the official C client reads it once into 4 KiB and never again).
 * TLS is always verified: `insecure-skip-tls-verify: true` and plain http://
 * servers are refused unless `allow_insecure` is set, which only the tests do.
 * Rejected: exec credential plugins and auth-provider entries - they run
 * arbitrary programs; a kubeconfig that needs them is refused with a message
 * that says so rather than silently connecting unauthenticated.
 */
#ifndef AREAL_KUBE_CONFIG_H
#define AREAL_KUBE_CONFIG_H

#include <stddef.h>

#include "areal/kube/error.h"

typedef struct kube_config {
    /* where and who; every string is owned (malloc) or NULL */
    char *server;             /* "https://host:port", no trailing slash */
    char *ca_pem;             /* CA bundle (PEM) from certificate-authority-data */
    size_t ca_len;            /* bytes in ca_pem */
    char *ca_file;            /* or a CA bundle file */
    char *cert_pem;           /* client certificate (PEM) */
    size_t cert_len;          /* bytes in cert_pem */
    char *cert_file;          /* or a client certificate file */
    char *key_pem;            /* client key (PEM) */
    size_t key_len;           /* bytes in key_pem */
    char *key_file;           /* or a client key file */
    char *token;              /* a bearer token */
    char *token_file;         /* or a file holding it, re-read when it changes */
    char *ns;                 /* the context's (or service account's) namespace, or NULL */
    int insecure_skip_verify; /* kubeconfig asked to skip TLS verification */
    int allow_insecure;       /* tests only: permit http:// and insecure_skip_verify */

    /* limits; kube_config_init sets the defaults given here */
    double qps;              /* sustained requests per second (5); <= 0: no limit */
    int burst;               /* requests allowed at once above qps (10) */
    long timeout_ms;         /* whole-request limit for non-watch requests (30000) */
    long connect_timeout_ms; /* connection and TLS handshake limit (10000) */
    size_t max_body;         /* largest response body accepted (64 MiB) */
    size_t max_line;         /* largest single watch event (16 MiB) */
    int max_retries;         /* retries of 429/5xx/transport failures (5) */
    long backoff_base_ms;    /* first retry delay, doubled each time (200) */
    long backoff_max_ms;     /* largest delay between retries (10000) */
    long retry_after_max_ms; /* the most a Retry-After header may make us wait (60000) */
} kube_config;

/* Sets every field to its default (strings NULL). Never fails. */
void kube_config_init(kube_config *cfg);

/* Frees the strings and re-initialises the struct. NULL is allowed. */
void kube_config_free(kube_config *cfg);

/*
 * Fills `cfg` (which must have been kube_config_init'ed; its strings are
 * replaced) from the kubeconfig file at `path`, using `context` or, when NULL,
 * the file's current-context. Relative file names in the kubeconfig are taken
 * relative to the kubeconfig's directory, as kubectl does. Returns KUBE_OK,
 * KUBE_EIO (file unreadable), KUBE_EINVAL (malformed, missing context/cluster/
 * user, unsupported auth, insecure-skip-tls-verify without allow_insecure) with
 * the field named in `err`. On failure the strings of `cfg` are freed.
 */
int kube_config_load_kubeconfig(kube_config *cfg, const char *path, const char *context,
                                kube_error *err);

/*
 * Fills `cfg` for a pod: server from KUBERNETES_SERVICE_HOST and
 * KUBERNETES_SERVICE_PORT, token file `<sa_dir>/token`, CA `<sa_dir>/ca.crt`,
 * namespace from `<sa_dir>/namespace` (optional). `sa_dir` NULL means
 * /var/run/secrets/kubernetes.io/serviceaccount. Returns KUBE_OK or
 * KUBE_EINVAL (not in a cluster: the variables are unset) / KUBE_EIO (token or
 * CA unreadable), naming what is missing. On failure the strings are freed.
 */
int kube_config_in_cluster(kube_config *cfg, const char *sa_dir, kube_error *err);

/*
 * Decodes standard base64 (whitespace ignored, padding optional) into a new
 * buffer (caller frees; NUL-terminated for convenience, *out_len excludes it).
 * Returns KUBE_OK, KUBE_EINVAL naming `field` on bad input, or KUBE_ENOMEM.
 */
int kube_base64_decode(const char *in, const char *field, char **out, size_t *out_len,
                       kube_error *err);

/* Reads a whole file (at most `max` bytes) into a new NUL-terminated buffer.
 * Returns KUBE_OK, KUBE_EIO (naming `path` and errno) or KUBE_ETOOBIG. */
int kube_read_file(const char *path, size_t max, char **out, size_t *out_len, kube_error *err);

#endif
