/*
 * The engine clock's estimate of where a device plays, from pointer reads that lag:
 * the upper envelope of the reads (caudio.h: sm_clock_envelope_step). Pure arithmetic,
 * tested with a pointer that moves in steps (ClockEnvelopeTests).
 *
 * Why: the sound-card rig's snd-aloop moves its pointer with the kernel's 4-ms tick; a
 * delay read between two ticks put the clock 0-4 ms behind what the card had played
 * (130 frames behind at one of two seeks the rig stamped), and a seek by ±15 s landed
 * that much early or late. PulseAudio smooths its own clock the same way for the same
 * reason; its reads come interpolated already, so the pulse backend does not use this.
 */
#include "caudio.h"

uint64_t sm_clock_envelope_step(sm_clock_envelope *e, uint64_t read, uint64_t now_ns, uint32_t rate,
                                uint64_t step, uint64_t written) {
    if (e->ns != 0 && now_ns >= e->ns && now_ns - e->ns < SM_CLOCK_ENVELOPE_NS && e->frame <= written) {
        uint64_t carried = e->frame + (now_ns - e->ns) * rate / 1000000000ull;
        if (carried > written) carried = written;
        /* Ahead of the read by no more than a step: the read lags, the carried one holds. */
        if (carried > read && carried - read <= step) return carried;
    }
    /* The read is the best there is (or the old one is stale, or something changed). */
    e->frame = read;
    e->ns = now_ns;
    return read;
}

/* The kernel's view of the real-time clock's discipline (adjtimex, read only): whether a
 * time daemon (chrony, ntpd) keeps it synchronised, and the error it estimates. */
#include <errno.h>
#include <sys/timex.h>

int sm_realtime_clock_state(int *synchronised, long *esterror_us, long *maxerror_us) {
    struct timex t = { 0 };
    int state = adjtimex(&t);
    if (state < 0) return -errno;
    *synchronised = state != TIME_ERROR && !(t.status & STA_UNSYNC);
    *esterror_us = t.esterror;
    *maxerror_us = t.maxerror;
    return 0;
}
