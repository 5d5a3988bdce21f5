/* plugins.c - the coordinator's side of plugin shipping.
 *
 * A client uploads a plugin (PLUGIN with its bytes) before submitting a job
 * that needs it; `eddy local --plugin` and a restarted coordinator add it
 * from a file. The coordinator stores it by content hash (SHA-256) under
 * <snapshot dir>/plugins/ (so a restarted coordinator finds the plugins of
 * its running jobs), a private directory (0700, this user's; refused
 * otherwise), loads it into its registry (it builds and validates plans),
 * and serves its bytes to workers that ask (PLUGIN without bytes), so
 * workers need no shared file system and no new image to run it. Every
 * load and every serve re-hashes the stored bytes (plan/plugin.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "coordinator/internal.h"
#include "plan/plugin.h"

/* The store, opened (created 0700) at first use: refused unless private to
 * this process's user, so nobody else can plant a library under a hash a
 * job names (plan/plugin.h). */
static eddy_plugin_dir_t *store(coord_t *c, eddy_err_t *err)
{
    if (!c->plugin_store) {
        char dir[4200];
        snprintf(dir, sizeof dir, "%s/plugins", c->opts->snapshot_dir);
        c->plugin_store = eddy_plugin_dir_open(dir, err);
    }
    return c->plugin_store;
}

void coord_plugins_close(coord_t *c)
{
    eddy_plugin_dir_destroy(&c->plugin_store);
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
    eddy_plugin_dir_t *dir = store(c, err);
    int rc = dir ? eddy_plugin_dir_load_bytes(dir, data, len, NULL, eddy_registry_default(), hash, err)
                 : -1;
    free(data);
    return rc;
}

int coord_plugins_ensure(coord_t *c, const char *hash, eddy_err_t *err)
{
    if (eddy_plugin_loaded(eddy_registry_default(), hash))
        return 0;
    eddy_plugin_dir_t *dir = store(c, err);
    if (!dir)
        return -1;
    int rc = eddy_plugin_dir_load(dir, hash, eddy_registry_default(), err);
    if (rc == 0)
        return eddy_err_set(err, "plugin %s is not in %s", hash, eddy_plugin_dir_path(dir));
    return rc < 0 ? -1 : 0;
}

static void serve_fetch(coord_t *c, coord_worker_t *w, const eddy_msg_t *m)
{
    eddy_msg_t reply = {.type = EDDY_MSG_PLUGIN};
    snprintf(reply.u.plugin.hash, sizeof reply.u.plugin.hash, "%s", m->u.plugin.hash);
    eddy_err_t err = {{0}};
    size_t len = 0;
    char *data = NULL;
    eddy_plugin_dir_t *dir = store(c, &err);
    int got = dir ? eddy_plugin_dir_read(dir, m->u.plugin.hash, EDDY_PLUGIN_MAX_WIRE, &data, &len, &err)
                  : -1;
    if (got == 1) {
        reply.u.plugin.data = data;
        reply.u.plugin.len = (uint32_t)len;
        eddy_info("sending plugin %s (%zu bytes) to worker %u (%s)", m->u.plugin.hash, len, w->id,
                  w->name);
    } else {
        snprintf(reply.u.plugin.error, sizeof reply.u.plugin.error,
                 "the coordinator has no plugin %s", m->u.plugin.hash);
        eddy_warn("worker %u (%s) asked for plugin %s, which is not stored%s%s", w->id, w->name,
                  m->u.plugin.hash, got < 0 ? ": " : "", got < 0 ? err.msg : "");
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
    char hash[EDDY_PLUGIN_HASH_LEN + 1];
    eddy_err_t err = {{0}};
    if (!known)
        c->n_plugin_uploads++;
    eddy_plugin_dir_t *dir = store(c, &err);
    if (!dir || eddy_plugin_dir_load_bytes(dir, m->u.plugin.data, m->u.plugin.len, m->u.plugin.hash,
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
