/*
 * CAudio's thread-priority leaf (priority.h): SCHED_FIFO for the output thread, a nice
 * value for the threads that feed it. Linux keeps both per thread.
 */
#define _GNU_SOURCE
#include "priority.h"

#include <errno.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

void sm_raise_thread_nice(int want) {
    errno = 0;
    int now = getpriority(PRIO_PROCESS, (id_t)gettid());
    if (errno) now = 0;
    struct rlimit rl;
    if (geteuid() != 0 && getrlimit(RLIMIT_NICE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        int floor = 20 - (int)(rl.rlim_cur > 40 ? 40 : rl.rlim_cur);   /* RLIMIT_NICE is 20 - nice */
        if (want < floor) want = floor;
    }
    if (want < now) (void)setpriority(PRIO_PROCESS, (id_t)gettid(), want);   /* refused: as it was */
}

int sm_thread_set_fifo(int priority) {
    int prio = priority;
    int maxp = sched_get_priority_max(SCHED_FIFO);
    if (prio > maxp) prio = maxp;
    struct rlimit rl;
    if (geteuid() != 0 && getrlimit(RLIMIT_RTPRIO, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        (rlim_t)prio > rl.rlim_cur)
        prio = (int)rl.rlim_cur;
    struct sched_param sp = { .sched_priority = prio > 0 ? prio : 1 };
    return sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &sp) == 0 ? 0 : errno;
}
