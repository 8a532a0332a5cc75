/* Input devices (evdev): open with monotonic timestamps, the device's name and keys, and
 * struct input_event decoded (its size differs between 64- and 32-bit machines). */
#define _GNU_SOURCE
#include "csystem.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/input.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

int sm_input_event_size(void) { return (int)sizeof(struct input_event); }

int sm_evdev_open(const char *path) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) return -errno;
    int clock = CLOCK_MONOTONIC;
    (void)ioctl(fd, EVIOCSCLOCKID, &clock);
    return fd;
}

int sm_evdev_name(int fd, char *buf, int len) {
    if (len <= 0) return -EINVAL;
    memset(buf, 0, (size_t)len);
    int n = ioctl(fd, EVIOCGNAME(len - 1), buf);
    if (n < 0) return -errno;
    buf[len - 1] = 0;
    return (int)strlen(buf);
}

int sm_evdev_has_key(int fd, int code) {
    if (code < 0 || code > KEY_MAX) return 0;
    unsigned char bits[KEY_MAX / 8 + 1];
    memset(bits, 0, sizeof bits);
    if (ioctl(fd, EVIOCGBIT(EV_KEY, sizeof bits), bits) < 0) return -errno;
    return (bits[code / 8] >> (code % 8)) & 1;
}

int sm_evdev_decode(const void *buf, int len, struct sm_key_event *out, int max) {
    int n = 0;
    const unsigned char *p = buf;
    for (int off = 0; off + (int)sizeof(struct input_event) <= len && n < max; off += (int)sizeof(struct input_event)) {
        struct input_event ev;
        memcpy(&ev, p + off, sizeof ev);
        if (ev.type != EV_KEY) continue;
        out[n].code = ev.code;
        out[n].value = ev.value;
        out[n].ms = (long long)ev.input_event_sec * 1000 + (long long)ev.input_event_usec / 1000;
        n++;
    }
    return n;
}

void sm_evdev_encode(void *buf, int type, int code, int value, long long ms) {
    struct input_event ev;
    memset(&ev, 0, sizeof ev);
    ev.input_event_sec = (__typeof__(ev.input_event_sec))(ms / 1000);
    ev.input_event_usec = (__typeof__(ev.input_event_usec))((ms % 1000) * 1000);
    ev.type = (unsigned short)type;
    ev.code = (unsigned short)code;
    ev.value = value;
    memcpy(buf, &ev, sizeof ev);
}
