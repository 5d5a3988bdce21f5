/* loopback.c - is a listening address loopback-only (see loopback.h)?
 * Used for the start-up warnings about listeners reachable from other
 * machines; kept in net/ beside the sockets it describes. */
#include "net/loopback.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

bool eddy_host_is_loopback(const char *host)
{
    if (!host || !*host)
        return false;
    if (!strcasecmp(host, "localhost") || !strcmp(host, "lo"))
        return true;
    struct in_addr v4;
    if (inet_pton(AF_INET, host, &v4) == 1)
        return (ntohl(v4.s_addr) >> 24) == 127;
    char bare[INET6_ADDRSTRLEN + 2];
    size_t len = strlen(host);
    if (len >= 2 && host[0] == '[' && host[len - 1] == ']' && len - 2 < sizeof bare) {
        memcpy(bare, host + 1, len - 2);
        bare[len - 2] = '\0';
        host = bare;
    }
    struct in6_addr v6;
    return inet_pton(AF_INET6, host, &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

bool eddy_endpoint_is_loopback(const char *endpoint)
{
    if (!endpoint)
        return false;
    if (!strncmp(endpoint, "ipc://", 6) || !strncmp(endpoint, "inproc://", 9))
        return true;
    if (strncmp(endpoint, "tcp://", 6))
        return false;
    const char *host = endpoint + 6;
    const char *colon = strrchr(host, ':');
    if (!colon || strchr(host, ';')) /* no port, or a source;destination pair */
        return false;
    char buf[256];
    size_t len = (size_t)(colon - host);
    if (len == 0 || len >= sizeof buf)
        return false;
    memcpy(buf, host, len);
    buf[len] = '\0';
    return eddy_host_is_loopback(buf);
}

bool eddy_peer_is_local(const char *addr)
{
    if (!addr)
        return false;
    if (!strncmp(addr, "::ffff:", 7) && strchr(addr + 7, '.'))
        addr += 7; /* an IPv4 peer on a dual-stack socket */
    if (eddy_host_is_loopback(addr))
        return true;
    struct in_addr v4;
    struct in6_addr v6;
    int family = inet_pton(AF_INET, addr, &v4) == 1    ? AF_INET
                 : inet_pton(AF_INET6, addr, &v6) == 1 ? AF_INET6
                                                       : 0;
    struct ifaddrs *all = NULL;
    if (!family || getifaddrs(&all) < 0)
        return false;
    bool local = false;
    for (struct ifaddrs *a = all; a && !local; a = a->ifa_next) {
        if (!a->ifa_addr || a->ifa_addr->sa_family != family)
            continue;
        if (family == AF_INET)
            local = ((const struct sockaddr_in *)a->ifa_addr)->sin_addr.s_addr == v4.s_addr;
        else
            local = !memcmp(&((const struct sockaddr_in6 *)a->ifa_addr)->sin6_addr, &v6, sizeof v6);
    }
    freeifaddrs(all);
    return local;
}
