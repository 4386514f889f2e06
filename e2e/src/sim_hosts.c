/*
 * sim_hosts.c - a pod's hosts file (see areal/simpod.h).
 *
 * What: the kubelet writes "# Kubernetes-managed hosts file." with localhost
 * lines and the pod's own "<ip> <fqdn> <hostname>" and bind-mounts it over
 * /etc/hosts; peers come from cluster DNS. The simulator has no DNS server, so
 * it adds the records DNS would serve for headless Services (every pod with a
 * spec.subdomain and an IP) to the same file, including the short forms the
 * pod's search path would complete. The worker resolves MASTER_ADDR through
 * ordinary getaddrinfo (nsswitch "files"), so it needs no test-only path.
 * How: one pass into a caller's bounded buffer.
 * Rejected: a DNS server on port 53 of a loopback address (a daemon, a port,
 * and a resolv.conf to bind-mount anyway); ip-netns's /etc/netns files (one
 * network namespace per pod, far more set-up for the same names).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "areal/simpod.h"

typedef struct out {
    char *buf;
    size_t cap, len;
    bool full;
} out;

static void put(out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(out *o, const char *fmt, ...) {
    if (o->full)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(o->buf + o->len, o->cap - o->len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= o->cap - o->len) {
        o->full = true;
        return;
    }
    o->len += (size_t)n;
}

static bool has(const char *s) {
    return s != NULL && s[0] != '\0';
}

static int check(const sim_host_entry *e, areal_error *err) {
    if (!has(e->ip) || !has(e->hostname))
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "hosts entry for pod '%s' needs an IP and a host name",
                               has(e->hostname) ? e->hostname : "?");
    return AREAL_OK;
}

int sim_hosts_render(const sim_host_entry *self, const sim_host_entry *peers, size_t n_peers,
                     const char *domain, char *buf, size_t cap, size_t *len, areal_error *err) {
    if (buf == NULL || cap == 0)
        return areal_error_set(err, AREAL_ERANGE, -1, "no room for a hosts file");
    int rc = check(self, err);
    if (rc != AREAL_OK)
        return rc;
    const char *dom = has(domain) ? domain : "cluster.local";
    out o = {buf, cap, 0, false};
    buf[0] = '\0';
    put(&o, "# Kubernetes-managed hosts file (areal-e2e-kubelet).\n"
            "127.0.0.1\tlocalhost\n"
            "::1\tlocalhost ip6-localhost ip6-loopback\n"
            "fe00::0\tip6-localnet\n"
            "fe00::0\tip6-mcastprefix\n"
            "fe00::1\tip6-allnodes\n"
            "fe00::2\tip6-allrouters\n");
    if (has(self->subdomain))
        put(&o, "%s\t%s.%s.%s.svc.%s\t%s\n", self->ip, self->hostname, self->subdomain, self->ns,
            dom, self->hostname);
    else
        put(&o, "%s\t%s\n", self->ip, self->hostname);
    /* the DNS records: the pod's own first (it may resolve its own name, e.g.
     * MASTER_ADDR on the store host), then every peer with a subdomain */
    for (size_t i = 0; i <= n_peers; i++) {
        const sim_host_entry *p = i == 0 ? self : &peers[i - 1];
        if (!has(p->subdomain) || !has(p->ns))
            continue;
        if ((rc = check(p, err)) != AREAL_OK)
            return rc;
        if (i > 0 && strcmp(p->ip, self->ip) == 0)
            continue;
        bool same_ns = has(self->ns) && strcmp(p->ns, self->ns) == 0;
        put(&o, "%s\t%s.%s.%s.svc.%s\t%s.%s.%s.svc\t%s.%s.%s", p->ip, p->hostname, p->subdomain,
            p->ns, dom, p->hostname, p->subdomain, p->ns, p->hostname, p->subdomain, p->ns);
        if (same_ns)
            put(&o, "\t%s.%s", p->hostname, p->subdomain);
        put(&o, "\n");
    }
    if (o.full)
        return areal_error_set(err, AREAL_ERANGE, -1,
                               "the hosts file of pod '%s' needs more than %zu bytes",
                               self->hostname, cap);
    *len = o.len;
    return AREAL_OK;
}
