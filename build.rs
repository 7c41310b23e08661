//! Build script of the `tessera` binary: records `git describe` at build time, the tool
//! version every stats file carries (`provenance.tool`). Without git or outside a
//! repository (a source tarball), the package version alone.

use std::process::Command;

fn main() {
    let describe = Command::new("git")
        .args(["describe", "--always", "--dirty", "--tags"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty());
    let version = env!("CARGO_PKG_VERSION");
    let tool = match describe {
        Some(d) => format!("{version} ({d})"),
        None => version.to_string(),
    };
    println!("cargo:rustc-env=TESSERA_VERSION={tool}");
    // A new commit or a change to the index (staging, `-dirty`) describes differently.
    for p in [".git/HEAD", ".git/index", ".git/refs"] {
        if std::path::Path::new(p).exists() {
            println!("cargo:rerun-if-changed={p}");
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}
