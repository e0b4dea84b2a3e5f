//! `kiln completions SHELL`: clap's own completion scripts, checked in a
//! real bash (the completion a user gets when pressing Tab), and for the
//! other shells by what the script names.

use std::process::Command;

fn script(shell: &str) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(["completions", shell])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

/// What bash completes for `words` (the cursor on the last one).
fn complete(words: &[&str]) -> Vec<String> {
    let script = std::env::temp_dir().join(format!("kiln-completion-{}.bash", std::process::id()));
    std::fs::write(&script, script_text()).unwrap();
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let cword = words.len() - 1;
    let prev = if cword > 0 { words[cword - 1] } else { "" };
    let body = format!(
        "source '{}'\nCOMP_WORDS=({})\nCOMP_CWORD={cword}\n_kiln kiln '{}' '{prev}'\n\
         printf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
        script.display(),
        quoted.join(" "),
        words[cword],
    );
    let o = Command::new("bash").args(["-c", &body]).output().unwrap();
    let _ = std::fs::remove_file(&script);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(String::from)
        .collect()
}

fn script_text() -> String {
    script("bash")
}

#[test]
fn bash_completes_commands_options_and_their_values() {
    assert_eq!(complete(&["kiln", "bu"]), ["build"]);
    let all = complete(&["kiln", ""]);
    for c in ["build", "plan", "print", "report", "history", "completions"] {
        assert!(all.iter().any(|w| w == c), "{c} in {all:?}");
    }
    assert_eq!(complete(&["kiln", "build", "--prog"]), ["--progress"]);
    assert_eq!(
        complete(&["kiln", "build", "--progress", ""]),
        ["auto", "plain", "raw", "json", "tty", "quiet", "none"]
    );
    let shells = complete(&["kiln", "completions", ""]);
    for sh in ["bash", "elvish", "fish", "powershell", "zsh"] {
        assert!(shells.iter().any(|w| w == sh), "{sh} in {shells:?}");
    }
}

#[test]
fn zsh_and_fish_scripts_name_every_command() {
    let zsh = script("zsh");
    assert!(
        zsh.starts_with("#compdef kiln"),
        "{}",
        &zsh[..80.min(zsh.len())]
    );
    let fish = script("fish");
    for c in ["build", "plan", "why", "report", "history"] {
        assert!(zsh.contains(&format!("'{c}:")), "zsh lacks {c}");
        assert!(fish.contains(&format!("-a \"{c}\"")), "fish lacks {c}");
    }
}

#[test]
fn an_unknown_shell_is_a_usage_error_that_lists_the_shells() {
    let o = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(["completions", "tcsh"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("bash") && e.contains("zsh") && e.contains("fish"),
        "{e}"
    );
}
