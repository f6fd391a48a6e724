# Thin wrapper: CMake does the build, ctest runs the tests, scripts/ set up the machine and data.
BUILD ?= build
JOBS ?= $(shell nproc)

.PHONY: all deps test-deps build data run test clean sanitize fuzz valgrind reliability portable

all: build

deps:
	@scripts/setup.sh

test-deps:
	@scripts/setup.sh --test

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

data: deps
	@scripts/fetch_data.sh

# The main job: the BF16-relative loss error of the paper's recipes on SOTU with a small model,
# three seeds and the fp32 noise floor (section 1 of docs/RESULTS.md); about 5 minutes on 2 cores.
TOK := data/tok/bpe2048
SHARDS := data/shards/sotu-bpe2048
run: build data
	@test -f $(TOK)/encoder.json || $(BUILD)/ufp4 tokenizer train --vocab 2048 --corpus data/raw/sotu --out $(TOK)
	@test -f $(SHARDS)/train.tok || $(BUILD)/ufp4 prepare --corpus data/raw/sotu --tokenizer $(TOK) --out $(SHARDS)
	@$(BUILD)/ufp4 compare --data $(SHARDS) --out reports/main --recipes bf16,e2m1,nvfp4,ufp4 --seeds 3 \
	    --steps 300 --final-steps 75 --layers 2 --d-model 128 --heads 4 --ffn 384 --seq-len 128 --batch 8 \
	    --lr 2e-3 --warmup 20 --eval-batches 16

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
# RHT and linear tests. By default cross-compiled for aarch64 and run under qemu-user (its packages
# from scripts/setup.sh --portable); PORTABLE=native builds -DUFP4_SIMD=OFF for this machine.
PORTABLE ?= cross
portable: deps
	@[ "$(PORTABLE)" = native ] || scripts/setup.sh --portable
	@PORTABLE=$(PORTABLE) JOBS=$(JOBS) scripts/portable.sh

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) build-fuzz build-aarch64 build-scalar
