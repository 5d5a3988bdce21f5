/* prefault.h - map a fresh buffer's pages in one system call.
 *
 * A large buffer that is about to be written whole (a key group's
 * serialised bytes, a loaded group's entries and slot array) otherwise
 * takes one page fault per 4 KiB page as it is filled. On a virtual machine
 * a fault can cost tens of microseconds (about 19 us measured on the 2-core
 * development VM, i.e. fresh memory at ~200 MB/s), which made moving key
 * groups bound by page faults; MADV_POPULATE_WRITE (Linux 5.14) maps the
 * whole range at once, several times cheaper. Best effort: small buffers
 * (under 64 KiB), older kernels and errors leave the faults to happen as
 * before. */
#ifndef EDDY_COMMON_PREFAULT_H
#define EDDY_COMMON_PREFAULT_H

#include <stddef.h>

void eddy_prefault(void *p, size_t len);

#endif
