fn main() -> std::process::ExitCode {
    millpond_ingest::run::main()
}
