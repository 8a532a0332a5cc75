/* The daemon's MQTT client (see cmqtt.h): libmosquitto loaded at run time, its network
 * thread, and a small queue of what it received that the daemon's poll loop drains. Only the
 * calls used are looked up; their prototypes are libmosquitto 2's stable ABI (so the build
 * needs no libmosquitto-dev). */
#define _GNU_SOURCE
#include "cmqtt.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

struct mosquitto;
struct mosquitto_message {
    int mid;
    char *topic;
    void *payload;
    int payloadlen;
    int qos;
    bool retain;
};
typedef void (*conn_cb)(struct mosquitto *, void *, int);
typedef void (*msg_cb)(struct mosquitto *, void *, const struct mosquitto_message *);

static struct {
    int (*lib_init)(void);
    struct mosquitto *(*new_)(const char *, bool, void *);
    void (*destroy)(struct mosquitto *);
    int (*username_pw_set)(struct mosquitto *, const char *, const char *);
    int (*tls_set)(struct mosquitto *, const char *, const char *, const char *, const char *, void *);
    int (*will_set)(struct mosquitto *, const char *, int, const void *, int, bool);
    int (*reconnect_delay_set)(struct mosquitto *, unsigned int, unsigned int, bool);
    int (*connect)(struct mosquitto *, const char *, int, int);
    int (*loop_forever)(struct mosquitto *, int, int);
    int (*threaded_set)(struct mosquitto *, bool);
    int (*disconnect)(struct mosquitto *);
    int (*publish)(struct mosquitto *, int *, const char *, int, const void *, int, bool);
    int (*subscribe)(struct mosquitto *, int *, const char *, int);
    void (*connect_callback_set)(struct mosquitto *, conn_cb);
    void (*disconnect_callback_set)(struct mosquitto *, conn_cb);
    void (*message_callback_set)(struct mosquitto *, msg_cb);
    const char *(*strerror)(int);
} M;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int loaded;
static char load_error[200];

#define SYM(field, name) do { *(void **)&M.field = dlsym(h, name); \
    if (!M.field) { snprintf(load_error, sizeof load_error, "libmosquitto.so.1 lacks %s", name); return; } } while (0)

static void load(void) {
    void *h = dlopen("libmosquitto.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(load_error, sizeof load_error, "cannot load libmosquitto (Debian: apt install libmosquitto1): %s", dlerror());
        return;
    }
    SYM(lib_init, "mosquitto_lib_init"); SYM(new_, "mosquitto_new"); SYM(destroy, "mosquitto_destroy");
    SYM(username_pw_set, "mosquitto_username_pw_set"); SYM(tls_set, "mosquitto_tls_set");
    SYM(will_set, "mosquitto_will_set"); SYM(reconnect_delay_set, "mosquitto_reconnect_delay_set");
    SYM(connect, "mosquitto_connect"); SYM(loop_forever, "mosquitto_loop_forever");
    SYM(threaded_set, "mosquitto_threaded_set"); SYM(disconnect, "mosquitto_disconnect");
    SYM(publish, "mosquitto_publish"); SYM(subscribe, "mosquitto_subscribe");
    SYM(connect_callback_set, "mosquitto_connect_callback_set");
    SYM(disconnect_callback_set, "mosquitto_disconnect_callback_set");
    SYM(message_callback_set, "mosquitto_message_callback_set");
    SYM(strerror, "mosquitto_strerror");
    M.lib_init();
    loaded = 1;
}

int sm_mqtt_available(char *err, size_t errlen) {
    pthread_once(&once, load);
    if (!loaded && err && errlen) snprintf(err, errlen, "%s", load_error);
    return loaded;
}

#define QUEUE 64

struct sm_mqtt {
    struct mosquitto *mosq;
    int efd;
    pthread_t thread;
    char *host;
    int port, keepalive;
    int stopping;              /* close() was called: the thread ends */
    int ended;                 /* the thread has ended */
    int orphaned;              /* close() gave up waiting: the thread frees everything */
    pthread_mutex_t lock;
    pthread_cond_t changed;
    sm_mqtt_event *queue;      /* QUEUE slots, a ring */
    int head, count;
};

/* On libmosquitto's thread: queue an event (a full queue drops it, said as one DROPPED). */
static void push(sm_mqtt *m, int kind, int code, const char *topic, const void *payload, size_t length) {
    pthread_mutex_lock(&m->lock);
    pthread_cond_broadcast(&m->changed);
    if (m->count == QUEUE) {
        sm_mqtt_event *last = &m->queue[(m->head + QUEUE - 1) % QUEUE];
        if (kind == SM_MQTT_MESSAGE || kind == SM_MQTT_DROPPED) {
            last->kind = SM_MQTT_DROPPED;   /* the last slot says something was lost */
            last->length = 0;
            pthread_mutex_unlock(&m->lock);
            return;
        }
        /* a connection change always gets in: it replaces the oldest message */
        m->head = (m->head + 1) % QUEUE;
        m->count--;
    }
    sm_mqtt_event *e = &m->queue[(m->head + m->count) % QUEUE];
    e->kind = kind;
    e->code = code;
    e->topic[0] = 0;
    e->length = 0;
    if (topic) {
        size_t n = strlen(topic);
        if (n >= sizeof e->topic) { n = sizeof e->topic - 1; e->kind = SM_MQTT_DROPPED; }
        memcpy(e->topic, topic, n);
        e->topic[n] = 0;
    }
    if (e->kind == SM_MQTT_MESSAGE) {
        if (length > sizeof e->payload) e->kind = SM_MQTT_DROPPED;
        else if (length) { memcpy(e->payload, payload, length); e->length = length; }
    }
    m->count++;
    pthread_mutex_unlock(&m->lock);
    uint64_t one = 1;
    ssize_t w = write(m->efd, &one, sizeof one);
    (void)w;
}

static void on_connect(struct mosquitto *mosq, void *obj, int rc) {
    (void)mosq;
    push(obj, SM_MQTT_CONNECTED, rc, NULL, NULL, 0);
}

static void on_disconnect(struct mosquitto *mosq, void *obj, int rc) {
    (void)mosq;
    push(obj, SM_MQTT_DISCONNECTED, rc, NULL, NULL, 0);
}

static void on_message(struct mosquitto *mosq, void *obj, const struct mosquitto_message *msg) {
    (void)mosq;
    size_t len = msg->payloadlen > 0 ? (size_t)msg->payloadlen : 0;
    push(obj, SM_MQTT_MESSAGE, 0, msg->topic, msg->payload, len);
}

/* Frees the client (its thread has ended). */
static void release(sm_mqtt *m) {
    M.destroy(m->mosq);
    close(m->efd);
    free(m->queue);
    free(m->host);
    pthread_mutex_destroy(&m->lock);
    pthread_cond_destroy(&m->changed);
    free(m);
}

/* The network thread: connects (name resolution and the TCP and TLS handshakes happen
 * here, never on the daemon's thread), then runs libmosquitto's loop, which reconnects by
 * itself after a lost connection (1 s doubling to 60 s). The loop gives up on what it
 * counts as fatal (a name that does not resolve yet, a TLS failure): then this thread
 * waits (1 s doubling to 60 s, or until close) and connects again. */
static void *network(void *arg) {
    sm_mqtt *m = arg;
    unsigned delay = 1;
    for (;;) {
        pthread_mutex_lock(&m->lock);
        int stop = m->stopping;
        pthread_mutex_unlock(&m->lock);
        if (stop) break;
        int rc = M.connect(m->mosq, m->host, m->port, m->keepalive);
        if (rc == 0) {
            delay = 1;
            pthread_mutex_lock(&m->lock);
            stop = m->stopping;
            pthread_mutex_unlock(&m->lock);
            if (stop) M.disconnect(m->mosq);    /* closed while connecting: leave at once */
            /* A day at most in each wait, as mosquitto_loop_start does: the loop wakes for
             * the keepalive, a packet, or a publish from the daemon (its socket pair). */
            M.loop_forever(m->mosq, 1000 * 86400, 1);     /* returns when disconnecting, or given up */
        } else {
            push(m, SM_MQTT_DISCONNECTED, rc, NULL, NULL, 0);
        }
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += delay;
        delay = delay < 60 ? delay * 2 : 60;
        pthread_mutex_lock(&m->lock);
        while (!m->stopping) {
            if (pthread_cond_timedwait(&m->changed, &m->lock, &until) == ETIMEDOUT) break;
        }
        pthread_mutex_unlock(&m->lock);
    }
    pthread_mutex_lock(&m->lock);
    m->ended = 1;
    int orphan = m->orphaned;
    pthread_cond_broadcast(&m->changed);
    pthread_mutex_unlock(&m->lock);
    if (orphan) release(m);
    return NULL;
}

static void fail(char *err, size_t errlen, const char *what, int rc) {
    if (err && errlen) snprintf(err, errlen, "%s: %s", what, rc == 14 /* MOSQ_ERR_ERRNO */ ? strerror(errno) : M.strerror(rc));
}

sm_mqtt *sm_mqtt_open(const char *client_id, const char *host, int port, int keepalive,
                      const char *user, const char *password, const char *cafile,
                      const char *will_topic, char *err, size_t errlen) {
    if (!sm_mqtt_available(err, errlen)) return NULL;
    sm_mqtt *m = calloc(1, sizeof *m);
    if (!m) { snprintf(err, errlen, "out of memory"); return NULL; }
    m->queue = calloc(QUEUE, sizeof *m->queue);
    m->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    pthread_mutex_init(&m->lock, NULL);
    pthread_cond_init(&m->changed, NULL);
    if (!m->queue || m->efd < 0) { snprintf(err, errlen, "cannot make the MQTT client's queue"); goto bad; }
    m->mosq = M.new_(client_id, true, m);
    if (!m->mosq) { snprintf(err, errlen, "cannot make an MQTT client: %s", strerror(errno)); goto bad; }
    int rc;
    if (user && (rc = M.username_pw_set(m->mosq, user, password))) { fail(err, errlen, "user", rc); goto bad; }
    if (cafile && (rc = M.tls_set(m->mosq, cafile, NULL, NULL, NULL, NULL))) { fail(err, errlen, "TLS", rc); goto bad; }
    if ((rc = M.will_set(m->mosq, will_topic, 7, "offline", 1, true))) { fail(err, errlen, "last will", rc); goto bad; }
    M.reconnect_delay_set(m->mosq, 1, 60, true);
    M.connect_callback_set(m->mosq, on_connect);
    M.disconnect_callback_set(m->mosq, on_disconnect);
    M.message_callback_set(m->mosq, on_message);
    M.threaded_set(m->mosq, true);      /* publish from the daemon's thread, the loop on ours */
    m->host = strdup(host);
    m->port = port;
    m->keepalive = keepalive;
    /* A broker away now is no failure: the network thread keeps trying (with backoff). */
    if (!m->host || pthread_create(&m->thread, NULL, network, m)) {
        snprintf(err, errlen, "cannot start the MQTT network thread");
        goto bad;
    }
    pthread_setname_np(m->thread, "mqtt");
    return m;
bad:
    free(m->host);
    if (m->mosq) M.destroy(m->mosq);
    if (m->efd >= 0) close(m->efd);
    free(m->queue);
    pthread_mutex_destroy(&m->lock);
    pthread_cond_destroy(&m->changed);
    free(m);
    return NULL;
}

int sm_mqtt_fd(const sm_mqtt *m) { return m->efd; }

int sm_mqtt_next(sm_mqtt *m, sm_mqtt_event *out) {
    pthread_mutex_lock(&m->lock);
    if (m->count == 0) {
        uint64_t v;
        ssize_t r = read(m->efd, &v, sizeof v);   /* nonblocking: clears the counter */
        (void)r;
        pthread_mutex_unlock(&m->lock);
        return SM_MQTT_NONE;
    }
    *out = m->queue[m->head];
    m->head = (m->head + 1) % QUEUE;
    m->count--;
    pthread_mutex_unlock(&m->lock);
    return out->kind;
}

int sm_mqtt_publish(sm_mqtt *m, const char *topic, const void *payload, size_t length, int qos, int retain) {
    if (length > 1 << 20) return 9; /* MOSQ_ERR_PAYLOAD_SIZE */
    return M.publish(m->mosq, NULL, topic, (int)length, payload, qos, retain != 0);
}

int sm_mqtt_subscribe(sm_mqtt *m, const char *pattern, int qos) {
    return M.subscribe(m->mosq, NULL, pattern, qos);
}

void sm_mqtt_close(sm_mqtt *m, const char *topic, const char *payload, int timeout_ms) {
    if (!m) return;
    pthread_mutex_lock(&m->lock);
    m->stopping = 1;
    pthread_cond_broadcast(&m->changed);
    pthread_mutex_unlock(&m->lock);
    /* Queued before the disconnect, so they leave first (QoS 0, retained). */
    if (topic && payload) M.publish(m->mosq, NULL, topic, (int)strlen(payload), payload, 0, true);
    M.disconnect(m->mosq);      /* the loop sends it and returns; not connected: nothing */
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) { until.tv_sec++; until.tv_nsec -= 1000000000L; }
    pthread_mutex_lock(&m->lock);
    while (!m->ended) {
        if (pthread_cond_timedwait(&m->changed, &m->lock, &until) == ETIMEDOUT) break;
    }
    int ended = m->ended;
    /* Still in a name lookup or a TCP connect to a host that does not answer: the thread
     * leaves when that returns (it sees `stopping`) and frees everything itself. */
    if (!ended) m->orphaned = 1;
    pthread_mutex_unlock(&m->lock);
    if (ended) {
        pthread_join(m->thread, NULL);
        release(m);
    } else {
        pthread_detach(m->thread);
    }
}

const char *sm_mqtt_strerror(int code) {
    return loaded ? M.strerror(code) : "libmosquitto not loaded";
}
