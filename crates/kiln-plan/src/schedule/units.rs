//! Plan targets as the schedule's jobs: a target with two or more platforms becomes
//! one unit per platform (`app@linux/arm64`), each with its own node, so that every
//! platform can go to a node that builds it natively (docs/scheduling.md, *Platform
//! units*). Its platforms are then joined into one image index under the target's
//! tags, which costs no build time.

use super::input::Cost;
use super::model::Job;

/// One target of a plan, in plan order.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanJob {
    pub name: String,
    /// Indices of the targets it needs (into the same list).
    pub deps: Vec<usize>,
    /// Its `platforms` as the bake file gives them (any form [`crate::platform`]
    /// normalises); empty for the builder's own platform.
    pub platforms: Vec<String>,
    /// What one platform of it costs.
    pub cost: Cost,
    pub published: bool,
}

/// The name of the unit that builds `platform` of `target`.
pub fn unit_name(target: &str, platform: &str) -> String {
    format!("{target}@{platform}")
}

/// The jobs for `targets`, and for each job the index of its target. A target with
/// one platform or none is one job (named as the target, with that platform, if any);
/// a target with several is one job per platform, each costing what the target costs.
/// A unit of platform P needs, of each dependency split into units, the unit of P when
/// there is one, else every unit (the index); a target that is not split needs every
/// unit of a split dependency, unless it builds one platform that the dependency has.
/// A platform that is not written as one is kept as written (and compared as text).
pub fn split(targets: &[PlanJob]) -> (Vec<Job>, Vec<usize>) {
    let platforms: Vec<Vec<String>> = targets
        .iter()
        .map(|t| {
            let mut ps: Vec<String> = Vec::new();
            for p in &t.platforms {
                let n = crate::platform::normalize(p).unwrap_or_else(|_| p.clone());
                if !ps.contains(&n) {
                    ps.push(n);
                }
            }
            ps
        })
        .collect();
    // The first job of each target, and how many it has.
    let mut first = Vec::with_capacity(targets.len());
    let mut count = Vec::with_capacity(targets.len());
    let mut n = 0usize;
    for ps in &platforms {
        first.push(n);
        let k = ps.len().max(1);
        count.push(k);
        n += k;
    }
    let mut jobs = Vec::with_capacity(n);
    let mut of = Vec::with_capacity(n);
    for (i, t) in targets.iter().enumerate() {
        let split = platforms[i].len() > 1;
        let own: Vec<Option<&String>> = if platforms[i].is_empty() {
            vec![None]
        } else {
            platforms[i].iter().map(Some).collect()
        };
        for p in own {
            let mut deps = Vec::new();
            for &d in &t.deps {
                let matching = p.and_then(|p| platforms[d].iter().position(|q| q == p));
                match matching {
                    Some(k) if count[d] > 1 => deps.push(first[d] + k),
                    _ => deps.extend(first[d]..first[d] + count[d]),
                }
            }
            jobs.push(Job {
                name: match (split, p) {
                    (true, Some(p)) => unit_name(&t.name, p),
                    _ => t.name.clone(),
                },
                deps,
                cost: t.cost,
                published: t.published,
                platform: p.cloned(),
            });
            of.push(i);
        }
    }
    (jobs, of)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(name: &str, deps: &[usize], platforms: &[&str]) -> PlanJob {
        PlanJob {
            name: name.into(),
            deps: deps.to_vec(),
            platforms: platforms.iter().map(|p| p.to_string()).collect(),
            cost: Cost {
                work_s: 100.0,
                output_mb: 10.0,
                min_memory_gb: 0.0,
            },
            published: false,
        }
    }

    #[test]
    fn a_multi_platform_target_is_one_unit_per_platform_and_dependents_follow_theirs() {
        let (jobs, of) = split(&[
            t("base", &[], &["linux/amd64", "linux/arm64/v8"]),
            t("app", &[0], &["linux/arm64", "linux/amd64"]),
            t("tool", &[0], &["linux/amd64"]),
            t("any", &[0], &[]),
            t("riscv", &[1], &["linux/riscv64"]),
        ]);
        let names: Vec<&str> = jobs.iter().map(|j| j.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "base@linux/amd64",
                "base@linux/arm64",
                "app@linux/arm64",
                "app@linux/amd64",
                "tool",
                "any",
                "riscv",
            ]
        );
        assert_eq!(of, [0, 0, 1, 1, 2, 3, 4]);
        // Each platform of app needs the same platform of base.
        assert_eq!(jobs[2].deps, [1]);
        assert_eq!(jobs[3].deps, [0]);
        // One platform: the matching unit. None: the whole index.
        assert_eq!(
            (jobs[4].platform.as_deref(), &jobs[4].deps[..]),
            (Some("linux/amd64"), &[0][..])
        );
        assert_eq!(
            (jobs[5].platform.as_deref(), &jobs[5].deps[..]),
            (None, &[0, 1][..])
        );
        // A platform the dependency lacks: every unit.
        assert_eq!(jobs[6].deps, [2, 3]);
        assert_eq!(jobs[1].platform.as_deref(), Some("linux/arm64"));
    }
}
