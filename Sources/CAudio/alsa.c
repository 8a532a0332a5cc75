/*
 * The ALSA backend (sm_backend, see backend.h): an ALSA PCM opened by name, configured
 * for interleaved stereo in float, S32 or S16 (the first the device takes), with a
 * buffer of `buffer_us` (default 100 ms) in `periods` periods (default: periods of
 * 20 ms; three at least), at the card's own rate through a plug (no automatic
 * resampling). Writes block (as MPD's do); the output thread writes only what avail says fits.
 * Underruns and suspends are recovered here, inside the write (and for the standby,
 * alsa_restart), by the PCM's state, as MPD's ALSA output does; the output thread sees
 * only the frames written, those an xrun dropped, and that the PCM started afresh.
 */
#define _GNU_SOURCE
#include "backend.h"

#include <alsa/asoundlib.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ALSA_BUFFER_US 100000

typedef struct alsa_backend {
    sm_backend base;
    snd_pcm_t *pcm;
    char device[128];
    /* The PCM converts whole periods only (ALSA's rate plugin, configure): the output ends
     * its writes on its period boundaries (alsa_held, only then in the calls). */
    int whole_periods;
    /* Frames written since the last prepare: where the writes stand against those
     * boundaries (alsa_held). */
    uint64_t since_prepare;
    /* What a rewind leaves queued beyond the output's few ms of margin (a period through a
     * chain whose pointer is not the card's; configure). */
    uint32_t rewind_keep;
    size_t frame_bytes;
    int external;         /* an ioplug or extplug (pulse): what it took is handed on */
    sm_backend_ops ops;   /* alsa_ops, without pause or rewind where the PCM has none */
} alsa_backend;

static snd_pcm_t *pcm_of(sm_backend *b) { return ((alsa_backend *)b)->pcm; }

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

/* ------------------------------------------------------------ the calls */

static sm_dev_state alsa_state(sm_backend *b) {
    switch (snd_pcm_state(pcm_of(b))) {
    case SND_PCM_STATE_PREPARED: return SM_DEV_PREPARED;
    case SND_PCM_STATE_RUNNING: return SM_DEV_RUNNING;
    case SND_PCM_STATE_PAUSED: return SM_DEV_PAUSED;
    case SND_PCM_STATE_DRAINING: return SM_DEV_RUNNING;   /* playing out (never seen: drains block) */
    case SND_PCM_STATE_XRUN: return SM_DEV_XRUN;
    case SND_PCM_STATE_SUSPENDED: return SM_DEV_SUSPENDED;
    case SND_PCM_STATE_DISCONNECTED: return SM_DEV_LOST;
    default: return SM_DEV_STOPPED;   /* OPEN, SETUP */
    }
}

static long alsa_avail(sm_backend *b) { return snd_pcm_avail_update(pcm_of(b)); }

/* A prepare starts the plugins' period count again (the rate plugin's last commit). */
static int prepared(sm_backend *b, int err) {
    if (err >= 0) ((alsa_backend *)b)->since_prepare = 0;
    return err;
}

/* ALSA's rate plugin (plughw or default at a rate the card does not take) converts
 * whole periods, counted from the last prepare, and passes one on only when the card has
 * room for it (in a write, or in avail_update): the frames past the last boundary wait
 * inside it until the period is complete, and an xrun drops them. The sound-card rig
 * heard 10 to 30 ms skipped after a 300-ms stall through plughw (none through hw); with
 * the writes ending on its boundaries and the delay asked through avail_update, none. */
static uint32_t alsa_held(sm_backend *b) {
    alsa_backend *a = (alsa_backend *)b;
    uint32_t period = b->info.period_frames;
    return period ? (uint32_t)(a->since_prepare % period) : 0;
}

/* The device's own pointers after an xrun: what it took past what it played. Through
 * plughw a write under way when the card ran dry (a 300-ms stall stopped the process
 * inside it, while the rate plugin converted the period) was passed on to the stopped
 * card, and the prepare dropped it: 16 to 20 ms skipped after 5 of 14 stalls in the
 * rig. Straight on hw the kernel stops the card only once it has played everything
 * (0). Not on an external plugin (pulse): what it handed on is the server's. */
static long alsa_unplayed(sm_backend *b) {
    if (((alsa_backend *)b)->external) return 0;
    snd_pcm_status_t *st;
    snd_pcm_status_alloca(&st);
    if (snd_pcm_status(pcm_of(b), st) < 0) return 0;
    snd_pcm_uframes_t avail = snd_pcm_status_get_avail(st);
    return avail < b->info.buffer_frames ? (long)(b->info.buffer_frames - avail) : 0;
}

static int alsa_delay(sm_backend *b, long *frames, long *rewindable) {
    alsa_backend *a = (alsa_backend *)b;
    long can = rewindable ? snd_pcm_rewindable(pcm_of(b)) : 0;
    /* On a plugin chain avail_update is where the rate plugin passes whole periods on to
     * the card: the output asks for the delay while it waits (a pause's fade playing out),
     * and what it wrote last must reach the card meanwhile, not wait inside the plugin
     * until the card runs dry (that played stale buffer contents: a click, measured). */
    if (a->whole_periods) snd_pcm_avail_update(pcm_of(b));
    snd_pcm_sframes_t d = 0;
    int r = snd_pcm_delay(pcm_of(b), &d);
    *frames = r < 0 ? 0 : d;
    if (rewindable) {
        long queued = *frames > 0 ? *frames : 0;
        *rewindable = (can < queued ? can : queued) - (long)a->rewind_keep;
    }
    return r;
}

static long alsa_rewind(sm_backend *b, unsigned long frames) {
    snd_pcm_sframes_t back = snd_pcm_rewind(pcm_of(b), frames);
    alsa_backend *a = (alsa_backend *)b;
    if (back > 0) a->since_prepare = (uint64_t)back < a->since_prepare ? a->since_prepare - (uint64_t)back : 0;
    return back;
}
static int alsa_pause(sm_backend *b, int enable) { return snd_pcm_pause(pcm_of(b), enable); }
static int alsa_drop(sm_backend *b) { return snd_pcm_drop(pcm_of(b)); }
static int alsa_prepare(sm_backend *b) { return prepared(b, snd_pcm_prepare(pcm_of(b))); }
static int alsa_drain(sm_backend *b) { return snd_pcm_drain(pcm_of(b)); }

/* Recovers the PCM after a failed write, by its state, as MPD's ALSA output does. */
static int recover(sm_backend *b, int err) {
    snd_pcm_t *pcm = pcm_of(b);
    if (err == -EPIPE) atomic_fetch_add_explicit(&b->xruns, 1, memory_order_relaxed);
    else if (err == -ESTRPIPE) atomic_fetch_add_explicit(&b->suspends, 1, memory_order_relaxed);
    switch (snd_pcm_state(pcm)) {
    case SND_PCM_STATE_PAUSED:
        return snd_pcm_pause(pcm, 0);
    case SND_PCM_STATE_SUSPENDED:
        err = snd_pcm_resume(pcm);
        if (err == -EAGAIN) { struct timespec ts = { 0, 10000000L }; nanosleep(&ts, NULL); return 0; }
        /* prepare when resume is not supported */
        return prepared(b, snd_pcm_prepare(pcm));
    case SND_PCM_STATE_OPEN:
    case SND_PCM_STATE_SETUP:
    case SND_PCM_STATE_XRUN:
        if (err != -EPIPE && snd_pcm_state(pcm) == SND_PCM_STATE_XRUN)
            atomic_fetch_add_explicit(&b->xruns, 1, memory_order_relaxed);
        return prepared(b, snd_pcm_prepare(pcm));
    case SND_PCM_STATE_DISCONNECTED:
        return -ENODEV;
    default:
        return err == -EPIPE || err == -ESTRPIPE ? 0 : err;
    }
}

/* Writes all n frames, recovering by the PCM's state from what a write fails with; an
 * xrun that dropped frames the PCM had taken (alsa_unplayed) ends it early when the
 * caller can play them again (`lost`). At most 100 recoveries in one write. */
static long alsa_write(sm_backend *b, const void *frames, uint32_t n, uint32_t *lost, int *restarted) {
    alsa_backend *a = (alsa_backend *)b;
    uint32_t done = 0;
    int attempts = 0;
    while (done < n) {
        snd_pcm_sframes_t w = snd_pcm_writei(a->pcm, (const char *)frames + done * a->frame_bytes, n - done);
        if (w == -EAGAIN) continue;
        if (w < 0) {
            long dropped = (w == -EPIPE && lost) ? alsa_unplayed(b) : 0;
            *restarted = 1;
            int r = recover(b, (int)w);
            if (r < 0 || ++attempts > 100) {
                int err = r < 0 ? r : (int)w;
                snprintf(b->error, sizeof b->error, "%s", snd_strerror(err));
                return err;
            }
            if (dropped > 0) {
                *lost = (uint32_t)dropped;
                break;
            }
            continue;
        }
        a->since_prepare += (uint64_t)w;
        done += (uint32_t)w;
    }
    return done;
}

/* The standby found the PCM stopped by itself between writes: recovered as a write that
 * failed with what that state says. */
static int alsa_restart(sm_backend *b) {
    return recover(b, snd_pcm_state(pcm_of(b)) == SND_PCM_STATE_SUSPENDED ? -ESTRPIPE : -EPIPE);
}

static void alsa_close(sm_backend *b) {
    alsa_backend *a = (alsa_backend *)b;
    if (a->pcm) {
        snd_pcm_drop(a->pcm);
        snd_pcm_close(a->pcm);
    }
    free(a);
}

static const sm_backend_ops alsa_ops = {
    .state = alsa_state, .avail = alsa_avail, .write = alsa_write, .delay = alsa_delay,
    .drop = alsa_drop, .prepare = alsa_prepare, .close = alsa_close,
    .rewind = alsa_rewind, .pause = alsa_pause, .restart = alsa_restart, .drain = alsa_drain,
    .held = alsa_held,
};

/* ------------------------------------------------------------ open */

static int classify_open_error(int err) {
    switch (-err) {
    case ENOENT: case ENODEV: case ENXIO: return SM_ERR_NO_DEVICE;
    case EBUSY: case EAGAIN: return SM_ERR_BUSY;
    default: return SM_ERR_CONFIG;
    }
}

/* The PCM's dump as text (freed with the output); NULL when it cannot be had. */
static snd_output_t *dump_of(snd_pcm_t *pcm, char **text, size_t *length) {
    snd_output_t *out;
    *text = NULL;
    *length = 0;
    if (snd_output_buffer_open(&out) < 0) return NULL;
    if (snd_pcm_dump(pcm, out) == 0) *length = snd_output_buffer_string(out, text);
    return out;
}

/* What a plug stands in front of (alsa_chain.c). Unreadable: a chain whose pointer is
 * not the card's, without a rate plugin (what the output did for every plug before). */
static sm_alsa_chain chain_of(snd_pcm_t *pcm) {
    char *text;
    size_t length;
    snd_output_t *out = dump_of(pcm, &text, &length);
    sm_alsa_chain chain = sm_alsa_chain_read(text, length);
    if (out) snd_output_close(out);
    return chain;
}

static int configure(alsa_backend *a, const sm_backend_config *c, sm_error *e) {
    snd_pcm_t *pcm = a->pcm;
    sm_backend_info *info = &a->base.info;
    snd_pcm_hw_params_t *hw;
    snd_pcm_sw_params_t *sw;
    snd_pcm_hw_params_alloca(&hw);
    snd_pcm_sw_params_alloca(&sw);
    int err;

#define CHECK(call, what) do { err = (call); if (err < 0) { \
        sm_set_error(e, SM_ERR_CONFIG, err, "ALSA device '%s' refused %s: %s", a->device, what, snd_strerror(err)); \
        return -1; } } while (0)

    CHECK(snd_pcm_hw_params_any(pcm, hw), "any configuration");
    CHECK(snd_pcm_hw_params_set_access(pcm, hw, SND_PCM_ACCESS_RW_INTERLEAVED), "interleaved access");
    if (snd_pcm_hw_params_test_format(pcm, hw, SND_PCM_FORMAT_FLOAT_LE) == 0) {
        info->format = SM_FORMAT_FLOAT;
        CHECK(snd_pcm_hw_params_set_format(pcm, hw, SND_PCM_FORMAT_FLOAT_LE), "float samples");
    } else if (snd_pcm_hw_params_test_format(pcm, hw, SND_PCM_FORMAT_S32_LE) == 0) {
        info->format = SM_FORMAT_S32;
        CHECK(snd_pcm_hw_params_set_format(pcm, hw, SND_PCM_FORMAT_S32_LE), "32-bit samples");
    } else if (snd_pcm_hw_params_test_format(pcm, hw, SND_PCM_FORMAT_S16_LE) == 0) {
        info->format = SM_FORMAT_S16;
        CHECK(snd_pcm_hw_params_set_format(pcm, hw, SND_PCM_FORMAT_S16_LE), "16-bit samples");
    } else {
        sm_set_error(e, SM_ERR_FORMAT, 0, "ALSA device '%s' takes none of float, S32 or S16 samples", a->device);
        return -1;
    }
    CHECK(snd_pcm_hw_params_set_channels(pcm, hw, SM_CHANNELS), "2 channels");
    unsigned rate = c->rate ? c->rate : 44100;
    CHECK(snd_pcm_hw_params_set_rate_near(pcm, hw, &rate, NULL), "the sample rate");
    unsigned buffer_us = c->buffer_us ? c->buffer_us : ALSA_BUFFER_US;
    unsigned periods = c->periods ? c->periods : 4;
    unsigned period_us = buffer_us / periods;
    /* By default a period lasts a whole number of 10 ms (100 ms: five of 20 ms): that is
     * a whole number of frames at every usual rate, so ALSA's rate plugin maps a period at
     * 44.1 kHz onto one at 48 kHz exactly (882 onto 960 frames). With 25 ms it mapped 1102
     * frames onto 1200, and everything played through plughw ran 454 ppm slow (measured
     * by the sound-card rig: the end gong of a 20-minute sit 0.5 s late). */
    if (!c->periods && period_us >= 10000) period_us -= period_us % 10000;
    /* At least three periods (unless fewer were asked for): a dmix whose buffer holds two
     * of its periods or less (its hw_ptr_alignment "auto") starts mixing at the card's next
     * period boundary, while its delay counts from where the card is, so everything was
     * heard up to a period later than the delay said: 36 to 101 ms through a dmix with
     * ALSA's default 125-ms periods, a new amount at every open (a probe in the sound-card
     * rig); seeks through it landed that far off. With three, 0 to 2 ms. A device that
     * cannot have three keeps what it can (a failed set_periods_min leaves hw as it was). */
    if (periods >= 3) {
        unsigned min_periods = 3;
        (void)snd_pcm_hw_params_set_periods_min(pcm, hw, &min_periods, NULL);
    }
    const unsigned asked_us = buffer_us;
    CHECK(snd_pcm_hw_params_set_buffer_time_near(pcm, hw, &buffer_us, NULL), "the buffer size");
    CHECK(snd_pcm_hw_params_set_period_time_near(pcm, hw, &period_us, NULL), "the period size");
    CHECK(snd_pcm_hw_params(pcm, hw), "the hardware configuration");

    snd_pcm_uframes_t buffer_size, period_size;
    CHECK(snd_pcm_hw_params_get_buffer_size(hw, &buffer_size), "reporting its buffer size");
    CHECK(snd_pcm_hw_params_get_period_size(hw, &period_size, NULL), "reporting its period size");
    CHECK(snd_pcm_hw_params_get_rate(hw, &rate, NULL), "reporting its rate");
    info->rate = rate;
    a->frame_bytes = SM_CHANNELS * (info->format == SM_FORMAT_S16 ? 2 : 4);
    info->buffer_frames = (uint32_t)buffer_size;
    info->period_frames = (uint32_t)period_size;
    snd_pcm_type_t type = snd_pcm_type(pcm);
    /* What stands in front of the card. A plug opened without automatic resampling holds
     * no rate plugin of its own; behind plughw there are only its format and channel
     * layers, or none (the sound-card rig's plughw: the card itself), and its pointer is
     * the card's. Read from its dump: a chain a user configured may differ. */
    sm_alsa_chain chain = { type == SND_PCM_TYPE_RATE, type == SND_PCM_TYPE_HW };
    if (type == SND_PCM_TYPE_PLUG) chain = chain_of(pcm);
    /* ALSA's rate plugin converts whole periods (alsa_held), and this is what the
     * sound-card rig measured through one: a pause is a drop, and a resume a prepare
     * (paused with its fade played out, the plug with its rate plugin lost a period at two
     * of four resumes in the rig: an xrun as the card went on; dropped, none). A plug in
     * front of what is not the card (a dmix) keeps the same arithmetic, with which the rig
     * measured it: taken away, the dmix with 125-ms periods counted an xrun at a start
     * from the standby in one of three runs (in none of the runs with it). */
    a->whole_periods = chain.rate_plugin || (type == SND_PCM_TYPE_PLUG && !chain.card_pointer);
    if (!a->whole_periods) a->ops.held = NULL;
    info->deep_refill = !a->whole_periods;
    if (!snd_pcm_hw_params_can_pause(hw) || a->whole_periods) a->ops.pause = NULL;
    /* External (ioplug/extplug) devices such as pulse hand each write to another process
     * at once: snd_pcm_rewind moves their pointer but cannot take back what the server
     * already holds, so a "rewound" ramp would repeat audio and click. On those the
     * ramp goes after what is queued instead. */
    a->external = type == SND_PCM_TYPE_IOPLUG || type == SND_PCM_TYPE_EXTPLUG;
    if (a->external) a->ops.rewind = NULL;
    /* A card's pointer (and a plugin's in front of it) moves in steps and its delay lags
     * (clock.c); an ioplug's is its server's, which may run either way. */
    info->pointer_lags = !a->external;
    /* A plugin chain whose pointer is not the card's (a rate converter, a dmix in front
     * of the card) reports a delay that is not exact to the frame: a pause that dropped
     * the stream once the delay said only the silent tail was left dropped the end of the
     * fade too (about 250 frames through plughw's rate converter and the dmix, measured by
     * the sound-card rig). Behind the fade a period of zeros more, so what is dropped is
     * silence. */
    if (!chain.card_pointer) {
        uint32_t ramp = sm_ramp_frames(rate);
        /* A plugin's pointer need not be the card's to the frame (a dmix reads its
         * card's, which may stand still between the card's period interrupts): a rewind
         * leaves a period queued. Taken back to a few ms, a session starting from the
         * standby through the rig's dmix (125-ms periods) counted an underrun (2 of 2),
         * and once an xrun. */
        a->rewind_keep = (uint32_t)period_size;
        info->pause_tail_frames = ramp + (uint32_t)period_size;
        info->pause_left_frames = ramp;
        /* An eighth of a period at least: the plugin's period arithmetic rounds (the
         * card's free room and its own differ by a frame or two). */
        if (a->whole_periods) info->headroom_frames = (uint32_t)period_size / 8;
    } else {
        /* Paused in place, the card must stop before it plays past the zeros behind the
         * fade: past them lies what the pause's rewind took back, still in its buffer.
         * With a ramp of them (5 ms) left when it pauses, an output thread that woke 5 ms
         * late let the card play 3 ms of that audio (once in 20 pauses in the sound-card
         * rig, under emulation). A period of zeros is left now, 20 ms of slack; a resume
         * starts 15 ms later. */
        uint32_t ramp = sm_ramp_frames(rate);
        info->pause_tail_frames = ramp + (uint32_t)period_size;
        info->pause_left_frames = (uint32_t)period_size;
    }

    /* The queue kept is what was asked for, and two periods at least (a device wakes the
     * output once a period: with less than two queued a late wake-up runs it dry, as the
     * dmix's did with 1 of its 125-ms periods queued). Of a buffer the device made deeper
     * (the dmix's three periods of 125 ms, for 100 ms asked), the rest stays free. */
    uint64_t keep = (uint64_t)asked_us * rate / 1000000;
    if (keep < 2 * (uint64_t)period_size) keep = 2 * (uint64_t)period_size;
    if (buffer_size > keep && buffer_size - keep > info->headroom_frames)
        info->headroom_frames = (uint32_t)(buffer_size - keep);

    CHECK(snd_pcm_sw_params_current(pcm, sw), "software parameters");
    snd_pcm_uframes_t margin = period_size > info->headroom_frames ? period_size : info->headroom_frames;
    snd_pcm_uframes_t start = buffer_size > margin ? buffer_size - margin : period_size;
    CHECK(snd_pcm_sw_params_set_start_threshold(pcm, sw, start), "the start threshold");
    CHECK(snd_pcm_sw_params_set_avail_min(pcm, sw, period_size), "the wake-up size");
    /* The card zeroes what it has played: a stall that runs it dry plays silence, not
     * the stale end of the buffer once more (4 ms of it in the rig before the xrun was
     * seen). Not every plugin takes it; then as before. */
    snd_pcm_uframes_t boundary;
    if (snd_pcm_sw_params_get_boundary(sw, &boundary) == 0 &&
        snd_pcm_sw_params_set_silence_threshold(pcm, sw, 0) == 0)
        snd_pcm_sw_params_set_silence_size(pcm, sw, boundary);
    CHECK(snd_pcm_sw_params(pcm, sw), "the software configuration");
#undef CHECK
    return 0;
}

void sm_alsa_warm(const char *name) {
    /* What snd_pcm_open does before it opens anything: the global configuration (loaded
     * once, under alsa-lib's lock) and the device's definition expanded from it, which
     * runs the hooks it meets (99-pulse.conf's loads libpulse and asks whether a server
     * runs). An open after this takes microseconds of it instead of milliseconds (5.9 ms
     * for `null` on this machine; a Pi or the rig's emulated guest pay many times that).
     * A name that does not resolve says why again at its open: nothing is reported here. */
    snd_lib_error_set_handler(alsa_error_handler);
    snd_config_t *top = NULL, *conf = NULL;
    if (snd_config_update_ref(&top) >= 0) {
        if (snd_config_search_definition(top, "pcm", name, &conf) >= 0) snd_config_delete(conf);
        snd_config_unref(top);
    }
    alsa_last_message[0] = 0;
}

sm_backend *sm_alsa_open(const sm_backend_config *c, sm_error *e) {
    alsa_backend *a = calloc(1, sizeof *a);
    if (!a) { sm_set_error(e, SM_ERR_MEMORY, 0, "out of memory"); return NULL; }
    a->ops = alsa_ops;
    a->base.ops = &a->ops;
    a->base.name = "alsa";
    a->base.label = "ALSA";
    snprintf(a->device, sizeof a->device, "%s", c->name && *c->name ? c->name : "default");
    alsa_last_message[0] = 0;
    snd_lib_error_set_handler(alsa_error_handler);
    /* Non-blocking open: a busy hw device fails at once (EBUSY) instead of waiting until
     * whoever holds it lets go; then back to blocking writes (as MPD does).
     * Without ALSA's automatic resampling (MPD's auto_resample "no"): a plug (plughw,
     * `default` over a dmix) then offers the card's own rate, and the engine renders at it
     * (soxr for the files). ALSA's rate plugin maps whole periods onto whole periods: a
     * dmix's 125-ms periods (5512.5 frames at 44.1 kHz) played everything 91 ppm slow in
     * the sound-card rig, and the stock dmix's 1024 frames at 48 kHz would be 940.8; its
     * linear interpolation is no match for soxr either, and converting an idle
     * standby's silence cost more CPU than aplay. */
    int err = snd_pcm_open(&a->pcm, a->device, SND_PCM_STREAM_PLAYBACK, SND_PCM_NONBLOCK | SND_PCM_NO_AUTO_RESAMPLE);
    if (err >= 0 && (err = snd_pcm_nonblock(a->pcm, 0)) < 0) snd_pcm_close(a->pcm);
    if (err < 0) {
        int code = classify_open_error(err);
        if (alsa_last_message[0])
            sm_set_error(e, code, err, "cannot open ALSA device '%s': %s (%s)", a->device, snd_strerror(err), alsa_last_message);
        else
            sm_set_error(e, code, err, "cannot open ALSA device '%s': %s", a->device, snd_strerror(err));
        a->pcm = NULL;
        alsa_close(&a->base);
        return NULL;
    }
    if (configure(a, c, e) < 0) {
        alsa_close(&a->base);
        return NULL;
    }
    return &a->base;
}

int sm_alsa_is_pulse_plugin(sm_backend *b) {
    snd_pcm_t *pcm = pcm_of(b);
    if (snd_pcm_type(pcm) != SND_PCM_TYPE_IOPLUG) return 0;
    char *text;
    size_t length;
    snd_output_t *out = dump_of(pcm, &text, &length);
    int found = text && memmem(text, length, "PulseAudio", 10) != NULL;
    if (out) snd_output_close(out);
    return found;
}
