//! The `podvisor` binary: parse the command line ([`podvisor::cli::args`]), hand the command
//! to its file under `src/cli/`, and print the error chain (anyhow lives only here).
//!
//! User commands: `run` (the daemon), `pods`, `describe`, `logs`, `exec`, `events`, `check`,
//! `validate`, `play`, `image import|pull|ls|rm|prune`, `apply` and `delete` (a node's push
//! source). Hidden commands re-executed by podvisor itself: `shim spawner` (forks the
//! per-container monitors, `shim run`, and the sandbox helpers, `shim sandbox`), `shim cleanup`,
//! `shim exec`, `shim pod-init`.

use std::process::ExitCode;

use clap::Parser;

use podvisor::cli::args::{Cli, Command};
use podvisor::cli::{self, LogsOptions, OutputFormat};

fn init_logging(default: &str) {
    // libcontainer logs through `tracing`, which has no subscriber here: its noise never
    // reaches the terminal or a container's stderr.
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(default))
        .format_target(false)
        .init();
}

fn main() -> ExitCode {
    // The pod init lives as long as its pod: it skips clap and the logger (never touching
    // their pages keeps its memory small). Its arguments are fixed by the sandbox helper.
    let mut args = std::env::args_os().skip(1);
    if args.next().is_some_and(|a| a == "shim") {
        match args.next() {
            Some(a) if a == "pod-init" => podvisor::runtime::sandbox::pod_init(),
            // The spawner, likewise: the monitors it forks share its pages, so it touches as
            // few as it can (its last argument is room for their command lines).
            Some(a) if a == "spawner" => podvisor::runtime::spawner::serve(),
            _ => {}
        }
    }
    let parsed = Cli::parse();
    if let Command::Shim { command } = &parsed.command {
        init_logging("warn");
        let code = cli::shim::run(command);
        return ExitCode::from(code.clamp(0, 255) as u8);
    }
    init_logging("info");
    match run(parsed) {
        Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
        Err(e) => {
            eprintln!("error: {}", error_chain(&e));
            ExitCode::from(1)
        }
    }
}

/// The error and its causes joined with ": ", leaving out a cause whose message the one
/// before it already shows (podvisor's errors embed their source in their message, as
/// `anyhow`'s context does not, so `{:#}` would print it twice).
fn error_chain(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let msg = cause.to_string();
        if !out.ends_with(&msg) {
            if !out.is_empty() {
                out.push_str(": ");
            }
            out.push_str(&msg);
        }
    }
    out
}

/// Runs a parsed command; returns podvisor's exit code.
fn run(parsed: Cli) -> anyhow::Result<i32> {
    let g = parsed.global;
    // Client commands write to these; the daemon never takes them (a held stdio lock would
    // block every other thread's logging).
    let out = || std::io::stdout().lock();
    let err = || std::io::stderr().lock();
    Ok(match parsed.command {
        Command::Run { flags } => {
            cli::run::run(&g, &flags)?;
            0
        }
        Command::Pods {
            name,
            output,
            client,
        } => {
            let format: OutputFormat = output.parse()?;
            cli::get_pods(
                &client.api_socket,
                name.as_deref(),
                format,
                &mut out(),
                &mut err(),
            )?;
            0
        }
        Command::Apply { file, node } => {
            let ns = node.namespace.as_deref();
            cli::apply::apply(&node.connection(), &file, ns, &mut out())?;
            0
        }
        Command::Delete { names, file, node } => {
            let ns = node.namespace.as_deref();
            cli::apply::delete_pods(&node.connection(), &names, file.as_deref(), ns, &mut out())?;
            0
        }
        Command::Describe { pod, client } => {
            cli::describe_pod(&client.api_socket, &pod, &mut out())?;
            0
        }
        Command::Logs {
            pod,
            container,
            follow,
            previous,
            tail,
            client,
        } => {
            let opts = LogsOptions {
                pod,
                container,
                previous,
                tail,
                follow,
            };
            cli::logs(&client.api_socket, &opts, &mut out())?;
            0
        }
        Command::Attach {
            pod,
            container,
            stdin,
            tty,
            client,
        } => {
            let req = cli::attach::AttachRequest {
                pod,
                container,
                stdin,
                tty,
            };
            cli::attach::attach(&client.api_socket, &g.runtime_dir, &req)?
        }
        Command::Exec {
            pod,
            container,
            stdin,
            tty,
            command,
            client,
        } => {
            let req = cli::exec::ExecRequest {
                pod,
                container,
                stdin,
                tty,
                command,
            };
            cli::exec::exec_here(&client.api_socket, &g.runtime_dir, &req)?
        }
        Command::Top {
            pod,
            containers,
            client,
        } => {
            let interval = std::time::Duration::from_secs(1);
            let pod = pod.as_deref();
            cli::top(
                &client.api_socket,
                pod,
                containers,
                interval,
                &mut out(),
                &mut err(),
            )?;
            0
        }
        Command::Node { output, client } => {
            let format: OutputFormat = output.parse()?;
            cli::get_node(&client.api_socket, format, &mut out())?;
            0
        }
        Command::Events { pod, client } => {
            cli::get_events(&client.api_socket, pod.as_deref(), &mut out(), &mut err())?;
            0
        }
        Command::Validate {
            files,
            hostname_override,
            config,
        } => cli::validate::validate(
            &files,
            hostname_override.as_deref(),
            config.as_deref(),
            &g.root_dir,
        )?,
        Command::Play {
            file,
            keep_logs,
            registry_config,
            docker_config,
            cni_conf_dir,
            cni_bin_dir,
        } => {
            let args = cli::play::PlayArgs {
                file,
                keep_logs,
                registry_config,
                docker_config,
                cni_conf_dir,
                cni_bin_dir,
            };
            cli::play::play(&g, args)?
        }
        Command::Check { dry_run } => cli::check::check(&g.root_dir, dry_run)?,
        Command::Image { command } => {
            cli::image::image(&g.root_dir, command)?;
            0
        }
        #[cfg(feature = "docs")]
        Command::GenerateDocs { out } => {
            use clap::CommandFactory;
            for f in cli::docs::generate(Cli::command(), &out)? {
                println!("{}", f.display());
            }
            0
        }
        // Handled in main before logging is set up.
        Command::Shim { .. } => 2,
    })
}

#[cfg(test)]
mod tests {
    use super::error_chain;

    #[derive(Debug, thiserror::Error)]
    #[error("runtime: {source}")]
    struct Embeds {
        source: std::io::Error,
    }

    #[test]
    fn error_chain_prints_each_message_once() {
        let io = || std::io::Error::other("runtime dir /run/x is in use by pid 7");
        let embedded = anyhow::Error::new(Embeds { source: io() });
        assert_eq!(
            error_chain(&embedded),
            "runtime: runtime dir /run/x is in use by pid 7"
        );
        let context = anyhow::Error::new(io()).context("starting the daemon");
        assert_eq!(
            error_chain(&context),
            "starting the daemon: runtime dir /run/x is in use by pid 7"
        );
    }
}
