/* aotk runtime: the part of every generated library that talks to the CUDA driver.
 *
 * In: variant descriptors (an embedded fatbin, its entry name) and launch requests from
 * the generated dispatch code. Out: launches through the driver, loaded with dlopen on
 * first use so the library links and loads on machines without CUDA; modules loaded
 * lazily, once per CUDA context, thread-safely; a thread-local message for every failure.
 * It never prints, exits or aborts. All symbols are hidden: each library has its own copy.
 */
#ifndef AOTK_RUNTIME_H
#define AOTK_RUNTIME_H

#include <stdint.h>

#define AOTK_MAX_CONTEXTS 16

/* aotk's own status codes; CUDA driver codes (all below 1000) pass through unchanged. */
#define AOTK_STATUS_NO_VARIANT 1001
#define AOTK_STATUS_NO_DRIVER 1002
#define AOTK_STATUS_BAD_ARGUMENT 1003
#define AOTK_STATUS_TOO_MANY_CONTEXTS 1004

typedef struct aotk_loaded {
    void *context;
    unsigned long long context_id;    /* cuCtxGetId: a destroyed context's handle may be
                                         reused by a new one, its id never is (0: no id) */
    void *function;
    unsigned shared;                  /* how the cubin loaded there launches: dynamic */
    unsigned threads;                 /* shared bytes, threads per CTA, CTAs per cluster */
    unsigned cluster;
} aotk_loaded;

typedef struct aotk_variant {
    const char *kernel;               /* manifest kernel name */
    const char *description;          /* what this build is specialized for */
    const char *entry;                /* PTX .entry symbol */
    const unsigned char *fatbin;
    unsigned threads;                 /* num_warps * 32 (and a producer warp's 32) */
    unsigned cluster;                 /* 2: programs 2i and 2i + 1 along x run as a cluster
                                         of two where the grid's x is even (num_ctas=2,
                                         sm_90 on); 1: alone */
    unsigned dynamic_shared;          /* bytes; > 48 KiB raises the function's limit */
    const unsigned *launch_by_arch;   /* where the cubins launch differently: {arch, dynamic
                                         shared bytes, threads, cluster} (90 for sm_90 and
                                         sm_90a), then {0, ...} for any other binary version
                                         (PTX compiled for a newer GPU); NULL: the three
                                         fields above for every GPU */
    aotk_loaded loaded[AOTK_MAX_CONTEXTS];
    int loaded_count;                 /* published with release/acquire ordering */
} aotk_variant;

/* A CUtensorMap: what cuTensorMapEncodeTiled fills, passed to TMA kernels by value. */
typedef struct aotk_tensor_map {
    _Alignas(64) unsigned char bytes[128];
} aotk_tensor_map;

__attribute__((visibility("hidden"))) int aotk_fail(int status, const char *format, ...)
    __attribute__((format(printf, 2, 3)));
__attribute__((visibility("hidden"))) const char *aotk_last_error(void);
__attribute__((visibility("hidden"))) int aotk_device_arch(void);
__attribute__((visibility("hidden"))) int64_t aotk_device_sms(int *bad);
/* How many kernel modules this copy of the runtime has loaded: one per variant and CUDA
 * context, on the variant's first launch in that context. */
__attribute__((visibility("hidden"))) int aotk_modules_loaded(void);
__attribute__((visibility("hidden"))) int aotk_launch(aotk_variant *variant, void *stream,
                                                      const int64_t grid[3], void **params);
/* Encodes the tensor map of a row-major tensor of `rank` dimensions (2 to 5) at base:
 * `shape` outermost first, `strides_bytes` those of all but the last dimension (whose
 * elements are adjacent), copied in boxes of [box_rows, box_columns] (1 in the leading
 * dimensions) with the 128-byte swizzle, zeros outside the tensor. A driver without tensor
 * maps (before CUDA 12) runs no TMA code: the map is zeroed and 0 returned. */
__attribute__((visibility("hidden"))) int aotk_encode_tensor_map(
    aotk_variant *variant, aotk_tensor_map *map, const char *name, int data_type,
    const void *base, int rank, const int64_t *shape, const int64_t *strides_bytes,
    unsigned box_rows, unsigned box_columns);

#endif
