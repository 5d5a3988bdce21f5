/* clock.c - clock_gettime wrappers (see clock.h). */
#include "common/clock.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

uint64_t eddy_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t eddy_mono_ms(void)
{
    return eddy_mono_ns() / 1000000ull;
}

void eddy_sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
    }
}

int64_t eddy_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t eddy_wall_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

char *eddy_format_local_time(char *buf, size_t size, int64_t wall_ms)
{
    time_t t = (time_t)(wall_ms / 1000);
    struct tm tm;
    if (!size)
        return buf;
    if (!localtime_r(&t, &tm)) {
        snprintf(buf, size, "%lld ms", (long long)wall_ms);
        return buf;
    }
    char date[32], zone[8];
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
    strftime(zone, sizeof zone, "%z", &tm); /* +0100: ISO 8601 writes +01:00 */
    if (strlen(zone) == 5)
        snprintf(buf, size, "%s%.3s:%.2s", date, zone, zone + 3);
    else
        snprintf(buf, size, "%s", date);
    return buf;
}

struct timespec eddy_timespec_in(clockid_t clock, uint32_t ms)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}
