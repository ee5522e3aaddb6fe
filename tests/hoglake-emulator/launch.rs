//! Starting the hoglake emulator as a subprocess on a free port: the one
//! launcher of both harnesses that use it (`tests/src/hoglake.rs` and
//! hoglake's own `tests/it/support`), each of which includes this file with
//! `#[path]` and passes the script's path as its crate finds it.
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// Runs `hoglake_emulator.py` on 127.0.0.1, port 0, with the project venv
/// ($MILLPOND_PYTHON, else ~/.cache/millpond/venv, else python3), and
/// answers the process and its root URL `http://127.0.0.1:<port>`, read from
/// the `LISTENING <port>` line the emulator prints once it listens.
pub fn launch(script: &str) -> (Child, String) {
    launch_with(script, &[])
}

/// [`launch`] with more emulator flags (e.g. `--capabilities …`).
pub fn launch_with(script: &str, flags: &[&str]) -> (Child, String) {
    let python = std::env::var("MILLPOND_PYTHON").unwrap_or_else(|_| {
        let venv = format!(
            "{}/.cache/millpond/venv/bin/python",
            std::env::var("HOME").unwrap_or_default()
        );
        if std::path::Path::new(&venv).exists() {
            venv
        } else {
            "python3".into()
        }
    });
    let mut child = Command::new(&python)
        .args([script, "--host", "127.0.0.1", "--port", "0"])
        .args(flags)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start the hoglake emulator with {python}: {e}"));
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .expect("emulator stdout");
    let port: u16 = line
        .trim()
        .strip_prefix("LISTENING ")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("emulator did not print LISTENING <port>: {line:?}"));
    (child, format!("http://127.0.0.1:{port}"))
}
