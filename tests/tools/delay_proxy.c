/* delay_proxy.c - `delay_proxy --listen HOST:PORT --target HOST:PORT
 * --delay-ms D [--jitter-ms J] [--seed S]`: a TCP forwarding proxy that
 * delays every chunk it forwards by D ms plus a uniform random jitter in
 * [-J, +J] ms, in both directions, for the network-fault tests
 * (tests/integration/test_network_faults.c) and bench/nemesis.sh.
 *
 * It exists because sch_netem (tc's delay qdisc) is not available on the
 * machines the tests run on. eddy_netns_delay (tests/support/netns.h) runs
 * it inside a test host's namespace with --mark and redirects that host's
 * connections to the target there with an nft rule that skips marked
 * packets, so processes keep their addresses and cross the delay unaware.
 *
 * Each accepted connection gets its own connection to the target and two
 * directions; each direction is a reader thread (stamps every chunk read
 * with the time it may leave: now + delay + jitter, never before the
 * previous chunk, since a TCP stream keeps its order) and a writer thread
 * (writes each chunk at its time). The jitter comes from rand_r seeded with
 * --seed, the connection's number and the direction, so a run is
 * reproducible up to how the kernel splits the stream into reads. A closed
 * side is passed on as a half close once its chunks are written; a target
 * that cannot be reached closes the accepted connection (no RST). Prints
 * one "listening" line on stderr when it accepts connections, and one
 * "connection N forwarded" line per connection made to the target. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CHUNK 16384

typedef struct chunk {
    struct chunk *next;
    uint64_t due_ns;
    size_t len;
    char data[];
} chunk_t;

typedef struct conn conn_t;

typedef struct dir {
    conn_t *conn;
    int from, to;
    unsigned seed;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    chunk_t *head, *tail;
    uint64_t last_due_ns;
    bool eof;    /* the reader saw the end (or an error) */
    bool broken; /* the writer could not write: the reader stops */
} dir_t;

struct conn {
    int a, b; /* accepted, and to the target */
    dir_t dirs[2];
    pthread_mutex_t lock;
    int threads; /* running; the last one closes the sockets */
};

static uint64_t delay_ns, jitter_ns;
static unsigned base_seed;
static unsigned mark; /* SO_MARK of connections to the target (0: none) */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: delay_proxy --listen HOST:PORT --target HOST:PORT --delay-ms D\n"
               "                   [--jitter-ms J] [--seed S] [--mark M]\n\n"
               "Forwards TCP connections from --listen to --target, delaying every chunk in\n"
               "both directions by D ms plus a uniform random jitter in [-J, +J] ms (J <= D),\n"
               "seeded by S (default 1). Order within a connection is kept. With --mark, the\n"
               "connections to the target carry firewall mark M (SO_MARK, needs root), so an\n"
               "nft rule redirecting traffic for the target to this proxy can exempt them.\n");
}

/* HOST:PORT to an address; false when it does not resolve. */
static bool parse_addr(const char *s, struct sockaddr_storage *ss, socklen_t *len)
{
    char host[256];
    const char *colon = strrchr(s, ':');
    if (!colon || colon == s || (size_t)(colon - s) >= sizeof host || !colon[1])
        return false;
    memcpy(host, s, (size_t)(colon - s));
    host[colon - s] = '\0';
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    if (getaddrinfo(host, colon + 1, &hints, &res) != 0 || !res)
        return false;
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    *len = res->ai_addrlen;
    freeaddrinfo(res);
    return true;
}

static bool parse_ms(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-' || v > 600000)
        return false;
    *out = v * 1000000ull;
    return true;
}

static void thread_done(conn_t *c)
{
    pthread_mutex_lock(&c->lock);
    bool last = --c->threads == 0;
    pthread_mutex_unlock(&c->lock);
    if (!last)
        return;
    close(c->a);
    close(c->b);
    for (int i = 0; i < 2; i++) {
        for (chunk_t *k = c->dirs[i].head, *n; k; k = n) {
            n = k->next;
            free(k);
        }
        pthread_mutex_destroy(&c->dirs[i].lock);
        pthread_cond_destroy(&c->dirs[i].cond);
    }
    pthread_mutex_destroy(&c->lock);
    free(c);
}

static void *reader(void *arg)
{
    dir_t *d = arg;
    for (;;) {
        chunk_t *k = malloc(sizeof *k + CHUNK);
        ssize_t n = k ? read(d->from, k->data, CHUNK) : -1;
        if (n < 0 && errno == EINTR) {
            free(k);
            continue;
        }
        pthread_mutex_lock(&d->lock);
        if (n <= 0 || d->broken) {
            free(k);
            d->eof = true;
            pthread_cond_signal(&d->cond);
            pthread_mutex_unlock(&d->lock);
            break;
        }
        int64_t jitter = 0;
        if (jitter_ns) {
            uint64_t span = 2 * jitter_ns + 1;
            uint64_t r = ((uint64_t)rand_r(&d->seed) << 31) ^ (uint64_t)rand_r(&d->seed);
            jitter = (int64_t)(r % span) - (int64_t)jitter_ns;
        }
        uint64_t due = now_ns() + (uint64_t)((int64_t)delay_ns + jitter);
        if (due < d->last_due_ns)
            due = d->last_due_ns;
        d->last_due_ns = due;
        k->due_ns = due;
        k->len = (size_t)n;
        k->next = NULL;
        if (d->tail)
            d->tail->next = k;
        else
            d->head = k;
        d->tail = k;
        pthread_cond_signal(&d->cond);
        pthread_mutex_unlock(&d->lock);
    }
    thread_done(d->conn);
    return NULL;
}

static bool write_all(int fd, const char *p, size_t len)
{
    while (len) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        p += n;
        len -= (size_t)n;
    }
    return true;
}

static void *writer(void *arg)
{
    dir_t *d = arg;
    pthread_mutex_lock(&d->lock);
    for (;;) {
        if (!d->head) {
            if (d->eof)
                break;
            pthread_cond_wait(&d->cond, &d->lock);
            continue;
        }
        uint64_t now = now_ns();
        if (now < d->head->due_ns) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            uint64_t at = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec +
                          (d->head->due_ns - now);
            ts.tv_sec = (time_t)(at / 1000000000ull);
            ts.tv_nsec = (long)(at % 1000000000ull);
            pthread_cond_timedwait(&d->cond, &d->lock, &ts);
            continue;
        }
        chunk_t *k = d->head;
        d->head = k->next;
        if (!d->head)
            d->tail = NULL;
        pthread_mutex_unlock(&d->lock);
        bool ok = write_all(d->to, k->data, k->len);
        free(k);
        pthread_mutex_lock(&d->lock);
        if (!ok) {
            d->broken = true;
            break;
        }
    }
    bool broken = d->broken;
    pthread_mutex_unlock(&d->lock);
    if (broken) /* the peer is gone: so is the other side */
        shutdown(d->from, SHUT_RDWR);
    else
        shutdown(d->to, SHUT_WR);
    thread_done(d->conn);
    return NULL;
}

static struct sockaddr_storage target;
static socklen_t target_len;

/* One accepted connection (its own thread: the connect to the target may
 * take long when the target is cut off, and must not stop the accepts). */
static void *serve(void *arg)
{
    int a = (int)((uintptr_t)arg >> 32);
    unsigned number = (unsigned)((uintptr_t)arg & 0xffffffffu);
    const struct sockaddr_storage *target_p = &target;
    socklen_t tlen = target_len;
    int b = socket(target_p->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (b >= 0 && mark && setsockopt(b, SOL_SOCKET, SO_MARK, &mark, sizeof mark) < 0) {
        close(b);
        b = -1;
    }
    if (b < 0 || connect(b, (const struct sockaddr *)target_p, tlen) < 0) {
        fprintf(stderr, "delay_proxy: connection %u: cannot reach the target: %s\n", number,
                strerror(errno));
        if (b >= 0)
            close(b);
        close(a);
        return NULL;
    }
    fprintf(stderr, "delay_proxy: connection %u forwarded\n", number);
    int one = 1;
    setsockopt(a, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(b, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    conn_t *c = calloc(1, sizeof *c);
    if (!c) {
        close(a);
        close(b);
        return NULL;
    }
    c->a = a;
    c->b = b;
    c->threads = 4;
    pthread_mutex_init(&c->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    for (int i = 0; i < 2; i++) {
        dir_t *d = &c->dirs[i];
        d->conn = c;
        d->from = i ? b : a;
        d->to = i ? a : b;
        d->seed = base_seed * 2654435761u + number * 2u + (unsigned)i;
        pthread_mutex_init(&d->lock, NULL);
        pthread_cond_init(&d->cond, &ca);
    }
    pthread_condattr_destroy(&ca);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    for (int i = 0; i < 2; i++) {
        pthread_t t;
        if (pthread_create(&t, &attr, reader, &c->dirs[i]) != 0 ||
            pthread_create(&t, &attr, writer, &c->dirs[i]) != 0) {
            fprintf(stderr, "delay_proxy: cannot start threads\n");
            exit(1);
        }
    }
    pthread_attr_destroy(&attr);
    return NULL;
}

int main(int argc, char **argv)
{
    const char *listen_s = NULL, *target_s = NULL;
    bool have_delay = false;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) {
            usage(stdout);
            return 0;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "delay_proxy: %s needs a value (see --help)\n", f);
            return 2;
        }
        const char *v = argv[++i];
        if (!strcmp(f, "--listen")) {
            listen_s = v;
        } else if (!strcmp(f, "--target")) {
            target_s = v;
        } else if (!strcmp(f, "--delay-ms")) {
            if (!parse_ms(v, &delay_ns)) {
                fprintf(stderr, "delay_proxy: bad --delay-ms '%s'\n", v);
                return 2;
            }
            have_delay = true;
        } else if (!strcmp(f, "--jitter-ms")) {
            if (!parse_ms(v, &jitter_ns)) {
                fprintf(stderr, "delay_proxy: bad --jitter-ms '%s'\n", v);
                return 2;
            }
        } else if (!strcmp(f, "--mark")) {
            char *end;
            unsigned long m = strtoul(v, &end, 0);
            if (end == v || *end || m == 0 || m > 0xffffffffu) {
                fprintf(stderr, "delay_proxy: bad --mark '%s'\n", v);
                return 2;
            }
            mark = (unsigned)m;
        } else if (!strcmp(f, "--seed")) {
            char *end;
            unsigned long s = strtoul(v, &end, 10);
            if (end == v || *end) {
                fprintf(stderr, "delay_proxy: bad --seed '%s'\n", v);
                return 2;
            }
            base_seed = (unsigned)s;
        } else {
            fprintf(stderr, "delay_proxy: unknown flag %s (see --help)\n", f);
            return 2;
        }
    }
    if (!listen_s || !target_s || !have_delay) {
        fprintf(stderr, "delay_proxy: --listen, --target and --delay-ms are required\n");
        return 2;
    }
    if (jitter_ns > delay_ns) {
        fprintf(stderr, "delay_proxy: --jitter-ms must not exceed --delay-ms\n");
        return 2;
    }
    struct sockaddr_storage lsa;
    socklen_t llen;
    if (!parse_addr(listen_s, &lsa, &llen)) {
        fprintf(stderr, "delay_proxy: bad --listen '%s'\n", listen_s);
        return 2;
    }
    if (!parse_addr(target_s, &target, &target_len)) {
        fprintf(stderr, "delay_proxy: bad --target '%s'\n", target_s);
        return 2;
    }
    if (!base_seed)
        base_seed = 1;
    signal(SIGPIPE, SIG_IGN);
    int l = socket(lsa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    if (l < 0 || setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(l, (struct sockaddr *)&lsa, llen) < 0 || listen(l, 64) < 0) {
        fprintf(stderr, "delay_proxy: cannot listen on %s: %s\n", listen_s, strerror(errno));
        return 1;
    }
    fprintf(stderr, "delay_proxy: listening on %s -> %s (delay %llu ms, jitter %llu ms, seed %u)\n",
            listen_s, target_s, (unsigned long long)(delay_ns / 1000000),
            (unsigned long long)(jitter_ns / 1000000), base_seed);
    fflush(stderr);
    for (unsigned number = 1;; number++) {
        int a = accept4(l, NULL, NULL, SOCK_CLOEXEC);
        if (a < 0) {
            if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE || errno == ENFILE) {
                if (errno != EINTR && errno != ECONNABORTED)
                    usleep(100000);
                continue;
            }
            fprintf(stderr, "delay_proxy: accept: %s\n", strerror(errno));
            return 1;
        }
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        uintptr_t arg = ((uintptr_t)(unsigned)a << 32) | number;
        if (pthread_create(&t, &attr, serve, (void *)arg) != 0) {
            fprintf(stderr, "delay_proxy: cannot start a thread\n");
            close(a);
        }
        pthread_attr_destroy(&attr);
    }
}
