/* bench/hmac.c: kgate_bench_hmac: the HMAC-SHA256 implementations of wire's signer, side by side, interleaved. */
/* HMAC_CTX is deprecated in OpenSSL 3.0; it is measured here only as an alternative. */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sodium.h>
#include "wire/alloc.h"
#include "wire/signer.h"
#include "wire/text.h"
#include "stats.h"

#define DEFAULT_ROUNDS 36 /* a multiple of the 4 orders below */
#define MAX_SIZES 16
/* A timed batch repeats a small message until about this many bytes have been signed, so that
 * clock reads and the loop itself stay negligible; large messages are timed one at a time. */
#define BATCH_BYTES (1024 * 1024)

/* A jupyter key as kgate makes one (32 random hex characters). */
static const char key[] = "3f6c1a9e0b7d45c2a8e1f0d9b6c3a7e5";

typedef struct st_impl_t {
    const char *name;
    wire_signer_t signer; /* the implementations wire's signer offers */
    HMAC_CTX *hmac;       /* the deprecated low-level API, keyed once, copied per message */
    EVP_MAC_CTX *mac;     /* OpenSSL's HMAC as a MAC object, keyed once, copied per message (kgate's until 2026-11-24) */
    bench_samples_t samples;
} impl_t;

enum { IMPL_DIGESTS, IMPL_EVP_MAC, IMPL_HMAC_CTX, IMPL_SODIUM, IMPL_COUNT };

/* Round r runs the implementations in orders[r % 4], a balanced Latin square: every one goes in
 * every position, and right after each of the others, equally often. (Rotating one order let
 * whichever ran after libsodium's long runs look 5% slower on 1 MiB messages.) */
#define NUM_ORDERS 4
static const unsigned char orders[NUM_ORDERS][IMPL_COUNT] = {{0, 1, 3, 2}, {1, 2, 0, 3}, {2, 3, 1, 0}, {3, 0, 2, 1}};

static void impl_failed(const char *what)
{
    fprintf(stderr, "kgate_bench_hmac: %s failed\n", what);
    exit(1);
}

static void impl_digest(const impl_t *impl, const unsigned char *msg, size_t len, unsigned char out[32])
{
    if (impl->mac != NULL) {
        EVP_MAC_CTX *st = EVP_MAC_CTX_dup(impl->mac);
        size_t outlen = 0;
        if (st == NULL || !EVP_MAC_update(st, msg, len) || !EVP_MAC_final(st, out, &outlen, 32) || outlen != 32)
            impl_failed("EVP_MAC");
        EVP_MAC_CTX_free(st);
        return;
    }
    if (impl->hmac != NULL) {
        HMAC_CTX *st = HMAC_CTX_new();
        unsigned outlen = 0;
        if (st == NULL || !HMAC_CTX_copy(st, impl->hmac) || !HMAC_Update(st, msg, len) || !HMAC_Final(st, out, &outlen) ||
            outlen != 32)
            impl_failed("HMAC_CTX");
        HMAC_CTX_free(st);
        return;
    }
    wire_frame_t part = {(void *)msg, len};
    wire_signer_digest(&impl->signer, &part, 1, out);
}

/* Milliseconds of this thread's CPU time: on a machine shared with other work, time spent waiting
 * for a core is not the implementation's. */
static double cpu_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cpu_has_sha_ni(void)
{
    char line[8192];
    int found = 0;
    FILE *f = fopen("/proc/cpuinfo", "r");

    if (f == NULL)
        return -1;
    while (!found && fgets(line, sizeof(line), f) != NULL)
        found = strncmp(line, "flags", 5) == 0 && strstr(line, " sha_ni") != NULL;
    fclose(f);
    return found;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: kgate_bench_hmac [options]\n"
            "  --rounds N      timed rounds per message size (default %d); each round times every\n"
            "                  implementation once, in one of 4 orders in turn\n"
            "  --size BYTES    a message size to measure (repeatable; default 100, 4096, 1 MiB, 12 MiB)\n",
            DEFAULT_ROUNDS);
}

static void size_label(size_t size, char *text, size_t len)
{
    if (size >= 1024 * 1024 && size % (1024 * 1024) == 0)
        snprintf(text, len, "%zu MiB", size / (1024 * 1024));
    else if (size >= 1024 && size % 1024 == 0)
        snprintf(text, len, "%zu KiB", size / 1024);
    else
        snprintf(text, len, "%zu B", size);
}

/* Measures one message size; returns 0, or 1 if the implementations disagree on a digest. */
static int measure(impl_t *impls, size_t size, const unsigned char *data, unsigned rounds)
{
    size_t batch = size >= BATCH_BYTES ? 1 : BATCH_BYTES / size;
    unsigned char want[32], got[32];

    impl_digest(&impls[0], data, size, want);
    for (int i = 1; i != IMPL_COUNT; ++i) {
        impl_digest(&impls[i], data, size, got);
        if (memcmp(want, got, 32) != 0) {
            fprintf(stderr, "kgate_bench_hmac: %s and %s disagree on a %zu-byte message\n", impls[0].name, impls[i].name, size);
            return 1;
        }
    }
    double *paired[IMPL_COUNT];
    for (int i = 0; i != IMPL_COUNT; ++i)
        paired[i] = wire_calloc(rounds, sizeof(double));
    for (int i = 0; i != IMPL_COUNT; ++i) {
        bench_samples_init(&impls[i].samples, rounds);
        for (size_t b = 0; b != batch; ++b) /* warm-up: caches, allocator, CPU frequency */
            impl_digest(&impls[i], data, size, got);
    }
    for (unsigned r = 0; r != rounds; ++r) {
        double per_msg[IMPL_COUNT];
        for (int k = 0; k != IMPL_COUNT; ++k) {
            impl_t *impl = &impls[orders[r % NUM_ORDERS][k]];
            double t0 = cpu_now_ms();
            for (size_t b = 0; b != batch; ++b)
                impl_digest(impl, data, size, got);
            per_msg[impl - impls] = (cpu_now_ms() - t0) / (double)batch;
            bench_samples_add(&impl->samples, per_msg[impl - impls]);
        }
        for (int i = 0; i != IMPL_COUNT; ++i)
            paired[i][r] = per_msg[i] / per_msg[IMPL_DIGESTS];
    }

    bench_summary_t sum[IMPL_COUNT];
    char label[32];
    size_label(size, label, sizeof(label));
    for (int i = 0; i != IMPL_COUNT; ++i) {
        bench_summarize(&impls[i].samples, &sum[i]);
        printf("%-9s %-40s %10.3f  (%.3f-%.3f) %10.1f\n", i == 0 ? label : "", impls[i].name, sum[i].median * 1000,
               sum[i].min * 1000, sum[i].max * 1000, (double)size / (sum[i].median / 1000) / 1e6);
        bench_samples_dispose(&impls[i].samples);
    }
    printf("%-9s against kgate's (per-round median): EVP_MAC %.2fx, HMAC_CTX %.2fx, libsodium %.2fx\n", "",
           bench_median(paired[IMPL_EVP_MAC], rounds), bench_median(paired[IMPL_HMAC_CTX], rounds),
           bench_median(paired[IMPL_SODIUM], rounds));
    for (int i = 0; i != IMPL_COUNT; ++i)
        free(paired[i]);
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option options[] = {
        {"rounds", required_argument, NULL, 'r'}, {"size", required_argument, NULL, 's'}, {"help", no_argument, NULL, 'h'}, {0}};
    size_t sizes[MAX_SIZES] = {100, 4096, 1024 * 1024, 12 * 1024 * 1024}, nsizes = 0, max_size = 0;
    unsigned rounds = DEFAULT_ROUNDS;
    int opt, status = 0;

    wire_global_init();
    while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
        uint64_t v;
        switch (opt) {
        case 'r':
        case 's':
            if (wire_parse_decimal(optarg, opt == 'r' ? 100000 : 1u << 30, &v) != 0 || v == 0 ||
                (opt == 's' && nsizes == MAX_SIZES)) {
                fprintf(stderr, "kgate_bench_hmac: bad value for --%s: %s\n", opt == 'r' ? "rounds" : "size", optarg);
                return 2;
            }
            if (opt == 'r')
                rounds = (unsigned)v;
            else
                sizes[nsizes++] = (size_t)v;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind != argc) {
        usage(stderr);
        return 2;
    }
    if (nsizes == 0)
        nsizes = 4;
    for (size_t i = 0; i != nsizes; ++i)
        max_size = sizes[i] > max_size ? sizes[i] : max_size;

    unsigned char *data = wire_malloc(max_size);
    randombytes_buf(data, max_size);

    impl_t impls[IMPL_COUNT] = {
        [IMPL_DIGESTS] = {.name = "OpenSSL keyed SHA-256 pair (kgate)"},
        [IMPL_EVP_MAC] = {.name = "OpenSSL EVP_MAC_CTX_dup"},
        [IMPL_HMAC_CTX] = {.name = "OpenSSL HMAC_CTX_copy (deprecated API)"},
        [IMPL_SODIUM] = {.name = "libsodium crypto_auth_hmacsha256"},
    };
    wire_signer_init_impl(&impls[IMPL_DIGESTS].signer, WIRE_HMAC_OPENSSL, key, strlen(key));
    wire_signer_init_impl(&impls[IMPL_SODIUM].signer, WIRE_HMAC_SODIUM, key, strlen(key));
    impls[IMPL_HMAC_CTX].hmac = HMAC_CTX_new();
    if (impls[IMPL_HMAC_CTX].hmac == NULL || !HMAC_Init_ex(impls[IMPL_HMAC_CTX].hmac, key, (int)strlen(key), EVP_sha256(), NULL)) {
        fprintf(stderr, "kgate_bench_hmac: HMAC_Init_ex failed\n");
        return 1;
    }
    static char sha256[] = "SHA256";
    OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, sha256, 0), OSSL_PARAM_construct_end()};
    EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
    if (mac == NULL || (impls[IMPL_EVP_MAC].mac = EVP_MAC_CTX_new(mac)) == NULL ||
        !EVP_MAC_init(impls[IMPL_EVP_MAC].mac, (const unsigned char *)key, strlen(key), params))
        impl_failed("EVP_MAC_init");
    EVP_MAC_free(mac);

    int sha_ni = cpu_has_sha_ni();
    const char *sha_ni_text = sha_ni < 0 ? "unknown" : sha_ni ? "yes" : "no";
    printf("kgate_bench_hmac: HMAC-SHA256 of one message, pre-keyed state copied per message; %u interleaved rounds per size;\n"
           "times are this thread's CPU time per message\n",
           rounds);
    printf("%s; libsodium %s; CPU SHA extensions (sha_ni): %s\n\n", OpenSSL_version(OPENSSL_VERSION), sodium_version_string(),
           sha_ni_text);
    printf("%-9s %-40s %10s  %-19s %10s\n", "size", "implementation", "median us", "(min-max)", "MB/s");
    for (size_t i = 0; i != nsizes && status == 0; ++i)
        status = measure(impls, sizes[i], data, rounds);

    wire_signer_dispose(&impls[IMPL_DIGESTS].signer);
    EVP_MAC_CTX_free(impls[IMPL_EVP_MAC].mac);
    wire_signer_dispose(&impls[IMPL_SODIUM].signer);
    HMAC_CTX_free(impls[IMPL_HMAC_CTX].hmac);
    free(data);
    return status;
}
