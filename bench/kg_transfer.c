/* kg_transfer.c - the CPU cost of moving key groups, in one process.
 *
 *   build/kg_transfer [KEYS [GROUPS_MOVED [ROUNDS]]]
 *
 * Fills one keyed state (K = 128) with KEYS keys "k<n>" and int64 values,
 * as wordcount's count does, then moves GROUPS_MOVED key groups (default
 * 63, what a 2 -> 3 rescale moves) the way a fluid step does, phase by
 * phase: serialise (keyed_state write_group in its group envelope), chunk
 * (STATE_CHUNK encode + decode + reassembly, as the data plane does minus
 * the socket), load (envelope decode + read_group into a second state) and
 * drop (the old owner's drop_group). Prints each phase's time and MB/s of
 * the moved bytes, and the whole copy's MB/s. No network, no other process:
 * what bench/rescale.sh measures on top of this is the data plane and the
 * wait for handoff markers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "net/dataplane.h"
#include "state/group_envelope.h"
#include "state/keyed_state.h"
#include "state/keygroup.h"

#define K 128u
#define CHUNK EDDY_STATE_CHUNK_MAX

static double ms_since(uint64_t t0)
{
    return (double)(eddy_mono_ns() - t0) / 1e6;
}

int main(int argc, char **argv)
{
    unsigned long long keys = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000ull;
    unsigned moved = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 10) : 63u;
    unsigned rounds = argc > 3 ? (unsigned)strtoul(argv[3], NULL, 10) : 3u;
    if (moved == 0 || moved > K || rounds == 0) {
        fprintf(stderr, "usage: kg_transfer [KEYS [GROUPS_MOVED (1..%u) [ROUNDS]]]\n", K);
        return 2;
    }
    for (unsigned round = 0; round < rounds; round++) {
        eddy_keyed_state_t *a = eddy_keyed_state_new(K, sizeof(int64_t));
        eddy_keyed_state_t *b = eddy_keyed_state_new(K, sizeof(int64_t));
        if (!a || !b)
            return 1;
        char key[32];
        uint64_t t0 = eddy_mono_ns();
        for (unsigned long long i = 0; i < keys; i++) {
            int n = snprintf(key, sizeof key, "k%llu", i);
            uint64_t h = eddy_key_hash(key, (size_t)n);
            int64_t *v = eddy_keyed_state_upsert(a, eddy_key_group_of_hash(h, K), h, key,
                                                 (uint32_t)n, NULL);
            if (!v)
                return 1;
            *v += (int64_t)i;
        }
        double fill_ms = ms_since(t0);
        /* The groups a 2 -> 3 rescale moves first: from the top down. */
        char **bufs = calloc(moved, sizeof *bufs);
        size_t *lens = calloc(moved, sizeof *lens);
        char **got = calloc(moved, sizeof *got);
        size_t bytes = 0, moved_keys = 0;
        eddy_err_t err = {{0}};
        t0 = eddy_mono_ns();
        for (unsigned i = 0; i < moved; i++) {
            uint32_t kg = K - 1 - i;
            moved_keys += eddy_keyed_state_group_keys(a, kg);
            char *keyed = NULL;
            eddy_group_envelope_t env = {.watermark = 0, .n_ops = 1};
            if (eddy_keyed_state_write_group(a, kg, &keyed, &env.keyed_len, &err) < 0) {
                fprintf(stderr, "%s\n", err.msg);
                return 1;
            }
            env.keyed = keyed;
            bufs[i] = eddy_group_envelope_encode(&env, &lens[i]);
            free(keyed);
            bytes += lens[i];
        }
        double ser_ms = ms_since(t0);
        t0 = eddy_mono_ns();
        eddy_channel_id_t id = {1, 1, 0, 0, 0, 1};
        for (unsigned i = 0; i < moved; i++) {
            got[i] = malloc(lens[i] ? lens[i] : 1);
            size_t off = 0;
            do {
                uint32_t n = lens[i] - off > CHUNK ? CHUNK : (uint32_t)(lens[i] - off);
                size_t mlen;
                char *m = eddy_state_chunk_encode(&id, 1, K - 1 - i, off, lens[i], bufs[i] + off, n,
                                                  &mlen);
                eddy_data_msg_t msg;
                if (!m || eddy_data_decode(m, mlen, &msg, &err) < 0 ||
                    eddy_state_chunk_checksum(msg.chunk, msg.chunk_len) != msg.checksum) {
                    fprintf(stderr, "chunk: %s\n", err.msg);
                    return 1;
                }
                memcpy(got[i] + msg.offset, msg.chunk, msg.chunk_len);
                eddy_data_msg_close(&msg);
                free(m);
                off += n;
            } while (off < lens[i]);
        }
        double chunk_ms = ms_since(t0);
        t0 = eddy_mono_ns();
        for (unsigned i = 0; i < moved; i++) {
            eddy_group_envelope_t env;
            if (eddy_group_envelope_decode(got[i], lens[i], &env, &err) < 0 ||
                eddy_keyed_state_read_group(b, K - 1 - i, env.keyed, env.keyed_len, &err) < 0) {
                fprintf(stderr, "load: %s\n", err.msg);
                return 1;
            }
        }
        double load_ms = ms_since(t0);
        t0 = eddy_mono_ns();
        for (unsigned i = 0; i < moved; i++)
            eddy_keyed_state_drop_group(a, K - 1 - i);
        double drop_ms = ms_since(t0);
        if (eddy_keyed_state_keys(b) != moved_keys) {
            fprintf(stderr, "loaded %zu keys, moved %zu\n", eddy_keyed_state_keys(b), moved_keys);
            return 1;
        }
        double mb = (double)bytes / 1048576.0, copy = ser_ms + chunk_ms + load_ms;
        printf("round %u: %llu keys (fill %.0f ms), moved %u groups, %zu keys, %.2f MB: "
               "serialise %.1f ms (%.0f MB/s), chunk %.1f ms (%.0f MB/s), load %.1f ms "
               "(%.0f MB/s), drop %.1f ms; copy %.1f ms = %.0f MB/s (%.0f ns/key)\n",
               round, keys, fill_ms, moved, moved_keys, mb, ser_ms, mb / (ser_ms / 1e3), chunk_ms,
               mb / (chunk_ms / 1e3), load_ms, mb / (load_ms / 1e3), drop_ms, copy,
               mb / (copy / 1e3), copy * 1e6 / (double)(moved_keys ? moved_keys : 1));
        for (unsigned i = 0; i < moved; i++) {
            free(bufs[i]);
            free(got[i]);
        }
        free(bufs);
        free(lens);
        free(got);
        eddy_keyed_state_destroy(&a);
        eddy_keyed_state_destroy(&b);
    }
    return 0;
}
