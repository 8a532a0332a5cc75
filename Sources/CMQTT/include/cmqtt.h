/* An MQTT client for the daemon's Home Assistant bridge: Debian's libmosquitto (libmosquitto.so.1),
 * loaded with dlopen only when MQTT is enabled, so a daemon without it neither maps the
 * library nor its libssl. The network runs on a thread of its own (name resolution and
 * handshakes included; libmosquitto's loop in it), which reconnects with an exponential backoff; what it receives (connected, disconnected, a
 * message) is queued here and an eventfd becomes readable, which the daemon's poll loop
 * watches: nothing in this file ever blocks the daemon's thread. */
#ifndef CMQTT_H
#define CMQTT_H

#include <stddef.h>

typedef struct sm_mqtt sm_mqtt;

/* What sm_mqtt_next returns. */
enum {
    SM_MQTT_NONE = 0,
    SM_MQTT_CONNECTED = 1,      /* code: the broker's CONNACK code (0: accepted) */
    SM_MQTT_DISCONNECTED = 2,   /* code: 0 asked for, else lost (libmosquitto reconnects) */
    SM_MQTT_MESSAGE = 3,        /* topic and payload */
    SM_MQTT_DROPPED = 4,        /* a message over the size limit or the queue full: topic only */
};

typedef struct {
    int kind;
    int code;
    char topic[256];
    unsigned char payload[4096];
    size_t length;
} sm_mqtt_event;

/* 1 when libmosquitto.so.1 loads (once per process); else 0 and why in err. */
int sm_mqtt_available(char *err, size_t errlen);

/* A client, connecting in the background to host:port. user/password/cafile may be NULL.
 * The will (payload "offline", retained, QoS 1) goes to will_topic. NULL on failure (why in err). */
sm_mqtt *sm_mqtt_open(const char *client_id, const char *host, int port, int keepalive,
                      const char *user, const char *password, const char *cafile,
                      const char *will_topic, char *err, size_t errlen);

/* Readable while events wait. */
int sm_mqtt_fd(const sm_mqtt *m);

/* Takes the next event (0: none). Clears the fd once the queue is empty. */
int sm_mqtt_next(sm_mqtt *m, sm_mqtt_event *out);

/* Queued for the network thread; never blocks. 0 on success, else libmosquitto's code. */
int sm_mqtt_publish(sm_mqtt *m, const char *topic, const void *payload, size_t length, int qos, int retain);
int sm_mqtt_subscribe(sm_mqtt *m, const char *pattern, int qos);

/* Publishes `payload` to `topic` (retained) then disconnects cleanly (no will), waits at
 * most timeout_ms for the thread to end and frees everything (a thread stuck in a connect
 * frees it when that returns). */
void sm_mqtt_close(sm_mqtt *m, const char *topic, const char *payload, int timeout_ms);

const char *sm_mqtt_strerror(int code);

#endif
