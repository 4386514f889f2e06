/*
 * tls.c - the OpenSSL side of the HTTP server's TLS (see areal/http/tls.h):
 * self-signed serving certificates, the check of a mounted pair, and putting
 * a pair into the SSL_CTX libwebsockets made for a TLS server
 * (http_tls_install, from server.c's
 * LWS_CALLBACK_OPENSSL_LOAD_EXTRA_SERVER_VERIFY_CERTS).
 *
 * Why the SSL_CTX directly and not lws's own loading (ssl_cert_filepath or
 * server_ssl_cert_mem): lws 4.1 reads an in-memory key as RSA only and logs
 * its failures instead of returning them; OpenSSL's PEM readers take any key
 * type and give a reason we can put in the caller's error. The key is ECDSA
 * P-256: quick to make at start (an RSA-2048 key takes ~0.1 s) and what
 * every TLS 1.2+ client accepts.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "areal/http/tls.h"
#include "http_internal.h"

/* OpenSSL's last reason, for a message ("" when none). */
static const char *ossl_reason(char buf[256]) {
    unsigned long e = ERR_get_error();
    buf[0] = '\0';
    if (e != 0)
        ERR_error_string_n(e, buf, 256);
    ERR_clear_error();
    return buf;
}

/* The PEM text of a memory BIO (malloc'd, NUL-terminated) or NULL. */
static char *bio_text(BIO *b) {
    char *data = NULL;
    long n = BIO_get_mem_data(b, &data);
    char *out = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (out != NULL) {
        memcpy(out, data, (size_t)n);
        out[n] = '\0';
    }
    return out;
}

static bool is_ip(const char *s) {
    unsigned char buf[16];
    return inet_pton(AF_INET, s, buf) == 1 || inet_pton(AF_INET6, s, buf) == 1;
}

/* subjectAltName "DNS:a,IP:b,..." (malloc'd) or NULL. */
static char *san_list(const char *const *names, int n) {
    size_t cap = 1;
    for (int i = 0; i < n; i++)
        cap += strlen(names[i]) + 5;
    char *s = malloc(cap);
    if (s == NULL)
        return NULL;
    size_t len = 0;
    s[0] = '\0';
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(s + len, cap - len, "%s%s:%s", i ? "," : "",
                                is_ip(names[i]) ? "IP" : "DNS", names[i]);
    return s;
}

static bool add_ext(X509 *x, int nid, const char *value) {
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, x, x, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    bool ok = ext != NULL && X509_add_ext(x, ext, -1) == 1;
    X509_EXTENSION_free(ext);
    return ok;
}

int areal_http_tls_self_signed(const char *const *names, int n_names, int days, char **cert_pem,
                               char **key_pem, areal_error *err) {
    *cert_pem = *key_pem = NULL;
    if (names == NULL || n_names < 1 || days < 1)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "a self-signed certificate needs at least one name and 1+ days");
    for (int i = 0; i < n_names; i++) /* ',' would split the SAN list; ':' only in IPv6 */
        if (names[i] == NULL || names[i][0] == '\0' || strlen(names[i]) > 253 ||
            strchr(names[i], ',') != NULL || (strchr(names[i], ':') != NULL && !is_ip(names[i])))
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "certificate name %d ('%s') is not a DNS name or IP address", i,
                                   names[i] ? names[i] : "(null)");
    int rc = AREAL_EIO;
    char why[256];
    EVP_PKEY *key = EVP_EC_gen("P-256");
    X509 *x = X509_new();
    char *san = san_list(names, n_names);
    BIO *cb = BIO_new(BIO_s_mem()), *kb = BIO_new(BIO_s_mem());
    unsigned char serial[16];
    BIGNUM *bn = NULL;
    if (x == NULL || san == NULL || cb == NULL || kb == NULL) {
        rc = areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
        goto out;
    }
    if (key == NULL || RAND_bytes(serial, sizeof serial) != 1) {
        rc = areal_error_set(err, AREAL_EIO, -1, "cannot make a key: %s", ossl_reason(why));
        goto out;
    }
    serial[0] &= 0x7f; /* a positive serial */
    bn = BN_bin2bn(serial, sizeof serial, NULL);
    X509_NAME *subj = X509_get_subject_name(x);
    if (bn == NULL || X509_set_version(x, 2) != 1 ||
        BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) == NULL ||
        X509_gmtime_adj(X509_getm_notBefore(x), -3600) == NULL ||
        X509_gmtime_adj(X509_getm_notAfter(x), (long)days * 86400) == NULL ||
        X509_set_pubkey(x, key) != 1 ||
        X509_NAME_add_entry_by_txt(subj, "CN", MBSTRING_ASC, (const unsigned char *)names[0], -1,
                                   -1, 0) != 1 ||
        X509_set_issuer_name(x, subj) != 1 || !add_ext(x, NID_subject_alt_name, san) ||
        !add_ext(x, NID_basic_constraints, "critical,CA:FALSE") ||
        !add_ext(x, NID_key_usage, "critical,digitalSignature,keyEncipherment") ||
        !add_ext(x, NID_ext_key_usage, "serverAuth") || X509_sign(x, key, EVP_sha256()) == 0 ||
        PEM_write_bio_X509(cb, x) != 1 ||
        PEM_write_bio_PrivateKey(kb, key, NULL, NULL, 0, NULL, NULL) != 1) {
        rc = areal_error_set(err, AREAL_EIO, -1, "cannot make a self-signed certificate: %s",
                             ossl_reason(why));
        goto out;
    }
    *cert_pem = bio_text(cb);
    *key_pem = bio_text(kb);
    if (*cert_pem == NULL || *key_pem == NULL) {
        free(*cert_pem);
        free(*key_pem);
        *cert_pem = *key_pem = NULL;
        rc = areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
        goto out;
    }
    rc = AREAL_OK;
out:
    BN_free(bn);
    BIO_free(cb);
    BIO_free(kb);
    free(san);
    X509_free(x);
    EVP_PKEY_free(key);
    return rc;
}

/* The certificate and key of PEM text (new references; NULL when absent or bad). */
static X509 *read_cert(const char *pem) {
    BIO *b = BIO_new_mem_buf(pem, -1);
    X509 *x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
    BIO_free(b);
    return x;
}

static EVP_PKEY *read_key(const char *pem) {
    BIO *b = BIO_new_mem_buf(pem, -1);
    EVP_PKEY *k = b ? PEM_read_bio_PrivateKey(b, NULL, NULL, NULL) : NULL;
    BIO_free(b);
    return k;
}

int areal_http_tls_check(const char *cert_pem, const char *key_pem, const char *what,
                         areal_error *err) {
    char why[256];
    if (what == NULL)
        what = "the TLS pair";
    X509 *x = cert_pem ? read_cert(cert_pem) : NULL;
    if (x == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "%s: no PEM certificate (-----BEGIN CERTIFICATE-----) in the "
                               "certificate: %s",
                               what, ossl_reason(why));
    EVP_PKEY *k = key_pem ? read_key(key_pem) : NULL;
    if (k == NULL) {
        X509_free(x);
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "%s: no unencrypted PEM private key in the key: %s", what,
                               ossl_reason(why));
    }
    int match = X509_check_private_key(x, k);
    X509_free(x);
    EVP_PKEY_free(k);
    ERR_clear_error();
    if (match != 1)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "%s: the private key does not belong to the certificate; mount "
                               "the key the certificate was issued for",
                               what);
    return AREAL_OK;
}

int http_tls_install(void *ssl_ctx, const char *cert_pem, const char *key_pem) {
    SSL_CTX *ctx = ssl_ctx;
    X509 *x = read_cert(cert_pem);
    EVP_PKEY *k = read_key(key_pem);
    int ok = x != NULL && k != NULL && SSL_CTX_use_certificate(ctx, x) == 1 &&
             SSL_CTX_use_PrivateKey(ctx, k) == 1 && SSL_CTX_check_private_key(ctx) == 1 &&
             SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) == 1;
    /* the rest of a chain (intermediates) after the leaf */
    BIO *b = ok ? BIO_new_mem_buf(cert_pem, -1) : NULL;
    X509 *leaf = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
    X509 *extra;
    while (ok && leaf != NULL && (extra = PEM_read_bio_X509(b, NULL, NULL, NULL)) != NULL)
        if (SSL_CTX_add_extra_chain_cert(ctx, extra) != 1) { /* takes extra on success */
            X509_free(extra);
            ok = 0;
        }
    X509_free(leaf);
    BIO_free(b);
    X509_free(x);
    EVP_PKEY_free(k);
    ERR_clear_error();
    return ok ? 0 : -1;
}
