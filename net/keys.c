/* keys.c - reading and writing a cluster's CURVE key files (see keys.h).
 *
 * The files are small text files an operator may edit (authorized_keys
 * especially), so the parser is line based and strict: every line is blank,
 * a comment, or exactly the expected words. A key is checked twice: as 40
 * Z85 characters that decode, and for a pair, by deriving the public key
 * from the secret one, so a truncated or edited file is caught at start
 * and not as handshakes that mysteriously fail. */
#include "net/keys.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "common/fsutil.h"

#define MAX_KEY_FILE ((size_t)1 << 20) /* authorized_keys of thousands of keys */
#define MAX_AUTHORIZED 100000

static const char *const role_names[] = {"none", "reader", "worker", "client"};

const char *eddy_role_name(eddy_role_t role)
{
    return (unsigned)role < sizeof role_names / sizeof *role_names ? role_names[role] : "none";
}

eddy_role_t eddy_role_parse(const char *name)
{
    for (int r = EDDY_ROLE_READER; r <= EDDY_ROLE_CLIENT; r++)
        if (!strcmp(name, role_names[r]))
            return (eddy_role_t)r;
    return EDDY_ROLE_NONE;
}

/* Reads path whole, refusing what others could read or change. */
static char *read_private(const char *path, eddy_err_t *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        eddy_err_set(err, "%s: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    char *text = NULL;
    if (fstat(fd, &st) < 0) {
        eddy_err_set(err, "%s: %s", path, strerror(errno));
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        eddy_err_set(err, "%s: not a regular file", path);
        goto out;
    }
    if (st.st_mode & 077) {
        eddy_err_set(err, "%s: permissions %04o are too open (group or others may access it); "
                          "chmod 600 it", path, (unsigned)(st.st_mode & 07777));
        goto out;
    }
    if ((size_t)st.st_size > MAX_KEY_FILE) {
        eddy_err_set(err, "%s: larger than %zu bytes", path, MAX_KEY_FILE);
        goto out;
    }
    text = malloc((size_t)st.st_size + 1);
    if (!text) {
        eddy_err_set(err, "%s: out of memory", path);
        goto out;
    }
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t r = read(fd, text + got, (size_t)st.st_size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            eddy_err_set(err, "%s: %s", path, r < 0 ? strerror(errno) : "file shrank while read");
            free(text);
            text = NULL;
            goto out;
        }
        got += (size_t)r;
    }
    text[got] = '\0';
    if (memchr(text, '\0', got)) {
        eddy_err_set(err, "%s: not a text file", path);
        free(text);
        text = NULL;
    }
out:
    close(fd);
    return text;
}

/* Splits the next line of *cursor into at most max words (in place).
 * Returns the number of words (0 for blank and comment lines), -1 at the
 * end of the text; a line of more than max words returns max + 1. */
static int next_line(char **cursor, char **words, int max, int *line_no)
{
    char *s = *cursor;
    if (!*s)
        return -1;
    char *nl = strchr(s, '\n');
    *cursor = nl ? nl + 1 : s + strlen(s);
    if (nl)
        *nl = '\0';
    (*line_no)++;
    /* '#' is a Z85 character: a comment is a whole line */
    size_t lead = strspn(s, " \t\r");
    if (s[lead] == '#')
        return 0;
    int n = 0;
    for (char *tok = strtok(s, " \t\r"); tok; tok = strtok(NULL, " \t\r")) {
        if (n == max)
            return max + 1;
        words[n++] = tok;
    }
    return n;
}

static int check_z85(const char *path, int line, const char *key, uint8_t *bin, eddy_err_t *err)
{
    uint8_t scratch[EDDY_KEY_BIN_LEN];
    if (strlen(key) != EDDY_KEY_Z85_LEN || !zmq_z85_decode(bin ? bin : scratch, key))
        return eddy_err_set(err, "%s:%d: corrupt key (want %d Z85 characters)", path, line,
                            EDDY_KEY_Z85_LEN);
    return 0;
}

/* Reads DIR/name: `public KEY` and, when secret is not NULL, `secret KEY`. */
static int load_pair(const char *dir, const char *name, char *public_key, char *secret_key,
                     eddy_err_t *err)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char *text = read_private(path, err);
    if (!text)
        return -1;
    int rc = -1, line = 0, n;
    char *cursor = text, *w[3];
    public_key[0] = '\0';
    if (secret_key)
        secret_key[0] = '\0';
    while ((n = next_line(&cursor, w, 2, &line)) >= 0) {
        if (n == 0)
            continue;
        char *slot = NULL;
        if (n == 2 && !strcmp(w[0], "public"))
            slot = public_key;
        else if (n == 2 && secret_key && !strcmp(w[0], "secret"))
            slot = secret_key;
        if (!slot || slot[0]) {
            eddy_err_set(err, "%s:%d: expected `public KEY`%s, once each", path, line,
                         secret_key ? " and `secret KEY`" : "");
            goto out;
        }
        if (check_z85(path, line, w[1], NULL, err) < 0)
            goto out;
        memcpy(slot, w[1], EDDY_KEY_Z85_LEN + 1);
    }
    if (!public_key[0] || (secret_key && !secret_key[0])) {
        eddy_err_set(err, "%s: corrupt key file (missing its %s key)", path,
                     public_key[0] ? "secret" : "public");
        goto out;
    }
    if (secret_key) {
        char derived[EDDY_KEY_Z85_LEN + 1];
        if (zmq_curve_public(derived, secret_key) != 0 || strcmp(derived, public_key)) {
            eddy_err_set(err, "%s: corrupt key file (the public key does not match the secret key)",
                         path);
            goto out;
        }
    }
    rc = 0;
out:
    free(text);
    return rc;
}

static int load_authorized(eddy_keys_t *self, eddy_err_t *err)
{
    char path[600];
    snprintf(path, sizeof path, "%s/authorized_keys", self->dir);
    char *text = read_private(path, err);
    if (!text)
        return -1;
    int rc = -1, line = 0, n;
    char *cursor = text, *w[3];
    size_t cap = 0;
    while ((n = next_line(&cursor, w, 2, &line)) >= 0) {
        if (n == 0)
            continue;
        eddy_role_t role = n == 2 ? eddy_role_parse(w[0]) : EDDY_ROLE_NONE;
        if (role == EDDY_ROLE_NONE) {
            eddy_err_set(err, "%s:%d: expected `ROLE KEY` with ROLE worker, client or reader",
                         path, line);
            goto out;
        }
        if (self->n_authorized == MAX_AUTHORIZED) {
            eddy_err_set(err, "%s: more than %d keys", path, MAX_AUTHORIZED);
            goto out;
        }
        if (self->n_authorized == cap) {
            cap = cap ? cap * 2 : 8;
            eddy_authorized_key_t *grown = realloc(self->authorized, cap * sizeof *grown);
            if (!grown) {
                eddy_err_set(err, "%s: out of memory", path);
                goto out;
            }
            self->authorized = grown;
        }
        eddy_authorized_key_t *a = &self->authorized[self->n_authorized];
        if (check_z85(path, line, w[1], a->key, err) < 0)
            goto out;
        a->role = role;
        self->n_authorized++;
    }
    if (!self->n_authorized) {
        eddy_err_set(err, "%s: no keys (nothing could connect)", path);
        goto out;
    }
    rc = 0;
out:
    free(text);
    return rc;
}

static int check_dir(const char *dir, eddy_err_t *err)
{
    struct stat st;
    if (stat(dir, &st) < 0)
        return eddy_err_set(err, "keys directory %s: %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return eddy_err_set(err, "keys directory %s: not a directory", dir);
    return 0;
}

static bool file_exists(const char *dir, const char *name)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

eddy_keys_t *eddy_keys_load(const char *dir, eddy_keys_use_t use, eddy_err_t *err)
{
    if (!dir || !*dir) {
        eddy_err_set(err, "keys directory: empty path");
        return NULL;
    }
    if (!zmq_has("curve")) {
        eddy_err_set(err, "this libzmq was built without CURVE: --keys cannot be used");
        return NULL;
    }
    if (strlen(dir) >= sizeof ((eddy_keys_t *)0)->dir) {
        eddy_err_set(err, "keys directory: path too long");
        return NULL;
    }
    if (check_dir(dir, err) < 0)
        return NULL;
    eddy_keys_t *self = calloc(1, sizeof *self);
    if (!self) {
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    snprintf(self->dir, sizeof self->dir, "%s", dir);
    self->use = use;
    int rc;
    if (use == EDDY_KEYS_SERVER) {
        rc = load_pair(dir, "server.key", self->public_key, self->secret_key, err);
        if (rc == 0)
            rc = load_authorized(self, err);
        memcpy(self->server_public, self->public_key, sizeof self->server_public);
        self->role = EDDY_ROLE_WORKER;
    } else {
        rc = load_pair(dir, "server.pub", self->server_public, NULL, err);
        /* client.key if the directory has one; a read-only operator is
         * handed server.pub and reader.key only */
        bool client = file_exists(dir, "client.key") || !file_exists(dir, "reader.key");
        if (rc == 0)
            rc = load_pair(dir, client ? "client.key" : "reader.key", self->public_key,
                           self->secret_key, err);
        self->role = client ? EDDY_ROLE_CLIENT : EDDY_ROLE_READER;
    }
    if (rc < 0)
        eddy_keys_destroy(&self);
    return self;
}

void eddy_keys_destroy(eddy_keys_t **self_p)
{
    eddy_keys_t *self = *self_p;
    if (!self)
        return;
    free(self->authorized);
    /* secrets do not outlive their use in freed memory */
    memset(self, 0, sizeof *self);
    free(self);
    *self_p = NULL;
}

eddy_role_t eddy_keys_role_of(const eddy_keys_t *self, const uint8_t key[EDDY_KEY_BIN_LEN])
{
    eddy_role_t best = EDDY_ROLE_NONE;
    /* a key listed under several roles gets the widest */
    for (size_t i = 0; i < self->n_authorized; i++)
        if (!memcmp(self->authorized[i].key, key, EDDY_KEY_BIN_LEN) &&
            self->authorized[i].role > best)
            best = self->authorized[i].role;
    return best;
}

/* ---- keygen ----------------------------------------------------------------- */

static int write_new(const char *dir, const char *name, const char *text, eddy_err_t *err)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return eddy_err_set(err, "%s: %s", path,
                            errno == EEXIST ? "exists (keygen never overwrites keys)" : strerror(errno));
    int rc = 0;
    if (fchmod(fd, 0600) < 0 || eddy_write_all(fd, text, strlen(text)) < 0 || fsync(fd) < 0)
        rc = eddy_err_set(err, "%s: %s", path, strerror(errno));
    close(fd);
    return rc;
}

static const char *const key_files[] = {"server.key", "server.pub", "client.key", "reader.key",
                                        "authorized_keys"};
#define N_KEY_FILES (sizeof key_files / sizeof *key_files)

/* Every file of an existing set must load: a kept set that is broken would
 * otherwise surface later as handshakes that fail on every process. */
static int check_existing(const char *dir, eddy_err_t *err)
{
    eddy_keys_t *server = eddy_keys_load(dir, EDDY_KEYS_SERVER, err);
    if (!server)
        return -1;
    eddy_keys_destroy(&server);
    char public_key[EDDY_KEY_Z85_LEN + 1], secret_key[EDDY_KEY_Z85_LEN + 1];
    int rc = 0;
    for (size_t i = 2; i <= 3 && rc == 0; i++) /* client.key, reader.key */
        rc = load_pair(dir, key_files[i], public_key, secret_key, err);
    memset(secret_key, 0, sizeof secret_key);
    return rc;
}

int eddy_keys_generate_once(const char *dir, bool *kept, eddy_err_t *err)
{
    *kept = false;
    size_t present = 0;
    const char *missing = NULL;
    for (size_t i = 0; i < N_KEY_FILES; i++) {
        if (file_exists(dir, key_files[i]))
            present++;
        else if (!missing)
            missing = key_files[i];
    }
    if (present == 0)
        return eddy_keys_generate(dir, err);
    if (missing)
        return eddy_err_set(err, "%s holds only some of the key files (no %s): restore it, or "
                                 "empty it to make new keys", dir, missing);
    if (check_existing(dir, err) < 0)
        return -1;
    *kept = true;
    return 0;
}

int eddy_keys_generate(const char *dir, eddy_err_t *err)
{
    if (!zmq_has("curve"))
        return eddy_err_set(err, "this libzmq was built without CURVE");
    if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        return eddy_err_set(err, "%s: %s", dir, strerror(errno));
    if (check_dir(dir, err) < 0)
        return -1;
    for (size_t i = 0; i < N_KEY_FILES; i++)
        if (file_exists(dir, key_files[i]))
            return eddy_err_set(err, "%s/%s exists (keygen never overwrites keys)", dir, key_files[i]);
    if (chmod(dir, 0700) < 0)
        return eddy_err_set(err, "%s: %s", dir, strerror(errno));
    char pub[3][EDDY_KEY_Z85_LEN + 1], sec[3][EDDY_KEY_Z85_LEN + 1];
    for (int i = 0; i < 3; i++)
        if (zmq_curve_keypair(pub[i], sec[i]) != 0)
            return eddy_err_set(err, "cannot make a key pair: %s", zmq_strerror(errno));
    static const char *const what[] = {"server (coordinators and workers)", "client", "reader"};
    char text[1024];
    int rc = 0;
    for (int i = 0; i < 3 && rc == 0; i++) {
        snprintf(text, sizeof text,
                 "# eddy CURVE key pair: %s. Keep it secret.\npublic %s\nsecret %s\n", what[i],
                 pub[i], sec[i]);
        rc = write_new(dir, key_files[i == 0 ? 0 : i + 1], text, err);
    }
    if (rc == 0) {
        snprintf(text, sizeof text, "# eddy CURVE server public key: what clients check\npublic %s\n",
                 pub[0]);
        rc = write_new(dir, "server.pub", text, err);
    }
    if (rc == 0) {
        snprintf(text, sizeof text,
                 "# eddy authorized keys: ROLE KEY a line, ROLE one of\n"
                 "#   worker  register, heartbeat, send data, fetch plugins\n"
                 "#   client  everything: submit, cancel, rescale, plugin upload, status\n"
                 "#   reader  read-only requests: status, jobs, scaling, metrics\n"
                 "worker %s\nclient %s\nreader %s\n",
                 pub[0], pub[1], pub[2]);
        rc = write_new(dir, "authorized_keys", text, err);
    }
    memset(sec, 0, sizeof sec);
    memset(text, 0, sizeof text);
    if (rc == 0)
        rc = eddy_fsync_dir(dir, err);
    return rc;
}
