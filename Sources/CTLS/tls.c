/* TLS through OpenSSL 3, loaded at run time (see ctls.h). Only the dozen functions the
 * web server needs are looked up; their prototypes are OpenSSL's stable ABI. */
#include "ctls.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void SSL_CTX;
typedef void SSL;
typedef void SSL_METHOD;

static struct {
    void *ssl, *crypto;
    const SSL_METHOD *(*TLS_server_method)(void);
    SSL_CTX *(*SSL_CTX_new)(const SSL_METHOD *);
    long (*SSL_CTX_ctrl)(SSL_CTX *, int, long, void *);
    int (*SSL_CTX_use_certificate_chain_file)(SSL_CTX *, const char *);
    int (*SSL_CTX_use_PrivateKey_file)(SSL_CTX *, const char *, int);
    int (*SSL_CTX_check_private_key)(const SSL_CTX *);
    unsigned long long (*SSL_CTX_set_options)(SSL_CTX *, unsigned long long);
    SSL *(*SSL_new)(SSL_CTX *);
    int (*SSL_set_fd)(SSL *, int);
    void (*SSL_set_accept_state)(SSL *);
    int (*SSL_do_handshake)(SSL *);
    int (*SSL_read)(SSL *, void *, int);
    int (*SSL_write)(SSL *, const void *, int);
    int (*SSL_get_error)(const SSL *, int);
    int (*SSL_shutdown)(SSL *);
    void (*SSL_free)(SSL *);
    const SSL_METHOD *(*TLS_client_method)(void);
    void (*SSL_set_connect_state)(SSL *);
    long (*SSL_ctrl)(SSL *, int, long, void *);
    void *(*SSL_get1_peer_certificate)(const SSL *);
    int (*i2d_X509)(void *, unsigned char **);
    void (*X509_free)(void *);
    int (*EVP_Digest)(const void *, size_t, unsigned char *, unsigned int *, const void *, void *);
    const void *(*EVP_sha256)(void);
    unsigned long (*ERR_get_error)(void);
    void (*ERR_error_string_n)(unsigned long, char *, size_t);
    void (*ERR_clear_error)(void);
} L;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char load_error[256];

#define SYM(lib, name) do { *(void **)&L.name = dlsym(L.lib, #name); \
    if (!L.name) { snprintf(load_error, sizeof load_error, "libssl.so.3 lacks %s", #name); return; } } while (0)

static void load(void) {
    L.crypto = dlopen("libcrypto.so.3", RTLD_NOW | RTLD_LOCAL);
    L.ssl = dlopen("libssl.so.3", RTLD_NOW | RTLD_LOCAL);
    if (!L.ssl || !L.crypto) {
        snprintf(load_error, sizeof load_error, "cannot load OpenSSL 3 (Debian: apt install libssl3): %s", dlerror());
        return;
    }
    SYM(ssl, TLS_server_method); SYM(ssl, SSL_CTX_new); SYM(ssl, SSL_CTX_ctrl);
    SYM(ssl, SSL_CTX_use_certificate_chain_file); SYM(ssl, SSL_CTX_use_PrivateKey_file);
    SYM(ssl, SSL_CTX_check_private_key); SYM(ssl, SSL_CTX_set_options); SYM(ssl, SSL_new);
    SYM(ssl, SSL_set_fd); SYM(ssl, SSL_set_accept_state); SYM(ssl, SSL_do_handshake);
    SYM(ssl, SSL_read); SYM(ssl, SSL_write); SYM(ssl, SSL_get_error); SYM(ssl, SSL_shutdown);
    SYM(ssl, SSL_free);
    SYM(ssl, TLS_client_method); SYM(ssl, SSL_set_connect_state); SYM(ssl, SSL_ctrl); SYM(ssl, SSL_get1_peer_certificate);
    SYM(crypto, i2d_X509); SYM(crypto, X509_free); SYM(crypto, EVP_Digest); SYM(crypto, EVP_sha256);
    SYM(crypto, ERR_get_error); SYM(crypto, ERR_error_string_n); SYM(crypto, ERR_clear_error);
}

static void reason(char *err, size_t errlen, const char *what) {
    unsigned long e = L.ERR_get_error();
    char buf[200] = "";
    if (e) L.ERR_error_string_n(e, buf, sizeof buf);
    snprintf(err, errlen, "%s%s%s", what, e ? ": " : "", buf);
    L.ERR_clear_error();
}

/* OpenSSL's constants (ssl.h, tls1.h), stable across 3.x. */
#define SM_SSL_FILETYPE_PEM 1
#define SM_SSL_CTRL_MODE 33
#define SM_SSL_CTRL_SET_MIN_PROTO_VERSION 123
#define SM_TLS1_2_VERSION 0x0303
#define SM_SSL_MODE_ENABLE_PARTIAL_WRITE 0x1L
#define SM_SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER 0x2L
#define SM_SSL_OP_NO_RENEGOTIATION (1ULL << 30)
#define SM_SSL_OP_CIPHER_SERVER_PREFERENCE (1ULL << 22)
#define SM_SSL_ERROR_WANT_READ 2
#define SM_SSL_ERROR_WANT_WRITE 3
#define SM_SSL_ERROR_ZERO_RETURN 6

void *sm_tls_server(const char *cert, const char *key, char *err, size_t errlen) {
    pthread_once(&once, load);
    if (load_error[0]) {
        snprintf(err, errlen, "%s", load_error);
        return NULL;
    }
    SSL_CTX *ctx = L.SSL_CTX_new(L.TLS_server_method());
    if (!ctx) { reason(err, errlen, "cannot make a TLS context"); return NULL; }
    L.SSL_CTX_ctrl(ctx, SM_SSL_CTRL_SET_MIN_PROTO_VERSION, SM_TLS1_2_VERSION, NULL);
    L.SSL_CTX_ctrl(ctx, SM_SSL_CTRL_MODE, SM_SSL_MODE_ENABLE_PARTIAL_WRITE | SM_SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER, NULL);
    L.SSL_CTX_set_options(ctx, SM_SSL_OP_NO_RENEGOTIATION | SM_SSL_OP_CIPHER_SERVER_PREFERENCE);
    if (L.SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) { reason(err, errlen, "cannot read the certificate"); return NULL; }
    if (L.SSL_CTX_use_PrivateKey_file(ctx, key, SM_SSL_FILETYPE_PEM) != 1) { reason(err, errlen, "cannot read the private key"); return NULL; }
    if (L.SSL_CTX_check_private_key(ctx) != 1) { reason(err, errlen, "the key does not match the certificate"); return NULL; }
    return ctx;
}

void *sm_tls_client(char *err, size_t errlen) {
    pthread_once(&once, load);
    /* OpenSSL writes to the socket without MSG_NOSIGNAL: a hub that resets the connection
     * must be an error, not a SIGPIPE that ends the process. */
    signal(SIGPIPE, SIG_IGN);
    if (load_error[0]) {
        snprintf(err, errlen, "%s", load_error);
        return NULL;
    }
    /* No chain is verified: the hub's certificate is pinned by its fingerprint instead. */
    SSL_CTX *ctx = L.SSL_CTX_new(L.TLS_client_method());
    if (!ctx) { reason(err, errlen, "cannot make a TLS context"); return NULL; }
    L.SSL_CTX_ctrl(ctx, SM_SSL_CTRL_SET_MIN_PROTO_VERSION, SM_TLS1_2_VERSION, NULL);
    L.SSL_CTX_ctrl(ctx, SM_SSL_CTRL_MODE, SM_SSL_MODE_ENABLE_PARTIAL_WRITE | SM_SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER, NULL);
    L.SSL_CTX_set_options(ctx, SM_SSL_OP_NO_RENEGOTIATION);
    return ctx;
}

#define SM_SSL_CTRL_SET_TLSEXT_HOSTNAME 55
#define SM_TLSEXT_NAMETYPE_host_name 0

void *sm_tls_connect(void *ctx, int fd, const char *server_name) {
    SSL *s = L.SSL_new(ctx);
    if (!s) return NULL;
    if (L.SSL_set_fd(s, fd) != 1) { L.SSL_free(s); return NULL; }
    L.SSL_set_connect_state(s);
    if (server_name && server_name[0]) L.SSL_ctrl(s, SM_SSL_CTRL_SET_TLSEXT_HOSTNAME, SM_TLSEXT_NAMETYPE_host_name, (void *)server_name);
    return s;
}

int sm_tls_peer_fingerprint(void *conn, char *out, size_t outlen) {
    if (outlen < 65) return -1;
    void *cert = L.SSL_get1_peer_certificate(conn);
    if (!cert) return -1;
    int len = L.i2d_X509(cert, NULL);
    if (len <= 0 || len > 1 << 20) { L.X509_free(cert); return -1; }
    unsigned char *der = malloc((size_t)len);
    if (!der) { L.X509_free(cert); return -1; }
    unsigned char *p = der;
    if (L.i2d_X509(cert, &p) != len) { free(der); L.X509_free(cert); return -1; }
    L.X509_free(cert);
    unsigned char md[32];
    unsigned int mdlen = 0;
    int ok = L.EVP_Digest(der, (size_t)len, md, &mdlen, L.EVP_sha256(), NULL);
    free(der);
    if (ok != 1 || mdlen != 32) return -1;
    for (int i = 0; i < 32; i++) snprintf(out + 2 * i, 3, "%02x", md[i]);
    return 0;
}

void *sm_tls_accept(void *ctx, int fd) {
    SSL *s = L.SSL_new(ctx);
    if (!s) return NULL;
    if (L.SSL_set_fd(s, fd) != 1) { L.SSL_free(s); return NULL; }
    L.SSL_set_accept_state(s);
    return s;
}

/* After a call returned r <= 0: -1 with *want set when it would block, -2 on failure, 0 on a clean close. */
static int classify(SSL *s, int r, int *want) {
    int e = L.SSL_get_error(s, r);
    L.ERR_clear_error();
    if (e == SM_SSL_ERROR_WANT_READ) { *want = SM_TLS_WANT_READ; return -1; }
    if (e == SM_SSL_ERROR_WANT_WRITE) { *want = SM_TLS_WANT_WRITE; return -1; }
    if (e == SM_SSL_ERROR_ZERO_RETURN) return 0;
    return -2;
}

int sm_tls_handshake(void *conn, int *want) {
    *want = 0;
    int r = L.SSL_do_handshake(conn);
    if (r == 1) return 1;
    int c = classify(conn, r, want);
    return c == -1 ? 0 : -1;
}

ssize_t sm_tls_read(void *conn, void *buf, size_t n, int *want) {
    *want = 0;
    int r = L.SSL_read(conn, buf, n > 1 << 30 ? 1 << 30 : (int)n);
    if (r > 0) return r;
    return classify(conn, r, want);
}

ssize_t sm_tls_write(void *conn, const void *buf, size_t n, int *want) {
    *want = 0;
    if (n == 0) return 0;
    int r = L.SSL_write(conn, buf, n > 1 << 30 ? 1 << 30 : (int)n);
    if (r > 0) return r;
    int c = classify(conn, r, want);
    return c == 0 ? -2 : c;
}

void sm_tls_close(void *conn) {
    if (!conn) return;
    L.SSL_shutdown(conn);
    L.ERR_clear_error();
    L.SSL_free(conn);
}
