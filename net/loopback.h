/* loopback.h - whether a listening address is reachable only from this
 * machine. Processes warn at start when they listen beyond loopback without
 * protection, so the answer errs on the side of "not loopback": anything it
 * cannot read as loopback (a wildcard, a name other than localhost, an
 * interface other than lo) counts as reachable from elsewhere. */
#ifndef EDDY_NET_LOOPBACK_H
#define EDDY_NET_LOOPBACK_H

#include <stdbool.h>

/* 127.0.0.0/8, ::1 (bare or in brackets), "localhost" or the interface "lo". */
bool eddy_host_is_loopback(const char *host);
/* A ZeroMQ endpoint: ipc:// and inproc:// are local; tcp://HOST:PORT is
 * local when HOST is (see above); anything else is not. */
bool eddy_endpoint_is_loopback(const char *endpoint);
/* Whether a connected peer's address (ZeroMQ's "Peer-Address": a numeric
 * IPv4 or IPv6 address) is one of this machine's: loopback, or an address
 * of one of its interfaces (a process here that connected to a non-loopback
 * address of this machine). Reads the interfaces (getifaddrs) each call. */
bool eddy_peer_is_local(const char *addr);

#endif
