/* zrecv.h - receiving one whole ZeroMQ message from an untrusted peer,
 * without ever blocking and within fixed bounds.
 *
 * Every receive loop of eddy reads its sockets through eddy_zrecv: it takes
 * every frame of the next message with ZMQ_DONTWAIT (ZeroMQ delivers the
 * frames of a message atomically, so once the first frame is there the rest
 * are too), and accepts the message only when it has exactly the expected
 * number of frames, none larger than the size bound. Anything else is read
 * to its end and reported as malformed, so the caller drops it and the next
 * receive starts at a message boundary. */
#ifndef EDDY_NET_ZRECV_H
#define EDDY_NET_ZRECV_H

#include <stddef.h>
#include <zmq.h>

#include "common/err.h"

/* Largest message on a control socket (coordinator ROUTER, worker DEALER,
 * client DEALER): a DEPLOY carries the job's flags and placement, a
 * heartbeat the metrics of every task, replies a status document. */
#define EDDY_ZRECV_MAX_CONTROL ((size_t)64 << 20)
/* Largest message on a data socket (worker PULL): batches are ~32 KB. */
#define EDDY_ZRECV_MAX_DATA ((size_t)16 << 20)
/* Frames of one message: a ROUTER sees the peer's identity, then the body. */
#define EDDY_ZRECV_FRAMES_ROUTER 2
#define EDDY_ZRECV_FRAMES_PLAIN 1
#define EDDY_ZRECV_MAX_FRAMES 2

typedef enum eddy_zrecv_result {
    EDDY_ZRECV_MALFORMED = -1, /* a whole message was read and dropped; err says why */
    EDDY_ZRECV_NONE = 0,       /* nothing waiting (or the socket is closing) */
    EDDY_ZRECV_OK = 1,         /* frames[0 .. n_frames) hold the message */
} eddy_zrecv_result_t;

/* Receives the next message of socket into frames (n_frames of them, at
 * most EDDY_ZRECV_MAX_FRAMES; not initialised by the caller). Only on
 * EDDY_ZRECV_OK does the caller own the frames and close them (or move
 * them on); otherwise nothing is left to close. Never blocks. */
eddy_zrecv_result_t eddy_zrecv(void *socket, zmq_msg_t *frames, int n_frames,
                               size_t max_frame_size, eddy_err_t *err);

/* Sets ZMQ_MAXMSGSIZE on a listening socket, so a peer announcing a larger
 * frame is disconnected by the transport before the frame is buffered. */
int eddy_zsock_limit_size(void *socket, size_t max_frame_size, eddy_err_t *err);

#endif
