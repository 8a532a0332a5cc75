/*
 * sm_backend: the one interface between the output thread (output.c, play.c, standby.c)
 * and a sound device, shaped for a push driver: write what fits, say what is queued, take
 * back what is not yet heard, pause, stop, start again, drain. alsa.c (an ALSA PCM) and
 * pulse.c (a native PulseAudio stream) implement it; device.c decides from the device name
 * which one opens. A backend recovers its own device (an ALSA PCM by its state, inside
 * alsa.c); the output thread knows only these calls and the states below.
 *
 * A new backend writes the seven required calls; the optional ones may be NULL (the
 * device cannot take back, pause, stop by itself, drain or hold frames).
 *
 * Frames are interleaved stereo in `info.format`. Every call is made from one thread at
 * a time (the output thread once it runs). Errors are negative errno values.
 */
#ifndef CAUDIO_BACKEND_H
#define CAUDIO_BACKEND_H
#include "caudio.h"
#include "diag.h"
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define SM_CHANNELS 2

/* Where the device stands. */
typedef enum sm_dev_state {
    SM_DEV_STOPPED = 0,   /* not playing and not ready: after a drop or a drain (prepare first) */
    SM_DEV_PREPARED,      /* ready; starts playing once enough is queued (its start threshold) */
    SM_DEV_RUNNING,       /* playing */
    SM_DEV_PAUSED,        /* paused in place (pause(1)); pause(0) goes on */
    SM_DEV_XRUN,          /* ran dry and stopped (a write or restart brings it back) */
    SM_DEV_SUSPENDED,     /* the system suspended it (likewise) */
    SM_DEV_LOST           /* gone: unplugged, the server went away */
} sm_dev_state;

typedef struct sm_backend_config {
    const char *name;     /* the device's name for this backend (an ALSA PCM, a sink or NULL) */
    uint32_t rate;        /* 0: 44100 */
    uint32_t buffer_us;   /* 0: the backend's default */
    uint32_t periods;     /* 0: 4 */
    /* The output asked for real-time scheduling: a backend thread that carries the audio
     * (libpulse's) raises its priority as the render thread does (sm_raise_thread_nice). */
    int raise_threads;
} sm_backend_config;

/* What the device gave, and what it can do. */
typedef struct sm_backend_info {
    uint32_t rate;
    uint32_t buffer_frames;
    uint32_t period_frames;
    int format;               /* sm_sample_format */
    int sound_server;         /* a sound server's stream (its errors and hints differ) */
    /* After a pause's fade: zeros written behind it, and the device is paused once no
     * more than pause_left of them are queued (0: the ramp's length for both). A server
     * that takes back what it mixed ahead when paused needs a longer tail. */
    uint32_t pause_tail_frames;
    uint32_t pause_left_frames;
    /* What taking back queued silence leaves of it (a start from the standby, a seek's
     * refill), beyond a rewind's own margin (0: nothing more). A server rewinds its sink
     * when asked; a take-back that lands behind where the server reads by then empties
     * the stream (an underflow). */
    uint32_t silence_keep_frames;
    /* Silence written before a resume's fade-in (a server that loses the first ms of a
     * restarted stream needs some); 0: none. */
    uint32_t resume_lead_frames;
    /* Room the output leaves free in the device buffer (0: none). The rate plugin passes a
     * period on to the card only when the card has a whole period free: a period written
     * when its own count said there was room, but the card's did not, waited inside it
     * until the next call, and a stall's xrun in between dropped it (16.5 ms skipped once
     * in the rig). Also what a device gave past the queue asked for (alsa.c: configure). */
    uint32_t headroom_frames;
    /* The delay lags: it counts frames already played as queued until the pointer steps
     * on (an ALSA card's pointer), never fewer; the clock takes the upper envelope of its
     * reads (clock.c). 0: reads as they are (a sound server's, interpolated already). */
    int pointer_lags;
    /* A seek's refill may keep the buffer full of silence: all of it is taken back (an ALSA
     * PCM whose rewind reaches the card: no rate plugin, whose rewindable is always 0, and no
     * plug in front of a dmix). 0: a period at a time. */
    int deep_refill;
} sm_backend_info;

typedef struct sm_backend sm_backend;

typedef struct sm_backend_ops {
    /* Required. */
    sm_dev_state (*state)(sm_backend *b);
    /* Frames that can be written now without blocking. */
    long (*avail)(sm_backend *b);
    /* Writes all n frames (blocking while the device is full) and returns n; the device is
     * brought back on the way from whatever stopped it (an underrun or a suspend, counted
     * in xruns and suspends), and *restarted set then. With `lost` given, a recovery that
     * dropped frames the device had taken but never played ends the write early: it
     * returns the frames written and sets *lost, and the caller plays those again first.
     * -errno (and `error` set) when the device is lost. */
    long (*write)(sm_backend *b, const void *frames, uint32_t n, uint32_t *lost, int *restarted);
    /* Frames queued before a frame written now is heard (0 when not playing or not known),
     * and with `rewindable` given, how many of them may be taken back (rewind): never more
     * than the delay, less what the device must keep queued (0 or less: none). */
    int (*delay)(sm_backend *b, long *frames, long *rewindable);
    /* Stops at once and forgets what is queued (STOPPED). */
    int (*drop)(sm_backend *b);
    /* Ready to play again after a drop or a drain (PREPARED). */
    int (*prepare)(sm_backend *b);
    void (*close)(sm_backend *b);

    /* Optional (NULL: the device has no such thing). */
    /* Takes back `frames` of what is queued (no more than delay's rewindable): the next
     * write goes over them. Returns the frames taken back. NULL: nothing queued can be
     * taken back (ALSA's external plugins: what they hand on is their server's). */
    long (*rewind)(sm_backend *b, unsigned long frames);
    /* Holds the stream in place (PAUSED) and goes on. NULL: a pause drops the stream. */
    int (*pause)(sm_backend *b, int enable);
    /* Brings back a device that stopped by itself (XRUN, SUSPENDED: the standby finds it
     * so between writes), counting it as a failed write's recovery would. NULL: a device
     * that never reports those states. */
    int (*restart)(sm_backend *b);
    /* Returns when everything written has been played (STOPPED). NULL: nothing to wait for. */
    int (*drain)(sm_backend *b);
    /* Frames written since the device's last period boundary that it still holds (ALSA's
     * rate plugin converts whole periods only; what lies past the boundary waits inside it
     * and an xrun drops it). The output ends its writes, and a pause's zeros, on those
     * boundaries. NULL: the device takes every frame as it comes. */
    uint32_t (*held)(sm_backend *b);
    /* `delay`'s frames from a figure the device gives now, for an aligned start (a sound
     * server's client reckons its delay from timing updates that come ever rarer, and
     * interpolates between them), and the CLOCK_MONOTONIC moment it holds for. May wait
     * for a round trip to the server. NULL: `delay` is the device's own figure already. */
    int (*fresh_delay)(sm_backend *b, long *frames, uint64_t *at_ns);
} sm_backend_ops;

/* Every backend's state begins with this. */
struct sm_backend {
    const sm_backend_ops *ops;
    const char *name;             /* "alsa", "pulse" */
    const char *label;            /* as the user knows it: "ALSA", "PulseAudio" */
    sm_backend_info info;
    _Atomic uint32_t xruns;       /* underruns recovered (or seen by the server) */
    _Atomic uint32_t suspends;    /* suspends recovered */
    /* What went wrong, one line, for a call that failed because the device is lost (or
     * the backend's own default); empty: the errno says it. */
    char error[200];
};

/* The ramp of a pause, a seek or a resume: 5 ms, at least 16 frames. */
static inline uint32_t sm_ramp_frames(uint32_t rate) {
    uint32_t n = rate / 200;
    return n < 16 ? 16 : n;
}

/* The backends (alsa.c, pulse.c). NULL with `e` set on failure. */
sm_backend *sm_alsa_open(const sm_backend_config *c, sm_error *e);
/* 1 when an open ALSA backend is ALSA's PulseAudio plugin ("default" on most desktops). */
int sm_alsa_is_pulse_plugin(sm_backend *b);
/* Loads ALSA's configuration and expands `name`'s definition, as an open would, without
 * opening it (sm_backend_warm's thread). */
void sm_alsa_warm(const char *name);
int sm_pulse_available(void);
sm_backend *sm_pulse_open(const sm_backend_config *c, sm_error *e);
/* snapserver's pipe (fifo.c): c->name is the FIFO's path (NULL: /tmp/snapfifo). */
sm_backend *sm_fifo_open(const sm_backend_config *c, sm_error *e);

/* The device-name policy (device.c): which backend plays `device` (NULL: "default"). The
 * name shown in messages is written to `shown`. */
sm_backend *sm_backend_open(const char *device, uint32_t rate, uint32_t buffer_us, uint32_t periods,
                            int raise_threads, char *shown, size_t shown_size, sm_error *e);

static inline void sm_backend_close(sm_backend *b) {
    if (b) b->ops->close(b);
}

#endif
