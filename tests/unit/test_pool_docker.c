/* test_pool_docker.c - the Docker pool backend's requests, built without a
 * dockerd: the create body from a template container or from flags, and
 * reading the pool's running containers out of a container list. */
#include <criterion/criterion.h>
#include <string.h>

#include "controller/pool_docker.h"

static const char *TEMPLATE =
    "{\"Id\": \"abc\", \"Name\": \"/deploy_worker_1\","
    " \"Config\": {\"Image\": \"eddy:local\", \"Hostname\": \"abc\","
    "   \"Cmd\": [\"worker\", \"--coordinator\", \"tcp://coordinator-1:7600\", \"--hostname-identity\"],"
    "   \"Entrypoint\": [\"/usr/local/bin/eddy\"], \"Env\": [\"EDDY_KEYS=/keys\"],"
    "   \"Labels\": {\"com.docker.compose.service\": \"worker\", \"org.example\": \"x\"}},"
    " \"HostConfig\": {\"Binds\": [\"deploy_snapshots:/var/lib/eddy:rw\"], \"NetworkMode\": \"deploy_default\","
    "   \"RestartPolicy\": {\"Name\": \"always\"}}}";

Test(pool_docker, create_body_copies_the_template)
{
    json_t *tpl = json_loads(TEMPLATE, 0, NULL);
    cr_assert_not_null(tpl);
    eddy_pool_docker_config_t c = {.prefix = "eddy-pool"};
    eddy_err_t err = {{0}};
    json_t *body = eddy_pool_docker_create_body(&c, tpl, "eddy-pool-1", &err);
    cr_assert_not_null(body, "%s", err.msg);
    cr_assert_str_eq(json_string_value(json_object_get(body, "Image")), "eddy:local");
    cr_assert_str_eq(json_string_value(json_object_get(body, "Hostname")), "eddy-pool-1");
    json_t *cmd = json_object_get(body, "Cmd");
    cr_assert_eq(json_array_size(cmd), 4);
    cr_assert_str_eq(json_string_value(json_array_get(cmd, 3)), "--hostname-identity");
    cr_assert_str_eq(json_string_value(json_array_get(json_object_get(body, "Entrypoint"), 0)),
                     "/usr/local/bin/eddy");
    cr_assert_str_eq(json_string_value(json_array_get(json_object_get(body, "Env"), 0)), "EDDY_KEYS=/keys");
    json_t *labels = json_object_get(body, "Labels");
    cr_assert_str_eq(json_string_value(json_object_get(labels, "eddy.pool")), "eddy-pool");
    cr_assert_str_eq(json_string_value(json_object_get(labels, "org.example")), "x");
    cr_assert_null(json_object_get(labels, "com.docker.compose.service"), "compose must not own it");
    json_t *host = json_object_get(body, "HostConfig");
    cr_assert_str_eq(json_string_value(json_array_get(json_object_get(host, "Binds"), 0)),
                     "deploy_snapshots:/var/lib/eddy:rw");
    cr_assert_str_eq(json_string_value(json_object_get(host, "NetworkMode")), "deploy_default");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(host, "RestartPolicy"), "Name")), "no");
    json_t *aliases = json_object_get(
        json_object_get(json_object_get(json_object_get(body, "NetworkingConfig"), "EndpointsConfig"),
                        "deploy_default"),
        "Aliases");
    cr_assert_str_eq(json_string_value(json_array_get(aliases, 0)), "eddy-pool-1");
    json_decref(body);
    json_decref(tpl);
}

Test(pool_docker, create_body_gives_the_worker_its_own_name)
{
    json_t *tpl = json_pack("{s:{s:s, s:[s,s,s]}, s:{}}", "Config", "Image", "eddy:local", "Cmd", "worker",
                            "--name", "worker-3", "HostConfig");
    eddy_pool_docker_config_t c = {.prefix = "p"};
    json_t *body = eddy_pool_docker_create_body(&c, tpl, "p-7", NULL);
    cr_assert_not_null(body);
    cr_assert_str_eq(json_string_value(json_array_get(json_object_get(body, "Cmd"), 2)), "p-7");
    cr_assert_null(json_object_get(body, "NetworkingConfig"), "no network named: Docker's default");
    json_decref(body);
    json_decref(tpl);
}

Test(pool_docker, create_body_from_flags)
{
    eddy_pool_docker_config_t c = {.prefix = "eddy-pool", .image = "eddy:local", .network = "eddynet",
                                   .volumes = "snaps:/var/lib/eddy,/srv/keys:/keys:ro",
                                   .command = "worker --coordinator tcp://c:7600 --hostname-identity",
                                   .env = "EDDY_LOG_LEVEL=info"};
    eddy_err_t err = {{0}};
    json_t *body = eddy_pool_docker_create_body(&c, NULL, "eddy-pool-2", &err);
    cr_assert_not_null(body, "%s", err.msg);
    cr_assert_str_eq(json_string_value(json_object_get(body, "Image")), "eddy:local");
    json_t *cmd = json_object_get(body, "Cmd");
    cr_assert_eq(json_array_size(cmd), 4);
    cr_assert_str_eq(json_string_value(json_array_get(cmd, 2)), "tcp://c:7600");
    json_t *binds = json_object_get(json_object_get(body, "HostConfig"), "Binds");
    cr_assert_eq(json_array_size(binds), 2);
    cr_assert_str_eq(json_string_value(json_array_get(binds, 1)), "/srv/keys:/keys:ro");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(body, "HostConfig"), "NetworkMode")),
                     "eddynet");
    cr_assert_str_eq(json_string_value(json_array_get(json_object_get(body, "Env"), 0)), "EDDY_LOG_LEVEL=info");
    json_decref(body);
}

Test(pool_docker, create_body_needs_an_image)
{
    eddy_pool_docker_config_t c = {.prefix = "p"};
    eddy_err_t err = {{0}};
    cr_assert_null(eddy_pool_docker_create_body(&c, NULL, "p-1", &err));
    cr_assert(strstr(err.msg, "--pool-image"), "%s", err.msg);
    json_t *tpl = json_pack("{s:{}}", "Config");
    cr_assert_null(eddy_pool_docker_create_body(&c, tpl, "p-1", &err));
    json_decref(tpl);
}

Test(pool_docker, running_lists_only_the_pools_running_containers)
{
    const char *text =
        "[{\"Id\": \"1\", \"Names\": [\"/eddy-pool-1\"], \"State\": \"running\", \"Labels\": {\"eddy.pool\": \"eddy-pool\"}},"
        " {\"Id\": \"2\", \"Names\": [\"/eddy-pool-2\"], \"State\": \"exited\", \"Labels\": {\"eddy.pool\": \"eddy-pool\"}},"
        " {\"Id\": \"3\", \"Names\": [\"/other-1\"], \"State\": \"running\", \"Labels\": {\"eddy.pool\": \"other\"}},"
        " {\"Id\": \"4\", \"Names\": [\"/deploy_worker_1\"], \"State\": \"running\", \"Labels\": {}}]";
    json_t *list = json_loads(text, 0, NULL);
    char names[4][EDDY_POOL_NAME_MAX];
    cr_assert_eq(eddy_pool_docker_running(list, "eddy-pool", names, 4), 1);
    cr_assert_str_eq(names[0], "eddy-pool-1");
    json_decref(list);
}

Test(pool_docker, a_missing_socket_is_a_clear_error)
{
    eddy_pool_docker_config_t c = {.socket = "/nonexistent/docker.sock", .prefix = "p", .image = "eddy:local"};
    eddy_pool_backend_t b = {0};
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_pool_docker_new(&c, &b, &err), 0, "%s", err.msg);
    char names[2][EDDY_POOL_NAME_MAX];
    cr_assert_eq(b.ops->live(b.self, names, 2, &err), -1);
    cr_assert(strstr(err.msg, "docker socket /nonexistent/docker.sock"), "%s", err.msg);
    cr_assert_eq(b.ops->grow(b.self, "p-1", &err), -1);
    cr_assert(strstr(err.msg, "is dockerd running"), "%s", err.msg);
    eddy_pool_backend_destroy(&b);
}
