/* tests/fuzz/fuzz_json_in.c: wire_json_parse against jansson, and the stream and bundle scans (with wire_json_compact) against
 * wire_json_parse, on any bytes (the verdicts of tests/wire/json_agree.h, scan_agree.h and bundle_agree.h). */
#include "fuzz.h"
#include "wire/alloc.h"
#include "bundle_agree.h"
#include "json_agree.h"
#include "scan_agree.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    wire_global_init();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *why = json_agree((const char *)data, size);

    FUZZ_CHECK(why == NULL, "%s (%zu bytes)", why, size);
    why = scan_agree((const char *)data, size, NULL);
    FUZZ_CHECK(why == NULL, "%s (%zu bytes)", why, size);
    why = bundle_agree((const char *)data, size);
    FUZZ_CHECK(why == NULL, "%s (%zu bytes)", why, size);
    return 0;
}
