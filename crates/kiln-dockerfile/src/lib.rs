//! Dockerfile-side knowledge kiln needs before it talks to BuildKit.
//!
//! Today this crate owns the `.dockerignore` semantics ([`ignore`]): a faithful port of
//! Docker's pattern matcher and of the docker CLI's context walker, so that kiln uploads
//! exactly the files `docker build` would. It will also hold Dockerfile analysis (stages,
//! `ARG` use, `COPY`/`ADD`/`--mount` sources).
//!
//! It reads the local filesystem (the build context) and nothing else: no network, no
//! daemon, no clock, no environment.

pub mod ignore;
