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

/* A peer address is local when it is loopback or one of this machine's
 * interface addresses (read here with getifaddrs, independently). */
Test(loopback, peers)
{
    static const char *const local[] = {"127.0.0.1", "127.3.2.1", "::1", "::ffff:127.0.0.1"};
    for (size_t i = 0; i < sizeof local / sizeof local[0]; i++)
        cr_assert(eddy_peer_is_local(local[i]), "%s is local", local[i]);
    static const char *const remote[] = {"203.0.113.9", "198.51.100.7", "2001:db8::77", "",
                                         "localhost.example.org", "::ffff:198.51.100.7"};
    for (size_t i = 0; i < sizeof remote / sizeof remote[0]; i++)
        cr_assert(!eddy_peer_is_local(remote[i]), "%s is not local", remote[i]);
    cr_assert(!eddy_peer_is_local(NULL));
    struct ifaddrs *all = NULL;
    cr_assert(getifaddrs(&all) == 0);
    for (struct ifaddrs *a = all; a; a = a->ifa_next) {
        if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET)
            continue;
        char addr[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &((const struct sockaddr_in *)a->ifa_addr)->sin_addr, addr, sizeof addr);
        cr_assert(eddy_peer_is_local(addr), "%s (%s) is this machine's", addr, a->ifa_name);
    }
    freeifaddrs(all);
}
