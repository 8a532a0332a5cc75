/* A hook's process: argv and an environment (never a shell), in a process group of its
 * own so that a timeout can end it and everything it started, holding none of the
 * daemon's descriptors. */
#define _GNU_SOURCE
#include "csystem.h"

#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

/* Every descriptor from 3 up closes on exec (the daemon's sound device, its sockets: a
 * hook must not hold them). close_range where the kernel has it (5.11), else one by one. */
static void cloexec_from_3(void) {
#ifdef SYS_close_range
    if (syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) == 0) return;
#endif
    struct rlimit rl;
    long max = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY ? (long)rl.rlim_cur : 65536;
    if (max > 65536) max = 65536;
    for (int fd = 3; fd < max; fd++) {
        int flags = fcntl(fd, F_GETFD);
        if (flags >= 0 && !(flags & FD_CLOEXEC)) (void)fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
    }
}

int sm_spawn_group(const char *path, char *const argv[], char *const envp[], int out_fd) {
    int report[2];
    if (pipe2(report, O_CLOEXEC) != 0) return -errno;
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(report[0]);
        close(report[1]);
        return -e;
    }
    if (pid == 0) {
        setpgid(0, 0);
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        for (int sig = 1; sig < NSIG; sig++) (void)sigaction(sig, &dfl, NULL);
        sigset_t none;
        sigemptyset(&none);
        pthread_sigmask(SIG_SETMASK, &none, NULL);
        int null = open("/dev/null", O_RDONLY);
        if (null >= 0) { dup2(null, 0); if (null != 0) close(null); }
        dup2(out_fd, 1);
        dup2(out_fd, 2);
        if (out_fd > 2) close(out_fd);
        cloexec_from_3();
        execve(path, argv, envp);
        int e = errno;
        (void)!write(report[1], &e, sizeof e);
        _exit(127);
    }
    /* The parent too, so that the group exists before anyone signals it. */
    (void)setpgid(pid, pid);
    close(report[1]);
    int e = 0;
    ssize_t n;
    do { n = read(report[0], &e, sizeof e); } while (n < 0 && errno == EINTR);
    close(report[0]);
    if (n == (ssize_t)sizeof e) {
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {}
        return -e;
    }
    return pid;
}
