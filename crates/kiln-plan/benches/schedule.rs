//! Scheduling quality and speed (`harness = false`, std only).
//!
//! Scenarios, all generated here except the first:
//! - `rocm`: the reference stack's 16 targets (`stacks/rocm/edges.txt`) with the example
//!   costs on the seed-like fleet (`examples/fleet/`: 16 cores / 15 GB on 100 Mbit/s,
//!   32 cores / 122 GB on 2.5 Gbit/s);
//! - `wide-*`: a few bases fanning out to many independent targets and a few sinks;
//! - `deep-*`: long chains with occasional cross links;
//! - `random-*`: layered random DAGs of 16 to 500 targets on 2 to 8 nodes;
//! - `scale-10k`: 10,000 random targets on 100 nodes (the timing goal).
//!
//! Generated costs: work log-uniform 60 s to 1 h on a speed-1.0 node, outputs
//! log-uniform 20 MB to 2 GB, a fifth of the targets needing 24 to 96 GB; nodes of 8 to 64
//! cores (speed cores/16), 16 to 256 GB, links 100 to 2500 Mbit/s (25x, as in seed 003),
//! a third with two slots.
//!
//! For each scenario: the lower bound (the yardstick), the baseline `greedy` makespan,
//! `kiln`'s makespan, their ratios, and the median time of 5 `kiln` runs. Every schedule
//! is validated. Writes `target/bench-schedule.json`, and each scenario's problem to
//! `target/bench-schedule/<scenario>.json` for an exact solver to check
//! (`scripts/schedule-optimum`).
//!
//! Run: `cargo bench -p kiln-plan --bench schedule`.
//! Goals: kiln ≤ 1.10 × lower bound on each scenario, kiln < greedy in total,
//! 10,000 targets on 100 nodes in ≤ 1 s.

use std::path::Path;
use std::time::Instant;

use kiln_plan::schedule::{
    Cost, CostsFile, DEFAULT_COST, Fleet, Job, Node, Policy, Problem, schedule, validate,
};

/// xorshift64*: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn log_uniform(&mut self, lo: f64, hi: f64) -> f64 {
        (lo.ln() + self.unit() * (hi.ln() - lo.ln())).exp()
    }
}

fn cost(r: &mut Rng) -> Cost {
    Cost {
        work_s: r.log_uniform(60.0, 3600.0).round(),
        output_mb: r.log_uniform(20.0, 2000.0).round(),
        min_memory_gb: if r.below(5) == 0 {
            [24.0, 48.0, 96.0][r.below(3)]
        } else {
            0.0
        },
    }
}

fn fleet(r: &mut Rng, n: usize) -> Vec<Node> {
    (0..n)
        .map(|i| {
            let cores = [8, 16, 32, 64][r.below(4)];
            Node {
                name: format!("node{i}"),
                endpoint: format!("builder{i}"),
                cores,
                // The first node can build anything.
                memory_gb: if i == 0 {
                    256.0
                } else {
                    [16.0, 32.0, 64.0, 128.0, 256.0][r.below(5)]
                },
                speed: f64::from(cores) / 16.0,
                link_mbps: r.log_uniform(100.0, 2500.0).round(),
                slots: if r.below(3) == 0 { 2 } else { 1 },
                platforms: Vec::new(),
            }
        })
        .collect()
}

fn jobs(r: &mut Rng, deps: Vec<Vec<usize>>) -> Vec<Job> {
    deps.into_iter()
        .enumerate()
        .map(|(i, deps)| Job {
            name: format!("t{i:05}"),
            deps,
            cost: cost(r),
            published: false,
            platform: None,
        })
        .collect()
}

/// Layered random DAG: targets in about sqrt(n) layers, each taking 1 to 3 dependencies
/// from earlier layers (mostly the previous one).
fn random_deps(r: &mut Rng, n: usize) -> Vec<Vec<usize>> {
    let layers = ((n as f64).sqrt().round() as usize).max(2);
    let per = n.div_ceil(layers);
    (0..n)
        .map(|i| {
            let layer = i / per;
            if layer == 0 {
                return Vec::new();
            }
            let mut d: Vec<usize> = (0..1 + r.below(3))
                .map(|_| {
                    let from = if r.below(4) == 0 {
                        r.below(layer)
                    } else {
                        layer - 1
                    };
                    from * per + r.below(per)
                })
                .filter(|&d| d < i)
                .collect();
            d.sort_unstable();
            d.dedup();
            d
        })
        .collect()
}

/// 3 bases, n-6 middle targets on one or two bases, 3 sinks on 10 middle ones each.
fn wide_deps(r: &mut Rng, n: usize) -> Vec<Vec<usize>> {
    (0..n)
        .map(|i| {
            if i < 3 {
                Vec::new()
            } else if i < n - 3 {
                let mut d = vec![r.below(3)];
                if r.below(2) == 0 {
                    d.push(r.below(3));
                }
                d.sort_unstable();
                d.dedup();
                d
            } else {
                let mut d: Vec<usize> = (0..10).map(|_| 3 + r.below(n - 6)).collect();
                d.sort_unstable();
                d.dedup();
                d
            }
        })
        .collect()
}

/// `chains` chains; each target needs its predecessor and sometimes a target of the
/// neighbouring chain at about the same depth.
fn deep_deps(r: &mut Rng, n: usize, chains: usize) -> Vec<Vec<usize>> {
    (0..n)
        .map(|i| {
            let mut d = Vec::new();
            if i >= chains {
                d.push(i - chains);
                if r.below(5) == 0 {
                    let other = i - chains + 1 + r.below(chains - 1);
                    if other < i {
                        d.push(other);
                    }
                }
            }
            d.sort_unstable();
            d.dedup();
            d
        })
        .collect()
}

fn rocm(root: &Path) -> Problem {
    let edges = std::fs::read_to_string(root.join("stacks/rocm/edges.txt")).expect("edges");
    let fleet_text =
        std::fs::read_to_string(root.join("examples/fleet/fleet.toml")).expect("fleet");
    let costs_text =
        std::fs::read_to_string(root.join("examples/fleet/costs.toml")).expect("costs");
    let fleet = Fleet::parse("fleet.toml", &fleet_text).expect("fleet parses");
    let costs = CostsFile::parse("costs.toml", &costs_text).expect("costs parse");
    let mut names: Vec<String> = Vec::new();
    let mut pairs = Vec::new();
    for l in edges
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
    {
        let (a, b) = l.split_once("->").expect("edge");
        let (a, b) = (a.trim().to_string(), b.trim().to_string());
        for x in [&a, &b] {
            if !names.contains(x) {
                names.push(x.clone());
            }
        }
        pairs.push((a, b));
    }
    let idx = |n: &str| names.iter().position(|x| x == n).expect("name");
    let jobs = names
        .iter()
        .map(|n| Job {
            name: n.clone(),
            deps: pairs
                .iter()
                .filter(|(_, b)| b == n)
                .map(|(a, _)| idx(a))
                .collect(),
            cost: costs.get(n).copied().unwrap_or(DEFAULT_COST),
            published: false,
            platform: None,
        })
        .collect();
    Problem::new(jobs, fleet.nodes).expect("problem")
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// One scenario's result, as written to `target/bench-schedule.json`.
#[derive(serde::Serialize)]
struct Row {
    #[serde(rename = "scenario")]
    name: String,
    targets: usize,
    nodes: usize,
    #[serde(rename = "lower_bound_s")]
    lb: f64,
    #[serde(rename = "tight_lower_bound_s")]
    tight: f64,
    #[serde(rename = "greedy_makespan_s")]
    greedy: f64,
    #[serde(rename = "kiln_makespan_s")]
    kiln: f64,
    #[serde(rename = "kiln_time_s")]
    kiln_s: f64,
    #[serde(rename = "greedy_time_s")]
    greedy_s: f64,
}

/// The problem as data: what `scripts/schedule-optimum` models exactly.
fn dump(root: &Path, name: &str, p: &Problem) {
    let v = serde_json::json!({
        "scenario": name,
        "nodes": p.nodes().iter().map(|n| serde_json::json!({
            "name": n.name, "speed": n.speed, "slots": n.slots,
            "memory_gb": n.memory_gb, "link_mbps": n.link_mbps,
        })).collect::<Vec<_>>(),
        "targets": p.jobs().iter().map(|j| serde_json::json!({
            "name": j.name, "deps": j.deps, "work_s": j.cost.work_s,
            "output_mb": j.cost.output_mb, "min_memory_gb": j.cost.min_memory_gb,
            "published": j.published,
        })).collect::<Vec<_>>(),
    });
    let dir = root.join("target/bench-schedule");
    let out = dir.join(format!("{name}.json"));
    if let Err(e) = std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&out, v.to_string()))
    {
        eprintln!("cannot write {}: {e}", out.display());
    }
}

fn run(name: &str, p: &Problem, reps: usize) -> Row {
    if std::env::var_os("DBG").is_some() && name.starts_with("deep") {
        for n in p.nodes() {
            eprintln!(
                "{name} node {} speed {} slots {} mem {} link {}",
                n.name, n.speed, n.slots, n.memory_gb, n.link_mbps
            );
        }
        let w: f64 = p.jobs().iter().map(|j| j.cost.work_s).sum();
        eprintln!("{name} total work {w}");
        for j in p.jobs() {
            eprintln!(
                "{name} {} deps {:?} work {} out {} mem {}",
                j.name, j.deps, j.cost.work_s, j.cost.output_mb, j.cost.min_memory_gb
            );
        }
    }
    let mut times = Vec::new();
    let mut s = None;
    for _ in 0..reps {
        let t = Instant::now();
        let k = schedule(p, Policy::Kiln);
        times.push(t.elapsed().as_secs_f64());
        s = Some(k);
    }
    let k = s.expect("at least one run");
    let t = Instant::now();
    let g = schedule(p, Policy::Greedy);
    let greedy_s = t.elapsed().as_secs_f64();
    for (policy, x) in [("kiln", &k), ("greedy", &g)] {
        if let Err(v) = validate(p, &x.assignments) {
            panic!("{name}: the {policy} schedule breaks the model: {}", v[0]);
        }
        assert!(
            x.makespan_s >= x.tight_lower_bound_s * (1.0 - 1e-9),
            "{name}"
        );
        assert!(x.tight_lower_bound_s >= x.lower_bound_s, "{name}");
    }
    Row {
        name: name.to_string(),
        targets: p.jobs().len(),
        nodes: p.nodes().len(),
        lb: k.lower_bound_s,
        tight: k.tight_lower_bound_s,
        greedy: g.makespan_s,
        kiln: k.makespan_s,
        kiln_s: median(times),
        greedy_s,
    }
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut rows = Vec::new();
    let rocm = rocm(&root);
    dump(&root, "rocm", &rocm);
    rows.push(run("rocm", &rocm, 5));
    let mut r = Rng(0x9e37_79b9_7f4a_7c15);
    let generated = |name: &str, deps: Vec<Vec<usize>>, nodes: usize, r: &mut Rng| {
        let jobs = jobs(r, deps);
        let nodes = fleet(r, nodes);
        let p = Problem::new(jobs, nodes).expect("problem");
        if p.jobs().len() <= 500 {
            dump(&root, name, &p);
        }
        run(name, &p, 5)
    };
    let cases: [(&str, usize, usize); 10] = [
        ("wide", 64, 4),
        ("wide", 300, 8),
        ("deep", 40, 2),
        ("deep", 200, 4),
        ("random", 16, 2),
        ("random", 50, 3),
        ("random", 100, 4),
        ("random", 200, 6),
        ("random", 350, 8),
        ("random", 500, 8),
    ];
    for (kind, n, nodes) in cases {
        let deps = match kind {
            "wide" => wide_deps(&mut r, n),
            "deep" => deep_deps(&mut r, n, 2 + n / 100),
            _ => random_deps(&mut r, n),
        };
        rows.push(generated(&format!("{kind}-{n}"), deps, nodes, &mut r));
    }
    let deps = random_deps(&mut r, 10_000);
    let scale = generated("scale-10k", deps, 100, &mut r);

    println!(
        "{:<12} {:>7} {:>5} {:>11} {:>11} {:>11} {:>11} {:>8} {:>9} {:>11} {:>10}",
        "scenario",
        "targets",
        "nodes",
        "lower bound",
        "tight bound",
        "greedy",
        "kiln",
        "kiln/LB",
        "kiln/TLB",
        "kiln/greedy",
        "kiln time"
    );
    let line = |r: &Row| {
        println!(
            "{:<12} {:>7} {:>5} {:>11.0} {:>11.0} {:>11.0} {:>11.0} {:>8.3} {:>9.3} {:>11.3} {:>8.1}ms",
            r.name,
            r.targets,
            r.nodes,
            r.lb,
            r.tight,
            r.greedy,
            r.kiln,
            r.kiln / r.lb,
            r.kiln / r.tight,
            r.kiln / r.greedy,
            r.kiln_s * 1e3
        )
    };
    rows.iter().for_each(line);
    line(&scale);
    let total_kiln: f64 = rows.iter().map(|r| r.kiln).sum();
    let total_greedy: f64 = rows.iter().map(|r| r.greedy).sum();
    println!(
        "totals (without scale-10k): greedy {total_greedy:.0} s, kiln {total_kiln:.0} s, kiln/greedy {:.3}; kiln beats greedy on {} of {} scenarios, ties on {}",
        total_kiln / total_greedy,
        rows.iter().filter(|r| r.kiln < r.greedy).count(),
        rows.len(),
        rows.iter().filter(|r| r.kiln == r.greedy).count()
    );
    for (what, bound) in [
        ("lower bound", (|r: &Row| r.lb) as fn(&Row) -> f64),
        ("tight lower bound", |r: &Row| r.tight),
    ] {
        let worst = rows.iter().map(|r| r.kiln / bound(r)).fold(0.0, f64::max);
        let over: Vec<&str> = rows
            .iter()
            .filter(|r| r.kiln / bound(r) > 1.10)
            .map(|r| r.name.as_str())
            .collect();
        println!(
            "goal kiln <= 1.10 x {what} on each scenario: {} (worst {worst:.3}{})",
            if over.is_empty() { "met" } else { "NOT met" },
            if over.is_empty() {
                String::new()
            } else {
                format!("; over: {}", over.join(", "))
            }
        );
    }
    println!(
        "goal kiln better than greedy in total: {}",
        if total_kiln < total_greedy {
            "met"
        } else {
            "NOT met"
        }
    );
    println!(
        "goal 10,000 targets on 100 nodes <= 1 s: {} (kiln {:.0} ms, greedy {:.0} ms)",
        if scale.kiln_s <= 1.0 {
            "met"
        } else {
            "NOT met"
        },
        scale.kiln_s * 1e3,
        scale.greedy_s * 1e3
    );

    let all: Vec<&Row> = rows.iter().chain([&scale]).collect();
    let json = serde_json::to_string_pretty(&serde_json::json!({ "scenarios": all }))
        .expect("rows serialise");
    let out = root.join("target/bench-schedule.json");
    match std::fs::write(&out, json) {
        Ok(()) => println!("wrote {}", out.display()),
        Err(e) => eprintln!("cannot write {}: {e}", out.display()),
    }
}
