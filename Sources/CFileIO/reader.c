/* A buffered reader over a descriptor for a library's read/lseek callbacks (cfileio.h:
 * sm_reader). Thread-confined: one decoder uses it at a time. */
#define _GNU_SOURCE
#include "cfileio.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct sm_reader {
    int fd;
    int64_t pos;            /* the reader's position */
    int64_t start;          /* the file offset of buf[0] */
    size_t fill;            /* valid bytes in buf */
    uint64_t reads;         /* pread calls made */
    unsigned char buf[SM_READER_BUFFER];
};

sm_reader *sm_reader_new(int fd) {
    sm_reader *r = malloc(sizeof *r);
    if (!r) return NULL;
    r->fd = fd;
    r->pos = 0;
    r->start = 0;
    r->fill = 0;
    r->reads = 0;
    return r;
}

void sm_reader_free(sm_reader *r) { free(r); }

uint64_t sm_reader_file_reads(const sm_reader *r) { return r->reads; }

/* pread, again after a signal; the bytes read or -1 with errno. */
static ssize_t pread_full(sm_reader *r, void *dst, size_t count, int64_t at) {
    ssize_t n;
    do {
        n = pread(r->fd, dst, count, (off_t)at);
    } while (n < 0 && errno == EINTR);
    r->reads++;
    return n;
}

ssize_t sm_reader_read(void *handle, void *dst, size_t count) {
    sm_reader *r = handle;
    unsigned char *out = dst;
    size_t done = 0;
    while (done < count) {
        /* From the buffer, what it holds at the position. */
        if (r->pos >= r->start && r->pos < r->start + (int64_t)r->fill) {
            size_t at = (size_t)(r->pos - r->start);
            size_t n = r->fill - at;
            if (n > count - done) n = count - done;
            memcpy(out + done, r->buf + at, n);
            done += n;
            r->pos += (int64_t)n;
            continue;
        }
        /* A read as large as the buffer goes straight to its destination. */
        if (count - done >= SM_READER_BUFFER) {
            ssize_t n = pread_full(r, out + done, count - done, r->pos);
            if (n < 0) return done ? (ssize_t)done : -1;
            if (n == 0) break;
            done += (size_t)n;
            r->pos += n;
            continue;
        }
        ssize_t n = pread_full(r, r->buf, SM_READER_BUFFER, r->pos);
        if (n < 0) {
            r->fill = 0;
            return done ? (ssize_t)done : -1;
        }
        r->start = r->pos;
        r->fill = (size_t)n;
        if (n == 0) break;     /* the end of the file */
    }
    return (ssize_t)done;
}

off_t sm_reader_lseek(void *handle, off_t offset, int whence) {
    sm_reader *r = handle;
    int64_t base;
    switch (whence) {
    case SEEK_SET: base = 0; break;
    case SEEK_CUR: base = r->pos; break;
    case SEEK_END: {
        struct stat st;
        if (fstat(r->fd, &st) != 0) return -1;
        base = st.st_size;
        break;
    }
    default: errno = EINVAL; return -1;
    }
    if ((offset > 0 && base > INT64_MAX - offset) || base + offset < 0) {
        errno = EINVAL;
        return -1;
    }
    r->pos = base + offset;
    return (off_t)r->pos;
}
