# stillmoment: make run (the main job), make test, make bench, make install.
SHELL := /bin/bash
SWIFT ?= swift
PREFIX ?= /usr/local
DESTDIR ?=

# Debian packages: to build, to test, to run the benchmarks.
DEB_BUILD := pkg-config libasound2-dev libpulse-dev libmpg123-dev libfaad-dev libsoxr-dev libxxhash-dev libsqlite3-dev
DEB_TEST := $(DEB_BUILD) libebur128-dev lame sox python3 python3-pytest python3-venv util-linux pulseaudio pulseaudio-utils libasound2-plugins chromium chromium-driver openssl mosquitto mosquitto-clients libmosquitto1 snapserver snapclient iproute2 gcc libc6-dev curl
DEB_BENCH := $(DEB_BUILD) libebur128-dev mpg123 faad lame ffmpeg sox sqlite3 time pulseaudio pulseaudio-utils libasound2-plugins stress-ng valgrind binutils python3-pytest python3-venv chromium chromium-driver mosquitto mosquitto-clients libmosquitto1 iproute2 gcc libc6-dev
# Debian packages: to make the .deb, and to test it (lintian, systemd-analyze, a clean root).
DEB_DEB := $(DEB_BUILD) debhelper dpkg-dev fakeroot
DEB_TEST_DEB := $(DEB_DEB) lintian systemd debootstrap util-linux
FUZZ_SECONDS ?= 60
# The CI-sized fuzz run in `make test`: this many seconds per target.
FUZZ_CI_SECONDS ?= 30
# `make fuzz-long`: this many runs per target (RUNS=N to change it).
RUNS ?= 10000000
TIMING_SECONDS ?= 600

# The version: VERSION is the one place; `stillmoment --version`, the package and its
# changelog take it from there (Sources/stillmoment/Version.swift is generated from it).
VERSION := $(shell cat VERSION)

BINDIR := $(PREFIX)/bin
DATADIR := $(PREFIX)/share

.PHONY: deps deps-test deps-bench version build release run test test-home test-rooms test-hw test-deb deb bench fuzz fuzz-long faults install uninstall clean

deps:
	@scripts/deps.sh $(DEB_BUILD)

deps-test:
	@scripts/deps.sh $(DEB_TEST)

deps-bench:
	@scripts/deps.sh $(DEB_BENCH)

# Sources/stillmoment/Version.swift from VERSION (rewritten only when it differs, so a
# build that needs nothing does nothing).
version:
	@printf '%s\n' '// Generated from VERSION by `make version` (the Makefile checks it before each build);' \
	    '// kept in the tree so that a plain `swift build` works. Edit VERSION, not this file.' \
	    'let stillmomentVersion = "$(VERSION)"' > .version.swift.tmp
	@cmp -s .version.swift.tmp Sources/stillmoment/Version.swift || cp .version.swift.tmp Sources/stillmoment/Version.swift
	@rm -f .version.swift.tmp

build: deps version
	$(SWIFT) build

# The Swift runtime linked in statically: one binary to copy to a Pi, and a smaller RSS.
# Every Swift function in a section of its own, so that the link can place the code the
# daemon runs together (scripts/code-order.sh says why; Package.swift passes the order).
RELEASE_FLAGS = -c release --static-swift-stdlib -Xswiftc -Xfrontend -Xswiftc -function-sections

release: deps version
	$(SWIFT) build $(RELEASE_FLAGS)

# The main job: a 1-minute session with interval gongs every 20 s and the forest
# ambience on the default ALSA device (or, with no sound card, rendered to session.wav).
run: release
	.build/release/stillmoment timer 1m --interval 20s --ambience forest --fallback-output session.wav

# The process-level tests (Tests/cli, pytest; README, "Tests") run in English whatever the
# shell's language (test_german.py sets its own per command). pytest fails a run that
# collects no test (exit 5); its closing line ("N passed") is what CI reads. The browser
# tests need Selenium: they run with the web venv's python (scripts/webenv.sh).
# Debian's python3 with its python3-pytest (deps-test), whatever python3 comes first on the PATH.
PYTEST = -m pytest -q
test: export LANG = C.UTF-8
test: export LC_ALL =
test: export LC_MESSAGES =
test: deps-test
	$(SWIFT) build --build-tests
	$(SWIFT) test
	bash fuzz/run.sh $(FUZZ_CI_SECONDS)
	/usr/bin/python3 $(PYTEST) Tests/cli --ignore=Tests/cli/test_web.py --ignore=Tests/cli/test_home_assistant.py
	bash scripts/webenv.sh
	.build/web-venv/bin/python $(PYTEST) Tests/cli/test_web.py

# A 10-minute sit in three rooms, paused and resumed from other nodes, heard in one capture
# (Tests/cli/long_rooms_sit.py; README, "Rooms"): 11 minutes, so apart from `make test`.
test-rooms: export LANG = C.UTF-8
test-rooms: export LC_ALL =
test-rooms: export LC_MESSAGES =
test-rooms: deps-test
	$(SWIFT) build
	/usr/bin/python3 $(PYTEST) Tests/cli/long_rooms_sit.py

# A real Home Assistant core (2024.3.3 from PyPI in .build/ha-venv, scripts/haenv.sh;
# the first run downloads it, a few minutes) and the daemon through a private mosquitto:
# Tests/cli/test_home_assistant.py (README, "Home Assistant"). About 20 s once the venv is made.
test-home: export LANG = C.UTF-8
test-home: export LC_ALL =
test-home: export LC_MESSAGES =
test-home: deps-test
	$(SWIFT) build
	bash scripts/haenv.sh
	/usr/bin/python3 $(PYTEST) Tests/cli/test_home_assistant.py

# The real ALSA kernel-driver path: Debian's kernel with snd-aloop booted under qemu (no
# KVM needed), the release binary playing on hw:Loopback, plughw and dmix, captured and
# measured (hw/README.md). About 7 minutes on 2 cores; installs what it needs.
test-hw: release
	bash hw/rig.sh

# The Debian package, stillmoment_$(VERSION)_ARCH.deb here, from the release binary
# (scripts/deb.sh: dpkg-buildpackage and debhelper in a staged copy under .build/deb).
deb: release
	@scripts/deps.sh $(DEB_DEB)
	bash scripts/deb.sh

# The package's tests (Tests/deb/deb-tests.sh): lintian, systemd-analyze verify and
# security on the system unit, and install, upgrade from an older package and catalog
# schema, remove, reinstall and purge in a clean Debian 12 root (debootstrap; the base
# is kept in .build/deb-cache). Needs root.
test-deb: deb
	@scripts/deps.sh $(DEB_TEST_DEB)
	bash Tests/deb/deb-tests.sh

bench: deps-bench release
	@scripts/deps-mpd.sh
	@rm -f bench-out/results.txt
	@bash bench/engine.sh
	@bash bench/timer.sh
	@bash bench/import.sh
	@bash bench/paced.sh
	@bash bench/callgrind.sh
	@BIN=.build/release/stillmoment python3 bench/realtime.py latency
	@BIN=.build/release/stillmoment python3 bench/realtime.py timing $(TIMING_SECONDS)
	@BIN=.build/release/stillmoment python3 bench/realtime.py load
	@bash bench/memory.sh
	@BIN=.build/release/stillmoment python3 bench/practice.py
	@bash scripts/webenv.sh
	@.build/web-venv/bin/python bench/web.py
	@.build/web-venv/bin/python bench/daemon.py
	@.build/web-venv/bin/python bench/cpu.py
	@BIN=.build/release/stillmoment python3 bench/home.py
	@BIN=.build/release/stillmoment python3 bench/rooms.py
	@BIN=.build/release/stillmoment python3 bench/sync.py
	@echo "results in bench-out/results.txt; summary in BENCHMARKS.md"

# Fault injection on the release build: 100 imports killed with SIGKILL, a full disk, two
# imports at once; the catalog emptied, deleted, replaced by an older copy, damaged or
# overwritten with garbage; repair racing 20 imports; planted links at --output's temporary
# names (in a private mount namespace); another user's runtime folder and socket; a
# read-only, nearly full and full store; a daemon SIGKILLed mid-meditation; the daemon
# stopped for 300 ms mid-session and the sound server killed mid-session (on a private
# PulseAudio null sink). Each case says passed or FAILED.
faults: deps-bench release
	KILLS=100 BIN=.build/release/stillmoment python3 $(PYTEST) Tests/cli/test_library_faults.py
	BIN=.build/release/stillmoment python3 bench/realtime.py sigstop
	BIN=.build/release/stillmoment python3 bench/realtime.py device-loss

# libFuzzer on every parser (fuzz/README.md), FUZZ_SECONDS each.
fuzz: deps
	bash fuzz/run.sh $(FUZZ_SECONDS)

# The long campaign: every target in turn to RUNS runs (10 M), the inputs that add coverage
# merged into fuzz/corpus/, the counts and coverage in bench-out/fuzz-long.txt (BENCHMARKS.md).
fuzz-long: deps
	RUNS=$(RUNS) bash fuzz/long.sh

# The release binary, the bundled sounds, the systemd user unit and shell completions.
install: release
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(DATADIR)/stillmoment/Sounds \
	    $(DESTDIR)$(PREFIX)/lib/systemd/user $(DESTDIR)$(DATADIR)/bash-completion/completions \
	    $(DESTDIR)$(DATADIR)/zsh/site-functions $(DESTDIR)$(DATADIR)/fish/vendor_completions.d
	install -s -m 0755 .build/release/stillmoment $(DESTDIR)$(BINDIR)/stillmoment
	install -m 0644 Sounds/sounds.json Sounds/*.mp3 Sounds/*.m4a $(DESTDIR)$(DATADIR)/stillmoment/Sounds/
	sed 's|@BINDIR@|$(BINDIR)|g' dist/stillmoment.service > $(DESTDIR)$(PREFIX)/lib/systemd/user/stillmoment.service
	sed 's|@BINDIR@|$(BINDIR)|g' dist/stillmoment-web.service > $(DESTDIR)$(PREFIX)/lib/systemd/user/stillmoment-web.service
	chmod 0644 $(DESTDIR)$(PREFIX)/lib/systemd/user/stillmoment.service $(DESTDIR)$(PREFIX)/lib/systemd/user/stillmoment-web.service
	.build/release/stillmoment --generate-completion-script bash > $(DESTDIR)$(DATADIR)/bash-completion/completions/stillmoment
	.build/release/stillmoment --generate-completion-script zsh > $(DESTDIR)$(DATADIR)/zsh/site-functions/_stillmoment
	.build/release/stillmoment --generate-completion-script fish > $(DESTDIR)$(DATADIR)/fish/vendor_completions.d/stillmoment.fish
	@echo "installed under $(DESTDIR)$(PREFIX); enable the daemon with: systemctl --user enable --now stillmoment"
	@echo "the web app for a phone (off until enabled): systemctl --user enable --now stillmoment-web; then stillmoment web pair"

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/stillmoment $(DESTDIR)$(PREFIX)/lib/systemd/user/stillmoment.service \
	    $(DESTDIR)$(PREFIX)/lib/systemd/user/stillmoment-web.service \
	    $(DESTDIR)$(DATADIR)/bash-completion/completions/stillmoment \
	    $(DESTDIR)$(DATADIR)/zsh/site-functions/_stillmoment \
	    $(DESTDIR)$(DATADIR)/fish/vendor_completions.d/stillmoment.fish
	rm -rf $(DESTDIR)$(DATADIR)/stillmoment

clean:
	rm -rf .build bench-out
