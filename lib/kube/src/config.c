/*
 * config.c - kube_config defaults and the small readers the loaders share
 * (whole files with a bound, base64). The loaders themselves are in
 * kubeconfig.c and incluster.c.
 */
#include "areal/kube/config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void kube_config_init(kube_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->qps = 5.0;
    cfg->burst = 10;
    cfg->timeout_ms = 30000;
    cfg->connect_timeout_ms = 10000;
    cfg->max_body = (size_t)64 << 20;
    cfg->max_line = (size_t)16 << 20;
    cfg->max_retries = 5;
    cfg->backoff_base_ms = 200;
    cfg->backoff_max_ms = 10000;
    cfg->retry_after_max_ms = 60000;
}

void kube_config_free(kube_config *cfg) {
    if (cfg == NULL)
        return;
    char **strs[] = {&cfg->server,     &cfg->ca_pem,  &cfg->ca_file,  &cfg->cert_pem,
                     &cfg->cert_file,  &cfg->key_pem, &cfg->key_file, &cfg->token,
                     &cfg->token_file, &cfg->ns};
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) {
        free(*strs[i]);
        *strs[i] = NULL;
    }
    cfg->ca_len = cfg->cert_len = cfg->key_len = 0;
}

static int b64val(unsigned char c) {
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

int kube_base64_decode(const char *in, const char *field, char **out, size_t *out_len,
                       kube_error *err) {
    size_t n = strlen(in);
    char *buf = malloc(n / 4 * 3 + 4);
    if (buf == NULL)
        return kube_error_set(err, KUBE_ENOMEM, "out of memory decoding %s", field);
    size_t o = 0;
    unsigned acc = 0;
    int bits = 0, pad = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)in[i];
        if (c == ' ' || c == '\n' || c == '\r' || c == '\t')
            continue;
        if (c == '=') {
            pad++;
            continue;
        }
        int v = b64val(c);
        if (v < 0 || pad > 0) {
            free(buf);
            return kube_error_set(err, KUBE_EINVAL,
                                  "%s is not base64: unexpected character at offset %zu; "
                                  "encode the PEM with `base64 -w0`",
                                  field, i);
        }
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            buf[o++] = (char)((acc >> bits) & 0xff);
        }
    }
    if (bits >= 6 || pad > 2) {
        free(buf);
        return kube_error_set(err, KUBE_EINVAL, "%s is not base64: truncated input", field);
    }
    buf[o] = '\0';
    *out = buf;
    *out_len = o;
    return KUBE_OK;
}

int kube_read_file(const char *path, size_t max, char **out, size_t *out_len, kube_error *err) {
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return kube_error_set(err, KUBE_EIO, "cannot open %s: %s", path, strerror(errno));
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    int rc = KUBE_OK;
    while (buf != NULL) {
        if (len + 1 >= cap) {
            if (cap > max + 1) {
                rc = kube_error_set(err, KUBE_ETOOBIG, "%s is larger than %zu bytes", path, max);
                break;
            }
            char *p = realloc(buf, cap * 2);
            if (p == NULL) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = p;
            cap *= 2;
        }
        size_t got = fread(buf + len, 1, cap - 1 - len, f);
        len += got;
        if (got == 0) {
            if (ferror(f))
                rc = kube_error_set(err, KUBE_EIO, "cannot read %s: %s", path, strerror(errno));
            break;
        }
    }
    fclose(f);
    if (buf == NULL)
        return kube_error_set(err, KUBE_ENOMEM, "out of memory reading %s", path);
    if (rc == KUBE_OK && len > max)
        rc = kube_error_set(err, KUBE_ETOOBIG, "%s is larger than %zu bytes", path, max);
    if (rc != KUBE_OK) {
        free(buf);
        return rc;
    }
    buf[len] = '\0';
    *out = buf;
    if (out_len)
        *out_len = len;
    return KUBE_OK;
}
