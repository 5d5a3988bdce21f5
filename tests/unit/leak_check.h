/* leak_check.h - fail a Criterion test that leaks, in sanitizer builds.
 *
 * Criterion runs each test in a child process and ignores LeakSanitizer's
 * exit status at the end of it, so leaks would only show up as log noise.
 * A suite that declares `TestSuite(name, .fini = eddy_test_leak_check)` runs
 * LeakSanitizer after every test and aborts on a leak, which Criterion
 * reports ("crashed during its setup or teardown") and turns into a failing
 * exit status. Without AddressSanitizer this is a no-op. */
#ifndef EDDY_TESTS_LEAK_CHECK_H
#define EDDY_TESTS_LEAK_CHECK_H

#include <stdlib.h>

#if defined(__SANITIZE_ADDRESS__)
#define EDDY_TEST_HAVE_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EDDY_TEST_HAVE_LSAN 1
#endif
#endif

#ifdef EDDY_TEST_HAVE_LSAN
#include <sanitizer/lsan_interface.h>
#endif

static inline void eddy_test_leak_check(void)
{
#ifdef EDDY_TEST_HAVE_LSAN
    if (__lsan_do_recoverable_leak_check())
        abort(); /* the report is on stderr */
#endif
}

#endif
