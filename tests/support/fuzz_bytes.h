/* fuzz_bytes.h - feed corrupt buffers to a validate function (the sketches'
 * snapshot check): random bytes, every truncation of a valid buffer, and
 * valid buffers with random bytes changed. Whatever validate accepts is
 * handed to `use` (estimate, merge, ...) so a sanitizer build sees any read
 * it should not do. Deterministic for a seed. */
#ifndef EDDY_TESTS_FUZZ_BYTES_H
#define EDDY_TESTS_FUZZ_BYTES_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

typedef int (*eddy_fuzz_validate_fn)(const void *buf, size_t len, eddy_err_t *err);
typedef void (*eddy_fuzz_use_fn)(const void *buf);

typedef struct eddy_fuzz_result {
    size_t accepted_random;    /* random buffers accepted (should be 0) */
    size_t accepted_truncated; /* truncated/extended buffers accepted (should be 0) */
    size_t accepted_mutated;   /* mutated valid buffers accepted (fine if used safely) */
    size_t rejected;
    size_t silent_rejections;  /* rejected without a message (should be 0) */
    size_t valid_rejected;     /* the untouched valid buffer rejected (should be 0) */
} eddy_fuzz_result_t;

eddy_fuzz_result_t eddy_fuzz_validate(eddy_fuzz_validate_fn validate, eddy_fuzz_use_fn use,
                                      const void *valid, size_t size, uint64_t seed,
                                      size_t rounds);

#endif
