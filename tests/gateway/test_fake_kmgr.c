/* tests/gateway/test_fake_kmgr.c: the fake kernel manager stands in for the real one, and keeps its contract. */
#include <criterion/criterion.h>
#include "ksys/errors.h"
#include "engine_test.h"

TestSuite(fake_kmgr, .init = engine_setup, .fini = engine_teardown, .timeout = 20);

/* A weak reference never pulls an archive member in: each is NULL unless something linked its file anyway. */
extern __typeof__(kmgr_manager_create) kmgr_manager_create __attribute__((weak));
extern __typeof__(kmgr_kernel_pid) kmgr_kernel_pid __attribute__((weak));
extern __typeof__(kmgr_request_msg_id) kmgr_request_msg_id __attribute__((weak));

ENGINE_TEST(fake_kmgr, no_real_kernel_manager_is_linked)
{
    cr_expect(kmgr_manager_create == NULL, "kernelmgr's manager.c is linked: the tests would not be using the fake");
    cr_expect(kmgr_kernel_pid == NULL, "kernelmgr's kernel.c is linked");
    cr_expect(kmgr_request_msg_id == NULL, "kernelmgr's request.c is linked");
}

typedef struct st_heard_t {
    unsigned states, iopub, failed, done;
    int err;
} heard_t;

static void on_state(kmgr_kernel_t *kernel, void *data)
{
    (void)kernel;
    ++((heard_t *)data)->states;
}

static void on_request(kmgr_request_t *req, kmgr_req_event_t ev, const wire_msg_t *msg, int err, void *data)
{
    heard_t *heard = data;
    (void)req, (void)msg;

    heard->iopub += ev == KMGR_REQ_IOPUB;
    heard->done += ev == KMGR_REQ_DONE;
    if (ev == KMGR_REQ_FAILED) {
        ++heard->failed;
        heard->err = err;
    }
}

static kmgr_kernel_t *start(heard_t *heard)
{
    kmgr_kernel_options_t opts = {.spec = &eng.spec, .on_state = on_state, .data = heard};
    kmgr_kernel_t *kernel = NULL;

    cr_assert_eq(kmgr_kernel_start(eng.kmgr, &opts, &kernel), 0);
    cr_assert_eq(kmgr_kernel_state(kernel), KMGR_KERNEL_STARTING);
    return kernel;
}

ENGINE_TEST(fake_kmgr, a_restart_fails_requests_from_the_loop_never_inside_the_call)
{
    heard_t heard = {0};
    kmgr_kernel_t *kernel = start(&heard);
    kmgr_execute_options_t xopts = {0};
    kmgr_request_t *req;

    fake_kernel_set_state(kernel, KMGR_KERNEL_IDLE);
    cr_expect_eq(heard.states, 1);
    cr_assert_eq(kmgr_kernel_execute(kernel, "x", &xopts, on_request, &heard, &req), 0);
    cr_expect_eq(heard.iopub + heard.done + heard.failed, 0, "nothing is called back inside execute");
    fake_request_iopub(req, "status", json_pack("{s:s}", "execution_state", "busy"));
    cr_expect_eq(heard.iopub, 1);
    cr_assert_eq(kmgr_kernel_restart(kernel), 0);
    cr_expect_eq(heard.failed, 0, "nothing inside restart either");
    cr_expect_eq(kmgr_kernel_state(kernel), KMGR_KERNEL_RESTARTING);
    engine_run_for(5, 0);
    cr_expect_eq(heard.failed, 1);
    cr_expect_eq(heard.err, KSYS_ESHUTDOWN);
    cr_expect_eq(heard.states, 2, "RESTARTING is announced after the failures");
    kmgr_kernel_destroy(kernel);
}

ENGINE_TEST(fake_kmgr, a_destroyed_kernel_says_nothing_more_and_calls_on_it_are_misuse)
{
    heard_t heard = {0};
    kmgr_kernel_t *kernel = start(&heard);
    kmgr_execute_options_t xopts = {0};
    kmgr_request_t *req;
    const char *what;

    cr_assert_eq(kmgr_kernel_execute(kernel, "x", &xopts, on_request, &heard, &req), 0);
    kmgr_kernel_destroy(kernel);
    fake_request_iopub(req, "status", json_pack("{s:s}", "execution_state", "busy"));
    fake_request_done(req);
    fake_kernel_set_state(kernel, KMGR_KERNEL_IDLE);
    cr_expect_eq(heard.iopub + heard.done + heard.states, 0);
    cr_expect_eq(fake_kmgr_misuse(eng.kmgr, &what), 0);
    kmgr_kernel_interrupt(kernel);
    cr_expect_eq(fake_kmgr_misuse(eng.kmgr, &what), 1, "the teardown would report it");
    cr_expect_str_eq(what, "kmgr_kernel_interrupt on a destroyed kernel");
    /* the fixture's teardown fails a test that misused the manager: this one did on purpose */
    fake_kmgr_destroy(eng.kmgr);
    eng.kmgr = fake_kmgr_create(eng.loop);
    eng.contexts.kmgr = eng.kmgr;
}
