/* A stand-in libcuda.so.1 for testing the generated runtime on a machine without a GPU:
 * the driver entry points the runtime resolves, answering as a driver would and logging
 * what the runtime asked for. Built and put first on LD_LIBRARY_PATH by
 * tests/test_runtime_fake_driver.py.
 *
 * FAKE_CUDA_BINARY_VERSION: what cuFuncGetAttribute(CU_FUNC_ATTRIBUTE_BINARY_VERSION) says
 *   (the arch of the cubin "the driver chose", e.g. 86), default 90.
 * FAKE_CUDA_LOG: a file each module load, attribute set, SM count query and launch appends
 *   a line to.
 * Launches log their grid's x, threads and shared bytes; cuLaunchKernelEx also its clusters.
 * FAKE_CUDA_SMS: the device's multiprocessor count (CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
 *   default 132; 0 makes that query fail.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

typedef int CUresult;

static __thread void *current_context;
static char contexts[4];
static char modules[64];
static char functions[64];
static int module_count;

static void note(const char *format, ...)
{
    const char *path = getenv("FAKE_CUDA_LOG");
    FILE *log = path ? fopen(path, "a") : NULL;
    if (!log)
        return;
    va_list args;
    va_start(args, format);
    vfprintf(log, format, args);
    va_end(args);
    fputc('\n', log);
    fclose(log);
}

CUresult cuInit(unsigned flags) { (void)flags; return 0; }
CUresult cuCtxGetCurrent(void **context) { *context = current_context; return 0; }
CUresult cuCtxSetCurrent(void *context) { current_context = context; return 0; }
CUresult cuDeviceGet(int *device, int ordinal) { *device = ordinal; return 0; }

CUresult cuCtxGetDevice(int *device)
{
    if (!current_context)
        return 201;   /* CUDA_ERROR_INVALID_CONTEXT */
    *device = (int)((char *)current_context - contexts);
    return 0;
}

CUresult cuDeviceGetAttribute(int *value, int attribute, int device)
{
    (void)device;
    const char *version = getenv("FAKE_CUDA_BINARY_VERSION");
    int arch = version ? atoi(version) : 90;
    const char *sms = getenv("FAKE_CUDA_SMS");
    switch (attribute) {
    case 16:   /* CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT */
        note("attribute multiprocessor_count");
        *value = sms ? atoi(sms) : 132;
        return *value > 0 ? 0 : 1;
    case 75:   /* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR */
        *value = arch / 10;
        return 0;
    case 76:   /* ... MINOR */
        *value = arch % 10;
        return 0;
    default:
        return 1;
    }
}

CUresult cuDevicePrimaryCtxRetain(void **context, int device)
{
    *context = &contexts[device & 3];
    return 0;
}

CUresult cuModuleLoadData(void **module, const void *image)
{
    (void)image;
    note("load module %d", module_count);
    *module = &modules[module_count++ & 63];
    return 0;
}

CUresult cuModuleGetFunction(void **function, void *module, const char *name)
{
    (void)name;
    *function = &functions[(char *)module - modules];
    return 0;
}

CUresult cuFuncGetAttribute(int *value, int attribute, void *function)
{
    (void)function;
    if (attribute != 6)   /* CU_FUNC_ATTRIBUTE_BINARY_VERSION */
        return 1;
    const char *version = getenv("FAKE_CUDA_BINARY_VERSION");
    *value = version ? atoi(version) : 90;
    return 0;
}

CUresult cuFuncSetAttribute(void *function, int attribute, int value)
{
    (void)function;
    note("set attribute %d to %d", attribute, value);
    return 0;
}

CUresult cuLaunchKernel(void *function, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned shared, void *stream, void **params,
                        void **extra)
{
    (void)function; (void)gy; (void)gz; (void)by; (void)bz; (void)stream; (void)params;
    (void)extra;
    note("launch %u blocks of %u threads with %u bytes of shared memory", gx, bx, shared);
    return 0;
}

/* cuda.h's CUlaunchAttribute and CUlaunchConfig: a launch in clusters (attribute 4). */
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
    void *stream;
    launch_attribute *attributes;
    unsigned attribute_count;
} launch_config;

CUresult cuLaunchKernelEx(const launch_config *config, void *function, void **params,
                          void **extra)
{
    (void)function; (void)params; (void)extra;
    unsigned cluster = 1;
    for (unsigned i = 0; i < config->attribute_count; i++)
        if (config->attributes[i].id == 4)
            cluster = config->attributes[i].value.cluster.x;
    note("launch %u blocks of %u threads with %u bytes of shared memory in clusters of %u",
         config->grid[0], config->block[0],
         config->shared, cluster);
    return 0;
}

CUresult cuGetErrorName(CUresult error, const char **name)
{
    (void)error;
    *name = "CUDA_ERROR_FAKE";
    return 0;
}

CUresult cuGetErrorString(CUresult error, const char **text)
{
    (void)error;
    *text = "fake driver";
    return 0;
}
