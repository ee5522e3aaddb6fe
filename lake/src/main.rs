fn main() -> std::process::ExitCode {
    millpond_lake::main()
}
