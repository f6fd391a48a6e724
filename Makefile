# Thin wrapper: CMake does the build, ctest runs the tests, scripts/ set up the machine and data.
BUILD ?= build
JOBS ?= $(shell nproc)

.PHONY: all deps build data run test clean

all: build

deps:
	@scripts/setup.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

data: deps
	@scripts/fetch_data.sh

# The main job. Until training lands it is the bias report on outlier-heavy gaussian data,
# without and with RHT16, and the compounding through a chain of quantized GEMMs.
run: build
	@$(BUILD)/ufp4 formats
	@$(BUILD)/ufp4 bias --dist outliers --rows 4096 --cols 1024 --seed 1
	@$(BUILD)/ufp4 bias --dist outliers --rows 1024 --cols 1024 --seed 1 --layers 8

test: build data
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

clean:
	rm -rf $(BUILD)
