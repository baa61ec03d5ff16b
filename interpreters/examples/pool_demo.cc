// A small demonstration of the interpreter pool: starts one interpreter per
// core, loads the same Python model in each, and calls it from as many threads.
#include <ATen/ATen.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "interpreters/pool.h"

namespace {

constexpr const char* kModelSource = R"PY(
import torch

class TinyNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(16, 16) for _ in range(4))

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x.sum(dim=1)

torch.manual_seed(0)
model = TinyNet().eval()
)PY";

}  // namespace

int main() {
  auto start = std::chrono::steady_clock::now();
  auto pool = manypy::InterpreterPool::Create();
  if (!pool.ok()) {
    fprintf(stderr, "manypy-pool-demo: %s\n", pool.status().ToString().c_str());
    return 1;
  }
  double startup = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  printf("started %zu interpreters in %.2f s (cache: %s)\n", (*pool)->size(), startup,
         (*pool)->options().cache_dir.c_str());

  manypy::ReplicatedObject model = (*pool)->Replicate([](manypy::InterpreterSession& s) {
    s.Exec(kModelSource);
    return s.Eval("model");
  });
  std::atomic<long> calls{0};
  std::vector<std::thread> threads;
  at::Tensor input = at::ones({1, 16});
  auto t0 = std::chrono::steady_clock::now();
  for (size_t t = 0; t < (*pool)->size(); ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 500; ++i) {
        manypy::Value out = model.Call({input});
        if (i == 0 && calls == 0) printf("first result: %s\n", out.DebugString().c_str());
        calls++;
      }
    });
  }
  for (auto& t : threads) t.join();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  printf("%ld calls from %zu threads in %.2f s: %.0f calls/s\n", calls.load(), (*pool)->size(),
         seconds, calls / seconds);
  manypy::Status raised = (*pool)->RunAt(0, [](manypy::InterpreterSession& session) {
    session.Exec("raise ValueError('errors cross the boundary as a status')");
  });
  printf("got %s\n", raised.ToString().c_str());
  return 0;
}
