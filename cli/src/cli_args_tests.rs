#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;
use clap::CommandFactory;

#[test]
fn command_line_is_consistent() {
    Cli::command().debug_assert();
}

#[test]
fn usage_errors_exit_2_and_states_are_checked() {
    let bad: &[&[&str]] = &[
        &["loopgate"],
        &["loopgate", "runs", "--state", "sleeping"],
        &["loopgate", "up", "--executors", "0"],
        &["loopgate", "answer", "r1"],
        &["loopgate", "verify"],
        &["loopgate", "verify", "--offline", "cert.json"],
        &[
            "loopgate",
            "verify",
            "r1",
            "--offline",
            "c",
            "--snapshot",
            "d",
        ],
        &["loopgate", "verify", "r1", "--snapshot", "d"],
        &["loopgate", "keygen"],
        &["loopgate", "instruct", "r1"],
        &["loopgate", "pause"],
        &["loopgate", "continue", "r1"],
        &["loopgate", "submit", "t.toml", "--ref", "main"],
        &["loopgate", "submit", "t.toml", "--include-dirty"],
        &[
            "loopgate",
            "submit",
            "t.toml",
            "--repo",
            ".",
            "--workspace",
            "d",
        ],
        &["loopgate", "apply"],
        &["loopgate", "apply", "r1", "--branch", "b", "--patch", "p"],
    ];
    for args in bad {
        let err = Cli::try_parse_from(*args).unwrap_err();
        assert_eq!(err.exit_code(), 2, "{args:?}");
    }
    let ok = Cli::try_parse_from(["loopgate", "runs", "--state", "waiting_for_input"]).unwrap();
    match ok.command {
        Command::Runs(args) => assert_eq!(args.run_state(), Some(RunState::WaitingForInput)),
        other => panic!("{other:?}"),
    }
    match Cli::try_parse_from(["loopgate", "continue", "r1", "--goal", "g"])
        .unwrap()
        .command
    {
        Command::Continue(args) => assert_eq!(args.goal.as_deref(), Some("g")),
        other => panic!("{other:?}"),
    }
    let submit = [
        "loopgate",
        "submit",
        "t.toml",
        "--repo",
        "..",
        "--ref",
        "v1",
        "--include-dirty",
    ];
    match Cli::try_parse_from(submit).unwrap().command {
        Command::Submit(args) => {
            assert_eq!(args.rev.as_deref(), Some("v1"));
            assert!(args.include_dirty && args.workspace.is_none());
        }
        other => panic!("{other:?}"),
    }
    match Cli::try_parse_from(["loopgate", "apply", "r1"])
        .unwrap()
        .command
    {
        Command::Apply(args) => {
            assert_eq!(args.repo, std::path::Path::new("."));
            assert!(args.branch.is_none() && args.patch.is_none());
        }
        other => panic!("{other:?}"),
    }
    let offline = [
        "loopgate",
        "verify",
        "--offline",
        "c.json",
        "--snapshot",
        "d",
    ];
    match Cli::try_parse_from(offline).unwrap().command {
        Command::Verify(args) => {
            assert!(args.run.is_none());
            assert_eq!(args.snapshot.as_deref(), Some(std::path::Path::new("d")));
        }
        other => panic!("{other:?}"),
    }
    let online = [
        "loopgate", "verify", "r1", "--key", "a.pub", "--key", "b.pub",
    ];
    match Cli::try_parse_from(online).unwrap().command {
        Command::Verify(args) => assert_eq!(args.key.len(), 2),
        other => panic!("{other:?}"),
    }
    let key_file = [
        "loopgate",
        "verify",
        "r1",
        "--key-file",
        "a.pub",
        "--key",
        "b",
    ];
    match Cli::try_parse_from(key_file).unwrap().command {
        Command::Verify(args) => assert_eq!(args.key.len(), 2),
        other => panic!("{other:?}"),
    }
}
