/* plugin_named_state_v2.c - version 2 of plugin_named_state.c (see there):
 * state "count" at schema version 2 with a migrate callback, and a new state. */
#define NAMED_STATE_V 2
#include "tests/plugins/plugin_named_state.c"
