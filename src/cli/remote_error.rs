//! A remote that cannot be reached, said in one line: git's own error (the argv, the exit
//! status, every `fatal:` of a push and of the read-back after it) runs to hundreds of
//! characters; what the person needs is which remote, git's reason, and what to do.

/// `message` (an error's whole chain, or a warning) as one line when it is git failing to
/// reach a remote: `cannot reach the remote 'origin' (<git's reason>): check the URL or the
/// network`. `None` for anything else.
pub fn summarize(message: &str) -> Option<String> {
    const UNREACHABLE: &[&str] = &[
        "unable to access",
        "Could not resolve host",
        "Could not read from remote repository",
        "Connection refused",
        "Couldn't connect to server",
        "does not appear to be a git repository",
        "Connection timed out",
        "Network is unreachable",
    ];
    if !UNREACHABLE.iter().any(|m| message.contains(m)) {
        return None;
    }
    let (_, fatal) = message.split_once("fatal: ")?;
    // Git's reason ends where the next quoted command of the chain begins.
    let reason = fatal.split(": 'git ").next().unwrap_or(fatal);
    let reason = reason.split(['\n', '\r']).next().unwrap_or(reason).trim().trim_end_matches(':');
    let reason = reason.strip_prefix("unable to access ").unwrap_or(reason);
    // The remote's name, from the argv quoted before it (`… -- origin …`).
    let remote = message
        .split_once(" -- ")
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .map(|r| r.trim_matches('\''))
        .filter(|r| !r.is_empty() && !r.starts_with("refs/"))
        .unwrap_or("the remote");
    Some(format!("cannot reach the remote '{remote}' ({reason}): check the URL or the network"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_push_and_its_read_back_failing_read_as_one_line() {
        let raw = "the push to 'origin' failed and the remote could not be read back: 'git push --porcelain --atomic -- origin 1a89:refs/loop/claims/node/t-1' failed (exit status: 128): fatal: unable to access 'http://127.0.0.1:9/x.git/': Failed to connect to 127.0.0.1 port 9 after 0 ms: Couldn't connect to server: 'git ls-remote -- origin refs/loop/claims/node/t-1*' failed (exit status: 128): fatal: unable to access 'http://127.0.0.1:9/x.git/': Failed to connect";
        assert_eq!(
            super::summarize(raw).as_deref(),
            Some("cannot reach the remote 'origin' ('http://127.0.0.1:9/x.git/': Failed to connect to 127.0.0.1 port 9 after 0 ms: Couldn't connect to server): check the URL or the network")
        );
        assert_eq!(super::summarize("task 't-1' is already claimed"), None);
    }
}
