/* netns.h - a network-fault harness for integration tests: test hosts as
 * Linux network namespaces on one bridge, and faults made with nftables.
 *
 * eddy_netns_new(n) makes a hub namespace holding a bridge and n host
 * namespaces, each joined to the bridge by a veth pair (eth0 in the host,
 * address 10.99.0.(i+1)/24). Addresses exist only inside the namespaces and
 * there is no route out, so a test can neither disturb nor be disturbed by
 * the machine's network. Processes run inside a host with
 * eddy_netns_start / eddy_netns_run (`ip netns exec`, so the pid is the
 * process's own and proc.h's kill and wait work as usual).
 *
 * Faults are nft rules in each host's table `inet eddyfault` (chains `in`
 * and `out`), never touching loopback inside a host:
 *   partition    packets between two hosts dropped, both ways or one way
 *   isolate      every packet in or out of a host dropped; with SIGSTOP of
 *                its processes this is a silent host death (no FIN, no RST)
 *   loss         each packet in and out of a host dropped with probability
 *                N % (nft `numgen random mod 100 < N drop`)
 *   block_connects  new TCP connections (SYNs) from one host to another
 *                dropped; established ones keep working
 *   rate         a bandwidth limit on a host's egress (tc tbf)
 *   delay        a host's connections to another host's port through a
 *                delay proxy of ours (tests/tools/delay_proxy), delay and
 *                seeded jitter per chunk both ways
 * eddy_netns_heal removes a host's faults (or every host's).
 *
 * Needs root, iproute2 and nftables (scripts/setup.sh installs them);
 * eddy_netns_available says why not otherwise, and tests then skip. Names
 * carry the test process's pid, so tests may run in parallel; destroy (and
 * a later run's new) removes the namespaces. */
#ifndef EDDY_TESTS_SUPPORT_NETNS_H
#define EDDY_TESTS_SUPPORT_NETNS_H

#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"
#include "tests/support/proc.h"

#define EDDY_NETNS_MAX_HOSTS 16
#define EDDY_NETNS_IP "/usr/sbin/ip"
#define EDDY_NETNS_NFT "/usr/sbin/nft"
#define EDDY_NETNS_TC "/usr/sbin/tc"

typedef struct eddy_netns eddy_netns_t;

/* 0 when namespaces, veth pairs, a bridge and nft work here; -1 with err
 * naming what is missing (not root, no ip/nft, no netns support). */
int eddy_netns_available(eddy_err_t *err);

eddy_netns_t *eddy_netns_new(int n_hosts, eddy_err_t *err);
/* Deletes every namespace (kill the processes in them first). */
void eddy_netns_destroy(eddy_netns_t **self_p);

/* "10.99.0.N" of host i (0-based), and its namespace's name. */
const char *eddy_netns_addr(const eddy_netns_t *self, int host);
const char *eddy_netns_name(const eddy_netns_t *self, int host);

/* eddy_proc_start / eddy_proc_run of argv inside host's namespace. */
int eddy_netns_start(eddy_netns_t *self, int host, eddy_proc_t *p, char *const argv[],
                     const char *stdout_path, const char *stderr_path, eddy_err_t *err);
int eddy_netns_run(eddy_netns_t *self, int host, char *const argv[], uint64_t timeout_ms,
                   char **out, char **errout);

/* Faults (each 0, or -1 with err). */
int eddy_netns_partition(eddy_netns_t *self, int a, int b, bool both_ways, eddy_err_t *err);
int eddy_netns_isolate(eddy_netns_t *self, int host, eddy_err_t *err);
int eddy_netns_loss(eddy_netns_t *self, int host, int percent, eddy_err_t *err);
int eddy_netns_block_connects(eddy_netns_t *self, int from, int to, eddy_err_t *err);
/* rate: a tc rate such as "1mbit". */
int eddy_netns_rate(eddy_netns_t *self, int host, const char *rate, eddy_err_t *err);
/* Delay and jitter (sch_netem is not available): starts proxy, a
 * tests/tools/delay_proxy in host `from` (stderr to log_path), and makes
 * that host's new TCP connections to `to`:port go through it (nft
 * `redirect` in a nat output chain of table `ip eddydelay`, the proxy's own
 * connections exempt by their firewall mark). Every chunk is delayed by
 * delay_ms +- jitter_ms (seeded by seed), both ways. Connections made
 * before keep their direct path. heal does not remove it: kill the proxy
 * (and its redirected connections break) or destroy the harness. */
int eddy_netns_delay(eddy_netns_t *self, int from, int to, int port, int delay_ms, int jitter_ms,
                     unsigned seed, eddy_proc_t *proxy, const char *log_path, eddy_err_t *err);
/* Every fault of host removed (host < 0: of every host). */
int eddy_netns_heal(eddy_netns_t *self, int host, eddy_err_t *err);

#endif
