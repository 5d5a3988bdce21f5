/* test_snapshot_manifest.c - the reference list of an incremental
 * checkpoint (state/snapshot_manifest.c): round trip, the documented
 * layout, and every malformed payload rejected by name. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "state/snapshot_manifest.h"

Test(snapshot_manifest, round_trip_and_layout)
{
    eddy_manifest_entry_t in[3] = {{0, 7}, {5, 3}, {127, 7}};
    size_t len = 0;
    char *p = eddy_manifest_encode(7, in, 3, &len);
    cr_assert_not_null(p);
    cr_assert_eq(len, 16 + 3 * 12);
    cr_assert(!memcmp(p, "EKR\1", 4));
    cr_assert_eq((unsigned char)p[4], 3);
    cr_assert_eq((unsigned char)p[8], 7);
    cr_assert_eq((unsigned char)p[16 + 12], 5);      /* second kg */
    cr_assert_eq((unsigned char)p[16 + 12 + 4], 3);  /* its holder */
    eddy_manifest_entry_t *out = NULL;
    uint32_t n = 0;
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_manifest_decode(p, len, 7, &out, &n, &err), 0, "%s", err.msg);
    cr_assert_eq(n, 3);
    for (uint32_t i = 0; i < n; i++) {
        cr_assert_eq(out[i].kg, in[i].kg);
        cr_assert_eq(out[i].holder, in[i].holder);
    }
    free(out);
    free(p);
}

Test(snapshot_manifest, empty_list)
{
    size_t len = 0;
    char *p = eddy_manifest_encode(2, NULL, 0, &len);
    cr_assert_not_null(p);
    eddy_manifest_entry_t *out = NULL;
    uint32_t n = 9;
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_manifest_decode(p, len, 2, &out, &n, &err), 0, "%s", err.msg);
    cr_assert_eq(n, 0);
    free(out);
    free(p);
}

Test(snapshot_manifest, encoder_refuses_bad_entries)
{
    size_t len;
    eddy_manifest_entry_t unordered[2] = {{4, 1}, {3, 1}};
    eddy_manifest_entry_t future[1] = {{4, 9}};
    eddy_manifest_entry_t zero[1] = {{4, 0}};
    cr_assert_null(eddy_manifest_encode(5, unordered, 2, &len));
    cr_assert_null(eddy_manifest_encode(5, future, 1, &len));
    cr_assert_null(eddy_manifest_encode(5, zero, 1, &len));
}

static void expect_bad(const char *p, size_t len, uint64_t checkpoint, const char *words)
{
    eddy_manifest_entry_t *out = (eddy_manifest_entry_t *)1;
    uint32_t n = 5;
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_manifest_decode(p, len, checkpoint, &out, &n, &err), -1);
    cr_assert_null(out);
    cr_assert_eq(n, 0);
    cr_assert(strstr(err.msg, words), "error \"%s\" lacks \"%s\"", err.msg, words);
}

Test(snapshot_manifest, decoder_rejects_malformed)
{
    eddy_manifest_entry_t in[2] = {{1, 3}, {2, 4}};
    size_t len = 0;
    char *p = eddy_manifest_encode(4, in, 2, &len);
    cr_assert_not_null(p);
    expect_bad(p, len - 1, 4, "do not fit");
    expect_bad(p, 10, 4, "not a checkpoint manifest");
    expect_bad(p, len, 5, "found in checkpoint 5");
    char *q = malloc(len);
    memcpy(q, p, len);
    q[3] = 2;
    expect_bad(q, len, 4, "version 2");
    memcpy(q, p, len);
    q[16 + 12] = 0; /* second kg 0 < first kg 1 */
    expect_bad(q, len, 4, "out of order");
    memcpy(q, p, len);
    q[16 + 4] = 9; /* holder 9 > checkpoint 4 */
    expect_bad(q, len, 4, "out of range");
    memcpy(q, p, len);
    q[0] = 'X';
    expect_bad(q, len, 4, "not a checkpoint manifest");
    free(q);
    free(p);
}
