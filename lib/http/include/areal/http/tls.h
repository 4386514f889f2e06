/*
 * tls.h - serving certificates for the HTTP server's TLS (areal/http/server.h,
 * areal_http_config.tls_cert_pem / tls_key_pem), on OpenSSL: a self-signed
 * certificate made at start when none is mounted, and a check of a mounted
 * pair that names what is wrong before the server listens.
 *
 * TLS itself is OpenSSL under libwebsockets (Debian's libwebsockets is built
 * on it); this header only deals in PEM text, so callers need no OpenSSL
 * header.
 */
#ifndef AREAL_HTTP_TLS_H
#define AREAL_HTTP_TLS_H

#include "areal/error.h"

/*
 * A self-signed serving certificate and its key, as PEM text (malloc'd; the
 * caller frees both): an ECDSA P-256 key, SHA-256, valid from one hour ago
 * (clock skew) for `days` days, subject CN = names[0], and every name as a
 * subjectAltName (an IPv4/IPv6 literal as an IP entry, anything else as DNS).
 * n_names >= 1, days >= 1. AREAL_EINVAL for bad arguments, AREAL_ENOMEM or
 * AREAL_EIO (OpenSSL failed; its reason in the message).
 */
int areal_http_tls_self_signed(const char *const *names, int n_names, int days, char **cert_pem,
                               char **key_pem, areal_error *err);

/*
 * Checks that cert_pem holds a certificate (the first of a chain), key_pem a
 * private key, and that they belong together; `what` names the source in
 * the message (e.g. the files). AREAL_EINVAL naming the problem and the fix.
 */
int areal_http_tls_check(const char *cert_pem, const char *key_pem, const char *what,
                         areal_error *err);

#endif
