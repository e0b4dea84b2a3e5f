//! `kiln diagnose` throughput (`harness = false`, std only).
//!
//! Generates, in memory, a plain-progress log of about 260 MB shaped like a
//! large multi-stage build (60 stages, 40 steps each, a third of them
//! cached, one cache import and one export, compiler output as ~75-byte log
//! lines, `#N ...` interleaving with another vertex in every step) and a
//! rawjson log of the same build of about 220 MB, then measures:
//! - `lines`: counting the lines (memchr over every byte), the baseline: the
//!   least any line-oriented reader must do;
//! - `plain` / `rawjson`: `Parser::feed` in 1 MiB chunks (as the CLI reads
//!   a file), `finish`, `diagnose` and `render_text`.
//!
//! Run: `cargo bench -p kiln-diagnose --bench diagnose` (median of 5 runs).
//! Goal: plain >= 200 MB/s.

use std::fmt::Write;
use std::time::Instant;

const STAGES: usize = 60;
const STEPS: usize = 40;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn plain_log(target: usize) -> Vec<u8> {
    let mut s = String::with_capacity(target + (1 << 20));
    s.push_str("#0 building with \"default\" instance using docker driver\n\n");
    s.push_str("#1 [internal] load build definition from Dockerfile\n#1 transferring dockerfile: 9.1kB done\n#1 DONE 0.0s\n\n");
    s.push_str("#2 importing cache manifest from registry.example/app:buildcache\n#2 inferred cache manifest type: application/vnd.oci.image.manifest.v1+json done\n#2 DONE 1.2s\n\n");
    let lines_per_step = target / (STAGES * STEPS * 50) + 1;
    let mut n = 3;
    for stage in 0..STAGES {
        for step in 1..=STEPS {
            let name = format!(
                "[stage{stage:02} {step:2}/{STEPS}] RUN make -C /src/component{stage}/part{step} -j8"
            );
            let _ = writeln!(s, "#{n} {name}");
            if (stage + step) % 3 == 0 {
                let _ = writeln!(s, "#{n} CACHED\n");
                n += 1;
                continue;
            }
            for i in 0..lines_per_step {
                if i == lines_per_step / 2 {
                    // The printer switches to another running step and back.
                    let _ = writeln!(
                        s,
                        "#{n} ...\n\n#{} [internal] load remote build context",
                        n + 1_000_000
                    );
                    let _ = writeln!(
                        s,
                        "#{} 1.000 tick\n#{} ...\n\n#{n} {name}",
                        n + 1_000_000,
                        n + 1_000_000
                    );
                }
                let _ = writeln!(
                    s,
                    "#{n} {}.{:03} [{i:5}] CXX src/component{stage}/module_{i}.cpp.o -O2 -fPIC -DNDEBUG",
                    i / 10,
                    i % 1000
                );
            }
            let _ = writeln!(s, "#{n} DONE {}.{}s\n", step * 3, stage % 10);
            n += 1;
        }
    }
    let _ = writeln!(
        s,
        "#{n} exporting to image\n#{n} exporting layers 12.0s done\n#{n} DONE 12.1s\n"
    );
    n += 1;
    let _ = writeln!(
        s,
        "#{n} exporting cache to registry\n#{n} preparing build cache for export 2.0s done"
    );
    for i in 0..200 {
        let _ = writeln!(s, "#{n} writing layer sha256:{i:064x} 0.1s done");
    }
    let _ = writeln!(s, "#{n} DONE 30.2s");
    s.into_bytes()
}

fn b64(data: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len() * 4 / 3 + 4);
    for c in data.chunks(3) {
        let b = [c[0], *c.get(1).unwrap_or(&0), *c.get(2).unwrap_or(&0)];
        let v = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for k in 0..4 {
            if k <= c.len() {
                out.push(T[(v >> (18 - 6 * k) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn rawjson_log(target: usize) -> Vec<u8> {
    let mut s = String::with_capacity(target + (1 << 20));
    let t = |sec: usize| {
        format!(
            "2026-08-20T10:{:02}:{:02}.123456789Z",
            sec / 60 % 60,
            sec % 60
        )
    };
    let lines_per_step = target / (STAGES * STEPS * 150) + 1;
    let _ = writeln!(
        s,
        "{{\"vertexes\":[{{\"digest\":\"sha256:imp\",\"name\":\"importing cache manifest from registry.example/app:buildcache\",\"started\":\"{}\",\"completed\":\"{}\"}}]}}",
        t(0),
        t(1)
    );
    for stage in 0..STAGES {
        for step in 1..=STEPS {
            let d = format!("sha256:{stage:032x}{step:032x}");
            let name = format!(
                "[stage{stage:02} {step}/{STEPS}] RUN make -C /src/component{stage}/part{step} -j8"
            );
            let cached = (stage + step) % 3 == 0;
            let _ = writeln!(
                s,
                "{{\"vertexes\":[{{\"digest\":\"{d}\",\"name\":\"{name}\",\"started\":\"{}\"}}]}}",
                t(step)
            );
            if !cached {
                for i in 0..lines_per_step {
                    let text = format!(
                        "[{i:5}] CXX src/component{stage}/module_{i}.cpp.o -O2 -fPIC -DNDEBUG\n"
                    );
                    let _ = writeln!(
                        s,
                        "{{\"logs\":[{{\"vertex\":\"{d}\",\"stream\":1,\"data\":\"{}\",\"timestamp\":\"{}\"}}]}}",
                        b64(text.as_bytes()),
                        t(step)
                    );
                }
            }
            let _ = writeln!(
                s,
                "{{\"vertexes\":[{{\"digest\":\"{d}\",\"name\":\"{name}\",\"started\":\"{}\",\"completed\":\"{}\"{}}}]}}",
                t(step),
                t(step * 2),
                if cached { ",\"cached\":true" } else { "" }
            );
        }
    }
    let _ = writeln!(
        s,
        "{{\"vertexes\":[{{\"digest\":\"sha256:exp\",\"name\":\"exporting cache to registry\",\"started\":\"{}\",\"completed\":\"{}\"}}]}}",
        t(100),
        t(130)
    );
    s.into_bytes()
}

fn diagnose(log: &[u8]) -> (u64, usize) {
    let mut p = kiln_diagnose::Parser::new();
    for chunk in log.chunks(1 << 20) {
        p.feed(chunk);
    }
    let trace = p.finish();
    let r = kiln_diagnose::diagnose(&trace, None).expect("progress");
    let text = kiln_diagnose::render_text(&r);
    (r.steps.total, text.len())
}

fn measure(label: &str, log: &[u8]) -> f64 {
    let mb = log.len() as f64 / 1e6;
    let mut base = Vec::new();
    let mut run = Vec::new();
    let mut steps = 0;
    for _ in 0..5 {
        let t = Instant::now();
        let n = memchr::memchr_iter(b'\n', log).count();
        base.push(t.elapsed().as_secs_f64());
        assert!(n > 0);
        let t = Instant::now();
        steps = diagnose(log).0;
        run.push(t.elapsed().as_secs_f64());
    }
    assert_eq!(steps, (STAGES * STEPS) as u64, "every step counted");
    let (b, r) = (median(base), median(run));
    println!(
        "{label}: {mb:.1} MB, {} lines; medians of 5",
        memchr::memchr_iter(b'\n', log).count()
    );
    println!("  {:<26} {:>9} {:>10}", "pass", "seconds", "MB/s");
    println!(
        "  {:<26} {:>9.3} {:>10.0}",
        "count lines (baseline)",
        b,
        mb / b
    );
    println!("  {:<26} {:>9.3} {:>10.0}", "kiln diagnose", r, mb / r);
    println!("  diagnose / line-count time ratio: {:.1}", r / b);
    mb / r
}

/// Checks the generated log's size, then measures it.
fn run(label: &str, log: Vec<u8>) -> f64 {
    assert!(
        log.len() >= 200_000_000,
        "the {label} log is {} bytes",
        log.len()
    );
    measure(label, &log)
}

fn main() {
    let plain_rate = run("plain", plain_log(256_000_000));
    let raw_rate = run("rawjson", rawjson_log(200_000_000));
    println!(
        "goal plain >= 200 MB/s: {} ({plain_rate:.0} MB/s); rawjson: {raw_rate:.0} MB/s",
        if plain_rate >= 200.0 {
            "met"
        } else {
            "NOT met"
        }
    );
}
