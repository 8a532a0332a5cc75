#ifndef CAUDIO_INTERNAL_H
#define CAUDIO_INTERNAL_H
#include <stdatomic.h>
#include <stdint.h>

struct sm_ring {
    /* Producer and consumer indices on their own cache lines. */
    _Alignas(64) _Atomic uint64_t write_index;
    _Alignas(64) _Atomic uint64_t read_index;
    _Alignas(64) float *data;
    uint32_t capacity;
    uint32_t mask;
    uint32_t channels;
};
#endif
