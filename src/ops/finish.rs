//! `finish`: a session reports its verdict, in the words of its role's contract — checked
//! against the contract, then journaled in the session's own chain, or, from a confined
//! session that cannot reach the repository, written to its box for the walk to journal.

use anyhow::Result;

use crate::agent::record;
use crate::agent::role::{self, Contract};
use crate::context::Context;
use crate::error::usage;
use crate::sandbox::channel::{self, Report};
use crate::store::events::{self, Recorded};
use crate::store::journal::{self, NewEvent};
use crate::store::Store;

/// What a session reports.
pub struct Verdict {
    /// Its contract's word: done, blocked, failed, approve, changes, resolved, unresolved, summary.
    pub word: &'static str,
    pub message: String,
    /// A summarizer's subject line.
    pub subject: Option<String>,
    /// What the session used, as the JSON `--usage` takes (unparsed).
    pub usage: Option<String>,
}

/// What was recorded.
pub struct Finished {
    /// The journal entry (none from a confined session: the walk journals its report).
    pub id: Option<String>,
    pub session: String,
    pub contract: Contract,
}

/// Report `verdict` for the session `ctx` runs in. `store` is none in a confined session.
pub fn finish(store: Option<&Store>, ctx: &Context, verdict: Verdict) -> Result<Finished> {
    let Some(session) = ctx.session.session.clone() else {
        return Err(usage("'git loop finish' runs inside a session: GIT_LOOP_SESSION is not set")
            .hint("the loop sets it for its agents; to close a task by hand use 'git loop done <id>' or 'git loop park <id>'")
            .into());
    };
    let writer = crate::ids::session_writer(&session)?;
    // The session's role: its record says, else its environment; neither: a worker.
    let said = store
        .and_then(|store| record::read(&store.loop_dir().ok()?, &session))
        .and_then(|r| r.contract)
        .or_else(|| ctx.session.contract.clone());
    let contract = match said.as_deref() {
        None => Contract::Worker,
        Some(id) => id.split('/').next().and_then(Contract::parse).ok_or_else(|| {
            usage(format!("this session's contract '{id}' is not one this git-loop knows"))
                .hint("report with a result file ($GIT_LOOP_RESULT) instead")
        })?,
    };
    let Verdict { word, message, subject, usage: usage_text } = verdict;
    if let Err(violation) = role::from_finish(contract, word, &message, subject.as_deref()) {
        let example = match contract {
            Contract::Worker => "git loop finish done --message \"<what you did>\"",
            Contract::Reviewer => "git loop finish approve|changes --message \"<your comments>\"",
            Contract::ConflictResolver => "git loop finish resolved|unresolved --message \"<what you did>\"",
            Contract::Summarizer => "git loop finish summary --subject \"<subject>\" --message \"<body>\"",
        };
        return Err(usage(format!("this session is a {} ({}): {violation}", contract.name(), contract.id()))
            .hint(format!("report as its contract says: {example}"))
            .into());
    }
    let reported = match usage_text.as_deref() {
        None => None,
        Some(text) => {
            let read = serde_json::from_str::<serde_json::Value>(text)
                .map_err(|e| format!("it is not valid JSON: {e}"))
                .and_then(|v| crate::store::usage::Usage::reported(&v));
            Some(read.map_err(|problem| {
                usage(format!("--usage: {problem}")).hint(
                    r#"e.g. --usage '{"input": 1200, "output": 340, "cached": 0, "model": "my-model", "usd": 0.012}'"#,
                )
            })?)
        }
    };
    let id = match store {
        None => {
            let Some(box_dir) = ctx.session.confined.as_ref() else {
                return Err(anyhow::anyhow!("a session that is not confined reports through the repository"));
            };
            let usage = usage_text.as_deref().and_then(|text| serde_json::from_str(text).ok());
            let report = Report::Finish { verdict: word.into(), message, subject, usage };
            channel::write(box_dir, &report)?;
            None
        }
        Some(store) => {
            let (kind, data) = Recorded::Termination(events::Termination {
                verdict: word.into(),
                message: Some(message),
                contract: (contract != Contract::Worker).then(|| contract.id()),
                subject,
                usage: reported,
            })
            .into_parts();
            let entry = journal::append(
                store,
                ctx,
                &writer,
                NewEvent { kind, task: ctx.session.task.clone(), session: Some(session.clone()), data },
            )?;
            Some(entry.id.to_string())
        }
    };
    Ok(Finished { id, session, contract })
}
