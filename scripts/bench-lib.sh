# shellcheck shell=bash
# What scripts/bench-e2e.sh and scripts/bench-pipeline.sh measure with.
# Source it after scripts/env.sh.

# CPU seconds of every thread of a live process so far (utime + stime).
bench_cpu() {
    awk -v t="$(getconf CLK_TCK)" '{printf "%.3f", ($14+$15)/t}' "/proc/$1/stat"
}

# A free TCP port on 127.0.0.1.
bench_port() {
    "$MILLPOND_PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# The child of a launcher such as /usr/bin/time, once it has started.
bench_child() {
    local child=""
    for _ in $(seq 500); do
        child=$(pgrep -P "$1" || true)
        [ -n "$child" ] && { echo "$child"; return 0; }
        sleep 0.01
    done
    return 1
}

# BENCH_PERF=DIR: sets bench_prefix to the command prefix that samples the
# process it starts, every thread, into DIR/NAME.data (perf's cpu-clock
# event, DWARF call graphs, wall-clock timestamps so a phase can be cut out
# with perf report --time); empty without BENCH_PERF. perf costs CPU itself:
# a profiled run's figures are not the benchmark's.
bench_prefix=()
bench_perf_prefix() {
    bench_prefix=()
    [ -n "${BENCH_PERF:-}" ] || return 0
    command -v perf >/dev/null || millpond_die "BENCH_PERF: perf missing (apt-get install linux-perf)"
    mkdir -p "$BENCH_PERF"
    bench_prefix=(perf record -q -k CLOCK_REALTIME -e cpu-clock -F "${BENCH_PERF_FREQ:-999}"
        --call-graph "dwarf,${BENCH_PERF_STACK:-16384}" -o "$BENCH_PERF/$1.data" --)
}

# The process that "${bench_prefix[@]}" started as PID's child (PID itself
# without a prefix).
bench_unwrap() {
    if [ ${#bench_prefix[@]} -gt 0 ]; then bench_child "$1"; else echo "$1"; fi
}
