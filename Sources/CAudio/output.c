/*
 * The output thread: it consumes the ring, applies the ramps of pause, seek, resume and
 * fade, and keeps the clock; the device is an sm_backend (backend.h) it knows only
 * through that interface. control.c opens it and answers the other threads.
 *
 * Inside the thread's loop our code allocates nothing, takes no lock and never calls
 * into Swift: all buffers are made in sm_output_open, the control side talks to the
 * thread through atomics, and the thread wakes the waiting side with a futex (a system
 * call, not a lock). (On a PulseAudio stream the calls into libpulse take its
 * priority-inheriting mainloop lock, as ALSA's pulse plugin does inside snd_pcm_writei.)
 *
 * Writes never block on a running device: the thread writes what avail says fits and
 * otherwise sleeps on the request futex until a period is free, so a pause, stop or
 * seek is taken up at once however deep the device buffer is.
 *
 * Accounting. dev_pos counts frames handed to the device; every run of ring frames
 * written contiguously is recorded as a segment (device position, ring index, length).
 * Silence written because the device would run dry has no segment, so the clock stands
 * still while it plays. The frame heard now is dev_pos - delay, mapped through the
 * segments to a ring index: that is the engine clock (played_index).
 */
#define _GNU_SOURCE
#include "caudio.h"
#include "internal.h"
#include "priority.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define CHANNELS SM_CHANNELS

/* ------------------------------------------------------------ accounting */

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

/* Publishes the frame heard now. While the device plays, readers extrapolate from it in
 * real time (sm_output_played_index) up to `limit`: the thread wakes once a period (125 ms
 * on a PulseAudio stream), and a clock read between wake-ups was up to a period stale. */
void sm_out_publish_clock(sm_output *o, uint64_t idx, uint64_t limit, int playing) {
    uint32_t q = atomic_load_explicit(&o->clock_seq, memory_order_relaxed);
    atomic_store_explicit(&o->clock_seq, q + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&o->played_index, idx, memory_order_relaxed);
    atomic_store_explicit(&o->clock_limit, limit > idx ? limit : idx, memory_order_relaxed);
    atomic_store_explicit(&o->clock_ns, playing ? sm_monotonic_ns() : 0, memory_order_relaxed);
    atomic_store_explicit(&o->clock_seq, q + 2, memory_order_release);
}

/* Maps the device position heard now to a ring index and publishes it. */
static void update_clock(sm_output *o) {
    long delay = 0;
    sm_dev_state st = dev_state(o);
    if (st == SM_DEV_RUNNING || st == SM_DEV_PREPARED || st == SM_DEV_PAUSED ||
        st == SM_DEV_DRAINING) {
        if (dev_delay(o, &delay) < 0) delay = 0;
    }
    if (delay < 0) delay = 0;
    if ((uint64_t)delay > o->dev_pos) delay = (long)o->dev_pos;
    uint64_t played_dev = o->dev_pos - (uint64_t)delay;
    /* A card's pointer steps, and a read between two steps lags (clock.c); a pointer that
     * moves only once a period lags by up to one. */
    int paced = atomic_load_explicit(&o->st_paced, memory_order_relaxed);
    if (o->dev->info.pointer_lags && st == SM_DEV_RUNNING && paced)
        played_dev = sm_clock_envelope_step(&o->clock_env, played_dev, sm_monotonic_ns(), o->info.rate,
                                            o->info.period_frames, o->dev_pos);
    else
        o->clock_env.ns = 0;
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
    int playing = inside && o->state == ST_RUNNING && st == SM_DEV_RUNNING && paced;
    if (idx > prev || o->state != ST_RUNNING)
        sm_out_publish_clock(o, idx, s->ring_start + s->len, playing);
}

void sm_out_fail(sm_output *o, int err, const char *what) {
    sm_set_error(&o->last_error, SM_ERR_DEVICE_LOST, err, "%s device '%s' failed while %s: %s", o->dev->label,
                 o->device, what, o->dev->ops->strerror(o->dev, err));
    o->last_error.sound_server = o->dev->info.sound_server;
    o->state = ST_FAILED;
    atomic_store_explicit(&o->st_failed, 1, memory_order_release);
}

/* Bytes per frame in the device's format. */
static size_t device_frame_bytes(const sm_output *o) {
    return CHANNELS * sm_format_bytes(o->info.format);
}

/* The n frames of fbuf in the device's format (`silent`: n frames of zeros, fbuf unused):
 * fbuf itself for a float device, else obuf. Either holds chunk_frames. */
static void *device_frames(sm_output *o, uint32_t n, int silent) {
    size_t samples = (size_t)n * CHANNELS;
    if (silent) {
        /* Zeros as they are, in the device's format: the standby writes nothing else
         * between sessions, and converting (and dithering) them cost CPU for nothing. */
        void *zeros = o->info.format == SM_FORMAT_FLOAT ? (void *)o->fbuf : o->obuf;
        memset(zeros, 0, (size_t)n * device_frame_bytes(o));
        return zeros;
    }
    if (o->info.format == SM_FORMAT_S16) {
        sm_convert_s16(o->fbuf, o->obuf, samples, &o->dither);
        return o->obuf;
    }
    if (o->info.format == SM_FORMAT_S32) {
        sm_convert_s32(o->fbuf, o->obuf, samples);
        return o->obuf;
    }
    return o->fbuf;
}

/* Writes n frames of src (from device_frames). Returns the frames written: all n, or
 * fewer when `lost` is given and a recovery from an xrun found that the device had
 * dropped frames it took before (*lost of them, ops.unplayed): the caller plays those
 * again first, then the rest. -1 when the device is lost. */
static long write_src(sm_output *o, const void *src, uint32_t n, uint32_t *lost) {
    size_t frame_bytes = device_frame_bytes(o);
    uint32_t done = 0;
    int attempts = 0;
    while (done < n) {
        long w = o->dev->ops->write(o->dev, (const char *)src + done * frame_bytes, n - done);
        if (w == -EAGAIN) continue;
        if (w < 0) {
            long dropped = (w == -EPIPE && lost && o->dev->ops->unplayed) ? o->dev->ops->unplayed(o->dev) : 0;
            int r = dev_recover(o, (int)w);
            if (r < 0 || ++attempts > 100) { sm_out_fail(o, r < 0 ? r : (int)w, "playing"); return -1; }
            if (dropped > 0) {
                *lost = (uint32_t)dropped;
                break;
            }
            continue;
        }
        done += (uint32_t)w;
    }
    o->dev_pos += done;
    return done;
}

/* Converts and writes `n` frames of fbuf (`silent`: zeros): write_src's result. */
static long write_frames(sm_output *o, uint32_t n, int silent, uint32_t *lost) {
    return write_src(o, device_frames(o, n, silent), n, lost);
}

/* Applies the ramp gain to fbuf in place. A fade-out multiplies, then steps down
 * (1, 1-1/n, ..., 1/n); a fade-in steps up, then multiplies (1/n, ..., 1): no frame of
 * either ramp is silenced outright, so every played frame stays audible. The first `got`
 * frames are ring frames from `start`: the gain each is played at is kept beside it in the
 * history, so a rewind into a ramp goes on from the gain last heard (a pause right after a
 * resume took back part of the fade-in and faded out from full gain: a click). */
static void apply_gain(sm_output *o, uint32_t n, uint64_t start, uint32_t got) {
    const uint32_t mask = o->hist_cap - 1;
    if (o->gain == 1.0f && o->gain_target == 1.0f) {
        for (uint32_t i = 0; i < got; i++) o->hist_gain[(start + i) & mask] = 1.0f;
        return;
    }
    float g = o->gain;
    const float target = o->gain_target;
    const float step = o->gain_step;
    for (uint32_t i = 0; i < n; i++) {
        if (g < target) { g += step; if (g > target) g = target; }
        o->fbuf[2 * i] *= g;
        o->fbuf[2 * i + 1] *= g;
        if (i < got) o->hist_gain[(start + i) & mask] = g;
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
                sm_futex_wake(&o->space_counter);
        }
    }
    return got;
}

static uint32_t pending_frames(sm_output *o) {
    return (uint32_t)(o->replay_to > o->next_ring ? o->replay_to - o->next_ring : 0) + sm_ring_readable(o->ring);
}

/* The frames of the last run of ring frames written, if it ends where the device's
 * position does (0 when silence or nothing came after it): how far back what was written
 * can be played again. */
static uint64_t last_run(sm_output *o) {
    if (!o->seg_count) return 0;
    const segment *s = &o->seg[o->seg_count - 1];
    return s->dev_start + s->len == o->dev_pos ? s->len : 0;
}

/* The last `k` frames handed to the device (k <= last_run) and the `unwritten` frames
 * fetched after them are to be played again from the history: a rewind took them back,
 * or an xrun dropped them. Goes on from the gain of the last frame left on the device
 * (silence, or nothing, before the history's start). */
static void unwrite(sm_output *o, uint64_t k, uint32_t unwritten) {
    if (k) {
        o->dev_pos -= k;
        o->seg[o->seg_count - 1].len -= k;
        if (o->seg[o->seg_count - 1].len == 0) o->seg_count--;
    }
    if (k + unwritten == 0) return;
    if (o->replay_to < o->next_ring) o->replay_to = o->next_ring;
    o->next_ring -= k + unwritten;
    o->hist_valid = o->hist_valid > k + unwritten ? o->hist_valid - (uint32_t)(k + unwritten) : 0;
    o->gain = o->hist_valid ? o->hist_gain[(o->next_ring - 1) & (o->hist_cap - 1)] : 0.0f;
}

/* After an xrun that dropped `lost` frames the device had taken (the last ones written),
 * and `unwritten` frames fetched but not written: both are played again. The unwritten
 * ones were just fetched, so they are in the history; the lost ones before them only as
 * far as it (hist_valid counts what is sure) and the last run reach. */
static void replay_dropped(sm_output *o, uint32_t lost, uint32_t unwritten) {
    uint64_t before = o->hist_valid > unwritten ? o->hist_valid - unwritten : 0;
    uint64_t k = last_run(o);
    if (k > lost) k = lost;
    if (k > before) k = before;
    unwrite(o, k, unwritten);
}

/* Writes up to n ring frames. */
static int play_ring(sm_output *o, uint32_t n) {
    uint64_t start = o->next_ring;
    uint32_t got = fetch(o, n);
    if (!got) return 0;
    apply_gain(o, got, start, got);
    uint64_t dev_start = o->dev_pos;
    uint32_t lost = 0;
    long done = write_frames(o, got, 0, &lost);
    if (done < 0) return -1;
    if (done) add_segment(o, dev_start, start, (uint64_t)done);
    if (lost) replay_dropped(o, lost, got - (uint32_t)done);
    o->refill_grace = 0;   /* the producer has refilled */
    long delay;
    if (!atomic_load_explicit(&o->st_paced, memory_order_relaxed) &&
        dev_state(o) == SM_DEV_RUNNING && dev_delay(o, &delay) == 0 && delay > 0)
        atomic_store_explicit(&o->st_paced, 1, memory_order_relaxed);
    update_clock(o);
    publish_stats(o);
    return 0;
}

int sm_out_play_silence(sm_output *o, uint32_t n, int count_as_underflow) {
    /* In pieces of the buffers' size: a pause's tail may be longer than a period. */
    for (uint32_t left = n; left > 0;) {
        uint32_t k = left < o->chunk_frames ? left : o->chunk_frames;
        if (write_frames(o, k, 1, NULL) < 0) return -1;
        left -= k;
    }
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

/* Frames queued on the device and not yet heard that may be taken back, less a safety
 * margin of 2 ms and a ramp, and what the device keeps queued (info.rewind_keep_frames: a
 * period through a plugin) (0: none, or a device that does not rewind). Never more than
 * the delay (0 on a device that does not pace, such as null or file). */
long sm_out_takeable(sm_output *o) {
    if (!o->info.can_rewind) return 0;
    sm_dev_state st = dev_state(o);
    if (st != SM_DEV_RUNNING && st != SM_DEV_PREPARED) return 0;
    long rewindable = dev_rewindable(o);
    long queued = 0;
    if (dev_delay(o, &queued) < 0 || queued < 0) queued = 0;
    if (rewindable > queued) rewindable = queued;
    long k = rewindable - (long)(o->info.rate / 500 + o->ramp_frames + o->dev->info.rewind_keep_frames);
    return k > 0 ? k : 0;
}

/* Takes back what the device has queued but not yet played, beyond a safety margin
 * (the device's rewind), so that what we write next is heard within a few ms. The frames
 * taken back are played again from the history. */
static void take_back(sm_output *o) {
    long k = sm_out_takeable(o);
    uint64_t tail = last_run(o);
    if (tail > o->hist_valid) tail = o->hist_valid;
    if ((uint64_t)k > tail) k = (long)tail;
    if (k <= 0) return;
    long back = dev_rewind(o, (unsigned long)k);
    if (back <= 0) return;
    unwrite(o, (uint64_t)back, 0);
    atomic_fetch_add_explicit(&o->st_rewinds, 1, memory_order_relaxed);
}

/* Frames in the ring with which a stream (re)starts after silence, a standby's end or a
 * seek's refill (the silence before them is taken back then): a tenth of a second (a new
 * session's first blocks come within a millisecond of each other), so the stream does not
 * run dry at once. */
uint32_t sm_out_start_frames(const sm_output *o) {
    uint32_t want = o->info.rate / 10, half = o->info.ring_frames / 2;
    return want < half ? want : half;
}

/* Takes back the silence queued after the last audio written (where the device allows),
 * down to the safety margin of sm_out_takeable and the device's silence_keep_frames:
 * what is written next is heard within a few ms. Audio already queued is never touched.
 * (A start from the standby; a seek once the producer has refilled.) */
void sm_out_take_back_silence(sm_output *o) {
    o->refill_silence = 0;
    uint64_t audio_end = 0;
    if (o->seg_count) audio_end = o->seg[o->seg_count - 1].dev_start + o->seg[o->seg_count - 1].len;
    uint64_t silence = o->dev_pos > audio_end ? o->dev_pos - audio_end : 0;
    long k = sm_out_takeable(o) - (long)o->dev->info.silence_keep_frames;
    if ((uint64_t)k > silence) k = (long)silence;
    if (k <= 0) return;
    long back = dev_rewind(o, (unsigned long)k);
    if (back > 0) o->dev_pos -= (uint64_t)back;
}

/* Ramps the output to zero within ~5 ms of what is heard now: takes back queued audio,
 * then writes a 5-ms fade of the same audio, and up to `zeros` frames of silence after it
 * in the same write (as many as the buffers hold). Sets stop_index to the first ring frame
 * not played. Returns the zeros written, or -1 when the device is lost.
 * Why one write: on a sound server's stream the take-back and what comes after it reach
 * the server as one message then. The fade alone (5 ms, 17 ms queued after the
 * take-back) let PulseAudio's sink, mixing far ahead, run the stream dry before the
 * pause's zeros arrived in the next message: an underrun at 1 in 20 pauses. */
int sm_out_ramp_out(sm_output *o, uint32_t zeros) {
    o->fading = 0;   /* a pause or flush overrides a fade in progress */
    take_back(o);
    o->gain_target = 0.0f;
    o->gain_step = 1.0f / (float)o->ramp_frames;
    uint32_t n = o->ramp_frames;
    uint32_t z = 0;
    if (o->gain > 0.0f) {
        uint64_t start = o->next_ring;
        uint32_t got = fetch(o, n);
        if (got < n) {
            /* Less queued than a ramp (a device about to run dry): the fade is shorter,
             * over what there is, rather than cut off where the audio ends. */
            memset(o->fbuf + 2 * got, 0, (size_t)(n - got) * CHANNELS * sizeof(float));
            if (got) o->gain_step = o->gain / (float)got;
        }
        apply_gain(o, n, start, got);
        o->gain_step = 1.0f / (float)o->ramp_frames;   /* the fade-in after it: full length */
        /* chunk_frames >= ramp_frames (sm_output_open) */
        z = o->chunk_frames - n < zeros ? o->chunk_frames - n : zeros;
        char *src = device_frames(o, n, 0);
        memset(src + (size_t)n * device_frame_bytes(o), 0, (size_t)z * device_frame_bytes(o));
        uint64_t dev_start = o->dev_pos;
        if (write_src(o, src, n + z, NULL) < 0) return -1;
        if (got) add_segment(o, dev_start, start, got);
        if (z) o->hist_valid = 0;   /* a rewind must not reach back across silence */
    }
    o->gain = 0.0f;
    o->replay_to = 0;
    atomic_store_explicit(&o->stop_index, o->next_ring, memory_order_release);
    return (int)z;
}

void sm_out_flush_ring(sm_output *o) {
    sm_ring_flush(o->ring);
    o->next_ring = sm_ring_read_index(o->ring);
    o->replay_to = 0;
    o->hist_valid = 0;
    atomic_fetch_add_explicit(&o->space_counter, 1, memory_order_seq_cst);
    sm_futex_wake(&o->space_counter);
}

static void sleep_frames(sm_output *o, uint64_t frames) {
    uint64_t ns = frames * 1000000000ull / o->info.rate;
    if (ns > 20000000ull) ns = 20000000ull;
    struct timespec ts = { 0, (long)ns };
    nanosleep(&ts, NULL);
}

/* After a fade to zero (and `written` of the zeros after it): lets it play out, pauses
 * the device and flushes the ring. */
static void settle_paused(sm_output *o, uint32_t written) {
    /* Zeros after the fade, so the device holds silence while paused. */
    const uint32_t left = o->pause_left;
    /* On a device that converts whole periods the zeros end on a period boundary: a
     * partial period would wait inside it, and the card run dry before it. */
    uint32_t tail = o->pause_tail > written ? o->pause_tail - written : 0;
    const uint32_t period = o->info.period_frames;
    if (o->dev->info.whole_periods && period) {
        uint32_t rest = (dev_held(o) + tail) % period;
        if (rest) tail += period - rest;
    }
    if (sm_out_play_silence(o, tail, 0) < 0) return;
    /* Let the fade play out before pausing. */
    for (int i = 0; i < 50; i++) {
        long delay;
        if (dev_state(o) != SM_DEV_RUNNING || dev_delay(o, &delay) < 0 ||
            delay <= (long)left)
            break;
        sleep_frames(o, (uint64_t)delay - left);
    }
    sm_dev_state st = dev_state(o);
    if (st == SM_DEV_RUNNING && o->info.can_pause && dev_pause(o, 1) == 0) {
        /* paused in place */
    } else if (st == SM_DEV_RUNNING || st == SM_DEV_PREPARED) {
        dev_drop(o);
    }
    sm_out_flush_ring(o);
    o->refill_silence = 0;
    o->state = ST_PAUSED;
    o->draining = 0;     /* a fade or pause that came during a drain: the stream rests instead */
    o->gain_step = 1.0f / (float)o->ramp_frames;
    uint64_t stop = atomic_load(&o->stop_index);
    sm_out_publish_clock(o, stop, stop, 0);
}

static void do_pause(sm_output *o) {
    int written = sm_out_ramp_out(o, o->pause_tail);
    if (written < 0) return;
    settle_paused(o, (uint32_t)written);
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
    settle_paused(o, 0);
}

static void do_resume(sm_output *o) {
    if (o->state == ST_PAUSED || o->state == ST_DRAINED) {
        sm_dev_state st = dev_state(o);
        o->gain = 0.0f;  /* from silence, with a fade-in (after a pause it is 0 already) */
        o->gain_target = 1.0f;
        if (st == SM_DEV_PAUSED) {
            /* Paused in place, the card holds only the pause's last zeros, and past them
             * what the pause's rewind took back, still in its buffer. With the fade-in
             * written only once the card went on, an output thread late by more than
             * those zeros (a ramp, then) let it play on into that: 2.9 ms of stale audio
             * and a click, once in 20 pauses in the sound-card rig. The fade-in's first
             * period goes in while it is paused (not on a server's stream, whose resume
             * needs a lead of silence). */
            if (!o->resume_lead && o->info.can_rewind) {
                o->state = ST_RUNNING;
                uint32_t pending = pending_frames(o), period = o->info.period_frames;
                if (pending) play_ring(o, pending < period ? pending : period);
            }
            if (dev_pause(o, 0) < 0) dev_prepare(o);
        } else if (st == SM_DEV_STOPPED || st == SM_DEV_XRUN) {
            dev_prepare(o);
        }
        o->state = ST_RUNNING;
        if (o->resume_lead) sm_out_play_silence(o, o->resume_lead, 0);
    }
    o->gain_target = 1.0f;
}

static void do_flush(sm_output *o) {
    if (sm_out_ramp_out(o, 0) < 0) return;
    sm_out_flush_ring(o);
    o->gain_target = 1.0f;
    /* The ring is empty now and the producer refills it from the new position: the
     * silence a running device needs meanwhile is the seek's, not an underrun (up to
     * 200 ms; a producer that takes longer is stalled, and counted). */
    o->refill_grace = o->info.rate / 5;
    /* That silence goes in whole periods (a PulseAudio stream's are 125 ms): written in
     * front of the new audio, it left 250 ms between the old audio and the new at every
     * seek there (20-40 ms on hw). It is taken back once the producer has refilled. */
    o->refill_silence = atomic_load_explicit(&o->st_paced, memory_order_relaxed);
}

/* Marks requests up to `seq` done; never moves back (a drain finished late must not undo
 * a pause handled meanwhile). */
static void finish_request(sm_output *o, uint32_t seq) {
    if ((int32_t)(seq - o->handled_seq) > 0) o->handled_seq = seq;
    uint32_t done = atomic_load_explicit(&o->done_seq, memory_order_relaxed);
    if ((int32_t)(seq - done) > 0) atomic_store_explicit(&o->done_seq, seq, memory_order_release);
    sm_futex_wake(&o->done_seq);
}

static void handle_requests(sm_output *o) {
    uint32_t seq = atomic_load_explicit(&o->req_seq, memory_order_acquire);
    if (seq == o->handled_seq) return;
    int type = atomic_load_explicit(&o->req_type, memory_order_acquire);
    if (o->state == ST_FAILED) { finish_request(o, seq); return; }
    if (o->state == ST_STANDBY) {
        /* A session that asks to resume or to drain has written what it has: it plays. A
         * pause or a flush before it was heard flushes the ring, and the standby goes on. */
        if ((type == SM_REQ_RESUME || type == SM_REQ_DRAIN) && sm_ring_readable(o->ring) > 0) {
            sm_standby_leave(o);
        } else {
            if (type == SM_REQ_PAUSE || type == SM_REQ_FLUSH || type == SM_REQ_FADE) {
                sm_out_flush_ring(o);
                atomic_store_explicit(&o->stop_index, o->next_ring, memory_order_release);
            }
            finish_request(o, seq);
            return;
        }
    }
    if (type == SM_REQ_STANDBY) {
        sm_standby_enter(o);
        finish_request(o, seq);
        return;
    }
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
            sm_out_flush_ring(o);
            atomic_store_explicit(&o->stop_index, o->next_ring, memory_order_release);
        }
        break;
    /* A drain or a fade is taken up here and finished in the loop (finish_request of
     * loop_seq then, so that a request posted meanwhile is still handled). Taken up means
     * handled: the waits sleep again (before, they saw the request as pending and the
     * thread spun until the drain or fade was over). */
    case SM_REQ_DRAIN:
        /* Frames came after the last drain was over (a later end): they play first. The
         * output thread may learn of them only with this request (it was inside the last
         * drain's dev_drain while the render thread wrote them), and acknowledging it at
         * once ended the session with them unplayed. */
        if (o->state == ST_DRAINED && sm_ring_readable(o->ring) > 0) do_resume(o);
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

/* Sleeps until the producer writes (unless `want` frames are there already) or a request
 * comes, or the timeout passes. */
void sm_out_wait_for_data(sm_output *o, uint32_t want, int timeout_ms) {
    uint32_t c = atomic_load_explicit(&o->data_counter, memory_order_seq_cst);
    atomic_store_explicit(&o->consumer_waiting, 1, memory_order_seq_cst);
    if (sm_ring_readable(o->ring) < want &&
        atomic_load_explicit(&o->req_seq, memory_order_seq_cst) == o->handled_seq &&
        !atomic_load_explicit(&o->quit, memory_order_seq_cst))
        sm_futex_wait(&o->data_counter, c, timeout_ms);
    atomic_store_explicit(&o->consumer_waiting, 0, memory_order_relaxed);
}

/* Sleeps until a request comes or the timeout passes (data from the producer does not
 * wake it: this is the wait for room in the device). */
static void wait_for_request(sm_output *o, int timeout_ms) {
    uint32_t c = atomic_load_explicit(&o->data_counter, memory_order_seq_cst);
    if (atomic_load_explicit(&o->req_seq, memory_order_seq_cst) == o->handled_seq &&
        !atomic_load_explicit(&o->quit, memory_order_seq_cst))
        sm_futex_wait(&o->data_counter, c, timeout_ms);
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
    sm_out_publish_clock(o, o->next_ring, o->next_ring, 0);
    finish_request(o, o->loop_seq);
}

static int frames_to_ms(const sm_output *o, uint64_t frames) {
    uint64_t ms = (frames * 1000 + o->info.rate - 1) / o->info.rate;
    return ms < 1 ? 1 : (ms > 1000 ? 1000 : (int)ms);
}

static void set_realtime(sm_output *o) {
    if (!o->want_realtime) { atomic_store(&o->st_realtime, 0); return; }
    int err = sm_thread_set_fifo(o->rt_priority);
    if (err == 0) {
        atomic_store(&o->st_realtime, 1);
    } else {
        atomic_store(&o->st_rt_errno, err);
        atomic_store(&o->st_realtime, 0);
    }
}

/* The device would run dry and the ring has nothing for it: a period of silence, an
 * underflow unless a seek's refill is within its grace. */
static void play_dry_silence(sm_output *o, uint32_t period) {
    int counted = o->refill_grace == 0;
    o->refill_grace = o->refill_grace > period ? o->refill_grace - period : 0;
    sm_out_play_silence(o, period, counted);
}

/* The device holds `delay` frames, a period or more: sleeps until the ring has `want`
 * frames or a request comes, at most until only a period is left queued. */
static void wait_while_fed(sm_output *o, long delay, uint32_t want) {
    update_clock(o);
    uint64_t slack = (uint64_t)delay - o->info.period_frames;
    int ms = (int)(slack * 1000 / o->info.rate);
    sm_out_wait_for_data(o, want, ms < 1 ? 1 : ms);
}

void *sm_output_thread_main(void *arg) {
    sm_output *o = arg;
    set_realtime(o);
    const uint32_t period = o->info.period_frames;
    while (!atomic_load_explicit(&o->quit, memory_order_acquire)) {
        handle_requests(o);
        if (o->state == ST_STANDBY) {
            if (sm_ring_readable(o->ring) >= sm_out_start_frames(o)) sm_standby_leave(o);
            else sm_standby_keep(o);
            continue;
        }
        if (o->state != ST_RUNNING) {
            /* A drained stream given frames plays them (a seek back, a later end); else
             * sleep until a request (a full ring, filled before a resume, must not spin). */
            if (o->state == ST_DRAINED && sm_ring_readable(o->ring) > 0) { do_resume(o); continue; }
            if (o->state == ST_DRAINED) sm_out_wait_for_data(o, period, 50);
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
        /* A device that does not pace (null, file) takes every frame the moment it comes,
         * so a pause or seek found the ring all but empty now and then, and its fade was
         * cut short (a click in the capture). It keeps a ramp's worth back (not while
         * draining): the fade always has real audio, as on a paced device, whose ring
         * runs ahead. */
        const uint32_t reserve = (!paced && !o->draining) ? o->ramp_frames : 0;
        /* A seek's refill (a paced device): the device gets silence while the producer
         * refills, also while its first frames come; once a tenth of a second is rendered
         * (or a drain comes: the end is near; or the device stopped), that silence is
         * taken back and the new audio goes in its place, below. */
        if (o->refill_silence) {
            const uint32_t enough = sm_out_start_frames(o);
            if (pending < enough && !o->draining && dev_state(o) == SM_DEV_RUNNING) {
                long delay = 0;
                if (dev_delay(o, &delay) < 0) delay = 0;
                if (delay < (long)period) play_dry_silence(o, period);
                else wait_while_fed(o, delay, enough);
                continue;
            }
            sm_out_take_back_silence(o);
        }
        if (pending >= period + reserve || (o->draining && pending > 0)) {
            uint32_t n = pending < period ? pending : period;
            /* On a device that converts whole periods (plughw's rate plugin), a write that
             * leaves part of a period inside it (after a ramp, a tail or a partial write)
             * is followed by one that ends on the boundary: then a stall's xrun finds
             * nothing held, and drops nothing. */
            uint32_t held = dev_held(o);
            if (held && n > period - held) n = period - held;
            if (paced && dev_state(o) == SM_DEV_RUNNING) {
                /* Write only what fits. A full device is waited for here, where a request
                 * wakes us at once, not inside a blocking write that could hold a pause
                 * back for a whole period of a deep buffer. */
                long avail = dev_avail(o);
                const long want = (long)n + (long)o->dev->info.headroom_frames;
                if (avail >= 0 && avail < want) {
                    update_clock(o);
                    wait_for_request(o, frames_to_ms(o, (uint64_t)(want - avail)));
                    continue;
                }
            }
            play_ring(o, n);
            continue;
        }
        sm_dev_state st = dev_state(o);
        if (paced && st == SM_DEV_RUNNING) {
            long delay = 0;
            if (dev_delay(o, &delay) < 0) delay = 0;
            if (delay < (long)period) {
                /* Draining (nothing pending): drain the last period. */
                if (o->draining) { end_stream(o); continue; }
                /* The device would run dry: play what there is, else silence. */
                if (pending > 0) play_ring(o, pending);
                else play_dry_silence(o, period);
                continue;
            }
            /* Draining too: the end plays out here, where a request is taken up at once. */
            wait_while_fed(o, delay, period);
        } else {
            /* A device that does not pace (null, file) or has not started: the stream
             * stays exact by waiting for the producer. */
            if (o->draining) { end_stream(o); continue; }
            update_clock(o);
            sm_out_wait_for_data(o, period + reserve, 20);
        }
    }
    return NULL;
}
