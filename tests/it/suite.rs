//! The suite's own rules: what keeps the big scenarios apart under both runners.

use std::collections::BTreeSet;
use std::path::Path;

/// `module::test` for every test of this binary that takes the harness's lock `call` (as
/// `crate::harness::heavy()`), read from the sources.
fn tests_taking(call: &str) -> BTreeSet<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it");
    let mut found = BTreeSet::new();
    for entry in std::fs::read_dir(&dir).expect("read tests/it") {
        let path = entry.expect("entry").path();
        let module = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_owned();
        if path.extension().is_none_or(|e| e != "rs") || module == "harness" || module == "suite" {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("read a test file");
        let mut current = None;
        for line in text.lines() {
            if let Some(rest) = line.trim_start().strip_prefix("fn ") {
                current = rest.split('(').next().map(str::to_owned);
            }
            if line.contains(call) {
                let name = current.clone().unwrap_or_else(|| panic!("{call} outside a function in {module}"));
                found.insert(format!("{module}::{name}"));
            }
        }
    }
    found
}

/// `module::test` for every `test(=…)` in the filter of the override that puts tests in `group`.
fn nextest_group(group: &str) -> BTreeSet<String> {
    let config = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(".config/nextest.toml"))
        .expect("read .config/nextest.toml");
    let marker = format!("test-group = \"{group}\"");
    let override_ = config
        .split("[[profile.default.overrides]]")
        .find(|block| block.contains(&marker))
        .unwrap_or_else(|| panic!("no override puts tests in the group {group}"));
    override_
        .split("test(=")
        .skip(1)
        .map(|rest| rest.split(')').next().expect("a closing parenthesis").trim().to_owned())
        .collect()
}

/// The tests that take `harness::heavy()` (they measure time) are exactly nextest's `heavy`
/// group, and those that take `harness::fleet()` exactly its `fleets` group: a big scenario
/// left out of its group would run beside another under nextest and measure it, and a name
/// left in a group after a rename would hold nothing.
#[test]
fn every_big_scenario_is_in_its_nextest_group() {
    for (call, group) in [("crate::harness::heavy()", "heavy"), ("crate::harness::fleet()", "fleets")] {
        let taking = tests_taking(call);
        assert!(!taking.is_empty(), "some test takes {call}");
        assert_eq!(taking, nextest_group(group), "the tests taking {call} are nextest's group {group}");
    }
}
