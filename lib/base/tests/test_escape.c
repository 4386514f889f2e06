/*
 * test_escape.c - areal_escape and areal_print_line (areal/escape.h): every
 * control byte is escaped, UTF-8 passes, a cut never splits an escape, and a
 * printed line is always exactly one line.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "areal/escape.h"

static void escapes_control_bytes(void **state) {
    (void)state;
    char out[256];
    const char in[] = "a\nb\rc\td\\e\x01\x1b[0m\x7f\xc3\xa9";
    areal_escape(out, sizeof out, in, sizeof in - 1);
    assert_string_equal(out, "a\\nb\\rc\\td\\\\e\\x01\\x1b[0m\\x7f\xc3\xa9");
    /* a NUL inside the input is a byte like the others */
    areal_escape(out, sizeof out, "x\0y", 3);
    assert_string_equal(out, "x\\x00y");
    /* every byte value: no control byte survives */
    char all[256];
    for (int i = 0; i < 256; i++)
        all[i] = (char)i;
    char big[2048];
    areal_escape(big, sizeof big, all, sizeof all);
    for (const unsigned char *p = (const unsigned char *)big; *p; p++)
        assert_true(*p >= 0x20 && *p != 0x7f);
}

static void cuts_at_a_whole_escape(void **state) {
    (void)state;
    char out[8];
    areal_escape(out, sizeof out, "abcdefghij", 10);
    assert_string_equal(out, "abcd...");
    areal_escape(out, sizeof out, "ab\x01\x02\x03", 5);
    assert_string_equal(out, "ab...");
    areal_escape(out, sizeof out, "abcdefg", 7); /* fits exactly: no "..." */
    assert_string_equal(out, "abcdefg");
    areal_escape(out, 4, "abcdef", 6);
    assert_string_equal(out, "...");
}

static void print_line_is_one_line(void **state) {
    (void)state;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    areal_print_line(f, "prog: bad '%s'\n", "x\ny\n");
    char long_arg[10000];
    memset(long_arg, 'z', sizeof long_arg - 1);
    long_arg[sizeof long_arg - 1] = '\0';
    long_arg[5000] = '\n';
    areal_print_line(f, "prog: %s", long_arg);
    fclose(f);
    char *nl = strchr(buf, '\n');
    assert_non_null(nl);
    *nl = '\0';
    assert_string_equal(buf, "prog: bad 'x\\ny\\n'");
    char *second = nl + 1;
    assert_int_equal(strchr(second, '\n') - second, (ptrdiff_t)strlen(second) - 1);
    assert_true(strlen(second) < 4200);
    assert_non_null(strstr(second, "...\n"));
    free(buf);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(escapes_control_bytes),
        cmocka_unit_test(cuts_at_a_whole_escape),
        cmocka_unit_test(print_line_is_one_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
