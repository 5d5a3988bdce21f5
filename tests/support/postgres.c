/* postgres.c - a real PostgreSQL server for tests (see postgres.h).
 *
 * Why a real server: the sink's contract is PostgreSQL's (PREPARE
 * TRANSACTION, pg_prepared_xacts, ON CONFLICT, max_prepared_transactions);
 * a fake would agree with whatever the sink assumes. initdb takes about a
 * second, so each test that needs a server starts its own. */
#include "tests/support/postgres.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "tests/support/etcd.h"
#include "tests/support/lines.h"

#define INITDB_DEADLINE_MS 60000
#define START_DEADLINE_MS 30000
#define STOP_GRACE_MS 10000
#define START_ATTEMPTS 3

struct eddy_test_pg {
    pid_t pid;
    char *dir;
    int port;
};

static const char *bindir(void)
{
    const char *d = getenv("EDDY_PG_BINDIR");
    return d && d[0] ? d : EDDY_TEST_PG_BINDIR;
}

static void nap(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* In a forked child: become the postgres user when root (PostgreSQL
 * refuses root), die with the test, log to logp, exec argv. */
static void child_exec(const char *logp, pid_t parent, char *const argv[])
{
    if (geteuid() == 0) {
        struct passwd *pw = getpwnam("postgres");
        if (!pw || setgid(pw->pw_gid) != 0 || setuid(pw->pw_uid) != 0)
            _exit(126);
    }
    /* After setuid: a credential change clears the parent-death signal. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(127);
    int in = open("/dev/null", O_RDONLY);
    int lf = open(logp, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (in < 0 || lf < 0)
        _exit(127);
    dup2(in, 0);
    dup2(lf, 1);
    dup2(lf, 2);
    close_range(3, ~0U, 0);
    execv(argv[0], argv);
    _exit(127);
}

static pid_t spawn(const char *logp, char *const argv[], eddy_err_t *err)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        eddy_err_set(err, "fork: %s", strerror(errno));
        return -1;
    }
    if (pid == 0)
        child_exec(logp, parent, argv);
    return pid;
}

static void log_tail(const char *logp, char *out, size_t size)
{
    out[0] = '\0';
    FILE *f = fopen(logp, "r");
    if (!f)
        return;
    if (fseek(f, -400, SEEK_END) < 0)
        rewind(f);
    size_t n = fread(out, 1, size - 1, f);
    out[n] = '\0';
    fclose(f);
    for (char *p = out; *p; p++)
        if (*p == '\n')
            *p = ' ';
}

static int run_initdb(eddy_test_pg_t *self, eddy_err_t *err)
{
    char data[600], logp[600], bin[600];
    snprintf(data, sizeof data, "%s/data", self->dir);
    snprintf(logp, sizeof logp, "%s/initdb.log", self->dir);
    snprintf(bin, sizeof bin, "%s/initdb", bindir());
    if (access(bin, X_OK) != 0)
        return eddy_err_set(err, "%s not found (%s): install the postgresql package or set "
                            "EDDY_PG_BINDIR", bin, strerror(errno));
    char *argv[] = {bin, "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8",
                    "--no-sync", "--no-locale", NULL};
    pid_t pid = spawn(logp, argv, err);
    if (pid < 0)
        return -1;
    uint64_t deadline = eddy_mono_ms() + INITDB_DEADLINE_MS;
    int status;
    while (waitpid(pid, &status, WNOHANG) == 0) {
        if (eddy_mono_ms() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            return eddy_err_set(err, "initdb did not finish within %d ms", INITDB_DEADLINE_MS);
        }
        nap(20);
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        char tail[420];
        log_tail(logp, tail, sizeof tail);
        return eddy_err_set(err, "initdb failed (status %d): ...%s", status, tail);
    }
    return 0;
}

static void stop_server(eddy_test_pg_t *self)
{
    if (self->pid <= 0)
        return;
    kill(self->pid, SIGINT); /* fast shutdown: no waiting for clients */
    uint64_t deadline = eddy_mono_ms() + STOP_GRACE_MS;
    while (waitpid(self->pid, NULL, WNOHANG) == 0) {
        if (eddy_mono_ms() > deadline) {
            kill(self->pid, SIGKILL);
            waitpid(self->pid, NULL, 0);
            break;
        }
        nap(20);
    }
    self->pid = 0;
}

/* 1 serving, 0 retry on another port, -1 give up. */
static int try_start(eddy_test_pg_t *self, int max_prepared, eddy_err_t *err)
{
    int port = eddy_test_free_port(err);
    if (port < 0)
        return -1;
    self->port = port;
    char data[600], logp[600], bin[600], ports[16], mpt[64];
    snprintf(data, sizeof data, "%s/data", self->dir);
    snprintf(logp, sizeof logp, "%s/postgres.log", self->dir);
    snprintf(bin, sizeof bin, "%s/postgres", bindir());
    snprintf(ports, sizeof ports, "%d", port);
    snprintf(mpt, sizeof mpt, "max_prepared_transactions=%d", max_prepared);
    truncate(logp, 0);
    char *argv[] = {bin, "-D", data, "-p", ports, "-k", self->dir, "-c", mpt,
                    "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c",
                    "max_connections=60", NULL};
    pid_t pid = spawn(logp, argv, err);
    if (pid < 0)
        return -1;
    self->pid = pid;
    char conninfo[128];
    snprintf(conninfo, sizeof conninfo,
             "host=127.0.0.1 port=%d dbname=postgres user=postgres connect_timeout=2", port);
    uint64_t deadline = eddy_mono_ms() + START_DEADLINE_MS;
    for (;;) {
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            self->pid = 0;
            char tail[420];
            log_tail(logp, tail, sizeof tail);
            eddy_err_set(err, "postgres exited (status %d) before serving on port %d: ...%s",
                         status, port, tail);
            return strstr(tail, "already in use") ? 0 : -1;
        }
        if (PQping(conninfo) == PQPING_OK)
            return 1;
        if (eddy_mono_ms() > deadline) {
            stop_server(self);
            char tail[420];
            log_tail(logp, tail, sizeof tail);
            return eddy_err_set(err, "postgres did not accept connections on port %d within %d ms: ...%s",
                                port, START_DEADLINE_MS, tail);
        }
        nap(50);
    }
}

eddy_test_pg_t *eddy_test_pg_start(int max_prepared_transactions, eddy_err_t *err)
{
    eddy_test_pg_t *self = calloc(1, sizeof *self);
    if (!self) {
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    self->dir = eddy_test_mkdtemp("pg", err);
    if (!self->dir) {
        free(self);
        return NULL;
    }
    if (geteuid() == 0) {
        struct passwd *pw = getpwnam("postgres");
        if (!pw || chown(self->dir, pw->pw_uid, pw->pw_gid) != 0) {
            eddy_err_set(err, "running as root, but cannot hand %s to the postgres user (%s)",
                         self->dir, pw ? strerror(errno) : "no such user");
            eddy_test_pg_stop(&self);
            return NULL;
        }
    }
    if (run_initdb(self, err) < 0) {
        eddy_test_pg_stop(&self);
        return NULL;
    }
    int rc = 0;
    for (int i = 0; i < START_ATTEMPTS && rc == 0; i++)
        rc = try_start(self, max_prepared_transactions, err);
    if (rc <= 0) {
        eddy_test_pg_stop(&self);
        return NULL;
    }
    return self;
}

void eddy_test_pg_stop(eddy_test_pg_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    eddy_test_pg_t *self = *self_p;
    stop_server(self);
    eddy_test_rm_rf(self->dir);
    free(self->dir);
    free(self);
    *self_p = NULL;
}

int eddy_test_pg_port(const eddy_test_pg_t *self)
{
    return self->port;
}

const char *eddy_test_pg_uri(const eddy_test_pg_t *self, const char *table, char *buf, size_t size)
{
    snprintf(buf, size, "postgresql://postgres@127.0.0.1:%d/postgres?table=%s", self->port, table);
    return buf;
}

PGconn *eddy_test_pg_connect(const eddy_test_pg_t *self, eddy_err_t *err)
{
    char conninfo[128];
    snprintf(conninfo, sizeof conninfo,
             "host=127.0.0.1 port=%d dbname=postgres user=postgres connect_timeout=5", self->port);
    PGconn *c = PQconnectdb(conninfo);
    if (!c || PQstatus(c) != CONNECTION_OK) {
        eddy_err_set(err, "connect to 127.0.0.1:%d: %s", self->port, c ? PQerrorMessage(c) : "out of memory");
        PQfinish(c);
        return NULL;
    }
    return c;
}

PGresult *eddy_test_pg_query(PGconn *conn, const char *sql, eddy_err_t *err)
{
    PGresult *r = PQexec(conn, sql);
    ExecStatusType st = PQresultStatus(r);
    if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
        eddy_err_set(err, "%s: %s", sql, PQresultErrorMessage(r));
        PQclear(r);
        return NULL;
    }
    return r;
}

long long eddy_test_pg_scalar(PGconn *conn, const char *sql, eddy_err_t *err)
{
    PGresult *r = eddy_test_pg_query(conn, sql, err);
    if (!r)
        return -1;
    long long v = -1;
    if (PQntuples(r) == 1 && PQnfields(r) == 1)
        v = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    else
        eddy_err_set(err, "%s: %d rows, want one value", sql, PQntuples(r));
    PQclear(r);
    return v;
}

char *eddy_test_pg_rows_text(PGconn *conn, const char *sql, size_t *len, eddy_err_t *err)
{
    PGresult *r = eddy_test_pg_query(conn, sql, err);
    if (!r)
        return NULL;
    size_t cap = 1, used = 0;
    for (int i = 0; i < PQntuples(r); i++)
        for (int f = 0; f < PQnfields(r); f++)
            cap += (size_t)PQgetlength(r, i, f) + 1;
    char *text = malloc(cap);
    if (!text) {
        PQclear(r);
        eddy_err_set(err, "no memory for %d rows", PQntuples(r));
        return NULL;
    }
    for (int i = 0; i < PQntuples(r); i++)
        for (int f = 0; f < PQnfields(r); f++)
            used += (size_t)snprintf(text + used, cap - used, "%s%s", PQgetvalue(r, i, f),
                                     f + 1 < PQnfields(r) ? "\t" : "\n");
    PQclear(r);
    char *sorted = eddy_test_sort_lines(text, used, len, NULL);
    free(text);
    if (!sorted)
        eddy_err_set(err, "no memory to sort %zu bytes of rows", used);
    return sorted;
}
