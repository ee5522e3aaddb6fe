//! Regenerates proto/src/gen/*.rs from proto/proto/**/*.proto with a
//! vendored protoc, so building the workspace never needs protoc. An
//! argument names another output folder (scripts/check-proto.sh compares).
//! Run from the repository root (scripts/gen-proto.sh does): the sources are
//! found from there, never from a path compiled into the binary, so a
//! build shared by two clones (one CARGO_TARGET_DIR) reads its own clone.
use std::path::PathBuf;

fn main() {
    let root = std::env::current_dir()
        .expect("current directory")
        .join("proto");
    assert!(
        root.join("proto/millpond/v1/flight.proto").is_file(),
        "run from the repository root (scripts/gen-proto.sh)"
    );
    let out = std::env::args_os()
        .nth(1)
        .map_or_else(|| root.join("src/gen"), PathBuf::from);
    std::fs::create_dir_all(&out).expect("create src/gen");
    let protoc = protoc_bin_vendored::protoc_bin_path().expect("vendored protoc");
    let mut config = prost_build::Config::new();
    config.protoc_executable(protoc);
    config.out_dir(&out);
    config
        .compile_protos(
            &[root.join("proto/millpond/v1/flight.proto")],
            &[root.join("proto")],
        )
        .expect("compile protos");
    println!("wrote {}", out.display());
}
