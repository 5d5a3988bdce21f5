/* hot_key.c - the hot key group of a keyed operator, from its senders.
 *
 * Every task that sends on a keyed edge counts its records per key group at
 * the partitioner and reports, per window, the busiest group and its count
 * (eddy_key_load_t in the heartbeat). A key group belongs to one instance
 * of the receiving operator whatever its parallelism, so the share of the
 * operator's records that its busiest group carries is the share of the
 * load one instance must take alone: past 1/share instances, more do not
 * help (controller/policy.c). Senders' windows differ in length, so counts
 * are added as rates. A sender that reports another group as its busiest
 * adds nothing to this one: for a key hot enough to matter every sender
 * sees it on top, and for others an underestimate is harmless. */
#include <stdlib.h>

#include "coordinator/internal.h"

/* Below this many records in the senders' latest windows together, the
 * busiest of the key groups is noise, not a hot key. */
#define HOT_KEY_MIN_RECORDS 100u

typedef struct group_rate {
    uint32_t key_group;
    double rate;
} group_rate_t;

bool coord_hot_key(coord_t *c, const coord_job_t *j, uint32_t stage, uint32_t *key_group,
                   double *share)
{
    group_rate_t *groups = NULL;
    size_t n = 0, cap = 0;
    double total_rate = 0;
    uint64_t records = 0;
    for (coord_worker_t *w = c->workers; w; w = w->next) {
        for (uint32_t i = 0; w->alive && i < w->n_metrics; i++) {
            const eddy_task_metrics_t *m = &w->metrics[i];
            if (m->job != j->num || m->epoch != j->epoch)
                continue;
            for (uint32_t k = 0; k < m->n_key_loads; k++) {
                const eddy_key_load_t *l = &m->key_loads[k];
                if (l->dst_stage != stage)
                    continue;
                double seconds = (double)l->window_ms / 1000.0;
                total_rate += (double)l->records / seconds;
                records += l->records;
                size_t g = 0;
                while (g < n && groups[g].key_group != l->key_group)
                    g++;
                if (g == n) {
                    if (n == cap) {
                        size_t grown_cap = cap ? 2 * cap : 8;
                        group_rate_t *grown = realloc(groups, grown_cap * sizeof *grown);
                        if (!grown) {
                            free(groups);
                            return false;
                        }
                        groups = grown;
                        cap = grown_cap;
                    }
                    groups[n++] = (group_rate_t){.key_group = l->key_group, .rate = 0};
                }
                groups[g].rate += (double)l->key_group_records / seconds;
            }
        }
    }
    size_t busiest = 0;
    for (size_t g = 1; g < n; g++)
        if (groups[g].rate > groups[busiest].rate)
            busiest = g;
    bool known = n > 0 && records >= HOT_KEY_MIN_RECORDS && total_rate > 0;
    if (known) {
        *key_group = groups[busiest].key_group;
        *share = groups[busiest].rate / total_rate;
    }
    free(groups);
    return known;
}
