//! The `kiln plan --format json` contract: what will be built, in a valid
//! build order, with each target's direct dependencies, and — once keys are
//! computed — each target's content key, action (`build` or `skip`) and
//! the reason.

use serde::{Deserialize, Serialize};

use crate::{Graph, GraphError};

/// One planned target.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedTarget {
    pub name: String,
    /// Direct dependencies, in build order.
    pub deps: Vec<String>,
    pub dockerfile: String,
    pub context: String,
    pub platforms: Vec<String>,
    /// The content key; `null` while it depends on an upstream output that
    /// will only be known after that upstream builds.
    pub key: Option<String>,
    /// `build` or `skip`; `null` when keys were not computed.
    pub action: Option<String>,
    /// Why (`up to date`, `never built`, the inputs that changed...).
    pub reason: Option<String>,
    /// The effective layer-cache policy, one per platform.
    #[serde(default, skip_serializing_if = "Vec::is_empty", skip_deserializing)]
    pub cache: Vec<crate::cache::CachePolicy>,
    /// The driver's command line (`--driver buildx`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
}

fn driver_name(d: crate::cache::Driver) -> &'static str {
    match d {
        crate::cache::Driver::Local => "local",
        crate::cache::Driver::Buildx => "buildx",
    }
}

/// A plan: targets in a valid build order (every dependency first).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    pub targets: Vec<PlannedTarget>,
}

impl Plan {
    /// Plans the closure of `requested` over `graph`.
    pub fn new<S: AsRef<str>>(graph: &Graph, requested: &[S]) -> Result<Plan, GraphError> {
        let order = graph.closure(requested)?;
        let targets = order
            .into_iter()
            .filter_map(|name| {
                let t = graph.target(name)?;
                Some(PlannedTarget {
                    name: name.to_string(),
                    deps: graph.deps(name).into_iter().map(String::from).collect(),
                    dockerfile: t.dockerfile.clone(),
                    context: t.context.clone(),
                    platforms: t.platforms.clone(),
                    key: None,
                    action: None,
                    reason: None,
                    cache: Vec::new(),
                    command: None,
                })
            })
            .collect();
        Ok(Plan { targets })
    }

    /// A human-readable table.
    pub fn render_text(&self) -> String {
        let w = self
            .targets
            .iter()
            .map(|t| t.name.len())
            .max()
            .unwrap_or(6)
            .max(6);
        let mut out = format!("{:>3}  {:<w$}  {}\n", "#", "TARGET", "DEPENDS ON");
        for (i, t) in self.targets.iter().enumerate() {
            let deps = if t.deps.is_empty() {
                "-".to_string()
            } else {
                t.deps.join(", ")
            };
            out.push_str(&format!("{:>3}  {:<w$}  {}\n", i + 1, t.name, deps));
            let plat = if t.platforms.is_empty() {
                "(engine default)".to_string()
            } else {
                t.platforms.join(",")
            };
            out.push_str(&format!(
                "{:>3}  {:<w$}    context {}, dockerfile {}, platforms {}\n",
                "", "", t.context, t.dockerfile, plat
            ));
            if let Some(action) = &t.action {
                out.push_str(&format!(
                    "{:>3}  {:<w$}    {action}: {}\n",
                    "",
                    "",
                    t.reason.as_deref().unwrap_or("")
                ));
                if let Some(key) = &t.key {
                    out.push_str(&format!("{:>3}  {:<w$}    key {key}\n", "", ""));
                }
            }
            for c in t
                .cache
                .iter()
                .filter(|c| !c.from.is_empty() || !c.to.is_empty() || c.inline)
            {
                let refs = |v: &[crate::cache::CacheEntry]| {
                    v.iter()
                        .map(|e| {
                            let r = e.reference().map(String::from).unwrap_or_else(|| e.csv());
                            match e.exists {
                                Some(false) => format!("{r} (missing)"),
                                _ => r,
                            }
                        })
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                let mut line = format!("cache ({}, {})", driver_name(c.driver), c.platform);
                if !c.from.is_empty() {
                    line.push_str(&format!(": from {}", refs(&c.from)));
                }
                if !c.to.is_empty() {
                    line.push_str(&format!("; to {}", refs(&c.to)));
                }
                if c.inline {
                    line.push_str("; inline");
                }
                out.push_str(&format!("{:>3}  {:<w$}    {line}\n", "", ""));
            }
        }
        let count = |a: &str| {
            self.targets
                .iter()
                .filter(|t| t.action.as_deref() == Some(a))
                .count()
        };
        if self.targets.iter().any(|t| t.action.is_some()) {
            out.push_str(&format!(
                "{} target(s): {} to build, {} to skip\n",
                self.targets.len(),
                count("build"),
                count("skip")
            ));
        } else {
            out.push_str(&format!("{} target(s)\n", self.targets.len()));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PlanTarget;

    #[test]
    fn plan_orders_and_lists_deps() {
        let g = Graph::new(vec![
            PlanTarget::new("app").with_context("base", "target:base"),
            PlanTarget::new("base"),
        ])
        .unwrap();
        let p = Plan::new(&g, &["app"]).unwrap();
        assert_eq!(
            p.targets
                .iter()
                .map(|t| t.name.as_str())
                .collect::<Vec<_>>(),
            ["base", "app"]
        );
        assert_eq!(p.targets[1].deps, ["base"]);
        let j = serde_json::to_value(&p).unwrap();
        assert_eq!(j["targets"][1]["deps"][0], "base");
        assert!(p.render_text().contains("2 target(s)"));
    }
}
