#!/usr/bin/env bash
# The emulated Armv9 tier's machine: an arm64 Debian 12 userland run by QEMU 10 user mode
# through binfmt_misc, on an x86_64 host, as root. Measured facts behind every choice here
# are in ../shared/EMULATION.md (QEMU 7.2 leaks the host's /proc/cpuinfo, so QEMU 10 comes
# from bookworm-backports; proot cannot run gcc; a `max` CPU is 512-bit SVE).
#
#   tests/arm64/emu.sh check       can this machine run the tier? (exit 0 yes, 3 no + why)
#   tests/arm64/emu.sh build       build or refresh the cached rootfs (idempotent; ~40 s when cached)
#   tests/arm64/emu.sh run CMD...  run CMD inside it (QEMU_CPU picks the CPU model)
#   tests/arm64/emu.sh tier [PYTEST ARGS]
#                                  build, then run tests/arm64 on the host against it
#
# The cache lives in $FLAGTREE_CPU_EMU (default /var/cache/flagtree-cpu/arm64-emu). The host's
# apt sources are never changed: QEMU is fetched into private apt directories. The binfmt_misc
# state found (mounted or not, other aarch64 handlers and whether they were enabled) is put
# back on exit, and nothing is left mounted.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
PROJECT=$(cd "$HERE/../.." && pwd)
EMU=${FLAGTREE_CPU_EMU:-/var/cache/flagtree-cpu/arm64-emu}
R=$EMU/rootfs
B=/proc/sys/fs/binfmt_misc
ENTRY=flagtree-cpu-aarch64
AARCH64_MAGIC='magic 7f454c460201010000000000000000000200b700'
# the last CPU-only torch PyPI has for aarch64, and the first aarch64 triton (EMULATION.md)
MIRROR=${MIRROR:-$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)}
MIRROR=${MIRROR:-$(awk '/^deb /{print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)}
MIRROR=${MIRROR:-http://deb.debian.org/debian}

say() { echo "[arm64-emu] $*" >&2; }
timed() { local s=$SECONDS; "$@"; say "$((SECONDS - s)) s: $*"; }

# --- can this machine run it? ------------------------------------------------------------
why_not() {
    [ "$(uname -m)" = x86_64 ] || { echo "the host is $(uname -m), not x86_64"; return; }
    [ "$(id -u)" -eq 0 ] || { echo "it needs root (binfmt_misc registration, mounts, chroot)"; return; }
    grep -qw binfmt_misc /proc/filesystems || { echo "the kernel has no binfmt_misc"; return; }
    if ! mountpoint -q $B; then
        mount -t binfmt_misc binfmt_misc $B 2>/dev/null || { echo "binfmt_misc cannot be mounted here"; return; }
        umount $B
    fi
    command -v apt-get >/dev/null || { echo "apt-get is needed to fetch debootstrap and QEMU"; return; }
    return 0
}

# --- binfmt_misc: register ours, remember and restore what was there ------------------------
STATE_FILE=""
binfmt_up() {
    STATE_FILE=$(mktemp)
    if mountpoint -q $B; then echo "mounted" >>"$STATE_FILE"
    else mount -t binfmt_misc binfmt_misc $B; fi
    [ "$(cat $B/status)" = enabled ] || { echo "status-disabled" >>"$STATE_FILE"; echo 1 >$B/status; }
    local e name
    for e in "$B"/*; do
        name=$(basename "$e")
        case $name in register|status|$ENTRY) continue;; esac
        # the newest matching entry wins, so another aarch64 handler (QEMU 7.2's) is disabled
        if grep -q "^$AARCH64_MAGIC" "$e" && head -1 "$e" | grep -q '^enabled'; then
            echo "reenable $name" >>"$STATE_FILE"; echo 0 >"$e"
        fi
    done
    if [ -e "$B/$ENTRY" ]; then echo "ours-existed" >>"$STATE_FILE"; echo -1 >"$B/$ENTRY"; fi
    # F: QEMU is opened now, so a chroot needs no copy of it; P: argv[0] preserved (name ends -binfmt-P)
    ln -sf qemu-aarch64 "$EMU/qemu/usr/bin/aarch64-binfmt-P"
    printf '%s' ":$ENTRY:M::\\x7f\\x45\\x4c\\x46\\x02\\x01\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x02\\x00\\xb7\\x00:\\xff\\xff\\xff\\xff\\xff\\xff\\xff\\x00\\xff\\xff\\xff\\xff\\xff\\xff\\xff\\xff\\xfe\\xff\\xff\\xff:$EMU/qemu/usr/bin/aarch64-binfmt-P:PF" >$B/register
}

binfmt_down() {
    [ -n "$STATE_FILE" ] && [ -f "$STATE_FILE" ] || return 0
    [ -e "$B/$ENTRY" ] && echo -1 >"$B/$ENTRY"
    if grep -q '^ours-existed' "$STATE_FILE"; then
        say "note: a $ENTRY entry was registered before this run; it is now removed (re-run to restore)"
    fi
    local name
    while read -r word name; do
        [ "$word" = reenable ] && [ -e "$B/$name" ] && echo 1 >"$B/$name"
    done <"$STATE_FILE"
    grep -q '^status-disabled' "$STATE_FILE" && echo 0 >$B/status
    grep -q '^mounted' "$STATE_FILE" || umount $B
    rm -f "$STATE_FILE"; STATE_FILE=""
}

# --- mounts inside the rootfs (rslave: unmounting them never reaches the host's /dev or /sys)
mounts_up() {
    mountpoint -q "$R/proc" || mount -t proc proc "$R/proc"
    local m
    for m in sys dev; do
        mountpoint -q "$R/$m" || { mount --rbind "/$m" "$R/$m"; mount --make-rslave "$R/$m"; }
    done
    cp -L /etc/resolv.conf "$R/etc/resolv.conf" 2>/dev/null || true
}

mounts_down() {
    local m
    for m in dev sys proc; do
        mountpoint -q "$R/$m" || continue
        # a process still dying inside keeps it busy for a moment; a lazy unmount is the last resort
        umount -R "$R/$m" 2>/dev/null || { sleep 1; umount -R "$R/$m" 2>/dev/null; } || umount -R -l "$R/$m" || true
    done
}

# the tier's pytest runs in a process group of its own, so a signal to this script stops it and every
# command it started inside the board before anything is unmounted
CHILD=""
stop_children() {  # signal
    [ -n "$CHILD" ] || return 0
    kill "-$1" -- "-$CHILD" 2>/dev/null || true
    local i
    for i in $(seq 50); do kill -0 -- "-$CHILD" 2>/dev/null || break; sleep 0.2; done
    kill -KILL -- "-$CHILD" 2>/dev/null || true
    CHILD=""
}

cleanup() { stop_children TERM; mounts_down; binfmt_down; }

# one run at a time on the machine, whatever its cache folder: two runs would fight over the kernel-global
# binfmt entry (and, with the same folder, over the rootfs)
LOCK=/run/lock/flagtree-cpu-arm64-emu.lock
take_lock() {
    mkdir -p "$EMU" "$(dirname "$LOCK")"
    exec 9>"$LOCK"
    flock -n 9 || { say "another emu.sh run is using the emulator on this machine (lock $LOCK); wait for it to finish"; exit 8; }
}

# Ctrl-C or a CI runner's SIGTERM: put the machine back first, then stop with the usual codes
on_exit_restore() {
    trap cleanup EXIT
    trap 'stop_children INT; cleanup; exit 130' INT
    trap 'stop_children TERM; cleanup; exit 143' TERM
}

# a clean environment: the host's PIP_* and proxies must not leak into the emulated machine
run_in() {
    chroot "$R" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
        PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_DEFAULT_TIMEOUT=180 \
        QEMU_CPU="${QEMU_CPU:-max,sve128=on}" ${EXTRA_ENV:-} "$@"
}

# --- building the cached machine -----------------------------------------------------------
host_tools() {
    command -v debootstrap >/dev/null && return 0
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap ca-certificates >/dev/null
}

# one QEMU binary from a Debian suite, through private apt directories (the host's sources stay as they are)
fetch_qemu_from() {  # suite package binary dest
    local suite=$1 package=$2 binary=$3 dest=$4 A=$EMU/apt-$1
    rm -rf "$dest.part"
    mkdir -p "$A/lists/partial" "$A/cache/archives/partial" "$dest.part"
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $MIRROR $suite main" >"$A/sources.list"
    local O=(-o Dir::Etc::SourceList="$A/sources.list" -o Dir::Etc::SourceParts=/dev/null
        -o Dir::State::Lists="$A/lists" -o Dir::Cache="$A/cache"
        -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache=)
    apt-get "${O[@]}" -qq update >/dev/null
    (cd "$A" && apt-get "${O[@]}" -qq download "$package" 2>&1 | grep -v unsandboxed || true)
    dpkg-deb --fsys-tarfile "$A/${package}"_*.deb | tar -x -C "$dest.part" "./usr/bin/$binary"
    rm -f "$A/${package}"_*.deb
    rm -rf "$dest"; mv "$dest.part" "$dest"
}

# QEMU 10 runs the board. QEMU 7.2 (bookworm's own) is kept inside the rootfs only to reproduce what it
# gets wrong: it passes the x86 host's /proc/cpuinfo through to the aarch64 program (a tier test runs
# doctor under it directly; it is never registered with binfmt_misc)
fetch_qemu() { fetch_qemu_from bookworm-backports qemu-user qemu-aarch64 "$EMU/qemu"; }
fetch_qemu72() {
    fetch_qemu_from bookworm qemu-user-static qemu-aarch64-static "$EMU/qemu72"
    mkdir -p "$R/usr/local/lib/qemu-7.2"
    cp "$EMU/qemu72/usr/bin/qemu-aarch64-static" "$R/usr/local/lib/qemu-7.2/"
}

# what an interrupted debootstrap may have left mounted under a folder (its /proc, /sys), deepest first:
# removing the folder must never descend into them
umount_under() {
    awk -v p="$1/" 'index($2, p) == 1 {print $2}' /proc/mounts | sort -r | while read -r m; do umount -l "$m"; done
}

debootstrap_rootfs() {
    # built beside the final place and renamed, so an interrupted run never leaves a half rootfs
    # that looks finished
    umount_under "$R.part"
    rm -rf --one-file-system "$R.part"
    debootstrap --arch=arm64 --variant=minbase \
        --include=python3,python3-venv,python3-pip,python3-dev,gcc,g++,libc6-dev,libgomp1,git,ca-certificates,make \
        bookworm "$R.part" "$MIRROR" >"$EMU/debootstrap.log" 2>&1 \
        || { say "debootstrap failed (the half-made rootfs is removed); see $EMU/debootstrap.log"
             tail -5 "$EMU/debootstrap.log" >&2; umount_under "$R.part"; rm -rf --one-file-system "$R.part"; return 1; }
    rm -rf "$R.part/var/cache/apt/archives/"*.deb
    mv "$R.part" "$R"
}

trust_host_cas() {
    # the network here may intercept TLS: pip inside needs the host's CA bundle
    cp /etc/ssl/certs/ca-certificates.crt "$R/etc/ssl/certs/ca-certificates.crt"
}

project_digest() {
    (cd "$PROJECT" && git ls-files -z --cached --others --exclude-standard -- pyproject.toml setup.py constraints.txt flagtree_cpu_build recipes patches \
        | sort -z | xargs -0 sha256sum 2>/dev/null) | sha256sum | cut -c1-16
}

install_project() {
    local digest; digest=$(project_digest)
    if [ -f "$R/opt/venv/.project-digest" ] && [ "$(cat "$R/opt/venv/.project-digest")" = "$digest" ]; then
        say "project unchanged ($digest); not reinstalled"; return 0
    fi
    rm -rf "$R/root/project"; mkdir -p "$R/root/project"
    (cd "$PROJECT" && git ls-files -z --cached --others --exclude-standard \
        | grep -z -v '^tests/' | tar --null -T - -c) | tar -x -C "$R/root/project"
    # the [test] extra is what a developer installs on an aarch64 board: it must resolve to
    # PyPI's CPU torch there, not the CUDA 13 build (EMULATION.md); at the versions the suite passed with
    run_in pip install -q --no-cache-dir -c /root/project/constraints.txt "/root/project[test]"
    echo "$digest" >"$R/opt/venv/.project-digest"
}

build() {
    mkdir -p "$EMU"
    timed host_tools
    [ -x "$EMU/qemu/usr/bin/qemu-aarch64" ] || timed fetch_qemu
    "$EMU/qemu/usr/bin/qemu-aarch64" --version | head -1 >&2
    binfmt_up
    [ -x "$R/usr/bin/python3" ] || timed debootstrap_rootfs
    [ -x "$R/usr/local/lib/qemu-7.2/qemu-aarch64-static" ] || timed fetch_qemu72
    trust_host_cas
    mounts_up
    [ -x "$R/opt/venv/bin/python" ] || { timed run_in python3 -m venv /opt/venv; timed run_in pip install -q --upgrade pip; }
    timed install_project
    run_in python -c "import platform, torch, triton; print('[arm64-emu]', platform.machine(), 'torch', torch.__version__, 'triton', triton.__version__)" >&2
    say "rootfs $(du -shx "$R" 2>/dev/null | cut -f1) in $R"
}

cmd=${1:-}
shift || true
case $cmd in
    check)
        reason=$(why_not || true)
        if [ -n "$reason" ]; then echo "emulated arm64 tier skipped: $reason" >&2; exit 3; fi
        echo "emulated arm64 tier can run here" >&2 ;;
    build)
        take_lock; on_exit_restore
        build ;;
    run)
        [ -x "$R/usr/bin/python3" ] || { say "no rootfs in $R: run '$0 build' first"; exit 2; }
        take_lock; on_exit_restore
        binfmt_up; mounts_up
        run_in "$@" ;;
    tier)
        reason=$(why_not || true)
        if [ -n "$reason" ]; then echo "emulated arm64 tier skipped: $reason" >&2; exit 3; fi
        take_lock; on_exit_restore
        s=$SECONDS
        build
        say "machine ready in $((SECONDS - s)) s"
        t=$SECONDS
        rc=0
        report=$EMU/tier-report.txt
        : >"$report"
        FLAGTREE_CPU_ARM64_TIER=1 FLAGTREE_CPU_EMU_ROOT="$R" FLAGTREE_CPU_TIER_REPORT="$report" \
            setsid "${PYTHON:-$PROJECT/.venv/bin/python}" -m pytest -q -p no:cacheprovider "$PROJECT/tests/arm64" "$@" &
        CHILD=$!
        wait "$CHILD" || rc=$?
        CHILD=""
        # per-model verdicts and timings the tests recorded (kind | model | ...)
        [ -s "$report" ] && { echo "--- emulated arm64 tier report"; sort "$report"; } >&2
        say "tier tests took $((SECONDS - t)) s (exit $rc)"
        exit $rc ;;
    *)
        sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//' >&2
        exit 2 ;;
esac
