//! The compile-job count kiln hands a build: an implicit BuildKit secret
//! with id [`SECRET_ID`], whose value is the job count as decimal text
//! ending in a newline (`"4\n"`). A Dockerfile opts in by mounting it:
//!
//! ```dockerfile
//! RUN --mount=type=secret,id=kiln-jobs make -j"$(cat /run/secrets/kiln-jobs 2>/dev/null || nproc)"
//! ```
//!
//! A secret mount is optional unless `required` is set, so the same
//! Dockerfile still builds with plain `docker build` (the `cat` fails and
//! `nproc` answers). BuildKit keeps secrets out of the layer-cache key and
//! kiln's own key records secret ids only from the bake file, so the count
//! never enters a key: two nodes, or one node under different load, share
//! every cached layer.
//!
//! The count for one build is the node's affordable jobs
//! (`floor(free GB / GB per job)`, from the fleet probe in `probe.rs`) divided by the node's
//! concurrent build slots, at least 1, so concurrent builds on one node do
//! not each take the whole machine.
//!
//! Must never: put the count in a build arg, a label or the content key;
//! leave the value file behind.

use std::path::{Path, PathBuf};

use kiln_dockerfile::dockerfile::{Mount, MountKind};

use crate::error::EngineError;
use crate::spec::{BuildSpec, SecretSpec};

/// The id of the implicit secret.
pub const SECRET_ID: &str = "kiln-jobs";

/// Whether kiln hands `spec` the job count: a `RUN` of a stage the build
/// needs mounts the secret [`SECRET_ID`] (`mounts` are the needed stages'
/// mounts from the Dockerfile analysis), and the bake target does not
/// declare a secret with that id itself (the user's secret wins).
pub fn wanted(spec: &BuildSpec, mounts: &[Mount]) -> bool {
    mounts
        .iter()
        .any(|m| m.kind == MountKind::Secret && m.id.as_deref() == Some(SECRET_ID))
        && !spec.secrets.iter().any(|s| s.id == SECRET_ID)
}

/// The job count of one build on a node that affords `node_jobs` compile
/// jobs in all and runs `slots` builds at once: `node_jobs / slots`, at
/// least 1. (`floor(floor(x) / s) == floor(x / s)`, so this is
/// `floor(free GB / GB per job / slots)`.)
pub fn per_build(node_jobs: u32, slots: usize) -> u32 {
    let slots = u32::try_from(slots.max(1)).unwrap_or(u32::MAX);
    (node_jobs / slots).max(1)
}

/// The secret's value: decimal text ending in a newline.
pub fn value(jobs: u32) -> String {
    format!("{jobs}\n")
}

/// Writes the value into `dir` as a file only the owner can read (mode
/// 0600) and returns the secret that points at it. The caller removes
/// `dir` after the build.
pub fn write_secret(dir: &Path, jobs: u32) -> Result<SecretSpec, EngineError> {
    write_private_secret(dir, SECRET_ID, &value(jobs))
}

/// Writes `text` into `dir` as the file `id`, readable by the owner only
/// (mode 0600), and returns the secret `id` that points at it. Every
/// secret kiln makes itself is written this way.
pub fn write_private_secret(dir: &Path, id: &str, text: &str) -> Result<SecretSpec, EngineError> {
    let path: PathBuf = dir.join(id);
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(0o600);
    }
    let mut f = o
        .open(&path)
        .map_err(|e| EngineError::io(path.display().to_string(), e))?;
    std::io::Write::write_all(&mut f, text.as_bytes())
        .map_err(|e| EngineError::io(path.display().to_string(), e))?;
    Ok(SecretSpec {
        id: id.into(),
        src: Some(path),
        env: None,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use kiln_dockerfile::dockerfile::analyze;

    use super::*;

    fn mounts(text: &str, target: Option<&str>) -> Vec<Mount> {
        analyze(text, target, &BTreeMap::new()).unwrap().mounts
    }

    #[test]
    fn only_needed_stages_that_mount_the_secret_opt_in() {
        let spec = BuildSpec::default();
        let yes = "FROM b\nRUN --mount=type=secret,id=kiln-jobs make -j\"$(cat /run/secrets/kiln-jobs 2>/dev/null || nproc)\"\n";
        assert!(wanted(&spec, &mounts(yes, None)));
        // BuildKit's default id is the target's base name.
        let by_target = "FROM b\nRUN --mount=type=secret,target=/run/secrets/kiln-jobs make\n";
        assert!(wanted(&spec, &mounts(by_target, None)));
        // Other secrets, other mount kinds, mere mentions: no.
        for no in [
            "FROM b\nRUN make -j\"$(nproc)\"\n",
            "FROM b\nRUN --mount=type=secret,id=tok cat /run/secrets/tok\n",
            "FROM b\nRUN --mount=type=cache,id=kiln-jobs,target=/c make\n",
            "FROM b\nRUN cat /run/secrets/kiln-jobs || true\n",
            "FROM b\n# RUN --mount=type=secret,id=kiln-jobs make\nRUN make\n",
        ] {
            assert!(!wanted(&spec, &mounts(no, None)), "{no}");
        }
        // A stage the target does not need does not count; one it copies
        // from does.
        let staged = "FROM b AS compile\nRUN --mount=type=secret,id=kiln-jobs make\nFROM b AS docs\nRUN true\nFROM b AS final\nCOPY --from=compile /out /out\n";
        assert!(!wanted(&spec, &mounts(staged, Some("docs"))));
        assert!(wanted(&spec, &mounts(staged, Some("final"))));
        // The user's own secret of that id wins.
        let own = BuildSpec {
            secrets: vec![SecretSpec {
                id: SECRET_ID.into(),
                src: None,
                env: Some("MY_JOBS".into()),
            }],
            ..BuildSpec::default()
        };
        assert!(!wanted(&own, &mounts(yes, None)));
    }

    #[test]
    fn a_build_gets_its_share_of_the_node() {
        // 16 GB free at 2 GB per job: 8 jobs on the node.
        assert_eq!(per_build(8, 1), 8);
        assert_eq!(per_build(8, 2), 4);
        assert_eq!(per_build(8, 3), 2);
        // Never zero: more slots than jobs, or a node with nothing free.
        assert_eq!(per_build(3, 4), 1);
        assert_eq!(per_build(1, 8), 1);
        assert_eq!(per_build(0, 1), 1);
        assert_eq!(per_build(8, 0), 8, "no slots means one");
        // The same as flooring the unrounded quotient: 15.9 GB / 2 GB / 2.
        let node = (15.9f64 / 2.0).floor() as u32;
        assert_eq!(per_build(node, 2), (15.9f64 / 2.0 / 2.0).floor() as u32);
    }

    #[test]
    fn the_value_file_is_private_and_newline_terminated() {
        let dir = std::env::temp_dir().join(format!("kiln-jobs-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let s = write_secret(&dir, 6).unwrap();
        assert_eq!(s.id, SECRET_ID);
        let path = s.src.unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "6\n");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
