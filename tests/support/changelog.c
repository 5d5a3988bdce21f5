/* changelog.c - wordcount's changelog against reference counts (see
 * changelog.h). */
#include "tests/support/changelog.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


size_t eddy_changelog_find(const eddy_wc_entry_t *ref, size_t n, const char *word, uint32_t wl)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        uint32_t m = wl < ref[mid].len ? wl : ref[mid].len;
        int c = memcmp(ref[mid].word, word, m);
        if (!c)
            c = ref[mid].len < wl ? -1 : ref[mid].len > wl;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && ref[lo].len == wl && !memcmp(ref[lo].word, word, wl) ? lo : n;
}

int eddy_changelog_row(const char *line, size_t l, eddy_changelog_row_t *row)
{
    if (l < 7 || line[l - 1] != ']' || line[2] != '[' || (line[0] != '+' && line[0] != '-'))
        return -1;
    const char *sep = NULL;
    for (const char *q = line + l - 2; q > line + 3; q--)
        if (q[0] == ',' && q[1] == ' ') {
            sep = q;
            break;
        }
    if (!sep)
        return -1;
    memcpy(row->kind, line, 2);
    row->kind[2] = '\0';
    row->word = line + 3;
    row->len = (uint32_t)(sep - (line + 3));
    row->value = strtoull(sep + 2, NULL, 10);
    return 0;
}

bool eddy_changelog_matches(const char *path, const char *text, size_t len, char *why,
                            size_t why_size)
{
    size_t n;
    eddy_wc_entry_t *ref = eddy_reference_counts(text, len, &n);
    if (!ref) {
        snprintf(why, why_size, "out of memory for the reference counts");
        return false;
    }
    uint64_t *last = calloc(n + 1, sizeof *last);
    size_t log_len = 0;
    char *log = eddy_read_file(path, &log_len);
    bool ok = log != NULL && last != NULL;
    snprintf(why, why_size, "no changelog yet");
    for (char *line = log, *nl; ok && line < log + log_len; line = nl + 1) {
        nl = memchr(line, '\n', (size_t)(log + log_len - line));
        if (!nl)
            break; /* a partly written last line */
        /* A worker killed mid-line leaves a torn line, and the next sink's
         * output goes on right after it: the row is what follows the last
         * '[' (words here have none). */
        char *open = memrchr(line, '[', (size_t)(nl - line));
        if (open && open - line >= 2)
            line = open - 2;
        size_t l = (size_t)(nl - line);
        eddy_changelog_row_t row;
        if (l < 7 || line[l - 1] != ']' || (strncmp(line, "+I[", 3) && strncmp(line, "+U[", 3)))
            continue;
        if (eddy_changelog_row(line, l, &row) < 0) {
            snprintf(why, why_size, "malformed changelog line '%.*s'", (int)l, line);
            ok = false;
            break;
        }
        size_t k = eddy_changelog_find(ref, n, row.word, row.len);
        if (k == n) {
            snprintf(why, why_size, "the changelog names a word the input does not have: '%.*s'",
                     (int)row.len, row.word);
            ok = false;
            break;
        }
        last[k] = row.value;
    }
    for (size_t k = 0; ok && k < n; k++)
        if (last[k] != ref[k].count) {
            snprintf(why, why_size, "word '%.*s': last changelog value %llu, reference %llu",
                     (int)ref[k].len, ref[k].word, (unsigned long long)last[k],
                     (unsigned long long)ref[k].count);
            ok = false;
        }
    free(last);
    free(ref);
    free(log);
    return ok;
}
