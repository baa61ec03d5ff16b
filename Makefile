# The README's two Quick start commands are `make serve` and `make test`.
# Every target installs missing Debian packages (tools/debian-packages.txt)
# first, so each works on a fresh Debian 12 machine as root.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps configure build install test fuzz test-debian13 test-debian14 test-tsan test-asan serve demo models bench bench-pool bench-memory bench-batching bench-http bench-serving bench-python-native bench-generate bench-decoder-step bench-openai-route bench-overhead bench-aoti bench-many-models bench-extensions bench-compile bench-builds soak clean check-thread-safety

all: build

deps:
	./tools/install-deps.sh

configure: deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure --timeout 900

# The server under PREFIX as the image lays it out: bin/manypy-server (the
# launcher), libexec/manypy-serving (the serving process it runs),
# lib/libmanypy_shim.so.
PREFIX ?= /opt/manypy
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

# The sanitizer builds (docs/testing.md#sanitizers), each in its own folder with clang,
# building only what its ctest label runs. test-tsan: ThreadSanitizer over the request
# path and the lifecycle with fake models (label tsan). test-asan: AddressSanitizer and
# UndefinedBehaviorSanitizer over the unit tests and the real server end to end (label
# asan). CTEST_ARGS narrows either (e.g. CTEST_ARGS='-R dispatcher'); .ci/run runs
# test-asan's unit tests only: ASAN_TARGET=manypy_asan_unit_tests CTEST_ARGS='-E _e2e_test'.
TSAN_BUILD ?= build-tsan
ASAN_BUILD ?= build-asan
ASAN_TARGET ?= manypy_asan_tests
SANITIZER_CMAKE_FLAGS = -G Ninja -DCMAKE_BUILD_TYPE= -DCMAKE_CXX_COMPILER=clang++
test-tsan: deps
	cmake -S . -B $(TSAN_BUILD) $(SANITIZER_CMAKE_FLAGS) -DMANYPY_SANITIZE=thread $(CMAKE_FLAGS)
	cmake --build $(TSAN_BUILD) -j $(JOBS) --target manypy_tsan_tests
	cd $(TSAN_BUILD) && ctest -L tsan --output-on-failure --timeout 900 $(CTEST_ARGS)

test-asan: deps
	cmake -S . -B $(ASAN_BUILD) $(SANITIZER_CMAKE_FLAGS) -DMANYPY_SANITIZE=address $(CMAKE_FLAGS)
	cmake --build $(ASAN_BUILD) -j $(JOBS) --target $(ASAN_TARGET)
	cd $(ASAN_BUILD) && ctest -L asan --output-on-failure --timeout 900 $(CTEST_ARGS)

# clang's lock analysis (-Wthread-safety -Werror=thread-safety) over every translation unit of
# the build, syntax only (docs/testing.md); also the ctest thread_safety_check.
check-thread-safety: build
	/usr/bin/python3 tools/thread_safety_check.py --build $(BUILD) --jobs $(JOBS)

# Every fuzz target (fuzz/) for FUZZ_SECONDS each, one after another, from its seeds and
# regressions with its dictionary (docs/testing.md#fuzzing): clang builds them under
# FUZZ_BUILD; each run's log, new corpus and any crashing input are under
# FUZZ_BUILD/runs-long/<target>/. Writes FUZZ_BUILD/summary.txt (target, seconds,
# executions per second, executions, corpus, result) and fails if any target did.
# FUZZ_TARGETS narrows it.
FUZZ_BUILD ?= $(BUILD)/fuzz
FUZZ_SECONDS ?= 600
FUZZ_TARGETS ?= infer_request http_infer manifest archive openai_request generate_request json_bodies
fuzz: deps
	cmake -S fuzz -B $(FUZZ_BUILD) -G Ninja -DCMAKE_CXX_COMPILER=clang++
	cmake --build $(FUZZ_BUILD) -j $(JOBS)
	rm -f $(FUZZ_BUILD)/summary.txt
	failed=0; for t in $(FUZZ_TARGETS); do \
	  cmake -DFUZZER=$(FUZZ_BUILD)/$${t}_fuzzer -DMODE=fuzz -DSECONDS=$(FUZZ_SECONDS) \
	    -DSEEDS=fuzz/$$t/seeds -DREGRESSIONS=fuzz/$$t/regressions -DDICT=fuzz/$$t/dict \
	    -DWORK=$(FUZZ_BUILD)/runs-long/$$t -DSUMMARY=$(FUZZ_BUILD)/summary.txt \
	    -P fuzz/run_fuzzer.cmake || failed=1; \
	done; cat $(FUZZ_BUILD)/summary.txt; exit $$failed

# The same suite on Debian 13 (PyTorch 2.6, Python 3.13): in a Debian 13 root
# that tools/debian13.sh makes once with debootstrap (then reuses and updates),
# built in its own folder. CTEST_ARGS narrows it (e.g. -R 'Pool|Archive').
BUILD13 ?= build-debian13
CTEST_ARGS ?=
test-debian13: deps
	./tools/debian13.sh run $(MAKE) build BUILD=$(BUILD13) JOBS=$(JOBS) CMAKE_FLAGS='$(CMAKE_FLAGS)'
	./tools/debian13.sh run ctest --test-dir $(BUILD13) --output-on-failure --timeout 900 $(CTEST_ARGS)

# The same on Debian 14 (forky, testing: PyTorch 2.14, Python 3.14), in the
# root tools/debian14.sh makes, built in build-debian14/. The interpreter pool
# refuses PyTorch 2.14 for now (docs/debian14.md): the build and the tests
# that need no pool pass there.
BUILD14 ?= build-debian14
test-debian14: deps
	./tools/debian14.sh run $(MAKE) build BUILD=$(BUILD14) JOBS=$(JOBS) CMAKE_FLAGS='$(CMAKE_FLAGS)'
	./tools/debian14.sh run ctest --test-dir $(BUILD14) --output-on-failure --timeout 900 $(CTEST_ARGS)

# Packages the example models, then serves them (gRPC on port 8001, HTTP on 8000; Ctrl-C stops).
serve: models
	$(BUILD)/bin/manypy-server --model-repository $(BUILD)/model-repository

demo: build
	$(BUILD)/bin/manypy-pool-demo

# Packages the example models into $(BUILD)/model-repository with manypy-package.
models: build
	/usr/bin/python3 models/make_repository.py --out $(BUILD)/model-repository

# Each ratio target's verdict from paired rounds (tests/bench/bench_targets.py):
# holds, misses or inconclusive with its interval; only a miss fails.
bench-pool: build
	mkdir -p bench-results
	$(BUILD)/bin/manypy-bench-pool --out bench-results/pool.json
	/usr/bin/python3 tests/bench/bench_targets.py --results bench-results --only pool

# Resident memory of resnet50 served by 1, 2, 4 interpreters vs 1, 2, 4 worker processes.
# resnet50 in 1, 2, 4 interpreters vs processes; mlp_loop (needs only torch) in the
# pool; time to ready of manypy-server with the example repository at 1, 2, 4.
bench-memory: build
	mkdir -p bench-results
	test -f $(BUILD)/model-repository/resnet50.mpk -a -f $(BUILD)/model-repository/mlp_loop.mpk || \
	  /usr/bin/python3 models/make_repository.py --out $(BUILD)/model-repository
	$(BUILD)/bin/manypy-bench-memory --archive $(BUILD)/model-repository/resnet50.mpk \
	  --small-archive $(BUILD)/model-repository/mlp_loop.mpk \
	  --repository $(BUILD)/model-repository --out bench-results/memory.json
	/usr/bin/python3 tests/bench/bench_targets.py --results bench-results --only memory

# Dynamic batching on vs off over gRPC (mlp_loop at concurrency 64, resnet18 at 16, p50 at 1).
bench-batching: models
	/usr/bin/python3 tests/bench/bench_batching.py --build $(BUILD) \
	  --repository $(BUILD)/model-repository --out bench-results/batching.json

# HTTP/REST (binary data) vs gRPC with manypy-perf (two_io and resnet18 at concurrency 1 and 16).
bench-http: models
	/usr/bin/python3 tests/bench/bench_http.py --build $(BUILD) \
	  --repository $(BUILD)/model-repository --out bench-results/http.json

# manypy vs a Python grpcio server vs N Python worker processes, same models and protocol.
bench-serving: models
	/usr/bin/python3 tests/bench/bench_serving.py --build $(BUILD) \
	  --repository $(BUILD)/model-repository --out bench-results/serving.json

# The request path's cost: bench-pool's small model (small_net, packaged by the benchmark) in
# the pool (PythonModel::Run from 2 threads) vs served over gRPC to manypy-perf --async at
# concurrency 16, alternated rounds: throughput and CPU per call.
# OVERHEAD_FLAGS="--tracing-ratios 1.0,0.01": traced servers too (a Debian 13 build).
OVERHEAD_FLAGS ?=
bench-overhead: models
	/usr/bin/python3 tests/bench/bench_overhead.py --build $(BUILD) \
	  --repository $(BUILD)/model-repository --out bench-results/overhead.json $(OVERHEAD_FLAGS)

# 100 generated models (~8 MB each) on one on-demand server under a budget of ~20,
# Zipf traffic (s=1.1) at concurrency 8 over gRPC, vs one loaded model and one process per model.
# AOTInductor archives beside Python and TorchScript at the model call, and
# served (tests/bench/bench_aoti.py); on PyTorch < 2.6 it says it is skipped.
bench-aoti: build
	mkdir -p bench-results
	/usr/bin/python3 tests/bench/bench_aoti.py --build $(BUILD) --out bench-results/aoti.json

# Two builds of the server side by side in alternated rounds (BEFORE=folder of the
# baseline build): bench-overhead's served small model, bench-many-models' Zipf
# traffic, and the figures of make bench, bench-batching and bench-python-native,
# AFTER/BEFORE ratios with intervals: nothing got slower. All of it takes about
# 15 minutes: BUILDS_FLAGS="--only serving,python_native" runs a part (4 min).
bench-builds: build
	/usr/bin/python3 tests/bench/bench_builds.py --before $(BEFORE) --after $(BUILD) \
	  --out bench-results/builds.json $(BUILDS_FLAGS)

bench-many-models: build
	mkdir -p bench-results
	/usr/bin/python3 tests/bench/bench_many_models.py --build $(BUILD) --out bench-results/many_models.json

# Nested calls (manypy.infer vs two gRPC calls in turn) and streams (char_lm over gRPC and SSE).
bench-python-native: models
	/usr/bin/python3 tests/bench/bench_python_native.py --build $(BUILD) \
	  --repository $(BUILD)/model-repository --out bench-results/python_native.json

# Text generation: models/llama_decoder over gRPC streaming at 1, 4 and 16
# streams, with and without continuous batching, from the Python client and
# from manypy-perf, beside the batched model through /v1/completions, in
# alternated rounds (2.5 minutes on a quiet 2-core machine).
bench-generate: build
	mkdir -p bench-results
	/usr/bin/python3 tests/bench/bench_generate.py --build $(BUILD) --out bench-results/generate.json

# llama_decoder's step in-process (CPU time, one thread) against the file at
# BASELINE_REV (default main): where bench-generate's model time goes.
BASELINE_REV ?= main
bench-decoder-step:
	mkdir -p bench-results
	/usr/bin/python3 tests/bench/bench_decoder_step.py --baseline-rev $(BASELINE_REV) --out bench-results/decoder_step.json

# The OpenAI route's own cost: byte_writer streamed through /v1/completions (the
# openai client where installed, else plain HTTP) vs gRPC ModelStreamInfer.
bench-openai-route: build
	mkdir -p bench-results
	/usr/bin/python3 tests/bench/bench_openai_route.py --build $(BUILD) --out bench-results/openai_route.json

# Triton's extensions against their baselines in the same run: the response cache
# (resnet18, a repeated request vs a computed one; target <= 0.1x).
bench-extensions: models
	/usr/bin/python3 tests/bench/bench_extensions.py --build $(BUILD) \
	  --repository $(BUILD)/model-repository --out bench-results/extensions.json

# The whole suite in at most 20 minutes on 2 cores: serving (manypy, manypy-torchscript,
# python-grpc, python-processes; 5 models; concurrency 1-64), memory vs workers, then
# bench-results/report.md with PNG plots and the targets' verdicts.
bench: models
	mkdir -p bench-results
	/usr/bin/python3 tests/bench/bench_serving.py --build $(BUILD) \
	  --repository $(BUILD)/model-repository --out bench-results/serving.json
	$(BUILD)/bin/manypy-bench-memory --archive $(BUILD)/model-repository/resnet50.mpk \
	  --small-archive $(BUILD)/model-repository/mlp_loop.mpk \
	  --repository $(BUILD)/model-repository --out bench-results/memory.json
	/usr/bin/python3 tests/bench/bench_report.py --results bench-results

# torch.compile'd models (PyTorch 2.x; in the Debian 13 root: tools/debian13.sh run make
# bench-compile BUILD=build-debian13) beside the same models eager, at the model call
# (2 interpreters) and served over gRPC; time to READY with 1 and 2 interpreters and warm.
bench-compile: build
	mkdir -p bench-results
	/usr/bin/python3 tests/bench/bench_compile.py --build $(BUILD) --out bench-results/compile.json

# One server, fixed-rate mixed gRPC/HTTP traffic and a reload of every model each
# window for MINUTES (default 10): no errors, RSS growth < 5%, p99 stable.
MINUTES ?= 10
soak: models
	/usr/bin/python3 tests/bench/soak.py --build $(BUILD) --repository $(BUILD)/model-repository \
	  --minutes $(MINUTES) --out bench-results/soak.json

clean:
	rm -rf $(BUILD)
