//! Fuzz smoke: no input makes the parser or the report panic, and the counts
//! stay consistent, whatever is done to a log — truncation, garbled bytes,
//! lines of two logs interleaved or shuffled, huge numbers, any chunking,
//! a line or a rawjson object that never ends.

use proptest::prelude::*;

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(name),
    )
    .unwrap()
}

const FIXTURES: [&str; 18] = [
    "plain-cold.log",
    "plain-warm.log",
    "plain-missing-cache-from.log",
    "plain-inline-export.log",
    "plain-inline-import.log",
    "plain-failed.log",
    "plain-seed000.log",
    "rawjson-registry.jsonl",
    "rawjson-missing-ref.jsonl",
    "rawjson-truncated.jsonl",
    "buildx-0.13-cold.rawjson",
    "buildx-0.13-warm.rawjson",
    "buildx-0.13-warm.log",
    "buildx-0.13-warm-no-export.rawjson",
    "buildx-0.13-warm-no-export.log",
    "buildx-0.13-failed.rawjson",
    "buildx-0.13-inline-export.log",
    "buildx-0.13-inline-export.rawjson",
];

/// Parses in the given chunk size, reports, renders; checks invariants.
fn check(bytes: &[u8], chunk: usize) {
    let mut p = kiln_diagnose::Parser::new();
    for c in bytes.chunks(chunk.max(1)) {
        p.feed(c);
    }
    let trace = p.finish();
    let Ok(r) = kiln_diagnose::diagnose(&trace, None) else {
        return;
    };
    assert!(r.steps.cached <= r.steps.total);
    assert_eq!(r.steps.cached + r.steps.rebuilt, r.steps.total);
    assert!(r.steps.failed <= r.steps.rebuilt);
    assert_eq!(r.stages.iter().map(|s| s.total).sum::<u64>(), r.steps.total);
    assert_eq!(
        r.stages.iter().map(|s| s.cached).sum::<u64>(),
        r.steps.cached
    );
    assert!(r.time_s.is_finite() && r.time_s >= 0.0);
    assert!(r.longest.len() <= 5);
    assert!(r.longest.windows(2).all(|w| w[0].time_s >= w[1].time_s));
    assert_eq!(r.findings.first().copied().unwrap_or(r.verdict), r.verdict);
    let _ = kiln_diagnose::render_text(&r);
    serde_json::to_string(&r).expect("the report serializes");
}

fn line_of_noise() -> impl Strategy<Value = String> {
    prop_oneof![
        "#[0-9]{1,25} (CACHED|DONE [0-9.e+-]{0,30}s?|ERROR: .{0,20}|CANCELED|\\.\\.\\.|.{0,40})",
        "#[0-9]{1,3} \\[[a-z0-9/ -]{0,12} [0-9]{1,12}/[0-9]{1,12}\\] (RUN|COPY|FROM) .{0,20}",
        "#[0-9]{1,3} importing cache manifest from .{0,20}",
        "#[0-9]{1,3} exporting cache.{0,20}",
        "#[0-9]{1,3} preparing layers for inline cache.{0,10}",
        "\\{\"vertexes\":\\[\\{\"digest\":\"d[0-9]\",\"name\":\".{0,30}\",\"started\":\".{0,30}\",\"completed\":\"[0-9T:.Z+-]{0,35}\",\"cached\":(true|false)\\}\\]\\}",
        "\\{.{0,60}",
        "[{}]",
        " {0,6}\"(vertexes|statuses|digest|name|id|vertex|cached|completed)\": .{0,30}",
        ".{0,60}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn truncated_anywhere(f in 0..FIXTURES.len(), cut in 0.0f64..1.0, chunk in 1usize..4096) {
        let b = fixture(FIXTURES[f]);
        let n = (b.len() as f64 * cut) as usize;
        check(&b[..n], chunk);
    }

    #[test]
    fn garbled_bytes(f in 0..FIXTURES.len(), edits in prop::collection::vec((0.0f64..1.0, any::<u8>()), 1..64), chunk in 1usize..512) {
        let mut b = fixture(FIXTURES[f]);
        for (at, byte) in edits {
            let i = ((b.len() as f64) * at) as usize;
            if i < b.len() {
                b[i] = byte;
            }
        }
        check(&b, chunk);
    }

    #[test]
    fn interleaved_and_shuffled(a in 0..FIXTURES.len(), b in 0..FIXTURES.len(), seed in any::<u64>()) {
        let la = fixture(FIXTURES[a]);
        let lb = fixture(FIXTURES[b]);
        let mut lines: Vec<&[u8]> = la.split(|&c| c == b'\n').chain(lb.split(|&c| c == b'\n')).collect();
        // A deterministic shuffle from the seed.
        let mut s = seed | 1;
        for i in (1..lines.len()).rev() {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            lines.swap(i, (s % (i as u64 + 1)) as usize);
        }
        check(&lines.join(&b'\n'), 97);
    }

    #[test]
    fn noise(lines in prop::collection::vec(line_of_noise(), 0..80), chunk in 1usize..64) {
        check(lines.join("\n").as_bytes(), chunk);
    }

    #[test]
    fn arbitrary_bytes(b in prop::collection::vec(any::<u8>(), 0..2048), chunk in 1usize..300) {
        check(&b, chunk);
    }
}

#[test]
fn huge_numbers_and_durations() {
    let log = "#18446744073709551615 [a 4294967295/4294967295] RUN x\n#18446744073709551615 DONE 1e308s\n\
               #999999999999999999 [b 1/1] RUN y\n#999999999999999999 DONE 99999999999999999999999s\n\
               #7 [c 99999999999/1] RUN z\n#7 DONE -5s\n\
               {\"vertexes\":[{\"digest\":\"x\",\"name\":\"[d 1/1] RUN w\",\"started\":\"9999-12-31T23:59:59.999999999Z\",\"completed\":\"0000-01-01T00:00:00Z\"}]}\n";
    check(log.as_bytes(), 7);
    let r = kiln_diagnose::diagnose(&kiln_diagnose::parse(log.as_bytes()), None).unwrap();
    assert_eq!(
        r.steps.total, 1,
        "only `[b 1/1]` is a step of a vertex number that fits"
    );
    assert_eq!(r.time_s, 1e9, "durations are capped");
}

#[test]
fn a_line_without_end() {
    let mut b = b"#1 [a 1/1] RUN x\n#1 ".to_vec();
    b.extend(std::iter::repeat_n(b'y', kiln_diagnose::MAX_LINE * 2));
    check(&b, 1 << 20);
}

#[test]
fn an_object_without_end() {
    let mut b = b"{\n  \"vertexes\": [\n".to_vec();
    let line = format!("    {{\"digest\": \"{}\"}},\n", "d".repeat(1 << 16));
    while b.len() < kiln_diagnose::MAX_OBJECT * 2 {
        b.extend_from_slice(line.as_bytes());
    }
    check(&b, 1 << 20);
    let t = kiln_diagnose::parse(&b);
    assert!(t.is_empty(), "never closed, never parsed");
}
