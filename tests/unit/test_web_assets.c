/* test_web_assets.c - the dashboard's files as compiled into the binary
 * (cmake/embed_web.cmake, coordinator/web_assets.c): "/" is the page, every
 * file the page names is there with the right content type, each is text
 * the HTTP layer can send whole (no NUL inside), and nothing is loaded from
 * another host (the dashboard must work offline). */
#include <criterion/criterion.h>
#include <string.h>

#include "coordinator/web_assets.h"

Test(web_assets, root_is_the_page_and_its_files_are_there)
{
    const coord_web_asset_t *page = coord_web_asset_find("/");
    cr_assert(page, "no asset at /");
    cr_assert_str_eq(page->path, "/index.html");
    cr_assert(strstr(page->content_type, "text/html"));
    cr_assert(strstr(page->data, "<!DOCTYPE html>"));
    const coord_web_asset_t *css = coord_web_asset_find("/dashboard.css");
    const coord_web_asset_t *js = coord_web_asset_find("/dashboard.js");
    cr_assert(css && strstr(css->content_type, "text/css"));
    cr_assert(js && strstr(js->content_type, "javascript"));
    cr_assert(strstr(page->data, "href=\"/dashboard.css\""), "the page should load /dashboard.css");
    cr_assert(strstr(page->data, "src=\"/dashboard.js\""), "the page should load /dashboard.js");
    cr_assert_null(coord_web_asset_find("/nope.js"));
    cr_assert_null(coord_web_asset_find("/index.html/"));
    cr_assert_null(coord_web_asset_find(""));
    cr_assert_null(coord_web_asset_find(NULL));
}

Test(web_assets, text_without_nul_and_nothing_from_elsewhere)
{
    cr_assert_geq(coord_web_asset_count, 3);
    for (size_t i = 0; i < coord_web_asset_count; i++) {
        const coord_web_asset_t *a = &coord_web_assets[i];
        cr_assert_gt(a->len, 100, "%s is (nearly) empty", a->path);
        cr_assert_eq(strlen(a->data), a->len, "%s has a NUL byte inside", a->path);
        cr_assert_eq(a->data[a->len], '\0');
        cr_assert_null(strstr(a->data, "http://"), "%s loads something over http://", a->path);
        cr_assert_null(strstr(a->data, "https://"), "%s loads something over https://", a->path);
        cr_assert_null(strstr(a->data, "//cdn"), "%s names a CDN", a->path);
    }
}
