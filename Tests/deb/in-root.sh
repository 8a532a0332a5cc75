#!/bin/bash
# Runs inside the clean Debian 12 root (Tests/deb/deb-tests.sh made it): the package's
# life on a headless Pi. systemd does not run here, so the daemon is started the way the
# system unit starts it: as the stillmoment user (its groups: stillmoment, audio), its
# environment (HOME, XDG_RUNTIME_DIR=/run, STILLMOMENT_CONTROL_GROUP), UMask, limits and
# no new privileges, with /run/stillmoment (RuntimeDirectory) made 0750 first.
set -u
export DEBIAN_FRONTEND=noninteractive
PATH=/usr/sbin:/usr/bin:/sbin:/bin
cd /opt/test
ok() { echo "passed: $*"; }
bad() { echo "FAILED: $*"; }
check() { local what=$1; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }
lib=/var/lib/stillmoment/.local/share/stillmoment
daemon_pid=

# A command as a user, with a login's environment (HOME, no XDG_RUNTIME_DIR: as over ssh
# without a systemd user session), and the groups /etc/group gives them.
as() {
    local user=$1; shift
    local home; home=$(getent passwd "$user" | cut -d: -f6)
    setpriv --reuid="$user" --regid="$(id -g "$user")" --init-groups \
        env -i HOME="$home" USER="$user" PATH=/usr/bin:/bin LANG=C.UTF-8 "$@"
}
# `sudo -u stillmoment stillmoment …`: the system service's own library.
sys() { as stillmoment stillmoment "$@"; }

# The unit's LimitRTPRIO, LimitNICE, LimitMEMLOCK, where this machine lets root raise
# them (a container may not; the daemon then runs without SCHED_FIFO, as it does anyway
# where the limits forbid it).
limits=(prlimit --rtprio=50:50 --nice=30:30 --memlock=67108864:67108864)
"${limits[@]}" true 2>/dev/null || { echo "note: cannot raise RLIMIT_RTPRIO here; the daemon runs with the container's limits"; limits=(); }
start_daemon() {
    install -d -o stillmoment -g stillmoment -m 0750 /run/stillmoment
    (umask 0077
     exec "${limits[@]}" \
        setpriv --reuid=stillmoment --regid=stillmoment --init-groups --no-new-privs \
        env -i HOME=/var/lib/stillmoment USER=stillmoment LOGNAME=stillmoment SHELL=/usr/sbin/nologin \
            PATH=/usr/bin:/bin LANG=C.UTF-8 XDG_RUNTIME_DIR=/run STILLMOMENT_CONTROL_GROUP=stillmoment \
            /usr/bin/stillmoment daemon >>/tmp/daemon.log 2>&1) &
    daemon_pid=$!
    # Serving: it listens before it has opened (and migrated) the store, and answers after.
    for _ in $(seq 100); do
        [ -S /run/stillmoment/control.sock ] && sys status 2>/dev/null | grep -qv 'no daemon' && return 0
        sleep 0.1
    done
    echo "the daemon does not answer:"; tail -5 /tmp/daemon.log
    return 1
}
# As systemd stops it: SIGTERM, and the process gone.
stop_daemon() {
    [ -n "$daemon_pid" ] || return 0
    kill -TERM "$daemon_pid" 2>/dev/null
    wait "$daemon_pid" 2>/dev/null
    daemon_pid=
    local left; left=$(grep -lx stillmoment /proc/[0-9]*/comm 2>/dev/null)
    [ -z "$left" ] || { echo "a daemon is still running: $left"; return 1; }
}
# What must survive an upgrade, a remove and an install: the library, presets, the
# schedule, the practice log and its totals, the settings.
snapshot() {
    { sys list; sys preset list; sys schedule list; sys history; sys stats --json
      cat "$lib/settings.json"; } 2>&1 | sed 's/next: .*//'
}

echo "== install $(dpkg-deb -f old.deb Version) (the older package)"
check "the older package installs" dpkg -i old.deb
check "the system user exists, in the audio group" sh -c 'id -nG stillmoment | grep -qw audio'
check "its home /var/lib/stillmoment is 0750 stillmoment:stillmoment" \
    sh -c '[ "$(stat -c %a:%U:%G /var/lib/stillmoment)" = 750:stillmoment:stillmoment ]'
out=$(systemd-analyze verify /lib/systemd/system/stillmoment.service 2>&1); rc=$?
check "systemd-analyze verify: the system unit is clean (exit $rc${out:+: $out})" sh -c "[ $rc -eq 0 ] && [ -z \"\$1\" ]" _ "$out"
out=$(XDG_RUNTIME_DIR=/tmp systemd-analyze verify --user /usr/lib/systemd/user/stillmoment.service /usr/lib/systemd/user/stillmoment-web.service 2>&1); rc=$?
check "systemd-analyze verify --user: the user units are clean (exit $rc${out:+: $out})" sh -c "[ $rc -eq 0 ] && [ -z \"\$1\" ]" _ "$out"
# No sound card here: what the daemon plays goes to a file, through a PCM the ALSA
# configuration defines (inline definitions on the command line are refused).
cat >/etc/asound.conf <<'ASOUND'
pcm.capture {
    type file
    slave.pcm null
    file "/var/lib/stillmoment/capture.raw"
    format raw
}
ASOUND
useradd -m alice && adduser --quiet alice stillmoment
useradd -m bob
chmod 0755 /opt/test && chmod 0644 /opt/test/*

check "the daemon starts as the unit starts it" start_daemon
check "the control folder is 0750 and the socket 0660, both of group stillmoment" \
    sh -c '[ "$(stat -c %a:%G /run/stillmoment):$(stat -c %a:%G /run/stillmoment/control.sock)" = 750:stillmoment:660:stillmoment ]'
out=$(as alice stillmoment status 2>&1); rc=$?
check "a member of the group (alice) reaches the system daemon: status says idle ($out)" \
    sh -c "[ $rc -eq 0 ] && echo \"\$1\" | grep -qi idle" _ "$out"
out=$(as alice stillmoment timer 1m --interval 20s --device capture 2>&1); rc=$?
size=$(stat -c %s /var/lib/stillmoment/capture.raw 2>/dev/null || echo 0)
sound=$(tr -d '\000' </var/lib/stillmoment/capture.raw 2>/dev/null | wc -c)
check "alice's \`stillmoment timer 1m\` plays through the system daemon (exit $rc; $size bytes captured, $sound not zero; $(echo "$out" | tail -2))" \
    sh -c "[ $rc -eq 0 ] && [ $size -gt 1000000 ] && [ $sound -gt 100000 ]"
out=$(as bob stillmoment status 2>&1); rc=$?
check "a non-member (bob) cannot reach it: the folder is closed to him (exit $rc: $out)" sh -c "[ $rc -ne 127 ] && echo \"\$1\" | grep -q 'no daemon running'" _ "$out"
out=$(setpriv --reuid=bob --regid=bob --groups=stillmoment env -i HOME=/home/bob PATH=/usr/bin:/bin LANG=C.UTF-8 stillmoment status 2>&1); rc=$?
check "bob given the group's gid by root but not in its member list: the daemon refuses him (exit $rc: $out)" \
    sh -c "[ $rc -ne 0 ] && echo \"\$1\" | grep -q 'serves only' && grep -q 'refused a connection from uid $(id -u bob)' /tmp/daemon.log" _ "$out"

echo "== man pages and completions"
pages=$(ls /usr/share/man/man1/stillmoment*.1.gz | wc -l)
check "man stillmoment works ($pages pages in man1)" sh -c 'man -P cat stillmoment 2>/dev/null | grep -q timer'
check "a command's own page: man stillmoment.timer" sh -c 'man -P cat stillmoment.timer 2>/dev/null | grep -q -- --interval'
check "bash completion loads and completes commands" bash -c '
    . /usr/share/bash-completion/bash_completion
    __load_completion stillmoment && complete -p stillmoment >/dev/null'
check "zsh completion loads (compinit finds _stillmoment)" zsh -fc 'autoload -U compinit; compinit -u -d /tmp/zcompdump; [[ -n ${_comps[stillmoment]} ]]'
check "fish completion completes 'stillmoment ti' with timer" sh -c "fish -c 'complete -C\"stillmoment ti\"' | grep -q '^timer'"

echo "== the system service's library, then an older catalog schema"
sys import /opt/test/talk.mp3 --teacher "Tara Brach" >/dev/null
sys preset save morning 25m --interval 5m --ambience forest >/dev/null
sys schedule add weekdays 06:30 --preset morning --name "Morning sit" >/dev/null
sys settings set output-standby close >/dev/null
before=$(snapshot)
echo "$before" | head -40
log=$(sys history --json 2>&1)
check "the library holds a meditation, a preset, a schedule entry and a practice log entry ($log)" \
    sh -c 'echo "$1" | grep -q "Tara Brach" && echo "$1" | grep -q morning && echo "$1" | grep -q "Morning sit" && echo "$2" | grep -q "heard"' _ "$before" "$log"
migrations=$(as stillmoment sqlite3 "$lib/library.sqlite" 'SELECT count(*) FROM grdb_migrations')
check "the daemon stops on SIGTERM" stop_daemon
stop_daemon
# An older catalog: the schema before v9-web-lockout and v10-practice-totals.
as stillmoment sqlite3 "$lib/library.sqlite" "
    DROP TRIGGER practiceTotalsInsert; DROP TRIGGER practiceTotalsDelete; DROP TRIGGER practiceTotalsUpdate;
    DROP INDEX practiceOrder; DROP INDEX practiceHeard;
    DROP TABLE practiceDay; DROP TABLE practicePreset; DROP TABLE practiceTeacher; DROP TABLE webPinFailure;
    DELETE FROM grdb_migrations WHERE identifier IN ('v9-web-lockout', 'v10-practice-totals');"
older=$(as stillmoment sqlite3 "$lib/library.sqlite" 'SELECT count(*) FROM grdb_migrations')
check "the catalog is back at an older schema ($older of $migrations migrations)" sh -c "[ $older -eq $((migrations - 2)) ]"

echo "== upgrade to $(dpkg-deb -f new.deb Version)"
check "the upgrade installs" dpkg -i new.deb
check "the package is now $(dpkg-deb -f new.deb Version)" sh -c "[ \"\$(dpkg-query -W -f '\${Version}' stillmoment)\" = \"$(dpkg-deb -f new.deb Version)\" ]"
check "the daemon starts after the upgrade" start_daemon
now=$(as stillmoment sqlite3 "$lib/library.sqlite" 'SELECT count(*) FROM grdb_migrations')
check "the catalog was migrated on the daemon's start ($now of $migrations migrations)" sh -c "[ $now -eq $migrations ]"
out=$(as alice stillmoment status 2>&1); rc=$?
check "the daemon answers alice after the upgrade ($out)" sh -c "[ $rc -eq 0 ] && echo \"\$1\" | grep -qi idle" _ "$out"
after=$(snapshot)
check "nothing lost in the upgrade: meditations, presets, schedule, log, totals, settings" sh -c '[ "$1" = "$2" ]' _ "$before" "$after"
[ "$before" = "$after" ] || diff <(echo "$before") <(echo "$after")
check "stillmoment --version says $(cat /opt/test/version 2>/dev/null || dpkg-deb -f new.deb Version)" \
    sh -c "[ \"\$(stillmoment --version)\" = \"$(dpkg-deb -f new.deb Version)\" ]"

echo "== remove, install again"
check "the daemon stops" stop_daemon
check "remove" dpkg -r stillmoment
check "remove leaves the library" test -s "$lib/library.sqlite"
check "remove takes the program" test ! -e /usr/bin/stillmoment
check "install again" dpkg -i new.deb
check "the daemon starts" start_daemon
after=$(snapshot)
check "the library is still there after remove and install" sh -c '[ "$1" = "$2" ]' _ "$before" "$after"
stop_daemon

echo "== purge"
as alice stillmoment settings set volume 0.5 >/dev/null 2>&1 || as alice stillmoment preset save mine 10m >/dev/null
ls -A /home/alice/.local/share/stillmoment >/tmp/alice-before
out=$(dpkg -P stillmoment 2>&1); rc=$?
echo "$out"
check "purge" sh -c "[ $rc -eq 0 ]"
check "purge deletes the system service's data" test ! -e /var/lib/stillmoment
check "purge says where a user's own data stays" sh -c 'echo "$1" | grep -q "own library"' _ "$out"
echo "== the system daemon's log"; cat /tmp/daemon.log
check "a user's own data is untouched" sh -c 'ls -A /home/alice/.local/share/stillmoment | cmp -s - /tmp/alice-before && [ -s /tmp/alice-before ]'
