#ifndef CSYSTEM_H
#define CSYSTEM_H
/* The few system calls the daemon and its clients need whose C shapes (sockaddr_un,
 * struct ucred, fork) are awkward or unavailable from Swift. */
#include <sys/types.h>

/* A listening Unix stream socket at `path` (non-blocking, close-on-exec, mode 0600).
 * Returns the fd, or -errno. An existing file at `path` is not touched: EADDRINUSE. */
int sm_unix_listen(const char *path, int backlog);

/* Connects to the Unix socket at `path` within `timeout_ms` (a wedged daemon's full
 * backlog would block a plain connect for ever). The fd returned is blocking and
 * close-on-exec; -errno on failure (-ETIMEDOUT when the time ran out). */
int sm_unix_connect(const char *path, int timeout_ms);

/* Accepts a connection (non-blocking, close-on-exec). Returns the fd or -errno. */
int sm_unix_accept(int listen_fd);

/* The peer's user and process ids (SO_PEERCRED). Returns 0 or -errno. */
int sm_peer_credentials(int fd, uid_t *uid, pid_t *pid);

/* The peer's group id as it connected (SO_PEERCRED's gid). Returns 0 or -errno. */
int sm_peer_gid(int fd, gid_t *gid);

/* Sets O_NONBLOCK on or off. Returns 0 or -errno. */
int sm_set_nonblocking(int fd, int on);

/* Starts `argv[0]` at `path` detached: in a session of its own (no controlling
 * terminal), not a child of the caller (double fork, so it is never left a zombie),
 * stdin from /dev/null, stdout and stderr to `log_fd`, and `ready_fd` (if >= 0) as its
 * fd 3 (the write end of a pipe it closes, after a byte, once it serves). Returns 0 or
 * -errno (a failed exec is reported through a close-on-exec pipe). */
int sm_spawn_detached(const char *path, char *const argv[], int log_fd, int ready_fd);

/* A pipe whose two ends are close-on-exec. Returns 0 or -errno. */
int sm_pipe_cloexec(int fds[2]);

/* Runs fn(ctx) on a new detached thread at the lowest CPU priority (nice 19) and in the
 * idle I/O class, for housekeeping that must never compete with a session. Returns 0 or
 * -errno (then fn is not run). */
int sm_run_background(void (*fn)(void *), void *ctx);

#endif
