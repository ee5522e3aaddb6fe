//! The project's hoglake emulator, checked by the official client:
//! pyhoglake replays its captured session against it (every request and
//! answer must match the capture) and drives the fault scenarios the
//! hoglake writer's tests rely on.
#[test]
fn pyhoglake_agrees_with_the_emulator() {
    millpond_tests::python_check("check_hoglake_emulator.py", "pyhoglake check");
}
