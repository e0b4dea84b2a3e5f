//! The `kiln` binary: everything lives in the library; see `kiln::run`.

fn main() -> std::process::ExitCode {
    kiln::run(std::env::args_os())
}
