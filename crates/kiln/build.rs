//! Links the `kiln` executable at a fixed address (not position-independent)
//! on Linux. A position-independent executable is relocated by the dynamic
//! loader at every start: kiln's 40,000 relative relocations wrote to ~180
//! pages of pointers, each a copy-on-write page fault, about 1 ms of a
//! 16 ms run that changes nothing. A fixed address needs none of it. The
//! executable's own address is then not randomised (its libraries, heap and
//! stacks still are): the docker CLI, buildx and containerd, the tools kiln
//! drives, are linked the same way (Go's default on Linux).
//! ARCHITECTURE.md, "Start-up and exit".

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
}
