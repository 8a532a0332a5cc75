/* TLS for the web app (`stillmoment web --tls CERT KEY`): OpenSSL 3, loaded with dlopen
 * only when asked for, so neither the daemon nor a plain-HTTP web app maps it. Non-blocking:
 * every call that would block says which way (read or write) to poll. */
#ifndef CTLS_H
#define CTLS_H
#include <stddef.h>
#include <sys/types.h>

/* What a call needs before it can go on. */
enum { SM_TLS_WANT_READ = 1, SM_TLS_WANT_WRITE = 2 };

/* Loads libssl.so.3 and makes a server context from a PEM certificate chain and key
 * (TLS 1.2 at least). NULL on failure, with the reason in err. */
void *sm_tls_server(const char *cert, const char *key, char *err, size_t errlen);

/* Loads libssl.so.3 and makes a client context (TLS 1.2 at least; no chain verified: the
 * caller pins the peer's certificate by `sm_tls_peer_fingerprint`). NULL with the reason. */
void *sm_tls_client(char *err, size_t errlen);

/* A client connection on a connected, non-blocking socket (`server_name`: SNI, or NULL). */
void *sm_tls_connect(void *ctx, int fd, const char *server_name);

/* The SHA-256 of the peer's certificate (DER), as 64 lower-case hex digits and a NUL in
 * `out` (at least 65 bytes); 0, or -1 when there is none. */
int sm_tls_peer_fingerprint(void *conn, char *out, size_t outlen);

/* A connection on an accepted, non-blocking socket. */
void *sm_tls_accept(void *ctx, int fd);

/* The handshake: 1 done, 0 call again when `*want` allows, -1 failed. */
int sm_tls_handshake(void *conn, int *want);

/* >0 bytes; 0 the peer closed; -1 would block (`*want` says which way); -2 failed. */
ssize_t sm_tls_read(void *conn, void *buf, size_t n, int *want);
ssize_t sm_tls_write(void *conn, const void *buf, size_t n, int *want);

/* Sends close_notify (best effort) and frees the connection (not the socket). */
void sm_tls_close(void *conn);

#endif
