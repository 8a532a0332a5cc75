/* Watching folders for a device node to appear (inotify): the daemon's buttons wait for an
 * unplugged device this way instead of trying to open it on a timer. */
#define _GNU_SOURCE
#include "csystem.h"

#include <errno.h>
#include <sys/inotify.h>
#include <unistd.h>

int sm_inotify_open(void) {
    int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

int sm_inotify_watch_folder(int fd, const char *path) {
    /* A node made, moved in or given new permissions (udev sets the group after making
     * it); the folder itself going (then its parent is watched instead). */
    int wd = inotify_add_watch(fd, path, IN_CREATE | IN_MOVED_TO | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR);
    return wd < 0 ? -errno : wd;
}

int sm_inotify_drain(int fd) {
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    int events = 0;
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return events;
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            events++;
            p += sizeof(struct inotify_event) + ev->len;
        }
    }
}
