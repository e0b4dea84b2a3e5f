//! Dockerfile analysis: one test per rule, the twin's Dockerfiles, and property tests.

use kiln_dockerfile::dockerfile::{
    Analysis, DepTarget, DepVia, DockerfileError, FromSource, InstructionKind, MountKind, PathKind,
    RemoteKind, SourceVia, analyze,
};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::path::PathBuf;

fn args(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn an(text: &str) -> Analysis {
    analyze(text, None, &BTreeMap::new()).unwrap_or_else(|e| panic!("{e}\n---\n{text}"))
}

fn an_t(text: &str, target: &str) -> Analysis {
    analyze(text, Some(target), &BTreeMap::new()).unwrap_or_else(|e| panic!("{e}"))
}

fn consumed(a: &Analysis) -> Vec<(String, Option<String>)> {
    a.consumed_args
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn c(k: &str, v: Option<&str>) -> (String, Option<String>) {
    (k.to_string(), v.map(String::from))
}

fn ctx(a: &Analysis) -> Vec<String> {
    a.context_sources.iter().map(|s| s.path.clone()).collect()
}

fn err(text: &str) -> DockerfileError {
    match analyze(text, None, &BTreeMap::new()) {
        Ok(_) => panic!("expected an error for:\n{text}"),
        Err(e) => e,
    }
}

// ---- stages and FROM ----------------------------------------------------------------

#[test]
fn stages_names_are_lowercased_and_from_is_classified() {
    let a = an("FROM alpine:3 AS Base\nFROM base AS Mid\nFROM scratch\nCOPY --from=MID /a /b\n");
    let names: Vec<_> = a.stages.iter().map(|s| s.name.clone()).collect();
    assert_eq!(names, [Some("base".into()), Some("mid".into()), None]);
    assert_eq!(a.stages[0].from, FromSource::Image("alpine:3".into()));
    assert_eq!(a.stages[1].from, FromSource::Stage(0));
    assert_eq!(a.stages[2].from, FromSource::Scratch);
    assert_eq!(a.needed, [0, 1, 2]);
    assert_eq!(a.images, ["alpine:3"]);
    assert_eq!(a.target, 2);
}

#[test]
fn from_expands_global_args_and_build_args_override() {
    let t = "ARG BASE=alpine\nARG TAG=3\nFROM ${BASE}:${TAG:-latest}\n";
    assert_eq!(an(t).images, ["alpine:3"]);
    let a = analyze(t, None, &args(&[("TAG", "4")])).unwrap();
    assert_eq!(a.images, ["alpine:4"]);
    assert_eq!(
        consumed(&a),
        [c("BASE", Some("alpine")), c("TAG", Some("4"))]
    );
}

#[test]
fn from_same_name_as_stage_is_an_image_named_context() {
    // The twin pattern: a named context overriding an image of the same name.
    let a = an("ARG P=pytorch-img\nFROM ${P} AS pytorch-img\nFROM pytorch-img\n");
    assert_eq!(a.stages[0].from, FromSource::Image("pytorch-img".into()));
    assert_eq!(a.stages[1].from, FromSource::Stage(0));
    assert_eq!(a.images, ["pytorch-img"]);
}

#[test]
fn from_platform_uses_automatic_args() {
    let a = an("FROM --platform=$BUILDPLATFORM golang AS b\nARG TARGETARCH\nRUN x\n");
    assert!(a.automatic_args.contains("BUILDPLATFORM"));
    assert!(a.automatic_args.contains("TARGETARCH"));
    assert_eq!(a.stages[0].platform.as_deref(), Some(""));
    let a = analyze(
        "FROM --platform=$BUILDPLATFORM golang\n",
        None,
        &args(&[("BUILDPLATFORM", "linux/amd64")]),
    )
    .unwrap();
    assert_eq!(a.stages[0].platform.as_deref(), Some("linux/amd64"));
}

// ---- needed stages -------------------------------------------------------------------

#[test]
fn only_stages_reachable_from_the_target_are_needed() {
    let t = "FROM a AS one\nCOPY one.txt /\nFROM b AS two\nCOPY two.txt /\n\
             FROM c AS three\nCOPY --from=one /x /x\nRUN --mount=from=two,target=/t true\n\
             FROM d AS unused\nCOPY unused.txt /\nFROM three\n";
    let a = an(t);
    assert_eq!(a.needed, [0, 1, 2, 4]);
    assert_eq!(ctx(&a), ["one.txt", "two.txt"]);
    assert_eq!(a.images, ["a", "b", "c"]);
    let a = an_t(t, "two");
    assert_eq!(a.needed, [1]);
    let a = an_t(t, "UNUSED");
    assert_eq!(a.needed, [3]);
    assert_eq!(ctx(&a), ["unused.txt"]);
}

#[test]
fn copy_from_index_and_image() {
    let a = an("FROM a\nRUN x\nFROM b\nCOPY --from=0 /x /x\nCOPY --from=busybox:1 /bin/sh /sh\n");
    let deps = &a.stages[1].deps;
    assert_eq!(deps[1].target, DepTarget::Stage(0));
    assert_eq!(deps[1].via, DepVia::CopyFrom);
    assert_eq!(deps[2].target, DepTarget::Image("busybox:1".into()));
    assert_eq!(a.images, ["a", "b", "busybox:1"]);
}

#[test]
fn copy_from_expands_stage_args() {
    let a = an("FROM a AS src\nFROM b\nARG FROM_STAGE=src\nCOPY --from=$FROM_STAGE /x /x\n");
    assert_eq!(a.stages[1].deps[1].target, DepTarget::Stage(0));
    assert_eq!(a.needed, [0, 1]);
}

#[test]
fn unknown_target_suggests_the_closest_name() {
    let e = analyze(
        "FROM a AS build\nFROM b AS test\n",
        Some("biuld"),
        &BTreeMap::new(),
    )
    .unwrap_err();
    assert!(
        matches!(&e, DockerfileError::UnknownTarget { suggestion: Some(s), .. } if s == "build")
    );
    assert!(e.to_string().contains("did you mean \"build\""), "{e}");
    let e = analyze("FROM a AS build\n", Some("zzzzzzzz"), &BTreeMap::new()).unwrap_err();
    assert!(e.to_string().contains("named stages are: build"), "{e}");
}

// ---- errors ---------------------------------------------------------------------------

#[test]
fn errors_have_lines() {
    let e = err("FROM a\nCOPYY x y\n");
    assert_eq!(e.line(), Some(2), "{e}");
    assert!(e.to_string().contains("unknown instruction"), "{e}");
    let e = err("RUN x\n");
    assert!(e.to_string().contains("FROM"), "{e}");
    let e = err("");
    assert!(matches!(e, DockerfileError::Parse { .. }), "{e}");
    let e = err("FROM a AS x\nCOPY --from=y /a /b\nFROM b AS y\n");
    assert_eq!(e.line(), Some(2));
    assert!(e.to_string().contains("defined after"), "{e}");
    let e = err("FROM a\nCOPY --from=1 /a /b\nFROM b\n");
    assert!(e.to_string().contains("defined after"), "{e}");
    let e = err("FROM a AS x\nCOPY --from=x /a /b\n");
    assert!(e.to_string().contains("itself"), "{e}");
    let e = err("FROM a\nCOPY --from=7 /a /b\n");
    assert!(e.to_string().contains("invalid stage index"), "{e}");
    let e = err("FROM a\n\nCOPY --bogus=1 /a /b\n");
    assert_eq!(e.line(), Some(3));
    assert!(
        e.to_string().contains("unknown flag --bogus for COPY"),
        "{e}"
    );
    let e = err("FROM a\nRUN --mount=type=nfs,target=/x true\n");
    assert!(e.to_string().contains("unsupported mount type"), "{e}");
    let e = err("FROM a\nRUN --mount=type=bind true\n");
    assert!(e.to_string().contains("target is required"), "{e}");
    let e = err("FROM --bogus=1 a\n");
    assert!(
        e.to_string().contains("unknown flag --bogus for FROM"),
        "{e}"
    );
    let e = err("FROM a\nADD --from=x /a /b\n");
    assert!(e.to_string().contains("--from for ADD"), "{e}");
    let e = err("FROM a\nARG X\nCOPY ${X:?must_be_set} /b\n");
    assert_eq!(e.line(), Some(3));
    assert!(e.to_string().contains("must_be_set"), "{e}");
}

#[test]
fn expansion_errors_in_unneeded_stages_are_not_reported() {
    let a = an("FROM a AS broken\nCOPY ${X:?} /b\nFROM b\nRUN ok\n");
    assert_eq!(a.needed, [1]);
}

// ---- ARG scoping ------------------------------------------------------------------------

#[test]
fn global_arg_is_not_visible_in_a_stage_unless_redeclared() {
    let a = an("ARG V=1\nFROM a\nCOPY f-${V} /\n");
    assert_eq!(ctx(&a), ["f-"]);
    assert!(a.consumed_args.is_empty(), "{:?}", a.consumed_args);
    let a = an("ARG V=1\nFROM a\nARG V\nCOPY f-${V} /\n");
    assert_eq!(ctx(&a), ["f-1"]);
    assert_eq!(consumed(&a), [c("V", Some("1"))]);
    let a = analyze(
        "ARG V=1\nFROM a\nARG V\nCOPY f-${V} /\n",
        None,
        &args(&[("V", "9")]),
    )
    .unwrap();
    assert_eq!(ctx(&a), ["f-9"]);
    assert_eq!(consumed(&a), [c("V", Some("9"))]);
}

#[test]
fn global_args_only_when_used_in_a_needed_from() {
    let t = "ARG A=a\nARG B=b\nARG UNUSED=u\nFROM ${A} AS one\nFROM ${B} AS two\n";
    assert_eq!(consumed(&an_t(t, "one")), [c("A", Some("a"))]);
    assert_eq!(consumed(&an_t(t, "two")), [c("B", Some("b"))]);
    // A global used in another global's default is consumed with it.
    let a = an("ARG REG=r.io\nARG IMG=${REG}/x\nFROM ${IMG}\n");
    assert_eq!(
        consumed(&a),
        [c("IMG", Some("r.io/x")), c("REG", Some("r.io"))]
    );
    assert_eq!(a.images, ["r.io/x"]);
    // ... unless the build arg replaces the default.
    let a = analyze(
        "ARG REG=r.io\nARG IMG=${REG}/x\nFROM ${IMG}\n",
        None,
        &args(&[("IMG", "y")]),
    )
    .unwrap();
    assert_eq!(consumed(&a), [c("IMG", Some("y"))]);
}

#[test]
fn arg_is_in_scope_only_after_its_declaration() {
    let a = an("FROM a\nCOPY pre-${V} /\nARG V=1\nCOPY post-${V} /\n");
    assert_eq!(ctx(&a), ["pre-", "post-1"]);
    assert_eq!(consumed(&a), [c("V", Some("1"))]);
}

#[test]
fn arg_redeclared_with_a_new_default_in_the_next_stage() {
    let t = "FROM a AS one\nARG V=1\nCOPY one-${V} /\nFROM one AS two\nARG V=2\nCOPY two-${V} /\n";
    let a = an(t);
    assert_eq!(ctx(&a), ["one-1", "two-2"]);
    assert_eq!(a.stages[0].args[0].value.as_deref(), Some("1"));
    assert_eq!(a.stages[1].args[0].value.as_deref(), Some("2"));
    // ARGs do not pass from a parent stage; ENV does.
    let a = an("FROM a AS one\nARG V=1\nENV E=e\nFROM one\nCOPY ${V}-${E} /\n");
    assert_eq!(ctx(&a), ["-e"]);
}

#[test]
fn env_overrides_arg_and_arg_defaults_expand() {
    let a = an("FROM a\nARG V=arg\nENV V=env\nCOPY ${V} /\nARG W=${V}-w\nCOPY $W /\n");
    assert_eq!(ctx(&a), ["env", "env-w"]);
    let a = an("FROM a\nENV A=1 B=\"x y\"\nENV C ${A} legacy\nCOPY ${B}/${C} /\n");
    assert_eq!(ctx(&a), ["x y/1 legacy"]);
}

#[test]
fn proxy_args_are_excluded_unless_declared() {
    let b = args(&[
        ("HTTP_PROXY", "http://p"),
        ("NOT_DECLARED", "x"),
        ("BUILDKIT_INLINE_CACHE", "1"),
    ]);
    let a = analyze("FROM a\nRUN curl x\n", None, &b).unwrap();
    assert!(a.consumed_args.is_empty());
    assert_eq!(
        a.frontend_args.keys().collect::<Vec<_>>(),
        ["BUILDKIT_INLINE_CACHE"]
    );
    let a = analyze("FROM a\nARG HTTP_PROXY\nRUN curl x\n", None, &b).unwrap();
    assert_eq!(consumed(&a), [c("HTTP_PROXY", Some("http://p"))]);
}

#[test]
fn multiple_args_in_one_instruction_with_quotes() {
    let a = an("FROM a\nARG A=1 B C=\"x y\"\nCOPY $A-${C} /\n");
    assert_eq!(ctx(&a), ["1-x y"]);
    assert_eq!(
        consumed(&a),
        [c("A", Some("1")), c("B", None), c("C", Some("x y"))]
    );
}

// ---- context sources ---------------------------------------------------------------------

#[test]
fn copy_and_add_sources_with_flags() {
    let t = "FROM a\nWORKDIR /w\nARG D=src\n\
             COPY --chown=1:1 --chmod=644 --link --parents ${D}/*.rs ./Cargo.toml /dst/\n\
             COPY --exclude=*.md docs/ /d/\n\
             ADD --checksum=sha256:abc https://x.io/f.tgz /f\n\
             ADD git@github.com:o/r.git#v1 /r\n\
             ADD https://github.com/o/r.git#main /r2\n\
             ADD local.tar /\n\
             COPY . /all\n\
             COPY [\"with space\", \"json.txt\", \"/dst/\"]\n";
    let a = an(t);
    let got: Vec<_> = a
        .context_sources
        .iter()
        .map(|s| (s.path.as_str(), s.kind, s.via, s.line))
        .collect();
    assert_eq!(
        got,
        [
            ("src/*.rs", PathKind::Glob, SourceVia::Copy, 4),
            ("./Cargo.toml", PathKind::Path, SourceVia::Copy, 4),
            ("docs/", PathKind::Directory, SourceVia::Copy, 5),
            ("local.tar", PathKind::Path, SourceVia::Add, 9),
            (".", PathKind::Whole, SourceVia::Copy, 10),
            ("with space", PathKind::Path, SourceVia::Copy, 11),
            ("json.txt", PathKind::Path, SourceVia::Copy, 11),
        ]
    );
    assert_eq!(a.context_sources[0].raw, "${D}/*.rs");
    assert_eq!(a.context_sources[2].excludes, ["*.md"]);
    let remote: Vec<_> = a
        .remote_sources
        .iter()
        .map(|r| (r.url.as_str(), r.kind, r.checksum.as_deref()))
        .collect();
    assert_eq!(
        remote,
        [
            ("https://x.io/f.tgz", RemoteKind::Http, Some("sha256:abc")),
            ("git@github.com:o/r.git#v1", RemoteKind::Git, None),
            ("https://github.com/o/r.git#main", RemoteKind::Git, None),
        ]
    );
}

#[test]
fn copy_heredoc_reads_no_context() {
    let a = an("FROM a\nCOPY <<EOF /dst\nhello\nEOF\nRUN <<EOF\necho $HOME\nEOF\n");
    assert!(a.context_sources.is_empty());
    assert_eq!(
        a.stages[0].instructions[1].text,
        "COPY <<EOF /dst\nhello\nEOF"
    );
    assert_eq!(a.stages[0].instructions[2].kind, InstructionKind::Run);
    assert_eq!(a.stages[0].instructions[2].line, 5);
    assert_eq!(a.stages[0].instructions[2].end_line, 7);
}

#[test]
fn run_heredocs_anywhere_in_the_command_are_part_of_the_instruction() {
    // BuildKit takes `<<WORD` anywhere in a RUN line, several in a row.
    let text = "FROM a\nRUN python3 - <<'PY'\nprint(1)\nPY\nRUN cat <<A > /a && cat <<-B > /b\na\nA\n\tb\n\tB\nCOPY f /f\n";
    let a = an(text);
    let inst = &a.stages[0].instructions;
    assert_eq!(inst.len(), 4, "{inst:?}");
    assert_eq!(inst[1].text, "RUN python3 - <<'PY'\nprint(1)\nPY");
    assert_eq!((inst[1].line, inst[1].end_line), (2, 4));
    assert_eq!(
        inst[2].text,
        "RUN cat <<A > /a && cat <<-B > /b\na\nA\n\tb\n\tB"
    );
    assert_eq!((inst[3].line, inst[3].kind), (10, InstructionKind::Copy));
    assert_eq!(ctx(&a), ["f"]);
    // A change in a body is a change of the stage's text (and key).
    let changed = an(&text.replace("print(1)", "print(2)"));
    assert_ne!(a.needed_text, changed.needed_text);
    let same = an(text);
    assert_eq!(a.needed_text, same.needed_text);
}

#[test]
fn run_mounts() {
    let t = "FROM a AS w\nFROM b\nARG SECRET_ID=tok\n\
             RUN --mount=type=bind,target=/src \\\n\
                 --mount=type=bind,source=sub/dir,target=/s \\\n\
                 --mount=type=bind,from=w,source=/o,target=/o \\\n\
                 --mount=type=cache,target=/root/.cache,id=pip \\\n\
                 --mount=type=secret,id=${SECRET_ID} \\\n\
                 --mount=type=ssh \\\n\
                 --mount=type=tmpfs,target=/tmp \\\n\
                 --network=none make\n";
    let a = an(t);
    assert_eq!(ctx(&a), [".", "sub/dir"]);
    assert_eq!(a.context_sources[0].kind, PathKind::Whole);
    assert_eq!(a.context_sources[1].via, SourceVia::BindMount);
    assert_eq!(a.needed, [0, 1]);
    let kinds: Vec<_> = a.mounts.iter().map(|m| (m.kind, m.id.clone())).collect();
    assert_eq!(
        kinds,
        [
            (MountKind::Cache, Some("pip".into())),
            (MountKind::Secret, Some("tok".into())),
            (MountKind::Ssh, Some("default".into())),
            (MountKind::Tmpfs, None),
        ]
    );
    assert_eq!(a.stages[1].mounts.len(), 7);
}

#[test]
fn mount_from_image_is_an_image() {
    let a = an("FROM a\nRUN --mount=from=tools:1,target=/t true\n");
    assert_eq!(a.images, ["a", "tools:1"]);
}

// ---- directives, escape, continuations ------------------------------------------------------

#[test]
fn escape_directive_backtick() {
    let t = "# escape=`\nFROM a\nARG D=c:\\src\nCOPY $D\\x `\n   /dst\nRUN dir `\n  c:\\\n";
    let a = an(t);
    assert_eq!(a.directives.escape, '`');
    assert_eq!(ctx(&a), ["c:\\src\\x"]);
    assert!(a.needed_text.contains("# escape=`\n"));
    assert_eq!(a.stages[0].instructions[3].end_line, 7);
}

#[test]
fn directives_are_read() {
    let a = an("# syntax=docker/dockerfile:1.7\n# check=skip=all\nFROM a\n");
    assert_eq!(
        a.directives.syntax.as_deref(),
        Some("docker/dockerfile:1.7")
    );
    assert_eq!(a.directives.check.as_deref(), Some("skip=all"));
    assert!(
        a.needed_text
            .contains("# syntax=docker/dockerfile:1.7\n# check=skip=all\n")
    );
}

// ---- needed_text ---------------------------------------------------------------------------

#[test]
fn needed_text_ignores_comments_blank_lines_and_unneeded_stages() {
    let base = "ARG A=1\nARG B=2\nFROM x:${A} AS build\nRUN make \\\n  all\nFROM y:${B} AS other\nRUN z\nFROM build\nCOPY f /\n";
    let noisy = "# top comment\nARG A=1\n\nARG B=3\n# c\nFROM x:${A} AS build\nRUN make \\\n  # inner\n\n  all   \nFROM y:${B} AS other\nRUN zzz\n\n# trailing\nFROM build\nCOPY f /\n";
    let (a, b) = (an(base), an(noisy));
    assert_eq!(a.needed_text, b.needed_text);
    assert_eq!(
        a.needed_text,
        "kiln-dockerfile-needed-text v1\nARG A=1\nFROM x:${A} AS build\nRUN make \\\n  all\nFROM build\nCOPY f /\n"
    );
    let changed = base.replace("COPY f /", "COPY g /");
    assert_ne!(an(&changed).needed_text, a.needed_text);
    // Heredoc bodies are kept verbatim, comment-looking lines included.
    let h = an("FROM a\nRUN <<EOF\n# not a comment\n\nEOF\n");
    assert!(
        h.needed_text
            .ends_with("RUN <<EOF\n# not a comment\n\nEOF\n"),
        "{:?}",
        h.needed_text
    );
}

// ---- the twin -------------------------------------------------------------------------------

fn twin_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/twin/docker")
}

fn twin(name: &str) -> String {
    std::fs::read_to_string(twin_dir().join(name)).unwrap()
}

#[test]
fn every_twin_dockerfile_analyzes() {
    let mut n = 0;
    for e in std::fs::read_dir(twin_dir()).unwrap() {
        let p = e.unwrap().path();
        let text = std::fs::read_to_string(&p).unwrap();
        let a = analyze(&text, None, &BTreeMap::new())
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        assert!(!a.needed.is_empty());
        assert_eq!(*a.needed.last().unwrap(), a.target);
        for i in &a.needed {
            assert!(a.needed_text.contains(&a.stages[*i].instructions[0].text));
        }
        n += 1;
    }
    assert_eq!(n, 16);
}

#[test]
fn twin_lmcache() {
    let a = an(&twin("Dockerfile.lmcache"));
    let names: Vec<_> = a.needed.iter().map(|&i| a.stages[i].name.clone()).collect();
    assert_eq!(
        names,
        [
            Some("pytorch-img".into()),
            Some("triton-wheels".into()),
            Some("nixl-wheels".into()),
            Some("cupy-wheels".into()),
            Some("build".into()),
            None
        ]
    );
    assert!(!a.needed.contains(&5), "the test stage is not needed");
    assert_eq!(ctx(&a), ["src/lmcache/csrc/", "src/lmcache/lmcache/"]);
    assert!(!a.needed_text.contains("src/lmcache/tests/"));
    assert_eq!(
        consumed(&a),
        [
            c("CUPY_WHEEL_IMAGE", Some("cupy-wheels")),
            c("LMCACHE_REF", None),
            c("MAX_JOBS", None),
            c("NIXL_WHEEL_IMAGE", Some("nixl-wheels")),
            c("PYTORCH_IMAGE", Some("pytorch-img")),
            c("PYTORCH_ROCM_ARCH", None),
            c("SOURCE_DATE_EPOCH", None),
            c("TRITON_WHEEL_IMAGE", Some("triton-wheels")),
        ]
    );
    assert_eq!(
        a.images,
        ["pytorch-img", "triton-wheels", "nixl-wheels", "cupy-wheels"]
    );
    // The test stage, asked for, adds its sources.
    let t = an_t(&twin("Dockerfile.lmcache"), "test");
    assert!(ctx(&t).contains(&"src/lmcache/tests/".to_string()));
}

#[test]
fn twin_vllm() {
    let text = twin("Dockerfile.vllm");
    let a = an(&text);
    let names: Vec<_> = a
        .needed
        .iter()
        .filter_map(|&i| a.stages[i].name.clone())
        .collect();
    assert!(names.contains(&"rust".to_string()));
    assert!(!names.contains(&"benchmarks".to_string()));
    assert_eq!(
        ctx(&a),
        ["src/vllm/rust/", "src/vllm/csrc/", "src/vllm/vllm/"]
    );
    assert!(a.consumed_args.contains_key("VLLM_REF"));
    assert!(
        !a.images.contains(&"kiln/busybox:latest".to_string()) || names.contains(&"rust".into())
    );
    // A change in the unneeded stage does not change the needed text.
    let other = text.replace(
        "RUN ls /build/vllm/benchmarks",
        "RUN ls -la /build/vllm/benchmarks",
    );
    assert_ne!(other, text);
    assert_eq!(an(&other).needed_text, a.needed_text);
}

#[test]
fn twin_unneeded_global_arg_churn_does_not_change_the_text() {
    let text = twin("Dockerfile.lmcache");
    let a = an(&text);
    let b = an(&format!(
        "{}\n# a comment at the end\n",
        text.replace("#\n", "#  \n")
    ));
    assert_eq!(a.needed_text, b.needed_text);
}

// ---- properties -------------------------------------------------------------------------------

fn twin_texts() -> Vec<String> {
    let mut v: Vec<_> = std::fs::read_dir(twin_dir())
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect();
    v.sort();
    v
}

fn check_invariants(text: &str, target: Option<&str>) {
    if let Ok(a) = analyze(text, target, &BTreeMap::new()) {
        assert!(a.needed.contains(&a.target));
        assert!(a.needed.iter().all(|&i| i < a.stages.len()));
        assert!(
            a.needed_text
                .starts_with("kiln-dockerfile-needed-text v1\n")
        );
        for s in &a.stages {
            for i in &s.instructions {
                assert!(i.line <= i.end_line);
            }
        }
    }
}

fn instruction() -> impl Strategy<Value = String> {
    let word = "[a-zA-Z0-9_./*$@{}:=-]{0,8}";
    prop_oneof![
        (word, word).prop_map(|(a, b)| format!("FROM {a} AS {b}")),
        (word, word).prop_map(|(a, b)| format!("ARG {a}={b}")),
        word.prop_map(|a| format!("ARG {a}")),
        (word, word).prop_map(|(a, b)| format!("ENV {a}={b}")),
        (word, word).prop_map(|(a, b)| format!("COPY {a} {b}")),
        (word, word).prop_map(|(a, b)| format!("COPY --from={a} {b} /d")),
        (word, word).prop_map(|(a, b)| format!("ADD {a} {b}")),
        (word, word).prop_map(|(a, b)| format!("RUN --mount=type=bind,source={a},target=/{b} x")),
        (word, word).prop_map(|(a, b)| format!("RUN --mount={a},from={b} x")),
        word.prop_map(|a| format!("RUN echo {a} \\\n  # comment\n  {a}")),
        word.prop_map(|a| format!("RUN echo {a} `\n  more")),
        word.prop_map(|a| format!("RUN <<EOF\n{a}\nEOF")),
        word.prop_map(|a| format!("COPY <<EOF /dst\n{a}\nEOF")),
        word.prop_map(|a| format!("COPY <<EOF\n{a}")),
        Just("# escape=`".to_string()),
        Just("# syntax=x".to_string()),
        Just("".to_string()),
        word.prop_map(|a| format!("# {a}")),
        word.prop_map(|a| format!("WORKDIR {a}")),
        word.prop_map(|a| format!("CMD [\"{a}\"]")),
        word.prop_map(|a| format!("ONBUILD RUN {a}")),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn never_panics_on_arbitrary_text(text in "\\PC{0,200}") {
        check_invariants(&text, None);
    }

    #[test]
    fn never_panics_on_dockerfile_alphabet(text in "[FROMRUNCOPYADDARGENV \\\\`$={}:#<>\n\"'a-z0-9/.,-]{0,300}") {
        check_invariants(&text, None);
        check_invariants(&text, Some("a"));
    }

    #[test]
    fn never_panics_on_generated_instructions(
        lines in prop::collection::vec(instruction(), 0..14),
        target in prop::option::of("[a-z]{0,3}"),
    ) {
        let text = lines.join("\n");
        check_invariants(&text, target.as_deref());
        check_invariants(&format!("# escape=`\n{text}\n"), target.as_deref());
    }

    #[test]
    fn never_panics_on_mutated_twin_dockerfiles(
        which in 0usize..16,
        edits in prop::collection::vec((any::<prop::sample::Index>(), 0usize..3, "\\PC{0,4}"), 1..6),
    ) {
        let texts = twin_texts();
        let mut chars: Vec<char> = texts[which % texts.len()].chars().collect();
        for (at, op, ins) in edits {
            let i = at.index(chars.len() + 1);
            match op {
                0 => { chars.splice(i..i, ins.chars()); }
                1 => { let end = (i + ins.chars().count() + 1).min(chars.len()); chars.drain(i.min(end)..end); }
                _ => { if i < chars.len() { chars[i] = ins.chars().next().unwrap_or('\\'); } }
            }
        }
        let text: String = chars.into_iter().collect();
        check_invariants(&text, None);
        check_invariants(&text, Some("build"));
    }
}
