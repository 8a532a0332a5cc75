/*
 * How the output thread plays frames on the device (output.c's loop and standby.c decide
 * when): the ring's frames fetched and kept in a history, the ramp gain, conversion and
 * writes, taking back what is queued (a rewind), silence, and the accounting that makes
 * the clock. Calls only the device (backend.h) and the ring: nothing of output.c or
 * standby.c. Runs on the output thread: no allocation, no lock, no Swift.
 *
 * Accounting. dev_pos counts frames handed to the device; every run of ring frames
 * written contiguously is recorded as a segment (device position, ring index, length).
 * Silence written because the device would run dry has no segment, so the clock stands
 * still while it plays. The frame heard now is dev_pos - delay, mapped through the
 * segments to a ring index: that is the engine clock (played_index).
 */
#define _GNU_SOURCE
#include "caudio.h"
#include "diag.h"
#include "play.h"

#include <errno.h>
#include <limits.h>
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
void sm_out_update_clock(sm_output *o) {
    long delay = 0;
    sm_dev_state st = dev_state(o);
    if (st == SM_DEV_RUNNING || st == SM_DEV_PREPARED || st == SM_DEV_PAUSED) {
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
    int playing = inside && out_running(o->state) && st == SM_DEV_RUNNING && paced;
    if (idx > prev || !out_running(o->state))
        sm_out_publish_clock(o, idx, s->ring_start + s->len, playing);
}

long sm_out_queued_now(sm_output *o, uint64_t *now_ns) {
    long delay = 0;
    uint64_t now;
    int r;
    if (o->dev->ops->fresh_delay) {
        r = o->dev->ops->fresh_delay(o->dev, &delay, &now);
    } else {
        r = dev_delay(o, &delay);
        now = sm_monotonic_ns();
    }
    if (r < 0 || delay < 0) delay = 0;
    *now_ns = now;
    if ((uint64_t)delay > o->dev_pos) delay = (long)o->dev_pos;
    if (!o->dev->info.pointer_lags) return delay;
    uint64_t played = sm_clock_envelope_step(&o->clock_env, o->dev_pos - (uint64_t)delay, now, o->info.rate,
                                             o->info.period_frames, o->dev_pos);
    return played < o->dev_pos ? (long)(o->dev_pos - played) : 0;
}

void sm_out_fail(sm_output *o, int err, const char *what) {
    sm_set_error(&o->last_error, SM_ERR_DEVICE_LOST, err, "%s device '%s' failed while %s: %s", o->dev->label,
                 o->device, what, o->dev->error[0] ? o->dev->error : strerror(-err));
    o->last_error.sound_server = o->dev->info.sound_server;
    o->state = OUT_FAILED;
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
 * dropped frames it took before (*lost of them): the caller plays those again first, then
 * the rest. -1 when the device is lost. */
static long write_src(sm_output *o, const void *src, uint32_t n, uint32_t *lost) {
    int restarted = 0;
    long done = o->dev->ops->write(o->dev, src, n, lost, &restarted);
    if (restarted) o->clock_env.ns = 0;
    if (done < 0) { sm_out_fail(o, (int)done, "playing"); return -1; }
    o->dev_pos += (uint64_t)done;
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

uint32_t sm_out_pending(sm_output *o) {
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
int sm_out_play_ring(sm_output *o, uint32_t n) {
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
    sm_out_update_clock(o);
    publish_stats(o);
    return 0;
}

/* Leaves out the next n ring frames (all there, or none: returns 0): an aligned start
 * reached a moment late goes on from the frame due then. They get no segment, so the
 * clock steps over them; the history keeps nothing across them; what follows fades in. */
int sm_out_skip_ring(sm_output *o, uint32_t n) {
    if (n == 0 || sm_out_pending(o) < n) return 0;
    for (uint32_t left = n; left > 0;) {
        uint32_t k = left < o->chunk_frames ? left : o->chunk_frames;
        uint32_t got = fetch(o, k);
        if (!got) break;
        left -= got;
    }
    o->hist_valid = 0;
    o->gain = 0.0f;
    o->gain_target = 1.0f;
    o->gain_step = 1.0f / (float)o->ramp_frames;
    return 1;
}

int sm_out_play_silence(sm_output *o, uint32_t n, int count_as_underflow) {
    /* In pieces of the buffers' size: a pause's tail may be longer than a period. */
    for (uint32_t left = n; left > 0;) {
        uint32_t k = left < o->chunk_frames ? left : o->chunk_frames;
        if (write_frames(o, k, 1, NULL) < 0) return -1;
        left -= k;
    }
    o->hist_valid = 0;   /* a rewind must not reach back across silence */
    if (out_fading(o->state)) {     /* a fade goes on through silence: time passes all the same */
        o->gain -= o->gain_step * (float)n;
        if (o->gain < 0.0f) o->gain = 0.0f;
    }
    if (count_as_underflow) {
        atomic_fetch_add_explicit(&o->st_silence_frames, n, memory_order_relaxed);
        atomic_fetch_add_explicit(&o->st_silence_events, 1, memory_order_relaxed);
    }
    sm_out_update_clock(o);
    publish_stats(o);
    return 0;
}

/* Frames queued on the device and not yet heard that may be taken back, less a safety
 * margin of `margin` frames, and less what the device keeps queued (its delay's
 * rewindable says: a period through an ALSA plugin chain) (0: none, or a device that does
 * not rewind). Never more than the delay (0 on a device that does not pace, such as null
 * or file). */
static long takeable(sm_output *o, long margin) {
    if (!o->info.can_rewind) return 0;
    sm_dev_state st = dev_state(o);
    if (st != SM_DEV_RUNNING && st != SM_DEV_PREPARED) return 0;
    long rewindable = 0, queued = 0;
    if (o->dev->ops->delay(o->dev, &queued, &rewindable) < 0 || queued < 0) queued = 0;
    if (rewindable > queued) rewindable = queued;
    /* A card's pointer moves in steps (clock.c): between two of them the card has played
     * up to a step past what the read says, and a margin counted from the read was that
     * much less, or nothing: in the sound-card rig a seek's take-back before its fade (2 ms
     * by the read) met the card already past it, an xrun at 1 in 20 seeks through plughw,
     * each 1-2 ms after the rewind (4 of 60 in a probe; 1 of 180 counted from the
     * envelope). The margin counts from where the card is reckoned to be, as the clock. */
    if (o->dev->info.pointer_lags && st == SM_DEV_RUNNING && queued > 0 && (uint64_t)queued <= o->dev_pos) {
        uint64_t read = o->dev_pos - (uint64_t)queued;
        uint64_t played = sm_clock_envelope_step(&o->clock_env, read, sm_monotonic_ns(), o->info.rate,
                                                 o->info.period_frames, o->dev_pos);
        if (played > read) rewindable -= (long)(played - read);
    }
    long k = rewindable - margin;
    return k > 0 ? k : 0;
}

/* The margins a take-back leaves queued in front of what is written next. 2 ms (PulseAudio's
 * rewind safeguard is 1.33 ms) for the time between the device's pointer read and the write
 * that follows the rewind, and a ramp more where nothing but that write's own frames will
 * stand between the device and running dry until the loop writes again (a fade without
 * zeros behind it: a long fade's, a standby's, a seek's where the refill's silence cannot
 * be taken back). */
static long margin_frames(const sm_output *o, int with_ramp) {
    return (long)(o->info.rate / 500) + (with_ramp ? (long)o->ramp_frames : 0);
}

/* Takes back what the device has queued but not yet played, beyond a safety margin
 * (the device's rewind), so that what we write next is heard within a few ms. The frames
 * taken back are played again from the history. `tight`: the write that follows carries
 * zeros after its ramp (a pause), so the margin is 2 ms instead of 2 ms and a ramp. */
void sm_out_take_back(sm_output *o, int tight) {
    long k = takeable(o, margin_frames(o, !tight));
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
 * down to the safety margin of takeable() and the device's silence_keep_frames:
 * what is written next is heard within a few ms. Audio already queued is never touched.
 * (A start from the standby; a seek once the producer has refilled.) */
void sm_out_take_back_silence(sm_output *o) { sm_out_take_back_silence_upto(o, LONG_MAX); }

long sm_out_take_back_silence_upto(sm_output *o, long most) {
    uint64_t audio_end = 0;
    if (o->seg_count) audio_end = o->seg[o->seg_count - 1].dev_start + o->seg[o->seg_count - 1].len;
    uint64_t silence = o->dev_pos > audio_end ? o->dev_pos - audio_end : 0;
    long k = takeable(o, margin_frames(o, 1)) - (long)o->dev->info.silence_keep_frames;
    if (k <= 0) return 0;               /* less queued than the device must keep: nothing */
    if ((uint64_t)k > silence) k = (long)silence;
    if (k > most) k = most;
    if (k <= 0) return 0;
    long back = dev_rewind(o, (unsigned long)k);
    if (back > 0) o->dev_pos -= (uint64_t)back;
    return back > 0 ? back : 0;
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
    /* A pause or flush overrides a fade in progress (a drain goes on until its caller ends it). */
    if (out_fading(o->state)) o->state = o->state == OUT_FADING_DRAINING ? OUT_DRAINING : OUT_PLAYING;
    o->ramp_written_ns = 0;
    /* Zeros go behind the fade in its write (as many as the buffer holds: chunk_frames less
     * the ramp; chunk_frames >= ramp_frames, sm_output_open, and equal leaves no room for
     * any): then the take-back may leave only its 2 ms. */
    sm_out_take_back(o, o->gain > 0.0f && zeros > 0 && o->chunk_frames > o->ramp_frames);
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
        /* What the device held in front of the fade, read after the write (nothing may stand
         * between the rewind and it: its margin is 2 ms). */
        o->ramp_written_ns = sm_monotonic_ns();
        long delay = 0;
        if (dev_delay(o, &delay) < 0) delay = 0;
        o->ramp_ahead = delay > (long)(n + z) ? delay - (long)(n + z) : 0;
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

