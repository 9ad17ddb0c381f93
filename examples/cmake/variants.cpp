// Which compiled variant each call would launch: the library's dispatch, asked without a GPU
// (the pointers are only looked at for their alignment).
#include <cstdint>
#include <cstdio>

#include "examples.h"

int main()
{
    float *aligned = reinterpret_cast<float *>(uintptr_t{1} << 20);
    const int sizes[] = {1000, 1 << 20, (1 << 20) + 1};
    for (int n : sizes) {
        int index = examples_add_select(aligned, aligned, aligned, n);
        std::printf("add, n = %d: %s\n", n, examples_add_variant_name(index));
    }
    int index = examples_add_select(aligned + 1, aligned, aligned, 1 << 20);
    std::printf("add, unaligned x: %s\n", examples_add_variant_name(index));
    return index < 0;
}
