//! `graph` (issue 29): `next` over 100,000 tasks of which 10,000 are epics (each the parent of
//! the nine tasks after it), against the same 100,000 tasks with no epics; and `list --tree` over
//! the first.

use super::{median, ms, time, Row, Scratch, BIN};

/// A beads export of `n` open tasks; with `epics`, every tenth is an epic and the nine after it
/// its children.
fn export(n: usize, epics: bool) -> String {
    let mut lines = String::new();
    for i in 0..n {
        let parent = i - i % 10;
        let deps = if epics && i % 10 != 0 {
            format!(
                r#","dependencies":[{{"issue_id":"t-{i:06}","depends_on_id":"t-{parent:06}","type":"parent-child"}}]"#
            )
        } else {
            String::new()
        };
        let kind = if epics && i % 10 == 0 { "epic" } else { "task" };
        lines.push_str(&format!(
            r#"{{"id":"t-{i:06}","title":"task {i}","priority":{},"status":"open","issue_type":"{kind}","created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z"{deps}}}"#,
            i % 4
        ));
        lines.push('\n');
    }
    lines
}

pub fn bench_graph(s: &Scratch) -> Vec<Row> {
    const N: usize = 100_000;
    let repo_of = |name: &str, epics: bool| {
        let repo = s.repo(name);
        let file = s.path(&format!("{name}.jsonl"));
        std::fs::write(&file, export(N, epics)).expect("write");
        s.run(BIN, &repo, &["import", file.to_str().expect("utf-8"), "--format", "beads"]);
        // The index is built by the first reader; then the steady state.
        s.run(BIN, &repo, &["next", "--json"]);
        std::thread::sleep(std::time::Duration::from_millis(1_100));
        s.run(BIN, &repo, &["next", "--json"]);
        repo
    };
    eprint!("  importing {N} tasks, 10,000 of them epics… ");
    let with = repo_of("graph-epics", true);
    eprint!("and {N} with none… ");
    let without = repo_of("graph-flat", false);
    eprintln!("done");
    let next =
        |repo: &std::path::Path| median((0..11).map(|_| time(s.cmd(BIN, repo).args(["next", "--json"]))).collect());
    let (epics, flat) = (next(&with), next(&without));
    let tree = median((0..5).map(|_| time(s.cmd(BIN, &with).args(["list", "--tree"]))).collect());
    let list = median((0..5).map(|_| time(s.cmd(BIN, &with).args(["list"]))).collect());
    vec![
        Row {
            name: format!("next --json, {N} tasks: 10,000 epics (ours) / no epics (git column)"),
            ours: ms(epics),
            git: ms(flat),
            ratio: format!("{:.2}", epics.as_secs_f64() / flat.as_secs_f64()),
            target: "≤ 1.2".into(),
        },
        Row {
            name: format!("list --tree, {N} tasks with 10,000 epics (list alone in the git column)"),
            ours: ms(tree),
            git: ms(list),
            ratio: format!("{:.2}", tree.as_secs_f64() / list.as_secs_f64()),
            target: "≤ 300 ms".into(),
        },
    ]
}
