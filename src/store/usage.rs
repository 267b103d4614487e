//! What one agent session used: tokens, turns, its model and money (docs/storage.md,
//! "Session usage"). A session whose usage nobody reported has none (`None` where it is
//! kept), which is "unknown", never zero.
//!
//! Money comes in two kinds: `usd` is what the CLI (or the agent) reported; `usd_estimated`
//! is computed from the price table in git config (`loop.price.<model>.input|output|cached`,
//! USD per million tokens; git-loop ships no prices) when the CLI reported tokens only.

use serde::{Deserialize, Serialize};

use super::Store;
use crate::error::{usage, Refusal};

/// One session's usage, as its CLI or agent reported it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Usage {
    /// Input tokens not read from a cache (cache writes included).
    #[serde(default)]
    pub input: u64,
    #[serde(default)]
    pub output: u64,
    /// Input tokens read from a cache.
    #[serde(default)]
    pub cached: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turns: Option<u32>,
    /// Dollars, as the CLI or agent reported them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd: Option<f64>,
    /// Dollars computed from the price table (never reported by the agent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd_estimated: Option<f64>,
}

impl Usage {
    /// Tokens of every kind.
    pub fn tokens(&self) -> u64 {
        self.input + self.output + self.cached
    }

    /// Dollars, reported or estimated, and whether they are an estimate.
    pub fn dollars(&self) -> Option<(f64, bool)> {
        self.usd.map(|d| (d, false)).or(self.usd_estimated.map(|d| (d, true)))
    }

    /// Read what an agent reports of itself (`finish --usage`, `usage` in its result file):
    /// strictly, no field this version does not know, and no `usd_estimated`.
    pub fn reported(value: &serde_json::Value) -> Result<Usage, String> {
        let usage: Usage =
            serde_json::from_value(value.clone()).map_err(|e| format!("its usage does not read: {e}"))?;
        if usage.usd_estimated.is_some() {
            return Err("its usage says usd_estimated, which only git-loop computes (report usd)".into());
        }
        if usage.usd.is_some_and(|d| !d.is_finite() || d < 0.0) {
            return Err("its usage's usd is not a non-negative number".into());
        }
        Ok(usage)
    }

    /// With `usd_estimated` from the price table, when no dollars were reported and the
    /// model's prices are configured.
    pub fn priced(mut self, prices: &Prices) -> Usage {
        if self.usd.is_none() {
            self.usd_estimated = self.model.as_deref().and_then(|m| prices.estimate(m, &self));
        }
        self
    }
}

/// A model's prices, USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    /// Cached input; absent: the input price.
    pub cached: Option<f64>,
}

/// The price table from git config (`loop.price.<model>.input|output|cached`).
#[derive(Debug, Clone, Default)]
pub struct Prices(Vec<(String, Price)>);

impl Prices {
    /// Read the table; a price that is not a non-negative number is refused.
    pub fn read(store: &Store) -> Result<Prices, Refusal> {
        let mut table: Vec<(String, Price)> = Vec::new();
        for (key, value) in store.config_all_prefixed("loop.price.") {
            let rest = &key["loop.price.".len()..];
            let Some((model, field)) = rest.rsplit_once('.') else { continue };
            let parsed: f64 =
                value.trim().parse().ok().filter(|v: &f64| v.is_finite() && *v >= 0.0).ok_or_else(|| {
                    usage(format!("{key} = '{value}' is not a price"))
                        .hint("prices are USD per million tokens, e.g. git config loop.price.<model>.input 3")
                })?;
            let at = match table.iter().position(|(m, _)| m == model) {
                Some(at) => at,
                None => {
                    table.push((model.to_owned(), Price::default()));
                    table.len() - 1
                }
            };
            let price = &mut table[at].1;
            match field.to_ascii_lowercase().as_str() {
                "input" => price.input = parsed,
                "output" => price.output = parsed,
                "cached" => price.cached = Some(parsed),
                _ => {
                    return Err(usage(format!("{key}: '{field}' is not a price this version reads"))
                        .hint("set loop.price.<model>.input, .output or .cached"))
                }
            }
        }
        Ok(Prices(table))
    }

    /// From a list, for tests and callers that have one.
    pub fn of(table: Vec<(String, Price)>) -> Prices {
        Prices(table)
    }

    /// Dollars for `usage` at `model`'s prices, if it has any.
    pub fn estimate(&self, model: &str, usage: &Usage) -> Option<f64> {
        let (_, price) = self.0.iter().find(|(m, _)| m.eq_ignore_ascii_case(model))?;
        let per = |tokens: u64, usd: f64| tokens as f64 * usd / 1_000_000.0;
        Some(
            per(usage.input, price.input)
                + per(usage.output, price.output)
                + per(usage.cached, price.cached.unwrap_or(price.input)),
        )
    }
}

/// A sum of sessions' usage: what is known, and how many sessions reported nothing.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Total {
    pub sessions: u64,
    /// Sessions with no usage reported (counted here, never as zero).
    pub unknown: u64,
    pub input: u64,
    pub output: u64,
    pub cached: u64,
    /// Dollars reported by CLIs and agents.
    pub usd: f64,
    /// Dollars estimated from the price table.
    pub usd_estimated: f64,
    /// Sessions with tokens but no dollars, reported or estimated.
    #[serde(default)]
    pub unpriced: u64,
}

impl Total {
    pub fn add(&mut self, usage: Option<&Usage>) {
        self.sessions += 1;
        let Some(u) = usage else {
            self.unknown += 1;
            return;
        };
        self.input += u.input;
        self.output += u.output;
        self.cached += u.cached;
        // Each session's dollars rounded to micro-dollars before they are summed, as a walk's
        // tally sums them.
        match u.dollars() {
            Some((d, false)) => self.usd += micro_usd(d) as f64 / 1_000_000.0,
            Some((d, true)) => self.usd_estimated += micro_usd(d) as f64 / 1_000_000.0,
            None => self.unpriced += 1,
        }
    }

    pub fn merge(&mut self, other: &Total) {
        self.sessions += other.sessions;
        self.unknown += other.unknown;
        self.input += other.input;
        self.output += other.output;
        self.cached += other.cached;
        self.usd += other.usd;
        self.usd_estimated += other.usd_estimated;
        self.unpriced += other.unpriced;
    }

    pub fn tokens(&self) -> u64 {
        self.input + self.output + self.cached
    }

    /// Dollars of every kind.
    pub fn dollars(&self) -> f64 {
        self.usd + self.usd_estimated
    }

    /// In words: `$0.0125 (est.), 45 tokens, 1 session unknown`.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if self.usd_estimated > 0.0 && self.usd == 0.0 {
            parts.push(format!("{} (estimated)", dollars(self.usd_estimated)));
        } else if self.usd_estimated > 0.0 {
            parts.push(format!("{} ({} estimated)", dollars(self.dollars()), dollars(self.usd_estimated)));
        } else if self.sessions > self.unknown + self.unpriced {
            parts.push(dollars(self.usd));
        }
        if self.sessions > self.unknown {
            parts.push(format!("{} tokens", self.tokens()));
        }
        if self.unknown > 0 {
            parts.push(format!("{} session{} unknown", self.unknown, if self.unknown == 1 { "" } else { "s" }));
        }
        if parts.is_empty() {
            "nothing".into()
        } else {
            parts.join(", ")
        }
    }
}

/// Dollars as whole micro-dollars: the one rounding every sum and every line goes through, so
/// a session's line and the walk's total never disagree in the last digit.
pub fn micro_usd(usd: f64) -> u64 {
    if usd.is_finite() && usd > 0.0 {
        (usd * 1_000_000.0).round() as u64
    } else {
        0
    }
}

/// Dollars as shown: four decimals under a dollar, two above, rounded half up from whole
/// micro-dollars (binary fractions never decide: $0.00225 is $0.0023 however it was summed).
pub fn dollars(usd: f64) -> String {
    let micro = micro_usd(usd);
    if micro < 1_000_000 {
        let tenths_of_mills = (micro + 50) / 100;
        format!("${}.{:04}", tenths_of_mills / 10_000, tenths_of_mills % 10_000)
    } else {
        let cents = (micro + 5_000) / 10_000;
        format!("${}.{:02}", cents / 100, cents % 100)
    }
}

/// One session's spend in words: `$0.0005, 45 tokens` / `unknown`.
pub fn describe(usage: Option<&Usage>) -> String {
    let mut total = Total::default();
    total.add(usage);
    if usage.is_none() {
        return "spend unknown".into();
    }
    total.describe()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sessions_line_and_its_walks_total_round_the_same_way() {
        // Reported as a sum of parts: a hair above half a tenth of a mill, which `{:.4}` of
        // the raw float printed as $0.0023 and of the micro-dollar total as $0.0022.
        let reported = 0.001 + 0.00125;
        assert!(reported > 0.00225);
        let line = Usage::reported(&serde_json::json!({"input": 1, "output": 1, "usd": reported})).unwrap();
        let mut total = Total::default();
        total.add(Some(&line));
        assert_eq!(describe(Some(&line)), "$0.0023, 2 tokens");
        assert_eq!(dollars(micro_usd(reported) as f64 / 1_000_000.0), "$0.0023", "the walk's tally");
        assert_eq!(dollars(total.dollars()), "$0.0023");
        assert_eq!(dollars(0.00225), "$0.0023", "half up, not the binary fraction's way");
        assert_eq!(dollars(0.00224), "$0.0022");
        assert_eq!(dollars(1.005), "$1.01");
        assert_eq!(dollars(12.344), "$12.34");
        assert_eq!(dollars(0.0), "$0.0000");
        assert_eq!(dollars(0.99996), "$1.0000");
    }

    #[test]
    fn reported_usage_is_read_strictly_and_unknown_is_not_zero() {
        let u = Usage::reported(&serde_json::json!({"input": 10, "output": 5, "usd": 0.01, "model": "m"})).unwrap();
        assert_eq!((u.input, u.output, u.cached, u.usd), (10, 5, 0, Some(0.01)));
        assert!(Usage::reported(&serde_json::json!({"input": 1, "cost": 2})).is_err());
        assert!(Usage::reported(&serde_json::json!({"usd_estimated": 2.0})).is_err());
        assert!(Usage::reported(&serde_json::json!({"usd": -1.0})).is_err());
        let mut total = Total::default();
        total.add(None);
        total.add(Some(&u));
        assert_eq!((total.sessions, total.unknown, total.tokens()), (2, 1, 15));
        assert_eq!(total.describe(), "$0.0100, 15 tokens, 1 session unknown");
    }

    #[test]
    fn the_price_table_estimates_only_what_was_not_reported() {
        let prices = Prices::of(vec![("m".into(), Price { input: 3.0, output: 15.0, cached: Some(0.3) })]);
        let u =
            Usage { input: 1_000_000, output: 100_000, cached: 1_000_000, model: Some("m".into()), ..Usage::default() };
        let priced = u.clone().priced(&prices);
        assert_eq!(priced.usd_estimated.map(|d| (d * 1000.0).round()), Some(4800.0));
        assert_eq!(priced.dollars().map(|(_, est)| est), Some(true));
        let reported = Usage { usd: Some(1.0), ..u.clone() }.priced(&prices);
        assert_eq!(reported.usd_estimated, None);
        let unknown_model = Usage { model: Some("other".into()), ..u }.priced(&prices);
        assert_eq!(unknown_model.usd_estimated, None);
    }
}
