// One aotk library driven from several GPUs at once: what tests/test_several_gpus.py runs.
//
// Usage: several_gpus <path to libexamples.so> <launches per kernel>
// The library (built from the root aotk.toml) is opened with dlopen, so that it can be
// closed and opened again while the program runs. Three phases, on every GPU there is:
//   1. one thread per GPU (cudaSetDevice, its own stream) launches every kernel of the
//      library <launches> times, all threads at once;
//   2. one thread switches the current device between launches (default streams);
//   3. the library is closed and opened again while the other threads wait, idle; then
//      every thread launches everything once more through the new copy.
// After each phase every output is compared with a reference computed on the host from
// that GPU's own inputs (each GPU gets different inputs, so a launch that ran on another
// GPU's data gives wrong numbers), and the library's count of loaded modules must be
// exactly (GPUs x variants used): each variant loaded once per device, never more.
// Prints one line per phase and "OK" last; exits 1 on the first failure, 77 with fewer
// than two GPUs.
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "examples.h"

namespace {

// The library's entry points, looked up in one dlopen'ed copy.
struct Api {
    void *handle = nullptr;
    decltype(&examples_add) add;
    decltype(&examples_add_select) add_select;
    decltype(&examples_copy) copy;
    decltype(&examples_copy_select) copy_select;
    decltype(&examples_copy2d) copy2d;
    decltype(&examples_copy2d_select) copy2d_select;
    decltype(&examples_softmax) softmax;
    decltype(&examples_softmax_select) softmax_select;
    decltype(&examples_layer_norm) layer_norm;
    decltype(&examples_layer_norm_select) layer_norm_select;
    decltype(&examples_row_argmax) row_argmax;
    decltype(&examples_row_argmax_select) row_argmax_select;
    decltype(&examples_transpose) transpose;
    decltype(&examples_transpose_select) transpose_select;
    decltype(&examples_matmul) matmul;
    decltype(&examples_matmul_select) matmul_select;
    decltype(&examples_matmul_leaky_relu) matmul_leaky_relu;
    decltype(&examples_matmul_leaky_relu_select) matmul_leaky_relu_select;
    decltype(&examples_matmul_descriptor) matmul_descriptor;
    decltype(&examples_matmul_descriptor_select) matmul_descriptor_select;
    decltype(&examples_batched_matmul) batched_matmul;
    decltype(&examples_batched_matmul_select) batched_matmul_select;
    decltype(&examples_last_error) last_error;
    decltype(&examples_modules_loaded) modules_loaded;
};

template <class F>
bool find(void *handle, const char *name, F &slot)
{
    slot = reinterpret_cast<F>(dlsym(handle, name));
    if (!slot)
        std::printf("FAIL: %s is missing from the library\n", name);
    return slot != nullptr;
}

bool open_library(const char *path, Api &api)
{
    api.handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!api.handle) {
        std::printf("FAIL: dlopen: %s\n", dlerror());
        return false;
    }
#define FIND(name) find(api.handle, "examples_" #name, api.name)
    return FIND(add) && FIND(add_select) && FIND(copy) && FIND(copy_select) && FIND(copy2d) &&
           FIND(copy2d_select) && FIND(softmax) && FIND(softmax_select) && FIND(layer_norm) &&
           FIND(layer_norm_select) && FIND(row_argmax) && FIND(row_argmax_select) &&
           FIND(transpose) && FIND(transpose_select) && FIND(matmul) && FIND(matmul_select) &&
           FIND(matmul_leaky_relu) && FIND(matmul_leaky_relu_select) &&
           FIND(matmul_descriptor) && FIND(matmul_descriptor_select) && FIND(batched_matmul) &&
           FIND(batched_matmul_select) && FIND(last_error) && FIND(modules_loaded);
#undef FIND
}

// Deterministic inputs, different for every GPU and every buffer.
struct Random {
    uint64_t state;
    explicit Random(uint64_t seed) : state(seed * 0x9E3779B97F4A7C15ull + 1) {}
    uint32_t next()
    {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        return static_cast<uint32_t>(state >> 33);
    }
    float uniform(float low, float high) { return low + (high - low) * (next() / 2147483648.0f); }
    // Multiples of 1/2 in [-1, 1]: fp16 products and fp32 sums of 64 of them are exact.
    float half_step() { return 0.5f * static_cast<float>(static_cast<int>(next() % 5) - 2); }
};

template <class T>
T *upload(const std::vector<T> &host)
{
    T *device = nullptr;
    cudaMalloc(&device, host.size() * sizeof(T));
    cudaMemcpy(device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
    return device;
}

template <class T>
std::vector<T> download(const T *device, size_t count)
{
    std::vector<T> host(count);
    cudaMemcpy(host.data(), device, count * sizeof(T), cudaMemcpyDeviceToHost);
    return host;
}

std::vector<__half> to_half(const std::vector<float> &values)
{
    std::vector<__half> out(values.size());
    for (size_t i = 0; i < values.size(); i++)
        out[i] = __float2half(values[i]);
    return out;
}

// "" when every value is within tolerance of the reference, else the first that is not.
std::string compare(const char *what, const std::vector<float> &got,
                    const std::vector<float> &want, float tolerance)
{
    for (size_t i = 0; i < want.size(); i++) {
        if (!(std::fabs(got[i] - want[i]) <= tolerance * (1.0f + std::fabs(want[i])))) {
            char message[200];
            std::snprintf(message, sizeof message, "%s[%zu] = %g, expected %g", what, i,
                          got[i], want[i]);
            return message;
        }
    }
    return "";
}

std::vector<float> from_half(const std::vector<__half> &values)
{
    std::vector<float> out(values.size());
    for (size_t i = 0; i < values.size(); i++)
        out[i] = __half2float(values[i]);
    return out;
}

// A kernel call with its inputs on one GPU, its host reference and its output buffers.
struct Case {
    std::string kernel;
    std::function<int(const Api &)> select;
    std::function<int(const Api &, cudaStream_t)> launch;
    std::function<std::string()> check;
    std::vector<std::pair<void *, size_t>> outputs;   // poisoned before every phase
};

// C[m][n] = sum_k A[m][k] * B[k][n], A [M, K] and B [K, N] row-major.
std::vector<float> host_matmul(const std::vector<float> &a, const std::vector<float> &b, int m,
                               int n, int k)
{
    std::vector<float> c(static_cast<size_t>(m) * n, 0.0f);
    for (int i = 0; i < m; i++)
        for (int p = 0; p < k; p++) {
            float left = a[static_cast<size_t>(i) * k + p];
            for (int j = 0; j < n; j++)
                c[static_cast<size_t>(i) * n + j] += left * b[static_cast<size_t>(p) * n + j];
        }
    return c;
}

// Every kernel of the example library, with inputs made on (and for) GPU `device`.
std::vector<Case> make_cases(int device)
{
    cudaSetDevice(device);
    Random random(1000 + device);
    std::vector<Case> cases;
    auto floats = [&](size_t count, float low, float high) {
        std::vector<float> values(count);
        for (float &v : values)
            v = random.uniform(low, high);
        return values;
    };

    {   // add, copy: 100,003 floats (not a multiple of any block)
        const int n = 100003;
        auto x = floats(n, -2, 2), y = floats(n, -2, 2);
        float *dx = upload(x), *dy = upload(y), *dout = upload(std::vector<float>(n));
        std::vector<float> sum(n);
        for (int i = 0; i < n; i++)
            sum[i] = x[i] + y[i];
        cases.push_back({"add", [=](const Api &api) { return api.add_select(dx, dy, dout, n); },
                         [=](const Api &api, cudaStream_t s) { return api.add(s, dx, dy, dout, n); },
                         [=] { return compare("add", download(dout, n), sum, 0); },
                         {{dout, n * sizeof(float)}}});
        float *dcopy = upload(std::vector<float>(n));
        cases.push_back({"copy", [=](const Api &api) { return api.copy_select(dx, dcopy, n); },
                         [=](const Api &api, cudaStream_t s) { return api.copy(s, dx, dcopy, n); },
                         [=] { return compare("copy", download(dcopy, n), x, 0); },
                         {{dcopy, n * sizeof(float)}}});
    }
    {   // copy2d: [100, 300] into rows of 320 (the padding stays as poisoned)
        const int m = 100, n = 300, stride = 320;
        auto src = floats(static_cast<size_t>(m) * n, -5, 5);
        float *dsrc = upload(src), *ddst = upload(std::vector<float>(m * stride));
        cases.push_back({"copy2d",
                         [=](const Api &api) { return api.copy2d_select(dsrc, ddst, m, n, n, stride); },
                         [=](const Api &api, cudaStream_t s) { return api.copy2d(s, dsrc, ddst, m, n, n, stride); },
                         [=] {
                             auto got = download(ddst, m * stride);
                             std::vector<float> rows(static_cast<size_t>(m) * n);
                             for (int i = 0; i < m; i++)
                                 std::memcpy(&rows[i * n], &got[i * stride], n * sizeof(float));
                             return compare("copy2d", rows, src, 0);
                         },
                         {{ddst, m * stride * sizeof(float)}}});
    }
    {   // softmax: [64, 1000]
        const int rows = 64, cols = 1000;
        auto x = floats(rows * cols, -8, 8);
        float *dx = upload(x), *dout = upload(std::vector<float>(rows * cols));
        std::vector<float> want(rows * cols);
        for (int r = 0; r < rows; r++) {
            double top = -INFINITY, total = 0;
            for (int c = 0; c < cols; c++)
                top = std::fmax(top, x[r * cols + c]);
            for (int c = 0; c < cols; c++)
                total += std::exp(x[r * cols + c] - top);
            for (int c = 0; c < cols; c++)
                want[r * cols + c] = static_cast<float>(std::exp(x[r * cols + c] - top) / total);
        }
        cases.push_back({"softmax",
                         [=](const Api &api) { return api.softmax_select(dout, dx, cols, cols, rows, cols); },
                         [=](const Api &api, cudaStream_t s) { return api.softmax(s, dout, dx, cols, cols, rows, cols); },
                         [=] { return compare("softmax", download(dout, rows * cols), want, 1e-5f); },
                         {{dout, rows * cols * sizeof(float)}}});
    }
    {   // layer_norm: [32, 1000] fp16, fp32 statistics
        const int m = 32, n = 1000;
        const float eps = 1e-5f;
        auto x = from_half(to_half(floats(m * n, -3, 4)));
        auto w = from_half(to_half(floats(n, 0, 1))), b = from_half(to_half(floats(n, -1, 1)));
        __half *dx = upload(to_half(x)), *dw = upload(to_half(w)), *db = upload(to_half(b));
        __half *dy = upload(std::vector<__half>(m * n));
        float *dmean = upload(std::vector<float>(m)), *drstd = upload(std::vector<float>(m));
        std::vector<float> want_y(m * n), want_mean(m), want_rstd(m);
        for (int r = 0; r < m; r++) {
            double mean = 0, var = 0;
            for (int c = 0; c < n; c++)
                mean += x[r * n + c];
            mean /= n;
            for (int c = 0; c < n; c++)
                var += (x[r * n + c] - mean) * (x[r * n + c] - mean);
            double rstd = 1.0 / std::sqrt(var / n + eps);
            want_mean[r] = static_cast<float>(mean);
            want_rstd[r] = static_cast<float>(rstd);
            for (int c = 0; c < n; c++)
                want_y[r * n + c] = static_cast<float>((x[r * n + c] - mean) * rstd * w[c] + b[c]);
        }
        cases.push_back({"layer_norm",
                         [=](const Api &api) { return api.layer_norm_select(dx, dy, dw, db, dmean, drstd, n, m, n, eps); },
                         [=](const Api &api, cudaStream_t s) {
                             return api.layer_norm(s, dx, dy, dw, db, dmean, drstd, n, m, n, eps);
                         },
                         [=] {
                             std::string bad = compare("layer_norm y", from_half(download(dy, m * n)), want_y, 1e-2f);
                             if (bad.empty())
                                 bad = compare("layer_norm mean", download(dmean, m), want_mean, 1e-4f);
                             if (bad.empty())
                                 bad = compare("layer_norm rstd", download(drstd, m), want_rstd, 1e-4f);
                             return bad;
                         },
                         {{dy, m * n * sizeof(__half)}, {dmean, m * sizeof(float)}, {drstd, m * sizeof(float)}}});
    }
    {   // row_argmax: [64, 5000] (several column blocks per row)
        const int rows = 64, cols = 5000;
        auto x = floats(rows * cols, -100, 100);
        float *dx = upload(x);
        int32_t *dout = upload(std::vector<int32_t>(rows));
        std::vector<float> want(rows);
        for (int r = 0; r < rows; r++) {
            int best = 0;
            for (int c = 1; c < cols; c++)
                if (x[r * cols + c] > x[r * cols + best])
                    best = c;
            want[r] = static_cast<float>(best);
        }
        cases.push_back({"row_argmax",
                         [=](const Api &api) { return api.row_argmax_select(dout, dx, cols, rows, cols); },
                         [=](const Api &api, cudaStream_t s) { return api.row_argmax(s, dout, dx, cols, rows, cols); },
                         [=] {
                             auto got = download(dout, rows);
                             return compare("row_argmax", std::vector<float>(got.begin(), got.end()), want, 0);
                         },
                         {{dout, rows * sizeof(int32_t)}}});
    }
    {   // transpose: [100, 300] -> [300, 100]
        const int m = 100, n = 300;
        auto x = floats(m * n, -1, 1);
        float *dx = upload(x), *dout = upload(std::vector<float>(m * n));
        std::vector<float> want(m * n);
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++)
                want[j * m + i] = x[i * n + j];
        cases.push_back({"transpose",
                         [=](const Api &api) { return api.transpose_select(dx, dout, m, n); },
                         [=](const Api &api, cudaStream_t s) { return api.transpose(s, dx, dout, m, n); },
                         [=] { return compare("transpose", download(dout, m * n), want, 0); },
                         {{dout, m * n * sizeof(float)}}});
    }
    // The matmuls: inputs are multiples of 1/2 in [-1, 1], so every result is exact in fp16.
    auto operands = [&](int rows, int cols) {
        std::vector<float> values(static_cast<size_t>(rows) * cols);
        for (float &v : values)
            v = random.half_step();
        return values;
    };
    {   // matmul: [1024, 64] x [64, 1024], the large tiles (M * N >= 2^20)
        const int m = 1024, n = 1024, k = 64;
        auto a = operands(m, k), b = operands(k, n);
        auto want = host_matmul(a, b, m, n, k);
        __half *da = upload(to_half(a)), *db = upload(to_half(b));
        __half *dc = upload(std::vector<__half>(m * n));
        cases.push_back({"matmul",
                         [=](const Api &api) { return api.matmul_select(da, db, dc, m, n, k, k, 1, n, 1, n, 1); },
                         [=](const Api &api, cudaStream_t s) { return api.matmul(s, da, db, dc, m, n, k, k, 1, n, 1, n, 1); },
                         [=] { return compare("matmul", from_half(download(dc, m * n)), want, 0); },
                         {{dc, m * n * sizeof(__half)}}});
        __half *dd = upload(std::vector<__half>(m * n));
        cases.push_back({"matmul_descriptor",
                         [=](const Api &api) { return api.matmul_descriptor_select(da, db, dd, m, n, k, k, n, n); },
                         [=](const Api &api, cudaStream_t s) { return api.matmul_descriptor(s, da, db, dd, m, n, k, k, n, n); },
                         [=] { return compare("matmul_descriptor", from_half(download(dd, m * n)), want, 0); },
                         {{dd, m * n * sizeof(__half)}}});
    }
    {   // matmul_leaky_relu: [256, 64] x [64, 256]
        const int m = 256, n = 256, k = 64;
        auto a = operands(m, k), b = operands(k, n);
        auto want = host_matmul(a, b, m, n, k);
        for (float &v : want)
            v = __half2float(__float2half(v >= 0 ? v : 0.01f * v));
        __half *da = upload(to_half(a)), *db = upload(to_half(b));
        __half *dc = upload(std::vector<__half>(m * n));
        cases.push_back({"matmul_leaky_relu",
                         [=](const Api &api) { return api.matmul_leaky_relu_select(da, db, dc, m, n, k, k, 1, n, 1, n, 1); },
                         [=](const Api &api, cudaStream_t s) {
                             return api.matmul_leaky_relu(s, da, db, dc, m, n, k, k, 1, n, 1, n, 1);
                         },
                         [=] { return compare("matmul_leaky_relu", from_half(download(dc, m * n)), want, 1e-3f); },
                         {{dc, m * n * sizeof(__half)}}});
    }
    {   // batched_matmul: 2 x [128, 64] x [64, 128]
        const int batch = 2, m = 128, n = 128, k = 64;
        auto a = operands(batch * m, k), b = operands(batch * k, n);
        std::vector<float> want;
        for (int i = 0; i < batch; i++) {
            std::vector<float> ai(a.begin() + i * m * k, a.begin() + (i + 1) * m * k);
            std::vector<float> bi(b.begin() + i * k * n, b.begin() + (i + 1) * k * n);
            auto ci = host_matmul(ai, bi, m, n, k);
            want.insert(want.end(), ci.begin(), ci.end());
        }
        __half *da = upload(to_half(a)), *db = upload(to_half(b));
        __half *dc = upload(std::vector<__half>(batch * m * n));
        cases.push_back({"batched_matmul",
                         [=](const Api &api) {
                             return api.batched_matmul_select(da, db, dc, batch, m, n, k, m * k, k, 1, k * n, n, 1, m * n, n, 1);
                         },
                         [=](const Api &api, cudaStream_t s) {
                             return api.batched_matmul(s, da, db, dc, batch, m, n, k, m * k, k, 1, k * n, n, 1, m * n, n, 1);
                         },
                         [=] { return compare("batched_matmul", from_half(download(dc, batch * m * n)), want, 0); },
                         {{dc, batch * m * n * sizeof(__half)}}});
    }
    cudaDeviceSynchronize();
    return cases;
}

// What one GPU's thread does in a phase: `launches` rounds of every case on `stream`.
std::string run_cases(const Api &api, int device, std::vector<Case> &cases, int launches,
                      cudaStream_t stream)
{
    if (cudaSetDevice(device) != cudaSuccess)
        return "cudaSetDevice failed";
    for (int round = 0; round < launches; round++)
        for (const Case &c : cases) {
            int status = c.launch(api, stream);
            if (status != 0)
                return c.kernel + ": status " + std::to_string(status) + ": " + api.last_error();
        }
    cudaError_t error = cudaStreamSynchronize(stream);
    return error == cudaSuccess ? "" : std::string("synchronize: ") + cudaGetErrorString(error);
}

// Poisons every output (NaN floats, -1 integers), so that a launch that did not happen or
// landed elsewhere cannot pass on the last phase's results.
void poison(int device, std::vector<Case> &cases)
{
    cudaSetDevice(device);
    for (Case &c : cases)
        for (auto &output : c.outputs)
            cudaMemset(output.first, 0xFF, output.second);
    cudaDeviceSynchronize();
}

std::string check_cases(int device, std::vector<Case> &cases)
{
    cudaSetDevice(device);
    for (Case &c : cases) {
        std::string bad = c.check();
        if (!bad.empty())
            return "GPU " + std::to_string(device) + ": " + bad;
    }
    return "";
}

// A worker thread that owns one GPU and runs what it is handed, then waits, idle.
class Worker {
public:
    explicit Worker(int device) : device_(device), thread_([this] { loop(); }) {}
    ~Worker()
    {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            stop_ = true;
        }
        wake_.notify_all();
        thread_.join();
    }
    void post(std::function<std::string(cudaStream_t)> job)
    {
        std::lock_guard<std::mutex> lock(mutex_);
        job_ = std::move(job);
        done_ = false;
        wake_.notify_all();
    }
    std::string wait()
    {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [this] { return done_; });
        return result_;
    }

private:
    void loop()
    {
        cudaSetDevice(device_);
        cudaStream_t stream;
        cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
        std::unique_lock<std::mutex> lock(mutex_);
        for (;;) {
            wake_.wait(lock, [this] { return stop_ || job_ != nullptr; });
            if (stop_)
                break;
            auto job = std::move(job_);
            job_ = nullptr;
            lock.unlock();
            std::string result = job(stream);
            lock.lock();
            result_ = result;
            done_ = true;
            wake_.notify_all();
        }
        cudaStreamDestroy(stream);
    }

    int device_;
    std::mutex mutex_;
    std::condition_variable wake_;
    std::function<std::string(cudaStream_t)> job_;
    std::string result_;
    bool done_ = true, stop_ = false;
    std::thread thread_;
};

int fail(const std::string &message)
{
    std::printf("FAIL: %s\n", message.c_str());
    return 1;
}

// Every GPU's worker runs every case `launches` times through `api`, all at once.
std::string run_everywhere(const Api &api, std::vector<std::unique_ptr<Worker>> &workers,
                           std::vector<std::vector<Case>> &cases, int launches)
{
    for (size_t d = 0; d < workers.size(); d++) {
        poison(static_cast<int>(d), cases[d]);
        workers[d]->post([&api, &cases, d, launches](cudaStream_t stream) {
            return run_cases(api, static_cast<int>(d), cases[d], launches, stream);
        });
    }
    std::string first;
    for (size_t d = 0; d < workers.size(); d++) {
        std::string result = workers[d]->wait();
        if (!result.empty() && first.empty())
            first = "GPU " + std::to_string(d) + ": " + result;
    }
    if (!first.empty())
        return first;
    for (size_t d = 0; d < workers.size(); d++) {
        std::string bad = check_cases(static_cast<int>(d), cases[d]);
        if (!bad.empty())
            return bad;
    }
    return "";
}

}  // namespace

int main(int argc, char **argv)
{
    if (argc != 3)
        return fail("usage: several_gpus <libexamples.so> <launches per kernel>");
    const char *path = argv[1];
    const int launches = std::atoi(argv[2]);
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < 2) {
        std::printf("SKIP: %d GPU(s); this program needs two\n", devices);
        return 77;
    }
    Api api;
    if (!open_library(path, api))
        return 1;
    std::vector<std::vector<Case>> cases;
    for (int d = 0; d < devices; d++)
        cases.push_back(make_cases(d));
    // The variants these calls take (the same on every GPU: cudaMalloc aligns to 256 bytes).
    std::set<std::pair<std::string, int>> used;
    for (const Case &c : cases[0]) {
        int index = c.select(api);
        if (index < 0)
            return fail(c.kernel + ": no variant takes the test's arguments");
        used.insert({c.kernel, index});
    }
    const int expected_modules = devices * static_cast<int>(used.size());
    if (api.modules_loaded() != 0)
        return fail("modules loaded before any launch");

    std::vector<std::unique_ptr<Worker>> workers;
    for (int d = 0; d < devices; d++)
        workers.push_back(std::make_unique<Worker>(d));

    // 1. One thread per GPU, each on its own stream, all at once.
    std::string bad = run_everywhere(api, workers, cases, launches);
    if (!bad.empty())
        return fail("phase 1: " + bad);
    if (api.modules_loaded() != expected_modules)
        return fail("phase 1: " + std::to_string(api.modules_loaded()) + " modules loaded, expected " +
                    std::to_string(expected_modules) + " (" + std::to_string(used.size()) +
                    " variants x " + std::to_string(devices) + " GPUs)");
    std::printf("phase 1: %d GPUs x %zu kernels x %d launches on one thread per GPU: right; "
                "%d modules loaded (%zu variants x %d GPUs)\n",
                devices, cases[0].size(), launches, api.modules_loaded(), used.size(), devices);

    // 2. One thread (this one) switches the current device between launches.
    for (int d = 0; d < devices; d++)
        poison(d, cases[d]);
    const int switches = launches / 10 > 0 ? launches / 10 : 1;
    for (int round = 0; round < switches; round++)
        for (int d = 0; d < devices; d++) {
            cudaSetDevice(d);
            for (const Case &c : cases[d]) {
                int status = c.launch(api, nullptr);
                if (status != 0)
                    return fail("phase 2: GPU " + std::to_string(d) + ": " + c.kernel + ": status " +
                                std::to_string(status) + ": " + api.last_error());
            }
        }
    for (int d = 0; d < devices; d++) {
        cudaSetDevice(d);
        if (cudaDeviceSynchronize() != cudaSuccess)
            return fail("phase 2: GPU " + std::to_string(d) + " failed to synchronize");
        bad = check_cases(d, cases[d]);
        if (!bad.empty())
            return fail("phase 2: " + bad);
    }
    if (api.modules_loaded() != expected_modules)
        return fail("phase 2: the device switches loaded modules again");
    std::printf("phase 2: %d rounds switching between %d GPUs on one thread (default streams): "
                "right; still %d modules\n", switches, devices, api.modules_loaded());

    // 3. Closed and opened again while the workers wait, idle; then everything once more.
    if (dlclose(api.handle) != 0)
        return fail(std::string("dlclose: ") + dlerror());
    if (dlopen(path, RTLD_NOW | RTLD_NOLOAD) != nullptr)
        return fail("phase 3: the library is still loaded after dlclose");
    Api reopened;
    if (!open_library(path, reopened))
        return 1;
    if (reopened.modules_loaded() != 0)
        return fail("phase 3: the reopened library starts with modules loaded");
    bad = run_everywhere(reopened, workers, cases, launches / 10 > 0 ? launches / 10 : 1);
    if (!bad.empty())
        return fail("phase 3: " + bad);
    if (reopened.modules_loaded() != expected_modules)
        return fail("phase 3: " + std::to_string(reopened.modules_loaded()) +
                    " modules loaded, expected " + std::to_string(expected_modules));
    std::printf("phase 3: closed and reopened while the other threads were idle: right; "
                "%d modules loaded again\n", reopened.modules_loaded());
    workers.clear();
    dlclose(reopened.handle);
    std::printf("OK\n");
    return 0;
}
