/* netns.c - the network-fault harness (see netns.h): namespaces, veth
 * pairs and a bridge made with iproute2, faults as nft rules and a tc tbf.
 * Every step runs the real tools (ip, nft, tc) and reports their stderr;
 * delay is tests/tools/delay_proxy behind an nft redirect.
 * A new harness first deletes the namespaces of test processes that died
 * without cleaning up. */
#include "tests/support/netns.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"

#define TABLE "inet eddyfault"

struct eddy_netns {
    int n;
    char hub[64];
    char names[EDDY_NETNS_MAX_HOSTS][64];
    char addrs[EDDY_NETNS_MAX_HOSTS][32];
    bool made[EDDY_NETNS_MAX_HOSTS + 1]; /* hosts, then the hub */
    bool rated[EDDY_NETNS_MAX_HOSTS];      /* a tc rate limit was set */
};

/* Runs argv (NULL-terminated); -1 with err naming the command and stderr. */
static int run(char *const argv[], eddy_err_t *err)
{
    char *out = NULL, *errout = NULL;
    int rc = eddy_proc_run(argv, 20000, &out, &errout);
    if (rc != 0) {
        char cmd[512] = "";
        size_t n = 0;
        for (int i = 0; argv[i] && n < sizeof cmd - 1; i++)
            n += (size_t)snprintf(cmd + n, sizeof cmd - n, "%s%s", i ? " " : "", argv[i]);
        eddy_err_set(err, "`%s` exited %d: %.300s", cmd, rc, errout ? errout : "");
    }
    free(out);
    free(errout);
    return rc == 0 ? 0 : -1;
}

static int ip(eddy_err_t *err, const char *a0, const char *a1, const char *a2, const char *a3,
              const char *a4, const char *a5, const char *a6, const char *a7, const char *a8,
              const char *a9)
{
    char *argv[] = {EDDY_NETNS_IP, (char *)a0, (char *)a1, (char *)a2, (char *)a3, (char *)a4,
                    (char *)a5, (char *)a6, (char *)a7, (char *)a8, (char *)a9, NULL};
    return run(argv, err);
}

/* One nft command (a single argument; nft joins its arguments) in host. */
static int nft(eddy_netns_t *self, int host, const char *cmd, eddy_err_t *err)
{
    char *argv[] = {EDDY_NETNS_IP, "netns", "exec", self->names[host], EDDY_NETNS_NFT,
                    (char *)cmd, NULL};
    return run(argv, err);
}

static int nftf(eddy_netns_t *self, int host, eddy_err_t *err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int nftf(eddy_netns_t *self, int host, eddy_err_t *err, const char *fmt, ...)
{
    char cmd[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    return nft(self, host, cmd, err);
}

static bool valid(const eddy_netns_t *self, int host)
{
    return self && host >= 0 && host < self->n;
}

int eddy_netns_available(eddy_err_t *err)
{
    if (geteuid() != 0)
        return eddy_err_set(err, "network namespaces need root");
    if (access(EDDY_NETNS_IP, X_OK) != 0 || access(EDDY_NETNS_NFT, X_OK) != 0)
        return eddy_err_set(err, "%s or %s is missing (apt-get install iproute2 nftables)",
                            EDDY_NETNS_IP, EDDY_NETNS_NFT);
    eddy_netns_t *probe = eddy_netns_new(1, err);
    if (!probe)
        return -1;
    eddy_netns_destroy(&probe);
    return 0;
}

/* Host i: its namespace, a veth pair made in the hub with its peer already
 * in the host (eth0) and its own end on the bridge and up, the address,
 * and the fault table with its two chains in one nft command. Few commands
 * on purpose: each is a fork of the (sanitized) test process, and a
 * harness of six hosts used to take seconds to make on a busy machine. */
static int make_host(eddy_netns_t *self, int i, eddy_err_t *err)
{
    char veth[16], cidr[40];
    snprintf(veth, sizeof veth, "v%dh", i);
    snprintf(cidr, sizeof cidr, "%s/24", self->addrs[i]);
    const char *ns = self->names[i];
    if (ip(err, "netns", "add", ns, NULL, NULL, NULL, NULL, NULL, NULL, NULL) < 0)
        return -1;
    self->made[i] = true;
    char *pair[] = {EDDY_NETNS_IP, "-n", self->hub, "link", "add", veth, "master", "br0", "up",
                    "type", "veth", "peer", "name", "eth0", "netns", (char *)ns, NULL};
    if (run(pair, err) < 0 ||
        ip(err, "-n", ns, "addr", "add", cidr, "dev", "eth0", NULL, NULL, NULL) < 0 ||
        ip(err, "-n", ns, "link", "set", "eth0", "up", NULL, NULL, NULL, NULL) < 0 ||
        ip(err, "-n", ns, "link", "set", "lo", "up", NULL, NULL, NULL, NULL) < 0)
        return -1;
    return nft(self, i,
               "add table " TABLE "; "
               "add chain " TABLE " in { type filter hook input priority 0; policy accept; }; "
               "add chain " TABLE " out { type filter hook output priority 0; policy accept; }",
               err);
}

/* Deletes namespace name if it is there (no command when it is not). */
static void del_if_there(const char *name)
{
    char path[128];
    snprintf(path, sizeof path, "/run/netns/%s", name);
    if (access(path, F_OK) != 0)
        return;
    eddy_err_t ignored;
    ip(&ignored, "netns", "del", name, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
}

/* Namespaces of test processes that died without destroying them (a
 * crash, SIGKILL): named eddyt<pid>-..., their pid gone. */
static void sweep_dead(void)
{
    DIR *d = opendir("/run/netns");
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        long pid;
        char rest[64];
        if (sscanf(e->d_name, "eddyt%ld-%63s", &pid, rest) != 2 || pid <= 0 ||
            (kill((pid_t)pid, 0) == 0 || errno != ESRCH))
            continue;
        eddy_err_t ignored;
        ip(&ignored, "netns", "del", e->d_name, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
    }
    closedir(d);
}

eddy_netns_t *eddy_netns_new(int n_hosts, eddy_err_t *err)
{
    if (n_hosts < 1 || n_hosts > EDDY_NETNS_MAX_HOSTS) {
        eddy_err_set(err, "1..%d hosts", EDDY_NETNS_MAX_HOSTS);
        return NULL;
    }
    eddy_netns_t *self = calloc(1, sizeof *self);
    if (!self) {
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    self->n = n_hosts;
    long pid = (long)getpid();
    snprintf(self->hub, sizeof self->hub, "eddyt%ld-hub", pid);
    for (int i = 0; i < n_hosts; i++) {
        snprintf(self->names[i], sizeof self->names[i], "eddyt%ld-h%d", pid, i);
        snprintf(self->addrs[i], sizeof self->addrs[i], "10.99.0.%d", i + 1);
    }
    sweep_dead();
    /* leftovers of an earlier process with this pid */
    for (int i = 0; i < n_hosts; i++)
        del_if_there(self->names[i]);
    del_if_there(self->hub);
    if (ip(err, "netns", "add", self->hub, NULL, NULL, NULL, NULL, NULL, NULL, NULL) < 0)
        goto fail;
    self->made[EDDY_NETNS_MAX_HOSTS] = true;
    if (ip(err, "-n", self->hub, "link", "add", "br0", "up", "type", "bridge", NULL, NULL) < 0)
        goto fail;
    for (int i = 0; i < n_hosts; i++)
        if (make_host(self, i, err) < 0)
            goto fail;
    return self;
fail:
    eddy_netns_destroy(&self);
    return NULL;
}

void eddy_netns_destroy(eddy_netns_t **self_p)
{
    eddy_netns_t *self = *self_p;
    if (!self)
        return;
    eddy_err_t ignored;
    for (int i = 0; i < self->n; i++)
        if (self->made[i])
            ip(&ignored, "netns", "del", self->names[i], NULL, NULL, NULL, NULL, NULL, NULL, NULL);
    if (self->made[EDDY_NETNS_MAX_HOSTS])
        ip(&ignored, "netns", "del", self->hub, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
    free(self);
    *self_p = NULL;
}

const char *eddy_netns_addr(const eddy_netns_t *self, int host)
{
    return valid(self, host) ? self->addrs[host] : NULL;
}

const char *eddy_netns_name(const eddy_netns_t *self, int host)
{
    return valid(self, host) ? self->names[host] : NULL;
}

/* argv behind `ip netns exec NS`; NULL when it does not fit. */
static char **in_ns(eddy_netns_t *self, int host, char *const argv[], char **buf, size_t cap)
{
    size_t n = 0;
    while (argv[n])
        n++;
    if (n + 5 > cap)
        return NULL;
    buf[0] = EDDY_NETNS_IP;
    buf[1] = "netns";
    buf[2] = "exec";
    buf[3] = self->names[host];
    for (size_t i = 0; i <= n; i++)
        buf[4 + i] = argv[i];
    return buf;
}

int eddy_netns_start(eddy_netns_t *self, int host, eddy_proc_t *p, char *const argv[],
                     const char *stdout_path, const char *stderr_path, eddy_err_t *err)
{
    char *buf[128];
    if (!valid(self, host) || !in_ns(self, host, argv, buf, 128))
        return eddy_err_set(err, "no host %d, or too many arguments", host);
    return eddy_proc_start(p, buf, stdout_path, stderr_path, err);
}

int eddy_netns_run(eddy_netns_t *self, int host, char *const argv[], uint64_t timeout_ms,
                   char **out, char **errout)
{
    char *buf[128];
    if (!valid(self, host) || !in_ns(self, host, argv, buf, 128))
        return -1;
    return eddy_proc_run(buf, timeout_ms, out, errout);
}

static int drop_between(eddy_netns_t *self, int a, int b, eddy_err_t *err)
{
    /* a sends nothing to b, and b hears nothing from a */
    if (nftf(self, a, err, "add rule " TABLE " out ip daddr %s drop", self->addrs[b]) < 0)
        return -1;
    return nftf(self, b, err, "add rule " TABLE " in ip saddr %s drop", self->addrs[a]);
}

int eddy_netns_partition(eddy_netns_t *self, int a, int b, bool both_ways, eddy_err_t *err)
{
    if (!valid(self, a) || !valid(self, b) || a == b)
        return eddy_err_set(err, "partition: bad hosts %d, %d", a, b);
    if (!both_ways)
        return drop_between(self, a, b, err);
    /* each host's two rules in one nft command (a test that flaps a link
     * does this every second) */
    if (nftf(self, a, err, "add rule " TABLE " out ip daddr %s drop; add rule " TABLE " in ip saddr %s drop",
             self->addrs[b], self->addrs[b]) < 0)
        return -1;
    return nftf(self, b, err, "add rule " TABLE " out ip daddr %s drop; add rule " TABLE " in ip saddr %s drop",
                self->addrs[a], self->addrs[a]);
}

int eddy_netns_isolate(eddy_netns_t *self, int host, eddy_err_t *err)
{
    if (!valid(self, host))
        return eddy_err_set(err, "isolate: no host %d", host);
    /* both rules in one nft command: one fork, and one transaction */
    return nft(self, host,
               "add rule " TABLE " out oifname \"eth0\" drop; "
               "add rule " TABLE " in iifname \"eth0\" drop",
               err);
}

int eddy_netns_loss(eddy_netns_t *self, int host, int percent, eddy_err_t *err)
{
    if (!valid(self, host) || percent < 0 || percent > 100)
        return eddy_err_set(err, "loss: bad host %d or percent %d", host, percent);
    return nftf(self, host, err,
                "add rule " TABLE " out oifname \"eth0\" numgen random mod 100 < %d drop; "
                "add rule " TABLE " in iifname \"eth0\" numgen random mod 100 < %d drop",
                percent, percent);
}

int eddy_netns_block_connects(eddy_netns_t *self, int from, int to, eddy_err_t *err)
{
    if (!valid(self, from) || !valid(self, to))
        return eddy_err_set(err, "block_connects: bad hosts %d, %d", from, to);
    return nftf(self, from, err, "add rule " TABLE " out ip daddr %s tcp flags & (syn | ack) == syn drop",
                self->addrs[to]);
}

int eddy_netns_rate(eddy_netns_t *self, int host, const char *rate, eddy_err_t *err)
{
    if (!valid(self, host))
        return eddy_err_set(err, "rate: no host %d", host);
    char *argv[] = {EDDY_NETNS_IP, "netns", "exec", self->names[host], EDDY_NETNS_TC, "qdisc",
                    "replace", "dev", "eth0", "root", "tbf", "rate", (char *)rate, "burst", "32kbit",
                    "latency", "400ms", NULL};
    self->rated[host] = true;
    return run(argv, err);
}

#define DELAY_MARK "0x24"

int eddy_netns_delay(eddy_netns_t *self, int from, int to, int port, int delay_ms, int jitter_ms,
                     unsigned seed, eddy_proc_t *proxy, const char *log_path, eddy_err_t *err)
{
    if (!valid(self, from) || !valid(self, to) || from == to || port <= 0 || port > 65535 ||
        delay_ms < 0 || jitter_ms < 0 || jitter_ms > delay_ms)
        return eddy_err_set(err, "delay: bad hosts %d, %d, port %d or delay %d +- %d ms", from, to,
                            port, delay_ms, jitter_ms);
    char listen[32], target[48], delay[16], jitter[16], seed_s[16];
    /* one listening port per (target host, port % 1000) in `from` */
    int lport = 30000 + to * 1000 + port % 1000;
    snprintf(listen, sizeof listen, "127.0.0.1:%d", lport);
    snprintf(target, sizeof target, "%s:%d", self->addrs[to], port);
    snprintf(delay, sizeof delay, "%d", delay_ms);
    snprintf(jitter, sizeof jitter, "%d", jitter_ms);
    snprintf(seed_s, sizeof seed_s, "%u", seed);
    char *argv[] = {EDDY_DELAY_PROXY, "--listen", listen, "--target", target, "--delay-ms", delay,
                    "--jitter-ms", jitter, "--seed", seed_s, "--mark", DELAY_MARK, NULL};
    if (eddy_netns_start(self, from, proxy, argv, NULL, log_path, err) < 0)
        return -1;
    uint64_t deadline = eddy_mono_ms() + 10000;
    for (;;) { /* its "listening" line, or its exit */
        char *log = eddy_read_file(log_path, NULL);
        bool ready = log && strstr(log, "listening on");
        free(log);
        if (ready)
            break;
        if (!eddy_proc_alive(proxy) || eddy_mono_ms() > deadline) {
            char *l = eddy_read_file(log_path, NULL);
            eddy_err_set(err, "delay proxy in host %d did not start: %.300s", from, l ? l : "");
            free(l);
            eddy_proc_kill(proxy, 2000);
            return -1;
        }
        eddy_nap_ms(20);
    }
    /* the table and chain once per host ("add" of an existing one is no error) */
    if (nftf(self, from, err,
             "add table ip eddydelay; "
             "add chain ip eddydelay out { type nat hook output priority -100; }; "
             "add rule ip eddydelay out meta mark != " DELAY_MARK " ip daddr %s tcp dport %d redirect to :%d",
             self->addrs[to], port, lport) < 0) {
        eddy_proc_kill(proxy, 2000);
        return -1;
    }
    return 0;
}

int eddy_netns_heal(eddy_netns_t *self, int host, eddy_err_t *err)
{
    if (host < 0) {
        for (int i = 0; self && i < self->n; i++)
            if (eddy_netns_heal(self, i, err) < 0)
                return -1;
        return 0;
    }
    if (!valid(self, host))
        return eddy_err_set(err, "heal: no host %d", host);
    if (nft(self, host, "flush chain " TABLE " in; flush chain " TABLE " out", err) < 0)
        return -1;
    /* a rate limit, if one was set (no qdisc to delete is no error) */
    if (self->rated[host]) {
        char *argv[] = {EDDY_NETNS_IP, "netns", "exec", self->names[host], EDDY_NETNS_TC, "qdisc",
                        "del", "dev", "eth0", "root", NULL};
        eddy_proc_run(argv, 10000, NULL, NULL);
        self->rated[host] = false;
    }
    return 0;
}
