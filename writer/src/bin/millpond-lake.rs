fn main() -> std::process::ExitCode {
    millpond_writer::lake_tools::main()
}
