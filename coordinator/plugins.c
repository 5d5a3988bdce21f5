/* plugins.c - the coordinator's side of plugin shipping.
 *
 * A client uploads a plugin (PLUGIN with its bytes) before submitting a job
 * that needs it; `eddy local --plugin` and a restarted coordinator add it
 * from a file. The coordinator stores it by content hash under
 * <snapshot dir>/plugins/ (so a restarted coordinator finds the plugins of
 * its running jobs), loads it into its registry (it builds and validates
 * plans), and serves its bytes to workers that ask (PLUGIN without bytes),
 * so workers need no shared file system and no new image to run it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "coordinator/internal.h"
#include "plan/plugin.h"

static void store_dir(const coord_t *c, char *dir, size_t size)
{
    snprintf(dir, size, "%s/plugins", c->opts->snapshot_dir);
}

int coord_plugins_add_file(coord_t *c, const char *path, char hash[EDDY_PLUGIN_HASH_LEN + 1],
                           eddy_err_t *err)
{
    size_t len = 0;
    char *data = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return eddy_err_set(err, "cannot open plugin %s: %s", path, strerror(errno));
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
        char *grown = len + n <= EDDY_PLUGIN_MAX_BYTES ? realloc(data, len + n) : NULL;
        if (!grown) {
            free(data);
            fclose(f);
            return eddy_err_set(err, "plugin %s is too large or memory ran out", path);
        }
        data = grown;
        memcpy(data + len, buf, n);
        len += n;
    }
    fclose(f);
    char dir[4200];
    store_dir(c, dir, sizeof dir);
    int rc = eddy_plugin_load_bytes(data, len, NULL, dir, eddy_registry_default(), hash, err);
    free(data);
    return rc;
}

int coord_plugins_ensure(coord_t *c, const char *hash, eddy_err_t *err)
{
    if (eddy_plugin_loaded(eddy_registry_default(), hash))
        return 0;
    char dir[4200], path[4300];
    store_dir(c, dir, sizeof dir);
    if (eddy_plugin_path(dir, hash, path, sizeof path) < 0)
        return eddy_err_set(err, "plugin %s is not in %s", hash, dir);
    return eddy_plugin_load(path, eddy_registry_default(), NULL, err);
}

static void serve_fetch(coord_t *c, coord_worker_t *w, const eddy_msg_t *m)
{
    eddy_msg_t reply = {.type = EDDY_MSG_PLUGIN};
    snprintf(reply.u.plugin.hash, sizeof reply.u.plugin.hash, "%s", m->u.plugin.hash);
    char dir[4200], path[4300];
    store_dir(c, dir, sizeof dir);
    size_t len = 0;
    char *data = NULL;
    if (eddy_plugin_path(dir, m->u.plugin.hash, path, sizeof path) == 0) {
        FILE *f = fopen(path, "rb");
        if (f && fseek(f, 0, SEEK_END) == 0) {
            long size = ftell(f);
            if (size > 0 && (unsigned long)size <= EDDY_PLUGIN_MAX_WIRE && fseek(f, 0, SEEK_SET) == 0 &&
                (data = malloc((size_t)size)) && fread(data, 1, (size_t)size, f) == (size_t)size)
                len = (size_t)size;
        }
        if (f)
            fclose(f);
    }
    if (len) {
        reply.u.plugin.data = data;
        reply.u.plugin.len = (uint32_t)len;
        eddy_info("sending plugin %s (%zu bytes) to worker %u (%s)", m->u.plugin.hash, len, w->id,
                  w->name);
    } else {
        snprintf(reply.u.plugin.error, sizeof reply.u.plugin.error,
                 "the coordinator has no plugin %s", m->u.plugin.hash);
        eddy_warn("worker %u (%s) asked for plugin %s, which is not stored in %s", w->id, w->name,
                  m->u.plugin.hash, dir);
    }
    coord_send_worker(c, w, &reply);
    free(data);
}

void coord_plugins_on_message(coord_t *c, const unsigned char *id, size_t id_len, coord_worker_t *w,
                              const eddy_msg_t *m)
{
    if (!m->u.plugin.len) {
        if (w)
            serve_fetch(c, w, m);
        else
            coord_reply(c, id, id_len, 2, "a plugin upload carries the library's bytes");
        return;
    }
    /* a bounded store: uploads of new plugins past --max-plugins are refused */
    bool known = m->u.plugin.hash[0] && eddy_plugin_loaded(eddy_registry_default(), m->u.plugin.hash);
    if (!known && c->n_plugin_uploads >= c->limits.max_plugins) {
        char msg[160];
        snprintf(msg, sizeof msg, "plugin upload refused: %u plugins stored (--max-plugins)",
                 c->n_plugin_uploads);
        coord_reject(&c->rejects, COORD_REJECT_PLUGINS, "%s", msg);
        coord_reply(c, id, id_len, 2, msg);
        return;
    }
    char dir[4200], hash[EDDY_PLUGIN_HASH_LEN + 1];
    store_dir(c, dir, sizeof dir);
    eddy_err_t err = {{0}};
    if (!known)
        c->n_plugin_uploads++;
    if (eddy_plugin_load_bytes(m->u.plugin.data, m->u.plugin.len, m->u.plugin.hash, dir,
                               eddy_registry_default(), hash, &err) < 0) {
        eddy_warn("plugin upload refused: %s", err.msg);
        coord_reply(c, id, id_len, 2, err.msg);
        return;
    }
    char body[128];
    snprintf(body, sizeof body, "plugin %s loaded", hash);
    eddy_info("%s (%u bytes)", body, m->u.plugin.len);
    coord_reply(c, id, id_len, 0, body);
}
