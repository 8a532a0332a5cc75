/*
 * CAudio's thread-priority leaf: the output thread's real-time scheduling, and the nice
 * value of the threads that feed it (the render thread, libpulse's). Calls nothing else
 * of CAudio.
 */
#ifndef CAUDIO_PRIORITY_H
#define CAUDIO_PRIORITY_H

/* Sets the calling thread's nice value to `want`, or as far toward it as RLIMIT_NICE
 * allows; never lowers the priority, and a refusal leaves it as it was. */
void sm_raise_thread_nice(int want);

/* Makes the calling thread SCHED_FIFO at `priority` (capped by the system's maximum and,
 * unless root, by RLIMIT_RTPRIO; 1 at least), not inherited by a fork. 0, or the errno
 * of the refusal. */
int sm_thread_set_fifo(int priority);

#endif
