/* tests/e2e/test_pool.c: the warm pool with real kernels: a context from it is ready far sooner than a cold start, works, and
 * pooled kernels are listed nowhere. Each test runs a private kgate. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "exec_helpers.h"
#include "support/api.h"
#include "support/base.h"
#include "support/events.h"
#include "support/gateway.h"
#include "support/http.h"

#define POOL_READY_MS 120000 /* two python kernels started one after the other, under ASan on a loaded 2-core machine */

static void fini(void)
{
    xh_gateways_stop_all();
}

TestSuite(pool, .fini = fini, .timeout = 400);

/* GET `path` as JSON (asserts 200); a new reference. */
static json_t *get_json(unsigned short port, const char *path)
{
    ts_response_t r;
    int st = ts_http_request(port, "GET", path, NULL, NULL, &r);
    json_t *out;

    cr_assert_eq(st, 200, "GET %s: HTTP %d (%s) %.400s", path, st, r.error, r.body);
    cr_assert_not_null(r.json, "GET %s: not JSON: %.400s", path, r.body);
    out = json_incref(r.json);
    ts_response_dispose(&r);
    return out;
}

/* The python3 pool's entry of GET /code/languages ({"size", "ready", "starting"}), or NULL; a new reference. */
static json_t *python_pool(unsigned short port)
{
    json_t *list = get_json(port, "/code/languages"), *entry, *pool = NULL;
    size_t i;

    json_array_foreach(list, i, entry)
    {
        if (strcmp(xh_str(entry, "kernel"), "python3") == 0)
            pool = json_incref(json_object_get(entry, "pool"));
    }
    json_decref(list);
    return pool;
}

static long long unix_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (long long)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

static void wait_pool_ready(unsigned short port, long long want)
{
    int64_t deadline = ts_now_ms() + POOL_READY_MS;
    long long ready = -1;

    while (ts_now_ms() < deadline) {
        json_t *pool = python_pool(port);
        cr_assert_not_null(pool, "GET /code/languages reports python3's pool");
        ready = xh_int(pool, "ready");
        json_decref(pool);
        if (ready == want)
            return;
        ts_sleep_ms(100);
    }
    cr_assert_fail("the pool had %lld of %lld kernels ready after %d ms", ready, want, POOL_READY_MS);
}

/* POST /code/context with `body`; asserts 200 and a ready context; returns its id (caller frees), its time in *ms. */
static char *create_timed(unsigned short port, const char *body, int64_t *ms)
{
    json_t *json = json_loads(body, 0, NULL);
    ts_response_t r;
    int64_t t0 = ts_now_ms();
    int st = ts_post_json(port, "/code/context", NULL, json, &r);
    char *id;

    *ms = ts_now_ms() - t0;
    json_decref(json);
    cr_assert_eq(st, 200, "POST /code/context %s: HTTP %d (%s) %.400s", body, st, r.error, r.body);
    cr_assert_str_eq(xh_str(r.json, "status"), "idle", "%s", r.body);
    id = strdup(xh_str(r.json, "id"));
    ts_response_dispose(&r);
    return id;
}

Test(pool, a_context_from_the_pool_is_ready_at_once_and_works)
{
    const char *args[] = {"--pool", "python3=2", NULL};
    ts_gateway_t gw;
    int64_t cold_ms, warm_ms;
    long long taken_at;
    char *cold, *warm, *warm2, path[128];
    ts_events_t evs;
    json_t *list, *ctx;
    size_t i;

    xh_gateway_start(&gw, args);
    wait_pool_ready(gw.port, 2);

    /* an env is something a pooled kernel lacks: a cold start, timed here as the reference */
    cold = create_timed(gw.port, "{\"language\": \"python\", \"env\": {\"KGATE_POOL_TEST\": \"cold\"}}", &cold_ms);
    taken_at = unix_ms();
    warm = create_timed(gw.port, "{\"language\": \"python\"}", &warm_ms);
    cr_log_info("context create: cold start %lld ms, from the pool %lld ms", (long long)cold_ms, (long long)warm_ms);
    cr_expect_lt(warm_ms * 4, cold_ms, "from the pool (%lld ms) in well under a cold start (%lld ms)", (long long)warm_ms,
                 (long long)cold_ms);

    /* it is a context like any other: it runs code, has a new id and is created now */
    xh_run_ok(gw.port, warm, "import os\nprint(os.environ.get('KGATE_POOL_TEST', 'none'), 6 * 7)", &evs);
    {
        char *text = ts_events_text(&evs, "stdout");
        cr_expect_str_eq(text, "none 42\n");
        free(text);
    }
    ts_events_dispose(&evs);
    xh_run_ok(gw.port, cold, "import os\nprint(os.environ['KGATE_POOL_TEST'])", &evs);
    {
        char *text = ts_events_text(&evs, "stdout");
        cr_expect_str_eq(text, "cold\n", "the cold-started context got its env");
        free(text);
    }
    ts_events_dispose(&evs);
    snprintf(path, sizeof(path), "/code/contexts/%s", warm);
    ctx = get_json(gw.port, path);
    cr_expect_geq(xh_int(ctx, "created_at"), taken_at, "created_at is when it was taken, not when its kernel started");
    cr_expect_eq(xh_int(ctx, "execution_count"), 1);
    json_decref(ctx);

    /* a second one from the pool while the first is being replaced */
    warm2 = create_timed(gw.port, "{\"language\": \"python\"}", &warm_ms);
    cr_expect_lt(warm_ms * 4, cold_ms, "the second from the pool (%lld ms) too", (long long)warm_ms);

    /* the pool's kernels are listed nowhere: contexts and Jupyter kernels are the three created */
    list = get_json(gw.port, "/code/contexts");
    cr_expect_eq(json_array_size(list), 3, "GET /code/contexts lists the contexts only: %s", json_dumps(list, JSON_COMPACT));
    json_array_foreach(list, i, ctx)
    {
        const char *id = xh_str(ctx, "id");
        cr_expect(strcmp(id, cold) == 0 || strcmp(id, warm) == 0 || strcmp(id, warm2) == 0, "unexpected context %s", id);
    }
    json_decref(list);
    list = get_json(gw.port, "/api/kernels");
    cr_expect_eq(json_array_size(list), 3, "GET /api/kernels neither");
    json_decref(list);

    /* and it refills: the two taken are replaced in the background */
    wait_pool_ready(gw.port, 2);
    free(cold);
    free(warm);
    free(warm2);
    xh_gateway_stop(&gw);
}

Test(pool, a_full_pool_never_makes_a_request_fail)
{
    const char *args[] = {"--pool", "python3=2", "--max-contexts", "2", NULL};
    const char *env_body = "{\"language\": \"python\", \"env\": {\"A\": \"1\"}}";
    ts_gateway_t gw;
    int64_t ms;
    char *a, *b;
    json_t *json = json_loads(env_body, 0, NULL), *pool;
    ts_response_t r;
    int st;

    xh_gateway_start(&gw, args);
    wait_pool_ready(gw.port, 2);
    /* the pool holds both places: each cold start gives one pooled kernel up */
    a = create_timed(gw.port, env_body, &ms);
    b = create_timed(gw.port, env_body, &ms);
    pool = python_pool(gw.port);
    cr_expect_eq(xh_int(pool, "ready") + xh_int(pool, "starting"), 0, "both pooled kernels made room");
    json_decref(pool);
    st = ts_post_json(gw.port, "/code/context", NULL, json, &r);
    cr_expect_eq(st, 429, "two contexts are the maximum: HTTP %d %.300s", st, r.body);
    ts_response_dispose(&r);
    json_decref(json);
    free(a);
    free(b);
    xh_gateway_stop(&gw);
}
