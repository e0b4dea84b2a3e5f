//! `--inputs`: seed 000's run 116, where the Dockerfile's TRITON/PYTORCH
//! commit pins were bumped: rebuilding `build_torch_stack` and what reads it
//! is legitimate; `base_os`, `build_python`, `ffmpeg_builder` and `base`
//! rebuilding is not ("stages which do not consume those ARGs also produced
//! zero hits").

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kiln_diagnose::Inputs;
use kiln_diagnose::contract::Verdict;
use kiln_dockerfile::dockerfile::analyze;
use kiln_plan::key::{ContextFile, InputManifest};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// The manifest kiln records for `df` built with `args` (as
/// `kiln_engine::inputs::gather` builds it, without context files or images).
fn manifest_of(df: &str, args: &[(&str, &str)]) -> InputManifest {
    let given: BTreeMap<String, String> = args
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let a = analyze(df, None, &given).unwrap();
    InputManifest {
        recipe: "k1".into(),
        dockerfile: a.needed_text.clone(),
        platform: "linux/amd64".into(),
        args: a
            .consumed_args
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), v.clone()?)))
            .collect(),
        images: a
            .images
            .iter()
            .map(|i| (i.clone(), format!("sha256:{}", "69".repeat(32))))
            .collect(),
        ..Default::default()
    }
}

/// The manifest of the fixture Dockerfile with the two commit pins given
/// and its two context files.
fn manifest(pytorch: &str, triton: &str) -> InputManifest {
    let df = std::fs::read_to_string(fixtures().join("seed000.Dockerfile"))
        .unwrap()
        .replace(
            "PYTORCH_COMMIT=1111111",
            &format!("PYTORCH_COMMIT={pytorch}"),
        )
        .replace("TRITON_COMMIT=aaaaaaa", &format!("TRITON_COMMIT={triton}"));
    let mut m = manifest_of(&df, &[]);
    m.files = ["therock/build.sh", "therock/setup.sh"]
        .iter()
        .map(|p| ContextFile {
            path: (*p).into(),
            mode: 0o755,
            digest: format!("blake3:{}", "ab".repeat(32)),
        })
        .collect();
    m.normalize();
    m
}

fn seed_log() -> Vec<u8> {
    std::fs::read(fixtures().join("plain-seed000.log")).unwrap()
}

/// The checked-in `--inputs` file the CLI tests use is what this test
/// builds (`KILN_UPDATE_FIXTURES=1` rewrites it).
#[test]
fn inputs_fixture_is_current() {
    let pair = serde_json::json!({
        "old": manifest("1111111", "aaaaaaa"),
        "new": manifest("2222222", "bbbbbbb"),
    });
    let text = serde_json::to_string_pretty(&pair).unwrap() + "\n";
    let path = fixtures().join("seed000-inputs.json");
    if std::env::var("KILN_UPDATE_FIXTURES").as_deref() == Ok("1") {
        std::fs::write(&path, &text).unwrap();
    }
    assert_eq!(
        std::fs::read_to_string(&path).unwrap_or_default(),
        text,
        "run with KILN_UPDATE_FIXTURES=1 to rewrite {}",
        path.display()
    );
}

#[test]
fn bumped_pins_explain_only_the_stages_that_consume_them() {
    let inputs = Inputs::new(
        &manifest("1111111", "aaaaaaa"),
        &manifest("2222222", "bbbbbbb"),
    )
    .unwrap();
    let trace = kiln_diagnose::parse(&seed_log());
    let r = kiln_diagnose::diagnose(&trace, Some(&inputs)).unwrap();
    let rb = r.rebuilds.as_ref().unwrap();
    // build_torch_stack (2 steps) and core's COPY --from=build_torch_stack
    // and the RUN after it; core's first COPY (--from=build_rocm) is not.
    assert_eq!((rb.legitimate, rb.unexplained), (4, 10));
    assert_eq!(
        rb.unexplained_stages,
        [
            "base_os",
            "build_python",
            "setup_therock",
            "build_rocm",
            "ffmpeg_builder",
            "base",
            "core"
        ]
    );
    assert!(rb.notes.is_empty(), "{:?}", rb.notes);
    assert!(
        rb.changes
            .iter()
            .any(|c| c == "build arg TRITON_COMMIT: aaaaaaa → bbbbbbb")
    );
    let per: Vec<(&str, u64, u64)> = r
        .stages
        .iter()
        .map(|s| {
            let x = s.rebuilds.unwrap();
            (s.name.as_str(), x.legitimate, x.unexplained)
        })
        .collect();
    assert!(per.contains(&("build_torch_stack", 2, 0)));
    assert!(per.contains(&("core", 2, 1)));
    assert!(per.contains(&("base_os", 0, 2)));
    assert_eq!(r.verdict, Verdict::NoCacheImport);
    let text = kiln_diagnose::render_text(&r);
    assert!(text.contains("rebuilt without a changed input (a cache failure): base_os,"));
}

#[test]
fn nothing_changed_means_every_rebuild_is_unexplained() {
    let m = manifest("1111111", "aaaaaaa");
    let inputs = Inputs::new(&m, &m).unwrap();
    let r = kiln_diagnose::diagnose(&kiln_diagnose::parse(&seed_log()), Some(&inputs)).unwrap();
    let rb = r.rebuilds.unwrap();
    assert_eq!((rb.legitimate, rb.unexplained), (0, 14));
    assert!(rb.changes.is_empty());
}

#[test]
fn a_new_base_image_explains_everything_built_on_it() {
    let old = manifest("1111111", "aaaaaaa");
    let mut new = old.clone();
    for v in new.images.values_mut() {
        *v = "sha256:0000000000000000000000000000000000000000000000000000000000000000".into();
    }
    let inputs = Inputs::new(&old, &new).unwrap();
    let r = kiln_diagnose::diagnose(&kiln_diagnose::parse(&seed_log()), Some(&inputs)).unwrap();
    let rb = r.rebuilds.unwrap();
    assert_eq!((rb.legitimate, rb.unexplained), (14, 0));
}

#[test]
fn a_changed_context_file_explains_its_copy_and_what_follows() {
    let old = manifest("1111111", "aaaaaaa");
    let mut new = old.clone();
    new.files[1].digest = format!("blake3:{}", "cd".repeat(32));
    let inputs = Inputs::new(&old, &new).unwrap();
    let r = kiln_diagnose::diagnose(&kiln_diagnose::parse(&seed_log()), Some(&inputs)).unwrap();
    let legit: Vec<&str> = r
        .stages
        .iter()
        .filter(|s| s.rebuilds.is_some_and(|x| x.legitimate > 0))
        .map(|s| s.name.as_str())
        .collect();
    // therock/setup.sh is read by setup_therock's COPY; build_rocm starts
    // FROM it; core and build_torch_stack read build_rocm.
    assert_eq!(
        legit,
        ["setup_therock", "build_rocm", "build_torch_stack", "core"]
    );
    let core = r.stages.iter().find(|s| s.name == "core").unwrap();
    assert_eq!(core.rebuilds.unwrap().legitimate, 3);
}

#[test]
fn a_log_of_another_dockerfile_is_noted() {
    let m = manifest("1111111", "aaaaaaa");
    let inputs = Inputs::new(&m, &m).unwrap();
    let cold = std::fs::read(fixtures().join("plain-cold.log")).unwrap();
    let r = kiln_diagnose::diagnose(&kiln_diagnose::parse(&cold), Some(&inputs)).unwrap();
    let rb = r.rebuilds.unwrap();
    assert_eq!(rb.unexplained, 7);
    assert!(
        rb.notes
            .iter()
            .any(|n| n == "stage build is not in the new input manifest's Dockerfile"),
        "{:?}",
        rb.notes
    );
}

const DF: &str = "FROM img AS a\nRUN one\nARG X=1\nCOPY f /f\nRUN two\n\nFROM img AS c\nWORKDIR /w\nRUN four\n\nFROM a AS b\nRUN three\nCOPY --from=c /w /w\n";

#[test]
fn steps_are_numbered_as_buildkit_does_and_args_count_from_the_next_run() {
    let i = Inputs::new(&manifest_of(DF, &[]), &manifest_of(DF, &[("X", "2")])).unwrap();
    // a: FROM img = 1, RUN one = 2, COPY = 3, RUN two = 4 (ARG is no step);
    // X is declared after RUN one, first used implicitly by RUN two.
    assert_eq!(i.stage_steps("a"), Some(4));
    assert_eq!(i.first_legitimate_step("a"), Some(4));
    // c: FROM img, WORKDIR, RUN; it reads nothing that changed.
    assert_eq!(i.stage_steps("c"), Some(3));
    assert_eq!(i.first_legitimate_step("c"), None);
    // b starts FROM a (no step of its own for that), which changed: all of b.
    assert_eq!(i.stage_steps("b"), Some(2));
    assert_eq!(i.first_legitimate_step("b"), Some(1));
    assert_eq!(i.changes(), ["build arg X: 1 → 2"]);
}

#[test]
fn a_text_change_counts_from_its_instruction_and_reaches_copy_from() {
    let new = manifest_of(&DF.replace("RUN four", "RUN four --fast"), &[]);
    let i = Inputs::new(&manifest_of(DF, &[]), &new).unwrap();
    assert_eq!(i.first_legitimate_step("c"), Some(3));
    assert_eq!(i.first_legitimate_step("a"), None);
    // b reads c with its second step, COPY --from=c.
    assert_eq!(i.first_legitimate_step("b"), Some(2));
    assert_eq!(i.changes(), ["Dockerfile: the needed stages' text changed"]);
}

#[test]
fn both_file_shapes_are_accepted() {
    let m = serde_json::to_value(manifest_of(DF, &[])).unwrap();
    let object = serde_json::json!({"old": m, "new": m}).to_string();
    let array = serde_json::json!([m, m]).to_string();
    assert!(Inputs::from_json(&object).unwrap().changes().is_empty());
    assert!(Inputs::from_json(&array).unwrap().changes().is_empty());
    assert!(
        Inputs::from_json("{}")
            .unwrap_err()
            .0
            .contains("expected {\"old\"")
    );
    assert!(
        Inputs::from_json("[1, 2]")
            .unwrap_err()
            .0
            .contains("the old input manifest")
    );
    assert!(
        Inputs::from_json("nope")
            .unwrap_err()
            .0
            .starts_with("not JSON")
    );
}
