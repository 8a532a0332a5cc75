/*
 * The PulseAudio backend (sm_backend, see backend.h): a native playback stream, used for
 * the device names "pulse" and "pulse:SINK" (device.c).
 *
 * Why not ALSA's pulse plugin: the plugin hands every write to the server at once and
 * cannot take it back (snd_pcm_rewind moves a pointer only), so on it a deep buffer
 * makes every pause, stop and seek late by the whole buffer, and a shallow one costs a
 * wake-up of three threads every few ms. The native protocol can overwrite what is
 * queued (a write with a negative relative seek; the server rewinds its sink and
 * renders the new data), which is the rewind the output thread needs for "deep buffer,
 * instant control". MPD and mpg123 have native PulseAudio outputs for the same reasons.
 *
 * libpulse is loaded with dlopen when a pulse device is opened, so a Raspberry Pi
 * without a sound server needs neither libpulse nor its dependencies.
 *
 * The calls: a state, writes (the output thread writes only what avail says fits; the
 * server recovers an underrun itself, so a write never restarts anything), the delay
 * (frames queued before a frame written now is heard, and how many may be taken back),
 * rewind (the next write goes back over queued audio), pause (cork), drop (cork and
 * flush), prepare (uncork) and drain. Server callbacks run on libpulse's own thread and
 * only signal or count.
 */
#define _GNU_SOURCE
#include "backend.h"
#include "internal.h"
#include "priority.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <pulse/pulseaudio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#define PA_FUNCS(X)                                                                          \
    X(pa_threaded_mainloop_new) X(pa_threaded_mainloop_free) X(pa_threaded_mainloop_start) \
    X(pa_threaded_mainloop_stop) X(pa_threaded_mainloop_lock) X(pa_threaded_mainloop_unlock) \
    X(pa_threaded_mainloop_wait) X(pa_threaded_mainloop_signal) X(pa_threaded_mainloop_get_api) \
    X(pa_threaded_mainloop_in_thread)                                                        \
    X(pa_context_new) X(pa_context_connect) X(pa_context_disconnect) X(pa_context_unref)     \
    X(pa_context_get_state) X(pa_context_set_state_callback) X(pa_context_errno)            \
    X(pa_stream_new) X(pa_stream_connect_playback) X(pa_stream_disconnect) X(pa_stream_unref) \
    X(pa_stream_get_state) X(pa_stream_set_state_callback) X(pa_stream_set_write_callback)   \
    X(pa_stream_set_underflow_callback) X(pa_stream_set_started_callback) X(pa_stream_writable_size) X(pa_stream_write)        \
    X(pa_stream_get_latency) X(pa_stream_cork) X(pa_stream_flush) X(pa_stream_drain) X(pa_stream_prebuf) \
    X(pa_stream_get_buffer_attr) X(pa_stream_update_timing_info) X(pa_stream_get_timing_info) X(pa_operation_get_state) X(pa_operation_unref) X(pa_strerror)

static struct {
#define X(f) __typeof__(f) *f;
    PA_FUNCS(X)
#undef X
} pa;
static int pa_loaded;          /* 1 loaded, -1 not available */
static char pa_load_error[160];
static pthread_once_t pa_once = PTHREAD_ONCE_INIT;

static void load_libpulse(void) {
    void *h = dlopen("libpulse.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(pa_load_error, sizeof pa_load_error, "%s", dlerror());
        pa_loaded = -1;
        return;
    }
#define X(f) if (!(pa.f = (__typeof__(f) *)dlsym(h, #f))) { \
        snprintf(pa_load_error, sizeof pa_load_error, "libpulse.so.0 has no %s", #f); \
        pa_loaded = -1; return; }
    PA_FUNCS(X)
#undef X
    pa_loaded = 1;
}

int sm_pulse_available(void) {
    pthread_once(&pa_once, load_libpulse);
    return pa_loaded == 1;
}

typedef struct sm_pulse {
    sm_backend base;
    pa_threaded_mainloop *ml;
    pa_context *ctx;
    pa_stream *st;
    uint32_t rate;
    size_t frame_bytes;
    int64_t seek_bytes;        /* a rewind not yet applied: the next write's offset */
    sm_dev_state state;
    int uncork_pending;        /* resumed: uncork right after the next write */
    int raise_ml;              /* raise libpulse's thread's priority at its first callback */
} sm_pulse;

static void context_cb(pa_context *c, void *u) {
    (void)c;
    sm_pulse *p = u;
    /* libpulse's own thread carries our writes to the server and its requests to us: it
     * runs at the render thread's priority (beside six busy processes, 5 of 20 seeks still
     * ran the stream dry while it had a normal one). (The first callback, at the connect,
     * runs on the opening thread.) */
    if (p->raise_ml && pa.pa_threaded_mainloop_in_thread(p->ml)) {
        p->raise_ml = 0;
        sm_raise_thread_nice(-10);
    }
    pa.pa_threaded_mainloop_signal(p->ml, 0);
}

static void stream_cb(pa_stream *s, void *u) {
    (void)s;
    sm_pulse *p = u;
    pa.pa_threaded_mainloop_signal(p->ml, 0);
}

static void write_cb(pa_stream *s, size_t n, void *u) {
    (void)s; (void)n;
    sm_pulse *p = u;
    pa.pa_threaded_mainloop_signal(p->ml, 0);
}

/* The server played everything queued while we were running: an underrun. (Not while
 * corked, draining or flushed: those empty the stream on purpose.) The server starts
 * again by itself once the start threshold (prebuf) is queued, like ALSA after prepare. */
static void underflow_cb(pa_stream *s, void *u) {
    (void)s;
    sm_pulse *p = u;
    if (p->state != SM_DEV_RUNNING) return;
    atomic_fetch_add_explicit(&p->base.xruns, 1, memory_order_relaxed);
    p->state = SM_DEV_PREPARED;
    pa.pa_threaded_mainloop_signal(p->ml, 0);
}

/* Playback began: the start threshold was reached (after opening, a flush or an
 * underrun). Until then the stream is PREPARED, as an ALSA PCM before its start. */
static void started_cb(pa_stream *s, void *u) {
    (void)s;
    sm_pulse *p = u;
    if (p->state == SM_DEV_PREPARED) p->state = SM_DEV_RUNNING;
    pa.pa_threaded_mainloop_signal(p->ml, 0);
}

/* Called with the lock held: 1 while the connection and the stream are usable. */
static int alive(sm_pulse *p) {
    if (!p->ctx || pa.pa_context_get_state(p->ctx) != PA_CONTEXT_READY) return 0;
    if (p->st && pa.pa_stream_get_state(p->st) != PA_STREAM_READY) return 0;
    return 1;
}

static void note_failure(sm_pulse *p) {
    if (p->state == SM_DEV_LOST) return;
    p->state = SM_DEV_LOST;
    int err = p->ctx ? pa.pa_context_errno(p->ctx) : PA_ERR_UNKNOWN;
    snprintf(p->base.error, sizeof p->base.error, "%s", pa.pa_strerror(err ? err : PA_ERR_CONNECTIONTERMINATED));
}

/* Runs an operation to its end (lock held). 0, or -ENODEV (noted) when there was no
 * operation (the stream had failed) or the connection went meanwhile. */
static int finish(sm_pulse *p, pa_operation *op) {
    if (op) {
        while (pa.pa_operation_get_state(op) == PA_OPERATION_RUNNING && alive(p))
            pa.pa_threaded_mainloop_wait(p->ml);
        pa.pa_operation_unref(op);
        if (alive(p)) return 0;
    }
    note_failure(p);
    return -ENODEV;
}

/* Uncorks without waiting for the answer (lock held): the server takes the request after
 * whatever was written before it. */
static void uncork_now(sm_pulse *p) {
    pa_operation *op = pa.pa_stream_cork(p->st, 0, NULL, NULL);
    if (op) pa.pa_operation_unref(op);
    p->uncork_pending = 0;
}

static void op_done_cb(pa_stream *s, int success, void *u) {
    (void)s; (void)success;
    sm_pulse *p = u;
    pa.pa_threaded_mainloop_signal(p->ml, 0);
}

static void pulse_close(sm_backend *b) {
    sm_pulse *p = (sm_pulse *)b;
    if (!p) return;
    if (p->ml) pa.pa_threaded_mainloop_stop(p->ml);
    if (p->st) {
        pa.pa_stream_set_state_callback(p->st, NULL, NULL);
        pa.pa_stream_set_write_callback(p->st, NULL, NULL);
        pa.pa_stream_set_underflow_callback(p->st, NULL, NULL);
        pa.pa_stream_set_started_callback(p->st, NULL, NULL);
        pa.pa_stream_disconnect(p->st);
        pa.pa_stream_unref(p->st);
    }
    if (p->ctx) {
        pa.pa_context_set_state_callback(p->ctx, NULL, NULL);
        pa.pa_context_disconnect(p->ctx);
        pa.pa_context_unref(p->ctx);
    }
    if (p->ml) pa.pa_threaded_mainloop_free(p->ml);
    free(p);
}

static sm_dev_state pulse_state(sm_backend *b) {
    sm_pulse *p = (sm_pulse *)b;
    pa.pa_threaded_mainloop_lock(p->ml);
    if (!alive(p)) note_failure(p);
    sm_dev_state s = p->state;
    pa.pa_threaded_mainloop_unlock(p->ml);
    return s;
}

/* Frames that can be written now: what the server asks for, and the room a pending
 * rewind makes (as pulse_write counts it). Without the rewind's room, a take-back of the
 * standby's silence looked like a full stream: the output thread slept up to a period
 * before its first write, the server played on meanwhile, and the write, seeking back by
 * the amount reckoned before the sleep, left the stream all but empty: the likely cause of
 * an underflow in 2 of 11 clean-clone CIs' second session from the standby (test_standby). */
static long pulse_avail(sm_backend *b) {
    sm_pulse *p = (sm_pulse *)b;
    pa.pa_threaded_mainloop_lock(p->ml);
    long n = -ENODEV;
    if (alive(p)) {
        size_t w = pa.pa_stream_writable_size(p->st);
        if (w != (size_t)-1) n = (long)((w + (size_t)(-p->seek_bytes)) / p->frame_bytes);
    } else {
        note_failure(p);
    }
    pa.pa_threaded_mainloop_unlock(p->ml);
    return n;
}

/* Writes all n frames (a blocking write, as snd_pcm_writei in blocking mode). A stream
 * never needs bringing back (the server recovers an underrun itself: underflow_cb), so
 * nothing is lost or restarted here; a failure is a lost connection. */
static long pulse_write(sm_backend *b, const void *frames, uint32_t n, uint32_t *lost, int *restarted) {
    (void)lost; (void)restarted;
    sm_pulse *p = (sm_pulse *)b;
    const char *src = (const char *)frames;
    size_t left = n * p->frame_bytes;
    pa.pa_threaded_mainloop_lock(p->ml);
    while (left > 0) {
        if (!alive(p)) { note_failure(p); pa.pa_threaded_mainloop_unlock(p->ml); return -ENODEV; }
        size_t w = pa.pa_stream_writable_size(p->st);
        if (w == (size_t)-1) { note_failure(p); pa.pa_threaded_mainloop_unlock(p->ml); return -ENODEV; }
        w += (size_t)(-p->seek_bytes);   /* a rewind makes room the server has not asked for yet */
        w -= w % p->frame_bytes;
        if (w == 0) {
            if (p->uncork_pending) uncork_now(p);   /* a corked stream asks for nothing */
            pa.pa_threaded_mainloop_wait(p->ml);
            continue;
        }
        if (w > left) w = left;
        if (pa.pa_stream_write(p->st, src, w, NULL, p->seek_bytes, PA_SEEK_RELATIVE) < 0) {
            note_failure(p);
            pa.pa_threaded_mainloop_unlock(p->ml);
            return -ENODEV;
        }
        p->seek_bytes = 0;
        src += w;
        left -= w;
        if (p->uncork_pending) uncork_now(p);   /* after the data: never resumed empty */
    }
    pa.pa_threaded_mainloop_unlock(p->ml);
    return (long)n;
}

/* Frames between the write position and the frame heard now; and those that may be taken
 * back: all but what the server is about to play. The server rewinds its sink to render
 * the overwritten part; 10 ms covers the request's trip and the sink's own safety margin
 * (40 pauses in a row faded cleanly at the null sink's monitor, heard 19-29 ms after the
 * command). */
static int pulse_delay(sm_backend *b, long *frames, long *rewindable) {
    sm_pulse *p = (sm_pulse *)b;
    pa.pa_threaded_mainloop_lock(p->ml);
    int r = 0;
    pa_usec_t usec = 0;
    int negative = 0;
    if (!alive(p)) { note_failure(p); r = -ENODEV; }
    else if (pa.pa_stream_get_latency(p->st, &usec, &negative) < 0) { usec = 0; r = -EAGAIN; }
    long d = negative ? 0 : (long)((usec * p->rate + 500000) / 1000000);
    d += (long)(p->seek_bytes / (int64_t)p->frame_bytes);  /* a pending rewind */
    *frames = d > 0 ? d : 0;
    pa.pa_threaded_mainloop_unlock(p->ml);
    if (rewindable) {
        long guard = (long)(p->rate / 100);
        *rewindable = r < 0 ? 0 : (*frames > guard ? *frames - guard : 0);
    }
    return r;
}

/* The delay reckoned from a timing update asked for now (an aligned start). libpulse spaces
 * its automatic updates out to 1.5 s and interpolates between them, never letting the time
 * it reports go back: a second after an update its delay was 0.5-1.2 ms off on three
 * streams of one sink, differently on each, and a sit in several rooms came 1.7 ms apart.
 * The answer (a round trip to the server) says where the server's read index stood at its
 * own timestamp; what the server plays moves on in real time from there. *at_ns is the
 * CLOCK_MONOTONIC moment the figure holds for (read beside the real-time clock the
 * timestamp is on). A query that cannot be made falls back on the interpolated figure. */
static int pulse_fresh_delay(sm_backend *b, long *frames, uint64_t *at_ns) {
    sm_pulse *p = (sm_pulse *)b;
    pa.pa_threaded_mainloop_lock(p->ml);
    const pa_timing_info *ti = NULL;
    pa_operation *op = alive(p) ? pa.pa_stream_update_timing_info(p->st, op_done_cb, p) : NULL;
    if (op && finish(p, op) == 0) ti = pa.pa_stream_get_timing_info(p->st);
    if (!ti || ti->write_index_corrupt || ti->read_index_corrupt || !ti->playing) {
        /* Not known afresh (not playing yet, or a write's index not confirmed): as ever. */
        pa.pa_threaded_mainloop_unlock(p->ml);
        int r = pulse_delay(b, frames, NULL);
        *at_ns = sm_monotonic_ns();
        return r;
    }
    struct timeval tv;
    gettimeofday(&tv, NULL);
    *at_ns = sm_monotonic_ns();
    const int64_t now_us = (int64_t)tv.tv_sec * 1000000 + tv.tv_usec;
    const int64_t stamp_us = (int64_t)ti->timestamp.tv_sec * 1000000 + ti->timestamp.tv_usec;
    const int64_t since_us = now_us > stamp_us ? now_us - stamp_us : 0;
    /* Not yet heard: the bytes written past the server's read index and a pending rewind,
     * plus what the sink holds past it, less what has played since the timestamp (rounded
     * once, to the nearest frame). */
    const int64_t rate = (int64_t)p->rate;
    const int64_t bytes = ti->write_index - ti->read_index + p->seek_bytes;
    const int64_t us = (int64_t)ti->sink_usec - since_us;
    const int64_t scaled = bytes * 1000000 / (int64_t)p->frame_bytes + us * rate;   /* frames x 1e6 */
    const int64_t d = (scaled >= 0 ? scaled + 500000 : scaled - 500000) / 1000000;
    pa.pa_threaded_mainloop_unlock(p->ml);
    *frames = d > 0 ? (long)d : 0;
    return 0;
}

static long pulse_rewind(sm_backend *b, unsigned long frames) {
    sm_pulse *p = (sm_pulse *)b;
    pa.pa_threaded_mainloop_lock(p->ml);
    p->seek_bytes -= (int64_t)(frames * p->frame_bytes);
    pa.pa_threaded_mainloop_unlock(p->ml);
    return (long)frames;
}

/* Pausing corks the stream (the output thread pauses once its fade has been heard) and
 * drops the zeros queued behind the fade; resuming uncorks it after the next write, and
 * the server starts it once its start threshold is queued. (PulseAudio 16 was seen to
 * skip the first ms of such a restart: the resume's lead of silence, not the fade-in.) */
static int pulse_pause(sm_backend *b, int enable) {
    sm_pulse *p = (sm_pulse *)b;
    pa.pa_threaded_mainloop_lock(p->ml);
    int r = 0;
    if (enable) {
        /* Corked, then the zeros still queued after the pause's fade are dropped: the
         * resume starts with its own lead, not behind them. */
        p->uncork_pending = 0;
        p->seek_bytes = 0;
        r = finish(p, pa.pa_stream_cork(p->st, 1, op_done_cb, p));
        if (r == 0) r = finish(p, pa.pa_stream_flush(p->st, op_done_cb, p));
        if (r == 0) p->state = SM_DEV_PAUSED;
    } else if (p->state == SM_DEV_PAUSED) {
        /* The resumed stream starts through its start threshold, as a new one does: a sink
         * with no other stream on it mixes as far ahead as our latency allows (~400 ms),
         * and a stream uncorked with only the lead queued would be emptied at once. The
         * server says when it has started (started_cb); until then it is PREPARED. */
        pa_operation *op = pa.pa_stream_prebuf(p->st, NULL, NULL);
        if (op) pa.pa_operation_unref(op);
        p->state = SM_DEV_PREPARED;
        p->uncork_pending = 1;
    }
    pa.pa_threaded_mainloop_unlock(p->ml);
    return r;
}

/* Stop at once and forget what is queued. */
static int pulse_drop(sm_backend *b) {
    sm_pulse *p = (sm_pulse *)b;
    pa.pa_threaded_mainloop_lock(p->ml);
    p->seek_bytes = 0;
    p->uncork_pending = 0;
    p->state = SM_DEV_STOPPED;
    int r = finish(p, pa.pa_stream_cork(p->st, 1, op_done_cb, p));
    if (r == 0) r = finish(p, pa.pa_stream_flush(p->st, op_done_cb, p));
    pa.pa_threaded_mainloop_unlock(p->ml);
    return r;
}

/* Ready to play again; the server starts once enough is queued. */
static int pulse_prepare(sm_backend *b) {
    sm_pulse *p = (sm_pulse *)b;
    pa.pa_threaded_mainloop_lock(p->ml);
    int r = finish(p, pa.pa_stream_cork(p->st, 0, op_done_cb, p));
    if (r == 0) p->state = SM_DEV_PREPARED;
    pa.pa_threaded_mainloop_unlock(p->ml);
    return r;
}

/* Returns when everything written has been played. */
static int pulse_drain(sm_backend *b) {
    sm_pulse *p = (sm_pulse *)b;
    pa.pa_threaded_mainloop_lock(p->ml);
    p->state = SM_DEV_STOPPED;   /* playing out: no underrun counted, no start */
    int r = finish(p, pa.pa_stream_drain(p->st, op_done_cb, p));
    if (r == 0) p->state = SM_DEV_STOPPED;
    pa.pa_threaded_mainloop_unlock(p->ml);
    return r;
}

static const sm_backend_ops pulse_ops = {
    .state = pulse_state, .avail = pulse_avail, .write = pulse_write, .delay = pulse_delay, .fresh_delay = pulse_fresh_delay,
    .drop = pulse_drop, .prepare = pulse_prepare, .close = pulse_close,
    .rewind = pulse_rewind, .pause = pulse_pause, .drain = pulse_drain,
};

/* The server's answer, in the error (lock held, or before the thread runs). */
static sm_backend *refuse(sm_pulse *p, sm_error *e, int locked, const char *fmt, const char *detail) {
    sm_set_error(e, SM_ERR_NO_DEVICE, 0, fmt, detail);
    if (e) e->sound_server = 1;
    if (locked) pa.pa_threaded_mainloop_unlock(p->ml);
    pulse_close(&p->base);
    return NULL;
}

/* A native PulseAudio stream: the default buffer is deep (the server takes back what is
 * queued, so control stays instant) and its wake-ups are few. */
#define PULSE_BUFFER_US 500000

/* Connects to the server and opens a float stereo stream on c->name (NULL: the default
 * sink). On failure the error's message says why, without naming the device. */
sm_backend *sm_pulse_open(const sm_backend_config *c, sm_error *e) {
    if (!sm_pulse_available()) {
        sm_set_error(e, SM_ERR_NO_DEVICE, 0, "PulseAudio's client library is not installed (%s)", pa_load_error);
        if (e) e->sound_server = 1;
        return NULL;
    }
    sm_pulse *p = calloc(1, sizeof *p);
    if (!p) { sm_set_error(e, SM_ERR_MEMORY, 0, "out of memory"); return NULL; }
    p->base.ops = &pulse_ops;
    p->base.name = "pulse";
    p->base.label = "PulseAudio";
    snprintf(p->base.error, sizeof p->base.error, "%s", "the connection to the server was lost");
    uint32_t rate = c->rate ? c->rate : 44100;
    uint32_t buffer_us = c->buffer_us ? c->buffer_us : PULSE_BUFFER_US;
    uint32_t periods = c->periods ? c->periods : 4;
    uint32_t buffer_frames = (uint32_t)((uint64_t)rate * buffer_us / 1000000);
    uint32_t period_frames = buffer_frames / periods;
    p->rate = rate;
    p->raise_ml = c->raise_threads;
    p->frame_bytes = 2 * sizeof(float);
    p->state = SM_DEV_STOPPED;
    p->ml = pa.pa_threaded_mainloop_new();
    if (!p->ml) return refuse(p, e, 0, "%s", "out of memory");
    p->ctx = pa.pa_context_new(pa.pa_threaded_mainloop_get_api(p->ml), "stillmoment");
    if (!p->ctx) return refuse(p, e, 0, "%s", "out of memory");
    pa.pa_context_set_state_callback(p->ctx, context_cb, p);
    /* The server from PULSE_SERVER or the user's session, as every client finds it;
     * never start one (a daemon must not spawn a sound server behind the user's back). */
    if (pa.pa_context_connect(p->ctx, NULL, PA_CONTEXT_NOAUTOSPAWN, NULL) < 0)
        return refuse(p, e, 0, "cannot connect to the PulseAudio server: %s", pa.pa_strerror(pa.pa_context_errno(p->ctx)));
    if (pa.pa_threaded_mainloop_start(p->ml) < 0)
        return refuse(p, e, 0, "%s", "cannot start PulseAudio's client thread");
    pa.pa_threaded_mainloop_lock(p->ml);
    pa_context_state_t cs;
    while ((cs = pa.pa_context_get_state(p->ctx)) != PA_CONTEXT_READY) {
        if (!PA_CONTEXT_IS_GOOD(cs))
            return refuse(p, e, 1, "cannot connect to the PulseAudio server: %s", pa.pa_strerror(pa.pa_context_errno(p->ctx)));
        pa.pa_threaded_mainloop_wait(p->ml);
    }
    pa_sample_spec ss = { .format = PA_SAMPLE_FLOAT32LE, .rate = rate, .channels = 2 };
    p->st = pa.pa_stream_new(p->ctx, "meditation", &ss, NULL);
    if (!p->st)
        return refuse(p, e, 1, "PulseAudio refused the stream: %s", pa.pa_strerror(pa.pa_context_errno(p->ctx)));
    pa.pa_stream_set_state_callback(p->st, stream_cb, p);
    pa.pa_stream_set_write_callback(p->st, write_cb, p);
    pa.pa_stream_set_underflow_callback(p->st, underflow_cb, p);
    pa.pa_stream_set_started_callback(p->st, started_cb, p);
    /* tlength is the whole latency (ADJUST_LATENCY), minreq the wake-up size, and the
     * server starts playing once all but one period is queued (ALSA's start threshold). */
    uint32_t tlength = (uint32_t)(buffer_frames * p->frame_bytes);
    uint32_t minreq = (uint32_t)(period_frames * p->frame_bytes);
    pa_buffer_attr attr = {
        .maxlength = (uint32_t)-1,
        .tlength = tlength,
        .prebuf = tlength > minreq ? tlength - minreq : minreq,
        .minreq = minreq,
        .fragsize = (uint32_t)-1,
    };
    pa_stream_flags_t flags = PA_STREAM_INTERPOLATE_TIMING | PA_STREAM_AUTO_TIMING_UPDATE | PA_STREAM_ADJUST_LATENCY;
    const char *dev = (c->name && *c->name) ? c->name : NULL;
    if (pa.pa_stream_connect_playback(p->st, dev, &attr, flags, NULL, NULL) < 0)
        return refuse(p, e, 1, "PulseAudio refused the stream: %s", pa.pa_strerror(pa.pa_context_errno(p->ctx)));
    pa_stream_state_t ss_state;
    while ((ss_state = pa.pa_stream_get_state(p->st)) != PA_STREAM_READY) {
        if (!PA_STREAM_IS_GOOD(ss_state) || pa.pa_context_get_state(p->ctx) != PA_CONTEXT_READY) {
            int err = pa.pa_context_errno(p->ctx);
            if (err == PA_ERR_NOENTITY && dev)
                return refuse(p, e, 1, "PulseAudio has no sink named '%s' (see: pactl list short sinks)", dev);
            return refuse(p, e, 1, "PulseAudio refused the stream: %s", pa.pa_strerror(err));
        }
        pa.pa_threaded_mainloop_wait(p->ml);
    }
    const pa_buffer_attr *got = pa.pa_stream_get_buffer_attr(p->st);
    if (got) {
        buffer_frames = (uint32_t)(got->tlength / p->frame_bytes);
        period_frames = (uint32_t)(got->minreq / p->frame_bytes);
    }
    p->state = SM_DEV_PREPARED;
    pa.pa_threaded_mainloop_unlock(p->ml);

    sm_backend_info *info = &p->base.info;
    info->rate = rate;
    info->buffer_frames = buffer_frames;
    info->period_frames = period_frames ? period_frames : buffer_frames / 4;
    info->format = SM_FORMAT_FLOAT;
    info->sound_server = 1;
    /* PulseAudio takes back what its sink has mixed ahead when a stream is corked, and its
     * clock is an estimate: the stream is corked once 30 ms of the zeros after a pause's
     * fade have been heard, so that what a cork takes back is silence, never the end of
     * the fade (cut in 5 of 20 pauses otherwise). The zeros fill the buffer but a period:
     * a sink with no other stream on it mixes as far ahead as our latency allows, and with
     * only 60 ms of zeros it emptied the stream before the cork came (an underrun counted
     * at every pause, seen only without a recorder on the sink, whose short latency had
     * kept the sink from mixing ahead). The cork flushes what is left of them (pulse_pause).
     * It rewinds its sink to start a resumed stream at once, and up to 3 ms of it were
     * seen missing: 10 ms of silence lead the fade-in. */
    uint32_t ramp = sm_ramp_frames(rate);
    info->pause_tail_frames = info->buffer_frames > info->period_frames + 12 * ramp
        ? info->buffer_frames - info->period_frames : 12 * ramp;
    info->pause_left_frames = info->pause_tail_frames - 6 * ramp;
    info->resume_lead_frames = 2 * ramp;
    /* A start from the standby takes its silence back to 20 ms more than a pause does: the
     * take-back is decided on a latency the server reported a moment before, and on a
     * loaded machine (six busy processes at nice -5 beside) the server had read past it
     * by then: the stream ran empty at 6 of 20 starts (the standby test's start, repeated);
     * 0 of 50 with these 20 ms. It costs a warm start on PulseAudio 20 ms. Still needed
     * with the render and libpulse threads raised: 7 of 40 such starts ran it empty
     * without, 0 of 40 with (a probe, 2026-11-26). A seek's refill takes its silence
     * back the same way (0 of 200 seeks counted an underrun, and 0 of 40 beside six busy
     * processes). */
    info->silence_keep_frames = rate / 50;
    return &p->base;
}
