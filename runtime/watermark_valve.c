/* watermark_valve.c - the minimum over input channels (see watermark_valve.h).
 *
 * Owns one small record per channel. Recomputing the minimum is a scan of
 * the channels, done only when a channel's watermark or status changes,
 * which is at most once per watermark interval per channel. */
#include "runtime/watermark_valve.h"

#include <stdlib.h>

#include "api/operator.h"

typedef struct channel {
    int64_t wm;
    bool idle, ended, aligned;
} channel_t;

struct eddy_wm_valve {
    uint32_t n;
    int64_t current;
    channel_t *channels;
};

eddy_wm_valve_t *eddy_wm_valve_new(uint32_t n_channels, int64_t floor)
{
    eddy_wm_valve_t *v = calloc(1, sizeof *v);
    if (!v)
        return NULL;
    v->channels = calloc(n_channels ? n_channels : 1, sizeof *v->channels);
    if (!v->channels) {
        free(v);
        return NULL;
    }
    v->n = n_channels;
    v->current = floor;
    for (uint32_t i = 0; i < n_channels; i++)
        v->channels[i] = (channel_t){floor, false, false, true};
    return v;
}

void eddy_wm_valve_destroy(eddy_wm_valve_t **self_p)
{
    if (!*self_p)
        return;
    free((*self_p)->channels);
    free(*self_p);
    *self_p = NULL;
}

/* The new minimum over the channels that count; advances current. */
static bool recompute(eddy_wm_valve_t *v, int64_t *out)
{
    bool any = false, all_ended = true;
    int64_t min = EDDY_WATERMARK_MAX;
    for (uint32_t i = 0; i < v->n; i++) {
        channel_t *c = &v->channels[i];
        if (c->ended)
            continue;
        all_ended = false;
        if (c->idle || !c->aligned)
            continue;
        any = true;
        if (c->wm < min)
            min = c->wm;
    }
    if (!any && !all_ended)
        return false; /* everything idle or catching up: hold the clock */
    if (min <= v->current)
        return false;
    v->current = min;
    if (out)
        *out = min;
    return true;
}

bool eddy_wm_valve_watermark(eddy_wm_valve_t *self, uint32_t ch, int64_t wm, int64_t *out)
{
    if (ch >= self->n || self->channels[ch].ended)
        return false;
    channel_t *c = &self->channels[ch];
    c->idle = false;
    if (wm > c->wm)
        c->wm = wm;
    if (c->wm >= self->current)
        c->aligned = true;
    return recompute(self, out);
}

void eddy_wm_valve_activity(eddy_wm_valve_t *self, uint32_t ch)
{
    if (ch >= self->n || !self->channels[ch].idle)
        return;
    channel_t *c = &self->channels[ch];
    c->idle = false;
    c->aligned = c->wm >= self->current;
}

bool eddy_wm_valve_idle(eddy_wm_valve_t *self, uint32_t ch, int64_t *out)
{
    if (ch >= self->n || self->channels[ch].ended)
        return false;
    self->channels[ch].idle = true;
    self->channels[ch].aligned = false;
    return recompute(self, out);
}

bool eddy_wm_valve_ended(eddy_wm_valve_t *self, uint32_t ch, int64_t *out)
{
    if (ch >= self->n || self->channels[ch].ended)
        return false;
    self->channels[ch].ended = true;
    return recompute(self, out);
}

int64_t eddy_wm_valve_current(const eddy_wm_valve_t *self)
{
    return self->current;
}

bool eddy_wm_valve_all_idle(const eddy_wm_valve_t *self)
{
    bool any_idle = false;
    for (uint32_t i = 0; i < self->n; i++) {
        if (self->channels[i].ended)
            continue;
        if (!self->channels[i].idle)
            return false;
        any_idle = true;
    }
    return any_idle;
}
