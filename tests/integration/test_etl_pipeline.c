/* test_etl_pipeline.c - the etl job's record pipeline (--format) through
 * the real binary: `eddy local --workers 2 --job etl` on CSV and on JSON
 * lines with malformed records, cleaning, enrichment from a reference file
 * (and from a table in a real PostgreSQL started here), a rejects file,
 * part-file output. The committed output (part files, concatenated and
 * sorted) and the rejects file (sorted) must equal exactly what is written
 * here by hand; the input files are split between two source instances, so
 * the header line and the rejects come from both. Bad flag combinations
 * exit 2 with one line naming the problem. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/cluster.h"
#include "tests/support/http_get.h"
#include "tests/support/postgres.h"
#include "tests/support/lines.h"
#include "tests/support/proc.h"
#include "tests/support/redis.h"

static eddy_test_cluster_t *cl;
static char *path_in, *path_ref, *path_rej, *path_out, *path_log;

/* eddy local runs with eddy's own checkpoint and heartbeat timing. */
static void setup(void)
{
    eddy_err_t err = {{0}};
    eddy_test_cluster_opts_t o = {.tag = "etl-pipeline", .workers = 2, .checkpoint_interval = "",
                                  .heartbeat_ms = "", .heartbeat_timeout_ms = ""};
    cl = eddy_test_cluster_new(&o, &err);
    cr_assert(cl, "%s", err.msg);
    path_in = eddy_test_cluster_path(cl, "input");
    path_ref = eddy_test_cluster_path(cl, "ref.csv");
    path_rej = eddy_test_cluster_path(cl, "rejects.txt");
    path_out = eddy_test_cluster_path(cl, "out");
    path_log = eddy_test_cluster_path(cl, "local.log");
}

static void teardown(void)
{
    eddy_test_cluster_destroy(&cl);
}

/* Starts eddy local with `workers` workers and these flags (the job's). */
static eddy_proc_t *start_local(int workers, const char *const *flags)
{
    eddy_err_t err = {{0}};
    eddy_test_cluster_opts(cl)->workers = workers;
    cr_assert(eddy_test_cluster_start_local(cl, flags, &err) == 0, "%s", err.msg);
    return eddy_test_cluster_local(cl);
}

static void put(const char *path, const char *text)
{
    cr_assert_eq(eddy_write_file(path, text, strlen(text)), 0, "cannot write %s", path);
}

/* text's lines sorted, each ending in '\n' (malloc'd). */
static char *sorted(const char *text)
{
    char *copy = strdup(text);
    char *out = eddy_test_sort_lines(copy, strlen(copy), NULL, NULL);
    free(copy);
    return out;
}

/* The committed part files, concatenated. */
static char *committed(void)
{
    eddy_err_t err = {{0}};
    char *all = eddy_test_read_parts(path_out, NULL, NULL, &err);
    cr_assert(all, "%s", err.msg);
    return all;
}

/* Runs `eddy local --workers 2 --job etl --input IN --output-dir OUT ARGS`
 * (--output URI instead when output is not NULL) to completion and returns
 * its log. */
static char *run_etl_to(const char *output, const char *const *args)
{
    const char *argv[64] = {"--job", "etl", "--input", path_in, /* no --quiet: INFO lines read */
                            output ? "--output" : "--output-dir", output ? output : path_out,
                            "--parallelism", "2", "--sink-parallelism", "2"};
    size_t n = 10;
    for (size_t i = 0; args[i]; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    eddy_proc_t *proc = start_local(2, argv);
    int rc = eddy_proc_wait(proc, 120000);
    eddy_proc_kill(proc, 2000);
    char *log = eddy_read_file(path_log, NULL);
    cr_assert_eq(rc, 0, "eddy local exited %d; log:\n%s", rc, log ? log : "(none)");
    return log ? log : strdup("");
}

static char *run_etl(const char *const *args)
{
    return run_etl_to(NULL, args);
}

static void expect_file(const char *got_text, const char *want, const char *what)
{
    char *got = sorted(got_text), *exp = sorted(want);
    cr_assert_str_eq(got, exp, "%s differs:\n--- got\n%s--- want\n%s", what, got, exp);
    free(got);
    free(exp);
}

/* The sum of the operator instances' summary lines "N rejected" in log. */
static long rejected_in_log(const char *log)
{
    long sum = 0;
    for (const char *p = strstr(log, " rejected (malformed)"); p;
         p = strstr(p + 1, " rejected (malformed)")) {
        const char *q = p;
        while (q > log && q[-1] >= '0' && q[-1] <= '9')
            q--;
        sum += strtol(q, NULL, 10);
    }
    return sum;
}

static void expect_rejects(const char *want)
{
    char *rej = eddy_read_file(path_rej, NULL);
    cr_assert(rej, "no rejects file");
    expect_file(rej, want, "rejects file");
    free(rej);
}

static const char csv_input[] =
    "id,name,email,signup,amount,country_code\n"
    "1,  Ann Smith ,ANN@Example.COM,2024/07/04,\"1,234.50\",se\n"
    "2,Bob,bob@x.org,04.07.2024 10:00,3,no\r\n"
    "3,Cy,cy@x.org,not-a-date,5,se\n"
    "\n"
    "4,Dee,dee@x.org,1700000000,12x,dk\n"
    "5,Eve,eve@x.org\n"
    "6,\"Fay, Jr\",fay@x.org,2024-01-01T00:30:00+01:00,\"1.000,5\",xx\n"
    "7,Gus,\"gus@x.org,SE\n"
    "8, Hal ,HAL@X.ORG,1700000000123, -0.50 ,Dk\n";

Test(etl_pipeline, csv_clean_enrich_rejects, .init = setup, .fini = teardown, .timeout = 200)
{
    put(path_in, csv_input);
    put(path_ref, "code,country,region\nSE,Sweden,Nordics\nNO,Norway,Nordics\nDK,Denmark,\n");
    char *log = run_etl((const char *[]){
        "--format", "csv", "--header", "--trim", "--lower", "email", "--upper", "country_code",
        "--date", "signup", "--number", "amount", "--enrich-key", "country_code",
        "--enrich-table", path_ref, "--rejects", path_rej, NULL});
    char *out = committed();
    expect_file(out,
                "1,Ann Smith,ann@example.com,2024-07-04T00:00:00Z,1234.5,SE,Sweden,Nordics\n"
                "2,Bob,bob@x.org,2024-07-04T10:00:00Z,3,NO,Norway,Nordics\n"
                "6,\"Fay, Jr\",fay@x.org,2023-12-31T23:30:00Z,1000.5,XX,,\n"
                "8,Hal,hal@x.org,2023-11-14T22:13:20Z,-0.5,DK,Denmark,\n",
                "output");
    expect_rejects("field signup: not a date: 'not-a-date'\t3,Cy,cy@x.org,not-a-date,5,se\n"
                   "field amount: not a number: '12x'\t4,Dee,dee@x.org,1700000000,12x,dk\n"
                   "expected 6 fields, got 3\t5,Eve,eve@x.org\n"
                   "unterminated quoted field 3\t7,Gus,\"gus@x.org,SE\n");
    cr_assert_eq(rejected_in_log(log), 4, "rejects counted in the log:\n%s", log);
    free(out);
    free(log);
}

/* Rejected records are a counter at /metrics while the job runs: four bad
 * lines first, then enough good ones at a capped rate that heartbeats carry
 * the count before the job ends. The largest sum seen must be exactly 4. */
Test(etl_pipeline, rejected_records_metric, .init = setup, .fini = teardown, .timeout = 200)
{
    char input[4096] = "id,name,amount\n1,a,1x\n2,b\n3,c,2y\n4,\"d,3\n";
    for (int i = 5; i < 45; i++)
        snprintf(input + strlen(input), sizeof input - strlen(input), "%d,n%d,%d\n", i, i, i);
    put(path_in, input);
    const char *argv[] = {"--quiet", "--job", "etl", "--input", path_in, "--output-dir", path_out,
                          "--parallelism", "1", "--sink-parallelism", "1", "--rate", "10",
                          "--format", "csv", "--header", "--number", "amount", NULL};
    eddy_proc_t *proc = start_local(1, argv);
    long long seen = -1;
    while (eddy_proc_alive(proc)) {
        long long v = eddy_test_scrape_sum(eddy_test_cluster_http_port(cl, 0), "eddy_rejected_records_total{job=\"etl\"");
        if (v > seen)
            seen = v;
        eddy_nap_ms(100);
    }
    int rc = eddy_proc_wait(proc, 1000);
    char *log = eddy_read_file(path_log, NULL);
    cr_assert_eq(rc, 0, "eddy local exited %d; log:\n%s", rc, log ? log : "(none)");
    cr_assert_eq(seen, 4, "/metrics showed eddy_rejected_records_total %lld; log:\n%s", seen,
                 log ? log : "(none)");
    free(log);
}

Test(etl_pipeline, json_required_enrichment, .init = setup, .fini = teardown, .timeout = 200)
{
    put(path_in,
        "{\"user\":\"u1\",\"ts\":1700000000123,\"amount\":\"2.500,75\",\"city\":\" oslo \"}\n"
        "{\"user\":\"u2\",\"ts\":\"2024-02-30\",\"amount\":1}\n"
        "not json\n"
        "{\"user\":\"u3\",\"ts\":\"2024-03-01T12:00:00Z\",\"amount\":7,\"extra\":[true,null]}\n"
        "[1,2]\n"
        "{\"user\":\"u9\",\"ts\":null,\"amount\":\"1 000\"}\n"
        "{\"user\":\"u1\",\"ts\":\"\",\"amount\":\" 12 \",\"city\":\"Tromsø\"}\n");
    put(path_ref, "user,tier,home city\nu1,gold,Bergen\nu3,silver,\n");
    char *log = run_etl((const char *[]){
        "--format", "json", "--trim", "--upper", "city", "--date", "ts", "--date-only",
        "--number", "amount", "--enrich-key", "user", "--enrich-table", path_ref,
        "--enrich-required", "--rejects", path_rej, NULL});
    char *out = committed();
    expect_file(out,
                "{\"user\":\"u1\",\"ts\":\"2023-11-14\",\"amount\":2500.75,\"city\":\"OSLO\","
                "\"tier\":\"gold\",\"home city\":\"Bergen\"}\n"
                "{\"user\":\"u3\",\"ts\":\"2024-03-01\",\"amount\":7,\"extra\":[true,null],"
                "\"tier\":\"silver\",\"home city\":\"\"}\n"
                "{\"user\":\"u1\",\"ts\":null,\"amount\":12,\"city\":\"TROMSø\","
                "\"tier\":\"gold\",\"home city\":\"Bergen\"}\n",
                "output");
    char *rej = eddy_read_file(path_rej, NULL);
    cr_assert(rej, "no rejects file");
    char *got = sorted(rej);
    /* jansson's own wording follows "invalid JSON: "; the rest is exact. */
    const char *want[] = {
        "field ts: not a date: '2024-02-30'\t{\"user\":\"u2\",\"ts\":\"2024-02-30\",\"amount\":1}\n",
        "invalid JSON: ", "\tnot json\n", "\t[1,2]\n",
        "no reference row for user 'u9'\t{\"user\":\"u9\",\"ts\":null,\"amount\":\"1 000\"}\n"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        cr_assert(strstr(got, want[i]), "rejects lack '%s':\n%s", want[i], got);
    size_t lines = 0;
    for (const char *p = got; *p; p++)
        lines += *p == '\n';
    cr_assert_eq(lines, 4, "rejects:\n%s", got);
    cr_assert_eq(rejected_in_log(log), 4, "rejects counted in the log:\n%s", log);
    free(got);
    free(rej);
    free(out);
    free(log);
}

Test(etl_pipeline, csv_to_json_with_projection, .init = setup, .fini = teardown, .timeout = 200)
{
    put(path_in, "a,1.5,x\nb,2,y\nc,oops,z\n");
    char *log = run_etl((const char *[]){"--format", "csv", "--columns", "k,v,w",
                                         "--output-format", "json", "--number", "v", NULL});
    char *out = committed();
    expect_file(out, "{\"k\":\"a\",\"v\":1.5,\"w\":\"x\"}\n{\"k\":\"b\",\"v\":2,\"w\":\"y\"}\n",
                "output");
    free(out);
    free(log);
}

Test(etl_pipeline, enrichment_from_postgresql, .init = setup, .fini = teardown, .timeout = 300)
{
    eddy_err_t err = {{0}};
    eddy_test_pg_t *pg = eddy_test_pg_start(0, &err);
    cr_assert(pg, "%s", err.msg);
    PGconn *conn = eddy_test_pg_connect(pg, &err);
    cr_assert(conn, "%s", err.msg);
    PGresult *r = eddy_test_pg_query(
        conn,
        "CREATE TABLE countries (code text PRIMARY KEY, name text, population bigint);"
        "INSERT INTO countries VALUES ('SE','Sweden',10500000),('NO','Norway',NULL);",
        &err);
    cr_assert(r, "%s", err.msg);
    PQclear(r);
    PQfinish(conn);
    char uri[300];
    eddy_test_pg_uri(pg, "countries", uri, sizeof uri);
    put(path_in, "{\"id\":1,\"cc\":\"se\"}\n{\"id\":2,\"cc\":\"NO\"}\n{\"id\":3,\"cc\":\"FI\"}\n");
    char *log = run_etl((const char *[]){"--format", "json", "--upper", "cc", "--enrich-key",
                                         "cc", "--enrich-table", uri, NULL});
    char *out = committed();
    expect_file(out,
                "{\"id\":1,\"cc\":\"SE\",\"name\":\"Sweden\",\"population\":\"10500000\"}\n"
                "{\"id\":2,\"cc\":\"NO\",\"name\":\"Norway\",\"population\":null}\n"
                "{\"id\":3,\"cc\":\"FI\",\"name\":null,\"population\":null}\n",
                "output");
    free(out);
    free(log);

    /* A missing table fails the deploy with a message naming it. */
    eddy_test_pg_uri(pg, "nope", uri, sizeof uri);
    int ports[2];
    cr_assert(eddy_test_free_ports(2, ports, &err) == 0, "%s", err.msg);
    char cp[16], hp[16];
    snprintf(cp, sizeof cp, "%d", ports[0]);
    snprintf(hp, sizeof hp, "%d", ports[1]);
    char *argv[] = {EDDY_BINARY, "local", "--workers", "1", "--control-port", cp, "--http-port",
                    hp, "--quiet", "--job", "etl", "--input", path_in, "--output-dir", path_out,
                    "--format", "json", "--enrich-key", "cc", "--enrich-table", uri, NULL};
    char *sout = NULL, *serr = NULL;
    int rc = eddy_proc_run(argv, 60000, &sout, &serr);
    cr_assert(rc != 0 && rc != -1, "exit %d", rc);
    cr_assert(strstr(serr, "nope"), "no message naming the table:\n%s", serr);
    free(sout);
    free(serr);
    eddy_test_pg_stop(&pg);
}

Test(etl_pipeline, output_to_redis_stream, .init = setup, .fini = teardown, .timeout = 200)
{
    eddy_err_t err = {{0}};
    eddy_test_redis_t *redis = eddy_test_redis_start(false, &err);
    cr_assert(redis, "%s", err.msg);
    char uri[128];
    snprintf(uri, sizeof uri, "redis://127.0.0.1:%d/clean", eddy_test_redis_port(redis));
    put(path_in, "{\"n\":\"1_000\"}\n{\"n\":\"x\"}\n{\"n\":\"-2,5\"}\n");
    char *log = run_etl_to(uri, (const char *[]){"--format", "json", "--output-format", "csv",
                                                "--columns", "n", "--number", "n", NULL});
    redisContext *c = eddy_test_redis_client(redis, &err);
    cr_assert(c, "%s", err.msg);
    redisReply *r = redisCommand(c, "XRANGE clean - +");
    cr_assert(r && r->type == REDIS_REPLY_ARRAY, "XRANGE failed");
    char got[256] = "";
    for (size_t i = 0; i < r->elements; i++) {
        redisReply *fields = r->element[i]->element[1];
        for (size_t k = 0; k + 1 < fields->elements; k += 2)
            if (!strcmp(fields->element[k]->str, "line")) {
                strcat(got, fields->element[k + 1]->str);
                strcat(got, "\n");
            }
    }
    expect_file(got, "1000\n-2.5\n", "stream clean");
    freeReplyObject(r);
    redisFree(c);
    eddy_test_redis_destroy(&redis);
    free(log);
}

static void bad_flags(const char *const *args, const char *needle)
{
    char *argv[32] = {EDDY_BINARY, "local", "--job", "etl", "--input", "/tmp/x.csv",
                      "--output-dir", "/tmp/eddy-etl-never"};
    size_t n = 8;
    for (size_t i = 0; args[i]; i++)
        argv[n++] = (char *)args[i];
    argv[n] = NULL;
    char *out = NULL, *err = NULL;
    int rc = eddy_proc_run(argv, 20000, &out, &err);
    cr_assert_eq(rc, 2, "%s: exit %d, stderr %s", needle, rc, err);
    cr_assert(strstr(err, needle), "stderr lacks '%s':\n%s", needle, err);
    const char *nl = strchr(err, '\n');
    cr_assert(!nl || !nl[1], "more than one line:\n%s", err);
    free(out);
    free(err);
}

Test(etl_pipeline, bad_flags)
{
    bad_flags((const char *[]){"--trim", NULL}, "--trim needs --format csv|json");
    bad_flags((const char *[]){"--format", "xml", NULL}, "csv or json");
    bad_flags((const char *[]){"--format", "csv", NULL}, "needs --columns a,b,c or --header");
    bad_flags((const char *[]){"--format", "csv", "--columns", "a,b", "--date", "c", NULL},
              "--date c: not one of --columns");
    bad_flags((const char *[]){"--format", "json", "--output-format", "csv", NULL},
              "needs --columns");
    bad_flags((const char *[]){"--format", "json", "--enrich-key", "k", NULL},
              "go together");
    bad_flags((const char *[]){"--format", "json", "--min-amount", "3", NULL}, "--min-amount");
    bad_flags((const char *[]){"--format", "json", "--enrich-key", "k", "--enrich-table",
                               "postgresql://u@h/db", NULL},
              "table");
}
