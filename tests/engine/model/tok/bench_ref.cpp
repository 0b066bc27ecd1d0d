// bench_ref: the reference engine's tokenizer throughput, to set beside
// `test_tok_golden --bench` (tern's). Not built by meson: it links the
// reference build (llama.cpp static libraries), e.g.
//   L=/tmp/ref/llama_cpp_python-0.3.36/vendor/llama.cpp
//   g++ -O2 -std=c++17 -I$L/include -I$L/ggml/include tests/engine/model/tok/bench_ref.cpp -o bench_ref \
//       $L/build/src/libllama.a $L/build/ggml/src/libggml.a $L/build/ggml/src/libggml-cpu.a \
//       $L/build/ggml/src/libggml-base.a -lpthread -lgomp -ldl -lm
//   ./bench_ref MODEL.gguf TEXT   (no BOS, special text as plain text, like tern's bench)
#include "llama.h"
#include <chrono>
#include <ctime>
#include <cstdio>
#include <string>
#include <vector>
#include <fstream>
#include <sstream>
int main(int argc, char **argv) {
    llama_log_set([](ggml_log_level, const char *, void *) {}, nullptr);
    llama_backend_init();
    auto mp = llama_model_default_params(); mp.vocab_only = true;
    llama_model *m = llama_model_load_from_file(argv[1], mp);
    const llama_vocab *v = llama_model_get_vocab(m);
    std::ifstream f(argv[2], std::ios::binary); std::stringstream ss; ss << f.rdbuf(); std::string s = ss.str();
    std::vector<llama_token> ids(s.size() * 2 + 16);
    int reps = 0; double el = 0; int n = 0;
    // CPU time of the process, as tern's bench measures (robust on a loaded machine).
    std::clock_t t0 = std::clock();
    do { n = llama_tokenize(v, s.data(), (int)s.size(), ids.data(), (int)ids.size(), false, false); reps++;
         el = double(std::clock() - t0) / CLOCKS_PER_SEC; } while (el < 1.0);
    printf("ref %s: %zu bytes, %d ids, %.2f MB/s of CPU time (%d runs, %.1f ms each)\n", argv[2], s.size(), n, s.size() * reps / el / 1e6, reps, el / reps * 1e3);
    return 0; }
