/*
 * The output thread: an ALSA PCM, or a native PulseAudio stream (pulse.c) behind the
 * same calls (dev_*).
 *
 * Inside thread_main's loop our code allocates nothing, takes no lock and never calls
 * into Swift: all buffers are made in sm_output_open, the control side talks to the
 * thread through atomics, and the thread wakes the waiting side with a futex (a system
 * call, not a lock). (On a PulseAudio stream the calls into libpulse take its
 * priority-inheriting mainloop lock, as ALSA's pulse plugin does inside snd_pcm_writei.)
 *
 * Writes never block on a running device: the thread writes what snd_pcm_avail says
 * fits and otherwise sleeps on the request futex until a period is free, so a pause,
 * stop or seek is taken up at once however deep the device buffer is.
 *
 * Accounting. dev_pos counts frames handed to the device; every run of ring frames
 * written contiguously is recorded as a segment (device position, ring index, length).
 * Silence written because the device would run dry has no segment, so the clock stands
 * still while it plays. The frame heard now is dev_pos - snd_pcm_delay, mapped through
 * the segments to a ring index: that is the engine clock (played_index).
 */
#define _GNU_SOURCE
#include "caudio.h"
#include "internal.h"

#include <alsa/asoundlib.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAX_SEGMENTS 64
#define CHANNELS 2

typedef struct segment {
    uint64_t dev_start;
    uint64_t ring_start;
    uint64_t len;
} segment;

enum run_state { ST_RUNNING = 0, ST_PAUSED = 1, ST_DRAINED = 2, ST_FAILED = 3 };

struct sm_output {
    snd_pcm_t *pcm;       /* the ALSA PCM, or NULL when ... */
    sm_pulse *pa;         /* ... a native PulseAudio stream plays instead (pulse.c) */
    sm_ring *ring;
    sm_output_info info;
    char device[128];
    int want_realtime;
    int rt_priority;

    /* Buffers, all allocated in sm_output_open. */
    float *fbuf;          /* period frames of float audio */
    void *obuf;           /* the same, converted to the device format */
    float *hist;          /* the last hist_cap ring frames handed to the device */
    uint32_t hist_cap;    /* power of two */
    uint32_t hist_valid;  /* frames in hist that are contiguous up to next_ring */

    /* Thread-private accounting. */
    uint64_t dev_pos;
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
    uint32_t dither;
    int state;
    int draining;
    uint64_t drain_end;   /* the drain plays the ring up to this index, then ends the stream */
    int fading;
    uint32_t handled_seq;
    uint32_t loop_seq;    /* the drain or fade the loop is finishing */

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
    _Atomic uint64_t st_frames_written;
    _Atomic uint64_t st_silence_frames;
    _Atomic uint32_t st_silence_events;
    _Atomic uint32_t st_xruns;
    _Atomic uint32_t st_suspends;
    _Atomic uint32_t st_rewinds;
    _Atomic int st_realtime;
    _Atomic int st_rt_errno;
    _Atomic int st_paced;
    _Atomic int st_failed;
    sm_error last_error;               /* written by the thread before st_failed is set */
};

/* ------------------------------------------------------------ helpers */

static void set_error(sm_error *e, int code, int alsa_errno, const char *fmt, ...) {
    if (!e) return;
    e->code = code;
    e->alsa_errno = alsa_errno;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
}

/* ALSA prints its own diagnostics to stderr ("ALSA lib pcm.c:...: Unknown PCM foo").
 * We catch the last one and put it in our error message instead. */
static _Thread_local char alsa_last_message[160];

static void alsa_error_handler(const char *file, int line, const char *function, int err,
                               const char *fmt, ...) {
    (void)file; (void)line; (void)function; (void)err;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(alsa_last_message, sizeof alsa_last_message, fmt, ap);
    va_end(ap);
    /* Plugins end some messages with a newline (pulse does); ours are one line. */
    size_t n = strlen(alsa_last_message);
    while (n > 0 && isspace((unsigned char)alsa_last_message[n - 1])) alsa_last_message[--n] = '\0';
}

static int futex_wait(_Atomic uint32_t *addr, uint32_t expected, int timeout_ms) {
    struct timespec ts = { timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L };
    return (int)syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT_PRIVATE, expected,
                        timeout_ms >= 0 ? &ts : NULL, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *addr) {
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static size_t format_bytes(int format) {
    return format == SM_FORMAT_S16 ? 2 : 4;
}

void sm_convert_s16(const float *in, int16_t *out, size_t samples, uint32_t *state) {
    uint32_t x = *state ? *state : 0x9E3779B9u;
    for (size_t i = 0; i < samples; i++) {
        /* TPDF dither: the difference of two uniform variables, +-1 LSB peak. */
        x ^= x << 13; x ^= x >> 17; x ^= x << 5;
        float u1 = (float)(x >> 8) * (1.0f / 16777216.0f);
        x ^= x << 13; x ^= x >> 17; x ^= x << 5;
        float u2 = (float)(x >> 8) * (1.0f / 16777216.0f);
        float v = in[i] * 32767.0f + (u1 - u2);
        long s = lrintf(v);
        if (s > 32767) s = 32767;
        if (s < -32768) s = -32768;
        out[i] = (int16_t)s;
    }
    *state = x;
}

void sm_convert_s32(const float *in, int32_t *out, size_t samples) {
    for (size_t i = 0; i < samples; i++) {
        double v = (double)in[i] * 2147483647.0;
        if (v > 2147483647.0) v = 2147483647.0;
        if (v < -2147483648.0) v = -2147483648.0;
        out[i] = (int32_t)lrint(v);
    }
}

/* ------------------------------------------------------------ device calls */

/* The ALSA calls the thread makes, answered by pulse.c when the device is a native
 * PulseAudio stream. */
static snd_pcm_state_t dev_state(sm_output *o) {
    return o->pa ? (snd_pcm_state_t)sm_pulse_state(o->pa) : snd_pcm_state(o->pcm);
}

static int dev_delay(sm_output *o, snd_pcm_sframes_t *delay) {
    if (!o->pa) return snd_pcm_delay(o->pcm, delay);
    long d = 0;
    int r = sm_pulse_delay(o->pa, &d);
    *delay = d;
    return r;
}

static snd_pcm_sframes_t dev_avail(sm_output *o) {
    return o->pa ? sm_pulse_avail(o->pa) : snd_pcm_avail_update(o->pcm);
}

static snd_pcm_sframes_t dev_rewindable(sm_output *o) {
    return o->pa ? sm_pulse_rewindable(o->pa) : snd_pcm_rewindable(o->pcm);
}

static snd_pcm_sframes_t dev_rewind(sm_output *o, snd_pcm_uframes_t frames) {
    return o->pa ? sm_pulse_rewind(o->pa, frames) : snd_pcm_rewind(o->pcm, frames);
}

static int dev_pause(sm_output *o, int enable) {
    return o->pa ? sm_pulse_pause(o->pa, enable) : snd_pcm_pause(o->pcm, enable);
}

static int dev_drop(sm_output *o) {
    return o->pa ? sm_pulse_drop(o->pa) : snd_pcm_drop(o->pcm);
}

static int dev_prepare(sm_output *o) {
    return o->pa ? sm_pulse_prepare(o->pa) : snd_pcm_prepare(o->pcm);
}

static int dev_drain(sm_output *o) {
    return o->pa ? sm_pulse_drain(o->pa) : snd_pcm_drain(o->pcm);
}

static snd_pcm_sframes_t dev_write(sm_output *o, const void *frames, snd_pcm_uframes_t n) {
    return o->pa ? sm_pulse_write(o->pa, frames, (uint32_t)n) : snd_pcm_writei(o->pcm, frames, n);
}

/* ------------------------------------------------------------ open */

static int classify_open_error(int err) {
    switch (-err) {
    case ENOENT: case ENODEV: case ENXIO: return SM_ERR_NO_DEVICE;
    case EBUSY: case EAGAIN: return SM_ERR_BUSY;
    default: return SM_ERR_CONFIG;
    }
}

static int configure(sm_output *o, const sm_output_config *c, sm_error *e) {
    snd_pcm_hw_params_t *hw;
    snd_pcm_sw_params_t *sw;
    snd_pcm_hw_params_alloca(&hw);
    snd_pcm_sw_params_alloca(&sw);
    int err;

#define CHECK(call, what) do { err = (call); if (err < 0) { \
        set_error(e, SM_ERR_CONFIG, err, "ALSA device '%s' refused %s: %s", o->device, what, snd_strerror(err)); \
        return -1; } } while (0)

    CHECK(snd_pcm_hw_params_any(o->pcm, hw), "any configuration");
    CHECK(snd_pcm_hw_params_set_access(o->pcm, hw, SND_PCM_ACCESS_RW_INTERLEAVED), "interleaved access");
    if (snd_pcm_hw_params_test_format(o->pcm, hw, SND_PCM_FORMAT_FLOAT_LE) == 0) {
        o->info.format = SM_FORMAT_FLOAT;
        CHECK(snd_pcm_hw_params_set_format(o->pcm, hw, SND_PCM_FORMAT_FLOAT_LE), "float samples");
    } else if (snd_pcm_hw_params_test_format(o->pcm, hw, SND_PCM_FORMAT_S32_LE) == 0) {
        o->info.format = SM_FORMAT_S32;
        CHECK(snd_pcm_hw_params_set_format(o->pcm, hw, SND_PCM_FORMAT_S32_LE), "32-bit samples");
    } else if (snd_pcm_hw_params_test_format(o->pcm, hw, SND_PCM_FORMAT_S16_LE) == 0) {
        o->info.format = SM_FORMAT_S16;
        CHECK(snd_pcm_hw_params_set_format(o->pcm, hw, SND_PCM_FORMAT_S16_LE), "16-bit samples");
    } else {
        set_error(e, SM_ERR_FORMAT, 0, "ALSA device '%s' takes none of float, S32 or S16 samples", o->device);
        return -1;
    }
    CHECK(snd_pcm_hw_params_set_channels(o->pcm, hw, CHANNELS), "2 channels");
    unsigned rate = c->rate ? c->rate : 44100;
    CHECK(snd_pcm_hw_params_set_rate_near(o->pcm, hw, &rate, NULL), "the sample rate");
    unsigned buffer_us = c->buffer_us ? c->buffer_us : 100000;
    unsigned periods = c->periods ? c->periods : 4;
    unsigned period_us = buffer_us / periods;
    CHECK(snd_pcm_hw_params_set_buffer_time_near(o->pcm, hw, &buffer_us, NULL), "the buffer size");
    CHECK(snd_pcm_hw_params_set_period_time_near(o->pcm, hw, &period_us, NULL), "the period size");
    CHECK(snd_pcm_hw_params(o->pcm, hw), "the hardware configuration");

    snd_pcm_uframes_t buffer_size, period_size;
    CHECK(snd_pcm_hw_params_get_buffer_size(hw, &buffer_size), "reporting its buffer size");
    CHECK(snd_pcm_hw_params_get_period_size(hw, &period_size, NULL), "reporting its period size");
    CHECK(snd_pcm_hw_params_get_rate(hw, &rate, NULL), "reporting its rate");
    o->info.rate = rate;
    o->info.channels = CHANNELS;
    o->info.buffer_frames = (uint32_t)buffer_size;
    o->info.period_frames = (uint32_t)period_size;
    o->info.can_pause = snd_pcm_hw_params_can_pause(hw);
    /* External (ioplug/extplug) devices such as pulse hand each write to another process
     * at once: snd_pcm_rewind moves their pointer but cannot take back what the server
     * already holds, so a "rewound" ramp would repeat audio and click. On those the
     * ramp goes after what is queued instead. */
    snd_pcm_type_t type = snd_pcm_type(o->pcm);
    o->info.can_rewind = type != SND_PCM_TYPE_IOPLUG && type != SND_PCM_TYPE_EXTPLUG;

    CHECK(snd_pcm_sw_params_current(o->pcm, sw), "software parameters");
    snd_pcm_uframes_t start = buffer_size > period_size ? buffer_size - period_size : period_size;
    CHECK(snd_pcm_sw_params_set_start_threshold(o->pcm, sw, start), "the start threshold");
    CHECK(snd_pcm_sw_params_set_avail_min(o->pcm, sw, period_size), "the wake-up size");
    CHECK(snd_pcm_sw_params(o->pcm, sw), "the software configuration");
#undef CHECK
    return 0;
}

static int open_alsa(sm_output *o, const sm_output_config *c, sm_error *e);

/* 1 when an ALSA PCM is ALSA's PulseAudio plugin ("default" on most desktops). */
static int is_pulse_plugin(snd_pcm_t *pcm) {
    if (snd_pcm_type(pcm) != SND_PCM_TYPE_IOPLUG) return 0;
    snd_output_t *out;
    if (snd_output_buffer_open(&out) < 0) return 0;
    int found = 0;
    if (snd_pcm_dump(pcm, out) == 0) {
        char *text = NULL;
        size_t n = snd_output_buffer_string(out, &text);
        found = text && memmem(text, n, "PulseAudio", 10) != NULL;
    }
    snd_output_close(out);
    return found;
}

/* A native PulseAudio stream: the default buffer is deep (the server takes back what is
 * queued, so control stays instant) and its wake-ups are few. */
#define PULSE_BUFFER_US 500000

static int open_pulse(sm_output *o, const sm_output_config *c, const char *sink, sm_error *e) {
    uint32_t rate = c->rate ? c->rate : 44100;
    uint32_t buffer_us = c->buffer_us ? c->buffer_us : PULSE_BUFFER_US;
    uint32_t periods = c->periods ? c->periods : 4;
    uint32_t buffer_frames = (uint32_t)((uint64_t)rate * buffer_us / 1000000);
    uint32_t period_frames = buffer_frames / periods;
    char message[240];
    o->pa = sm_pulse_open(sink, rate, &buffer_frames, &period_frames, &o->st_xruns, message, sizeof message);
    if (!o->pa) {
        set_error(e, SM_ERR_NO_DEVICE, 0, "cannot open PulseAudio device '%s': %s", o->device, message);
        if (e) e->sound_server = 1;
        return -1;
    }
    o->info.rate = rate;
    o->info.channels = CHANNELS;
    o->info.buffer_frames = buffer_frames;
    o->info.period_frames = period_frames ? period_frames : buffer_frames / 4;
    o->info.format = SM_FORMAT_FLOAT;
    o->info.can_pause = 1;       /* corks the stream */
    o->info.can_rewind = 1;
    return 0;
}

sm_output *sm_output_open(const sm_output_config *c, sm_error *e) {
    if (e) memset(e, 0, sizeof *e);
    sm_output *o = calloc(1, sizeof *o);
    if (!o) { set_error(e, SM_ERR_MEMORY, 0, "out of memory"); return NULL; }
    sm_output_config defaults = { 0 };
    if (!c) c = &defaults;
    const char *name = (c->device && *c->device) ? c->device : "default";
    o->want_realtime = c == &defaults ? 1 : c->want_realtime;
    o->rt_priority = c->rt_priority > 0 ? c->rt_priority : 50;
    atomic_init(&o->st_realtime, -1);

    /* "pulse" and "pulse:SINK" play natively on PulseAudio (or PipeWire's pulse server);
     * "pulse" goes through ALSA's plugin only when libpulse is missing. "alsa:NAME" is
     * the ALSA PCM NAME, whatever it is called. */
    int pulse = 0, forced_alsa = 0;
    const char *sink = NULL;
    if (strncmp(name, "alsa:", 5) == 0 && name[5]) {
        name += 5;
        forced_alsa = 1;
    } else if (strcmp(name, "pulse") == 0) {
        pulse = sm_pulse_available();
    } else if (strncmp(name, "pulse:", 6) == 0) {
        pulse = 1;
        sink = name[6] ? name + 6 : NULL;
    }
    snprintf(o->device, sizeof o->device, "%s", name);
    if (pulse) {
        if (open_pulse(o, c, sink, e) < 0) { sm_output_close(o); return NULL; }
    } else if (open_alsa(o, c, e) < 0) {
        sm_output_close(o);
        return NULL;
    } else if (!forced_alsa && is_pulse_plugin(o->pcm) && sm_pulse_available()) {
        /* An ALSA name that leads to PulseAudio (as "default" does on a desktop): the same
         * server and default sink, natively, where a pause can take back what is queued.
         * If the native connection fails, the plugin stays. */
        snd_pcm_t *plugin = o->pcm;
        sm_output_info alsa_info = o->info;
        o->pcm = NULL;
        if (open_pulse(o, c, NULL, NULL) == 0) {
            snd_pcm_close(plugin);
        } else {
            o->pcm = plugin;
            o->info = alsa_info;
        }
    }

    uint32_t ring_frames = c->ring_frames ? c->ring_frames : o->info.rate;
    if (ring_frames < 2 * o->info.buffer_frames) ring_frames = 2 * o->info.buffer_frames;
    o->ring = sm_ring_create(ring_frames, CHANNELS);
    o->info.ring_frames = o->ring ? sm_ring_capacity(o->ring) : 0;
    o->ramp_frames = o->info.rate / 200;               /* 5 ms */
    if (o->ramp_frames < 16) o->ramp_frames = 16;
    o->pause_tail = o->pause_left = o->ramp_frames;
    if (o->pa) {
        /* PulseAudio takes back what its sink has mixed ahead when a stream is corked, and
         * its clock is an estimate: 60 ms of zeros, corked when half are left, so that
         * what a cork takes back is silence, never the end of the fade (cut in 5 of 20
         * pauses otherwise). It rewinds its sink to start a resumed stream at once, and
         * up to 3 ms of it were seen missing: 10 ms of silence lead the fade-in. */
        o->pause_tail = 12 * o->ramp_frames;
        if (o->pause_tail > o->info.period_frames) o->pause_tail = o->info.period_frames;
        o->pause_left = o->pause_tail / 2;
        o->resume_lead = 2 * o->ramp_frames;
    }
    uint32_t chunk = o->info.period_frames > o->ramp_frames ? o->info.period_frames : o->ramp_frames;
    o->fbuf = calloc((size_t)chunk * CHANNELS, sizeof(float));
    o->obuf = calloc((size_t)chunk * CHANNELS, format_bytes(o->info.format));
    o->hist_cap = 1;
    while (o->hist_cap < o->info.buffer_frames + chunk) o->hist_cap <<= 1;
    o->hist = calloc((size_t)o->hist_cap * CHANNELS, sizeof(float));
    if (!o->ring || !o->fbuf || !o->obuf || !o->hist) {
        set_error(e, SM_ERR_MEMORY, 0, "out of memory for the audio buffers");
        sm_output_close(o);
        return NULL;
    }
    o->gain = 1.0f;
    o->gain_target = 1.0f;
    o->gain_step = 1.0f / (float)o->ramp_frames;
    o->dither = 0x12345678u;
    o->state = ST_RUNNING;
    return o;
}

static int open_alsa(sm_output *o, const sm_output_config *c, sm_error *e) {
    alsa_last_message[0] = 0;
    snd_lib_error_set_handler(alsa_error_handler);
    /* Non-blocking open: a busy hw device fails at once (EBUSY) instead of waiting until
     * whoever holds it lets go; then back to blocking writes (as MPD does). */
    int err = snd_pcm_open(&o->pcm, o->device, SND_PCM_STREAM_PLAYBACK, SND_PCM_NONBLOCK);
    if (err >= 0 && (err = snd_pcm_nonblock(o->pcm, 0)) < 0) snd_pcm_close(o->pcm);
    if (err < 0) {
        int code = classify_open_error(err);
        if (alsa_last_message[0])
            set_error(e, code, err, "cannot open ALSA device '%s': %s (%s)", o->device, snd_strerror(err), alsa_last_message);
        else
            set_error(e, code, err, "cannot open ALSA device '%s': %s", o->device, snd_strerror(err));
        o->pcm = NULL;
        return -1;
    }
    return configure(o, c, e);
}

/* ------------------------------------------------------------ thread internals */

static void publish_stats(sm_output *o) {
    atomic_store_explicit(&o->st_frames_written, o->dev_pos, memory_order_relaxed);
}

static void add_segment(sm_output *o, uint64_t dev_start, uint64_t ring_start, uint64_t len) {
    if (o->seg_count > 0) {
        segment *s = &o->seg[o->seg_count - 1];
        if (s->dev_start + s->len == dev_start && s->ring_start + s->len == ring_start) {
            s->len += len;
            return;
        }
    }
    if (o->seg_count == MAX_SEGMENTS) {
        memmove(&o->seg[0], &o->seg[1], sizeof(segment) * (MAX_SEGMENTS - 1));
        o->seg_count--;
    }
    o->seg[o->seg_count++] = (segment){ dev_start, ring_start, len };
}

static uint64_t monotonic_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Publishes the frame heard now. While the device plays, readers extrapolate from it in
 * real time (sm_output_played_index) up to `limit`: the thread wakes once a period (125 ms
 * on a PulseAudio stream), and a clock read between wake-ups was up to a period stale. */
static void publish_clock(sm_output *o, uint64_t idx, uint64_t limit, int playing) {
    uint32_t q = atomic_load_explicit(&o->clock_seq, memory_order_relaxed);
    atomic_store_explicit(&o->clock_seq, q + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&o->played_index, idx, memory_order_relaxed);
    atomic_store_explicit(&o->clock_limit, limit > idx ? limit : idx, memory_order_relaxed);
    atomic_store_explicit(&o->clock_ns, playing ? monotonic_ns() : 0, memory_order_relaxed);
    atomic_store_explicit(&o->clock_seq, q + 2, memory_order_release);
}

/* Maps the device position heard now to a ring index and publishes it. */
static void update_clock(sm_output *o) {
    snd_pcm_sframes_t delay = 0;
    snd_pcm_state_t st = dev_state(o);
    if (st == SND_PCM_STATE_RUNNING || st == SND_PCM_STATE_PREPARED || st == SND_PCM_STATE_PAUSED ||
        st == SND_PCM_STATE_DRAINING) {
        if (dev_delay(o, &delay) < 0) delay = 0;
    }
    if (delay < 0) delay = 0;
    if ((uint64_t)delay > o->dev_pos) delay = (snd_pcm_sframes_t)o->dev_pos;
    uint64_t played_dev = o->dev_pos - (uint64_t)delay;
    /* Drop segments entirely in the past, keeping the newest one. */
    uint32_t drop = 0;
    while (drop + 1 < o->seg_count && o->seg[drop + 1].dev_start <= played_dev) drop++;
    if (drop) {
        memmove(&o->seg[0], &o->seg[drop], sizeof(segment) * (o->seg_count - drop));
        o->seg_count -= drop;
    }
    if (o->seg_count == 0) return;
    const segment *s = &o->seg[0];
    uint64_t idx;
    int inside = 0;       /* the frame heard is one of the segment's (not silence around it) */
    if (played_dev <= s->dev_start) idx = s->ring_start;
    else {
        uint64_t into = played_dev - s->dev_start;
        inside = into < s->len;
        idx = s->ring_start + (inside ? into : s->len);
    }
    uint64_t prev = atomic_load_explicit(&o->played_index, memory_order_relaxed);
    int playing = inside && o->state == ST_RUNNING && st == SND_PCM_STATE_RUNNING &&
                  atomic_load_explicit(&o->st_paced, memory_order_relaxed);
    if (idx > prev || o->state != ST_RUNNING)
        publish_clock(o, idx, s->ring_start + s->len, playing);
}

/* Recovers the PCM after a failed write, by its state, as MPD's ALSA output does. */
static int recover(sm_output *o, int err) {
    if (err == -EPIPE) atomic_fetch_add_explicit(&o->st_xruns, 1, memory_order_relaxed);
    else if (err == -ESTRPIPE) atomic_fetch_add_explicit(&o->st_suspends, 1, memory_order_relaxed);
    if (o->pa) return dev_state(o) == SND_PCM_STATE_DISCONNECTED ? -ENODEV : 0;
    switch (snd_pcm_state(o->pcm)) {
    case SND_PCM_STATE_PAUSED:
        return snd_pcm_pause(o->pcm, 0);
    case SND_PCM_STATE_SUSPENDED:
        err = snd_pcm_resume(o->pcm);
        if (err == -EAGAIN) { struct timespec ts = { 0, 10000000L }; nanosleep(&ts, NULL); return 0; }
        /* fall through to prepare when resume is not supported */
        return snd_pcm_prepare(o->pcm);
    case SND_PCM_STATE_OPEN:
    case SND_PCM_STATE_SETUP:
    case SND_PCM_STATE_XRUN:
        if (err != -EPIPE && snd_pcm_state(o->pcm) == SND_PCM_STATE_XRUN)
            atomic_fetch_add_explicit(&o->st_xruns, 1, memory_order_relaxed);
        return snd_pcm_prepare(o->pcm);
    case SND_PCM_STATE_DISCONNECTED:
        return -ENODEV;
    default:
        return err == -EPIPE || err == -ESTRPIPE ? 0 : err;
    }
}

static void fail(sm_output *o, int err, const char *what) {
    if (o->pa) {
        set_error(&o->last_error, SM_ERR_DEVICE_LOST, err, "PulseAudio device '%s' failed while %s: %s",
                  o->device, what, sm_pulse_error(o->pa));
        o->last_error.sound_server = 1;
    }
    else
        set_error(&o->last_error, SM_ERR_DEVICE_LOST, err, "ALSA device '%s' failed while %s: %s",
                  o->device, what, snd_strerror(err));
    o->state = ST_FAILED;
    atomic_store_explicit(&o->st_failed, 1, memory_order_release);
}

/* Converts and writes `n` frames of fbuf. Returns 0, or -1 when the device is lost. */
static int write_device(sm_output *o, uint32_t n) {
    size_t samples = (size_t)n * CHANNELS;
    const void *src = o->fbuf;
    if (o->info.format == SM_FORMAT_S16) { sm_convert_s16(o->fbuf, o->obuf, samples, &o->dither); src = o->obuf; }
    else if (o->info.format == SM_FORMAT_S32) { sm_convert_s32(o->fbuf, o->obuf, samples); src = o->obuf; }
    size_t frame_bytes = CHANNELS * format_bytes(o->info.format);
    uint32_t done = 0;
    int attempts = 0;
    while (done < n) {
        snd_pcm_sframes_t w = dev_write(o, (const char *)src + done * frame_bytes, n - done);
        if (w == -EAGAIN) continue;
        if (w < 0) {
            int r = recover(o, (int)w);
            if (r < 0 || ++attempts > 100) { fail(o, r < 0 ? r : (int)w, "playing"); return -1; }
            continue;
        }
        done += (uint32_t)w;
    }
    o->dev_pos += n;
    return 0;
}

/* Applies the ramp gain to fbuf in place. A fade-out multiplies, then steps down
 * (1, 1-1/n, ..., 1/n); a fade-in steps up, then multiplies (1/n, ..., 1): no frame of
 * either ramp is silenced outright, so every played frame stays audible. */
static void apply_gain(sm_output *o, uint32_t n) {
    if (o->gain == 1.0f && o->gain_target == 1.0f) return;
    float g = o->gain;
    const float target = o->gain_target;
    const float step = o->gain_step;
    for (uint32_t i = 0; i < n; i++) {
        if (g < target) { g += step; if (g > target) g = target; }
        o->fbuf[2 * i] *= g;
        o->fbuf[2 * i + 1] *= g;
        if (g > target) { g -= step; if (g < target) g = target; }
    }
    o->gain = g;
}

/* Fills fbuf with up to n ring frames: first those taken back by a rewind (from the
 * history), then from the ring. Records them in the history. Returns frames got. */
static uint32_t fetch(sm_output *o, uint32_t n) {
    uint32_t got = 0;
    uint32_t mask = o->hist_cap - 1;
    while (got < n && o->next_ring < o->replay_to) {
        uint32_t h = (uint32_t)(o->next_ring & mask);
        o->fbuf[2 * got] = o->hist[2 * h];
        o->fbuf[2 * got + 1] = o->hist[2 * h + 1];
        got++;
        o->next_ring++;
    }
    if (got < n) {
        uint32_t r = sm_ring_read(o->ring, o->fbuf + 2 * got, n - got);
        if (r) {
            for (uint32_t i = 0; i < r; i++) {
                uint32_t h = (uint32_t)((o->next_ring + i) & mask);
                o->hist[2 * h] = o->fbuf[2 * (got + i)];
                o->hist[2 * h + 1] = o->fbuf[2 * (got + i) + 1];
            }
            o->next_ring += r;
            got += r;
            o->hist_valid += r;
            if (o->hist_valid > o->hist_cap) o->hist_valid = o->hist_cap;
            atomic_fetch_add_explicit(&o->space_counter, 1, memory_order_seq_cst);
            if (atomic_load_explicit(&o->producer_waiting, memory_order_seq_cst) &&
                sm_ring_writable(o->ring) >= atomic_load_explicit(&o->producer_want, memory_order_relaxed))
                futex_wake(&o->space_counter);
        }
    }
    return got;
}

static uint32_t pending_frames(sm_output *o) {
    return (uint32_t)(o->replay_to > o->next_ring ? o->replay_to - o->next_ring : 0) + sm_ring_readable(o->ring);
}

/* Writes up to n ring frames. */
static int play_ring(sm_output *o, uint32_t n) {
    uint64_t start = o->next_ring;
    uint32_t got = fetch(o, n);
    if (!got) return 0;
    apply_gain(o, got);
    uint64_t dev_start = o->dev_pos;
    if (write_device(o, got) < 0) return -1;
    add_segment(o, dev_start, start, got);
    snd_pcm_sframes_t delay;
    if (!atomic_load_explicit(&o->st_paced, memory_order_relaxed) &&
        dev_state(o) == SND_PCM_STATE_RUNNING && dev_delay(o, &delay) == 0 && delay > 0)
        atomic_store_explicit(&o->st_paced, 1, memory_order_relaxed);
    update_clock(o);
    publish_stats(o);
    return 0;
}

static int play_silence(sm_output *o, uint32_t n, int count_as_underflow) {
    memset(o->fbuf, 0, (size_t)n * CHANNELS * sizeof(float));
    if (write_device(o, n) < 0) return -1;
    o->hist_valid = 0;   /* a rewind must not reach back across silence */
    if (o->fading) {     /* a fade goes on through silence: time passes all the same */
        o->gain -= o->gain_step * (float)n;
        if (o->gain < 0.0f) o->gain = 0.0f;
    }
    if (count_as_underflow) {
        atomic_fetch_add_explicit(&o->st_silence_frames, n, memory_order_relaxed);
        atomic_fetch_add_explicit(&o->st_silence_events, 1, memory_order_relaxed);
    }
    update_clock(o);
    publish_stats(o);
    return 0;
}

/* Takes back what the device has queued but not yet played, beyond a safety margin
 * (snd_pcm_rewind), so that what we write next is heard within a few ms. The frames
 * taken back are played again from the history. */
static void take_back(sm_output *o) {
    if (!o->info.can_rewind) return;
    snd_pcm_state_t st = dev_state(o);
    if (st != SND_PCM_STATE_RUNNING && st != SND_PCM_STATE_PREPARED) return;
    /* Only what is queued and not yet heard may be taken back: never more than the
     * delay (0 on a device that does not pace, such as null or file). */
    snd_pcm_sframes_t rewindable = dev_rewindable(o);
    snd_pcm_sframes_t queued = 0;
    if (dev_delay(o, &queued) < 0 || queued < 0) queued = 0;
    if (rewindable > queued) rewindable = queued;
    snd_pcm_sframes_t margin = (snd_pcm_sframes_t)(o->info.rate / 500 + o->ramp_frames); /* 2 ms + ramp */
    uint64_t tail = 0;
    if (o->seg_count) {
        segment *s = &o->seg[o->seg_count - 1];
        if (s->dev_start + s->len == o->dev_pos) tail = s->len;
    }
    if (tail > o->hist_valid) tail = o->hist_valid;
    snd_pcm_sframes_t k = rewindable - margin;
    if ((uint64_t)k > tail) k = (snd_pcm_sframes_t)tail;
    if (rewindable <= margin || k <= 0) return;
    snd_pcm_sframes_t back = dev_rewind(o, (snd_pcm_uframes_t)k);
    if (back <= 0) return;
    o->dev_pos -= (uint64_t)back;
    o->seg[o->seg_count - 1].len -= (uint64_t)back;
    if (o->seg[o->seg_count - 1].len == 0) o->seg_count--;
    if (o->replay_to < o->next_ring) o->replay_to = o->next_ring;
    o->next_ring -= (uint64_t)back;
    o->hist_valid -= (uint32_t)back;
    atomic_fetch_add_explicit(&o->st_rewinds, 1, memory_order_relaxed);
}

/* Ramps the output to zero within ~5 ms of what is heard now: takes back queued audio,
 * then writes a 5-ms fade of the same audio. Sets stop_index to the first ring frame
 * not played. */
static int ramp_out(sm_output *o) {
    o->fading = 0;   /* a pause or flush overrides a fade in progress */
    take_back(o);
    o->gain_target = 0.0f;
    o->gain_step = 1.0f / (float)o->ramp_frames;
    uint32_t n = o->ramp_frames;
    if (o->gain > 0.0f) {
        uint64_t start = o->next_ring;
        uint32_t got = fetch(o, n);
        if (got < n) memset(o->fbuf + 2 * got, 0, (size_t)(n - got) * CHANNELS * sizeof(float));
        apply_gain(o, n);
        uint64_t dev_start = o->dev_pos;
        if (write_device(o, n) < 0) return -1;
        if (got) add_segment(o, dev_start, start, got);
    }
    o->gain = 0.0f;
    o->replay_to = 0;
    atomic_store_explicit(&o->stop_index, o->next_ring, memory_order_release);
    return 0;
}

static void flush_ring(sm_output *o) {
    sm_ring_flush(o->ring);
    o->next_ring = sm_ring_read_index(o->ring);
    o->replay_to = 0;
    o->hist_valid = 0;
    atomic_fetch_add_explicit(&o->space_counter, 1, memory_order_seq_cst);
    futex_wake(&o->space_counter);
}

static void sleep_frames(sm_output *o, uint64_t frames) {
    uint64_t ns = frames * 1000000000ull / o->info.rate;
    if (ns > 20000000ull) ns = 20000000ull;
    struct timespec ts = { 0, (long)ns };
    nanosleep(&ts, NULL);
}

/* After a fade to zero: lets it play out, pauses the device and flushes the ring. */
static void settle_paused(sm_output *o) {
    /* Zeros after the fade, so the device holds silence while paused. */
    const uint32_t left = o->pause_left;
    if (play_silence(o, o->pause_tail, 0) < 0) return;
    /* Let the fade play out before pausing. */
    for (int i = 0; i < 50; i++) {
        snd_pcm_sframes_t delay;
        if (dev_state(o) != SND_PCM_STATE_RUNNING || dev_delay(o, &delay) < 0 ||
            delay <= (snd_pcm_sframes_t)left)
            break;
        sleep_frames(o, (uint64_t)delay - left);
    }
    snd_pcm_state_t st = dev_state(o);
    if (st == SND_PCM_STATE_RUNNING && o->info.can_pause && dev_pause(o, 1) == 0) {
        /* paused in place */
    } else if (st == SND_PCM_STATE_RUNNING || st == SND_PCM_STATE_PREPARED) {
        dev_drop(o);
    }
    flush_ring(o);
    o->state = ST_PAUSED;
    o->draining = 0;     /* a fade or pause that came during a drain: the stream rests instead */
    o->gain_step = 1.0f / (float)o->ramp_frames;
    uint64_t stop = atomic_load(&o->stop_index);
    publish_clock(o, stop, stop, 0);
}

static void do_pause(sm_output *o) {
    if (ramp_out(o) < 0) return;
    settle_paused(o);
}

/* Starts a long fade at the consumer; the loop finishes it (finish_fade). */
static void start_fade(sm_output *o, uint32_t frames) {
    take_back(o);
    if (frames < o->ramp_frames) frames = o->ramp_frames;
    o->gain_target = 0.0f;
    o->gain_step = (o->gain > 0.0f ? o->gain : 1.0f) / (float)frames;
    o->fading = 1;
}

static void finish_fade(sm_output *o) {
    o->fading = 0;
    o->replay_to = 0;
    atomic_store_explicit(&o->stop_index, o->next_ring, memory_order_release);
    settle_paused(o);
}

static void do_resume(sm_output *o) {
    if (o->state == ST_PAUSED || o->state == ST_DRAINED) {
        snd_pcm_state_t st = dev_state(o);
        if (st == SND_PCM_STATE_PAUSED) {
            if (dev_pause(o, 0) < 0) dev_prepare(o);
        } else if (st == SND_PCM_STATE_SETUP || st == SND_PCM_STATE_XRUN) {
            dev_prepare(o);
        }
        o->state = ST_RUNNING;
        o->gain = 0.0f;  /* from silence, with a fade-in (after a pause it is 0 already) */
        if (o->resume_lead) play_silence(o, o->resume_lead, 0);
    }
    o->gain_target = 1.0f;
}

static void do_flush(sm_output *o) {
    if (ramp_out(o) < 0) return;
    flush_ring(o);
    o->gain_target = 1.0f;
}

/* Marks requests up to `seq` done; never moves back (a drain finished late must not undo
 * a pause handled meanwhile). */
static void finish_request(sm_output *o, uint32_t seq) {
    if ((int32_t)(seq - o->handled_seq) > 0) o->handled_seq = seq;
    uint32_t done = atomic_load_explicit(&o->done_seq, memory_order_relaxed);
    if ((int32_t)(seq - done) > 0) atomic_store_explicit(&o->done_seq, seq, memory_order_release);
    futex_wake(&o->done_seq);
}

static void handle_requests(sm_output *o) {
    uint32_t seq = atomic_load_explicit(&o->req_seq, memory_order_acquire);
    if (seq == o->handled_seq) return;
    int type = atomic_load_explicit(&o->req_type, memory_order_acquire);
    if (o->state == ST_FAILED) { finish_request(o, seq); return; }
    /* A pause or a flush (a seek) during a drain abandons the drain: the session goes on
     * (or rests) rather than ending. */
    if (o->draining && (type == SM_REQ_PAUSE || type == SM_REQ_FLUSH)) {
        o->draining = 0;
        finish_request(o, o->loop_seq);
    }
    switch (type) {
    case SM_REQ_PAUSE: if (o->state == ST_RUNNING) do_pause(o); break;
    case SM_REQ_RESUME: do_resume(o); break;
    case SM_REQ_FLUSH:
        if (o->state == ST_RUNNING) {
            do_flush(o);
        } else {
            flush_ring(o);
            atomic_store_explicit(&o->stop_index, o->next_ring, memory_order_release);
        }
        break;
    /* A drain or a fade is taken up here and finished in the loop (finish_request of
     * loop_seq then, so that a request posted meanwhile is still handled). Taken up means
     * handled: the waits sleep again (before, they saw the request as pending and the
     * thread spun until the drain or fade was over). */
    case SM_REQ_DRAIN:
        if (o->state == ST_RUNNING) {
            o->draining = 1;
            o->drain_end = atomic_load_explicit(&o->drain_at, memory_order_relaxed);
            o->handled_seq = o->loop_seq = seq;
            return;
        }
        break;
    case SM_REQ_FADE:
        if (o->state == ST_RUNNING) {
            if (!o->fading) start_fade(o, atomic_load_explicit(&o->req_arg, memory_order_acquire));
            o->handled_seq = o->loop_seq = seq;
            return;
        }
        break;
    default: break;
    }
    finish_request(o, seq);
}

static void wait_for_data(sm_output *o, int timeout_ms) {
    uint32_t c = atomic_load_explicit(&o->data_counter, memory_order_seq_cst);
    atomic_store_explicit(&o->consumer_waiting, 1, memory_order_seq_cst);
    if (sm_ring_readable(o->ring) < o->info.period_frames &&
        atomic_load_explicit(&o->req_seq, memory_order_seq_cst) == o->handled_seq &&
        !atomic_load_explicit(&o->quit, memory_order_seq_cst))
        futex_wait(&o->data_counter, c, timeout_ms);
    atomic_store_explicit(&o->consumer_waiting, 0, memory_order_relaxed);
}

/* Sleeps until a request comes or the timeout passes (data from the producer does not
 * wake it: this is the wait for room in the device). */
static void wait_for_request(sm_output *o, int timeout_ms) {
    uint32_t c = atomic_load_explicit(&o->data_counter, memory_order_seq_cst);
    if (atomic_load_explicit(&o->req_seq, memory_order_seq_cst) == o->handled_seq &&
        !atomic_load_explicit(&o->quit, memory_order_seq_cst))
        futex_wait(&o->data_counter, c, timeout_ms);
}

/* The ring was played up to the drain's end: the device plays out what it holds (on a
 * paced device less than a period), a fade under way ends with it, all was heard. */
static void end_stream(sm_output *o) {
    dev_drain(o);
    o->draining = 0;
    o->fading = 0;
    o->replay_to = 0;
    o->gain_step = 1.0f / (float)o->ramp_frames;
    o->state = ST_DRAINED;
    atomic_store_explicit(&o->stop_index, o->next_ring, memory_order_release);
    update_clock(o);
    publish_clock(o, o->next_ring, o->next_ring, 0);
    finish_request(o, o->loop_seq);
}

static int frames_to_ms(const sm_output *o, uint64_t frames) {
    uint64_t ms = (frames * 1000 + o->info.rate - 1) / o->info.rate;
    return ms < 1 ? 1 : (ms > 1000 ? 1000 : (int)ms);
}

static void set_realtime(sm_output *o) {
    if (!o->want_realtime) { atomic_store(&o->st_realtime, 0); return; }
    int prio = o->rt_priority;
    int maxp = sched_get_priority_max(SCHED_FIFO);
    if (prio > maxp) prio = maxp;
    struct rlimit rl;
    if (geteuid() != 0 && getrlimit(RLIMIT_RTPRIO, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        (rlim_t)prio > rl.rlim_cur)
        prio = (int)rl.rlim_cur;
    struct sched_param sp = { .sched_priority = prio > 0 ? prio : 1 };
    if (sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &sp) == 0) {
        atomic_store(&o->st_realtime, 1);
    } else {
        atomic_store(&o->st_rt_errno, errno);
        atomic_store(&o->st_realtime, 0);
    }
}

static void *thread_main(void *arg) {
    sm_output *o = arg;
    set_realtime(o);
    const uint32_t period = o->info.period_frames;
    while (!atomic_load_explicit(&o->quit, memory_order_acquire)) {
        handle_requests(o);
        if (o->state != ST_RUNNING) {
            /* A drained stream given frames plays them (a seek back, a later end); else
             * sleep until a request (a full ring, filled before a resume, must not spin). */
            if (o->state == ST_DRAINED && sm_ring_readable(o->ring) > 0) { do_resume(o); continue; }
            if (o->state == ST_DRAINED) wait_for_data(o, 50);
            else wait_for_request(o, 50);
            if (o->state == ST_PAUSED || o->state == ST_DRAINED) update_clock(o);
            continue;
        }
        if (o->fading && o->gain <= 0.0f) {
            finish_fade(o);
            finish_request(o, o->loop_seq);
            continue;
        }
        uint32_t pending = pending_frames(o);
        /* Frames written after the end the drain was asked for: the stream goes on. */
        if (o->draining && pending > 0 && o->next_ring >= o->drain_end) o->draining = 0;
        int paced = atomic_load_explicit(&o->st_paced, memory_order_relaxed);
        if (pending >= period || (o->draining && pending > 0)) {
            uint32_t n = pending < period ? pending : period;
            if (paced && dev_state(o) == SND_PCM_STATE_RUNNING) {
                /* Write only what fits. A full device is waited for here, where a request
                 * wakes us at once, not inside a blocking write that could hold a pause
                 * back for a whole period of a deep buffer. */
                snd_pcm_sframes_t avail = dev_avail(o);
                if (avail >= 0 && avail < (snd_pcm_sframes_t)n) {
                    update_clock(o);
                    wait_for_request(o, frames_to_ms(o, n - (uint64_t)avail));
                    continue;
                }
            }
            play_ring(o, n);
            continue;
        }
        snd_pcm_state_t st = dev_state(o);
        if (paced && st == SND_PCM_STATE_RUNNING) {
            snd_pcm_sframes_t delay = 0;
            if (dev_delay(o, &delay) < 0) delay = 0;
            if (delay < (snd_pcm_sframes_t)period) {
                /* Draining (nothing pending): drain the last period. */
                if (o->draining) { end_stream(o); continue; }
                /* The device would run dry: play what there is, else silence. */
                if (pending > 0) play_ring(o, pending);
                else play_silence(o, period, 1);
                continue;
            }
            /* Draining too: the end plays out here, where a request is taken up at once. */
            update_clock(o);
            uint64_t slack = (uint64_t)delay - period;
            int ms = (int)(slack * 1000 / o->info.rate);
            wait_for_data(o, ms < 1 ? 1 : ms);
        } else {
            /* A device that does not pace (null, file) or has not started: the stream
             * stays exact by waiting for the producer. */
            if (o->draining) { end_stream(o); continue; }
            update_clock(o);
            wait_for_data(o, 20);
        }
    }
    return NULL;
}

/* ------------------------------------------------------------ public */

int sm_output_start(sm_output *o, sm_error *e) {
    if (o->thread_started) return 0;
    int err = pthread_create(&o->thread, NULL, thread_main, o);
    if (err) { set_error(e, SM_ERR_THREAD, 0, "cannot start the audio output thread: %s", strerror(err)); return -1; }
    o->thread_started = 1;
    return 0;
}

void sm_output_close(sm_output *o) {
    if (!o) return;
    if (o->thread_started) {
        atomic_store(&o->quit, 1);
        atomic_fetch_add(&o->data_counter, 1);
        futex_wake(&o->data_counter);
        pthread_join(o->thread, NULL);
    }
    if (o->pcm) {
        snd_pcm_drop(o->pcm);
        snd_pcm_close(o->pcm);
    }
    sm_pulse_close(o->pa);
    sm_ring_destroy(o->ring);
    free(o->fbuf);
    free(o->obuf);
    free(o->hist);
    free(o);
}

sm_ring *sm_output_ring(sm_output *o) { return o->ring; }
sm_output_info sm_output_get_info(const sm_output *o) { return o->info; }

sm_output_stats sm_output_get_stats(const sm_output *o) {
    sm_output *m = (sm_output *)o;
    sm_output_stats s = {
        .frames_written = atomic_load(&m->st_frames_written),
        .silence_frames = atomic_load(&m->st_silence_frames),
        .silence_events = atomic_load(&m->st_silence_events),
        .xruns = atomic_load(&m->st_xruns),
        .suspends = atomic_load(&m->st_suspends),
        .rewinds = atomic_load(&m->st_rewinds),
        .realtime = atomic_load(&m->st_realtime),
        .rt_errno = atomic_load(&m->st_rt_errno),
        .paced = atomic_load(&m->st_paced),
        .failed = atomic_load(&m->st_failed),
    };
    return s;
}

void sm_output_last_error(const sm_output *o, sm_error *e) {
    if (atomic_load_explicit(&((sm_output *)o)->st_failed, memory_order_acquire)) *e = o->last_error;
    else memset(e, 0, sizeof *e);
}

int sm_output_failed(const sm_output *o) {
    return atomic_load_explicit(&((sm_output *)o)->st_failed, memory_order_acquire);
}

uint64_t sm_output_played_index(const sm_output *o) {
    sm_output *m = (sm_output *)o;
    uint64_t idx, limit, ns;
    uint32_t q;
    do {
        q = atomic_load_explicit(&m->clock_seq, memory_order_acquire);
        idx = atomic_load_explicit(&m->played_index, memory_order_relaxed);
        limit = atomic_load_explicit(&m->clock_limit, memory_order_relaxed);
        ns = atomic_load_explicit(&m->clock_ns, memory_order_relaxed);
        atomic_thread_fence(memory_order_acquire);
    } while ((q & 1) || q != atomic_load_explicit(&m->clock_seq, memory_order_relaxed));
    if (ns == 0) return idx;
    uint64_t now = monotonic_ns();
    if (now <= ns) return idx;
    uint64_t ahead = (now - ns) * m->info.rate / 1000000000ull;
    return idx + ahead < limit ? idx + ahead : limit;
}

uint64_t sm_output_stop_index(const sm_output *o) {
    return atomic_load_explicit(&((sm_output *)o)->stop_index, memory_order_acquire);
}

uint32_t sm_output_post(sm_output *o, int request) {
    /* A drain is for what the producer (the poster) has written so far. */
    if (request == SM_REQ_DRAIN)
        atomic_store_explicit(&o->drain_at, sm_ring_write_index(o->ring), memory_order_relaxed);
    atomic_store_explicit(&o->req_type, request, memory_order_release);
    uint32_t seq = atomic_fetch_add_explicit(&o->req_seq, 1, memory_order_acq_rel) + 1;
    atomic_fetch_add_explicit(&o->data_counter, 1, memory_order_seq_cst);
    futex_wake(&o->data_counter);
    return seq;
}

static int64_t now_ms(void) {
    return (int64_t)(monotonic_ns() / 1000000ull);
}

uint32_t sm_output_post_fade(sm_output *o, uint32_t frames) {
    atomic_store_explicit(&o->req_arg, frames, memory_order_release);
    return sm_output_post(o, SM_REQ_FADE);
}

int sm_output_wait(sm_output *o, uint32_t seq, int timeout_ms) {
    int64_t deadline = now_ms() + timeout_ms;
    for (;;) {
        uint32_t d = atomic_load_explicit(&o->done_seq, memory_order_acquire);
        if ((int32_t)(d - seq) >= 0) return 1;
        if (!o->thread_started) return 0;
        int64_t left = deadline - now_ms();
        if (left <= 0) return 0;
        futex_wait(&o->done_seq, d, (int)(left < 100 ? left : 100));
    }
}

void sm_output_notify(sm_output *o) {
    atomic_fetch_add_explicit(&o->data_counter, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&o->consumer_waiting, memory_order_seq_cst)) futex_wake(&o->data_counter);
}

void sm_output_wake_producer(sm_output *o) {
    atomic_store_explicit(&o->producer_poked, 1, memory_order_seq_cst);
    atomic_fetch_add_explicit(&o->space_counter, 1, memory_order_seq_cst);
    futex_wake(&o->space_counter);
}

uint32_t sm_output_wait_writable(sm_output *o, uint32_t frames, int timeout_ms) {
    uint32_t w = sm_ring_writable(o->ring);
    if (w >= frames || timeout_ms == 0) return w;
    int64_t deadline = now_ms() + timeout_ms;
    atomic_store_explicit(&o->producer_want, frames, memory_order_relaxed);
    for (;;) {
        uint32_t c = atomic_load_explicit(&o->space_counter, memory_order_seq_cst);
        atomic_store_explicit(&o->producer_waiting, 1, memory_order_seq_cst);
        w = sm_ring_writable(o->ring);
        if (w >= frames) break;
        int64_t left = deadline - now_ms();
        if (left <= 0) break;
        futex_wait(&o->space_counter, c, (int)left);
        /* A wake without enough space is either the consumer (wait on) or a command
         * (sm_output_wake_producer sets the counter without freeing space: return). */
        if (atomic_exchange_explicit(&o->producer_poked, 0, memory_order_seq_cst)) break;
    }
    atomic_store_explicit(&o->producer_waiting, 0, memory_order_relaxed);
    return sm_ring_writable(o->ring);
}
