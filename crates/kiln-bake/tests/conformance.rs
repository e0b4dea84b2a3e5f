//! Runs the bake conformance corpus (`tests/conformance/bake/cases`, taken
//! from buildx's own test suite) through the evaluator in every mode the
//! corpus defines, and fails when a case outside `known-failures.txt` fails
//! or a listed case starts passing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kiln_bake::{Options, PrintOptions, config_json, load, print_json, to_build_opts};
use serde_json::{Value as J, json};

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/conformance/bake")
}

/// JSON text with object keys sorted, for order-insensitive comparison.
fn canon_str(v: &J) -> String {
    match v {
        J::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .iter()
                .map(|k| format!("{:?}:{}", k, canon_str(&m[*k])))
                .collect();
            format!("{{{}}}", parts.join(","))
        }
        J::Array(a) => format!(
            "[{}]",
            a.iter().map(canon_str).collect::<Vec<_>>().join(",")
        ),
        other => other.to_string(),
    }
}

fn ptr_tokens(p: &str) -> Vec<String> {
    if p.is_empty() {
        return vec![];
    }
    p[1..]
        .split('/')
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect()
}

fn ptr_join(base: &str, tok: &str) -> String {
    format!("{base}/{}", tok.replace('~', "~0").replace('/', "~1"))
}

fn resolve_ptr<'a>(doc: &'a J, p: &str) -> Option<&'a J> {
    let mut cur = doc;
    for t in ptr_tokens(p) {
        cur = match cur {
            J::Object(m) => m.get(&t)?,
            J::Array(a) => a.get(t.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(cur)
}

fn json_eq(a: &J, b: &J) -> bool {
    match (a, b) {
        (J::Number(x), J::Number(y)) => x.as_f64() == y.as_f64(),
        (J::Array(x), J::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_eq(a, b))
        }
        (J::Object(x), J::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

fn compare(exp: &J, act: &J, ptr: &str, matchm: &BTreeMap<String, String>, errs: &mut Vec<String>) {
    match matchm.get(ptr).map(String::as_str) {
        Some("exact") => {
            if !json_eq(exp, act) {
                errs.push(format!("{ptr}: expected exactly {exp}, got {act}"));
            }
            return;
        }
        Some("unordered") => {
            let canon = |v: &J| -> Vec<String> {
                let mut x: Vec<String> = v
                    .as_array()
                    .map(|a| a.iter().map(canon_str).collect())
                    .unwrap_or_default();
                x.sort();
                x
            };
            if !act.is_array() || canon(exp) != canon(act) {
                errs.push(format!("{ptr}: expected (any order) {exp}, got {act}"));
            }
            return;
        }
        _ => {}
    }
    match exp {
        J::Object(m) => {
            let Some(am) = act.as_object() else {
                errs.push(format!("{ptr}: expected object {exp}, got {act}"));
                return;
            };
            for (k, v) in m {
                let p = ptr_join(ptr, k);
                match am.get(k) {
                    None => {
                        if v != &json!([]) {
                            errs.push(format!("{p}: missing (expected {v})"));
                        }
                    }
                    Some(a) => compare(v, a, &p, matchm, errs),
                }
            }
        }
        J::Array(_) => {
            if !json_eq(exp, act) {
                errs.push(format!("{ptr}: expected {exp}, got {act}"));
            }
        }
        _ => {
            if !json_eq(exp, act) {
                errs.push(format!("{ptr}: expected {exp}, got {act}"));
            }
        }
    }
}

fn check_doc(case: &J, doc: &J) -> Vec<String> {
    let mut errs = Vec::new();
    let expect = &case["expect"];
    let matchm: BTreeMap<String, String> = expect["match"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                .collect()
        })
        .unwrap_or_default();
    let tmap = doc.get("target").cloned().unwrap_or(json!({}));
    let gmap = doc.get("group").cloned().unwrap_or(json!({}));
    if let Some(ts) = expect["targets"].as_object() {
        for (name, fields) in ts {
            let p = ptr_join("/target", name);
            let Some(t) = tmap.get(name) else {
                errs.push(format!("{p}: target missing"));
                continue;
            };
            // Resolve-mode documents are built unescaped, print-mode ones
            // escaped, so expectations compare as written.
            compare(fields, t, &p, &matchm, &mut errs);
        }
    }
    if let Some(gs) = expect["groups"].as_object() {
        for (name, fields) in gs {
            let p = ptr_join("/group", name);
            match gmap.get(name) {
                None => errs.push(format!("{p}: group missing")),
                Some(g) => compare(fields, g, &p, &matchm, &mut errs),
            }
        }
    }
    let names = |m: &J| -> Vec<String> {
        let mut v: Vec<String> = m
            .as_object()
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default();
        v.sort();
        v
    };
    if let Some(n) = expect["target_count"].as_u64()
        && names(&tmap).len() as u64 != n
    {
        errs.push(format!("target count {}, expected {n}", names(&tmap).len()));
    }
    if let Some(n) = expect["group_count"].as_u64()
        && names(&gmap).len() as u64 != n
    {
        errs.push(format!("group count {}, expected {n}", names(&gmap).len()));
    }
    for (key, m) in [("target_names", &tmap), ("group_names", &gmap)] {
        if let Some(want) = expect[key].as_array() {
            let mut w: Vec<String> = want
                .iter()
                .filter_map(|x| x.as_str().map(String::from))
                .collect();
            w.sort();
            if names(m) != w {
                errs.push(format!("{key} {:?}, expected {w:?}", names(m)));
            }
        }
    }
    for chk in expect["checks"].as_array().into_iter().flatten() {
        let p = chk["pointer"].as_str().unwrap_or("");
        let found = resolve_ptr(doc, p);
        if let Some(want) = chk.get("equals") {
            match found {
                None => errs.push(format!("{p}: missing (expected {want})")),
                Some(v) if !json_eq(v, want) => errs.push(format!("{p}: expected {want}, got {v}")),
                _ => {}
            }
        }
        if chk["absent"] == json!(true) && found.is_some_and(|v| !v.is_null()) {
            errs.push(format!("{p}: expected absent"));
        }
        if chk["present"] == json!(true) && found.is_none() {
            errs.push(format!("{p}: expected present"));
        }
        if let Some(n) = chk["len"].as_u64() {
            let l = match found {
                None | Some(J::Null) => 0,
                Some(J::Array(a)) => a.len(),
                Some(J::Object(o)) => o.len(),
                Some(J::String(s)) => s.len(),
                Some(_) => usize::MAX,
            };
            if l as u64 != n {
                errs.push(format!("{p}: expected length {n}, got {l}"));
            }
        }
    }
    if let Some(ep) = case.get("expect_print")
        && !json_eq(ep, doc)
    {
        errs.push(format!("--print document differs: got {doc}"));
    }
    errs
}

fn run_case(dir: &Path, case: &J) -> Result<(), String> {
    let mode = case["mode"].as_str().unwrap_or("resolve");
    let mut files = Vec::new();
    for f in case["files"].as_array().into_iter().flatten() {
        let name = f.as_str().unwrap_or("");
        let text =
            std::fs::read_to_string(dir.join(name)).map_err(|e| format!("read {name}: {e}"))?;
        files.push((name.to_string(), text));
    }
    let strmap = |v: &J| -> BTreeMap<String, String> {
        v.as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                    .collect()
            })
            .unwrap_or_default()
    };
    let env = strmap(&case["env"]);
    let opts = Options {
        builtins: strmap(&case["builtins"]),
        disable_env_lookup: env
            .get("BUILDX_BAKE_DISABLE_VARS_ENV_LOOKUP")
            .is_some_and(|v| kiln_bake::model::parse_go_bool(v).unwrap_or(false)),
        file_relative_paths: case["options"]["file_relative_paths"] == json!(true),
        env: env.clone(),
        vars: strmap(&case["vars"]),
    };
    let sets: Vec<String> = case["overrides"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(String::from))
        .collect();
    let targets: Vec<String> = case["targets"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(String::from))
        .collect();

    let result: Result<J, String> = (|| {
        let bake = load(files, &opts).map_err(|e| e.to_string())?;
        match mode {
            "parse" => Ok(config_json(&bake.config)),
            "resolve" | "print" => {
                let mut r = bake
                    .resolve(&targets, &sets, &opts)
                    .map_err(|e| e.to_string())?;
                if mode == "print" || case["after_build_opt"] == json!(true) {
                    let po = PrintOptions {
                        cwd: dir.to_path_buf(),
                        source_date_epoch: env.get("SOURCE_DATE_EPOCH").cloned(),
                    };
                    to_build_opts(&mut r, &po).map_err(|e| e.to_string())?;
                }
                if mode == "print" {
                    Ok(print_json(&r))
                } else {
                    // Resolve-mode expectations are in-memory values: unescaped.
                    let mut doc = print_json(&r);
                    for (name, t) in &r.targets {
                        doc["target"][name] = t.to_json(false);
                    }
                    Ok(doc)
                }
            }
            "list" => {
                let text = if case["id"].as_str().unwrap_or("").contains("variables") {
                    kiln_bake::list_variables(&bake.config)
                } else {
                    kiln_bake::list_targets(&bake.config)
                };
                Ok(J::String(text))
            }
            other => Err(format!("mode {other} is not supported by this runner")),
        }
    })();

    if let Some(want) = case.get("expect_error") {
        let err = match result {
            Ok(_) => {
                return Err(format!(
                    "expected an error containing {want}, but evaluation succeeded"
                ));
            }
            Err(e) => e,
        };
        let mut subs = vec![want.as_str().unwrap_or("").to_string()];
        for k in ["expect_error_also", "expect_diagnostics"] {
            subs.extend(
                case[k]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|s| s.as_str().map(String::from)),
            );
        }
        for s in subs {
            if !s.is_empty() && !err.contains(&s) {
                return Err(format!("error lacks {s:?}: {err}"));
            }
        }
        return Ok(());
    }
    let doc = result?;
    if mode == "list" {
        let want = case["expect_stdout"].as_str().unwrap_or("");
        let have = doc.as_str().unwrap_or("").trim();
        return if have == want.trim() {
            Ok(())
        } else {
            Err(format!("list output {have:?}, expected {want:?}"))
        };
    }
    if mode == "parse"
        && let Some(order) = case["expect"]["target_order"].as_array()
    {
        let have: Vec<String> = doc["target"]
            .as_object()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        let want: Vec<String> = order
            .iter()
            .filter_map(|s| s.as_str().map(String::from))
            .collect();
        if have != want {
            return Err(format!("target order {have:?}, expected {want:?}"));
        }
    }
    let errs = check_doc(case, &doc);
    if errs.is_empty() {
        Ok(())
    } else {
        Err(errs.join("; "))
    }
}

#[test]
fn bake_conformance_corpus() {
    let root = corpus();
    let known: Vec<String> = std::fs::read_to_string(root.join("known-failures.txt"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split('#').next())
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root.join("cases"))
        .expect("the corpus is checked in under tests/conformance/bake/cases")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    dirs.sort();
    let (mut pass, mut fail, mut skipped) = (0, 0, 0);
    let mut unexpected = Vec::new();
    let mut now_passing = Vec::new();
    for d in &dirs {
        let id = d
            .file_name()
            .and_then(|s| s.to_str())
            .unwrap_or("")
            .to_string();
        let case: J =
            serde_json::from_str(&std::fs::read_to_string(d.join("case.json")).expect("case.json"))
                .expect("valid case.json");
        if case["requires"]
            .as_array()
            .is_some_and(|r| r.iter().any(|x| x == "compose"))
        {
            skipped += 1;
            continue;
        }
        let r =
            std::panic::catch_unwind(|| run_case(d, &case)).unwrap_or_else(|_| Err("PANIC".into()));
        match r {
            Ok(()) => {
                pass += 1;
                if known.contains(&id) {
                    now_passing.push(id);
                }
            }
            Err(e) => {
                fail += 1;
                if !known.contains(&id) {
                    unexpected.push(format!("{id}: {e}"));
                }
            }
        }
    }
    println!("bake conformance: {pass} passed, {fail} failed, {skipped} skipped (compose)");
    assert!(
        unexpected.is_empty(),
        "unexpected failures ({}):\n{}",
        unexpected.len(),
        unexpected.join("\n")
    );
    assert!(
        now_passing.is_empty(),
        "listed in known-failures.txt but passing now: {now_passing:?}"
    );
}
