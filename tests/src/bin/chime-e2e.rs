//! The `chime` binary, built inside this package so its tests can start it as a real process
//! (cargo exposes a binary's path only to tests of the package that builds it).

fn main() -> std::process::ExitCode {
    chime_cli::main()
}
