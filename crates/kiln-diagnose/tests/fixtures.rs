//! The reports of the fixture logs (tests/fixtures/README.md says where
//! each comes from): real plain logs from this repository's engine, a
//! CI-style plain log with runner timestamps, rawjson logs written in
//! the one-object-a-line format, real logs of buildx 0.13 on BuildKit 0.13
//! (indented rawjson, plain), and inline cache as BuildKit ≥ 0.12 shows it.

use kiln_diagnose::contract::{
    ExportKind, ImportCause, LogFormat, Outcome, Report, TransferOutcome, Verdict,
};

fn report(name: &str) -> Report {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    kiln_diagnose::diagnose(&kiln_diagnose::parse(&bytes), None).expect("BuildKit progress")
}

/// `(name, total, cached)` of every stage, in report order.
fn stages(r: &Report) -> Vec<(&str, u64, u64)> {
    r.stages
        .iter()
        .map(|s| (s.name.as_str(), s.total, s.cached))
        .collect()
}

#[test]
fn cold_build_rebuilds_everything_without_import() {
    let r = report("plain-cold.log");
    assert_eq!(r.input.format, LogFormat::Plain);
    assert_eq!(r.outcome, Outcome::Succeeded);
    assert_eq!((r.steps.total, r.steps.cached, r.steps.rebuilt), (7, 0, 7));
    assert_eq!(
        stages(&r),
        [("base", 2, 0), ("build", 3, 0), ("stage-2", 2, 0)]
    );
    assert!(r.imports.is_empty() && r.exports.is_empty());
    assert_eq!(r.verdict, Verdict::NoCacheImport);
    assert_eq!(r.findings, [Verdict::NoCacheImport, Verdict::NoCacheExport]);
    assert_eq!(
        r.longest[0].step,
        "RUN echo build-1796020073025015797 > /build.txt && sleep 1"
    );
    assert_eq!(r.longest[0].time_s, 1.1);
    assert_eq!(r.time_s, 1.7);
}

#[test]
fn warm_build_is_all_cached_but_exports_nothing() {
    let r = report("plain-warm.log");
    assert_eq!((r.steps.total, r.steps.cached), (7, 7));
    assert_eq!(
        stages(&r),
        [("base", 2, 2), ("build", 3, 3), ("stage-2", 2, 2)]
    );
    assert_eq!(r.verdict, Verdict::NoCacheExport);
    assert!(r.longest.is_empty());
}

#[test]
fn missing_cache_from_ref_is_an_import_failure() {
    let r = report("plain-missing-cache-from.log");
    assert_eq!((r.steps.total, r.steps.cached), (7, 6));
    assert_eq!(r.imports.len(), 1);
    let i = &r.imports[0];
    assert_eq!(i.reference, "127.0.0.1:5000/dx-missing/nothere:none");
    assert_eq!(i.outcome, TransferOutcome::Error);
    assert_eq!(i.cause, Some(ImportCause::NotFound));
    assert_eq!(r.verdict, Verdict::ImportFailed);
    // The recap block after the build is not progress, and not an import.
    assert_eq!(r.input.unrecognized, 3);
    // `#3` is printed twice with the same name: one vertex.
    assert_eq!(r.outcome, Outcome::Succeeded);
}

#[test]
fn inline_cache_export_and_import() {
    let r = report("plain-inline-export.log");
    assert_eq!(r.exports.len(), 1);
    assert_eq!(r.exports[0].name, "exporting cache");
    assert_eq!(r.exports[0].kind, ExportKind::Unspecified);
    assert_eq!(r.exports[0].outcome, TransferOutcome::Ok);
    assert_eq!((r.steps.total, r.steps.cached), (7, 6));
    assert_eq!(r.verdict, Verdict::NoCacheImport);
    assert_eq!(r.findings, [Verdict::NoCacheImport]);

    let r = report("plain-inline-import.log");
    assert_eq!(r.imports.len(), 1);
    assert_eq!(r.imports[0].reference, "127.0.0.1:5000/dx/inline:t1");
    assert_eq!(r.imports[0].outcome, TransferOutcome::Ok);
    assert_eq!((r.steps.total, r.steps.cached), (7, 7));
    assert_eq!(r.verdict, Verdict::Healthy);
    assert!(r.findings.is_empty() && r.hint.is_none());
}

#[test]
fn failed_build() {
    let r = report("plain-failed.log");
    assert_eq!(r.outcome, Outcome::Failed);
    assert_eq!((r.steps.total, r.steps.failed), (5, 1));
    assert_eq!(
        stages(&r),
        [("right", 1, 0), ("left", 1, 0), ("stage-2", 3, 0)]
    );
    // No export is expected from a failed build.
    assert_eq!(r.findings, [Verdict::NoCacheImport]);
}

#[test]
fn ci_log_with_runner_timestamps_and_interleaving() {
    let r = report("plain-seed000.log");
    assert_eq!(r.input.builds, 1);
    assert_eq!(r.input.unrecognized, 0);
    assert_eq!(r.outcome, Outcome::Succeeded);
    assert_eq!((r.steps.total, r.steps.cached), (14, 0));
    assert_eq!(
        stages(&r),
        [
            ("base_os", 2, 0),
            ("build_python", 1, 0),
            ("setup_therock", 2, 0),
            ("build_rocm", 1, 0),
            ("ffmpeg_builder", 1, 0),
            ("base", 2, 0),
            ("build_torch_stack", 2, 0),
            ("core", 3, 0),
        ]
    );
    // Interrupted (`#11 ...`) and resumed, the step keeps its one DONE time.
    assert_eq!(r.longest[0].stage, "build_rocm");
    assert_eq!(r.longest[0].time_s, 12848.5);
    assert_eq!(r.longest.len(), 5);
    // Seed 000's run: nothing imported, nothing cached, nothing exported.
    assert_eq!(r.verdict, Verdict::NoCacheImport);
    assert_eq!(r.findings, [Verdict::NoCacheImport, Verdict::NoCacheExport]);
}

#[test]
fn rawjson_registry_cache() {
    let r = report("rawjson-registry.jsonl");
    assert_eq!(r.input.format, LogFormat::Rawjson);
    assert_eq!(r.outcome, Outcome::Succeeded);
    assert_eq!((r.steps.total, r.steps.cached), (4, 1));
    assert_eq!(stages(&r), [("build", 3, 1), ("stage-1", 1, 0)]);
    assert_eq!(r.imports[0].outcome, TransferOutcome::Ok);
    assert_eq!(r.imports[0].time_s, 0.45);
    let e = &r.exports[0];
    assert_eq!(
        (e.kind, e.outcome, e.layers, e.time_s),
        (ExportKind::Registry, TransferOutcome::Ok, 3, 4.0)
    );
    assert_eq!(r.longest[0].step, "RUN make -C /src");
    assert_eq!(r.longest[0].time_s, 42.5);
    assert_eq!(r.verdict, Verdict::Healthy);
}

#[test]
fn rawjson_missing_ref() {
    let r = report("rawjson-missing-ref.jsonl");
    assert_eq!((r.steps.total, r.steps.cached), (4, 0));
    let i = &r.imports[0];
    assert_eq!(i.outcome, TransferOutcome::Error);
    assert_eq!(i.cause, Some(ImportCause::NotFound));
    assert!(
        i.error
            .as_deref()
            .unwrap()
            .starts_with("failed to configure registry cache importer")
    );
    assert_eq!(r.verdict, Verdict::ImportFailed);
    assert_eq!(r.findings, [Verdict::ImportFailed]);
}

#[test]
fn rawjson_truncated_mid_line() {
    let r = report("rawjson-truncated.jsonl");
    assert_eq!(r.outcome, Outcome::Incomplete);
    assert_eq!(r.input.unrecognized, 1, "the cut line");
    assert_eq!((r.steps.total, r.steps.cached), (4, 1));
    // An unfinished build is not blamed for exporting nothing.
    assert!(!r.findings.contains(&Verdict::NoCacheExport));
}

#[test]
fn buildx_013_cold_rawjson_missing_import_and_registry_export() {
    let r = report("buildx-0.13-cold.rawjson");
    assert_eq!(r.input.format, LogFormat::Rawjson);
    assert_eq!(
        (r.input.lines, r.input.unrecognized, r.input.builds),
        (951, 0, 1)
    );
    assert_eq!(r.outcome, Outcome::Succeeded);
    assert_eq!(
        (
            r.steps.total,
            r.steps.cached,
            r.steps.rebuilt,
            r.steps.failed
        ),
        (4, 0, 4, 0)
    );
    // In the order the log first names them: the solver announces the
    // final stage's steps first.
    assert_eq!(stages(&r), [("stage-1", 2, 0), ("builder", 2, 0)]);
    assert_eq!(r.imports.len(), 1);
    let i = &r.imports[0];
    assert_eq!(i.reference, "127.0.0.1:5000/fx/app:buildcache");
    assert_eq!(i.outcome, TransferOutcome::Error);
    assert_eq!(i.cause, Some(ImportCause::NotFound));
    assert_eq!(
        i.error.as_deref(),
        Some(
            "failed to configure registry cache importer: 127.0.0.1:5000/fx/app:buildcache: not found"
        )
    );
    assert_eq!(r.exports.len(), 1);
    let e = &r.exports[0];
    assert_eq!(e.name, "exporting cache to registry");
    assert_eq!(
        (e.kind, e.outcome, e.layers, e.time_s),
        (ExportKind::Registry, TransferOutcome::Ok, 5, 0.261)
    );
    assert_eq!(r.longest[0].step, "RUN cat /f > /built && sleep 1");
    assert_eq!((r.longest[0].time_s, r.longest[0].cached), (1.137, false));
    assert_eq!(r.time_s, 1.375);
    assert_eq!(r.verdict, Verdict::ImportFailed);
    assert_eq!(r.findings, [Verdict::ImportFailed]);
}

#[test]
fn buildx_013_warm_rawjson_all_cached_from_registry() {
    let r = report("buildx-0.13-warm.rawjson");
    assert_eq!(r.input.format, LogFormat::Rawjson);
    assert_eq!(
        (r.input.lines, r.input.unrecognized, r.input.builds),
        (912, 0, 1)
    );
    assert_eq!(r.outcome, Outcome::Succeeded);
    assert_eq!(
        (
            r.steps.total,
            r.steps.cached,
            r.steps.rebuilt,
            r.steps.failed
        ),
        (4, 4, 0, 0)
    );
    // The builder stage is not in the final image: only the mode=max
    // registry cache held it.
    assert_eq!(stages(&r), [("stage-1", 2, 2), ("builder", 2, 2)]);
    assert_eq!(r.imports.len(), 1);
    let i = &r.imports[0];
    assert_eq!(i.reference, "127.0.0.1:5000/fx/app:buildcache");
    assert_eq!(
        (i.outcome, i.error.as_deref(), i.cause),
        (TransferOutcome::Ok, None, None)
    );
    assert_eq!(r.exports.len(), 1);
    let e = &r.exports[0];
    assert_eq!(e.name, "exporting cache to registry");
    assert_eq!(
        (e.kind, e.outcome, e.layers, e.time_s),
        (ExportKind::Registry, TransferOutcome::Ok, 5, 0.132)
    );
    assert_eq!(r.verdict, Verdict::Healthy);
    assert!(r.findings.is_empty() && r.hint.is_none());
    assert_eq!(
        r.why,
        "4 of 4 steps cached; 1 cache import(s) succeeded; cache exported"
    );
}

#[test]
fn buildx_013_warm_plain_agrees_with_rawjson() {
    let plain = report("buildx-0.13-warm.log");
    assert_eq!(plain.input.format, LogFormat::Plain);
    assert_eq!(
        (
            plain.input.lines,
            plain.input.unrecognized,
            plain.input.builds
        ),
        (82, 0, 1)
    );
    assert_eq!(plain.outcome, Outcome::Succeeded);
    assert_eq!(stages(&plain), [("builder", 2, 2), ("stage-1", 2, 2)]);
    let i = &plain.imports[..];
    assert_eq!(i.len(), 1);
    assert_eq!(
        (i[0].reference.as_str(), i[0].outcome),
        ("127.0.0.1:5000/fx/app:buildcache", TransferOutcome::Ok)
    );
    let e = &plain.exports[..];
    assert_eq!(e.len(), 1);
    assert_eq!(
        (e[0].name.as_str(), e[0].kind, e[0].outcome, e[0].layers),
        (
            "exporting cache to registry",
            ExportKind::Registry,
            TransferOutcome::Ok,
            5
        )
    );
    assert_eq!(plain.verdict, Verdict::Healthy);

    // The same build in both forms: the same steps, stages (the two
    // printers name them in different orders), transfers and verdict.
    let raw = report("buildx-0.13-warm.rawjson");
    assert_eq!(plain.steps, raw.steps);
    let sorted = |r: &Report| {
        let mut s: Vec<(String, u64, u64, u64)> = r
            .stages
            .iter()
            .map(|s| (s.name.clone(), s.total, s.cached, s.rebuilt))
            .collect();
        s.sort();
        s
    };
    assert_eq!(sorted(&plain), sorted(&raw));
    let transfers = |r: &Report| {
        (
            r.imports
                .iter()
                .map(|i| (i.reference.clone(), i.outcome, i.cause))
                .collect::<Vec<_>>(),
            r.exports
                .iter()
                .map(|e| (e.name.clone(), e.kind, e.outcome, e.layers))
                .collect::<Vec<_>>(),
        )
    };
    assert_eq!(transfers(&plain), transfers(&raw));
    assert_eq!(plain.outcome, raw.outcome);
    assert_eq!(
        (plain.verdict, &plain.findings),
        (raw.verdict, &raw.findings)
    );
    assert_eq!(plain.why, raw.why);
}

#[test]
fn buildx_013_failed_rawjson_then_error_text() {
    let r = report("buildx-0.13-failed.rawjson");
    assert_eq!(r.input.format, LogFormat::Rawjson);
    // buildx's error text after the stream: `Dockerfile:3`, the excerpt
    // between two rules, `ERROR: failed to solve: …`.
    assert_eq!(
        (r.input.lines, r.input.unrecognized, r.input.builds),
        (349, 8, 1)
    );
    assert_eq!(r.outcome, Outcome::Failed);
    assert_eq!(
        (
            r.steps.total,
            r.steps.cached,
            r.steps.rebuilt,
            r.steps.failed
        ),
        (2, 1, 1, 1)
    );
    assert_eq!(stages(&r), [("stage-0", 2, 1)]);
    assert!(r.imports.is_empty() && r.exports.is_empty());
    // No export is expected from a failed build.
    assert_eq!(r.verdict, Verdict::NoCacheImport);
    assert_eq!(r.findings, [Verdict::NoCacheImport]);
    assert_eq!(
        r.why,
        "1 of 2 steps were rebuilt and no cache import was attempted"
    );
}

#[test]
fn buildx_013_inline_cache_inside_exporting_to_image() {
    for name in [
        "buildx-0.13-inline-export.log",
        "buildx-0.13-inline-export.rawjson",
    ] {
        let r = report(name);
        assert_eq!(r.input.unrecognized, 0, "{name}");
        assert_eq!(r.outcome, Outcome::Succeeded, "{name}");
        assert_eq!(stages(&r), [("stage-0", 2, 1)], "{name}");
        assert!(r.imports.is_empty(), "{name}");
        assert_eq!(r.exports.len(), 1, "{name}");
        let e = &r.exports[0];
        assert_eq!(e.name, "preparing layers for inline cache", "{name}");
        assert_eq!(
            (e.kind, e.outcome, e.error.as_deref(), e.layers),
            (ExportKind::Inline, TransferOutcome::Ok, None, 0),
            "{name}"
        );
        // The inline export counts: only the missing import is a finding.
        assert_eq!(r.verdict, Verdict::NoCacheImport, "{name}");
        assert_eq!(r.findings, [Verdict::NoCacheImport], "{name}");
    }
    assert_eq!(
        report("buildx-0.13-inline-export.log").exports[0].time_s,
        0.0
    );
    assert_eq!(
        report("buildx-0.13-inline-export.rawjson").exports[0].time_s,
        0.029
    );
}

#[test]
fn inline_cache_follows_its_image_export() {
    let log = |body: &str| {
        let text = format!(
            "#1 [1/2] FROM docker.io/kiln/busybox:latest\n#1 DONE 0.0s\n\n\
             #2 [2/2] RUN true\n#2 DONE 0.1s\n\n\
             #3 exporting to image\n#3 exporting layers 0.1s done\n{body}"
        );
        kiln_diagnose::diagnose(&kiln_diagnose::parse(text.as_bytes()), None).unwrap()
    };
    // The push of the image, and with it the inline cache, failed.
    let r = log(
        "#3 preparing layers for inline cache\n#3 preparing layers for inline cache 0.3s done\n\
         #3 ERROR: failed to push 127.0.0.1:5000/x/inl:1: connection refused\n",
    );
    assert_eq!(r.outcome, Outcome::Failed);
    let e = &r.exports[0];
    assert_eq!(
        (e.kind, e.outcome, e.time_s),
        (ExportKind::Inline, TransferOutcome::Error, 0.3)
    );
    assert_eq!(
        e.error.as_deref(),
        Some("failed to push 127.0.0.1:5000/x/inl:1: connection refused")
    );
    // The log ends while the image is exported.
    let r = log("#3 preparing layers for inline cache\n");
    assert_eq!(r.exports[0].outcome, TransferOutcome::Incomplete);
    // Without the status the image export is no cache export.
    let r = log("#3 DONE 0.2s\n");
    assert!(r.exports.is_empty());
    assert_eq!(r.findings, [Verdict::NoCacheImport, Verdict::NoCacheExport]);
    // Some logs show the status as a vertex of its own.
    let r = log("#3 DONE 0.2s\n\n#4 preparing layers for inline cache\n#4 DONE 9.5s\n");
    assert_eq!(r.exports.len(), 1);
    let e = &r.exports[0];
    assert_eq!(
        (e.name.as_str(), e.kind, e.outcome, e.time_s),
        (
            "preparing layers for inline cache",
            ExportKind::Inline,
            TransferOutcome::Ok,
            9.5
        )
    );
}

#[test]
fn not_buildkit_output() {
    let t = kiln_diagnose::parse(
        b"Sending build context to Docker daemon  2.048kB\nStep 1/2 : FROM x\n",
    );
    let e = kiln_diagnose::diagnose(&t, None).unwrap_err();
    assert!(e.to_string().contains("no BuildKit progress"), "{e}");
    assert!(kiln_diagnose::diagnose(&kiln_diagnose::parse(b""), None).is_err());
}

#[test]
fn several_builds_in_one_log_are_summed() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut log = std::fs::read(dir.join("plain-cold.log")).unwrap();
    log.extend(std::fs::read(dir.join("plain-warm.log")).unwrap());
    let r = kiln_diagnose::diagnose(&kiln_diagnose::parse(&log), None).unwrap();
    assert_eq!(r.input.builds, 2);
    assert_eq!((r.steps.total, r.steps.cached), (14, 7));
    assert_eq!(
        stages(&r),
        [("base", 4, 2), ("build", 6, 3), ("stage-2", 4, 2)]
    );
}

#[test]
fn json_contract_field_names() {
    let r = report("rawjson-missing-ref.jsonl");
    let v = serde_json::to_value(&r).unwrap();
    for k in [
        "steps", "imports", "exports", "stages", "verdict", "longest", "why", "hint",
    ] {
        assert!(v.get(k).is_some(), "{k} missing");
    }
    assert_eq!(v["steps"]["total"], 4);
    assert_eq!(v["steps"]["cached"], 0);
    assert_eq!(v["stages"][0]["name"], "build");
    assert_eq!(v["imports"][0]["ref"], "registry.example/app:buildcache");
    assert_eq!(v["imports"][0]["cause"], "not-found");
    assert_eq!(v["exports"][0]["kind"], "registry");
    assert_eq!(v["verdict"], "import-failed");
    assert!(v.get("rebuilds").is_none(), "only with --inputs");
}

/// The report of a fixture log after `edit` (to derive variants of it).
fn report_edited(name: &str, edit: impl Fn(String) -> String) -> Report {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let text = edit(text);
    kiln_diagnose::diagnose(&kiln_diagnose::parse(text.as_bytes()), None)
        .expect("BuildKit progress")
}

#[test]
fn buildx_013_fully_cached_from_registry_without_export_is_healthy() {
    for name in [
        "buildx-0.13-warm-no-export.rawjson",
        "buildx-0.13-warm-no-export.log",
    ] {
        let r = report(name);
        assert_eq!(r.input.unrecognized, 0, "{name}");
        assert_eq!(r.outcome, Outcome::Succeeded, "{name}");
        assert_eq!(
            (r.steps.total, r.steps.cached, r.steps.rebuilt),
            (4, 4, 0),
            "{name}"
        );
        assert_eq!(r.imports.len(), 1, "{name}");
        assert_eq!(
            (r.imports[0].reference.as_str(), r.imports[0].outcome),
            ("127.0.0.1:5000/fx/app:buildcache", TransferOutcome::Ok),
            "{name}"
        );
        assert!(r.exports.is_empty(), "{name}");
        // Nothing was built, so nothing stays in the builder's local cache
        // only: not `no-cache-export`.
        assert_eq!(r.verdict, Verdict::Healthy, "{name}");
        assert!(r.findings.is_empty() && r.hint.is_none(), "{name}");
        assert_eq!(
            r.why,
            "4 of 4 steps cached; 1 cache import(s) succeeded; no cache export configured: \
             nothing was rebuilt, so nothing was lost, but a future rebuild would stay in this \
             builder's local cache (add --cache-to type=registry,ref=<repo>:buildcache,mode=max \
             to share it)",
            "{name}"
        );
        assert!(!r.why.contains("what was built here"), "{name}");
    }
    // The two forms of the same build agree.
    let (plain, raw) = (
        report("buildx-0.13-warm-no-export.log"),
        report("buildx-0.13-warm-no-export.rawjson"),
    );
    assert_eq!(plain.steps, raw.steps);
    assert_eq!((plain.verdict, &plain.why), (raw.verdict, &raw.why));
}

#[test]
fn no_cache_export_still_fires_when_something_was_rebuilt_or_imported_nothing() {
    // The same build with the builder's `RUN` rebuilt: that layer is in
    // this builder's local cache only.
    let rebuilt = |t: String| t.replace("#7 CACHED\n", "#7 DONE 1.0s\n");
    let r = report_edited("buildx-0.13-warm-no-export.log", rebuilt);
    assert_eq!((r.steps.total, r.steps.cached, r.steps.rebuilt), (4, 3, 1));
    assert_eq!(r.imports[0].outcome, TransferOutcome::Ok);
    assert_eq!(r.verdict, Verdict::NoCacheExport);
    assert_eq!(r.findings, [Verdict::NoCacheExport]);
    assert_eq!(
        r.why,
        "no cache export in the log: what was built here stays in this builder's local cache only"
    );
    assert!(r.hint.as_deref().unwrap().contains("--cache-to"));

    // With the export, the same rebuild is healthy.
    let r = report_edited("buildx-0.13-warm.log", rebuilt);
    assert_eq!(r.steps.rebuilt, 1);
    assert_eq!(r.verdict, Verdict::Healthy);

    // The import failed: every step came from the builder's local cache,
    // which nothing shares in either direction.
    let r = report_edited("buildx-0.13-warm-no-export.log", |t| {
        t.replace(
            "#5 DONE 0.0s\n",
            "#5 ERROR: failed to configure registry cache importer: \
             127.0.0.1:5000/fx/app:buildcache: not found\n",
        )
    });
    assert_eq!(r.steps.rebuilt, 0);
    assert_eq!(r.verdict, Verdict::ImportFailed);
    assert_eq!(r.findings, [Verdict::ImportFailed, Verdict::NoCacheExport]);

    // An export that was attempted and failed is still a finding, even
    // when nothing was rebuilt: the next rebuild's export fails too.
    let r = report_edited("buildx-0.13-warm.log", |t| {
        t.replace(
            "#12 writing cache image manifest sha256:097e10627be9c6800d9ba8bd14a4217d24dc19b47a57a2c2c272704660b5f1d0 done\n#12 DONE 0.1s\n",
            "#12 ERROR: failed to push 127.0.0.1:5000/fx/app:buildcache: unauthorized\n",
        )
    });
    assert_eq!(
        (r.steps.rebuilt, r.exports[0].outcome),
        (0, TransferOutcome::Error)
    );
    assert_eq!(r.verdict, Verdict::NoCacheExport);

    // No import at all (a warm local builder, `plain-warm.log`): still
    // `no-cache-export`, and the why says where the steps came from.
    let r = report("plain-warm.log");
    assert!(r.imports.is_empty());
    assert_eq!(r.verdict, Verdict::NoCacheExport);
    assert_eq!(
        r.why,
        "no cache export in the log and no cache imported: all 7 steps came from this builder's \
         local cache, which no other builder shares"
    );
}
