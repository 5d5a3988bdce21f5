/* clicks.c - an eddy plugin job: clicks per user with a custom keyed
 * aggregate, written against eddy's api/ only.
 *
 *   eddy local --plugin ./libclicks.so --job clicks --input clicks.txt --output counts.tsv
 *
 * Input lines are "user page" (space separated). The aggregate keeps, per
 * user, the number of clicks and a 64-bit sketch of the pages seen; the
 * result is the click count, so the output is "user<TAB>clicks" lines in
 * byte order, written once at end of input. The accumulator is keyed state:
 * eddy checkpoints it, restores it after a failure and moves it with its
 * key group when `eddy rescale clicks count N` changes the parallelism. */
#include <string.h>

#include "api/eddy.h"

EDDY_PLUGIN_DECLARE();

/* Accumulators are copied as bytes: plain values only, no pointers. */
typedef struct clicks_acc {
    int64_t clicks;
    uint64_t pages_seen; /* one bit per page hash, a tiny distinct sketch */
} clicks_acc_t;

static void clicks_add(void *acc, const eddy_record_t *rec)
{
    clicks_acc_t *a = acc;
    a->clicks += 1;
    const char *space = memchr(rec->data, ' ', rec->len);
    uint64_t h = 1469598103934665603ull;
    for (const char *p = space ? space + 1 : rec->data + rec->len; p < rec->data + rec->len; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    a->pages_seen |= 1ull << (h & 63);
}

static void clicks_merge(void *acc, const void *other)
{
    clicks_acc_t *a = acc;
    const clicks_acc_t *b = other;
    a->clicks += b->clicks;
    a->pages_seen |= b->pages_seen;
}

static int64_t clicks_result(const void *acc)
{
    return ((const clicks_acc_t *)acc)->clicks;
}

static const eddy_aggregate_udf_t clicks = {
    .acc_size = sizeof(clicks_acc_t),
    .add = clicks_add,
    .merge = clicks_merge,
    .result = clicks_result,
};

/* The key is the user: the line up to its first space. */
static uint32_t user_key(const eddy_record_t *rec, const char **key)
{
    *key = rec->data;
    const char *space = memchr(rec->data, ' ', rec->len);
    return space ? (uint32_t)(space - rec->data) : rec->len;
}
static const eddy_key_kind_t user = {.name = "clicks_user", .key = user_key};

static const char *flag(int argc, char **argv, const char *name)
{
    for (int i = 0; i + 1 < argc; i++)
        if (!strcmp(argv[i], name))
            return argv[i + 1];
    return NULL;
}

static int build(eddy_job_builder_t *b, int argc, char **argv, eddy_err_t *err)
{
    const char *input = flag(argc, argv, "--input"), *output = flag(argc, argv, "--output");
    if (!input || !output)
        return eddy_err_set(err, "clicks needs --input FILE and --output FILE");
    eddy_config_t *src = eddy_config_new();
    eddy_config_set_str(src, "path", input);
    if (flag(argc, argv, "--rate"))
        eddy_config_set_str(src, "rate", flag(argc, argv, "--rate"));
    eddy_config_t *agg = eddy_config_new();
    eddy_config_set_str(agg, "emit", "final");
    eddy_config_t *out = eddy_config_new();
    eddy_config_set_str(out, "path", output);

    eddy_builder_set_default_parallelism(b, 2);
    eddy_stream_t lines = eddy_source(b, "source", "file", src);
    eddy_stream_t counts = eddy_aggregate(eddy_key_by(lines, "clicks_user"), "count", "clicks", agg);
    eddy_sink(eddy_global(counts), "sink", "table_file", out);
    return 0;
}

static const eddy_job_kind_t job = {
    .name = "clicks",
    .summary = "clicks per user (a custom keyed aggregate), user<TAB>clicks at end of input",
    .usage = "  --input FILE     lines \"user page\"\n"
             "  --output FILE    user<TAB>clicks lines in byte order\n"
             "  --rate R         cap the source at R lines/s\n",
    .build = build,
};

int eddy_plugin_init(eddy_registry_t *r, uint32_t abi_version, eddy_err_t *err);
int eddy_plugin_init(eddy_registry_t *r, uint32_t abi_version, eddy_err_t *err)
{
    (void)abi_version;
    if (eddy_register_aggregate(r, "clicks", &clicks, err) < 0 || eddy_register_key(r, &user, err) < 0)
        return -1;
    return eddy_register_job(r, &job, err);
}
