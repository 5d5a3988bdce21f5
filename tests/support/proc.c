/* proc.c - process helpers for the integration tests (see proc.h).
 *
 * Why: every integration test drives the real `eddy` binary as a user
 * would, so spawning, deadlines, output capture and the reference results
 * live here once instead of in each test. */
#include "tests/support/proc.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"

void eddy_nap_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* ---- spawning -------------------------------------------------------------- */

static int open_out(const char *path)
{
    if (!path)
        return open("/dev/null", O_WRONLY | O_CLOEXEC);
    return open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
}

int eddy_proc_start(eddy_proc_t *p, char *const argv[], const char *stdout_path,
                    const char *stderr_path, eddy_err_t *err)
{
    memset(p, 0, sizeof *p);
    p->stdout_fd = -1;
    int pipefd[2] = {-1, -1};
    int out = -1, errfd = open_out(stderr_path);
    if (stdout_path == EDDY_PROC_PIPE) {
        if (pipe2(pipefd, O_CLOEXEC) < 0) {
            close(errfd);
            return eddy_err_set(err, "pipe: %s", strerror(errno));
        }
        out = pipefd[1];
    } else {
        out = open_out(stdout_path);
    }
    if (out < 0 || errfd < 0) {
        int e = errno;
        if (out >= 0)
            close(out);
        if (errfd >= 0)
            close(errfd);
        if (pipefd[0] >= 0)
            close(pipefd[0]);
        return eddy_err_set(err, "cannot open output files for %s: %s", argv[0], strerror(e));
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(out);
        close(errfd);
        if (pipefd[0] >= 0)
            close(pipefd[0]);
        return eddy_err_set(err, "fork: %s", strerror(e));
    }
    if (pid == 0) {
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        signal(SIGPIPE, SIG_DFL);
        int in = open("/dev/null", O_RDONLY);
        dup2(in, 0);
        dup2(out, 1);
        dup2(errfd, 2);
        close_range(3, ~0U, 0);
        execv(argv[0], argv);
        dprintf(2, "exec %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid); /* also here, so kill(-pid) works at once */
    close(out);
    close(errfd);
    p->pid = pid;
    p->stdout_fd = pipefd[0];
    return 0;
}

static void note_status(eddy_proc_t *p, int status)
{
    p->exited = true;
    p->code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

bool eddy_proc_alive(eddy_proc_t *p)
{
    if (p->pid <= 0 || p->exited)
        return false;
    int status;
    if (waitpid(p->pid, &status, WNOHANG) == p->pid) {
        note_status(p, status);
        return false;
    }
    return true;
}

int eddy_proc_wait(eddy_proc_t *p, uint64_t timeout_ms)
{
    if (p->pid <= 0)
        return -1;
    uint64_t deadline = eddy_mono_ms() + timeout_ms;
    unsigned nap = 1;
    while (eddy_proc_alive(p)) {
        if (eddy_mono_ms() >= deadline)
            return -1;
        eddy_nap_ms(nap);
        if (nap < 20)
            nap *= 2;
    }
    return p->code;
}

void eddy_proc_kill(eddy_proc_t *p, uint64_t grace_ms)
{
    if (p->pid > 0) {
        if (!p->exited) {
            kill(-p->pid, SIGTERM);
            kill(p->pid, SIGTERM);
            if (eddy_proc_wait(p, grace_ms) < 0) {
                kill(-p->pid, SIGKILL);
                kill(p->pid, SIGKILL);
                int status;
                if (waitpid(p->pid, &status, 0) == p->pid)
                    note_status(p, status);
            }
        }
        kill(-p->pid, SIGKILL); /* stragglers of the group (workers) */
    }
    if (p->stdout_fd >= 0)
        close(p->stdout_fd);
    p->stdout_fd = -1;
}

int eddy_proc_run(char *const argv[], uint64_t timeout_ms, char **out, char **errout)
{
    eddy_err_t err = {{0}};
    char *dir = NULL;
    const char *base = getenv("TMPDIR");
    char tmpl[512];
    snprintf(tmpl, sizeof tmpl, "%s/eddy-run-XXXXXX", base && *base ? base : "/tmp");
    dir = mkdtemp(tmpl);
    if (!dir)
        return -1;
    char po[600], pe[600];
    snprintf(po, sizeof po, "%s/out", dir);
    snprintf(pe, sizeof pe, "%s/err", dir);
    eddy_proc_t p;
    int rc = -1;
    if (eddy_proc_start(&p, argv, po, pe, &err) == 0) {
        rc = eddy_proc_wait(&p, timeout_ms);
        if (rc < 0)
            eddy_proc_kill(&p, 1000);
        else
            eddy_proc_kill(&p, 0);
    }
    if (out)
        *out = eddy_read_file(po, NULL);
    if (errout)
        *errout = eddy_read_file(pe, NULL);
    if (out && !*out)
        *out = strdup("");
    if (errout && !*errout)
        *errout = strdup(rc < 0 && err.msg[0] ? err.msg : "");
    unlink(po);
    unlink(pe);
    rmdir(dir);
    return rc;
}

/* ---- files ----------------------------------------------------------------- */

char *eddy_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    size_t r;
    while (buf && (r = fread(buf + n, 1, cap - n, f)) > 0) {
        n += r;
        if (n == cap) {
            char *nb = realloc(buf, cap * 2 + 1);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (!buf)
        return NULL;
    buf[n] = '\0';
    if (len)
        *len = n;
    return buf;
}

int eddy_write_file(const char *path, const char *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    int ok = fwrite(data, 1, len, f) == len;
    return fclose(f) == 0 && ok ? 0 : -1;
}

bool eddy_poll_until(bool (*cond)(void *arg), void *arg, uint64_t timeout_ms)
{
    uint64_t deadline = eddy_mono_ms() + timeout_ms;
    unsigned nap = 5;
    for (;;) {
        if (cond(arg))
            return true;
        if (eddy_mono_ms() >= deadline)
            return false;
        eddy_nap_ms(nap);
        if (nap < 100)
            nap *= 2;
    }
}

/* ---- ports ----------------------------------------------------------------- */

int eddy_test_free_ports(int n, int *ports, eddy_err_t *err)
{
    int fds[16];
    if (n > 16)
        return eddy_err_set(err, "at most 16 ports at once");
    int rc = 0, i;
    for (i = 0; i < n; i++) {
        fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t alen = sizeof a;
        if (fds[i] < 0 || bind(fds[i], (struct sockaddr *)&a, sizeof a) < 0 ||
            getsockname(fds[i], (struct sockaddr *)&a, &alen) < 0) {
            rc = eddy_err_set(err, "bind 127.0.0.1:0: %s", strerror(errno));
            if (fds[i] >= 0)
                close(fds[i]);
            break;
        }
        ports[i] = ntohs(a.sin_port);
    }
    while (i-- > 0)
        close(fds[i]);
    return rc;
}

/* ---- status ---------------------------------------------------------------- */

json_t *eddy_test_status(int control_port)
{
    char coord[64];
    snprintf(coord, sizeof coord, "tcp://127.0.0.1:%d", control_port);
    char *argv[] = {EDDY_BINARY, "status", "--json", "--coordinator", coord, NULL};
    char *out = NULL;
    int rc = eddy_proc_run(argv, 10000, &out, NULL);
    json_t *doc = NULL;
    if (rc == 0 && out)
        doc = json_loads(out, 0, NULL);
    free(out);
    return doc;
}

json_t *eddy_test_status_job(json_t *status, const char *job)
{
    size_t i;
    json_t *j;
    json_array_foreach(json_object_get(status, "jobs"), i, j)
    {
        const char *id = json_string_value(json_object_get(j, "id"));
        if (id && !strcmp(id, job))
            return j;
    }
    return NULL;
}

typedef struct state_wait {
    int port;
    const char *job, *state;
    int64_t min_completed, min_restarts;
    eddy_proc_t *owner;
    bool gone;
} state_wait_t;

static bool job_in_state(void *arg)
{
    state_wait_t *w = arg;
    if (w->owner && !eddy_proc_alive(w->owner)) {
        w->gone = true;
        return true;
    }
    json_t *doc = eddy_test_status(w->port);
    json_t *j = doc ? eddy_test_status_job(doc, w->job) : NULL;
    const char *s = j ? json_string_value(json_object_get(j, "state")) : NULL;
    json_t *ck = j ? json_object_get(j, "last_checkpoint") : NULL;
    bool ok = s && !strcmp(s, w->state) &&
              json_integer_value(json_object_get(ck, "completed")) >= w->min_completed &&
              json_integer_value(json_object_get(j, "restarts")) >= w->min_restarts;
    json_decref(doc);
    return ok;
}

bool eddy_test_wait_job_progress(int control_port, const char *job, const char *state,
                                 int64_t min_completed, int64_t min_restarts, uint64_t timeout_ms,
                                 eddy_proc_t *owner)
{
    state_wait_t w = {control_port, job, state, min_completed, min_restarts, owner, false};
    return eddy_poll_until(job_in_state, &w, timeout_ms) && !w.gone;
}

bool eddy_test_wait_job_state(int control_port, const char *job, const char *state,
                              uint64_t timeout_ms, eddy_proc_t *owner)
{
    return eddy_test_wait_job_progress(control_port, job, state, 0, 0, timeout_ms, owner);
}

pid_t eddy_test_kill_worker_after(int control_port, const char *job, int64_t min_completed,
                                  uint64_t timeout_ms, eddy_proc_t *owner)
{
    if (!eddy_test_wait_job_progress(control_port, job, "running", min_completed, 0, timeout_ms,
                                     owner))
        return 0;
    json_t *st = eddy_test_status(control_port);
    json_t *w = st ? json_array_get(json_object_get(st, "workers"), 0) : NULL;
    pid_t victim = w ? (pid_t)json_integer_value(json_object_get(w, "pid")) : 0;
    json_decref(st);
    if (victim > 0 && kill(victim, SIGKILL) < 0)
        victim = 0;
    return victim;
}

/* ---- reference wordcount ----------------------------------------------------- */

static int cmp_entry(const void *a, const void *b)
{
    const eddy_wc_entry_t *x = a, *y = b;
    uint32_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->word, y->word, n);
    if (c)
        return c;
    return x->len < y->len ? -1 : x->len > y->len;
}

eddy_wc_entry_t *eddy_reference_counts(const char *text, size_t len, size_t *n_out)
{
    size_t cap = 1024, n = 0;
    eddy_wc_entry_t *tok = malloc(cap * sizeof *tok);
    const char *p = text, *end = text + len;
    while (tok && p < end) {
        while (p < end && (*p == ' ' || *p == '\t' || *p == '\n'))
            p++;
        const char *w = p;
        while (p < end && *p != ' ' && *p != '\t' && *p != '\n')
            p++;
        if (p > w) {
            if (n == cap) {
                cap *= 2;
                eddy_wc_entry_t *nt = realloc(tok, cap * sizeof *tok);
                if (!nt) {
                    free(tok);
                    return NULL;
                }
                tok = nt;
            }
            tok[n++] = (eddy_wc_entry_t){w, (uint32_t)(p - w), 1};
        }
    }
    if (!tok)
        return NULL;
    qsort(tok, n, sizeof *tok, cmp_entry);
    size_t u = 0;
    for (size_t i = 0; i < n; i++) {
        if (u > 0 && cmp_entry(&tok[u - 1], &tok[i]) == 0)
            tok[u - 1].count++;
        else
            tok[u++] = tok[i];
    }
    *n_out = u;
    return tok;
}

char *eddy_reference_wordcount(const char *text, size_t len, size_t *out_len)
{
    size_t n;
    eddy_wc_entry_t *e = eddy_reference_counts(text, len, &n);
    if (!e)
        return NULL;
    size_t cap = 0;
    for (size_t i = 0; i < n; i++)
        cap += e[i].len + 24;
    char *out = malloc(cap + 1), *q = out;
    for (size_t i = 0; out && i < n; i++) {
        memcpy(q, e[i].word, e[i].len);
        q += e[i].len;
        q += sprintf(q, "\t%llu\n", (unsigned long long)e[i].count);
    }
    free(e);
    if (out) {
        *q = '\0';
        *out_len = (size_t)(q - out);
    }
    return out;
}

/* ---- generated text ---------------------------------------------------------- */

uint64_t eddy_test_rand(uint64_t *s)
{
    /* splitmix64: deterministic across platforms */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static const char *const base_words[] = {
    "to", "be", "or", "not", "that", "is", "the", "question", "whether", "tis", "nobler",
    "in", "mind", "suffer", "slings", "and", "arrows", "of", "outrageous", "fortune",
    "take", "arms", "against", "a", "sea", "troubles", "by", "opposing", "end", "them",
    "die", "sleep", "no", "more", "say", "we", "heart-ache", "thousand", "natural",
    "shocks", "flesh", "heir", "consummation", "devoutly", "wish'd", "perchance", "dream",
    "ay", "there's", "rub", "for", "what", "dreams", "may", "come", "Denmark", "Hamlet",
    "Ophelia", "Horatio", "ghost", "king", "queen", "rotten", "state", "Elsinore",
    "caf\xc3\xa9", "na\xc3\xafve", "x", "I", "O",
};
static const char *const suffixes[] = {"", "", "", "", "", ",", ".", ";", "!", "?", ":", "'s"};

int eddy_test_nexmark_generate(const char *path, const char *events, const char *disorder_ms,
                               eddy_err_t *err)
{
    char *argv[10] = {EDDY_BINARY, "nexmark", "generate", "--events", (char *)events, "--output",
                      (char *)path};
    int k = 7;
    if (disorder_ms) {
        argv[k++] = "--disorder-ms";
        argv[k++] = (char *)disorder_ms;
    }
    argv[k] = NULL;
    char *out = NULL, *errout = NULL;
    int rc = eddy_proc_run(argv, 60000, &out, &errout);
    if (rc != 0)
        eddy_err_set(err, "eddy nexmark generate exited %d: %s", rc, errout ? errout : "");
    free(out);
    free(errout);
    return rc == 0 ? 0 : -1;
}

int eddy_test_wc_input(const char *path, size_t bytes, uint64_t seed, eddy_test_wc_input_t *out,
                       eddy_err_t *err)
{
    memset(out, 0, sizeof *out);
    if (eddy_gen_text(path, bytes, seed, err) < 0)
        return -1;
    out->text = eddy_read_file(path, &out->text_len);
    if (!out->text)
        return eddy_err_set(err, "cannot read back %s", path);
    out->expected = eddy_reference_wordcount(out->text, out->text_len, &out->expected_len);
    if (!out->expected) {
        eddy_test_wc_input_free(out);
        return eddy_err_set(err, "out of memory");
    }
    out->lines = 1;
    for (size_t i = 0; i < out->text_len; i++)
        out->lines += out->text[i] == '\n';
    return 0;
}

void eddy_test_wc_input_free(eddy_test_wc_input_t *in)
{
    free(in->text);
    free(in->expected);
    memset(in, 0, sizeof *in);
}

char *eddy_test_wc_reference(const char *path, size_t bytes, uint64_t seed, size_t *expected_len,
                             size_t *lines, eddy_err_t *err)
{
    eddy_test_wc_input_t in;
    if (eddy_test_wc_input(path, bytes, seed, &in, err) < 0)
        return NULL;
    char *expected = in.expected;
    *expected_len = in.expected_len;
    *lines = in.lines;
    in.expected = NULL;
    eddy_test_wc_input_free(&in);
    return expected;
}

int eddy_gen_text(const char *path, size_t bytes, uint64_t seed, eddy_err_t *err)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return eddy_err_set(err, "cannot write %s: %s", path, strerror(errno));
    uint64_t s = seed;
    size_t written = 0, nbase = sizeof base_words / sizeof base_words[0];
    size_t nsuf = sizeof suffixes / sizeof suffixes[0];
    while (written < bytes) {
        uint64_t r = eddy_test_rand(&s);
        if (r % 23 == 0) { /* blank or whitespace-only line */
            written += (size_t)fprintf(f, r % 2 ? "\n" : " \t \n");
            continue;
        }
        if (r % 7 == 0)
            written += (size_t)fprintf(f, r % 3 ? "  " : "\t");
        int nwords = 1 + (int)(eddy_test_rand(&s) % 14);
        for (int i = 0; i < nwords; i++) {
            uint64_t w = eddy_test_rand(&s);
            const char *sep = i == 0 ? "" : (w % 17 == 0 ? "\t" : (w % 13 == 0 ? "   " : " "));
            if (w % 5 == 0) /* a long tail of rarer words */
                written += (size_t)fprintf(f, "%sw%llu%s", sep,
                                           (unsigned long long)(eddy_test_rand(&s) % 20000),
                                           suffixes[w % nsuf]);
            else
                written += (size_t)fprintf(f, "%s%s%s", sep, base_words[(w >> 8) % nbase],
                                           suffixes[(w >> 20) % nsuf]);
        }
        if (r % 11 == 0)
            written += (size_t)fprintf(f, " ");
        written += (size_t)fprintf(f, "\n");
    }
    fprintf(f, "the last line has no newline");
    if (fclose(f) != 0)
        return eddy_err_set(err, "cannot write %s: %s", path, strerror(errno));
    return 0;
}

int eddy_gen_lines(const char *path, size_t lines, uint64_t seed, eddy_err_t *err)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return eddy_err_set(err, "cannot write %s: %s", path, strerror(errno));
    uint64_t s = seed;
    for (size_t i = 0; i < lines; i++) {
        int n = 1 + (int)(eddy_test_rand(&s) % 6);
        for (int k = 0; k < n; k++)
            fprintf(f, "%sk%llu", k ? " " : "", (unsigned long long)(eddy_test_rand(&s) % 5000));
        fputc('\n', f);
    }
    if (fclose(f) != 0)
        return eddy_err_set(err, "cannot write %s: %s", path, strerror(errno));
    return 0;
}

long eddy_proc_rss_kb(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    long kb = -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) {
            kb = strtol(line + 6, NULL, 10);
            break;
        }
    fclose(f);
    return kb;
}
