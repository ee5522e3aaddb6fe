//! The benchmark's workload generator (bench/gen_events.py), checked by
//! tests/python/check_gen_events.py: the same arguments give the same
//! bytes, and the events have the shape the benchmark figures are quoted for.
#[test]
fn bench_workload_is_deterministic_and_has_its_shape() {
    millpond_tests::python_check("check_gen_events.py", "benchmark workload check");
}
