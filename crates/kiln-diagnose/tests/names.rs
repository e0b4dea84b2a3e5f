//! The step rule agrees with the one kiln applies to the builds it runs
//! (`kiln_engine::steps::is_step`, the `steps` counts of `kiln build`):
//! every vertex name of the fixture logs, and edge cases.

fn names() -> Vec<String> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "log") {
            for line in std::fs::read_to_string(&p).unwrap().lines() {
                let line = line.split_once("Z #").map_or(line, |(_, l)| l);
                let rest = line.trim_start_matches('#');
                if let Some((_, name)) = rest.split_once(' ')
                    && (name.starts_with('[')
                        || name.starts_with("importing")
                        || name.starts_with("exporting"))
                {
                    out.push(name.to_string());
                }
            }
        }
    }
    out
}

#[test]
fn same_rule_as_the_engine() {
    let mut all = names();
    assert!(all.len() > 50, "fixture names: {}", all.len());
    all.extend(
        [
            "[2/3] RUN echo hi",
            "[ 1/11] FROM x",
            "[builder  7/11] COPY a b",
            "[linux/amd64 build 2/5] RUN make",
            "[stage-1 3/3] COPY --from=build /o /o",
            "[1/3] FROM docker.io/kiln/busybox:latest",
            "[internal] load build definition from Dockerfile",
            "[a/b] RUN x",
            "[build 2/4] from x",
            "copy /context /",
            "exporting to image",
        ]
        .map(String::from),
    );
    for n in &all {
        assert_eq!(
            kiln_diagnose::is_step(n),
            kiln_engine::steps::is_step(n),
            "{n}"
        );
    }
}
