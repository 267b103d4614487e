//! What a session used, read from its CLI's own machine-readable output in the session's log
//! (docs/agents.md, "What a session costs"). Each preset asks its CLI for JSON output; these
//! read it. Formats checked against the real CLIs (Claude Code and Codex run against the
//! loopback model server in tests; Gemini CLI's and OpenCode's from their sources).
//!
//! - Claude Code (`--output-format stream-json`): the final `{"type":"result"}` line:
//!   `total_cost_usd`, `usage.{input_tokens, cache_creation_input_tokens,
//!   cache_read_input_tokens, output_tokens}`, `num_turns`, the model from `modelUsage`.
//! - Codex (`exec --json`): every `{"type":"turn.completed","usage":{…}}`, summed
//!   (`input_tokens` includes `cached_input_tokens`); no money, no model.
//! - Gemini CLI (`--output-format stream-json`): the final `{"type":"result"}`'s `stats`
//!   (`input` uncached, `cached`, `output_tokens`, the model from `models`); no money.
//! - OpenCode (`--format json`): every `step_finish` part's `tokens` and `cost`, summed.
//! - aider: nothing machine-readable; its usage is unknown unless the agent reports it.

use serde_json::Value;

use crate::store::usage::Usage;

/// The usage `agent` (a preset's name) printed in `log`, if its output says.
pub fn from_log(agent: &str, log: &str) -> Option<Usage> {
    let lines = || {
        log.lines().filter(|l| l.trim_start().starts_with('{')).filter_map(|l| serde_json::from_str::<Value>(l).ok())
    };
    match agent {
        "claude" => lines().rfind(|v| v["type"] == "result").and_then(|v| claude(&v)),
        "codex" => sum(lines().filter(|v| v["type"] == "turn.completed").filter_map(|v| codex(&v))),
        "gemini" => lines().rfind(|v| v["type"] == "result").and_then(|v| gemini(&v)),
        "opencode" => sum(lines().filter(|v| v["type"] == "step_finish").filter_map(|v| opencode(&v))),
        _ => None,
    }
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

fn sum(mut each: impl Iterator<Item = Usage>) -> Option<Usage> {
    let mut total = each.next()?;
    for u in each {
        total.input += u.input;
        total.output += u.output;
        total.cached += u.cached;
        total.turns = Some(total.turns.unwrap_or(0) + u.turns.unwrap_or(0));
        total.usd = match (total.usd, u.usd) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
        total.model = total.model.or(u.model);
    }
    Some(total)
}

/// The model that did most of the work, of a map of model → counts.
fn busiest(models: &Value, weight: impl Fn(&Value) -> u64) -> Option<String> {
    models.as_object()?.iter().max_by_key(|(_, v)| weight(v)).map(|(k, _)| k.clone())
}

fn claude(v: &Value) -> Option<Usage> {
    let u = v.get("usage")?;
    Some(Usage {
        input: n(&u["input_tokens"]) + n(&u["cache_creation_input_tokens"]),
        output: n(&u["output_tokens"]),
        cached: n(&u["cache_read_input_tokens"]),
        model: busiest(&v["modelUsage"], |m| n(&m["inputTokens"]) + n(&m["outputTokens"])),
        turns: v["num_turns"].as_u64().map(|t| t as u32),
        usd: v["total_cost_usd"].as_f64(),
        usd_estimated: None,
    })
}

fn codex(v: &Value) -> Option<Usage> {
    let u = v.get("usage")?;
    let cached = n(&u["cached_input_tokens"]);
    Some(Usage {
        input: n(&u["input_tokens"]).saturating_sub(cached),
        output: n(&u["output_tokens"]),
        cached,
        model: None,
        turns: Some(1),
        usd: None,
        usd_estimated: None,
    })
}

fn gemini(v: &Value) -> Option<Usage> {
    let s = v.get("stats")?;
    let cached = n(&s["cached"]);
    let input = s.get("input").map(n).unwrap_or_else(|| n(&s["input_tokens"]).saturating_sub(cached));
    Some(Usage {
        input,
        output: n(&s["output_tokens"]),
        cached,
        model: busiest(&s["models"], |m| n(&m["total_tokens"])),
        turns: None,
        usd: None,
        usd_estimated: None,
    })
}

fn opencode(v: &Value) -> Option<Usage> {
    let part = v.get("part")?;
    let t = part.get("tokens")?;
    Some(Usage {
        input: n(&t["input"]) + n(&t["cache"]["write"]),
        output: n(&t["output"]) + n(&t["reasoning"]),
        cached: n(&t["cache"]["read"]),
        model: None,
        turns: Some(1),
        usd: part["cost"].as_f64(),
        usd_estimated: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_codes_result_line_is_read() {
        // As Claude Code 2.x printed it against the loopback model server.
        let log = "{\"type\":\"system\"}\nnot json\n{\"type\":\"result\",\"subtype\":\"success\",\"num_turns\":3,\"total_cost_usd\":0.000525,\"usage\":{\"input_tokens\":30,\"cache_creation_input_tokens\":2,\"cache_read_input_tokens\":7,\"output_tokens\":15},\"modelUsage\":{\"claude-opus-4-8[1m]\":{\"inputTokens\":30,\"outputTokens\":15,\"costUSD\":0.000525}}}\n";
        let u = from_log("claude", log).unwrap();
        assert_eq!((u.input, u.output, u.cached, u.turns), (32, 15, 7, Some(3)));
        assert_eq!((u.model.as_deref(), u.usd), (Some("claude-opus-4-8[1m]"), Some(0.000525)));
    }

    #[test]
    fn codex_turns_are_summed_and_gemini_and_opencode_read() {
        let log = "{\"type\":\"thread.started\"}\n{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":30,\"cached_input_tokens\":10,\"output_tokens\":15}}\n{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":5,\"cached_input_tokens\":0,\"output_tokens\":1}}\n";
        let u = from_log("codex", log).unwrap();
        assert_eq!((u.input, u.output, u.cached, u.turns, u.usd), (25, 16, 10, Some(2), None));
        let g = "{\"type\":\"result\",\"status\":\"success\",\"stats\":{\"total_tokens\":50,\"input_tokens\":40,\"output_tokens\":10,\"cached\":15,\"input\":25,\"models\":{\"gemini-2.5-pro\":{\"total_tokens\":50}}}}";
        let u = from_log("gemini", g).unwrap();
        assert_eq!((u.input, u.output, u.cached, u.model.as_deref()), (25, 10, 15, Some("gemini-2.5-pro")));
        let o = "{\"type\":\"step_finish\",\"part\":{\"type\":\"step-finish\",\"tokens\":{\"input\":10,\"output\":4,\"reasoning\":1,\"cache\":{\"read\":3,\"write\":2}},\"cost\":0.5}}\n{\"type\":\"step_finish\",\"part\":{\"tokens\":{\"input\":1,\"output\":1,\"reasoning\":0,\"cache\":{\"read\":0,\"write\":0}},\"cost\":0.25}}";
        let u = from_log("opencode", o).unwrap();
        assert_eq!((u.input, u.output, u.cached, u.usd), (13, 6, 3, Some(0.75)));
        assert_eq!(from_log("aider", "Tokens: 2.3k sent"), None);
        assert_eq!(from_log("claude", "{\"type\":\"assistant\"}"), None);
    }
}
