/* cdp.h - drives a headless Chromium through its DevTools protocol, for
 * tests of the web dashboard in a real browser.
 *
 * eddy_cdp_start runs Debian's `chromium --headless` with a fresh profile
 * and remote debugging on a port it picks itself (read back from the
 * profile's DevToolsActivePort file), then talks to its page target over a
 * WebSocket (RFC 6455, written here: a few frames of JSON, no library).
 * Commands wait for their answer with a deadline; events are skipped. */
#ifndef EDDY_TESTS_SUPPORT_CDP_H
#define EDDY_TESTS_SUPPORT_CDP_H

#include <jansson.h>

#include "common/err.h"

typedef struct eddy_cdp eddy_cdp_t;

/* The chromium binary on PATH (chromium, chromium-browser), or NULL when
 * none is installed. */
const char *eddy_cdp_find_chromium(void);
/* Starts chromium (path from eddy_cdp_find_chromium) with its profile in
 * profile_dir (a fresh directory) and a width x height window; stderr goes
 * to log_path. NULL with err on failure. */
eddy_cdp_t *eddy_cdp_start(const char *chromium, const char *profile_dir, const char *log_path,
                           int width, int height, eddy_err_t *err);
/* Opens url in the page and waits until it has loaded. */
int eddy_cdp_navigate(eddy_cdp_t *self, const char *url, eddy_err_t *err);
/* Evaluates a JavaScript expression in the page (promises are awaited) and
 * returns its value, owned (json null for undefined), or NULL with err (a
 * thrown exception's text included). */
json_t *eddy_cdp_eval(eddy_cdp_t *self, const char *expression, eddy_err_t *err);
/* Writes a PNG of the whole page to path. */
int eddy_cdp_screenshot(eddy_cdp_t *self, const char *path, eddy_err_t *err);
/* Closes the connection and kills the browser (its whole process group). */
void eddy_cdp_stop(eddy_cdp_t **self_p);

#endif
