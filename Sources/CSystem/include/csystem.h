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

/* --- Input devices (evdev.c) --- */

/* A key's edge read from an input device: its code, 1 down, 0 up, 2 repeat, and when
 * (the kernel's timestamp, in ms on the monotonic clock once sm_evdev_open set it). */
struct sm_key_event {
    unsigned short code;
    int value;
    long long ms;
};

/* The size of the kernel's struct input_event on this machine (24 on 64-bit, 16 on
 * 32-bit ARM). */
int sm_input_event_size(void);

/* Opens an input device read-only, non-blocking and close-on-exec, with its timestamps on
 * the monotonic clock (EVIOCSCLOCKID; harmless when refused). Returns the fd or -errno. */
int sm_evdev_open(const char *path);

/* The device's name (EVIOCGNAME) into buf. Returns its length or -errno. */
int sm_evdev_name(int fd, char *buf, int len);

/* Whether the device can send key `code` (EVIOCGBIT): 1, 0, or -errno. */
int sm_evdev_has_key(int fd, int code);

/* Decodes whole struct input_events in `buf` (len bytes: a multiple of the event size)
 * and keeps the key events (EV_KEY) in `out` (at most `max`). Returns how many. */
int sm_evdev_decode(const void *buf, int len, struct sm_key_event *out, int max);

/* Writes one struct input_event (type, code, value, time in ms) into `buf` (at least
 * sm_input_event_size() bytes): for tests that feed a pipe as if it were a device. */
void sm_evdev_encode(void *buf, int type, int code, int value, long long ms);

/* --- Folders watched for a device to appear (inotify.c) --- */

/* An inotify descriptor, non-blocking and close-on-exec. Returns it or -errno. */
int sm_inotify_open(void);

/* Watches the folder `path` for a node made, moved in or changed (IN_CREATE, IN_MOVED_TO,
 * IN_ATTRIB) and for the folder going away. Returns the watch or -errno. */
int sm_inotify_watch_folder(int fd, const char *path);

/* Reads every pending event (their content is not needed: something changed). Returns how
 * many were read. */
int sm_inotify_drain(int fd);

/* --- Hooks (spawn.c) --- */

/* Starts `path` with `argv` and `envp` (no shell) in a process group of its own, with the
 * default signal dispositions and an empty mask, stdin from /dev/null and stdout and
 * stderr to `out_fd`. Returns its pid (also its group's id) or -errno (a failed exec is
 * reported through a close-on-exec pipe). */
int sm_spawn_group(const char *path, char *const argv[], char *const envp[], int out_fd);

/* Hands back the pages of the loaded ELF objects that are never written (code and read-only
 * data; never RELRO, never an object with text relocations) with MADV_DONTNEED: the next
 * use faults them back from the page cache. Returns the bytes released (pages.c). */
size_t sm_release_file_pages(void);

#endif
