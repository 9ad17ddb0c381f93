/* Host cost per launch: the aotk dispatch entry point vs raw cuLaunchKernel on the same
 * fatbin, same arguments, same stream. Prints microseconds per call for each.
 * Usage: launch_overhead FATBIN ENTRY CALLS */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "examples.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) { perror(path); exit(1); }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *data = malloc(size);
    if (fread(data, 1, size, f) != (size_t)size) exit(1);
    fclose(f);
    return data;
}

int main(int argc, char **argv)
{
    if (argc != 4) return 2;
    int calls = atoi(argv[3]);
    CUdevice device;
    CUcontext context;
    cuInit(0);
    cuDeviceGet(&device, 0);
    cuDevicePrimaryCtxRetain(&context, device);
    cuCtxSetCurrent(context);
    CUmodule module;
    CUfunction function;
    if (cuModuleLoadData(&module, read_file(argv[1])) || cuModuleGetFunction(&function, module, argv[2]))
        return 3;
    int n = 1 << 20;   /* 1024 programs; rounds of 500 calls stay under the launch queue depth */
    CUdeviceptr x, y, out;
    cuMemAlloc(&x, n * 4);
    cuMemAlloc(&y, n * 4);
    cuMemAlloc(&out, n * 4);
    void *params[] = {&x, &y, &out, &n};
    float *px = (float *)(uintptr_t)x, *py = (float *)(uintptr_t)y, *pout = (float *)(uintptr_t)out;
    double best_raw = 1e9, best_aotk = 1e9;
    for (int round = 0; round < 20; round++) {   /* rounds of few calls: the launch queue never fills */
        cuCtxSynchronize();
        double start = now();
        for (int i = 0; i < calls; i++)
            cuLaunchKernel(function, n / 1024, 1, 1, 128, 1, 1, 0, NULL, params, NULL);
        double raw = (now() - start) / calls;
        cuCtxSynchronize();
        start = now();
        for (int i = 0; i < calls; i++)
            if (examples_add(NULL, px, py, pout, n) != 0) return 4;
        double dispatched = (now() - start) / calls;
        cuCtxSynchronize();
        if (raw < best_raw) best_raw = raw;
        if (dispatched < best_aotk) best_aotk = dispatched;
    }
    printf("raw_us %.3f\naotk_us %.3f\nratio %.3f\n", best_raw * 1e6, best_aotk * 1e6, best_aotk / best_raw);
    return 0;
}
