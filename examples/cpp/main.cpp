// Calls the aotk-built kernels from C++: cudaMalloc'd pointers and a cudaStream_t pass
// straight into the generated functions, no casts.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "examples.h"

static int check(int status, const char *what)
{
    if (status != 0) {
        std::fprintf(stderr, "%s failed with status %d: %s\n", what, status, examples_last_error());
        return 1;
    }
    return 0;
}

int main()
{
    const int n = 1000003;   // neither a multiple of 16 nor of the block
    std::vector<float> x(n + 1), y(n + 1), out(n + 1);
    for (int i = 0; i <= n; i++) {
        x[i] = 0.5f * i;
        y[i] = 2.0f - i;
    }
    float *dx, *dy, *dout;
    cudaMalloc(&dx, (n + 1) * sizeof(float));
    cudaMalloc(&dy, (n + 1) * sizeof(float));
    cudaMalloc(&dout, (n + 1) * sizeof(float));
    cudaMemcpy(dx, x.data(), (n + 1) * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(dy, y.data(), (n + 1) * sizeof(float), cudaMemcpyHostToDevice);
    cudaStream_t stream;
    cudaStreamCreate(&stream);

    int failures = 0;
    std::printf("aligned add runs %s\n", examples_add_variant_name(examples_add_select(dx, dy, dout, n)));
    failures += check(examples_add(stream, dx, dy, dout, n), "add");
    // Unaligned views (one float in) take the generic variant.
    std::printf("unaligned add runs %s\n",
                examples_add_variant_name(examples_add_select(dx + 1, dy + 1, dout + 1, n)));
    failures += check(examples_add(stream, dx + 1, dy + 1, dout + 1, n), "add (unaligned)");
    cudaStreamSynchronize(stream);
    cudaMemcpy(out.data(), dout, (n + 1) * sizeof(float), cudaMemcpyDeviceToHost);
    for (int i = 1; i <= n; i++) {
        if (std::fabs(out[i] - (x[i] + y[i])) > 1e-3f) {
            std::printf("mismatch at %d: %f\n", i, out[i]);
            failures++;
            break;
        }
    }
    failures += check(examples_copy(nullptr, dx, dout, n), "copy");
    cudaDeviceSynchronize();
    cudaMemcpy(out.data(), dout, n * sizeof(float), cudaMemcpyDeviceToHost);
    for (int i = 0; i < n; i++) {
        if (out[i] != x[i]) {
            std::printf("copy mismatch at %d\n", i);
            failures++;
            break;
        }
    }
    std::printf("%s\n", failures ? "FAILED" : "OK");
    cudaFree(dx);
    cudaFree(dy);
    cudaFree(dout);
    cudaStreamDestroy(stream);
    return failures != 0;
}
