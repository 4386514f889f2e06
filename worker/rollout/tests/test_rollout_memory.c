/*
 * test_rollout_memory.c - the paged KV cache's memory: the block manager's
 * states (free / referenced / cached), lookups, LRU eviction and flush; n = 8
 * samples of one 200-token prompt hold the prompt's full blocks once (from
 * the stats) and still equal areal_generate's 8 seeded draws; a
 * 1,000-request soak with mixed lengths, n > 1 and aborts never uses more
 * blocks than the budget holds, answers every request exactly once and
 * returns every block.
 */
#include "../src/kv_blocks.h"
#include "engine_test_util.h"

static void block_states_lookup_and_eviction(void **state) {
    (void)state;
    kv_blocks k;
    areal_error err;
    assert_int_equal(kvb_init(&k, 3, 4, &err), AREAL_OK);
    int32_t t0[4] = {1, 2, 3, 4}, t1[4] = {5, 6, 7, 8};
    int a = kvb_alloc(&k), b = kvb_alloc(&k);
    assert_true(a >= 0 && b >= 0 && a != b);
    uint64_t h0 = kvb_hash(KVB_ROOT_HASH, t0, 4);
    kvb_register(&k, a, KVB_ROOT_HASH, t0);
    kvb_register(&k, b, h0, t1);
    assert_int_equal(kvb_lookup(&k, KVB_ROOT_HASH, t0), a);
    assert_int_equal(kvb_lookup(&k, h0, t1), b);
    assert_int_equal(kvb_lookup(&k, KVB_ROOT_HASH, t1), -1); /* same tokens, other parent */
    kvb_ref(&k, a);
    assert_int_equal(k.n_shared, 1);
    kvb_unref(&k, a);
    kvb_unref(&k, a); /* indexed: cached, not free */
    assert_int_equal(k.n_cached, 1);
    assert_int_equal(kvb_available(&k), 2);
    assert_int_equal(kvb_lookup(&k, KVB_ROOT_HASH, t0), a);
    int c = kvb_alloc(&k); /* the free one first */
    assert_true(c != a && c != b);
    assert_int_equal(kvb_lookup(&k, KVB_ROOT_HASH, t0), a);
    int d = kvb_alloc(&k); /* then the LRU cached one, evicted from the index */
    assert_int_equal(d, a);
    assert_int_equal(kvb_lookup(&k, KVB_ROOT_HASH, t0), -1);
    assert_int_equal(kvb_alloc(&k), -1);
    assert_int_equal(k.n_used, 3);
    assert_int_equal(k.peak_used, 3);
    kvb_flush(&k); /* b is referenced: unindexed, kept */
    assert_int_equal(kvb_lookup(&k, h0, t1), -1);
    kvb_unref(&k, b);
    kvb_unref(&k, c);
    kvb_unref(&k, d);
    assert_int_equal(k.n_free, 3);
    assert_int_equal(k.n_used, 0);
    kvb_free(&k);
}

typedef struct watch {
    et_coll *c;
    areal_engine *e;
    int over_budget, max_used;
} watch;

static void eight_samples_share_the_prompt(void **state) {
    (void)state;
    areal_model ref;
    et_load(&ref, "ref-qwen3");
    areal_engine_config cfg = {.kv_bytes = 8u << 20};
    areal_engine *e = et_engine("ref-qwen3", &cfg);
    et_coll c;
    et_coll_init(&c, 1, e);
    uint64_t rs = 8;
    c.slots[0].n_ids = 200;
    c.slots[0].ids = et_prompt(&rs, 200, ref.cfg.vocab_size);
    areal_engine_params p = et_greedy(8); /* 200 + 8 = 13 blocks of 16 per sample */
    p.temperature = 1.0f;
    p.n = 8;
    p.has_seed = true;
    p.sampling_seed = 31;
    et_submit_ok(e, &c.slots[0], &p);
    et_wait_done(&c, 1);
    areal_engine_stats st;
    areal_engine_get_stats(e, &st);
    print_message("n = 8 x 200-token prompt: peak %d blocks (alone: 8 x 13 = 104), %llu of %llu "
                  "prompt tokens from the cache\n",
                  st.blocks_used_peak, (unsigned long long)st.cached_tokens_total,
                  (unsigned long long)st.prompt_tokens_total);
    /* 12 full prompt blocks once + one private block per sample (8 prompt + 8 new tokens) */
    assert_int_equal(st.blocks_used_peak, 12 + 8);
    assert_int_equal(st.cached_tokens_total, 7 * 192);
    assert_int_equal(st.prompt_tokens_total, 8 * 200);
    areal_engine_result *r = c.slots[0].res;
    assert_int_equal(r->n, 8);
    assert_int_equal(r->samples[0].cached_tokens, 0);
    const int32_t *prompts[8];
    int lens[8];
    for (int i = 0; i < 8; i++) {
        prompts[i] = c.slots[0].ids;
        lens[i] = 200;
        assert_int_equal(r->samples[i].cached_tokens, i == 0 ? 0 : 192);
    }
    areal_sampling sp = {.temperature = 1.0f, .top_p = 1, .seed = 31, .max_new_tokens = 8};
    areal_gen_out o[8];
    areal_error err;
    if (areal_generate(&ref, prompts, lens, 8, &sp, o, &err) != AREAL_OK)
        fail_msg("%s", err.msg);
    int distinct = 0;
    for (int i = 0; i < 8; i++) {
        assert_int_equal(r->samples[i].index, i);
        assert_int_equal(r->samples[i].n_output, o[i].n);
        for (int j = 0; j < o[i].n; j++) {
            assert_int_equal(r->samples[i].output_ids[j], o[i].tokens[j]);
            assert_true(fabsf(r->samples[i].output_logprobs[j] - o[i].logprobs[j]) <= 1e-5f);
        }
        distinct += i > 0 && memcmp(r->samples[i].output_ids, r->samples[0].output_ids,
                                    sizeof(int32_t) * 8) != 0;
        areal_gen_out_free(&o[i]);
    }
    assert_true(distinct > 0); /* streams (seed, i) differ */
    et_coll_free(&c);
    areal_engine_destroy(e);
    areal_model_free(&ref);
}

static void soak_stays_within_budget(void **state) {
    (void)state;
    areal_model ref;
    et_load(&ref, "ref-qwen2");
    size_t block = areal_paged_kv_block_bytes(&ref.cfg, 8);
    areal_engine_config cfg = {.kv_bytes = 24 * block + block / 2, /* 24 blocks of 8 tokens */
                               .block_tokens = 8,
                               .max_running = 32,
                               .max_queued = 4000,
                               .max_step_tokens = 128};
    areal_engine *e = et_engine("ref-qwen2", &cfg);
    const int N = 1000;
    et_coll c;
    et_coll_init(&c, N, e);
    uint64_t rs = 1234;
    int n_samples = 0;
    for (int i = 0; i < N; i++) {
        et_slot *s = &c.slots[i];
        s->n_ids = 1 + (int)et_rand(&rs, 40);
        s->max_new = 1 + (int)et_rand(&rs, 12);
        s->ids = et_prompt(&rs, s->n_ids, ref.cfg.vocab_size);
        if (et_rand(&rs, 10) == 0)
            s->abort_at = 1 + (int)et_rand(&rs, (uint32_t)s->max_new);
        if (et_rand(&rs, 20) == 0) /* a prompt seen before: prefix hits */
            memcpy(s->ids, c.slots[i / 2].ids,
                   sizeof(int32_t) *
                       (size_t)(s->n_ids < c.slots[i / 2].n_ids ? s->n_ids : c.slots[i / 2].n_ids));
    }
    int worst_used = 0, total = 0, submitted = 0;
    while (submitted < N || c.n_done < N) {
        for (int k = 0; k < 25 && submitted < N; k++, submitted++) {
            et_slot *s = &c.slots[submitted];
            areal_engine_params p = et_greedy(s->max_new);
            p.n = 1 + (int)(submitted % 7 == 0) * 2;
            n_samples += p.n;
            et_submit_ok(e, s, &p);
        }
        areal_engine_stats st;
        areal_engine_get_stats(e, &st);
        total = st.blocks_total;
        worst_used = st.blocks_used > worst_used ? st.blocks_used : worst_used;
        assert_true(st.blocks_used + st.blocks_cached <= st.blocks_total);
        assert_true(st.kv_bytes_allocated <= st.kv_bytes_budget);
        if (submitted == N)
            et_wait_done(&c, N);
        else
            et_sleep_ms(1);
    }
    areal_engine_drain(e, false); /* until the last on_done has returned */
    areal_engine_stats st;
    areal_engine_get_stats(e, &st);
    print_message("soak: %d requests (%d samples), %llu steps, %llu preemptions, peak %d of %d "
                  "blocks, %llu prompt tokens from the cache\n",
                  N, n_samples, (unsigned long long)st.steps, (unsigned long long)st.preemptions,
                  st.blocks_used_peak, st.blocks_total, (unsigned long long)st.cached_tokens_total);
    assert_int_equal(total, 24);
    assert_true(st.blocks_used_peak <= st.blocks_total);
    assert_true(worst_used <= st.blocks_total);
    assert_int_equal(st.blocks_used, 0);
    assert_int_equal(st.running, 0);
    assert_int_equal(st.queued, 0);
    assert_int_equal(st.live_requests, 0);
    assert_int_equal(st.requests_total, (uint64_t)N);
    assert_int_equal(st.requests_finished + st.requests_aborted, (uint64_t)N);
    assert_true(st.preemptions > 0);
    assert_true(st.cached_tokens_total > 0);
    /* every request answered once; a sample of the finished ones equals areal_generate */
    for (int i = 0; i < N; i++) {
        et_slot *s = &c.slots[i];
        assert_int_equal(s->done_calls, 1);
        if (s->abort_at >= 0 || i % 10 != 0)
            continue;
        areal_sampling sp = {.temperature = 0, .top_p = 1, .max_new_tokens = s->max_new};
        areal_gen_out o;
        et_generate(&ref, s->ids, s->n_ids, &sp, &o);
        for (int k = 0; k < s->res->n; k++) {
            assert_int_equal(s->res->samples[k].n_output, o.n);
            for (int j = 0; j < o.n; j++)
                assert_int_equal(s->res->samples[k].output_ids[j], o.tokens[j]);
        }
        areal_gen_out_free(&o);
    }
    et_coll_free(&c);
    areal_engine_destroy(e);
    areal_model_free(&ref);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(block_states_lookup_and_eviction),
        cmocka_unit_test(eight_samples_share_the_prompt),
        cmocka_unit_test(soak_stays_within_budget),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
