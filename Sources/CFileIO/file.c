/* CFileIO: O_DIRECT and writeback for the store and the WAV writer (see cfileio.h). */
#define _GNU_SOURCE
#include "cfileio.h"
#include <errno.h>
#include <fcntl.h>

int sm_file_start_writeback(int fd, int64_t offset, int64_t length) {
    return sync_file_range(fd, offset, length, SYNC_FILE_RANGE_WRITE) == 0 ? 0 : -errno;
}

int sm_file_direct_flag(void) { return O_DIRECT; }
