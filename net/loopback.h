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
/* A connected peer's address (ZeroMQ's Peer-Address): loopback as above,
 * or an IPv4-mapped IPv6 loopback address (::ffff:127.0.0.1). */
bool eddy_peer_is_loopback(const char *address);
/* Whether a peer address is an IP address beyond loopback (an ipc:// or
 * inproc:// peer has none, or not an IP: never remote). */
bool eddy_peer_is_remote(const char *address);

#endif
