/* eddy.h - everything a job author includes: records and collectors
 * (net/record.h via operator.h), the operator and source interfaces
 * (operator.h), operator configurations (config.h), the stream builder
 * (stream.h), registering kinds and jobs from a plugin (plugin.h), and
 * keyed process functions with state and timers (process.h).
 *
 * A plugin is built against these headers only:
 *   cc -shared -fPIC $(pkg-config --cflags eddy) -o libmyjob.so myjob.c
 * and run with `eddy local --plugin ./libmyjob.so --job NAME [flags]`.
 * See docs/writing-jobs.md. */
#ifndef EDDY_API_EDDY_H
#define EDDY_API_EDDY_H

#include "api/config.h"
#include "api/operator.h"
#include "api/plugin.h"
#include "api/process.h"
#include "api/state.h"
#include "api/stream.h"
#include "api/window.h"

#endif
