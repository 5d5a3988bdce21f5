/* test_log_limit.c - the rate-limited log line (common/log.c).
 *
 * A burst of events logged through one limiter gives one line; the next
 * line, once the interval passed, says how many were left out. Limiters are
 * independent of each other. stderr is redirected to a file to count lines. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"

#include "leak_check.h"

TestSuite(log_limit, .fini = eddy_test_leak_check, .timeout = 30);

static char path[64];
static int saved_stderr = -1;

static void capture_stderr(void)
{
    snprintf(path, sizeof path, "/tmp/eddy-log-limit-XXXXXX");
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    fflush(stderr);
    saved_stderr = dup(2);
    dup2(fd, 2);
    close(fd);
}

/* Restores stderr; returns what was written (malloc'd). */
static char *captured(void)
{
    fflush(stderr);
    dup2(saved_stderr, 2);
    close(saved_stderr);
    FILE *f = fopen(path, "r");
    cr_assert(f);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    unlink(path);
    return strdup(buf);
}

static int count(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)); p++)
        n++;
    return n;
}

Test(log_limit, one_line_per_interval_with_the_count_left_out)
{
    eddy_log_set_level(EDDY_LOG_INFO);
    eddy_log_limit_t a = {0}, b = {0};
    capture_stderr();
    for (int i = 0; i < 1000; i++)
        eddy_log_limited(&a, EDDY_LOG_WARN, "event a %d", i);
    eddy_log_limited(&b, EDDY_LOG_WARN, "event b");
    /* wait for the interval to pass (on the clock, not as synchronisation) */
    uint64_t until = eddy_mono_ms() + EDDY_LOG_LIMIT_INTERVAL_MS + 10;
    while (eddy_mono_ms() < until)
        usleep(10000);
    eddy_log_limited(&a, EDDY_LOG_WARN, "event a again");
    char *out = captured();
    cr_assert_eq(count(out, "event a "), 2, "%s", out);
    cr_assert(strstr(out, "event a 0\n"), "%s", out);
    cr_assert(strstr(out, "event a again (999 more like this since the last such line)"), "%s",
              out);
    cr_assert_eq(count(out, "event b"), 1, "%s", out);
    free(out);
}

Test(log_limit, filtered_levels_still_count)
{
    eddy_log_set_level(EDDY_LOG_ERROR);
    eddy_log_limit_t a = {0};
    capture_stderr();
    for (int i = 0; i < 10; i++)
        eddy_log_limited(&a, EDDY_LOG_WARN, "hidden %d", i);
    char *out = captured();
    cr_assert_eq(out[0], '\0', "%s", out);
    cr_assert_eq(a.suppressed, 9);
    free(out);
}
