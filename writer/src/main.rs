fn main() -> std::process::ExitCode {
    millpond_writer::run::main()
}
