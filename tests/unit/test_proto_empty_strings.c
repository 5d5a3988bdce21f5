/* test_proto_empty_strings.c - control messages whose string fields are
 * empty must round-trip through the codec.
 *
 * Regression test: msgpack-c gives an empty string a NULL pointer, and the
 * decoder passed it to memcpy (undefined behaviour; UBSan aborts the
 * coordinator). Found by the backpressure integration test in the
 * sanitizer build, where a worker reported TASK_FAILED with an empty error. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "net/proto.h"

Test(proto, task_failed_with_empty_error_round_trips)
{
    eddy_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = EDDY_MSG_TASK_FAILED;
    m.u.task_failed.job = 1;
    m.u.task_failed.epoch = 2;
    m.u.task_failed.stage = 1;
    m.u.task_failed.instance = 0;
    m.u.task_failed.error[0] = '\0';
    size_t len;
    char *data = eddy_msg_encode(&m, &len);
    cr_assert(data);
    eddy_msg_t d;
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_msg_decode(data, len, &d, &err), 0, "%s", err.msg);
    cr_assert_eq(d.type, EDDY_MSG_TASK_FAILED);
    cr_assert_eq(d.u.task_failed.epoch, 2);
    cr_assert_str_eq(d.u.task_failed.error, "");
    eddy_msg_clear(&d);
    free(data);
}
