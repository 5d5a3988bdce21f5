/* lines.c - generated inputs with expected outputs, sorted lines and
 * cluster logs for the integration tests (see lines.h). */
#include "tests/support/lines.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/proc.h"

uint64_t eddy_test_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

char *eddy_test_sort_lines(char *text, size_t len, size_t *out_len, size_t *n_lines)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += text[i] == '\n';
    char **lines = malloc((n + 1) * sizeof *lines);
    char *out = malloc(len + 2);
    if (!lines || !out) {
        free(lines);
        free(out);
        return NULL;
    }
    size_t k = 0;
    char *p = text, *end = text + len;
    while (p < end) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl)
            nl = end;
        *nl = '\0';
        lines[k++] = p;
        p = nl + 1;
    }
    qsort(lines, k, sizeof *lines, cmp_str);
    size_t o = 0;
    for (size_t i = 0; i < k; i++) {
        size_t l = strlen(lines[i]);
        memcpy(out + o, lines[i], l);
        o += l;
        out[o++] = '\n';
    }
    out[o] = '\0';
    free(lines);
    if (out_len)
        *out_len = o;
    if (n_lines)
        *n_lines = k;
    return out;
}

int eddy_test_write_etl_input(const char *path, const eddy_test_etl_input_t *in, char **expected,
                              size_t *expected_len, size_t *rows, eddy_err_t *err)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        eddy_err_set(err, "cannot write %s", path);
        return -1;
    }
    size_t cap = in->lines * 32 + 1, len = 0;
    char *exp = malloc(cap);
    if (!exp) {
        fclose(f);
        eddy_err_set(err, "no memory for %zu expected rows", in->lines);
        return -1;
    }
    if (in->malformed)
        fprintf(f, "user,item,amount\n"); /* a header: not an integer amount, dropped */
    for (uint64_t n = 0; n < in->lines; n++) {
        if (in->malformed && n % 9973 == 5) {
            fprintf(f, "broken line %" PRIu64 "\n", n);
            continue;
        }
        if (in->malformed && n % 10007 == 3) {
            fprintf(f, "u1,i1,12x\n"); /* bad amount */
            continue;
        }
        uint64_t h = eddy_test_mix(n * 7919 + in->seed);
        unsigned user = (unsigned)(h % in->users), item = (unsigned)((h >> 16) % in->items);
        long amount = (long)((h >> 32) % 1000);
        if (in->repeat_every && n % in->repeat_every == 0) {
            user = 7;
            item = 7;
            amount = 777;
        }
        fprintf(f, "u%u,i%u,%ld\n", user, item, amount);
        if (amount >= in->min_amount)
            len += (size_t)snprintf(exp + len, cap - len, "u%u\ti%u\t%ld\n", user, item, amount * 2);
    }
    if (fclose(f) != 0) {
        free(exp);
        eddy_err_set(err, "cannot write %s", path);
        return -1;
    }
    *expected = eddy_test_sort_lines(exp, len, expected_len, rows);
    free(exp);
    if (!*expected) {
        eddy_err_set(err, "no memory to sort the expected rows");
        return -1;
    }
    return 0;
}

char *eddy_test_read_parts(const char *dir, size_t *len, int *files, eddy_err_t *err)
{
    struct dirent **names = NULL;
    int n = scandir(dir, &names, NULL, alphasort);
    if (n < 0) {
        eddy_err_set(err, "cannot read the output directory %s", dir);
        return NULL;
    }
    size_t cap = 1 << 16, used = 0;
    char *all = malloc(cap);
    int parts = 0;
    for (int i = 0; i < n; i++) {
        if (all && !strncmp(names[i]->d_name, "part-", 5)) {
            char path[1200];
            snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name);
            size_t l = 0;
            char *data = eddy_read_file(path, &l);
            if (!data || (l && data[l - 1] != '\n')) {
                eddy_err_set(err, data ? "%s does not end with a newline" : "cannot read %s", path);
                free(all);
                all = NULL;
            }
            while (all && used + l + 1 > cap) {
                char *bigger = realloc(all, cap *= 2);
                if (!bigger) {
                    eddy_err_set(err, "no memory for the output of %s", dir);
                    free(all);
                }
                all = bigger;
            }
            if (all) {
                memcpy(all + used, data, l);
                used += l;
                parts++;
            }
            free(data);
        }
        free(names[i]);
    }
    free(names);
    if (!all)
        return NULL;
    all[used] = '\0';
    if (len)
        *len = used;
    if (files)
        *files = parts;
    return all;
}

char *eddy_test_cat_logs(const char *const *paths, int n)
{
    size_t cap = 1 << 16, used = 0;
    char *out = malloc(cap);
    if (!out)
        return NULL;
    out[0] = '\0';
    for (int i = 0; i < n; i++) {
        char *s = eddy_read_file(paths[i], NULL);
        size_t need = strlen(paths[i]) + (s ? strlen(s) : 0) + 16;
        if (used + need >= cap) {
            cap = (used + need) * 2;
            char *bigger = realloc(out, cap);
            if (!bigger) {
                free(s);
                return out;
            }
            out = bigger;
        }
        used += (size_t)snprintf(out + used, cap - used, "--- %s\n%s", paths[i], s ? s : "(none)\n");
        free(s);
    }
    return out;
}

char *eddy_test_cluster_logs(const char *const *heads, int n_heads, const char *dir, int n_workers)
{
    int n = n_heads + n_workers;
    const char **paths = calloc((size_t)(n ? n : 1), sizeof *paths);
    char (*worker_paths)[700] = calloc((size_t)(n_workers ? n_workers : 1), sizeof *worker_paths);
    if (!paths || !worker_paths) {
        free(paths);
        free(worker_paths);
        return NULL;
    }
    for (int i = 0; i < n_heads; i++)
        paths[i] = heads[i];
    for (int i = 0; i < n_workers; i++) {
        snprintf(worker_paths[i], sizeof worker_paths[i], "%s/worker-%d.log", dir, i + 1);
        paths[n_heads + i] = worker_paths[i];
    }
    char *out = eddy_test_cat_logs(paths, n);
    free(paths);
    free(worker_paths);
    return out;
}
