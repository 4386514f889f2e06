/* test_buf.c - the bounded buffer of lib/base (areal/buf.h): growth, the
 * maximum, the sticky first error, printf, percent-encoding, consume. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "areal/buf.h"
#include "areal/error.h"

static void test_append_grows_and_terminates(void **state) {
    (void)state;
    areal_buf b;
    areal_buf_init(&b, AREAL_BUF_UNBOUNDED);
    assert_null(b.data);
    char want[5000];
    for (int i = 0; i < 1000; i++) {
        assert_int_equal(areal_buf_append(&b, "abcde", 5), AREAL_OK);
        memcpy(want + 5 * i, "abcde", 5);
    }
    assert_int_equal(b.len, 5000);
    assert_true(b.cap > b.len);
    assert_memory_equal(b.data, want, 5000);
    assert_int_equal(b.data[b.len], '\0');
    assert_int_equal(b.err, AREAL_OK);
    areal_buf_free(&b);
    assert_null(b.data);
    assert_int_equal(b.len, 0);
}

static void test_max_is_exact_and_failure_leaves_content(void **state) {
    (void)state;
    areal_buf b;
    areal_buf_init(&b, 8);
    assert_int_equal(areal_buf_puts(&b, "12345678"), AREAL_OK); /* exactly max */
    assert_int_equal(areal_buf_append(&b, "9", 1), AREAL_ERANGE);
    assert_string_equal(b.data, "12345678");
    assert_int_equal(b.len, 8);
    assert_int_equal(b.err, AREAL_ERANGE);
    /* err keeps the first failure; later successes do not clear it */
    areal_buf_consume(&b, 4);
    assert_int_equal(areal_buf_puts(&b, "ab"), AREAL_OK);
    assert_string_equal(b.data, "5678ab");
    assert_int_equal(b.err, AREAL_ERANGE);
    areal_buf_clear(&b);
    assert_int_equal(b.err, AREAL_OK);
    assert_int_equal(b.len, 0);
    assert_string_equal(b.data, "");
    /* a huge length is refused without overflow */
    assert_int_equal(areal_buf_append(&b, "x", (size_t)-1), AREAL_ERANGE);
    areal_buf_free(&b);
}

static void test_printf(void **state) {
    (void)state;
    areal_buf b;
    areal_buf_init(&b, 64);
    assert_int_equal(areal_buf_printf(&b, "%s=%d", "n", 42), AREAL_OK);
    assert_int_equal(areal_buf_printf(&b, "/%05.1f", 3.14159), AREAL_OK);
    assert_string_equal(b.data, "n=42/003.1");
    char big[100];
    memset(big, 'z', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    assert_int_equal(areal_buf_printf(&b, "%s", big), AREAL_ERANGE);
    assert_string_equal(b.data, "n=42/003.1");
    areal_buf_free(&b);
}

static void test_percent_encoding_all_or_nothing(void **state) {
    (void)state;
    areal_buf b;
    areal_buf_init(&b, 32);
    assert_int_equal(areal_buf_put_pct(&b, "a b/c~d\xc3\xa9"), AREAL_OK);
    assert_string_equal(b.data, "a%20b%2Fc~d%C3%A9");
    size_t before = b.len;
    /* 10 bytes of '/' need 30: past the maximum, so nothing of it lands */
    assert_int_equal(areal_buf_put_pct(&b, "//////////"), AREAL_ERANGE);
    assert_int_equal(b.len, before);
    assert_string_equal(b.data, "a%20b%2Fc~d%C3%A9");
    areal_buf_free(&b);
}

static void test_consume(void **state) {
    (void)state;
    areal_buf b;
    areal_buf_init(&b, 100);
    areal_buf_consume(&b, 3); /* empty, no storage: no crash */
    assert_int_equal(areal_buf_puts(&b, "line1\nline2\n"), AREAL_OK);
    areal_buf_consume(&b, 6);
    assert_string_equal(b.data, "line2\n");
    areal_buf_consume(&b, 100);
    assert_int_equal(b.len, 0);
    assert_string_equal(b.data, "");
    areal_buf_free(&b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_append_grows_and_terminates),
        cmocka_unit_test(test_max_is_exact_and_failure_leaves_content),
        cmocka_unit_test(test_printf),
        cmocka_unit_test(test_percent_encoding_all_or_nothing),
        cmocka_unit_test(test_consume),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
