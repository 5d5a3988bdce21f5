/* log.c - stderr logger used by the process roles (see log.h). */
#include "common/log.h"

#include "common/clock.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static char component[64] = "eddy";
static int min_level = -1;

void eddy_log_set_component(const char *name)
{
    snprintf(component, sizeof component, "%s", name);
}

void eddy_log_set_level(eddy_log_level_t level)
{
    min_level = (int)level;
}

static int configured_level(void)
{
    if (min_level >= 0)
        return min_level;
    const char *env = getenv("EDDY_LOG_LEVEL");
    min_level = EDDY_LOG_INFO;
    if (env) {
        if (!strcasecmp(env, "debug")) min_level = EDDY_LOG_DEBUG;
        else if (!strcasecmp(env, "warn")) min_level = EDDY_LOG_WARN;
        else if (!strcasecmp(env, "error")) min_level = EDDY_LOG_ERROR;
    }
    return min_level;
}

static void log_line(eddy_log_level_t level, const char *suffix, const char *fmt, va_list ap)
{
    static const char *names[] = {"DEBUG", "INFO", "WARN", "ERROR"};
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    gmtime_r(&tv.tv_sec, &tm);
    char line[2048];
    int n = snprintf(line, sizeof line, "%02d:%02d:%02d.%03ld %-5s [%s] ", tm.tm_hour, tm.tm_min,
                     tm.tm_sec, (long)(tv.tv_usec / 1000), names[level], component);
    if (n > 0 && (size_t)n < sizeof line)
        vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    /* One write(2) per line: lines of several processes sharing the
     * terminal (eddy local's workers) or a pipe never interleave within a
     * line (writes of up to PIPE_BUF bytes to a pipe are atomic). */
    size_t len = strnlen(line, sizeof line - 1), slen = strlen(suffix);
    if (len + slen + 1 >= sizeof line)
        slen = len + 1 < sizeof line ? sizeof line - len - 2 : 0;
    memcpy(line + len, suffix, slen);
    len += slen;
    line[len++] = '\n';
    for (size_t done = 0; done < len;) {
        ssize_t w = write(STDERR_FILENO, line + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        done += (size_t)w;
    }
}

void eddy_log(eddy_log_level_t level, const char *fmt, ...)
{
    if ((int)level < configured_level())
        return;
    va_list ap;
    va_start(ap, fmt);
    log_line(level, "", fmt, ap);
    va_end(ap);
}

void eddy_log_limited(eddy_log_limit_t *limit, eddy_log_level_t level, const char *fmt, ...)
{
    uint64_t now = eddy_mono_ms();
    if (now < limit->next_ms) {
        limit->suppressed++;
        return;
    }
    limit->next_ms = now + EDDY_LOG_LIMIT_INTERVAL_MS;
    char suffix[96] = "";
    if (limit->suppressed)
        snprintf(suffix, sizeof suffix, " (%llu more like this since the last such line)",
                 (unsigned long long)limit->suppressed);
    limit->suppressed = 0;
    if ((int)level < configured_level())
        return;
    va_list ap;
    va_start(ap, fmt);
    log_line(level, suffix, fmt, ap);
    va_end(ap);
}
