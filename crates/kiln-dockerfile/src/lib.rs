//! Dockerfile-side knowledge kiln needs before it talks to BuildKit.
//!
//! Today this crate owns the `.dockerignore` semantics ([`ignore`]): a faithful port of
//! Docker's pattern matcher and of the docker CLI's context walker, so that kiln uploads
//! exactly the files `docker build` would. It also owns the Dockerfile analysis
//! ([`dockerfile`]): which stages a target needs, the build args, context paths, mounts and
//! images those stages consume, and the canonical text a content key hashes.
//!
//! It reads the local filesystem (the build context, a Dockerfile) and nothing else: no
//! network, no daemon, no clock, no environment.

pub mod dockerfile;
pub mod ignore;
