//! The `kiln` binary: everything lives in the library; see `kiln::run`.
//!
//! Must never: hold logic of its own (parsing, settings and exit codes are
//! `kiln::run`'s, so tests drive the same code the binary runs).

// Evaluating large bake files is allocation-heavy; mimalloc makes it ~30%
// faster than glibc malloc (see crates/kiln-bake/benches/eval.rs, which uses
// the same allocator).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    kiln::run(std::env::args_os())
}
