/* redact.h - job arguments as they may be shown to others (HTTP, status):
 * the passwords in URIs (postgresql://user:PASSWORD@host, ?password=...)
 * and the values of flags whose name says they are secret (--password,
 * --*-token*, --*secret*, --*key-file*, --keys) become "***", so what a
 * status view serves never holds a credential or a key file's path. */
#ifndef EDDY_COMMON_REDACT_H
#define EDDY_COMMON_REDACT_H

#define EDDY_REDACTED "***"

/* arg as it may be shown, given the argument before it (NULL for the
 * first). malloc'd; NULL only when out of memory. */
char *eddy_redact_arg(const char *prev, const char *arg);

#endif
