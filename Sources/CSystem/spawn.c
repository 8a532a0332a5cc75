/* A hook's process: argv and an environment (never a shell), in a process group of its
 * own so that a timeout can end it and everything it started. */
#define _GNU_SOURCE
#include "csystem.h"

#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

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
