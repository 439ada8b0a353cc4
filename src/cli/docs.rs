//! docs: the man pages and shell completions the packages ship, generated from the very
//! clap definition the binary parses with, so they never drift from `--help`.
//!
//! Built only with the `docs` Cargo feature (`podvisor generate-docs DIR`, hidden): the
//! packaging scripts build a host binary with it and run it once. The shipped binary is built
//! without the feature and carries none of clap_mangen's or clap_complete's code.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use clap_complete::Shell;

/// Errors while writing the generated files.
#[derive(Debug, thiserror::Error)]
#[error("writing {path}: {source}")]
pub struct DocsError {
    pub path: PathBuf,
    pub source: io::Error,
}

fn write(path: PathBuf, data: &[u8]) -> Result<(), DocsError> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).map_err(|source| DocsError {
            path: dir.to_path_buf(),
            source,
        })?;
    }
    fs::write(&path, data).map_err(|source| DocsError { path, source })
}

/// Writes `out/man/podvisor.1` and one `podvisor-<command>.1` per visible subcommand
/// (`podvisor-image-pull.1` for nested ones), and completions for bash
/// (`out/completions/podvisor.bash`), zsh (`_podvisor`) and fish (`podvisor.fish`). Returns
/// the files written.
pub fn generate(cmd: clap::Command, out: &Path) -> Result<Vec<PathBuf>, DocsError> {
    let mut written = Vec::new();
    let mut cmd = cmd;
    cmd.build();
    man_pages(&cmd, "podvisor", &out.join("man"), &mut written)?;
    // clap_complete's generators offer hidden subcommands too: complete a copy without them.
    let mut visible = without_hidden(&cmd);
    for (shell, file) in [
        (Shell::Bash, "podvisor.bash"),
        (Shell::Zsh, "_podvisor"),
        (Shell::Fish, "podvisor.fish"),
    ] {
        let mut buf = Vec::new();
        clap_complete::generate(shell, &mut visible, "podvisor", &mut buf);
        let path = out.join("completions").join(file);
        write(path.clone(), &buf)?;
        written.push(path);
    }
    Ok(written)
}

/// `cmd` with its arguments and only the subcommands that are not hidden, recursively.
fn without_hidden(cmd: &clap::Command) -> clap::Command {
    // clap (without its `string` feature) takes only static names; this one-shot generator
    // leaks a few bytes per command.
    let name: &'static str = Box::leak(cmd.get_name().to_string().into_boxed_str());
    // The built command already carries its help and version flags and help subcommand.
    let mut out = clap::Command::new(name)
        .disable_help_flag(true)
        .disable_version_flag(true)
        .disable_help_subcommand(true);
    if let Some(about) = cmd.get_about() {
        out = out.about(about.clone());
    }
    if let Some(v) = cmd.get_version() {
        out = out.version(&*Box::leak(v.to_string().into_boxed_str()));
    }
    for arg in cmd.get_arguments() {
        out = out.arg(arg.clone());
    }
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        out = out.subcommand(without_hidden(sub));
    }
    out
}

fn man_pages(
    cmd: &clap::Command,
    name: &str,
    dir: &Path,
    written: &mut Vec<PathBuf>,
) -> Result<(), DocsError> {
    // clap (without its `string` feature) takes only static names; this one-shot generator
    // leaks a few bytes per page.
    let page = cmd
        .clone()
        .name(&*Box::leak(name.to_string().into_boxed_str()));
    let mut buf = Vec::new();
    clap_mangen::Man::new(page)
        .section("1")
        .manual("podvisor manual")
        .source(format!("podvisor {}", env!("CARGO_PKG_VERSION")))
        .render(&mut buf)
        .map_err(|source| DocsError {
            path: dir.join(format!("{name}.1")),
            source,
        })?;
    let path = dir.join(format!("{name}.1"));
    write(path.clone(), &buf)?;
    written.push(path);
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        if sub.get_name() == "help" {
            continue;
        }
        man_pages(sub, &format!("{name}-{}", sub.get_name()), dir, written)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_and_completions_for_every_visible_command() {
        let cmd = clap::Command::new("podvisor")
            .about("test")
            .version("1.0")
            .subcommand(clap::Command::new("run").about("daemon"))
            .subcommand(
                clap::Command::new("image")
                    .subcommand(clap::Command::new("pull").arg(clap::Arg::new("reference"))),
            )
            .subcommand(clap::Command::new("shim").hide(true));
        let dir = tempfile::tempdir().expect("tempdir");
        let files = generate(cmd, dir.path()).expect("generate");
        let names: Vec<String> = files
            .iter()
            .map(|p| {
                p.strip_prefix(dir.path())
                    .expect("below")
                    .display()
                    .to_string()
            })
            .collect();
        assert_eq!(
            names,
            [
                "man/podvisor.1",
                "man/podvisor-run.1",
                "man/podvisor-image.1",
                "man/podvisor-image-pull.1",
                "completions/podvisor.bash",
                "completions/_podvisor",
                "completions/podvisor.fish"
            ]
        );
        let page = fs::read_to_string(dir.path().join("man/podvisor-image-pull.1")).expect("read");
        assert!(page.starts_with(".ie \\n(.g .ds Aq"), "{page}");
        assert!(page.contains(".TH podvisor-image-pull 1"), "{page}");
        let bash = fs::read_to_string(dir.path().join("completions/podvisor.bash")).expect("read");
        assert!(bash.contains("complete -F _podvisor"), "{bash}");
        assert!(bash.contains(" run image help\""), "{bash}");
        assert!(
            !bash.contains("shim"),
            "hidden commands are not completed: {bash}"
        );
    }
}
