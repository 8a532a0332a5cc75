#define _GNU_SOURCE
#include "csystem.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>

static int make_address(const char *path, struct sockaddr_un *addr) {
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof addr->sun_path) return -ENAMETOOLONG;
    memset(addr, 0, sizeof *addr);
    addr->sun_family = AF_UNIX;
    memcpy(addr->sun_path, path, n + 1);
    return 0;
}

int sm_unix_listen(const char *path, int backlog) {
    struct sockaddr_un addr;
    int r = make_address(path, &addr);
    if (r < 0) return r;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -errno;
    /* The socket is created 0600 from the start (no window where it is wider). */
    mode_t old = umask(0177);
    r = bind(fd, (struct sockaddr *)&addr, sizeof addr);
    int err = errno;
    umask(old);
    if (r < 0 || listen(fd, backlog) < 0) {
        if (r == 0) err = errno;
        close(fd);
        return -err;
    }
    return fd;
}

int sm_unix_connect(const char *path, int timeout_ms) {
    struct sockaddr_un addr;
    int r = make_address(path, &addr);
    if (r < 0) return r;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -errno;
    int err = 0;
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0) {
        err = errno;
        if (err == EAGAIN || err == EINPROGRESS || err == EINTR) {
            /* The listener's backlog is full: wait for room, then read the outcome. */
            struct pollfd p = { .fd = fd, .events = POLLOUT };
            int n;
            do { n = poll(&p, 1, timeout_ms); } while (n < 0 && errno == EINTR);
            socklen_t len = sizeof err;
            if (n == 0) err = ETIMEDOUT;
            else if (n < 0) err = errno;
            else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) err = errno;
        }
    }
    if (err == 0) {
        int r2 = sm_set_nonblocking(fd, 0);
        if (r2 < 0) err = -r2;
    }
    if (err) {
        close(fd);
        return -err;
    }
    return fd;
}

int sm_unix_accept(int listen_fd) {
    int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

int sm_peer_credentials(int fd, uid_t *uid, pid_t *pid) {
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) return -errno;
    *uid = cred.uid;
    *pid = cred.pid;
    return 0;
}

int sm_peer_gid(int fd, gid_t *gid) {
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) return -errno;
    *gid = cred.gid;
    return 0;
}

int sm_set_nonblocking(int fd, int on) {
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0) return -errno;
    flags = on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
    return fcntl(fd, F_SETFL, flags) < 0 ? -errno : 0;
}

int sm_spawn_detached(const char *path, char *const argv[], int log_fd, int ready_fd) {
    int report[2];   /* the grandchild writes errno here if exec fails */
    if (pipe2(report, O_CLOEXEC) < 0) return -errno;
    pid_t child = fork();
    if (child < 0) {
        int err = errno;
        close(report[0]);
        close(report[1]);
        return -err;
    }
    if (child == 0) {
        /* Only async-signal-safe calls from here on (the parent may have threads). */
        close(report[0]);
        if (setsid() < 0) _exit(1);
        pid_t grandchild = fork();
        if (grandchild != 0) _exit(grandchild < 0 ? 1 : 0);
        /* A clean start: default signal actions and no blocked signals, whatever the
         * client had set up (it ignores SIGINT and friends while attached). */
        for (int sig = 1; sig < NSIG; sig++) signal(sig, SIG_DFL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        /* Move the fds out of 0-3 first, in case the client ran with those closed. */
        int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (null_fd >= 0 && null_fd < 4) null_fd = fcntl(null_fd, F_DUPFD_CLOEXEC, 4);
        if (log_fd >= 0 && log_fd < 4) log_fd = fcntl(log_fd, F_DUPFD_CLOEXEC, 4);
        if (ready_fd >= 0 && ready_fd < 4) ready_fd = fcntl(ready_fd, F_DUPFD_CLOEXEC, 4);
        if (report[1] < 4) report[1] = fcntl(report[1], F_DUPFD_CLOEXEC, 4);   /* not closed by the dup2 to 3 */
        if (null_fd >= 0) dup2(null_fd, 0);
        if (log_fd >= 0) {
            dup2(log_fd, 1);
            dup2(log_fd, 2);
        }
        /* The readiness pipe is fd 3 in the program (dup2 clears close-on-exec). */
        if (ready_fd >= 0) dup2(ready_fd, 3);
        if (chdir("/") < 0) { /* stay where we are */ }
        execv(path, argv);
        int err = errno;
        ssize_t w = write(report[1], &err, sizeof err);
        (void)w;
        _exit(127);
    }
    close(report[1]);
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {}
    int err = 0;
    ssize_t n;
    do { n = read(report[0], &err, sizeof err); } while (n < 0 && errno == EINTR);
    close(report[0]);
    if (n == (ssize_t)sizeof err) return -err;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return -ECHILD;
    return 0;
}

int sm_pipe_cloexec(int fds[2]) {
    return pipe2(fds, O_CLOEXEC) == 0 ? 0 : -errno;
}

struct sm_background_job { void (*fn)(void *); void *ctx; };

static void *sm_background_main(void *arg) {
    struct sm_background_job job = *(struct sm_background_job *)arg;
    free(arg);
    /* This thread only: the lowest CPU priority, and the idle I/O class (it reads the
     * disk only when nothing else does). It ends with the job, so nothing else inherits
     * either (a thread cannot take its priority back without CAP_SYS_NICE). */
    pid_t tid = (pid_t)syscall(SYS_gettid);
    (void)setpriority(PRIO_PROCESS, (id_t)tid, 19);
    (void)syscall(SYS_ioprio_set, 1 /* IOPRIO_WHO_PROCESS */, (int)tid, (3 << 13) /* IOPRIO_CLASS_IDLE */);
    job.fn(job.ctx);
    return NULL;
}

int sm_run_background(void (*fn)(void *), void *ctx) {
    struct sm_background_job *job = malloc(sizeof *job);
    if (!job) return -ENOMEM;
    job->fn = fn;
    job->ctx = ctx;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t thread;
    int rc = pthread_create(&thread, &attr, sm_background_main, job);
    pthread_attr_destroy(&attr);
    if (rc != 0) { free(job); return -rc; }
    return 0;
}
