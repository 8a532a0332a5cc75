/*
 * CFileIO: file-system calls whose C shapes Swift cannot reach (a macro whose value
 * differs between architectures, sync_file_range), and a buffered reader for a library
 * that reads through callbacks (reader.c).
 */
#ifndef CFILEIO_H
#define CFILEIO_H

#include <stdint.h>
#include <sys/types.h>

/* Starts writeback of a written file range without waiting (sync_file_range), so a
 * long file's final fsync has only the tail to wait for. Returns 0 or -errno. */
int sm_file_start_writeback(int fd, int64_t offset, int64_t length);
/* O_DIRECT on this platform (its value differs between architectures). */
int sm_file_direct_flag(void);

/* A file read through callbacks shaped as read(2) and lseek(2) (libmpg123's reader
 * handle), from a buffer of SM_READER_BUFFER bytes filled with pread at the reader's own
 * position: the descriptor's offset is never used or moved, and a library that reads a
 * frame's 4-byte header and then its body makes one system call per buffer, not two per
 * frame (libmpg123 reading its way to 55:00 of a 128-kbit/s MP3 made 275,676 reads). */
#define SM_READER_BUFFER 16384
typedef struct sm_reader sm_reader;
/* A reader of fd (not owned: closed by its owner, after sm_reader_free); NULL: no memory. */
sm_reader *sm_reader_new(int fd);
void sm_reader_free(sm_reader *r);
/* As read(2): up to count bytes from the reader's position (fewer only at the end of the
 * file); 0 at the end; -1 with errno on an error. `handle` is an sm_reader. */
ssize_t sm_reader_read(void *handle, void *dst, size_t count);
/* As lseek(2) on the reader's position (SEEK_END from the file's size now). */
off_t sm_reader_lseek(void *handle, off_t offset, int whence);
/* Reads of the file made so far (pread calls), for the tests. */
uint64_t sm_reader_file_reads(const sm_reader *r);

#endif
