/* latency_echo.c - the latency floor bench/latency.sh measures eddy against:
 * the same path as `eddy local --job wordcount --socket` without the engine.
 *
 *   latency_echo [--zmq] HOST:PORT
 *
 * Connects to HOST:PORT (build/latency_probe), reads lines as they come and
 * writes one changelog row `+I[LINE, 1]` per line to stdout with one write(2)
 * per read, as eddy's changelog sink does for a batch. With --zmq each read's
 * bytes first cross a ZeroMQ PUSH -> PULL pair over loopback TCP between two
 * threads, the hop a record takes between eddy's tasks; without it, the floor
 * of one socket and one pipe. It exits when the probe closes the socket.
 * Prints its usage with --help; anything else malformed exits 2. */
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zmq.h>

#define BUF (1 << 16)

static void die(const char *what)
{
    fprintf(stderr, "latency_echo: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void write_all(const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(STDOUT_FILENO, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            die("write");
        p += w;
        n -= (size_t)w;
    }
}

/* The changelog rows of the complete lines in buf[0, len) go to stdout in
 * one write; returns how many bytes they took (the rest is a partial line). */
static size_t emit_lines(const char *buf, size_t len)
{
    static char out[BUF * 2];
    size_t used = 0, o = 0;
    for (const char *nl; (nl = memchr(buf + used, '\n', len - used)); used = (size_t)(nl - buf) + 1) {
        size_t n = (size_t)(nl - (buf + used));
        if (o + n + 8 > sizeof out) {
            write_all(out, o);
            o = 0;
        }
        memcpy(out + o, "+I[", 3);
        memcpy(out + o + 3, buf + used, n);
        memcpy(out + o + 3 + n, ", 1]\n", 5);
        o += n + 8;
    }
    if (o)
        write_all(out, o);
    return used;
}

static int connect_to(const char *where)
{
    char host[256];
    snprintf(host, sizeof host, "%s", where);
    char *colon = strrchr(host, ':');
    if (!colon) {
        fprintf(stderr, "latency_echo: '%s' is not HOST:PORT\n", where);
        exit(2);
    }
    *colon = '\0';
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai;
    if (getaddrinfo(host, colon + 1, &hints, &ai) != 0) {
        fprintf(stderr, "latency_echo: cannot resolve '%s'\n", where);
        exit(2);
    }
    int fd = socket(ai->ai_family, ai->ai_socktype, 0);
    if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen) < 0)
        die("connect");
    freeaddrinfo(ai);
    return fd;
}

typedef struct reader {
    int fd;
    void *push; /* NULL: no ZeroMQ hop */
} reader_t;

/* Reads the socket; each read's bytes go through the PUSH socket, or
 * straight to stdout. An empty message says the socket closed. */
static void *read_socket(void *arg)
{
    reader_t *r = arg;
    static char buf[BUF];
    size_t len = 0;
    for (;;) {
        ssize_t n = read(r->fd, buf + len, sizeof buf - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        if (r->push) {
            if (zmq_send(r->push, buf, (size_t)n, 0) < 0)
                die("zmq_send");
            continue;
        }
        len += (size_t)n;
        size_t used = emit_lines(buf, len);
        memmove(buf, buf + used, len - used);
        len -= used;
        if (len == sizeof buf)
            len = 0; /* a line longer than the buffer: dropped */
    }
    if (r->push && zmq_send(r->push, "", 0, 0) < 0)
        die("zmq_send");
    return NULL;
}

int main(int argc, char **argv)
{
    int zmq_hop = 0, a = 1;
    if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        printf("usage: latency_echo [--zmq] HOST:PORT\n\n"
               "Reads lines from HOST:PORT and writes `+I[LINE, 1]` per line to stdout;\n"
               "--zmq sends them through a ZeroMQ PUSH/PULL pair over loopback TCP first.\n");
        return 0;
    }
    if (a < argc && !strcmp(argv[a], "--zmq")) {
        zmq_hop = 1;
        a++;
    }
    if (a != argc - 1 || argv[a][0] == '-') {
        fprintf(stderr, "usage: latency_echo [--zmq] HOST:PORT\n");
        return 2;
    }
    reader_t r = {.fd = connect_to(argv[a])};
    if (!zmq_hop) {
        read_socket(&r);
        return 0;
    }
    void *ctx = zmq_ctx_new();
    void *pull = zmq_socket(ctx, ZMQ_PULL);
    r.push = zmq_socket(ctx, ZMQ_PUSH);
    char endpoint[256];
    size_t elen = sizeof endpoint;
    if (!pull || !r.push || zmq_bind(pull, "tcp://127.0.0.1:*") < 0 ||
        zmq_getsockopt(pull, ZMQ_LAST_ENDPOINT, endpoint, &elen) < 0 ||
        zmq_connect(r.push, endpoint) < 0)
        die("zmq");
    pthread_t thread;
    if (pthread_create(&thread, NULL, read_socket, &r) != 0)
        die("pthread_create");
    static char buf[BUF * 2];
    size_t len = 0;
    for (;;) {
        int n = zmq_recv(pull, buf + len, sizeof buf - len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            die("zmq_recv");
        if (n == 0)
            break;
        len += (size_t)n;
        size_t used = emit_lines(buf, len);
        memmove(buf, buf + used, len - used);
        len -= used;
        if (len > BUF)
            len = 0;
    }
    pthread_join(thread, NULL);
    zmq_close(r.push);
    zmq_close(pull);
    zmq_ctx_term(ctx);
    return 0;
}
