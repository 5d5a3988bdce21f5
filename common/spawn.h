/* spawn.h - starting another process of this same binary (`eddy worker`,
 * `eddy controller`) as a child that dies with its parent.
 *
 * eddy local's supervisor and the local worker pool both start children
 * this way, so both get the same guarantees: exec of /proc/self/exe (the
 * binary that is running, whatever PATH says), PR_SET_PDEATHSIG so no
 * child outlives the thread that started it, and only async-signal-safe
 * calls between fork and exec (the parent has other threads). */
#ifndef EDDY_COMMON_SPAWN_H
#define EDDY_COMMON_SPAWN_H

#include <sys/types.h>

/* Starts "eddy ARGV..." (argv[0] is the name ps shows; NULL-terminated).
 * Returns the child's pid, or -1 with errno set when fork failed. A child
 * whose exec fails says so on stderr and exits 127. */
pid_t eddy_spawn_self(char *const argv[]);

/* "was killed by signal 9 (Killed)", "exited with status 1": how a child
 * with this wait status ended. */
void eddy_describe_exit(int status, char *buf, size_t size);

#endif
