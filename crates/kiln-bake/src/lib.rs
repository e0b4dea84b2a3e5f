//! kiln-bake: evaluates `docker buildx bake` files (HCL native and JSON syntax)
//! exactly as buildx does, into resolved targets and groups.
//!
//! Owns: parsing, the expression language and its stdlib, variables, functions,
//! blocks, matrix, `inherits`, `--set` overrides, `--print` JSON.
//! Must never: perform I/O beyond reading the bake files it is given.

pub mod stdlib;
pub mod value;
