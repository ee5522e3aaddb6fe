//! Regenerates proto/src/gen/*.rs from proto/proto/**/*.proto with a
//! vendored protoc, so building the workspace never needs protoc. An
//! argument names another output folder (scripts/check-proto.sh compares).
use std::path::PathBuf;

fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
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
