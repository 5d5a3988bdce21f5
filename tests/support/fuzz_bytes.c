/* fuzz_bytes.c - corrupt-buffer feeding for validate functions (see fuzz_bytes.h). */
#include "tests/support/fuzz_bytes.h"

#include <stdlib.h>
#include <string.h>

#include "tests/support/proc.h"

static void check(eddy_fuzz_validate_fn validate, eddy_fuzz_use_fn use, const void *buf,
                  size_t len, size_t *accepted, eddy_fuzz_result_t *r)
{
    eddy_err_t err = {{0}};
    if (validate(buf, len, &err) == 0) {
        (*accepted)++;
        use(buf);
        return;
    }
    r->rejected++;
    if (err.msg[0] == '\0')
        r->silent_rejections++;
}

eddy_fuzz_result_t eddy_fuzz_validate(eddy_fuzz_validate_fn validate, eddy_fuzz_use_fn use,
                                      const void *valid, size_t size, uint64_t seed,
                                      size_t rounds)
{
    eddy_fuzz_result_t r;
    memset(&r, 0, sizeof r);
    uint64_t s = seed;
    /* Aligned copies, as keyed state hands them out. */
    uint8_t *buf = malloc(size + 64);
    if (!buf)
        abort();

    eddy_err_t err = {{0}};
    if (validate(valid, size, &err) != 0)
        r.valid_rejected++;

    for (size_t i = 0; i < rounds; i++) {
        size_t len = (size_t)(eddy_test_rand(&s) % (size + 64));
        for (size_t j = 0; j < len; j++)
            buf[j] = (uint8_t)eddy_test_rand(&s);
        /* Half of them keep a valid header so the body checks are reached. */
        if (i % 2 && len >= 8)
            memcpy(buf, valid, 8);
        check(validate, use, buf, len, &r.accepted_random, &r);
    }
    memcpy(buf, valid, size);
    for (size_t len = 0; len < size; len += 1 + len / 8)
        check(validate, use, buf, len, &r.accepted_truncated, &r);
    memset(buf + size, 0, 64);
    check(validate, use, buf, size + 1 + (size_t)(eddy_test_rand(&s) % 63), &r.accepted_truncated,
          &r);
    for (size_t i = 0; i < rounds; i++) {
        memcpy(buf, valid, size);
        int changes = 1 + (int)(eddy_test_rand(&s) % 4);
        for (int c = 0; c < changes; c++)
            buf[eddy_test_rand(&s) % size] = (uint8_t)eddy_test_rand(&s);
        check(validate, use, buf, size, &r.accepted_mutated, &r);
    }
    free(buf);
    return r;
}
