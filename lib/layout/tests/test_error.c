/* test_error.c - the error convention of areal/error.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "areal/error.h"
#include "areal/strategy.h"

static void set_returns_code_and_formats(void **state) {
    (void)state;
    areal_error e;
    areal_error_clear(&e);
    assert_int_equal(e.code, AREAL_OK);
    assert_int_equal(e.pos, -1);
    assert_int_equal(areal_error_set(&e, AREAL_EINVAL, 7, "bad %s at %d", "x", 7), AREAL_EINVAL);
    assert_int_equal(e.code, AREAL_EINVAL);
    assert_int_equal(e.pos, 7);
    assert_string_equal(e.msg, "bad x at 7");
}

static void set_tolerates_null_and_long_messages(void **state) {
    (void)state;
    assert_int_equal(areal_error_set(NULL, AREAL_ENOFIT, 0, "ignored"), AREAL_ENOFIT);
    areal_error e;
    char big[2 * AREAL_ERROR_MSG_MAX];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    areal_error_set(&e, AREAL_EINVAL, 0, "%s", big);
    assert_int_equal(strlen(e.msg), AREAL_ERROR_MSG_MAX - 1);
}

static void strerror_names_every_code(void **state) {
    (void)state;
    const int codes[] = {AREAL_OK,  AREAL_EINVAL, AREAL_ENOMEM,
                         AREAL_EIO, AREAL_ENOFIT, AREAL_ERANGE};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        assert_string_not_equal(areal_strerror(codes[i]), "unknown error");
    assert_string_equal(areal_strerror(-999), "unknown error");
}

static void strategy_world_is_d_t_p_c(void **state) {
    (void)state;
    areal_strategy s = areal_strategy_single();
    assert_int_equal(areal_strategy_world(&s), 1);
    s.dp = 4, s.tp = 2, s.pp = 2, s.cp = 2, s.ep = 8;
    assert_int_equal(areal_strategy_world(&s), 32);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(set_returns_code_and_formats),
        cmocka_unit_test(set_tolerates_null_and_long_messages),
        cmocka_unit_test(strerror_names_every_code),
        cmocka_unit_test(strategy_world_is_d_t_p_c),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
