/* plugin_named_state_nomigrate.c - version 2 of plugin_named_state.c (see
 * there) without the migrate callback: a restore from version 1 is refused. */
#define NAMED_STATE_V 2
#define NAMED_STATE_NO_MIGRATE
#include "tests/plugins/plugin_named_state.c"
