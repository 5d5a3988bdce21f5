/* zrecv.c - bounded, non-blocking receive of one whole ZeroMQ message
 * (see zrecv.h).
 *
 * Why a helper: a loop that reads "identity, then body" with a blocking
 * second receive, or that skips extra frames by testing the wrong frame,
 * hangs the whole process on the first peer that sends three frames. Here
 * every frame is read with ZMQ_DONTWAIT and the message is consumed to its
 * last frame whatever its shape, so a hostile message costs one drop. */
#include "net/zrecv.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

/* A frame other than the first is already in the pipe; EINTR is retried a
 * few times, EAGAIN there means the peer is gone mid-message. */
#define FRAME_RETRIES 8

static int recv_frame(void *socket, zmq_msg_t *frame)
{
    for (int i = 0; i < FRAME_RETRIES; i++) {
        if (zmq_msg_recv(frame, socket, ZMQ_DONTWAIT) >= 0)
            return 0;
        if (errno != EINTR)
            return -1;
    }
    return -1;
}

eddy_zrecv_result_t eddy_zrecv(void *socket, zmq_msg_t *frames, int n_frames,
                               size_t max_frame_size, eddy_err_t *err)
{
    if (n_frames < 1 || n_frames > EDDY_ZRECV_MAX_FRAMES) {
        eddy_err_set(err, "cannot receive %d frames per message", n_frames);
        return EDDY_ZRECV_NONE;
    }
    zmq_msg_init(&frames[0]);
    if (zmq_msg_recv(&frames[0], socket, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&frames[0]);
        return EDDY_ZRECV_NONE;
    }
    int got = 1;
    size_t total = 1, largest = zmq_msg_size(&frames[0]);
    bool more = zmq_msg_more(&frames[0]), cut = false;
    /* Keep the first n_frames; read and discard the rest of the message. */
    while (more) {
        zmq_msg_t scratch, *frame = got < n_frames ? &frames[got] : &scratch;
        zmq_msg_init(frame);
        if (recv_frame(socket, frame) < 0) {
            zmq_msg_close(frame);
            cut = true;
            break;
        }
        total++;
        if (zmq_msg_size(frame) > largest)
            largest = zmq_msg_size(frame);
        more = zmq_msg_more(frame);
        if (frame == &scratch)
            zmq_msg_close(frame);
        else
            got++;
    }
    if (!cut && total == (size_t)n_frames && largest <= max_frame_size)
        return EDDY_ZRECV_OK;
    for (int i = 0; i < got; i++)
        zmq_msg_close(&frames[i]);
    if (cut)
        eddy_err_set(err, "message ended after %zu frames without its last frame", total);
    else if (total != (size_t)n_frames)
        eddy_err_set(err, "message of %zu frames, expected %d", total, n_frames);
    else
        eddy_err_set(err, "frame of %zu bytes, more than %zu", largest, max_frame_size);
    return EDDY_ZRECV_MALFORMED;
}

int eddy_zsock_limit_size(void *socket, size_t max_frame_size, eddy_err_t *err)
{
    int64_t limit = (int64_t)max_frame_size;
    if (zmq_setsockopt(socket, ZMQ_MAXMSGSIZE, &limit, sizeof limit) != 0)
        return eddy_err_set(err, "cannot limit message size: %s", zmq_strerror(errno));
    return 0;
}
