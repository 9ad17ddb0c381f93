/* See aotk_runtime.h. The driver API is declared here by hand (no cuda.h needed to build
 * a library): the few entry points used, with the types the driver ABI fixes. */
#define _GNU_SOURCE
#include "aotk_runtime.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef void *CUmodule;
typedef void *CUfunction;
typedef void *CUstream;

#define CU_FUNC_ATTRIBUTE_BINARY_VERSION 6
#define CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES 8
#define CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION 4

/* cuda.h's CUlaunchAttribute and CUlaunchConfig (CUDA 12.0 on), for cuLaunchKernelEx. */
typedef struct {
    int id;
    char pad[4];
    union {
        char bytes[64];
        struct { unsigned x, y, z; } cluster;
    } value;
} launch_attribute;
typedef struct {
    unsigned grid[3], block[3], shared;
    CUstream stream;
    launch_attribute *attributes;
    unsigned attribute_count;
} launch_config;
_Static_assert(sizeof(launch_attribute) == 72 && sizeof(launch_config) == 56,
               "cuda.h's CUlaunchAttribute and CUlaunchConfig layouts (64-bit)");

static struct {
    CUresult (*init)(unsigned);
    CUresult (*ctx_get_current)(CUcontext *);
    CUresult (*ctx_set_current)(CUcontext);
    CUresult (*device_get)(CUdevice *, int);
    CUresult (*primary_ctx_retain)(CUcontext *, CUdevice);
    CUresult (*module_load_data)(CUmodule *, const void *);
    CUresult (*module_get_function)(CUfunction *, CUmodule, const char *);
    CUresult (*func_set_attribute)(CUfunction, int, int);
    CUresult (*func_get_attribute)(int *, int, CUfunction);
    CUresult (*launch_kernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, unsigned, CUstream, void **, void **);
    CUresult (*launch_kernel_ex)(const launch_config *, CUfunction, void **,
                                 void **);                     /* CUDA 12.0+, else NULL */
    CUresult (*get_error_name)(CUresult, const char **);
    CUresult (*get_error_string)(CUresult, const char **);
    CUresult (*ctx_get_id)(CUcontext, unsigned long long *);   /* CUDA 12.0+, else NULL */
    CUresult (*ctx_get_device)(CUdevice *);                      /* NULL if missing */
    CUresult (*device_get_attribute)(int *, int, CUdevice);      /* NULL if missing */
    CUresult (*tensor_map_encode_tiled)(void *, int, unsigned, void *, const uint64_t *,
                                        const uint64_t *, const unsigned *, const unsigned *,
                                        int, int, int, int);   /* CUDA 12.0+, else NULL */
    int status;            /* 0 once loaded; else the failure's status */
    char message[256];
} driver;

static pthread_once_t driver_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread char last_error[512];
static int modules_loaded;   /* cuModuleLoadData successes, all variants and contexts */

int aotk_fail(int status, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vsnprintf(last_error, sizeof last_error, format, args);
    va_end(args);
    return status;
}

const char *aotk_last_error(void)
{
    return last_error;
}

static void load_driver(void)
{
    void *library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!library) {
        driver.status = AOTK_STATUS_NO_DRIVER;
        snprintf(driver.message, sizeof driver.message,
                 "no CUDA driver: libcuda.so.1 cannot be loaded");
        return;
    }
    struct { void **slot; const char *name; } symbols[] = {
        {(void **)&driver.init, "cuInit"},
        {(void **)&driver.ctx_get_current, "cuCtxGetCurrent"},
        {(void **)&driver.ctx_set_current, "cuCtxSetCurrent"},
        {(void **)&driver.device_get, "cuDeviceGet"},
        {(void **)&driver.primary_ctx_retain, "cuDevicePrimaryCtxRetain"},
        {(void **)&driver.module_load_data, "cuModuleLoadData"},
        {(void **)&driver.module_get_function, "cuModuleGetFunction"},
        {(void **)&driver.func_set_attribute, "cuFuncSetAttribute"},
        {(void **)&driver.func_get_attribute, "cuFuncGetAttribute"},
        {(void **)&driver.launch_kernel, "cuLaunchKernel"},
        {(void **)&driver.get_error_name, "cuGetErrorName"},
        {(void **)&driver.get_error_string, "cuGetErrorString"},
    };
    for (size_t i = 0; i < sizeof symbols / sizeof symbols[0]; i++) {
        *symbols[i].slot = dlsym(library, symbols[i].name);
        if (!*symbols[i].slot) {
            driver.status = AOTK_STATUS_NO_DRIVER;
            snprintf(driver.message, sizeof driver.message,
                     "the CUDA driver lacks %s", symbols[i].name);
            return;
        }
    }
    driver.ctx_get_id = (CUresult (*)(CUcontext, unsigned long long *))dlsym(library, "cuCtxGetId");
    *(void **)&driver.tensor_map_encode_tiled = dlsym(library, "cuTensorMapEncodeTiled");
    *(void **)&driver.launch_kernel_ex = dlsym(library, "cuLaunchKernelEx");
    *(void **)&driver.ctx_get_device = dlsym(library, "cuCtxGetDevice");
    *(void **)&driver.device_get_attribute = dlsym(library, "cuDeviceGetAttribute");
    CUresult result = driver.init(0);
    if (result != 0) {
        driver.status = result;
        snprintf(driver.message, sizeof driver.message, "cuInit failed (CUDA error %d)", result);
    }
}

static int driver_error(CUresult result, const aotk_variant *variant, const char *what)
{
    const char *name = "unknown", *text = "";
    if (driver.get_error_name)
        driver.get_error_name(result, &name);
    if (driver.get_error_string)
        driver.get_error_string(result, &text);
    return aotk_fail(result, "%s (%s): %s failed: %s: %s", variant->kernel,
                     variant->description, what, name ? name : "?", text ? text : "");
}

/* The slot of ``context`` in the variant's loaded list, or -1. A slot whose context id
 * differs belongs to a destroyed context whose handle was reused: ``*stale`` says so. */
static int find_loaded(aotk_variant *variant, int count, CUcontext context,
                       unsigned long long context_id, int *stale)
{
    for (int i = 0; i < count; i++) {
        if (variant->loaded[i].context != context)
            continue;
        if (__atomic_load_n(&variant->loaded[i].context_id, __ATOMIC_ACQUIRE) == context_id)
            return i;
        *stale = i;
    }
    return -1;
}

/* How the loaded cubin of ``function`` launches (``slot``'s shared, threads, cluster): the
 * driver picked one of the fatbin's cubins (or compiled its PTX) for this GPU, and says
 * which by its binary version. Without cuLaunchKernelEx (before CUDA 12) every launch is
 * alone: programs built in pairs then share nothing (``passes.multicast``). */
static void launch_for(const aotk_variant *variant, CUfunction function, aotk_loaded *slot)
{
    int version = 0;
    slot->shared = variant->dynamic_shared;
    slot->threads = variant->threads;
    slot->cluster = variant->cluster;
    if (variant->launch_by_arch &&
        driver.func_get_attribute(&version, CU_FUNC_ATTRIBUTE_BINARY_VERSION, function) == 0) {
        const unsigned *entry = variant->launch_by_arch;
        while (entry[0] != 0 && entry[0] != (unsigned)version)
            entry += 4;
        /* the matching cubin's, else the most shared memory any needs */
        slot->shared = entry[1];
        slot->threads = entry[2];
        slot->cluster = entry[3];
    }
    if (!driver.launch_kernel_ex)
        slot->cluster = 1;
}

/* The variant's function in the current context, loading its module on first use;
 * *launch: how to launch it there (``launch_for``). */
static int function_for_context(aotk_variant *variant, CUcontext context, CUfunction *function,
                                aotk_loaded *launch)
{
    unsigned long long context_id = 0;
    if (driver.ctx_get_id && driver.ctx_get_id(context, &context_id) != 0)
        context_id = 0;
    int stale = -1;
    int count = __atomic_load_n(&variant->loaded_count, __ATOMIC_ACQUIRE);
    int slot = find_loaded(variant, count, context, context_id, &stale);
    if (slot >= 0) {
        *function = variant->loaded[slot].function;
        *launch = variant->loaded[slot];
        return 0;
    }
    pthread_mutex_lock(&load_lock);
    int status = 0;
    stale = -1;
    count = variant->loaded_count;
    slot = find_loaded(variant, count, context, context_id, &stale);
    if (slot >= 0) {
        *function = variant->loaded[slot].function;
        *launch = variant->loaded[slot];
        goto done;
    }
    if (stale < 0 && count == AOTK_MAX_CONTEXTS) {
        status = aotk_fail(AOTK_STATUS_TOO_MANY_CONTEXTS, "%s (%s): more than %d CUDA contexts",
                           variant->kernel, variant->description, AOTK_MAX_CONTEXTS);
        goto done;
    }
    CUmodule module;
    CUresult result = driver.module_load_data(&module, variant->fatbin);
    if (result != 0) {
        status = driver_error(result, variant, "loading the module");
        goto done;
    }
    result = driver.module_get_function(function, module, variant->entry);
    if (result != 0) {
        status = driver_error(result, variant, "finding the kernel");
        goto done;
    }
    launch_for(variant, *function, launch);
    if (launch->shared > 48 * 1024) {
        result = driver.func_set_attribute(*function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                           (int)launch->shared);
        if (result != 0) {
            status = driver_error(result, variant, "raising the shared-memory limit");
            goto done;
        }
    }
    /* A stale slot is reused in place: its function first, then (release) the id that
     * makes readers take it. */
    slot = stale >= 0 ? stale : count;
    __atomic_add_fetch(&modules_loaded, 1, __ATOMIC_RELAXED);
    variant->loaded[slot].function = *function;
    variant->loaded[slot].shared = launch->shared;
    variant->loaded[slot].threads = launch->threads;
    variant->loaded[slot].cluster = launch->cluster;
    variant->loaded[slot].context = context;
    __atomic_store_n(&variant->loaded[slot].context_id, context_id, __ATOMIC_RELEASE);
    if (stale < 0)
        __atomic_store_n(&variant->loaded_count, count + 1, __ATOMIC_RELEASE);
done:
    pthread_mutex_unlock(&load_lock);
    return status;
}

int aotk_modules_loaded(void)
{
    return __atomic_load_n(&modules_loaded, __ATOMIC_RELAXED);
}

int aotk_launch(aotk_variant *variant, void *stream, const int64_t grid[3], void **params)
{
    if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0)
        return 0;   /* an empty grid: nothing to do, successfully */
    if (grid[0] < 0 || grid[1] < 0 || grid[2] < 0 || grid[0] > 2147483647LL ||
        grid[1] > 65535 || grid[2] > 65535)
        return aotk_fail(AOTK_STATUS_BAD_ARGUMENT, "%s (%s): grid (%lld, %lld, %lld) is out of range",
                         variant->kernel, variant->description, (long long)grid[0],
                         (long long)grid[1], (long long)grid[2]);
    pthread_once(&driver_once, load_driver);
    if (driver.status != 0)
        return aotk_fail(driver.status, "%s: %s", variant->kernel, driver.message);
    CUcontext context = NULL;
    CUresult result = driver.ctx_get_current(&context);
    if (result != 0)
        return driver_error(result, variant, "cuCtxGetCurrent");
    if (!context) {
        /* No context yet: use the primary context of device 0, as the CUDA runtime would. */
        CUdevice device;
        result = driver.device_get(&device, 0);
        if (result == 0)
            result = driver.primary_ctx_retain(&context, device);
        if (result == 0)
            result = driver.ctx_set_current(context);
        if (result != 0)
            return driver_error(result, variant, "setting up a CUDA context");
    }
    CUfunction function;
    aotk_loaded launch;
    int status = function_for_context(variant, context, &function, &launch);
    if (status != 0)
        return status;
    if (launch.cluster > 1 && grid[0] % launch.cluster == 0) {
        /* Programs 2i and 2i + 1 as one cluster; an odd grid's run alone. */
        launch_attribute pairs = {.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION};
        pairs.value.cluster.x = launch.cluster;
        pairs.value.cluster.y = pairs.value.cluster.z = 1;
        launch_config config = {{(unsigned)grid[0], (unsigned)grid[1], (unsigned)grid[2]},
                                {launch.threads, 1, 1}, launch.shared, stream, &pairs, 1};
        result = driver.launch_kernel_ex(&config, function, params, NULL);
        if (result != 0)
            return driver_error(result, variant, "cuLaunchKernelEx");
        return 0;
    }
    result = driver.launch_kernel(function, (unsigned)grid[0], (unsigned)grid[1], (unsigned)grid[2],
                                  launch.threads, 1, 1, launch.shared, stream, params, NULL);
    if (result != 0)
        return driver_error(result, variant, "cuLaunchKernel");
    return 0;
}

/* The device a launch from this thread would use: the current context's, else device 0
 * (where aotk_launch would create its context). 0 on success. */
static int launch_device(CUdevice *device)
{
    pthread_once(&driver_once, load_driver);
    if (driver.status != 0 || !driver.ctx_get_device || !driver.device_get_attribute)
        return -1;
    CUcontext context = NULL;
    if (driver.ctx_get_current(&context) != 0)
        return -1;
    return context ? driver.ctx_get_device(device) : driver.device_get(device, 0);
}

int aotk_device_arch(void)
{
    /* The compute capability (90 for sm_90) of the launch device; 0 without a driver or
     * device. A tuned dispatch uses it to take the choices measured on that arch. */
    enum { COMPUTE_CAPABILITY_MAJOR = 75, COMPUTE_CAPABILITY_MINOR = 76 };
    CUdevice device;
    if (launch_device(&device) != 0)
        return 0;
    int major = 0, minor = 0;
    if (driver.device_get_attribute(&major, COMPUTE_CAPABILITY_MAJOR, device) != 0 ||
        driver.device_get_attribute(&minor, COMPUTE_CAPABILITY_MINOR, device) != 0)
        return 0;
    return 10 * major + minor;
}

int64_t aotk_device_sms(int *bad)
{
    /* The launch device's number of SMs (`num_sms` in a grid or `when`, for persistent
     * kernels). Without a driver or device: 1, with *bad set, so that the caller reports
     * the failure instead of launching a grid it did not mean. */
    enum { MULTIPROCESSOR_COUNT = 16 };
    CUdevice device;
    int count = 0;
    if (launch_device(&device) != 0 ||
        driver.device_get_attribute(&count, MULTIPROCESSOR_COUNT, device) != 0 || count < 1) {
        *bad = 1;
        return 1;
    }
    return count;
}

/* CUtensorMapSwizzle / CUtensorMapL2promotion / CUtensorMapFloatOOBfill values. L2
 * promotion by 128 bytes, as Triton's launcher sets it: with rows 16- but not 128-byte
 * aligned (a row stride of 3000 halves), every 128-byte box row touches two lines, and
 * promoting to 256 bytes made the L2 fetch more of them; an H200 took 104 us for a 2816x3000x3000
 * fp16 matmul through TMA with 256-byte promotion, 92 with 128 (74 with both at aligned rows;
 * bench/results/2026-11-28_nvidia-h200_matmul-3000-b-rows.md). */
#define CU_TENSOR_MAP_SWIZZLE_128B 3
#define CU_TENSOR_MAP_L2_PROMOTION_L2_128B 2
#define CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE 0

int aotk_encode_tensor_map(aotk_variant *variant, aotk_tensor_map *map, const char *name,
                           int data_type, const void *base, int rank, const int64_t *shape,
                           const int64_t *strides_bytes, unsigned box_rows,
                           unsigned box_columns)
{
    pthread_once(&driver_once, load_driver);
    if (driver.status != 0)
        return aotk_fail(driver.status, "%s: %s", variant->kernel, driver.message);
    memset(map, 0, sizeof *map);
    if (!driver.tensor_map_encode_tiled)
        return 0;
    /* The driver takes each list innermost dimension first; the innermost stride is the
     * element itself and not passed. */
    uint64_t dims[5], strides[4];
    unsigned box[5], element_strides[5];
    for (int i = 0; i < rank; i++) {
        dims[i] = (uint64_t)shape[rank - 1 - i];
        box[i] = i == 0 ? box_columns : i == 1 ? box_rows : 1;
        element_strides[i] = 1;
        if (i < rank - 1)
            strides[i] = (uint64_t)strides_bytes[rank - 2 - i];
    }
    CUresult result = driver.tensor_map_encode_tiled(
        map, data_type, (unsigned)rank, (void *)base, dims, strides, box, element_strides, 0,
        CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (result != 0) {
        char what[200];
        int used = snprintf(what, sizeof what, "cuTensorMapEncodeTiled for %s (shape [", name);
        for (int i = 0; i < rank && used < (int)sizeof what; i++)
            used += snprintf(what + used, sizeof what - used, "%s%lld", i ? ", " : "",
                             (long long)shape[i]);
        for (int i = 0; i < rank - 1 && used < (int)sizeof what; i++)
            used += snprintf(what + used, sizeof what - used, "%s%lld", i ? ", " : "], strides [",
                             (long long)strides_bytes[i]);
        if (used < (int)sizeof what)
            snprintf(what + used, sizeof what - used, "] bytes)");
        return driver_error(result, variant, what);
    }
    return 0;
}
