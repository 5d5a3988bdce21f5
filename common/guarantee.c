/* guarantee.c - names of the processing guarantees (see guarantee.h). */
#include "common/guarantee.h"

#include <string.h>

static const char *names[] = {"exactly-once", "at-least-once", "at-most-once"};

const char *eddy_guarantee_name(unsigned guarantee)
{
    return guarantee <= EDDY_GUARANTEE_LAST ? names[guarantee] : "?";
}

int eddy_guarantee_parse(const char *name, eddy_guarantee_t *out)
{
    for (unsigned g = 0; name && g <= EDDY_GUARANTEE_LAST; g++)
        if (!strcmp(name, names[g])) {
            *out = (eddy_guarantee_t)g;
            return 0;
        }
    return -1;
}
