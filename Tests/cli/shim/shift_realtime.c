/* shift_realtime.c — an LD_PRELOAD for tests: shifts CLOCK_REALTIME (and gettimeofday and
 * time) by STILLMOMENT_TEST_REALTIME_SHIFT_MS milliseconds, and nothing else: the monotonic
 * clocks, the arguments and the environment stay as they are (Debian's libfaketime also
 * shifts CLOCK_MONOTONIC by default). Built by Tests/cli/test_sync.py with cc -shared. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>

static long long shift_ns(void) {
    const char *text = getenv("STILLMOMENT_TEST_REALTIME_SHIFT_MS");
    return text ? atoll(text) * 1000000LL : 0;
}

static void add(struct timespec *ts, long long ns) {
    long long total = (long long)ts->tv_sec * 1000000000LL + ts->tv_nsec + ns;
    ts->tv_sec = (time_t)(total / 1000000000LL);
    ts->tv_nsec = (long)(total % 1000000000LL);
    if (ts->tv_nsec < 0) { ts->tv_nsec += 1000000000L; ts->tv_sec -= 1; }
}

int clock_gettime(clockid_t clock, struct timespec *ts) {
    static int (*real)(clockid_t, struct timespec *);
    if (!real) real = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
    int rc = real(clock, ts);
    if (rc == 0 && (clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE)) add(ts, shift_ns());
    return rc;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
    struct timespec ts;
    int rc = clock_gettime(CLOCK_REALTIME, &ts);
    if (rc == 0 && tv) { tv->tv_sec = ts.tv_sec; tv->tv_usec = ts.tv_nsec / 1000; }
    (void)tz;
    return rc;
}

time_t time(time_t *out) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (out) *out = ts.tv_sec;
    return ts.tv_sec;
}
