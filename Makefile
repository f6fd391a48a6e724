# Thin wrapper: CMake does the build, ctest runs the tests, scripts/ set up the machine and data.
BUILD ?= build
JOBS ?= $(shell nproc)

.PHONY: all deps test-deps build install data run test clean sanitize fuzz valgrind reliability portable

all: build

deps:
	@scripts/setup.sh

test-deps:
	@scripts/setup.sh --test

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

# The library, headers, ufp4.pc, CMake package, binary and --help texts under PREFIX (docs/API.md, "C").
PREFIX ?= /usr/local
install: build
	@cmake --install $(BUILD) --prefix $(PREFIX)

data: deps
	@scripts/fetch_data.sh

# The main job (README, "What make run shows"): about 10 minutes on 2 cores.
# 1. The loss comparison at the design that separates E2M1 from UFP4 best within that budget: a
#    deep model (8 blocks of d_model 64: the shrinkage the paper blames compounds over depth),
#    bf16 baseline, fp32 control, e2m1 and ufp4 over 3 seeds, 500 steps; compare prints the
#    paired-difference matrix (95% interval, p, smallest detectable difference).
# 2. The mechanism at fixed weights: forward and backward drift of the trained bf16 model of seed 1
#    under e2m1, nvfp4 and ufp4 against the exact pass, block by block, with 95% intervals.
# Under mpirun (OpenMPI is a dependency) compare shares its 12 runs over 2 ranks of one thread,
# 1.16x the throughput of one 2-thread process on the study's 16x64 model (docs/PERFORMANCE.md).
TOK := data/tok/bpe2048
SHARDS := data/shards/sotu-bpe2048
RUN_OUT := reports/main
# (`=`, so that it is evaluated after the build: mpirun only when the binary has MPI.)
RUN_LAUNCH = $(shell ldd $(BUILD)/ufp4 2>/dev/null | grep -q libmpi && command -v mpirun >/dev/null 2>&1 && \
    echo mpirun --allow-run-as-root --bind-to none -np 2 -x OMP_NUM_THREADS=1)
run: build data
	@test -f $(TOK)/encoder.json || $(BUILD)/ufp4 tokenizer train --vocab 2048 --corpus data/raw/sotu --out $(TOK)
	@test -f $(SHARDS)/train.tok || $(BUILD)/ufp4 prepare --corpus data/raw/sotu --tokenizer $(TOK) --out $(SHARDS)
	@$(RUN_LAUNCH) $(BUILD)/ufp4 compare --data $(SHARDS) --out $(RUN_OUT) --recipes e2m1,ufp4 --seeds 3 \
	    --steps 500 --final-steps 100 --layers 8 --d-model 64 --heads 4 --ffn 192 --seq-len 128 --batch 8 \
	    --lr 2e-3 --warmup 50 --eval-every 125 --eval-batches 16
	@$(BUILD)/ufp4 drift --checkpoint $(RUN_OUT)/runs/bf16/seed1/ckpt/step_00000500 --data $(SHARDS) --out $(RUN_OUT)/drift \
	    --recipes e2m1,nvfp4,ufp4 --mode both --batches 16
	@echo
	@echo "loss comparison: $(RUN_OUT)/report.html   mechanism: $(RUN_OUT)/drift/drift.png (forward),"
	@echo "$(RUN_OUT)/drift/drift_backward.png (backward); how to read them: README.md, 'What make run shows'"

test: test-deps build data
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# Reliability (docs/RELIABILITY.md): the whole suite under ASan+UBSan, every parser under
# libFuzzer for FUZZ_SECONDS each (or, with FUZZ_RUNS set, that many inputs from a fixed seed, as
# CI does), and a valgrind memcheck of a representative subset.
FUZZ_SECONDS ?= 60
FUZZ_RUNS ?=
ASAN_BUILD ?= build-asan
sanitize: test-deps data
	@cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Release -DUFP4_SANITIZE=ON -DUFP4_MPI=OFF >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS)
	@cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1 \
	    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j $(JOBS)

fuzz: test-deps
	@FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_RUNS=$(FUZZ_RUNS) scripts/fuzz.sh

valgrind: test-deps build data
	@scripts/valgrind.sh $(BUILD)

reliability: sanitize fuzz valgrind

# Portability (scripts/portable.sh): the build without the x86 kernels must pass the format, quant,
# RHT and linear tests, and write the parity kit byte for byte as $(BUILD)/ufp4 does (when built). By
# default cross-compiled for aarch64 and run under qemu-user (its packages from scripts/setup.sh
# --portable); PORTABLE=native builds -DUFP4_SIMD=OFF for this machine.
PORTABLE ?= cross
portable: deps
	@[ "$(PORTABLE)" = native ] || scripts/setup.sh --portable
	@PORTABLE=$(PORTABLE) JOBS=$(JOBS) PORTABLE_HOST_UFP4=$(BUILD)/ufp4 scripts/portable.sh

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) build-fuzz build-aarch64 build-scalar
