/* prefault.c - see prefault.h. */
#include "common/prefault.h"

#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14; older headers lack the name */
#endif

#define PREFAULT_MIN (64u * 1024u)

void eddy_prefault(void *p, size_t len)
{
    if (!p || len < PREFAULT_MIN)
        return;
    static uintptr_t page;
    if (!page) {
        long sz = sysconf(_SC_PAGESIZE);
        page = sz > 0 ? (uintptr_t)sz : 4096u;
    }
    /* The pages holding [p, p + len): all inside the allocation's mapping,
     * and populating a page already mapped changes nothing. */
    uintptr_t start = (uintptr_t)p & ~(page - 1);
    uintptr_t end = ((uintptr_t)p + len + page - 1) & ~(page - 1);
    (void)madvise((void *)start, end - start, MADV_POPULATE_WRITE);
}
