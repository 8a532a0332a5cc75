/*
 * CAudio's insides shared between its files: the ring's layout (ring.c), the output's
 * state (out_state and sm_output: output.c, play.c and standby.c run the thread on it,
 * control.c opens it and answers the other threads), the calls into the device, and the
 * futex the two sides wake each other with.
 */
#ifndef CAUDIO_INTERNAL_H
#define CAUDIO_INTERNAL_H
#include "backend.h"
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

struct sm_ring {
    /* Producer and consumer indices on their own cache lines. */
    _Alignas(64) _Atomic uint64_t write_index;
    _Alignas(64) _Atomic uint64_t read_index;
    _Alignas(64) float *data;
    uint32_t capacity;
    uint32_t mask;
    uint32_t channels;
};

#define MAX_SEGMENTS 64

typedef struct segment {
    uint64_t dev_start;
    uint64_t ring_start;
    uint64_t len;
} segment;

/* What the output thread is doing: the one state of its loop (output.c). The first five
 * play the ring ("running": out_running). */
typedef enum out_state {
    OUT_PLAYING = 0,      /* consuming the ring */
    OUT_REFILLING,        /* after a seek on a paced device: silence while the producer
                             refills, taken back once it has (or a drain comes) */
    OUT_FADING,           /* a long fade (SM_REQ_FADE) at the consumer; paused at its end */
    OUT_DRAINING,         /* the ring played up to drain_end, then the device drains */
    OUT_FADING_DRAINING,  /* a fade during a drain: it ends at whichever comes first */
    OUT_PAUSED,           /* faded out, the device paused (or dropped), the ring flushed */
    OUT_DRAINED,          /* everything was heard; frames written later play */
    OUT_STANDBY_FIRST,    /* between sessions (SM_REQ_STANDBY), before the standby's first turn */
    OUT_STANDBY,          /* between sessions: the device kept running on silence */
    OUT_FAILED            /* the device is lost */
} out_state;

static inline int out_running(out_state s) { return s <= OUT_FADING_DRAINING; }
static inline int out_fading(out_state s) { return s == OUT_FADING || s == OUT_FADING_DRAINING; }
static inline int out_draining(out_state s) { return s == OUT_DRAINING || s == OUT_FADING_DRAINING; }
static inline int out_in_standby(out_state s) { return s == OUT_STANDBY_FIRST || s == OUT_STANDBY; }

struct sm_output {
    sm_backend *dev;      /* the device (alsa.c, pulse.c) */
    sm_ring *ring;
    sm_output_info info;
    char device[128];     /* as named in messages */
    int want_realtime;
    int rt_priority;

    /* Buffers, all allocated in sm_output_open. */
    float *fbuf;          /* period frames of float audio */
    void *obuf;           /* the same, converted to the device format */
    float *hist;          /* the last hist_cap ring frames handed to the device */
    float *hist_gain;     /* the ramp gain each of them was played at (a rewind resumes from it) */
    uint32_t hist_cap;    /* power of two */
    uint32_t hist_valid;  /* frames in hist that are contiguous up to next_ring */

    /* Thread-private accounting. */
    uint64_t dev_pos;
    sm_clock_envelope clock_env;  /* the device's pointer reads (clock.c); reset when it stops */
    uint64_t next_ring;   /* ring index of the next ring frame for the device */
    uint64_t replay_to;   /* after a rewind: [next_ring, replay_to) comes from hist */
    segment seg[MAX_SEGMENTS];
    uint32_t seg_count;
    float gain;           /* ramp gain applied to ring frames */
    float gain_target;
    float gain_step;
    uint32_t ramp_frames;
    uint32_t pause_tail;  /* zeros written after a pause's fade */
    uint32_t pause_left;  /* the device pauses once no more of them than this are queued */
    uint32_t resume_lead; /* silence written before a resume's fade-in */
    uint32_t chunk_frames; /* fbuf and obuf hold this many frames: a longer write goes in pieces */
    uint32_t refill_grace; /* after a flush (a seek): silence the device needs while the
                              producer refills is not an underrun, for up to this many frames */
    uint32_t dither;
    out_state state;
    uint64_t drain_end;   /* the drain plays the ring up to this index, then ends the stream */
    uint32_t standby_looks; /* the standby's turns since its first (OUT_STANDBY_FIRST) */
    int standby_paused;   /* the standby holds a paused session (a sit in several rooms): it
                             goes on with a fade-in, as a resume does */
    uint32_t handled_seq;
    long ramp_ahead;                  /* the last ramp-out's: frames queued in front of its fade, */
    uint64_t ramp_written_ns;         /* and when it was written (0: nothing was written) */
    uint32_t loop_seq;    /* the drain or fade the loop is finishing */
    uint64_t align_begun; /* the aligned start being met (its instant; 0: none) */
    uint64_t align_frames; /* its silence as first reckoned (a device not in real time) */
    uint64_t align_written; /* the silence written for it so far */
    int align_live;       /* the device was seen playing since (its queue taken back once) */
    int align_standby;    /* it was playing already when the start was asked (the standby's) */
    uint64_t align_live_ns; /* when it was first seen playing */

    pthread_t thread;
    int thread_started;
    _Atomic int quit;

    /* Control: one request slot. */
    _Atomic int req_type;
    _Atomic uint32_t req_arg;
    _Atomic uint32_t req_seq;
    _Atomic uint32_t done_seq;
    _Atomic uint64_t drain_at;         /* the ring's write index when a drain was posted */

    /* Wake-ups. */
    _Atomic uint32_t data_counter;     /* producer -> consumer */
    _Atomic int consumer_waiting;
    _Atomic uint32_t space_counter;    /* consumer -> producer */
    _Atomic int producer_waiting;
    _Atomic int producer_poked;        /* a command woke the producer */
    _Atomic uint32_t producer_want;    /* frames of space the producer waits for */

    /* Published state. */
    _Atomic uint64_t played_index;    /* with clock_ns and clock_limit under clock_seq */
    _Atomic uint64_t clock_ns;        /* CLOCK_MONOTONIC when played_index was heard; 0: hold */
    _Atomic uint64_t clock_limit;     /* the extrapolation stops here (end of what was written) */
    _Atomic uint32_t clock_seq;       /* odd while the three are being written (a seqlock) */
    _Atomic uint64_t stop_index;
    _Atomic uint64_t align_ns;        /* an aligned start asked for (sm_output_align); 0: none */
    _Atomic uint64_t align_late_ns;   /* how late the last one was */
    _Atomic uint64_t align_skipped_ns; /* what the last one left out to be on time */
    _Atomic int standby_holds_pause;  /* the next standby holds a paused session */
    _Atomic uint64_t st_frames_written;
    _Atomic uint64_t st_silence_frames;
    _Atomic uint32_t st_silence_events;
    _Atomic uint32_t st_rewinds;
    _Atomic uint64_t req_ns;          /* CLOCK_MONOTONIC of the last request's post */
    _Atomic uint32_t st_pauses;       /* odd while the last pause's figures are written (a seqlock) */
    _Atomic uint32_t st_pause_ahead;
    _Atomic uint64_t st_pause_posted_ns;
    _Atomic uint64_t st_pause_written_ns;
    _Atomic int st_realtime;
    _Atomic int st_rt_errno;
    _Atomic int st_paced;
    _Atomic int st_failed;
    sm_error last_error;               /* written by the thread before st_failed is set */
};

/* The output thread (output.c). */
void *sm_output_thread_main(void *arg);

static inline int sm_futex_wait(_Atomic uint32_t *addr, uint32_t expected, int timeout_ms) {
    struct timespec ts = { timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L };
    return (int)syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT_PRIVATE, expected,
                        timeout_ms >= 0 ? &ts : NULL, NULL, 0);
}

static inline void sm_futex_wake(_Atomic uint32_t *addr) {
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static inline uint64_t sm_monotonic_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline size_t sm_format_bytes(int format) {
    return format == SM_FORMAT_S16 ? 2 : 4;
}

/* Calls into the device (the output thread's); an optional call that is NULL answers as a
 * device without it would. */
static inline sm_dev_state dev_state(sm_output *o) { return o->dev->ops->state(o->dev); }
static inline long dev_avail(sm_output *o) { return o->dev->ops->avail(o->dev); }
static inline int dev_delay(sm_output *o, long *delay) { return o->dev->ops->delay(o->dev, delay, NULL); }
static inline long dev_rewind(sm_output *o, unsigned long n) {
    return o->dev->ops->rewind ? o->dev->ops->rewind(o->dev, n) : 0;
}
/* A device that pauses, stops or starts again no longer plays on from the clock's last
 * reads: the envelope starts afresh (a write that restarted the device too, play.c). */
static inline int dev_pause(sm_output *o, int enable) {
    o->clock_env.ns = 0;
    return o->dev->ops->pause ? o->dev->ops->pause(o->dev, enable) : -ENOSYS;
}
static inline int dev_drop(sm_output *o) { o->clock_env.ns = 0; return o->dev->ops->drop(o->dev); }
static inline int dev_prepare(sm_output *o) { o->clock_env.ns = 0; return o->dev->ops->prepare(o->dev); }
static inline int dev_restart(sm_output *o) {
    o->clock_env.ns = 0;
    return o->dev->ops->restart ? o->dev->ops->restart(o->dev) : o->dev->ops->prepare(o->dev);
}
static inline int dev_drain(sm_output *o) { return o->dev->ops->drain ? o->dev->ops->drain(o->dev) : 0; }
static inline uint32_t dev_held(sm_output *o) { return o->dev->ops->held ? o->dev->ops->held(o->dev) : 0; }

#endif
