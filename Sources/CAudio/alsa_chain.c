/*
 * What stands between an ALSA PCM and the card, read from the PCM's own dump
 * (snd_pcm_dump): alsa-lib has no call that lists a plug's chain. A plug prints
 * "Plug PCM: <the first layer behind it>", and each layer its setup and then
 * "Slave: <the next>" (caudio.h: sm_alsa_chain_read). Pure text: tested with dumps taken
 * in the sound-card rig.
 */
#define _GNU_SOURCE
#include "caudio.h"

#include <string.h>

/* Layers that move frames one to one and pass the pointers, rewinds and pauses of the
 * PCM behind them through (alsa-lib's generic plugins): behind them only, a hardware PCM's
 * pointer is the card's. */
static const char *const pass_through[] = {
    "Linear conversion PCM",
    "Linear Integer <-> Linear Float conversion PCM",
    "Route conversion PCM",
};

static int starts_with(const char *s, size_t n, const char *prefix) {
    size_t p = strlen(prefix);
    return n >= p && memcmp(s, prefix, p) == 0;
}

sm_alsa_chain sm_alsa_chain_read(const char *dump, size_t length) {
    sm_alsa_chain chain = { 0, 0 };
    if (!dump || length == 0) return chain;
    /* Wherever it is printed (a layer may print the one behind it without "Slave: "). */
    chain.rate_plugin = memmem(dump, length, "Rate conversion PCM", 19) != NULL;
    int known = 1, last_is_card = 0;
    size_t at = 0;
    int first = 1;
    while (at < length) {
        const char *line = dump + at;
        const char *nl = memchr(line, '\n', length - at);
        size_t n = nl ? (size_t)(nl - line) : length - at;
        at += n + 1;
        /* A layer's title: the dump's first line, or a line that names the next layer. */
        int title = first;
        first = 0;
        if (starts_with(line, n, "Slave: ")) { line += 7; n -= 7; title = 1; }
        if (!title) continue;
        while (starts_with(line, n, "Plug PCM: ")) { line += 10; n -= 10; }
        last_is_card = starts_with(line, n, "Hardware PCM");
        int passes = last_is_card || starts_with(line, n, "Plug PCM");
        for (size_t i = 0; i < sizeof pass_through / sizeof pass_through[0]; i++)
            if (starts_with(line, n, pass_through[i])) passes = 1;
        if (!passes) known = 0;
    }
    chain.card_pointer = known && last_is_card;
    return chain;
}
