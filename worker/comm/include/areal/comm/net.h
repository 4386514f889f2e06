/*
 * net.h - TCP sockets with deadlines, the transport under the store and the
 * CPU backend.
 *
 * Every blocking step (resolve, connect, send, receive) takes an absolute
 * deadline on the monotonic clock (areal_now_ms()) and fails with a message
 * naming host:port or the peer instead of waiting forever. Sockets are
 * non-blocking and waited on with poll(2); sends use MSG_NOSIGNAL so a dead
 * peer is an error, never a SIGPIPE. Rejected: SO_RCVTIMEO/SO_SNDTIMEO (a
 * timeout per call, not per operation, so a trickling peer could stretch an
 * operation without bound).
 */
#ifndef AREAL_COMM_NET_H
#define AREAL_COMM_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "areal/error.h"

/* Longest host name or address accepted anywhere in comm, with its NUL. */
#define AREAL_HOST_MAX 256

/* Milliseconds and microseconds on the monotonic clock. */
int64_t areal_now_ms(void);
int64_t areal_now_us(void);

/*
 * Listens on host:port (host NULL or "" = every address; port 0 = any free
 * port). On success stores the socket in *fd and the bound port in *port_out
 * (may be NULL). A port in use or a host that is not an address of this
 * machine gives AREAL_EIO with a message naming host:port and the fix.
 */
int areal_net_listen(const char *host, int port, int *fd, int *port_out, areal_error *err);

/*
 * Connects to host:port before `deadline_ms`. With `retry` a refused
 * connection is retried every 20-200 ms until the deadline (the server may not
 * be up yet), and so is a name that does not resolve yet (a cluster's DNS
 * record appears once the peer's pod has an IP); without it the first refusal
 * or resolution failure is final. The socket is returned non-blocking with TCP_NODELAY.
 * `what` names the service in messages ("store", "rank 3"). AREAL_EIO on
 * failure, the message naming what, host:port and the last cause.
 */
int areal_net_connect(const char *host, int port, int64_t deadline_ms, bool retry, const char *what,
                      int *fd, areal_error *err);

/*
 * Unix-domain stream sockets in the abstract namespace (no file; the name
 * lives as long as the socket), for ranks of one pod: the same byte stream
 * as TCP without the TCP stack. `name` is 1..100 bytes. Listen gives
 * AREAL_EIO naming it when taken; connect retries a refused name until the
 * deadline. Sockets are returned non-blocking.
 */
int areal_net_listen_unix(const char *name, int *fd, areal_error *err);
int areal_net_connect_unix(const char *name, int64_t deadline_ms, const char *what, int *fd,
                           areal_error *err);

/*
 * Accepts one connection on the listening socket before the deadline; the
 * socket is returned non-blocking with TCP_NODELAY. AREAL_EIO on timeout.
 */
int areal_net_accept(int lfd, int64_t deadline_ms, int *fd, areal_error *err);

/*
 * Sends or receives exactly n bytes before the deadline. AREAL_EIO when the
 * peer closes, fails or the deadline passes; the message names `peer`. After
 * a failure the stream position is unknown: close the socket.
 */
int areal_net_send_all(int fd, const void *buf, size_t n, int64_t deadline_ms, const char *peer,
                       areal_error *err);
int areal_net_recv_all(int fd, void *buf, size_t n, int64_t deadline_ms, const char *peer,
                       areal_error *err);

/* Splits "host:port" (IPv6 as "[::1]:port") into its parts; AREAL_EINVAL when malformed. */
int areal_net_split_hostport(const char *s, char host[AREAL_HOST_MAX], int *port, areal_error *err);

/* Little-endian integer codecs shared by the wire formats. */
void areal_put_u32(uint8_t *p, uint32_t v);
uint32_t areal_get_u32(const uint8_t *p);
void areal_put_u64(uint8_t *p, uint64_t v);
uint64_t areal_get_u64(const uint8_t *p);

#endif
