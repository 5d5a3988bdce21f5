/* test_loopback.c - which listening addresses are loopback-only
 * (net/loopback.c): the start-up warnings rely on anything unclear counting
 * as reachable from other machines. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <string.h>

#include "net/loopback.h"

Test(loopback, hosts)
{
    static const char *const local[] = {"127.0.0.1", "127.1.2.3", "127.255.255.254", "::1",
                                        "[::1]", "localhost", "LOCALHOST", "lo",
                                        "0:0:0:0:0:0:0:1"};
    static const char *const remote[] = {"0.0.0.0", "*", "", "192.168.1.10", "10.0.0.1",
                                         "128.0.0.1", "::", "[::]", "fd00::2", "eth0",
                                         "localhost.example.org", "127.0.0.1.example.org",
                                         "[::1", "coordinator"};
    for (size_t i = 0; i < sizeof local / sizeof local[0]; i++)
        cr_assert(eddy_host_is_loopback(local[i]), "%s is loopback", local[i]);
    for (size_t i = 0; i < sizeof remote / sizeof remote[0]; i++)
        cr_assert(!eddy_host_is_loopback(remote[i]), "%s is not loopback", remote[i]);
    cr_assert(!eddy_host_is_loopback(NULL));
}

Test(loopback, endpoints)
{
    static const char *const local[] = {"tcp://127.0.0.1:7600", "tcp://localhost:1",
                                        "tcp://[::1]:7600", "tcp://lo:7600", "ipc:///tmp/eddy.sock",
                                        "inproc://x"};
    static const char *const remote[] = {"tcp://0.0.0.0:7600", "tcp://*:7600", "tcp://eth0:7600",
                                         "tcp://[::]:7600", "tcp://10.1.2.3:7600",
                                         "tcp://127.0.0.1", "tcp://:7600",
                                         "tcp://127.0.0.1:1;10.0.0.1:7600", "udp://127.0.0.1:1",
                                         "pgm://eth0;239.192.1.1:5555", "127.0.0.1:7600", ""};
    for (size_t i = 0; i < sizeof local / sizeof local[0]; i++)
        cr_assert(eddy_endpoint_is_loopback(local[i]), "%s is loopback", local[i]);
    for (size_t i = 0; i < sizeof remote / sizeof remote[0]; i++)
        cr_assert(!eddy_endpoint_is_loopback(remote[i]), "%s is not loopback", remote[i]);
    cr_assert(!eddy_endpoint_is_loopback(NULL));
}

Test(loopback, peers)
{
    static const char *const local[] = {"127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1"};
    static const char *const remote[] = {"192.0.2.2", "::ffff:192.0.2.2", "::", "10.0.0.1",
                                         "fe80::1", "", "::ffff:128.0.0.1"};
    for (size_t i = 0; i < sizeof local / sizeof local[0]; i++)
        cr_assert(eddy_peer_is_loopback(local[i]), "%s is loopback", local[i]);
    for (size_t i = 0; i < sizeof remote / sizeof remote[0]; i++)
        cr_assert(!eddy_peer_is_loopback(remote[i]), "%s is not loopback", remote[i]);
    cr_assert(!eddy_peer_is_loopback(NULL));
    /* remote: an IP address beyond loopback; an ipc peer has none */
    cr_assert(eddy_peer_is_remote("192.0.2.2") && eddy_peer_is_remote("::ffff:10.0.0.1") &&
              eddy_peer_is_remote("fe80::1"));
    cr_assert(!eddy_peer_is_remote("127.0.0.1") && !eddy_peer_is_remote("::1") &&
              !eddy_peer_is_remote("") && !eddy_peer_is_remote(NULL) &&
              !eddy_peer_is_remote("/tmp/eddy.sock"));
}
