/* line_source.c - choosing a built-in job's line source (see line_source.h). */
#include "jobs/line_source.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/flags.h"

int eddy_parse_host_port(const char *text, char *host, size_t host_size, uint16_t *port,
                         eddy_err_t *err)
{
    const char *colon = strrchr(text, ':');
    uint64_t p;
    if (!colon || colon == text || (size_t)(colon - text) >= host_size ||
        eddy_parse_uint(colon + 1, &p) < 0 || p == 0 || p > 65535)
        return eddy_err_set(err, "expected HOST:PORT, got '%s'", text);
    memcpy(host, text, (size_t)(colon - text));
    host[colon - text] = '\0';
    *port = (uint16_t)p;
    return 0;
}

int eddy_line_source_check(const char *job, const char *input, const char *socket, bool generate,
                           eddy_err_t *err)
{
    if ((input != NULL) + (socket != NULL) + generate != 1)
        return eddy_err_set(err, "%s needs exactly one of --input FILE, --socket HOST:PORT, --generate",
                            job);
    return 0;
}

/* A replayable input is a regular file: a directory, FIFO, socket or device
 * (/dev/zero) cannot be re-read from an offset after a failure, and some
 * never end, so they are usage errors rather than a job that hangs or ends
 * empty. stat() follows symlinks, so a link to a regular file is fine. */
static int check_input(const char *input, eddy_err_t *err)
{
    struct stat st;
    if (stat(input, &st) != 0)
        return eddy_err_set(err, "cannot read --input %s: %s", input, strerror(errno));
    if (!S_ISREG(st.st_mode)) {
        const char *what = S_ISDIR(st.st_mode)    ? "a directory"
                           : S_ISFIFO(st.st_mode) ? "a FIFO"
                           : S_ISSOCK(st.st_mode) ? "a socket"
                           : S_ISCHR(st.st_mode)  ? "a character device"
                           : S_ISBLK(st.st_mode)  ? "a block device"
                                                  : "not a regular file";
        return eddy_err_set(err, "--input %s is %s; it must be a regular file (use --socket for a stream)",
                            input, what);
    }
    if (access(input, R_OK) != 0)
        return eddy_err_set(err, "cannot read --input %s: %s", input, strerror(errno));
    return 0;
}

int eddy_job_rate_parse(eddy_rate_schedule_t *rate, const char *text, eddy_err_t *err)
{
    if (eddy_rate_parse(rate, text, err) < 0)
        return -1;
    for (uint32_t i = 0; i < rate->steps; i++) {
        if (rate->rate[i] > EDDY_JOB_MAX_RATE)
            return eddy_err_set(err, "%g lines/s is out of range 0..%g", rate->rate[i],
                                EDDY_JOB_MAX_RATE);
        if (rate->at_s[i] > EDDY_JOB_MAX_RATE_AT_S)
            return eddy_err_set(err, "a step at %g s is out of range 0..%g s", rate->at_s[i],
                                EDDY_JOB_MAX_RATE_AT_S);
    }
    return 0;
}

int eddy_line_source_choose(eddy_line_source_t *src, const char *input, const char *socket,
                            const eddy_source_ops_t **ops, const void **config,
                            uint32_t *parallelism, eddy_err_t *err)
{
    if (input) {
        if (strlen(input) >= sizeof src->file.path)
            return eddy_err_set(err, "--input path is too long");
        if (check_input(input, err) < 0)
            return -1;
        strcpy(src->file.path, input);
        *ops = &eddy_file_source_ops;
        *config = &src->file;
    } else if (socket) {
        if (eddy_parse_host_port(socket, src->socket.host, sizeof src->socket.host,
                                 &src->socket.port, err) < 0)
            return eddy_err_wrap(err, "--socket");
        *ops = &eddy_socket_source_ops;
        *config = &src->socket;
        *parallelism = 1;
    } else {
        *ops = &eddy_generator_source_ops;
        *config = &src->generator;
    }
    return 0;
}
