# lib/http/module.mk - the HTTP/1.1 server on libwebsockets (areal/http/server.h:
# routes, bounded bodies, keep-alive, chunked streaming answered from any
# thread, timeouts) and the Prometheus registry (areal/http/metrics.h), shared
# by the operator, the rollout server and the trainer; HTTPS through OpenSSL
# under libwebsockets, with self-signed serving certificates (areal/http/tls.h).
# Its tests drive it over loopback with libcurl.
COMPONENTS  += http
http_DIR    := lib/http
http_DEPS   := base
http_PKGS   := libwebsockets libcurl jansson libssl libcrypto
http_LIBS   := -lpthread
DEPS_GROUPS += operator kube
