/*
 * sim_ipalloc.c - pod IPs for the node simulator (see areal/simpod.h).
 *
 * What: a bitmap over one IPv4 CIDR. The e2e suite uses a 127.X.Y.0/24 range:
 * every address of 127.0.0.0/8 reaches the loopback interface with no set-up,
 * so a worker can bind its pod IP and peers can connect to it, and two suites
 * on one machine stay apart by choosing different X.Y.
 * How: round robin from the last handed-out offset; offset 0 (network) and
 * the last (broadcast) are never handed out.
 * Rejected: network namespaces with addresses on lo (real, non-loopback pod
 * IPs that EndpointSlices would accept) - they need the whole control plane
 * inside one namespace and cleanup of it; loopback aliases need nothing.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "areal/simpod.h"

static bool bit(const sim_ipalloc *a, uint32_t off) {
    return (a->used[off / 8] >> (off % 8)) & 1;
}

static void set_bit(sim_ipalloc *a, uint32_t off, bool on) {
    if (on)
        a->used[off / 8] |= (uint8_t)(1u << (off % 8));
    else
        a->used[off / 8] &= (uint8_t) ~(1u << (off % 8));
}

int sim_ipalloc_init(sim_ipalloc *a, const char *cidr, areal_error *err) {
    memset(a, 0, sizeof *a);
    char ip[SIM_IP_MAX];
    const char *slash = cidr ? strchr(cidr, '/') : NULL;
    if (slash == NULL || (size_t)(slash - cidr) >= sizeof ip)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "pod CIDR '%s' is not IPv4 address/prefix, e.g. 127.20.0.0/16",
                               cidr ? cidr : "");
    memcpy(ip, cidr, (size_t)(slash - cidr));
    ip[slash - cidr] = '\0';
    char *end = NULL;
    long prefix = strtol(slash + 1, &end, 10);
    struct in_addr in;
    if (inet_pton(AF_INET, ip, &in) != 1 || *end != '\0' || end == slash + 1 || prefix < 16 ||
        prefix > 30)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "pod CIDR '%s': want an IPv4 address and a prefix from /16 to /30, "
                               "e.g. 127.20.0.0/16",
                               cidr);
    uint32_t mask = prefix == 0 ? 0 : ~0u << (32 - prefix);
    a->base = ntohl(in.s_addr) & mask;
    a->size = 1u << (32 - prefix);
    a->next = 1;
    return AREAL_OK;
}

int sim_ipalloc_get(sim_ipalloc *a, char out[SIM_IP_MAX], areal_error *err) {
    uint32_t usable = a->size - 2;
    for (uint32_t i = 0; i < usable; i++) {
        uint32_t off = 1 + (a->next - 1 + i) % usable;
        if (bit(a, off))
            continue;
        set_bit(a, off, true);
        a->used_count++;
        a->next = 1 + off % usable;
        struct in_addr in = {.s_addr = htonl(a->base + off)};
        inet_ntop(AF_INET, &in, out, SIM_IP_MAX);
        return AREAL_OK;
    }
    return areal_error_set(err, AREAL_ENOFIT, -1,
                           "every one of the %u pod IPs is in use; choose a wider pod CIDR",
                           usable);
}

int sim_ipalloc_put(sim_ipalloc *a, const char *ip, areal_error *err) {
    struct in_addr in;
    if (ip == NULL || inet_pton(AF_INET, ip, &in) != 1)
        return areal_error_set(err, AREAL_EINVAL, -1, "'%s' is not an IPv4 address", ip ? ip : "");
    uint32_t h = ntohl(in.s_addr);
    if (h < a->base || h - a->base >= a->size || !bit(a, h - a->base))
        return areal_error_set(err, AREAL_EINVAL, -1, "pod IP %s was not handed out here", ip);
    set_bit(a, h - a->base, false);
    a->used_count--;
    return AREAL_OK;
}
