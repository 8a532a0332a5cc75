/*
 * The output thread's loop and its state machine (out_state, internal.h): it takes up the
 * requests of pause, resume, seek (a flush), drain, fade and standby, and decides each turn
 * what to write: ring frames, silence where a paced device would run dry, or nothing while
 * it waits. How frames are played and accounted is play.c's; the standby's turns are
 * standby.c's; the device is an sm_backend (backend.h). control.c opens it and answers the
 * other threads.
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
 */
#define _GNU_SOURCE
#include "caudio.h"
#include "play.h"
#include "priority.h"
#include "standby.h"

#include <time.h>

static void sleep_frames(sm_output *o, uint64_t frames) {
    uint64_t ns = frames * 1000000000ull / o->info.rate;
    if (ns > 20000000ull) ns = 20000000ull;
    struct timespec ts = { 0, (long)ns };
    nanosleep(&ts, NULL);
}

/* A seek's refill keeps the device's buffer full of silence where all of it can be taken
 * back (the backend says: alsa.c). A sound server's stream keeps a period at a time: its
 * 500-ms buffer would be a long rewind of the server's sink at every seek, and it met no
 * underrun at a seek under load. */
static int deep_refill(const sm_output *o) {
    return o->info.can_rewind && o->dev->info.deep_refill;
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
    if (o->dev->ops->held && period) {
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
    o->state = OUT_PAUSED;   /* a fade or pause that came during a drain or a refill: the stream rests instead */
    o->gain_step = 1.0f / (float)o->ramp_frames;
    uint64_t stop = atomic_load(&o->stop_index);
    sm_out_publish_clock(o, stop, stop, 0);
}

/* A pause or a fade that comes during a seek's refill: the silence the refill queued (up to
 * a buffer's worth where it fills it) is taken back first, so the device pauses at once. */
static void take_back_refill(sm_output *o) {
    if (o->state == OUT_REFILLING && deep_refill(o)) sm_out_take_back_silence(o);
}

static void do_pause(sm_output *o) {
    uint64_t posted = atomic_load_explicit(&o->req_ns, memory_order_relaxed);
    take_back_refill(o);
    int written = sm_out_ramp_out(o, o->pause_tail);
    if (written < 0) return;
    if (o->ramp_written_ns) {
        /* Where the pause's time went, for status (a seqlock: odd while written). */
        uint32_t q = atomic_load_explicit(&o->st_pauses, memory_order_relaxed);
        atomic_store_explicit(&o->st_pauses, q + 1, memory_order_relaxed);
        atomic_thread_fence(memory_order_release);
        atomic_store_explicit(&o->st_pause_ahead, (uint32_t)o->ramp_ahead, memory_order_relaxed);
        atomic_store_explicit(&o->st_pause_posted_ns, posted, memory_order_relaxed);
        atomic_store_explicit(&o->st_pause_written_ns, o->ramp_written_ns, memory_order_relaxed);
        atomic_store_explicit(&o->st_pauses, q + 2, memory_order_release);
    }
    settle_paused(o, (uint32_t)written);
}

/* Starts a long fade at the consumer; the loop finishes it (finish_fade). */
static void start_fade(sm_output *o, uint32_t frames) {
    take_back_refill(o);
    sm_out_take_back(o, 0);
    if (frames < o->ramp_frames) frames = o->ramp_frames;
    o->gain_target = 0.0f;
    o->gain_step = (o->gain > 0.0f ? o->gain : 1.0f) / (float)frames;
    /* During a seek's refill only silence has been written since the seek's fade (the gain
     * is 0): the fade is over at the loop's next turn, and the refill with it. */
    o->state = out_draining(o->state) ? OUT_FADING_DRAINING : OUT_FADING;
}

static void finish_fade(sm_output *o) {
    o->replay_to = 0;
    atomic_store_explicit(&o->stop_index, o->next_ring, memory_order_release);
    settle_paused(o, 0);
}

static void do_resume(sm_output *o) {
    if (o->state == OUT_PAUSED || o->state == OUT_DRAINED) {
        sm_dev_state st = dev_state(o);
        o->gain = 0.0f;  /* from silence, with a fade-in (after a pause it is 0 already) */
        o->gain_target = 1.0f;
        if (atomic_load_explicit(&o->align_ns, memory_order_acquire)) {
            /* An aligned resume (a sit in several rooms): the device starts again as one
             * opened for an aligned start, from nothing queued, and the loop writes the
             * silence up to the instant (align_start). */
            if (st == SM_DEV_PAUSED || st == SM_DEV_RUNNING) dev_drop(o);
            if (st != SM_DEV_PREPARED) dev_prepare(o);
            o->state = OUT_PLAYING;
            o->gain_target = 1.0f;
            return;
        }
        if (st == SM_DEV_PAUSED) {
            /* Paused in place, the card holds only the pause's last zeros, and past them
             * what the pause's rewind took back, still in its buffer. With the fade-in
             * written only once the card went on, an output thread late by more than
             * those zeros (a ramp, then) let it play on into that: 2.9 ms of stale audio
             * and a click, once in 20 pauses in the sound-card rig. The fade-in's first
             * period goes in while it is paused (not on a server's stream, whose resume
             * needs a lead of silence). */
            if (!o->resume_lead && o->info.can_rewind) {
                o->state = OUT_PLAYING;
                uint32_t pending = sm_out_pending(o), period = o->info.period_frames;
                if (pending) sm_out_play_ring(o, pending < period ? pending : period);
            }
            if (dev_pause(o, 0) < 0) dev_prepare(o);
        } else if (st == SM_DEV_STOPPED || st == SM_DEV_XRUN) {
            dev_prepare(o);
        }
        o->state = OUT_PLAYING;
        if (o->resume_lead) sm_out_play_silence(o, o->resume_lead, 0);
    }
    o->gain_target = 1.0f;
}

/* The device would run dry and the ring has nothing for it: a period of silence, an
 * underflow unless a seek's refill is within its grace. */
static void play_dry_silence(sm_output *o, uint32_t period) {
    int counted = o->refill_grace == 0;
    o->refill_grace = o->refill_grace > period ? o->refill_grace - period : 0;
    sm_out_play_silence(o, period, counted);
}

/* A seek's refill where the card rewinds: the device's buffer filled with silence (less
 * its headroom) before the seek is answered, so that a stall of the machine at the answer
 * finds it full. hw/seek_stall.py stops the daemon at each seek's answer; when this fill
 * waited for the loop's next turn, the fade alone could be queued then (about 12 ms), and
 * a fill by whole periods left 87 of 100 ms. All of it is taken back once the refill is
 * there. An error (avail < 0) is left to the loop, which recovers the device. */
static void fill_for_refill(sm_output *o) {
    long room = dev_avail(o) - (long)o->dev->info.headroom_frames;
    if (room > (long)o->info.buffer_frames) room = (long)o->info.buffer_frames;
    if (room > 0 && o->state == OUT_REFILLING && dev_state(o) == SM_DEV_RUNNING)
        play_dry_silence(o, (uint32_t)room);
}

static void do_flush(sm_output *o) {
    const int paced = atomic_load_explicit(&o->st_paced, memory_order_relaxed);
    const int deep = paced && deep_refill(o) && dev_state(o) == SM_DEV_RUNNING;
    /* Where the refill's silence is taken back later, zeros follow the fade in its write
     * (and the take-back leaves 2 ms, as a pause's). */
    if (sm_out_ramp_out(o, deep ? o->info.period_frames : 0) < 0) return;
    sm_out_flush_ring(o);
    o->gain_target = 1.0f;
    /* The ring is empty now and the producer refills it from the new position: the
     * silence a running device needs meanwhile is the seek's, not an underrun (up to
     * 200 ms; a producer that takes longer is stalled, and counted). Where the device
     * rewinds, the refill keeps its buffer full of silence (below): that much more. */
    uint32_t fill = o->info.buffer_frames > o->dev->info.headroom_frames ? o->info.buffer_frames - o->dev->info.headroom_frames : 0;
    o->refill_grace = o->info.rate / 5 + (deep_refill(o) ? fill : 0);
    /* That silence goes in whole periods (a PulseAudio stream's are 125 ms): written in
     * front of the new audio, it left 250 ms between the old audio and the new at every
     * seek there (20-40 ms on hw). It is taken back once the producer has refilled. */
    o->state = paced ? OUT_REFILLING : OUT_PLAYING;
    if (deep) fill_for_refill(o);
}

/* Frames were written after the end a drain was asked for: the stream goes on. */
static int drain_passed(const sm_output *o, uint32_t pending) {
    return pending > 0 && o->next_ring >= o->drain_end;
}

/* Marks requests up to `seq` done; never moves back (a drain finished late must not undo
 * a pause handled meanwhile). */
static void finish_request(sm_output *o, uint32_t seq) {
    if ((int32_t)(seq - o->handled_seq) > 0) o->handled_seq = seq;
    uint32_t done = atomic_load_explicit(&o->done_seq, memory_order_relaxed);
    if ((int32_t)(seq - done) > 0) atomic_store_explicit(&o->done_seq, seq, memory_order_release);
    sm_futex_wake(&o->done_seq);
}

/* An aligned start not yet met is given up: its session paused, sought, faded or ended
 * before its first frame (else the next session on a device the standby keeps would wait
 * for a stale instant, or be muted as late). The session over, its lateness goes too (it
 * was read when the session closed). */
static void align_cancel(sm_output *o, int over) {
    atomic_store_explicit(&o->align_ns, 0, memory_order_release);
    o->align_begun = 0;
    if (over) {
        atomic_store_explicit(&o->align_late_ns, 0, memory_order_release);
        atomic_store_explicit(&o->align_skipped_ns, 0, memory_order_release);
    }
}

static void handle_requests(sm_output *o) {
    uint32_t seq = atomic_load_explicit(&o->req_seq, memory_order_acquire);
    if (seq == o->handled_seq) return;
    int type = atomic_load_explicit(&o->req_type, memory_order_acquire);
    if (type == SM_REQ_PAUSE || type == SM_REQ_FLUSH || type == SM_REQ_FADE || type == SM_REQ_STANDBY)
        align_cancel(o, type == SM_REQ_STANDBY);
    if (o->state == OUT_FAILED) { finish_request(o, seq); return; }
    if (out_in_standby(o->state)) {
        /* A session that asks to resume or to drain has written what it has: it plays. A
         * pause or a flush before it was heard flushes the ring, and the standby goes on. */
        if ((type == SM_REQ_RESUME || type == SM_REQ_DRAIN) && sm_ring_readable(o->ring) > 0) {
            sm_standby_leave(o);
        } else {
            if (type == SM_REQ_PAUSE || type == SM_REQ_FLUSH || type == SM_REQ_FADE) {
                sm_out_flush_ring(o);
                atomic_store_explicit(&o->stop_index, o->next_ring, memory_order_release);
            }
            /* The paused session it held is over (handed to the daemon's standby): the next
             * session starts as any does. */
            if (type == SM_REQ_STANDBY) o->standby_paused = 0;
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
    if (out_draining(o->state) && (type == SM_REQ_PAUSE || type == SM_REQ_FLUSH)) {
        o->state = o->state == OUT_FADING_DRAINING ? OUT_FADING : OUT_PLAYING;
        finish_request(o, o->loop_seq);
    }
    switch (type) {
    case SM_REQ_PAUSE: if (out_running(o->state)) do_pause(o); break;
    case SM_REQ_RESUME: do_resume(o); break;
    case SM_REQ_FLUSH:
        if (out_running(o->state)) {
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
        if (o->state == OUT_DRAINED && sm_ring_readable(o->ring) > 0) do_resume(o);
        if (out_running(o->state)) {
            o->drain_end = atomic_load_explicit(&o->drain_at, memory_order_relaxed);
            o->handled_seq = o->loop_seq = seq;
            if (o->state != OUT_REFILLING) {
                o->state = out_fading(o->state) ? OUT_FADING_DRAINING : OUT_DRAINING;
            } else if (!drain_passed(o, sm_out_pending(o))) {
                /* The end is near: the refill's silence is taken back now and the stream
                 * plays out what there is. */
                sm_out_take_back_silence(o);
                o->state = OUT_DRAINING;
            }
            return;
        }
        break;
    case SM_REQ_FADE:
        if (out_running(o->state)) {
            if (!out_fading(o->state)) start_fade(o, atomic_load_explicit(&o->req_arg, memory_order_acquire));
            o->handled_seq = o->loop_seq = seq;
            return;
        }
        break;
    default: break;
    }
    finish_request(o, seq);
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
    o->replay_to = 0;
    o->gain_step = 1.0f / (float)o->ramp_frames;
    o->state = OUT_DRAINED;   /* a fade under way ends with it */
    atomic_store_explicit(&o->stop_index, o->next_ring, memory_order_release);
    sm_out_update_clock(o);
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

/* The device holds `delay` frames, a period or more: sleeps until the ring has `want`
 * frames or a request comes, at most until only a period is left queued. */
static void wait_while_fed(sm_output *o, long delay, uint32_t want) {
    sm_out_update_clock(o);
    uint64_t slack = (uint64_t)delay - o->info.period_frames;
    int ms = (int)(slack * 1000 / o->info.rate);
    sm_out_wait_for_data(o, want, ms < 1 ? 1 : ms);
}

/* How long a device opened for an aligned start plays before its delay is believed. */
#define ALIGN_SETTLE_NS 150000000ull

/* How late an aligned start may be reached and still be met, by leaving out its first
 * frames: about a period of a card's; later, the session plays at no volume. */
#define ALIGN_CATCH_UP_NS 20000000ull
/* How late an aligned start is played as it comes. */
#define ALIGN_TOLERANCE_NS 1000000ull

/* The aligned start's instant is met or given up: the ring's frames go now. */
static void align_done(sm_output *o, uint64_t at, uint64_t late_ns) {
    uint64_t expected = at;
    atomic_compare_exchange_strong_explicit(&o->align_ns, &expected, 0, memory_order_acq_rel, memory_order_relaxed);
    atomic_store_explicit(&o->align_late_ns, late_ns, memory_order_release);
    o->align_begun = 0;
    if (late_ns) {
        /* Missed: played at no volume, so that nothing is heard late (the session ends
         * as it would have). */
        o->gain = 0.0f;
        o->gain_target = 0.0f;
    }
}

/* An aligned start (sm_output_align): before the session's first ring frame, silence until
 * a frame written now is heard at the instant. Returns 1 while it waits (the loop goes
 * round and takes up requests), 0 when the ring's frames may go. */
static int align_start(sm_output *o) {
    const uint64_t at = atomic_load_explicit(&o->align_ns, memory_order_acquire);
    if (!at) return 0;
    const uint32_t rate = o->info.rate, period = o->info.period_frames;
    const sm_dev_state st = dev_state(o);
    uint64_t now = sm_monotonic_ns();
    if (o->align_begun != at) {
        o->align_begun = at;
        o->align_written = 0;
        o->align_live = 0;
        /* A device the standby kept running: its delay is settled already. */
        o->align_standby = atomic_load_explicit(&o->st_paced, memory_order_relaxed) && st == SM_DEV_RUNNING;
        o->align_frames = at > now ? (at - now) / 1000 * rate / 1000000 : 0;
    }
    long queued = 0;
    if (st == SM_DEV_RUNNING) queued = sm_out_queued_now(o, &now);
    int64_t want;
    const int live = st == SM_DEV_RUNNING && (queued > 0 || atomic_load_explicit(&o->st_paced, memory_order_relaxed));
    if (live) {
        /* A device that plays (it shows a queue): to the frame, from its delay. */
        int64_t ahead_us = (int64_t)(at - now) / 1000;   /* negative: the instant has passed */
        want = ahead_us * (int64_t)rate / 1000000 - queued;
        if (!o->align_live) {
            /* Once: what is queued past the instant (silence only) is taken back, exactly
             * that much where the device lets it, so the next frame falls on the instant. */
            o->align_live = 1;
            o->align_live_ns = now;
            if (want < 0 && sm_out_take_back_silence_upto(o, (long)-want) > 0) {
                queued = sm_out_queued_now(o, &now);
                ahead_us = (int64_t)(at - now) / 1000;
                want = ahead_us * (int64_t)rate / 1000000 - queued;
            }
        }
    } else {
        /* Not started yet, or never in real time (null, file): silence a period at a time
         * (a device that starts then goes on above), up to the time from the first look
         * to the instant. A device opened for the ring that starts only once its start
         * threshold is queued (a sound server's prebuffer) is met only that well: keep it
         * open (output-standby keep-open) for the frame. */
        if (at <= now && o->align_written == 0) want = -(int64_t)((now - at) / 1000 * rate / 1000000);
        else want = (int64_t)o->align_frames - (int64_t)o->align_written;
        if (want > (int64_t)period) want = period;
        if (want > 0) {
            if (sm_out_play_silence(o, (uint32_t)want, 0) < 0) return 0;
            o->align_written += (uint64_t)want;
            if (o->align_written < o->align_frames) return 1;
            align_done(o, at, 0);
            return 0;
        }
    }
    if (live && !o->align_standby && want > (int64_t)period
        && (now - o->align_live_ns < ALIGN_SETTLE_NS || want > 3 * (int64_t)period)) {
        /* A device that has just started (opened for this ring, or resumed for a sit in
         * several rooms): its delay is not to be trusted yet (a sound server's timing comes
         * every 100 ms or so, a card's pointer may still be in its first period). It is kept
         * fed, a period at a time, and the last of the silence reckoned once it has played
         * for a while and the instant is a few periods away (from its newest delay). */
        if (queued < 2 * (long)period && sm_out_play_silence(o, period, 0) < 0) return 0;
        wait_for_request(o, frames_to_ms(o, period / 2));
        return 1;
    }
    if (want <= 0) {
        /* Up to 1 ms late: played so, its first frames whole (a bell's strike; faded in,
         * its first cycle went under the onset's threshold in test_rooms, a cycle later).
         * Later than that on a device that plays (a sound server's take-back leaves it
         * ~10 ms, and a loaded machine can use more): the frames due by now are left out
         * and the rest fades in, on time. Muted instead, the room was silent for a second
         * and joined again. Not on a device yet to start: when it is heard is not known
         * (its start adds its own delay), and the session joining again meets it. */
        uint64_t late = (uint64_t)(-want) * 1000000000ull / rate;
        if (live && late > ALIGN_TOLERANCE_NS && late <= ALIGN_CATCH_UP_NS && sm_out_skip_ring(o, (uint32_t)-want)) {
            atomic_store_explicit(&o->align_skipped_ns, late, memory_order_release);
            late = 0;
        }
        align_done(o, at, late > ALIGN_TOLERANCE_NS ? late : 0);
        return 0;
    }
    long room = dev_avail(o) - (long)o->dev->info.headroom_frames;
    uint64_t n = room >= want ? (uint64_t)want : (room >= (long)period ? (uint64_t)(room - room % period) : 0);
    if (n && sm_out_play_silence(o, (uint32_t)n, 0) < 0) return 0;
    o->align_written += n;
    if ((int64_t)n == want) { align_done(o, at, 0); return 0; }
    /* More than fits: the rest when there is room again. */
    wait_for_request(o, frames_to_ms(o, period));
    return 1;
}

void *sm_output_thread_main(void *arg) {
    sm_output *o = arg;
    set_realtime(o);
    const uint32_t period = o->info.period_frames;
    while (!atomic_load_explicit(&o->quit, memory_order_acquire)) {
        handle_requests(o);
        if (out_in_standby(o->state)) {
            if (sm_ring_readable(o->ring) >= sm_out_start_frames(o)) sm_standby_leave(o);
            else sm_standby_keep(o);
            continue;
        }
        if (!out_running(o->state)) {
            /* A drained stream given frames plays them (a seek back, a later end); else
             * sleep until a request (a full ring, filled before a resume, must not spin). */
            if (o->state == OUT_DRAINED && sm_ring_readable(o->ring) > 0) { do_resume(o); continue; }
            if (o->state == OUT_DRAINED) sm_out_wait_for_data(o, period, 50);
            else wait_for_request(o, 50);
            if (o->state == OUT_PAUSED || o->state == OUT_DRAINED) sm_out_update_clock(o);
            continue;
        }
        if (out_fading(o->state) && o->gain <= 0.0f) {
            finish_fade(o);
            finish_request(o, o->loop_seq);
            continue;
        }
        uint32_t pending = sm_out_pending(o);
        if (out_draining(o->state) && drain_passed(o, pending))
            o->state = o->state == OUT_FADING_DRAINING ? OUT_FADING : OUT_PLAYING;
        const int draining = out_draining(o->state);
        int paced = atomic_load_explicit(&o->st_paced, memory_order_relaxed);
        /* A device that does not pace (null, file) takes every frame the moment it comes,
         * so a pause or seek found the ring all but empty now and then, and its fade was
         * cut short (a click in the capture). It keeps a ramp's worth back (not while
         * draining): the fade always has real audio, as on a paced device, whose ring
         * runs ahead. */
        const uint32_t reserve = (!paced && !draining) ? o->ramp_frames : 0;
        /* A seek's refill (a paced device): the device gets silence while the producer
         * refills, also while its first frames come; once a tenth of a second is rendered
         * (or the device stopped; a drain ends it when it comes), that silence is taken
         * back and the new audio goes in its place, below. */
        if (o->state == OUT_REFILLING) {
            const uint32_t enough = sm_out_start_frames(o);
            if (pending < enough && dev_state(o) == SM_DEV_RUNNING) {
                if (deep_refill(o)) {
                    /* The card rewinds: its buffer is kept as full as while playing (the
                     * seek filled it, fill_for_refill), all of it silence that is taken back
                     * once the refill is there. With a period or two queued, a stall of the
                     * machine while the producer refilled ran the device dry: hw/seek_stall.py,
                     * a 60-ms SIGSTOP at each seek's answer, counted an xrun at 6 of 12 seeks. */
                    long avail = dev_avail(o);
                    const long want = (long)period + (long)o->dev->info.headroom_frames;
                    if (avail < 0 || avail >= want) { play_dry_silence(o, period); continue; }
                    sm_out_update_clock(o);
                    int ms = (int)((uint64_t)(want - avail) * 1000 / o->info.rate);
                    sm_out_wait_for_data(o, enough, ms < 1 ? 1 : ms);
                    continue;
                }
                /* Elsewhere a period at a time: silence that cannot be taken back is heard
                 * before the new audio. */
                long delay = 0;
                if (dev_delay(o, &delay) < 0) delay = 0;
                if (delay < (long)period) play_dry_silence(o, period);
                else wait_while_fed(o, delay, enough);
                continue;
            }
            sm_out_take_back_silence(o);
            o->state = OUT_PLAYING;
        }
        /* An aligned start: its silence goes before any of the session's frames. */
        if (pending > 0 && align_start(o)) continue;
        if (pending >= period + reserve || (draining && pending > 0)) {
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
                    sm_out_update_clock(o);
                    wait_for_request(o, frames_to_ms(o, (uint64_t)(want - avail)));
                    continue;
                }
            }
            sm_out_play_ring(o, n);
            continue;
        }
        sm_dev_state st = dev_state(o);
        if (paced && st == SM_DEV_RUNNING) {
            long delay = 0;
            if (dev_delay(o, &delay) < 0) delay = 0;
            if (delay < (long)period) {
                /* Draining (nothing pending): drain the last period. */
                if (draining) { end_stream(o); continue; }
                /* The device would run dry: play what there is, else silence. */
                if (pending > 0) sm_out_play_ring(o, pending);
                else play_dry_silence(o, period);
                continue;
            }
            /* Draining too: the end plays out here, where a request is taken up at once. */
            wait_while_fed(o, delay, period);
        } else {
            /* A device that does not pace (null, file) or has not started: the stream
             * stays exact by waiting for the producer. */
            if (draining) { end_stream(o); continue; }
            sm_out_update_clock(o);
            sm_out_wait_for_data(o, period + reserve, 20);
        }
    }
    return NULL;
}
