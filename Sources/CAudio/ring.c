/* Lock-free SPSC ring of interleaved float frames. */
#include "caudio.h"
#include "internal.h"

#include <stdlib.h>
#include <string.h>

sm_ring *sm_ring_create(uint32_t min_frames, uint32_t channels) {
    if (min_frames == 0 || channels == 0 || channels > 8 || min_frames > (1u << 26)) return NULL;
    uint32_t cap = 1;
    while (cap < min_frames) cap <<= 1;
    sm_ring *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->data = calloc((size_t)cap * channels, sizeof(float));
    if (!r->data) { free(r); return NULL; }
    r->capacity = cap;
    r->mask = cap - 1;
    r->channels = channels;
    atomic_init(&r->write_index, 0);
    atomic_init(&r->read_index, 0);
    return r;
}

void sm_ring_destroy(sm_ring *r) {
    if (!r) return;
    free(r->data);
    free(r);
}

uint32_t sm_ring_capacity(const sm_ring *r) { return r->capacity; }
uint32_t sm_ring_channels(const sm_ring *r) { return r->channels; }

uint32_t sm_ring_writable(const sm_ring *r) {
    uint64_t w = atomic_load_explicit(&r->write_index, memory_order_relaxed);
    uint64_t rd = atomic_load_explicit(&r->read_index, memory_order_acquire);
    return r->capacity - (uint32_t)(w - rd);
}

uint32_t sm_ring_readable(const sm_ring *r) {
    uint64_t w = atomic_load_explicit(&r->write_index, memory_order_acquire);
    uint64_t rd = atomic_load_explicit(&r->read_index, memory_order_relaxed);
    return (uint32_t)(w - rd);
}

uint64_t sm_ring_write_index(const sm_ring *r) {
    return atomic_load_explicit(&r->write_index, memory_order_acquire);
}

uint64_t sm_ring_read_index(const sm_ring *r) {
    return atomic_load_explicit(&r->read_index, memory_order_acquire);
}

/* Copies `count` frames between the ring storage at frame position `pos` and `buf`,
 * splitting at the end of the storage. */
static void copy_in(sm_ring *r, uint64_t pos, const float *buf, uint32_t count) {
    uint32_t start = (uint32_t)(pos & r->mask);
    uint32_t first = r->capacity - start;
    if (first > count) first = count;
    memcpy(r->data + (size_t)start * r->channels, buf, (size_t)first * r->channels * sizeof(float));
    if (count > first)
        memcpy(r->data, buf + (size_t)first * r->channels, (size_t)(count - first) * r->channels * sizeof(float));
}

static void copy_out(const sm_ring *r, uint64_t pos, float *buf, uint32_t count) {
    uint32_t start = (uint32_t)(pos & r->mask);
    uint32_t first = r->capacity - start;
    if (first > count) first = count;
    memcpy(buf, r->data + (size_t)start * r->channels, (size_t)first * r->channels * sizeof(float));
    if (count > first)
        memcpy(buf + (size_t)first * r->channels, r->data, (size_t)(count - first) * r->channels * sizeof(float));
}

uint32_t sm_ring_write(sm_ring *r, const float *frames, uint32_t count) {
    uint64_t w = atomic_load_explicit(&r->write_index, memory_order_relaxed);
    uint64_t rd = atomic_load_explicit(&r->read_index, memory_order_acquire);
    uint32_t space = r->capacity - (uint32_t)(w - rd);
    if (count > space) count = space;
    if (count == 0) return 0;
    copy_in(r, w, frames, count);
    atomic_store_explicit(&r->write_index, w + count, memory_order_release);
    return count;
}

uint32_t sm_ring_read(sm_ring *r, float *frames, uint32_t count) {
    uint64_t rd = atomic_load_explicit(&r->read_index, memory_order_relaxed);
    uint64_t w = atomic_load_explicit(&r->write_index, memory_order_acquire);
    uint32_t avail = (uint32_t)(w - rd);
    if (count > avail) count = avail;
    if (count == 0) return 0;
    copy_out(r, rd, frames, count);
    atomic_store_explicit(&r->read_index, rd + count, memory_order_release);
    return count;
}

uint32_t sm_ring_flush(sm_ring *r) {
    uint64_t rd = atomic_load_explicit(&r->read_index, memory_order_relaxed);
    uint64_t w = atomic_load_explicit(&r->write_index, memory_order_acquire);
    atomic_store_explicit(&r->read_index, w, memory_order_release);
    return (uint32_t)(w - rd);
}
