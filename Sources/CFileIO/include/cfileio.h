/*
 * CFileIO: file-system calls whose C shapes Swift cannot reach (a macro whose value
 * differs between architectures, sync_file_range).
 */
#ifndef CFILEIO_H
#define CFILEIO_H

#include <stdint.h>

/* Starts writeback of a written file range without waiting (sync_file_range), so a
 * long file's final fsync has only the tail to wait for. Returns 0 or -errno. */
int sm_file_start_writeback(int fd, int64_t offset, int64_t length);
/* O_DIRECT on this platform (its value differs between architectures). */
int sm_file_direct_flag(void);

#endif
