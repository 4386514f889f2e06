/*
 * test_rl_dataset.c - JSONL prompt datasets (dataset.h): GSM8K lines, the
 * prompt template, bad lines counted with their numbers and skipped, a file
 * of only bad lines refused, and the loader: deterministic shuffles by
 * seed and epoch, drop_last, and a (epoch, index) position that resumes
 * exactly.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "areal/rl/dataset.h"

static const char *JSONL =
    "{\"question\": \"Natalia sold 48 clips. How many?\", \"answer\": \"48/2 = 24\\n#### 72\"}\n"
    "\n"
    "not json at all\n"
    "{\"question\": \"Two?\", \"answer\": \"#### 2\"}\r\n"
    "[1, 2]\n"
    "{\"question\": \"No gold\", \"answer\": \"it is ####  \"}\n"
    "{\"answer\": \"#### 3\"}\n"
    "{\"question\": \"Big\", \"answer\": \"so #### 1,000\", \"extra\": 1}\n"
    "{\"question\": \"Number answer\", \"answer\": 5}";

static void parses_good_lines_and_reports_bad_ones(void **st) {
    (void)st;
    areal_rl_dataset *d = NULL;
    areal_error err;
    assert_int_equal(areal_rl_dataset_parse(JSONL, strlen(JSONL), "t.jsonl", NULL, &d, &err),
                     AREAL_OK);
    assert_int_equal(d->n, 4);
    assert_string_equal(d->items[0].gold, "72");
    assert_int_equal(d->items[0].line, 1);
    assert_string_equal(d->items[0].prompt, "Natalia sold 48 clips. How many?\nPlease put your "
                                            "final answer within \\boxed{}.");
    assert_string_equal(d->items[1].gold, "2");
    assert_int_equal(d->items[1].line, 4);
    assert_string_equal(d->items[2].gold, "1000");
    assert_string_equal(d->items[3].gold, "5");
    assert_int_equal(d->n_bad, 4);
    const long want[4] = {3, 5, 6, 7};
    for (int i = 0; i < 4; i++)
        assert_int_equal(d->bad_lines[i], want[i]);
    char rep[512];
    areal_rl_dataset_report(d, "t.jsonl", rep, sizeof rep);
    assert_non_null(strstr(rep, "4 bad lines skipped in t.jsonl: 3, 5, 6, 7"));
    assert_non_null(strstr(rep, "line 3: not JSON"));
    areal_rl_dataset_free(d);
}

static void template_and_refusals(void **st) {
    (void)st;
    areal_rl_dataset *d = NULL;
    areal_error err;
    const char *one = "{\"question\": \"Q1\", \"answer\": \"#### 1\"}";
    assert_int_equal(
        areal_rl_dataset_parse(one, strlen(one), "x", "Q: {question}\nA ({question})", &d, &err),
        AREAL_OK);
    assert_string_equal(d->items[0].prompt, "Q: Q1\nA (Q1)");
    areal_rl_dataset_free(d);
    assert_int_equal(areal_rl_dataset_parse(one, strlen(one), "x", "no placeholder", &d, &err),
                     AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "{question}"));
    assert_null(d);
    const char *allbad = "junk\n{\"q\": 1}\n";
    assert_int_equal(areal_rl_dataset_parse(allbad, strlen(allbad), "bad.jsonl", NULL, &d, &err),
                     AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "bad.jsonl has no usable line (2 bad, first: line 1"));
    assert_int_equal(areal_rl_dataset_load("/nonexistent/x.jsonl", NULL, &d, &err), AREAL_EIO);
    assert_non_null(strstr(err.msg, "/nonexistent/x.jsonl"));
}

static void loads_a_file(void **st) {
    (void)st;
    char path[] = "/tmp/areal-rl-ds-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    for (int i = 0; i < 100; i++)
        fprintf(f, "{\"question\": \"q%d\", \"answer\": \"#### %d\"}\n", i, i);
    fprintf(f, "{broken\n");
    fclose(f);
    areal_rl_dataset *d = NULL;
    areal_error err;
    assert_int_equal(areal_rl_dataset_load(path, NULL, &d, &err), AREAL_OK);
    assert_int_equal(d->n, 100);
    assert_int_equal(d->n_bad, 1);
    assert_int_equal(d->bad_lines[0], 101);
    assert_string_equal(d->items[99].gold, "99");
    areal_rl_dataset_free(d);
    unlink(path);
}

static void loader_is_deterministic_and_resumes(void **st) {
    (void)st;
    areal_rl_loader a, b, c;
    assert_int_equal(areal_rl_loader_init(&a, 10, 3, 7, true, NULL), AREAL_OK);
    assert_int_equal(areal_rl_loader_init(&b, 10, 3, 7, true, NULL), AREAL_OK);
    assert_int_equal(areal_rl_loader_init(&c, 10, 3, 8, true, NULL), AREAL_OK);
    assert_int_equal(areal_rl_loader_steps_per_epoch(&a), 3);
    size_t x[3], y[3], z[3];
    size_t seen_a[9 * 3], seen_c[9 * 3];
    int differs = 0;
    for (int s = 0; s < 9; s++) {
        long ep;
        size_t idx;
        areal_rl_loader_next(&a, x, &ep, &idx);
        areal_rl_loader_next(&b, y, NULL, NULL);
        areal_rl_loader_next(&c, z, NULL, NULL);
        assert_int_equal(ep, s / 3);
        assert_int_equal(idx, (size_t)(s % 3));
        assert_memory_equal(x, y, sizeof x);
        memcpy(seen_a + 3 * s, x, sizeof x);
        memcpy(seen_c + 3 * s, z, sizeof z);
        differs |= memcmp(x, z, sizeof x) != 0;
    }
    assert_true(differs); /* another seed, another order */
    /* within an epoch no index repeats (drop_last: 9 of 10 used) */
    for (int e = 0; e < 3; e++) {
        int count[10] = {0};
        for (int k = 0; k < 9; k++)
            count[seen_a[9 * e + k]]++;
        for (int k = 0; k < 10; k++)
            assert_true(count[k] <= 1);
    }
    /* the epochs are shuffled differently */
    assert_true(memcmp(seen_a, seen_a + 9, 9 * sizeof(size_t)) != 0);
    /* resume at (epoch 1, index 2) = the 6th batch */
    areal_rl_loader r;
    assert_int_equal(areal_rl_loader_init(&r, 10, 3, 7, true, NULL), AREAL_OK);
    assert_int_equal(areal_rl_loader_seek(&r, 1, 2, NULL), AREAL_OK);
    for (int s = 5; s < 9; s++) {
        areal_rl_loader_next(&r, x, NULL, NULL);
        assert_memory_equal(x, seen_a + 3 * s, sizeof x);
    }
    areal_error err;
    assert_int_equal(areal_rl_loader_seek(&r, 0, 4, &err), AREAL_ERANGE);
    assert_int_equal(areal_rl_loader_seek(&r, -1, 0, &err), AREAL_ERANGE);
    /* without shuffle: in order */
    areal_rl_loader p;
    assert_int_equal(areal_rl_loader_init(&p, 5, 2, 1, false, NULL), AREAL_OK);
    areal_rl_loader_next(&p, x, NULL, NULL);
    assert_true(x[0] == 0 && x[1] == 1);
    areal_rl_loader_free(&p);
    assert_int_equal(areal_rl_loader_init(&p, 5, 6, 1, false, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "batch_size"));
    areal_rl_loader_free(&p);
    areal_rl_loader_free(&a);
    areal_rl_loader_free(&b);
    areal_rl_loader_free(&c);
    areal_rl_loader_free(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parses_good_lines_and_reports_bad_ones),
        cmocka_unit_test(template_and_refusals),
        cmocka_unit_test(loads_a_file),
        cmocka_unit_test(loader_is_deterministic_and_resumes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
