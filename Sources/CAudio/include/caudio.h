/*
 * CAudio: the real-time backend of stillmoment.
 *
 * - sm_ring:   a lock-free single-producer/single-consumer ring of interleaved float
 *              frames (power-of-two capacity, C11 acquire/release on the indices).
 * - sm_output: an output thread that reads the ring and writes a sound device through
 *              one backend interface (backend.h: an ALSA PCM, alsa.c, or a native
 *              PulseAudio stream, pulse.c; device.c picks one by the device name). It
 *              never allocates, never locks and never calls into Swift inside its loop.
 *              Control requests (pause, resume, flush, drain, fade) are posted through
 *              atomics and acknowledged through a futex.
 *
 * Files: ring.c, output.c (the thread: ring consumption, ramps, clock accounting),
 * control.c (open, close, requests, waits, clock and statistics for other threads),
 * convert.c (float to S16/S32), standby.c (the device kept open between sessions),
 * device.c, alsa.c (alsa_chain.c: what a plug stands in front of), pulse.c.
 *
 * Indices ("ring index") count frames ever written to / read from the ring; they are
 * 64-bit and never wrap in practice. The engine clock is the ring index of the frame
 * the listener hears now (sm_output_played_index), derived from the device's delay.
 */
#ifndef CAUDIO_H
#define CAUDIO_H

#include <stdint.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- ring */

typedef struct sm_ring sm_ring;

/* Capacity is rounded up to a power of two frames. Returns NULL on bad arguments or
 * out of memory. */
sm_ring *sm_ring_create(uint32_t min_frames, uint32_t channels);
void sm_ring_destroy(sm_ring *ring);

uint32_t sm_ring_capacity(const sm_ring *ring);
uint32_t sm_ring_channels(const sm_ring *ring);
/* Producer side. */
uint32_t sm_ring_writable(const sm_ring *ring);
uint32_t sm_ring_write(sm_ring *ring, const float *frames, uint32_t count);
uint64_t sm_ring_write_index(const sm_ring *ring);
/* Consumer side. */
uint32_t sm_ring_readable(const sm_ring *ring);
uint32_t sm_ring_read(sm_ring *ring, float *frames, uint32_t count);
uint64_t sm_ring_read_index(const sm_ring *ring);
/* Consumer side: drop everything written so far (read index := write index).
 * Returns the number of frames dropped. */
uint32_t sm_ring_flush(sm_ring *ring);

/* -------------------------------------------------------------- output */

typedef enum sm_error_code {
    SM_OK = 0,
    SM_ERR_NO_DEVICE = 1,  /* unknown PCM name, no sound card */
    SM_ERR_BUSY = 2,       /* device in use by another program */
    SM_ERR_CONFIG = 3,     /* the device refused our rate/channels/buffer */
    SM_ERR_FORMAT = 4,     /* none of float, S32, S16 */
    SM_ERR_THREAD = 5,     /* could not start the output thread */
    SM_ERR_MEMORY = 6,
    SM_ERR_DEVICE_LOST = 7 /* the device failed while playing (unplugged, server gone) */
} sm_error_code;

typedef struct sm_error {
    int code;             /* sm_error_code */
    int alsa_errno;       /* ALSA's negative error, 0 if none */
    char message[320];    /* what happened, including ALSA's snd_strerror text */
    int sound_server;     /* 1 when the device is a PulseAudio stream (the hint differs) */
} sm_error;

typedef struct sm_output_config {
    const char *device;      /* ALSA PCM name; NULL means "default". "pulse" and
                                "pulse:SINK" play natively on PulseAudio, "alsa:NAME"
                                is the ALSA PCM NAME whatever it is called */
    uint32_t rate;           /* requested rate; the device may give another */
    uint32_t buffer_us;      /* device buffer; 0: 100000 on ALSA, 500000 on PulseAudio
                                (which takes queued audio back, so control stays instant) */
    uint32_t periods;        /* periods per buffer, default 4 */
    uint32_t ring_frames;    /* ring capacity (rounded up to 2^n), default rate */
    int want_realtime;       /* ask for SCHED_FIFO (1) or not (0) */
    int rt_priority;         /* default 50 (clamped to RLIMIT_RTPRIO / sched_get_priority_max) */
} sm_output_config;

typedef enum sm_sample_format {
    SM_FORMAT_FLOAT = 1,
    SM_FORMAT_S32 = 2,
    SM_FORMAT_S16 = 3
} sm_sample_format;

typedef struct sm_output_info {
    uint32_t rate;
    uint32_t channels;
    uint32_t buffer_frames;
    uint32_t period_frames;
    uint32_t ring_frames;
    int format;              /* sm_sample_format */
    int can_pause;           /* the hardware supports snd_pcm_pause */
    int can_rewind;          /* queued audio can be taken back: hw devices and native PulseAudio
                                streams, not ALSA's ioplug/extplug plugins such as alsa:pulse */
} sm_output_info;

typedef struct sm_output_stats {
    uint64_t frames_written;     /* frames handed to the device, silence included */
    uint64_t silence_frames;     /* silence written because the device would run dry */
    uint32_t silence_events;
    uint32_t xruns;              /* underruns recovered */
    uint32_t suspends;           /* suspends recovered */
    uint32_t rewinds;            /* pauses that took back queued audio (low latency) */
    int realtime;                /* 1: SCHED_FIFO granted, 0: normal priority, -1: not started */
    int rt_errno;                /* why SCHED_FIFO was refused (EPERM, ...) */
    int paced;                   /* 1 when the device plays at real time (delay seen > 0) */
    int failed;                  /* 1 when the device was lost; see sm_output_last_error */
    /* The last pause (pauses > 0): CLOCK_MONOTONIC when it was posted and when its fade went
     * to the device, and the frames the device still held in front of the fade then. What is
     * heard stops about ahead + a ramp (5 ms) after the write. */
    uint32_t pauses;
    uint32_t pause_ahead_frames;
    uint64_t pause_posted_ns;
    uint64_t pause_written_ns;
} sm_output_stats;

typedef struct sm_output sm_output;

/* Loads, on a thread of its own, what the first open of `device` would load: ALSA's
 * configuration (alsa.conf, conf.d, asound.conf and their hooks, which on a system with
 * ALSA's PulseAudio plugin load libpulse) or libpulse for a pulse device. A daemon calls
 * it when it starts, so that its first session does not wait for that. Returns at once;
 * 0 when the thread started. */
int sm_backend_warm(const char *device);
/* Waits until the warm-ups started are done, at most `timeout_ms`: a process ends only
 * after them (not with a thread inside alsa-lib or libpulse). 1 when none runs. */
int sm_backend_warm_finish(int timeout_ms);

/* Opens and configures the PCM; allocates everything the thread will need. */
sm_output *sm_output_open(const sm_output_config *config, sm_error *error);
/* Starts the real-time thread. */
int sm_output_start(sm_output *out, sm_error *error);
/* Stops the thread (without draining) and closes the PCM. NULL is allowed. */
void sm_output_close(sm_output *out);

sm_ring *sm_output_ring(sm_output *out);
sm_output_info sm_output_get_info(const sm_output *out);
sm_output_stats sm_output_get_stats(const sm_output *out);
void sm_output_last_error(const sm_output *out, sm_error *error);
/* Called on the thread that fills the ring (the render thread): when the output asked for
 * real-time scheduling, raises that thread's priority to nice -10, or as far as
 * RLIMIT_NICE allows. */
void sm_output_raise_producer(const sm_output *out);
/* 1 once the device has been lost (one atomic load, for the render loop). */
int sm_output_failed(const sm_output *out);

/* The ring index of the frame being heard now (the engine clock). */
uint64_t sm_output_played_index(const sm_output *out);
/* The ring index of the frame heard at `ns` (CLOCK_MONOTONIC), a moment ago or now: the
 * clock carried back or forward from its last read while the device plays (held, the same
 * at any moment). */
uint64_t sm_output_played_index_at(const sm_output *out, uint64_t ns);

/* Whether the real-time clock is kept synchronised (adjtimex's state and STA_UNSYNC) and
 * the error the kernel was told (µs): 0, or -errno. */
int sm_realtime_clock_state(int *synchronised, long *esterror_us, long *maxerror_us);

/* An aligned start: the first ring frame the output plays from now on is heard at `ns`
 * (CLOCK_MONOTONIC), the device's own delay subtracted: silence goes in front of it until
 * a frame written then is heard at that instant. On a device that plays in real time and
 * runs (one kept open by the standby), to a frame; on one that has not started, the
 * silence from now to `ns` (what it needs to start is not known). Reached up to 1 ms
 * late, it plays so; up to 20 ms on a device that plays, the frames due by then are left
 * out and the rest fades in, on time (sm_output_align_skipped says how much). A start that
 * cannot be met (later than that, on a device yet to start, or its frames not there yet)
 * is played at no volume: nothing late is heard; sm_output_align_late says by how much it
 * was missed. Call before the session's frames are written. */
void sm_output_align(sm_output *out, uint64_t ns);
/* How late the last aligned start was (ns; 0: on time, or none asked). */
uint64_t sm_output_align_late(const sm_output *out);
/* How much of the last aligned start's first audio was left out to meet it (ns; 0: none). */
uint64_t sm_output_align_skipped(const sm_output *out);
/* The next SM_REQ_STANDBY holds a paused session (a sit in several rooms): the device runs
 * on silence, and the session's resume goes on with a fade-in (as a resume does). */
void sm_output_standby_holds_pause(sm_output *out);

typedef enum sm_request {
    SM_REQ_PAUSE = 1,   /* ramp out (~5 ms), pause the device, flush the ring */
    SM_REQ_RESUME = 2,  /* un-pause; the next frames ramp in */
    SM_REQ_FLUSH = 3,   /* ramp out, flush the ring, keep the device running */
    SM_REQ_DRAIN = 4,   /* play what the ring holds, then drain the device (posted by the
                           producer: frames written after it, a pause or a flush cancel it;
                           frames written after the end play on) */
    SM_REQ_FADE = 5,    /* fade out over the frames given to sm_output_post_fade, then
                           pause and flush as SM_REQ_PAUSE does */
    SM_REQ_STANDBY = 6  /* the session is over, the device stays open (output-standby): ramp
                           out if playing, flush the ring, and keep the device running on
                           silence, topped up whenever a period is free and counted as
                           neither underrun nor silence insertion. Frames written to the
                           ring later (a tenth of a second of them, or fewer with a drain)
                           end it: queued silence is taken back where the device allows,
                           and the next session starts into a running stream */
} sm_request;

/* Posts a request (one at a time) and returns its sequence number. The producer must
 * not write to the ring between posting PAUSE/FLUSH and their completion. */
uint32_t sm_output_post(sm_output *out, int request);
/* Posts SM_REQ_FADE: a fade of `frames` frames applied at the consumer, starting with
 * the next frame the device gets (queued audio is taken back where the device allows),
 * so it is heard at once however deep the ring is. */
uint32_t sm_output_post_fade(sm_output *out, uint32_t frames);
/* Waits until request `seq` is done; returns 1 when done, 0 on timeout. */
int sm_output_wait(sm_output *out, uint32_t seq, int timeout_ms);
/* After a PAUSE or FLUSH: the ring index of the first frame that was NOT heard (the
 * frame to continue from). */
uint64_t sm_output_stop_index(const sm_output *out);

/* Producer helpers: wake the consumer after writing; wait (futex) until at least
 * `frames` can be written, or the timeout passes. Return the writable count. */
void sm_output_notify(sm_output *out);
uint32_t sm_output_wait_writable(sm_output *out, uint32_t frames, int timeout_ms);
/* Wakes a producer waiting in sm_output_wait_writable (a command for it to handle). */
void sm_output_wake_producer(sm_output *out);

/* Float to integer conversion as used by the output thread (exposed for tests). */
void sm_convert_s16(const float *in, int16_t *out, size_t samples, uint32_t *dither_state);
void sm_convert_s32(const float *in, int32_t *out, size_t samples);
/* The largest magnitude among `samples` floats (vector code): the limiter's first check. */
float sm_peak(const float *in, size_t samples);
/* `samples` floats of `src` times `gain` written to (`assign`) or added to `out` (vector
 * code), returning the largest magnitude of those products: the limiter's check fused into
 * the mixer's pass. `out` and `src` do not overlap. */
float sm_gain(float *restrict out, const float *restrict src, size_t samples, float gain, int assign);

/* What an ALSA PCM's dump (snd_pcm_dump's text) says stands between it and the card
 * (alsa_chain.c; alsa-lib has no call that lists a plug's chain): rate_plugin, ALSA's
 * rate converter is in it (it converts whole periods only); card_pointer, the PCM's
 * pointer is the card's own (a hardware PCM, alone or behind a plug's format and channel
 * layers, which move frames one to one): its delay is exact, and a pause can hold it in
 * place. */
typedef struct sm_alsa_chain {
    int rate_plugin;
    int card_pointer;
} sm_alsa_chain;
sm_alsa_chain sm_alsa_chain_read(const char *dump, size_t length);

/* The position a device plays, from reads of its pointer that lag (clock.c). A card's
 * pointer moves in steps (snd-aloop's with the kernel's timer tick, a USB card's with its
 * packets, some cards' only once a period): between two steps the delay still counts the
 * frames played since the last one as queued, so a read says up to a step too little,
 * never too much. The estimate is the larger of the read and the best read of the last
 * half second carried forward in real time (the upper envelope of the reads). */
typedef struct sm_clock_envelope {
    uint64_t frame;   /* the best read (device frames) ... */
    uint64_t ns;      /* ... and when it was taken (CLOCK_MONOTONIC); 0: none */
} sm_clock_envelope;

/* How long a read is carried forward: at the 200 ppm a card's clock may stray from the
 * system's, 0.1 ms at most. */
#define SM_CLOCK_ENVELOPE_NS 500000000ull

/* The position heard at now_ns, given `read` (the device's frames written less its delay,
 * read just now), the device's `rate`, the largest lag a read may have (`step`: more is
 * no lag but a change, a stall or a restart, and the read is taken as it is) and the
 * frames written (`written`: nothing beyond them is heard). Updates e. */
uint64_t sm_clock_envelope_step(sm_clock_envelope *e, uint64_t read, uint64_t now_ns, uint32_t rate,
                                uint64_t step, uint64_t written);

#ifdef __cplusplus
}
#endif

#endif
