# stillmoment: make run (the main job), make test, make bench, make install.
SHELL := /bin/bash
SWIFT ?= swift
PREFIX ?= /usr/local
DESTDIR ?=

# Debian packages: to build, to test, to run the benchmarks.
DEB_BUILD := pkg-config libasound2-dev libmpg123-dev libfaad-dev libsoxr-dev
DEB_TEST := $(DEB_BUILD)
DEB_BENCH := $(DEB_BUILD) mpg123 faad lame ffmpeg sox time

.PHONY: deps deps-test deps-bench build release test bench clean

deps:
	@scripts/deps.sh $(DEB_BUILD)

deps-test:
	@scripts/deps.sh $(DEB_TEST)

deps-bench:
	@scripts/deps.sh $(DEB_BENCH)

build: deps
	$(SWIFT) build

release: deps
	$(SWIFT) build -c release

test: deps-test
	$(SWIFT) build --build-tests
	$(SWIFT) test

bench: deps-bench release
	@rm -f bench-out/results.txt
	@bash bench/engine.sh
	@echo "results in bench-out/results.txt; summary in BENCHMARKS.md"

clean:
	rm -rf .build bench-out
