/* test_keyset.c - the hash table of lib/base (areal/keyset.h), against a
 * naive reference (a linear list) over a long seeded run of adds, removes and
 * lookups; binary keys; values; growth from reserve. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "areal/error.h"
#include "areal/keyset.h"

static void test_basics(void **state) {
    (void)state;
    areal_keyset s;
    areal_keyset_init(&s);
    assert_false(areal_keyset_has(&s, "a")); /* empty, no table */
    assert_null(areal_keyset_value(&s, "a"));
    assert_false(areal_keyset_remove(&s, "a"));
    assert_int_equal(areal_keyset_add(&s, "ns/a"), 1);
    assert_int_equal(areal_keyset_add(&s, "ns/a"), 0);
    assert_int_equal(areal_keyset_add(&s, ""), 1); /* the empty key is a key */
    assert_int_equal(s.len, 2);
    int64_t *v = areal_keyset_value(&s, "ns/a");
    assert_non_null(v);
    assert_int_equal(*v, 0);
    *v = -7;
    assert_int_equal(areal_keyset_add(&s, "ns/a"), 0); /* present: value untouched */
    assert_int_equal(*areal_keyset_value(&s, "ns/a"), -7);
    assert_true(areal_keyset_remove(&s, "ns/a"));
    assert_false(areal_keyset_has(&s, "ns/a"));
    assert_true(areal_keyset_has(&s, ""));
    areal_keyset_free(&s);
    assert_int_equal(s.len, 0);
    assert_int_equal(s.cap, 0);
}

static void test_binary_keys(void **state) {
    (void)state;
    areal_keyset s;
    areal_keyset_init(&s);
    const char k1[] = {'a', '\0', 'b'}, k2[] = {'a', '\0', 'c'}, k3[] = {'a'};
    assert_int_equal(areal_keyset_addn(&s, k1, 3), 1);
    assert_int_equal(areal_keyset_addn(&s, k2, 3), 1);
    assert_int_equal(areal_keyset_addn(&s, k3, 1), 1); /* a prefix of k1 up to its NUL */
    *areal_keyset_valuen(&s, k2, 3) = 22;
    int64_t v = 0;
    assert_true(areal_keyset_getn(&s, k2, 3, &v));
    assert_int_equal(v, 22);
    assert_true(areal_keyset_getn(&s, k1, 3, &v));
    assert_int_equal(v, 0);
    assert_true(areal_keyset_has(&s, "a")); /* k3 as a C string */
    v = 99;
    assert_false(areal_keyset_getn(&s, "a\0d", 3, &v));
    assert_int_equal(v, 99);
    areal_keyset_free(&s);
}

/* xorshift64: a fixed seed, so a failure names a reproducible sequence */
static uint64_t rnd(uint64_t *x) {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

#define UNIVERSE 700 /* keys "k0".."k699": many collisions of clusters, many deletes */

static void test_against_reference(void **state) {
    (void)state;
    areal_keyset s;
    areal_keyset_init(&s);
    bool ref[UNIVERSE] = {false};
    int64_t refv[UNIVERSE] = {0};
    size_t n = 0;
    uint64_t x = 0x2545F4914F6CDD1DULL;
    char key[16];
    for (int step = 0; step < 200000; step++) {
        int k = (int)(rnd(&x) % UNIVERSE);
        snprintf(key, sizeof key, "k%d", k);
        switch (rnd(&x) % 4) {
        case 0:
        case 1: {
            int rc = areal_keyset_add(&s, key);
            assert_int_equal(rc, ref[k] ? 0 : 1);
            if (!ref[k]) {
                ref[k] = true;
                refv[k] = 0;
                n++;
            }
            *areal_keyset_value(&s, key) = refv[k] = (int64_t)step;
            break;
        }
        case 2:
            assert_int_equal(areal_keyset_remove(&s, key), ref[k]);
            if (ref[k]) {
                ref[k] = false;
                n--;
            }
            break;
        default: {
            int64_t *v = areal_keyset_value(&s, key);
            assert_int_equal(v != NULL, ref[k]);
            if (v)
                assert_int_equal(*v, refv[k]);
        }
        }
        assert_int_equal(s.len, n);
        assert_true(s.cap == 0 || s.len * 2 <= s.cap);
    }
    for (int k = 0; k < UNIVERSE; k++) { /* every key still reachable after all the shifts */
        snprintf(key, sizeof key, "k%d", k);
        assert_int_equal(areal_keyset_has(&s, key), ref[k]);
    }
    areal_keyset_free(&s);
}

static void test_reserve(void **state) {
    (void)state;
    areal_keyset s;
    areal_keyset_init(&s);
    assert_int_equal(areal_keyset_reserve(&s, 1000), AREAL_OK);
    size_t cap = s.cap;
    assert_true(cap >= 2000);
    char key[16];
    for (int i = 0; i < 1000; i++) {
        snprintf(key, sizeof key, "t%d", i);
        assert_int_equal(areal_keyset_add(&s, key), 1);
    }
    assert_int_equal(s.cap, cap); /* no regrowth */
    assert_int_equal(areal_keyset_reserve(&s, 10), AREAL_OK);
    assert_int_equal(s.cap, cap); /* never shrinks */
    areal_keyset_free(&s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basics),
        cmocka_unit_test(test_binary_keys),
        cmocka_unit_test(test_against_reference),
        cmocka_unit_test(test_reserve),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
