//! Nothing panics on any input: arbitrary text as a Dockerfile, a bake file
//! and a workflow, and mutations of real fixtures, give findings (at worst a
//! `parse-error`), never a panic.

use std::path::Path;

use kiln_lint::{Collector, bake, dockerfile, workflow};
use proptest::prelude::*;

fn all(text: &str) {
    let mut c = Collector::default();
    dockerfile::lint_text("Dockerfile", text, &mut c);
    bake::lint_texts(vec![("docker-bake.hcl".into(), text.to_string())], &mut c);
    bake::lint_texts(vec![("docker-bake.json".into(), text.to_string())], &mut c);
    workflow::lint_text("build.yml", text, Path::new("/nonexistent"), &mut c);
    let builds = std::mem::take(&mut c.builds);
    kiln_lint::build::check(&builds, &mut c);
}

const WORKFLOW: &str =
    include_str!("fixtures/seed000/.github/workflows/build-core-image-reusable.yml");
const DOCKERFILE: &str = include_str!("fixtures/seed000/docker/Dockerfile.ci");
const BAKE: &str = include_str!("fixtures/clean/docker-bake.hcl");

/// Shell and YAML fragments that stress the splitter.
fn fragment() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "\\",
        "\\\n",
        "\"",
        "'",
        "$",
        "${",
        "${{",
        "}}",
        "$(",
        ")",
        "`",
        "|",
        ">",
        ">>",
        "<<",
        "<<EOF\n",
        "&&",
        "||",
        ";",
        "#",
        "\n",
        " ",
        "--cache-from",
        "--cache-to=",
        "-t",
        "=",
        "type=registry,ref=",
        "docker buildx build ",
        "docker build ",
        "run: |\n",
        "  - ",
        ": ",
        "[",
        "]",
        "{",
        "}",
        "ARG ",
        "FROM ",
        "RUN ",
        "COPY --from=",
        "target \"",
        "é",
    ])
    .prop_map(str::to_string)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn arbitrary_text(s in "\\PC{0,200}") {
        all(&s);
    }

    #[test]
    fn fragments(parts in prop::collection::vec(fragment(), 0..40)) {
        all(&parts.concat());
    }

    #[test]
    fn mutated_fixtures(cut in 0usize..4000, insert in fragment()) {
        for base in [WORKFLOW, DOCKERFILE, BAKE] {
            let mut at = cut % (base.len() + 1);
            while !base.is_char_boundary(at) {
                at -= 1;
            }
            let text = format!("{}{}{}", &base[..at], insert, &base[at..]);
            all(&text);
            all(&base[..at]);
        }
    }
}
