//! Content keys gathered from the real twin (examples/twin): a change to a
//! consumed input changes exactly the keys of the targets that read it; a
//! change to anything no needed stage reads changes none.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kiln_engine::hashing::StatCache;
use kiln_engine::inputs::{external_images, gather};
use kiln_engine::{BuildSpec, ContextSource, SecretSpec};

fn twin_copy(tag: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/twin");
    let dst = std::env::temp_dir().join(format!("kiln-inputs-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dst);
    let st = std::process::Command::new("cp")
        .arg("-a")
        .arg(&src)
        .arg(&dst)
        .status()
        .unwrap();
    assert!(st.success());
    dst
}

fn specs(dir: &Path) -> Vec<BuildSpec> {
    let text = std::fs::read_to_string(dir.join("docker-bake.hcl")).unwrap();
    let opts = kiln_bake::Options::default();
    let bake = kiln_bake::load(vec![("docker-bake.hcl".into(), text)], &opts).unwrap();
    let r = bake
        .resolve(&["default".into(), "pytorch-run".into()], &[], &opts)
        .unwrap();
    r.targets
        .values()
        .map(|t| BuildSpec {
            name: t.name.clone(),
            context: dir.to_path_buf(),
            dockerfile: dir.join(t.dockerfile.clone().unwrap()),
            args: t
                .args
                .clone()
                .unwrap_or_default()
                .into_iter()
                .filter_map(|(k, v)| Some((k, v?)))
                .collect(),
            labels: t
                .labels
                .clone()
                .unwrap_or_default()
                .into_iter()
                .filter_map(|(k, v)| Some((k, v?)))
                .collect(),
            contexts: t
                .contexts
                .clone()
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, ContextSource::Target { name: v }))
                .collect(),
            secrets: t
                .secret
                .clone()
                .unwrap_or_default()
                .iter()
                .map(|e| SecretSpec {
                    id: e["id"].as_str().unwrap().into(),
                    src: None,
                    env: None,
                })
                .collect(),
            ..BuildSpec::default()
        })
        .collect()
}

/// Fixed digests for the images and upstreams a target reads.
type Digests = BTreeMap<String, String>;

fn fixed(s: &BuildSpec) -> (Digests, Digests) {
    let images = external_images(s, "linux/amd64")
        .unwrap()
        .into_iter()
        .map(|i| (i, "sha256:fixed-base".to_string()))
        .collect();
    let upstreams = s
        .contexts
        .keys()
        .map(|k| (k.clone(), format!("sha256:up-{k}")))
        .collect();
    (images, upstreams)
}

/// Every target's key, with fixed image and upstream digests.
fn keys(dir: &Path, cache: &StatCache) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for s in specs(dir) {
        let (images, upstreams) = fixed(&s);
        let (m, _) = gather(&s, "linux/amd64", &images, &upstreams, cache).unwrap();
        out.insert(s.name.clone(), m.key());
    }
    out
}

/// Changes one of lmcache's C sources, which only lmcache's key reads.
fn change_an_lmcache_source(dir: &Path) {
    let csrc = std::fs::read_dir(dir.join("src/lmcache/csrc"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.is_file() && !p.to_string_lossy().ends_with(".tmp"))
        .unwrap();
    let mut text = std::fs::read_to_string(&csrc).unwrap();
    text.push_str("\n// changed\n");
    std::fs::write(&csrc, text).unwrap();
}

fn changed(a: &BTreeMap<String, String>, b: &BTreeMap<String, String>) -> Vec<String> {
    a.iter()
        .filter(|(k, v)| b.get(*k) != Some(v))
        .map(|(k, _)| k.clone())
        .collect()
}

#[test]
fn keys_follow_exactly_what_each_target_consumes() {
    let dir = twin_copy("keys");
    let cache = StatCache::default();
    let base = keys(&dir, &cache);
    assert_eq!(base.len(), 15);
    assert_eq!(keys(&dir, &cache), base, "stable");

    // Unconsumed: a README, an ignored junk file, docs/, the sources of a
    // stage lmcache never builds.
    std::fs::write(dir.join("src/lmcache/README.md"), "changed").unwrap();
    std::fs::write(dir.join("src/lmcache/csrc/junk.tmp"), "junk").unwrap();
    std::fs::create_dir_all(dir.join("docs")).unwrap();
    std::fs::write(dir.join("docs/new.md"), "doc").unwrap();
    let tests_dir = dir.join("src/lmcache/tests");
    assert!(
        tests_dir.is_dir(),
        "the twin has an unneeded test stage with sources"
    );
    let f = std::fs::read_dir(&tests_dir)
        .unwrap()
        .flatten()
        .find(|e| e.path().is_file())
        .unwrap()
        .path();
    std::fs::write(&f, "changed test").unwrap();
    assert!(
        changed(&base, &keys(&dir, &cache)).is_empty(),
        "nothing consumed changed"
    );

    // Consumed: one of lmcache's C sources.
    change_an_lmcache_source(&dir);
    assert_eq!(
        changed(&base, &keys(&dir, &cache)),
        ["lmcache"],
        "upstream digests are fixed here, so only lmcache itself"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// What keys read of their targets' own files, gathered ahead of the keys
/// (`pregather`, while a run is prepared), is what they read when made:
/// the same keys. It is taken once: a file changed after it was gathered
/// is in the key made after that one.
#[test]
fn inputs_gathered_ahead_make_the_same_keys_and_are_taken_once() {
    let (made, ahead) = (twin_copy("made"), twin_copy("ahead"));
    let direct = keys(&made, &StatCache::default());
    let cache = StatCache::default();
    kiln_engine::inputs::pregather(&specs(&ahead), "linux/amd64", &cache);
    // Changed after it was gathered ahead: the first keys are those of the
    // files as they were gathered.
    change_an_lmcache_source(&ahead);
    // Ready: composed in place (what a key on the runtime does), once.
    let vllm = specs(&ahead)
        .into_iter()
        .find(|s| s.name == "vllm")
        .unwrap();
    let (images, upstreams) = fixed(&vllm);
    let ready = kiln_engine::inputs::gather_ready(&vllm, "linux/amd64", &images, &upstreams)
        .expect("gathered ahead");
    assert_eq!(ready.manifest.key(), direct["vllm"]);
    assert!(
        kiln_engine::inputs::gather_ready(&vllm, "linux/amd64", &images, &upstreams).is_none(),
        "taken once"
    );
    assert_eq!(keys(&ahead, &cache), direct);
    assert_eq!(changed(&direct, &keys(&ahead, &cache)), ["lmcache"]);
    let _ = std::fs::remove_dir_all(&made);
    let _ = std::fs::remove_dir_all(&ahead);
}

/// A thread waiting for something else (the preflight, for the engine's
/// answer) gathers from the last target back (`pregather_from_last`),
/// asking before each target whether it is still waiting: what it gathered
/// is what the keys take, and it stops when told, leaving the rest to the
/// thread gathering from the first target and to the keys.
#[test]
fn a_waiting_thread_gathers_from_the_last_target_back_until_told_to_stop() {
    let (made, ahead) = (twin_copy("from-last-made"), twin_copy("from-last"));
    let direct = keys(&made, &StatCache::default());
    let all = specs(&ahead);
    let cache = StatCache::default();
    let asked = std::cell::Cell::new(0);
    kiln_engine::inputs::pregather_from_last(&all, "linux/amd64", &cache, || {
        asked.set(asked.get() + 1);
        asked.get() <= 2
    });
    assert_eq!(
        asked.get(),
        3,
        "asked before each target, until told to stop"
    );
    let ready = |s: &BuildSpec| {
        let (images, upstreams) = fixed(s);
        kiln_engine::inputs::gather_ready(s, "linux/amd64", &images, &upstreams)
    };
    let (last, before, first) = (&all[all.len() - 1], &all[all.len() - 2], &all[0]);
    for s in [last, before] {
        let g = ready(s).unwrap_or_else(|| panic!("{} was gathered", s.name));
        assert_eq!(g.manifest.key(), direct[&s.name], "{}", s.name);
    }
    assert!(
        ready(&all[all.len() - 3]).is_none() && ready(first).is_none(),
        "nothing was gathered after it was told to stop"
    );
    let _ = std::fs::remove_dir_all(&made);
    let _ = std::fs::remove_dir_all(&ahead);
}

/// A key lists only the part of the context its sources can reach: a
/// `.git` that no target copies is never walked (a name there that no
/// listing can hold would fail a walk of the whole context).
#[test]
fn keys_do_not_walk_what_no_source_reaches() {
    use std::os::unix::ffi::OsStrExt;
    let dir = twin_copy("reach");
    let before = keys(&dir, &StatCache::default());
    let objects = dir.join(".git/objects/ab");
    std::fs::create_dir_all(&objects).unwrap();
    std::fs::write(objects.join(std::ffi::OsStr::from_bytes(b"\xff\xfe")), "x").unwrap();
    assert!(
        kiln_engine::context::list(&dir, None).is_err(),
        "a walk of the whole context meets the name"
    );
    let other = twin_copy("reach-again");
    std::fs::create_dir_all(other.join(".git/objects/ab")).unwrap();
    std::fs::write(
        other
            .join(".git/objects/ab")
            .join(std::ffi::OsStr::from_bytes(b"\xff\xfe")),
        "x",
    )
    .unwrap();
    assert_eq!(keys(&other, &StatCache::default()), before);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&other);
}
