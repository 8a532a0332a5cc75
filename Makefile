# stillmoment: make run (the main job), make test, make bench, make install.
SHELL := /bin/bash
SWIFT ?= swift
PREFIX ?= /usr/local
DESTDIR ?=

# Debian packages: to build, to test, to run the benchmarks.
DEB_BUILD := pkg-config libasound2-dev libmpg123-dev libfaad-dev libsoxr-dev libebur128-dev libxxhash-dev libsqlite3-dev
DEB_TEST := $(DEB_BUILD) lame sox python3
DEB_BENCH := $(DEB_BUILD) mpg123 faad lame ffmpeg sox time pulseaudio pulseaudio-utils libasound2-plugins stress-ng
FUZZ_SECONDS ?= 60

.PHONY: deps deps-test deps-bench build release run test bench fuzz clean

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

# The main job: a 1-minute session with interval gongs every 20 s and the forest
# ambience on the default ALSA device (or, with no sound card, rendered to session.wav).
run: release
	.build/release/stillmoment timer 1m --interval 20s --ambience forest --fallback-output session.wav

test: deps-test
	$(SWIFT) build --build-tests
	$(SWIFT) test
	bash Tests/cli/library-faults.sh

bench: deps-bench release
	@rm -f bench-out/results.txt
	@bash bench/engine.sh
	@bash bench/timer.sh
	@bash bench/import.sh
	@bash bench/paced.sh
	@bash bench/memory.sh
	@echo "results in bench-out/results.txt; summary in BENCHMARKS.md"

# libFuzzer on the MP4 demuxer, the MPEG header/tag readers and the control-protocol
# decoder, FUZZ_SECONDS each.
fuzz: deps
	bash fuzz/run.sh $(FUZZ_SECONDS)

clean:
	rm -rf .build bench-out
