//! The `chime` binary; everything lives in the chime-cli library so tests can run it too.

fn main() -> std::process::ExitCode {
    chime_cli::main()
}
