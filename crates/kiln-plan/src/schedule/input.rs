//! The fleet file and the costs file: TOML text given by the caller, parsed and validated
//! into [`Fleet`] and [`CostsFile`]. Every error carries `file:line:col`, the source line
//! and a caret (the TOML parser's spans); nothing here reads a file.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;

use serde::Deserialize;
use toml::Spanned;

/// One builder node of a fleet.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub name: String,
    /// A Docker engine (`unix://…`, `tcp://…`, `ssh://…`, `npipe://…`) or a buildx
    /// builder name.
    pub endpoint: String,
    pub cores: u32,
    pub memory_gb: f64,
    /// Relative compute speed: a target takes `work_s / speed` seconds here.
    /// Defaults to `cores / 16`.
    pub speed: f64,
    /// The node's link to the registry, in megabits per second (pushes and pulls).
    pub link_mbps: f64,
    /// Concurrent builds (default 1, at most [`MAX_SLOTS`]).
    pub slots: u32,
    /// The platforms the node builds natively (normalised, [`crate::platform`]); empty
    /// when not stated, which counts as native for every platform.
    pub platforms: Vec<String>,
}

/// The most concurrent builds a fleet node may declare. The schedulers keep a lane per
/// slot (and scan them all for every target), so an unbounded count (`slots =
/// 4000000000`) would make `kiln schedule` and `kiln build --fleet` allocate without end
/// instead of rejecting the file.
pub const MAX_SLOTS: u32 = 1024;

/// The builder nodes of a fleet file, in file order.
#[derive(Clone, Debug, PartialEq)]
pub struct Fleet {
    pub nodes: Vec<Node>,
}

/// What building a target costs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cost {
    /// Seconds of build on a speed-1.0 node.
    pub work_s: f64,
    /// Size of the pushed output, in megabytes (pulled by dependents on other nodes).
    pub output_mb: f64,
    /// Nodes with less memory cannot build the target.
    pub min_memory_gb: f64,
}

/// The cost of a target that neither history nor the costs file knows: ten minutes of
/// work on a speed-1.0 node, a 1000 MB output, no memory requirement.
pub const DEFAULT_COST: Cost = Cost {
    work_s: 600.0,
    output_mb: 1000.0,
    min_memory_gb: 0.0,
};

/// One `[target.NAME]` table of a costs file.
#[derive(Clone, Debug, PartialEq)]
pub struct CostEntry {
    pub name: String,
    pub cost: Cost,
    /// Where the table's name stands in the file (1-based), for warnings.
    pub line: usize,
    pub col: usize,
}

/// A parsed costs file, entries in file order.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct CostsFile {
    pub entries: Vec<CostEntry>,
}

impl CostsFile {
    pub fn get(&self, name: &str) -> Option<&Cost> {
        self.entries
            .iter()
            .find(|e| e.name == name)
            .map(|e| &e.cost)
    }
}

/// A fleet or costs file that cannot be used, with the position of the problem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputError {
    pub file: String,
    /// 1-based.
    pub line: usize,
    /// 1-based, in characters.
    pub col: usize,
    pub message: String,
    /// The source line and the caret's width, when the position is in the text.
    pub source_line: String,
    pub width: usize,
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let gutter = " ".repeat(self.line.to_string().len());
        write!(
            f,
            "{}\n{gutter}--> {}:{}:{}",
            self.message, self.file, self.line, self.col
        )?;
        if !self.source_line.is_empty() {
            write!(
                f,
                "\n{gutter} |\n{} | {}\n{gutter} | {}{}",
                self.line,
                self.source_line,
                " ".repeat(self.col - 1),
                "^".repeat(self.width.max(1))
            )?;
        }
        Ok(())
    }
}

impl std::error::Error for InputError {}

/// A source text and its name, for positions.
struct Src<'a> {
    file: &'a str,
    text: &'a str,
}

impl Src<'_> {
    fn error(&self, span: Option<Range<usize>>, message: impl Into<String>) -> InputError {
        let span = span.unwrap_or(0..0);
        let start = span.start.min(self.text.len());
        let line_start = self.text[..start].rfind('\n').map_or(0, |i| i + 1);
        let line_end = self.text[start..]
            .find('\n')
            .map_or(self.text.len(), |i| start + i);
        let line = self.text[..start].matches('\n').count() + 1;
        let col = self.text[line_start..start].chars().count() + 1;
        let end = span.end.clamp(start, line_end);
        InputError {
            file: self.file.to_string(),
            line,
            col,
            message: message.into(),
            source_line: self.text[line_start..line_end]
                .trim_end_matches('\r')
                .to_string(),
            width: self.text[start..end].chars().count(),
        }
    }

    fn parse<T: for<'de> Deserialize<'de>>(&self) -> Result<T, InputError> {
        toml::from_str(self.text).map_err(|e| self.error(e.span(), e.message().trim_end()))
    }

    fn positive(&self, v: &Spanned<f64>, what: &str) -> Result<f64, InputError> {
        let x = *v.get_ref();
        if x.is_finite() && x > 0.0 {
            Ok(x)
        } else {
            Err(self.error(Some(v.span()), format!("{what} must be a positive number")))
        }
    }

    fn non_negative(&self, v: &Spanned<f64>, what: &str) -> Result<f64, InputError> {
        let x = *v.get_ref();
        if x.is_finite() && x >= 0.0 {
            Ok(x)
        } else {
            Err(self.error(Some(v.span()), format!("{what} must be 0 or more")))
        }
    }

    /// A node's `platforms`, normalised, without repeats.
    fn platforms(&self, given: &[Spanned<String>]) -> Result<Vec<String>, InputError> {
        let mut out: Vec<String> = Vec::new();
        for p in given {
            let normal = crate::platform::normalize(p.get_ref())
                .map_err(|m| self.error(Some(p.span()), m))?;
            if !out.contains(&normal) {
                out.push(normal);
            }
        }
        Ok(out)
    }

    fn count(&self, v: &Spanned<i64>, what: &str, max: u32) -> Result<u32, InputError> {
        match u32::try_from(*v.get_ref()) {
            Ok(n) if n > 0 && n <= max => Ok(n),
            _ => Err(self.error(
                Some(v.span()),
                format!("{what} must be a whole number from 1 to {max}"),
            )),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FleetToml {
    node: Option<Vec<Spanned<NodeToml>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NodeToml {
    name: Spanned<String>,
    endpoint: Spanned<String>,
    cores: Spanned<i64>,
    memory_gb: Spanned<f64>,
    speed: Option<Spanned<f64>>,
    link_mbps: Spanned<f64>,
    slots: Option<Spanned<i64>>,
    platforms: Option<Vec<Spanned<String>>>,
}

/// Why an endpoint is not usable, or `None` when it is: a URL with a Docker scheme, or a
/// buildx builder name (letters, digits, `-`, `_`, `.`).
fn endpoint_problem(e: &str) -> Option<String> {
    if let Some((scheme, rest)) = e.split_once("://") {
        if !["unix", "tcp", "ssh", "npipe"].contains(&scheme) {
            return Some(format!(
                "endpoint scheme `{scheme}://` is not a Docker engine address (unix://, tcp://, ssh:// or npipe://)"
            ));
        }
        if rest.is_empty() {
            return Some(format!("endpoint `{e}` names no address"));
        }
        return None;
    }
    let builder_name = !e.is_empty()
        && e.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    (!builder_name).then(|| {
        format!(
            "endpoint `{e}` is neither a Docker engine address (unix://, tcp://, ssh://, npipe://) nor a buildx builder name"
        )
    })
}

impl Fleet {
    /// Parses and validates a fleet file (`file` names it in messages).
    pub fn parse(file: &str, text: &str) -> Result<Fleet, InputError> {
        let src = Src { file, text };
        let raw: FleetToml = src.parse()?;
        let entries = raw.node.unwrap_or_default();
        if entries.is_empty() {
            return Err(src.error(
                None,
                "the fleet file defines no builder node: add a [[node]] table with name, endpoint, cores, memory_gb and link_mbps",
            ));
        }
        let mut nodes: Vec<Node> = Vec::with_capacity(entries.len());
        for entry in entries {
            let n = entry.into_inner();
            let name = n.name.get_ref().trim().to_string();
            if name.is_empty() {
                return Err(src.error(Some(n.name.span()), "a node name must not be empty"));
            }
            if nodes.iter().any(|m| m.name == name) {
                return Err(src.error(
                    Some(n.name.span()),
                    format!("node `{name}` is defined more than once; node names must be unique"),
                ));
            }
            if let Some(problem) = endpoint_problem(n.endpoint.get_ref()) {
                return Err(src.error(Some(n.endpoint.span()), problem));
            }
            let cores = src.count(&n.cores, "cores", u32::MAX)?;
            let speed = match &n.speed {
                Some(s) => src.positive(s, "speed")?,
                None => f64::from(cores) / 16.0,
            };
            nodes.push(Node {
                name,
                endpoint: n.endpoint.into_inner(),
                cores,
                memory_gb: src.positive(&n.memory_gb, "memory_gb")?,
                speed,
                link_mbps: src.positive(&n.link_mbps, "link_mbps")?,
                slots: match &n.slots {
                    Some(s) => src.count(s, "slots", MAX_SLOTS)?,
                    None => 1,
                },
                platforms: src.platforms(n.platforms.as_deref().unwrap_or_default())?,
            });
        }
        Ok(Fleet { nodes })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CostsToml {
    target: Option<BTreeMap<Spanned<String>, CostToml>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CostToml {
    work_s: Spanned<f64>,
    output_mb: Spanned<f64>,
    min_memory_gb: Option<Spanned<f64>>,
}

impl CostsFile {
    /// Parses and validates a costs file (`file` names it in messages). Whether its
    /// target names exist is the caller's question.
    pub fn parse(file: &str, text: &str) -> Result<CostsFile, InputError> {
        let src = Src { file, text };
        let raw: CostsToml = src.parse()?;
        let mut entries = Vec::new();
        for (name, c) in raw.target.unwrap_or_default() {
            let at = src.error(Some(name.span()), "");
            entries.push((
                name.span().start,
                CostEntry {
                    name: name.into_inner(),
                    cost: Cost {
                        work_s: src.non_negative(&c.work_s, "work_s")?,
                        output_mb: src.non_negative(&c.output_mb, "output_mb")?,
                        min_memory_gb: match &c.min_memory_gb {
                            Some(m) => src.non_negative(m, "min_memory_gb")?,
                            None => 0.0,
                        },
                    },
                    line: at.line,
                    col: at.col,
                },
            ));
        }
        entries.sort_by_key(|(at, _)| *at);
        Ok(CostsFile {
            entries: entries.into_iter().map(|(_, e)| e).collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fleet_defaults() {
        let f = Fleet::parse(
            "fleet.toml",
            "[[node]]\nname = \"a\"\nendpoint = \"unix:///run/docker.sock\"\ncores = 32\nmemory_gb = 122\nlink_mbps = 1000\n",
        )
        .unwrap();
        assert_eq!(f.nodes[0].speed, 2.0);
        assert_eq!(f.nodes[0].slots, 1);
        assert_eq!(f.nodes[0].memory_gb, 122.0);
    }

    #[test]
    fn unknown_field_has_position() {
        let e = Fleet::parse(
            "fleet.toml",
            "[[node]]\nname = \"a\"\nendpoint = \"b\"\ncores = 4\nmemory_gb = 8\nlink_mbps = 10\nspead = 2\n",
        )
        .unwrap_err();
        assert_eq!((e.line, e.col), (7, 1), "{e}");
        assert!(e.message.contains("unknown field `spead`"), "{e}");
    }

    #[test]
    fn missing_field_and_bad_values() {
        let e = Fleet::parse("f.toml", "[[node]]\nname = \"a\"\nendpoint = \"b\"\n").unwrap_err();
        assert!(e.message.contains("missing field"), "{e}");
        let e = Fleet::parse(
            "f.toml",
            "[[node]]\nname = \"a\"\nendpoint = \"b\"\ncores = 4\nmemory_gb = 8\nlink_mbps = 0\n",
        )
        .unwrap_err();
        assert_eq!((e.line, e.col, e.width), (6, 13, 1), "{e}");
        let e = Fleet::parse(
            "f.toml",
            "[[node]]\nname = \"a\"\nendpoint = \"http://x\"\ncores = 4\nmemory_gb = 8\nlink_mbps = 1\n",
        )
        .unwrap_err();
        assert!(e.message.contains("scheme"), "{e}");
        let two =
            "[[node]]\nname = \"a\"\nendpoint = \"b\"\ncores = 4\nmemory_gb = 8\nlink_mbps = 1\n";
        let e = Fleet::parse("f.toml", &format!("{two}{two}")).unwrap_err();
        assert_eq!(e.line, 8, "{e}");
        assert!(e.message.contains("more than once"), "{e}");
    }

    #[test]
    fn platforms_are_normalised_and_a_bad_one_is_pointed_at() {
        let node = |platforms: &str| {
            format!(
                "[[node]]\nname = \"a\"\nendpoint = \"b\"\ncores = 4\nmemory_gb = 8\nlink_mbps = 1\nplatforms = {platforms}\n"
            )
        };
        let f = Fleet::parse(
            "f.toml",
            &node(r#"["linux/arm64/v8", "linux/aarch64", "linux/arm/v7"]"#),
        )
        .unwrap();
        assert_eq!(f.nodes[0].platforms, ["linux/arm64", "linux/arm/v7"]);
        let e = Fleet::parse("f.toml", &node(r#"["linux/amd64", "arm64"]"#)).unwrap_err();
        assert_eq!((e.line, e.col, e.width), (7, 29, 7), "{e}");
        assert!(e.message.contains("`arm64` is not a platform"), "{e}");
        let none = Fleet::parse("f.toml", &node("[]")).unwrap();
        assert!(none.nodes[0].platforms.is_empty());
    }

    #[test]
    fn slots_are_bounded() {
        // `slots = 4000000000` used to parse, and scheduling the fleet (as the fuzz
        // target fuzz/fuzz_targets/fleet_costs.rs does) then aborted trying to
        // allocate a lane per slot (128 GB).
        let node = |slots: &str| {
            format!(
                "[[node]]\nname = \"a\"\nendpoint = \"unix:///x\"\ncores = 4\nmemory_gb = 8\nlink_mbps = 100\nslots = {slots}\n"
            )
        };
        let e = Fleet::parse("fleet.toml", &node("4000000000")).unwrap_err();
        assert_eq!((e.line, e.col, e.width), (7, 9, 10), "{e}");
        assert_eq!(e.message, "slots must be a whole number from 1 to 1024");
        assert!(Fleet::parse("fleet.toml", &node("1025")).is_err());
        assert!(Fleet::parse("fleet.toml", &node("0")).is_err());
        let f = Fleet::parse("fleet.toml", &node("1024")).unwrap();
        assert_eq!(f.nodes[0].slots, MAX_SLOTS);
        // Cores stay unbounded: they only set the default speed.
        let big = node("1").replace("cores = 4", "cores = 4000000000");
        assert_eq!(
            Fleet::parse("fleet.toml", &big).unwrap().nodes[0].cores,
            4_000_000_000
        );
    }

    #[test]
    fn costs_in_file_order_with_positions() {
        let c = CostsFile::parse(
            "costs.toml",
            "[target.zeta]\nwork_s = 10\noutput_mb = 1.5\n\n[target.alpha]\nwork_s = 3\noutput_mb = 0\nmin_memory_gb = 32\n",
        )
        .unwrap();
        let names: Vec<_> = c.entries.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["zeta", "alpha"]);
        assert_eq!((c.entries[1].line, c.entries[1].col), (5, 9));
        assert_eq!(c.get("alpha").unwrap().min_memory_gb, 32.0);
        let e =
            CostsFile::parse("costs.toml", "[target.a]\nwork_s = -1\noutput_mb = 1\n").unwrap_err();
        assert_eq!((e.line, e.col), (2, 10), "{e}");
    }

    #[test]
    fn renders_like_other_diagnostics() {
        let e = CostsFile::parse("costs.toml", "[target.a]\nwork = 1\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown field `work`, expected one of `work_s`, `output_mb`, `min_memory_gb`\n --> costs.toml:2:1\n  |\n2 | work = 1\n  | ^^^^"
        );
    }
}
